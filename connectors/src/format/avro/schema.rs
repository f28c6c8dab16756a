//! The Avro schema of a table, derived from its columns as Flink derives it
//! (`AvroSchemaConverter`): a record `org.apache.flink.avro.generated.record`, a nullable
//! column a union `["null", T]` with default `null`, a ROW a nested record named after the
//! path to it, TIMESTAMP(≤3) `timestamp-millis`, DECIMAL `bytes` with `decimal`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use arrow_avro::schema::SCHEMA_METADATA_KEY;
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
    let (namespace, name) = split_name(name);
    Ok(json!({"type": "record", "name": name, "namespace": namespace, "fields": out}))
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
        // An ARRAY's element records are named as the ARRAY column's ROW would be.
        DataType::List(element) => {
            let items = value_type(element, &format!("{column}[]"), name, legacy)?;
            match element.is_nullable() {
                true => json!({"type": "array", "items": ["null", items]}),
                false => json!({"type": "array", "items": items}),
            }
        }
        _ => return Err(unsupported("no Avro type")),
    })
}

/// The Avro schema (JSON) of Debezium's change envelope around rows of `fields`, as the
/// reader of `debezium-avro-confluent` reads it: `before` and `after` of one row record
/// (defined once, as Debezium defines it), and `op`.
pub fn envelope_schema(fields: &Fields, legacy_timestamps: bool) -> Result<String, Unsupported> {
    let row_name = format!("{RECORD_NAME}_before");
    let row = record(fields, &row_name, "", legacy_timestamps)?;
    let envelope = json!({
        "type": "record",
        "name": RECORD_NAME,
        "fields": [
            {"name": "before", "type": ["null", row], "default": null},
            {"name": "after", "type": ["null", row_name], "default": null},
            {"name": "op", "type": "string"},
        ]
    });
    Ok(envelope.to_string())
}

/// A writer's schema with its records named as the table's schema (of `fields`, or of
/// Debezium's envelope around them) names them: Avro's resolution, as Java's (and so
/// Flink's) applies it, reads a record by another's fields whatever its name, where
/// `arrow-avro` asks the names to match. Only the top-level record and the records of the
/// table's ROW columns (and the envelope's row) are renamed, definitions and references
/// alike; names do not change a record's bytes.
pub fn named_as_table(
    writer: &str,
    fields: &Fields,
    envelope: bool,
) -> Result<String, serde_json::Error> {
    let mut schema: Value = serde_json::from_str(writer)?;
    qualify(&mut schema, "");
    let mut names = HashMap::new();
    match envelope {
        false => collect_names(&schema, RECORD_NAME, fields, &mut names),
        true => {
            let row_name = format!("{RECORD_NAME}_before");
            if let Some(name) = definition_name(&schema) {
                names.insert(name, RECORD_NAME.to_string());
            }
            for image in ["before", "after"] {
                if let Some(image_type) = field_type(&schema, image) {
                    collect_names(image_type, &row_name, fields, &mut names);
                }
            }
        }
    }
    rename(&mut schema, &names);
    Ok(schema.to_string())
}

/// The type names that name no defined type: the primitives, and the keywords of the
/// complex types that are not named (`{"type": "array", ...}`).
const PRIMITIVES: &[&str] = &[
    "null", "boolean", "int", "long", "float", "double", "bytes", "string", "array", "map",
];

/// Whether `value` is the definition of a named type.
fn is_definition(value: &serde_json::Map<String, Value>) -> bool {
    matches!(
        value.get("type").and_then(Value::as_str),
        Some("record" | "enum" | "fixed" | "error")
    )
}

/// A full name's namespace and name (`""` for none).
fn split_name(full: &str) -> (&str, &str) {
    full.rsplit_once('.').unwrap_or(("", full))
}

/// Writes every named type's reference by its full name, as Avro resolves it from the
/// enclosing namespace `namespace`, and every definition with its namespace spelled out
/// (`arrow-avro` resolves a dotted definition name as no namespace).
fn qualify(value: &mut Value, namespace: &str) {
    let full = |name: &str, namespace: &str| match (name.contains('.'), namespace) {
        (true, _) | (false, "") => name.to_string(),
        (false, namespace) => format!("{namespace}.{name}"),
    };
    match value {
        Value::String(name) if !PRIMITIVES.contains(&name.as_str()) => {
            *name = full(name, namespace);
        }
        Value::Array(branches) => branches.iter_mut().for_each(|b| qualify(b, namespace)),
        Value::Object(object) if is_definition(object) => {
            let own = object.remove("namespace");
            let own = own.as_ref().and_then(Value::as_str).unwrap_or(namespace);
            let name = object
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = full(name, own);
            let (inner, short) = split_name(&name);
            let inner = inner.to_string();
            object.insert("name".into(), json!(short));
            object.insert("namespace".into(), json!(inner));
            if let Some(Value::Array(fields)) = object.get_mut("fields") {
                for field in fields {
                    if let Some(field_type) = field.get_mut("type") {
                        qualify(field_type, &inner);
                    }
                }
            }
        }
        Value::Object(object) => {
            for key in ["type", "items", "values"] {
                if let Some(inner) = object.get_mut(key) {
                    qualify(inner, namespace);
                }
            }
        }
        _ => {}
    }
}

