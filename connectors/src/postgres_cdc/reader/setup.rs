//! Opening the source: the table checked against the declared columns, its publication
//! and replication slot made when missing, and where reading starts.

use std::time::Duration;

use eddy_common::Result;
use tokio_postgres::Client;

use super::{CdcReader, Progress, SLOT_BUSY_WAIT};
use crate::postgres_cdc::catalog::{self, ChunkQuery, TableDescription};
use crate::postgres_cdc::lsn::Lsn;
use crate::postgres_cdc::snapshot::ChunkMarks;
use crate::postgres_cdc::values::incompatibility;
use crate::postgres_cdc::{ChangelogMode, StartupMode};

impl CdcReader {
    /// Connects, checks the table, makes the publication and slot when missing, and sets
    /// where reading starts (the restored position, or the slot's start); returns how
    /// many splits this subtask reads (one for the reading subtask, none for the others).
    pub(super) async fn open_source(&mut self) -> Result<usize> {
        if !self.reads {
            return Ok(0);
        }
        let client = self.connector.connect().await?;
        let description = self.check_table(&client).await?;
        let created = self.ensure_publication(&client).await?;
        let start = self.ensure_slot(&client, created).await?;
        if !self.restored {
            self.progress = Progress {
                snapshot: (self.connector.startup == StartupMode::Initial).then_some(None),
                resume: start,
                skip: 0,
                marks: ChunkMarks::default(),
            };
        }
        // Keys are compared while the snapshot's chunks may have seen streamed changes.
        if self.progress.snapshot.is_some() || !self.progress.marks.is_empty() {
            self.key_orders = description
                .key_orders(&self.connector.primary_key)
                .map_err(|e| self.connector.error(e))?;
        }
        if self.progress.snapshot.is_some() {
            let columns: Vec<String> = self
                .physical
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            self.chunks = Some(ChunkQuery::new(
                &description,
                &self.connector.schema_name,
                &self.connector.table_name,
                &columns,
                &self.connector.primary_key,
                self.connector.chunk_size,
            ));
        }
        self.confirmed = self.progress.resume;
        self.description = Some(description);
        self.client = Some(client);
        Ok(1)
    }

    /// Checks the table exists with the declared columns, types and key, and a replica
    /// identity the changelog mode can work with.
    async fn check_table(&self, client: &Client) -> Result<TableDescription> {
        let connector = &self.connector;
        let name = format!("{}.{}", connector.schema_name, connector.table_name);
        let description = catalog::describe(client, &connector.schema_name, &connector.table_name)
            .await
            .map_err(|e| connector.postgres_error("reading the table's description", e))?
            .ok_or_else(|| self.error(format!("there is no table {name}")))?;
        for field in self.physical.fields() {
            let column = description
                .column(field.name())
                .ok_or_else(|| self.error(format!("{name} has no column '{}'", field.name())))?;
            if let Some(why) = incompatibility(column, field.data_type()) {
                return Err(self.error(why));
            }
        }
        let mut declared = connector.primary_key.clone();
        let mut actual = description.primary_key.clone();
        declared.sort();
        actual.sort();
        if declared != actual {
            return Err(self.error(format!(
                "the declared PRIMARY KEY ({}) is not {name}'s primary key ({})",
                connector.primary_key.join(", "),
                match description.primary_key.is_empty() {
                    true => "none".to_string(),
                    false => description.primary_key.join(", "),
                }
            )));
        }
        self.check_identity(&name, description.replica_identity)?;
        Ok(description)
    }

    pub(super) fn check_identity(&self, name: &str, identity: char) -> Result<()> {
        match (self.connector.changelog, identity) {
            (ChangelogMode::All, 'f') | (ChangelogMode::Upsert, 'f' | 'd') => Ok(()),
            (ChangelogMode::All, _) => Err(self.error(format!(
                "{name} has REPLICA IDENTITY {}: its updates and deletes carry only the key, \
                 not the whole row 'changelog-mode' = 'all' needs; run ALTER TABLE {name} \
                 REPLICA IDENTITY FULL, or set 'changelog-mode' = 'upsert'",
                identity_name(identity)
            ))),
            (ChangelogMode::Upsert, _) => Err(self.error(format!(
                "{name} has REPLICA IDENTITY {}: its deletes do not carry the primary key; \
                 use REPLICA IDENTITY DEFAULT or FULL",
                identity_name(identity)
            ))),
        }
    }

