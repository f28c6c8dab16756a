//! What the JobManager keeps of one job: its plan, its lifecycle state, its current run's
//! tasks, and its checkpointing.

use eddy_common::secrets::{redact_sql, redacted};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use eddy_common::checkpoint::{CheckpointStorage, Unreadable};
use eddy_common::config::restart::{RestartDecision, RestartTracker, jitter_draw};
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_planner::plan::explain::operators;
use eddy_planner::plan::{JobGraph, VertexOutput};
use eddy_proto::v1 as pb;
use tokio::sync::{oneshot, watch};

use crate::adoption::Adoption;
use crate::coordinator::CheckpointCoordinator;
use crate::error::JobManagerError;
use crate::job_store::StoredJob;
use crate::lifecycle::{JobState, Transition};
use crate::meter::{SubtaskMeter, vertex_metrics};

/// State changes and restarts kept for `eddy status` and the REST API (the newest).
pub const HISTORY_ENTRIES: usize = 100;

/// Drops the oldest entries beyond `keep`.
pub fn keep_newest<T>(entries: &mut Vec<T>, keep: usize) {
    let excess = entries.len().saturating_sub(keep);
    entries.drain(..excess);
}

/// One task of the current run.
pub struct TaskRecord {
    /// The TaskManager running it.
    pub taskmanager: String,
    /// Its state as last reported.
    pub state: pb::TaskState,
    /// Rows in, as last reported.
    pub records_in: u64,
    /// Rows out, as last reported.
    pub records_out: u64,
    /// A source task that has read all its input.
    pub input_ended: bool,
    /// Its measurements as heartbeats brought them, for rates.
    pub meter: SubtaskMeter,
}

impl TaskRecord {
    /// A task on `taskmanager`, in `state`, that has counted nothing yet.
    pub fn new(taskmanager: &str, state: pb::TaskState) -> Self {
        TaskRecord {
            taskmanager: taskmanager.to_string(),
            state,
            records_in: 0,
            records_out: 0,
            input_ended: false,
            meter: Default::default(),
        }
    }

    /// Its metrics; the counts of its final report outlive its last heartbeat.
    fn metrics(&self) -> pb::SubtaskMetrics {
        let mut metrics = self.meter.metrics();
        let totals = metrics.totals.get_or_insert_with(Default::default);
        totals.records_in = totals.records_in.max(self.records_in);
        totals.records_out = totals.records_out.max(self.records_out);
        metrics
    }
}

/// Where a job is in its life, with what only that state has: bad combinations (a
/// coordinator of a job that does not run, an adoption of a running one) cannot be written.
pub enum Phase {
    /// Waiting for slots.
    Created,
    /// Its tasks are deployed.
    Running(Box<Run>),
    /// Waiting to restart; a job recovered from the job store may adopt its last run
    /// meanwhile.
    Restarting {
        /// The recovered run, waiting for the TaskManagers to show they still run it.
        adoption: Option<Adoption>,
    },
    /// Every task finished.
    Finished,
    /// Cancelled, or stopped, on request.
    Cancelled,
    /// Failed for good.
    Failed,
}

impl Phase {
    /// A job just entering `state`.
    fn entering(state: JobState) -> Phase {
        match state {
            JobState::Created => Phase::Created,
            JobState::Running => Phase::Running(Box::default()),
            JobState::Restarting => Phase::Restarting { adoption: None },
            JobState::Finished => Phase::Finished,
            JobState::Cancelled => Phase::Cancelled,
            JobState::Failed => Phase::Failed,
        }
    }

    /// Its lifecycle state.
    pub fn state(&self) -> JobState {
        match self {
            Phase::Created => JobState::Created,
            Phase::Running(_) => JobState::Running,
            Phase::Restarting { .. } => JobState::Restarting,
            Phase::Finished => JobState::Finished,
            Phase::Cancelled => JobState::Cancelled,
            Phase::Failed => JobState::Failed,
        }
    }
}

