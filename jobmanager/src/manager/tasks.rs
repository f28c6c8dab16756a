//! TaskManagers registering, heartbeating and being lost, and what their tasks report.

use std::sync::Arc;
use std::time::Duration;

use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_proto::v1 as pb;

use super::adoptions::{adoption_report, forget_held_on};
use super::runs::end_run;
use super::{JobManager, State};
use crate::error::JobManagerError;
use crate::gateway::TaskExecutorGateway;
use crate::lifecycle::{JobState, Transition};

/// How long a consequential task failure waits for the failure that caused it.
const CAUSE_GRACE: Duration = Duration::from_secs(1);

/// The run and task a message (`what`: "a report", ...) names.
pub(super) fn reported_task(
    task: Option<&pb::TaskId>,
    what: &str,
) -> Result<(ExecutionId, TaskKey), JobManagerError> {
    let task = task.ok_or_else(|| JobManagerError::BadMessage(format!("{what} without a task")))?;
    let execution = task
        .execution_id
        .parse::<ExecutionId>()
        .map_err(|e| JobManagerError::BadMessage(e.to_string()))?;
    Ok((
        execution,
        TaskKey::new(task.vertex as usize, task.subtask as usize),
    ))
}

/// What a task report means for its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReportOutcome {
    /// Nothing changes for the job.
    Nothing,
    /// The run failed.
    Failed,
    /// Every task finished.
    Finished,
    /// Every task ended after the job was drained.
    Stopped,
}

