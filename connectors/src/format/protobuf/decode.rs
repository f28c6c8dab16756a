//! Decodes records of a message straight into Arrow builders: a record's fields are
//! scanned into slots (the last value of a field wins; a nested message's occurrences
//! merge, as protobuf merges them), then each column appends its slot, its default or
//! NULL. Nothing is allocated per record.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Float32Builder, Float64Builder, Int32Builder,
    Int64Builder, NullBufferBuilder, StringArray, StructArray,
};
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
}

/// Decodes records of one message into the columns of a table (or of a ROW).
pub struct MessageDecoder {
    plan: MessagePlan,
    fields: Fields,
    builders: Vec<Builder>,
    /// Each column's value in the record being read.
    slots: Vec<Option<WireValue>>,
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
        for builder in &mut self.builders {
            if let Builder::Row(nested, _) = builder {
                nested.clear();
            }
        }
    }

    /// Appends the record's row: each column's slot, or its value when absent; a nested
    /// message's row (`present`: the message was in the record) too.
    fn append(&mut self, record: &[u8], present: bool) {
        for (column, builder) in self.builders.iter_mut().enumerate() {
            let plan = &self.plan.columns[column];
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

/// Fails when a field comes with a wire type its type never has.
fn check_wire_type(
    plan: &ColumnPlan,
    wire_type: WireType,
    number: u32,
    value: WireValue,
) -> Result<(), WireError> {
    let expected = match plan.field_type {
        FieldType::Fixed32 | FieldType::Sfixed32 | FieldType::Float => WireType::Fixed32,
        FieldType::Fixed64 | FieldType::Sfixed64 | FieldType::Double => WireType::Fixed64,
        FieldType::String | FieldType::Bytes | FieldType::Message(_) => WireType::Delimited,
        _ => WireType::Varint,
    };
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
