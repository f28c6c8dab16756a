//! Logical plan nodes Eddy adds to DataFusion's: watermark assignment, window TVFs and
//! table functions joined to their input.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion_common::{Column, DFSchema, DFSchemaRef};
use datafusion_expr::{Expr, LogicalPlan, UserDefinedLogicalNodeCore};
pub use eddy_operators::window_assign::WindowKind;

/// Name of the column a window TVF adds for the window's start.
pub const WINDOW_START: &str = "window_start";
/// Name of the column a window TVF adds for the window's end (exclusive).
pub const WINDOW_END: &str = "window_end";
/// Name of the column a window TVF adds for the window's time attribute (`end - 1 ms`).
pub const WINDOW_TIME: &str = "window_time";

/// `WATERMARK FOR rowtime AS expr`: marks where a table's watermarks come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatermarkAssigner {
    /// The table's rows (physical columns plus computed ones).
    pub input: LogicalPlan,
    /// The event-time column.
    pub rowtime: String,
    /// The watermark expression, evaluated per row; the watermark is its maximum so far.
    pub expr: Expr,
}

impl PartialOrd for WatermarkAssigner {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.rowtime.partial_cmp(&other.rowtime)
    }
}

impl UserDefinedLogicalNodeCore for WatermarkAssigner {
    fn name(&self) -> &str {
        "WatermarkAssigner"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        self.input.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![self.expr.clone()]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "WatermarkAssigner: rowtime={}, watermark={}",
            self.rowtime, self.expr
        )
    }

    fn with_exprs_and_inputs(
        &self,
        mut exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> datafusion_common::Result<Self> {
        Ok(WatermarkAssigner {
            input: inputs.swap_remove(0),
            rowtime: self.rowtime.clone(),
            expr: exprs.swap_remove(0),
        })
    }
}

/// A window TVF: the input's rows, each with the window(s) it falls into.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WindowTvf {
    /// The windowed rows.
    pub input: LogicalPlan,
    /// Which windows.
    pub kind: WindowKind,
    /// The event-time column (`DESCRIPTOR(ts)`).
    pub time_column: Column,
    schema: DFSchemaRef,
}

impl PartialOrd for WindowTvf {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.kind.partial_cmp(&other.kind)
    }
}

impl WindowTvf {
    /// The TVF over `input`; its schema is the input's plus the window columns.
    pub fn try_new(
        input: LogicalPlan,
        kind: WindowKind,
        time_column: Column,
    ) -> datafusion_common::Result<Self> {
        let timestamp = DataType::Timestamp(TimeUnit::Millisecond, None);
        let window_fields = Schema::new(vec![
            Field::new(WINDOW_START, timestamp.clone(), false),
            Field::new(WINDOW_END, timestamp.clone(), false),
            Field::new(WINDOW_TIME, timestamp, false),
        ]);
        let schema = input.schema().join(&DFSchema::try_from(window_fields)?)?;
        Ok(WindowTvf {
            input,
            kind,
            time_column,
            schema: Arc::new(schema),
        })
    }
}

impl UserDefinedLogicalNodeCore for WindowTvf {
    fn name(&self) -> &str {
        "WindowTvf"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![Expr::Column(self.time_column.clone())]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "WindowTvf: {} on {}", self.kind, self.time_column)
    }

    /// The input columns the query reads, and the time column: the rest are pruned
    /// before the TVF copies each row into its windows (a hop window copies it size /
    /// slide times).
    fn necessary_children_exprs(&self, output_columns: &[usize]) -> Option<Vec<Vec<usize>>> {
        let input = self.input.schema();
        let time = input.index_of_column(&self.time_column).ok()?;
        let mut needed: Vec<usize> = output_columns
            .iter()
            .copied()
            .filter(|i| *i < input.fields().len())
            .chain([time])
            .collect();
        needed.sort_unstable();
        needed.dedup();
        Some(vec![needed])
    }

    fn with_exprs_and_inputs(
        &self,
        exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> datafusion_common::Result<Self> {
        let time_column = match exprs.first() {
            Some(Expr::Column(c)) => c.clone(),
            _ => self.time_column.clone(),
        };
        WindowTvf::try_new(inputs.swap_remove(0), self.kind, time_column)
    }
}

/// Each row of `input` joined with the rows a table function gives for it
/// (`LATERAL TABLE(f(...))`, see [`super::lateral_table`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Correlate {
    /// The rows the function is called for.
    pub input: LogicalPlan,
    /// The call, over the input's columns; its value for a row is the list of the rows the
    /// function gives.
    pub call: Expr,
    /// `LEFT JOIN`: a row the function gives nothing for is kept once, padded with NULLs.
    pub keep_unmatched: bool,
    /// The input's columns, then the function's.
    pub schema: DFSchemaRef,
}

impl Correlate {
    /// The node, its schema checked: the input's columns then the function's.
    pub fn try_new(
        input: LogicalPlan,
        call: Expr,
        keep_unmatched: bool,
        schema: DFSchemaRef,
    ) -> datafusion_common::Result<Correlate> {
        if schema.fields().len() <= input.schema().fields().len() {
            return datafusion_common::plan_err!(
                "a table function's join has no columns of its own"
            );
        }
        Ok(Correlate {
            input,
            call,
            keep_unmatched,
            schema,
        })
    }
}

impl PartialOrd for Correlate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.keep_unmatched.partial_cmp(&other.keep_unmatched)
    }
}

impl UserDefinedLogicalNodeCore for Correlate {
    fn name(&self) -> &str {
        "Correlate"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.input]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![self.call.clone()]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let join = if self.keep_unmatched { "LEFT" } else { "INNER" };
        write!(f, "Correlate: {}, {join}", self.call)
    }

    fn with_exprs_and_inputs(
        &self,
        mut exprs: Vec<Expr>,
        mut inputs: Vec<LogicalPlan>,
    ) -> datafusion_common::Result<Self> {
        Ok(Correlate {
            input: inputs.swap_remove(0),
            call: exprs.swap_remove(0),
            keep_unmatched: self.keep_unmatched,
            schema: self.schema.clone(),
        })
    }
}
