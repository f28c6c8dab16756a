//! Top-N and deduplication, recognised as Flink recognises them: an outer query filtering
//! on the rank of `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` by constant bounds
//! (`rn <= N`, `rn < N`, `rn = N`, `rn BETWEEN a AND b`) becomes one [`TopN`] operator.
//! Ordered by the event-time attribute alone and kept to rank 1, it is a deduplication
//! (keep-first ascending, keep-last descending); partitioned by a window's bounds, a
//! window Top-N that emits once when the window closes.
//!
//! [`TopN`]: eddy_operators::rank::TopN

use arrow::compute::SortOptions;
use datafusion_common::{Column, ScalarValue};
use datafusion_expr::expr::{Sort, WindowFunction, WindowFunctionDefinition};
use datafusion_expr::logical_plan::{Filter, Projection, Window};
use datafusion_expr::utils::{conjunction, split_conjunction};
use datafusion_expr::{BinaryExpr, Expr, ExprSchemable, LogicalPlan, Operator as BinaryOp};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::rank::{RankOutput, RankSpec, SortKey, Ties};

use super::{
    Changelog, OperatorKind, OperatorSpec, Planner, Stream, output_schema, strip_alias,
    ttl_display, unsupported,
};
use crate::sql::functions::ranking::RankingKind;
use crate::sql::nodes::{WINDOW_END, WINDOW_START};

/// A filter on a ranking function's result, as found in the logical plan.
pub(super) struct TopNShape<'a> {
    window: &'a Window,
    kind: RankingKind,
    partition_by: &'a [Expr],
    order_by: &'a [Sort],
    start: u64,
    end: u64,
    /// The filter's conditions that do not involve the rank.
    rest: Vec<&'a Expr>,
    /// The rank column, as the filter sees it.
    rank: Column,
}

impl<'a> TopNShape<'a> {
    /// The Top-N `filter` is, if it filters a ranking function's result; an error if it
    /// does so in a way no Top-N can (no upper bound, a bound that is not a constant).
    pub(super) fn of(filter: &'a Filter) -> Result<Option<Self>> {
        let Some((window, rank_index)) = ranking_window(&filter.input) else {
            return Ok(None);
        };
        let Some(Expr::WindowFunction(function)) = window.window_expr.first() else {
            return Ok(None);
        };
        let WindowFunction { fun, params } = function.as_ref();
        let WindowFunctionDefinition::WindowUDF(udf) = fun else {
            return Ok(None);
        };
        let Some(kind) = RankingKind::of(udf.name()) else {
            return Ok(None);
        };
        let rank = Column::from(filter.input.schema().qualified_field(rank_index));
        let (mut start, mut end, mut bounded) = (1u64, u64::MAX, false);
        let mut rest = Vec::new();
        for condition in split_conjunction(&filter.predicate) {
            if !condition.column_refs().contains(&rank) {
                rest.push(condition);
                continue;
            }
            let (low, high) = rank_bounds(condition, &rank).ok_or_else(|| {
                unsupported(format!(
                    "the condition {condition} on a rank: a Top-N filters its rank by constants \
                     (rn <= N, rn < N, rn = N, rn BETWEEN a AND b)"
                ))
            })?;
            start = start.max(low);
            end = end.min(high);
            bounded = true;
        }
        if !bounded {
            return Ok(None);
        }
        if end == u64::MAX {
            return Err(unsupported(
                "a Top-N without an upper bound on its rank (rn <= N): every row would be kept",
            ));
        }
        if start > end {
            return Err(unsupported(format!(
                "a Top-N of ranks {start} to {end}: no row can rank there"
            )));
        }
        Ok(Some(TopNShape {
            window,
            kind,
            partition_by: &params.partition_by,
            order_by: &params.order_by,
            start,
            end,
            rest,
            rank,
        }))
    }

    /// Whether `projection`, right above the filter, reads the rank.
    pub(super) fn output_under(&self, projection: &Projection) -> RankOutput {
        let reads_rank = projection
            .expr
            .iter()
            .any(|e| e.column_refs().contains(&self.rank));
        match reads_rank {
            true => RankOutput::Number,
            false => RankOutput::Dropped,
        }
    }
}

