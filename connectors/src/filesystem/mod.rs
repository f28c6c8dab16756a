//! `'connector' = 'filesystem'`: reads and writes CSV, JSON, Parquet ([`parquet`]) or Avro
//! ([`avro`]) files in a local directory or on S3 (reading in [`source`], writing in
//! [`sink`]), in partition directories when the table is `PARTITIONED BY`
//! ([`partitions`]), committing partitions as [`commit`] says.

mod avro;
mod commit;
mod conform;
mod metadata;
mod parquet;
mod partitions;
mod sink;
pub(crate) mod source;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use eddy_common::Result;
use eddy_common::object_storage::resolve;

use commit::{CommitTrigger, PartitionCommit, SUCCESS_FILE, TimeExtractor};
use partitions::{DEFAULT_PARTITION_NAME, PartitionColumns};
use sink::FileSinkConfig;
use source::FileSourceConfig;

use self::avro::{AVRO_FILE_KEYS, AvroFileFormat};
use self::parquet::PARQUET_KEYS;
pub(crate) use self::parquet::{ParquetFormat, ParquetPart};
use crate::format::{FORMAT_NAMES, Format, format_keys};
use crate::transaction::DeliveryGuarantee;
use crate::{Options, SinkContext, SinkWriter, SourceContext, SourceReader, TableConnector};

/// Default `source.split-size`: the largest byte range of a file one split reads.
const DEFAULT_SPLIT_SIZE: u64 = 64 * 1024 * 1024;

const KEYS: &[&str] = &[
    "path",
    "source.split-size",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.rolling-policy.check-interval",
    "sink.delivery-guarantee",
    "sink.shuffle-by-partition.enable",
    "sink.partition-commit.trigger",
    "sink.partition-commit.delay",
    "sink.partition-commit.policy.kind",
    "sink.partition-commit.success-file.name",
    "sink.partition-commit.watermark-time-zone",
    "partition.default-name",
    "partition.time-extractor.kind",
    "partition.time-extractor.timestamp-pattern",
    "partition.time-extractor.timestamp-formatter",
    "lookup.join.cache.ttl",
];
const S3_PREFIX: &str = "s3.";

/// How a filesystem table's files are encoded.
#[derive(Debug, Clone)]
pub enum FileFormat {
    /// A record a line: CSV, JSON, or a change stream in JSON.
    Lines(Format),
    /// Parquet, a bulk format: read a row group at a time, written a part file at a time.
    Parquet(ParquetFormat),
    /// Avro container files, a bulk format: read a file at a time, written a block a
    /// batch.
    Avro(AvroFileFormat),
}

impl FileFormat {
    /// Reads `format` and its options; returns the format and whether malformed records are
    /// skipped rather than failing the job.
    fn from_options(options: &Options<'_>) -> Result<(FileFormat, bool)> {
        match options.required("format")? {
            "parquet" => {
                let parquet = ParquetFormat::from_options(options)?;
                return Ok((FileFormat::Parquet(parquet), false));
            }
            "avro" => {
                let avro = AvroFileFormat::from_options(options)?;
                return Ok((FileFormat::Avro(avro), false));
            }
            framed @ ("avro-confluent" | "debezium-avro-confluent" | "protobuf") => {
                return Err(options.error(format!(
                    "unsupported: 'format' = '{framed}' in files; Eddy reads and writes \
                     '{framed}' records in Kafka topics"
                )));
            }
            line if FORMAT_NAMES.contains(&line) => {}
            other => {
                let line_formats: Vec<&str> = FORMAT_NAMES
                    .iter()
                    .copied()
                    .filter(|name| {
                        !matches!(
                            *name,
                            "avro-confluent" | "debezium-avro-confluent" | "protobuf"
                        )
                    })
                    .collect();
                return Err(options.error(format!(
                    "option 'format' = '{other}': expected one of {}, parquet",
                    line_formats.join(", ")
                )));
            }
        }
        let (format, ignore_parse_errors) = Format::from_options(options)?;
        Ok((FileFormat::Lines(format), ignore_parse_errors))
    }

    /// The line format, if the files have lines.
    fn lines(&self) -> Option<&Format> {
        match self {
            FileFormat::Lines(format) => Some(format),
            FileFormat::Parquet(_) | FileFormat::Avro(_) => None,
        }
    }

    /// Whether records carry changes (see [`Format::is_changelog`]).
    fn is_changelog(&self) -> bool {
        self.lines().is_some_and(Format::is_changelog)
    }

    /// The file name extension.
    fn extension(&self) -> &'static str {
        match self {
            FileFormat::Lines(format) => format.extension(),
            FileFormat::Parquet(_) => "parquet",
            FileFormat::Avro(_) => "avro",
        }
    }
}

