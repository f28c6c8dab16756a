//! The metadata a filesystem table reads, with Flink's keys: `file.path` (the path of the
//! file a row was read from, as Flink gives it: without scheme or bucket), `file.name`,
//! `file.size` (in bytes) and `file.modification-time`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::chunk::Chunk;
use object_store::path::Path;

use crate::metadata::{ReadableMetadata, append_columns, repeated_text, timestamp_ltz, utc_millis};

/// Every key and its type.
pub(super) fn readable() -> Vec<ReadableMetadata> {
    vec![
        ReadableMetadata::new("file.path", DataType::Utf8),
        ReadableMetadata::new("file.name", DataType::Utf8),
        ReadableMetadata::new("file.size", DataType::Int64),
        ReadableMetadata::new("file.modification-time", timestamp_ltz()),
    ]
}

/// What the store says of a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct FileFacts {
    /// Its size in bytes.
    pub size: u64,
    /// When it was last modified, in milliseconds since the epoch.
    pub modified_millis: i64,
}

impl From<&object_store::ObjectMeta> for FileFacts {
    fn from(meta: &object_store::ObjectMeta) -> Self {
        FileFacts {
            size: meta.size,
            modified_millis: meta.last_modified.timestamp_millis(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum FileKey {
    Path,
    Name,
    Size,
    ModificationTime,
}

/// The metadata columns a table reads, resolved from its keys once.
#[derive(Debug, Clone, Default)]
pub(super) struct FileColumns(Vec<FileKey>);

impl FileColumns {
    /// The columns of `keys` (checked by the planner against [`readable`]).
    pub fn new(keys: &[String]) -> Result<Self, String> {
        let columns = keys
            .iter()
            .map(|key| match key.as_str() {
                "file.path" => Ok(FileKey::Path),
                "file.name" => Ok(FileKey::Name),
                "file.size" => Ok(FileKey::Size),
                "file.modification-time" => Ok(FileKey::ModificationTime),
                other => Err(format!("no readable metadata '{other}'")),
            })
            .collect::<Result<_, _>>()?;
        Ok(FileColumns(columns))
    }

    /// Whether the table reads no metadata.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `chunk` with the metadata of `path` appended, as `schema` has the columns.
    pub fn append(
        &self,
        chunk: Chunk,
        schema: &SchemaRef,
        path: &Path,
        facts: &FileFacts,
    ) -> Result<Chunk, arrow::error::ArrowError> {
        let rows = chunk.num_rows();
        let columns = self.0.iter().map(|key| -> ArrayRef {
            match key {
                FileKey::Path => repeated_text(&format!("/{path}"), rows),
                FileKey::Name => repeated_text(path.filename().unwrap_or_default(), rows),
                FileKey::Size => Arc::new(Int64Array::from(vec![facts.size as i64; rows])),
                FileKey::ModificationTime => utc_millis(vec![facts.modified_millis; rows]),
            }
        });
        let columns: Vec<ArrayRef> = columns.collect();
        append_columns(chunk, schema, columns)
    }
}
