//! Watermarks at the source: each split's watermark is the largest value of the
//! table's `WATERMARK` expression it has produced; the source emits the smallest over its
//! unfinished splits.

use std::sync::Arc;

use arrow::array::{Array, Int64Array};
use arrow::compute::{cast, max};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use datafusion_physical_expr::PhysicalExpr;

use super::evaluate;
use crate::Result;
use crate::event::Timestamp;

/// Tracks the watermark of a source subtask over its splits.
#[derive(Debug)]
pub struct SplitWatermarks {
    expr: Arc<dyn PhysicalExpr>,
    /// Per split: its watermark, or `None` once it has ended.
    splits: Vec<Option<Timestamp>>,
    emitted: Timestamp,
}

impl SplitWatermarks {
    /// Tracks `splits` splits with the watermark expression `expr`.
    pub fn new(expr: Arc<dyn PhysicalExpr>, splits: usize) -> Self {
        SplitWatermarks {
            expr,
            splits: vec![Some(Timestamp::MIN); splits],
            emitted: Timestamp::MIN,
        }
    }

    /// Takes in rows of `split`; returns a new watermark if the source's advanced.
    pub fn observe(&mut self, split: usize, rows: &RecordBatch) -> Result<Option<Timestamp>> {
        let values = evaluate(&self.expr, rows)?;
        let millis = cast(&values, &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let millis = cast(&millis, &DataType::Int64)?;
        let millis = millis
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("cast to Int64");
        if let Some(m) = max(millis)
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
