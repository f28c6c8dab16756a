//! `'connector' = 'iceberg'`: an exactly-once sink into an Iceberg table (format version
//! 2) registered in a SQL catalog on PostgreSQL or SQLite, as Iceberg's `JdbcCatalog` and
//! pyiceberg's `SqlCatalog` keep it, or in a REST catalog ([`catalog`]).
//!
//! Each sink subtask writes Parquet data files ([`sink`]) whose columns carry the table's
//! field ids; at a checkpoint barrier it closes them and records them in the checkpoint;
//! when the checkpoint completes it commits them as one snapshot: a manifest
//! ([`manifest`]) and a manifest list, then through the catalog ([`table`]) a new
//! metadata file ([`metadata`]) swapped in by compare-and-set, or the REST catalog's
//! commit. The snapshot's summary names the job and the transaction, so a commit
//! replayed after a failure finds it done and is skipped. A table with a primary key also
//! takes updates and deletes: equality deletes of the key for rows of earlier commits,
//! position deletes for rows of the same transaction ([`delta`]).

mod avro;
mod catalog;
mod delta;
mod manifest;
mod metadata;
mod partition;
mod sink;
mod stats;
mod table;

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_common::{EddyError, Result};

use self::catalog::{Catalog, CatalogDatabase, RestAuth, RestCatalog, SqlCatalog, database_file};
use self::metadata::TableShape;
use self::table::IcebergTable;
use crate::filesystem::ParquetFormat;
use crate::postgres::connection_config;
use crate::{Options, SinkContext, SinkWriter, TableConnector};

const KEYS: &[&str] = &[
    "catalog-name",
    "catalog-type",
    "catalog-database",
    "catalog-table",
    "uri",
    "jdbc.user",
    "jdbc.password",
    "token",
    "credential",
    "oauth2-server-uri",
    "scope",
    "warehouse",
    "write.target-file-size-bytes",
    "write.parquet.compression-codec",
    "write.upsert.enabled",
];
const S3_PREFIX: &str = "s3.";

/// Data files roll at this size by default (Iceberg's `write.target-file-size-bytes`).
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;