/// What a job's current run has while it runs.
#[derive(Default)]
pub struct Run {
    /// The slots it holds: slot `k` (on that TaskManager) runs subtask `k` of every vertex.
    pub slots: Vec<String>,
    /// Its checkpoint coordinator, if the job checkpoints.
    pub coordinator: Option<CheckpointCoordinator>,
    /// Its sources were told to stop: tasks ending stopped end the job, not fail it.
    pub draining: bool,
}

/// A savepoint of a job: asked for, or (stopping with it) taken and being kept.
#[derive(Default)]
pub enum Savepoint {
    /// None is asked for.
    #[default]
    None,
    /// One is asked for.
    Asked(SavepointRequest),
    /// A stop-with-savepoint's checkpoint completed: no later checkpoint may be taken (its
    /// sinks would commit rows that resuming from the savepoint writes again) while it is
    /// kept and the job stopped.
    Stopping,
}

/// A savepoint asked for: the checkpoint that serves it once triggered, whether to stop the
/// job after, and who waits for its path.
pub struct SavepointRequest {
    /// The checkpoint taken for it, once triggered.
    pub checkpoint: Option<u64>,
    /// Stop the job once it is complete.
    pub stop: bool,
    /// Who waits for its path.
    pub replies: Vec<oneshot::Sender<Result<String, JobManagerError>>>,
}

/// A job the JobManager follows.
pub struct JobRecord {
    /// Its name (`pipeline.name`).
    pub name: String,
    /// Its script.
    pub sql: String,
    /// Options given with the submission.
    pub options: HashMap<String, String>,
    /// Who submitted it (a token's name; `local` without tokens).
    pub owner: String,
    /// Its plan.
    pub graph: Arc<JobGraph>,
    /// The plan as `eddy explain` prints it (rendered once: every status call shows it).
    explained: String,
    /// The script and options as the job store keeps them, secrets written out redacted
    /// (secret options hold references on a cluster, but `eddy run` takes literals).
    stored_sql: String,
    stored_options: HashMap<String, String>,
    /// Where it is in its lifecycle, with what that state has (change it with
    /// [`JobRecord::transition`]).
    phase: Phase,
    /// Its lifecycle state, for its watchers.
    state: watch::Sender<JobState>,
    /// Why it is in its state.
    pub reason: String,
    /// When it was submitted, in milliseconds since the epoch.
    pub submitted_at_ms: i64,
    /// When its current run was deployed.
    pub started_at_ms: i64,
    /// The current run's number.
    pub attempt: u32,
    /// Restarts so far, in the job's whole life.
    pub restarts: u32,
    /// Its restart strategy and what it remembers of the failures (kept in memory: a
    /// new JobManager starts it afresh, as Flink's does).
    pub restart: RestartTracker,
    /// When the restart strategy last reset its backoff and count (0: never).
    pub restart_reset_at_ms: i64,
    /// The current run's tasks (the last run's, once it ended).
    pub tasks: BTreeMap<TaskKey, TaskRecord>,
    /// Where the job's checkpoints go (the root as configured, and the storage), if it
    /// checkpoints.
    pub storage: Option<(String, CheckpointStorage)>,
    /// Checkpoints of earlier runs, for the history.
    pub history: Vec<pb::CheckpointInfo>,
    /// Checkpoints of earlier runs that completed and that failed.
    pub checkpoint_counts: (u64, u64),
    /// The id the next checkpoint takes.
    pub next_checkpoint: u64,
    /// The checkpoint the current run restored (0: none).
    pub restore_from: u64,
    /// A savepoint or checkpoint directory the job started from.
    pub restore_path: Option<String>,
    /// A savepoint asked for, or being kept before the job stops (it outlives a restart).
    pub savepoint: Savepoint,
    /// Every state it entered, and when.
    pub timeline: Vec<pb::StateChange>,
    /// Its restarts and their causes.
    pub restart_history: Vec<pb::RestartInfo>,
}

