//! The JobManager: takes SQL jobs, plans them, schedules their subtasks into the slots of
//! TaskManagers, and follows them to their end: in-process for the embedded cluster
//! ([`JobManager`]), or as a daemon over gRPC ([`cluster`], [`daemon`]).

pub mod cluster;
pub mod coordinator;
pub mod daemon;
pub mod job;
pub mod scheduler;
pub mod store;

use std::sync::Arc;
use std::time::Instant;

use eddy_common::metrics::JobMetrics;
use eddy_common::plan::{JobGraph, plan_job};
use eddy_common::sql::compile;
use eddy_common::{EddyError, Result};
use eddy_taskmanager::exchange::LocalChannels;
use eddy_taskmanager::{StopSignal, TaskDeployment, TaskEnd, TaskManager};
use futures::future::select_all;

pub use job::{JobOutcome, JobStatus};

/// Events a channel holds before its sender waits: the bound on in-flight data per channel.
pub const CHANNEL_CAPACITY: usize = 8;

/// Parses and plans a SQL script into a job graph. `overrides` (from the command line)
/// win over the script's `SET` statements.
pub fn plan(sql: &str, overrides: &[(String, String)]) -> Result<JobGraph> {
    let compiled = compile(sql, overrides)?;
    plan_job(&compiled)
}

/// A JobManager with the TaskManagers registered to it.
#[derive(Debug)]
pub struct JobManager {
    taskmanagers: Vec<Arc<TaskManager>>,
}

impl JobManager {
    /// A JobManager over `taskmanagers`.
    pub fn new(taskmanagers: Vec<Arc<TaskManager>>) -> Self {
        JobManager { taskmanagers }
    }

    /// Total slots of all TaskManagers.
    pub fn total_slots(&self) -> usize {
        self.taskmanagers.iter().map(|t| t.slots()).sum()
    }

    /// Runs a job to its end: every source has ended (or `stop` was set and the sources
    /// stopped), or a task failed, which cancels the others.
    pub async fn run(&self, graph: JobGraph, stop: StopSignal) -> Result<JobOutcome> {
        let graph = Arc::new(graph);
        let started = Instant::now();
        let placement = scheduler::place(&graph, &self.taskmanagers)?;
        let metrics = Arc::new(JobMetrics::default());
        let mut channels = LocalChannels::for_job(&graph, CHANNEL_CAPACITY);
        let mut handles = Vec::with_capacity(placement.len());
        // The job's id names what its sinks write; this run is its only attempt.
        let job_id = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis())
                .unwrap_or(0)
        );
        for assignment in &placement {
            let deployment = TaskDeployment {
                graph: graph.clone(),
                vertex: assignment.vertex,
                subtask: assignment.subtask,
                inputs: channels.take_inputs(assignment.vertex, assignment.subtask),
                outputs: channels.take_outputs(assignment.vertex, assignment.subtask),
                metrics: metrics.clone(),
                counters: Default::default(),
                checkpointing: None,
                restore: None,
                job: job_id.clone(),
                attempt: "0".into(),
            };
            let taskmanager = &self.taskmanagers[assignment.taskmanager];
            handles.push(taskmanager.deploy(deployment, stop.clone()));
        }
        tracing::info!(
            job = %graph.config.name,
            subtasks = handles.len(),
            slots = graph.slots_needed(),
            "job running"
        );
        let running_after = started.elapsed();
        let mut stopped = false;
        while !handles.is_empty() {
            let (result, _, rest) = select_all(handles).await;
            handles = rest;
            let failure = match result {
                Ok(Ok(TaskEnd::Finished)) => None,
                Ok(Ok(TaskEnd::Stopped | TaskEnd::Cancelled)) => {
                    stopped = true;
                    None
                }
                Ok(Err(e)) => Some(e),
                Err(join) => Some(EddyError::Runtime(format!("a task panicked: {join}"))),
            };
            if let Some(error) = failure {
                for handle in &handles {
                    handle.abort();
                }
                tracing::info!(job = %graph.config.name, %error, "job failed");
                return Err(error);
            }
        }
        let status = if stopped {
            JobStatus::Cancelled
        } else {
            JobStatus::Finished
        };
        tracing::info!(job = %graph.config.name, ?status, elapsed = ?started.elapsed(), "job ended");
        Ok(JobOutcome {
            status,
            metrics,
            time_to_running: running_after,
            duration: started.elapsed(),
        })
    }
}
