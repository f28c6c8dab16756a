//! The JobManager of a cluster of TaskManager daemons: keeps the registered TaskManagers
//! and their slots, queues jobs until enough slots are free, deploys them, follows their
//! tasks' states, coordinates their checkpoints, and restarts a failed job from its latest
//! checkpoint. Every deployment of a job is an attempt with its own execution id
//! (`{job}.{attempt}`): reports from an earlier attempt are fenced off.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eddy_common::EddyError;
use eddy_common::checkpoint::{
    CheckpointMetadata, CheckpointStorage, RestartPoint, StateFile, StateHandle, Unreadable,
};
use eddy_common::plan::{JobGraph, plan_job};
use eddy_common::sql::compile;
use eddy_common::storage::resolve;
use eddy_proto::v1 as pb;
use eddy_proto::v1::task_executor_client::TaskExecutorClient;
use tokio::sync::oneshot;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::coordinator::{AckOutcome, Acknowledgement, CheckpointCoordinator};
use crate::scheduler::spread_slots;
use crate::store::{JobStore, StoredJob};

/// How the JobManager runs.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// How often TaskManagers heartbeat.
    pub heartbeat_interval: Duration,
    /// Silence after which a TaskManager is considered lost.
    pub heartbeat_timeout: Duration,
    /// Where checkpoints go unless a job says otherwise.
    pub checkpoint_root: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            heartbeat_interval: Duration::from_millis(500),
            heartbeat_timeout: Duration::from_secs(3),
            checkpoint_root: "./eddy-data/checkpoints".into(),
        }
    }
}

struct TaskManagerRecord {
    address: String,
    slots: usize,
    used: usize,
    last_seen: Instant,
    client: TaskExecutorClient<Channel>,
}

struct TaskRecord {
    taskmanager: String,
    state: pb::TaskState,
    records_in: u64,
    records_out: u64,
    /// A source task that has read all its input.
    input_ended: bool,
}

struct JobRecord {
    name: String,
    sql: String,
    options: HashMap<String, String>,
    graph: Arc<JobGraph>,
    state: pb::JobState,
    reason: String,
    submitted_at_ms: i64,
    started_at_ms: i64,
    /// The current deployment's number.
    attempt: u32,
    restarts: u32,
    tasks: BTreeMap<(usize, usize), TaskRecord>,
    /// Where the job's checkpoints go, if it checkpoints.
    storage: Option<(String, CheckpointStorage)>,
    coordinator: Option<CheckpointCoordinator>,
    /// Checkpoints of earlier attempts, for the history.
    history: Vec<pb::CheckpointInfo>,
    next_checkpoint: u64,
    restore_from: u64,
    /// A savepoint or checkpoint directory the job started from.
    restore_path: Option<String>,
    savepoint: Option<SavepointRequest>,
    /// A stop-with-savepoint's checkpoint completed: no later checkpoint may be taken
    /// (its sinks would commit rows that resuming from the savepoint writes again).
    stopping: bool,
}

impl JobRecord {
    fn execution_id(&self, job_id: &str) -> String {
        format!("{job_id}.{}", self.attempt)
    }

    fn history(&self) -> Vec<pb::CheckpointInfo> {
        let mut all = self.history.clone();
        if let Some(c) = &self.coordinator {
            all.extend(c.history());
        }
        all
    }
}

#[derive(Default)]
struct State {
    taskmanagers: BTreeMap<String, TaskManagerRecord>,
    jobs: HashMap<String, JobRecord>,
    order: Vec<String>,
}

/// The cluster's JobManager state, shared by its services.
pub struct Cluster {
    config: ClusterConfig,
    state: Mutex<State>,
    next_job: AtomicU64,
    store: Option<JobStore>,
    /// Numbers the job records in the order their states changed (see
    /// [`StoredJob::revision`]).
    revisions: AtomicU64,
    /// Held shared while checkpoint metadata is written, exclusively by a restart before
    /// it picks the checkpoint to restore: a checkpoint whose metadata is being written is
    /// either seen complete or not written at all.
    commits: tokio::sync::RwLock<()>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Splits an execution id `{job}.{attempt}`.
fn parse_execution(execution: &str) -> Option<(&str, u32)> {
    let (job, attempt) = execution.rsplit_once('.')?;
    Some((job, attempt.parse().ok()?))
}

/// A command to send to a TaskManager once the state lock is released.
enum Command {
    Deploy(
        String,
        TaskExecutorClient<Channel>,
        Box<pb::DeployTasksRequest>,
    ),
    Cancel(TaskExecutorClient<Channel>, String),
    Trigger(TaskExecutorClient<Channel>, pb::TriggerCheckpointRequest),
    Notify(
        TaskExecutorClient<Channel>,
        pb::NotifyCheckpointCompleteRequest,
    ),
    Commit(String, u32, CheckpointStorage, CheckpointMetadata, usize),
    Restart(String, u32, Duration),
    Persist(StoredJob),
    Savepoint(
        String,
        CheckpointStorage,
        CheckpointMetadata,
        SavepointRequest,
    ),
    /// Commands carried out one after the other.
    InOrder(Vec<Command>),
    /// Records a new attempt in the job store, then deploys it (`execution`: its id): a
    /// restarted JobManager must never start an attempt number that already ran.
    Start {
        execution: String,
        record: Option<StoredJob>,
        deploys: Vec<Command>,
    },
}

/// A savepoint asked for: the checkpoint that serves it once triggered, whether to stop the
/// job after, and who waits for its path.
struct SavepointRequest {
    checkpoint: Option<u64>,
    stop: bool,
    replies: Vec<oneshot::Sender<Result<String, String>>>,
}

impl Cluster {
    /// An empty cluster; with a job store, jobs survive a restart of the JobManager.
    pub fn new(config: ClusterConfig, store: Option<JobStore>) -> Arc<Self> {
        Arc::new(Cluster {
            config,
            state: Mutex::new(State::default()),
            next_job: AtomicU64::new(1),
            store,
            revisions: AtomicU64::new(1),
            commits: tokio::sync::RwLock::new(()),
        })
    }

