//! A TaskManager node: the `TaskExecutor` service that deploys and cancels the tasks of
//! jobs, wiring their channels locally or over the network, and reports task states to the
//! JobManager.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eddy_common::checkpoint::{CheckpointDir, CheckpointStorage, CompletedCheckpoint, StateFile};
use eddy_common::event::Barrier;

use eddy_common::metrics::JobMetrics;
use eddy_common::plan::plan_job;
use eddy_common::sql::compile;
use eddy_common::storage::resolve;
use eddy_proto::v1 as pb;
use eddy_proto::v1::resource_manager_client::ResourceManagerClient;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::chains::SnapshotChains;
use crate::exchange::channels;
use crate::exchange::{InputChannel, OutputChannel};
use crate::network::{ChannelKey, Channels, remote_sender};
use crate::task::{
    StopRequest, TaskAck, TaskCheckpointing, TaskCounters, TaskDeployment, TaskEnd, TaskRestore,
    VertexRestore, run_task,
};

/// Events a channel's queue holds before its sender waits.
pub const CHANNEL_CAPACITY: usize = 8;

/// How long a cancel waits for tasks to end at their next step (sinks rolling back what
/// no completed checkpoint covers) before it aborts them where they are.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

/// The tasks of one job on this TaskManager.
struct DeployedJob {
    stop: watch::Sender<Option<StopRequest>>,
    /// How many of its tasks have not ended yet.
    running: watch::Receiver<usize>,
    tasks: Vec<((usize, usize), Arc<TaskCounters>, AbortHandle)>,
    /// Checkpoint triggers of the source tasks here.
    triggers: Vec<UnboundedSender<Barrier>>,
    /// The newest completed checkpoint, for sources and sinks.
    completed: watch::Sender<CompletedCheckpoint>,
}

/// One TaskManager: its identity, slots, channels and running jobs.
pub struct TaskManagerNode {
    id: String,
    address: String,
    slots: usize,
    channels: Arc<Channels>,
    jobs: Mutex<HashMap<String, DeployedJob>>,
    jobmanager: Endpoint,
}

