//! The JSON documents of the REST API, made from the gRPC messages: states are words,
//! times milliseconds since the Unix epoch, ratios between 0 and 1.

use std::collections::HashMap;

use eddy_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A protobuf enum value as a lower-case word without its prefix (`running`).
fn word(name: Option<&str>, prefix: &str) -> String {
    name.map_or("unknown".into(), |n| {
        n.trim_start_matches(prefix).to_ascii_lowercase()
    })
}

/// A job state as a word.
pub fn job_state(state: i32) -> String {
    let name = pb::JobState::try_from(state).ok();
    word(name.as_ref().map(pb::JobState::as_str_name), "JOB_STATE_")
}

fn task_state(state: i32) -> String {
    let name = pb::TaskState::try_from(state).ok();
    word(name.as_ref().map(pb::TaskState::as_str_name), "TASK_STATE_")
}

fn checkpoint_state(state: i32) -> String {
    let name = pb::CheckpointState::try_from(state).ok();
    word(
        name.as_ref().map(pb::CheckpointState::as_str_name),
        "CHECKPOINT_STATE_",
    )
}

/// A job in the job list.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobSummary {
    /// Its id.
    pub id: String,
    /// Its name (`pipeline.name`).
    pub name: String,
    /// `created`, `running`, `restarting`, `finished`, `cancelling`, `cancelled` or `failed`.
    pub state: String,
    /// When it was submitted.
    pub submitted_at_ms: i64,
    /// Slots it needs.
    pub slots: u32,
}

impl From<pb::JobSummary> for JobSummary {
    fn from(s: pb::JobSummary) -> Self {
        JobSummary {
            id: s.job_id,
            name: s.name,
            state: job_state(s.state),
            submitted_at_ms: s.submitted_at_ms,
            slots: s.slots,
        }
    }
}

/// A job in detail: its graph with live metrics, checkpoints, restarts and states.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobDetail {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: String,
    /// Why it is in its state.
    pub reason: String,
    /// When it was submitted.
    pub submitted_at_ms: i64,
    /// When its current run was deployed (0 until then).
    pub started_at_ms: i64,
    /// Restarts so far.
    pub restarts: u32,
    /// The restart strategy in force, with its options.
    pub restart_strategy: String,
    /// Restarts the strategy counts against its budget (since its last reset, for
    /// exponential-delay).
    pub restart_attempts: u32,
    /// When exponential-delay last reset its backoff and count (0: never).
    pub restart_reset_at_ms: i64,
    /// The checkpoint the current run restored (0: none).
    pub restored_from: u64,
    /// The streaming plan as `eddy explain` prints it.
    pub plan: String,
    /// The job graph's vertices with their metrics.
    pub vertices: Vec<Vertex>,
    /// The job graph's edges.
    pub edges: Vec<Edge>,
    /// Recent checkpoints, newest last.
    pub checkpoints: Vec<Checkpoint>,
    /// Restarts and their causes, oldest first.
    pub restart_history: Vec<Restart>,
    /// Every state the job entered, oldest first.
    pub timeline: Vec<StateChange>,
}

impl From<pb::JobInfo> for JobDetail {
    fn from(j: pb::JobInfo) -> Self {
        JobDetail {
            id: j.job_id,
            name: j.name,
            state: job_state(j.state),
            reason: j.reason,
            submitted_at_ms: j.submitted_at_ms,
            started_at_ms: j.started_at_ms,
            restarts: j.restarts,
            restart_strategy: j.restart_strategy,
            restart_attempts: j.restart_attempts,
            restart_reset_at_ms: j.restart_reset_at_ms,
            restored_from: j.restored_from,
            plan: j.plan,
            vertices: j.vertices.into_iter().map(Vertex::from).collect(),
            edges: j.edges.into_iter().map(Edge::from).collect(),
            checkpoints: j.checkpoints.into_iter().map(Checkpoint::from).collect(),
            restart_history: j.restart_history.into_iter().map(Restart::from).collect(),
            timeline: j.timeline.into_iter().map(StateChange::from).collect(),
        }
    }
}

/// A vertex: operators chained into one task, run by `parallelism` subtasks.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Vertex {
    /// Its number (`v0`, `v1`, … in `eddy explain`).
    pub id: u32,
    /// Its name (`v0:bid` for a source vertex).
    pub name: String,
    /// Subtasks running it.
    pub parallelism: u32,
    /// Its operators, source and sink included.
    pub operators: Vec<Operator>,
    /// Its subtasks' metrics combined: counters and rates summed, busy and backpressure
    /// the highest, watermarks the lowest.
    pub metrics: Metrics,
    /// Its subtasks.
    pub subtasks: Vec<Subtask>,
}

impl From<pb::VertexInfo> for Vertex {
    fn from(v: pb::VertexInfo) -> Self {
        Vertex {
            id: v.id,
            name: v.name,
            parallelism: v.parallelism,
            operators: v
                .operators
                .into_iter()
                .map(|o| Operator {
                    description: o.description,
                    changelog: o.changelog,
                })
                .collect(),
            metrics: v.metrics.map(Metrics::from).unwrap_or_default(),
            subtasks: v.subtasks.into_iter().map(Subtask::from).collect(),
        }
    }
}

