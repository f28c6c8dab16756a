//! An Iceberg table's metadata file (`*.metadata.json`, format version 2): what the
//! sink reads of it (the schema, the partition spec, the snapshots and what they
//! recorded) and how it appends a snapshot, leaving every other field as it was.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use serde_json::{Value as Json, json};

use super::IcebergError;

/// The snapshot summary key naming the job that committed a snapshot.
pub const JOB_ID: &str = "eddy.job-id";
/// The snapshot summary key naming the transaction (the sink subtask's prepared files of
/// one checkpoint) a snapshot committed: a commit that finds it is already done.
pub const TRANSACTION: &str = "eddy.transaction";
/// The snapshot summary key of the checkpoint whose transaction a snapshot committed.
pub const CHECKPOINT: &str = "eddy.checkpoint-id";

/// What a table the sink creates looks like: the sink's columns, its partition keys
/// (`PARTITIONED BY`) and its primary key.
#[derive(Debug, Clone)]
pub struct TableShape {
    /// The columns written.
    pub columns: arrow::datatypes::SchemaRef,
    /// The columns a created table is partitioned by (identity).
    pub partition_keys: Vec<String>,
    /// The primary key: the equality fields of deletes, and a created table's identifier
    /// fields.
    pub primary_key: Vec<String>,
}

impl TableShape {
    /// Whether column `name` is in the primary key.
    pub fn is_key(&self, name: &str) -> bool {
        self.primary_key.iter().any(|k| k == name)
    }

    /// The columns as they fill the table's fields: the primary key's NOT NULL, as Flink
    /// takes a primary key to be.
    pub fn written_columns(&self) -> Fields {
        self.columns
            .fields()
            .iter()
            .map(|f| match self.is_key(f.name()) {
                true => Arc::new(f.as_ref().clone().with_nullable(false)),
                false => f.clone(),
            })
            .collect()
    }
}

/// A field of an Iceberg schema's top-level struct.
#[derive(Debug, Clone, PartialEq)]
pub struct IcebergField {
    /// The field id.
    pub id: i64,
    /// The name.
    pub name: String,
    /// Whether a value is required (not null).
    pub required: bool,
    /// The type: a primitive's name (`long`, `decimal(10, 2)`, `timestamptz`), or the JSON
    /// of a nested type.
    pub field_type: Json,
}

impl IcebergField {
    /// The Arrow type of the field's values in a data file, `None` for a nested type.
    pub fn arrow_type(&self) -> Option<DataType> {
        let name = self.field_type.as_str()?;
        Some(match name {
            "boolean" => DataType::Boolean,
            "int" => DataType::Int32,
            "long" => DataType::Int64,
            "float" => DataType::Float32,
            "double" => DataType::Float64,
            "string" => DataType::Utf8,
            "binary" => DataType::Binary,
            "date" => DataType::Date32,
            "time" => DataType::Time64(TimeUnit::Microsecond),
            "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, None),
            "timestamptz" => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            "timestamp_ns" => DataType::Timestamp(TimeUnit::Nanosecond, None),
            "timestamptz_ns" => DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
            "uuid" => DataType::FixedSizeBinary(16),
            _ => {
                if let Some(size) = name
                    .strip_prefix("fixed[")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    return size.trim().parse().ok().map(DataType::FixedSizeBinary);
                }
                let args = name.strip_prefix("decimal(")?.strip_suffix(')')?;
                let (precision, scale) = args.split_once(',')?;
                DataType::Decimal128(precision.trim().parse().ok()?, scale.trim().parse().ok()?)
            }
        })
    }

    /// The Arrow field of the column in a data file: the Iceberg type, and the field id
    /// Parquet readers find the column by.
    pub fn arrow_field(&self) -> Option<Field> {
        let field = Field::new(&self.name, self.arrow_type()?, !self.required);
        Some(field.with_metadata([("PARQUET:field_id".to_string(), self.id.to_string())].into()))
    }
}

/// The Iceberg type of a column of `data_type`, for a table Eddy creates.
pub fn iceberg_type(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Boolean => "boolean",
        DataType::Int8 | DataType::Int16 | DataType::Int32 => "int",
        DataType::Int64 => "long",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary",
        DataType::Date32 => "date",
        DataType::Time32(_) | DataType::Time64(_) => "time",
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "timestamp_ns",
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "timestamptz_ns",
        DataType::Timestamp(_, None) => "timestamp",
        DataType::Timestamp(_, Some(_)) => "timestamptz",
        _ => return None,
    })
}