impl JobRecord {
    /// A new job, waiting for slots.
    pub fn new(
        sql: String,
        options: HashMap<String, String>,
        graph: Arc<JobGraph>,
        storage: Option<(String, CheckpointStorage)>,
        restore_path: Option<String>,
        submitted_at_ms: i64,
    ) -> Self {
        let stored_options = options
            .iter()
            .map(|(k, v)| (k.clone(), redacted(k, v).to_string()))
            .collect();
        let restart_strategy = graph.config.restart_strategy();
        JobRecord {
            name: graph.config.name.clone(),
            explained: graph.explain(),
            stored_sql: redact_sql(&sql),
            stored_options,
            sql,
            options,
            owner: String::new(),
            graph,
            phase: Phase::Created,
            state: watch::Sender::new(JobState::Created),
            reason: "waiting for slots".into(),
            submitted_at_ms,
            started_at_ms: 0,
            attempt: 1,
            restarts: 0,
            restart: RestartTracker::new(restart_strategy),
            restart_reset_at_ms: 0,
            tasks: BTreeMap::new(),
            storage,
            history: Vec::new(),
            checkpoint_counts: (0, 0),
            next_checkpoint: 1,
            restore_from: 0,
            restore_path,
            savepoint: Savepoint::None,
            timeline: vec![pb::StateChange {
                state: JobState::Created.to_proto() as i32,
                at_ms: submitted_at_ms,
                reason: String::new(),
            }],
            restart_history: Vec::new(),
        }
    }

    /// Its lifecycle state.
    pub fn state(&self) -> JobState {
        self.phase.state()
    }

