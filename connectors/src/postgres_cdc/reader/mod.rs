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

use super::PostgresCdcConnector;
use super::catalog::{self, ChunkQuery, TableDescription};
use super::lsn::Lsn;
use super::metadata;
use super::pgoutput;
use super::protocol::{ProtocolError, ReplicationConnection, WalMessage};
use super::snapshot::{ChunkMarks, Key, KeyOrder, read_key, write_key};
use super::values::TextRows;
use crate::{SourceContext, SourceEvent, SourceReader};

mod changes;
mod setup;

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
