//! Connectors: where rows come from and go to, named and configured as in Flink.

pub mod blackhole;
pub mod datagen;
pub mod filesystem;
pub mod format;
pub mod iceberg;
pub mod kafka;
pub mod lookup;
pub mod metadata;
pub mod nexmark;
mod options;
pub mod postgres;
pub mod postgres_cdc;
pub mod print;
pub mod progress;
pub mod pushdown;
mod random;
mod throttle;
pub mod transaction;
mod url;

use eddy_common::secrets::SecretReferences;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::chunk::Chunk;
use eddy_common::event::StreamEnd;
use eddy_common::ids::ExecutionId;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
pub use metadata::ReadableMetadata;
pub use options::Options;
use tokio::sync::watch;

const CONNECTORS: &[&str] = &[
    "blackhole",
    "datagen",
    "filesystem",
    "iceberg",
    "kafka",
    "nexmark",
    "postgres",
    "postgres-cdc",
    "print",
    "upsert-kafka",
];

/// The format version of each source position a checkpoint keeps, in this build.
pub fn position_formats() -> Vec<(&'static str, u64)> {
    vec![
        (
            "filesystem-position",
            filesystem::source::POSITION_FORMAT & 0xFFFF,
        ),
        (
            "postgres-cdc-position",
            postgres_cdc::reader::POSITION_VERSION,
        ),
    ]
}

/// A table's connector, configured from its `WITH (...)` options.
pub trait TableConnector: Debug + Send + Sync {
    /// The connector's name (`'connector' = '...'`).
    fn name(&self) -> &'static str;

    /// The storage location (a path, `file://…` or `s3://…`) the table's files are read
    /// from and written to, if it has one: what a cluster's allowed locations confine.
    fn storage_location(&self) -> Option<&str> {
        None
    }

    /// Whether the table can be read.
    fn is_source(&self) -> bool {
        false
    }

    /// Whether the table can be written.
    fn is_sink(&self) -> bool {
        false
    }

    /// The metadata a reader can append to each row (`METADATA FROM 'key'` columns).
    fn readable_metadata(&self) -> Vec<ReadableMetadata> {
        Vec::new()
    }

    /// What one reader of the source holds alone (a replication slot), if anything: a job
    /// may read it once.
    fn exclusive_source(&self) -> Option<String> {
        None
    }

    /// The changes the source's rows carry.
    fn source_changes(&self) -> SourceChanges {
        SourceChanges::Inserts
    }

    /// Why the table cannot be written, when [`TableConnector::is_sink`] is false for a
    /// reason more particular than the connector's.
    fn write_refusal(&self) -> Option<String> {
        None
    }

    /// Whether the source's reader skips rows by [`SourceContext::bounds`] (by statistics
    /// it keeps): only then are a query's bounds worth giving it.
    fn skips_by_bounds(&self) -> bool {
        false
    }

    /// Whether the sink can take updates and deletes (`-U`, `+U`, `-D`), not only inserts.
    fn accepts_updates(&self) -> bool {
        false
    }

    /// Whether the sink commits what it wrote when a checkpoint completes (two-phase
    /// commit), in a job that checkpoints (`checkpointing`) or not: a restore from an
    /// older checkpoint than the newest completed one would then write rows twice.
    fn commits_at_checkpoints(&self, checkpointing: bool) -> bool {
        let _ = checkpointing;
        false
    }

    /// Columns by whose values the sink's input must be hash-partitioned, so that all rows
    /// with the same values reach one subtask (empty: any subtask may write any row).
    fn sink_partitioned_by(&self) -> &[String] {
        &[]
    }

    /// How rows of the table can be looked up by key (the table of a lookup join), if
    /// they can.
    fn lookup_kind(&self) -> Option<lookup::LookupKind> {
        None
    }

    /// The cache a lookup join keeps of the table, if its options ask for one.
    fn lookup_cache(&self) -> Option<lookup::LookupCacheOptions> {
        None
    }

