//! Avro records, one a Kafka message, as Flink's `avro` and `avro-confluent` formats
//! have them, through arrow-rs's `arrow-avro` (it decodes straight into Arrow arrays and
//! resolves a writer's schema against a reader's).
//!
//! - `avro`: a record's Avro binary encoding alone; its schema is the table's, derived
//!   from the columns as Flink derives it ([`schema`]).
//! - `avro-confluent`: the Confluent wire format, a zero byte, the writer schema's id in
//!   the registry (4 bytes, big-endian) and the record. A reader fetches each id's schema
//!   from the registry once and reads the record by the table's schema (Avro's schema
//!   resolution: a field the writer lacks takes the table's default, NULL; a field the
//!   table lacks is skipped; an `int` is read as a `long`). A writer registers the table's
//!   schema under the subject (`<topic>-value` by default, as Flink's Kafka tables) and
//!   writes its id.

pub mod registry;
pub mod schema;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::{CastOptions, cast_with_options, concat_batches};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{
    AvroSchema, Fingerprint, FingerprintAlgorithm, FingerprintStrategy, SCHEMA_METADATA_KEY,
    SchemaStore,
};
use arrow_avro::writer::format::{AvroBinaryFormat, AvroSoeFormat};
use arrow_avro::writer::{Encoder, WriterBuilder};
use eddy_common::chunk::Chunk;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};

use self::registry::{Registry, RegistryAuth};
use super::messages::Messages;
use super::{Decoded, LinePosition};
use crate::Options;

/// The option keys of the Avro formats.
pub const KEYS: &[&str] = &[
    "avro.encoding",
    "avro.timestamp_mapping.legacy",
    "avro.ignore-parse-errors",
    "avro-confluent.url",
    "avro-confluent.subject",
    "avro-confluent.basic-auth.credentials-source",
    "avro-confluent.basic-auth.user-info",
    "avro-confluent.bearer-auth.credentials-source",
    "avro-confluent.bearer-auth.token",
    "avro-confluent.timestamp_mapping.legacy",
    "avro-confluent.ignore-parse-errors",
];

/// The Confluent wire format's first byte.
const MAGIC: u8 = 0;
/// The bytes before a Confluent record's body: the magic byte and the schema id.
const HEADER: usize = 5;
/// The id under which a plain `avro` table's own schema is kept in the decoder.
const OWN_SCHEMA: u32 = 0;

/// An Avro format, as its options set it.
#[derive(Debug, Clone)]
pub struct AvroFormat {
    /// The table, for errors.
    table: String,
    /// `*.timestamp_mapping.legacy`: TIMESTAMP(3) as `timestamp-millis` (Flink's default).
    legacy_timestamps: bool,
    /// `avro-confluent`'s registry; `None` for plain `avro`.
    registry: Option<Arc<Registry>>,
    /// `avro-confluent.subject`, or the Kafka table's default.
    subject: Option<String>,
}

impl AvroFormat {
    /// The `avro` format its options describe.
    pub fn plain(options: &Options<'_>) -> Result<Self> {
        if let Some(encoding) = options.get("avro.encoding")
            && !encoding.eq_ignore_ascii_case("binary")
        {
            return Err(options.error(format!(
                "option 'avro.encoding' = '{encoding}': unsupported (Eddy reads and writes \
                 Avro's binary encoding)"
            )));
        }
        Ok(AvroFormat {
            table: options.table().to_string(),
            legacy_timestamps: options.flag("avro.timestamp_mapping.legacy", true)?,
            registry: None,
            subject: None,
        })
    }

