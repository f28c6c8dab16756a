//! A table function joined to its input (`LATERAL TABLE(f(...))`): each row of a chunk
//! repeated once per row the function gives for it, the function's columns beside it; a
//! row keeps its change kind (`+I`, `-U`, `+U`, `-D`) in every joined row. For a `LEFT
//! JOIN` a row the function gives nothing for is kept once, its function columns NULL.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array, UInt32Builder};
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::chunk::Chunk;
use eddy_common::{EddyError, Result};

use super::{Operator, evaluate};

/// The operator.
#[derive(Debug)]
pub struct Correlate {
    call: Arc<dyn PhysicalExpr>,
    keep_unmatched: bool,
    schema: SchemaRef,
    /// Reused index buffers: input rows, and rows of the function's output.
    input_rows: UInt32Builder,
    function_rows: UInt32Builder,
}

impl Correlate {
    /// Joins each row with the rows `call` (a list of rows per row) gives for it, into
    /// `schema` (the input's columns, then the function's).
    pub fn new(call: Arc<dyn PhysicalExpr>, keep_unmatched: bool, schema: SchemaRef) -> Self {
        Correlate {
            call,
            keep_unmatched,
            schema,
            input_rows: UInt32Builder::new(),
            function_rows: UInt32Builder::new(),
        }
    }

    /// Which input row and which row of the function's output each joined row is made of
    /// (a NULL function row pads an unmatched input row).
    fn pairs(&mut self, lists: &arrow::array::ListArray) -> Result<(UInt32Array, UInt32Array)> {
        let offsets = lists.value_offsets();
        for row in 0..lists.len() {
            let (start, end) = (offsets[row], offsets[row + 1]);
            let row = index(row)?;
            if lists.is_null(row as usize) || start == end {
                if self.keep_unmatched {
                    self.input_rows.append_value(row);
                    self.function_rows.append_null();
                }
                continue;
            }
            for produced in start..end {
                self.input_rows.append_value(row);
                self.function_rows.append_value(index(produced as usize)?);
            }
        }
        Ok((self.input_rows.finish(), self.function_rows.finish()))
    }
}

fn index(i: usize) -> Result<u32> {
    u32::try_from(i).map_err(|_| EddyError::Internal(format!("row {i} of a chunk")))
}

impl Operator for Correlate {
    fn process(&mut self, chunk: Chunk, out: &mut Vec<Chunk>) -> Result<()> {
        let lists = evaluate(&self.call, chunk.rows())?;
        let lists = lists.as_list_opt::<i32>().ok_or_else(|| {
            EddyError::Plan(format!(
                "a table function gave {} values, not lists of rows",
                lists.data_type()
            ))
        })?;
        let produced = lists
            .values()
            .as_struct_opt()
            .ok_or_else(|| EddyError::Plan("a table function's rows are not rows".into()))?;
        let (input_rows, function_rows) = self.pairs(lists)?;
        if input_rows.is_empty() {
            return Ok(());
        }
        let joined = chunk.take(&input_rows)?;
        let mut columns: Vec<ArrayRef> = joined.rows().columns().to_vec();
        for column in produced.columns() {
            columns.push(take(column.as_ref(), &function_rows, None)?);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(input_rows.len()));
        let rows = RecordBatch::try_new_with_options(self.schema.clone(), columns, &options)?;
        out.push(joined.with_rows(rows));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, ListArray, StringArray, StructArray};
    use arrow::datatypes::{DataType, Field, Fields, Schema};
    use datafusion_physical_expr::expressions::Column;
    use eddy_common::chunk::Op;

    use super::*;

    /// Input rows `(k, words)`, `words` already the function's lists: the call is the
    /// column itself.
    fn run(keep_unmatched: bool) -> Vec<String> {
        let word = Fields::from(vec![Field::new("w", DataType::Utf8, true)]);
        let item = Arc::new(Field::new("item", DataType::Struct(word.clone()), true));
        let words = StructArray::new(
            word.clone(),
            vec![Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef],
            None,
        );
        // Row 0: [a, b]; row 1: []; row 2: NULL; row 3: [c].
        let offsets = arrow::buffer::OffsetBuffer::new(vec![0, 2, 2, 2, 3].into());
        let nulls = arrow::buffer::NullBuffer::from(vec![true, true, false, true]);
        let lists = ListArray::new(item.clone(), offsets, Arc::new(words), Some(nulls));
        let input = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("words", DataType::List(item), true),
        ]));
        let rows = RecordBatch::try_new(
            input,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(lists),
            ],
        )
        .unwrap();
        let chunk = Chunk::from_ops(rows, vec![Op::Insert, Op::Insert, Op::Delete, Op::Delete]);
        let output = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("words", chunk.schema().field(1).data_type().clone(), true),
            Field::new("w", DataType::Utf8, true),
        ]));
        let mut correlate =
            Correlate::new(Arc::new(Column::new("words", 1)), keep_unmatched, output);
        let mut out = Vec::new();
        correlate.process(chunk, &mut out).unwrap();
        out.iter()
            .flat_map(|c| c.to_pretty_columns(&[0, 2]))
            .collect()
    }

    #[test]
    fn each_row_is_repeated_for_each_produced_row_keeping_its_change() {
        assert_eq!(run(false), ["+I 1 a", "+I 1 b", "-D 4 c"]);
    }

    #[test]
    fn a_left_join_keeps_rows_that_produce_nothing_padded() {
        assert_eq!(
            run(true),
            ["+I 1 a", "+I 1 b", "+I 2 .", "-D 3 .", "-D 4 c"]
        );
    }
}
