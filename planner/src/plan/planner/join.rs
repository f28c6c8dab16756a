//! Joins: regular equi-joins (inner and outer), and interval joins when the condition
//! bounds both inputs' event times against each other ([`interval`](super::interval)).

use datafusion_common::{Column, NullEquality};
use datafusion_expr::binary::comparison_coercion;
use datafusion_expr::{ExprSchemable, JoinType};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::join::{IntervalBounds, JoinSpec};

use super::{
    Changelog, OperatorKind, OperatorSpec, Partitioning, Planner, Stream, VertexOutput, WindowKind,
    interval, output_schema, unsupported,
};

impl Planner {
    /// A regular equi-join: both inputs are hash-partitioned by the join key into a new
    /// vertex whose first operator joins them.
    pub(super) fn plan_join(&mut self, join: &datafusion_expr::Join) -> Result<Stream> {
        let outer = match join.join_type {
            JoinType::Inner => [false, false],
            JoinType::Left => [true, false],
            JoinType::Right => [false, true],
            JoinType::Full => [true, true],
            other => {
                return Err(unsupported(format!(
                    "{other} joins (inner and outer equi-joins are supported: [LEFT | RIGHT | \
                     FULL] JOIN ... ON a.key = b.key)"
                )));
            }
        };
        if join.on.is_empty() {
            return Err(unsupported(
                "a join without an equality between its two sides: a streaming join pairs rows \
                 by key (JOIN ... ON a.key = b.key); without one it would hold both streams \
                 whole and pair every row",
            ));
        }
        let left = self.plan(&join.left)?;
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
        let mut left_keys = Vec::new();
        let mut right_keys = Vec::new();
        let mut key_types = Vec::new();
        for (l, r) in &join.on {
            // Both sides hash a key as the same type, so equal keys meet in one subtask.
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
            left_keys.push(self.physical(&l, &left.schema)?);
            right_keys.push(self.physical(&r, &right.schema)?);
            key_types.push(common);
        }
        let filter = join
            .filter
            .as_ref()
            .map(|f| self.physical(f, &join.schema))
            .transpose()?;
        let (left_on, right_on): (Vec<String>, Vec<String>) = join
            .on
            .iter()
            .map(|(l, r)| (l.to_string(), r.to_string()))
            .unzip();
        let target = self.new_vertex(self.parallelism, None, vec![left.vertex, right.vertex]);
        for (stream, keys, display) in [
            (&left, &left_keys, &left_on),
            (&right, &right_keys, &right_on),
        ] {
            self.vertices[stream.vertex].output = Some(VertexOutput::Exchange {
                target,
                partitioning: Partitioning::Hash {
                    keys: keys.clone(),
                    display: display.join(", "),
                },
            });
        }
        // A joined row is taken back by a retraction of a row that made it, so an updating
        // input makes a retract stream (an upsert key would not identify joined rows); so
        // does an outer join, whose padded rows leave when a partner arrives.
        let changelog = match (left.changelog, right.changelog, outer) {
            (Changelog::AppendOnly, Changelog::AppendOnly, [false, false]) => Changelog::AppendOnly,
            _ => Changelog::Retract,
        };
        let on: Vec<String> = join.on.iter().map(|(l, r)| format!("{l} = {r}")).collect();
        let interval = match outer {
            [false, false] => self.interval_of(join, &left, &right),
            _ => None,
        };
        let kind = join.join_type.to_string().to_ascii_lowercase();
        let description = match (&join.filter, interval) {
            (Some(filter), Some(b)) => format!(
                "IntervalJoin({kind}, on: {}, where: {filter}; rows expire with the watermark: \
                 left time - right time in [{}, {}] ms)",
                on.join(" AND "),
                b.lower,
                b.upper
            ),
            (Some(filter), None) => {
                format!("Join({kind}, on: {}, where: {filter})", on.join(" AND "))
            }
            (None, _) => format!("Join({kind}, on: {})", on.join(" AND ")),
        };
        let stream = Stream {
            vertex: target,
            schema: join.schema.clone(),
            changelog,
            unique_key: None,
            window: None,
            window_end: None,
            // An interval join's output keeps the left input's time attribute.
            rowtime: interval.map(|b| b.left_time),
            proctime: None,
            processing_window: false,
        };
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
                    filter,
                    nulls_equal: join.null_equality == NullEquality::NullEqualsNull,
                    schema: output_schema(&join.schema),
                    interval,
                    outer,
                }),
            },
        );
        Ok(stream)
    }

    /// The bounds of an interval join: both inputs append-only with event-time attributes
    /// whose difference the condition bounds on both sides.
    fn interval_of(
        &self,
        join: &datafusion_expr::Join,
        left: &Stream,
        right: &Stream,
    ) -> Option<IntervalBounds> {
        let append_only = [left, right]
            .iter()
            .all(|s| s.changelog == Changelog::AppendOnly);
        let (left_time, right_time) = (left.rowtime?, right.rowtime?);
        if !append_only {
            return None;
        }
        let (lower, upper) = interval::interval_bounds(
            join.filter.as_ref()?,
            &Column::from(left.schema.qualified_field(left_time)),
            &Column::from(right.schema.qualified_field(right_time)),
        )?;
        (lower <= upper).then_some(IntervalBounds {
            left_time,
            right_time,
            lower,
            upper,
        })
    }
}
