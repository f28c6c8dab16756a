//! Two-phase commit for sinks: what makes the rows readers see exact after failures.
//!
//! A transactional sink writes into an open transaction. At checkpoint barrier `n` it
//! prepares that transaction (pre-commit), records the handle in the checkpoint, and opens
//! the next one lazily. When the JobManager says checkpoint `n` is complete, the prepared
//! transactions of `n` and of every earlier checkpoint whose notice was lost are committed.
//! On restore, the transactions recorded in the restored checkpoint are committed (a commit
//! is idempotent) and every other transaction an earlier attempt of this sink subtask left
//! prepared is aborted: its rows are replayed.
//!
//! [`TwoPhaseCommitSink`] is that state machine; a sink supplies a [`TransactionWriter`]
//! (writes and prepares) and a [`TransactionCommitter`] (commits and aborts by handle, on
//! its own connection, beside the writer).
//!
//! Rows that may change what an earlier transaction wrote (in a database: an upsert or a
//! delete of a row inserted before) must not be written while an earlier transaction is
//! prepared but uncommitted: its rows are invisible to them. Such rows are held back,
//! without blocking, and written once the earlier transactions are committed; rows still
//! held at a barrier are part of the snapshot, so a restore writes them. A job's final
//! checkpoint is one at which no sink holds rows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::chunk::Chunk;
use eddy_common::event::{StreamEnd, Timestamp};
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::wire::{decode_chunk, encode_chunk};
use eddy_common::{EddyError, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{Notify, watch};

use super::{SinkContext, SinkWriter};

/// What a sink promises about the rows readers see (`'sink.delivery-guarantee'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryGuarantee {
    /// Rows are written as they come; a failure may lose or repeat some.
    None,
    /// Everything before a completed checkpoint is durable; a replay may repeat rows.
    AtLeastOnce,
    /// Rows become visible when their checkpoint completes, exactly once.
    ExactlyOnce,
}

impl DeliveryGuarantee {
    /// The option's valid values.
    pub const VALUES: &'static str = "'none', 'at-least-once', 'exactly-once'";

    /// Parses an option value (Flink's spelling, any case, `_` or `-`).
    pub fn parse(value: &str) -> Option<Self> {
        match value.to_ascii_lowercase().replace('_', "-").as_str() {
            "none" => Some(DeliveryGuarantee::None),
            "at-least-once" => Some(DeliveryGuarantee::AtLeastOnce),
            "exactly-once" => Some(DeliveryGuarantee::ExactlyOnce),
            _ => None,
        }
    }
}

/// The writing side of a transactional sink.
pub trait TransactionWriter: Send {
    /// Writes rows into the open transaction, beginning one if none is open.
    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>>;

    /// Flushes and prepares the open transaction for `checkpoint`; from then on it can
    /// only be committed or aborted, also by another process. Returns its handle, or
    /// `None` when nothing was written since the last prepare.
    fn prepare(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>>;

    /// Rolls back the open transaction, if any.
    fn abort(&mut self) -> BoxFuture<'_, Result<()>>;

    /// Whether writing `chunk` may change rows an earlier transaction wrote, so that it
    /// must wait until the earlier transactions are committed.
    fn depends_on_earlier(&self, chunk: &Chunk) -> bool {
        let _ = chunk;
        false
    }

    /// The input's watermark advanced.
    fn watermark(&mut self, watermark: Timestamp) {
        let _ = watermark;
    }

    /// Whether the next checkpoint may have something to prepare although no rows were
    /// written since the last one (a partition that became due).
    fn prepares_without_rows(&self) -> bool {
        false
    }

    /// The writer's own state for a snapshot, taken right after a prepare.
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Restores the states ([`TransactionWriter::snapshot`]) of the subtasks this one
    /// takes over, before the first row.
    fn restore(&mut self, states: &[&[u8]]) -> Result<()> {
        let _ = states;
        Ok(())
    }

    /// The input ended and every transaction is committed: what is left to do at the end.
    fn finish(&mut self) -> BoxFuture<'_, Result<()>> {
        async { Ok(()) }.boxed()
    }
}

/// The committing side of a transactional sink: works on prepared transactions by
/// handle, from any process.
pub trait TransactionCommitter: Send + Sync + 'static {
    /// Commits a prepared transaction. Committing one that is already committed succeeds.
    fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>>;

    /// Aborts every transaction that earlier attempts of this sink subtask (or of the
    /// subtasks it took over) left prepared, except those in `keep`; never one of this
    /// attempt or of a later one.
    fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>>;
}

