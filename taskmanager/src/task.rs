//! One subtask: reads its source or input channels, runs its operator chain, and writes
//! to its output, until its input ends or it is told to stop. With checkpointing, a source
//! takes triggers between reads and other tasks snapshot when a barrier has been aligned;
//! snapshots are uploaded in the background and acknowledged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::Result;
use eddy_common::checkpoint::{
    CheckpointStorage, CompletedCheckpoint, StateFile, StateHandle, TaskSnapshot,
};
use eddy_common::chunk::Chunk;
use eddy_common::config::checkpointing::CheckpointingMode;
use eddy_common::event::{Barrier, StreamEnd, Timestamp};
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_common::metrics::TaskMetrics;
use eddy_common::state::{SnapshotFile, SnapshotRequest, StateKind};
use eddy_connectors::{SinkContext, SourceContext};
use eddy_operators::partition::KeyScope;
use eddy_operators::wall_clock;
use eddy_planner::plan::{JobGraph, SourceSpec, VertexOutput};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;
use tracing::Instrument;

use crate::exchange::{InputChannel, OutputChannel};
use crate::input::{Input, InputGate};
use crate::operator_chain::OperatorChain;
use crate::output::{ExchangeOutput, TaskOutput};
pub use crate::restore::{TaskRestore, VertexRestore};
use crate::snapshot_chain::SnapshotChains;
use crate::state_dir::TaskStateDir;
use eddy_common::wire::{decode_chunk, encode_chunk};

/// Everything a subtask needs to run.
pub struct TaskDeployment {
    /// The job's graph.
    pub graph: Arc<JobGraph>,
    /// Which vertex.
    pub vertex: usize,
    /// Which subtask of it.
    pub subtask: usize,
    /// Its input channels (none for a source).
    pub inputs: Vec<InputChannel>,
    /// Its output channels (none for a sink).
    pub outputs: Vec<OutputChannel>,
    /// This task's measurements (its operators' counters registered in the job's too).
    pub metrics: Arc<TaskMetrics>,
    /// How it takes part in checkpoints (`None`: the job does not checkpoint).
    pub checkpointing: Option<TaskCheckpointing>,
    /// State to start from.
    pub restore: Option<TaskRestore>,
    /// The run of the job it belongs to.
    pub execution: ExecutionId,
}

/// A task's part in checkpointing.
pub struct TaskCheckpointing {
    /// Where snapshots go.
    pub storage: CheckpointStorage,
    /// Aligned (exactly-once) or not (at-least-once).
    pub mode: CheckpointingMode,
    /// Checkpoint triggers, for a source task.
    pub triggers: Option<UnboundedReceiver<Barrier>>,
    /// Where acknowledgements go.
    pub acks: UnboundedSender<TaskAck>,
    /// Checkpoints as the JobManager declares them complete.
    pub completed: watch::Receiver<CompletedCheckpoint>,
    /// Where a source task says it has read all its input.
    pub input_ended: UnboundedSender<TaskKey>,
    /// The task's stored snapshots, which its next snapshot may extend.
    pub chains: SnapshotChains,
}

/// A task's answer to a checkpoint.
#[derive(Debug, Clone)]
pub struct TaskAck {
    /// The checkpoint.
    pub checkpoint: u64,
    /// The vertex.
    pub vertex: usize,
    /// The subtask.
    pub subtask: usize,
    /// Its stored snapshot, or why it could not be stored (a decline).
    pub result: std::result::Result<StateHandle, String>,
    /// How long the barrier was aligned.
    pub alignment: Duration,
    /// How long the synchronous part of the snapshot took.
    pub sync_duration: Duration,
    /// The task's source had read all its input (always true without a source), and its
    /// sink, if any, held no rows back.
    pub input_ended: bool,
}

impl TaskDeployment {
    /// `v{vertex}[{subtask}]`, for logs.
    pub fn name(&self) -> String {
        format!(
            "{}[{}]",
            self.graph.vertices[self.vertex].name(),
            self.subtask
        )
    }
}