    /// A reader looking rows up by key, for [`lookup::LookupKind::Keyed`].
    fn create_lookup(
        &self,
        context: &lookup::LookupContext,
    ) -> Result<Box<dyn lookup::LookupReader>> {
        Err(EddyError::Connector {
            table: context.table.clone(),
            message: format!("the '{}' connector cannot look rows up by key", self.name()),
        })
    }

    /// A reader for one subtask of the source.
    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        Err(EddyError::Connector {
            table: context.table.clone(),
            message: format!("the '{}' connector cannot be read", self.name()),
        })
    }

    /// Frees what the connector keeps outside Eddy for the job (a replication slot), when
    /// the job is cancelled: not when it restarts, stops with a savepoint or fails, since
    /// it may resume then.
    fn release(&self) -> BoxFuture<'_, Result<()>> {
        async { Ok(()) }.boxed()
    }

    /// A writer for one subtask of the sink.
    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        Err(EddyError::Connector {
            table: context.table.clone(),
            message: format!("the '{}' connector cannot be written", self.name()),
        })
    }
}

/// The changes a source's rows carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceChanges {
    /// Inserts only.
    Inserts,
    /// Changes of a table kept elsewhere, every kind (`+I`, `-U`, `+U`, `-D`) and each
    /// update with its before-image, as a changelog format carries them.
    All,
    /// A key's new row (`+U`) or its delete (`-D`, which may carry the key alone), keyed
    /// by these columns, as upsert-kafka's records are.
    Upsert {
        /// The key's columns.
        key: Vec<usize>,
    },
}

/// What a source subtask needs to know about itself.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// The table read.
    pub table: String,
    /// The columns to produce: the physical ones, then one per `metadata` key.
    pub schema: SchemaRef,
    /// The metadata keys (of [`TableConnector::readable_metadata`]) whose values follow the
    /// physical columns, in order; empty for a connector that reads none.
    pub metadata: Vec<String>,
    /// The columns of [`SourceContext::schema`] the query uses, when it uses fewer than
    /// all: a reader that can skip a column (Parquet's) may leave the others NULL.
    pub columns_used: Option<Vec<usize>>,
    /// Bounds every row the query keeps passes: a reader that keeps statistics (Parquet's)
    /// may skip rows that cannot pass them.
    pub bounds: Vec<pushdown::ColumnBound>,
    /// This subtask's index.
    pub subtask: usize,
    /// How many subtasks read the table.
    pub parallelism: usize,
    /// Most rows in one batch.
    pub batch_size: usize,
    /// Counters of this source.
    pub metrics: Arc<OperatorMetrics>,
    /// Checkpoints as they complete; `None` when the job does not checkpoint. A source
    /// that acknowledges its input upstream (a replication slot) does so for what a
    /// completed checkpoint covers.
    pub completed: Option<watch::Receiver<CompletedCheckpoint>>,
}

impl SourceContext {
    /// The columns a reader decodes: [`SourceContext::schema`] without the metadata columns
    /// that follow them.
    pub fn physical_schema(&self) -> SchemaRef {
        let physical = self.schema.fields().len() - self.metadata.len();
        Arc::new(arrow::datatypes::Schema::new(
            self.schema.fields()[..physical].to_vec(),
        ))
    }
}

/// What a sink subtask needs to know about itself.
#[derive(Debug, Clone)]
pub struct SinkContext {
    /// The table written.
    pub table: String,
    /// The columns written.
    pub schema: SchemaRef,
    /// This subtask's index.
    pub subtask: usize,
    /// How many subtasks write the table.
    pub parallelism: usize,
    /// The run of the job: its id, the same in every attempt, names transactions; the
    /// attempt orders them.
    pub execution: ExecutionId,
    /// Counters of this sink.
    pub metrics: Arc<OperatorMetrics>,
    /// Checkpoints as they complete; `None` when the job does not checkpoint.
    pub completed: Option<watch::Receiver<CompletedCheckpoint>>,
}

