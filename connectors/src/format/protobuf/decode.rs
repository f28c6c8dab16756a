//! Decodes records of a message straight into Arrow builders: a record's fields are
//! scanned into slots (the last value of a field wins; a nested message's occurrences
//! merge, as protobuf merges them; a repeated field keeps every occurrence), then each
//! column appends its slot, its default or NULL, or its elements. Nothing is allocated per
//! record once the buffers have grown.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, ListArray, NullBufferBuilder, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Fields};
use arrow::error::ArrowError;

use super::plan::{Absent, ColumnPlan, FieldType, MessagePlan, enum_name};
use super::wire::{WireError, WireReader, WireType, WireValue, unzigzag32, unzigzag64};

/// A column's builder.
enum Builder {
    Int32(Int32Builder),
    Int64(Int64Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Bool(BooleanBuilder),
    /// Strings (and enum names) as bytes, each checked to be UTF-8 as it is read: the
    /// column is made text when finished.
    Text(BinaryBuilder),
    Binary(BinaryBuilder),
    /// A ROW: the nested message's decoder and the ROW's validity.
    Row(Box<MessageDecoder>, NullBufferBuilder),
    /// An ARRAY: its elements' builder, each row's number of elements, the ARRAY's
    /// validity.
    List(Box<Builder>, Vec<usize>, NullBufferBuilder),
}

/// Decodes records of one message into the columns of a table (or of a ROW).
pub struct MessageDecoder {
    plan: MessagePlan,
    fields: Fields,
    builders: Vec<Builder>,
    /// Each column's value in the record being read.
    slots: Vec<Option<WireValue>>,
    /// Each repeated column's occurrences in the record being read.
    occurrences: Vec<Vec<WireValue>>,
    rows: usize,
}

impl MessageDecoder {
    /// A decoder of `plan`'s columns, `fields`.
    pub fn new(plan: MessagePlan, fields: Fields) -> Self {
        let builders = plan
            .columns
            .iter()
            .zip(fields.iter())
            .map(|(column, field)| builder(column, field.data_type()))
            .collect();
        MessageDecoder {
            slots: vec![None; plan.columns.len()],
            occurrences: vec![Vec::new(); plan.columns.len()],
            plan,
            fields,
            builders,
            rows: 0,
        }
    }

    /// Decodes one record into a row; on an error, no column has changed.
    pub fn decode(&mut self, record: &[u8]) -> Result<(), WireError> {
        match self.scan(record, 0, record.len()) {
            Ok(()) => {
                self.append(record, true);
                Ok(())
            }
            Err(e) => {
                self.clear();
                Err(e)
            }
        }
    }

    /// Reads the fields of `record[start..end]` into the slots (of nested messages too).
    fn scan(&mut self, record: &[u8], start: usize, end: usize) -> Result<(), WireError> {
        let mut reader = WireReader::new(record, start, end);
        while let Some((number, wire_type, value)) = reader.next_field()? {
            let Some(column) = self.plan.column_of(number) else {
                continue;
            };
            let plan = &self.plan.columns[column];
            if let Builder::List(element, ..) = &mut self.builders[column] {
                check_element(plan, element, record, wire_type, number, value)?;
                self.occurrences[column].push(value);
                continue;
            }
            check_wire_type(plan, wire_type, number, value)?;
            match (&mut self.builders[column], value) {
                (Builder::Row(nested, _), WireValue::Delimited(from, to)) => {
                    nested.scan(record, from, to)?;
                }
                (_, WireValue::Delimited(from, to))
                    if matches!(plan.field_type, FieldType::String)
                        && std::str::from_utf8(&record[from..to]).is_err() =>
                {
                    return Err(WireError {
                        message: format!("field {number} is not UTF-8"),
                        at: from,
                    });
                }
                _ => {}
            }
            self.slots[column] = Some(value);
        }
        Ok(())
    }