/// How a subtask ended without error: as the stream it sends on ends. Finished when its
/// input ended (every source read all of it, and with checkpoints the final checkpoint
/// completed); stopped when sources were told to stop, here or upstream; cancelled when
/// it or an upstream task was cancelled.
pub type TaskEnd = StreamEnd;

pub use eddy_common::event::StopRequest;

/// Tells tasks to stop; `None` until one is asked.
pub type StopSignal = watch::Receiver<Option<StopRequest>>;

/// How a task ends once `stop` changed (a dropped sender cancels).
fn requested_end(
    stop: &StopSignal,
    changed: std::result::Result<(), watch::error::RecvError>,
) -> TaskEnd {
    match (changed, *stop.borrow()) {
        (Ok(()), Some(request)) => request.end(),
        _ => StreamEnd::Cancelled,
    }
}

/// Resolves once the task is cancelled (or whoever could stop it is gone).
async fn cancelled(mut stop: StopSignal) {
    let _ = stop
        .wait_for(|request| *request == Some(StopRequest::Cancel))
        .await;
}

/// Runs a subtask to its end. [`StopRequest::Drain`] ends sources cleanly: what has been
/// read flows through and sinks flush. [`StopRequest::Cancel`] ends every task at its
/// next step, and its output learns why. What it logs carries the job attempt and the
/// task.
pub async fn run_task(deployment: TaskDeployment, stop: StopSignal) -> Result<TaskEnd> {
    let span = tracing::info_span!(
        "task",
        job = %deployment.execution,
        task = %deployment.name()
    );
    run_subtask(deployment, stop).instrument(span).await
}

async fn run_subtask(mut deployment: TaskDeployment, mut stop: StopSignal) -> Result<TaskEnd> {
    let graph = deployment.graph.clone();
    let vertex = &graph.vertices[deployment.vertex];
    let prefix = vertex.name();
    let max_parallelism = graph.config.max_parallelism;
    let scope = KeyScope {
        subtask: deployment.subtask,
        parallelism: vertex.parallelism,
        max_parallelism,
    };
    let state_dir = TaskStateDir::new(
        &graph.config.state_backend,
        &deployment.execution.to_string(),
        deployment.vertex,
        deployment.subtask,
    );
    let mut chain = OperatorChain::build(
        &vertex.operators,
        &prefix,
        &deployment.metrics,
        max_parallelism,
        &state_dir,
    )?;
    if let Some(restore) = &deployment.restore {
        let started = std::time::Instant::now();
        restore.fetch_shared(&state_dir.restored()).await?;
        let fetched = started.elapsed();
        chain.restore(&restore.operators, &scope)?;
        tracing::info!(
            checkpoint = restore.checkpoint,
            files = restore.shared.len(),
            bytes = restore.shared.iter().map(|f| f.size).sum::<u64>(),
            fetch_ms = fetched.as_millis() as u64,
            restore_ms = (started.elapsed() - fetched).as_millis() as u64,
            "state restored"
        );
        if let Some(checkpointing) = &mut deployment.checkpointing
            && !restore.chain.is_empty()
        {
            // The next snapshot can extend the restored one instead of writing it again,
            // and refer to the files it refers to where they are.
            chain.restored_from(restore.checkpoint);
            checkpointing
                .chains
                .restored(restore.checkpoint, restore.chain.clone());
            checkpointing.chains.restored_files(&restore.shared);
        }
    }
    let mut output = open_output(&mut deployment, &prefix).await?;
    tracing::debug!(restored = ?deployment.restore.as_ref().map(|r| r.checkpoint), "task started");
    let mut checkpointing = deployment.checkpointing.take();
    let mode = checkpointing
        .as_ref()
        .map_or(CheckpointingMode::ExactlyOnce, |c| c.mode);
    let inputs = std::mem::take(&mut deployment.inputs);
    let mut pipeline = Pipeline {
        chain: &mut chain,
        output: &mut output,
        metrics: &deployment.metrics,
        checkpointing: checkpointing.as_mut(),
        vertex: deployment.vertex,
        subtask: deployment.subtask,
        unaligned: None,
        input_ended: vertex.source.is_none(),
    };
    let cancel = cancelled(stop.clone());
    let body = async {
        match &vertex.source {
            Some(source) => read_source(&deployment, source, &mut pipeline, &mut stop).await,
            None => {
                let in_flight = deployment.restore.as_ref().map(|r| r.in_flight.as_slice());
                let gate = InputGate::new(inputs, mode);
                read_inputs(gate, in_flight.unwrap_or_default(), &mut pipeline).await
            }
        }
    };
    // A cancel ends the task at its next step, wherever it waits.
    let end = tokio::select! {
        biased;
        () = cancel => Ok(TaskEnd::Cancelled),
        end = body => end,
    };
    let end = match end {
        // The cancel raced the step: a downstream task it already ended refused a send.
        Err(error) if *stop.borrow() == Some(StopRequest::Cancel) => {
            tracing::debug!(%error, "a step failed after the task was cancelled");
            TaskEnd::Cancelled
        }
        end => end?,
    };
    output.finish(end).await?;
    tracing::debug!(?end, "task ended");
    // Freeing large state (a GROUP BY's groups) takes tens of milliseconds: do it off this
    // thread, so that the task's end is reported at once.
    tokio::task::spawn_blocking(move || drop(chain));
    Ok(end)
}

