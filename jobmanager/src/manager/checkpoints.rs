//! Checkpoints and savepoints of the jobs' runs: triggered when due, acknowledged by every
//! task, committed (their metadata written), announced to the TaskManagers, and kept as
//! savepoints when asked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eddy_common::EddyError;
use eddy_common::checkpoint::{
    CheckpointMetadata, CheckpointStorage, CompletedCheckpoint, StateFile, StateHandle,
};
use eddy_common::event::Barrier;
use eddy_common::ids::{ExecutionId, TaskKey};
use eddy_proto::v1 as pb;
use tokio::sync::oneshot;

use super::actions::Action;
use super::tasks::reported_task;
use super::{Ending, JobManager};
use crate::coordinator::{AckOutcome, Acknowledgement};
use crate::error::JobManagerError;
use crate::job::{JobRecord, Savepoint, SavepointRequest};
use crate::lifecycle::JobState;

fn state_file(file: pb::StateFile) -> StateFile {
    StateFile {
        checkpoint: file.checkpoint,
        file: file.file,
        size: file.size_bytes,
        crc32: file.crc32,
    }
}

/// A task's acknowledgement as the coordinator takes it.
fn acknowledgement(ack: pb::CheckpointAck, task: TaskKey) -> Acknowledgement {
    let result = match ack.error.is_empty() {
        true => Ok(StateHandle {
            vertex: task.vertex,
            subtask: task.subtask,
            file: ack.file,
            size: ack.size_bytes,
            crc32: ack.crc32,
            previous: ack.previous.into_iter().map(state_file).collect(),
            shared: ack.shared.into_iter().map(state_file).collect(),
        }),
        false => Err(ack.error),
    };
    Acknowledgement {
        checkpoint: ack.checkpoint,
        result,
        alignment: Duration::from_millis(ack.alignment_ms),
        input_ended: ack.input_ended,
    }
}

impl JobManager {
    /// Takes a task's checkpoint acknowledgement.
    pub fn acknowledge(self: &Arc<Self>, ack: pb::CheckpointAck) -> Result<(), JobManagerError> {
        self.known_taskmanager(&ack.taskmanager_id)?;
        let (execution, key) = reported_task(ack.task.as_ref(), "an acknowledgement")?;
        let (outcome, actions) = {
            let mut state = self.lock();
            let job = state.job_mut(&execution.job)?;
            if !job.is_run(&execution) {
                return Ok(());
            }
            let Some(coordinator) = job.coordinator_mut() else {
                return Ok(());
            };
            let outcome = coordinator.acknowledge(key, acknowledgement(ack, key));
            let mut actions = Vec::new();
            if let AckOutcome::Complete(metadata) = &outcome
                && let Some((_, storage)) = job.storage.clone()
            {
                actions.push(Action::Commit {
                    execution: execution.clone(),
                    storage,
                    metadata: metadata.clone(),
                    retained: job.graph.config.checkpoints.retained,
                });
            }
            (outcome, actions)
        };
        self.send(actions);
        if outcome == AckOutcome::Aborted(true) {
            self.fail(&execution.job, "too many failed checkpoints".into());
        }
        Ok(())
    }

    /// Aborts `checkpoint` of the run `execution` when a trigger of it was not delivered
    /// (not a failure that counts: see [`crate::coordinator::CheckpointCoordinator::trigger_failed`]).
    pub(super) fn trigger_failed(&self, execution: &ExecutionId, checkpoint: u64, reason: &str) {
        let mut state = self.lock();
        let Some(job) = state.jobs.get_mut(&execution.job) else {
            return;
        };
        if !job.is_run(execution) {
            return;
        }
        if let Some(coordinator) = job.coordinator_mut() {
            coordinator.trigger_failed(checkpoint, reason);
        }
    }

    /// Writes the metadata of a checkpoint every task acknowledged: it completes.
    pub(super) async fn commit(
        self: Arc<Self>,
        execution: ExecutionId,
        storage: CheckpointStorage,
        metadata: CheckpointMetadata,
        retained: usize,
    ) {
        let id = metadata.checkpoint;
        let writing = self.commits.read().await;
        let current = self
            .lock()
            .jobs
            .get(&execution.job)
            .is_some_and(|job| job.is_run(&execution) && job.state() == JobState::Running);
        if !current {
            // The run ended meanwhile; its restart may already have chosen an earlier
            // checkpoint, so this one must not become complete.
            return;
        }
        // Every task acknowledged; the checkpoint is not complete yet.
        eddy_common::failpoint::crash_if("jobmanager.before-metadata", id);
        let written = storage.commit(&metadata).await;
        drop(writing);
        match written {
            Ok(()) => {
                self.committed(&execution, &metadata);
                if let Err(error) = storage.retain(retained, id).await {
                    tracing::warn!(job = %execution.job, %error, "deleting old checkpoints failed");
                }
            }
            Err(EddyError::Fenced(reason)) => {
                self.depose(format!("job {}: {reason}", execution.job))
            }
            Err(error) => self.commit_failed(&execution, id, error.to_string()),
        }
    }