    /// Forgets the slots of a record that failed.
    fn clear(&mut self) {
        self.slots.iter_mut().for_each(|slot| *slot = None);
        self.occurrences.iter_mut().for_each(Vec::clear);
        for builder in &mut self.builders {
            match builder {
                Builder::Row(nested, _) => nested.clear(),
                Builder::List(element, ..) => {
                    if let Builder::Row(nested, _) = element.as_mut() {
                        nested.clear();
                    }
                }
                _ => {}
            }
        }
    }

    /// Appends the record's row: each column's slot, or its value when absent; a nested
    /// message's row (`present`: the message was in the record) too.
    fn append(&mut self, record: &[u8], present: bool) {
        for (column, builder) in self.builders.iter_mut().enumerate() {
            let plan = &self.plan.columns[column];
            if let Builder::List(element, lengths, validity) = builder {
                let occurrences = match present {
                    true => &self.occurrences[column][..],
                    false => &[],
                };
                let count = append_elements(element, plan, occurrences, record);
                lengths.push(count);
                validity.append_non_null();
                self.occurrences[column].clear();
                continue;
            }
            let slot = self.slots[column].take().filter(|_| present);
            append(builder, plan, slot, record);
        }
        self.rows += 1;
    }

    /// Appends a row of NULLs (the fields of a NULL ROW).
    fn append_nulls(&mut self) {
        self.clear();
        for builder in &mut self.builders {
            match builder {
                Builder::Row(nested, validity) => {
                    validity.append_null();
                    nested.append_nulls();
                }
                Builder::List(_, lengths, validity) => {
                    lengths.push(0);
                    validity.append_null();
                }
                other => append_absent(other, &Absent::Null),
            }
        }
        self.rows += 1;
    }

    /// The columns decoded so far, as arrays; the builders start again.
    pub fn finish(&mut self) -> Result<Vec<ArrayRef>, ArrowError> {
        self.rows = 0;
        self.builders
            .iter_mut()
            .zip(self.fields.iter())
            .map(|(builder, field)| finish(builder, field.data_type()))
            .collect()
    }

