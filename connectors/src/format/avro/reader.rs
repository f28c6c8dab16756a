//! Decodes Avro records, in the Confluent wire format (plain `avro` records are given a
//! header by the source), into rows of a table: each id's writer schema resolved against
//! the table's, a record that cannot be read named by its offset.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::{CastOptions, cast_with_options, concat_batches};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use eddy_common::chunk::Chunk;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};

use super::{AvroFormat, HEADER, MAGIC, envelope, schema};
use crate::format::messages::Messages;
use crate::format::{Decoded, LinePosition};

/// Decodes Avro records into rows of a table.
pub struct AvroReader {
    pub(super) format: AvroFormat,
    /// The columns the rows have.
    pub(super) table: SchemaRef,
    /// The columns the records decode into: the table's, or Debezium's envelope around
    /// them.
    pub(super) decoded: SchemaRef,
    /// The table's Avro schema: every record is read by it.
    pub(super) reader_schema: String,
    /// The writer schemas known, by registry id (plain `avro`: the table's own).
    pub(super) writers: BTreeMap<u32, Arc<str>>,
    /// Ids whose records cannot be read, and why (not in the registry, or a schema the
    /// table's cannot read).
    pub(super) refused: BTreeMap<u32, String>,
    /// Reads records of every schema in `writers`; made again when one is added.
    pub(super) decoder: Option<Decoder>,
    pub(super) batch_size: usize,
}

