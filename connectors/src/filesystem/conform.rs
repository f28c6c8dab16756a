//! Shapes the batches read from a self-describing file (Parquet, Avro) as the table's
//! rows: columns matched by name, a column the file lacks (or the query does not read)
//! NULL, another type cast to the table's, and a type that cannot be read as the table's
//! (text as a number) refused naming the file and column.

use arrow::array::{ArrayRef, new_null_array};
use arrow::compute::{CastOptions, can_cast_types, cast_with_options};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use eddy_common::{EddyError, Result};

/// Where a table column comes from in a file's batches.
#[derive(Debug, Clone)]
enum ColumnSource {
    /// The batch's column at this index, cast to the table's type when it differs.
    File(usize),
    /// The file lacks the column, or the query does not read it: nulls.
    Missing,
}

/// How a file's batches become the table's rows.
#[derive(Debug)]
pub struct Conform {
    columns: Vec<ColumnSource>,
    table: SchemaRef,
    shown: String,
}

impl Conform {
    /// How batches holding the columns `batch_columns` (by name, in order) of a file with
    /// `file_schema` become rows of `table`; fails, naming the file `shown` and the
    /// column, where a column of the table (read or not) cannot be read as the table's
    /// type.
    pub fn new(
        file_schema: &Schema,
        table: &SchemaRef,
        batch_columns: &[&str],
        shown: &str,
    ) -> Result<Self> {
        for field in table.fields() {
            let Ok(found) = file_schema.field_with_name(field.name()) else {
                continue;
            };
            if !readable_as(found.data_type(), field.data_type()) {
                return Err(EddyError::UnreadableFile {
                    file: shown.to_string(),
                    message: format!(
                        "column '{}' is {} in the file, which cannot be read as the table's {}",
                        field.name(),
                        found.data_type(),
                        field.data_type()
                    ),
                });
            }
        }
        let columns = table.fields().iter().map(|field| {
            match batch_columns.iter().position(|name| name == field.name()) {
                Some(at) => ColumnSource::File(at),
                None => ColumnSource::Missing,
            }
        });
        Ok(Conform {
            columns: columns.collect(),
            table: table.clone(),
            shown: shown.to_string(),
        })
    }

    /// The file, as errors name it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// A batch read from the file, as the table's rows.
    pub fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let strict = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let columns = self
            .columns
            .iter()
            .zip(self.table.fields())
            .map(|(source, field)| match source {
                ColumnSource::Missing => Ok(new_null_array(field.data_type(), batch.num_rows())),
                ColumnSource::File(i) if batch.column(*i).data_type() == field.data_type() => {
                    Ok(batch.column(*i).clone())
                }
                ColumnSource::File(i) => {
                    cast_with_options(batch.column(*i), field.data_type(), &strict).map_err(|e| {
                        EddyError::UnreadableFile {
                            file: self.shown.clone(),
                            message: format!("column '{}': {e}", field.name()),
                        }
                    })
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            self.table.clone(),
            columns,
            &options,
        )?)
    }
}

/// Whether a file column of type `found` is read as `wanted`: the same type, or one
/// Arrow casts to it without turning text into numbers or times (or back).
fn readable_as(found: &DataType, wanted: &DataType) -> bool {
    let text = |t: &DataType| {
        matches!(
            t,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..)
        )
    };
    found == wanted || (can_cast_types(found, wanted) && text(found) == text(wanted))
}