    /// How many rows are decoded and not yet finished.
    pub fn rows(&self) -> usize {
        self.rows
    }
}

fn builder(column: &ColumnPlan, data_type: &DataType) -> Builder {
    match (&column.field_type, data_type) {
        (_, DataType::List(element)) => Builder::List(
            Box::new(builder(column, element.data_type())),
            Vec::new(),
            NullBufferBuilder::new(0),
        ),
        (FieldType::Message(plan), DataType::Struct(fields)) => Builder::Row(
            Box::new(MessageDecoder::new((**plan).clone(), fields.clone())),
            NullBufferBuilder::new(0),
        ),
        (_, DataType::Int32) => Builder::Int32(Int32Builder::new()),
        (_, DataType::Int64) => Builder::Int64(Int64Builder::new()),
        (_, DataType::Float32) => Builder::Float32(Float32Builder::new()),
        (_, DataType::Float64) => Builder::Float64(Float64Builder::new()),
        (_, DataType::Boolean) => Builder::Bool(BooleanBuilder::new()),
        (_, DataType::Binary) => Builder::Binary(BinaryBuilder::new()),
        _ => Builder::Text(BinaryBuilder::new()),
    }
}

/// The wire type a value of `field_type` has (unpacked).
fn wire_type_of(field_type: &FieldType) -> WireType {
    match field_type {
        FieldType::Fixed32 | FieldType::Sfixed32 | FieldType::Float => WireType::Fixed32,
        FieldType::Fixed64 | FieldType::Sfixed64 | FieldType::Double => WireType::Fixed64,
        FieldType::String | FieldType::Bytes | FieldType::Message(_) => WireType::Delimited,
        _ => WireType::Varint,
    }
}

/// Checks one occurrence of a repeated field: a packed run of scalars (which readers take
/// whether or not the field is declared packed), or one element, a nested message scanned
/// whole (its elements are read again when the row is appended).
fn check_element(
    plan: &ColumnPlan,
    element: &mut Builder,
    record: &[u8],
    wire_type: WireType,
    number: u32,
    value: WireValue,
) -> Result<(), WireError> {
    let scalar = wire_type_of(&plan.field_type);
    match (value, element) {
        (WireValue::Delimited(from, to), _) if scalar != WireType::Delimited => {
            let mut run = WireReader::new(record, from, to);
            while run.next_packed(scalar)?.is_some() {}
            Ok(())
        }
        (WireValue::Delimited(from, to), Builder::Row(nested, _)) => {
            let scanned = nested.scan(record, from, to);
            nested.clear();
            scanned
        }
        (WireValue::Delimited(from, to), _)
            if matches!(plan.field_type, FieldType::String)
                && std::str::from_utf8(&record[from..to]).is_err() =>
        {
            Err(WireError {
                message: format!("an element of field {number} is not UTF-8"),
                at: from,
            })
        }
        _ => check_wire_type(plan, wire_type, number, value),
    }
}

/// Appends a repeated field's elements (its occurrences, checked when the record was
/// scanned, packed runs unpacked); returns how many.
fn append_elements(
    element: &mut Builder,
    plan: &ColumnPlan,
    occurrences: &[WireValue],
    record: &[u8],
) -> usize {
    let scalar = wire_type_of(&plan.field_type);
    let mut count = 0;
    for value in occurrences {
        match (*value, &mut *element) {
            (WireValue::Delimited(from, to), Builder::Row(nested, validity)) => {
                // Scanned without an error when the record was.
                if nested.scan(record, from, to).is_ok() {
                    validity.append_non_null();
                    nested.append(record, true);
                    count += 1;
                }
            }
            (WireValue::Delimited(from, to), element) if scalar != WireType::Delimited => {
                let mut run = WireReader::new(record, from, to);
                while let Ok(Some(value)) = run.next_packed(scalar) {
                    append(element, plan, Some(value), record);
                    count += 1;
                }
            }
            (value, element) => {
                append(element, plan, Some(value), record);
                count += 1;
            }
        }
    }
    count
}

/// Fails when a field comes with a wire type its type never has.
fn check_wire_type(
    plan: &ColumnPlan,
    wire_type: WireType,
    number: u32,
    value: WireValue,
) -> Result<(), WireError> {
    let expected = wire_type_of(&plan.field_type);
    match wire_type == expected {
        true => Ok(()),
        false => Err(WireError {
            message: format!(
                "field {number} has wire type {}, its type wire type {}",
                wire_type.number(),
                expected.number()
            ),
            at: match value {
                WireValue::Delimited(from, _) => from,
                _ => 0,
            },
        }),
    }
}

/// Appends one column's value: the slot's, or the column's value when absent.
fn append(builder: &mut Builder, plan: &ColumnPlan, slot: Option<WireValue>, record: &[u8]) {
    if let Builder::Row(nested, validity) = builder {
        let present = slot.is_some() || plan.absent == Absent::Message;
        validity.append(present);
        match present {
            true => nested.append(record, slot.is_some()),
            // A NULL ROW's fields are NULL too.
            false => nested.append_nulls(),
        }
        return;
    }
    let Some(value) = slot else {
        return append_absent(builder, &plan.absent);
    };
    match (builder, value) {
        (Builder::Int32(b), WireValue::Varint(v)) => b.append_value(match plan.field_type {
            FieldType::Sint32 => unzigzag32(v),
            _ => v as i32,
        }),
        (Builder::Int32(b), WireValue::Fixed32(v)) => b.append_value(v as i32),
        (Builder::Int64(b), WireValue::Varint(v)) => b.append_value(match plan.field_type {
            FieldType::Sint32 => i64::from(unzigzag32(v)),
            FieldType::Int32 => i64::from(v as i32),
            FieldType::Uint32 => i64::from(v as u32),
            FieldType::Sint64 => unzigzag64(v),
            _ => v as i64,
        }),
        (Builder::Int64(b), WireValue::Fixed32(v)) => b.append_value(match plan.field_type {
            FieldType::Sfixed32 => i64::from(v as i32),
            _ => i64::from(v),
        }),
        (Builder::Int64(b), WireValue::Fixed64(v)) => b.append_value(v as i64),
        (Builder::Float32(b), WireValue::Fixed32(v)) => b.append_value(f32::from_bits(v)),
        (Builder::Float64(b), WireValue::Fixed32(v)) => {
            b.append_value(f64::from(f32::from_bits(v)))
        }
        (Builder::Float64(b), WireValue::Fixed64(v)) => b.append_value(f64::from_bits(v)),
        (Builder::Bool(b), WireValue::Varint(v)) => b.append_value(v != 0),
        (Builder::Text(b), WireValue::Varint(v)) => match &plan.field_type {
            FieldType::Enum(descriptor) => match descriptor.get_value(v as i32) {
                Some(value) => b.append_value(value.name()),
                None => b.append_value(enum_name(descriptor, v as i32).as_bytes()),
            },
            _ => b.append_null(),
        },
        (Builder::Text(b), WireValue::Delimited(from, to)) => b.append_value(&record[from..to]),
        (Builder::Binary(b), WireValue::Delimited(from, to)) => b.append_value(&record[from..to]),
        (builder, _) => append_absent(builder, &Absent::Null),
    }
}

fn append_absent(builder: &mut Builder, absent: &Absent) {
    match (builder, absent) {
        (Builder::Int32(b), Absent::Int(v)) => b.append_value(*v as i32),
        (Builder::Int64(b), Absent::Int(v)) => b.append_value(*v),
        (Builder::Float32(b), Absent::Float(v)) => b.append_value(*v as f32),
        (Builder::Float64(b), Absent::Float(v)) => b.append_value(*v),
        (Builder::Bool(b), Absent::Bool(v)) => b.append_value(*v),
        (Builder::Text(b), Absent::Text(v)) => b.append_value(v),
        (Builder::Binary(b), Absent::Bytes(v)) => b.append_value(v),
        (Builder::Int32(b), _) => b.append_null(),
        (Builder::Int64(b), _) => b.append_null(),
        (Builder::Float32(b), _) => b.append_null(),
        (Builder::Float64(b), _) => b.append_null(),
        (Builder::Bool(b), _) => b.append_null(),
        (Builder::Text(b), _) => b.append_null(),
        (Builder::Binary(b), _) => b.append_null(),
        (Builder::Row(..), _) => unreachable!("ROW columns append through their decoder"),
        (Builder::List(..), _) => unreachable!("ARRAY columns append through their elements"),
    }
}

fn finish(builder: &mut Builder, data_type: &DataType) -> Result<ArrayRef, ArrowError> {
    Ok(match builder {
        Builder::Int32(b) => Arc::new(b.finish()),
        Builder::Int64(b) => Arc::new(b.finish()),
        Builder::Float32(b) => Arc::new(b.finish()),
        Builder::Float64(b) => Arc::new(b.finish()),
        Builder::Bool(b) => Arc::new(b.finish()),
        // One check of the whole column (each value was checked as read).
        Builder::Text(b) => Arc::new(StringArray::try_from_binary(b.finish())?),
        Builder::Binary(b) => Arc::new(b.finish()),
        Builder::Row(nested, validity) => {
            let DataType::Struct(fields) = data_type else {
                return Err(ArrowError::SchemaError(format!(
                    "a ROW column's builder for a {data_type} column"
                )));
            };
            let children = nested.finish()?;
            let nulls = validity.finish();
            Arc::new(StructArray::try_new(fields.clone(), children, nulls)?)
        }
        Builder::List(element, lengths, validity) => {
            let DataType::List(field) = data_type else {
                return Err(ArrowError::SchemaError(format!(
                    "an ARRAY column's builder for a {data_type} column"
                )));
            };
            let values = finish(element, field.data_type())?;
            let offsets = OffsetBuffer::from_lengths(lengths.drain(..));
            Arc::new(ListArray::try_new(
                field.clone(),
                offsets,
                values,
                validity.finish(),
            )?)
        }
    })
}

impl std::fmt::Debug for MessageDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageDecoder")
            .field("message", &self.plan.name)
            .field("rows", &self.rows)
            .finish()
    }
}
