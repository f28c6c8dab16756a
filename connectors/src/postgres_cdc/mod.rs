//! `'connector' = 'postgres-cdc'`: a PostgreSQL table read as a changelog — its rows at
//! the start (a snapshot), then every committed change, from logical replication
//! (`pgoutput`), with Flink CDC's option names.
//!
//! - **Slot and publication.** The source reads replication slot `slot.name` (made with
//!   `pg_create_logical_replication_slot` when missing; an existing idle pgoutput slot of the
//!   database is used as it is) through publication `debezium.publication.name` (by default
//!   named as the slot; made `FOR TABLE` the watched table when missing, and marked as
//!   Eddy's). Cancelling the job drops the slot and the publication Eddy made; a restart, a
//!   stop with a savepoint or a failed job keeps them, so the job can resume.
//! - **Snapshot** (`scan.startup.mode` = `initial`): after the slot exists, the table is read
//!   in chunks by primary key ([`snapshot`]); changes the chunks already show are dropped
//!   from the stream, so each row appears once and each change once.
//! - **Stream**: transactions in commit order. A checkpoint holds the end of the last whole
//!   transaction and how many changes of the next were emitted; the slot's
//!   `confirmed_flush_lsn` moves there when the checkpoint completes (also while the table
//!   is idle: keepalives carry the WAL's end), so PostgreSQL keeps the WAL a restore needs.
//! - **Changelog** (`changelog-mode`): `all` emits `+I`, `-U`/`+U` and `-D` with whole
//!   before-images and needs `REPLICA IDENTITY FULL`; `upsert` emits new rows and deletes
//!   by key (any replica identity that includes the key) and Eddy keeps the last row per key.

mod catalog;
mod lsn;
mod metadata;
mod pgoutput;
mod protocol;
pub(crate) mod reader;
mod snapshot;
mod values;

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Options, SourceChanges, SourceContext, SourceReader, TableConnector};
pub use lsn::Lsn;
use protocol::Endpoint;

const KEYS: &[&str] = &[
    "hostname",
    "port",
    "username",
    "password",
    "database-name",
    "schema-name",
    "table-name",
    "slot.name",
    "decoding.plugin.name",
    "scan.startup.mode",
    "changelog-mode",
    "scan.incremental.snapshot.chunk.size",
    // Flink CDC sends heartbeats so an idle slot advances; the keepalives of the
    // replication stream do that here, so the option is accepted and not needed.
    "heartbeat.interval.ms",
    "debezium.publication.name",
];

/// Where a new job starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupMode {
    /// The table's rows, then its changes.
    Initial,
    /// Changes from the slot's position (a new slot: from now).
    LatestOffset,
}

/// Which changes the source emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangelogMode {
    /// Every kind, with whole before-images.
    All,
    /// New rows, and deletes by key.
    Upsert,
}

/// Configuration of a `postgres-cdc` table.
#[derive(Debug, Clone)]
pub struct PostgresCdcConnector {
    table: String,
    endpoint: Endpoint,
    schema_name: String,
    table_name: String,
    slot: String,
    publication: String,
    startup: StartupMode,
    changelog: ChangelogMode,
    chunk_size: usize,
    /// The declared primary key's columns.
    primary_key: Vec<String>,
    /// Their positions in the table's schema.
    key_columns: Vec<usize>,
}

