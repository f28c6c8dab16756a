//! How a table's columns are read from and written to a message's fields: each column
//! matched by name to a field, its type checked against the field's, its value when the
//! field is absent decided by proto semantics.

use std::collections::HashMap;

use arrow::datatypes::{DataType, Fields};
use prost_reflect::{EnumDescriptor, FieldDescriptor, Kind, MessageDescriptor, Value};

/// Field numbers below this are looked up in a table indexed by the number.
const DENSE_NUMBERS: usize = 4096;

/// A column that cannot be read from or written to the message.
#[derive(Debug, thiserror::Error)]
#[error("column '{column}': {reason}")]
pub struct Mismatch {
    column: String,
    reason: String,
}

/// A field's protobuf type, as far as decoding and encoding differ.
#[derive(Debug, Clone)]
pub enum FieldType {
    /// int32: a varint, sign-extended.
    Int32,
    /// sint32: a zigzag varint.
    Sint32,
    /// uint32: a varint.
    Uint32,
    /// fixed32: 4 bytes, unsigned.
    Fixed32,
    /// sfixed32: 4 bytes, signed.
    Sfixed32,
    /// int64: a varint.
    Int64,
    /// sint64: a zigzag varint.
    Sint64,
    /// uint64: a varint, kept in BIGINT's bits.
    Uint64,
    /// fixed64: 8 bytes, kept in BIGINT's bits.
    Fixed64,
    /// sfixed64: 8 bytes, signed.
    Sfixed64,
    /// float.
    Float,
    /// double.
    Double,
    /// bool.
    Bool,
    /// string (UTF-8).
    String,
    /// bytes.
    Bytes,
    /// An enum, a STRING column of its value names.
    Enum(EnumDescriptor),
    /// A nested message, a ROW column.
    Message(Box<MessagePlan>),
}

/// A column's value when its field is absent.
#[derive(Debug, Clone, PartialEq)]
pub enum Absent {
    /// NULL.
    Null,
    /// An integer (also an enum's number).
    Int(i64),
    /// A floating-point value.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// Text (also an enum's value name).
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A nested message with every field absent.
    Message,
}

/// One column's field.
#[derive(Debug, Clone)]
pub struct ColumnPlan {
    /// The field's number.
    pub number: u32,
    /// The field's type.
    pub field_type: FieldType,
    /// The column's value when the field is absent.
    pub absent: Absent,
    /// Whether an absent field is told from a default one (proto2 fields, proto3
    /// `optional` and oneof fields, messages): NULL writes nothing, a default value is
    /// written; else (proto3 scalars) the default value is not written.
    pub has_presence: bool,
    /// A repeated field, an ARRAY column: every occurrence (or every value of a packed
    /// run) is an element, in order; absent, the ARRAY is empty. `field_type` is the
    /// elements'.
    pub repeated: bool,
    /// A repeated scalar field the encoder writes as one packed run.
    pub packed: bool,
}

/// A message's columns, in the table's order.
#[derive(Debug, Clone)]
pub struct MessagePlan {
    /// The message's full name.
    pub name: String,
    /// One per column.
    pub columns: Vec<ColumnPlan>,
    /// The column of each field number read below [`DENSE_NUMBERS`], indexed by the
    /// number (field numbers are small and dense in practice), and of the others.
    by_number: Vec<Option<usize>>,
    by_large_number: HashMap<u32, usize>,
}

impl MessagePlan {
    /// The plan of `fields` (a table's columns, or a ROW's fields) in `message`. With
    /// `read_default_values`, an absent field with presence reads as its default, not
    /// NULL (Flink's `protobuf.read-default-values`).
    pub fn new(
        message: &MessageDescriptor,
        fields: &Fields,
        read_default_values: bool,
        path: &str,
    ) -> Result<MessagePlan, Mismatch> {
        let mut columns = Vec::with_capacity(fields.len());
        let mut by_number = Vec::new();
        let mut by_large_number = HashMap::new();
        for (i, column) in fields.iter().enumerate() {
            let name = match path {
                "" => column.name().clone(),
                _ => format!("{path}.{}", column.name()),
            };
            let mismatch = |reason: String| Mismatch {
                column: name.clone(),
                reason,
            };
            let Some(field) = message.get_field_by_name(column.name()) else {
                return Err(mismatch(format!(
                    "message {} has no field '{}'",
                    message.full_name(),
                    column.name()
                )));
            };
            if field.is_map() {
                return Err(mismatch(format!(
                    "unsupported: field '{}' is a map (MAP columns are not supported yet; \
                     leave the column out to skip the field)",
                    field.name()
                )));
            }
            let repeated = field.is_list();
            let data_type = match (repeated, column.data_type()) {
                (true, DataType::List(element)) => element.data_type(),
                (false, DataType::List(_)) => {
                    return Err(mismatch(format!(
                        "field '{}' is not repeated: an ARRAY column reads a repeated field",
                        field.name()
                    )));
                }
                (true, other) => {
                    return Err(mismatch(format!(
                        "field '{}' is repeated: the column must be an ARRAY, not {}",
                        field.name(),
                        eddy_common::schema::sql_name(other)
                    )));
                }
                (false, other) => other,
            };
            let field_type =
                field_type(&field, data_type, read_default_values, &name).map_err(mismatch)?;
            let has_presence = field.supports_presence() && !repeated;
            let absent = match (&field_type, has_presence && !read_default_values) {
                _ if repeated => Absent::Null,
                (_, true) => Absent::Null,
                (FieldType::Message(_), false) => Absent::Message,
                (_, false) => absent_value(&field),
            };
            match field.number() as usize {
                number if number < DENSE_NUMBERS => {
                    if by_number.len() <= number {
                        by_number.resize(number + 1, None);
                    }
                    by_number[number] = Some(i);
                }
                _ => {
                    by_large_number.insert(field.number(), i);
                }
            }
            columns.push(ColumnPlan {
                number: field.number(),
                field_type,
                absent,
                has_presence,
                repeated,
                packed: field.is_packed(),
            });
        }
        Ok(MessagePlan {
            name: message.full_name().to_string(),
            columns,
            by_number,
            by_large_number,
        })
    }

