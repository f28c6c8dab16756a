//! Metadata columns (`col TYPE METADATA [FROM 'key'] [VIRTUAL]`): the keys a connector
//! offers, and the pieces every reader uses to append their values after a chunk's
//! physical columns.

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, TimestampMillisecondArray};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;

/// A metadata key a source can read into a `METADATA` column.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadableMetadata {
    /// The key (`METADATA FROM 'key'`).
    pub key: String,
    /// The type of its values.
    pub data_type: DataType,
    /// Why Eddy cannot read a key Flink offers (its type has no Eddy column), if it cannot.
    pub refusal: Option<String>,
}

impl ReadableMetadata {
    /// A key read as `data_type`.
    pub fn new(key: impl Into<String>, data_type: DataType) -> Self {
        ReadableMetadata {
            key: key.into(),
            data_type,
            refusal: None,
        }
    }

    /// A key Flink offers as `sql_type`, which Eddy's columns cannot hold.
    pub fn of_unsupported_type(key: impl Into<String>, sql_type: &str) -> Self {
        let key = key.into();
        let reason = format!(
            "unsupported: metadata '{key}' is {sql_type}, and Eddy has no ARRAY or MAP columns yet"
        );
        Self::refused(key, reason)
    }

    /// A key Flink offers that Eddy cannot read, and why.
    pub fn refused(key: impl Into<String>, reason: String) -> Self {
        ReadableMetadata {
            key: key.into(),
            data_type: DataType::Null,
            refusal: Some(reason),
        }
    }
}

/// `TIMESTAMP_LTZ(3)`, the type of every time a connector's metadata gives.
pub fn timestamp_ltz() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// `value` repeated `rows` times, as a `STRING` column.
pub(crate) fn repeated_text(value: &str, rows: usize) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
        value, rows,
    )))
}

/// Milliseconds since the epoch as a [`timestamp_ltz`] column.
pub(crate) fn utc_millis(values: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from(values).with_timezone("UTC"))
}

/// `chunk` with `metadata` columns after its own, as `schema` (the source's) has them.
pub(crate) fn append_columns(
    chunk: Chunk,
    schema: &SchemaRef,
    metadata: impl IntoIterator<Item = ArrayRef>,
) -> Result<Chunk, ArrowError> {
    let mut columns = chunk.rows().columns().to_vec();
    columns.extend(metadata);
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(chunk.with_rows(batch))
}
