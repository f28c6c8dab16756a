//! `'connector' = 'kafka'`: reads and writes a topic of a Kafka-protocol broker, one CSV
//! line, JSON object or Avro record per record, through librdkafka (the `rdkafka` crate).
//!
//! The source spreads the topic's partitions over its subtasks, reads with
//! `isolation.level = read_committed`, and keeps each partition's next offset in the
//! checkpoint, where a restore resumes. The sink writes at least once through an
//! idempotent producer, flushed at every checkpoint, or exactly once as a write-ahead
//! two-phase commit: a checkpoint's records are kept in the checkpoint (the prepared
//! transaction) and produced in one Kafka transaction once the checkpoint completes. The
//! transaction also commits a marker (the checkpoint id as the offset of a consumer group
//! named after the writer, the job's id as the offset's metadata), so a restored sink knows
//! which of the restored checkpoint's transactions already reached the topic and commits
//! only the others (another job's marker, through a shared transactional-id prefix, counts
//! for nothing); a restarted sink's producer fences every earlier one with the same
//! transactional id, and one process commits a writer's transactions one at a time.

mod metadata;
mod sink;
mod source;
pub mod upsert;

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_common::{EddyError, Result};
use rdkafka::ClientConfig;

use self::upsert::UpsertLayout;
use super::format::{Format, MessageReader, format_keys};
use super::transaction::DeliveryGuarantee;
use super::{
    Options, SinkContext, SinkWriter, SourceChanges, SourceContext, SourceReader, TableConnector,
};

const KEYS: &[&str] = &[
    "topic",
    "scan.startup.mode",
    "scan.bounded.mode",
    "sink.delivery-guarantee",
    "sink.transactional-id-prefix",
];
const PROPERTIES: &str = "properties.";

/// Where a source starts when the checkpoint has no offset for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartupMode {
    Earliest,
    Latest,
}

/// Configuration of a Kafka table.
#[derive(Debug, Clone)]
pub struct KafkaConnector {
    table: String,
    topic: String,
    /// `properties.*`, passed to librdkafka.
    properties: BTreeMap<String, String>,
    format: Format,
    ignore_parse_errors: bool,
    startup: StartupMode,
    /// Read up to the offsets that are the latest when the source starts, then end.
    bounded: bool,
    guarantee: DeliveryGuarantee,
    transactional_id_prefix: Option<String>,
    /// `upsert-kafka`: records keyed by the primary key, tombstones for deletes.
    upsert: Option<UpsertLayout>,
}

impl KafkaConnector {
    /// Validates the options (no connection yet).
    pub fn new(table: &str, values: &BTreeMap<String, String>) -> Result<Self> {
        let mut keys = KEYS.to_vec();
        keys.extend(format_keys());
        let options = Options::validate(table, "kafka", values, &keys, &[PROPERTIES])?;
        let (format, ignore_parse_errors) = Format::from_options(&options)?;
        Self::with_format(&options, values, format, ignore_parse_errors)
    }

    /// Validates the options of an `upsert-kafka` table of `schema` keyed by
    /// `primary_key` (no connection yet).
    pub fn upsert(
        table: &str,
        values: &BTreeMap<String, String>,
        schema: &arrow::datatypes::SchemaRef,
        primary_key: &[String],
    ) -> Result<Self> {
        let keys: Vec<&str> = KEYS
            .iter()
            .copied()
            .filter(|k| *k != "scan.startup.mode")
            .chain(upsert::KEYS.iter().copied())
            .collect();
        let options = Options::validate(
            table,
            "upsert-kafka",
            values,
            &keys,
            &[PROPERTIES, "key.", "value."],
        )?;
        let layout = UpsertLayout::from_options(&options, values, schema, primary_key)?;
        let mut connector = Self::with_format(
            &options,
            values,
            Format::Json(Default::default()),
            layout.ignore_parse_errors,
        )?;
        connector.upsert = Some(layout);
        Ok(connector)
    }