    /// The column read from field `number`, if the table has it.
    pub fn column_of(&self, number: u32) -> Option<usize> {
        match self.by_number.get(number as usize) {
            Some(column) => *column,
            None => self.by_large_number.get(&number).copied(),
        }
    }
}

/// The field's type, if a column of `data_type` can hold it.
fn field_type(
    field: &FieldDescriptor,
    data_type: &DataType,
    read_default_values: bool,
    path: &str,
) -> Result<FieldType, String> {
    use DataType as D;
    let field_type = match field.kind() {
        Kind::Int32 => FieldType::Int32,
        Kind::Sint32 => FieldType::Sint32,
        Kind::Uint32 => FieldType::Uint32,
        Kind::Fixed32 => FieldType::Fixed32,
        Kind::Sfixed32 => FieldType::Sfixed32,
        Kind::Int64 => FieldType::Int64,
        Kind::Sint64 => FieldType::Sint64,
        Kind::Uint64 => FieldType::Uint64,
        Kind::Fixed64 => FieldType::Fixed64,
        Kind::Sfixed64 => FieldType::Sfixed64,
        Kind::Float => FieldType::Float,
        Kind::Double => FieldType::Double,
        Kind::Bool => FieldType::Bool,
        Kind::String => FieldType::String,
        Kind::Bytes => FieldType::Bytes,
        Kind::Enum(descriptor) => FieldType::Enum(descriptor),
        Kind::Message(message) => {
            let D::Struct(fields) = data_type else {
                return Err(format!(
                    "field '{}' is a message ({}): the column must be a ROW",
                    field.name(),
                    message.full_name()
                ));
            };
            let plan = MessagePlan::new(&message, fields, read_default_values, path)
                .map_err(|e| e.to_string())?;
            return Ok(FieldType::Message(Box::new(plan)));
        }
    };
    let fits = match field_type {
        FieldType::Int32
        | FieldType::Sint32
        | FieldType::Uint32
        | FieldType::Fixed32
        | FieldType::Sfixed32 => matches!(data_type, D::Int32 | D::Int64),
        FieldType::Int64
        | FieldType::Sint64
        | FieldType::Uint64
        | FieldType::Fixed64
        | FieldType::Sfixed64 => matches!(data_type, D::Int64),
        FieldType::Float => matches!(data_type, D::Float32 | D::Float64),
        FieldType::Double => matches!(data_type, D::Float64),
        FieldType::Bool => matches!(data_type, D::Boolean),
        FieldType::String | FieldType::Enum(_) => matches!(data_type, D::Utf8),
        FieldType::Bytes => matches!(data_type, D::Binary),
        FieldType::Message(_) => true,
    };
    match fits {
        true => Ok(field_type),
        false => Err(format!(
            "a column of type {} cannot hold field '{}' of type {}",
            eddy_common::schema::sql_name(data_type),
            field.name(),
            kind_name(&field.kind())
        )),
    }
}

/// A field's default value (its declared default in proto2, else the type's zero).
fn absent_value(field: &FieldDescriptor) -> Absent {
    match field.default_value() {
        Value::Bool(v) => Absent::Bool(v),
        Value::I32(v) => Absent::Int(i64::from(v)),
        Value::I64(v) => Absent::Int(v),
        Value::U32(v) => Absent::Int(i64::from(v)),
        Value::U64(v) => Absent::Int(v as i64),
        Value::F32(v) => Absent::Float(f64::from(v)),
        Value::F64(v) => Absent::Float(v),
        Value::String(v) => Absent::Text(v),
        Value::Bytes(v) => Absent::Bytes(v.to_vec()),
        Value::EnumNumber(number) => match field.kind() {
            Kind::Enum(descriptor) => Absent::Text(enum_name(&descriptor, number)),
            _ => Absent::Int(i64::from(number)),
        },
        Value::Message(_) | Value::List(_) | Value::Map(_) => Absent::Null,
    }
}

/// An enum value's name; the number as text when the enum has no such value (a value
/// added by a newer writer).
pub fn enum_name(descriptor: &EnumDescriptor, number: i32) -> String {
    match descriptor.get_value(number) {
        Some(value) => value.name().to_string(),
        None => number.to_string(),
    }
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Enum(e) => format!("enum {}", e.full_name()),
        Kind::Message(m) => format!("message {}", m.full_name()),
        other => format!("{other:?}").to_lowercase(),
    }
}
