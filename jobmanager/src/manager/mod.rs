//! The JobManager: keeps the registered TaskManagers and their slots, queues jobs until
//! enough slots are free, deploys them, follows their tasks' states, coordinates their
//! checkpoints, and restarts a failed job from its latest checkpoint. Every deployment of
//! a job is an attempt with its own [`ExecutionId`]: reports from an earlier attempt are
//! fenced off.
//!
//! The same component serves the daemon (behind gRPC, [`crate::grpc`]) and the embedded
//! cluster of `eddy run` (called in-process). Its handlers change the state under one lock
//! and return [`Action`]s (calls to TaskManagers, writes to storage), carried out after the
//! lock is released:
//! - [`runs`]: scheduling, ending, failing and restarting a job's runs;
//! - [`tasks`]: TaskManagers registering and heartbeating, and task reports;
//! - [`checkpoints`]: triggering, acknowledging and committing checkpoints, savepoints;
//! - [`adoptions`]: runs a recovered job takes over from its TaskManagers, unrestarted.

mod actions;
mod adoptions;
mod checkpoints;
mod runs;
mod tasks;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::policy::PolicyViolation;
use eddy_common::checkpoint::CheckpointStorage;
use eddy_common::event::StopRequest;
use eddy_common::ids::ExecutionId;
use eddy_common::object_storage::resolve;
use eddy_planner::plan::JobGraph;
use eddy_proto::v1 as pb;
use tokio::sync::watch;

pub use actions::Action;

use crate::config::JobManagerConfig;
use crate::error::JobManagerError;
use crate::job::JobRecord;
use crate::job_store::{JobStore, StoredJob};
use crate::lifecycle::{JobState, Transition};
use crate::resources::ResourceManager;

/// Everything behind the JobManager's lock.
#[derive(Default)]
struct State {
    resources: ResourceManager,
    jobs: HashMap<String, JobRecord>,
    /// Job ids in submission order.
    order: Vec<String>,
}

impl State {
    /// A job, or [`JobManagerError::NoSuchJob`].
    fn job(&self, job_id: &str) -> Result<&JobRecord, JobManagerError> {
        self.jobs
            .get(job_id)
            .ok_or_else(|| JobManagerError::NoSuchJob(job_id.into()))
    }

    /// A job, to change, or [`JobManagerError::NoSuchJob`].
    fn job_mut(&mut self, job_id: &str) -> Result<&mut JobRecord, JobManagerError> {
        self.jobs
            .get_mut(job_id)
            .ok_or_else(|| JobManagerError::NoSuchJob(job_id.into()))
    }

    /// A running job, to change; otherwise why not.
    fn running_job_mut(&mut self, job_id: &str) -> Result<&mut JobRecord, JobManagerError> {
        let job = self.job_mut(job_id)?;
        match job.state() {
            JobState::Running => Ok(job),
            state => Err(JobManagerError::WrongState {
                job: job_id.into(),
                state,
            }),
        }
    }
}

/// The JobManager's state, shared by its services.
pub struct JobManager {
    config: JobManagerConfig,
    state: Mutex<State>,
    next_job: AtomicU64,
    store: Option<JobStore>,
    /// Numbers the job records in the order their states changed (see
    /// [`crate::job_store::StoredJob::revision`]).
    revisions: AtomicU64,
    /// Held shared while checkpoint metadata is written, exclusively by a restart before
    /// it picks the checkpoint to restore: a checkpoint whose metadata is being written is
    /// either seen complete or not written at all.
    commits: tokio::sync::RwLock<()>,
    /// Why this JobManager must stop acting, once a later term fenced it off.
    deposed: watch::Sender<Option<String>>,
}

impl JobManager {
    /// A JobManager without TaskManagers yet; with a job store, jobs survive its restart.
    pub fn new(config: JobManagerConfig, store: Option<JobStore>) -> Arc<Self> {
        Arc::new(JobManager {
            config,
            state: Mutex::new(State::default()),
            next_job: AtomicU64::new(1),
            store,
            revisions: AtomicU64::new(1),
            commits: tokio::sync::RwLock::new(()),
            deposed: watch::channel(None).0,
        })
    }

    /// Stops this JobManager from acting: a JobManager of a later term took its jobs over
    /// (its commit logs refused this one). It writes no more job records; the daemon
    /// watching [`Self::deposition`] shuts down.
    pub(crate) fn depose(&self, reason: String) {
        tracing::error!(%reason, term = self.term(), "fenced off by a later term; this jobmanager stops");
        self.deposed.send_replace(Some(reason));
    }

