//! `GROUP BY`: an unbounded group aggregate (a retract stream), or a window aggregate
//! grouped by a window TVF's bounds (append-only, on event or processing time).

use datafusion_common::{Column, DFSchema};
use datafusion_expr::expr::AggregateFunction;
use datafusion_expr::utils::grouping_set_to_exprlist;
use datafusion_expr::{Expr, ExprSchemable};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::aggregate::{
    AggregateCall, AggregateKind, OutputColumn, WindowAggregateSpec, WindowColumns,
};
use eddy_udf::python::PythonAggregate;

use super::{
    Changelog, OperatorKind, OperatorSpec, PartitionedBy, Planner, Stream, WINDOW_END,
    WINDOW_START, WindowKind, output_schema, strip_alias, ttl_display, unsupported,
};

/// How Eddy evaluates a call of `func`: a built-in aggregate, or a user-defined one.
fn aggregate_kind(func: &datafusion_expr::AggregateUDF, distinct: bool) -> Result<AggregateKind> {
    if let Some(python) = func.inner().downcast_ref::<PythonAggregate>() {
        if distinct {
            return Err(unsupported(format!(
                "DISTINCT in a call of the aggregate function {}",
                func.name()
            )));
        }
        return Ok(AggregateKind::User(python.user_aggregate()));
    }
    AggregateKind::from_name(func.name(), distinct).ok_or_else(|| {
        unsupported(format!(
            "aggregate function {}{} (supported: COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX \
             and CREATE AGGREGATE FUNCTION)",
            func.name().to_uppercase(),
            if distinct { " with DISTINCT" } else { "" }
        ))
    })
}

/// One struct of a call's arguments, its fields `a0`, `a1`, ...
fn arguments_struct(args: &[Expr]) -> Expr {
    let named = args
        .iter()
        .enumerate()
        .flat_map(|(i, arg)| [datafusion_expr::lit(format!("a{i}")), arg.clone()])
        .collect();
    datafusion_functions::core::expr_fn::named_struct(named)
}

impl Planner {
    fn aggregate_calls(
        &self,
        aggregate: &datafusion_expr::Aggregate,
        input: &DFSchema,
        append_only: bool,
    ) -> Result<(Vec<AggregateCall>, Vec<String>)> {
        let group_len = aggregate.group_expr.len();
        let mut calls = Vec::new();
        let mut names = Vec::new();
        for (i, expr) in aggregate.aggr_expr.iter().enumerate() {
            let Expr::AggregateFunction(AggregateFunction { func, params }) = strip_alias(expr)
            else {
                return Err(unsupported(format!("aggregate expression {expr}")));
            };
            let kind = aggregate_kind(func, params.distinct)?;
            if !params.order_by.is_empty() {
                return Err(unsupported(format!("ORDER BY inside {}", func.name())));
            }
            let arg = match &kind {
                // A user-defined aggregate takes one struct of its call's arguments.
                AggregateKind::User(_) => arguments_struct(&params.args),
                _ => match params.args.as_slice() {
                    [arg] => arg.clone(),
                    args => {
                        return Err(unsupported(format!(
                            "{} with {} arguments",
                            func.name(),
                            args.len()
                        )));
                    }
                },
            };
            let arg = &arg;
            let filter = params
                .filter
                .as_ref()
                .map(|f| self.physical(f, input))
                .transpose()?;
            calls.push(AggregateCall {
                kind,
                arg: self.physical(arg, input)?,
                filter,
                input_type: arg.get_type(input).or_eddy()?,
                append_only,
                output_type: aggregate.schema.field(group_len + i).data_type().clone(),
            });
            names.push(strip_alias(expr).to_string());
        }
        Ok((calls, names))
    }