/// The running jobs with a task on `taskmanager`.
fn jobs_on(state: &State, taskmanager: &str) -> Vec<String> {
    state
        .jobs
        .iter()
        .filter(|(_, job)| {
            job.state() == JobState::Running
                && job.tasks.values().any(|t| t.taskmanager == taskmanager)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

impl JobManager {
    /// Registers (or re-registers) a TaskManager reached through `gateway`.
    pub fn register(
        self: &Arc<Self>,
        request: pb::RegisterTaskManagerRequest,
        gateway: Arc<dyn TaskExecutorGateway>,
    ) -> Result<(), JobManagerError> {
        let id = request.taskmanager_id;
        if id.is_empty() || request.slots == 0 {
            return Err(JobManagerError::BadMessage(
                "a TaskManager needs an id and at least one slot".into(),
            ));
        }
        let (lost, held) = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let slots = request.slots as usize;
            let again = state
                .resources
                .register(&id, request.address.clone(), slots, gateway);
            state
                .resources
                .set_http_address(&id, request.http_address.clone());
            // A TaskManager registering again has lost whatever it ran.
            let lost = match again {
                true => jobs_on(state, &id),
                false => Vec::new(),
            };
            (lost, self.take_held(state, &id, &request.held))
        };
        tracing::info!(%id, address = %request.address, slots = request.slots, held = request.held.len(), "taskmanager registered");
        self.send(held);
        for job_id in lost {
            self.fail(&job_id, format!("TaskManager {id} restarted"));
        }
        self.schedule();
        Ok(())
    }

    /// Takes a heartbeat with the counters of a TaskManager's tasks.
    pub fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), JobManagerError> {
        let mut state = self.lock();
        let tm = &request.taskmanager_id;
        if !state.resources.heartbeat(tm) {
            return Err(JobManagerError::UnknownTaskManager(tm.clone()));
        }
        for counters in &request.tasks {
            let Ok((execution, key)) = reported_task(counters.task.as_ref(), "counters") else {
                continue;
            };
            if let Some(job) = state.jobs.get_mut(&execution.job)
                && job.is_run(&execution)
                && let Some(record) = job.tasks.get_mut(&key)
                && &record.taskmanager == tm
            {
                if record.state == pb::TaskState::Scheduled {
                    record.state = pb::TaskState::Running;
                }
                record.records_in = counters.records_in;
                record.records_out = counters.records_out;
                record
                    .meter
                    .record(counters.clone(), std::time::Instant::now());
            }
        }
        Ok(())
    }

    /// Rejects calls from TaskManagers that have not registered.
    pub(super) fn known_taskmanager(&self, id: &str) -> Result<(), JobManagerError> {
        match self.lock().resources.contains(id) {
            true => Ok(()),
            false => Err(JobManagerError::UnknownTaskManager(id.to_string())),
        }
    }

    /// Takes a task's new state.
    pub fn report(self: &Arc<Self>, report: pb::TaskStateReport) -> Result<(), JobManagerError> {
        self.known_taskmanager(&report.taskmanager_id)?;
        let (execution, key) = reported_task(report.task.as_ref(), "a report")?;
        let reported = pb::TaskState::try_from(report.state).map_err(|_| {
            JobManagerError::BadMessage(format!("unknown task state {}", report.state))
        })?;
        let (outcome, final_checkpoint) = self.record_report(&execution, key, reported, &report)?;
        if final_checkpoint {
            // The final checkpoint need not wait for the next tick.
            self.tick_checkpoints();
        }
        let job_id = &execution.job;
        match outcome {
            ReportOutcome::Nothing => {}
            ReportOutcome::Failed => {
                let reason = match report.error.as_str() {
                    "" => format!(
                        "task {key} was stopped by TaskManager {}",
                        report.taskmanager_id
                    ),
                    error => format!("task {key} failed: {error}"),
                };
                match report.consequential {
                    true => self.fail_unless_caused(execution, reason),
                    false => self.fail(job_id, reason),
                }
            }
            ReportOutcome::Finished | ReportOutcome::Stopped => {
                self.end(job_id, outcome);
            }
        }
        Ok(())
    }

    /// A task of `execution` failed because a task it exchanges data with is gone: that
    /// task's own report (or the loss of its TaskManager) names the cause, and may arrive
    /// a moment later. The run fails with this reason only if nothing failed it by then.
    fn fail_unless_caused(self: &Arc<Self>, execution: ExecutionId, reason: String) {
        let manager = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(CAUSE_GRACE).await;
            manager.execution_failed(&execution, reason);
        });
    }

    /// Records a report in the job's task; what it means for the job, and whether the
    /// job's final checkpoint is due.
    fn record_report(
        &self,
        execution: &ExecutionId,
        key: TaskKey,
        reported: pb::TaskState,
        report: &pb::TaskStateReport,
    ) -> Result<(ReportOutcome, bool), JobManagerError> {
        let mut state = self.lock();
        let job = state.job_mut(&execution.job)?;
        if !job.is_run(execution) {
            tracing::info!(job = %execution.job, attempt = execution.attempt, current = job.attempt, "fenced a report from an earlier attempt");
            return Ok((ReportOutcome::Nothing, false));
        }
        if adoption_report(job, key, reported, report.input_ended) {
            return Ok((ReportOutcome::Nothing, false));
        }
        let record = job
            .tasks
            .get_mut(&key)
            .filter(|r| r.taskmanager == report.taskmanager_id)
            .ok_or_else(|| {
                JobManagerError::BadMessage("that task does not run on that TaskManager".into())
            })?;
        record.state = reported;
        record.records_in = report.records_in;
        record.records_out = report.records_out;
        record.input_ended |= report.input_ended;
        if job.state() != JobState::Running {
            return Ok((ReportOutcome::Nothing, false));
        }
        let mut final_checkpoint = false;
        if report.input_ended
            && job.sources_ended()
            && let Some(coordinator) = job.coordinator_mut()
        {
            coordinator.request_now();
            final_checkpoint = true;
        }
        if reported == pb::TaskState::Finished
            && let Some(coordinator) = job.coordinator_mut()
        {
            coordinator.task_finished();
        }
        let draining = job.run().is_some_and(|run| run.draining);
        let ended = |t: &crate::job::TaskRecord| {
            t.state == pb::TaskState::Finished || (draining && t.state == pb::TaskState::Stopped)
        };
        let outcome = match reported {
            // A stopped task of a drained job ended as it was told to.
            pb::TaskState::Stopped if draining => ReportOutcome::Nothing,
            // A task the JobManager did not ask to stop was stopped by its TaskManager
            // (shutting down), or by a stopped or cancelled task upstream: the job cannot
            // go on without it.
            pb::TaskState::Failed | pb::TaskState::Cancelled | pb::TaskState::Stopped => {
                ReportOutcome::Failed
            }
            _ => ReportOutcome::Nothing,
        };
        if outcome == ReportOutcome::Nothing && job.tasks.values().all(ended) {
            let stopped = job
                .tasks
                .values()
                .any(|t| t.state == pb::TaskState::Stopped);
            return Ok((
                match stopped {
                    true => ReportOutcome::Stopped,
                    false => ReportOutcome::Finished,
                },
                final_checkpoint,
            ));
        }
        Ok((outcome, final_checkpoint))
    }

    /// Every task of a job's run ended: it finished, or it was drained.
    fn end(self: &Arc<Self>, job_id: &str, outcome: ReportOutcome) {
        let actions = {
            let mut guard = self.lock();
            let State {
                resources, jobs, ..
            } = &mut *guard;
            let mut actions = Vec::new();
            if let Some(job) = jobs.get_mut(job_id) {
                actions = end_run(job, job_id, resources, None);
                let transition = match outcome {
                    ReportOutcome::Stopped => Transition::Stopped,
                    _ => Transition::AllTasksFinished,
                };
                if job.transition(job_id, transition) {
                    if outcome == ReportOutcome::Stopped {
                        job.reason = "stopped on request: sources ended, sinks flushed".into();
                    }
                    actions.extend(self.persisted(job_id, job));
                }
            }
            actions
        };
        tracing::info!(job = %job_id, ?outcome, "job ended");
        self.send(actions);
        self.schedule();
    }

    /// Fails the runs of TaskManagers silent for longer than the heartbeat timeout, and
    /// forgets those TaskManagers.
    pub fn expire_silent(self: &Arc<Self>) {
        let silent = self.lock().resources.silent(self.config.heartbeat_timeout);
        self.lose_taskmanagers(silent, "no heartbeat");
    }

    /// Forgets TaskManagers known to be gone (`why`), failing the jobs that ran on them.
    pub(super) fn lose_taskmanagers(self: &Arc<Self>, ids: Vec<String>, why: &str) {
        let lost: Vec<(String, Vec<String>)> = {
            let mut state = self.lock();
            let mut lost = Vec::new();
            for id in ids {
                if state.resources.contains(&id) {
                    let jobs = jobs_on(&state, &id);
                    state.resources.remove(&id);
                    forget_held_on(&mut state, &id);
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
    /// the heartbeat timeout: it may be behind a slow or partitioned network. TaskManagers
    /// in this process (no network address) are never lost this way.
    pub(super) async fn refusing_taskmanagers(&self, limit: Duration) -> Vec<String> {
        let addresses = self.lock().resources.addresses();
        let probes = addresses.into_iter().map(|(id, address)| async move {
            let (_, authority) = address.split_once("://")?;
            let authority = authority.trim_end_matches('/').to_string();
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
}