/// What a source reader produces next.
#[derive(Debug)]
pub enum SourceEvent {
    /// Rows read from one split (a file, a generator slice), with their kinds (all `+I`
    /// but from a changelog source).
    Rows {
        /// Which of the reader's splits.
        split: usize,
        /// The rows.
        rows: Chunk,
    },
    /// A split has no more rows: it no longer holds the watermark back.
    SplitEnd(usize),
    /// Nothing to read for now (an unbounded source waiting for data); the task may take
    /// a checkpoint before asking again.
    Idle,
}

/// Reads one subtask's share of a source.
pub trait SourceReader: Send {
    /// Prepares reading (lists files, connects) and says how many splits this reader
    /// interleaves; each split keeps its own watermark.
    fn open(&mut self) -> BoxFuture<'_, Result<usize>>;

    /// The next rows, or `None` once every split has ended.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>>;

    /// Where the reader is, for checkpoint `checkpoint`: every row before it has been
    /// returned.
    fn position(&mut self, checkpoint: u64) -> Result<Vec<u8>>;

    /// Continues after the positions of every subtask of the previous run (several when
    /// the parallelism changed). Called before [`SourceReader::open`].
    fn restore(&mut self, positions: &[&[u8]]) -> Result<()>;
}

/// Writes one subtask's share of a sink.
pub trait SinkWriter: Send {
    /// Prepares writing, before the first row. `restored` holds the sink's states, from
    /// the checkpoint restored from, of the previous subtasks this one takes over (empty
    /// on a fresh start).
    fn open<'a>(&'a mut self, restored: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        let _ = restored;
        async { Ok(()) }.boxed()
    }

    /// Writes a chunk of changes.
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>>;

    /// At the barrier of `checkpoint`: makes what was written before it durable (or
    /// prepares it), and returns the sink's state for the snapshot.
    fn checkpoint(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        let _ = checkpoint;
        async { Ok(Vec::new()) }.boxed()
    }

    /// The input's watermark advanced (a sink that commits by event time uses it).
    fn watermark(&mut self, watermark: eddy_common::event::Timestamp) {
        let _ = watermark;
    }

    /// Whether everything written so far is durable or prepared, nothing held back for a
    /// later transaction. A job's final checkpoint is one at which every sink is settled.
    fn settled(&self) -> bool {
        true
    }

    /// Flushes and closes at the end of the input, which says why it ended. A sink that
    /// makes rows visible only at completed checkpoints commits nothing at a stopped or
    /// cancelled end that no completed checkpoint covers: the restore replays those rows.
    fn finish(&mut self, end: StreamEnd) -> BoxFuture<'_, Result<()>>;
}

