//! Joins: with a table read `FOR SYSTEM_TIME AS OF`, a lookup join
//! ([`lookup`](super::lookup)) or a temporal join ([`temporal`](super::temporal)); window
//! joins when both inputs' rows belong to the same windows and the condition equates their
//! bounds; interval joins when it bounds both inputs' event times against each other
//! ([`interval`](super::interval)); otherwise regular equi-joins (inner, outer, semi, anti).

use std::sync::Arc;

use datafusion_common::{Column, NullEquality};
use datafusion_expr::binary::comparison_coercion;
use datafusion_expr::{Expr, ExprSchemable, JoinType};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::join::{IntervalBounds, JoinKind, JoinSpec, Retention, WindowJoinSpec};

use super::{
    Changelog, OperatorKind, OperatorSpec, Partitioning, Planner, Stream, VertexOutput, WindowKind,
    interval, lookup, output_schema, ttl_display, unsupported,
};

impl Planner {
    /// A join: a lookup or temporal join of a table read `FOR SYSTEM_TIME AS OF`, or two
    /// streams hash-partitioned by the join key into a new vertex whose first operator
    /// joins them (a window join when both inputs' rows belong to the same windows and the
    /// condition equates their bounds, else a regular or interval join).
    pub(super) fn plan_join(&mut self, join: &datafusion_expr::Join) -> Result<Stream> {
        if join.on.is_empty() {
            return Err(unsupported(
                "a join without an equality between its two sides: a streaming join pairs rows \
                 by key (JOIN ... ON a.key = b.key); without one it would hold both streams \
                 whole and pair every row",
            ));
        }
        if lookup::versioned_side(&join.left).is_some() {
            return Err(unsupported(
                "a table FOR SYSTEM_TIME AS OF on the left of a join (it must be the right \
                 input: stream JOIN table FOR SYSTEM_TIME AS OF stream.proc_time)",
            ));
        }
        let left = self.plan(&join.left)?;
        if let Some(table) = lookup::versioned_side(&join.right) {
            return match table.is_processing_time() {
                true => self.plan_lookup_join(join, left, table),
                false => self.plan_temporal_join(join, left, table),
            };
        }
        let right = self.plan(&join.right)?;
        if [&left, &right]
            .iter()
            .any(|s| matches!(s.window, Some(WindowKind::Session { .. })))
        {
            return Err(unsupported(
                "a SESSION window TVF must be aggregated (GROUP BY window_start, window_end, ...) \
                 before it is joined",
            ));
        }
        if join.null_aware {
            return Err(unsupported(
                "NOT IN (SELECT ...) where either side may be NULL (its three-valued logic): \
                 write NOT EXISTS (SELECT ... WHERE a = b), or make both columns NOT NULL",
            ));
        }
        let keys = self.join_keys(join, &left, &right)?;
        let kind = join_kind(join.join_type)?;
        match window_join_of(join, &left, &right) {
            Some(windows) => self.plan_window_join(join, &left, &right, keys, windows, kind),
            None => self.plan_regular_join(join, &left, &right, keys, kind),
        }
    }

    /// A regular join (its rows held until retracted, or for the state TTL), or an interval
    /// join (its rows expire with the watermark).
    fn plan_regular_join(
        &mut self,
        join: &datafusion_expr::Join,
        left: &Stream,
        right: &Stream,
        keys: JoinKeys,
        kind: JoinKind,
    ) -> Result<Stream> {
        let target = self.exchange_to_join(left, right, &keys, join);
        let interval = match kind.filtering() {
            None => self.interval_of(join, left, right),
            Some(_) => None,
        };
        // An interval join's rows expire with the watermark; a regular join's with the TTL.
        let retention = match interval {
            None => Retention::StateTtl([
                self.state_ttl_of(&join.left),
                self.state_ttl_of(&join.right),
            ]),
            Some(bounds) => Retention::Interval(bounds),
        };
        let changelog = regular_join_changelog(kind, left, right, interval.is_some());
        let description = regular_join_description(join, kind, retention);
        let stream = Stream {
            // An interval join's output keeps the left input's time attribute.
            rowtime: interval.and_then(|b| left.rowtime.filter(|t| *t == b.left_time)),
            ..Stream::new(target, join.schema.clone(), changelog)
        };
        let JoinKeys {
            left_keys,
            right_keys,
            key_types,
        } = keys;
        self.push(
            &stream,
            OperatorSpec {
                description,
                changelog,
                kind: OperatorKind::Join(JoinSpec {
                    left_keys,
                    right_keys,
                    key_types,
                    left_schema: output_schema(&left.schema),
                    right_schema: output_schema(&right.schema),
                    filter: self.join_filter(join)?,
                    nulls_equal: join.null_equality == NullEquality::NullEqualsNull,
                    schema: output_schema(&join.schema),
                    kind,
                    retention,
                }),
            },
        );
        Ok(stream)
    }