    /// The `avro-confluent` format its options describe.
    pub fn confluent(options: &Options<'_>) -> Result<Self> {
        let url = options.required("avro-confluent.url")?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(options.error(format!(
                "option 'avro-confluent.url' = '{url}': expected an http:// or https:// URL"
            )));
        }
        let auth = registry_auth(options)?;
        Ok(AvroFormat {
            table: options.table().to_string(),
            legacy_timestamps: options.flag("avro-confluent.timestamp_mapping.legacy", true)?,
            registry: Some(Arc::new(Registry::new(url, auth))),
            subject: options.get("avro-confluent.subject").map(str::to_string),
        })
    }

    /// The format's name.
    pub fn name(&self) -> &'static str {
        match self.registry {
            Some(_) => "avro-confluent",
            None => "avro",
        }
    }

    /// Sets the subject to `subject` unless the options named one.
    pub fn with_default_subject(mut self, subject: String) -> Self {
        self.subject.get_or_insert(subject);
        self
    }

    /// The table's Avro schema (JSON) for its columns `schema`.
    fn table_schema(&self, schema: &SchemaRef) -> Result<String, schema::Unsupported> {
        schema::table_schema(schema.fields(), self.legacy_timestamps)
    }

    /// A reader of records into rows of `table` (the columns the format decodes),
    /// `batch_size` rows a batch at most.
    pub fn reader(
        &self,
        table: &SchemaRef,
        batch_size: usize,
    ) -> Result<AvroReader, schema::Unsupported> {
        let reader_schema = self.table_schema(table)?;
        let mut writers = BTreeMap::new();
        if self.registry.is_none() {
            writers.insert(OWN_SCHEMA, Arc::from(reader_schema.as_str()));
        }
        Ok(AvroReader {
            format: self.clone(),
            table: table.clone(),
            reader_schema,
            writers,
            refused: BTreeMap::new(),
            decoder: None,
            batch_size: batch_size.max(1),
        })
    }

    /// A writer of rows of `table` (the columns the format encodes).
    pub fn writer(&self, table: &SchemaRef) -> Result<AvroWriter, schema::Unsupported> {
        let avro_schema = self.table_schema(table)?;
        let fields: Vec<_> = table
            .fields()
            .iter()
            .map(|f| {
                let codec_type = schema::codec_type(f.data_type());
                f.as_ref().clone().with_data_type(codec_type)
            })
            .collect();
        let metadata = [(SCHEMA_METADATA_KEY.to_string(), avro_schema.clone())].into();
        Ok(AvroWriter {
            format: self.clone(),
            codec_schema: Arc::new(Schema::new_with_metadata(fields, metadata)),
            avro_schema,
            encoder: None,
        })
    }
}

/// The registry credentials the options give.
fn registry_auth(options: &Options<'_>) -> Result<Option<RegistryAuth>> {
    let basic_source = options.get("avro-confluent.basic-auth.credentials-source");
    let user_info = options.get("avro-confluent.basic-auth.user-info");
    let bearer_source = options.get("avro-confluent.bearer-auth.credentials-source");
    let token = options.get("avro-confluent.bearer-auth.token");
    if let Some(source) = basic_source
        && !source.eq_ignore_ascii_case("USER_INFO")
    {
        return Err(options.error(format!(
            "option 'avro-confluent.basic-auth.credentials-source' = '{source}': unsupported \
             (expected USER_INFO, with 'avro-confluent.basic-auth.user-info')"
        )));
    }
    if let Some(source) = bearer_source
        && !source.eq_ignore_ascii_case("STATIC_TOKEN")
    {
        return Err(options.error(format!(
            "option 'avro-confluent.bearer-auth.credentials-source' = '{source}': unsupported \
             (expected STATIC_TOKEN, with 'avro-confluent.bearer-auth.token')"
        )));
    }
    match (user_info, token) {
        (Some(_), Some(_)) => Err(options.error(
            "options 'avro-confluent.basic-auth.user-info' and \
             'avro-confluent.bearer-auth.token' exclude each other"
                .into(),
        )),
        (Some(info), None) => {
            let Some((user, password)) = info.split_once(':') else {
                return Err(options.error(
                    "option 'avro-confluent.basic-auth.user-info': expected 'user:password'".into(),
                ));
            };
            Ok(Some(RegistryAuth::Basic {
                user: user.to_string(),
                password: password.to_string(),
            }))
        }
        (None, Some(token)) => Ok(Some(RegistryAuth::Bearer(token.to_string()))),
        (None, None) => Ok(None),
    }
}

/// Decodes Avro records into rows of a table.
pub struct AvroReader {
    format: AvroFormat,
    /// The columns the records become.
    table: SchemaRef,
    /// The table's Avro schema: every record is read by it.
    reader_schema: String,
    /// The writer schemas known, by registry id (plain `avro`: the table's own).
    writers: BTreeMap<u32, Arc<str>>,
    /// Ids whose records cannot be read, and why (not in the registry, or a schema the
    /// table's cannot read).
    refused: BTreeMap<u32, String>,
    /// Reads records of every schema in `writers`; made again when one is added.
    decoder: Option<Decoder>,
    batch_size: usize,
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