/// Where the task's rows go: its sink's writer, opened where the restored checkpoint left
/// it, or the channels to the next vertex (`prefix`: the vertex's name, for counters).
async fn open_output(deployment: &mut TaskDeployment, prefix: &str) -> Result<TaskOutput> {
    let graph = deployment.graph.clone();
    let vertex = &graph.vertices[deployment.vertex];
    match &vertex.output {
        VertexOutput::Sink(sink) => {
            let context = SinkContext {
                table: sink.table.clone(),
                schema: sink.schema.clone(),
                subtask: deployment.subtask,
                parallelism: vertex.parallelism,
                execution: deployment.execution.clone(),
                metrics: deployment
                    .metrics
                    .operator(&format!("{prefix}/Sink:{}", sink.table)),
                completed: deployment
                    .checkpointing
                    .as_ref()
                    .map(|c| c.completed.clone()),
            };
            let mut writer = sink.connector.create_writer(&context)?;
            let restored = deployment.restore.as_ref().map(|r| r.sink.as_slice());
            writer.open(restored.unwrap_or_default()).await?;
            Ok(TaskOutput::Sink {
                writer,
                schema: sink.schema.clone(),
                table: sink.table.clone(),
            })
        }
        VertexOutput::Exchange { partitioning, .. } => {
            Ok(TaskOutput::Exchange(ExchangeOutput::new(
                std::mem::take(&mut deployment.outputs),
                partitioning,
                graph.config.max_parallelism,
                deployment.metrics.operator(&format!("{prefix}/Exchange")),
                deployment.metrics.clone(),
            )))
        }
    }
}

/// Opens the task's source where the restored checkpoint left it and runs it.
async fn read_source(
    deployment: &TaskDeployment,
    source: &SourceSpec,
    pipeline: &mut Pipeline<'_>,
    stop: &mut StopSignal,
) -> Result<TaskEnd> {
    let graph = &deployment.graph;
    let vertex = &graph.vertices[deployment.vertex];
    let prefix = vertex.name();
    let context = SourceContext {
        table: source.table.clone(),
        schema: source.schema.clone(),
        subtask: deployment.subtask,
        parallelism: vertex.parallelism,
        batch_size: graph.config.batch_size,
        metrics: deployment
            .metrics
            .operator(&format!("{prefix}/Source:{}", source.table)),
        completed: pipeline.checkpointing.as_ref().map(|c| c.completed.clone()),
        metadata: source.metadata.clone(),
        columns_used: source.columns_used.clone(),
        bounds: source.bounds.clone(),
    };
    let scan = OperatorChain::build(
        &source.scan_operators,
        &format!("{prefix}/scan"),
        &deployment.metrics,
        graph.config.max_parallelism,
        &TaskStateDir::stateless(),
    )?;
    let mut reader = source.connector.create_reader(&context)?;
    if let Some(restore) = &deployment.restore {
        let refs: Vec<&[u8]> = restore.source_positions.iter().map(Vec::as_slice).collect();
        reader.restore(&refs)?;
    }
    // A source vertex whose operators keep no state, and that sends to an exchange (a
    // sink must prepare at the barrier), can checkpoint mid-send.
    let stateless = (vertex.operators.iter().all(|op| !op.is_stateful())
        && matches!(vertex.output, VertexOutput::Exchange { .. }))
    .then_some(vertex.operators.len());
    source::run_source(source, reader, context, scan, pipeline, stop, stateless).await
}

