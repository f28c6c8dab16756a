//! The JobManager's `GET /metrics`: per job its state, restarts and checkpoints, and the
//! cluster's TaskManagers and slots. (Task metrics are on each TaskManager's `/metrics`,
//! measured where the tasks run.)

use eddy_common::metrics::exposition::{Families, label};
use eddy_proto::v1 as pb;

use super::model::job_state;
use crate::manager::JobManager;

/// The job states, as `eddy_job_state{state}` lists them.
const STATES: [pb::JobState; 7] = [
    pb::JobState::Created,
    pb::JobState::Running,
    pb::JobState::Restarting,
    pb::JobState::Finished,
    pb::JobState::Cancelling,
    pb::JobState::Cancelled,
    pb::JobState::Failed,
];

/// Every metric of the JobManager, in the Prometheus text format.
pub fn render(jm: &JobManager) -> String {
    let mut families = Families::default();
    cluster_families(&mut families, &jm.taskmanagers());
    for summary in jm.list() {
        if let Ok(job) = jm.job(&summary.job_id) {
            job_families(&mut families, &job);
        }
    }
    families.render()
}

fn cluster_families(families: &mut Families, taskmanagers: &[pb::TaskManagerInfo]) {
    families.gauge(
        "eddy_taskmanagers",
        "TaskManagers registered with the JobManager.",
        vec![],
        taskmanagers.len() as f64,
    );
    for tm in taskmanagers {
        for (state, slots) in [("free", tm.free_slots), ("used", tm.slots - tm.free_slots)] {
            families.gauge(
                "eddy_taskmanager_slots",
                "Slots of a registered TaskManager, by state.",
                vec![
                    label("taskmanager", &tm.taskmanager_id),
                    label("state", state),
                ],
                f64::from(slots),
            );
        }
    }
}

fn job_families(families: &mut Families, job: &pb::JobInfo) {
    // `job_id`, not `job`: Prometheus gives its scrape targets a `job` label.
    let labels = || vec![label("job_id", &job.job_id), label("job_name", &job.name)];
    for state in STATES {
        let mut labels = labels();
        labels.push(label("state", job_state(state as i32)));
        let current = f64::from(u8::from(job.state == state as i32));
        families.gauge(
            "eddy_job_state",
            "1 for the job's current state, 0 for the others.",
            labels,
            current,
        );
    }
    families.counter(
        "eddy_job_restarts",
        "Times the job restarted after a failure.",
        labels(),
        f64::from(job.restarts),
    );
    for (result, count) in [
        ("completed", job.checkpoints_completed),
        ("failed", job.checkpoints_failed),
    ] {
        let mut labels = labels();
        labels.push(label("result", result));
        families.counter(
            "eddy_job_checkpoints",
            "Checkpoints that completed or failed.",
            labels,
            count as f64,
        );
    }
    let completed = job
        .checkpoints
        .iter()
        .rev()
        .find(|c| c.state == pb::CheckpointState::Completed as i32);
    let Some(last) = completed else { return };
    let gauges: [(&'static str, &'static str, f64); 5] = [
        (
            "eddy_job_last_completed_checkpoint_id",
            "The id of the newest completed checkpoint.",
            last.id as f64,
        ),
        (
            "eddy_job_last_checkpoint_duration_seconds",
            "From trigger to commit, of the newest completed checkpoint.",
            last.duration_ms as f64 / 1000.0,
        ),
        (
            "eddy_job_last_checkpoint_size_bytes",
            "Bytes written for the newest completed checkpoint.",
            last.size_bytes as f64,
        ),
        (
            "eddy_job_last_checkpoint_full_size_bytes",
            "Bytes a restore from the newest completed checkpoint reads.",
            last.full_size_bytes as f64,
        ),
        (
            "eddy_job_last_checkpoint_alignment_seconds",
            "The longest barrier alignment of the newest completed checkpoint.",
            last.alignment_ms as f64 / 1000.0,
        ),
    ];
    for (name, help, value) in gauges {
        families.gauge(name, help, labels(), value);
    }
}