impl TaskManagerNode {
    /// A node named `id`, reachable at `address`, offering `slots`, reporting to the
    /// JobManager at `jobmanager`.
    pub fn new(
        id: String,
        address: String,
        slots: usize,
        jobmanager: &str,
    ) -> Result<Arc<Self>, String> {
        let endpoint = Channel::from_shared(jobmanager.to_string())
            .map_err(|e| format!("bad JobManager address '{jobmanager}': {e}"))?
            .connect_timeout(Duration::from_secs(2));
        Ok(Arc::new(TaskManagerNode {
            id,
            address,
            slots,
            channels: Arc::new(Channels::new(CHANNEL_CAPACITY)),
            jobs: Mutex::new(HashMap::new()),
            jobmanager: endpoint,
        }))
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where its services listen.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Its slots.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Its input queues, for the data exchange service.
    pub fn channels(&self) -> Arc<Channels> {
        self.channels.clone()
    }

    /// A client of the JobManager's resource manager, on a fresh connection (so that a
    /// restarted JobManager is reached at once, without a broken channel's backoff).
    pub fn jobmanager(&self) -> ResourceManagerClient<Channel> {
        ResourceManagerClient::new(self.jobmanager.connect_lazy())
    }

    /// Counters of every running task, for heartbeats.
    pub fn counters(&self) -> Vec<pb::TaskCounters> {
        let jobs = self.jobs.lock().expect("jobs lock");
        jobs.iter()
            .flat_map(|(job_id, job)| {
                job.tasks
                    .iter()
                    .map(move |((vertex, subtask), counters, _)| {
                        let (records_in, records_out) = counters.get();
                        pb::TaskCounters {
                            task: Some(task_id(job_id, *vertex, *subtask)),
                            records_in,
                            records_out,
                        }
                    })
            })
            .collect()
    }

    async fn deploy(self: &Arc<Self>, request: pb::DeployTasksRequest) -> Result<(), Status> {
        let job_id = request.job_id.clone();
        let options: Vec<(String, String)> = request.options.into_iter().collect();
        let compiled =
            compile(&request.sql, &options).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let graph =
            Arc::new(plan_job(&compiled).map_err(|e| Status::invalid_argument(e.to_string()))?);
        let parallelism: Vec<u32> = graph
            .vertices
            .iter()
            .map(|v| v.parallelism as u32)
            .collect();
        if parallelism != request.vertex_parallelism {
            return Err(Status::failed_precondition(format!(
                "this TaskManager planned vertex parallelism {parallelism:?}, the JobManager {:?}",
                request.vertex_parallelism
            )));
        }
        let mut locations = HashMap::new();
        for location in &request.locations {
            let task = location
                .task
                .as_ref()
                .ok_or_else(|| Status::invalid_argument("a location without a task"))?;
            locations.insert(
                (task.vertex as usize, task.subtask as usize),
                location.address.clone(),
            );
        }
        let mine: HashSet<(usize, usize)> = request
            .tasks
            .iter()
            .map(|t| (t.vertex as usize, t.subtask as usize))
            .collect();
        for (vertex, subtask) in &mine {
            if graph
                .vertices
                .get(*vertex)
                .is_none_or(|v| *subtask >= v.parallelism)
            {
                return Err(Status::invalid_argument(format!(
                    "no subtask {subtask} of vertex {vertex}"
                )));
            }
        }
        let checkpointing = match graph.config.checkpoints.interval.is_some()
            && !request.checkpoint_root.is_empty()
        {
            false => None,
            true => {
                let root = resolve(&request.checkpoint_root, &[])
                    .map_err(|e| Status::invalid_argument(e.to_string()))?;
                Some(CheckpointStorage::new(&root, &request.checkpoint_job))
            }
        };
        // Read what every vertex restores before any task starts.
        let mut restores: HashMap<(usize, usize), TaskRestore> = HashMap::new();
        let directory = match (request.restore_path.is_empty(), request.restore_checkpoint) {
            (false, _) => {
                let location = resolve(&request.restore_path, &[])
                    .map_err(|e| Status::invalid_argument(e.to_string()))?;
                Some(CheckpointDir::new(location))
            }
            (true, 0) => None,
            (true, checkpoint) => {
                let storage = checkpointing.as_ref().ok_or_else(|| {
                    Status::invalid_argument("a restore without checkpoint storage")
                })?;
                Some(storage.directory(checkpoint))
            }
        };
        if let Some(directory) = directory {
            // Snapshots are checked (size, CRC-32) as they are read, once per vertex.
            let metadata = directory
                .metadata()
                .await
                .map_err(|e| Status::failed_precondition(format!("cannot restore: {e}")))?;
            let vertices: HashSet<usize> = mine.iter().map(|(v, _)| *v).collect();
            for vertex in vertices {
                let parallelism = graph.vertices[vertex].parallelism;
                let own_checkpoint = request.restore_path.is_empty();
                let restore =
                    VertexRestore::load(&directory, &metadata, vertex, parallelism, own_checkpoint)
                        .await
                        .map_err(|e| Status::failed_precondition(format!("cannot restore: {e}")))?;
                for (v, subtask) in mine.iter().filter(|(v, _)| *v == vertex) {
                    restores.insert((*v, *subtask), restore.for_subtask(*subtask));
                }
            }
        }
        if self.jobs.lock().expect("jobs lock").contains_key(&job_id) {
            return Err(Status::already_exists(format!(
                "job {job_id} is already deployed here"
            )));
        }
        let (acks, acks_rx) = unbounded_channel();
        let (input_ended, input_ended_rx) = unbounded_channel();
        if checkpointing.is_some() {
            tokio::spawn(self.clone().forward_acks(job_id.clone(), acks_rx));
            tokio::spawn(
                self.clone()
                    .forward_input_ended(job_id.clone(), input_ended_rx),
            );
        }
        self.channels.open_job(&job_id);
        let mut inputs: HashMap<(usize, usize), Vec<InputChannel>> = HashMap::new();
        let mut outputs: HashMap<(usize, usize), Vec<OutputChannel>> = HashMap::new();
        for ends in channels(&graph) {
            let key = ChannelKey {
                job_id: job_id.clone(),
                ends,
            };
            let to = (ends.to_vertex, ends.to_subtask);
            if mine.contains(&to) {
                let mut receiver = self
                    .channels
                    .take_receiver(&key)
                    .ok_or_else(|| Status::internal("channel taken twice"))?;
                receiver.input = ends.input_index(&graph);
                inputs.entry(to).or_default().push(receiver);
            }
            if mine.contains(&(ends.from_vertex, ends.from_subtask)) {
                let target = locations.get(&to).ok_or_else(|| {
                    Status::invalid_argument(format!("no location for subtask {to:?}"))
                })?;
                let sender = if *target == self.address {
                    self.channels
                        .take_sender(&key)
                        .ok_or_else(|| Status::internal("channel taken twice"))?
                } else {
                    remote_sender(target.clone(), key, CHANNEL_CAPACITY)
                };
                outputs
                    .entry((ends.from_vertex, ends.from_subtask))
                    .or_default()
                    .push(sender);
            }
        }
        let (stop, stop_rx) = watch::channel(None);
        let (completed, _) = watch::channel(CompletedCheckpoint::default());
        let (job_name, attempt) = match request.job_id.rsplit_once('.') {
            Some((job, attempt)) => (job.to_string(), attempt.to_string()),
            None => (request.job_id.clone(), "0".to_string()),
        };
        let metrics = Arc::new(JobMetrics::default());
        let (remaining, running) = watch::channel(mine.len());
        let remaining = Arc::new(remaining);
        let mut tasks = Vec::new();
        let mut triggers = Vec::new();
        for (vertex, subtask) in mine {
            let counters = Arc::new(TaskCounters::default());
            let task_checkpointing = checkpointing.as_ref().map(|storage| {
                let triggers_rx = graph.vertices[vertex].source.is_some().then(|| {
                    let (tx, rx) = unbounded_channel();
                    triggers.push(tx);
                    rx
                });
                TaskCheckpointing {
                    storage: storage.clone(),
                    mode: graph.config.checkpoints.mode,
                    triggers: triggers_rx,
                    acks: acks.clone(),
                    completed: completed.subscribe(),
                    input_ended: input_ended.clone(),
                    chains: SnapshotChains::new(graph.config.checkpoints.incremental),
                }
            });
            let deployment = TaskDeployment {
                graph: graph.clone(),
                vertex,
                subtask,
                inputs: inputs.remove(&(vertex, subtask)).unwrap_or_default(),
                outputs: outputs.remove(&(vertex, subtask)).unwrap_or_default(),
                metrics: metrics.clone(),
                counters: counters.clone(),
                checkpointing: task_checkpointing,
                restore: restores.remove(&(vertex, subtask)),
                job: job_name.clone(),
                attempt: attempt.clone(),
            };
            let node = self.clone();
            let stop_rx = stop_rx.clone();
            let job = job_id.clone();
            let remaining = remaining.clone();
            let counters_done = counters.clone();
            let handle = tokio::spawn(async move {
                let name = deployment.name();
                let result = run_task(deployment, stop_rx).await;
                let (state, error) = match &result {
                    Ok(end) => (task_state(*end), String::new()),
                    Err(e) => {
                        tracing::warn!(job = %job, task = %name, error = %e, "task failed");
                        (pb::TaskState::Failed, e.to_string())
                    }
                };
                node.report(&job, (vertex, subtask), state, error, counters_done.get())
                    .await;
                let mut last = false;
                remaining.send_modify(|left| {
                    *left -= 1;
                    last = *left == 0;
                });
                if last {
                    node.forget(&job);
                }
            });
            tasks.push(((vertex, subtask), counters, handle.abort_handle()));
        }
        tracing::info!(job = %job_id, tasks = tasks.len(), "deployed");
        self.jobs.lock().expect("jobs lock").insert(
            job_id,
            DeployedJob {
                stop,
                running,
                tasks,
                triggers,
                completed,
            },
        );
        Ok(())
    }

    /// Sends this job's checkpoint acknowledgements to the JobManager.
    async fn forward_acks(self: Arc<Self>, job_id: String, mut acks: UnboundedReceiver<TaskAck>) {
        while let Some(ack) = acks.recv().await {
            let (error, file, size_bytes, crc32, previous) = match ack.result {
                Ok(handle) => (
                    String::new(),
                    handle.file,
                    handle.size,
                    handle.crc32,
                    handle.previous.into_iter().map(state_file).collect(),
                ),
                Err(error) => (error, String::new(), 0, 0, Vec::new()),
            };
            let message = pb::CheckpointAck {
                taskmanager_id: self.id.clone(),
                task: Some(task_id(&job_id, ack.vertex, ack.subtask)),
                checkpoint: ack.checkpoint,
                error,
                file,
                size_bytes,
                crc32,
                alignment_ms: ack.alignment.as_millis() as u64,
                sync_ms: ack.sync_duration.as_millis() as u64,
                input_ended: ack.input_ended,
                previous,
            };
            if let Err(status) = self.jobmanager().acknowledge_checkpoint(message).await {
                tracing::warn!(job = %job_id, checkpoint = ack.checkpoint, %status, "cannot acknowledge a checkpoint");
            }
        }
    }

    /// Tells the JobManager which source tasks here have read all their input.
    async fn forward_input_ended(
        self: Arc<Self>,
        job_id: String,
        mut ended: UnboundedReceiver<(usize, usize)>,
    ) {
        while let Some(task) = ended.recv().await {
            self.report_input_ended(&job_id, task).await;
        }
    }

    /// Starts a checkpoint at the job's source tasks here.
    pub fn trigger(&self, job_id: &str, barrier: Barrier) -> Result<(), Status> {
        let jobs = self.jobs.lock().expect("jobs lock");
        let job = jobs
            .get(job_id)
            .ok_or_else(|| Status::not_found(format!("job {job_id} does not run here")))?;
        for trigger in &job.triggers {
            // A source that has finished has dropped its receiver: nothing to trigger.
            let _ = trigger.send(barrier);
        }
        Ok(())
    }

    /// Tells the job's tasks here that a checkpoint is complete: sinks commit what they
    /// prepared for it (and for earlier ones), and after a final checkpoint sources end.
    pub fn checkpoint_complete(&self, job_id: &str, notice: CompletedCheckpoint) {
        // The window two-phase-commit sinks must survive: complete, not yet committed.
        eddy_common::failpoint::crash_if("taskmanager.before-commit", notice.checkpoint);
        if let Some(job) = self.jobs.lock().expect("jobs lock").get(job_id) {
            job.completed.send_if_modified(|current| {
                let newer = notice.checkpoint > current.checkpoint;
                if newer {
                    *current = notice;
                }
                newer
            });
        }
    }

    fn forget(&self, job_id: &str) {
        self.jobs.lock().expect("jobs lock").remove(job_id);
        self.channels.close_job(job_id);
    }

    /// Cancels every task of a job here: each ends at its next step, its sink rolling back
    /// what no completed checkpoint covers and its channels telling the tasks downstream
    /// (here or on other TaskManagers) that it was cancelled, so that none of them takes
    /// the end for a finished input. Tasks still running after [`CANCEL_TIMEOUT`] are
    /// aborted where they are and reported cancelled.
    pub async fn cancel(&self, job_id: &str) {
        let job = self.jobs.lock().expect("jobs lock").remove(job_id);
        self.channels.close_job(job_id);
        let Some(mut job) = job else { return };
        let _ = job.stop.send(Some(StopRequest::Cancel));
        let ended = job.running.wait_for(|running| *running == 0);
        if tokio::time::timeout(CANCEL_TIMEOUT, ended).await.is_err() {
            tracing::warn!(job = %job_id, timeout = ?CANCEL_TIMEOUT, "tasks did not end when cancelled; aborting them");
        }
        for (task, counters, handle) in &job.tasks {
            if !handle.is_finished() {
                handle.abort();
                self.report(
                    job_id,
                    *task,
                    pb::TaskState::Cancelled,
                    String::new(),
                    counters.get(),
                )
                .await;
            }
        }
        tracing::info!(job = %job_id, "cancelled");
    }

    /// Stops every job (on shutdown).
    pub async fn cancel_all(&self) {
        let ids: Vec<String> = self
            .jobs
            .lock()
            .expect("jobs lock")
            .keys()
            .cloned()
            .collect();
        for id in ids {
            self.cancel(&id).await;
        }
    }

    async fn report(
        &self,
        job_id: &str,
        (vertex, subtask): (usize, usize),
        state: pb::TaskState,
        error: String,
        (records_in, records_out): (u64, u64),
    ) {
        let report = pb::TaskStateReport {
            taskmanager_id: self.id.clone(),
            task: Some(task_id(job_id, vertex, subtask)),
            state: state as i32,
            error,
            records_in,
            records_out,
            input_ended: false,
        };
        self.send_report(job_id, report).await;
    }

    /// Tells the JobManager a running source task has read all its input.
    async fn report_input_ended(&self, job_id: &str, (vertex, subtask): (usize, usize)) {
        let report = pb::TaskStateReport {
            taskmanager_id: self.id.clone(),
            task: Some(task_id(job_id, vertex, subtask)),
            state: pb::TaskState::Running as i32,
            input_ended: true,
            ..Default::default()
        };
        self.send_report(job_id, report).await;
    }

    async fn send_report(&self, job_id: &str, report: pb::TaskStateReport) {
        for attempt in 0..5u64 {
            match self.jobmanager().report_task_state(report.clone()).await {
                Ok(_) => return,
                Err(status) => {
                    tracing::warn!(job = %job_id, %status, "cannot report a task state, retrying");
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
            }
        }
    }
}

/// An earlier task snapshot, as acknowledgements name it.
fn state_file(file: StateFile) -> pb::StateFile {
    pb::StateFile {
        checkpoint: file.checkpoint,
        file: file.file,
        size_bytes: file.size,
        crc32: file.crc32,
    }
}

/// The state a task that ended as `end` is reported in.
fn task_state(end: TaskEnd) -> pb::TaskState {
    match end {
        TaskEnd::Finished => pb::TaskState::Finished,
        TaskEnd::Stopped => pb::TaskState::Stopped,
        TaskEnd::Cancelled => pb::TaskState::Cancelled,
    }
}

fn task_id(job_id: &str, vertex: usize, subtask: usize) -> pb::TaskId {
    pb::TaskId {
        job_id: job_id.to_string(),
        vertex: vertex as u32,
        subtask: subtask as u32,
    }
}

/// The `TaskExecutor` service of a node.
pub struct TaskExecutorService {
    node: Arc<TaskManagerNode>,
}

impl TaskExecutorService {
    /// The service of `node`.
    pub fn new(node: Arc<TaskManagerNode>) -> Self {
        TaskExecutorService { node }
    }
}

#[tonic::async_trait]
impl pb::task_executor_server::TaskExecutor for TaskExecutorService {
    async fn deploy_tasks(
        &self,
        request: Request<pb::DeployTasksRequest>,
    ) -> Result<Response<pb::DeployTasksResponse>, Status> {
        self.node.deploy(request.into_inner()).await?;
        Ok(Response::new(pb::DeployTasksResponse {}))
    }

    async fn cancel_tasks(
        &self,
        request: Request<pb::CancelTasksRequest>,
    ) -> Result<Response<pb::CancelTasksResponse>, Status> {
        self.node.cancel(&request.into_inner().job_id).await;
        Ok(Response::new(pb::CancelTasksResponse {}))
    }

    async fn trigger_checkpoint(
        &self,
        request: Request<pb::TriggerCheckpointRequest>,
    ) -> Result<Response<pb::TriggerCheckpointResponse>, Status> {
        let request = request.into_inner();
        let barrier = Barrier {
            checkpoint: request.checkpoint,
            triggered_at: request.triggered_at_ms,
            unaligned: request.unaligned,
        };
        self.node.trigger(&request.job_id, barrier)?;
        Ok(Response::new(pb::TriggerCheckpointResponse {}))
    }

    async fn notify_checkpoint_complete(
        &self,
        request: Request<pb::NotifyCheckpointCompleteRequest>,
    ) -> Result<Response<pb::NotifyCheckpointCompleteResponse>, Status> {
        let request = request.into_inner();
        tracing::debug!(job = %request.job_id, checkpoint = request.checkpoint, "checkpoint complete");
        self.node.checkpoint_complete(
            &request.job_id,
            CompletedCheckpoint {
                checkpoint: request.checkpoint,
                end_of_input: request.end_of_input,
            },
        );
        Ok(Response::new(pb::NotifyCheckpointCompleteResponse {}))
    }
}
