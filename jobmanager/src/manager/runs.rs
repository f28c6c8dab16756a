//! A job's runs: scheduled into free slots, ended, failed, and restarted from the latest
//! checkpoint.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use eddy_common::EddyError;
use eddy_common::checkpoint::RestartPoint;
use eddy_common::config::restart::RestartDecision;
use eddy_common::event::StopRequest;
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_planner::plan::fingerprint::PlanFingerprint;
use eddy_proto::v1 as pb;

use super::actions::Action;
use super::adoptions::abandon_adoption;
use super::{JobManager, State};
use crate::coordinator::CheckpointCoordinator;
use crate::gateway::Deployment;
use crate::job::{JobRecord, TaskRecord};
use crate::lifecycle::{JobState, Transition};
use crate::resources::ResourceManager;

/// Ends the current run of a job: frees its slots and, with `stop`, stops its tasks that
/// may still run. The caller moves the job to its new state.
pub(super) fn end_run(
    job: &mut JobRecord,
    job_id: &str,
    resources: &mut ResourceManager,
    stop: Option<StopRequest>,
) -> Vec<Action> {
    if job.state() != JobState::Running {
        return Vec::new();
    }
    let execution = job.execution(job_id);
    resources.release(&job.close_run());
    let Some(how) = stop else {
        return Vec::new();
    };
    job.taskmanagers()
        .into_iter()
        .filter_map(|tm| resources.get(&tm))
        .map(|tm| Action::Stop(tm.gateway.clone(), execution.clone(), how))
        .collect()
}

impl JobManager {
    /// Starts every queued job that fits into the free slots, in submission order.
    pub(super) fn schedule(self: &Arc<Self>) {
        let mut actions = Vec::new();
        {
            let mut guard = self.lock();
            let State {
                resources,
                jobs,
                order,
            } = &mut *guard;
            for job_id in order.iter() {
                let Some(job) = jobs.get_mut(job_id) else {
                    continue;
                };
                if job.state() != JobState::Created {
                    continue;
                }
                let slots = match resources.allocate(job.graph.slots_needed()) {
                    Ok(slots) => slots,
                    Err(shortage) => {
                        job.reason = shortage.to_string();
                        continue;
                    }
                };
                job.transition(job_id, Transition::Scheduled);
                let deploys = deployments(job, job_id, resources, &slots);
                let slot_count = slots.len();
                if let Some(run) = job.run_mut() {
                    run.slots = slots;
                }
                job.reason = String::new();
                job.started_at_ms = eddy_common::event::wall_clock();
                let record = self.record_now(job_id, job);
                tracing::info!(job = %job_id, attempt = job.attempt, slots = slot_count, restored_from = job.restore_from, "job deployed");
                actions.push(Action::Start {
                    execution: job.execution(job_id),
                    record,
                    deploys,
                });
            }
        }
        self.send(actions);
    }

    /// A run of a job failed: restart it from its latest checkpoint when its restart
    /// strategy allows, or fail it for good.
    pub(super) fn fail(self: &Arc<Self>, job_id: &str, reason: String) {
        self.fail_attempt(job_id, None, reason);
    }

    /// Fails the job's run as [`JobManager::fail`] does; only run `attempt` when it is
    /// given.
    fn fail_attempt(self: &Arc<Self>, job_id: &str, attempt: Option<u32>, reason: String) {
        let actions = {
            let mut guard = self.lock();
            let State {
                resources, jobs, ..
            } = &mut *guard;
            let Some(job) = jobs.get_mut(job_id) else {
                return;
            };
            if !job.state().allows(Transition::Failed { restart: true })
                || attempt.is_some_and(|attempt| attempt != job.attempt)
            {
                return;
            }
            let decision = match job.storage {
                Some(_) => job.restart_decision(),
                None => RestartDecision::GiveUp {
                    reason: "the job keeps no checkpoints to restart from".into(),
                },
            };
            let restart = matches!(decision, RestartDecision::Restart { .. });
            let mut actions = end_run(job, job_id, resources, Some(StopRequest::Cancel));
            job.transition(job_id, Transition::Failed { restart });
            match decision {
                RestartDecision::Restart { delay } => {
                    job.count_restart(&reason);
                    job.reason = format!("{reason}; restart {} in {delay:?}", job.restarts);
                    tracing::warn!(job = %job_id, %reason, restart = job.restarts, ?delay, "job failed, restarting");
                    actions.push(Action::Restart(job.execution(job_id), delay));
                }
                RestartDecision::GiveUp { reason: why } => {
                    job.reason = format!("{reason}; not restarted: {why}");
                    tracing::warn!(job = %job_id, %reason, not_restarted = %why, "job failed");
                }
            }
            actions.extend(self.persisted(job_id, job));
            actions
        };
        self.send(actions);
        self.schedule();
    }

