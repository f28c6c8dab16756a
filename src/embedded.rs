//! The embedded cluster of `eddy run` (Flink's MiniCluster): the cluster's JobManager and
//! TaskManagers in this process, the same components the daemons run, calling each other
//! directly instead of over gRPC, with in-process data channels. A job runs the same way
//! with and without checkpoints; without, it simply has no checkpoint coordinator.
//! Checkpoints go to `./eddy-data` unless the script sets `execution.checkpointing.dir`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::ExecutionId;
use eddy_common::metrics::JobMetrics;
use eddy_common::object_storage::resolve;
use eddy_jobmanager::job_store::JobStore;
use eddy_jobmanager::policy::SubmitPolicy;
use eddy_jobmanager::{
    Deployment, JobManager, JobManagerConfig, JobManagerError, JobState, TaskExecutorGateway,
};
use eddy_planner::plan::JobGraph;
use eddy_proto::v1 as pb;
use eddy_taskmanager::membership;
use eddy_taskmanager::network::Channels;
use eddy_taskmanager::node::CHANNEL_CAPACITY;
use eddy_taskmanager::{Registration, ResourceManagerGateway, TaskManager};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Default storage of the checkpoints of the embedded cluster.
const DEFAULT_STORAGE: &str = "./eddy-data";

/// The address of the embedded TaskManagers: one process, one set of channels.
const IN_PROCESS: &str = "in-process";

/// How an embedded run ended.
#[derive(Debug)]
pub struct Outcome {
    /// Finished, or cancelled (stopped on request).
    pub state: JobState,
    /// Per-operator counters of every task of every attempt.
    pub metrics: Arc<JobMetrics>,
    /// From submission until every task of the first attempt was deployed.
    pub time_to_running: Option<Duration>,
    /// From submission to the end.
    pub duration: Duration,
}

/// Runs a planned job on `taskmanagers` in-process TaskManagers with just enough slots,
/// until it ends. The first Ctrl-C stops it the way it can resume: a job that checkpoints
/// takes a savepoint and stops; one that does not drains (sources stop, what was read is
/// written). A second Ctrl-C exits at once.
pub async fn run(
    sql: String,
    options: HashMap<String, String>,
    graph: JobGraph,
    taskmanagers: usize,
) -> Result<Outcome> {
    let started = Instant::now();
    let slots = graph.slots_needed().div_ceil(taskmanagers);
    let config = JobManagerConfig {
        checkpoint_root: DEFAULT_STORAGE.into(),
        // TaskManagers in this process are not lost on a network: only a busy runtime
        // could delay their heartbeats, and that must not fail the job.
        heartbeat_timeout: Duration::from_secs(60),
        // The script is not kept: secrets may be written in it (they are still redacted
        // out of the job record beside its checkpoints).
        policy: SubmitPolicy {
            allow_literal_secrets: true,
            secret_env_prefix: String::new(),
            ..SubmitPolicy::default()
        },
        // Its TaskManagers, in this process, run its plan as it is: it reads the secrets.
        planning: eddy_planner::PlanningContext::CONNECTING,
        ..JobManagerConfig::default()
    };
    // A job that checkpoints keeps its record beside its checkpoints, as on a cluster.
    let checkpoints = graph.config.checkpoints.interval.is_some();
    let store = match checkpoints {
        true => Some(job_store(&config.checkpoint_root).await?),
        false => None,
    };
    let jobmanager = JobManager::new(config, store);
    let timers = tokio::spawn(jobmanager.clone().run_timers());
    let metrics = Arc::new(JobMetrics::default());
    let deployed = Arc::new(DeployClock::default());
    let cluster = Cluster::start(&jobmanager, taskmanagers, slots, &metrics, &deployed).await;
    // Registered before the job starts, so that no Ctrl-C finds the default handler.
    let interrupts = signal(SignalKind::interrupt()).context("cannot handle Ctrl-C")?;
    let show_progress = progress_wanted(&graph);
    let job_id = jobmanager.submit_planned(sql, options, Arc::new(graph), None, "local")?;
    let progress =
        show_progress.then(|| tokio::spawn(show_progress_line(jobmanager.clone(), job_id.clone())));
    tracing::info!(job = %job_id, checkpoints, "job submitted to the embedded cluster");
    let state = jobmanager.watch(&job_id)?;
    tokio::spawn(stop_on_interrupt(
        interrupts,
        jobmanager.clone(),
        job_id.clone(),
        checkpoints,
    ));
    let ended = follow(&jobmanager, &job_id, state).await;
    if let Some(progress) = progress {
        progress.abort();
        if let Ok(job) = jobmanager.job(&job_id) {
            eprintln!("\r\x1b[2K{}", crate::watch::progress_line(&job));
        }
    }
    timers.abort();
    cluster.shut_down().await;
    Ok(Outcome {
        state: ended?,
        metrics,
        time_to_running: deployed.first(started),
        duration: started.elapsed(),
    })
}