/// Configuration of a filesystem table.
#[derive(Debug)]
pub struct FilesystemConnector {
    source: FileSourceConfig,
    sink: FileSinkConfig,
    /// Each partition's rows must reach one sink subtask.
    shuffle_by_partition: bool,
    /// A lookup join reads the table whole, and again after this long
    /// (`lookup.join.cache.ttl`, 60 minutes by default as in Flink).
    lookup_reload: std::time::Duration,
}

impl FilesystemConnector {
    /// Validates the options and resolves the path (no I/O yet); `partition_keys` are the
    /// table's `PARTITIONED BY` columns.
    pub fn new(
        table: &str,
        values: &BTreeMap<String, String>,
        schema: &SchemaRef,
        partition_keys: &[String],
    ) -> Result<Self> {
        let mut keys = KEYS.to_vec();
        keys.extend(format_keys());
        keys.extend_from_slice(PARQUET_KEYS);
        keys.extend_from_slice(AVRO_FILE_KEYS);
        let options = Options::validate(table, "filesystem", values, &keys, &[S3_PREFIX])?;
        let (format, ignore_parse_errors) = FileFormat::from_options(&options)?;
        let s3: Vec<(&str, &str)> = values
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(S3_PREFIX).map(|k| (k, v.as_str())))
            .collect();
        let location =
            resolve(options.required("path")?, &s3).map_err(|e| options.error(e.to_string()))?;
        let partitions = match partition_keys.is_empty() {
            true => None,
            false => {
                let default_name = options
                    .get("partition.default-name")
                    .unwrap_or(DEFAULT_PARTITION_NAME);
                Some(Arc::new(
                    PartitionColumns::new(schema, partition_keys, default_name)
                        .map_err(|e| options.error(e))?,
                ))
            }
        };
        let commit = partition_commit(&options, partition_keys)?;
        let shuffle_by_partition =
            commit.is_some() || options.flag("sink.shuffle-by-partition.enable", false)?;
        let sink = FileSinkConfig {
            location: location.clone(),
            format: format.clone(),
            rolling_file_size: options
                .memory_size_or("sink.rolling-policy.file-size", 128 * 1024 * 1024)?,
            rollover_interval: options.duration_opt("sink.rolling-policy.rollover-interval")?,
            guarantee: options.delivery_guarantee()?,
            partitions: partitions.clone(),
            commit,
        };
        // Eddy checks the rolling policy at every write (and closes parts at checkpoints),
        // not on a timer: the interval is only validated.
        options.duration_opt("sink.rolling-policy.check-interval")?;
        let mut split_size: u64 =
            options.memory_size_or("source.split-size", DEFAULT_SPLIT_SIZE)?;
        if split_size == 0 {
            return Err(options.error("option 'source.split-size' must be at least 1 byte".into()));
        }
        if format.is_changelog() {
            // A change must follow the changes before it: one subtask reads a file whole.
            split_size = u64::MAX;
        }
        let source = FileSourceConfig {
            location,
            format,
            ignore_parse_errors,
            split_size,
            schema: schema.clone(),
            partitions,
        };
        let lookup_reload = options
            .duration_opt("lookup.join.cache.ttl")?
            .unwrap_or(std::time::Duration::from_secs(3600));
        Ok(FilesystemConnector {
            source,
            sink,
            shuffle_by_partition,
            lookup_reload,
        })
    }
}

/// The partition commit the options ask for: none without a policy (as in Flink).
fn partition_commit(
    options: &Options<'_>,
    partition_keys: &[String],
) -> Result<Option<PartitionCommit>> {
    let Some(policies) = options.get("sink.partition-commit.policy.kind") else {
        return Ok(None);
    };
    if partition_keys.is_empty() {
        return Err(options.error(
            "option 'sink.partition-commit.policy.kind' needs a partitioned table (PARTITIONED BY)"
                .into(),
        ));
    }
    for policy in policies.split(',').map(str::trim) {
        match policy.to_ascii_lowercase().as_str() {
            "success-file" => {}
            "metastore" => {
                return Err(options.error(
                    "the 'metastore' partition commit policy needs a Hive table; a filesystem \
                     table has no metastore (use 'success-file')"
                        .into(),
                ));
            }
            "custom" => {
                return Err(options.error(
                    "unsupported: the 'custom' partition commit policy (it runs a user's Java \
                     class); use 'success-file'"
                        .into(),
                ));
            }
            other => {
                return Err(options.error(format!(
                    "unknown partition commit policy '{other}' (valid: 'success-file')"
                )));
            }
        }
    }
    let trigger = match options.get("sink.partition-commit.trigger") {
        None | Some("process-time") => CommitTrigger::ProcessTime,
        Some("partition-time") => {
            CommitTrigger::PartitionTime(time_extractor(options, partition_keys)?)
        }
        Some(other) => {
            return Err(options.error(format!(
                "invalid value '{other}' for option 'sink.partition-commit.trigger' (valid: \
                 'process-time', 'partition-time')"
            )));
        }
    };
    if let Some(zone) = options.get("sink.partition-commit.watermark-time-zone")
        && !zone.eq_ignore_ascii_case("UTC")
    {
        return Err(options.error(format!(
            "unsupported: 'sink.partition-commit.watermark-time-zone' = '{zone}' (Eddy reads \
             partition times as UTC)"
        )));
    }
    let success_file = options
        .get("sink.partition-commit.success-file.name")
        .unwrap_or(SUCCESS_FILE);
    if success_file.is_empty() || success_file.contains('/') {
        return Err(options.error(format!(
            "option 'sink.partition-commit.success-file.name' must be a file name, not \
             '{success_file}'"
        )));
    }
    Ok(Some(PartitionCommit {
        trigger,
        delay: options
            .duration_opt("sink.partition-commit.delay")?
            .unwrap_or_default(),
        success_file: success_file.to_string(),
    }))
}