    /// Fails a restarting job without a further restart (`execution`: the run that ended).
    fn fail_for_good(self: &Arc<Self>, execution: &ExecutionId, reason: String) {
        let actions = {
            let mut guard = self.lock();
            let State {
                resources, jobs, ..
            } = &mut *guard;
            let Some(job) = jobs.get_mut(&execution.job) else {
                return;
            };
            if !job.is_run(execution) || !job.state().allows(Transition::Unrestorable) {
                return;
            }
            // The adoption waited for ends with the restarting state.
            let mut actions = abandon_adoption(job.take_adoption(), execution, resources);
            job.transition(&execution.job, Transition::Unrestorable);
            tracing::error!(job = %execution.job, %reason, "job failed; it cannot restart");
            job.reason = reason;
            actions.extend(self.persisted(&execution.job, job));
            actions
        };
        self.send(actions);
    }

    /// A failure reported for a run: applies only to the job's current run.
    pub(super) fn execution_failed(self: &Arc<Self>, execution: &ExecutionId, reason: String) {
        self.fail_attempt(&execution.job, Some(execution.attempt), reason);
    }

    /// Restarts the failed run `execution` after `backoff`, from the newest checkpoint.
    pub(super) async fn restart(self: Arc<Self>, execution: ExecutionId, backoff: Duration) {
        // While waiting, find TaskManagers that are gone, so that the restart is not placed
        // on one of them (and lost) before its heartbeats time out.
        let ((), gone) = tokio::join!(
            tokio::time::sleep(backoff),
            self.refusing_taskmanagers(backoff)
        );
        self.lose_taskmanagers(gone, "its port refuses connections");
        let (storage, unreadable) = {
            let state = self.lock();
            match state.jobs.get(&execution.job) {
                Some(job) if job.state() == JobState::Restarting && job.is_run(&execution) => {
                    let storage = job.storage.as_ref().map(|(_, s)| s.clone());
                    (storage, job.unreadable_checkpoints())
                }
                _ => return,
            }
        };
        let Some(storage) = storage else {
            // Only a recovered job that waited to adopt its run comes here without checkpoints.
            let reason = "the JobManager changed, the run did not run on whole, and the job \
                          keeps no checkpoints to restart from";
            self.fail_for_good(&execution, reason.into());
            return;
        };
        // Metadata being written now is waited for, so that it counts.
        drop(self.commits.write().await);
        let point = match storage.restart_point(unreadable).await {
            Ok(point) => point,
            Err(error @ EddyError::UnrestorableCheckpoint { .. }) => {
                self.fail_for_good(&execution, error.to_string());
                return;
            }
            Err(EddyError::Fenced(reason)) => {
                self.depose(format!("job {}: {reason}", execution.job));
                return;
            }
            Err(error) => {
                // Restarting from an older state would replay what sinks committed: try
                // again later.
                tracing::warn!(job = %execution.job, %error, "cannot list checkpoints; retrying the restart");
                let retry = backoff.max(Duration::from_secs(1));
                self.send(vec![Action::Restart(execution, retry)]);
                return;
            }
        };
        let actions = self.restart_from(&execution, point);
        self.send(actions);
        self.schedule();
    }

    /// Moves a restarting job to its next attempt, restoring `point`; cancels the tasks
    /// held of its last run if it waited to adopt it.
    fn restart_from(&self, execution: &ExecutionId, point: RestartPoint) -> Vec<Action> {
        let mut guard = self.lock();
        let State {
            resources, jobs, ..
        } = &mut *guard;
        let Some(job) = jobs.get_mut(&execution.job) else {
            return Vec::new();
        };
        if !job.is_run(execution) || !job.state().allows(Transition::RestartDue) {
            return Vec::new();
        }
        // The adoption waited for ends with the restarting state.
        let adoption = job.take_adoption();
        let waited_to_adopt = adoption.is_some();
        let actions = abandon_adoption(adoption, execution, resources);
        job.transition(&execution.job, Transition::RestartDue);
        if waited_to_adopt {
            // The run the JobManager before left could not be adopted: this is a restart.
            job.count_restart("the JobManager changed and the run did not run on whole");
        }
        job.attempt += 1;
        job.restore_from = point.checkpoint.map_or(0, |m| m.checkpoint);
        // Checkpoint ids only grow, also across JobManager restarts (which do not keep the
        // counter): the newest checkpoint is always the latest, and no id an earlier
        // attempt used (even for a checkpoint that never completed) is taken again.
        job.next_checkpoint = job
            .next_checkpoint
            .max(job.restore_from + 1)
            .max(point.newest_id + 1);
        job.reason = format!("restarting from checkpoint {}", job.restore_from);
        if let Some(restart) = job.restart_history.last_mut() {
            restart.restored_from = job.restore_from;
        }
        tracing::info!(job = %execution.job, attempt = job.attempt, checkpoint = job.restore_from, "restarting");
        actions
    }
}

