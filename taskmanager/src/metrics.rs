//! What a TaskManager tells of its tasks: their measurements in heartbeats, and all of its
//! metrics in the Prometheus text format for `GET /metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_common::metrics::exposition::{Families, Labels, label};
use eddy_common::metrics::{TaskMetrics, TaskSample};
use eddy_proto::v1 as pb;

use crate::node::TaskManager;

/// A task running here, with its metrics.
pub struct RunningTask {
    /// The job run it belongs to.
    pub execution: ExecutionId,
    /// Which subtask.
    pub key: TaskKey,
    /// What it measures.
    pub metrics: Arc<TaskMetrics>,
}

/// A task's sample as a heartbeat carries it.
pub fn task_counters(task: pb::TaskId, sample: &TaskSample) -> pb::TaskCounters {
    pb::TaskCounters {
        task: Some(task),
        records_in: sample.records_in,
        records_out: sample.records_out,
        bytes_in: sample.bytes_in,
        bytes_out: sample.bytes_out,
        busy_ms: sample.busy_nanos() / 1_000_000,
        backpressured_ms: sample.backpressure_nanos / 1_000_000,
        watermark_in: sample.watermark_in,
        watermark_out: sample.watermark_out,
        late_records_dropped: sample.late_records_dropped,
        parse_errors_skipped: sample.parse_errors_skipped,
        state_bytes: sample.state_bytes,
        input_queue_permille: sample.input_queue_permille,
        output_queue_permille: sample.output_queue_permille,
    }
}

/// Every metric of a TaskManager, in the Prometheus text format.
pub fn render(node: &TaskManager) -> String {
    let mut families = Families::default();
    let tasks = node.running_tasks();
    let id = node.id();
    families.gauge(
        "eddy_taskmanager_slots",
        "Slots of the TaskManager, by state.",
        vec![label("taskmanager", id), label("state", "total")],
        node.slots() as f64,
    );
    families.gauge(
        "eddy_taskmanager_tasks",
        "Tasks running on the TaskManager.",
        vec![label("taskmanager", id)],
        tasks.len() as f64,
    );
    let python = eddy_udf::python::usage();
    families.gauge(
        "eddy_python_workers",
        "Workers of Python functions alive in the TaskManager's process.",
        vec![label("taskmanager", id)],
        python.workers as f64,
    );
    families.gauge(
        "eddy_python_workers_resident_bytes",
        "Resident memory of the Python workers in the TaskManager's process, together.",
        vec![label("taskmanager", id)],
        python.resident_bytes as f64,
    );
    for task in &tasks {
        task_families(&mut families, task);
    }
    for task in &tasks {
        operator_families(&mut families, task);
    }
    families.render()
}

/// The labels of a task: job id (not `job`, which Prometheus gives its targets), attempt,
/// vertex (`v{id}`, as `eddy explain` numbers them)
/// and subtask.
fn task_labels(task: &RunningTask) -> Labels {
    vec![
        label("job_id", &task.execution.job),
        label("attempt", task.execution.attempt),
        label("vertex", format!("v{}", task.key.vertex)),
        label("subtask", task.key.subtask),
    ]
}

fn task_families(families: &mut Families, task: &RunningTask) {
    let sample = task.metrics.sample();
    let labels = task_labels(task);
    let seconds = |nanos: u64| nanos as f64 / 1e9;
    let counters: [(&'static str, &'static str, f64); 6] = [
        (
            "eddy_task_records_in",
            "Rows the task took in (read or received).",
            sample.records_in as f64,
        ),
        (
            "eddy_task_records_out",
            "Rows the task sent on (to the next vertex or its sink).",
            sample.records_out as f64,
        ),
        (
            "eddy_task_bytes_in",
            "Arrow bytes of the chunks the task took in.",
            sample.bytes_in as f64,
        ),
        (
            "eddy_task_bytes_out",
            "Arrow bytes of the chunks the task sent on.",
            sample.bytes_out as f64,
        ),
        (
            "eddy_task_busy_seconds",
            "Seconds the task worked, not counting time blocked by backpressure.",
            seconds(sample.busy_nanos()),
        ),
        (
            "eddy_task_backpressured_seconds",
            "Seconds the task was blocked on a full output queue.",
            seconds(sample.backpressure_nanos),
        ),
    ];
    for (name, help, value) in counters {
        families.counter(name, help, labels.clone(), value);
    }
    let gauges: [(&'static str, &'static str, Option<f64>); 4] = [
        (
            "eddy_task_input_watermark_timestamp_seconds",
            "The watermark that reached the task's operators (event time).",
            sample.watermark_in.map(|w| w as f64 / 1000.0),
        ),
        (
            "eddy_task_output_watermark_timestamp_seconds",
            "The watermark the task sent on (event time).",
            sample.watermark_out.map(|w| w as f64 / 1000.0),
        ),
        (
            "eddy_task_input_queue_fill_ratio",
            "How full the input queue the task last read was (0 to 1).",
            Some(f64::from(sample.input_queue_permille) / 1000.0),
        ),
        (
            "eddy_task_output_queue_fill_ratio",
            "How full the output queue the task last wrote was (0 to 1).",
            Some(f64::from(sample.output_queue_permille) / 1000.0),
        ),
    ];
    for (name, help, value) in gauges {
        // A watermark that never came is absent, not a number.
        if let Some(value) = value.filter(|v| v.is_finite() && v.abs() < 9e12) {
            families.gauge(name, help, labels.clone(), value);
        }
    }
}

fn operator_families(families: &mut Families, task: &RunningTask) {
    for (name, operator) in task.metrics.operators() {
        let mut labels = task_labels(task);
        // `v0:bid/0:Filter` names operator `0:Filter` of its vertex.
        let operator_name = name.split_once('/').map_or(name.as_str(), |(_, o)| o);
        labels.push(label("operator", operator_name));
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
        let counters: [(&'static str, &'static str, f64); 4] = [
            (
                "eddy_operator_records_in",
                "Rows the operator took in.",
                load(&operator.records_in),
            ),
            (
                "eddy_operator_records_out",
                "Rows the operator emitted.",
                load(&operator.records_out),
            ),
            (
                "eddy_operator_late_records_dropped",
                "Rows dropped because their window or interval had closed.",
                load(&operator.late_records_dropped),
            ),
            (
                "eddy_operator_parse_errors_skipped",
                "Malformed records skipped by the source.",
                load(&operator.parse_errors_skipped),
            ),
        ];
        for (name, help, value) in counters {
            families.counter(name, help, labels.clone(), value);
        }
        families.gauge(
            "eddy_operator_state_bytes",
            "Bytes of the operator's state at its last checkpoint.",
            labels,
            load(&operator.state_bytes),
        );
    }
}