/// Names what one writer (one attempt of a sink subtask) writes: `a{attempt}t{start}`,
/// unique even if a JobManager restart repeats attempt numbers, and ordered by attempt,
/// so a writer can tell what earlier attempts left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptToken {
    attempt: u64,
    started_ms: u64,
}

impl AttemptToken {
    /// The token of a writer of `attempt` starting now.
    pub fn new(attempt: u32) -> Self {
        let started_ms = eddy_common::event::wall_clock().max(0) as u64;
        AttemptToken {
            attempt: attempt.into(),
            started_ms,
        }
    }

    /// Reads a token written by [`AttemptToken`]'s `Display`.
    pub fn parse(text: &str) -> Option<Self> {
        let (attempt, started) = text.strip_prefix('a')?.split_once('t')?;
        Some(AttemptToken {
            attempt: attempt.parse().ok()?,
            started_ms: u64::from_str_radix(started, 16).ok()?,
        })
    }

    /// Whether `other` belongs to an earlier writer: an earlier attempt, or the same
    /// attempt number from another process.
    pub fn supersedes(&self, other: &AttemptToken) -> bool {
        other.attempt < self.attempt || (other.attempt == self.attempt && other != self)
    }
}

impl std::fmt::Display for AttemptToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a{}t{:x}", self.attempt, self.started_ms)
    }
}

/// How a failing commit is retried before the job fails.
#[derive(Debug, Clone, Copy)]
pub struct CommitRetry {
    /// The first pause.
    pub initial_backoff: Duration,
    /// The longest pause.
    pub max_backoff: Duration,
    /// Attempts in all.
    pub attempts: u32,
}

impl Default for CommitRetry {
    fn default() -> Self {
        CommitRetry {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            attempts: 10,
        }
    }
}

/// How often a sink looks for transactions earlier attempts left prepared.
const LEFTOVER_SWEEP: Duration = Duration::from_secs(2);

/// Prepared transactions not yet known to be committed, by checkpoint.
#[derive(Debug, Default)]
struct Pending {
    transactions: BTreeMap<u64, Vec<u8>>,
    /// Why committing failed for good; the sink fails with it.
    failure: Option<String>,
}

/// [`Pending`] as the sink and its committer share it.
#[derive(Debug, Default)]
struct PendingCommits {
    state: Mutex<Pending>,
    /// Notified when a transaction was committed or committing failed for good.
    changed: Notify,
    /// Held while one transaction is committed: the background committer and a sink that
    /// is cancelled both commit what is due, and a transaction committed by both at once
    /// could be written twice (a Kafka transaction has no identity to commit once).
    committing: tokio::sync::Mutex<()>,
}

impl PendingCommits {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.state.lock().expect("pending lock")
    }

    /// The transaction of `checkpoint` is committed.
    fn committed(&self, checkpoint: u64) {
        self.lock().transactions.remove(&checkpoint);
        self.changed.notify_waiters();
    }

    /// Committing failed for good.
    fn failed(&self, reason: String) {
        self.lock().failure = Some(reason);
        self.changed.notify_waiters();
    }
}

/// A sink's state in a snapshot: its uncommitted transactions, the rows it holds, and
/// its writer's own state.
#[derive(Debug, Default)]
struct SinkState {
    transactions: BTreeMap<u64, Vec<u8>>,
    held: Vec<Chunk>,
    writer: Vec<u8>,
}

impl SinkState {
    fn encode(
        transactions: &BTreeMap<u64, Vec<u8>>,
        held: &[Chunk],
        writer: &[u8],
    ) -> Result<Vec<u8>> {
        let mut out = StateWriter::new();
        out.u64(transactions.len() as u64);
        for (checkpoint, handle) in transactions {
            out.u64(*checkpoint).bytes(handle);
        }
        out.u64(held.len() as u64);
        for chunk in held {
            out.bytes(&encode_chunk(chunk)?);
        }
        out.bytes(writer);
        Ok(out.finish())
    }

