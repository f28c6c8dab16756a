//! Records of a format that frames its own records (Avro's and Protobuf's binary
//! records), kept back to back in one buffer with where each ends: any byte may be in a
//! record, so records are never joined into lines. And the readers and writers of those
//! formats, one record a Kafka message.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};

use super::avro::{AvroReader, AvroWriter};
use super::protobuf::{ProtobufReader, ProtobufWriter};
use super::{Decoded, Format, LinePosition};

/// Whole records, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Messages {
    bytes: Vec<u8>,
    /// The end of each record in `bytes`.
    ends: Vec<usize>,
}

impl Messages {
    /// Adds a record.
    pub fn push(&mut self, record: &[u8]) {
        self.bytes.extend_from_slice(record);
        self.ends.push(self.bytes.len());
    }

    /// Adds a record that is `prefix` followed by `record`.
    pub fn push_prefixed(&mut self, prefix: &[u8], record: &[u8]) {
        self.bytes.extend_from_slice(prefix);
        self.push(record);
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of all records.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Forgets every record.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// The records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.ends.len()).map(|i| {
            let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
            &self.bytes[start..self.ends[i]]
        })
    }

    /// Writes the records into a snapshot.
    pub fn save(&self, out: &mut StateWriter) {
        out.u64(self.len() as u64);
        for record in self.iter() {
            out.bytes(record);
        }
    }

    /// Reads records written by [`Messages::save`].
    pub fn load(input: &mut StateReader<'_>) -> Result<Messages> {
        let mut out = Messages::default();
        for _ in 0..input.count(8)? {
            out.push(input.bytes()?);
        }
        Ok(out)
    }
}

/// Decodes the records of a format whose records are messages.
pub enum MessageReader {
    /// `avro`, `avro-confluent`.
    Avro(Box<AvroReader>),
    /// `protobuf`.
    Protobuf(Box<ProtobufReader>),
}

impl MessageReader {
    /// A reader of `format`'s records into rows of `table` (the columns the format
    /// decodes), `batch_size` rows a batch at most; `None` for a line format.
    pub fn new(format: &Format, table: &SchemaRef, batch_size: usize) -> Option<Result<Self>> {
        let reader = match format {
            Format::Avro(avro) => avro
                .reader(table, batch_size)
                .map(|reader| MessageReader::Avro(Box::new(reader)))
                .map_err(|e| e.to_string()),
            Format::Protobuf(protobuf) => protobuf
                .reader(table)
                .map(|reader| MessageReader::Protobuf(Box::new(reader)))
                .map_err(|e| e.to_string()),
            _ => return None,
        };
        Some(reader.map_err(EddyError::Unsupported))
    }

    /// What each record is prefixed with when gathered (see [`AvroReader::record_prefix`]).
    pub fn record_prefix(&self) -> &'static [u8] {
        match self {
            MessageReader::Avro(avro) => avro.record_prefix(),
            MessageReader::Protobuf(_) => &[],
        }
    }

    /// What decoding `records` (as they came, without the record prefix) needs fetched
    /// first: the Avro schema ids not yet known (see [`MessageReader::fetch`]).
    pub fn unknown_ids<'a>(&self, records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u32> {
        match self {
            MessageReader::Avro(avro) => avro.unknown_ids(records),
            MessageReader::Protobuf(_) => Vec::new(),
        }
    }

    /// Fetches the writer schemas of `ids` from the registry.
    pub async fn fetch(&mut self, ids: Vec<u32>) -> Result<()> {
        match self {
            MessageReader::Avro(avro) if !ids.is_empty() => avro.fetch_schemas(ids).await,
            _ => Ok(()),
        }
    }

    /// Decodes whole records into rows, one a record (see [`AvroReader::decode`]).
    pub fn decode(
        &mut self,
        records: &Messages,
        at: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        match self {
            MessageReader::Avro(avro) => avro.decode(records, at, ignore_errors, metrics, traced),
            MessageReader::Protobuf(protobuf) => {
                protobuf.decode(records, at, ignore_errors, metrics, traced)
            }
        }
    }
}

/// Encodes rows into the records of a format whose records are messages.
pub struct MessageWriter {
    /// The table written, for errors.
    table: String,
    encoder: Encoder,
}

enum Encoder {
    Avro(AvroWriter),
    Protobuf(ProtobufWriter),
}

impl MessageWriter {
    /// A writer of rows of `table`'s columns `schema` in `format`; `None` for a line
    /// format.
    pub fn new(format: &Format, table: &str, schema: &SchemaRef) -> Option<Result<Self>> {
        let encoder = match format {
            Format::Avro(avro) => avro
                .writer(schema)
                .map(Encoder::Avro)
                .map_err(|e| e.to_string()),
            Format::Protobuf(protobuf) => protobuf
                .writer(schema)
                .map(Encoder::Protobuf)
                .map_err(|e| e.to_string()),
            _ => return None,
        };
        let table = table.to_string();
        Some(match encoder {
            Ok(encoder) => Ok(MessageWriter { table, encoder }),
            Err(message) => Err(EddyError::Connector { table, message }),
        })
    }

    /// Appends a record for each row of `rows` to `out`.
    pub async fn encode(&mut self, rows: &RecordBatch, out: &mut Messages) -> Result<()> {
        match &mut self.encoder {
            Encoder::Avro(avro) => avro.encode(rows, out).await,
            Encoder::Protobuf(protobuf) => {
                protobuf
                    .encode(rows, out)
                    .map_err(|e| EddyError::Connector {
                        table: self.table.clone(),
                        message: format!("writing a protobuf record: {e}"),
                    })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_any_bytes_round_trip_through_a_snapshot() {
        let mut messages = Messages::default();
        messages.push(b"a\nb");
        messages.push(b"");
        messages.push_prefixed(&[0, 0], &[0xff, b'\n']);
        assert_eq!(messages.len(), 3);
        let records: Vec<&[u8]> = messages.iter().collect();
        assert_eq!(records, vec![&b"a\nb"[..], b"", &[0, 0, 0xff, b'\n']]);
        let mut out = StateWriter::new();
        messages.save(&mut out);
        let bytes = out.finish();
        let mut input = StateReader::new(&bytes, "test messages");
        assert_eq!(Messages::load(&mut input).unwrap(), messages);
    }
}