/// What goes wrong writing an Iceberg table.
#[derive(Debug, thiserror::Error)]
pub enum IcebergError {
    /// The catalog's database refused or failed a request.
    #[error("Iceberg catalog: {message}")]
    Catalog {
        /// What failed, with the server's detail.
        message: String,
        /// Whether trying again may succeed.
        transient: bool,
    },
    /// Other writers kept committing first.
    #[error("Iceberg commit: {0}")]
    Conflict(String),
    /// Table metadata that is not as the Iceberg spec has it.
    #[error("Iceberg metadata: {0}")]
    Metadata(String),
    /// A metadata, manifest or manifest list file that cannot be read.
    #[error("Iceberg file '{file}': {message}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong, and where.
        message: String,
    },
    /// The table's columns do not fit the Iceberg table's schema.
    #[error("the table's columns do not match the Iceberg table: {0}")]
    Schema(String),
    /// An Iceberg feature the sink does not write.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Object storage failed.
    #[error("Iceberg files: {0}")]
    Store(#[from] object_store::Error),
    /// Writing a data file failed.
    #[error("Iceberg data file: {0}")]
    Data(#[from] EddyError),
}

impl IcebergError {
    /// The error as the engine reports it, about `table`.
    pub fn for_table(self, table: &str) -> EddyError {
        let transient = match &self {
            IcebergError::Catalog { transient, .. } => *transient,
            IcebergError::Conflict(_) => true,
            IcebergError::Store(e) => {
                !matches!(e, object_store::Error::NotFound { .. })
                    && !matches!(e, object_store::Error::PermissionDenied { .. })
            }
            IcebergError::Data(e) => e.is_transient(),
            _ => false,
        };
        if let IcebergError::Data(e) = self {
            return e;
        }
        EddyError::Remote {
            table: table.to_string(),
            message: self.to_string(),
            transient,
        }
    }
}

/// The SQL catalog the options name: `uri` a PostgreSQL database or a SQLite file.
fn sql_catalog(options: &Options<'_>, table: &str) -> Result<SqlCatalog> {
    let uri = options.required("uri")?;
    let url = uri.strip_prefix("jdbc:").unwrap_or(uri);
    let database = if let Some(file) = database_file(uri) {
        CatalogDatabase::Sqlite(file)
    } else if url.starts_with("postgresql:") || url.starts_with("postgres:") {
        let config = connection_config(options, ["uri", "jdbc.user", "jdbc.password"])?;
        CatalogDatabase::Postgres(Box::new(config))
    } else {
        return Err(options.error(format!(
            "option 'uri' = '{uri}': expected a PostgreSQL catalog database \
             (jdbc:postgresql://host:port/database) or a SQLite file (jdbc:sqlite:/path)"
        )));
    };
    Ok(SqlCatalog {
        database,
        catalog: options.required("catalog-name")?.to_string(),
        namespace: namespace(options),
        table: options.get("catalog-table").unwrap_or(table).to_string(),
    })
}

/// How the options say to authenticate to a REST catalog: `token`, or `credential`
/// (`client_id:client_secret`) with `oauth2-server-uri` and `scope` (default `catalog`).
fn rest_auth(options: &Options<'_>) -> Result<RestAuth> {
    match (options.get("token"), options.get("credential")) {
        (Some(_), Some(_)) => Err(options.error(
            "options 'token' and 'credential' are exclusive: a REST catalog takes one".into(),
        )),
        (Some(token), None) => Ok(RestAuth::Token(token.to_string())),
        (None, Some(credential)) => {
            let (id, secret) = credential.split_once(':').ok_or_else(|| {
                options.error("option 'credential' must be 'client_id:client_secret'".into())
            })?;
            Ok(RestAuth::Credential {
                id: id.to_string(),
                secret: secret.to_string(),
                server: options.get("oauth2-server-uri").map(str::to_string),
                scope: options.get("scope").unwrap_or("catalog").to_string(),
            })
        }
        (None, None) => Ok(RestAuth::None),
    }
}

/// `catalog-database`, `default` when not set (as in Flink).
fn namespace(options: &Options<'_>) -> String {
    options
        .get("catalog-database")
        .unwrap_or("default")
        .to_string()
}

/// Configuration of an Iceberg table.
#[derive(Debug)]
pub struct IcebergConnector {
    table: String,
    catalog: Catalog,
    /// `warehouse`: where a table Eddy creates is placed (`{warehouse}/{namespace}/{table}`).
    warehouse: Option<String>,
    /// `s3.*` options of the table's object storage.
    s3: Vec<(String, String)>,
    parquet: ParquetFormat,
    target_file_size: u64,
    /// `PARTITIONED BY`: the identity partition fields of a table Eddy creates.
    partition_keys: Vec<String>,
    /// `PRIMARY KEY`: the equality fields of deletes (Flink's equality field columns).
    primary_key: Vec<String>,
    /// `write.upsert.enabled`: every insert first deletes the row of its key.
    upsert: bool,
}

impl IcebergConnector {
    /// Validates the options (no connection yet). A table `PARTITIONED BY`
    /// `partition_keys` is created partitioned by their identity; one with a
    /// `primary_key` takes updates and deletes (equality deletes of the key's values).
    pub fn new(
        table: &str,
        values: &BTreeMap<String, String>,
        partition_keys: &[String],
        primary_key: &[String],
    ) -> Result<Self> {
        let options = Options::validate(table, "iceberg", values, KEYS, &[S3_PREFIX])?;
        let catalog = match options.get("catalog-type").unwrap_or("jdbc") {
            "jdbc" | "sql" => Catalog::Sql(sql_catalog(&options, table)?),
            "rest" => Catalog::Rest(RestCatalog::new(
                options.required("uri")?,
                options.get("warehouse").map(str::to_string),
                rest_auth(&options)?,
                namespace(&options),
                options.get("catalog-table").unwrap_or(table).to_string(),
            )),
            other @ ("hive" | "hadoop" | "glue") => {
                return Err(EddyError::Unsupported(format!(
                    "table '{table}': 'catalog-type' = '{other}'; Eddy's Iceberg sink commits \
                     through a SQL catalog ('jdbc', on PostgreSQL) or a REST catalog ('rest')"
                )));
            }
            other => {
                return Err(options.error(format!(
                    "option 'catalog-type' = '{other}': expected 'jdbc' (a SQL catalog) or 'rest'"
                )));
            }
        };
        let mut parquet_options = BTreeMap::new();
        if let Some(codec) = options.get("write.parquet.compression-codec") {
            parquet_options.insert("parquet.compression".to_string(), codec.to_string());
        }
        let parquet = ParquetFormat::from_options(&Options::validate(
            table,
            "iceberg",
            &parquet_options,
            &["parquet.compression"],
            &[],
        )?)?;
        let target_file_size =
            options.memory_size_or("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)?;
        if target_file_size == 0 {
            return Err(options
                .error("option 'write.target-file-size-bytes' must be at least 1 byte".into()));
        }
        let upsert = options.flag("write.upsert.enabled", false)?;
        if upsert && primary_key.is_empty() {
            return Err(options.error(
                "option 'write.upsert.enabled' needs a PRIMARY KEY: its columns are the \
                 equality fields each insert deletes first"
                    .into(),
            ));
        }
        let s3 = values
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(S3_PREFIX)?.to_string(), v.clone())))
            .collect();
        Ok(IcebergConnector {
            table: table.to_string(),
            catalog,
            warehouse: options.get("warehouse").map(str::to_string),
            s3,
            parquet,
            target_file_size,
            partition_keys: partition_keys.to_vec(),
            primary_key: primary_key.to_vec(),
            upsert,
        })
    }
}

impl TableConnector for IcebergConnector {
    fn name(&self) -> &'static str {
        "iceberg"
    }

    fn storage_location(&self) -> Option<&str> {
        self.warehouse.as_deref()
    }

    fn is_sink(&self) -> bool {
        true
    }

    fn commits_at_checkpoints(&self, _checkpointing: bool) -> bool {
        true
    }

    fn accepts_updates(&self) -> bool {
        !self.primary_key.is_empty()
    }

    /// Each key's changes are written by one subtask, in order: the deletes of one
    /// subtask's commit must not reach rows another commits later.
    fn sink_partitioned_by(&self) -> &[String] {
        &self.primary_key
    }

    fn create_writer(&self, context: &SinkContext) -> Result<Box<dyn SinkWriter>> {
        let table = Arc::new(IcebergTable::new(
            &self.table,
            self.catalog.clone(),
            self.warehouse.clone(),
            self.s3.clone(),
            TableShape {
                columns: context.schema.clone(),
                partition_keys: self.partition_keys.clone(),
                primary_key: self.primary_key.clone(),
            },
        ));
        let writing = sink::Writing {
            parquet: self.parquet.clone(),
            target_file_size: self.target_file_size,
            upsert: self.upsert,
        };
        sink::create(table, writing, context)
    }
}