    /// Its current run, while it runs.
    pub fn run(&self) -> Option<&Run> {
        match &self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    /// Its current run, while it runs.
    pub fn run_mut(&mut self) -> Option<&mut Run> {
        match &mut self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    /// The checkpoint coordinator of its current run, while it runs and checkpoints.
    pub fn coordinator_mut(&mut self) -> Option<&mut CheckpointCoordinator> {
        self.run_mut()?.coordinator.as_mut()
    }

    /// The checkpoint coordinator of its current run, while it runs and checkpoints, with
    /// the savepoint asked of it.
    pub fn checkpointing_mut(&mut self) -> Option<(&mut CheckpointCoordinator, &mut Savepoint)> {
        match &mut self.phase {
            Phase::Running(run) => Some((run.coordinator.as_mut()?, &mut self.savepoint)),
            _ => None,
        }
    }

    /// The run it waits to adopt, while restarting after a JobManager change.
    pub fn adoption_mut(&mut self) -> Option<&mut Adoption> {
        match &mut self.phase {
            Phase::Restarting { adoption } => adoption.as_mut(),
            _ => None,
        }
    }

    /// Gives up waiting to adopt a run; the run waited for, if any.
    pub fn take_adoption(&mut self) -> Option<Adoption> {
        match &mut self.phase {
            Phase::Restarting { adoption } => adoption.take(),
            _ => None,
        }
    }

    /// Waits to adopt `adoption` (a restarting job's recovered run); false, and nothing
    /// kept, in any other state.
    pub fn await_adoption(&mut self, adoption: Adoption) -> bool {
        match &mut self.phase {
            Phase::Restarting { adoption: waiting } => {
                *waiting = Some(adoption);
                true
            }
            _ => false,
        }
    }

    /// Ends its current run's checkpointing (before the run ends): the coordinator's
    /// history and counts join the job's, and the checkpoint ids go on from its next one.
    /// Returns the slots the run held, to release.
    pub fn close_run(&mut self) -> Vec<String> {
        let Some(run) = self.run_mut() else {
            return Vec::new();
        };
        let slots = std::mem::take(&mut run.slots);
        if let Some(coordinator) = run.coordinator.take() {
            self.next_checkpoint = coordinator.next_id();
            self.history.extend(coordinator.history());
            let overflow = self
                .history
                .len()
                .saturating_sub(crate::coordinator::HISTORY);
            self.history.drain(..overflow);
            let (completed, failed) = coordinator.counts();
            self.checkpoint_counts.0 += completed;
            self.checkpoint_counts.1 += failed;
        }
        slots
    }

    /// Moves the job on `transition`; false (and no change) if its state does not allow
    /// it: the event is stale.
    pub fn transition(&mut self, job_id: &str, transition: Transition) -> bool {
        let from = self.state();
        match from.apply(transition) {
            Ok(next) => {
                tracing::debug!(job = %job_id, %from, to = %next, ?transition, "job state");
                self.state.send_replace(next);
                if next != from {
                    self.phase = Phase::entering(next);
                    self.timeline.push(pb::StateChange {
                        state: next.to_proto() as i32,
                        at_ms: eddy_common::event::wall_clock(),
                        reason: String::new(),
                    });
                    keep_newest(&mut self.timeline, HISTORY_ENTRIES);
                }
                true
            }
            Err(stale) => {
                tracing::debug!(job = %job_id, %stale, "stale event ignored");
                false
            }
        }
    }

    /// Follows its state.
    pub fn watch(&self) -> watch::Receiver<JobState> {
        self.state.subscribe()
    }

    /// Whether `execution` is its current run.
    pub fn is_run(&self, execution: &ExecutionId) -> bool {
        self.attempt == execution.attempt
    }

    /// The run it waits to adopt, while restarting after a JobManager change.
    pub fn adoption(&self) -> Option<&Adoption> {
        match &self.phase {
            Phase::Restarting { adoption } => adoption.as_ref(),
            _ => None,
        }
    }

    /// The id of its current run.
    pub fn execution(&self, job_id: &str) -> ExecutionId {
        ExecutionId::new(job_id, self.attempt)
    }

    /// The TaskManagers running its current run's tasks.
    pub fn taskmanagers(&self) -> BTreeSet<String> {
        self.tasks.values().map(|t| t.taskmanager.clone()).collect()
    }

    /// The TaskManagers running its current run's source tasks.
    pub fn source_taskmanagers(&self) -> BTreeSet<String> {
        self.tasks
            .iter()
            .filter(|(key, _)| self.graph.vertices[key.vertex].source.is_some())
            .map(|(_, t)| t.taskmanager.clone())
            .collect()
    }

    /// Whether every source task of the current run has read all its input.
    pub fn sources_ended(&self) -> bool {
        self.tasks
            .iter()
            .filter(|(key, _)| self.graph.vertices[key.vertex].source.is_some())
            .all(|(_, t)| t.input_ended)
    }

    /// What its restart strategy decides about a failure now; notes a reset of the
    /// strategy's backoff and count.
    pub fn restart_decision(&mut self) -> RestartDecision {
        let resets = self.restart.resets();
        let decision = self
            .restart
            .on_failure(std::time::Instant::now(), jitter_draw());
        if self.restart.resets() != resets {
            self.restart_reset_at_ms = eddy_common::event::wall_clock();
        }
        decision
    }

    /// Counts a restart, for `cause`, in its restarts and their history.
    pub fn count_restart(&mut self, cause: &str) {
        self.restarts += 1;
        self.restart_history.push(pb::RestartInfo {
            at_ms: eddy_common::event::wall_clock(),
            cause: cause.to_string(),
            restored_from: 0,
        });
        keep_newest(&mut self.restart_history, HISTORY_ENTRIES);
    }

    /// What restoring its checkpoints does with one that cannot be read: a job whose sinks
    /// commit at checkpoints must not fall back to an earlier one (they would write again
    /// what they committed).
    pub fn unreadable_checkpoints(&self) -> Unreadable {
        match self.graph.commits_at_checkpoints() {
            true => Unreadable::Fail,
            false => Unreadable::FallBack,
        }
    }

    /// Its record for the job store (`revision`: see [`StoredJob::revision`]).
    pub fn stored(&self, job_id: &str, revision: u64) -> StoredJob {
        StoredJob {
            job_id: job_id.to_string(),
            sql: self.stored_sql.clone(),
            options: self.stored_options.clone(),
            owner: self.owner.clone(),
            state: self.state(),
            attempt: self.attempt,
            restarts: self.restarts,
            submitted_at_ms: self.submitted_at_ms,
            restore_path: self.restore_path.clone(),
            restore_from: self.restore_from,
            revision,
        }
    }

    /// Its checkpoints, earlier runs' first.
    fn history_all(&self) -> Vec<pb::CheckpointInfo> {
        let mut all = self.history.clone();
        if let Some(c) = self.run().and_then(|run| run.coordinator.as_ref()) {
            all.extend(c.history());
        }
        all
    }

    /// As `eddy list` shows it.
    pub fn summary(&self, job_id: &str) -> pb::JobSummary {
        pb::JobSummary {
            job_id: job_id.to_string(),
            name: self.name.clone(),
            state: self.state().to_proto() as i32,
            submitted_at_ms: self.submitted_at_ms,
            slots: self.graph.slots_needed() as u32,
        }
    }

    /// A vertex as `eddy status` shows it: its operators, subtasks and their metrics.
    fn vertex_info(&self, vertex: &eddy_planner::plan::Vertex) -> pb::VertexInfo {
        let subtasks: Vec<pb::SubtaskInfo> = (0..vertex.parallelism)
            .map(|subtask| {
                let record = self.tasks.get(&TaskKey::new(vertex.id, subtask));
                pb::SubtaskInfo {
                    index: subtask as u32,
                    taskmanager_id: record.map(|r| r.taskmanager.clone()).unwrap_or_default(),
                    state: record.map_or(pb::TaskState::Unspecified, |r| r.state) as i32,
                    records_in: record.map_or(0, |r| r.records_in),
                    records_out: record.map_or(0, |r| r.records_out),
                    metrics: record.map(TaskRecord::metrics),
                }
            })
            .collect();
        let metrics: Vec<pb::SubtaskMetrics> = subtasks
            .iter()
            .map(|s| s.metrics.clone().unwrap_or_default())
            .collect();
        pb::VertexInfo {
            id: vertex.id as u32,
            name: vertex.name(),
            parallelism: vertex.parallelism as u32,
            subtasks,
            operators: operators(vertex)
                .into_iter()
                .map(|op| pb::OperatorInfo {
                    description: op.description,
                    changelog: op.changelog,
                })
                .collect(),
            metrics: Some(vertex_metrics(&metrics)),
        }
    }

    /// The job graph's edges.
    fn edges(&self) -> Vec<pb::EdgeInfo> {
        let vertices = &self.graph.vertices;
        vertices
            .iter()
            .flat_map(|vertex| {
                vertex.inputs.iter().map(move |&input| pb::EdgeInfo {
                    from_vertex: input as u32,
                    to_vertex: vertex.id as u32,
                    partitioning: match &vertices[input].output {
                        VertexOutput::Exchange { partitioning, .. } => partitioning.to_string(),
                        VertexOutput::Sink(_) => String::new(),
                    },
                })
            })
            .collect()
    }

    /// As `eddy status` shows it.
    pub fn info(&self, job_id: &str) -> pb::JobInfo {
        let vertices = self
            .graph
            .vertices
            .iter()
            .map(|vertex| self.vertex_info(vertex))
            .collect();
        let (mut completed, mut failed) = self.checkpoint_counts;
        if let Some(c) = self.run().and_then(|run| run.coordinator.as_ref()) {
            completed += c.counts().0;
            failed += c.counts().1;
        }
        let mut timeline = self.timeline.clone();
        if let Some(now) = timeline.last_mut() {
            now.reason = self.reason.clone();
        }
        pb::JobInfo {
            job_id: job_id.to_string(),
            name: self.name.clone(),
            state: self.state().to_proto() as i32,
            reason: self.reason.clone(),
            submitted_at_ms: self.submitted_at_ms,
            started_at_ms: self.started_at_ms,
            restarts: self.restarts,
            restart_strategy: self.restart.strategy().to_string(),
            restart_attempts: self.restart.attempts(),
            restart_reset_at_ms: self.restart_reset_at_ms,
            vertices,
            plan: self.explained.clone(),
            restored_from: self.restore_from,
            checkpoints: self.history_all(),
            edges: self.edges(),
            restart_history: self.restart_history.clone(),
            timeline,
            checkpoints_completed: completed,
            checkpoints_failed: failed,
            // Filled in by the JobManager, which knows its lease.
            leader: None,
        }
    }
}
