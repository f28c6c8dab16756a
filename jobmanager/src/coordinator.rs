//! The checkpoint coordinator of one job run: decides when to trigger, collects the
//! tasks' acknowledgements, and says when a checkpoint is ready to commit. It does no I/O;
//! the cluster sends its triggers and writes its commits.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use eddy_common::checkpoint::{CheckpointMetadata, StateHandle};
use eddy_common::config::checkpointing::CheckpointConfig;
use eddy_common::event::Barrier;
use eddy_common::ids::TaskKey;
use eddy_proto::v1 as pb;

/// Checkpoints kept in the job's history for `eddy status --checkpoints`.
pub const HISTORY: usize = 32;

/// What a task reported for a checkpoint.
#[derive(Debug, Clone)]
pub struct Acknowledgement {
    /// The checkpoint.
    pub checkpoint: u64,
    /// Its stored snapshot, or why it declined.
    pub result: Result<StateHandle, String>,
    /// Its barrier alignment.
    pub alignment: Duration,
    /// The task's source had read all its input (true for tasks without a source).
    pub input_ended: bool,
}

/// What an acknowledgement led to.
#[derive(Debug, PartialEq)]
pub enum AckOutcome {
    /// Not for the pending checkpoint (late, or of an aborted one).
    Ignored,
    /// Recorded; other tasks are still to acknowledge.
    Waiting,
    /// Every task has acknowledged: write this metadata to commit.
    Complete(CheckpointMetadata),
    /// A task declined: the checkpoint was aborted. `true` when failures exceed the
    /// tolerated number and the job must fail.
    Aborted(bool),
}

struct Pending {
    id: u64,
    started: Instant,
    waiting: BTreeSet<TaskKey>,
    handles: Vec<StateHandle>,
    info: pb::CheckpointInfo,
    /// Every task acknowledged so far had read all its input.
    input_ended: bool,
}

/// The coordinator of one run of a job.
pub struct CheckpointCoordinator {
    config: CheckpointConfig,
    interval: Duration,
    tasks: BTreeSet<TaskKey>,
    vertex_parallelism: Vec<usize>,
    next_id: u64,
    pending: Option<Pending>,
    committing: Option<(u64, Instant, pb::CheckpointInfo)>,
    last_end: Instant,
    consecutive_failures: u32,
    any_task_finished: bool,
    history: VecDeque<pb::CheckpointInfo>,
    /// Checkpoints completed and failed.
    counts: (u64, u64),
    /// A savepoint was asked for: trigger at once, whatever the interval.
    requested: bool,
}

impl CheckpointCoordinator {
    /// A coordinator for a run of `tasks`, numbering checkpoints from `first_id` (after
    /// the last one of earlier runs). `None` when the job does not checkpoint.
    pub fn new(
        config: &CheckpointConfig,
        tasks: BTreeSet<TaskKey>,
        vertex_parallelism: Vec<usize>,
        first_id: u64,
    ) -> Option<Self> {
        let interval = config.interval?;
        Some(CheckpointCoordinator {
            config: config.clone(),
            interval,
            tasks,
            vertex_parallelism,
            next_id: first_id.max(1),
            pending: None,
            committing: None,
            last_end: Instant::now(),
            consecutive_failures: 0,
            any_task_finished: false,
            history: VecDeque::new(),
            counts: (0, 0),
            requested: false,
        })
    }

    /// The barrier to trigger now, if one is due: the interval and the minimum pause have
    /// passed since the last checkpoint ended, none is in flight, and no task has finished
    /// (a finished task can no longer take part, so a bounded job's last stretch is
    /// replayed from the checkpoint before).
    pub fn due(&mut self, now: Instant) -> Option<Barrier> {
        if self.pending.is_some() || self.committing.is_some() || self.any_task_finished {
            return None;
        }
        let wait = match self.requested {
            true => self.config.min_pause,
            false => self.interval.max(self.config.min_pause),
        };
        if now.duration_since(self.last_end) < wait {
            return None;
        }
        let savepoint = std::mem::take(&mut self.requested);
        let id = self.next_id;
        self.next_id += 1;
        let triggered_at = eddy_common::event::wall_clock();
        self.pending = Some(Pending {
            id,
            started: now,
            waiting: self.tasks.clone(),
            handles: Vec::new(),
            input_ended: true,
            info: pb::CheckpointInfo {
                id,
                state: pb::CheckpointState::InProgress as i32,
                triggered_at_ms: triggered_at,
                ..Default::default()
            },
        });
        Some(Barrier {
            checkpoint: id,
            triggered_at,
            // Savepoints are aligned, so that they restore at any parallelism.
            unaligned: self.config.unaligned && !savepoint,
        })
    }

