//! `GROUP BY`: an unbounded group aggregate (a retract stream), or a window aggregate
//! grouped by a window TVF's bounds (append-only, on event or processing time).

use datafusion_common::DFSchema;
use datafusion_expr::expr::AggregateFunction;
use datafusion_expr::{Expr, ExprSchemable};
use eddy_common::{EddyError, Result};
use eddy_operators::OrEddy;
use eddy_operators::aggregate::{
    AggregateCall, AggregateKind, OutputColumn, WindowAggregateSpec, WindowColumns,
};

use super::{
    Changelog, OperatorKind, OperatorSpec, PartitionedBy, Planner, Stream, WINDOW_END,
    WINDOW_START, WindowKind, output_schema, strip_alias, unsupported,
};

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
            let kind = AggregateKind::from_name(func.name(), params.distinct).ok_or_else(|| {
                unsupported(format!(
                    "aggregate function {}{} (supported: COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX)",
                    func.name().to_uppercase(),
                    if params.distinct { " with DISTINCT" } else { "" }
                ))
            })?;
            if !params.order_by.is_empty() {
                return Err(unsupported(format!("ORDER BY inside {}", func.name())));
            }
            let [arg] = params.args.as_slice() else {
                return Err(unsupported(format!(
                    "{} with {} arguments",
                    func.name(),
                    params.args.len()
                )));
            };
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
        let input = self.plan(&aggregate.input)?;
        if aggregate
            .group_expr
            .iter()
            .any(|e| matches!(e, Expr::GroupingSet(_)))
        {
            return Err(unsupported("GROUPING SETS, CUBE and ROLLUP"));
        }
        let window_bounds = window_bounds(aggregate, &input)?;
        let append_only = input.changelog == Changelog::AppendOnly;
        let (calls, call_names) = self.aggregate_calls(aggregate, &input.schema, append_only)?;
        let key_exprs: Vec<Expr> = aggregate
            .group_expr
            .iter()
            .enumerate()
            .filter(|(i, _)| window_bounds.is_none_or(|(_, s, e)| *i != s && *i != e))
            .map(|(_, e)| e.clone())
            .collect();
        let PartitionedBy {
            target,
            keys,
            types: key_types,
            display: key_display,
        } = self.partitioned_exchange(&input, &key_exprs)?;
        let schema = output_schema(&aggregate.schema);
        let stream_at = |vertex| Stream {
            vertex,
            schema: aggregate.schema.clone(),
            changelog: Changelog::AppendOnly,
            unique_key: None,
            window: None,
            window_end: None,
            rowtime: None,
            proctime: None,
            processing_window: false,
        };
        match window_bounds {
            Some((kind, start_pos, end_pos)) => {
                if input.changelog != Changelog::AppendOnly {
                    return Err(unsupported("a window aggregate over an updating input"));
                }
                let columns = window_columns(aggregate, &input, start_pos, end_pos)?;
                let session_gap = match kind {
                    WindowKind::Session { gap } => Some(gap),
                    _ => None,
                };
                let processing_time = input.processing_window.then_some(kind);
                // The output's rows belong to windows too: a window Top-N can follow (on
                // event time: processing-time windows do not close with the watermark).
                let stream = Stream {
                    window_end: Some(end_pos).filter(|_| processing_time.is_none()),
                    ..stream_at(target)
                };
                self.push(
                    &stream,
                    OperatorSpec {
                        description: format!(
                            "WindowAggregate({kind}, keys=[{key_display}], aggs=[{}])",
                            call_names.join(", ")
                        ),
                        changelog: Changelog::AppendOnly,
                        kind: OperatorKind::WindowAggregate(WindowAggregateSpec {
                            keys,
                            key_types,
                            columns,
                            session_gap,
                            calls,
                            schema,
                            processing_time,
                        }),
                    },
                );
                Ok(stream)
            }
            None => {
                let mut stream = stream_at(target);
                let op = self.push(
                    &stream,
                    OperatorSpec {
                        description: format!(
                            "GroupAggregate(keys=[{key_display}], aggs=[{}])",
                            call_names.join(", ")
                        ),
                        changelog: Changelog::Retract,
                        kind: OperatorKind::GroupAggregate {
                            keys,
                            key_types,
                            calls,
                            emit_update_before: true,
                            schema,
                        },
                    },
                );
                stream.changelog = Changelog::Retract;
                stream.unique_key = Some(((0..aggregate.group_expr.len()).collect(), (target, op)));
                Ok(stream)
            }
        }
    }
}

/// The window of a windowed `GROUP BY`: its kind and the positions of `window_start` and
/// `window_end` among the grouping expressions; `None` for a `GROUP BY` without one.
fn window_bounds(
    aggregate: &datafusion_expr::Aggregate,
    input: &Stream,
) -> Result<Option<(WindowKind, usize, usize)>> {
    let position = |name: &str| {
        aggregate
            .group_expr
            .iter()
            .position(|e| matches!(strip_alias(e), Expr::Column(c) if c.name == name))
    };
    match (input.window, position(WINDOW_START), position(WINDOW_END)) {
        (Some(kind), Some(start), Some(end)) => Ok(Some((kind, start, end))),
        (Some(WindowKind::Session { .. }), _, _) => Err(unsupported(
            "a SESSION window must be grouped by both window_start and window_end",
        )),
        _ => Ok(None),
    }
}

/// Where a window aggregate finds its window's bounds in its input, and how its output
/// orders the grouping columns (`start_pos`, `end_pos`: the bounds among them).
fn window_columns(
    aggregate: &datafusion_expr::Aggregate,
    input: &Stream,
    start_pos: usize,
    end_pos: usize,
) -> Result<WindowColumns> {
    let index_of = |name: &str| {
        input
            .schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .ok_or_else(|| EddyError::Plan(format!("window column {name} is missing")))
    };
    let mut key_index = 0;
    let layout = (0..aggregate.group_expr.len())
        .map(|i| {
            if i == start_pos {
                OutputColumn::WindowStart
            } else if i == end_pos {
                OutputColumn::WindowEnd
            } else {
                key_index += 1;
                OutputColumn::Key(key_index - 1)
            }
        })
        .collect();
    Ok(WindowColumns {
        start: index_of(WINDOW_START)?,
        end: index_of(WINDOW_END)?,
        layout,
    })
}
