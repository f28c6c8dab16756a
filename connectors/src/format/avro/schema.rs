//! The Avro schema of a table, derived from its columns as Flink derives it
//! (`AvroSchemaConverter`): a record `org.apache.flink.avro.generated.record`, a nullable
//! column a union `["null", T]` with default `null`, a ROW a nested record named after the
//! path to it, TIMESTAMP(≤3) `timestamp-millis`, DECIMAL `bytes` with `decimal`.

use arrow::datatypes::{DataType, Field, Fields, SchemaRef, TimeUnit};
use serde_json::{Value, json};

/// The name of the top-level record (Flink's).
const RECORD_NAME: &str = "org.apache.flink.avro.generated.record";

/// A column type Avro cannot carry as Flink maps it.
#[derive(Debug, thiserror::Error)]
#[error("column '{column}' of type {sql_type}: {reason}")]
pub struct Unsupported {
    column: String,
    sql_type: String,
    reason: String,
}

/// The Avro schema (JSON) of a record of `fields`. With `legacy_timestamps` (Flink's
/// `avro.timestamp_mapping.legacy`, on by default) TIMESTAMP is `timestamp-millis` and
/// TIMESTAMP_LTZ has no mapping; without, TIMESTAMP is `local-timestamp-*` and
/// TIMESTAMP_LTZ `timestamp-*`.
pub fn table_schema(fields: &Fields, legacy_timestamps: bool) -> Result<String, Unsupported> {
    let record = record(fields, RECORD_NAME, "", legacy_timestamps)?;
    Ok(record.to_string())
}

fn record(fields: &Fields, name: &str, path: &str, legacy: bool) -> Result<Value, Unsupported> {
    let mut out = Vec::with_capacity(fields.len());
    for field in fields {
        let column = match path {
            "" => field.name().clone(),
            _ => format!("{path}.{}", field.name()),
        };
        let nested_name = format!("{name}_{}", field.name());
        let value_type = value_type(field, &column, &nested_name, legacy)?;
        out.push(match field.is_nullable() {
            true => json!({"name": field.name(), "type": ["null", value_type], "default": null}),
            false => json!({"name": field.name(), "type": value_type}),
        });
    }
    Ok(json!({"type": "record", "name": name, "fields": out}))
}