    /// Whether no checkpoint is in flight or being committed.
    pub fn idle(&self) -> bool {
        self.pending.is_none() && self.committing.is_none()
    }

    /// Asks for a checkpoint as soon as none is in flight (for a savepoint).
    pub fn request_now(&mut self) {
        self.requested = true;
    }

    /// Takes a task's acknowledgement.
    pub fn acknowledge(&mut self, task: TaskKey, ack: Acknowledgement) -> AckOutcome {
        let Some(pending) = self.pending.as_mut().filter(|p| p.id == ack.checkpoint) else {
            return AckOutcome::Ignored;
        };
        if !pending.waiting.remove(&task) {
            return AckOutcome::Ignored;
        }
        let handle = match ack.result {
            Ok(handle) => handle,
            Err(reason) => {
                let reason = format!("task {task} declined: {reason}");
                return AckOutcome::Aborted(self.abort(&reason));
            }
        };
        pending.info.acks.push(pb::TaskAckTime {
            vertex: task.vertex as u32,
            subtask: task.subtask as u32,
            ack_ms: pending.started.elapsed().as_millis() as u64,
            alignment_ms: ack.alignment.as_millis() as u64,
            size_bytes: handle.written_size(pending.id),
        });
        pending.info.alignment_ms = pending
            .info
            .alignment_ms
            .max(ack.alignment.as_millis() as u64);
        pending.info.size_bytes += handle.written_size(pending.id);
        pending.info.full_size_bytes += handle.full_size();
        pending.handles.push(handle);
        pending.input_ended &= ack.input_ended;
        if !pending.waiting.is_empty() {
            return AckOutcome::Waiting;
        }
        let pending = self.pending.take().expect("pending checkpoint");
        let metadata = CheckpointMetadata {
            checkpoint: pending.id,
            completed_at_ms: eddy_common::event::wall_clock(),
            vertex_parallelism: self.vertex_parallelism.clone(),
            tasks: pending.handles,
            end_of_input: pending.input_ended,
        };
        self.committing = Some((pending.id, pending.started, pending.info));
        AckOutcome::Complete(metadata)
    }

    /// The metadata of `checkpoint` has been written: it is complete. Returns its record.
    pub fn committed(&mut self, checkpoint: u64) -> Option<pb::CheckpointInfo> {
        let (id, started, mut info) = self.committing.take()?;
        if id != checkpoint {
            self.committing = Some((id, started, info));
            return None;
        }
        info.state = pb::CheckpointState::Completed as i32;
        info.duration_ms = started.elapsed().as_millis() as u64;
        self.remember(info.clone());
        self.consecutive_failures = 0;
        self.last_end = Instant::now();
        Some(info)
    }

    /// Writing the metadata failed; returns whether the job must fail.
    pub fn commit_failed(&mut self, checkpoint: u64, reason: &str) -> bool {
        match self.committing.take() {
            Some((id, _, mut info)) if id == checkpoint => {
                info.state = pb::CheckpointState::Failed as i32;
                info.failure = reason.to_string();
                self.remember(info);
                self.failed()
            }
            other => {
                self.committing = other;
                false
            }
        }
    }

    /// A task finished: the pending checkpoint can no longer complete, and no further
    /// checkpoint is triggered.
    pub fn task_finished(&mut self) {
        self.any_task_finished = true;
        if let Some(mut pending) = self.pending.take() {
            pending.info.state = pb::CheckpointState::Failed as i32;
            pending.info.failure = "a task finished before acknowledging".into();
            self.remember(pending.info);
            self.last_end = Instant::now();
        }
    }

    /// Aborts the pending checkpoint if it has run past the timeout; returns whether the
    /// job must fail.
    pub fn check_timeout(&mut self, now: Instant) -> bool {
        match &self.pending {
            Some(p) if now.duration_since(p.started) > self.config.timeout => {
                let reason = format!(
                    "timed out after {:?} waiting for {} tasks",
                    self.config.timeout,
                    p.waiting.len()
                );
                self.abort(&reason)
            }
            _ => false,
        }
    }

    /// A source's TaskManager could not be given the trigger of `checkpoint`: it can never
    /// complete (and aligned tasks would hold back the sources that did get it until the
    /// timeout), so it is aborted now. As in Flink, this does not count towards
    /// `tolerable-failed-checkpoints`: a task that does not run is the failover's to handle
    /// (its TaskManager lost, or the run failing), not a checkpoint's failure.
    pub fn trigger_failed(&mut self, checkpoint: u64, reason: &str) {
        if self.pending.as_ref().is_some_and(|p| p.id == checkpoint) {
            self.end_pending(&format!("its trigger was not delivered: {reason}"));
        }
    }