    /// A window join: each window's rows are held until the watermark passes its end, then
    /// joined and dropped; append-only output whose rows still belong to the left input's
    /// windows (when a right row cannot come out padded).
    fn plan_window_join(
        &mut self,
        join: &datafusion_expr::Join,
        left: &Stream,
        right: &Stream,
        keys: JoinKeys,
        windows: WindowJoinBounds,
        kind: JoinKind,
    ) -> Result<Stream> {
        let target = self.exchange_to_join(left, right, &keys, join);
        let left_kept = !matches!(kind, JoinKind::Right | JoinKind::Full);
        let stream = Stream {
            window_end: Some(windows.left.1).filter(|_| left_kept),
            window_start: Some((windows.kind, windows.left.0)).filter(|_| left_kept),
            ..Stream::new(target, join.schema.clone(), Changelog::AppendOnly)
        };
        let on = on_display(join);
        let filter = where_display(join);
        let description = format!(
            "WindowJoin({}, {}, on: {on}{filter}; a window is joined when the watermark passes \
             its end, then dropped)",
            join.join_type.to_string().to_ascii_lowercase(),
            windows.kind
        );
        let JoinKeys {
            left_keys,
            right_keys,
            key_types,
        } = keys;
        self.push(
            &stream,
            OperatorSpec {
                description,
                changelog: Changelog::AppendOnly,
                kind: OperatorKind::WindowJoin(WindowJoinSpec {
                    keys: [left_keys, right_keys],
                    key_types,
                    schemas: [output_schema(&left.schema), output_schema(&right.schema)],
                    windows: [windows.left, windows.right],
                    filter: self.join_filter(join)?,
                    nulls_equal: join.null_equality == NullEquality::NullEqualsNull,
                    kind,
                    schema: output_schema(&join.schema),
                }),
            },
        );
        Ok(stream)
    }

    /// The join keys of both sides, cast to a common type so that equal keys hash alike and
    /// meet in one subtask.
    pub(super) fn join_keys(
        &self,
        join: &datafusion_expr::Join,
        left: &Stream,
        right: &Stream,
    ) -> Result<JoinKeys> {
        let mut keys = JoinKeys {
            left_keys: Vec::new(),
            right_keys: Vec::new(),
            key_types: Vec::new(),
        };
        for (l, r) in &join.on {
            let (l_type, r_type) = (
                l.get_type(&left.schema).or_eddy()?,
                r.get_type(&right.schema).or_eddy()?,
            );
            let common = comparison_coercion(&l_type, &r_type).ok_or_else(|| {
                EddyError::Plan(format!(
                    "join keys {l} ({l_type}) and {r} ({r_type}) cannot be compared"
                ))
            })?;
            let l = l.clone().cast_to(&common, &left.schema).or_eddy()?;
            let r = r.clone().cast_to(&common, &right.schema).or_eddy()?;
            keys.left_keys.push(self.physical(&l, &left.schema)?);
            keys.right_keys.push(self.physical(&r, &right.schema)?);
            keys.key_types.push(common);
        }
        Ok(keys)
    }