    /// Fetches from the registry the writer schemas of the records' ids not yet known.
    pub async fn fetch_schemas(&mut self, records: &Messages) -> Result<()> {
        let Some(registry) = self.format.registry.clone() else {
            return Ok(());
        };
        let ids: BTreeSet<u32> = records.iter().filter_map(schema_id).collect();
        for id in ids {
            if self.writers.contains_key(&id) || self.refused.contains_key(&id) {
                continue;
            }
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
    /// one a record. A record that cannot be read fails naming its offset (`at`: the
    /// first record's), or is skipped and counted when `ignore_errors` is set. With
    /// `traced`, keeps the record each row came from.
    pub fn decode(
        &mut self,
        records: &Messages,
        at: LinePosition<'_>,
        ignore_errors: bool,
        metrics: &OperatorMetrics,
        traced: bool,
    ) -> Result<Option<Decoded>> {
        let mut batches = Vec::new();
        let all = records
            .iter()
            .try_for_each(|record| self.feed(record, &mut batches));
        if all.is_ok() {
            self.flush_into(&mut batches)
                .map_err(|e| self.error(at, 0, e))?;
            let line_of_row = match traced {
                true => (0..records.len() as u32).collect(),
                false => Vec::new(),
            };
            return self.assemble(&batches, line_of_row, at);
        }
        // Find the records that cannot be read, one at a time, on a new decoder.
        self.decoder = None;
        batches.clear();
        let mut line_of_row = Vec::new();
        for (i, record) in records.iter().enumerate() {
            let one = self
                .feed(record, &mut batches)
                .and_then(|()| self.flush_into(&mut batches));
            match one {
                Ok(()) if traced => line_of_row.push(i as u32),
                Ok(()) => {}
                Err(e) if ignore_errors => {
                    self.decoder = None;
                    tracing::debug!(at = at.file, offset = at.first_line + i as u64, error = %e, "skipping malformed Avro record");
                    OperatorMetrics::add(&metrics.parse_errors_skipped, 1);
                }
                Err(e) => return Err(self.error(at, i, e)),
            }
        }
        self.assemble(&batches, line_of_row, at)
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
            let schema = schema::named_as_table(schema, &self.table).map_err(|e| e.to_string())?;
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

    /// The decoded batches as one chunk of the table's columns and types.
    fn assemble(
        &self,
        batches: &[RecordBatch],
        line_of_row: Vec<u32>,
        at: LinePosition<'_>,
    ) -> Result<Option<Decoded>> {
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
            .zip(self.table.fields())
            .map(|(column, field)| cast_with_options(column, field.data_type(), &options))
            .collect::<Result<Vec<ArrayRef>, _>>()
            .map_err(|e| self.error(at, 0, e.to_string()))?;
        let rows = RecordBatch::try_new(self.table.clone(), columns)
            .map_err(|e| self.error(at, 0, e.to_string()))?;
        Ok(Some(Decoded {
            chunk: Chunk::inserts(rows),
            line_of_row,
            facts: Vec::new(),
        }))
    }

    fn error(&self, at: LinePosition<'_>, record: usize, message: String) -> EddyError {
        EddyError::Format {
            file: at.file.to_string(),
            line: at.first_line + record as u64,
            message: format!("{} record: {message}", self.format.name()),
        }
    }
}

/// The schema id of a record in the Confluent wire format; `None` if it has no header.
fn schema_id(record: &[u8]) -> Option<u32> {
    match record {
        [MAGIC, a, b, c, d, ..] => Some(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Encodes rows of a table into Avro records.
pub struct AvroWriter {
    format: AvroFormat,
    /// The table's columns in the types the encoder takes, the Avro schema attached.
    codec_schema: SchemaRef,
    avro_schema: String,
    /// Made on first use (`avro-confluent` registers the schema first).
    encoder: Option<Encoder>,
}

impl AvroWriter {
    /// Appends a record for each row of `rows` to `out`.
    pub async fn encode(&mut self, rows: &RecordBatch, out: &mut Messages) -> Result<()> {
        if self.encoder.is_none() {
            self.encoder = Some(self.make_encoder().await?);
        }
        let columns = rows
            .columns()
            .iter()
            .zip(self.codec_schema.fields())
            .map(|(column, field)| arrow::compute::cast(column, field.data_type()))
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let batch = RecordBatch::try_new(self.codec_schema.clone(), columns)?;
        let encoder = self.encoder.as_mut().expect("encoder");
        encoder
            .encode(&batch)
            .map_err(|e| EddyError::Internal(format!("encoding Avro records: {e}")))?;
        for record in encoder.flush().iter() {
            out.push(&record);
        }
        Ok(())
    }

    async fn make_encoder(&self) -> Result<Encoder> {
        let builder = WriterBuilder::new(self.codec_schema.as_ref().clone());
        let encoder = match (&self.format.registry, &self.format.subject) {
            (Some(registry), Some(subject)) => {
                let id = registry
                    .register(subject, &self.avro_schema)
                    .await
                    .map_err(|e| e.for_table(&self.format.table))?;
                builder
                    .with_fingerprint_strategy(FingerprintStrategy::Id(id))
                    .build_encoder::<AvroSoeFormat>()
            }
            (Some(_), None) => {
                return Err(EddyError::Internal(
                    "an 'avro-confluent' writer without a subject".into(),
                ));
            }
            (None, _) => builder.build_encoder::<AvroBinaryFormat>(),
        };
        encoder.map_err(|e| EddyError::Internal(format!("the Avro writer: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap as Map;

    use arrow::array::{
        BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int16Array,
        Int32Array, Int64Array, StringArray, StructArray, TimestampMillisecondArray,
    };
    use arrow::datatypes::{DataType, Field, TimeUnit};
    use proptest::prelude::*;

    use super::*;

    fn options(values: &[(&str, &str)]) -> Map<String, String> {
        values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn plain() -> AvroFormat {
        let values = options(&[("format", "avro")]);
        let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
        let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
        AvroFormat::plain(&options).unwrap()
    }

    fn table() -> SchemaRef {
        let city = Field::new("city", DataType::Utf8, true);
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("small", DataType::Int16, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new("name", DataType::Utf8, true),
            Field::new("raw", DataType::Binary, true),
            Field::new("day", DataType::Date32, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("score", DataType::Float64, true),
            Field::new("address", DataType::Struct(vec![city.clone()].into()), true),
        ]))
    }

    fn rows() -> RecordBatch {
        let city = Field::new("city", DataType::Utf8, true);
        let address = StructArray::from(vec![(
            Arc::new(city),
            Arc::new(StringArray::from(vec![Some("Oslo"), None, Some("")])) as ArrayRef,
        )]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![1, -2, i64::MAX])),
            Arc::new(Int16Array::from(vec![Some(7), None, Some(-32768)])),
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
            Arc::new(
                Decimal128Array::from(vec![Some(12345), None, Some(-1)])
                    .with_precision_and_scale(10, 2)
                    .unwrap(),
            ),
            Arc::new(StringArray::from(vec![Some("a\nb"), None, Some("é")])),
            Arc::new(BinaryArray::from(vec![
                Some(&b"\x00\n"[..]),
                None,
                Some(b""),
            ])),
            Arc::new(Date32Array::from(vec![Some(19_723), None, Some(-1)])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(1_704_153_573_004),
                None,
                Some(-1),
            ])),
            Arc::new(Float64Array::from(vec![Some(1.5), Some(f64::NAN), None])),
            Arc::new(address),
        ];
        RecordBatch::try_new(table(), columns).unwrap()
    }

    fn at() -> LinePosition<'static> {
        LinePosition {
            file: "topic 't' partition 0, offset",
            first_line: 100,
        }
    }

    /// Records as the Kafka source gathers them.
    fn gathered(reader: &AvroReader, records: &Messages) -> Messages {
        let mut out = Messages::default();
        for record in records.iter() {
            out.push_prefixed(reader.record_prefix(), record);
        }
        out
    }

    async fn encoded(format: &AvroFormat, rows: &RecordBatch) -> Messages {
        let mut writer = format.writer(&rows.schema()).unwrap();
        let mut out = Messages::default();
        writer.encode(rows, &mut out).await.unwrap();
        out
    }

    fn decode(reader: &mut AvroReader, records: &Messages, ignore: bool) -> Result<Option<Chunk>> {
        let metrics = OperatorMetrics::default();
        let decoded = reader.decode(records, at(), ignore, &metrics, false)?;
        Ok(decoded.map(|d| d.chunk))
    }

    #[tokio::test]
    async fn rows_round_trip_through_plain_avro_records() {
        let format = plain();
        let records = encoded(&format, &rows()).await;
        assert_eq!(records.len(), 3);
        // Small batches: the decoder fills and flushes between records.
        let mut reader = format.reader(&table(), 2).unwrap();
        let gathered = gathered(&reader, &records);
        let chunk = decode(&mut reader, &gathered, false).unwrap().unwrap();
        assert_eq!(chunk.rows(), &rows());
        // The same reader again (its decoder kept).
        let chunk = decode(&mut reader, &gathered, false).unwrap().unwrap();
        assert_eq!(chunk.num_rows(), 3);
    }

    /// The Confluent framing of `rows` written by `schema` (an Avro schema) as id `id`.
    fn confluent_records(rows: &RecordBatch, schema: &str, id: u32) -> Messages {
        let metadata = [(SCHEMA_METADATA_KEY.to_string(), schema.to_string())].into();
        let arrow = Schema::new_with_metadata(rows.schema().fields().clone(), metadata);
        let mut encoder = WriterBuilder::new(arrow)
            .with_fingerprint_strategy(FingerprintStrategy::Id(id))
            .build_encoder::<AvroSoeFormat>()
            .unwrap();
        encoder.encode(rows).unwrap();
        let mut out = Messages::default();
        for record in encoder.flush().iter() {
            out.push(&record);
        }
        out
    }

    fn confluent_reader(table: &SchemaRef, writers: &[(u32, &str)]) -> AvroReader {
        let values = options(&[
            ("format", "avro-confluent"),
            ("avro-confluent.url", "http://127.0.0.1:1"),
        ]);
        let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
        let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
        let format = AvroFormat::confluent(&options).unwrap();
        let mut reader = format.reader(table, 1024).unwrap();
        for (id, schema) in writers {
            reader.writers.insert(*id, Arc::from(*schema));
        }
        reader
    }

    #[test]
    fn records_of_older_and_newer_writer_schemas_are_read_by_the_table_schema() {
        let table = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("added", DataType::Utf8, true),
        ]));
        // Version 1: `id` an int, no `added`; version 2: an extra field the table lacks.
        let v1 = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"int"},{"name":"name","type":["null","string"],"default":null}]}"#;
        let v2 = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"long"},{"name":"extra","type":"double"},
            {"name":"name","type":["null","string"],"default":null},
            {"name":"added","type":["null","string"],"default":null}]}"#;
        let rows1 = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int32, false),
                Field::new("name", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int32Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a"), None])),
            ],
        )
        .unwrap();
        let rows2 = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("extra", DataType::Float64, false),
                Field::new("name", DataType::Utf8, true),
                Field::new("added", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![3])),
                Arc::new(Float64Array::from(vec![0.5])),
                Arc::new(StringArray::from(vec![Some("c")])),
                Arc::new(StringArray::from(vec![Some("new")])),
            ],
        )
        .unwrap();
        let mut records = Messages::default();
        let first = confluent_records(&rows1, v1, 7);
        let second = confluent_records(&rows2, v2, 8);
        // Interleaved ids: the decoder switches schemas between records.
        for record in [
            first.iter().next(),
            second.iter().next(),
            first.iter().nth(1),
        ] {
            records.push(record.unwrap());
        }
        let mut reader = confluent_reader(&table, &[(7, v1), (8, v2)]);
        let chunk = decode(&mut reader, &records, false).unwrap().unwrap();
        let expected = RecordBatch::try_new(
            table.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 3, 2])),
                Arc::new(StringArray::from(vec![Some("a"), Some("c"), None])),
                Arc::new(StringArray::from(vec![None, Some("new"), None])),
            ],
        )
        .unwrap();
        assert_eq!(chunk.rows(), &expected);
    }

    #[test]
    fn unreadable_records_fail_naming_the_offset_or_are_skipped_and_counted() {
        let table = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let schema = schema::table_schema(table.fields(), true).unwrap();
        let rows = RecordBatch::try_new(
            table.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5, 6])),
                Arc::new(StringArray::from(vec!["abcdef"; 6])),
            ],
        )
        .unwrap();
        let good = confluent_records(&rows, &schema, 1);
        let good: Vec<&[u8]> = good.iter().collect();
        // A schema whose `id` has no default and is missing: no record of it is readable.
        let other = r#"{"type":"record","name":"r","fields":[{"name":"x","type":"long"}]}"#;
        let mut unknown_id = good[2].to_vec();
        unknown_id[4] = 9;
        let mut other_id = good[3].to_vec();
        other_id[4] = 2;
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[0][..good[0].len() - 2].to_vec(), "not one value"),
            ([good[1], b"xx"].concat(), "not one value"),
            (unknown_id, "schema id 9 was not fetched"),
            (other_id, "cannot be read as the table's columns"),
            (Vec::new(), "an empty record"),
            (vec![0, 0, 0], "inside its 5-byte header"),
            (good[4][..5].to_vec(), "a header and no value"),
            (b"{\"id\":1}".to_vec(), "first byte is 0x7b"),
        ];
        for (bad, expected) in &cases {
            let mut records = Messages::default();
            records.push(good[5]);
            records.push(bad);
            records.push(good[4]);
            let mut reader = confluent_reader(&table, &[(1, &schema), (2, other)]);
            let error = decode(&mut reader, &records, false)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("offset at line 101") && error.contains(expected),
                "{expected}: {error}"
            );
            let metrics = OperatorMetrics::default();
            let decoded = reader
                .decode(&records, at(), true, &metrics, true)
                .unwrap()
                .unwrap();
            assert_eq!(decoded.chunk.num_rows(), 2, "{expected}");
            assert_eq!(decoded.line_of_row, vec![0, 2]);
            assert_eq!(
                metrics
                    .parse_errors_skipped
                    .load(std::sync::atomic::Ordering::Relaxed),
                1
            );
        }
    }

    #[test]
    fn bad_options_are_refused() {
        let keys: Vec<&str> = KEYS.iter().copied().chain(["format"]).collect();
        let confluent = |extra: &[(&str, &str)]| {
            let mut values = options(&[("format", "avro-confluent")]);
            values.extend(options(extra));
            let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
            AvroFormat::confluent(&options)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert!(confluent(&[]).contains("avro-confluent.url"));
        assert!(confluent(&[("avro-confluent.url", "localhost:8081")]).contains("http://"));
        let both = [
            ("avro-confluent.url", "http://r"),
            ("avro-confluent.basic-auth.user-info", "u:p"),
            ("avro-confluent.bearer-auth.token", "t"),
        ];
        assert!(confluent(&both).contains("exclude each other"));
        let no_colon = [
            ("avro-confluent.url", "http://r"),
            ("avro-confluent.basic-auth.user-info", "user"),
        ];
        assert!(confluent(&no_colon).contains("user:password"));
        let values = options(&[("format", "avro"), ("avro.encoding", "json")]);
        let options = Options::validate("t", "kafka", &values, &keys, &[]).unwrap();
        assert!(
            AvroFormat::plain(&options)
                .unwrap_err()
                .to_string()
                .contains("unsupported")
        );
    }

    proptest! {
        #![proptest_config(eddy_common::fuzz::config("format::avro_records"))]

        /// Records with bytes overwritten or cut: an error or rows, never a panic.
        #[test]
        fn mutated_records_never_panic(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let format = plain();
            let records = runtime.block_on(encoded(&format, &rows()));
            let mut reader = format.reader(&table(), 2).unwrap();
            let mut bytes: Vec<Vec<u8>> = gathered(&reader, &records).iter().map(<[u8]>::to_vec).collect();
            for (at, value) in edits {
                let record = at.index(bytes.len());
                let i = at.index(bytes[record].len());
                bytes[record][i] = value;
            }
            let last = bytes.len() - 1;
            let keep = cut.index(bytes[last].len() + 1);
            bytes[last].truncate(keep);
            let mut mutated = Messages::default();
            for record in &bytes {
                mutated.push(record);
            }
            let _ = decode(&mut reader, &mutated, false);
            if let Ok(Some(chunk)) = decode(&mut reader, &mutated, true) {
                prop_assert!(chunk.num_rows() <= 3);
            }
        }
    }
}
