//! A TaskManager: its slots, the tasks it runs for the JobManager, and what it reports
//! back. The same component serves the daemon (behind gRPC, [`crate::grpc`]) and the
//! embedded cluster of `eddy run` (called in-process).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use eddy_common::EddyError;
use futures::FutureExt;

use eddy_common::checkpoint::{CompletedCheckpoint, StateFile};
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_common::metrics::{JobMetrics, TaskMetrics};
use eddy_planner::plan::JobGraph;
use eddy_proto::v1 as pb;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::deployment::{DeploymentPlan, TaskWiring};
use crate::gateway::ResourceManagerGateway;
use crate::metrics::{RunningTask, task_counters};
use crate::network::Channels;
use crate::snapshot_chain::SnapshotChains;
use crate::task::{TaskAck, TaskCheckpointing, TaskDeployment, TaskEnd, run_task};

/// Events a channel's queue holds before its sender waits.
pub const CHANNEL_CAPACITY: usize = 8;

/// How long a cancel waits for tasks to end at their next step (sinks rolling back what
/// no completed checkpoint covers) before it aborts them where they are.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

/// The tasks of one execution of a job on this TaskManager.
struct DeployedJob {
    stop: watch::Sender<Option<StopRequest>>,
    /// How many of its tasks have not ended yet.
    running: watch::Receiver<usize>,
    tasks: Vec<(TaskKey, Arc<TaskMetrics>, AbortHandle)>,
    /// Checkpoint triggers of the source tasks here.
    triggers: Vec<UnboundedSender<Barrier>>,
    /// The newest completed checkpoint, for sources and sinks.
    completed: watch::Sender<CompletedCheckpoint>,
    /// The newest checkpoint triggered here (0: none): a trigger of it or an earlier one
    /// again is one a JobManager that took the run over sent after its predecessor's, and
    /// is dropped, so that every source emits each barrier once.
    newest_trigger: u64,
    /// Its source tasks here that have read all their input.
    inputs_ended: BTreeSet<TaskKey>,
}

/// One TaskManager: its identity, slots, channels and running jobs.
pub struct TaskManager {
    id: String,
    address: String,
    slots: usize,
    channels: Arc<Channels>,
    jobs: Mutex<HashMap<ExecutionId, DeployedJob>>,
    jobmanager: Arc<dyn ResourceManagerGateway>,
    /// Where every deployment counts its operators' rows, when one place collects them
    /// (the embedded cluster's `--metrics`); otherwise each deployment counts its own.
    metrics: Option<Arc<JobMetrics>>,
    /// Where its HTTP port (`/metrics`) listens, once it does.
    http_address: OnceLock<String>,
    /// The leader term of the JobManager it follows: commands of earlier terms come from
    /// a deposed leader and are refused.
    term: AtomicU64,
}

impl TaskManager {
    /// A TaskManager named `id`, reachable at `address`, offering `slots`, reporting to
    /// `jobmanager`. Tasks of TaskManagers sharing `channels` (and `address`) exchange data
    /// in-process; others are reached over the network. With `metrics`, every deployment
    /// counts its operators' rows there (the embedded cluster's `--metrics`).
    pub fn new(
        id: String,
        address: String,
        slots: usize,
        jobmanager: Arc<dyn ResourceManagerGateway>,
        channels: Arc<Channels>,
        metrics: Option<Arc<JobMetrics>>,
    ) -> Arc<Self> {
        Arc::new(TaskManager {
            id,
            address,
            slots,
            channels,
            jobs: Mutex::new(HashMap::new()),
            jobmanager,
            metrics,
            http_address: OnceLock::new(),
            term: AtomicU64::new(0),
        })
    }

    /// Follows the JobManager of leader term `term`, which it registered with (a lower
    /// term too: a JobManager without high availability has term 0).
    pub fn follow_term(&self, term: u64) {
        self.term.store(term, Ordering::SeqCst);
    }

