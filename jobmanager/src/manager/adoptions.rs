//! Runs taken over from the TaskManagers: a job recovered from the job store waits (as
//! `Restarting`) for its TaskManagers to register with the tasks they still run, and is
//! adopted when its whole last run is there (see [`crate::adoption`]); its restart, due
//! when the wait is over, cancels what was held instead.

use std::collections::BTreeSet;
use std::time::Duration;

use eddy_common::event::StopRequest;
use eddy_common::ids::ExecutionId;
use eddy_proto::v1 as pb;

use super::actions::Action;
use super::runs::start_coordinator;
use super::tasks::reported_task;
use super::{JobManager, State};
use crate::adoption::{Adoption, HeldTask};
use crate::job::{JobRecord, TaskRecord};
use crate::lifecycle::Transition;
use crate::resources::ResourceManager;

impl JobManager {
    /// What adopting a recovered job's last run needs: claims the job's commit log, if it
    /// checkpoints (no earlier JobManager can commit to it any more), and keeps what the
    /// log names; `None` when the log cannot be read now (the restart tries again). The
    /// TaskManagers then have [`JobManager::adoption_window`] to show the run before the
    /// job restarts instead.
    pub(super) async fn adoption_of(&self, job_id: &str, record: &JobRecord) -> Option<Adoption> {
        let adoption = match record.storage.as_ref() {
            // A job without checkpoints has no log to claim and nothing to restart from:
            // its run is adopted, or the job fails.
            None => Adoption::default(),
            Some((_, storage)) => {
                match storage.restart_point(record.unreadable_checkpoints()).await {
                    Ok(point) => Adoption::new(&point),
                    Err(error) => {
                        tracing::warn!(job = %job_id, %error, "cannot read the commit log; the job restarts");
                        return None;
                    }
                }
            }
        };
        Some(adoption)
    }

    /// How long a recovered job waits for its TaskManagers: as long as a TaskManager may
    /// take to find this JobManager (a call to the one before timing out, then its next
    /// heartbeat) and to be missed (the heartbeat timeout). Only a run that cannot be
    /// adopted waits it whole.
    pub(super) fn adoption_window(&self) -> Duration {
        self.config.heartbeat_timeout
            + eddy_proto::JOBMANAGER_CALL_TIMEOUT
            + self.config.heartbeat_interval
    }

    /// Takes the tasks a registering TaskManager still runs: those of a run waiting to be
    /// adopted count towards it (adopting it once it is whole); any other run's (ended,
    /// superseded, unknown here) are cancelled.
    pub(super) fn take_held(
        &self,
        state: &mut State,
        taskmanager: &str,
        held: &[pb::HeldTask],
    ) -> Vec<Action> {
        let mut stale = BTreeSet::new();
        let mut waiting = BTreeSet::new();
        for task in held {
            let Ok((execution, key)) = reported_task(task.task.as_ref(), "a held task") else {
                continue;
            };
            let adoption = state
                .jobs
                .get_mut(&execution.job)
                .filter(|job| job.is_run(&execution))
                .and_then(JobRecord::adoption_mut);
            let Some(adoption) = adoption else {
                stale.insert(execution);
                continue;
            };
            let holder = HeldTask {
                taskmanager: taskmanager.to_string(),
                input_ended: task.input_ended,
            };
            if !adoption.hold(key, holder, task.newest_checkpoint) {
                tracing::warn!(job = %execution, task = %key, %taskmanager, "a task held by two TaskManagers; the run is not adopted");
            }
            waiting.insert(execution.job);
        }
        let mut actions = Vec::new();
        if let Some(tm) = state.resources.get(taskmanager) {
            for execution in stale {
                tracing::info!(job = %execution, %taskmanager, "cancelling tasks of a run this jobmanager does not follow");
                let stop = Action::Stop(tm.gateway.clone(), execution, StopRequest::Cancel);
                actions.push(stop);
            }
        }
        for job_id in waiting {
            actions.extend(self.adopt_if_whole(state, &job_id));
        }
        actions
    }

