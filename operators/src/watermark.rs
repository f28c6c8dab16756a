//! Watermarks at the source: each split's watermark is the largest value of the
//! table's `WATERMARK` expression it has produced; the source emits the smallest over its
//! unfinished splits.

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use arrow::compute::{cast, max};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use datafusion_expr::Operator;
use datafusion_physical_expr::PhysicalExpr;
use datafusion_physical_expr::expressions::{BinaryExpr, Column, Literal};
use eddy_common::Result;
use eddy_common::event::Timestamp;

use super::evaluate;

/// Tracks the watermark of a source subtask over its splits.
#[derive(Debug)]
pub struct SplitWatermarks {
    expr: Arc<dyn PhysicalExpr>,
    /// The column `expr` rises with, if it does: then its largest value over a batch is
    /// its value at the row where that column is largest, one row to evaluate.
    rises_with: Option<usize>,
    /// Per split: its watermark, or `None` once it has ended.
    splits: Vec<Option<Timestamp>>,
    emitted: Timestamp,
}

impl SplitWatermarks {
    /// Tracks `splits` splits with the watermark expression `expr`.
    pub fn new(expr: Arc<dyn PhysicalExpr>, splits: usize) -> Self {
        SplitWatermarks {
            rises_with: rises_with(&expr),
            expr,
            splits: vec![Some(Timestamp::MIN); splits],
            emitted: Timestamp::MIN,
        }
    }

    /// Takes in rows of `split`; returns a new watermark if the source's advanced.
    pub fn observe(&mut self, split: usize, rows: &RecordBatch) -> Result<Option<Timestamp>> {
        let latest = match self.rises_with {
            Some(column) => match latest_row(rows.column(column))? {
                Some(row) => rows.slice(row, 1),
                None => return Ok(self.advance()),
            },
            None => rows.clone(),
        };
        let values = evaluate(&self.expr, &latest)?;
        let millis = crate::epoch_millis(&values)?;
        if let Some(m) = max(&millis)
            && let Some(Some(current)) = self.splits.get_mut(split)
            && m > *current
        {
            *current = m;
        }
        Ok(self.advance())
    }

    /// A split has ended; returns a new watermark if that releases one.
    pub fn end_split(&mut self, split: usize) -> Option<Timestamp> {
        if let Some(s) = self.splits.get_mut(split) {
            *s = None;
        }
        self.advance()
    }

    fn advance(&mut self) -> Option<Timestamp> {
        let min = self.splits.iter().flatten().min().copied()?;
        if min > self.emitted {
            self.emitted = min;
            return Some(min);
        }
        None
    }
}

/// The column `expr` rises with: `ts`, or `ts` plus or minus a constant (the usual
/// `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND`).
fn rises_with(expr: &Arc<dyn PhysicalExpr>) -> Option<usize> {
    if let Some(column) = expr.downcast_ref::<Column>() {
        return Some(column.index());
    }
    let binary = expr.downcast_ref::<BinaryExpr>()?;
    if !matches!(binary.op(), Operator::Plus | Operator::Minus) {
        return None;
    }
    binary.right().downcast_ref::<Literal>()?;
    let column = binary.left().downcast_ref::<Column>()?;
    Some(column.index())
}

/// The row holding the largest value of a time column (the first such), if any is
/// non-null.
fn latest_row(times: &dyn Array) -> Result<Option<usize>> {
    let values = cast(times, &DataType::Int64)?;
    let values = values
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64");
    let mut latest: Option<(usize, i64)> = None;
    for (row, value) in values.iter().enumerate() {
        if let Some(value) = value
            && latest.is_none_or(|(_, best)| value > best)
        {
            latest = Some((row, value));
        }
    }
    Ok(latest.map(|(row, _)| row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, TimestampMillisecondArray};
    use arrow::datatypes::{Field, IntervalDayTime, Schema, TimeUnit};
    use datafusion_common::ScalarValue;

    fn batch(times: Vec<Option<i64>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]));
        let column: ArrayRef = Arc::new(TimestampMillisecondArray::from(times));
        RecordBatch::try_new(schema, vec![column]).unwrap()
    }

    fn minus_four_seconds() -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(
            Arc::new(Column::new("ts", 0)),
            Operator::Minus,
            Arc::new(Literal::new(ScalarValue::IntervalDayTime(Some(
                IntervalDayTime::new(0, 4000),
            )))),
        ))
    }

    #[test]
    fn a_rising_expression_is_evaluated_on_the_latest_row_only() {
        let expr = minus_four_seconds();
        assert_eq!(rises_with(&expr), Some(0));
        let mut fast = SplitWatermarks::new(expr.clone(), 2);
        let mut general = SplitWatermarks::new(expr, 2);
        general.rises_with = None;
        let batches = [
            (0, vec![Some(9_000), None, Some(12_500), Some(11_000)]),
            (1, vec![None, None]),
            (1, vec![Some(20_000), Some(7_000)]),
            (0, vec![Some(10_000)]),
            (0, vec![Some(30_000), Some(30_000)]),
        ];
        for (split, times) in batches {
            let rows = batch(times);
            assert_eq!(
                fast.observe(split, &rows).unwrap(),
                general.observe(split, &rows).unwrap()
            );
        }
        assert_eq!(fast.emitted, 16_000);
        assert_eq!(fast.end_split(1), Some(26_000));
    }

    #[test]
    fn other_expressions_take_the_general_path() {
        let times: Arc<dyn PhysicalExpr> = Arc::new(Column::new("ts", 0));
        let product = Arc::new(BinaryExpr::new(
            times.clone(),
            Operator::Multiply,
            times.clone(),
        )) as Arc<dyn PhysicalExpr>;
        assert_eq!(rises_with(&times), Some(0));
        assert_eq!(rises_with(&product), None);
    }
}