    /// Whether a command of leader term `term` may be carried out: not when it is earlier
    /// than the term followed (a deposed leader's); a later one is followed from now on.
    pub fn admit_term(&self, term: u64) -> Result<(), CallError> {
        let followed = self.term.fetch_max(term, Ordering::SeqCst);
        if term < followed {
            tracing::warn!(
                term,
                followed,
                "refused a command of an earlier jobmanager term"
            );
            return Err(CallError::Refused(format!(
                "fenced: a command of jobmanager term {term}, and this taskmanager follows term {followed}"
            )));
        }
        Ok(())
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where its data exchange is reached.
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

    /// The JobManager it reports to.
    pub fn jobmanager(&self) -> &Arc<dyn ResourceManagerGateway> {
        &self.jobmanager
    }

    /// Where its HTTP port listens (empty without one).
    pub fn http_address(&self) -> &str {
        self.http_address.get().map_or("", String::as_str)
    }

    /// Says where its HTTP port listens (told to the JobManager when it registers).
    pub fn set_http_address(&self, address: String) {
        let _ = self.http_address.set(address);
    }

    /// Its running tasks' metrics.
    pub fn running_tasks(&self) -> Vec<RunningTask> {
        let jobs = self.jobs.lock().expect("jobs lock");
        jobs.iter()
            .flat_map(|(execution, job)| {
                job.tasks.iter().map(move |(key, metrics, _)| RunningTask {
                    execution: execution.clone(),
                    key: *key,
                    metrics: metrics.clone(),
                })
            })
            .collect()
    }

    /// The measurements of every running task, for heartbeats.
    pub fn counters(&self) -> Vec<pb::TaskCounters> {
        self.running_tasks()
            .iter()
            .map(|task| task_counters(task_id(&task.execution, task.key), &task.metrics.sample()))
            .collect()
    }

    /// Starts the tasks `request` places here. `planned`: the job's graph when the caller
    /// planned it already (in-process); otherwise it is planned from the request's SQL.
    pub async fn deploy(
        self: &Arc<Self>,
        request: pb::DeployTasksRequest,
        planned: Option<Arc<JobGraph>>,
    ) -> Result<(), CallError> {
        let plan = DeploymentPlan::new(request, planned)?;
        let execution = plan.execution.clone();
        if self
            .jobs
            .lock()
            .expect("jobs lock")
            .contains_key(&execution)
        {
            return Err(CallError::Refused(format!(
                "job {execution} is already deployed here"
            )));
        }
        // Read before any task starts.
        let mut restores = plan.read_restores().await?;
        let (acks, acks_rx) = unbounded_channel();
        let (input_ended, input_ended_rx) = unbounded_channel();
        if plan.checkpointing.is_some() {
            tokio::spawn(self.clone().forward_acks(execution.clone(), acks_rx));
            tokio::spawn(
                self.clone()
                    .forward_input_ended(execution.clone(), input_ended_rx),
            );
        }
        self.channels.open_job(&execution.to_string());
        let mut wiring = TaskWiring::connect(&plan, &self.channels, &self.address)?;
        let (stop, stop_rx) = watch::channel(None);
        let (completed, _) = watch::channel(CompletedCheckpoint::default());
        let metrics = self.metrics.clone().unwrap_or_default();
        let (remaining, running) = watch::channel(plan.mine.len());
        let remaining = Arc::new(remaining);
        let mut tasks = Vec::new();
        let mut triggers = Vec::new();
        let graph = &plan.graph;
        for &key in &plan.mine {
            let task_metrics = Arc::new(TaskMetrics::new(metrics.clone()));
            let checkpointing = plan.checkpointing.as_ref().map(|storage| {
                let source = graph.vertices[key.vertex].source.is_some();
                TaskCheckpointing {
                    storage: storage.clone(),
                    mode: graph.config.checkpoints.mode,
                    triggers: source.then(|| {
                        let (tx, rx) = unbounded_channel();
                        triggers.push(tx);
                        rx
                    }),
                    acks: acks.clone(),
                    completed: completed.subscribe(),
                    input_ended: input_ended.clone(),
                    chains: SnapshotChains::new(graph.config.checkpoints.incremental),
                }
            });
            let (inputs, outputs) = wiring.take(key);
            let deployment = TaskDeployment {
                graph: graph.clone(),
                vertex: key.vertex,
                subtask: key.subtask,
                inputs,
                outputs,
                metrics: task_metrics.clone(),
                checkpointing,
                restore: restores.remove(&key),
                execution: execution.clone(),
            };
            let handle = self.start_task(deployment, key, stop_rx.clone(), remaining.clone());
            tasks.push((key, task_metrics, handle));
        }
        tracing::info!(job = %execution, tasks = tasks.len(), "deployed");
        let job = DeployedJob {
            stop,
            running,
            tasks,
            triggers,
            completed,
            newest_trigger: 0,
            inputs_ended: BTreeSet::new(),
        };
        self.jobs.lock().expect("jobs lock").insert(execution, job);
        Ok(())
    }

    /// Runs one task; once it ended, reports how, and forgets the job after its last task.
    fn start_task(
        self: &Arc<Self>,
        deployment: TaskDeployment,
        key: TaskKey,
        stop: watch::Receiver<Option<StopRequest>>,
        remaining: Arc<watch::Sender<usize>>,
    ) -> AbortHandle {
        let node = self.clone();
        let task_metrics = deployment.metrics.clone();
        let execution = deployment.execution.clone();
        let handle = tokio::spawn(async move {
            let name = deployment.name();
            // A bug that panics fails the task (and so restarts the job) instead of
            // leaving it hanging.
            let result = std::panic::AssertUnwindSafe(run_task(deployment, stop))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    let message = eddy_common::error::panic_message(&*panic, "a panic");
                    Err(EddyError::Internal(format!("the task panicked: {message}")))
                });
            if let Err(e) = &result {
                tracing::warn!(job = %execution, task = %name, error = %e, "task failed");
            }
            let ended = TaskEnded::of(&result);
            node.report(&execution, key, ended, &task_metrics).await;
            let mut last = false;
            remaining.send_modify(|left| {
                *left -= 1;
                last = *left == 0;
            });
            if last {
                node.forget(&execution);
            }
        });
        handle.abort_handle()
    }

    /// Sends this job's checkpoint acknowledgements to the JobManager.
    async fn forward_acks(
        self: Arc<Self>,
        execution: ExecutionId,
        mut acks: UnboundedReceiver<TaskAck>,
    ) {
        while let Some(ack) = acks.recv().await {
            let (error, file, size_bytes, crc32, previous, shared) = match ack.result {
                Ok(handle) => (
                    String::new(),
                    handle.file,
                    handle.size,
                    handle.crc32,
                    handle.previous.into_iter().map(state_file).collect(),
                    handle.shared.into_iter().map(state_file).collect(),
                ),
                Err(error) => (error, String::new(), 0, 0, Vec::new(), Vec::new()),
            };
            let message = pb::CheckpointAck {
                taskmanager_id: self.id.clone(),
                task: Some(task_id(&execution, TaskKey::new(ack.vertex, ack.subtask))),
                checkpoint: ack.checkpoint,
                error,
                file,
                size_bytes,
                crc32,
                alignment_ms: ack.alignment.as_millis() as u64,
                sync_ms: ack.sync_duration.as_millis() as u64,
                input_ended: ack.input_ended,
                previous,
                shared,
            };
            if let Err(error) = self.jobmanager.acknowledge_checkpoint(message).await {
                tracing::warn!(job = %execution, checkpoint = ack.checkpoint, %error, "cannot acknowledge a checkpoint");
            }
        }
    }

    /// Tells the JobManager which source tasks here have read all their input.
    async fn forward_input_ended(
        self: Arc<Self>,
        execution: ExecutionId,
        mut ended: UnboundedReceiver<TaskKey>,
    ) {
        while let Some(key) = ended.recv().await {
            if let Some(job) = self.jobs.lock().expect("jobs lock").get_mut(&execution) {
                job.inputs_ended.insert(key);
            }
            let report = pb::TaskStateReport {
                taskmanager_id: self.id.clone(),
                task: Some(task_id(&execution, key)),
                state: pb::TaskState::Running as i32,
                input_ended: true,
                ..Default::default()
            };
            self.send_report(&execution, report).await;
        }
    }

    /// The tasks it runs (not those that ended), as it registers with a JobManager: one
    /// that took the runs over may adopt them.
    pub fn held_tasks(&self) -> Vec<pb::HeldTask> {
        let jobs = self.jobs.lock().expect("jobs lock");
        let mut held = Vec::new();
        for (execution, job) in jobs.iter() {
            for (key, _, _) in job.tasks.iter().filter(|(_, _, h)| !h.is_finished()) {
                held.push(pb::HeldTask {
                    task: Some(task_id(execution, *key)),
                    input_ended: job.inputs_ended.contains(key),
                    newest_checkpoint: job.newest_trigger,
                });
            }
        }
        held
    }

    /// Starts a checkpoint at the job's source tasks here (once per checkpoint).
    pub fn trigger(&self, execution: &ExecutionId, barrier: Barrier) -> Result<(), CallError> {
        let mut jobs = self.jobs.lock().expect("jobs lock");
        let job = jobs
            .get_mut(execution)
            .ok_or_else(|| CallError::NotFound(format!("job {execution} does not run here")))?;
        if barrier.checkpoint <= job.newest_trigger {
            tracing::info!(job = %execution, checkpoint = barrier.checkpoint, newest = job.newest_trigger, "checkpoint triggered here already; the trigger is dropped");
            return Ok(());
        }
        job.newest_trigger = barrier.checkpoint;
        for trigger in &job.triggers {
            // A source that has finished has dropped its receiver: nothing to trigger.
            let _ = trigger.send(barrier);
        }
        Ok(())
    }

    /// Tells the job's tasks here that a checkpoint is complete: sinks commit what they
    /// prepared for it (and for earlier ones), and after a final checkpoint sources end.
    pub fn checkpoint_complete(&self, execution: &ExecutionId, notice: CompletedCheckpoint) {
        // The window two-phase-commit sinks must survive: complete, not yet committed.
        eddy_common::failpoint::crash_if("taskmanager.before-commit", notice.checkpoint);
        if let Some(job) = self.jobs.lock().expect("jobs lock").get(execution) {
            job.completed.send_if_modified(|current| {
                let newer = notice.checkpoint > current.checkpoint;
                if newer {
                    *current = notice;
                }
                newer
            });
        }
    }

    /// Forgets a job whose tasks all ended, and (once) its channels; a cancel forgot them
    /// already.
    fn forget(&self, execution: &ExecutionId) {
        if self
            .jobs
            .lock()
            .expect("jobs lock")
            .remove(execution)
            .is_some()
        {
            self.channels.close_job(&execution.to_string());
        }
    }

    /// Stops every task of a job here. Cancelled, each ends at its next step, its sink
    /// rolling back what no completed checkpoint covers and its channels telling the tasks
    /// downstream (here or on other TaskManagers) that it was cancelled, so that none of
    /// them takes the end for a finished input; tasks still running after
    /// [`CANCEL_TIMEOUT`] are aborted where they are and reported cancelled. Drained,
    /// sources stop and the tasks end once what was read is written.
    pub async fn stop(&self, execution: &ExecutionId, request: StopRequest) {
        if request == StopRequest::Drain {
            if let Some(job) = self.jobs.lock().expect("jobs lock").get(execution) {
                let _ = job.stop.send(Some(StopRequest::Drain));
            }
            return;
        }
        let job = self.jobs.lock().expect("jobs lock").remove(execution);
        let Some(mut job) = job else { return };
        self.channels.close_job(&execution.to_string());
        let _ = job.stop.send(Some(StopRequest::Cancel));
        let ended = job.running.wait_for(|running| *running == 0);
        if tokio::time::timeout(CANCEL_TIMEOUT, ended).await.is_err() {
            tracing::warn!(job = %execution, timeout = ?CANCEL_TIMEOUT, "tasks did not end when cancelled; aborting them");
        }
        for (task, task_metrics, handle) in &job.tasks {
            if !handle.is_finished() {
                handle.abort();
                let ended = TaskEnded::of(&Ok(TaskEnd::Cancelled));
                self.report(execution, *task, ended, task_metrics).await;
            }
        }
        tracing::info!(job = %execution, "cancelled");
    }

    /// Cancels every job (on shutdown, or when the JobManager forgot this TaskManager).
    pub async fn cancel_all(&self) {
        let ids: Vec<ExecutionId> = self
            .jobs
            .lock()
            .expect("jobs lock")
            .keys()
            .cloned()
            .collect();
        for id in ids {
            self.stop(&id, StopRequest::Cancel).await;
        }
    }

    async fn report(
        &self,
        execution: &ExecutionId,
        key: TaskKey,
        ended: TaskEnded,
        metrics: &TaskMetrics,
    ) {
        let sample = metrics.sample();
        let report = pb::TaskStateReport {
            taskmanager_id: self.id.clone(),
            task: Some(task_id(execution, key)),
            state: ended.state as i32,
            error: ended.error,
            records_in: sample.records_in,
            records_out: sample.records_out,
            input_ended: false,
            consequential: ended.consequential,
        };
        self.send_report(execution, report).await;
    }

    async fn send_report(&self, execution: &ExecutionId, report: pb::TaskStateReport) {
        for attempt in 0..5u64 {
            match self.jobmanager.report_task_state(report.clone()).await {
                Ok(()) => return,
                Err(error) => {
                    tracing::warn!(job = %execution, %error, "cannot report a task state, retrying");
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

/// How a task ended, as its report says.
struct TaskEnded {
    state: pb::TaskState,
    /// Why it failed.
    error: String,
    /// It failed because a task it exchanges data with is gone.
    consequential: bool,
}

impl TaskEnded {
    /// The report of a task whose run returned `result`.
    fn of(result: &Result<TaskEnd, EddyError>) -> TaskEnded {
        match result {
            Ok(end) => TaskEnded {
                state: match end {
                    TaskEnd::Finished => pb::TaskState::Finished,
                    TaskEnd::Stopped => pb::TaskState::Stopped,
                    TaskEnd::Cancelled => pb::TaskState::Cancelled,
                },
                error: String::new(),
                consequential: false,
            },
            Err(e) => TaskEnded {
                state: pb::TaskState::Failed,
                error: e.to_string(),
                consequential: e.is_consequential(),
            },
        }
    }
}

/// A task as messages name it.
pub fn task_id(execution: &ExecutionId, key: TaskKey) -> pb::TaskId {
    pb::TaskId {
        execution_id: execution.to_string(),
        vertex: key.vertex as u32,
        subtask: key.subtask as u32,
    }
}

#[cfg(test)]
mod tests;