/// A table's metadata file, parsed.
#[derive(Debug, Clone)]
pub struct TableMetadata {
    json: Json,
}

impl TableMetadata {
    /// Reads a metadata file; `file` names it in errors.
    pub fn parse(bytes: &[u8], file: &str) -> Result<Self, IcebergError> {
        let json: Json = serde_json::from_slice(bytes).map_err(|e| IcebergError::Unreadable {
            file: file.to_string(),
            message: format!("not a table metadata file: {e}"),
        })?;
        TableMetadata::from_json(json, file)
    }

    /// Metadata as JSON (a REST catalog's answer); `file` names it in errors.
    pub fn from_json(json: Json, file: &str) -> Result<Self, IcebergError> {
        let metadata = TableMetadata { json };
        match metadata.json.get("format-version").and_then(Json::as_i64) {
            Some(2) => Ok(metadata),
            Some(version) => Err(IcebergError::Unsupported(format!(
                "Iceberg format version {version} (Eddy writes version 2 tables; upgrade the \
                 table with 'format-version' = '2')"
            ))),
            None => Err(IcebergError::Unreadable {
                file: file.to_string(),
                message: "no 'format-version'".into(),
            }),
        }
    }

    /// The metadata of a new, empty version-2 table at `location`, shaped as `shape` has
    /// it: field ids from 1, in column order; partitioned by the identity of its partition
    /// keys (as Flink creates a table `PARTITIONED BY` them); its primary key the
    /// identifier fields (required, as Iceberg has them).
    pub fn create(location: &str, shape: &TableShape, now_ms: i64) -> Result<Self, IcebergError> {
        let schema = &shape.columns;
        let mut fields = Vec::with_capacity(schema.fields().len());
        let mut identifiers = Vec::new();
        for (index, field) in schema.fields().iter().enumerate() {
            let field_type = iceberg_type(field.data_type()).map(Json::from);
            let field_type = match (field_type, field.data_type()) {
                (Some(t), _) => t,
                (None, DataType::Decimal128(p, s)) => json!(format!("decimal({p}, {s})")),
                (None, other) => {
                    return Err(IcebergError::Unsupported(format!(
                        "column '{}' of type {other} in an Iceberg table",
                        field.name()
                    )));
                }
            };
            let identifier = shape.is_key(field.name());
            if identifier {
                identifiers.push(index + 1);
            }
            fields.push(json!({
                "id": index + 1,
                "name": field.name(),
                "required": identifier || !field.is_nullable(),
                "type": field_type,
            }));
        }
        let partition_keys = &shape.partition_keys;
        let spec = identity_spec(schema, partition_keys)?;
        let mut schema_json = json!({"type": "struct", "schema-id": 0, "fields": fields});
        if !identifiers.is_empty() {
            schema_json["identifier-field-ids"] = json!(identifiers);
        }
        let json = json!({
            "format-version": 2,
            "table-uuid": uuid::Uuid::new_v4().to_string(),
            "location": location,
            "last-sequence-number": 0,
            "last-updated-ms": now_ms,
            "last-column-id": schema.fields().len(),
            "current-schema-id": 0,
            "schemas": [schema_json],
            "default-spec-id": 0,
            "last-partition-id": 999 + partition_keys.len(),
            "partition-specs": [spec],
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": -1,
            "refs": {},
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
        });
        Ok(TableMetadata { json })
    }