    /// Aborts the pending checkpoint for a failure that counts (a decline, a timeout);
    /// returns whether failures now exceed the tolerance.
    fn abort(&mut self, reason: &str) -> bool {
        self.end_pending(reason);
        self.failed()
    }

    /// Ends the pending checkpoint as failed for `reason`.
    fn end_pending(&mut self, reason: &str) {
        if let Some(mut pending) = self.pending.take() {
            tracing::warn!(checkpoint = pending.id, %reason, "checkpoint aborted");
            pending.info.state = pb::CheckpointState::Failed as i32;
            pending.info.failure = reason.to_string();
            pending.info.duration_ms = pending.started.elapsed().as_millis() as u64;
            self.remember(pending.info);
        }
        self.last_end = Instant::now();
    }

    fn failed(&mut self) -> bool {
        self.consecutive_failures += 1;
        self.consecutive_failures > self.config.tolerable_failures
    }

    fn remember(&mut self, info: pb::CheckpointInfo) {
        match pb::CheckpointState::try_from(info.state) {
            Ok(pb::CheckpointState::Completed) => self.counts.0 += 1,
            Ok(pb::CheckpointState::Failed) => self.counts.1 += 1,
            _ => {}
        }
        self.history.push_back(info);
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    /// Checkpoints of this run that completed and that failed.
    pub fn counts(&self) -> (u64, u64) {
        self.counts
    }

    /// Recent checkpoints, the one in flight last.
    pub fn history(&self) -> Vec<pb::CheckpointInfo> {
        let mut all: Vec<pb::CheckpointInfo> = self.history.iter().cloned().collect();
        if let Some((_, _, info)) = &self.committing {
            all.push(info.clone());
        }
        if let Some(pending) = &self.pending {
            all.push(pending.info.clone());
        }
        all
    }

    /// The id the next run should start numbering from.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::checkpoint::StateFile;

    fn coordinator(tolerable: u32) -> CheckpointCoordinator {
        let config = CheckpointConfig {
            interval: Some(Duration::from_millis(10)),
            tolerable_failures: tolerable,
            timeout: Duration::from_millis(50),
            ..Default::default()
        };
        CheckpointCoordinator::new(
            &config,
            [TaskKey::new(0, 0), TaskKey::new(1, 0)].into(),
            vec![1, 1],
            1,
        )
        .unwrap()
    }

    fn ack(checkpoint: u64, vertex: usize) -> Acknowledgement {
        Acknowledgement {
            checkpoint,
            result: Ok(StateHandle {
                vertex,
                subtask: 0,
                file: format!("{vertex}-0.state"),
                size: 10,
                crc32: 1,
                previous: Vec::new(),
                shared: Vec::new(),
            }),
            alignment: Duration::from_millis(3),
            input_ended: vertex != 0,
        }
    }

    #[test]
    fn a_checkpoint_is_final_once_every_source_had_ended() {
        let mut c = coordinator(0);
        let first = c.due(Instant::now() + Duration::from_secs(1)).unwrap();
        c.acknowledge(TaskKey::new(1, 0), ack(first.checkpoint, 1));
        let AckOutcome::Complete(metadata) =
            c.acknowledge(TaskKey::new(0, 0), ack(first.checkpoint, 0))
        else {
            panic!("not complete");
        };
        assert!(!metadata.end_of_input);
        c.committed(first.checkpoint);
        let second = c.due(Instant::now() + Duration::from_secs(2)).unwrap();
        c.acknowledge(TaskKey::new(1, 0), ack(second.checkpoint, 1));
        let ended = Acknowledgement {
            input_ended: true,
            ..ack(second.checkpoint, 0)
        };
        let AckOutcome::Complete(metadata) = c.acknowledge(TaskKey::new(0, 0), ended) else {
            panic!("not complete");
        };
        assert!(metadata.end_of_input);
    }

    #[test]
    fn completes_when_every_task_acknowledged() {
        let mut c = coordinator(0);
        let start = Instant::now();
        assert!(c.due(start).is_none(), "the interval has not passed");
        let barrier = c.due(start + Duration::from_millis(20)).unwrap();
        assert_eq!(barrier.checkpoint, 1);
        assert!(
            c.due(start + Duration::from_millis(40)).is_none(),
            "one at a time"
        );
        assert_eq!(
            c.acknowledge(TaskKey::new(0, 0), ack(1, 0)),
            AckOutcome::Waiting
        );
        assert_eq!(
            c.acknowledge(TaskKey::new(0, 0), ack(1, 0)),
            AckOutcome::Ignored,
            "a duplicate"
        );
        let AckOutcome::Complete(metadata) = c.acknowledge(TaskKey::new(1, 0), ack(1, 1)) else {
            panic!("expected completion");
        };
        assert_eq!(metadata.tasks.len(), 2);
        assert_eq!(metadata.size(), 20);
        c.committed(1);
        let history = c.history();
        assert_eq!(history[0].state, pb::CheckpointState::Completed as i32);
        assert_eq!(history[0].alignment_ms, 3);
    }

    #[test]
    fn sizes_count_the_shared_files_a_checkpoint_stored_and_refers_to() {
        let mut c = coordinator(0);
        let barrier = c.due(Instant::now() + Duration::from_secs(1)).unwrap();
        let id = barrier.checkpoint;
        let file = |checkpoint: u64, size: u64| StateFile {
            checkpoint,
            file: format!("shared/{checkpoint}-{size}.run"),
            size,
            crc32: 0,
        };
        let mut with_runs = ack(id, 0);
        if let Ok(handle) = &mut with_runs.result {
            handle.previous = vec![file(id - 1, 5)];
            handle.shared = vec![file(id - 1, 1000), file(id, 300)];
        }
        c.acknowledge(TaskKey::new(0, 0), with_runs);
        let AckOutcome::Complete(metadata) = c.acknowledge(TaskKey::new(1, 0), ack(id, 1)) else {
            panic!("expected completion");
        };
        let info = c.committed(id).unwrap();
        assert_eq!(
            info.size_bytes,
            10 + 300 + 10,
            "written: snapshots and the new run"
        );
        assert_eq!(info.full_size_bytes, 10 + 5 + 1000 + 300 + 10);
        assert_eq!(info.acks[0].size_bytes, 310);
        assert_eq!((metadata.size(), metadata.full_size()), (320, 1325));
    }

    #[test]
    fn an_undelivered_trigger_aborts_its_checkpoint_at_once_without_counting() {
        let mut c = coordinator(0);
        let mut later = Instant::now() + Duration::from_secs(1);
        let first = c.due(later).unwrap();
        c.trigger_failed(first.checkpoint + 1, "stale");
        assert_eq!(
            c.acknowledge(TaskKey::new(0, 0), ack(first.checkpoint, 0)),
            AckOutcome::Waiting,
            "another checkpoint's trigger leaves this one pending"
        );
        c.trigger_failed(first.checkpoint, "job does not run here");
        assert_eq!(
            c.acknowledge(TaskKey::new(1, 0), ack(first.checkpoint, 1)),
            AckOutcome::Ignored,
            "aborted"
        );
        // However many triggers go undelivered, none counts against zero tolerated
        // failures; a decline after them is the first that counts.
        for _ in 0..5 {
            later += Duration::from_secs(1);
            let next = c.due(later).unwrap();
            c.trigger_failed(next.checkpoint, "unreachable");
        }
        assert_eq!(c.counts(), (0, 6));
        later += Duration::from_secs(1);
        let declined = c.due(later).unwrap();
        let decline = Acknowledgement {
            result: Err("disk full".into()),
            ..ack(declined.checkpoint, 0)
        };
        assert_eq!(
            c.acknowledge(TaskKey::new(0, 0), decline),
            AckOutcome::Aborted(true)
        );
    }

    #[test]
    fn declines_and_timeouts_abort_and_fail_the_job_past_the_tolerance() {
        let mut c = coordinator(1);
        let later = Instant::now() + Duration::from_secs(1);
        let first = c.due(later).unwrap();
        let declined = Acknowledgement {
            result: Err("disk full".into()),
            ..ack(first.checkpoint, 0)
        };
        assert_eq!(
            c.acknowledge(TaskKey::new(0, 0), declined),
            AckOutcome::Aborted(false)
        );
        assert_eq!(
            c.acknowledge(TaskKey::new(1, 0), ack(first.checkpoint, 1)),
            AckOutcome::Ignored
        );
        let second = c.due(later + Duration::from_secs(1)).unwrap();
        assert_eq!(second.checkpoint, 2);
        assert!(
            c.check_timeout(later + Duration::from_secs(5)),
            "a second failure exceeds one tolerated"
        );
    }

    #[test]
    fn a_finished_task_stops_checkpointing() {
        let mut c = coordinator(0);
        let later = Instant::now() + Duration::from_secs(1);
        c.due(later).unwrap();
        c.task_finished();
        assert!(c.due(later + Duration::from_secs(1)).is_none());
        assert_eq!(c.history()[0].state, pb::CheckpointState::Failed as i32);
    }
}