/// An operator as `eddy explain` shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Operator {
    /// What it does.
    pub description: String,
    /// The changes it emits: `append-only`, `retract` or `upsert`.
    pub changelog: String,
}

/// One subtask.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Subtask {
    /// Its index.
    pub index: u32,
    /// The TaskManager running it.
    pub taskmanager: String,
    /// `scheduled`, `running`, `finished`, `cancelled`, `failed` or `stopped`.
    pub state: String,
    /// Its metrics.
    pub metrics: Metrics,
}

impl From<pb::SubtaskInfo> for Subtask {
    fn from(s: pb::SubtaskInfo) -> Self {
        let mut metrics = s.metrics.map(Metrics::from).unwrap_or_default();
        // A task that ended reported its final counts, which outlive its heartbeats.
        metrics.records_in = metrics.records_in.max(s.records_in);
        metrics.records_out = metrics.records_out.max(s.records_out);
        Subtask {
            index: s.index,
            taskmanager: s.taskmanager_id,
            state: task_state(s.state),
            metrics,
        }
    }
}

/// Measurements of a subtask (or a vertex): counters since it started, rates over the
/// last few seconds, gauges as they are now.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct Metrics {
    /// Rows taken in.
    pub records_in: u64,
    /// Rows sent on.
    pub records_out: u64,
    /// Arrow bytes taken in.
    pub bytes_in: u64,
    /// Arrow bytes sent on.
    pub bytes_out: u64,
    /// Rows in per second.
    pub records_in_per_second: f64,
    /// Rows out per second.
    pub records_out_per_second: f64,
    /// Bytes in per second.
    pub bytes_in_per_second: f64,
    /// Bytes out per second.
    pub bytes_out_per_second: f64,
    /// Share of time busy (working, not blocked).
    pub busy_ratio: f64,
    /// Share of time blocked on a full output queue.
    pub backpressured_ratio: f64,
    /// The watermark that reached its operators (event time, ms), if any.
    pub watermark_in_ms: Option<i64>,
    /// The watermark it sent on, if any.
    pub watermark_out_ms: Option<i64>,
    /// Late rows dropped.
    pub late_records_dropped: u64,
    /// Malformed records skipped.
    pub parse_errors_skipped: u64,
    /// Bytes of state at the last checkpoint.
    pub state_bytes: u64,
    /// Fill of the input queue last read (0 to 1).
    pub input_queue_fill: f64,
    /// Fill of the output queue last written (0 to 1).
    pub output_queue_fill: f64,
}

impl From<pb::SubtaskMetrics> for Metrics {
    fn from(m: pb::SubtaskMetrics) -> Self {
        let t = m.totals.unwrap_or_default();
        Metrics {
            records_in: t.records_in,
            records_out: t.records_out,
            bytes_in: t.bytes_in,
            bytes_out: t.bytes_out,
            records_in_per_second: m.records_in_per_second,
            records_out_per_second: m.records_out_per_second,
            bytes_in_per_second: m.bytes_in_per_second,
            bytes_out_per_second: m.bytes_out_per_second,
            busy_ratio: m.busy_ratio,
            backpressured_ratio: m.backpressured_ratio,
            watermark_in_ms: t.watermark_in,
            watermark_out_ms: t.watermark_out,
            late_records_dropped: t.late_records_dropped,
            parse_errors_skipped: t.parse_errors_skipped,
            state_bytes: t.state_bytes,
            input_queue_fill: f64::from(t.input_queue_permille) / 1000.0,
            output_queue_fill: f64::from(t.output_queue_permille) / 1000.0,
        }
    }
}

/// An edge of the job graph: rows from one vertex to another.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Edge {
    /// The sending vertex.
    pub from: u32,
    /// The receiving vertex.
    pub to: u32,
    /// How rows are routed: `forward`, `hash(...)`, `rebalance`, `single`.
    pub partitioning: String,
}

impl From<pb::EdgeInfo> for Edge {
    fn from(e: pb::EdgeInfo) -> Self {
        Edge {
            from: e.from_vertex,
            to: e.to_vertex,
            partitioning: e.partitioning,
        }
    }
}

/// One checkpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Checkpoint {
    /// Its id.
    pub id: u64,
    /// `in_progress`, `completed` or `failed`.
    pub state: String,
    /// When it was triggered.
    pub triggered_at_ms: i64,
    /// From trigger to commit.
    pub duration_ms: u64,
    /// Bytes of task snapshots written for it.
    pub size_bytes: u64,
    /// Bytes a restore reads (snapshots it extends included).
    pub full_size_bytes: u64,
    /// The longest barrier alignment of any task.
    pub alignment_ms: u64,
    /// Why it failed.
    pub failure: String,
    /// Per task: time from trigger to acknowledgement.
    pub acks: Vec<CheckpointAck>,
}