/// Replays the data that was in flight to the task at an unaligned checkpoint, then runs
/// it on its input channels.
async fn read_inputs(
    gate: InputGate,
    in_flight: &[(usize, Vec<u8>)],
    pipeline: &mut Pipeline<'_>,
) -> Result<TaskEnd> {
    for (input, bytes) in in_flight {
        pipeline
            .emit_from(*input, decode_chunk(bytes.clone())?)
            .await?;
    }
    run_inputs(gate, pipeline).await
}

/// The operator chain and output of one running task, with its counters.
struct Pipeline<'a> {
    chain: &'a mut OperatorChain,
    output: &'a mut TaskOutput,
    metrics: &'a TaskMetrics,
    checkpointing: Option<&'a mut TaskCheckpointing>,
    vertex: usize,
    subtask: usize,
    /// An unaligned snapshot waiting for its in-flight data.
    unaligned: Option<(Barrier, Snapshot, Duration)>,
    /// The task's source has read all its input (true without a source).
    input_ended: bool,
}

impl Pipeline<'_> {
    async fn send(&mut self, chunks: Vec<Chunk>) -> Result<()> {
        let rows: usize = chunks.iter().map(Chunk::num_rows).sum();
        let bytes: usize = chunks
            .iter()
            .map(|c| c.rows().get_array_memory_size())
            .sum();
        self.metrics.sent_on(rows, bytes);
        self.output.send(chunks).await
    }

    /// Runs rows through the chain and sends what comes out.
    async fn emit(&mut self, chunk: Chunk) -> Result<()> {
        self.emit_from(0, chunk).await
    }

    /// Runs rows from input `input` of the task through the chain and sends what comes
    /// out.
    async fn emit_from(&mut self, input: usize, chunk: Chunk) -> Result<()> {
        let chunks = self.chain.process_input(input, chunk)?;
        self.send(chunks).await
    }

    /// Advances event time: what the watermark completes is sent, then the watermark.
    /// A window larger than memory comes out in parts, each sent before the next is read
    /// back: the watermark is passed again while an operator has output due.
    async fn advance(&mut self, watermark: Timestamp) -> Result<()> {
        self.metrics.set_watermark_in(watermark);
        let (chunks, passed_on) = self.chain.on_watermark(watermark)?;
        self.send(chunks).await?;
        while self.chain.has_due_output() {
            let (chunks, _) = self.chain.on_watermark(watermark)?;
            self.send(chunks).await?;
        }
        self.metrics.set_watermark_out(passed_on);
        self.output.watermark(passed_on).await
    }

    /// The wall clock reached `now`: what it completes (processing-time windows) is sent.
    async fn on_processing_time(&mut self, now: Timestamp) -> Result<()> {
        let chunks = self.chain.on_processing_time(now)?;
        self.send(chunks).await
    }

    /// Takes this task's snapshot for `barrier` and forwards the barrier. An aligned
    /// snapshot is uploaded at once; an unaligned one (of a task with inputs) waits for its
    /// in-flight data.
    async fn checkpoint(
        &mut self,
        barrier: Barrier,
        source: Option<Vec<u8>>,
        alignment: Duration,
    ) -> Result<()> {
        if self.checkpointing.is_none() {
            return Ok(());
        }
        let started = Instant::now();
        let mut snapshot = self.snapshot(barrier.checkpoint, source)?;
        let sync_duration = started.elapsed();
        snapshot.task.sink = self.output.barrier(barrier).await?;
        if snapshot.task.sink.is_some() {
            // Prepared, not yet in a snapshot: the restore must abort it.
            eddy_common::failpoint::crash_if("taskmanager.after-prepare", barrier.checkpoint);
        }
        if barrier.unaligned && snapshot.task.source.is_none() {
            self.unaligned = Some((barrier, snapshot, sync_duration));
            return Ok(());
        }
        if let Some(uploader) = self.uploader() {
            uploader.upload(barrier, snapshot, alignment, sync_duration);
        }
        Ok(())
    }

    /// Snapshots the operators for `checkpoint`: each holds the changes since the task's
    /// snapshot of the newest completed checkpoint where it can and that snapshot's chain
    /// may grow, and all its state otherwise.
    fn snapshot(&mut self, checkpoint: u64, source: Option<Vec<u8>>) -> Result<Snapshot> {
        let (completed, base) = match self.checkpointing.as_deref() {
            Some(c) => {
                let completed = c.chains.completed(c.completed.borrow().checkpoint);
                (completed, c.chains.base(completed))
            }
            None => (0, None),
        };
        let request = SnapshotRequest {
            checkpoint,
            completed: (completed > 0).then_some(completed),
            changes: base.is_some(),
        };
        let operators = self.chain.snapshot(&request)?;
        let extends = operators.iter().any(|o| o.kind == StateKind::Changes);
        let full_estimate = self.chain.full_snapshot_estimate(&operators);
        Ok(Snapshot {
            task: TaskSnapshot {
                operators,
                in_flight: Vec::new(),
                source,
                sink: None,
            },
            previous: base.filter(|_| extends).unwrap_or_default(),
            full_estimate,
        })
    }

    /// The in-flight data of an unaligned checkpoint has arrived: complete its snapshot.
    fn in_flight(&mut self, checkpoint: u64, chunks: Vec<(usize, Chunk)>) -> Result<()> {
        let Some((barrier, mut snapshot, sync_duration)) = self.unaligned.take() else {
            return Ok(());
        };
        if barrier.checkpoint != checkpoint {
            return Ok(());
        }
        snapshot.task.in_flight = chunks
            .iter()
            .map(|(input, chunk)| Ok((*input, encode_chunk(chunk)?)))
            .collect::<Result<_>>()?;
        tracing::debug!(
            checkpoint,
            vertex = self.vertex,
            subtask = self.subtask,
            chunks = chunks.len(),
            rows = chunks.iter().map(|(_, c)| c.num_rows()).sum::<usize>(),
            "unaligned snapshot with its in-flight data"
        );
        if let Some(uploader) = self.uploader() {
            uploader.upload(barrier, snapshot, Duration::ZERO, sync_duration);
        }
        Ok(())
    }

    /// Where this task's snapshots go, when the job checkpoints.
    fn uploader(&self) -> Option<Uploader> {
        let checkpointing = self.checkpointing.as_deref()?;
        Some(Uploader {
            storage: checkpointing.storage.clone(),
            chains: checkpointing.chains.clone(),
            acks: checkpointing.acks.clone(),
            vertex: self.vertex,
            subtask: self.subtask,
            // A checkpoint is a job's last only if no sink holds rows back.
            input_ended: self.input_ended && self.output.settled(),
        })
    }
}