/// A live progress line goes to standard error when it is a terminal, unless the job's
/// print sink writes to the same terminal (the line would be torn by its rows).
fn progress_wanted(graph: &JobGraph) -> bool {
    use std::io::IsTerminal;
    let prints = graph.vertices.iter().any(|v| {
        matches!(&v.output, eddy_planner::plan::VertexOutput::Sink(sink) if sink.connector.name() == "print")
    });
    std::io::stderr().is_terminal() && !(prints && std::io::stdout().is_terminal())
}

/// Redraws the progress line (events read, events/s, watermark, last checkpoint) twice a
/// second until aborted.
async fn show_progress_line(jobmanager: Arc<JobManager>, job_id: String) {
    use std::io::Write;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        if let Ok(job) = jobmanager.job(&job_id) {
            eprint!("\r\x1b[2K{}", crate::watch::progress_line(&job));
            let _ = std::io::stderr().flush();
        }
    }
}

/// The job store under `root`, checked.
async fn job_store(root: &str) -> Result<JobStore> {
    let location = resolve(root, &[]).with_context(|| format!("checkpoint storage '{root}'"))?;
    let store = JobStore::new(location);
    store
        .check()
        .await
        .with_context(|| format!("job store at '{root}'"))?;
    Ok(store)
}

/// Waits for the job's end: its final state, or why it failed.
async fn follow(
    jobmanager: &JobManager,
    job_id: &str,
    mut state: watch::Receiver<JobState>,
) -> Result<JobState> {
    let end = *state
        .wait_for(|state| state.is_final())
        .await
        .context("the JobManager stopped following the job")?;
    let job = jobmanager.job(job_id)?;
    tracing::info!(job = %job_id, restarts = job.restarts, checkpoints = job.checkpoints.len(), %end, "job ended");
    match end {
        JobState::Failed => bail!("{}", job.reason),
        end => Ok(end),
    }
}

