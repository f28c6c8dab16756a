//! Protobuf records, one a Kafka message, as Flink's `protobuf` format reads and writes
//! them. Flink names a generated Java class (`protobuf.message-class-name`); a Rust engine
//! loads no classes, so the message is named in a descriptor set instead
//! (`protobuf.descriptor-file`, what `protoc --include_imports --descriptor_set_out`
//! writes) with `protobuf.message-name`.
//!
//! Columns match fields by name; a field the table lacks is skipped, as are fields the
//! descriptor does not know (a newer writer's). A nested message is a ROW; an enum is a
//! STRING of value names; a repeated field is an ARRAY (absent, an empty one; a NULL
//! element written as its type's default, as Flink writes it); maps are not read yet. An
//! absent field reads
//! as proto says: a proto3 scalar as its default (0, "", false, the first enum value); a
//! field with presence (proto2, proto3 `optional`, oneof members, messages) as NULL, or,
//! with `protobuf.read-default-values`, as its default.

mod decode;
mod encode;
mod plan;
mod wire;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};
use prost_reflect::{DescriptorPool, MessageDescriptor};

use self::decode::MessageDecoder;
pub use self::encode::EncodeError;
use self::plan::MessagePlan;
pub use self::plan::Mismatch;
use super::messages::Messages;
use super::{Decoded, LinePosition};
use crate::Options;

/// The option keys of the Protobuf format.
pub const KEYS: &[&str] = &[
    "protobuf.descriptor-file",
    "protobuf.message-name",
    "protobuf.message-class-name",
    "protobuf.read-default-values",
    "protobuf.ignore-parse-errors",
];

/// The Protobuf format, as its options set it.
#[derive(Debug, Clone)]
pub struct ProtobufFormat {
    message: MessageDescriptor,
    read_default_values: bool,
}

impl ProtobufFormat {
    /// The format its options describe; reads the descriptor set.
    pub fn from_options(options: &Options<'_>) -> Result<Self> {
        if let Some(class) = options.get("protobuf.message-class-name") {
            return Err(options.error(format!(
                "option 'protobuf.message-class-name' = '{class}': Eddy loads no Java classes; \
                 name the message with 'protobuf.message-name' in the descriptor set \
                 'protobuf.descriptor-file' (protoc --include_imports --descriptor_set_out)"
            )));
        }
        let file = options.required("protobuf.descriptor-file")?;
        let name = options.required("protobuf.message-name")?;
        let bytes = std::fs::read(file).map_err(|e| {
            options.error(format!(
                "option 'protobuf.descriptor-file': cannot read '{file}': {e}"
            ))
        })?;
        let pool = DescriptorPool::decode(bytes.as_slice()).map_err(|e| {
            options.error(format!(
                "option 'protobuf.descriptor-file': '{file}' is not a descriptor set: {e}"
            ))
        })?;
        let Some(message) = pool.get_message_by_name(name) else {
            let mut known: Vec<String> = pool
                .all_messages()
                .map(|m| m.full_name().to_string())
                .collect();
            known.sort();
            known.truncate(20);
            return Err(options.error(format!(
                "option 'protobuf.message-name' = '{name}': '{file}' has no such message \
                 (it has: {})",
                known.join(", ")
            )));
        };
        Ok(ProtobufFormat {
            message,
            read_default_values: options.flag("protobuf.read-default-values", false)?,
        })
    }

    /// The plan of a table's columns `schema` in the message.
    fn plan(&self, schema: &SchemaRef) -> Result<MessagePlan, Mismatch> {
        MessagePlan::new(&self.message, schema.fields(), self.read_default_values, "")
    }

    /// A reader of records into rows of `table` (the columns the format decodes).
    pub fn reader(&self, table: &SchemaRef) -> Result<ProtobufReader, Mismatch> {
        let plan = self.plan(table)?;
        Ok(ProtobufReader {
            table: table.clone(),
            decoder: MessageDecoder::new(plan, table.fields().clone()),
        })
    }

    /// A writer of rows of `table` (the columns the format encodes).
    pub fn writer(&self, table: &SchemaRef) -> Result<ProtobufWriter, Mismatch> {
        Ok(ProtobufWriter {
            plan: self.plan(table)?,
        })
    }
}

/// Decodes Protobuf records into rows of a table.
#[derive(Debug)]
pub struct ProtobufReader {
    table: SchemaRef,
    decoder: MessageDecoder,
}

impl ProtobufReader {
    /// Decodes whole records into rows, one a record. A record that cannot be read fails
    /// naming its offset (`at`: the first record's) and byte, or is skipped and counted
    /// when `ignore_errors` is set. With `traced`, keeps the record each row came from.
    pub fn decode(
        &mut self,
        records: &Messages,
        at: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        let mut line_of_row = Vec::new();
        for (i, record) in records.iter().enumerate() {
            match self.decoder.decode(record) {
                Ok(()) if traced => line_of_row.push(i as u32),
                Ok(()) => {}
                Err(e) if ignore_errors => {
                    tracing::debug!(at = at.file, offset = at.first_line + i as u64, error = %e, "skipping malformed Protobuf record");
                    OperatorMetrics::add(&metrics.parse_errors_skipped, 1);
                }
                Err(e) => {
                    let _ = self.decoder.finish();
                    return Err(EddyError::Format {
                        file: at.file.to_string(),
                        line: at.first_line + i as u64,
                        message: format!("protobuf record: {e}"),
                    });
                }
            }
        }
        if self.decoder.rows() == 0 {
            return Ok(None);
        }
        let columns = self.decoder.finish()?;
        let rows = RecordBatch::try_new(self.table.clone(), columns)?;
        Ok(Some(Decoded {
            chunk: Chunk::inserts(rows),
            line_of_row,
            facts: Vec::new(),
        }))
    }
}

/// Encodes rows of a table into Protobuf records.
#[derive(Debug)]
pub struct ProtobufWriter {
    plan: MessagePlan,
}

impl ProtobufWriter {
    /// Appends a record for each row of `rows` to `out`.
    pub fn encode(&self, rows: &RecordBatch, out: &mut Messages) -> Result<(), EncodeError> {
        encode::encode_batch(&self.plan, rows, |record| out.push(record))
    }
}

#[cfg(test)]
mod tests;