/// A task's snapshot, the stored snapshots it extends, and roughly how large a full one
/// would have been.
struct Snapshot {
    task: TaskSnapshot,
    previous: Vec<StateFile>,
    full_estimate: u64,
}

/// Writes a task's snapshots and acknowledges them.
#[derive(Clone)]
struct Uploader {
    storage: CheckpointStorage,
    chains: SnapshotChains,
    acks: UnboundedSender<TaskAck>,
    vertex: usize,
    subtask: usize,
    input_ended: bool,
}

impl Uploader {
    /// Uploads a snapshot in the background and acknowledges when it is stored.
    fn upload(
        &self,
        barrier: Barrier,
        snapshot: Snapshot,
        alignment: Duration,
        sync_duration: Duration,
    ) {
        let files: Vec<SnapshotFile> = snapshot
            .task
            .operators
            .iter()
            .flat_map(|operator| operator.files.iter().cloned())
            .collect();
        let parts = snapshot.task.into_parts();
        let full_estimate = snapshot.full_estimate;
        let this = self.clone();
        tokio::spawn(async move {
            let checkpoint = barrier.checkpoint;
            let result = async {
                let shared = this.store_files(checkpoint, &files).await?;
                let mut handle = this
                    .storage
                    .write_task(
                        checkpoint,
                        this.vertex,
                        this.subtask,
                        parts,
                        snapshot.previous,
                    )
                    .await?;
                handle.shared = shared;
                Ok::<_, eddy_common::EddyError>(handle)
            }
            .await
            .map_err(|e| e.to_string());
            if let Ok(handle) = &result {
                this.chains
                    .stored(checkpoint, handle.chain(checkpoint), full_estimate);
            }
            let _ = this.acks.send(TaskAck {
                checkpoint: barrier.checkpoint,
                vertex: this.vertex,
                subtask: this.subtask,
                result,
                alignment,
                sync_duration,
                input_ended: this.input_ended,
            });
        });
    }
}

