//! What the JobManager does outside its lock: calls to TaskManagers and writes to storage,
//! each carried out on its own task (or in order, where order matters).

use std::sync::Arc;
use std::time::Duration;

use eddy_common::EddyError;
use eddy_common::checkpoint::{CheckpointMetadata, CheckpointStorage, CompletedCheckpoint};
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::ExecutionId;

use super::JobManager;
use crate::gateway::{Deployment, TaskExecutorGateway};
use crate::job::SavepointRequest;
use crate::job_store::StoredJob;
use crate::lifecycle::JobState;

/// A TaskManager to call.
pub type Gateway = Arc<dyn TaskExecutorGateway>;

/// An action to carry out once the state lock is released.
pub enum Action {
    /// Deploys tasks to the TaskManager `taskmanager`.
    Deploy {
        /// Its id.
        taskmanager: String,
        /// How to reach it.
        gateway: Gateway,
        /// What to run there.
        deployment: Box<Deployment>,
    },
    /// Stops a run's tasks on a TaskManager.
    Stop(Gateway, ExecutionId, StopRequest),
    /// Starts a checkpoint at a run's source tasks on a TaskManager.
    Trigger(Gateway, ExecutionId, Barrier),
    /// Tells a TaskManager a checkpoint of a run is complete.
    Notify(Gateway, ExecutionId, CompletedCheckpoint),
    /// Writes a checkpoint's metadata (it completes), keeping `retained` checkpoints.
    Commit {
        /// The run.
        execution: ExecutionId,
        /// The job's checkpoints.
        storage: CheckpointStorage,
        /// What every task acknowledged.
        metadata: CheckpointMetadata,
        /// Completed checkpoints kept.
        retained: usize,
    },
    /// Restarts a failed run after a backoff.
    Restart(ExecutionId, Duration),
    /// Writes a job's record to the job store.
    Persist(StoredJob),
    /// Keeps a completed checkpoint as a savepoint.
    Savepoint(
        String,
        CheckpointStorage,
        CheckpointMetadata,
        SavepointRequest,
    ),
    /// Actions carried out one after the other.
    InOrder(Vec<Action>),
    /// Records a new attempt in the job store, then deploys it: a restarted JobManager
    /// must never start an attempt number that already ran.
    Start {
        /// The new run.
        execution: ExecutionId,
        /// Its record, with a job store.
        record: Option<StoredJob>,
        /// Its deployments.
        deploys: Vec<Action>,
    },
}

impl JobManager {
    /// Carries out `actions`, each on its own task.
    pub(super) fn send(self: &Arc<Self>, actions: Vec<Action>) {
        for action in actions {
            let jobmanager = self.clone();
            tokio::spawn(async move { jobmanager.carry_out(action).await });
        }
    }

    fn carry_out(self: Arc<Self>, action: Action) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            if self.is_deposed() {
                // A later term leads: this JobManager writes and commands nothing more.
                tracing::debug!("a deposed jobmanager drops an action");
                return;
            }
            match action {
                Action::InOrder(actions) => {
                    for action in actions {
                        self.clone().carry_out(action).await;
                    }
                }
                Action::Start {
                    execution,
                    record,
                    deploys,
                } => self.start(execution, record, deploys).await,
                Action::Deploy {
                    taskmanager,
                    gateway,
                    deployment,
                } => self.deploy(taskmanager, gateway, *deployment).await,
                Action::Stop(gateway, execution, how) => {
                    if let Err(error) = gateway.stop(&execution, how).await {
                        tracing::debug!(job = %execution, %error, "stopping tasks failed");
                    }
                }
                Action::Trigger(gateway, execution, barrier) => {
                    if let Err(error) = gateway.trigger_checkpoint(&execution, barrier).await {
                        let checkpoint = barrier.checkpoint;
                        tracing::warn!(job = %execution, checkpoint, %error, "triggering a checkpoint failed");
                        self.trigger_failed(&execution, checkpoint, &error.to_string());
                    }
                }
                Action::Notify(gateway, execution, notice) => {
                    if let Err(error) = gateway.notify_checkpoint_complete(&execution, notice).await
                    {
                        tracing::debug!(job = %execution, %error, "notifying a checkpoint failed");
                    }
                }
                Action::Commit {
                    execution,
                    storage,
                    metadata,
                    retained,
                } => self.commit(execution, storage, metadata, retained).await,
                Action::Savepoint(job_id, storage, metadata, request) => {
                    self.keep_savepoint(job_id, storage, metadata, request)
                        .await
                }
                Action::Persist(job) => {
                    if let Some(store) = &self.store {
                        match store.save(&job).await {
                            Ok(()) => {}
                            Err(EddyError::Fenced(reason)) => self.depose(reason),
                            Err(error) => {
                                tracing::warn!(job = %job.job_id, %error, "cannot write the job record")
                            }
                        }
                    }
                }
                Action::Restart(execution, backoff) => self.restart(execution, backoff).await,
            }
        })
    }

    async fn start(
        self: Arc<Self>,
        execution: ExecutionId,
        record: Option<StoredJob>,
        deploys: Vec<Action>,
    ) {
        if let (Some(store), Some(record)) = (&self.store, record)
            && let Err(error) = store.save(&record).await
        {
            if let EddyError::Fenced(reason) = error {
                self.depose(reason);
                return;
            }
            let reason = format!("cannot record the attempt in the job store: {error}");
            self.execution_failed(&execution, reason);
            return;
        }
        // A run cancelled (or failed) while its record was written is not deployed: its
        // TaskManagers were told to stop it before it arrived.
        if self.is_current_run(&execution) {
            self.send(deploys);
        }
    }

    async fn deploy(
        self: Arc<Self>,
        taskmanager: String,
        gateway: Gateway,
        deployment: Deployment,
    ) {
        let execution = deployment.execution.clone();
        match gateway.deploy(deployment).await {
            Ok(()) if !self.is_current_run(&execution) => {
                // Cancelled or failed while it was being deployed: the stop sent then found
                // nothing there yet, so this one stops it.
                tracing::info!(job = %execution, %taskmanager, "a run ended while it was deployed; stopping it there");
                if let Err(error) = gateway.stop(&execution, StopRequest::Cancel).await {
                    tracing::warn!(job = %execution, %error, "stopping a stale run failed");
                }
            }
            Ok(()) => {}
            Err(error) => {
                if let CallError::Unavailable(_) = error {
                    // It is gone: forget it now rather than place the restart there.
                    tracing::warn!(%taskmanager, "taskmanager unreachable; forgetting it");
                    self.lock().resources.remove(&taskmanager);
                }
                let reason = format!("deploying to {taskmanager} failed: {error}");
                self.execution_failed(&execution, reason);
            }
        }
    }

    /// Whether `execution` is its job's current run and still running.
    fn is_current_run(&self, execution: &ExecutionId) -> bool {
        self.lock()
            .jobs
            .get(&execution.job)
            .is_some_and(|job| job.is_run(execution) && job.state() == JobState::Running)
    }
}