/// The full name a (qualified) definition, or a union holding one, defines.
fn definition_name(value: &Value) -> Option<String> {
    match value {
        Value::Object(object) if is_definition(object) => {
            let name = object.get("name").and_then(Value::as_str)?;
            match object.get("namespace").and_then(Value::as_str) {
                Some(namespace) if !namespace.is_empty() => Some(format!("{namespace}.{name}")),
                _ => Some(name.to_string()),
            }
        }
        Value::Array(branches) => branches.iter().find_map(definition_name),
        _ => None,
    }
}

/// The type of field `name` of a record (or a union holding one).
fn field_type<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    match record {
        Value::Array(branches) => branches.iter().find_map(|b| field_type(b, name)),
        Value::Object(object) => object
            .get("fields")?
            .as_array()?
            .iter()
            .find(|f| f.get("name").and_then(Value::as_str) == Some(name))?
            .get("type"),
        _ => None,
    }
}

/// Maps the record `schema` defines (if it defines one) to `target`, and the records of
/// its fields that are ROW columns of `fields` to their names below `target`.
fn collect_names(
    schema: &Value,
    target: &str,
    fields: &Fields,
    names: &mut HashMap<String, String>,
) {
    let Some(name) = definition_name(schema) else {
        return;
    };
    names.insert(name, target.to_string());
    for field in fields {
        let nested_target = format!("{target}_{}", field.name());
        match (field.data_type(), field_type(schema, field.name())) {
            (DataType::Struct(nested), Some(nested_type)) => {
                collect_names(nested_type, &nested_target, nested, names);
            }
            (DataType::List(element), Some(list_type)) => {
                if let (DataType::Struct(nested), Some(items)) =
                    (element.data_type(), items_of(list_type))
                {
                    collect_names(items, &nested_target, nested, names);
                }
            }
            _ => {}
        }
    }
}

/// The element type of an array type (or of a union holding one).
fn items_of(value: &Value) -> Option<&Value> {
    match value {
        Value::Array(branches) => branches.iter().find_map(items_of),
        Value::Object(object) if object.get("type").and_then(Value::as_str) == Some("array") => {
            object.get("items")
        }
        _ => None,
    }
}

/// Renames the (qualified) definitions and references `names` maps.
fn rename(value: &mut Value, names: &HashMap<String, String>) {
    match value {
        Value::String(name) => {
            if let Some(new) = names.get(name.as_str()) {
                *name = new.clone();
            }
        }
        Value::Array(branches) => branches.iter_mut().for_each(|b| rename(b, names)),
        Value::Object(object) => {
            if is_definition(object)
                && let Some(full) = definition_name(&Value::Object(object.clone()))
                && let Some(new) = names.get(&full)
            {
                let (namespace, name) = split_name(new);
                object.insert("name".into(), json!(name));
                object.insert("namespace".into(), json!(namespace));
            }
            if let Some(Value::Array(fields)) = object.get_mut("fields") {
                for field in fields {
                    if let Some(field_type) = field.get_mut("type") {
                        rename(field_type, names);
                    }
                }
            }
            for key in ["items", "values"] {
                if let Some(inner) = object.get_mut(key) {
                    rename(inner, names);
                }
            }
            if !is_definition(object)
                && let Some(inner) = object.get_mut("type")
            {
                rename(inner, names);
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
        DataType::List(element) => DataType::List(Arc::new(
            element
                .as_ref()
                .clone()
                .with_data_type(codec_type(element.data_type())),
        )),
        other => other.clone(),
    }
}

/// A table's columns as the Avro encoder takes them: each of its [`codec_type`], the
/// table's Avro schema attached (so the encoder writes that schema, not one of its own).
#[derive(Debug, Clone)]
pub struct EncoderShape {
    schema: SchemaRef,
}

impl EncoderShape {
    /// The shape of `table`'s columns, whose Avro schema is `avro_schema`.
    pub fn new(table: &SchemaRef, avro_schema: &str) -> Self {
        let fields: Vec<_> = table
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_data_type(codec_type(f.data_type())))
            .collect();
        let metadata = [(SCHEMA_METADATA_KEY.to_string(), avro_schema.to_string())].into();
        EncoderShape {
            schema: Arc::new(Schema::new_with_metadata(fields, metadata)),
        }
    }

    /// The columns, with the Avro schema attached.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// `rows` cast to the encoder's types.
    pub fn shape(&self, rows: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let columns = rows
            .columns()
            .iter()
            .zip(self.schema.fields())
            .map(|(column, field)| arrow::compute::cast(column, field.data_type()))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        RecordBatch::try_new(self.schema.clone(), columns)
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
            "name": "record",
            "namespace": "org.apache.flink.avro.generated",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": ["null", "string"], "default": null},
                {"name": "price", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                    "precision": 10, "scale": 2}], "default": null},
                {"name": "ts", "type": ["null", {"type": "long",
                    "logicalType": "timestamp-millis"}], "default": null},
                {"name": "address", "type": ["null", {"type": "record",
                    "name": "record_address", "namespace": "org.apache.flink.avro.generated",
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