    /// Why this JobManager was deposed, once it is.
    pub fn deposition(&self) -> watch::Receiver<Option<String>> {
        self.deposed.subscribe()
    }

    /// The lease this JobManager leads by, under high availability.
    pub fn lease(&self) -> Option<&crate::leadership::Lease> {
        self.config.lease.as_ref()
    }

    /// Who leads, as `eddy status` and the REST API show it (`None` without high
    /// availability).
    pub fn leadership(&self) -> Option<pb::Leadership> {
        self.lease().map(|lease| pb::Leadership {
            term: lease.term,
            holder: lease.holder.clone(),
            address: lease.address.clone(),
            since_ms: lease.since_ms,
        })
    }

    /// Its leader term: its lease's, 0 without high availability.
    pub fn term(&self) -> u64 {
        self.config.term()
    }

    /// Whether a later term fenced this JobManager off.
    fn is_deposed(&self) -> bool {
        self.deposed.borrow().is_some()
    }

    /// How it runs.
    pub fn config(&self) -> &JobManagerConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("jobmanager state lock")
    }

    /// A job's record as it is now, numbered after every earlier one, with a job store.
    fn record_now(&self, job_id: &str, job: &JobRecord) -> Option<StoredJob> {
        self.store.as_ref().map(|_| {
            let revision = self.revisions.fetch_add(1, Ordering::Relaxed);
            job.stored(job_id, revision)
        })
    }

    /// The action that persists a job's record (its state changed), with a job store.
    fn persisted(&self, job_id: &str, job: &JobRecord) -> Option<Action> {
        self.record_now(job_id, job).map(Action::Persist)
    }

    /// Plans a job's SQL (with `options` overriding its `SET`s), in this JobManager's
    /// planning context.
    pub fn plan(
        &self,
        sql: &str,
        options: &HashMap<String, String>,
    ) -> Result<JobGraph, JobManagerError> {
        let overrides: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        eddy_planner::plan(sql, &overrides, self.config.planning)
            .map_err(JobManagerError::InvalidJob)
    }

    /// A new job's record, with its checkpoint storage.
    fn record(
        &self,
        job_id: &str,
        sql: String,
        options: HashMap<String, String>,
        graph: Arc<JobGraph>,
        restore_path: Option<String>,
    ) -> Result<JobRecord, JobManagerError> {
        let storage = match graph.config.checkpoints.interval {
            None => None,
            Some(_) => {
                let root = graph
                    .config
                    .checkpoints
                    .directory
                    .clone()
                    .unwrap_or_else(|| self.config.checkpoint_root.clone());
                let location = resolve(&root, &[]).map_err(JobManagerError::InvalidJob)?;
                let storage = CheckpointStorage::new(&location, job_id).with_term(self.term());
                Some((root, storage))
            }
        };
        Ok(JobRecord::new(
            sql,
            options,
            graph,
            storage,
            restore_path,
            eddy_common::event::wall_clock(),
        ))
    }

    /// Plans and queues a job; returns its id.
    pub fn submit(
        self: &Arc<Self>,
        sql: String,
        options: HashMap<String, String>,
        restore_path: Option<String>,
        owner: &str,
    ) -> Result<String, JobManagerError> {
        self.config.policy.check_text(&sql)?;
        let graph = Arc::new(self.plan(&sql, &options)?);
        self.submit_planned(sql, options, graph, restore_path, owner)
    }

    /// Queues a job planned already (`graph` must be the plan of `sql` and `options`).
    pub fn submit_planned(
        self: &Arc<Self>,
        sql: String,
        options: HashMap<String, String>,
        graph: Arc<JobGraph>,
        restore_path: Option<String>,
        owner: &str,
    ) -> Result<String, JobManagerError> {
        let policy = &self.config.policy;
        let refused = |error: PolicyViolation| {
            tracing::warn!(%owner, %error, "job refused");
            JobManagerError::from(error)
        };
        policy
            .check_plan(&graph, restore_path.as_deref())
            .map_err(refused)?;
        let job_id = format!(
            "{:08x}{:08x}",
            (eddy_common::event::wall_clock() as u64) & 0xffff_ffff,
            self.next_job.fetch_add(1, Ordering::Relaxed)
        );
        let mut record = self.record(&job_id, sql, options, graph, restore_path)?;
        record.owner = owner.to_string();
        let persist = self.persisted(&job_id, &record);
        {
            let mut state = self.lock();
            let unfinished = state
                .jobs
                .values()
                .filter(|j| j.owner == owner && !j.state().is_final())
                .count();
            policy.check_jobs_of(owner, unfinished).map_err(refused)?;
            state.jobs.insert(job_id.clone(), record);
            state.order.push(job_id.clone());
        }
        tracing::info!(job = %job_id, %owner, "job submitted");
        self.send(persist.into_iter().collect());
        self.schedule();
        Ok(job_id)
    }

    /// Reloads the jobs of an earlier JobManager from the job store. A job that was running
    /// is adopted if its TaskManagers show its whole run in time (see [`adoptions`]);
    /// otherwise, as every other unfinished job, it restarts from its newest valid
    /// checkpoint once TaskManagers have registered (a job without checkpoints has none to
    /// restart from, and fails).
    pub async fn recover(self: &Arc<Self>) -> eddy_common::Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        for stored in store.load_all().await? {
            if stored.state.is_final() {
                continue;
            }
            let job_id = stored.job_id.clone();
            let planned = self.plan(&stored.sql, &stored.options).and_then(|graph| {
                self.record(
                    &job_id,
                    stored.sql.clone(),
                    stored.options.clone(),
                    Arc::new(graph),
                    stored.restore_path.clone(),
                )
            });
            let mut record = match planned {
                Ok(record) => record,
                Err(error) => {
                    tracing::warn!(job = %job_id, %error, "a stored job no longer plans; skipped");
                    continue;
                }
            };
            record.owner = stored.owner.clone();
            record.attempt = stored.attempt;
            record.restarts = stored.restarts;
            record.submitted_at_ms = stored.submitted_at_ms;
            record.restore_from = stored.restore_from;
            let checkpointing = record.storage.is_some();
            record.reason = "resuming after a JobManager restart".into();
            // A run that was running may still run whole: the TaskManagers get a while to
            // show it before the job restarts from its checkpoint (or, keeping none, fails).
            let adoption = match stored.state {
                JobState::Running => self.adoption_of(&job_id, &record).await,
                _ => None,
            };
            let actions = if checkpointing || adoption.is_some() {
                record.transition(&job_id, Transition::Failed { restart: true });
                let wait = adoption.map(|adoption| {
                    record.await_adoption(adoption);
                    record.reason = "waiting for its TaskManagers to show its running tasks".into();
                    self.adoption_window()
                });
                vec![Action::Restart(
                    ExecutionId::new(&job_id, record.attempt),
                    wait.unwrap_or_default(),
                )]
            } else {
                record.transition(&job_id, Transition::Failed { restart: false });
                record.reason = "the JobManager restarted and the job keeps no checkpoints".into();
                self.persisted(&job_id, &record).into_iter().collect()
            };
            tracing::info!(job = %job_id, attempt = record.attempt, state = %record.state(), "job recovered from the job store");
            {
                let mut state = self.lock();
                state.jobs.insert(job_id.clone(), record);
                state.order.push(job_id);
            }
            self.send(actions);
        }
        Ok(())
    }

    /// Cancels a job: its tasks are cancelled, and their sinks roll back what no completed
    /// checkpoint covers. What its sources keep outside Eddy (a replication slot) is freed.
    pub fn cancel(self: &Arc<Self>, job_id: &str) -> Result<(), JobManagerError> {
        self.end_on_request(job_id, Ending::Cancelled)
    }

    /// Ends a job on request; see [`Ending`].
    pub(super) fn end_on_request(
        self: &Arc<Self>,
        job_id: &str,
        ending: Ending,
    ) -> Result<(), JobManagerError> {
        let actions = {
            let mut guard = self.lock();
            let State {
                resources, jobs, ..
            } = &mut *guard;
            let job = jobs
                .get_mut(job_id)
                .ok_or_else(|| JobManagerError::NoSuchJob(job_id.into()))?;
            if !job.state().allows(Transition::CancelRequested) {
                return Err(JobManagerError::WrongState {
                    job: job_id.into(),
                    state: job.state(),
                });
            }
            let mut actions = runs::end_run(job, job_id, resources, Some(StopRequest::Cancel));
            let execution = job.execution(job_id);
            let adoption = job.take_adoption();
            actions.extend(adoptions::abandon_adoption(adoption, &execution, resources));
            job.transition(job_id, Transition::CancelRequested);
            job.reason = ending.reason().into();
            actions.extend(self.persisted(job_id, job));
            if ending == Ending::Cancelled {
                release_sources(job_id, &job.graph);
            }
            actions
        };
        tracing::info!(job = %job_id, reason = ending.reason(), "job ended on request");
        self.send(actions);
        self.schedule();
        Ok(())
    }

    /// Drains a running job: its sources stop reading, what they read is written, and the
    /// job ends cancelled once every task has ended. (A job that checkpoints is better
    /// stopped with a savepoint, which it can resume from.)
    pub fn drain(self: &Arc<Self>, job_id: &str) -> Result<(), JobManagerError> {
        let actions = {
            let mut state = self.lock();
            let state = &mut *state;
            let job = state.running_job_mut(job_id)?;
            if let Some(run) = job.run_mut() {
                run.draining = true;
            }
            job.reason = "stopping: sources end, sinks flush".into();
            let execution = job.execution(job_id);
            job.taskmanagers()
                .into_iter()
                .filter_map(|tm| state.resources.get(&tm))
                .map(|tm| Action::Stop(tm.gateway.clone(), execution.clone(), StopRequest::Drain))
                .collect()
        };
        tracing::info!(job = %job_id, "job draining");
        self.send(actions);
        Ok(())
    }

    /// Follows a job's state.
    pub fn watch(&self, job_id: &str) -> Result<watch::Receiver<JobState>, JobManagerError> {
        Ok(self.lock().job(job_id)?.watch())
    }

    /// Summaries of all jobs, newest first.
    pub fn list(&self) -> Vec<pb::JobSummary> {
        let state = self.lock();
        state
            .order
            .iter()
            .rev()
            .map(|id| state.jobs[id].summary(id))
            .collect()
    }

    /// Whether a job takes checkpoints.
    pub fn takes_checkpoints(&self, job_id: &str) -> Result<bool, JobManagerError> {
        Ok(self.lock().job(job_id)?.storage.is_some())
    }

    /// The registered TaskManagers and their slots.
    pub fn taskmanagers(&self) -> Vec<pb::TaskManagerInfo> {
        self.lock().resources.infos()
    }

    /// One job in detail.
    pub fn job(&self, job_id: &str) -> Result<pb::JobInfo, JobManagerError> {
        Ok(self.lock().job(job_id)?.info(job_id))
    }

    /// Runs the JobManager's timers until the future is dropped: triggers due checkpoints,
    /// aborts timed-out ones, and forgets TaskManagers that stopped heartbeating.
    pub async fn run_timers(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        let mut last_expiry = Instant::now();
        loop {
            tick.tick().await;
            self.tick_checkpoints();
            if last_expiry.elapsed() >= self.config.heartbeat_interval {
                last_expiry = Instant::now();
                self.expire_silent();
            }
        }
    }
}