    /// The file's JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(&self.json).unwrap_or_default()
    }

    /// The table's uuid.
    pub fn uuid(&self) -> Option<&str> {
        self.json.get("table-uuid").and_then(Json::as_str)
    }

    /// The table's base location.
    pub fn location(&self) -> Result<&str, IcebergError> {
        self.json
            .get("location")
            .and_then(Json::as_str)
            .map(|l| l.trim_end_matches('/'))
            .ok_or_else(|| IcebergError::Metadata("no 'location'".into()))
    }

    /// The current schema's JSON.
    fn current_schema(&self) -> Result<&Json, IcebergError> {
        let id = self.json.get("current-schema-id").and_then(Json::as_i64);
        self.json
            .get("schemas")
            .and_then(Json::as_array)
            .and_then(|schemas| {
                schemas
                    .iter()
                    .find(|s| s.get("schema-id").and_then(Json::as_i64) == id)
            })
            .ok_or_else(|| IcebergError::Metadata("no current schema".into()))
    }

    /// The current schema's id and its JSON text (what manifests record).
    pub fn schema_json(&self) -> Result<(i64, String), IcebergError> {
        let schema = self.current_schema()?;
        let id = schema.get("schema-id").and_then(Json::as_i64).unwrap_or(0);
        Ok((id, schema.to_string()))
    }

    /// The current schema's top-level fields.
    pub fn fields(&self) -> Result<Vec<IcebergField>, IcebergError> {
        let fields = self
            .current_schema()?
            .get("fields")
            .and_then(Json::as_array)
            .ok_or_else(|| IcebergError::Metadata("a schema without fields".into()))?;
        fields
            .iter()
            .map(|field| {
                Ok(IcebergField {
                    id: field.get("id").and_then(Json::as_i64).ok_or_else(|| {
                        IcebergError::Metadata(format!("a field without an id: {field}"))
                    })?,
                    name: field
                        .get("name")
                        .and_then(Json::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    required: field.get("required").and_then(Json::as_bool) == Some(true),
                    field_type: field.get("type").cloned().unwrap_or(Json::Null),
                })
            })
            .collect()
    }

    /// The default partition spec's id and fields (JSON as the metadata has them).
    pub fn default_partition_spec(&self) -> Result<(i64, Json), IcebergError> {
        let id = self
            .json
            .get("default-spec-id")
            .and_then(Json::as_i64)
            .unwrap_or(0);
        let specs = self.json.get("partition-specs").and_then(Json::as_array);
        let spec = specs
            .into_iter()
            .flatten()
            .find(|spec| spec.get("spec-id").and_then(Json::as_i64) == Some(id));
        match spec {
            Some(spec) => Ok((id, spec.get("fields").cloned().unwrap_or(json!([])))),
            None if id == 0 => Ok((0, json!([]))),
            None => Err(IcebergError::Metadata(format!(
                "no partition spec {id}, the default"
            ))),
        }
    }

    fn snapshots(&self) -> impl Iterator<Item = &Json> {
        let snapshots = self.json.get("snapshots").and_then(Json::as_array);
        snapshots.into_iter().flatten()
    }

    /// The current snapshot of the main branch, if the table has one.
    pub fn current_snapshot(&self) -> Option<&Json> {
        let id = self
            .json
            .get("current-snapshot-id")
            .and_then(Json::as_i64)?;
        self.snapshots()
            .find(|s| s.get("snapshot-id").and_then(Json::as_i64) == Some(id))
    }

    /// Whether a snapshot still in the metadata committed `transaction`.
    pub fn has_transaction(&self, transaction: &str) -> bool {
        self.snapshots().any(|snapshot| {
            snapshot
                .pointer(&format!("/summary/{TRANSACTION}"))
                .and_then(Json::as_str)
                == Some(transaction)
        })
    }

    /// The transactions of job `job` that snapshots still in the metadata committed.
    pub fn committed_transactions(&self, job: &str) -> HashSet<String> {
        self.snapshots()
            .filter(|s| {
                s.pointer(&format!("/summary/{JOB_ID}"))
                    .and_then(Json::as_str)
                    == Some(job)
            })
            .filter_map(|s| {
                s.pointer(&format!("/summary/{TRANSACTION}"))
                    .and_then(Json::as_str)
            })
            .map(str::to_string)
            .collect()
    }

    /// When the oldest snapshot still in the metadata was committed, if older snapshots
    /// have expired (it names a parent the metadata no longer has): a commit before then
    /// may have expired with them, a later one is still recorded (snapshots expire oldest
    /// first). `None` when no snapshot ever expired: every commit is still recorded.
    pub fn expired_before_ms(&self) -> Option<i64> {
        let oldest = self
            .snapshots()
            .min_by_key(|s| s.get("timestamp-ms").and_then(Json::as_i64))?;
        let parent = oldest.get("parent-snapshot-id").and_then(Json::as_i64)?;
        let present = self
            .snapshots()
            .any(|s| s.get("snapshot-id").and_then(Json::as_i64) == Some(parent));
        match present {
            true => None,
            false => oldest.get("timestamp-ms").and_then(Json::as_i64),
        }
    }

    /// The sequence number the next snapshot gets.
    pub fn next_sequence_number(&self) -> i64 {
        self.json
            .get("last-sequence-number")
            .and_then(Json::as_i64)
            .unwrap_or(0)
            + 1
    }

    /// This metadata with `snapshot` appended and made current on the main branch; the
    /// file this metadata was read from (`previous`) joins the metadata log.
    pub fn with_snapshot(&self, snapshot: Json, previous: &str, now_ms: i64) -> Self {
        let mut json = self.json.clone();
        let id = snapshot.get("snapshot-id").cloned().unwrap_or(Json::Null);
        let sequence = snapshot
            .get("sequence-number")
            .cloned()
            .unwrap_or(Json::Null);
        let previous_updated = json
            .get("last-updated-ms")
            .cloned()
            .unwrap_or(json!(now_ms));
        push(&mut json, "snapshots", snapshot);
        push(
            &mut json,
            "snapshot-log",
            json!({"timestamp-ms": now_ms, "snapshot-id": id}),
        );
        push(
            &mut json,
            "metadata-log",
            json!({"timestamp-ms": previous_updated, "metadata-file": previous}),
        );
        json["current-snapshot-id"] = id.clone();
        json["last-sequence-number"] = sequence;
        json["last-updated-ms"] = json!(now_ms);
        if !json.get("refs").is_some_and(Json::is_object) {
            json["refs"] = json!({});
        }
        json["refs"]["main"] = json!({"snapshot-id": id, "type": "branch"});
        TableMetadata { json }
    }
}