/// Flink's default partition time extractor, configured.
fn time_extractor(options: &Options<'_>, partition_keys: &[String]) -> Result<TimeExtractor> {
    if let Some(kind) = options.get("partition.time-extractor.kind")
        && !kind.eq_ignore_ascii_case("default")
    {
        return Err(options.error(format!(
            "unsupported: 'partition.time-extractor.kind' = '{kind}' (only 'default')"
        )));
    }
    if let Some(formatter) = options.get("partition.time-extractor.timestamp-formatter")
        && formatter != "yyyy-MM-dd HH:mm:ss"
    {
        return Err(options.error(format!(
            "unsupported: 'partition.time-extractor.timestamp-formatter' = '{formatter}' (Eddy \
             reads partition times as 'yyyy-MM-dd HH:mm:ss' or 'yyyy-MM-dd')"
        )));
    }
    Ok(TimeExtractor {
        keys: partition_keys.to_vec(),
        pattern: options
            .get("partition.time-extractor.timestamp-pattern")
            .map(str::to_string),
    })
}

impl TableConnector for FilesystemConnector {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn storage_location(&self) -> Option<&str> {
        Some(&self.sink.location.display)
    }

    fn commits_at_checkpoints(&self, checkpointing: bool) -> bool {
        match self.sink.guarantee {
            Some(guarantee) => guarantee == DeliveryGuarantee::ExactlyOnce,
            None => checkpointing,
        }
    }

    fn is_source(&self) -> bool {
        true
    }

    fn is_sink(&self) -> bool {
        !self.source.format.is_changelog()
    }

    fn readable_metadata(&self) -> Vec<crate::ReadableMetadata> {
        metadata::readable()
    }

    fn source_changes(&self) -> crate::SourceChanges {
        match self.source.format.is_changelog() {
            true => crate::SourceChanges::All,
            false => crate::SourceChanges::Inserts,
        }
    }

    fn write_refusal(&self) -> Option<String> {
        self.source.format.lines().and_then(Format::write_refusal)
    }

    fn skips_by_bounds(&self) -> bool {
        matches!(self.source.format, FileFormat::Parquet(_))
    }

    fn lookup_kind(&self) -> Option<crate::lookup::LookupKind> {
        // A changelog is a table's history, not its rows: it cannot be looked up whole.
        if self.source.format.is_changelog() {
            return None;
        }
        Some(crate::lookup::LookupKind::FullScan {
            reload_after: self.lookup_reload,
        })
    }

    fn sink_partitioned_by(&self) -> &[String] {
        match (&self.sink.partitions, self.shuffle_by_partition) {
            (Some(partitions), true) => partitions.keys(),
            _ => &[],
        }
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        source::create(&self.source, context)
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        sink::create(&self.sink, context)
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn an_unknown_format_is_refused_naming_every_format() {
        let error = |format: &str| {
            let values = [("path", "/tmp/t"), ("format", format)]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into();
            let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
            let error = FilesystemConnector::new("t", &values, &schema, &[]).unwrap_err();
            error.to_string()
        };
        assert_eq!(
            error("orc"),
            "table 't': option 'format' = 'orc': expected one of csv, json, debezium-json, \
             canal-json, maxwell-json, avro, parquet"
        );
        assert!(error("avro-confluent").contains("unsupported: 'format' = 'avro-confluent'"));
        assert!(error("protobuf").contains("unsupported: 'format' = 'protobuf' in files"));
    }
}
