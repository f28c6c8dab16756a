//! Reads a `postgres-cdc` table: checks it, makes its publication and slot when missing,
//! reads the snapshot's chunks, then follows the replication stream; confirms the stream's
//! position to PostgreSQL as checkpoints complete. One subtask (the first) reads; the
//! others end at once.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::chunk::Op;
use eddy_common::metrics::OperatorMetrics;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_postgres::Client;

use super::catalog::{self, ChunkQuery, TableDescription};
use super::lsn::Lsn;
use super::metadata;
use super::pgoutput::{self, Message, OldImage, Relation, Value};
use super::protocol::{ProtocolError, ReplicationConnection, WalMessage};
use super::snapshot::{ChunkMarks, Key, KeyOrder, read_key, write_key};
use super::values::{SourceColumn, TextRows, incompatibility};
use super::{ChangelogMode, PostgresCdcConnector, StartupMode};
use crate::{SourceContext, SourceEvent, SourceReader};

/// How long a read waits for the stream before it lets the task take a checkpoint.
const IDLE: Duration = Duration::from_millis(100);
/// How long a read with rows in hand waits for more before it returns them.
const LINGER: Duration = Duration::from_millis(5);
/// How long an open waits for a slot another session still holds (a killed attempt's
/// session, until PostgreSQL notices it is gone).
const SLOT_BUSY_WAIT: Duration = Duration::from_secs(60);
/// The version of the position's format.
pub(crate) const POSITION_VERSION: u64 = 1;

/// Where the source is: what a checkpoint keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Progress {
    /// Reading the snapshot (after this key; `None`: from the start), or streaming.
    snapshot: Option<Option<Key>>,
    /// Where the stream (re)starts: the end of the last whole transaction handled, or a
    /// point the stream passed between transactions.
    resume: Lsn,
    /// How many of the table's changes in the transaction after `resume` were handled.
    skip: u64,
    /// The snapshot's chunks, while the stream may still bring changes they saw.
    marks: ChunkMarks,
}

impl Progress {
    fn encode(&self) -> Vec<u8> {
        let mut out = StateWriter::new();
        out.u64(POSITION_VERSION);
        match &self.snapshot {
            None => {
                out.u64(0);
            }
            Some(after) => {
                out.u64(1);
                write_key(&mut out, after.as_ref());
            }
        }
        out.u64(self.resume.0).u64(self.skip);
        self.marks.write(&mut out);
        out.finish()
    }

    fn decode(bytes: &[u8], what: &str) -> Result<Self> {
        let mut input = StateReader::new(bytes, what);
        let version = input.u64()?;
        if version != POSITION_VERSION {
            return Err(EddyError::Snapshot(format!(
                "{what}: position format version {version} is not known here"
            )));
        }
        let snapshot = match input.u64()? {
            0 => None,
            1 => Some(read_key(&mut input)?),
            other => {
                return Err(EddyError::Snapshot(format!("{what}: phase {other}")));
            }
        };
        Ok(Progress {
            snapshot,
            resume: Lsn(input.u64()?),
            skip: input.u64()?,
            marks: ChunkMarks::read(&mut input)?,
        })
    }
}

/// The watched table's relation in the stream: where each of the table's columns is.
struct StreamRelation {
    id: u32,
    /// For each column of the Eddy table, its index in the relation's tuples.
    columns: Vec<usize>,
}

/// The open transaction of the stream.
struct OpenTransaction {
    xid: u32,
    /// When it committed, in milliseconds since the Unix epoch.
    committed_at: i64,
    /// The table's changes in it so far.
    changes: u64,
}

pub(super) struct CdcReader {
    connector: Arc<PostgresCdcConnector>,
    context: SourceContext,
    /// The table's physical columns (the context's schema less its metadata columns).
    physical: SchemaRef,
    progress: Progress,
    restored: bool,
    /// Whether this subtask reads (only the first does).
    reads: bool,
    client: Option<Client>,
    description: Option<TableDescription>,
    chunks: Option<ChunkQuery>,
    key_orders: Vec<KeyOrder>,
    stream: Option<ReplicationConnection>,
    relation: Option<StreamRelation>,
    transaction: Option<OpenTransaction>,
    /// Changes of the first transaction to skip: handled before the restore.
    skip_left: u64,
    rows: TextRows,
    /// Each gathered row's commit time (`op_ts`; 0 in the snapshot).
    times: Vec<i64>,
    /// Positions taken for checkpoints not yet known complete.
    pending: VecDeque<(u64, Lsn)>,
    /// What the slot has been told is durable.
    confirmed: Lsn,
    completed: Option<watch::Receiver<CompletedCheckpoint>>,
}