/// The Avro type of a field's non-null values.
fn value_type(field: &Field, column: &str, name: &str, legacy: bool) -> Result<Value, Unsupported> {
    let unsupported = |reason: &str| Unsupported {
        column: column.to_string(),
        sql_type: eddy_common::schema::sql_name(field.data_type()),
        reason: reason.to_string(),
    };
    let logical = |base: &str, logical: &str| json!({"type": base, "logicalType": logical});
    Ok(match field.data_type() {
        DataType::Boolean => json!("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 => json!("int"),
        DataType::Int64 => json!("long"),
        DataType::Float32 => json!("float"),
        DataType::Float64 => json!("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => json!("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => json!("bytes"),
        DataType::Date32 => logical("int", "date"),
        DataType::Decimal128(precision, scale) => {
            json!({"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale})
        }
        DataType::Timestamp(unit, zone) => {
            let local = zone.is_none();
            match (legacy, local, unit) {
                (true, true, TimeUnit::Second | TimeUnit::Millisecond) => {
                    logical("long", "timestamp-millis")
                }
                (true, true, _) => {
                    return Err(unsupported(
                        "Avro (with 'avro.timestamp_mapping.legacy' = 'true', the default) holds \
                         TIMESTAMP of precision 3 at most",
                    ));
                }
                (true, false, _) => {
                    return Err(unsupported(
                        "TIMESTAMP_LTZ has no Avro type unless 'avro.timestamp_mapping.legacy' \
                         = 'false'",
                    ));
                }
                (false, _, unit) => {
                    let prefix = if local {
                        "local-timestamp"
                    } else {
                        "timestamp"
                    };
                    let precision = match unit {
                        TimeUnit::Second | TimeUnit::Millisecond => "millis",
                        TimeUnit::Microsecond => "micros",
                        TimeUnit::Nanosecond => "nanos",
                    };
                    logical("long", &format!("{prefix}-{precision}"))
                }
            }
        }
        DataType::Struct(fields) => record(fields, name, column, legacy)?,
        _ => return Err(unsupported("no Avro type")),
    })
}

/// A writer's schema with its records named as the table's schema names them: Avro's
/// resolution (as Java's, and so Flink's, applies it) reads a record by another's fields
/// whatever its name, where `arrow-avro` asks the names to match. Only the top-level
/// record and the records of the table's ROW columns are renamed; names do not change a
/// record's bytes.
pub fn named_as_table(writer: &str, table: &SchemaRef) -> Result<String, serde_json::Error> {
    let mut schema: Value = serde_json::from_str(writer)?;
    rename_record(&mut schema, RECORD_NAME, table.fields());
    Ok(schema.to_string())
}

/// Names `schema` (a record, or a union holding one) `name`, and its fields' records after
/// `fields`.
fn rename_record(schema: &mut Value, name: &str, fields: &Fields) {
    match schema {
        Value::Array(branches) => {
            for branch in branches {
                rename_record(branch, name, fields);
            }
        }
        Value::Object(record) if record.get("type") == Some(&json!("record")) => {
            record.insert("name".into(), json!(name));
            record.remove("namespace");
            let Some(Value::Array(writer_fields)) = record.get_mut("fields") else {
                return;
            };
            for writer_field in writer_fields {
                let Some(field_name) = writer_field.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let nested = match fields.find(field_name).map(|(_, f)| f.data_type()) {
                    Some(DataType::Struct(nested)) => nested.clone(),
                    _ => continue,
                };
                let nested_name = format!("{name}_{field_name}");
                if let Some(field_type) = writer_field.get_mut("type") {
                    rename_record(field_type, &nested_name, &nested);
                }
            }
        }
        _ => {}
    }
}

/// The Arrow type the Avro codec reads and writes for a column of `data_type`: the
/// column's own, but for the types Avro widens (TINYINT and SMALLINT are `int`, a
/// timestamp in seconds is `timestamp-millis`).
pub fn codec_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Int8 | DataType::Int16 => DataType::Int32,
        DataType::Timestamp(TimeUnit::Second, zone) => {
            DataType::Timestamp(TimeUnit::Millisecond, zone.clone())
        }
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| f.as_ref().clone().with_data_type(codec_type(f.data_type())))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::Schema;

    use super::*;

    #[test]
    fn a_table_is_derived_as_flink_derives_it() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new(
                "address",
                DataType::Struct(vec![Field::new("city", DataType::Utf8, true)].into()),
                true,
            ),
        ]);
        let derived: Value =
            serde_json::from_str(&table_schema(schema.fields(), true).unwrap()).expect("JSON");
        let expected = json!({
            "type": "record",
            "name": "org.apache.flink.avro.generated.record",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": ["null", "string"], "default": null},
                {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                    "precision": 10, "scale": 2}], "default": null},
                {"name": "ts", "type": ["null", {"type": "long",
                    "logicalType": "timestamp-millis"}], "default": null},
                {"name": "address", "type": ["null", {"type": "record",
                    "name": "org.apache.flink.avro.generated.record_address",
                    "fields": [{"name": "city", "type": ["null", "string"], "default": null}]}],
                    "default": null},
            ]
        });
        assert_eq!(derived, expected);
    }

    #[test]
    fn timestamps_follow_the_legacy_mapping_option() {
        let field = |data_type| Fields::from(vec![Field::new("t", data_type, false)]);
        let micros = field(DataType::Timestamp(TimeUnit::Microsecond, None));
        let error = table_schema(&micros, true).unwrap_err().to_string();
        assert!(
            error.contains("column 't'") && error.contains("precision 3"),
            "{error}"
        );
        assert!(
            table_schema(&micros, false)
                .unwrap()
                .contains("local-timestamp-micros")
        );
        let ltz = field(DataType::Timestamp(
            TimeUnit::Millisecond,
            Some("UTC".into()),
        ));
        assert!(table_schema(&ltz, true).is_err());
        assert!(
            table_schema(&ltz, false)
                .unwrap()
                .contains("\"timestamp-millis\"")
        );
    }
}