impl From<pb::CheckpointInfo> for Checkpoint {
    fn from(c: pb::CheckpointInfo) -> Self {
        Checkpoint {
            id: c.id,
            state: checkpoint_state(c.state),
            triggered_at_ms: c.triggered_at_ms,
            duration_ms: c.duration_ms,
            size_bytes: c.size_bytes,
            full_size_bytes: c.full_size_bytes,
            alignment_ms: c.alignment_ms,
            failure: c.failure,
            acks: c
                .acks
                .into_iter()
                .map(|a| CheckpointAck {
                    vertex: a.vertex,
                    subtask: a.subtask,
                    ack_ms: a.ack_ms,
                    alignment_ms: a.alignment_ms,
                    size_bytes: a.size_bytes,
                })
                .collect(),
        }
    }
}

/// A task's acknowledgement of a checkpoint.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CheckpointAck {
    /// The vertex.
    pub vertex: u32,
    /// The subtask.
    pub subtask: u32,
    /// Milliseconds from trigger to acknowledgement.
    pub ack_ms: u64,
    /// Milliseconds its barrier was aligned.
    pub alignment_ms: u64,
    /// Bytes of its snapshot.
    pub size_bytes: u64,
}

/// A restart.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Restart {
    /// When the job failed.
    pub at_ms: i64,
    /// Why.
    pub cause: String,
    /// The checkpoint it resumed from (0: none, or not yet).
    pub restored_from: u64,
}

impl From<pb::RestartInfo> for Restart {
    fn from(r: pb::RestartInfo) -> Self {
        Restart {
            at_ms: r.at_ms,
            cause: r.cause,
            restored_from: r.restored_from,
        }
    }
}

/// A state the job entered.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StateChange {
    /// The state.
    pub state: String,
    /// When.
    pub at_ms: i64,
    /// Why (kept for the newest entry: the job's reason now).
    pub reason: String,
}

impl From<pb::StateChange> for StateChange {
    fn from(s: pb::StateChange) -> Self {
        StateChange {
            state: job_state(s.state),
            at_ms: s.at_ms,
            reason: s.reason,
        }
    }
}

/// The JobManager that answers, and how it leads.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Leader {
    /// Whether JobManagers elect a leader (`high-availability.type: object-store`);
    /// without, the one JobManager leads in term 0.
    pub high_availability: bool,
    /// The leader term (the fencing token; grows at each change of leader).
    pub term: u64,
    /// The leader's id (unique per process; empty without high availability).
    pub holder: String,
    /// Its gRPC address, as it advertises it.
    pub address: String,
    /// When its term began, in milliseconds since the epoch (0 without high availability).
    pub since_ms: i64,
}

impl From<Option<pb::Leadership>> for Leader {
    /// The leader as a JobManager holds it (`None`: no high availability, term 0).
    fn from(leadership: Option<pb::Leadership>) -> Self {
        let high_availability = leadership.is_some();
        let l = leadership.unwrap_or_default();
        Leader {
            high_availability,
            term: l.term,
            holder: l.holder,
            address: l.address,
            since_ms: l.since_ms,
        }
    }
}

/// A registered TaskManager.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskManager {
    /// Its id.
    pub id: String,
    /// Where its gRPC services listen.
    pub address: String,
    /// Where its HTTP port (`/metrics`) listens (empty: none).
    pub http_address: String,
    /// Slots it offers.
    pub slots: u32,
    /// Slots free.
    pub free_slots: u32,
    /// Milliseconds since its last heartbeat.
    pub last_heartbeat_ms_ago: u64,
    /// When it registered.
    pub registered_at_ms: i64,
}

impl From<pb::TaskManagerInfo> for TaskManager {
    fn from(t: pb::TaskManagerInfo) -> Self {
        TaskManager {
            id: t.taskmanager_id,
            address: t.address,
            http_address: t.http_address,
            slots: t.slots,
            free_slots: t.free_slots,
            last_heartbeat_ms_ago: t.last_heartbeat_ms_ago,
            registered_at_ms: t.registered_at_ms,
        }
    }
}

/// A job to submit.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubmitJob {
    /// The script: `SET`, `CREATE TABLE`, `CREATE VIEW` and `INSERT INTO` statements.
    pub sql: String,
    /// Options overriding the script's `SET`s, e.g. `parallelism.default`.
    #[serde(default)]
    pub options: HashMap<String, String>,
    /// A savepoint or retained checkpoint directory to start from.
    #[serde(default)]
    pub restore_path: Option<String>,
}

/// A submitted job's id.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Submitted {
    /// The new job's id.
    pub id: String,
}

/// A savepoint's location.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Savepoint {
    /// Where it is, for `eddy submit --from-savepoint` or `restore_path`.
    pub path: String,
}

/// How to stop a job.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct StopJob {
    /// Take a savepoint first (the default for a job that checkpoints); otherwise the job
    /// drains: its sources stop and what they read is written.
    #[serde(default)]
    pub savepoint: Option<bool>,
}

/// What stopping did.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Stopped {
    /// The savepoint taken before stopping, if one was.
    pub savepoint_path: Option<String>,
}

/// A refused or failed request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiErrorBody {
    /// What went wrong (bad SQL says where, as `line:column`).
    pub error: String,
    /// The HTTP status code.
    pub status: u16,
}