    /// Adopts a job's waiting run if every task of it is held and its slots are free:
    /// the job runs on without a restart. Its checkpoints continue after every id used, and
    /// its TaskManagers hear (again) of the last committed one, which the JobManager before
    /// may have died before announcing.
    fn adopt_if_whole(&self, state: &mut State, job_id: &str) -> Vec<Action> {
        let Some(job) = state.jobs.get_mut(job_id) else {
            return Vec::new();
        };
        let Some(slots) = job.adoption().and_then(|a| a.slots(&job.graph)) else {
            return Vec::new();
        };
        if !state.resources.claim(&slots) {
            tracing::warn!(job = %job_id, "cannot adopt the run: its slots are taken; it restarts when the wait is over");
            return Vec::new();
        }
        let Some(adoption) = job.take_adoption() else {
            return Vec::new();
        };
        job.transition(job_id, Transition::Adopted);
        if let Some(run) = job.run_mut() {
            run.slots = slots;
        }
        job.tasks = adoption
            .held()
            .iter()
            .map(|(key, held)| {
                let mut record = TaskRecord::new(&held.taskmanager, pb::TaskState::Running);
                record.input_ended = held.input_ended;
                (*key, record)
            })
            .collect();
        job.next_checkpoint = adoption.next_checkpoint();
        start_coordinator(job);
        if job.sources_ended()
            && let Some(coordinator) = job.coordinator_mut()
        {
            coordinator.request_now();
        }
        job.started_at_ms = eddy_common::event::wall_clock();
        job.reason = format!(
            "adopted after a JobManager change: its {} tasks kept running",
            job.tasks.len()
        );
        let committed = adoption.committed.map(|c| c.checkpoint);
        tracing::info!(job = %job_id, attempt = job.attempt, ?committed, next_checkpoint = job.next_checkpoint, "adopted the run its TaskManagers kept running; no restart");
        let execution = job.execution(job_id);
        let mut actions: Vec<Action> = self.persisted(job_id, job).into_iter().collect();
        if let Some(notice) = adoption.committed {
            let gateways = job
                .taskmanagers()
                .into_iter()
                .filter_map(|tm| state.resources.get(&tm));
            actions.extend(
                gateways.map(|tm| Action::Notify(tm.gateway.clone(), execution.clone(), notice)),
            );
        }
        actions
    }
}

/// Gives up a job's waiting adoption of run `execution` (it restarts, or was cancelled):
/// the tasks held of the run are cancelled.
pub(super) fn abandon_adoption(
    adoption: Option<Adoption>,
    execution: &ExecutionId,
    resources: &ResourceManager,
) -> Vec<Action> {
    let Some(adoption) = adoption else {
        return Vec::new();
    };
    if !adoption.held().is_empty() {
        tracing::info!(job = %execution, held = adoption.held().len(), "the run was not adopted; cancelling its tasks");
    }
    adoption
        .taskmanagers()
        .into_iter()
        .filter_map(|tm| resources.get(&tm))
        .map(|tm| Action::Stop(tm.gateway.clone(), execution.clone(), StopRequest::Cancel))
        .collect()
}

/// What a report of a run waiting to be adopted changes: a task that ended can no longer
/// be adopted, a source may have read all its input. False: the job waits for no run.
pub(super) fn adoption_report(
    job: &mut JobRecord,
    key: eddy_common::ids::TaskKey,
    reported: pb::TaskState,
    input_ended: bool,
) -> bool {
    let Some(adoption) = job.adoption_mut() else {
        return false;
    };
    match reported {
        pb::TaskState::Running | pb::TaskState::Scheduled if input_ended => {
            adoption.input_ended(key)
        }
        pb::TaskState::Running | pb::TaskState::Scheduled => {}
        _ => adoption.lost(key),
    }
    true
}

/// The jobs waiting to adopt a run: forget what `taskmanager` (gone) held.
pub(super) fn forget_held_on(state: &mut State, taskmanager: &str) {
    for job in state.jobs.values_mut() {
        if let Some(adoption) = job.adoption_mut() {
            adoption.forget_taskmanager(taskmanager);
        }
    }
}