    /// The rest of the join condition, over the joined rows.
    pub(super) fn join_filter(
        &self,
        join: &datafusion_expr::Join,
    ) -> Result<Option<Arc<dyn datafusion_physical_expr::PhysicalExpr>>> {
        let Some(filter) = &join.filter else {
            return Ok(None);
        };
        match join.join_type {
            // A semi or anti join's rows are its left input's; its condition sees both sides.
            JoinType::LeftSemi | JoinType::LeftAnti => {
                let both = join.left.schema().join(join.right.schema()).or_eddy()?;
                Ok(Some(self.physical(filter, &both)?))
            }
            _ => Ok(Some(self.physical(filter, &join.schema)?)),
        }
    }

    /// A new vertex that both inputs are hash-partitioned into by their join keys.
    pub(super) fn exchange_to_join(
        &mut self,
        left: &Stream,
        right: &Stream,
        keys: &JoinKeys,
        join: &datafusion_expr::Join,
    ) -> usize {
        let (left_on, right_on): (Vec<String>, Vec<String>) = join
            .on
            .iter()
            .map(|(l, r)| (l.to_string(), r.to_string()))
            .unzip();
        let target = self.new_vertex(self.parallelism, None, vec![left.vertex, right.vertex]);
        for (stream, keys, display) in [
            (left, &keys.left_keys, &left_on),
            (right, &keys.right_keys, &right_on),
        ] {
            self.vertices[stream.vertex].output = Some(VertexOutput::Exchange {
                target,
                partitioning: Partitioning::Hash {
                    keys: keys.clone(),
                    display: display.join(", "),
                },
            });
        }
        target
    }

    /// The bounds of an interval join: both inputs append-only with event-time attributes
    /// (or window ends) whose difference the condition bounds on both sides.
    fn interval_of(
        &self,
        join: &datafusion_expr::Join,
        left: &Stream,
        right: &Stream,
    ) -> Option<IntervalBounds> {
        let append_only = [left, right]
            .iter()
            .all(|s| s.changelog == Changelog::AppendOnly);
        if !append_only {
            return None;
        }
        let filter = join.filter.as_ref()?;
        // A window's end is a time the watermark passes only after the window's rows went
        // by, like an event-time attribute.
        let times = |s: &Stream| [s.rowtime, s.window_end].into_iter().flatten();
        let column = |s: &Stream, i: usize| Column::from(s.schema.qualified_field(i));
        times(left)
            .flat_map(|l| times(right).map(move |r| (l, r)))
            .find_map(|(left_time, right_time)| {
                let (lower, upper) = interval::interval_bounds(
                    filter,
                    &column(left, left_time),
                    &column(right, right_time),
                )?;
                (lower <= upper).then_some(IntervalBounds {
                    left_time,
                    right_time,
                    lower,
                    upper,
                })
            })
    }
}

/// The key expressions of a join's two sides and their common types.
pub(super) struct JoinKeys {
    pub(super) left_keys: Vec<Arc<dyn datafusion_physical_expr::PhysicalExpr>>,
    pub(super) right_keys: Vec<Arc<dyn datafusion_physical_expr::PhysicalExpr>>,
    pub(super) key_types: Vec<arrow::datatypes::DataType>,
}

/// The windows a window join joins: their kind and each input's window bound columns
/// (start, end).
struct WindowJoinBounds {
    kind: WindowKind,
    left: (usize, usize),
    right: (usize, usize),
}

/// The rest of a join's condition, for `EXPLAIN` (`, where: ...`, or nothing).
pub(super) fn where_display(join: &datafusion_expr::Join) -> String {
    join.filter
        .as_ref()
        .map_or(String::new(), |f| format!(", where: {f}"))
}