/// How a job ended on request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    /// Cancelled: it will not resume, so its sources release what they keep outside Eddy.
    Cancelled,
    /// Stopped after a savepoint: it resumes from the savepoint, so its sources keep what
    /// they hold outside Eddy (a replication slot keeps the changes since the savepoint).
    StoppedWithSavepoint,
}

impl Ending {
    /// The job's reason, as its status shows it.
    fn reason(self) -> &'static str {
        match self {
            Ending::Cancelled => "cancelled on request",
            Ending::StoppedWithSavepoint => "stopped with a savepoint",
        }
    }
}

/// How often releasing a cancelled job's source is tried before it is left to the user.
const RELEASE_ATTEMPTS: u32 = 5;

/// Frees what a cancelled job's sources keep outside Eddy (a PostgreSQL replication
/// slot), in the background, trying again while the external system is unavailable or
/// the cancelled tasks still hold it.
fn release_sources(job_id: &str, graph: &JobGraph) {
    let connectors: Vec<_> = graph
        .vertices
        .iter()
        .filter_map(|v| v.source.as_ref())
        .map(|s| (s.table.clone(), s.connector.clone()))
        .collect();
    let job = job_id.to_string();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(job = %job, "no runtime to release the cancelled job's sources on");
        return;
    };
    runtime.spawn(async move {
        for (table, connector) in connectors {
            for attempt in 1..=RELEASE_ATTEMPTS {
                match connector.release().await {
                    Ok(()) => break,
                    Err(e) if attempt < RELEASE_ATTEMPTS => {
                        tracing::debug!(job = %job, table = %table, error = %e, "releasing a source failed; trying again");
                        tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
                    }
                    Err(e) => {
                        tracing::warn!(job = %job, table = %table, error = %e, "could not release the source of a cancelled job")
                    }
                }
            }
        }
    });
}