impl AvroReader {
    /// What a plain `avro` record is prefixed with, for the decoder (which takes the
    /// Confluent wire format): a header naming the table's own schema. Empty for
    /// `avro-confluent`, whose records carry their header.
    pub fn record_prefix(&self) -> &'static [u8] {
        match self.format.registry {
            Some(_) => &[],
            None => &[MAGIC, 0, 0, 0, 0],
        }
    }

    /// The schema ids of `records` (as they came) neither known nor refused yet, each
    /// once; none for plain `avro` (no registry).
    pub fn unknown_ids<'a>(&self, records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u32> {
        if self.format.registry.is_none() {
            return Vec::new();
        }
        let mut ids: Vec<u32> = records
            .into_iter()
            .filter_map(schema_id)
            .filter(|id| !self.writers.contains_key(id) && !self.refused.contains_key(id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Fetches from the registry the writer schemas of `ids` (see
    /// [`AvroReader::unknown_ids`]).
    pub async fn fetch_schemas(&mut self, ids: Vec<u32>) -> Result<()> {
        let Some(registry) = self.format.registry.clone() else {
            return Ok(());
        };
        for id in ids {
            let fetched = registry.schema(id).await;
            match fetched.map_err(|e| e.for_table(&self.format.table))? {
                Some(schema) => {
                    self.writers.insert(id, schema);
                    self.decoder = None;
                }
                None => {
                    let why = format!("schema id {id} is not in the registry {}", registry.url());
                    self.refused.insert(id, why);
                }
            }
        }
        Ok(())
    }

    /// Decodes whole records (each as [`AvroReader::record_prefix`] makes it) into rows,
    /// one a record (or, for Debezium's envelopes, a change's rows). A record that cannot
    /// be read fails naming its offset (`at`: the first record's), or is skipped and
    /// counted when `ignore_errors` is set. With `traced`, keeps the record each row came
    /// from.
    pub fn decode(
        &mut self,
        records: &Messages,
        at: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        let mut batches = Vec::new();
        let mut record_of_row = Vec::new();
        let all = records.iter().enumerate().try_for_each(|(i, record)| {
            if !self.is_tombstone(record) {
                self.feed(record, &mut batches)?;
                record_of_row.push(i as u32);
            }
            Ok::<(), String>(())
        });
        match all {
            Ok(()) => self
                .flush_into(&mut batches)
                .map_err(|e| self.error(at, 0, e))?,
            Err(_) => {
                // Find the records that cannot be read, one at a time, on a new decoder.
                self.decoder = None;
                batches.clear();
                record_of_row.clear();
                for (i, record) in records.iter().enumerate() {
                    if self.is_tombstone(record) {
                        continue;
                    }
                    let one = self
                        .feed(record, &mut batches)
                        .and_then(|()| self.flush_into(&mut batches));
                    match one {
                        Ok(()) => record_of_row.push(i as u32),
                        Err(e) if ignore_errors => {
                            self.decoder = None;
                            skipped(at, i, &e, metrics);
                        }
                        Err(e) => return Err(self.error(at, i, e)),
                    }
                }
            }
        }
        let Some(rows) = self.assemble(&batches, at)? else {
            return Ok(None);
        };
        if self.format.envelope {
            let changes = envelope::Changes::of(&rows, &record_of_row);
            return changes.decoded(self, at, ignore_errors, metrics, traced);
        }
        Ok(Some(Decoded {
            chunk: Chunk::inserts(rows),
            line_of_row: if traced { record_of_row } else { Vec::new() },
            facts: Vec::new(),
        }))
    }

    /// Whether `record` is a tombstone a changelog's reader passes over (Debezium writes
    /// one after each delete, for log compaction).
    fn is_tombstone(&self, record: &[u8]) -> bool {
        self.format.envelope && record.is_empty()
    }

    /// Feeds one record to the decoder, flushing full batches into `batches`.
    fn feed(&mut self, record: &[u8], batches: &mut Vec<RecordBatch>) -> Result<(), String> {
        let Some(id) = schema_id(record) else {
            return Err(match record.first() {
                None => "an empty record (a tombstone?)".to_string(),
                Some(&MAGIC) => "the record ends inside its 5-byte header".to_string(),
                Some(other) => format!(
                    "not the Confluent wire format: the first byte is 0x{other:02x}, not 0x00"
                ),
            });
        };
        if record.len() == HEADER {
            return Err("the record has a header and no value".to_string());
        }
        if let Some(why) = self.refused.get(&id) {
            return Err(why.clone());
        }
        if !self.writers.contains_key(&id) {
            return Err(format!("schema id {id} was not fetched from the registry"));
        }
        let decoder = self.decoder()?;
        let not_one_value = || {
            format!(
                "the record's {} bytes are not one value of its schema (truncated, or bytes \
                 after the value)",
                record.len() - HEADER
            )
        };
        let mut rest = record;
        loop {
            // The decoder reads what follows a value as the next record's header.
            let used = decoder.decode(rest).map_err(|e| match e.to_string() {
                after if after.contains("Missing magic bytes") => not_one_value(),
                other => format!("its value does not decode: {other}"),
            })?;
            rest = &rest[used..];
            if rest.is_empty() {
                return Ok(());
            }
            if !decoder.batch_is_full() {
                return Err(not_one_value());
            }
            if let Some(batch) = decoder.flush().map_err(|e| e.to_string())? {
                batches.push(batch);
            }
        }
    }

    /// Moves the rows decoded so far into `batches`.
    fn flush_into(&mut self, batches: &mut Vec<RecordBatch>) -> Result<(), String> {
        if let Some(decoder) = &mut self.decoder
            && let Some(batch) = decoder.flush().map_err(|e| e.to_string())?
        {
            batches.push(batch);
        }
        Ok(())
    }

    /// The decoder, made for the writer schemas known if there is none. A writer schema
    /// the table's cannot read is refused (its records fail) and the others kept.
    fn decoder(&mut self) -> Result<&mut Decoder, String> {
        if self.decoder.is_none() {
            let decoder = match self.build_decoder(self.writers.iter()) {
                Ok(decoder) => decoder,
                Err(_) => self.build_without_unreadable_writers()?,
            };
            self.decoder = Some(decoder);
        }
        Ok(self.decoder.as_mut().expect("decoder"))
    }

    /// Tries each writer schema alone, refuses those that fail, and builds a decoder of
    /// the rest.
    fn build_without_unreadable_writers(&mut self) -> Result<Decoder, String> {
        let mut readable = BTreeMap::new();
        for (id, schema) in std::mem::take(&mut self.writers) {
            match self.build_decoder([(&id, &schema)].into_iter()) {
                Ok(_) => {
                    readable.insert(id, schema);
                }
                Err(e) => {
                    let why = format!(
                        "the writer schema of id {id} cannot be read as the table's columns: {e}"
                    );
                    self.refused.insert(id, why);
                }
            }
        }
        self.writers = readable;
        self.build_decoder(self.writers.iter())
    }

    fn build_decoder<'a>(
        &self,
        writers: impl Iterator<Item = (&'a u32, &'a Arc<str>)>,
    ) -> Result<Decoder, String> {
        let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        for (id, schema) in writers {
            let schema = schema::named_as_table(schema, self.table.fields(), self.format.envelope)
                .map_err(|e| e.to_string())?;
            store
                .set(Fingerprint::Id(*id), AvroSchema::new(schema))
                .map_err(|e| e.to_string())?;
        }
        ReaderBuilder::new()
            .with_batch_size(self.batch_size)
            .with_reader_schema(AvroSchema::new(self.reader_schema.clone()))
            .with_writer_schema_store(store)
            .build_decoder()
            .map_err(|e| e.to_string())
    }

    /// The decoded batches as one, in the decoded columns' types.
    fn assemble(
        &self,
        batches: &[RecordBatch],
        at: LinePosition<'_>,
    ) -> Result<Option<RecordBatch>> {
        let Some(first) = batches.first() else {
            return Ok(None);
        };
        let decoded = concat_batches(&first.schema(), batches)?;
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        let columns = decoded
            .columns()
            .iter()
            .zip(self.decoded.fields())
            .map(|(column, field)| cast_with_options(column, field.data_type(), &options))
            .collect::<Result<Vec<ArrayRef>, _>>()
            .map_err(|e| self.error(at, 0, e.to_string()))?;
        let rows = RecordBatch::try_new(self.decoded.clone(), columns)
            .map_err(|e| self.error(at, 0, e.to_string()))?;
        Ok(Some(rows))
    }

    /// Tells the reader the writer schema of `id` (as the registry would).
    #[cfg(test)]
    pub(super) fn know_writer(&mut self, id: u32, schema: &str) {
        self.writers.insert(id, Arc::from(schema));
        self.decoder = None;
    }

    /// An error naming the record's offset.
    pub(super) fn error(&self, at: LinePosition<'_>, record: usize, message: String) -> EddyError {
        EddyError::Format {
            file: at.file.to_string(),
            line: at.first_line + record as u64,
            message: format!("{} record: {message}", self.format.name()),
        }
    }
}

/// Logs and counts a record skipped.
pub(super) fn skipped(at: LinePosition<'_>, record: usize, error: &str, metrics: &OperatorMetrics) {
    let offset = at.first_line + record as u64;
    tracing::debug!(
        at = at.file,
        offset,
        error,
        "skipping malformed Avro record"
    );
    OperatorMetrics::add(&metrics.parse_errors_skipped, 1);
}

/// The schema id of a record in the Confluent wire format; `None` if it has no header.
fn schema_id(record: &[u8]) -> Option<u32> {
    match record {
        [MAGIC, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}
