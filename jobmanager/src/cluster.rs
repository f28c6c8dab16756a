//! The JobManager of a cluster of TaskManager daemons: keeps the registered TaskManagers
//! and their slots, queues jobs until enough slots are free, deploys them, follows their
//! tasks' states, and fails the jobs of a TaskManager that goes silent.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use eddy_common::EddyError;

use crate::scheduler::spread_slots;
use eddy_common::plan::{JobGraph, plan_job};
use eddy_common::sql::compile;
use eddy_proto::v1 as pb;
use eddy_proto::v1::task_executor_client::TaskExecutorClient;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// Timing of the membership protocol.
#[derive(Debug, Clone, Copy)]
pub struct ClusterConfig {
    /// How often TaskManagers heartbeat.
    pub heartbeat_interval: Duration,
    /// Silence after which a TaskManager is considered lost.
    pub heartbeat_timeout: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            heartbeat_interval: Duration::from_millis(500),
            heartbeat_timeout: Duration::from_secs(3),
        }
    }
}

struct TaskManagerRecord {
    address: String,
    slots: usize,
    used: usize,
    last_seen: Instant,
    client: TaskExecutorClient<Channel>,
}

struct TaskRecord {
    taskmanager: String,
    state: pb::TaskState,
    records_in: u64,
    records_out: u64,
}

struct JobRecord {
    name: String,
    sql: String,
    options: HashMap<String, String>,
    graph: Arc<JobGraph>,
    state: pb::JobState,
    reason: String,
    submitted_at_ms: i64,
    started_at_ms: i64,
    tasks: BTreeMap<(usize, usize), TaskRecord>,
}

#[derive(Default)]
struct State {
    taskmanagers: BTreeMap<String, TaskManagerRecord>,
    jobs: HashMap<String, JobRecord>,
    order: Vec<String>,
}

