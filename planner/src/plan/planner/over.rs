//! OVER aggregates (`agg(x) OVER (PARTITION BY ... ORDER BY rowtime <frame>)`) on an
//! append-only input, planned as one [`OverAggregate`] per query window, as Flink plans
//! them: ordered by the event-time attribute ascending, frames that end at the current
//! row, and the same window for every aggregate of the query.
//!
//! [`OverAggregate`]: eddy_operators::aggregate::OverAggregate

use arrow::datatypes::DataType;
use datafusion_common::ScalarValue;
use datafusion_expr::expr::{WindowFunction, WindowFunctionDefinition};
use datafusion_expr::logical_plan::Window;
use datafusion_expr::{Expr, ExprSchemable, WindowFrame, WindowFrameBound, WindowFrameUnits, lit};
use eddy_common::Result;
use eddy_operators::OrEddy;
use eddy_operators::aggregate::{AggregateCall, AggregateKind, OverFrame, OverSpec};

use super::{
    Changelog, OperatorKind, OperatorSpec, Planner, Stream, output_schema, strip_alias, unsupported,
};

impl Planner {
    /// Plans a window of OVER aggregates, in a vertex of its own partitioned by the
    /// `PARTITION BY`.
    pub(super) fn plan_over(&mut self, window: &Window) -> Result<Stream> {
        let input = self.plan(&window.input)?;
        if input.changelog != Changelog::AppendOnly {
            return Err(unsupported(
                "an OVER aggregate over an updating input (Flink computes them on append-only \
                 streams)",
            ));
        }
        let functions = window
            .window_expr
            .iter()
            .map(|e| match strip_alias(e) {
                Expr::WindowFunction(f) => Ok(f.as_ref()),
                other => Err(unsupported(format!("the window expression {other}"))),
            })
            .collect::<Result<Vec<&WindowFunction>>>()?;
        let first = &functions[0].params;
        if functions.iter().any(|f| {
            f.params.partition_by != first.partition_by
                || f.params.order_by != first.order_by
                || f.params.window_frame != first.window_frame
        }) {
            return Err(unsupported(
                "OVER aggregates over different windows in one query (as in Flink, every OVER of \
                 a SELECT must be the same)",
            ));
        }
        let time_column = self.over_order(first.order_by.as_slice(), &input)?;
        let frame = over_frame(&first.window_frame)?;
        let mut calls = Vec::new();
        let mut names = Vec::new();
        let group_len = window.input.schema().fields().len();
        for (i, function) in functions.iter().enumerate() {
            calls.push(self.over_call(function, &input, window, group_len + i)?);
            names.push(strip_alias(&window.window_expr[i]).to_string());
        }
        let partitioned = self.partitioned_exchange(&input, &first.partition_by)?;
        let stream = Stream {
            rowtime: input.rowtime,
            ..Stream::new(
                partitioned.target,
                window.schema.clone(),
                Changelog::AppendOnly,
            )
        };
        self.push(
            &stream,
            OperatorSpec {
                description: format!(
                    "OverAggregate(partition: [{}], frame: {frame}, aggs: [{}])",
                    partitioned.display,
                    names.join(", ")
                ),
                changelog: Changelog::AppendOnly,
                kind: OperatorKind::Over(OverSpec {
                    partition_keys: partitioned.keys,
                    partition_types: partitioned.types,
                    time_column,
                    frame,
                    calls,
                    input_schema: output_schema(&input.schema),
                    schema: output_schema(&window.schema),
                }),
            },
        );
        Ok(stream)
    }

    /// The input column an OVER is ordered by: the event-time attribute, ascending.
    fn over_order(&self, order_by: &[datafusion_expr::SortExpr], input: &Stream) -> Result<usize> {
        let rowtime = input.rowtime.ok_or_else(|| {
            unsupported("an OVER aggregate over rows without an event-time attribute (WATERMARK)")
        })?;
        let rowtime_column = datafusion_common::Column::from(input.schema.qualified_field(rowtime));
        match order_by {
            [sort]
                if sort.asc
                    && matches!(strip_alias(&sort.expr), Expr::Column(c) if *c == rowtime_column) =>
            {
                Ok(rowtime)
            }
            _ => Err(unsupported(format!(
                "an OVER aggregate not ordered by the event-time attribute ascending (ORDER BY {})",
                rowtime_column.name
            ))),
        }
    }