/// The equalities of a join condition, for `EXPLAIN`.
pub(super) fn on_display(join: &datafusion_expr::Join) -> String {
    join.on
        .iter()
        .map(|(l, r)| format!("{l} = {r}"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// The windows of a window join (as Flink plans one): both inputs append-only with rows
/// of the same event-time windows, and the condition equates both their starts and their
/// ends.
fn window_join_of(
    join: &datafusion_expr::Join,
    left: &Stream,
    right: &Stream,
) -> Option<WindowJoinBounds> {
    let windows = |s: &Stream| s.window_start.zip(s.window_end);
    let (Some(((left_kind, left_start), left_end)), Some(((right_kind, right_start), right_end))) =
        (windows(left), windows(right))
    else {
        return None;
    };
    if [left, right]
        .iter()
        .any(|s| s.changelog != Changelog::AppendOnly)
    {
        return None;
    }
    let column = |s: &Stream, i: usize| Column::from(s.schema.qualified_field(i));
    let equated = |l: usize, r: usize| {
        let (l, r) = (column(left, l), column(right, r));
        join.on.iter().any(
            |(a, b)| matches!((a, b), (Expr::Column(a), Expr::Column(b)) if *a == l && *b == r),
        )
    };
    if !(equated(left_start, right_start) && equated(left_end, right_end)) {
        return None;
    }
    // Windows of different kinds share no bounds: Flink joins them as a regular join.
    if left_kind != right_kind {
        return None;
    }
    Some(WindowJoinBounds {
        kind: left_kind,
        left: (left_start, left_end),
        right: (right_start, right_end),
    })
}

/// The kind of join `join_type` asks for, if Eddy has it.
fn join_kind(join_type: JoinType) -> Result<JoinKind> {
    Ok(match join_type {
        JoinType::Inner => JoinKind::Inner,
        JoinType::Left => JoinKind::Left,
        JoinType::Right => JoinKind::Right,
        JoinType::Full => JoinKind::Full,
        JoinType::LeftSemi => JoinKind::LeftSemi,
        JoinType::LeftAnti => JoinKind::LeftAnti,
        JoinType::LeftMark | JoinType::RightMark => {
            return Err(unsupported(
                "a subquery under OR or NOT in WHERE (IN (SELECT ...) and [NOT] EXISTS are \
                 supported as conjuncts of WHERE)",
            ));
        }
        other => {
            return Err(unsupported(format!(
                "{other} joins (inner, outer, semi and anti equi-joins are supported)"
            )));
        }
    })
}

/// A regular or interval join's changelog. A joined row is taken back by a retraction of a
/// row that made it, so an updating input makes a retract stream (an upsert key would not
/// identify joined rows); so does an outer join, whose padded rows leave when a partner
/// arrives. A semi join takes a row back only when the last partner of its row leaves; an
/// outer interval join pads a row only when it expires unmatched.
fn regular_join_changelog(
    kind: JoinKind,
    left: &Stream,
    right: &Stream,
    interval: bool,
) -> Changelog {
    let append_only = [left, right]
        .iter()
        .all(|s| s.changelog == Changelog::AppendOnly);
    match (append_only, kind, interval) {
        (true, JoinKind::Inner | JoinKind::LeftSemi, _) | (true, _, true) => Changelog::AppendOnly,
        _ => Changelog::Retract,
    }
}

/// How `EXPLAIN` shows a regular or interval join.
fn regular_join_description(
    join: &datafusion_expr::Join,
    kind: JoinKind,
    retention: Retention,
) -> String {
    let on = on_display(join);
    let join_type = join.join_type.to_string().to_ascii_lowercase();
    let ttl = match retention.state_ttl() {
        [None, None] => String::new(),
        [left, right] if left == right => ttl_display(left),
        [left, right] => format!(
            ", state TTL left {} ms, right {} ms",
            left.map_or("∞".to_string(), |t| t.to_string()),
            right.map_or("∞".to_string(), |t| t.to_string())
        ),
    };
    match (&join.filter, retention.interval()) {
        (Some(filter), Some(b)) => format!(
            "IntervalJoin({join_type}, on: {on}, where: {filter}; rows expire with the watermark: \
             left time - right time in [{}, {}] ms{})",
            b.lower,
            b.upper,
            match kind.pads(0) || kind.pads(1) {
                false => "",
                true => "; a row that joined nothing is emitted padded when it expires",
            }
        ),
        (Some(filter), None) => format!("Join({join_type}, on: {on}, where: {filter}{ttl})"),
        (None, _) => format!("Join({join_type}, on: {on}{ttl})"),
    }
}