    /// A checkpoint completed: its TaskManagers are told (sinks commit), and a savepoint
    /// waiting for it is kept.
    fn committed(self: &Arc<Self>, execution: &ExecutionId, metadata: &CheckpointMetadata) {
        let checkpoint = metadata.checkpoint;
        // The window two-phase-commit sinks must survive: complete, but nobody told.
        eddy_common::failpoint::crash_if("jobmanager.before-notify", checkpoint);
        let actions = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let Some(job) = state.jobs.get_mut(&execution.job) else {
                return;
            };
            if !job.is_run(execution) {
                return;
            }
            let info = job
                .coordinator_mut()
                .and_then(|c| c.committed(checkpoint))
                .unwrap_or_default();
            tracing::info!(
                job = %execution.job,
                checkpoint,
                size = metadata.size(),
                full_size = metadata.full_size(),
                duration_ms = info.duration_ms,
                alignment_ms = info.alignment_ms,
                "checkpoint complete"
            );
            let notice = CompletedCheckpoint {
                checkpoint,
                end_of_input: metadata.end_of_input,
            };
            let notify: Vec<Action> = job
                .taskmanagers()
                .into_iter()
                .filter_map(|tm| state.resources.get(&tm))
                .map(|tm| Action::Notify(tm.gateway.clone(), execution.clone(), notice))
                .collect();
            with_savepoint(&execution.job, job, metadata, notify)
        };
        self.send(actions);
    }

    fn commit_failed(self: &Arc<Self>, execution: &ExecutionId, checkpoint: u64, reason: String) {
        let must_fail = {
            let mut state = self.lock();
            match state.jobs.get_mut(&execution.job) {
                Some(job) if job.is_run(execution) => job
                    .coordinator_mut()
                    .is_some_and(|c| c.commit_failed(checkpoint, &reason)),
                _ => false,
            }
        };
        tracing::warn!(job = %execution.job, checkpoint, %reason, "writing checkpoint metadata failed");
        if must_fail {
            let reason = format!("checkpoint {checkpoint} could not be committed: {reason}");
            self.fail(&execution.job, reason);
        }
    }

    /// Triggers due checkpoints and aborts timed-out ones; [`Self::run_timers`] calls this
    /// often.
    pub fn tick_checkpoints(self: &Arc<Self>) {
        let now = Instant::now();
        let mut actions = Vec::new();
        let mut failing = Vec::new();
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            for (job_id, job) in state.jobs.iter_mut() {
                if job.coordinator_mut().is_none() {
                    continue;
                }
                match due_barrier(job, now) {
                    Due::TimedOut => failing.push(job_id.clone()),
                    Due::Nothing => {}
                    Due::Barrier(barrier) => {
                        let execution = job.execution(job_id);
                        for tm in job.source_taskmanagers() {
                            if let Some(record) = state.resources.get(&tm) {
                                let gateway = record.gateway.clone();
                                actions.push(Action::Trigger(gateway, execution.clone(), barrier));
                            }
                        }
                    }
                }
            }
        }
        self.send(actions);
        for job_id in failing {
            self.fail(&job_id, "too many failed checkpoints".into());
        }
    }

    /// Asks a running job for a savepoint; the path is sent to `reply` once it is complete.
    /// Returns how long to wait for it.
    fn request_savepoint(
        &self,
        job_id: &str,
        stop: bool,
        reply: oneshot::Sender<Result<String, JobManagerError>>,
    ) -> Result<Duration, JobManagerError> {
        let mut state = self.lock();
        let job = state.running_job_mut(job_id)?;
        let Some(coordinator) = job.coordinator_mut() else {
            return Err(JobManagerError::NotCheckpointing);
        };
        coordinator.request_now();
        match &mut job.savepoint {
            Savepoint::Asked(request) => {
                request.stop |= stop;
                request.replies.push(reply);
            }
            Savepoint::Stopping => return Err(JobManagerError::Stopping),
            Savepoint::None => {
                job.savepoint = Savepoint::Asked(SavepointRequest {
                    checkpoint: None,
                    stop,
                    replies: vec![reply],
                });
            }
        }
        Ok(job
            .graph
            .config
            .checkpoints
            .timeout
            .min(Duration::from_secs(120)))
    }

    /// Takes a savepoint of a running job and answers its path; with `stop`, the job is
    /// then stopped (its sinks commit what the savepoint covers).
    pub async fn savepoint(
        self: &Arc<Self>,
        job_id: &str,
        stop: bool,
    ) -> Result<String, JobManagerError> {
        let (reply, answer) = oneshot::channel();
        let timeout = self.request_savepoint(job_id, stop, reply)?;
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(JobManagerError::SavepointAborted),
            Err(_) => Err(JobManagerError::SavepointTimedOut),
        }
    }

    /// Keeps a completed checkpoint as the savepoint `request` asked for.
    pub(super) async fn keep_savepoint(
        self: Arc<Self>,
        job_id: String,
        storage: CheckpointStorage,
        metadata: CheckpointMetadata,
        request: SavepointRequest,
    ) {
        let result = storage.save_as_savepoint(&metadata).await;
        if let Err(EddyError::Fenced(reason)) = &result {
            self.depose(format!("job {job_id}: {reason}"));
        }
        let ok = result.is_ok();
        match &result {
            Ok(path) => tracing::info!(job = %job_id, %path, "savepoint complete"),
            Err(error) => {
                tracing::warn!(job = %job_id, %error, "savepoint failed");
                if let Some(job) = self.lock().jobs.get_mut(&job_id)
                    && matches!(job.savepoint, Savepoint::Stopping)
                {
                    job.savepoint = Savepoint::None;
                }
            }
        }
        if request.stop && ok {
            let _ = self.end_on_request(&job_id, Ending::StoppedWithSavepoint);
        }
        for reply in request.replies {
            let answer = match &result {
                Ok(path) => Ok(path.clone()),
                Err(error) => Err(JobManagerError::SavepointFailed(error.to_string())),
            };
            let _ = reply.send(answer);
        }
    }
}