    fn decode(bytes: &[u8], table: &str) -> Result<SinkState> {
        let what = format!("the transactions of sink '{table}'");
        let mut input = StateReader::new(bytes, &what);
        let mut state = SinkState::default();
        for _ in 0..input.count(16)? {
            let checkpoint = input.u64()?;
            state
                .transactions
                .insert(checkpoint, input.bytes()?.to_vec());
        }
        for _ in 0..input.count(8)? {
            state.held.push(decode_chunk(input.bytes()?.to_vec())?);
        }
        // A snapshot taken before writers kept state ends here.
        if !input.is_empty() {
            state.writer = input.bytes()?.to_vec();
        }
        Ok(state)
    }
}

/// A sink writing exactly once through two-phase commit (see the module documentation).
pub struct TwoPhaseCommitSink {
    table: String,
    writer: Box<dyn TransactionWriter>,
    committer: Arc<dyn TransactionCommitter>,
    pending: Arc<PendingCommits>,
    completed: watch::Receiver<CompletedCheckpoint>,
    retry: CommitRetry,
    /// Whether rows were written since the last prepare.
    dirty: bool,
    /// Rows held back until the earlier transactions are committed.
    held: Vec<Chunk>,
    /// Wakes the committer when a transaction was prepared.
    prepared: watch::Sender<u64>,
    /// The background committer, stopped with the sink: a cancelled attempt's sink
    /// commits nothing more once it is gone (the next attempt commits what is due).
    committer_task: Option<tokio::task::AbortHandle>,
}

impl Drop for TwoPhaseCommitSink {
    fn drop(&mut self) {
        if let Some(task) = &self.committer_task {
            task.abort();
        }
    }
}

impl TwoPhaseCommitSink {
    /// A sink over `writer` and `committer`, for a job that checkpoints, retrying commits
    /// as [`CommitRetry::default`] says. Fails when the job does not checkpoint: without
    /// checkpoints nothing would ever be committed.
    pub fn new(
        context: &SinkContext,
        writer: Box<dyn TransactionWriter>,
        committer: Arc<dyn TransactionCommitter>,
    ) -> Result<Self> {
        let Some(completed) = context.completed.clone() else {
            return Err(EddyError::Connector {
                table: context.table.clone(),
                message: "'sink.delivery-guarantee' = 'exactly-once' needs checkpoints: set \
                          'execution.checkpointing.interval' (or choose 'at-least-once')"
                    .into(),
            });
        };
        let (prepared, _) = watch::channel(0);
        Ok(TwoPhaseCommitSink {
            table: context.table.clone(),
            writer,
            committer,
            pending: Arc::default(),
            completed,
            retry: CommitRetry::default(),
            dirty: false,
            held: Vec::new(),
            prepared,
            committer_task: None,
        })
    }

    /// Retries commits as `retry` says instead.
    pub fn with_retry(mut self, retry: CommitRetry) -> Self {
        self.retry = retry;
        self
    }

    /// Whether an earlier transaction is prepared and not yet committed.
    fn uncommitted(&self) -> bool {
        !self.pending.lock().transactions.is_empty()
    }

    /// Writes the rows held back, once no earlier transaction is uncommitted.
    async fn release_held(&mut self) -> Result<()> {
        if self.held.is_empty() || self.uncommitted() {
            return Ok(());
        }
        for chunk in std::mem::take(&mut self.held) {
            self.dirty = true;
            self.writer.write(&chunk).await?;
        }
        Ok(())
    }