    pub(super) fn plan_aggregate(
        &mut self,
        aggregate: &datafusion_expr::Aggregate,
    ) -> Result<Stream> {
        if aggregate
            .group_expr
            .iter()
            .any(|e| matches!(e, Expr::GroupingSet(_)))
        {
            return Err(unsupported("GROUPING SETS, CUBE and ROLLUP"));
        }
        // `GROUP BY a, a` groups by `a` once, as the aggregate's output schema has it.
        let groups = grouping_set_to_exprlist(&aggregate.group_expr).or_eddy()?;
        if groups.len() < aggregate.group_expr.len() {
            let distinct = datafusion_expr::Aggregate::try_new(
                aggregate.input.clone(),
                groups.into_iter().cloned().collect(),
                aggregate.aggr_expr.clone(),
            )
            .or_eddy()?;
            return self.plan_aggregate(&distinct);
        }
        let input = self.plan(&aggregate.input)?;
        let window_bounds = window_bounds(aggregate, &input)?;
        let append_only = input.changelog == Changelog::AppendOnly;
        let (calls, call_names) = self.aggregate_calls(aggregate, &input.schema, append_only)?;
        let key_exprs: Vec<Expr> = aggregate
            .group_expr
            .iter()
            .enumerate()
            .filter(|(i, _)| window_bounds.is_none_or(|w| *i != w.start_pos && *i != w.end_pos))
            .map(|(_, e)| e.clone())
            .collect();
        let partitioned = self.partitioned_exchange(&input, &key_exprs)?;
        let aggregates = (calls, call_names);
        match window_bounds {
            Some(window) => {
                if input.changelog != Changelog::AppendOnly {
                    return Err(unsupported("a window aggregate over an updating input"));
                }
                Ok(self.push_window_aggregate(aggregate, &input, window, partitioned, aggregates))
            }
            None => Ok(self.push_group_aggregate(aggregate, partitioned, aggregates)),
        }
    }

    /// A window aggregate of `aggregate` (windowed by `window`) after `partitioned`: its
    /// rows belong to windows too.
    fn push_window_aggregate(
        &mut self,
        aggregate: &datafusion_expr::Aggregate,
        input: &Stream,
        window: GroupWindow,
        partitioned: PartitionedBy,
        (calls, call_names): (Vec<AggregateCall>, Vec<String>),
    ) -> Stream {
        let PartitionedBy {
            target,
            keys,
            types: key_types,
            display: key_display,
        } = partitioned;
        let columns = window_columns(aggregate, &window);
        let kind = window.kind;
        let of = match window.attached {
            true => " of the input's windows",
            false => "",
        };
        // Sessions merge only as a window TVF's rows come; the rows of a window aggregate
        // carry their final session.
        let session_gap = match kind {
            WindowKind::Session { gap } if !window.attached => Some(gap),
            _ => None,
        };
        let processing_time = input.processing_window.then_some(kind);
        // The output's rows belong to windows too: a window Top-N, aggregate or join can
        // follow (on event time: processing-time windows do not close with the watermark).
        let event_time = processing_time.is_none();
        let stream = Stream {
            window_end: Some(window.end_pos).filter(|_| event_time),
            window_start: Some((kind, window.start_pos)).filter(|_| event_time),
            ..Stream::new(target, aggregate.schema.clone(), Changelog::AppendOnly)
        };
        self.push(
            &stream,
            OperatorSpec {
                description: format!(
                    "WindowAggregate({kind}{of}, keys=[{key_display}], aggs=[{}])",
                    call_names.join(", ")
                ),
                changelog: Changelog::AppendOnly,
                kind: OperatorKind::WindowAggregate(WindowAggregateSpec {
                    keys,
                    key_types,
                    columns,
                    session_gap,
                    calls,
                    schema: output_schema(&aggregate.schema),
                    processing_time,
                }),
            },
        );
        stream
    }

    /// An unbounded group aggregate of `aggregate` after `partitioned`: a retract stream
    /// keyed by its groups.
    fn push_group_aggregate(
        &mut self,
        aggregate: &datafusion_expr::Aggregate,
        partitioned: PartitionedBy,
        (calls, call_names): (Vec<AggregateCall>, Vec<String>),
    ) -> Stream {
        let PartitionedBy {
            target,
            keys,
            types: key_types,
            display: key_display,
        } = partitioned;
        let mut stream = Stream::new(target, aggregate.schema.clone(), Changelog::AppendOnly);
        let state_ttl = self.state_ttl_of(&aggregate.input);
        let op = self.push(
            &stream,
            OperatorSpec {
                description: format!(
                    "GroupAggregate(keys=[{key_display}], aggs=[{}]{})",
                    call_names.join(", "),
                    ttl_display(state_ttl)
                ),
                changelog: Changelog::Retract,
                kind: OperatorKind::GroupAggregate {
                    keys,
                    key_types,
                    calls,
                    emit_update_before: true,
                    schema: output_schema(&aggregate.schema),
                    state_ttl,
                },
            },
        );
        stream.changelog = Changelog::Retract;
        stream.unique_key = Some(((0..aggregate.group_expr.len()).collect(), (target, op)));
        stream
    }
}