    /// Reloads the jobs of an earlier JobManager from the job store: each unfinished job
    /// restarts from its newest valid checkpoint once TaskManagers have registered (a job
    /// without checkpoints cannot resume exactly, and fails).
    pub async fn recover(self: &Arc<Self>) -> eddy_common::Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        for stored in store.load_all().await? {
            if matches!(stored.state.as_str(), "FINISHED" | "CANCELLED" | "FAILED") {
                continue;
            }
            let job_id = stored.job_id.clone();
            let record = match self.record(
                stored.sql.clone(),
                stored.options.clone(),
                stored.restore_path.clone(),
                &job_id,
            ) {
                Ok(record) => record,
                Err(status) => {
                    tracing::warn!(job = %job_id, error = %status.message(), "a stored job no longer plans; skipped");
                    continue;
                }
            };
            let checkpointing = record.storage.is_some();
            let mut record = JobRecord {
                attempt: stored.attempt,
                restarts: stored.restarts,
                submitted_at_ms: stored.submitted_at_ms,
                ..record
            };
            let commands = if checkpointing {
                record.state = pb::JobState::Restarting;
                record.reason = "resuming after a JobManager restart".into();
                vec![Command::Restart(
                    job_id.clone(),
                    record.attempt,
                    Duration::ZERO,
                )]
            } else {
                record.state = pb::JobState::Failed;
                record.reason = "the JobManager restarted and the job keeps no checkpoints".into();
                vec![Command::Persist(self.stored(&job_id, &record))]
            };
            tracing::info!(job = %job_id, attempt = record.attempt, state = ?record.state, "job recovered from the job store");
            {
                let mut state = self.lock();
                state.jobs.insert(job_id.clone(), record);
                state.order.push(job_id);
            }
            self.send(commands);
        }
        Ok(())
    }

