//! Encodes rows into records of a message: each non-NULL column as its field (a proto3
//! scalar at its default value is left out, as protoc's code leaves it out), a ROW as a
//! nested message, an ARRAY as a repeated field (packed where the field is).

use arrow::array::{Array, AsArray, ListArray, RecordBatch, StructArray};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
};

use super::plan::{ColumnPlan, FieldType, MessagePlan};
use super::wire::{WireType, put_delimited, put_tag, put_varint, varint_bytes, zigzag32, zigzag64};

/// Why a row cannot be written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EncodeError(String);

/// A column's value in one row, as the encoder takes it.
enum Cell<'a> {
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(&'a str),
    Bytes(&'a [u8]),
    Row(&'a StructArray),
}

/// Appends row `row` of `columns` (a table's, or a ROW's) as a `plan` message to `out`.
pub fn encode_row(
    plan: &MessagePlan,
    columns: &[&dyn Array],
    row: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    for (column, array) in plan.columns.iter().zip(columns) {
        if array.is_null(row) {
            continue;
        }
        if column.repeated {
            encode_elements(column, array.as_list::<i32>(), row, out)?;
            continue;
        }
        let cell = cell(*array, row)?;
        encode_cell(column, cell, row, out)?;
    }
    Ok(())
}

/// Appends each row of `rows` as a record to `records`.
pub fn encode_batch(
    plan: &MessagePlan,
    rows: &RecordBatch,
    mut record: impl FnMut(&[u8]),
) -> Result<(), EncodeError> {
    let columns: Vec<&dyn Array> = rows.columns().iter().map(|c| c.as_ref()).collect();
    let mut out = Vec::new();
    for row in 0..rows.num_rows() {
        out.clear();
        encode_row(plan, &columns, row, &mut out)?;
        record(&out);
    }
    Ok(())
}

fn cell(array: &dyn Array, row: usize) -> Result<Cell<'_>, EncodeError> {
    Ok(match array.data_type() {
        DataType::Int8 => Cell::Int(i64::from(array.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => Cell::Int(i64::from(array.as_primitive::<Int16Type>().value(row))),
        DataType::Int32 => Cell::Int(i64::from(array.as_primitive::<Int32Type>().value(row))),
        DataType::Int64 => Cell::Int(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => Cell::Float(f64::from(array.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => Cell::Float(array.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => Cell::Bool(array.as_boolean().value(row)),
        DataType::Utf8 => Cell::Text(array.as_string::<i32>().value(row)),
        DataType::Binary => Cell::Bytes(array.as_binary::<i32>().value(row)),
        DataType::Struct(_) => Cell::Row(array.as_struct()),
        other => {
            return Err(EncodeError(format!(
                "a {} column cannot be written as protobuf",
                eddy_common::schema::sql_name(other)
            )));
        }
    })
}

fn encode_cell(
    column: &ColumnPlan,
    cell: Cell<'_>,
    row: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let number = column.number;
    // A proto3 scalar (no presence) at its default is not written; an element always is.
    let skip_default = !column.has_presence && !column.repeated;
    match (&column.field_type, cell) {
        (FieldType::Message(plan), Cell::Row(rows)) => {
            let children: Vec<&dyn Array> = rows.columns().iter().map(|c| c.as_ref()).collect();
            let mut nested = Vec::new();
            encode_row(plan, &children, row, &mut nested)?;
            put_delimited(out, number, &nested);
        }
        (FieldType::String, Cell::Text(text)) => {
            if !(skip_default && text.is_empty()) {
                put_delimited(out, number, text.as_bytes());
            }
        }
        (FieldType::Bytes, Cell::Bytes(bytes)) => {
            if !(skip_default && bytes.is_empty()) {
                put_delimited(out, number, bytes);
            }
        }
        (field_type, cell) => {
            let scalar = scalar(field_type, cell, number)?;
            if !(skip_default && scalar.is_default) {
                put_tag(out, number, scalar.wire_type);
                scalar.put(out);
            }
        }
    }
    Ok(())
}

/// Appends row `row` of a repeated field's ARRAY: each element a field, or the scalars as
/// one packed run where the field is packed. A NULL element, which protobuf cannot hold,
/// is written as its type's default, as Flink writes it.
fn encode_elements(
    column: &ColumnPlan,
    lists: &ListArray,
    row: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let offsets = lists.value_offsets();
    let elements = offsets[row] as usize..offsets[row + 1] as usize;
    if elements.is_empty() {
        return Ok(());
    }
    let values = lists.values().as_ref();
    let packable = !matches!(
        column.field_type,
        FieldType::String | FieldType::Bytes | FieldType::Message(_)
    );
    if !(column.packed && packable) {
        for element in elements {
            match values.is_null(element) {
                true => put_default(column, out),
                false => encode_cell(column, cell(values, element)?, element, out)?,
            }
        }
        return Ok(());
    }
    put_tag(out, column.number, WireType::Delimited);
    let start = out.len();
    for element in elements {
        match values.is_null(element) {
            true => default_scalar(&column.field_type).put(out),
            false => scalar(&column.field_type, cell(values, element)?, column.number)?.put(out),
        }
    }
    // The run's length goes before it, now that it is known.
    let (length, size) = varint_bytes((out.len() - start) as u64);
    out.splice(start..start, length[..size].iter().copied());
    Ok(())
}

/// Appends an element of `column`'s type at its default value.
fn put_default(column: &ColumnPlan, out: &mut Vec<u8>) {
    match column.field_type {
        FieldType::String | FieldType::Bytes | FieldType::Message(_) => {
            put_delimited(out, column.number, &[])
        }
        ref field_type => {
            let scalar = default_scalar(field_type);
            put_tag(out, column.number, scalar.wire_type);
            scalar.put(out);
        }
    }
}

/// A scalar value as it goes on the wire.
struct Scalar {
    wire_type: WireType,
    bits: u64,
    /// The type's default value (not written for a proto3 scalar).
    is_default: bool,
}

impl Scalar {
    /// Appends the value (without a tag).
    fn put(&self, out: &mut Vec<u8>) {
        match self.wire_type {
            WireType::Fixed32 => out.extend_from_slice(&(self.bits as u32).to_le_bytes()),
            WireType::Fixed64 => out.extend_from_slice(&self.bits.to_le_bytes()),
            _ => put_varint(out, self.bits),
        }
    }
}

/// A scalar field's value from the column's.
fn scalar(field_type: &FieldType, cell: Cell<'_>, number: u32) -> Result<Scalar, EncodeError> {
    let (wire_type, bits, is_default) = match (field_type, cell) {
        (FieldType::Enum(descriptor), Cell::Text(name)) => {
            let value = match descriptor.get_value_by_name(name) {
                Some(value) => value.number(),
                None => name.parse::<i32>().map_err(|_| {
                    EncodeError(format!(
                        "enum {} has no value '{name}'",
                        descriptor.full_name()
                    ))
                })?,
            };
            (WireType::Varint, value as i64 as u64, value == 0)
        }
        (FieldType::Bool, Cell::Bool(v)) => (WireType::Varint, u64::from(v), !v),
        (FieldType::Float, Cell::Float(v)) => {
            let v = v as f32;
            let is_default = v == 0.0 && v.is_sign_positive();
            (WireType::Fixed32, u64::from(v.to_bits()), is_default)
        }
        (FieldType::Double, Cell::Float(v)) => {
            let is_default = v == 0.0 && v.is_sign_positive();
            (WireType::Fixed64, v.to_bits(), is_default)
        }
        (integer, Cell::Int(v)) if integer_type(integer) => {
            let (wire_type, bits) = integer_bits(integer, v);
            (wire_type, bits, v == 0)
        }
        (field_type, _) => {
            return Err(EncodeError(format!(
                "field {number} of type {field_type:?} cannot take the column's value"
            )));
        }
    };
    Ok(Scalar {
        wire_type,
        bits,
        is_default,
    })
}

/// A scalar type's default value (an enum's first value).
fn default_scalar(field_type: &FieldType) -> Scalar {
    let (wire_type, bits) = match field_type {
        FieldType::Enum(descriptor) => {
            let first = descriptor.values().next().map_or(0, |v| v.number());
            (WireType::Varint, first as i64 as u64)
        }
        FieldType::Float => (WireType::Fixed32, 0),
        FieldType::Double => (WireType::Fixed64, 0),
        integer => integer_bits(integer, 0),
    };
    Scalar {
        wire_type,
        bits,
        is_default: true,
    }
}

fn integer_type(field_type: &FieldType) -> bool {
    matches!(
        field_type,
        FieldType::Int32
            | FieldType::Sint32
            | FieldType::Uint32
            | FieldType::Fixed32
            | FieldType::Sfixed32
            | FieldType::Int64
            | FieldType::Sint64
            | FieldType::Uint64
            | FieldType::Fixed64
            | FieldType::Sfixed64
    )
}

/// An integer's wire type and bits.
fn integer_bits(field_type: &FieldType, v: i64) -> (WireType, u64) {
    match field_type {
        FieldType::Fixed32 | FieldType::Sfixed32 => (WireType::Fixed32, u64::from(v as u32)),
        FieldType::Fixed64 | FieldType::Sfixed64 => (WireType::Fixed64, v as u64),
        FieldType::Sint32 => (WireType::Varint, zigzag32(v as i32)),
        FieldType::Sint64 => (WireType::Varint, zigzag64(v)),
        FieldType::Uint32 => (WireType::Varint, u64::from(v as u32)),
        // int32 is written sign-extended to 64 bits, as protoc's code writes it; a bool's
        // default is 0 too.
        _ => (WireType::Varint, v as u64),
    }
}