/// The windows of a windowed `GROUP BY`, grouped by both bounds of windows its input's
/// rows belong to.
#[derive(Debug, Clone, Copy)]
struct GroupWindow {
    kind: WindowKind,
    /// The positions of the bounds among the grouping expressions.
    start_pos: usize,
    end_pos: usize,
    /// The columns of the bounds in the input.
    start: usize,
    end: usize,
    /// The input's rows were windowed by a window aggregate before (not by a window TVF):
    /// their windows are only read, never assigned or merged.
    attached: bool,
}

/// The windows of a windowed `GROUP BY`: those of a window TVF's rows (grouped by its
/// `window_start` and `window_end`), or those of a window aggregate's rows, grouped by
/// their bound columns under any name (Flink's window aggregate over a window aggregate);
/// `None` for a `GROUP BY` without both bounds.
fn window_bounds(
    aggregate: &datafusion_expr::Aggregate,
    input: &Stream,
) -> Result<Option<GroupWindow>> {
    let grouped_by = |matches: &dyn Fn(&Column) -> bool| {
        aggregate
            .group_expr
            .iter()
            .position(|e| matches!(strip_alias(e), Expr::Column(c) if matches(c)))
    };
    let input_column = |name: &str| {
        input
            .schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .ok_or_else(|| EddyError::Plan(format!("window column {name} is missing")))
    };
    if let Some(kind) = input.window {
        let start_pos = grouped_by(&|c| c.name == WINDOW_START);
        let end_pos = grouped_by(&|c| c.name == WINDOW_END);
        return match (kind, start_pos.zip(end_pos)) {
            (_, Some((start_pos, end_pos))) => Ok(Some(GroupWindow {
                kind,
                start_pos,
                end_pos,
                start: input_column(WINDOW_START)?,
                end: input_column(WINDOW_END)?,
                attached: false,
            })),
            (WindowKind::Session { .. }, None) => Err(unsupported(
                "a SESSION window must be grouped by both window_start and window_end",
            )),
            (_, None) => Ok(None),
        };
    }
    let (Some((kind, start)), Some(end)) = (input.window_start, input.window_end) else {
        return Ok(None);
    };
    let column = |i: usize| Column::from(input.schema.qualified_field(i));
    let (start_column, end_column) = (column(start), column(end));
    let start_pos = grouped_by(&|c| *c == start_column);
    let end_pos = grouped_by(&|c| *c == end_column);
    Ok(start_pos
        .zip(end_pos)
        .map(|(start_pos, end_pos)| GroupWindow {
            kind,
            start_pos,
            end_pos,
            start,
            end,
            attached: true,
        }))
}

/// Where a window aggregate finds its window's bounds in its input, and how its output
/// orders the grouping columns.
fn window_columns(aggregate: &datafusion_expr::Aggregate, window: &GroupWindow) -> WindowColumns {
    let mut key_index = 0;
    let layout = (0..aggregate.group_expr.len())
        .map(|i| {
            if i == window.start_pos {
                OutputColumn::WindowStart
            } else if i == window.end_pos {
                OutputColumn::WindowEnd
            } else {
                key_index += 1;
                OutputColumn::Key(key_index - 1)
            }
        })
        .collect();
    WindowColumns {
        start: window.start,
        end: window.end,
        layout,
    }
}

#[cfg(test)]
mod tests {
    /// An INSERT of `select` from a bid table with event time into a print table.
    fn plan_of(select: &str) -> String {
        let script = format!(
            "CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3),
               WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen');
             CREATE TABLE o (a TIMESTAMP(3), b BIGINT, c BIGINT) WITH ('connector' = 'print');
             INSERT INTO o {select};"
        );
        crate::plan(&script, &[], crate::PlanningContext::CHECKING)
            .unwrap()
            .explain()
    }

    #[test]
    fn a_key_grouped_by_twice_is_grouped_by_once() {
        let unbounded = "SELECT CAST(NULL AS TIMESTAMP(3)), auction, COUNT(*) FROM bid GROUP BY";
        assert_eq!(
            plan_of(&format!("{unbounded} auction, auction")),
            plan_of(&format!("{unbounded} auction"))
        );
        let window = "SELECT window_start, auction, COUNT(*) \
                      FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY";
        assert_eq!(
            plan_of(&format!(
                "{window} window_start, window_start, window_end, auction, window_end, auction"
            )),
            plan_of(&format!("{window} window_start, window_end, auction"))
        );
    }
}