    fn with_format(
        options: &Options<'_>,
        values: &BTreeMap<String, String>,
        format: Format,
        ignore_parse_errors: bool,
    ) -> Result<Self> {
        let table = options.table();
        let properties: BTreeMap<String, String> = values
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(PROPERTIES)?.to_string(), v.clone())))
            .collect();
        if !properties.contains_key("bootstrap.servers") {
            return Err(options.error("missing option 'properties.bootstrap.servers'".into()));
        }
        let startup = match options
            .get("scan.startup.mode")
            .unwrap_or("earliest-offset")
        {
            "earliest-offset" => StartupMode::Earliest,
            "latest-offset" => StartupMode::Latest,
            other => {
                return Err(options.error(format!(
                    "option 'scan.startup.mode' = '{other}': expected 'earliest-offset' or 'latest-offset'"
                )));
            }
        };
        let bounded = match options.get("scan.bounded.mode").unwrap_or("unbounded") {
            "unbounded" => false,
            "latest-offset" => true,
            other => {
                return Err(options.error(format!(
                    "option 'scan.bounded.mode' = '{other}': expected 'unbounded' or 'latest-offset'"
                )));
            }
        };
        let topic = options.required("topic")?.to_string();
        // Flink's Kafka tables name a value's subject after the topic.
        let format = match format {
            Format::Avro(avro) => Format::Avro(avro.with_default_subject(format!("{topic}-value"))),
            other => other,
        };
        Ok(KafkaConnector {
            table: table.to_string(),
            topic,
            properties,
            format,
            ignore_parse_errors,
            startup,
            bounded,
            guarantee: options
                .delivery_guarantee()?
                .unwrap_or(DeliveryGuarantee::AtLeastOnce),
            transactional_id_prefix: options
                .get("sink.transactional-id-prefix")
                .map(str::to_string),
            upsert: None,
        })
    }

    /// A librdkafka configuration: the table's `properties.*` over `defaults`.
    fn client_config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut config = ClientConfig::new();
        for (key, value) in defaults {
            config.set(*key, *value);
        }
        for (key, value) in &self.properties {
            config.set(key, value);
        }
        config
    }

    /// A producer's configuration: [`KafkaConnector::client_config`], keyed records
    /// partitioned as Java's clients partition them (murmur2 of the key, so a key lands in
    /// the partition Flink or Debezium would put it in) unless `properties.partitioner`
    /// says otherwise.
    fn producer_config(&self, defaults: &[(&str, &str)]) -> ClientConfig {
        let mut all = vec![("partitioner", "murmur2_random")];
        all.extend_from_slice(defaults);
        self.client_config(&all)
    }

    /// upsert-kafka's `sink.buffer-flush.*`: flush after this many records or this long,
    /// each key's last record only.
    fn buffer_flush(&self) -> Option<(usize, std::time::Duration)> {
        self.upsert.as_ref().and_then(|layout| layout.buffer_flush)
    }

    fn error(&self, message: String) -> EddyError {
        EddyError::Connector {
            table: self.table.clone(),
            message,
        }
    }
}

impl TableConnector for KafkaConnector {
    fn name(&self) -> &'static str {
        match self.upsert {
            Some(_) => "upsert-kafka",
            None => "kafka",
        }
    }

    fn commits_at_checkpoints(&self, _checkpointing: bool) -> bool {
        self.guarantee == DeliveryGuarantee::ExactlyOnce
    }

    fn is_source(&self) -> bool {
        true
    }

    fn is_sink(&self) -> bool {
        !self.format.is_changelog()
    }

    fn readable_metadata(&self) -> Vec<super::ReadableMetadata> {
        // upsert-kafka's value format (json) states no metadata of its own.
        metadata::readable(&self.format)
    }

    fn source_changes(&self) -> SourceChanges {
        match (&self.upsert, self.format.is_changelog()) {
            (Some(layout), _) => SourceChanges::Upsert {
                key: layout.key_columns().to_vec(),
            },
            (None, true) => SourceChanges::All,
            (None, false) => SourceChanges::Inserts,
        }
    }

    fn accepts_updates(&self) -> bool {
        self.upsert.is_some()
    }

    fn write_refusal(&self) -> Option<String> {
        self.format.write_refusal()
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        let metadata = metadata::MetadataColumns::new(&context.metadata, &self.format)
            .map_err(|e| self.error(e))?;
        let physical = context.physical_schema();
        let framed = MessageReader::new(&self.format, &physical, context.batch_size)
            .transpose()
            .map_err(|e| self.error(e.to_string()))?;
        let sides = match &self.upsert {
            Some(layout) => layout.readers(context.batch_size)?,
            None => Default::default(),
        };
        Ok(Box::new(source::KafkaReader::new(
            Arc::new(self.clone()),
            context,
            metadata,
            framed,
            sides,
        )))
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        sink::create(Arc::new(self.clone()), context)
    }
}

/// A librdkafka error about this table.
fn kafka_error(
    connector: &KafkaConnector,
    doing: &str,
    e: rdkafka::error::KafkaError,
) -> EddyError {
    // A transactional producer's fatal error never heals; others may.
    let transient = match &e {
        rdkafka::error::KafkaError::Transaction(error) => !error.is_fatal(),
        _ => true,
    };
    EddyError::Remote {
        table: connector.table.clone(),
        message: format!("{doing} (topic '{}'): {e}", connector.topic),
        transient,
    }
}