    fn failure(&self) -> Result<()> {
        match &self.pending.lock().failure {
            Some(reason) => Err(EddyError::Connector {
                table: self.table.clone(),
                message: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Commits what is due in the background for as long as the sink lives. Every few
    /// seconds it also aborts what an earlier attempt, still running somewhere until it is
    /// cancelled (or a partitioned TaskManager), prepared after this one started: in a
    /// database its locks would block this attempt's writes; files would stay behind.
    fn start_committer(&mut self) {
        let committer = self.committer.clone();
        let pending = self.pending.clone();
        let mut completed = self.completed.clone();
        let mut prepared = self.prepared.subscribe();
        let retry = self.retry;
        let table = self.table.clone();
        let task = tokio::spawn(async move {
            let mut sweep = tokio::time::interval(LEFTOVER_SWEEP);
            sweep.tick().await;
            loop {
                let done = completed.borrow_and_update().checkpoint;
                if let Err(reason) = commit_due(&*committer, &pending, done, retry).await {
                    tracing::error!(table = %table, %reason, "a prepared transaction cannot be committed; the job fails");
                    pending.failed(reason);
                    return;
                }
                tokio::select! {
                    changed = completed.changed() => if changed.is_err() { return },
                    changed = prepared.changed() => if changed.is_err() { return },
                    _ = sweep.tick() => {
                        if let Err(error) = committer.abort_leftovers(&[]).await {
                            tracing::warn!(table = %table, %error, "cannot abort leftover transactions");
                        }
                    }
                }
            }
        });
        self.committer_task = Some(task.abort_handle());
    }

    /// Waits until no prepared transaction is left, woken by the committer.
    async fn drain(&mut self) -> Result<()> {
        loop {
            let changed = self.pending.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.failure()?;
            if !self.uncommitted() {
                return Ok(());
            }
            changed.await;
        }
    }
}

/// Commits, oldest first, every pending transaction of a checkpoint up to `done`.
async fn commit_due(
    committer: &dyn TransactionCommitter,
    pending: &PendingCommits,
    done: u64,
    retry: CommitRetry,
) -> std::result::Result<(), String> {
    loop {
        // The next transaction due is chosen, committed and marked committed in one turn.
        let _turn = pending.committing.lock().await;
        let next = pending
            .lock()
            .transactions
            .range(..=done)
            .next()
            .map(|(c, h)| (*c, h.clone()));
        let Some((checkpoint, handle)) = next else {
            return Ok(());
        };
        commit_with_retry(committer, &handle, retry)
            .await
            .map_err(|e| format!("committing the transaction of checkpoint {checkpoint}: {e}"))?;
        pending.committed(checkpoint);
    }
}

/// Commits one transaction, retrying transient failures with exponential backoff; a
/// permanent failure (the request itself is wrong) fails at once.
async fn commit_with_retry(
    committer: &dyn TransactionCommitter,
    handle: &[u8],
    retry: CommitRetry,
) -> Result<()> {
    let mut backoff = retry.initial_backoff;
    let mut attempt = 1;
    loop {
        match committer.commit(handle).await {
            Ok(()) => return Ok(()),
            Err(e) if attempt >= retry.attempts || !e.is_transient() => return Err(e),
            Err(e) => {
                tracing::warn!(error = %e, attempt, "commit failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(retry.max_backoff);
                attempt += 1;
            }
        }
    }
}

impl SinkWriter for TwoPhaseCommitSink {
    fn open<'a>(&'a mut self, restored: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
        async move {
            // Every transaction recorded in the restored checkpoint is committed: the
            // checkpoint completed, whether or not its notice arrived. Rows held then are
            // written afterwards.
            // Several subtasks taken over (another parallelism) each have their own
            // transaction of a checkpoint: every one is committed, oldest checkpoint first.
            let mut transactions = Vec::new();
            let mut writer_states = Vec::new();
            for state in restored {
                let state = SinkState::decode(state, &self.table)?;
                transactions.extend(state.transactions);
                self.held.extend(state.held);
                writer_states.push(state.writer);
            }
            transactions.sort_by_key(|(checkpoint, _)| *checkpoint);
            let writer_states: Vec<&[u8]> = writer_states.iter().map(Vec::as_slice).collect();
            self.writer.restore(&writer_states)?;
            for (checkpoint, handle) in &transactions {
                commit_with_retry(&*self.committer, handle, self.retry)
                    .await
                    .map_err(|e| EddyError::Connector {
                        table: self.table.clone(),
                        message: format!(
                            "committing the restored transaction of checkpoint {checkpoint}: {e}"
                        ),
                    })?;
            }
            let keep: Vec<Vec<u8>> = transactions.into_iter().map(|(_, h)| h).collect();
            self.committer.abort_leftovers(&keep).await?;
            if !keep.is_empty() {
                tracing::info!(table = %self.table, committed = keep.len(), "restored transactions committed");
            }
            self.start_committer();
            Ok(())
        }
        .boxed()
    }

    fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
        async move {
            self.failure()?;
            if chunk.is_empty() {
                return Ok(());
            }
            self.release_held().await?;
            let wait = self.writer.depends_on_earlier(chunk) && self.uncommitted();
            if wait || !self.held.is_empty() {
                self.held.push(chunk.clone());
                return Ok(());
            }
            self.dirty = true;
            self.writer.write(chunk).await
        }
        .boxed()
    }

    fn checkpoint(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Vec<u8>>> {
        async move {
            self.failure()?;
            self.release_held().await?;
            let prepare = std::mem::take(&mut self.dirty) || self.writer.prepares_without_rows();
            if prepare && let Some(handle) = self.writer.prepare(checkpoint).await? {
                self.pending.lock().transactions.insert(checkpoint, handle);
                self.prepared.send_replace(checkpoint);
            }
            let transactions = self.pending.lock().transactions.clone();
            SinkState::encode(&transactions, &self.held, &self.writer.snapshot())
        }
        .boxed()
    }

    fn settled(&self) -> bool {
        self.held.is_empty()
    }

    fn watermark(&mut self, watermark: Timestamp) {
        self.writer.watermark(watermark);
    }

    fn finish(&mut self, end: StreamEnd) -> BoxFuture<'_, Result<()>> {
        async move {
            match end {
                StreamEnd::Finished => self.finish_input().await,
                StreamEnd::Stopped | StreamEnd::Cancelled => self.leave_to_restore(end).await,
            }
        }
        .boxed()
    }
}

impl TwoPhaseCommitSink {
    /// The input ended after the job's final checkpoint completed: its transactions are
    /// committed, and nothing may have been written since (no checkpoint would cover it).
    async fn finish_input(&mut self) -> Result<()> {
        self.drain().await?;
        self.release_held().await?;
        if std::mem::take(&mut self.dirty) {
            self.writer.abort().await?;
            return Err(EddyError::Connector {
                table: self.table.clone(),
                message: "rows arrived after the job's final checkpoint; no checkpoint covers \
                          them, so they are rolled back instead of committed"
                    .into(),
            });
        }
        self.writer.finish().await?;
        // What a cancelled earlier attempt prepared late is cleaned up now.
        self.committer.abort_leftovers(&[]).await
    }

    /// The sink was stopped or cancelled: the open transaction is rolled back (its rows
    /// are replayed from the last completed checkpoint), the transactions of checkpoints
    /// known to be complete are committed, and those of later checkpoints stay prepared,
    /// for the restore to commit or abort.
    async fn leave_to_restore(&mut self, end: StreamEnd) -> Result<()> {
        self.writer.abort().await?;
        self.held.clear();
        let done = self.completed.borrow().checkpoint;
        let committed = commit_due(&*self.committer, &self.pending, done, self.retry).await;
        if let Err(reason) = committed {
            tracing::warn!(table = %self.table, %reason, "left for the restore to commit");
        }
        let left: Vec<u64> = self.pending.lock().transactions.keys().copied().collect();
        if !left.is_empty() {
            tracing::info!(table = %self.table, ?end, checkpoints = ?left, "prepared transactions left for the restore");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use eddy_common::ids::ExecutionId;
    use eddy_common::metrics::OperatorMetrics;
    use std::collections::BTreeSet;

    /// An in-memory transactional store: what readers see, and the prepared transactions.
    #[derive(Default)]
    struct Store {
        visible: Vec<i64>,
        prepared: BTreeMap<String, Vec<i64>>,
        commits: usize,
        failures_left: usize,
        /// The failures are permanent ones.
        permanent: bool,
        /// Commits tried.
        tries: usize,
        /// How long each commit takes.
        commit_delay: Duration,
    }

    struct Writer {
        store: Arc<Mutex<Store>>,
        attempt: u32,
        open: Vec<i64>,
        ordered: bool,
    }

    impl TransactionWriter for Writer {
        fn write<'a>(&'a mut self, chunk: &'a Chunk) -> BoxFuture<'a, Result<()>> {
            let column = chunk.rows().column(0).as_any().downcast_ref::<Int64Array>();
            self.open.extend(column.unwrap().values().iter());
            async { Ok(()) }.boxed()
        }

        fn prepare(&mut self, checkpoint: u64) -> BoxFuture<'_, Result<Option<Vec<u8>>>> {
            let id = format!("{}-{checkpoint}", self.attempt);
            let rows = std::mem::take(&mut self.open);
            self.store.lock().unwrap().prepared.insert(id.clone(), rows);
            async move { Ok(Some(id.into_bytes())) }.boxed()
        }

        fn abort(&mut self) -> BoxFuture<'_, Result<()>> {
            self.open.clear();
            async { Ok(()) }.boxed()
        }

        fn depends_on_earlier(&self, _chunk: &Chunk) -> bool {
            self.ordered
        }
    }

    struct Committer(Arc<Mutex<Store>>);

    impl TransactionCommitter for Committer {
        fn commit<'a>(&'a self, handle: &'a [u8]) -> BoxFuture<'a, Result<()>> {
            let delay = {
                let mut store = self.0.lock().unwrap();
                store.tries += 1;
                store.commit_delay
            };
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                self.finish_commit(handle)
            }
            .boxed()
        }

        fn abort_leftovers<'a>(&'a self, keep: &'a [Vec<u8>]) -> BoxFuture<'a, Result<()>> {
            let keep: BTreeSet<String> = keep
                .iter()
                .map(|h| String::from_utf8(h.clone()).unwrap())
                .collect();
            self.0
                .lock()
                .unwrap()
                .prepared
                .retain(|id, _| keep.contains(id));
            async { Ok(()) }.boxed()
        }
    }

    impl Committer {
        fn finish_commit(&self, handle: &[u8]) -> Result<()> {
            let mut store = self.0.lock().unwrap();
            if store.failures_left > 0 {
                store.failures_left -= 1;
                Err(EddyError::Remote {
                    table: "t".into(),
                    message: "connection reset".into(),
                    transient: !store.permanent,
                })
            } else {
                let id = String::from_utf8(handle.to_vec()).unwrap();
                if let Some(rows) = store.prepared.remove(&id) {
                    store.visible.extend(rows);
                    store.commits += 1;
                }
                Ok(())
            }
        }
    }

    struct Harness {
        store: Arc<Mutex<Store>>,
        notices: watch::Sender<CompletedCheckpoint>,
        ordered: bool,
    }

    impl Harness {
        fn new() -> Self {
            let (notices, _) = watch::channel(CompletedCheckpoint::default());
            Harness {
                store: Arc::default(),
                notices,
                ordered: false,
            }
        }

        fn ordered() -> Self {
            Harness {
                ordered: true,
                ..Harness::new()
            }
        }

        fn prepared(&self) -> Vec<Vec<i64>> {
            self.store
                .lock()
                .unwrap()
                .prepared
                .values()
                .cloned()
                .collect()
        }

        async fn sink(&self, attempt: u32, restored: &[Vec<u8>]) -> TwoPhaseCommitSink {
            let context = SinkContext {
                table: "t".into(),
                schema: schema(),
                subtask: 0,
                parallelism: 1,
                execution: ExecutionId::new("job", attempt),
                metrics: Arc::new(OperatorMetrics::default()),
                completed: Some(self.notices.subscribe()),
            };
            let writer = Writer {
                store: self.store.clone(),
                attempt,
                open: Vec::new(),
                ordered: self.ordered,
            };
            let retry = CommitRetry {
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(2),
                attempts: 3,
            };
            let mut sink = TwoPhaseCommitSink::new(
                &context,
                Box::new(writer),
                Arc::new(Committer(self.store.clone())),
            )
            .unwrap()
            .with_retry(retry);
            sink.open(restored).await.unwrap();
            sink
        }

        fn complete(&self, checkpoint: u64) {
            self.notices.send_replace(CompletedCheckpoint {
                checkpoint,
                end_of_input: false,
            });
        }

        /// Checkpoint `checkpoint` completes as the job's final one.
        fn complete_final(&self, checkpoint: u64) {
            self.notices.send_replace(CompletedCheckpoint {
                checkpoint,
                end_of_input: true,
            });
        }

        async fn visible_after_settling(&self) -> Vec<i64> {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut rows = self.store.lock().unwrap().visible.clone();
            rows.sort();
            rows
        }
    }

    fn schema() -> arrow::datatypes::SchemaRef {
        Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
    }

    fn rows(values: &[i64]) -> Chunk {
        let batch =
            RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(values.to_vec()))]);
        Chunk::inserts(batch.unwrap())
    }

    #[tokio::test]
    async fn rows_become_visible_when_their_checkpoint_completes() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1, 2])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        sink.write(&rows(&[3])).await.unwrap();
        assert!(harness.visible_after_settling().await.is_empty());
        harness.complete(1);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2]);
        sink.checkpoint(2).await.unwrap();
        harness.complete(2);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn a_cancelled_sink_and_its_committer_commit_a_transaction_once() {
        let harness = Harness::new();
        harness.store.lock().unwrap().commit_delay = Duration::from_millis(200);
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        harness.complete(1);
        // Cancelled while the background committer commits checkpoint 1: the sink commits
        // what is due too, but not what the committer is committing.
        tokio::time::sleep(Duration::from_millis(50)).await;
        sink.finish(StreamEnd::Cancelled).await.unwrap();
        let store = harness.store.lock().unwrap();
        assert_eq!((store.tries, store.commits), (1, 1));
        assert_eq!(store.visible, vec![1]);
    }

    #[tokio::test]
    async fn a_lost_notice_is_made_up_by_the_next() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        sink.write(&rows(&[2])).await.unwrap();
        sink.checkpoint(2).await.unwrap();
        // The notice of checkpoint 1 never came; that of 2 commits both.
        harness.complete(2);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2]);
        assert_eq!(harness.store.lock().unwrap().commits, 2);
    }

    #[tokio::test]
    async fn recovery_commits_the_restored_and_aborts_later_transactions() {
        let harness = Harness::new();
        let mut first = harness.sink(1, &[]).await;
        first.write(&rows(&[1])).await.unwrap();
        let state = first.checkpoint(1).await.unwrap();
        first.write(&rows(&[2])).await.unwrap();
        first.checkpoint(2).await.unwrap();
        // Checkpoint 1 completed but the attempt died before committing; checkpoint 2
        // never completed. The next attempt restores checkpoint 1.
        drop(first);
        let mut second = harness.sink(2, &[state]).await;
        assert_eq!(harness.visible_after_settling().await, vec![1]);
        assert!(harness.store.lock().unwrap().prepared.is_empty());
        // Row 2 is replayed by the source and written again, once.
        second.write(&rows(&[2])).await.unwrap();
        second.checkpoint(2).await.unwrap();
        harness.complete(2);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2]);
    }

    #[tokio::test]
    async fn a_restore_taking_over_subtasks_commits_each_ones_transaction() {
        let harness = Harness::new();
        // Two subtasks prepared their transactions of checkpoint 1; it completed, but
        // neither committed before the job was resumed at parallelism 1.
        // (Both open first: the test's committer aborts whatever an opening sink does not
        // keep.)
        let mut subtasks = vec![harness.sink(1, &[]).await, harness.sink(2, &[]).await];
        let mut states = Vec::new();
        for (subtask, row) in subtasks.iter_mut().zip([10, 20]) {
            subtask.write(&rows(&[row])).await.unwrap();
            states.push(subtask.checkpoint(1).await.unwrap());
        }
        drop(subtasks);
        let _resumed = harness.sink(3, &states).await;
        assert_eq!(harness.visible_after_settling().await, vec![10, 20]);
        assert!(harness.store.lock().unwrap().prepared.is_empty());
    }

    #[tokio::test]
    async fn committing_an_already_committed_transaction_succeeds() {
        let harness = Harness::new();
        let mut first = harness.sink(1, &[]).await;
        first.write(&rows(&[7])).await.unwrap();
        let state = first.checkpoint(1).await.unwrap();
        harness.complete(1);
        assert_eq!(harness.visible_after_settling().await, vec![7]);
        drop(first);
        // The restored checkpoint still lists the transaction: committing it again is a
        // no-op, not an error and not a duplicate.
        let _second = harness.sink(2, &[state]).await;
        assert_eq!(harness.visible_after_settling().await, vec![7]);
    }

    #[tokio::test]
    async fn transient_commit_failures_are_retried_and_lasting_ones_fail_the_sink() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        harness.store.lock().unwrap().failures_left = 2;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        harness.complete(1);
        assert_eq!(harness.visible_after_settling().await, vec![1]);

        harness.store.lock().unwrap().failures_left = 100;
        sink.write(&rows(&[2])).await.unwrap();
        sink.checkpoint(2).await.unwrap();
        harness.complete(2);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let error = sink.write(&rows(&[3])).await.unwrap_err().to_string();
        assert!(error.contains("checkpoint 2"), "{error}");
        // The prepared transaction is kept, for the restart to commit.
        assert_eq!(harness.store.lock().unwrap().prepared.len(), 1);
    }

    #[tokio::test]
    async fn a_permanent_commit_failure_is_not_retried() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        {
            let mut store = harness.store.lock().unwrap();
            store.failures_left = 100;
            store.permanent = true;
        }
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        harness.complete(1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let error = sink.write(&rows(&[2])).await.unwrap_err().to_string();
        assert!(error.contains("checkpoint 1"), "{error}");
        assert_eq!(
            harness.store.lock().unwrap().tries,
            1,
            "tried once, not retried"
        );
        assert_eq!(harness.store.lock().unwrap().prepared.len(), 1);
    }

    #[tokio::test]
    async fn the_end_of_input_waits_for_the_final_commit() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(3).await.unwrap();
        let notices = harness.notices.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            notices.send_replace(CompletedCheckpoint {
                checkpoint: 3,
                end_of_input: true,
            });
        });
        sink.finish(StreamEnd::Finished).await.unwrap();
        assert_eq!(harness.store.lock().unwrap().visible, vec![1]);
    }

    #[tokio::test]
    async fn rows_after_the_final_checkpoint_fail_the_sink_instead_of_being_committed() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(3).await.unwrap();
        harness.complete_final(3);
        sink.write(&rows(&[2])).await.unwrap();
        let error = sink.finish(StreamEnd::Finished).await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("after the job's final checkpoint"),
            "{error}"
        );
        assert_eq!(harness.visible_after_settling().await, vec![1]);
        assert!(harness.prepared().is_empty());
    }

    #[tokio::test]
    async fn a_stopped_or_cancelled_sink_commits_only_what_completed_checkpoints_cover() {
        for end in [StreamEnd::Stopped, StreamEnd::Cancelled] {
            let harness = Harness::new();
            let mut first = harness.sink(1, &[]).await;
            first.write(&rows(&[1])).await.unwrap();
            first.checkpoint(1).await.unwrap();
            first.write(&rows(&[2])).await.unwrap();
            let state = first.checkpoint(2).await.unwrap();
            first.write(&rows(&[3])).await.unwrap();
            // Checkpoint 1 is complete, 2 is not (yet): the upstream tasks were stopped
            // (a cancelled attempt, a replaced JobManager) and the input ends here.
            harness.complete(1);
            first.finish(end).await.unwrap();
            assert_eq!(harness.visible_after_settling().await, vec![1], "{end:?}");
            assert_eq!(
                harness.prepared(),
                vec![vec![2]],
                "{end:?}: 2 waits, 3 is gone"
            );
            drop(first);
            // The restore from checkpoint 2 commits its transaction; row 3 is replayed,
            // written and committed once.
            let mut second = harness.sink(2, &[state]).await;
            second.write(&rows(&[3])).await.unwrap();
            second.checkpoint(3).await.unwrap();
            harness.complete(3);
            assert_eq!(
                harness.visible_after_settling().await,
                vec![1, 2, 3],
                "{end:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_checkpoint_without_rows_prepares_nothing() {
        let harness = Harness::new();
        let mut sink = harness.sink(1, &[]).await;
        let state = sink.checkpoint(1).await.unwrap();
        assert!(
            SinkState::decode(&state, "t")
                .unwrap()
                .transactions
                .is_empty()
        );
        assert!(harness.store.lock().unwrap().prepared.is_empty());
    }

    #[tokio::test]
    async fn an_ordered_sink_holds_rows_until_the_earlier_transaction_is_committed() {
        let harness = Harness::ordered();
        let mut sink = harness.sink(1, &[]).await;
        sink.write(&rows(&[1])).await.unwrap();
        sink.checkpoint(1).await.unwrap();
        // Checkpoint 1 is prepared, not committed: row 2 is held, not written.
        sink.write(&rows(&[2])).await.unwrap();
        assert!(!sink.settled());
        let state = sink.checkpoint(2).await.unwrap();
        assert_eq!(harness.prepared(), vec![vec![1]]);
        assert_eq!(SinkState::decode(&state, "t").unwrap().held.len(), 1);
        // Checkpoint 2 completes (1's notice was lost): 1 is committed, then row 2 goes
        // into the next transaction.
        harness.complete(2);
        assert_eq!(harness.visible_after_settling().await, vec![1]);
        sink.checkpoint(3).await.unwrap();
        assert!(sink.settled());
        harness.complete(3);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2]);
    }

    #[tokio::test]
    async fn held_rows_in_a_restored_checkpoint_are_written_after_its_transactions() {
        let harness = Harness::ordered();
        let mut first = harness.sink(1, &[]).await;
        first.write(&rows(&[1])).await.unwrap();
        first.checkpoint(1).await.unwrap();
        first.write(&rows(&[2])).await.unwrap();
        let state = first.checkpoint(2).await.unwrap();
        // Checkpoint 2 completed; the attempt died before committing anything.
        drop(first);
        let mut second = harness.sink(2, &[state]).await;
        assert_eq!(harness.visible_after_settling().await, vec![1]);
        second.checkpoint(3).await.unwrap();
        harness.complete(3);
        assert_eq!(harness.visible_after_settling().await, vec![1, 2]);
    }
}
