//! Avro records, one a Kafka message, as Flink's `avro` and `avro-confluent` formats
//! have them, through arrow-rs's `arrow-avro` (it decodes straight into Arrow arrays and
//! resolves a writer's schema against a reader's).
//!
//! - `avro`: a record's Avro binary encoding alone; its schema is the table's, derived
//!   from the columns as Flink derives it ([`schema`]).
//! - `debezium-avro-confluent`: Debezium's change envelopes in the Confluent wire format,
//!   read as changes ([`envelope`]).
//! - `avro-confluent`: the Confluent wire format, a zero byte, the writer schema's id in
//!   the registry (4 bytes, big-endian) and the record. A reader fetches each id's schema
//!   from the registry once and reads the record by the table's schema (Avro's schema
//!   resolution: a field the writer lacks takes the table's default, NULL; a field the
//!   table lacks is skipped; an `int` is read as a `long`). A writer registers the table's
//!   schema under the subject (`<topic>-value` by default, as Flink's Kafka tables) and
//!   writes its id.

mod envelope;
mod reader;
pub mod registry;
pub mod schema;
mod writer;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use eddy_common::Result;

pub use self::reader::AvroReader;
use self::registry::{Registry, RegistryAuth};
pub use self::writer::AvroWriter;
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
    "debezium-avro-confluent.url",
    "debezium-avro-confluent.subject",
    "debezium-avro-confluent.basic-auth.credentials-source",
    "debezium-avro-confluent.basic-auth.user-info",
    "debezium-avro-confluent.bearer-auth.credentials-source",
    "debezium-avro-confluent.bearer-auth.token",
    "debezium-avro-confluent.timestamp_mapping.legacy",
    "debezium-avro-confluent.ignore-parse-errors",
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
    /// `debezium-avro-confluent`: records are Debezium's change envelopes.
    envelope: bool,
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
            envelope: false,
        })
    }

    /// The `avro-confluent` format its options describe.
    pub fn confluent(options: &Options<'_>) -> Result<Self> {
        Self::registered(options, "avro-confluent", false)
    }

    /// The `debezium-avro-confluent` format its options describe.
    pub fn debezium(options: &Options<'_>) -> Result<Self> {
        Self::registered(options, "debezium-avro-confluent", true)
    }

    /// A format of records in the Confluent wire format, its options under `prefix.`.
    fn registered(options: &Options<'_>, prefix: &str, envelope: bool) -> Result<Self> {
        let url_key = format!("{prefix}.url");
        let url = options.required(&url_key)?;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(options.error(format!(
                "option '{url_key}' = '{url}': expected an http:// or https:// URL"
            )));
        }
        let auth = registry_auth(options, prefix)?;
        let legacy_key = format!("{prefix}.timestamp_mapping.legacy");
        Ok(AvroFormat {
            table: options.table().to_string(),
            legacy_timestamps: options.flag(&legacy_key, true)?,
            registry: Some(Arc::new(Registry::new(url, auth))),
            subject: options
                .get(&format!("{prefix}.subject"))
                .map(str::to_string),
            envelope,
        })
    }

    /// The format's name.
    pub fn name(&self) -> &'static str {
        match (&self.registry, self.envelope) {
            (_, true) => "debezium-avro-confluent",
            (Some(_), false) => "avro-confluent",
            (None, false) => "avro",
        }
    }

    /// Whether records are changes (Debezium's envelopes), not rows.
    pub fn is_changelog(&self) -> bool {
        self.envelope
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
        let (reader_schema, decoded) = match self.envelope {
            false => (self.table_schema(table)?, table.clone()),
            true => {
                let schema = schema::envelope_schema(table.fields(), self.legacy_timestamps)?;
                let row = DataType::Struct(table.fields().clone());
                let decoded = Schema::new(vec![
                    Field::new("before", row.clone(), true),
                    Field::new("after", row, true),
                    Field::new("op", DataType::Utf8, false),
                ]);
                (schema, Arc::new(decoded))
            }
        };
        let mut writers = BTreeMap::new();
        if self.registry.is_none() {
            writers.insert(OWN_SCHEMA, Arc::from(reader_schema.as_str()));
        }
        Ok(AvroReader {
            format: self.clone(),
            table: table.clone(),
            decoded,
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
        Ok(AvroWriter {
            format: self.clone(),
            shape: schema::EncoderShape::new(table, &avro_schema),
            avro_schema,
            encoder: None,
        })
    }
}

/// The registry credentials the options under `prefix.` give.
fn registry_auth(options: &Options<'_>, prefix: &str) -> Result<Option<RegistryAuth>> {
    let basic_source = options.get(&format!("{prefix}.basic-auth.credentials-source"));
    let user_info = options.get(&format!("{prefix}.basic-auth.user-info"));
    let bearer_source = options.get(&format!("{prefix}.bearer-auth.credentials-source"));
    let token = options.get(&format!("{prefix}.bearer-auth.token"));
    if let Some(source) = basic_source
        && !source.eq_ignore_ascii_case("USER_INFO")
    {
        return Err(options.error(format!(
            "option '{prefix}.basic-auth.credentials-source' = '{source}': unsupported \
             (expected USER_INFO, with '{prefix}.basic-auth.user-info')"
        )));
    }
    if let Some(source) = bearer_source
        && !source.eq_ignore_ascii_case("STATIC_TOKEN")
    {
        return Err(options.error(format!(
            "option '{prefix}.bearer-auth.credentials-source' = '{source}': unsupported \
             (expected STATIC_TOKEN, with '{prefix}.bearer-auth.token')"
        )));
    }
    match (user_info, token) {
        (Some(_), Some(_)) => Err(options.error(format!(
            "options '{prefix}.basic-auth.user-info' and '{prefix}.bearer-auth.token' exclude \
             each other"
        ))),
        (Some(info), None) => {
            let Some((user, password)) = info.split_once(':') else {
                return Err(options.error(format!(
                    "option '{prefix}.basic-auth.user-info': expected 'user:password'"
                )));
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

#[cfg(test)]
mod tests;