/// Stops the job on the first Ctrl-C (see [`run`]); exits on the second, also while the
/// stop waits for its savepoint.
async fn stop_on_interrupt(
    mut interrupts: tokio::signal::unix::Signal,
    jobmanager: Arc<JobManager>,
    job_id: String,
    checkpoints: bool,
) {
    if interrupts.recv().await.is_none() {
        return;
    }
    let stop = async {
        let stopped = if checkpoints {
            stop_with_savepoint(&jobmanager, &job_id).await
        } else {
            eprintln!("stopping: sources end now, sinks flush (Ctrl-C again to abort)");
            jobmanager.drain(&job_id)
        };
        if let Err(error @ JobManagerError::WrongState { .. }) = stopped {
            tracing::info!(%error, "nothing to stop");
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        () = stop => {}
        Some(()) = interrupts.recv() => std::process::exit(130),
    }
}

/// Takes a savepoint and stops the job; a job that is restarting gets its savepoint once
/// it runs again. Only when no savepoint can be taken is the job cancelled.
async fn stop_with_savepoint(
    jobmanager: &Arc<JobManager>,
    job_id: &str,
) -> Result<(), JobManagerError> {
    eprintln!("stopping: taking a savepoint, then stopping the job (Ctrl-C again to abort)");
    let mut state = jobmanager.watch(job_id)?;
    loop {
        match jobmanager.savepoint(job_id, true).await {
            Ok(path) => {
                eprintln!(
                    "savepoint: {path} (a cluster resumes from it: eddy submit --from-savepoint)"
                );
                return Ok(());
            }
            Err(JobManagerError::WrongState {
                state: JobState::Created | JobState::Restarting,
                ..
            }) => {
                eprintln!("the job is restarting: the savepoint waits until it runs");
                let running = state
                    .wait_for(|state| *state == JobState::Running || state.is_final())
                    .await;
                if running.is_err() {
                    return jobmanager.cancel(job_id);
                }
            }
            Err(error) => {
                eprintln!("no savepoint ({error}); cancelling");
                return jobmanager.cancel(job_id);
            }
        }
    }
}

/// The in-process TaskManagers.
struct Cluster {
    taskmanagers: Vec<Arc<TaskManager>>,
    memberships: Vec<tokio::task::JoinHandle<()>>,
}

impl Cluster {
    /// Starts `count` TaskManagers of `slots` slots, registered with `jobmanager` before
    /// this returns.
    async fn start(
        jobmanager: &Arc<JobManager>,
        count: usize,
        slots: usize,
        metrics: &Arc<JobMetrics>,
        deployed: &Arc<DeployClock>,
    ) -> Cluster {
        let channels = Arc::new(Channels::new(CHANNEL_CAPACITY));
        let resource_manager = Arc::new(InProcessResourceManager {
            jobmanager: jobmanager.clone(),
            taskmanagers: OnceLock::new(),
            deployed: deployed.clone(),
        });
        let taskmanagers: Vec<Arc<TaskManager>> = (0..count)
            .map(|i| {
                TaskManager::new(
                    format!("local-tm-{i}"),
                    IN_PROCESS.into(),
                    slots,
                    resource_manager.clone(),
                    channels.clone(),
                    Some(metrics.clone()),
                )
            })
            .collect();
        let by_id = taskmanagers
            .iter()
            .map(|tm| (tm.id().to_string(), tm.clone()))
            .collect();
        let _ = resource_manager.taskmanagers.set(by_id);
        // Registered before this returns, so that the job is scheduled as soon as it is
        // submitted; then they heartbeat as daemons do.
        let mut memberships = Vec::new();
        for tm in &taskmanagers {
            let interval = membership::register(tm).await;
            let tm = tm.clone();
            memberships.push(tokio::spawn(async move {
                membership::heartbeat_until_forgotten(&tm, interval).await;
                membership::stay_registered(tm).await
            }));
        }
        Cluster {
            taskmanagers,
            memberships,
        }
    }

    /// Stops the TaskManagers' heartbeats and cancels whatever still runs.
    async fn shut_down(self) {
        for membership in self.memberships {
            membership.abort();
        }
        for tm in self.taskmanagers {
            tm.cancel_all().await;
        }
    }
}

/// When the tasks of the first attempt were deployed.
#[derive(Debug, Default)]
struct DeployClock {
    first_attempt_deployed: Mutex<Option<Instant>>,
}

impl DeployClock {
    fn deployed(&self, execution: &ExecutionId) {
        if execution.attempt == 1 {
            // Deployments end one after the other: the last one counts.
            *self.first_attempt_deployed.lock().expect("clock lock") = Some(Instant::now());
        }
    }

    fn first(&self, since: Instant) -> Option<Duration> {
        let deployed = *self.first_attempt_deployed.lock().expect("clock lock");
        deployed.map(|at| at.duration_since(since))
    }
}

/// The JobManager's resource manager, called in-process by the embedded TaskManagers.
struct InProcessResourceManager {
    jobmanager: Arc<JobManager>,
    taskmanagers: OnceLock<HashMap<String, Arc<TaskManager>>>,
    deployed: Arc<DeployClock>,
}

fn call_error(error: JobManagerError) -> CallError {
    match error {
        JobManagerError::UnknownTaskManager(id) => CallError::NotFound(id),
        JobManagerError::NoSuchJob(id) => CallError::NotFound(id),
        other => CallError::Refused(other.to_string()),
    }
}

#[async_trait]
impl ResourceManagerGateway for InProcessResourceManager {
    async fn register(
        &self,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<Registration, CallError> {
        let tm = self
            .taskmanagers
            .get()
            .and_then(|all| all.get(&request.taskmanager_id))
            .ok_or_else(|| CallError::NotFound(request.taskmanager_id.clone()))?;
        let gateway = InProcessTaskExecutor {
            taskmanager: tm.clone(),
            deployed: self.deployed.clone(),
        };
        self.jobmanager
            .register(request, Arc::new(gateway))
            .map_err(call_error)?;
        Ok(Registration {
            heartbeat_interval: self.jobmanager.config().heartbeat_interval,
            term: self.jobmanager.term(),
        })
    }

    async fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), CallError> {
        self.jobmanager.heartbeat(request).map_err(call_error)
    }

    async fn report_task_state(&self, report: pb::TaskStateReport) -> Result<(), CallError> {
        self.jobmanager.report(report).map_err(call_error)
    }

    async fn acknowledge_checkpoint(&self, ack: pb::CheckpointAck) -> Result<(), CallError> {
        self.jobmanager.acknowledge(ack).map_err(call_error)
    }
}

/// An embedded TaskManager, called in-process by the JobManager: it runs the graph the
/// JobManager planned instead of planning the SQL again.
struct InProcessTaskExecutor {
    taskmanager: Arc<TaskManager>,
    deployed: Arc<DeployClock>,
}

#[async_trait]
impl TaskExecutorGateway for InProcessTaskExecutor {
    async fn deploy(&self, deployment: Deployment) -> Result<(), CallError> {
        self.taskmanager
            .deploy(deployment.request, Some(deployment.graph))
            .await?;
        self.deployed.deployed(&deployment.execution);
        Ok(())
    }

    async fn stop(&self, execution: &ExecutionId, how: StopRequest) -> Result<(), CallError> {
        self.taskmanager.stop(execution, how).await;
        Ok(())
    }

    async fn trigger_checkpoint(
        &self,
        execution: &ExecutionId,
        barrier: Barrier,
    ) -> Result<(), CallError> {
        self.taskmanager.trigger(execution, barrier)
    }

    async fn notify_checkpoint_complete(
        &self,
        execution: &ExecutionId,
        notice: CompletedCheckpoint,
    ) -> Result<(), CallError> {
        self.taskmanager.checkpoint_complete(execution, notice);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