impl CdcReader {
    pub fn new(connector: Arc<PostgresCdcConnector>, context: &SourceContext) -> Self {
        let physical = context.physical_schema();
        CdcReader {
            rows: TextRows::new(physical.clone()),
            physical,
            times: Vec::new(),
            completed: context.completed.clone(),
            connector,
            context: context.clone(),
            progress: Progress {
                snapshot: None,
                resume: Lsn::default(),
                skip: 0,
                marks: ChunkMarks::default(),
            },
            restored: false,
            reads: context.subtask == 0,
            client: None,
            description: None,
            chunks: None,
            key_orders: Vec::new(),
            stream: None,
            relation: None,
            transaction: None,
            skip_left: 0,
            pending: VecDeque::new(),
            confirmed: Lsn::default(),
        }
    }

    fn error(&self, message: String) -> EddyError {
        self.connector.remote(message, false)
    }

    fn protocol_error(&self, doing: &str, e: ProtocolError) -> EddyError {
        let transient = e.is_transient();
        self.connector.remote(format!("{doing}: {e}"), transient)
    }

    async fn open_source(&mut self) -> Result<usize> {
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

    fn check_identity(&self, name: &str, identity: char) -> Result<()> {
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

    async fn read(&mut self) -> Result<Option<SourceEvent>> {
        if !self.reads {
            return Ok(None);
        }
        self.confirm_completed().await?;
        match self.progress.snapshot.clone() {
            Some(after) => self.read_chunk(after).await,
            None => self.read_stream().await,
        }
    }

    async fn read_chunk(&mut self, after: Option<Key>) -> Result<Option<SourceEvent>> {
        let size = self.connector.chunk_size;
        let (Some(query), Some(client)) = (&self.chunks, &mut self.client) else {
            return Err(EddyError::Internal(
                "postgres-cdc snapshot read before open".into(),
            ));
        };
        let chunk = query
            .read(client, after.as_ref(), size)
            .await
            .map_err(|e| {
                let transient = matches!(e, catalog::ChunkError::Postgres(_));
                self.connector
                    .remote(format!("reading the snapshot: {e}"), transient)
            })?;
        for row in &chunk.rows {
            let values = (0..row.len()).map(|i| row.get::<_, Option<&str>>(i).map(str::as_bytes));
            self.rows.push(Op::Insert, values);
            self.times.push(0);
        }
        OperatorMetrics::add(&self.context.metrics.records_in, chunk.rows.len() as u64);
        self.progress.snapshot = match &chunk.mark.last {
            Some(last) => Some(Some(last.clone())),
            None => {
                tracing::info!(table = %self.connector.table, "snapshot read; streaming changes");
                None
            }
        };
        self.progress.marks.push(chunk.mark);
        self.take_rows()
    }

    fn take_rows(&mut self) -> Result<Option<SourceEvent>> {
        let mut rows = self.rows.take().map_err(|e| self.error(e))?;
        let times = std::mem::take(&mut self.times);
        if !self.context.metadata.is_empty()
            && let Some(chunk) = rows.take()
        {
            let connector = &self.connector;
            let names = metadata::Names {
                table: &connector.table_name,
                schema: &connector.schema_name,
                database: &connector.endpoint.database,
            };
            let with = metadata::append(
                chunk,
                &self.context.schema,
                &self.context.metadata,
                &names,
                &times,
            );
            rows = Some(with.map_err(|e| self.error(e))?);
        }
        Ok(Some(match rows {
            Some(rows) => SourceEvent::Rows { split: 0, rows },
            None => SourceEvent::Idle,
        }))
    }

    async fn connect_stream(&mut self) -> Result<()> {
        let connector = self.connector.clone();
        let waited = std::time::Instant::now();
        let stream = loop {
            let mut stream = ReplicationConnection::connect(&connector.endpoint)
                .await
                .map_err(|e| self.protocol_error("connecting for replication", e))?;
            match stream
                .start(
                    &connector.slot,
                    &connector.publication,
                    self.progress.resume,
                )
                .await
            {
                Ok(()) => break stream,
                // The slot is still held by a session of an earlier run, until PostgreSQL
                // notices it is gone.
                Err(e) if e.is_slot_busy() && waited.elapsed() < SLOT_BUSY_WAIT => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(self.protocol_error("starting replication", e)),
            }
        };
        tracing::info!(table = %connector.table, slot = %connector.slot, from = %self.progress.resume, process = stream.process(), "replication started");
        self.skip_left = self.progress.skip;
        self.transaction = None;
        self.relation = None;
        self.stream = Some(stream);
        Ok(())
    }

    async fn read_stream(&mut self) -> Result<Option<SourceEvent>> {
        if self.stream.is_none() {
            self.connect_stream().await?;
        }
        let batch = self.context.batch_size.max(1);
        while self.rows.len() < batch {
            let wait = if self.rows.is_empty() { IDLE } else { LINGER };
            let stream = self.stream.as_mut().expect("connected");
            let message = match stream.next(wait).await {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(e) => {
                    self.stream = None;
                    return Err(self.protocol_error("reading the replication stream", e));
                }
            };
            match message {
                WalMessage::Data { data, .. } => {
                    let message = pgoutput::decode(data).map_err(|e| self.error(e.to_string()))?;
                    self.apply(message)?;
                }
                WalMessage::Keepalive { end, reply } => {
                    if self.transaction.is_none() && end > self.progress.resume {
                        self.progress.resume = end;
                        self.progress.marks.passed(end);
                    }
                    if reply {
                        self.send_status().await?;
                    }
                }
            }
        }
        self.take_rows()
    }

    async fn send_status(&mut self) -> Result<()> {
        let (received, confirmed) = (self.progress.resume, self.confirmed);
        if let Some(stream) = self.stream.as_mut()
            && let Err(e) = stream.send_status(received, confirmed).await
        {
            self.stream = None;
            return Err(self.protocol_error("confirming the stream's position", e));
        }
        Ok(())
    }

    /// Confirms to the slot the position of the newest completed checkpoint.
    async fn confirm_completed(&mut self) -> Result<()> {
        let Some(completed) = self.completed.as_mut() else {
            return Ok(());
        };
        if !completed.has_changed().unwrap_or(false) {
            return Ok(());
        }
        let done = completed.borrow_and_update().checkpoint;
        let mut confirm = None;
        while let Some((checkpoint, lsn)) = self.pending.front().copied() {
            if checkpoint > done {
                break;
            }
            confirm = Some(lsn);
            self.pending.pop_front();
        }
        match confirm {
            Some(lsn) if lsn > self.confirmed => {
                tracing::debug!(checkpoint = done, %lsn, "confirming the slot's position");
                self.confirmed = lsn;
                self.send_status().await
            }
            _ => Ok(()),
        }
    }

    /// Applies one decoded message of the stream.
    fn apply(&mut self, message: Message) -> Result<()> {
        match message {
            Message::Begin { xid, committed_at } => {
                self.transaction = Some(OpenTransaction {
                    xid,
                    committed_at: metadata::epoch_millis(committed_at),
                    changes: 0,
                });
            }
            Message::Commit { end } => {
                self.transaction = None;
                self.skip_left = 0;
                self.progress.skip = 0;
                self.progress.resume = self.progress.resume.max(end);
                self.progress.marks.passed(end);
            }
            Message::Relation(relation) => self.relation_changed(relation)?,
            Message::Insert { relation, new } => {
                if self.counts(relation) {
                    self.insert(new)?;
                }
            }
            Message::Update { relation, old, new } => {
                if self.counts(relation) {
                    self.update(old, new)?;
                }
            }
            Message::Delete { relation, old } => {
                if self.counts(relation) {
                    self.delete(old)?;
                }
            }
            Message::Truncate { relations } => {
                if self
                    .relation
                    .as_ref()
                    .is_some_and(|r| relations.contains(&r.id))
                {
                    return Err(self.error(
                        "the table was truncated: a TRUNCATE carries no rows, so the \
                         changelog cannot retract them; start the job without its state to \
                         read the table afresh"
                            .into(),
                    ));
                }
            }
            Message::Other => {}
        }
        Ok(())
    }

    /// Whether a change of `relation` is the table's and still to be emitted (not one of
    /// the first transaction's changes handled before the restore); counts it.
    fn counts(&mut self, relation: u32) -> bool {
        if self.relation.as_ref().is_none_or(|r| r.id != relation) {
            return false;
        }
        if let Some(transaction) = self.transaction.as_mut() {
            transaction.changes += 1;
            self.progress.skip = transaction.changes;
        }
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return false;
        }
        OperatorMetrics::add(&self.context.metrics.records_in, 1);
        true
    }

    /// A relation description: the table's (checked against the columns read) or
    /// another's (ignored).
    fn relation_changed(&mut self, relation: Relation) -> Result<()> {
        let connector = self.connector.clone();
        if relation.namespace != connector.schema_name || relation.name != connector.table_name {
            return Ok(());
        }
        let name = format!("{}.{}", relation.namespace, relation.name);
        let description = self
            .description
            .as_ref()
            .ok_or_else(|| EddyError::Internal("no table description".into()))?;
        let mut columns = Vec::new();
        for field in self.physical.fields() {
            let Some(index) = relation
                .columns
                .iter()
                .position(|c| &c.name == field.name())
            else {
                return Err(self.error(format!(
                    "{name} changed: column '{}' was dropped or renamed",
                    field.name()
                )));
            };
            let column = &relation.columns[index];
            let known: Option<&SourceColumn> = description.column(field.name());
            if known.is_some_and(|k| k.type_oid != column.type_oid) {
                return Err(self.error(format!(
                    "{name} changed: column '{}' changed its type (type oid {} to {})",
                    field.name(),
                    known.map_or(0, |k| k.type_oid),
                    column.type_oid
                )));
            }
            columns.push(index);
        }
        self.check_identity(&name, relation.replica_identity as char)?;
        self.relation = Some(StreamRelation {
            id: relation.id,
            columns,
        });
        Ok(())
    }

    fn insert(&mut self, new: Vec<Value>) -> Result<()> {
        self.emit(Op::Insert, &new, None)
    }

    fn update(&mut self, old: Option<(OldImage, Vec<Value>)>, new: Vec<Value>) -> Result<()> {
        let full_old = match &old {
            Some((OldImage::Full, old)) => Some(old),
            _ => None,
        };
        match self.connector.changelog {
            ChangelogMode::All => {
                let Some(old) = full_old else {
                    return Err(self.error(
                        "an update without its whole before-image: the table's REPLICA \
                         IDENTITY is no longer FULL"
                            .into(),
                    ));
                };
                // A changed key is a delete and an insert, as Debezium reports it.
                let (before, after) = match self.same_key(old, &new) {
                    true => (Op::UpdateBefore, Op::UpdateAfter),
                    false => (Op::Delete, Op::Insert),
                };
                self.emit(before, old, None)?;
                self.emit(after, &new, Some(old))
            }
            ChangelogMode::Upsert => {
                // A changed key: the old key's row is deleted.
                if let Some((_, old)) = &old
                    && !self.same_key(old, &new)
                {
                    self.emit(Op::Delete, old, None)?;
                }
                self.emit(Op::UpdateAfter, &new, full_old)
            }
        }
    }

    fn delete(&mut self, (image, old): (OldImage, Vec<Value>)) -> Result<()> {
        if image == OldImage::Key && self.connector.changelog == ChangelogMode::All {
            return Err(self.error(
                "a delete with only its key: the table's REPLICA IDENTITY is no longer FULL".into(),
            ));
        }
        self.emit(Op::Delete, &old, None)
    }

    /// Whether two tuples of the table have the same key (compared in place).
    fn same_key(&self, a: &[Value], b: &[Value]) -> bool {
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        self.connector.key_columns.iter().all(|k| {
            let column = relation.columns[*k];
            a.get(column) == b.get(column)
        })
    }

    /// The key columns' texts of a tuple.
    fn key_of(&self, tuple: &[Value]) -> Key {
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        self.connector
            .key_columns
            .iter()
            .map(|k| match tuple.get(relation.columns[*k]) {
                Some(Value::Text(text)) => text.to_vec(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// Emits a row image unless the snapshot's chunk of its key already saw its
    /// transaction. Unchanged TOASTed values are taken from `old`, the whole before-image.
    fn emit(&mut self, op: Op, tuple: &[Value], old: Option<&Vec<Value>>) -> Result<()> {
        if !self.progress.marks.is_empty()
            && let Some(transaction) = &self.transaction
        {
            let key = self.key_of(tuple);
            if self
                .progress
                .marks
                .saw(&self.key_orders, &key, transaction.xid)
            {
                return Ok(());
            }
        }
        let relation = self
            .relation
            .as_ref()
            .expect("a change follows its relation");
        let mut values = Vec::with_capacity(relation.columns.len());
        for (field, index) in self.physical.fields().iter().zip(&relation.columns) {
            let value = match tuple.get(*index) {
                // Not sent: the whole before-image has it, if there is one.
                Some(Value::UnchangedToast) => old
                    .and_then(|old| old.get(*index))
                    .or(Some(&Value::UnchangedToast)),
                value => value,
            };
            values.push(match value {
                Some(Value::Text(text)) => Some(text.as_ref()),
                Some(Value::Null) | None => None,
                Some(Value::UnchangedToast) => {
                    return Err(self.error(format!(
                        "an update left column '{}' (a large, TOASTed value) unchanged and \
                         PostgreSQL did not send it; with REPLICA IDENTITY FULL it sends the \
                         whole before-image, from which Eddy takes it",
                        field.name()
                    )));
                }
            });
        }
        self.rows.push(op, values);
        let committed_at = self.transaction.as_ref().map_or(0, |t| t.committed_at);
        self.times.push(committed_at);
        Ok(())
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

impl SourceReader for CdcReader {
    fn open(&mut self) -> BoxFuture<'_, Result<usize>> {
        self.open_source().boxed()
    }

    fn next(&mut self) -> BoxFuture<'_, Result<Option<SourceEvent>>> {
        self.read().boxed()
    }

    fn position(&mut self, checkpoint: u64) -> Result<Vec<u8>> {
        if !self.reads {
            return Ok(Vec::new());
        }
        self.pending.push_back((checkpoint, self.progress.resume));
        Ok(self.progress.encode())
    }

    fn restore(&mut self, positions: &[&[u8]]) -> Result<()> {
        let what = format!(
            "the position of postgres-cdc table '{}'",
            self.connector.table
        );
        let mut found = positions.iter().filter(|p| !p.is_empty());
        if let Some(bytes) = found.next() {
            if found.next().is_some() {
                return Err(EddyError::Snapshot(format!(
                    "{what}: several subtasks' positions, where one subtask reads"
                )));
            }
            self.progress = Progress::decode(bytes, &what)?;
            self.restored = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres_cdc::snapshot::{ChunkMark, TransactionSnapshot};

    #[test]
    fn positions_round_trip_and_refuse_other_versions() {
        let mut marks = ChunkMarks::default();
        marks.push(ChunkMark {
            last: Some(vec![b"42".to_vec()]),
            snapshot: TransactionSnapshot::parse("10:12:11").unwrap(),
            wal_after: Lsn(99),
        });
        for progress in [
            Progress {
                snapshot: Some(Some(vec![b"42".to_vec()])),
                resume: Lsn(7),
                skip: 0,
                marks: marks.clone(),
            },
            Progress {
                snapshot: None,
                resume: Lsn(1 << 40),
                skip: 3,
                marks: ChunkMarks::default(),
            },
        ] {
            let bytes = progress.encode();
            assert_eq!(Progress::decode(&bytes, "p").unwrap(), progress);
        }
        let mut other = StateWriter::new();
        other.u64(99);
        assert!(Progress::decode(&other.finish(), "p").is_err());
        assert!(Progress::decode(&[1, 2, 3], "p").is_err());
    }
}
