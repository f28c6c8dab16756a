//! Manifests (the data files a snapshot added) and manifest lists (every manifest of a
//! snapshot), as Iceberg's format version 2 writes them: Avro container files whose
//! schemas carry the spec's field ids.

use super::IcebergError;
use super::avro::{Container, Value, read_container, write_container};
use super::partition::{PartitionSpec, PartitionValue};
use super::stats::ColumnStats;

/// What a file the sink wrote holds (a manifest entry's `content`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Rows of the table.
    Data = 0,
    /// Rows of data files that are deleted, by file and position.
    PositionDeletes = 1,
    /// Values of the equality fields whose rows (in files of earlier commits) are deleted.
    EqualityDeletes = 2,
}

impl Content {
    /// The content of its number in a manifest.
    pub fn from_number(number: u64) -> Option<Content> {
        [
            Content::Data,
            Content::PositionDeletes,
            Content::EqualityDeletes,
        ]
        .into_iter()
        .find(|c| *c as u64 == number)
    }
}

/// A data or delete file the sink wrote, as a manifest records it.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    /// What it holds.
    pub content: Content,
    /// Its full location (`s3://…`, `file:///…`).
    pub path: String,
    /// Its rows.
    pub record_count: i64,
    /// Its size in bytes.
    pub size: i64,
    /// Its columns' statistics.
    pub stats: ColumnStats,
    /// Its partition tuple (empty in an unpartitioned table).
    pub partition: Vec<PartitionValue>,
    /// The ids of the fields an equality delete file compares (empty for other files).
    pub equality_ids: Vec<i32>,
}

/// The manifest entry schema of data files (spec `manifest_entry`), the fields of its
/// `partition` record (the partition spec's) in place of `PARTITION_FIELDS`.
const MANIFEST_ENTRY: &str = r#"{"type": "record", "name": "manifest_entry", "fields": [
{"name": "status", "type": "int", "field-id": 0},
{"name": "snapshot_id", "type": ["null", "long"], "default": null, "field-id": 1},
{"name": "sequence_number", "type": ["null", "long"], "default": null, "field-id": 3},
{"name": "file_sequence_number", "type": ["null", "long"], "default": null, "field-id": 4},
{"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
  {"name": "content", "type": "int", "field-id": 134, "doc": "Contents of the file: 0=data, 1=position deletes, 2=equality deletes"},
  {"name": "file_path", "type": "string", "field-id": 100, "doc": "Location URI with FS scheme"},
  {"name": "file_format", "type": "string", "field-id": 101, "doc": "File format name: avro, orc, or parquet"},
  {"name": "partition", "field-id": 102, "type": {"type": "record", "name": "r102", "fields": PARTITION_FIELDS}},
  {"name": "record_count", "type": "long", "field-id": 103, "doc": "Number of records in the file"},
  {"name": "file_size_in_bytes", "type": "long", "field-id": 104, "doc": "Total file size in bytes"},
  {"name": "value_counts", "type": ["null", {"type": "array", "logicalType": "map", "items":
    {"type": "record", "name": "k119_v120", "fields": [{"name": "key", "type": "int", "field-id": 119},
      {"name": "value", "type": "long", "field-id": 120}]}}], "default": null, "field-id": 109},
  {"name": "null_value_counts", "type": ["null", {"type": "array", "logicalType": "map", "items":
    {"type": "record", "name": "k121_v122", "fields": [{"name": "key", "type": "int", "field-id": 121},
      {"name": "value", "type": "long", "field-id": 122}]}}], "default": null, "field-id": 110},
  {"name": "lower_bounds", "type": ["null", {"type": "array", "logicalType": "map", "items":
    {"type": "record", "name": "k126_v127", "fields": [{"name": "key", "type": "int", "field-id": 126},
      {"name": "value", "type": "bytes", "field-id": 127}]}}], "default": null, "field-id": 125},
  {"name": "upper_bounds", "type": ["null", {"type": "array", "logicalType": "map", "items":
    {"type": "record", "name": "k129_v130", "fields": [{"name": "key", "type": "int", "field-id": 129},
      {"name": "value", "type": "bytes", "field-id": 130}]}}], "default": null, "field-id": 128},
  {"name": "equality_ids", "type": ["null", {"type": "array", "items": "int", "element-id": 136}],
    "default": null, "field-id": 135, "doc": "Equality comparison field IDs"}
]}}]}"#;