impl PostgresCdcConnector {
    /// Validates the options (no connection yet).
    pub fn new(
        table: &str,
        values: &BTreeMap<String, String>,
        schema: &SchemaRef,
        primary_key: &[String],
    ) -> Result<Self> {
        let options = Options::validate(table, "postgres-cdc", values, KEYS, &[])?;
        match options.get("decoding.plugin.name") {
            None | Some("pgoutput") => {}
            Some(other) => {
                return Err(options.error(format!(
                    "'decoding.plugin.name' = '{other}' is not supported: Eddy decodes \
                     'pgoutput', PostgreSQL's built-in plugin"
                )));
            }
        }
        let startup = match options.get("scan.startup.mode").unwrap_or("initial") {
            "initial" => StartupMode::Initial,
            "latest-offset" => StartupMode::LatestOffset,
            other => {
                return Err(options.error(format!(
                    "'scan.startup.mode' = '{other}' is not supported (use 'initial' or \
                     'latest-offset')"
                )));
            }
        };
        let changelog = match options.get("changelog-mode").unwrap_or("all") {
            "all" => ChangelogMode::All,
            "upsert" => ChangelogMode::Upsert,
            other => {
                return Err(options.error(format!(
                    "'changelog-mode' = '{other}' is not supported (use 'all' or 'upsert')"
                )));
            }
        };
        if primary_key.is_empty() {
            return Err(options.error(
                "a postgres-cdc table needs a PRIMARY KEY (... ) NOT ENFORCED, the same as the \
                 PostgreSQL table's: changes are matched to rows by it"
                    .into(),
            ));
        }
        let key_columns = primary_key
            .iter()
            .map(|k| schema.index_of(k))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| options.error(format!("primary key: {e}")))?;
        let table_name = options.required("table-name")?.to_string();
        let schema_name = options.get("schema-name").unwrap_or("public").to_string();
        for (key, name) in [("table-name", &table_name), ("schema-name", &schema_name)] {
            if name.contains(['*', '|', '[', '(', '?', '+', '\\', '^', '$']) {
                return Err(options.error(format!(
                    "'{key}' = '{name}': a pattern matching several tables is not supported; \
                     name one table"
                )));
            }
        }
        let slot = options.required("slot.name")?.to_string();
        let valid_slot = !slot.is_empty()
            && slot.len() <= 63
            && slot
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid_slot {
            return Err(options.error(format!(
                "'slot.name' = '{slot}': a slot name is up to 63 lower-case letters, digits \
                 and underscores"
            )));
        }
        let endpoint = Endpoint {
            host: options.required("hostname")?.to_string(),
            port: options.parse_or("port", 5432u16)?,
            user: options.required("username")?.to_string(),
            password: options.get("password").map(str::to_string),
            database: options.required("database-name")?.to_string(),
        };
        let chunk_size: usize = options.parse_or("scan.incremental.snapshot.chunk.size", 8096)?;
        if chunk_size == 0 {
            return Err(
                options.error("'scan.incremental.snapshot.chunk.size' must be at least 1".into())
            );
        }
        Ok(PostgresCdcConnector {
            table: table.to_string(),
            endpoint,
            schema_name,
            table_name,
            publication: options
                .get("debezium.publication.name")
                .unwrap_or(&slot)
                .to_string(),
            slot,
            startup,
            changelog,
            chunk_size,
            primary_key: primary_key.to_vec(),
            key_columns,
        })
    }

    fn error(&self, message: String) -> EddyError {
        EddyError::Connector {
            table: self.table.clone(),
            message,
        }
    }

    /// An error of the PostgreSQL server or connection; `transient` when a retry may
    /// succeed.
    fn remote(&self, message: String, transient: bool) -> EddyError {
        EddyError::Remote {
            table: self.table.clone(),
            message: format!(
                "PostgreSQL table {}.{}: {message}",
                self.schema_name, self.table_name
            ),
            transient,
        }
    }

    fn postgres_error(&self, doing: &str, e: tokio_postgres::Error) -> EddyError {
        let (detail, transient) = crate::postgres::error_detail(&e);
        self.remote(format!("{doing}: {detail}"), transient)
    }

    /// An ordinary connection, its text output set as the replication stream's.
    async fn connect(&self) -> Result<tokio_postgres::Client> {
        let mut config = tokio_postgres::Config::new();
        config
            .host(&self.endpoint.host)
            .port(self.endpoint.port)
            .user(&self.endpoint.user)
            .dbname(&self.endpoint.database)
            .application_name("eddy-postgres-cdc");
        if let Some(password) = &self.endpoint.password {
            // Planned where secrets stay references (a JobManager releasing the slot of a
            // cancelled job), the password is resolved here.
            let password = eddy_common::secrets::resolve(password)
                .map_err(|e| self.error(format!("option 'password': {e}")))?;
            config.password(password);
        }
        let settings: Vec<String> = protocol::TEXT_SETTINGS
            .iter()
            .filter(|(name, _)| *name != "client_encoding")
            .map(|(name, value)| format!("-c {name}={value}"))
            .collect();
        config.options(settings.join(" "));
        crate::postgres::connect_with(&config, &self.table)
            .await
            .map_err(|e| self.postgres_error("connecting", e))
    }
}

impl TableConnector for PostgresCdcConnector {
    fn name(&self) -> &'static str {
        "postgres-cdc"
    }

    fn is_source(&self) -> bool {
        true
    }

    fn readable_metadata(&self) -> Vec<crate::ReadableMetadata> {
        metadata::readable()
    }

    fn exclusive_source(&self) -> Option<String> {
        Some(format!(
            "replication slot '{}' of {}:{}/{}",
            self.slot, self.endpoint.host, self.endpoint.port, self.endpoint.database
        ))
    }

    fn source_changes(&self) -> SourceChanges {
        match self.changelog {
            ChangelogMode::All => SourceChanges::All,
            ChangelogMode::Upsert => SourceChanges::Upsert {
                key: self.key_columns.clone(),
            },
        }
    }

    fn write_refusal(&self) -> Option<String> {
        Some("a postgres-cdc table is read-only: write with the 'postgres' connector".into())
    }

    fn create_reader(&self, context: &SourceContext) -> Result<Box<dyn SourceReader>> {
        Ok(Box::new(reader::CdcReader::new(
            Arc::new(self.clone()),
            context,
        )))
    }

    fn release(&self) -> BoxFuture<'_, Result<()>> {
        async move {
            let client = self.connect().await?;
            let slot = catalog::drop_slot(&client, &self.slot)
                .await
                .map_err(|e| self.postgres_error("dropping the replication slot", e))?;
            let publication = catalog::drop_own_publication(&client, &self.publication)
                .await
                .map_err(|e| self.postgres_error("dropping the publication", e))?;
            tracing::info!(
                table = %self.table,
                slot = %self.slot,
                slot_dropped = slot,
                publication = %self.publication,
                publication_dropped = publication,
                "postgres-cdc source released"
            );
            Ok(())
        }
        .boxed()
    }
}
