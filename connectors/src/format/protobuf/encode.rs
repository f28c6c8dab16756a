//! Encodes rows into records of a message: each non-NULL column as its field (a proto3
//! scalar at its default value is left out, as protoc's code leaves it out), a ROW as a
//! nested message.

use arrow::array::{Array, AsArray, RecordBatch, StructArray};
use arrow::datatypes::{
    DataType, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
};

use super::plan::{ColumnPlan, FieldType, MessagePlan};
use super::wire::{WireType, put_delimited, put_tag, put_varint, zigzag32, zigzag64};

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
    // A proto3 scalar (no presence) at its default is not written.
    let skip_default = !column.has_presence;
    match (&column.field_type, cell) {
        (FieldType::Message(plan), Cell::Row(rows)) => {
            let children: Vec<&dyn Array> = rows.columns().iter().map(|c| c.as_ref()).collect();
            let mut nested = Vec::new();
            encode_row(plan, &children, row, &mut nested)?;
            put_delimited(out, number, &nested);
        }
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
            if !(skip_default && value == 0) {
                put_tag(out, number, WireType::Varint);
                put_varint(out, value as i64 as u64);
            }
        }
        (FieldType::String, Cell::Text(text)) if !(skip_default && text.is_empty()) => {
            put_delimited(out, number, text.as_bytes())
        }
        (FieldType::Bytes, Cell::Bytes(bytes)) if !(skip_default && bytes.is_empty()) => {
            put_delimited(out, number, bytes)
        }
        (FieldType::String | FieldType::Bytes, _) => {}
        (FieldType::Bool, Cell::Bool(v)) if v || !skip_default => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, u64::from(v));
        }
        (FieldType::Float, Cell::Float(v))
            if !(skip_default && v == 0.0 && v.is_sign_positive()) =>
        {
            put_tag(out, number, WireType::Fixed32);
            out.extend_from_slice(&(v as f32).to_bits().to_le_bytes());
        }
        (FieldType::Double, Cell::Float(v))
            if !(skip_default && v == 0.0 && v.is_sign_positive()) =>
        {
            put_tag(out, number, WireType::Fixed64);
            out.extend_from_slice(&v.to_bits().to_le_bytes());
        }
        (integer, Cell::Int(v)) if !(skip_default && v == 0) => {
            encode_integer(integer, number, v, out)
        }
        (FieldType::Bool | FieldType::Float | FieldType::Double, _) => {}
        (_, Cell::Int(_)) => {}
        (field_type, _) => {
            return Err(EncodeError(format!(
                "field {number} of type {field_type:?} cannot take the column's value"
            )));
        }
    }
    Ok(())
}

fn encode_integer(field_type: &FieldType, number: u32, v: i64, out: &mut Vec<u8>) {
    match field_type {
        FieldType::Fixed32 | FieldType::Sfixed32 => {
            put_tag(out, number, WireType::Fixed32);
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
        FieldType::Fixed64 | FieldType::Sfixed64 => {
            put_tag(out, number, WireType::Fixed64);
            out.extend_from_slice(&(v as u64).to_le_bytes());
        }
        FieldType::Sint32 => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, zigzag32(v as i32));
        }
        FieldType::Sint64 => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, zigzag64(v));
        }
        FieldType::Uint32 => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, u64::from(v as u32));
        }
        // int32 is written sign-extended to 64 bits, as protoc's code writes it.
        _ => {
            put_tag(out, number, WireType::Varint);
            put_varint(out, v as u64);
        }
    }
}
