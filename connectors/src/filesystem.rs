//! `'connector' = 'filesystem'`: reads and writes CSV or JSON files in a local directory
//! or on S3 (reading in [`file_source`](super::file_source), writing in
//! [`file_sink`](super::file_sink)).

use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;
use eddy_common::Result;
use eddy_common::object_storage::resolve;

use super::file_sink::{self, FileSinkConfig};
use super::file_source::{self, FileSourceConfig};
use super::format::{Format, format_keys};
use super::transaction::DeliveryGuarantee;
use super::{Options, SinkContext, SinkWriter, SourceContext, SourceReader, TableConnector};

/// Default `source.split-size`: the largest byte range of a file one split reads.
const DEFAULT_SPLIT_SIZE: u64 = 64 * 1024 * 1024;

const KEYS: &[&str] = &[
    "path",
    "source.split-size",
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.delivery-guarantee",
];
const S3_PREFIX: &str = "s3.";

/// Configuration of a filesystem table.
#[derive(Debug)]
pub struct FilesystemConnector {
    source: FileSourceConfig,
    sink: FileSinkConfig,
}

impl FilesystemConnector {
    /// Validates the options and resolves the path (no I/O yet).
    pub fn new(table: &str, values: &BTreeMap<String, String>, schema: &SchemaRef) -> Result<Self> {
        let mut keys = KEYS.to_vec();
        keys.extend(format_keys());
        let options = Options::validate(table, "filesystem", values, &keys, &[S3_PREFIX])?;
        let (format, ignore_parse_errors) = Format::from_options(&options)?;
        let s3: Vec<(&str, &str)> = values
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(S3_PREFIX).map(|k| (k, v.as_str())))
            .collect();
        let location =
            resolve(options.required("path")?, &s3).map_err(|e| options.error(e.to_string()))?;
        let sink = FileSinkConfig {
            location: location.clone(),
            format: format.clone(),
            rolling_file_size: options
                .parse_or("sink.rolling-policy.file-size", 128 * 1024 * 1024)?,
            rollover_interval: options.duration_opt("sink.rolling-policy.rollover-interval")?,
            guarantee: options.delivery_guarantee()?,
        };
        let split_size: u64 = options.parse_or("source.split-size", DEFAULT_SPLIT_SIZE)?;
        if split_size == 0 {
            return Err(options.error("option 'source.split-size' must be at least 1 byte".into()));
        }
        let source = FileSourceConfig {
            location,
            format,
            ignore_parse_errors,
            split_size,
            schema: schema.clone(),
        };
        Ok(FilesystemConnector { source, sink })
    }
}

impl TableConnector for FilesystemConnector {
    fn name(&self) -> &'static str {
        "filesystem"
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
        true
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        Ok(file_source::create(&self.source, context))
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        file_sink::create(&self.sink, context)
    }
}