    fn stored(&self, job_id: &str, job: &JobRecord) -> StoredJob {
        StoredJob {
            job_id: job_id.to_string(),
            sql: job.sql.clone(),
            options: job.options.clone(),
            state: job
                .state
                .as_str_name()
                .trim_start_matches("JOB_STATE_")
                .to_string(),
            attempt: job.attempt,
            restarts: job.restarts,
            submitted_at_ms: job.submitted_at_ms,
            restore_path: job.restore_path.clone(),
            revision: self.revisions.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A new job's record: planned, with its checkpoint storage.
    fn record(
        &self,
        sql: String,
        options: HashMap<String, String>,
        restore_path: Option<String>,
        job_id: &str,
    ) -> Result<JobRecord, Status> {
        let overrides: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let compiled = compile(&sql, &overrides).map_err(invalid)?;
        let graph = plan_job(&compiled).map_err(invalid)?;
        let storage = match graph.config.checkpoints.interval {
            None => None,
            Some(_) => {
                let root = graph
                    .config
                    .checkpoints
                    .directory
                    .clone()
                    .unwrap_or_else(|| self.config.checkpoint_root.clone());
                let location = resolve(&root, &[]).map_err(invalid)?;
                Some((root, CheckpointStorage::new(&location, job_id)))
            }
        };
        Ok(JobRecord {
            name: graph.config.name.clone(),
            sql,
            options,
            graph: Arc::new(graph),
            state: pb::JobState::Created,
            reason: "waiting for slots".into(),
            submitted_at_ms: now_ms(),
            started_at_ms: 0,
            attempt: 1,
            restarts: 0,
            tasks: BTreeMap::new(),
            storage,
            coordinator: None,
            history: Vec::new(),
            next_checkpoint: 1,
            restore_from: 0,
            restore_path,
            savepoint: None,
            stopping: false,
        })
    }

    /// The command that persists a job's record (its state changed), with a job store.
    fn persisted(&self, job_id: &str, job: &JobRecord) -> Option<Command> {
        self.store
            .as_ref()
            .map(|_| Command::Persist(self.stored(job_id, job)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("cluster state lock")
    }

    /// Plans and queues a job.
    pub fn submit(
        self: &Arc<Self>,
        sql: String,
        options: HashMap<String, String>,
        restore_path: Option<String>,
    ) -> Result<String, Status> {
        let job_id = format!(
            "{:08x}{:08x}",
            (now_ms() as u64) & 0xffff_ffff,
            self.next_job.fetch_add(1, Ordering::Relaxed)
        );
        let record = self.record(sql, options, restore_path, &job_id)?;
        let persist = self.stored(&job_id, &record);
        {
            let mut state = self.lock();
            state.jobs.insert(job_id.clone(), record);
            state.order.push(job_id.clone());
        }
        tracing::info!(job = %job_id, "job submitted");
        if self.store.is_some() {
            self.send(vec![Command::Persist(persist)]);
        }
        self.schedule();
        Ok(job_id)
    }

    /// Starts every queued job that fits into the free slots, in submission order.
    fn schedule(self: &Arc<Self>) {
        let mut commands = Vec::new();
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            for job_id in state.order.clone() {
                let job = state.jobs.get_mut(&job_id).expect("ordered job exists");
                if job.state != pb::JobState::Created {
                    continue;
                }
                let needed = job.graph.slots_needed();
                let total: usize = state.taskmanagers.values().map(|t| t.slots).sum();
                let ids: Vec<String> = state.taskmanagers.keys().cloned().collect();
                let mut free: Vec<usize> = state
                    .taskmanagers
                    .values()
                    .map(|t| t.slots - t.used)
                    .collect();
                let Some(slots) = spread_slots(&mut free, needed) else {
                    job.reason = format!(
                        "waiting for slots: needs {needed}, {} of {total} free on {} TaskManagers",
                        free.iter().sum::<usize>(),
                        state.taskmanagers.len()
                    );
                    continue;
                };
                let slots: Vec<String> = slots.into_iter().map(|i| ids[i].clone()).collect();
                for id in &slots {
                    if let Some(tm) = state.taskmanagers.get_mut(id) {
                        tm.used += 1;
                    }
                }
                let execution = job.execution_id(&job_id);
                let mut locations = Vec::new();
                let mut per_tm: BTreeMap<String, Vec<pb::TaskId>> = BTreeMap::new();
                job.tasks.clear();
                for vertex in &job.graph.vertices {
                    for (subtask, tm) in slots.iter().take(vertex.parallelism).enumerate() {
                        let task = pb::TaskId {
                            job_id: execution.clone(),
                            vertex: vertex.id as u32,
                            subtask: subtask as u32,
                        };
                        locations.push(pb::TaskLocation {
                            task: Some(task.clone()),
                            address: state.taskmanagers[tm].address.clone(),
                        });
                        per_tm.entry(tm.clone()).or_default().push(task);
                        job.tasks.insert(
                            (vertex.id, subtask),
                            TaskRecord {
                                taskmanager: tm.clone(),
                                state: pb::TaskState::Scheduled,
                                records_in: 0,
                                records_out: 0,
                                input_ended: false,
                            },
                        );
                    }
                }
                let vertex_parallelism: Vec<usize> =
                    job.graph.vertices.iter().map(|v| v.parallelism).collect();
                let (checkpoint_root, checkpoint_job) = match &job.storage {
                    Some((root, _)) => (root.clone(), job_id.clone()),
                    None => (String::new(), String::new()),
                };
                let mut deploys = Vec::new();
                for (tm, tasks) in per_tm {
                    deploys.push(Command::Deploy(
                        tm.clone(),
                        state.taskmanagers[&tm].client.clone(),
                        Box::new(pb::DeployTasksRequest {
                            job_id: execution.clone(),
                            sql: job.sql.clone(),
                            options: job.options.clone(),
                            vertex_parallelism: vertex_parallelism
                                .iter()
                                .map(|p| *p as u32)
                                .collect(),
                            tasks,
                            locations: locations.clone(),
                            checkpoint_root: checkpoint_root.clone(),
                            checkpoint_job: checkpoint_job.clone(),
                            restore_checkpoint: job.restore_from,
                            restore_path: match job.restore_from {
                                0 => job.restore_path.clone().unwrap_or_default(),
                                _ => String::new(),
                            },
                        }),
                    ));
                }
                job.coordinator = CheckpointCoordinator::new(
                    &job.graph.config.checkpoints,
                    job.tasks.keys().copied().collect::<BTreeSet<_>>(),
                    vertex_parallelism,
                    job.next_checkpoint,
                );
                job.state = pb::JobState::Running;
                job.reason = String::new();
                job.started_at_ms = now_ms();
                commands.push(Command::Start {
                    execution,
                    record: self.store.as_ref().map(|_| self.stored(&job_id, job)),
                    deploys,
                });
                tracing::info!(job = %job_id, attempt = job.attempt, slots = needed, restored_from = job.restore_from, "job deployed");
            }
        }
        self.send(commands);
    }

    fn send(self: &Arc<Self>, commands: Vec<Command>) {
        for command in commands {
            let cluster = self.clone();
            tokio::spawn(async move { cluster.execute(command).await });
        }
    }

    fn execute(self: Arc<Self>, command: Command) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(self.carry_out(command))
    }

    async fn carry_out(self: Arc<Self>, command: Command) {
        match command {
            Command::InOrder(commands) => {
                for command in commands {
                    self.clone().execute(command).await;
                }
            }
            Command::Start {
                execution,
                record,
                deploys,
            } => {
                if let (Some(store), Some(record)) = (&self.store, record)
                    && let Err(error) = store.save(&record).await
                {
                    let reason = format!("cannot record the attempt in the job store: {error}");
                    self.execution_failed(&execution, reason);
                    return;
                }
                self.send(deploys);
            }
            Command::Deploy(taskmanager, mut client, request) => {
                let execution = request.job_id.clone();
                if let Err(status) = client.deploy_tasks(*request).await {
                    if status.code() == tonic::Code::Unavailable {
                        // It is gone: forget it now rather than place the restart there.
                        tracing::warn!(%taskmanager, "taskmanager unreachable; forgetting it");
                        self.lock().taskmanagers.remove(&taskmanager);
                    }
                    let reason = format!("deploying to {taskmanager} failed: {}", status.message());
                    self.execution_failed(&execution, reason);
                }
            }
            Command::Cancel(mut client, execution) => {
                let request = pb::CancelTasksRequest {
                    job_id: execution.clone(),
                };
                if let Err(status) = client.cancel_tasks(request).await {
                    tracing::debug!(job = %execution, %status, "cancelling tasks failed");
                }
            }
            Command::Trigger(mut client, request) => {
                let (execution, checkpoint) = (request.job_id.clone(), request.checkpoint);
                if let Err(status) = client.trigger_checkpoint(request).await {
                    tracing::warn!(job = %execution, checkpoint, %status, "triggering a checkpoint failed");
                    self.trigger_failed(&execution, checkpoint, status.message());
                }
            }
            Command::Notify(mut client, request) => {
                if let Err(status) = client.notify_checkpoint_complete(request).await {
                    tracing::debug!(%status, "notifying a checkpoint failed");
                }
            }
            Command::Commit(job_id, attempt, storage, metadata, retained) => {
                let id = metadata.checkpoint;
                let writing = self.commits.read().await;
                let current = self.lock().jobs.get(&job_id).is_some_and(|job| {
                    job.attempt == attempt && job.state == pb::JobState::Running
                });
                if !current {
                    // The run ended meanwhile; its restart may already have chosen an
                    // earlier checkpoint, so this one must not become complete.
                    return;
                }
                // Every task acknowledged; the checkpoint is not complete yet.
                eddy_common::failpoint::crash_if("jobmanager.before-metadata", id);
                let written = storage.commit(&metadata).await;
                drop(writing);
                match written {
                    Ok(()) => {
                        self.committed(&job_id, attempt, &metadata);
                        if let Err(error) = storage.retain(retained, id).await {
                            tracing::warn!(job = %job_id, %error, "deleting old checkpoints failed");
                        }
                    }
                    Err(error) => self.commit_failed(&job_id, attempt, id, error.to_string()),
                }
            }
            Command::Savepoint(job_id, storage, metadata, request) => {
                let result = storage
                    .save_as_savepoint(&metadata)
                    .await
                    .map_err(|e| e.to_string());
                match &result {
                    Ok(path) => tracing::info!(job = %job_id, %path, "savepoint complete"),
                    Err(error) => {
                        tracing::warn!(job = %job_id, %error, "savepoint failed");
                        if let Some(job) = self.lock().jobs.get_mut(&job_id) {
                            job.stopping = false;
                        }
                    }
                }
                if request.stop && result.is_ok() {
                    let _ = self.cancel(&job_id);
                }
                for reply in request.replies {
                    let _ = reply.send(result.clone());
                }
            }
            Command::Persist(job) => {
                if let Some(store) = &self.store
                    && let Err(error) = store.save(&job).await
                {
                    tracing::warn!(job = %job.job_id, %error, "cannot write the job record");
                }
            }
            Command::Restart(job_id, attempt, backoff) => {
                // While waiting, find TaskManagers that are gone, so that the restart is
                // not placed on one of them (and lost) before its heartbeats time out.
                let ((), gone) = tokio::join!(
                    tokio::time::sleep(backoff),
                    self.refusing_taskmanagers(backoff)
                );
                self.lose_taskmanagers(gone, "its port refuses connections");
                let (storage, unreadable) = {
                    let state = self.lock();
                    match state.jobs.get(&job_id) {
                        Some(job)
                            if job.state == pb::JobState::Restarting && job.attempt == attempt =>
                        {
                            let storage = job.storage.as_ref().map(|(_, s)| s.clone());
                            let unreadable = match job.graph.commits_at_checkpoints() {
                                true => Unreadable::Fail,
                                false => Unreadable::FallBack,
                            };
                            (storage, unreadable)
                        }
                        _ => return,
                    }
                };
                // Metadata being written now is waited for, so that it counts.
                drop(self.commits.write().await);
                let point = match &storage {
                    Some(storage) => storage.restart_point(unreadable).await,
                    None => Ok(RestartPoint {
                        checkpoint: None,
                        newest_id: 0,
                    }),
                };
                let point = match point {
                    Ok(point) => point,
                    Err(error @ EddyError::UnrestorableCheckpoint { .. }) => {
                        self.fail_for_good(&job_id, attempt, error.to_string());
                        return;
                    }
                    Err(error) => {
                        // Restarting from an older state would replay what sinks
                        // committed: try again later.
                        tracing::warn!(job = %job_id, %error, "cannot list checkpoints; retrying the restart");
                        let retry = backoff.max(Duration::from_secs(1));
                        self.send(vec![Command::Restart(job_id, attempt, retry)]);
                        return;
                    }
                };
                {
                    let mut state = self.lock();
                    let Some(job) = state.jobs.get_mut(&job_id) else {
                        return;
                    };
                    if job.state != pb::JobState::Restarting || job.attempt != attempt {
                        return;
                    }
                    job.attempt += 1;
                    job.restore_from = point.checkpoint.map_or(0, |m| m.checkpoint);
                    // Checkpoint ids only grow, also across JobManager restarts (which do
                    // not keep the counter): the newest checkpoint is always the latest,
                    // and no id an earlier attempt used (even for a checkpoint that never
                    // completed) is taken again.
                    job.next_checkpoint = job
                        .next_checkpoint
                        .max(job.restore_from + 1)
                        .max(point.newest_id + 1);
                    job.state = pb::JobState::Created;
                    job.reason = format!("restarting from checkpoint {}", job.restore_from);
                    tracing::info!(job = %job_id, attempt = job.attempt, checkpoint = job.restore_from, "restarting");
                }
                self.schedule();
            }
        }
    }

    /// Ends the current run of a job: frees its slots and cancels its tasks that may still
    /// run. The caller sets the job's new state.
    fn end_run(state: &mut State, job_id: &str, cancel_tasks: bool) -> Vec<Command> {
        let Some(job) = state.jobs.get_mut(job_id) else {
            return Vec::new();
        };
        let mut commands = Vec::new();
        if !matches!(job.state, pb::JobState::Running | pb::JobState::Cancelling) {
            return commands;
        }
        let execution = job.execution_id(job_id);
        if let Some(coordinator) = job.coordinator.take() {
            job.next_checkpoint = coordinator.next_id();
            job.history.extend(coordinator.history());
        }
        let mut involved: Vec<String> = job.tasks.values().map(|t| t.taskmanager.clone()).collect();
        for tm in &involved {
            if let Some(record) = state.taskmanagers.get_mut(tm) {
                record.used = record.used.saturating_sub(1);
            }
        }
        involved.sort();
        involved.dedup();
        if cancel_tasks {
            for tm in involved {
                if let Some(record) = state.taskmanagers.get(&tm) {
                    commands.push(Command::Cancel(record.client.clone(), execution.clone()));
                }
            }
        }
        commands
    }

    /// A run of a job failed: restart it from its latest checkpoint, or fail it for good.
    fn fail(self: &Arc<Self>, job_id: &str, reason: String) {
        let commands = {
            let mut state = self.lock();
            let Some(job) = state.jobs.get(job_id) else {
                return;
            };
            if !matches!(job.state, pb::JobState::Running | pb::JobState::Created) {
                return;
            }
            let strategy = job.graph.config.restart.clone();
            let checkpointing = job.storage.is_some();
            let restarts = job.restarts;
            let mut commands = Self::end_run(&mut state, job_id, true);
            let job = state.jobs.get_mut(job_id).expect("job exists");
            if checkpointing && strategy.enabled && restarts < strategy.max_attempts {
                job.restarts += 1;
                let backoff = strategy.backoff(job.restarts);
                job.state = pb::JobState::Restarting;
                job.reason = format!("{reason}; restart {} in {backoff:?}", job.restarts);
                tracing::warn!(job = %job_id, %reason, restart = job.restarts, "job failed, restarting");
                commands.push(Command::Restart(job_id.to_string(), job.attempt, backoff));
                commands.extend(self.persisted(job_id, job));
            } else {
                job.state = pb::JobState::Failed;
                job.reason = reason.clone();
                tracing::warn!(job = %job_id, %reason, "job failed");
                commands.extend(self.persisted(job_id, job));
            }
            commands
        };
        self.send(commands);
        self.schedule();
    }

    /// Fails a restarting job without a further restart (`attempt`: the one that ended).
    fn fail_for_good(self: &Arc<Self>, job_id: &str, attempt: u32, reason: String) {
        let commands = {
            let mut state = self.lock();
            let Some(job) = state.jobs.get_mut(job_id) else {
                return;
            };
            if job.state != pb::JobState::Restarting || job.attempt != attempt {
                return;
            }
            tracing::error!(job = %job_id, %reason, "job failed; it cannot restart");
            job.state = pb::JobState::Failed;
            job.reason = reason;
            self.persisted(job_id, job)
        };
        self.send(commands.into_iter().collect());
    }

    /// A failure reported for an execution: applies only to the job's current attempt.
    fn execution_failed(self: &Arc<Self>, execution: &str, reason: String) {
        let Some((job_id, attempt)) = parse_execution(execution) else {
            return;
        };
        let current = self.lock().jobs.get(job_id).map(|j| j.attempt);
        if current == Some(attempt) {
            self.fail(job_id, reason);
        }
    }

    /// Asks a running job for a savepoint; the path is sent to `reply` once it is complete.
    /// Returns how long to wait for it.
    fn request_savepoint(
        &self,
        job_id: &str,
        stop: bool,
        reply: oneshot::Sender<Result<String, String>>,
    ) -> Result<Duration, Status> {
        let mut state = self.lock();
        let job = state
            .jobs
            .get_mut(job_id)
            .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
        if job.state != pb::JobState::Running {
            return Err(Status::failed_precondition(format!(
                "job {job_id} is not running"
            )));
        }
        let Some(coordinator) = job.coordinator.as_mut() else {
            return Err(Status::failed_precondition(
                "the job does not checkpoint; savepoints need execution.checkpointing.interval",
            ));
        };
        coordinator.request_now();
        let request = job.savepoint.get_or_insert_with(|| SavepointRequest {
            checkpoint: None,
            stop,
            replies: Vec::new(),
        });
        request.stop |= stop;
        request.replies.push(reply);
        Ok(job
            .graph
            .config
            .checkpoints
            .timeout
            .min(Duration::from_secs(120)))
    }

    /// Cancels a job.
    pub fn cancel(self: &Arc<Self>, job_id: &str) -> Result<(), Status> {
        let commands = {
            let mut state = self.lock();
            let job = state
                .jobs
                .get(job_id)
                .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
            if !matches!(
                job.state,
                pb::JobState::Created | pb::JobState::Running | pb::JobState::Restarting
            ) {
                return Err(Status::failed_precondition(format!(
                    "job {job_id} is {}",
                    job.state.as_str_name()
                )));
            }
            let mut commands = Self::end_run(&mut state, job_id, true);
            let job = state.jobs.get_mut(job_id).expect("job exists");
            job.state = pb::JobState::Cancelled;
            job.reason = "cancelled on request".into();
            commands.extend(self.persisted(job_id, job));
            commands
        };
        tracing::info!(job = %job_id, "job cancelled");
        self.send(commands);
        self.schedule();
        Ok(())
    }

    /// Registers (or re-registers) a TaskManager.
    pub fn register(
        self: &Arc<Self>,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<(), Status> {
        if request.taskmanager_id.is_empty() || request.slots == 0 {
            return Err(Status::invalid_argument(
                "a TaskManager needs an id and at least one slot",
            ));
        }
        let endpoint = Channel::from_shared(request.address.clone())
            .map_err(|e| {
                Status::invalid_argument(format!("bad address '{}': {e}", request.address))
            })?
            .connect_timeout(Duration::from_secs(3));
        let client = TaskExecutorClient::new(endpoint.connect_lazy());
        let lost = {
            let mut state = self.lock();
            let previous = state.taskmanagers.insert(
                request.taskmanager_id.clone(),
                TaskManagerRecord {
                    address: request.address.clone(),
                    slots: request.slots as usize,
                    used: 0,
                    last_seen: Instant::now(),
                    client,
                },
            );
            // A TaskManager registering again has lost whatever it ran.
            match previous {
                Some(_) => jobs_on(&state, &request.taskmanager_id),
                None => Vec::new(),
            }
        };
        tracing::info!(id = %request.taskmanager_id, address = %request.address, slots = request.slots, "taskmanager registered");
        for job_id in lost {
            self.fail(
                &job_id,
                format!("TaskManager {} restarted", request.taskmanager_id),
            );
        }
        self.schedule();
        Ok(())
    }

    /// Takes a heartbeat; unknown TaskManagers get NOT_FOUND (and register again).
    pub fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), Status> {
        let mut state = self.lock();
        let tm = state
            .taskmanagers
            .get_mut(&request.taskmanager_id)
            .ok_or_else(|| unknown_taskmanager(&request.taskmanager_id))?;
        tm.last_seen = Instant::now();
        for counters in request.tasks {
            let Some(task) = counters.task else { continue };
            let Some((job_id, attempt)) = parse_execution(&task.job_id) else {
                continue;
            };
            if let Some(job) = state.jobs.get_mut(job_id)
                && job.attempt == attempt
                && let Some(record) = job
                    .tasks
                    .get_mut(&(task.vertex as usize, task.subtask as usize))
                && record.taskmanager == request.taskmanager_id
            {
                if record.state == pb::TaskState::Scheduled {
                    record.state = pb::TaskState::Running;
                }
                record.records_in = counters.records_in;
                record.records_out = counters.records_out;
            }
        }
        Ok(())
    }

    /// Rejects calls from TaskManagers that have not registered.
    fn known_taskmanager(&self, id: &str) -> Result<(), Status> {
        match self.lock().taskmanagers.contains_key(id) {
            true => Ok(()),
            false => Err(unknown_taskmanager(id)),
        }
    }

    /// Takes a task's new state.
    pub fn report(self: &Arc<Self>, report: pb::TaskStateReport) -> Result<(), Status> {
        self.known_taskmanager(&report.taskmanager_id)?;
        let task = report
            .task
            .ok_or_else(|| Status::invalid_argument("a report without a task"))?;
        let reported = pb::TaskState::try_from(report.state).map_err(|_| {
            Status::invalid_argument(format!("unknown task state {}", report.state))
        })?;
        let (job_id, attempt) = parse_execution(&task.job_id).ok_or_else(|| {
            Status::invalid_argument(format!("bad execution id '{}'", task.job_id))
        })?;
        let key = (task.vertex as usize, task.subtask as usize);
        let (failed, finished, final_checkpoint) = {
            let mut state = self.lock();
            let job = state
                .jobs
                .get_mut(job_id)
                .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
            if job.attempt != attempt {
                tracing::info!(job = %job_id, attempt, current = job.attempt, "fenced a report from an earlier attempt");
                return Ok(());
            }
            let record = job
                .tasks
                .get_mut(&key)
                .filter(|r| r.taskmanager == report.taskmanager_id)
                .ok_or_else(|| {
                    Status::permission_denied("that task does not run on that TaskManager")
                })?;
            record.state = reported;
            record.records_in = report.records_in;
            record.records_out = report.records_out;
            record.input_ended |= report.input_ended;
            let running = job.state == pb::JobState::Running;
            let graph = &job.graph;
            let sources_ended = job
                .tasks
                .iter()
                .filter(|((vertex, _), _)| graph.vertices[*vertex].source.is_some())
                .all(|(_, t)| t.input_ended);
            let mut final_checkpoint = false;
            if running
                && report.input_ended
                && sources_ended
                && let Some(coordinator) = job.coordinator.as_mut()
            {
                // The final checkpoint need not wait for the interval.
                coordinator.request_now();
                final_checkpoint = true;
            }
            if running
                && reported == pb::TaskState::Finished
                && let Some(coordinator) = job.coordinator.as_mut()
            {
                coordinator.task_finished();
            }
            // A task the JobManager did not ask to cancel was stopped by its TaskManager
            // (shutting down), or by a stopped or cancelled task upstream: the job cannot
            // go on without it.
            let failed = running
                && matches!(
                    reported,
                    pb::TaskState::Failed | pb::TaskState::Cancelled | pb::TaskState::Stopped
                );
            let finished = running
                && job
                    .tasks
                    .values()
                    .all(|t| t.state == pb::TaskState::Finished);
            (failed, finished, final_checkpoint)
        };
        if final_checkpoint {
            // Nor for the next tick.
            self.tick_checkpoints();
        }
        if failed {
            let reason = match report.error.as_str() {
                "" => format!(
                    "task v{}[{}] was stopped by TaskManager {}",
                    key.0, key.1, report.taskmanager_id
                ),
                error => format!("task v{}[{}] failed: {error}", key.0, key.1),
            };
            self.fail(job_id, reason);
        } else if finished {
            let commands = {
                let mut state = self.lock();
                let mut commands = Self::end_run(&mut state, job_id, false);
                if let Some(job) = state.jobs.get_mut(job_id) {
                    job.state = pb::JobState::Finished;
                    commands.extend(self.persisted(job_id, job));
                }
                commands
            };
            tracing::info!(job = %job_id, "job finished");
            self.send(commands);
            self.schedule();
        }
        Ok(())
    }

    /// Takes a task's checkpoint acknowledgement.
    pub fn acknowledge(self: &Arc<Self>, ack: pb::CheckpointAck) -> Result<(), Status> {
        self.known_taskmanager(&ack.taskmanager_id)?;
        let task = ack
            .task
            .ok_or_else(|| Status::invalid_argument("an acknowledgement without a task"))?;
        let (job_id, attempt) = parse_execution(&task.job_id).ok_or_else(|| {
            Status::invalid_argument(format!("bad execution id '{}'", task.job_id))
        })?;
        let key = (task.vertex as usize, task.subtask as usize);
        let (outcome, commands) = {
            let mut state = self.lock();
            let Some(job) = state.jobs.get_mut(job_id) else {
                return Err(Status::not_found(format!("no job {job_id}")));
            };
            if job.attempt != attempt || job.state != pb::JobState::Running {
                return Ok(());
            }
            let Some(coordinator) = job.coordinator.as_mut() else {
                return Ok(());
            };
            let result = match ack.error.is_empty() {
                true => Ok(StateHandle {
                    vertex: key.0,
                    subtask: key.1,
                    file: ack.file,
                    size: ack.size_bytes,
                    crc32: ack.crc32,
                    previous: ack
                        .previous
                        .into_iter()
                        .map(|f| StateFile {
                            checkpoint: f.checkpoint,
                            file: f.file,
                            size: f.size_bytes,
                            crc32: f.crc32,
                        })
                        .collect(),
                }),
                false => Err(ack.error),
            };
            let outcome = coordinator.acknowledge(
                key,
                Acknowledgement {
                    checkpoint: ack.checkpoint,
                    result,
                    alignment: Duration::from_millis(ack.alignment_ms),
                    input_ended: ack.input_ended,
                },
            );
            let mut commands = Vec::new();
            if let AckOutcome::Complete(metadata) = &outcome {
                let (_, storage) = job
                    .storage
                    .clone()
                    .expect("a checkpointing job has storage");
                let retained = job.graph.config.checkpoints.retained;
                commands.push(Command::Commit(
                    job_id.to_string(),
                    attempt,
                    storage,
                    metadata.clone(),
                    retained,
                ));
            }
            (outcome, commands)
        };
        self.send(commands);
        if outcome == AckOutcome::Aborted(true) {
            self.fail(job_id, "too many failed checkpoints".into());
        }
        Ok(())
    }

    /// Aborts `checkpoint` of the run `execution` when a trigger of it was not delivered.
    fn trigger_failed(self: &Arc<Self>, execution: &str, checkpoint: u64, reason: &str) {
        let Some((job_id, attempt)) = parse_execution(execution) else {
            return;
        };
        let too_many = {
            let mut state = self.lock();
            let Some(job) = state.jobs.get_mut(job_id) else {
                return;
            };
            if job.attempt != attempt || job.state != pb::JobState::Running {
                return;
            }
            job.coordinator
                .as_mut()
                .is_some_and(|c| c.trigger_failed(checkpoint, reason))
        };
        if too_many {
            self.fail(job_id, "too many failed checkpoints".into());
        }
    }

    fn committed(self: &Arc<Self>, job_id: &str, attempt: u32, metadata: &CheckpointMetadata) {
        let checkpoint = metadata.checkpoint;
        // The window two-phase-commit sinks must survive: complete, but nobody told.
        eddy_common::failpoint::crash_if("jobmanager.before-notify", checkpoint);
        let commands = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let Some(job) = state.jobs.get_mut(job_id) else {
                return;
            };
            if job.attempt != attempt {
                return;
            }
            let info = job
                .coordinator
                .as_mut()
                .and_then(|c| c.committed(checkpoint))
                .unwrap_or_default();
            tracing::info!(
                job = %job_id,
                checkpoint,
                size = metadata.size(),
                full_size = metadata.full_size(),
                duration_ms = info.duration_ms,
                alignment_ms = info.alignment_ms,
                "checkpoint complete"
            );
            let execution = job.execution_id(job_id);
            let involved: BTreeSet<String> =
                job.tasks.values().map(|t| t.taskmanager.clone()).collect();
            let mut commands: Vec<Command> = involved
                .into_iter()
                .filter_map(|tm| state.taskmanagers.get(&tm))
                .map(|tm| {
                    Command::Notify(
                        tm.client.clone(),
                        pb::NotifyCheckpointCompleteRequest {
                            job_id: execution.clone(),
                            checkpoint,
                            end_of_input: metadata.end_of_input,
                        },
                    )
                })
                .collect();
            if job
                .savepoint
                .as_ref()
                .is_some_and(|s| s.checkpoint == Some(checkpoint))
                && let (Some(savepoint), Some((_, storage))) =
                    (job.savepoint.take(), job.storage.as_ref())
            {
                let stop = savepoint.stop;
                let save = Command::Savepoint(
                    job_id.to_string(),
                    storage.clone(),
                    metadata.clone(),
                    savepoint,
                );
                if stop {
                    // The sinks learn the checkpoint completed before the job is stopped,
                    // so what it covers is committed when the job ends; nothing after it
                    // is checkpointed.
                    job.stopping = true;
                    commands.push(save);
                    commands = vec![Command::InOrder(commands)];
                } else {
                    commands.push(save);
                }
            }
            commands
        };
        self.send(commands);
    }

    fn commit_failed(
        self: &Arc<Self>,
        job_id: &str,
        attempt: u32,
        checkpoint: u64,
        reason: String,
    ) {
        let must_fail = {
            let mut state = self.lock();
            match state.jobs.get_mut(job_id) {
                Some(job) if job.attempt == attempt => job
                    .coordinator
                    .as_mut()
                    .is_some_and(|c| c.commit_failed(checkpoint, &reason)),
                _ => false,
            }
        };
        tracing::warn!(job = %job_id, checkpoint, %reason, "writing checkpoint metadata failed");
        if must_fail {
            self.fail(
                job_id,
                format!("checkpoint {checkpoint} could not be committed: {reason}"),
            );
        }
    }

    /// Triggers due checkpoints and aborts timed-out ones; the daemon calls this often.
    pub fn tick_checkpoints(self: &Arc<Self>) {
        let now = Instant::now();
        let mut commands = Vec::new();
        let mut failing = Vec::new();
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            for (job_id, job) in state.jobs.iter_mut() {
                if job.state != pb::JobState::Running {
                    continue;
                }
                let execution = job.execution_id(job_id);
                let Some(coordinator) = job.coordinator.as_mut() else {
                    continue;
                };
                if coordinator.check_timeout(now) {
                    failing.push(job_id.clone());
                    continue;
                }
                if job.stopping {
                    continue;
                }
                if let Some(savepoint) = job.savepoint.as_mut()
                    && savepoint.checkpoint.is_some()
                    && coordinator.idle()
                {
                    // Its checkpoint failed (a completed one takes the request): the next
                    // one, aligned again, serves it.
                    savepoint.checkpoint = None;
                    coordinator.request_now();
                }
                let Some(barrier) = coordinator.due(now) else {
                    continue;
                };
                if let Some(savepoint) = job.savepoint.as_mut()
                    && savepoint.checkpoint.is_none()
                {
                    savepoint.checkpoint = Some(barrier.checkpoint);
                }
                let sources: BTreeSet<String> = job
                    .tasks
                    .iter()
                    .filter(|((v, _), _)| job.graph.vertices[*v].source.is_some())
                    .map(|(_, t)| t.taskmanager.clone())
                    .collect();
                for tm in sources {
                    if let Some(record) = state.taskmanagers.get(&tm) {
                        commands.push(Command::Trigger(
                            record.client.clone(),
                            pb::TriggerCheckpointRequest {
                                job_id: execution.clone(),
                                checkpoint: barrier.checkpoint,
                                triggered_at_ms: barrier.triggered_at,
                                unaligned: barrier.unaligned,
                            },
                        ));
                    }
                }
            }
        }
        self.send(commands);
        for job_id in failing {
            self.fail(&job_id, "too many failed checkpoints".into());
        }
    }

