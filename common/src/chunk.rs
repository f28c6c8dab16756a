//! Columnar chunks of changelog rows: an Arrow [`RecordBatch`] plus one [`Op`] per row.

use arrow::array::{Array, ArrayRef, BooleanArray, StringArray, UInt8Array, UInt32Array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::compute::{filter, filter_record_batch, take, take_record_batch};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow::util::display::{ArrayFormatter, FormatOptions};

use crate::{EddyError, Result};

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

    /// The op of its short form (`+I`, `-U`, `+U`, `-D`).
    pub fn from_short_name(name: &str) -> Option<Op> {
        [Op::Insert, Op::UpdateBefore, Op::UpdateAfter, Op::Delete]
            .into_iter()
            .find(|op| op.short_name() == name)
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

/// How [`Chunk::to_pretty`] writes a NULL, and [`Chunk::from_pretty`] reads one.
const PRETTY_NULL: &str = ".";

impl Chunk {
    /// The rows as text, a line each: the op, then every value (`.` for NULL), separated
    /// by spaces, as tests compare them (RisingWave's `StreamChunk::to_pretty`).
    pub fn to_pretty(&self) -> Vec<String> {
        let all: Vec<usize> = (0..self.rows.num_columns()).collect();
        self.to_pretty_columns(&all)
    }

    /// [`Chunk::to_pretty`] of some of the columns, in the order given.
    pub fn to_pretty_columns(&self, columns: &[usize]) -> Vec<String> {
        let options = FormatOptions::default().with_null(PRETTY_NULL);
        let formatters: Vec<ArrayFormatter<'_>> = columns
            .iter()
            .map(|c| ArrayFormatter::try_new(self.rows.column(*c).as_ref(), &options))
            .collect::<std::result::Result<_, _>>()
            .expect("every Arrow type has a display form");
        (0..self.num_rows())
            .map(|i| {
                let mut line = self.op(i).short_name().to_string();
                for formatter in &formatters {
                    line.push(' ');
                    line.push_str(&formatter.value(i).to_string());
                }
                line
            })
            .collect()
    }

    /// A chunk of `schema` from lines as [`Chunk::to_pretty`] writes them: an op, then a
    /// value per column (`.` for NULL), read as its column's type. Blank lines are skipped;
    /// a value cannot hold a space.
    pub fn from_pretty(schema: SchemaRef, text: &str) -> Result<Chunk> {
        let bad = |message: String| EddyError::Internal(format!("a pretty chunk: {message}"));
        let width = schema.fields().len();
        let mut ops = Vec::new();
        let mut values: Vec<Vec<Option<&str>>> = vec![Vec::new(); width];
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let mut words = line.split_whitespace();
            let op = words.next().unwrap_or_default();
            ops.push(Op::from_short_name(op).ok_or_else(|| bad(format!("no op in '{line}'")))?);
            let row: Vec<&str> = words.collect();
            if row.len() != width {
                return Err(bad(format!(
                    "'{line}' has {} values, not {width}",
                    row.len()
                )));
            }
            for (column, value) in values.iter_mut().zip(row) {
                column.push((value != PRETTY_NULL).then_some(value));
            }
        }
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let columns = schema
            .fields()
            .iter()
            .zip(values)
            .map(|(field, texts)| {
                let texts = StringArray::from(texts);
                cast_with_options(&texts, field.data_type(), &options)
                    .map_err(|e| bad(format!("column '{}': {e}", field.name())))
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = RecordBatch::try_new_with_options(
            schema,
            columns,
            &arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(ops.len())),
        )?;
        Ok(Chunk::from_ops(rows, ops))
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
    fn pretty_text_reads_back_as_the_chunk_it_shows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Float64, true),
        ]));
        let text = "
            +I 1 a 1.5
            -U 1 a 1.5
            +U 1 b .
            -D 2 . -0.25";
        let chunk = Chunk::from_pretty(schema.clone(), text).unwrap();
        assert_eq!(chunk.num_rows(), 4);
        assert_eq!(chunk.op(2), Op::UpdateAfter);
        assert!(chunk.rows().column(2).is_null(2));
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(chunk.to_pretty(), lines);
        for (bad, expected) in [
            ("+X 1 a 1.5", "no op"),
            ("+I 1 a", "has 2 values, not 3"),
            ("+I one a 1.5", "column 'id'"),
        ] {
            let error = Chunk::from_pretty(schema.clone(), bad)
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{bad}: {error}");
        }
    }

    #[test]
    fn all_insert_ops_make_an_append_only_chunk() {
        let chunk = Chunk::from_ops(rows(vec![1, 2]), vec![Op::Insert, Op::Insert]);
        assert!(chunk.is_append_only());
        let taken = chunk.take(&UInt32Array::from(vec![1])).unwrap();
        assert_eq!(taken.op(0), Op::Insert);
    }
}