    /// One aggregate of an OVER window, its result at `position` of the window's output.
    fn over_call(
        &self,
        function: &WindowFunction,
        input: &Stream,
        window: &Window,
        position: usize,
    ) -> Result<AggregateCall> {
        let WindowFunctionDefinition::AggregateUDF(udf) = &function.fun else {
            return Err(unsupported(format!(
                "{} in an OVER window without a Top-N filter on it",
                function.fun
            )));
        };
        let params = &function.params;
        let kind = AggregateKind::from_name(udf.name(), params.distinct).ok_or_else(|| {
            unsupported(format!(
                "aggregate function {} in an OVER window (supported: COUNT, SUM, AVG, MIN, MAX)",
                udf.name().to_uppercase()
            ))
        })?;
        if kind == AggregateKind::CountDistinct || params.filter.is_some() {
            return Err(unsupported("DISTINCT or FILTER in an OVER aggregate"));
        }
        // DataFusion leaves `COUNT(*)` of a window function as a wildcard (a deprecated
        // variant it still produces): every row counts.
        #[allow(deprecated)]
        let arg = match params.args.as_slice() {
            [Expr::Wildcard { .. }] => &lit(1i64),
            [arg] => arg,
            args => {
                return Err(unsupported(format!(
                    "{} with {} arguments",
                    udf.name(),
                    args.len()
                )));
            }
        };
        Ok(AggregateCall {
            kind,
            arg: self.physical(arg, &input.schema)?,
            filter: None,
            input_type: arg.get_type(&input.schema).or_eddy()?,
            // Rows leave bounded frames: every aggregate must take values back.
            append_only: false,
            output_type: window.schema.field(position).data_type().clone(),
        })
    }
}

/// The frame of an OVER window, which must end at the current row.
fn over_frame(frame: &WindowFrame) -> Result<OverFrame> {
    if frame.end_bound != WindowFrameBound::CurrentRow {
        return Err(unsupported(format!(
            "the OVER frame {frame} (a frame ends at the CURRENT ROW on a stream)"
        )));
    }
    let preceding = match &frame.start_bound {
        WindowFrameBound::Preceding(value) if value.is_null() => None,
        WindowFrameBound::Preceding(value) => Some(value.clone()),
        _ => {
            return Err(unsupported(format!(
                "the OVER frame {frame} (it starts PRECEDING the current row)"
            )));
        }
    };
    match (frame.units, preceding) {
        (WindowFrameUnits::Rows, None) => Ok(OverFrame::Rows(None)),
        (WindowFrameUnits::Rows, Some(rows)) => match rows.cast_to(&DataType::UInt64) {
            Ok(ScalarValue::UInt64(Some(n))) => Ok(OverFrame::Rows(Some(n))),
            _ => Err(unsupported(format!("ROWS BETWEEN {rows} PRECEDING"))),
        },
        (WindowFrameUnits::Range, None) => Ok(OverFrame::Range(None)),
        (WindowFrameUnits::Range, Some(interval)) => interval_millis(&interval)
            .map(|ms| OverFrame::Range(Some(ms)))
            .ok_or_else(|| {
                unsupported(format!(
                    "RANGE BETWEEN {interval} PRECEDING (an INTERVAL of days or less is expected)"
                ))
            }),
        (WindowFrameUnits::Groups, _) => Err(unsupported("GROUPS frames")),
    }
}

/// An interval of days, hours, minutes, seconds or milliseconds, in milliseconds.
fn interval_millis(value: &ScalarValue) -> Option<i64> {
    match value {
        ScalarValue::IntervalDayTime(Some(v)) => {
            Some(i64::from(v.days) * 86_400_000 + i64::from(v.milliseconds))
        }
        ScalarValue::IntervalMonthDayNano(Some(v)) if v.months == 0 => {
            Some(i64::from(v.days) * 86_400_000 + v.nanoseconds / 1_000_000)
        }
        _ => None,
    }
}