/// Sets up the checkpoint coordinator of a job's run (its tasks recorded), numbering from
/// the job's next checkpoint; returns the parallelism of each vertex.
pub(super) fn start_coordinator(job: &mut JobRecord) -> Vec<usize> {
    let vertex_parallelism: Vec<usize> = job.graph.vertices.iter().map(|v| v.parallelism).collect();
    let coordinator = CheckpointCoordinator::new(
        &job.graph.config.checkpoints,
        job.tasks.keys().copied().collect(),
        vertex_parallelism.clone(),
        job.next_checkpoint,
    );
    if let Some(run) = job.run_mut() {
        run.coordinator = coordinator;
    }
    vertex_parallelism
}

/// The deployments of a job's next run into `slots` (slot `k` runs subtask `k` of every
/// vertex), with its task records and checkpoint coordinator set up.
fn deployments(
    job: &mut JobRecord,
    job_id: &str,
    resources: &ResourceManager,
    slots: &[String],
) -> Vec<Action> {
    let execution = job.execution(job_id);
    let mut locations = Vec::new();
    let mut per_tm: BTreeMap<String, Vec<pb::TaskId>> = BTreeMap::new();
    job.tasks.clear();
    for vertex in &job.graph.vertices {
        for (subtask, tm) in slots.iter().take(vertex.parallelism).enumerate() {
            let task = pb::TaskId {
                execution_id: execution.to_string(),
                vertex: vertex.id as u32,
                subtask: subtask as u32,
            };
            let address = resources.get(tm).map(|t| t.address.clone());
            locations.push(pb::TaskLocation {
                task: Some(task.clone()),
                address: address.unwrap_or_default(),
            });
            per_tm.entry(tm.clone()).or_default().push(task);
            let record = TaskRecord::new(tm, pb::TaskState::Scheduled);
            job.tasks.insert(TaskKey::new(vertex.id, subtask), record);
        }
    }
    let vertex_parallelism = start_coordinator(job);
    let (checkpoint_root, checkpoint_job) = match &job.storage {
        Some((root, _)) => (root.clone(), job_id.to_string()),
        None => (String::new(), String::new()),
    };
    let template = pb::DeployTasksRequest {
        execution_id: execution.to_string(),
        sql: job.sql.clone(),
        options: job.options.clone(),
        vertex_parallelism: vertex_parallelism.iter().map(|p| *p as u32).collect(),
        tasks: Vec::new(),
        locations,
        checkpoint_root,
        checkpoint_job,
        restore_checkpoint: job.restore_from,
        restore_path: match job.restore_from {
            0 => job.restore_path.clone().unwrap_or_default(),
            _ => String::new(),
        },
        plan: Some(fingerprint_message(&job.graph.fingerprint())),
    };
    per_tm
        .into_iter()
        .filter_map(|(tm, tasks)| {
            let gateway = resources.get(&tm)?.gateway.clone();
            let request = pb::DeployTasksRequest {
                tasks,
                ..template.clone()
            };
            Some(Action::Deploy {
                taskmanager: tm,
                gateway,
                deployment: Box::new(Deployment {
                    execution: execution.clone(),
                    request,
                    graph: job.graph.clone(),
                }),
            })
        })
        .collect()
}

/// A plan fingerprint as the deployment request carries it.
fn fingerprint_message(fingerprint: &PlanFingerprint) -> pb::PlanFingerprint {
    pb::PlanFingerprint {
        build: fingerprint.build.clone(),
        plan: fingerprint.plan.clone(),
        state_formats: fingerprint.state_formats.clone(),
    }
}
