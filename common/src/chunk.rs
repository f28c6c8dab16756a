//! Columnar chunks of changelog rows: an Arrow [`RecordBatch`] plus one [`Op`] per row.

use arrow::array::{Array, ArrayRef, BooleanArray, UInt8Array, UInt32Array};
use arrow::compute::{filter, filter_record_batch, take, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::Result;

/// The change a row carries, as in Flink's `RowKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// `+I`: a new row.
    Insert = 0,
    /// `-U`: retraction of the previous value of an updated row.
    UpdateBefore = 1,
    /// `+U`: the new value of an updated row.
    UpdateAfter = 2,
    /// `-D`: a deleted row.
    Delete = 3,
}

impl Op {
    /// The short form Flink prints: `+I`, `-U`, `+U`, `-D`.
    pub fn short_name(self) -> &'static str {
        match self {
            Op::Insert => "+I",
            Op::UpdateBefore => "-U",
            Op::UpdateAfter => "+U",
            Op::Delete => "-D",
        }
    }

    /// Whether the row adds to a result (`+I`, `+U`) rather than takes away (`-U`, `-D`).
    pub fn is_accumulate(self) -> bool {
        matches!(self, Op::Insert | Op::UpdateAfter)
    }

    /// Decodes the byte stored in an ops column.
    pub fn from_u8(v: u8) -> Op {
        match v {
            1 => Op::UpdateBefore,
            2 => Op::UpdateAfter,
            3 => Op::Delete,
            _ => Op::Insert,
        }
    }
}

/// A chunk of rows travelling between operators. Rows of an append-only chunk are all `+I`
/// and carry no ops column.
#[derive(Debug, Clone)]
pub struct Chunk {
    rows: RecordBatch,
    ops: Option<UInt8Array>,
}

impl Chunk {
    /// An append-only chunk: every row is an insert.
    pub fn inserts(rows: RecordBatch) -> Self {
        Chunk { rows, ops: None }
    }

    /// A chunk with an op per row. `ops.len()` must equal the number of rows.
    pub fn with_ops(rows: RecordBatch, ops: UInt8Array) -> Self {
        debug_assert_eq!(rows.num_rows(), ops.len());
        Chunk {
            rows,
            ops: Some(ops),
        }
    }

    /// A chunk with the given ops, dropping the ops column when all are inserts.
    pub fn from_ops(rows: RecordBatch, ops: Vec<Op>) -> Self {
        if ops.iter().all(|op| *op == Op::Insert) {
            return Chunk::inserts(rows);
        }
        let ops = UInt8Array::from_iter_values(ops.into_iter().map(|op| op as u8));
        Chunk::with_ops(rows, ops)
    }

    /// The rows.
    pub fn rows(&self) -> &RecordBatch {
        &self.rows
    }

    /// The rows' schema.
    pub fn schema(&self) -> SchemaRef {
        self.rows.schema()
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        self.rows.num_rows()
    }

    /// Whether the chunk has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.num_rows() == 0
    }

    /// Whether every row is an insert.
    pub fn is_append_only(&self) -> bool {
        self.ops.is_none()
    }

    /// The op of row `i`.
    pub fn op(&self, i: usize) -> Op {
        match &self.ops {
            None => Op::Insert,
            Some(ops) => Op::from_u8(ops.value(i)),
        }
    }

    /// The ops column, if the chunk has one.
    pub fn ops(&self) -> Option<&UInt8Array> {
        self.ops.as_ref()
    }

    /// Keeps the rows where `predicate` is true (nulls count as false).
    pub fn filter(&self, predicate: &BooleanArray) -> Result<Chunk> {
        let rows = filter_record_batch(&self.rows, predicate)?;
        let ops = match &self.ops {
            None => None,
            Some(ops) => Some(downcast_ops(filter(ops, predicate)?)),
        };
        Ok(Chunk { rows, ops })
    }

    /// Takes the rows at `indices`, in that order.
    pub fn take(&self, indices: &UInt32Array) -> Result<Chunk> {
        let rows = take_record_batch(&self.rows, indices)?;
        let ops = match &self.ops {
            None => None,
            Some(ops) => Some(downcast_ops(take(ops, indices, None)?)),
        };
        Ok(Chunk { rows, ops })
    }

    /// The same ops with other columns (as many rows), e.g. after a projection.
    pub fn with_rows(&self, rows: RecordBatch) -> Chunk {
        Chunk {
            rows,
            ops: self.ops.clone(),
        }
    }
}

fn downcast_ops(array: ArrayRef) -> UInt8Array {
    array
        .as_any()
        .downcast_ref::<UInt8Array>()
        .expect("ops column is UInt8")
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn rows(values: Vec<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values))]).unwrap()
    }

    #[test]
    fn filter_keeps_ops_aligned_with_rows() {
        let chunk = Chunk::from_ops(
            rows(vec![1, 2, 3]),
            vec![Op::Insert, Op::UpdateBefore, Op::UpdateAfter],
        );
        let kept = chunk
            .filter(&BooleanArray::from(vec![false, true, true]))
            .unwrap();
        assert_eq!(kept.num_rows(), 2);
        assert_eq!(kept.op(0), Op::UpdateBefore);
        assert_eq!(kept.op(1), Op::UpdateAfter);
    }

    #[test]
    fn all_insert_ops_make_an_append_only_chunk() {
        let chunk = Chunk::from_ops(rows(vec![1, 2]), vec![Op::Insert, Op::Insert]);
        assert!(chunk.is_append_only());
        let taken = chunk.take(&UInt32Array::from(vec![1])).unwrap();
        assert_eq!(taken.op(0), Op::Insert);
    }
}