/// The manifest list entry schema (spec `manifest_file`, version 2).
const MANIFEST_FILE: &str = r#"{"type": "record", "name": "manifest_file", "fields": [
{"name": "manifest_path", "type": "string", "field-id": 500},
{"name": "manifest_length", "type": "long", "field-id": 501},
{"name": "partition_spec_id", "type": "int", "field-id": 502},
{"name": "content", "type": "int", "field-id": 517},
{"name": "sequence_number", "type": "long", "field-id": 515},
{"name": "min_sequence_number", "type": "long", "field-id": 516},
{"name": "added_snapshot_id", "type": "long", "field-id": 503},
{"name": "added_files_count", "type": "int", "field-id": 504},
{"name": "existing_files_count", "type": "int", "field-id": 505},
{"name": "deleted_files_count", "type": "int", "field-id": 506},
{"name": "added_rows_count", "type": "long", "field-id": 512},
{"name": "existing_rows_count", "type": "long", "field-id": 513},
{"name": "deleted_rows_count", "type": "long", "field-id": 514},
{"name": "partitions", "type": ["null", {"type": "array", "element-id": 508, "items":
  {"type": "record", "name": "r508", "fields": [
    {"name": "contains_null", "type": "boolean", "field-id": 509},
    {"name": "contains_nan", "type": ["null", "boolean"], "default": null, "field-id": 518},
    {"name": "lower_bound", "type": ["null", "bytes"], "default": null, "field-id": 510},
    {"name": "upper_bound", "type": ["null", "bytes"], "default": null, "field-id": 511}]}}],
  "default": null, "field-id": 507},
{"name": "key_metadata", "type": ["null", "bytes"], "default": null, "field-id": 519}
]}"#;

/// Status of a manifest entry whose file its snapshot added.
const ADDED: i32 = 1;

/// The bytes of a manifest listing `files` (partitioned by `spec`, all data files or all
/// delete files) as added by `snapshot_id`, for a table whose current schema is `schema`
/// (id and JSON).
pub fn write_manifest(
    files: &[DataFile],
    spec: &PartitionSpec,
    snapshot_id: i64,
    schema: &(i64, String),
) -> Result<Vec<u8>, IcebergError> {
    let entries: Vec<Value> = files
        .iter()
        .map(|file| {
            Value::Record(vec![
                ("status".into(), Value::Int(ADDED)),
                ("snapshot_id".into(), Value::Long(snapshot_id)),
                // Added files inherit the manifest's sequence numbers.
                ("sequence_number".into(), Value::Null),
                ("file_sequence_number".into(), Value::Null),
                ("data_file".into(), data_file_record(file, spec)),
            ])
        })
        .collect();
    let metadata = [
        ("schema", schema.1.clone()),
        ("schema-id", schema.0.to_string()),
        ("partition-spec", spec.fields_json()),
        ("partition-spec-id", spec.id.to_string()),
        ("format-version", "2".to_string()),
        (
            "content",
            if holds_deletes(files) {
                "deletes"
            } else {
                "data"
            }
            .to_string(),
        ),
    ];
    let schema = MANIFEST_ENTRY.replace("PARTITION_FIELDS", &spec.avro_fields().to_string());
    write_container(&schema, &metadata, &entries)
}

/// Whether a manifest of `files` is one of delete files (Iceberg keeps them apart).
fn holds_deletes(files: &[DataFile]) -> bool {
    files.iter().any(|f| f.content != Content::Data)
}

/// A manifest entry's `data_file` record.
fn data_file_record(file: &DataFile, spec: &PartitionSpec) -> Value {
    let equality_ids = match file.content {
        Content::EqualityDeletes => {
            Value::Array(file.equality_ids.iter().map(|id| Value::Int(*id)).collect())
        }
        _ => Value::Null,
    };
    Value::Record(vec![
        ("content".into(), Value::Int(file.content as i32)),
        ("file_path".into(), Value::String(file.path.clone())),
        ("file_format".into(), Value::String("PARQUET".into())),
        ("partition".into(), spec.avro_record(&file.partition)),
        ("record_count".into(), Value::Long(file.record_count)),
        ("file_size_in_bytes".into(), Value::Long(file.size)),
        (
            "value_counts".into(),
            int_map(&file.stats.value_counts, Value::Long),
        ),
        (
            "null_value_counts".into(),
            int_map(&file.stats.null_counts, Value::Long),
        ),
        (
            "lower_bounds".into(),
            int_map(&file.stats.lower_bounds, bytes),
        ),
        (
            "upper_bounds".into(),
            int_map(&file.stats.upper_bounds, bytes),
        ),
        ("equality_ids".into(), equality_ids),
    ])
}

/// A map keyed by field id, as Avro arrays of key-value records (Iceberg's maps with
/// non-string keys).
fn int_map<T: Clone>(entries: &[(i32, T)], value: impl Fn(T) -> Value) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|(key, v)| {
                Value::Record(vec![
                    ("key".into(), Value::Int(*key)),
                    ("value".into(), value(v.clone())),
                ])
            })
            .collect(),
    )
}

