//! The metadata a `postgres-cdc` table can read, as Flink CDC names it: `table_name`,
//! `schema_name`, `database_name`, `op_ts` (when the change committed; 0 for a row of the
//! snapshot) and `row_kind` (`+I`, `-U`, `+U`, `-D`).

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::chunk::Chunk;

use super::protocol::POSTGRES_EPOCH_MICROS;
use crate::metadata::{ReadableMetadata, append_columns, repeated_text, timestamp_ltz, utc_millis};

/// Every key and its type.
pub(crate) fn readable() -> Vec<ReadableMetadata> {
    let timestamp = timestamp_ltz();
    [
        ("table_name", DataType::Utf8),
        ("schema_name", DataType::Utf8),
        ("database_name", DataType::Utf8),
        ("op_ts", timestamp),
        ("row_kind", DataType::Utf8),
    ]
    .into_iter()
    .map(|(key, data_type)| ReadableMetadata::new(key, data_type))
    .collect()
}

/// Milliseconds since the Unix epoch of a commit time in PostgreSQL's microseconds.
pub(crate) fn epoch_millis(postgres_micros: i64) -> i64 {
    (postgres_micros + POSTGRES_EPOCH_MICROS).div_euclid(1000)
}

/// What the metadata columns are filled from.
pub(crate) struct Names<'a> {
    pub table: &'a str,
    pub schema: &'a str,
    pub database: &'a str,
}

/// `chunk` (the physical columns) with the metadata columns `keys` appended, as `schema`
/// has them; `times` holds each row's `op_ts`.
pub(crate) fn append(
    chunk: Chunk,
    schema: &SchemaRef,
    keys: &[String],
    names: &Names<'_>,
    times: &[i64],
) -> Result<Chunk, String> {
    let rows = chunk.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(keys.len());
    for key in keys {
        columns.push(match key.as_str() {
            "table_name" => repeated_text(names.table, rows),
            "schema_name" => repeated_text(names.schema, rows),
            "database_name" => repeated_text(names.database, rows),
            "op_ts" => utc_millis(times.to_vec()),
            "row_kind" => Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| chunk.op(i).short_name()),
            )),
            other => return Err(format!("no metadata '{other}'")),
        });
    }
    append_columns(chunk, schema, columns).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_times_count_from_postgres_epoch() {
        assert_eq!(epoch_millis(0), 946_684_800_000);
        assert_eq!(epoch_millis(1_500), 946_684_800_001);
    }
}