impl Uploader {
    /// Stores the files a snapshot refers to that no earlier snapshot of the task stored;
    /// returns where each is.
    async fn store_files(&self, checkpoint: u64, files: &[SnapshotFile]) -> Result<Vec<StateFile>> {
        let stores = files.iter().map(|file| async move {
            if let Some(stored) = self.chains.stored_file(&file.name) {
                return Ok::<_, eddy_common::EddyError>(stored);
            }
            let stored = self.storage.store_shared(checkpoint, file).await?;
            self.chains.file_stored(&file.name, stored.clone());
            Ok(stored)
        });
        let stored = futures::future::try_join_all(stores).await?;
        // Files this snapshot does not refer to were merged away: none will again.
        self.chains
            .keep_files(files.iter().map(|f| f.name.as_str()));
        Ok(stored)
    }
}

/// Runs a task fed by channels until all of them have ended (a stop reaches it as the
/// end of its inputs, once the sources have stopped); it ends as its inputs did.
async fn run_inputs(mut gate: InputGate, pipeline: &mut Pipeline<'_>) -> Result<TaskEnd> {
    loop {
        // `next` keeps its progress in the gate, so a timer may interrupt it.
        let input = match pipeline.chain.processing_timer() {
            None => gate.next().await?,
            Some(at) => {
                let wait = Duration::from_millis(at.saturating_sub(wall_clock()).max(0) as u64);
                tokio::select! {
                    input = gate.next() => input?,
                    _ = tokio::time::sleep(wait) => {
                        pipeline.on_processing_time(wall_clock()).await?;
                        continue;
                    }
                }
            }
        };
        let Some(input) = input else { break };
        let (queued, capacity) = gate.last_queue_fill();
        pipeline.metrics.input_queue(queued, capacity);
        let working = Instant::now();
        match input {
            Input::Data { input, chunk } => {
                let bytes = chunk.rows().get_array_memory_size();
                pipeline.metrics.taken_in(chunk.num_rows(), bytes);
                pipeline.emit_from(input, chunk).await?
            }
            Input::Watermark(t) => pipeline.advance(t).await?,
            Input::Barrier {
                barrier,
                aligned_for,
            } => pipeline.checkpoint(barrier, None, aligned_for).await?,
            Input::InFlight { checkpoint, chunks } => pipeline.in_flight(checkpoint, chunks)?,
        }
        pipeline.metrics.worked(working.elapsed());
    }
    Ok(gate.end())
}

mod source;
#[cfg(test)]
mod tests;