/// The window of a ranking function under `plan` (through projections that pass its result
/// on, and aliases), and where its result is in `plan`'s output.
fn ranking_window(plan: &LogicalPlan) -> Option<(&Window, usize)> {
    match plan {
        LogicalPlan::Window(window) if window.window_expr.len() == 1 => {
            Some((window, window.schema.fields().len() - 1))
        }
        LogicalPlan::SubqueryAlias(alias) => ranking_window(&alias.input),
        LogicalPlan::Projection(projection) => {
            let (window, below) = ranking_window(&projection.input)?;
            let column = Column::from(projection.input.schema().qualified_field(below));
            let at = projection
                .expr
                .iter()
                .position(|e| matches!(strip_alias(e), Expr::Column(c) if *c == column))?;
            Some((window, at))
        }
        _ => None,
    }
}

/// The ranks `condition` keeps, as (first, last), if it bounds `rank` by a constant.
fn rank_bounds(condition: &Expr, rank: &Column) -> Option<(u64, u64)> {
    let is_rank = |e: &Expr| matches!(strip_alias(e), Expr::Column(c) if c == rank);
    match condition {
        Expr::Between(between) if !between.negated && is_rank(&between.expr) => {
            Some((constant(&between.low)?.max(1), constant(&between.high)?))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (op, value) = if is_rank(left) {
                (*op, constant(right)?)
            } else if is_rank(right) {
                (op.swap()?, constant(left)?)
            } else {
                return None;
            };
            match op {
                BinaryOp::LtEq => Some((1, value)),
                BinaryOp::Lt => Some((1, value.checked_sub(1)?)),
                BinaryOp::Eq => Some((value, value)),
                BinaryOp::GtEq => Some((value.max(1), u64::MAX)),
                BinaryOp::Gt => Some((value.saturating_add(1), u64::MAX)),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A non-negative integer literal (ranks below 1 bound nothing).
fn constant(expr: &Expr) -> Option<u64> {
    let Expr::Literal(value, _) = strip_alias(expr) else {
        return None;
    };
    let value = match value.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
        ScalarValue::Int64(Some(v)) => v,
        _ => return None,
    };
    Some(value.max(0) as u64)
}

impl Planner {
    /// Plans the Top-N `shape` of `filter`: the ranked rows, then the filter's other
    /// conditions. `output` says whether the query reads the rank.
    pub(super) fn plan_top_n(
        &mut self,
        filter: &Filter,
        shape: TopNShape<'_>,
        output: RankOutput,
    ) -> Result<Stream> {
        let ranked = self.plan_ranked(&filter.input, &shape, output)?;
        let Some(rest) = conjunction(shape.rest.iter().map(|e| (*e).clone())) else {
            return Ok(ranked);
        };
        let predicate = self.physical(&rest, &ranked.schema)?;
        self.push(
            &ranked,
            OperatorSpec {
                description: format!("Calc(where: {rest})"),
                changelog: ranked.changelog,
                kind: OperatorKind::Filter(predicate),
            },
        );
        Ok(Stream {
            unique_key: None,
            ..ranked
        })
    }

    /// Plans the nodes between a Top-N's filter and its window: the window as a Top-N, the
    /// projections and aliases above it as usual.
    fn plan_ranked(
        &mut self,
        plan: &LogicalPlan,
        shape: &TopNShape<'_>,
        output: RankOutput,
    ) -> Result<Stream> {
        match plan {
            LogicalPlan::Window(_) => self.plan_rank(shape, output),
            LogicalPlan::SubqueryAlias(alias) => {
                let input = self.plan_ranked(&alias.input, shape, output)?;
                Ok(Stream {
                    schema: alias.schema.clone(),
                    ..input
                })
            }
            LogicalPlan::Projection(projection) => {
                let input = self.plan_ranked(&projection.input, shape, output)?;
                self.plan_projection(projection, input)
            }
            other => Err(EddyError::Plan(format!(
                "{} between a Top-N's filter and its ranking",
                other.display()
            ))),
        }
    }

    /// The Top-N operator itself, in a vertex of its own partitioned by the `PARTITION BY`.
    fn plan_rank(&mut self, shape: &TopNShape<'_>, output: RankOutput) -> Result<Stream> {
        let window = shape.window;
        let input = self.plan(&window.input)?;
        if shape.kind != RankingKind::RowNumber {
            return Err(unsupported(format!(
                "{}() in a streaming Top-N (as in Flink, only ROW_NUMBER() ranks a stream)",
                shape.kind.name().to_uppercase()
            )));
        }
        if input.changelog == Changelog::Upsert {
            return Err(unsupported("a Top-N over an upsert stream"));
        }
        if shape.order_by.is_empty() {
            return Err(unsupported(
                "a Top-N without ORDER BY: OVER (PARTITION BY ... ORDER BY ...) says which rows \
                 rank first",
            ));
        }
        let windowed = self.window_partition(shape, &input);
        let deduplication = self.deduplication(shape, &input);
        let ties = deduplication.unwrap_or(Ties::FirstArrivedFirst);
        let order = shape
            .order_by
            .iter()
            .map(|sort| {
                Ok(SortKey {
                    expr: self.physical(&sort.expr, &input.schema)?,
                    data_type: sort.expr.get_type(&input.schema).or_eddy()?,
                    options: SortOptions {
                        descending: !sort.asc,
                        nulls_first: sort.nulls_first,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let partitioned = self.partitioned_exchange(&input, shape.partition_by)?;
        let changelog = match windowed {
            Some(_) => Changelog::AppendOnly,
            None => Changelog::Retract,
        };
        let what = match (windowed.is_some(), deduplication) {
            (false, None) => "TopN",
            (true, None) => "WindowTopN",
            (false, Some(Ties::FirstArrivedFirst)) => "Deduplicate[keep first]",
            (false, Some(Ties::LastArrivedFirst)) => "Deduplicate[keep last]",
            (true, Some(Ties::FirstArrivedFirst)) => "WindowDeduplicate[keep first]",
            (true, Some(Ties::LastArrivedFirst)) => "WindowDeduplicate[keep last]",
        };
        // A Top-N takes `table.exec.state.ttl` (Flink's STATE_TTL hint does not reach it).
        let state_ttl = self.state_ttl.filter(|_| windowed.is_none());
        let description = format!(
            "{what}({}, partition: [{}], order: [{}], ranks: {}..={}, rank: {}{})",
            shape.kind.name(),
            partitioned.display,
            shape
                .order_by
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            shape.start,
            shape.end,
            match output {
                RankOutput::Number => "output",
                RankOutput::Dropped => "dropped",
            },
            ttl_display(state_ttl)
        );
        let stream = Stream {
            window_end: windowed,
            window_start: input.window_start.filter(|_| windowed.is_some()),
            rowtime: input.rowtime.filter(|_| windowed.is_some()),
            ..Stream::new(partitioned.target, window.schema.clone(), changelog)
        };
        self.push(
            &stream,
            OperatorSpec {
                description,
                changelog,
                kind: OperatorKind::TopN(RankSpec {
                    partition_keys: partitioned.keys,
                    partition_types: partitioned.types,
                    order,
                    start: shape.start,
                    end: shape.end,
                    ties,
                    output,
                    append_only_input: input.changelog == Changelog::AppendOnly,
                    window_end: windowed,
                    input_schema: output_schema(&input.schema),
                    schema: output_schema(&window.schema),
                    state_ttl,
                }),
            },
        );
        Ok(stream)
    }

    /// The input's window-end column, when the Top-N ranks within windows: its input's rows
    /// belong to windows and it is partitioned by both window bounds.
    fn window_partition(&self, shape: &TopNShape<'_>, input: &Stream) -> Option<usize> {
        let window_end = input.window_end?;
        let partitions_by = |name: &str| {
            shape
                .partition_by
                .iter()
                .any(|e| matches!(strip_alias(e), Expr::Column(c) if c.name == name))
        };
        (partitions_by(WINDOW_START) && partitions_by(WINDOW_END)).then_some(window_end)
    }

    /// How a deduplication breaks ties, when the Top-N is one: kept to rank 1,
    /// ordered by the event-time attribute alone. Ascending keeps the first row (a tie
    /// keeps the earlier); descending keeps the last (a tie takes the later).
    fn deduplication(&self, shape: &TopNShape<'_>, input: &Stream) -> Option<Ties> {
        let rowtime = Column::from(input.schema.qualified_field(input.rowtime?));
        let [sort] = shape.order_by else {
            return None;
        };
        let on_rowtime = matches!(strip_alias(&sort.expr), Expr::Column(c) if *c == rowtime);
        let first_only = shape.start == 1 && shape.end == 1;
        (first_only && on_rowtime).then_some(match sort.asc {
            true => Ties::FirstArrivedFirst,
            false => Ties::LastArrivedFirst,
        })
    }
}