fn bytes(value: Vec<u8>) -> Value {
    Value::Bytes(value)
}

/// A manifest list's entry for a manifest of added data files, or of added delete files.
pub struct AddedManifest<'a> {
    /// The manifest's location.
    pub path: String,
    /// Its size in bytes.
    pub length: i64,
    /// The files in it.
    pub files: &'a [DataFile],
}

impl AddedManifest<'_> {
    /// Its entry in the list of snapshot `snapshot_id` (of `sequence_number`).
    fn entry(&self, snapshot_id: i64, sequence_number: i64, spec: &PartitionSpec) -> Value {
        let rows: i64 = self.files.iter().map(|f| f.record_count).sum();
        let content = i32::from(holds_deletes(self.files));
        Value::Record(vec![
            ("manifest_path".into(), Value::String(self.path.clone())),
            ("manifest_length".into(), Value::Long(self.length)),
            ("partition_spec_id".into(), Value::Int(spec.id as i32)),
            ("content".into(), Value::Int(content)),
            ("sequence_number".into(), Value::Long(sequence_number)),
            ("min_sequence_number".into(), Value::Long(sequence_number)),
            ("added_snapshot_id".into(), Value::Long(snapshot_id)),
            (
                "added_files_count".into(),
                Value::Int(self.files.len() as i32),
            ),
            ("existing_files_count".into(), Value::Int(0)),
            ("deleted_files_count".into(), Value::Int(0)),
            ("added_rows_count".into(), Value::Long(rows)),
            ("existing_rows_count".into(), Value::Long(0)),
            ("deleted_rows_count".into(), Value::Long(0)),
            (
                "partitions".into(),
                spec.summaries(self.files.iter().map(|f| f.partition.as_slice())),
            ),
        ])
    }
}

/// A snapshot's manifest list: the manifests of the snapshot it follows (`inherited`,
/// entries of that snapshot's list) and those it adds.
pub struct ManifestList<'a> {
    /// The new snapshot.
    pub snapshot_id: i64,
    /// The snapshot it follows, if any.
    pub parent_id: Option<i64>,
    /// The new snapshot's sequence number.
    pub sequence_number: i64,
    /// The entries of the parent's list.
    pub inherited: Vec<Value>,
    /// The manifests the snapshot adds.
    pub added: Vec<AddedManifest<'a>>,
    /// The spec partitioning their files.
    pub spec: &'a PartitionSpec,
}

impl ManifestList<'_> {
    /// The file's bytes.
    pub fn write(&self) -> Result<Vec<u8>, IcebergError> {
        let mut entries: Vec<Value> = self
            .added
            .iter()
            .map(|m| m.entry(self.snapshot_id, self.sequence_number, self.spec))
            .collect();
        entries.extend(self.inherited.iter().cloned());
        let parent = self
            .parent_id
            .map_or_else(|| "null".to_string(), |id| id.to_string());
        let metadata = [
            ("snapshot-id", self.snapshot_id.to_string()),
            ("parent-snapshot-id", parent),
            ("sequence-number", self.sequence_number.to_string()),
            ("format-version", "2".to_string()),
        ];
        write_container(MANIFEST_FILE, &metadata, &entries)
    }
}