    /// Fails the runs of TaskManagers silent for longer than the heartbeat timeout, and
    /// forgets those TaskManagers.
    pub fn expire_silent(self: &Arc<Self>) {
        let silent: Vec<String> = self
            .lock()
            .taskmanagers
            .iter()
            .filter(|(_, tm)| tm.last_seen.elapsed() > self.config.heartbeat_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        self.lose_taskmanagers(silent, "no heartbeat");
    }

    /// Forgets TaskManagers known to be gone (`why`), failing the jobs that ran on them.
    fn lose_taskmanagers(self: &Arc<Self>, ids: Vec<String>, why: &str) {
        let lost: Vec<(String, Vec<String>)> = {
            let mut state = self.lock();
            let mut lost = Vec::new();
            for id in ids {
                if state.taskmanagers.contains_key(&id) {
                    let jobs = jobs_on(&state, &id);
                    state.taskmanagers.remove(&id);
                    lost.push((id, jobs));
                }
            }
            lost
        };
        for (id, jobs) in lost {
            tracing::warn!(taskmanager = %id, reason = why, "taskmanager lost");
            for job_id in jobs {
                self.fail(&job_id, format!("TaskManager {id} was lost"));
            }
        }
    }

    /// The registered TaskManagers whose address refuses a connection within `limit` (as
    /// a killed process's port does at once). One that does not answer in time is left to
    /// the heartbeat timeout: it may be behind a slow or partitioned network.
    async fn refusing_taskmanagers(&self, limit: Duration) -> Vec<String> {
        let addresses: Vec<(String, String)> = self
            .lock()
            .taskmanagers
            .iter()
            .map(|(id, tm)| (id.clone(), tm.address.clone()))
            .collect();
        let probes = addresses.into_iter().map(|(id, address)| async move {
            let authority = address
                .split_once("://")
                .map_or(address.as_str(), |(_, rest)| rest)
                .trim_end_matches('/')
                .to_string();
            let connect = tokio::net::TcpStream::connect(authority);
            match tokio::time::timeout(limit, connect).await {
                Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionRefused => Some(id),
                _ => None,
            }
        });
        futures::future::join_all(probes)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// The membership timing.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// Summaries of all jobs, newest first.
    pub fn list(&self) -> Vec<pb::JobSummary> {
        let state = self.lock();
        state
            .order
            .iter()
            .rev()
            .map(|id| {
                let job = &state.jobs[id];
                pb::JobSummary {
                    job_id: id.clone(),
                    name: job.name.clone(),
                    state: job.state as i32,
                    submitted_at_ms: job.submitted_at_ms,
                    slots: job.graph.slots_needed() as u32,
                }
            })
            .collect()
    }

    /// One job in detail.
    pub fn job(&self, job_id: &str) -> Result<pb::JobInfo, Status> {
        let state = self.lock();
        let job = state
            .jobs
            .get(job_id)
            .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
        let vertices = job
            .graph
            .vertices
            .iter()
            .map(|vertex| pb::VertexInfo {
                id: vertex.id as u32,
                name: vertex.name(),
                parallelism: vertex.parallelism as u32,
                subtasks: (0..vertex.parallelism)
                    .map(|subtask| {
                        let record = job.tasks.get(&(vertex.id, subtask));
                        pb::SubtaskInfo {
                            index: subtask as u32,
                            taskmanager_id: record
                                .map(|r| r.taskmanager.clone())
                                .unwrap_or_default(),
                            state: record.map_or(pb::TaskState::Unspecified, |r| r.state) as i32,
                            records_in: record.map_or(0, |r| r.records_in),
                            records_out: record.map_or(0, |r| r.records_out),
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(pb::JobInfo {
            job_id: job_id.to_string(),
            name: job.name.clone(),
            state: job.state as i32,
            reason: job.reason.clone(),
            submitted_at_ms: job.submitted_at_ms,
            started_at_ms: job.started_at_ms,
            restarts: job.restarts,
            vertices,
            plan: job.graph.explain(),
            restored_from: job.restore_from,
            checkpoints: job.history(),
        })
    }
}

fn jobs_on(state: &State, taskmanager: &str) -> Vec<String> {
    state
        .jobs
        .iter()
        .filter(|(_, job)| {
            matches!(job.state, pb::JobState::Running | pb::JobState::Cancelling)
                && job.tasks.values().any(|t| t.taskmanager == taskmanager)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

fn unknown_taskmanager(id: &str) -> Status {
    Status::not_found(format!("unknown TaskManager '{id}'; register first"))
}

/// A planning error as the client should see it: invalid SQL with its `line:column`.
fn invalid(error: EddyError) -> Status {
    Status::invalid_argument(error.to_string())
}

/// The `JobService` over a cluster.
pub struct JobServiceImpl(pub Arc<Cluster>);

#[tonic::async_trait]
impl pb::job_service_server::JobService for JobServiceImpl {
    async fn submit_job(
        &self,
        request: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let request = request.into_inner();
        let restore_path = (!request.restore_path.is_empty()).then_some(request.restore_path);
        let job_id = self.0.submit(request.sql, request.options, restore_path)?;
        Ok(Response::new(pb::SubmitJobResponse { job_id }))
    }

    async fn list_jobs(
        &self,
        _: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        Ok(Response::new(pb::ListJobsResponse {
            jobs: self.0.list(),
        }))
    }

    async fn get_job(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        Ok(Response::new(self.0.job(&request.into_inner().job_id)?))
    }

    async fn cancel_job(
        &self,
        request: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::CancelJobResponse>, Status> {
        self.0.cancel(&request.into_inner().job_id)?;
        Ok(Response::new(pb::CancelJobResponse {}))
    }

    async fn trigger_savepoint(
        &self,
        request: Request<pb::TriggerSavepointRequest>,
    ) -> Result<Response<pb::TriggerSavepointResponse>, Status> {
        let request = request.into_inner();
        let (reply, answer) = oneshot::channel();
        let timeout = self
            .0
            .request_savepoint(&request.job_id, request.stop, reply)?;
        let path = match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(Ok(path))) => path,
            Ok(Ok(Err(error))) => {
                return Err(Status::internal(format!("the savepoint failed: {error}")));
            }
            Ok(Err(_)) => {
                return Err(Status::aborted(
                    "the job ended before the savepoint completed",
                ));
            }
            Err(_) => {
                return Err(Status::deadline_exceeded(
                    "the savepoint did not complete in time",
                ));
            }
        };
        Ok(Response::new(pb::TriggerSavepointResponse { path }))
    }
}

/// The `ResourceManager` service over a cluster.
pub struct ResourceManagerImpl(pub Arc<Cluster>);

#[tonic::async_trait]
impl pb::resource_manager_server::ResourceManager for ResourceManagerImpl {
    async fn register_task_manager(
        &self,
        request: Request<pb::RegisterTaskManagerRequest>,
    ) -> Result<Response<pb::RegisterTaskManagerResponse>, Status> {
        self.0.register(request.into_inner())?;
        Ok(Response::new(pb::RegisterTaskManagerResponse {
            heartbeat_interval_ms: self.0.config().heartbeat_interval.as_millis() as u64,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        self.0.heartbeat(request.into_inner())?;
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    async fn report_task_state(
        &self,
        request: Request<pb::TaskStateReport>,
    ) -> Result<Response<pb::TaskStateAck>, Status> {
        self.0.report(request.into_inner())?;
        Ok(Response::new(pb::TaskStateAck {}))
    }

    async fn acknowledge_checkpoint(
        &self,
        request: Request<pb::CheckpointAck>,
    ) -> Result<Response<pb::CheckpointAckResponse>, Status> {
        self.0.acknowledge(request.into_inner())?;
        Ok(Response::new(pb::CheckpointAckResponse {}))
    }
}