    /// Makes sure the publication exists and publishes the table; returns whether it had
    /// to be created.
    async fn ensure_publication(&self, client: &Client) -> Result<bool> {
        let connector = &self.connector;
        let (schema, table) = (&connector.schema_name, &connector.table_name);
        let found = catalog::publication(client, &connector.publication, schema, table)
            .await
            .map_err(|e| connector.postgres_error("reading the publication", e))?;
        match found {
            Some(true) => Ok(false),
            Some(false) => Err(self.error(format!(
                "publication '{}' does not publish {schema}.{table}: add it (ALTER \
                 PUBLICATION ... ADD TABLE) or name another with 'debezium.publication.name'",
                connector.publication
            ))),
            None => catalog::create_publication(client, &connector.publication, schema, table)
                .await
                .map(|()| true)
                .map_err(|e| connector.postgres_error("creating the publication", e)),
        }
    }

    /// Makes sure the slot exists and is free; returns where its stream starts: a new
    /// slot's start; an existing one's position, moved to the present on a fresh start
    /// that reads a snapshot (which shows everything before) or whose publication was
    /// just created (pgoutput cannot decode changes from before its publication existed).
    async fn ensure_slot(&self, client: &Client, publication_created: bool) -> Result<Lsn> {
        let connector = &self.connector;
        let slot = &connector.slot;
        let waited = std::time::Instant::now();
        loop {
            let info = catalog::slot(client, slot)
                .await
                .map_err(|e| connector.postgres_error("reading the replication slot", e))?;
            let Some(info) = info else {
                if self.restored {
                    return Err(self.error(format!(
                        "replication slot '{slot}' is gone: the changes since the checkpoint \
                         restored cannot be read (start the job without its state to take \
                         a new snapshot)"
                    )));
                }
                let start = catalog::create_slot(client, slot)
                    .await
                    .map_err(|e| connector.remote(format!("creating slot '{slot}': {e}"), true))?;
                tracing::info!(table = %connector.table, slot = %slot, %start, "replication slot created");
                return Ok(start);
            };
            if info.plugin.as_deref() != Some("pgoutput")
                || info.database.as_deref() != Some(connector.endpoint.database.as_str())
            {
                return Err(self.error(format!(
                    "replication slot '{slot}' exists but is not a pgoutput slot of database \
                     '{}' (plugin {:?}, database {:?})",
                    connector.endpoint.database, info.plugin, info.database
                )));
            }
            if let Some(pid) = info.active_pid {
                if waited.elapsed() < SLOT_BUSY_WAIT {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                return Err(connector.remote(
                    format!("replication slot '{slot}' is in use by server process {pid}"),
                    true,
                ));
            }
            let confirmed = info.confirmed_flush.unwrap_or_default();
            if self.restored && confirmed > self.progress.resume {
                return Err(self.error(format!(
                    "replication slot '{slot}' has confirmed {confirmed}, past the restored \
                     checkpoint's {}: the changes between are gone",
                    self.progress.resume
                )));
            }
            let initial = self.connector.startup == StartupMode::Initial;
            if !self.restored && (initial || publication_created) {
                let moved = catalog::advance_slot(client, slot).await.map_err(|e| {
                    self.connector
                        .remote(format!("moving slot '{slot}': {e}"), true)
                })?;
                tracing::info!(table = %connector.table, slot = %slot, from = %confirmed, to = %moved, "existing replication slot moved to the present");
                return Ok(moved);
            }
            return Ok(confirmed);
        }
    }
}

fn identity_name(identity: char) -> &'static str {
    match identity {
        'd' => "DEFAULT",
        'n' => "NOTHING",
        'f' => "FULL",
        _ => "USING INDEX",
    }
}