fn push(json: &mut Json, key: &str, value: Json) {
    match json.get_mut(key).and_then(Json::as_array_mut) {
        Some(array) => array.push(value),
        None => json[key] = json!([value]),
    }
}

/// A partition spec (id 0) of the identity of columns `keys` of `schema`.
pub fn identity_spec(schema: &Schema, keys: &[String]) -> Result<Json, IcebergError> {
    let fields = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let source = schema
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(key))
                .ok_or_else(|| {
                    IcebergError::Schema(format!("partition column '{key}' is not a column"))
                })?;
            Ok(
                json!({"source-id": source + 1, "field-id": 1000 + i, "name": key,
                "transform": "identity"}),
            )
        })
        .collect::<Result<Vec<_>, IcebergError>>()?;
    Ok(json!({"spec-id": 0, "fields": fields}))
}

/// Matches a table's columns to the Iceberg schema's fields (by name, any case): each
/// column's type must widen to its field's, a nullable column cannot fill a required
/// field, and every required field needs a column. Returns each column's field.
pub fn check_columns(
    columns: &Fields,
    fields: &[IcebergField],
) -> Result<Vec<(usize, IcebergField)>, IcebergError> {
    let mut written = Vec::with_capacity(columns.len());
    for (index, column) in columns.iter().enumerate() {
        let field = fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(column.name()))
            .ok_or_else(|| {
                IcebergError::Schema(format!(
                    "column '{}' is not in the Iceberg table (its columns: {})",
                    column.name(),
                    fields
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let Some(target) = field.arrow_type() else {
            return Err(IcebergError::Unsupported(format!(
                "writing Iceberg field '{}' of type {}",
                field.name, field.field_type
            )));
        };
        if !widens_to(column.data_type(), &target) {
            return Err(IcebergError::Schema(format!(
                "column '{}' is {} but Iceberg field '{}' is {}",
                column.name(),
                column.data_type(),
                field.name,
                field.field_type
            )));
        }
        if field.required && column.is_nullable() {
            return Err(IcebergError::Schema(format!(
                "column '{}' may be NULL but Iceberg field '{}' is required (declare the \
                 column NOT NULL)",
                column.name(),
                field.name
            )));
        }
        written.push((index, field.clone()));
    }
    if let Some(missing) = fields
        .iter()
        .find(|f| f.required && !written.iter().any(|(_, w)| w.id == f.id))
    {
        return Err(IcebergError::Schema(format!(
            "the Iceberg table's required field '{}' has no column",
            missing.name
        )));
    }
    Ok(written)
}

/// Whether values of `from` are written as `to` without losing anything.
fn widens_to(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    match (from, to) {
        _ if from == to => true,
        (Int8 | Int16, Int32) | (Int8 | Int16 | Int32, Int64) | (Float32, Float64) => true,
        (LargeUtf8 | Utf8View, Utf8) | (LargeBinary | BinaryView, Binary) => true,
        (Time32(_) | Time64(TimeUnit::Microsecond), Time64(TimeUnit::Microsecond)) => true,
        (Timestamp(unit, from_zone), Timestamp(to_unit, to_zone)) => {
            let finer_or_equal = match to_unit {
                TimeUnit::Nanosecond => true,
                TimeUnit::Microsecond => *unit != TimeUnit::Nanosecond,
                _ => false,
            };
            finer_or_equal && from_zone.is_some() == to_zone.is_some()
        }
        (Decimal128(p, s), Decimal128(to_p, to_s)) => s == to_s && p <= to_p,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_checked_against_the_iceberg_schema_by_name_and_type() {
        let fields = vec![
            IcebergField {
                id: 1,
                name: "id".into(),
                required: true,
                field_type: json!("long"),
            },
            IcebergField {
                id: 2,
                name: "ts".into(),
                required: false,
                field_type: json!("timestamp"),
            },
            IcebergField {
                id: 3,
                name: "price".into(),
                required: false,
                field_type: json!("decimal(10, 2)"),
            },
        ];
        let columns = |cols: Vec<Field>| Fields::from(cols);
        let ok = columns(vec![
            Field::new("ID", DataType::Int32, false),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("price", DataType::Decimal128(8, 2), true),
        ]);
        let written = check_columns(&ok, &fields).unwrap();
        assert_eq!(
            written.iter().map(|(_, f)| f.id).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let cases = [
            (Field::new("id", DataType::Int64, true), "required"),
            (
                Field::new("id", DataType::Utf8, false),
                "is Utf8 but Iceberg field 'id' is",
            ),
            (
                Field::new("other", DataType::Int64, false),
                "not in the Iceberg table",
            ),
        ];
        for (column, message) in cases {
            let error = check_columns(&columns(vec![column]), &fields).unwrap_err();
            assert!(error.to_string().contains(message), "{error}");
        }
        let without_id = columns(vec![Field::new("ts", DataType::Date32, true)]);
        assert!(check_columns(&without_id, &fields).is_err());
    }

    #[test]
    fn a_snapshot_appended_becomes_current_and_records_its_transaction() {
        let schema = Schema::new(vec![Field::new("v", DataType::Int64, true)]);
        let shape = TableShape {
            columns: Arc::new(schema),
            partition_keys: Vec::new(),
            primary_key: Vec::new(),
        };
        let table = TableMetadata::create("file:///tmp/t", &shape, 1).unwrap();
        assert!(table.current_snapshot().is_none());
        assert_eq!(table.next_sequence_number(), 1);
        let snapshot = json!({
            "snapshot-id": 7, "sequence-number": 1, "timestamp-ms": 5,
            "manifest-list": "file:///tmp/t/metadata/snap-7.avro",
            "summary": {"operation": "append", JOB_ID: "j", TRANSACTION: "j-x-0-3"},
        });
        let next = table.with_snapshot(snapshot, "file:///tmp/t/metadata/v1.json", 9);
        let reread = TableMetadata::parse(&next.to_bytes(), "v2").unwrap();
        assert_eq!(reread.current_snapshot().unwrap()["snapshot-id"], 7);
        assert!(reread.has_transaction("j-x-0-3"));
        assert!(!reread.has_transaction("j-x-0-4"));
        assert_eq!(reread.committed_transactions("j").len(), 1);
        assert_eq!(reread.next_sequence_number(), 2);
        // Its first snapshot: none expired.
        assert_eq!(reread.expired_before_ms(), None);
        let mut expired = reread.clone();
        expired.json["snapshots"][0]["parent-snapshot-id"] = json!(3);
        assert_eq!(expired.expired_before_ms(), Some(5));
        assert_eq!(reread.json["refs"]["main"]["snapshot-id"], 7);
    }
}