/// What a running job's checkpointing asks for now.
enum Due {
    Nothing,
    /// Too many checkpoints timed out: the run fails.
    TimedOut,
    /// A checkpoint to trigger.
    Barrier(Barrier),
}

/// Whether a checkpoint of `job` is due (for its savepoint too), or its checkpoints failed.
fn due_barrier(job: &mut JobRecord, now: Instant) -> Due {
    let Some((coordinator, savepoint)) = job.checkpointing_mut() else {
        return Due::Nothing;
    };
    if coordinator.check_timeout(now) {
        return Due::TimedOut;
    }
    let mut savepoint = match savepoint {
        Savepoint::Stopping => return Due::Nothing,
        Savepoint::Asked(request) => Some(request),
        Savepoint::None => None,
    };
    if let Some(savepoint) = savepoint.as_deref_mut()
        && savepoint.checkpoint.is_some()
        && coordinator.idle()
    {
        // Its checkpoint failed (a completed one takes the request): the next one, aligned
        // again, serves it.
        savepoint.checkpoint = None;
        coordinator.request_now();
    }
    let Some(barrier) = coordinator.due(now) else {
        return Due::Nothing;
    };
    if let Some(savepoint) = savepoint
        && savepoint.checkpoint.is_none()
    {
        savepoint.checkpoint = Some(barrier.checkpoint);
    }
    Due::Barrier(barrier)
}

/// The actions after checkpoint `metadata` completed (`notify`: telling the TaskManagers),
/// with the savepoint it serves. Stopping with a savepoint, the sinks learn the checkpoint
/// completed before the job is stopped, so what it covers is committed when the job ends;
/// nothing after it is checkpointed.
fn with_savepoint(
    job_id: &str,
    job: &mut JobRecord,
    metadata: &CheckpointMetadata,
    mut notify: Vec<Action>,
) -> Vec<Action> {
    let serves = matches!(&job.savepoint,
        Savepoint::Asked(request) if request.checkpoint == Some(metadata.checkpoint));
    let (true, Some((_, storage))) = (serves, job.storage.as_ref()) else {
        return notify;
    };
    let Savepoint::Asked(savepoint) = std::mem::take(&mut job.savepoint) else {
        return notify;
    };
    let stop = savepoint.stop;
    let keep = Action::Savepoint(
        job_id.to_string(),
        storage.clone(),
        metadata.clone(),
        savepoint,
    );
    notify.push(keep);
    if stop {
        job.savepoint = Savepoint::Stopping;
        vec![Action::InOrder(notify)]
    } else {
        notify
    }
}