/// The cluster's JobManager state, shared by its services.
pub struct Cluster {
    config: ClusterConfig,
    state: Mutex<State>,
    next_job: AtomicU64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A command to send to a TaskManager once the state lock is released.
enum Command {
    Deploy(TaskExecutorClient<Channel>, pb::DeployTasksRequest),
    Cancel(TaskExecutorClient<Channel>, String),
}

impl Cluster {
    /// An empty cluster.
    pub fn new(config: ClusterConfig) -> Arc<Self> {
        Arc::new(Cluster {
            config,
            state: Mutex::new(State::default()),
            next_job: AtomicU64::new(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("cluster state lock")
    }

    /// Plans and queues a job.
    pub fn submit(
        self: &Arc<Self>,
        sql: String,
        options: HashMap<String, String>,
    ) -> Result<String, Status> {
        let overrides: Vec<(String, String)> = options
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let compiled = compile(&sql, &overrides).map_err(invalid)?;
        let graph = plan_job(&compiled).map_err(invalid)?;
        let job_id = format!(
            "{:08x}{:08x}",
            (now_ms() as u64) & 0xffff_ffff,
            self.next_job.fetch_add(1, Ordering::Relaxed)
        );
        let record = JobRecord {
            name: graph.config.name.clone(),
            sql,
            options,
            graph: Arc::new(graph),
            state: pb::JobState::Created,
            reason: "waiting for slots".into(),
            submitted_at_ms: now_ms(),
            started_at_ms: 0,
            tasks: BTreeMap::new(),
        };
        {
            let mut state = self.lock();
            state.jobs.insert(job_id.clone(), record);
            state.order.push(job_id.clone());
        }
        tracing::info!(job = %job_id, "job submitted");
        self.schedule();
        Ok(job_id)
    }

    /// Starts every queued job that fits into the free slots, in submission order.
    fn schedule(self: &Arc<Self>) {
        let mut commands = Vec::new();
        {
            let mut guard = self.lock();
            let state = &mut *guard;
            for job_id in state.order.clone() {
                let job = state.jobs.get_mut(&job_id).expect("ordered job exists");
                if job.state != pb::JobState::Created {
                    continue;
                }
                let needed = job.graph.slots_needed();
                let total: usize = state.taskmanagers.values().map(|t| t.slots).sum();
                let free: usize = state.taskmanagers.values().map(|t| t.slots - t.used).sum();
                if needed > free {
                    job.reason = format!(
                        "waiting for slots: needs {needed}, {free} of {total} free on {} TaskManagers",
                        state.taskmanagers.len()
                    );
                    continue;
                }
                let ids: Vec<String> = state.taskmanagers.keys().cloned().collect();
                let mut free_per_tm: Vec<usize> = state
                    .taskmanagers
                    .values()
                    .map(|t| t.slots - t.used)
                    .collect();
                let Some(slots) = spread_slots(&mut free_per_tm, needed) else {
                    continue;
                };
                let slots: Vec<String> = slots.into_iter().map(|i| ids[i].clone()).collect();
                for id in &slots {
                    if let Some(tm) = state.taskmanagers.get_mut(id) {
                        tm.used += 1;
                    }
                }
                let mut locations = Vec::new();
                let mut per_tm: BTreeMap<String, Vec<pb::TaskId>> = BTreeMap::new();
                for vertex in &job.graph.vertices {
                    for (subtask, tm) in slots.iter().take(vertex.parallelism).enumerate() {
                        let tm = tm.clone();
                        let task = pb::TaskId {
                            job_id: job_id.clone(),
                            vertex: vertex.id as u32,
                            subtask: subtask as u32,
                        };
                        locations.push(pb::TaskLocation {
                            task: Some(task.clone()),
                            address: state.taskmanagers[&tm].address.clone(),
                        });
                        per_tm.entry(tm.clone()).or_default().push(task);
                        job.tasks.insert(
                            (vertex.id, subtask),
                            TaskRecord {
                                taskmanager: tm,
                                state: pb::TaskState::Scheduled,
                                records_in: 0,
                                records_out: 0,
                            },
                        );
                    }
                }
                let vertex_parallelism = job
                    .graph
                    .vertices
                    .iter()
                    .map(|v| v.parallelism as u32)
                    .collect::<Vec<_>>();
                for (tm, tasks) in per_tm {
                    commands.push(Command::Deploy(
                        state.taskmanagers[&tm].client.clone(),
                        pb::DeployTasksRequest {
                            job_id: job_id.clone(),
                            sql: job.sql.clone(),
                            options: job.options.clone(),
                            vertex_parallelism: vertex_parallelism.clone(),
                            tasks,
                            locations: locations.clone(),
                        },
                    ));
                }
                job.state = pb::JobState::Running;
                job.reason = String::new();
                job.started_at_ms = now_ms();
                tracing::info!(job = %job_id, slots = needed, "job deployed");
            }
        }
        self.send(commands);
    }

    fn send(self: &Arc<Self>, commands: Vec<Command>) {
        for command in commands {
            let cluster = self.clone();
            tokio::spawn(async move {
                match command {
                    Command::Deploy(mut client, request) => {
                        let job_id = request.job_id.clone();
                        if let Err(status) = client.deploy_tasks(request).await {
                            cluster
                                .fail(&job_id, format!("deploying failed: {}", status.message()));
                        }
                    }
                    Command::Cancel(mut client, job_id) => {
                        let request = pb::CancelTasksRequest {
                            job_id: job_id.clone(),
                        };
                        if let Err(status) = client.cancel_tasks(request).await {
                            tracing::warn!(job = %job_id, %status, "cancelling tasks failed");
                        }
                    }
                }
            });
        }
    }

    /// Ends a job in `end` state: frees its slots and cancels its tasks that may still run.
    fn end_job(state: &mut State, job_id: &str, end: pb::JobState, reason: String) -> Vec<Command> {
        let Some(job) = state.jobs.get_mut(job_id) else {
            return Vec::new();
        };
        let was_running =
            job.state == pb::JobState::Running || job.state == pb::JobState::Cancelling;
        job.state = end;
        job.reason = reason;
        let mut commands = Vec::new();
        if was_running {
            let mut involved: Vec<String> =
                job.tasks.values().map(|t| t.taskmanager.clone()).collect();
            for tm in &involved {
                if let Some(record) = state.taskmanagers.get_mut(tm) {
                    record.used = record.used.saturating_sub(1);
                }
            }
            involved.sort();
            involved.dedup();
            if end != pb::JobState::Finished {
                for tm in involved {
                    if let Some(record) = state.taskmanagers.get(&tm) {
                        commands.push(Command::Cancel(record.client.clone(), job_id.to_string()));
                    }
                }
            }
        }
        commands
    }

    fn fail(self: &Arc<Self>, job_id: &str, reason: String) {
        let commands = {
            let mut state = self.lock();
            match state.jobs.get(job_id) {
                Some(job) if matches!(job.state, pb::JobState::Running | pb::JobState::Created) => {
                    tracing::warn!(job = %job_id, %reason, "job failed");
                    Self::end_job(&mut state, job_id, pb::JobState::Failed, reason)
                }
                _ => Vec::new(),
            }
        };
        self.send(commands);
        self.schedule();
    }

    /// Cancels a job.
    pub fn cancel(self: &Arc<Self>, job_id: &str) -> Result<(), Status> {
        let commands = {
            let mut state = self.lock();
            let job = state
                .jobs
                .get(job_id)
                .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
            match job.state {
                pb::JobState::Created | pb::JobState::Running => {}
                other => {
                    return Err(Status::failed_precondition(format!(
                        "job {job_id} is {}",
                        other.as_str_name()
                    )));
                }
            }
            Self::end_job(
                &mut state,
                job_id,
                pb::JobState::Cancelled,
                "cancelled on request".into(),
            )
        };
        tracing::info!(job = %job_id, "job cancelled");
        self.send(commands);
        self.schedule();
        Ok(())
    }

    /// Registers (or re-registers) a TaskManager.
    pub fn register(
        self: &Arc<Self>,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<(), Status> {
        if request.taskmanager_id.is_empty() || request.slots == 0 {
            return Err(Status::invalid_argument(
                "a TaskManager needs an id and at least one slot",
            ));
        }
        let endpoint = Channel::from_shared(request.address.clone())
            .map_err(|e| {
                Status::invalid_argument(format!("bad address '{}': {e}", request.address))
            })?
            .connect_timeout(Duration::from_secs(3));
        let client = TaskExecutorClient::new(endpoint.connect_lazy());
        let lost = {
            let mut state = self.lock();
            let previous = state.taskmanagers.insert(
                request.taskmanager_id.clone(),
                TaskManagerRecord {
                    address: request.address.clone(),
                    slots: request.slots as usize,
                    used: 0,
                    last_seen: Instant::now(),
                    client,
                },
            );
            // A TaskManager registering again has lost whatever it ran.
            match previous {
                Some(_) => jobs_on(&state, &request.taskmanager_id),
                None => Vec::new(),
            }
        };
        tracing::info!(id = %request.taskmanager_id, address = %request.address, slots = request.slots, "taskmanager registered");
        for job_id in lost {
            self.fail(
                &job_id,
                format!("TaskManager {} restarted", request.taskmanager_id),
            );
        }
        self.schedule();
        Ok(())
    }

    /// Takes a heartbeat; unknown TaskManagers get NOT_FOUND (and register again).
    pub fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), Status> {
        let mut state = self.lock();
        let tm = state
            .taskmanagers
            .get_mut(&request.taskmanager_id)
            .ok_or_else(|| unknown_taskmanager(&request.taskmanager_id))?;
        tm.last_seen = Instant::now();
        for counters in request.tasks {
            let Some(task) = counters.task else { continue };
            if let Some(job) = state.jobs.get_mut(&task.job_id)
                && let Some(record) = job
                    .tasks
                    .get_mut(&(task.vertex as usize, task.subtask as usize))
                && record.taskmanager == request.taskmanager_id
            {
                if record.state == pb::TaskState::Scheduled {
                    record.state = pb::TaskState::Running;
                }
                record.records_in = counters.records_in;
                record.records_out = counters.records_out;
            }
        }
        Ok(())
    }

    /// Takes a task's new state.
    pub fn report(self: &Arc<Self>, report: pb::TaskStateReport) -> Result<(), Status> {
        let task = report
            .task
            .ok_or_else(|| Status::invalid_argument("a report without a task"))?;
        let state_reported = pb::TaskState::try_from(report.state).map_err(|_| {
            Status::invalid_argument(format!("unknown task state {}", report.state))
        })?;
        let (failed, finished) = {
            let mut state = self.lock();
            if !state.taskmanagers.contains_key(&report.taskmanager_id) {
                return Err(unknown_taskmanager(&report.taskmanager_id));
            }
            let job = state
                .jobs
                .get_mut(&task.job_id)
                .ok_or_else(|| Status::not_found(format!("no job {}", task.job_id)))?;
            let record = job
                .tasks
                .get_mut(&(task.vertex as usize, task.subtask as usize))
                .filter(|r| r.taskmanager == report.taskmanager_id)
                .ok_or_else(|| {
                    Status::permission_denied("that task does not run on that TaskManager")
                })?;
            record.state = state_reported;
            record.records_in = report.records_in;
            record.records_out = report.records_out;
            let running = job.state == pb::JobState::Running;
            // A task the JobManager did not ask to cancel was stopped by its TaskManager
            // (shutting down): the job cannot go on without it.
            let failed = running
                && matches!(
                    state_reported,
                    pb::TaskState::Failed | pb::TaskState::Cancelled
                );
            let finished = running
                && job
                    .tasks
                    .values()
                    .all(|t| t.state == pb::TaskState::Finished);
            (failed, finished)
        };
        if failed {
            let reason = match report.error.as_str() {
                "" => format!(
                    "task v{}[{}] was stopped by TaskManager {}",
                    task.vertex, task.subtask, report.taskmanager_id
                ),
                error => format!("task v{}[{}] failed: {error}", task.vertex, task.subtask),
            };
            self.fail(&task.job_id, reason);
        } else if finished {
            let commands = {
                let mut state = self.lock();
                Self::end_job(
                    &mut state,
                    &task.job_id,
                    pb::JobState::Finished,
                    String::new(),
                )
            };
            tracing::info!(job = %task.job_id, "job finished");
            self.send(commands);
            self.schedule();
        }
        Ok(())
    }

    /// Fails the jobs of TaskManagers silent for longer than the heartbeat timeout, and
    /// forgets those TaskManagers.
    pub fn expire_silent(self: &Arc<Self>) {
        let lost: Vec<(String, Vec<String>)> = {
            let mut state = self.lock();
            let silent: Vec<String> = state
                .taskmanagers
                .iter()
                .filter(|(_, tm)| tm.last_seen.elapsed() > self.config.heartbeat_timeout)
                .map(|(id, _)| id.clone())
                .collect();
            silent
                .into_iter()
                .map(|id| {
                    let jobs = jobs_on(&state, &id);
                    state.taskmanagers.remove(&id);
                    (id, jobs)
                })
                .collect()
        };
        for (id, jobs) in lost {
            tracing::warn!(taskmanager = %id, "taskmanager lost (no heartbeat)");
            for job_id in jobs {
                self.fail(&job_id, format!("TaskManager {id} was lost"));
            }
        }
    }

    /// The heartbeat interval TaskManagers are told.
    pub fn config(&self) -> ClusterConfig {
        self.config
    }

    /// Summaries of all jobs, newest first.
    pub fn list(&self) -> Vec<pb::JobSummary> {
        let state = self.lock();
        state
            .order
            .iter()
            .rev()
            .map(|id| {
                let job = &state.jobs[id];
                pb::JobSummary {
                    job_id: id.clone(),
                    name: job.name.clone(),
                    state: job.state as i32,
                    submitted_at_ms: job.submitted_at_ms,
                    slots: job.graph.slots_needed() as u32,
                }
            })
            .collect()
    }

    /// One job in detail.
    pub fn job(&self, job_id: &str) -> Result<pb::JobInfo, Status> {
        let state = self.lock();
        let job = state
            .jobs
            .get(job_id)
            .ok_or_else(|| Status::not_found(format!("no job {job_id}")))?;
        let vertices = job
            .graph
            .vertices
            .iter()
            .map(|vertex| pb::VertexInfo {
                id: vertex.id as u32,
                name: vertex.name(),
                parallelism: vertex.parallelism as u32,
                subtasks: (0..vertex.parallelism)
                    .map(|subtask| {
                        let record = job.tasks.get(&(vertex.id, subtask));
                        pb::SubtaskInfo {
                            index: subtask as u32,
                            taskmanager_id: record
                                .map(|r| r.taskmanager.clone())
                                .unwrap_or_default(),
                            state: record.map_or(pb::TaskState::Unspecified, |r| r.state) as i32,
                            records_in: record.map_or(0, |r| r.records_in),
                            records_out: record.map_or(0, |r| r.records_out),
                        }
                    })
                    .collect(),
            })
            .collect();
        Ok(pb::JobInfo {
            job_id: job_id.to_string(),
            name: job.name.clone(),
            state: job.state as i32,
            reason: job.reason.clone(),
            submitted_at_ms: job.submitted_at_ms,
            started_at_ms: job.started_at_ms,
            restarts: 0,
            vertices,
            plan: job.graph.explain(),
        })
    }
}

fn jobs_on(state: &State, taskmanager: &str) -> Vec<String> {
    state
        .jobs
        .iter()
        .filter(|(_, job)| {
            matches!(job.state, pb::JobState::Running | pb::JobState::Cancelling)
                && job.tasks.values().any(|t| t.taskmanager == taskmanager)
        })
        .map(|(id, _)| id.clone())
        .collect()
}

fn unknown_taskmanager(id: &str) -> Status {
    Status::not_found(format!("unknown TaskManager '{id}'; register first"))
}

/// A planning error as the client should see it: invalid SQL with its `line:column`.
fn invalid(error: EddyError) -> Status {
    Status::invalid_argument(error.to_string())
}

/// The `JobService` over a cluster.
pub struct JobServiceImpl(pub Arc<Cluster>);

#[tonic::async_trait]
impl pb::job_service_server::JobService for JobServiceImpl {
    async fn submit_job(
        &self,
        request: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let request = request.into_inner();
        let job_id = self.0.submit(request.sql, request.options)?;
        Ok(Response::new(pb::SubmitJobResponse { job_id }))
    }

    async fn list_jobs(
        &self,
        _: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        Ok(Response::new(pb::ListJobsResponse {
            jobs: self.0.list(),
        }))
    }

    async fn get_job(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        Ok(Response::new(self.0.job(&request.into_inner().job_id)?))
    }

    async fn cancel_job(
        &self,
        request: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::CancelJobResponse>, Status> {
        self.0.cancel(&request.into_inner().job_id)?;
        Ok(Response::new(pb::CancelJobResponse {}))
    }
}

/// The `ResourceManager` service over a cluster.
pub struct ResourceManagerImpl(pub Arc<Cluster>);

#[tonic::async_trait]
impl pb::resource_manager_server::ResourceManager for ResourceManagerImpl {
    async fn register_task_manager(
        &self,
        request: Request<pb::RegisterTaskManagerRequest>,
    ) -> Result<Response<pb::RegisterTaskManagerResponse>, Status> {
        self.0.register(request.into_inner())?;
        Ok(Response::new(pb::RegisterTaskManagerResponse {
            heartbeat_interval_ms: self.0.config().heartbeat_interval.as_millis() as u64,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        self.0.heartbeat(request.into_inner())?;
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    async fn report_task_state(
        &self,
        request: Request<pb::TaskStateReport>,
    ) -> Result<Response<pb::TaskStateAck>, Status> {
        self.0.report(request.into_inner())?;
        Ok(Response::new(pb::TaskStateAck {}))
    }
}