/// `options` with their secret references (`${env:…}`, `${file:…}`) resolved.
fn resolve_secrets(
    table: &str,
    options: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>> {
    options
        .iter()
        .map(|(key, value)| {
            let value = eddy_common::secrets::resolve(value).map_err(|e| EddyError::Connector {
                table: table.to_string(),
                message: format!("option '{key}': {e}"),
            })?;
            Ok((key.clone(), value))
        })
        .collect()
}

/// The formats whose records hold ARRAY columns (as JSON arrays, Avro arrays, repeated
/// Protobuf fields, Parquet lists).
const ARRAY_FORMATS: &[&str] = &["json", "avro", "avro-confluent", "protobuf", "parquet"];

/// Refuses a table with an ARRAY column (or a ROW holding one) where its connector or
/// format cannot carry ARRAYs yet, naming the column.
fn check_array_columns(
    table: &str,
    connector: &str,
    options: &BTreeMap<String, String>,
    schema: &SchemaRef,
) -> Result<()> {
    fn holds_array(data_type: &arrow::datatypes::DataType) -> bool {
        use arrow::datatypes::DataType;
        match data_type {
            DataType::List(_) => true,
            DataType::Struct(fields) => fields.iter().any(|f| holds_array(f.data_type())),
            _ => false,
        }
    }
    let Some(column) = schema.fields().iter().find(|f| holds_array(f.data_type())) else {
        return Ok(());
    };
    let format = ["format", "key.format", "value.format"]
        .iter()
        .filter_map(|key| options.get(*key))
        .find(|format| !ARRAY_FORMATS.contains(&format.as_str()));
    let refusal = match (connector, format) {
        ("print" | "blackhole", _) => return Ok(()),
        ("filesystem" | "kafka" | "upsert-kafka", None) => return Ok(()),
        ("filesystem" | "kafka" | "upsert-kafka", Some(format)) => {
            format!("the '{format}' format cannot hold it yet")
        }
        (connector, _) => format!("the '{connector}' connector cannot carry it yet"),
    };
    Err(EddyError::Connector {
        table: table.to_string(),
        message: format!(
            "unsupported: ARRAY column '{}' ({}): {refusal} (ARRAY columns are read and \
             written in the formats {} of the filesystem and Kafka connectors, and printed)",
            column.name(),
            eddy_common::schema::sql_name(column.data_type()),
            ARRAY_FORMATS.join(", ")
        ),
    })
}

/// Creates the connector a table's options name, validating every option; a table
/// `PARTITIONED BY` (`partition_keys`) must be a filesystem or an Iceberg table.
pub fn create(
    table: &str,
    options: &BTreeMap<String, String>,
    schema: &SchemaRef,
    primary_key: &[String],
    partition_keys: &[String],
    secrets: SecretReferences,
) -> Result<Arc<dyn TableConnector>> {
    let resolved;
    let options = match secrets {
        SecretReferences::Resolve => {
            resolved = resolve_secrets(table, options)?;
            &resolved
        }
        SecretReferences::Keep => options,
    };
    let Some(name) = options.get("connector") else {
        return Err(EddyError::Connector {
            table: table.to_string(),
            message: format!(
                "missing option 'connector' (available: {})",
                CONNECTORS.join(", ")
            ),
        });
    };
    if !partition_keys.is_empty() && name != "filesystem" && name != "iceberg" {
        return Err(EddyError::Connector {
            table: table.to_string(),
            message: format!(
                "the '{name}' connector cannot write a partitioned table (PARTITIONED BY); only \
                 'filesystem' and 'iceberg' can"
            ),
        });
    }
    check_array_columns(table, name, options, schema)?;
    let connector: Arc<dyn TableConnector> = match name.as_str() {
        "blackhole" => Arc::new(blackhole::BlackholeConnector::new(table, options)?),
        "datagen" => Arc::new(datagen::DatagenConnector::new(table, options, schema)?),
        "filesystem" => Arc::new(filesystem::FilesystemConnector::new(
            table,
            options,
            schema,
            partition_keys,
        )?),
        "iceberg" => Arc::new(iceberg::IcebergConnector::new(
            table,
            options,
            partition_keys,
            primary_key,
        )?),
        "kafka" => Arc::new(kafka::KafkaConnector::new(table, options)?),
        "upsert-kafka" => Arc::new(kafka::KafkaConnector::upsert(
            table,
            options,
            schema,
            primary_key,
        )?),
        "nexmark" => Arc::new(nexmark::NexmarkConnector::new(table, options, schema)?),
        "postgres" => Arc::new(postgres::PostgresConnector::new(
            table,
            options,
            schema,
            primary_key,
        )?),
        "postgres-cdc" => Arc::new(postgres_cdc::PostgresCdcConnector::new(
            table,
            options,
            schema,
            primary_key,
        )?),
        "print" => Arc::new(print::PrintConnector::new(table, options)?),
        other => {
            return Err(EddyError::Connector {
                table: table.to_string(),
                message: format!(
                    "unknown connector '{other}' (available: {})",
                    CONNECTORS.join(", ")
                ),
            });
        }
    };
    Ok(connector)
}