/// The entries of a manifest list (written by Eddy or another writer); `file` names it
/// in errors.
pub fn read_manifest_list(bytes: &[u8], file: &str) -> Result<Vec<Value>, IcebergError> {
    let Container { records, metadata } = read_container(bytes, file)?;
    if let Some(version) = metadata.get("format-version")
        && version.as_slice() != b"2"
    {
        return Err(IcebergError::Unsupported(format!(
            "manifest list '{file}' of format version {}",
            String::from_utf8_lossy(version)
        )));
    }
    for record in &records {
        if record.field("manifest_path").is_none() || record.field("sequence_number").is_none() {
            return Err(IcebergError::Unreadable {
                file: file.to_string(),
                message: "not a version 2 manifest list (no manifest_path or sequence_number)"
                    .into(),
            });
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec of a table `(id long, region string)` partitioned by `region`.
    fn by_region() -> PartitionSpec {
        use arrow::datatypes::{DataType, Field, Schema};
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("region", DataType::Utf8, true),
        ]);
        let shape = super::super::metadata::TableShape {
            columns: std::sync::Arc::new(schema),
            partition_keys: vec!["region".into()],
            primary_key: Vec::new(),
        };
        let metadata =
            super::super::metadata::TableMetadata::create("file:///t", &shape, 0).unwrap();
        PartitionSpec::of(&metadata, &metadata.fields().unwrap()).unwrap()
    }

    #[test]
    fn a_manifest_list_carries_its_parents_manifests_after_the_added_one() {
        let spec = by_region();
        let file = |region: &str| DataFile {
            content: Content::Data,
            path: "file:///t/data/a.parquet".into(),
            record_count: 3,
            size: 100,
            stats: ColumnStats {
                value_counts: vec![(1, 3)],
                null_counts: vec![(1, 0)],
                lower_bounds: vec![(1, vec![1, 0, 0, 0])],
                upper_bounds: vec![(1, vec![9, 0, 0, 0])],
            },
            partition: vec![PartitionValue::String(region.into())],
            equality_ids: Vec::new(),
        };
        let files = vec![file("eu"), file("ap")];
        let schema = (
            0,
            r#"{"type":"struct","schema-id":0,"fields":[]}"#.to_string(),
        );
        let manifest = write_manifest(&files, &spec, 11, &schema).unwrap();
        let entries = read_container(&manifest, "m").unwrap();
        assert_eq!(entries.metadata["content"], b"data");
        assert!(String::from_utf8_lossy(&entries.metadata["partition-spec"]).contains("identity"));
        let file = entries.records[0].field("data_file").unwrap();
        let partition = Value::Record(vec![("region".into(), Value::String("eu".into()))]);
        assert_eq!(file.field("partition"), Some(&partition));
        assert_eq!(
            file.field("file_path"),
            Some(&Value::String("file:///t/data/a.parquet".into()))
        );
        assert_eq!(file.field("record_count"), Some(&Value::Long(3)));
        let upper = Value::Array(vec![Value::Record(vec![
            ("key".into(), Value::Int(1)),
            ("value".into(), Value::Bytes(vec![9, 0, 0, 0])),
        ])]);
        assert_eq!(file.field("upper_bounds"), Some(&upper));
        let list = |snapshot_id, inherited| ManifestList {
            snapshot_id,
            parent_id: None,
            sequence_number: snapshot_id,
            inherited,
            added: vec![AddedManifest {
                path: "file:///t/metadata/m.avro".into(),
                length: manifest.len() as i64,
                files: &files,
            }],
            spec: &spec,
        };
        let first = read_manifest_list(&list(1, vec![]).write().unwrap(), "l1").unwrap();
        let second = read_manifest_list(&list(2, first).write().unwrap(), "l2").unwrap();
        let snapshots: Vec<_> = second
            .iter()
            .map(|e| e.field("added_snapshot_id").and_then(Value::as_long))
            .collect();
        assert_eq!(snapshots, [Some(2), Some(1)]);
        assert_eq!(second[0].field("added_rows_count"), Some(&Value::Long(6)));
        let summary = Value::Array(vec![Value::Record(vec![
            ("contains_null".into(), Value::Boolean(false)),
            ("contains_nan".into(), Value::Null),
            ("lower_bound".into(), Value::Bytes(b"ap".to_vec())),
            ("upper_bound".into(), Value::Bytes(b"eu".to_vec())),
        ])]);
        assert_eq!(second[0].field("partitions"), Some(&summary));
    }

    #[test]
    fn equality_delete_files_go_in_a_delete_manifest_with_their_field_ids() {
        let spec = by_region();
        let delete = DataFile {
            content: Content::EqualityDeletes,
            path: "file:///t/data/d.parquet".into(),
            record_count: 2,
            size: 50,
            stats: ColumnStats::default(),
            partition: vec![PartitionValue::String("eu".into())],
            equality_ids: vec![1, 2],
        };
        let schema = (0, r#"{"type":"struct","schema-id":0,"fields":[]}"#.into());
        let manifest = write_manifest(std::slice::from_ref(&delete), &spec, 5, &schema).unwrap();
        let entries = read_container(&manifest, "m").unwrap();
        assert_eq!(entries.metadata["content"], b"deletes");
        let file = entries.records[0].field("data_file").unwrap();
        assert_eq!(file.field("content"), Some(&Value::Int(2)));
        assert_eq!(
            file.field("equality_ids"),
            Some(&Value::Array(vec![Value::Int(1), Value::Int(2)]))
        );
        let deletes = [delete];
        let list = ManifestList {
            snapshot_id: 5,
            parent_id: None,
            sequence_number: 3,
            inherited: Vec::new(),
            added: vec![AddedManifest {
                path: "file:///t/metadata/d.avro".into(),
                length: manifest.len() as i64,
                files: &deletes,
            }],
            spec: &spec,
        };
        let entries = read_manifest_list(&list.write().unwrap(), "l").unwrap();
        assert_eq!(entries[0].field("content"), Some(&Value::Int(1)));
        assert_eq!(entries[0].field("sequence_number"), Some(&Value::Long(3)));
    }
}
