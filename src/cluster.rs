//! The daemons and the client commands of a cluster: `eddy jobmanager`,
//! `eddy taskmanager`, `eddy submit/list/status/cancel`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use eddy_proto::auth::{BearerToken, Guard};
use eddy_proto::v1 as pb;
use eddy_proto::v1::job_service_client::JobServiceClient;
use serde::Deserialize;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::security::{self, Exposure, LimitArgs, TlsArgs};

/// Options of `eddy jobmanager`.
#[derive(Debug, Args)]
pub struct JobManagerArgs {
    /// Address to listen on [default: 0.0.0.0:6123 with TLS and tokens, 127.0.0.1:6123
    /// otherwise].
    #[arg(long, env = "EDDY_BIND")]
    bind: Option<SocketAddr>,
    /// Milliseconds between TaskManager heartbeats [default: 500].
    #[arg(long, env = "EDDY_HEARTBEAT_INTERVAL_MS")]
    heartbeat_interval_ms: Option<u64>,
    /// Milliseconds of silence after which a TaskManager is lost [default: 3000].
    #[arg(long, env = "EDDY_HEARTBEAT_TIMEOUT_MS")]
    heartbeat_timeout_ms: Option<u64>,
    /// Where checkpoints go unless a job sets execution.checkpointing.dir: a path,
    /// file:///... or s3://bucket/prefix [default: ./eddy-data/checkpoints].
    #[arg(long, env = "EDDY_CHECKPOINT_DIR")]
    checkpoint_dir: Option<String>,
    /// Address of the HTTP port: the web dashboard at /, the REST API under /v1, Prometheus
    /// metrics at /metrics (e.g. 0.0.0.0:8081) [default: none].
    #[arg(long, env = "EDDY_HTTP_BIND")]
    http_bind: Option<SocketAddr>,
    #[command(flatten)]
    security: SecurityArgs,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    high_availability: HighAvailabilityArgs,
    /// A TOML file with the same options (flags and environment variables win).
    #[arg(long, env = "EDDY_CONFIG")]
    config: Option<PathBuf>,
}

/// High availability: several JobManagers, one leading.
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields)]
struct HighAvailabilityArgs {
    /// `object-store`: this JobManager is one of several that share --checkpoint-dir (or
    /// --ha-storage-dir) and elect a leader through a lease kept there; the others stand
    /// by with their ports closed, and take over when the lease expires [default: none]
    /// (config file: high-availability.type).
    #[arg(
        long = "high-availability",
        env = "EDDY_HIGH_AVAILABILITY",
        value_name = "TYPE"
    )]
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Where the lease is kept [default: --checkpoint-dir] (config file:
    /// high-availability.storageDir).
    #[arg(
        long = "ha-storage-dir",
        env = "EDDY_HA_STORAGE_DIR",
        value_name = "DIR"
    )]
    #[serde(rename = "storageDir")]
    storage_dir: Option<String>,
    /// Address TaskManagers and clients reach this JobManager at while it leads, e.g.
    /// http://jm-1:6123 [default: the bound address] (config file:
    /// high-availability.advertise).
    #[arg(long = "advertise", env = "EDDY_ADVERTISE")]
    advertise: Option<String>,
    /// How long a lease not renewed lasts, e.g. 10s [default: 10s] (config file:
    /// high-availability.lease.duration).
    #[arg(
        long = "ha-lease-duration",
        env = "EDDY_HA_LEASE_DURATION",
        value_name = "DURATION"
    )]
    #[serde(skip)]
    lease_duration: Option<String>,
    /// How often the leader renews its lease and standbys look at it, e.g. 2s [default:
    /// 2s] (config file: high-availability.lease.renew-interval).
    #[arg(
        long = "ha-lease-renew-interval",
        env = "EDDY_HA_LEASE_RENEW_INTERVAL",
        value_name = "DURATION"
    )]
    #[serde(skip)]
    lease_renew_interval: Option<String>,
    #[arg(skip)]
    #[serde(default)]
    lease: LeaseFile,
}

/// `high-availability.lease.*` in a configuration file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LeaseFile {
    duration: Option<String>,
    renew_interval: Option<String>,
}

impl HighAvailabilityArgs {
    /// These options over `file`'s.
    fn or(self, file: Option<HighAvailabilityArgs>) -> Self {
        let file = file.unwrap_or_default();
        HighAvailabilityArgs {
            kind: self.kind.or(file.kind),
            storage_dir: self.storage_dir.or(file.storage_dir),
            advertise: self.advertise.or(file.advertise),
            lease_duration: self.lease_duration.or(file.lease.duration),
            lease_renew_interval: self.lease_renew_interval.or(file.lease.renew_interval),
            lease: LeaseFile::default(),
        }
    }

    /// The setting for a JobManager bound to `bind` under `tls`; `None` without high
    /// availability.
    fn resolve(
        self,
        bind: SocketAddr,
        tls: Option<&eddy_proto::tls::Tls>,
    ) -> Result<Option<eddy_jobmanager::config::HighAvailability>> {
        match self.kind.as_deref() {
            None | Some("none" | "NONE") => return Ok(None),
            Some("object-store") => {}
            Some(other) => bail!(
                "high-availability type '{other}' is not supported: use object-store (a lease in the storage directory) or none"
            ),
        }
        let defaults = eddy_jobmanager::leadership::LeaseSettings::default();
        let duration = |key: &str, value: Option<String>, default| match value {
            Some(value) => eddy_common::config::checkpointing::parse_duration(key, &value)
                .with_context(|| format!("--{key}")),
            None => Ok(default),
        };
        let lease = eddy_jobmanager::leadership::LeaseSettings {
            duration: duration("ha-lease-duration", self.lease_duration, defaults.duration)?,
            renew_interval: duration(
                "ha-lease-renew-interval",
                self.lease_renew_interval,
                defaults.renew_interval,
            )?,
        };
        if lease.renew_interval.is_zero() || lease.duration < lease.renew_interval * 2 {
            bail!(
                "the lease duration must be at least twice its renew interval (and that above zero)"
            );
        }
        let scheme = eddy_proto::tls::scheme(tls);
        let advertise = match self.advertise {
            Some(address) => address,
            None if bind.ip().is_unspecified() => {
                bail!(
                    "--advertise is needed with high availability when binding {bind}: the address others reach this JobManager at"
                )
            }
            None => format!("{scheme}://{bind}"),
        };
        Ok(Some(eddy_jobmanager::config::HighAvailability {
            lease,
            advertise,
            id: format!("jm-{}-{}", host_name(), std::process::id()),
            storage_dir: self.storage_dir,
        }))
    }
}

/// Options of `eddy taskmanager`.
#[derive(Debug, Args)]
pub struct TaskManagerArgs {
    /// The JobManager to register with [default: http://127.0.0.1:6123]; with high
    /// availability, every JobManager, comma-separated (it follows the leader).
    #[arg(long, env = "EDDY_JOBMANAGER")]
    jobmanager: Option<String>,
    /// Slots offered [default: 1].
    #[arg(long, env = "EDDY_SLOTS")]
    slots: Option<usize>,
    /// Address to listen on [default: any free port, on 0.0.0.0 with TLS and on
    /// 127.0.0.1 without].
    #[arg(long, env = "EDDY_BIND")]
    bind: Option<SocketAddr>,
    /// Address other processes reach this TaskManager at, e.g. http://tm-1:6124
    /// [default: the bound address].
    #[arg(long, env = "EDDY_ADVERTISE")]
    advertise: Option<String>,
    /// Advertise http://<this host's name>:<bound port>: in a container, the name other
    /// containers resolve (needs a fixed port in --bind).
    #[arg(long, env = "EDDY_ADVERTISE_HOSTNAME", conflicts_with = "advertise")]
    advertise_hostname: bool,
    /// Unique id [default: tm-<host>-<pid>].
    #[arg(long, env = "EDDY_TASKMANAGER_ID")]
    id: Option<String>,
    /// Address of the HTTP port serving Prometheus metrics at /metrics (e.g. 0.0.0.0:9249)
    /// [default: none].
    #[arg(long, env = "EDDY_HTTP_BIND")]
    http_bind: Option<SocketAddr>,
    #[command(flatten)]
    security: SecurityArgs,
    /// A TOML file with the same options (flags and environment variables win).
    #[arg(long, env = "EDDY_CONFIG")]
    config: Option<PathBuf>,
}

/// How a daemon is secured: TLS, users' tokens, and whether it may listen beyond loopback
/// without them.
#[derive(Debug, Args)]
struct SecurityArgs {
    #[command(flatten)]
    tls: TlsArgs,
    /// Users' tokens: a file of `name = sha256:HEX [read-only]` lines (`eddy token` makes
    /// them), demanded by a JobManager's job service and HTTP port and a TaskManager's
    /// /metrics. A JobManager without them listens on loopback only unless --insecure.
    #[arg(long, env = "EDDY_TOKEN_FILE", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Allow listening beyond loopback without TLS and tokens.
    #[arg(long, env = "EDDY_INSECURE")]
    insecure: bool,
}

/// A daemon's security and where it listens, checked against each other.
struct Secured {
    tls: Option<eddy_proto::tls::Tls>,
    guard: Guard,
    bind: SocketAddr,
    http_bind: Option<SocketAddr>,
}

impl SecurityArgs {
    /// The TLS and guard of daemon `what` (from these options or else `file`'s), and its
    /// addresses: `bind` (else `port` on loopback or, secured, every interface) and
    /// `http_bind`, refused beyond loopback unless secured. A daemon that serves no users
    /// (`users` false) needs no tokens to be secured.
    fn secure(
        &self,
        what: &str,
        file: &FileConfig,
        (bind, port): (Option<SocketAddr>, u16),
        http_bind: Option<SocketAddr>,
        users: bool,
    ) -> Result<Secured> {
        let tls = self.tls.clone().or(file.tls()).server()?;
        let guard = security::guard(self.token_file.as_deref().or(file.token_file.as_deref()))?;
        let exposure = Exposure {
            tls: tls.is_some(),
            tokens: guard.enabled() || !users,
            insecure: self.insecure || file.insecure,
        };
        let bind = exposure.bind(what, bind, port)?;
        if let Some(http) = http_bind {
            exposure.check(&format!("{what} --http-bind"), http)?;
        }
        Ok(Secured {
            tls,
            guard,
            bind,
            http_bind,
        })
    }
}

/// Options in a TOML file, for either daemon.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    bind: Option<SocketAddr>,
    heartbeat_interval_ms: Option<u64>,
    heartbeat_timeout_ms: Option<u64>,
    checkpoint_dir: Option<String>,
    jobmanager: Option<String>,
    slots: Option<usize>,
    advertise: Option<String>,
    id: Option<String>,
    http_bind: Option<SocketAddr>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca: Option<PathBuf>,
    tls_server_name: Option<String>,
    token_file: Option<PathBuf>,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    allowed_locations: Vec<String>,
    #[serde(default)]
    forbidden_connectors: Vec<String>,
    max_sql_bytes: Option<usize>,
    max_parallelism: Option<usize>,
    max_jobs_per_user: Option<usize>,
    secret_env_prefix: Option<String>,
    high_availability: Option<HighAvailabilityArgs>,
}

impl FileConfig {
    fn limits(&self) -> LimitArgs {
        LimitArgs {
            allowed_locations: self.allowed_locations.clone(),
            forbidden_connectors: self.forbidden_connectors.clone(),
            max_sql_bytes: self.max_sql_bytes,
            max_parallelism: self.max_parallelism,
            max_jobs_per_user: self.max_jobs_per_user,
            secret_env_prefix: self.secret_env_prefix.clone(),
        }
    }

    fn tls(&self) -> TlsArgs {
        TlsArgs {
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_ca: self.tls_ca.clone(),
            tls_server_name: self.tls_server_name.clone(),
        }
    }
}

fn read_config(path: Option<&Path>) -> Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid configuration in {}", path.display()))
}

/// This host's name (`/etc/hostname`; empty when unknown), for daemons' ids.
fn host_name() -> String {
    let name = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    name.trim().to_string()
}

/// Resolves when the process gets SIGTERM or SIGINT.
async fn termination() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down");
}

/// `eddy jobmanager`.
pub async fn jobmanager(args: JobManagerArgs) -> Result<()> {
    let file = read_config(args.config.as_deref())?;
    let Secured {
        tls,
        guard,
        bind,
        http_bind,
    } = args.security.secure(
        "jobmanager",
        &file,
        (args.bind.or(file.bind), 6123),
        args.http_bind.or(file.http_bind),
        true,
    )?;
    let policy = args.limits.or(file.limits()).policy()?;
    let defaults = eddy_jobmanager::JobManagerConfig::default();
    let config = eddy_jobmanager::JobManagerConfig {
        heartbeat_interval: args
            .heartbeat_interval_ms
            .or(file.heartbeat_interval_ms)
            .map_or(defaults.heartbeat_interval, Duration::from_millis),
        heartbeat_timeout: args
            .heartbeat_timeout_ms
            .or(file.heartbeat_timeout_ms)
            .map_or(defaults.heartbeat_timeout, Duration::from_millis),
        checkpoint_root: args
            .checkpoint_dir
            .or(file.checkpoint_dir)
            .unwrap_or(defaults.checkpoint_root),
        http_bind,
        high_availability: args
            .high_availability
            .or(file.high_availability)
            .resolve(bind, tls.as_ref())?,
        tls,
        guard,
        policy,
        lease: None,
    };
    if config.heartbeat_timeout <= config.heartbeat_interval {
        bail!("the heartbeat timeout must exceed the heartbeat interval");
    }
    eddy_jobmanager::daemon::run(bind, config, termination())
        .await
        .with_context(|| format!("jobmanager on {bind}"))
}

/// `eddy taskmanager`.
pub async fn taskmanager(args: TaskManagerArgs) -> Result<()> {
    let file = read_config(args.config.as_deref())?;
    let slots = args.slots.or(file.slots).unwrap_or(1);
    if slots == 0 {
        bail!("--slots must be at least 1");
    }
    let host = host_name();
    let host = host.as_str();
    let Secured {
        tls,
        guard,
        bind,
        http_bind,
    } = args.security.secure(
        "taskmanager",
        &file,
        (args.bind.or(file.bind), 0),
        args.http_bind.or(file.http_bind),
        false,
    )?;
    let scheme = eddy_proto::tls::scheme(tls.as_ref());
    let advertise = match args.advertise_hostname {
        true if bind.port() == 0 => bail!("--advertise-hostname needs a fixed port in --bind"),
        true if host.is_empty() => bail!("--advertise-hostname: /etc/hostname names no host"),
        true => Some(format!("{scheme}://{host}:{}", bind.port())),
        false => args.advertise.or(file.advertise),
    };
    let config = eddy_taskmanager::daemon::TaskManagerConfig {
        id: args
            .id
            .or(file.id)
            .unwrap_or_else(|| format!("tm-{host}-{}", std::process::id())),
        bind,
        advertise,
        jobmanager: args
            .jobmanager
            .or(file.jobmanager)
            .unwrap_or_else(|| "http://127.0.0.1:6123".into()),
        slots,
        http_bind,
        tls,
        guard,
    };
    eddy_taskmanager::daemon::run(config, termination())
        .await
        .context("taskmanager")
}

/// The JobManager a client command talks to, and how.
#[derive(Debug, Args)]
pub struct Target {
    /// The JobManager's address (`https://…` or any address with --tls-ca for TLS); with
    /// high availability, every JobManager's, comma-separated (the leader answers).
    #[arg(long, env = "EDDY_JOBMANAGER", default_value = "http://127.0.0.1:6123")]
    jobmanager: String,
    /// The token to present (when the JobManager demands one).
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    tls: TlsArgs,
}

/// How long a JobManager of several may take to answer before the next one is tried.
const LEADER_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A job service client sending the caller's token.
type Client = JobServiceClient<InterceptedService<Channel, BearerToken>>;

impl Target {
    /// A client of the first JobManager of `--jobmanager` (comma-separated: with high
    /// availability, standbys keep their ports closed) that answers.
    async fn connect(&self) -> Result<Client> {
        let tls = self.tls.client()?;
        let token =
            BearerToken::new(self.token.as_deref()).context("--token: a token is visible ASCII")?;
        let addresses: Vec<&str> = eddy_proto::jobmanager_addresses(&self.jobmanager).collect();
        let mut failure = None;
        for address in &addresses {
            let channel = match Self::channel(address, tls.as_ref()).await {
                Ok(channel) => channel,
                Err(error) => {
                    failure = Some(error);
                    continue;
                }
            };
            let mut client = JobServiceClient::with_interceptor(channel, token.clone());
            // Of several, the one that answers leads: a paused one accepts connections but
            // answers nothing.
            if addresses.len() > 1 {
                let probe = client.list_jobs(eddy_proto::v1::ListJobsRequest {});
                match tokio::time::timeout(LEADER_PROBE_TIMEOUT, probe).await {
                    Ok(Err(status)) if status.code() == tonic::Code::Unavailable => {
                        failure = Some(anyhow::anyhow!("the JobManager at {address}: {status}"));
                        continue;
                    }
                    Ok(_) => {}
                    Err(_) => {
                        failure = Some(anyhow::anyhow!(
                            "the JobManager at {address} does not answer"
                        ));
                        continue;
                    }
                }
            }
            return Ok(client);
        }
        Err(failure.unwrap_or_else(|| anyhow::anyhow!("--jobmanager names no address")))
    }

    async fn channel(address: &str, tls: Option<&eddy_proto::tls::Tls>) -> Result<Channel> {
        if address.starts_with("https://") && tls.is_none() {
            bail!(
                "{address} is a TLS address: pass --tls-ca (or EDDY_TLS_CA), the CA that signed the JobManager's certificate"
            );
        }
        let endpoint = eddy_proto::tls::endpoint(address, tls)
            .with_context(|| format!("bad JobManager address '{address}'"))?
            .connect_timeout(Duration::from_secs(5));
        endpoint.connect().await.with_context(|| {
            let hint = match tls {
                Some(_) => "",
                None => " (if it serves TLS, pass --tls-ca)",
            };
            format!("cannot reach the JobManager at {address}{hint}")
        })
    }
}

/// Output formats of the client commands.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    /// A table for people.
    Table,
    /// JSON for scripts.
    Json,
}

fn status_error(status: tonic::Status) -> anyhow::Error {
    let message = status.message();
    // A plain-text client of a TLS JobManager sees its connection dropped mid-call.
    let transport = matches!(
        status.code(),
        tonic::Code::Cancelled
            | tonic::Code::Unknown
            | tonic::Code::Unavailable
            | tonic::Code::Internal
    ) && ["canceled", "h2 protocol", "connection", "transport"]
        .iter()
        .any(|s| message.contains(s));
    match transport {
        true => anyhow::anyhow!(
            "{message} (the connection broke: if the JobManager serves TLS, use an https:// \
             address with --tls-ca)"
        ),
        false => anyhow::anyhow!("{message}"),
    }
}

/// `eddy submit`.
pub async fn submit(
    target: &Target,
    sql: String,
    options: Vec<(String, String)>,
    from_savepoint: Option<String>,
) -> Result<()> {
    let mut client = target.connect().await?;
    let request = pb::SubmitJobRequest {
        sql,
        options: options.into_iter().collect::<HashMap<_, _>>(),
        restore_path: from_savepoint.unwrap_or_default(),
    };
    let response = client.submit_job(request).await.map_err(status_error)?;
    println!("{}", response.into_inner().job_id);
    Ok(())
}

/// `eddy list`.
pub async fn list(target: &Target, format: OutputFormat) -> Result<()> {
    let mut client = target.connect().await?;
    let jobs = client
        .list_jobs(pb::ListJobsRequest {})
        .await
        .map_err(status_error)?
        .into_inner()
        .jobs;
    match format {
        OutputFormat::Json => {
            let values: Vec<serde_json::Value> = jobs
                .iter()
                .map(|j| {
                    serde_json::json!({
                        "job_id": j.job_id, "name": j.name, "state": job_state(j.state),
                        "submitted_at_ms": j.submitted_at_ms, "slots": j.slots,
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&values)?);
        }
        OutputFormat::Table => {
            println!("{:<18} {:<12} {:>5}  NAME", "JOB", "STATE", "SLOTS");
            for j in jobs {
                println!(
                    "{:<18} {:<12} {:>5}  {}",
                    j.job_id,
                    job_state(j.state),
                    j.slots,
                    j.name
                );
            }
        }
    }
    Ok(())
}

fn job_state(state: i32) -> &'static str {
    match pb::JobState::try_from(state).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Created => "CREATED",
        pb::JobState::Running => "RUNNING",
        pb::JobState::Finished => "FINISHED",
        pb::JobState::Cancelling => "CANCELLING",
        pb::JobState::Cancelled => "CANCELLED",
        pb::JobState::Failed => "FAILED",
        pb::JobState::Restarting => "RESTARTING",
        pb::JobState::Unspecified => "UNKNOWN",
    }
}

fn task_state(state: i32) -> &'static str {
    match pb::TaskState::try_from(state).unwrap_or(pb::TaskState::Unspecified) {
        pb::TaskState::Scheduled => "SCHEDULED",
        pb::TaskState::Running => "RUNNING",
        pb::TaskState::Finished => "FINISHED",
        pb::TaskState::Cancelled => "CANCELLED",
        pb::TaskState::Stopped => "STOPPED",
        pb::TaskState::Failed => "FAILED",
        pb::TaskState::Unspecified => "-",
    }
}

/// `eddy top`: the job's vertex table, redrawn every `interval_ms` until the job ends.
pub async fn top(target: &Target, job_id: String, interval_ms: u64) -> Result<()> {
    let mut client = target.connect().await?;
    loop {
        let job = client
            .get_job(pb::GetJobRequest {
                job_id: job_id.clone(),
            })
            .await
            .map_err(status_error)?
            .into_inner();
        // Clear the screen and home the cursor, then draw.
        print!("\x1b[2J\x1b[H");
        println!(
            "job {} ({}): {}  restarts: {}",
            job.job_id,
            job.name,
            job_state(job.state),
            job.restarts
        );
        if !job.reason.is_empty() {
            println!("  {}", job.reason);
        }
        println!("  {}\n", crate::watch::progress_line(&job));
        print!("{}", crate::watch::vertex_table(&job));
        let ended = matches!(
            pb::JobState::try_from(job.state),
            Ok(pb::JobState::Finished | pb::JobState::Cancelled | pb::JobState::Failed)
        );
        if ended {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(interval_ms.max(100))) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// The restarts as `eddy status` shows them: in all, against the strategy's budget, and
/// the strategy's last reset.
fn restarts_line(job: &pb::JobInfo) -> String {
    let mut line = format!(
        "{} ({} counted by {})",
        job.restarts, job.restart_attempts, job.restart_strategy
    );
    if job.restart_reset_at_ms > 0 {
        let ago = (eddy_common::event::wall_clock() - job.restart_reset_at_ms).max(0) / 1000;
        line.push_str(&format!("; backoff reset {ago} s ago"));
    }
    line
}

/// `eddy status`.
pub async fn status(
    target: &Target,
    job_id: String,
    format: OutputFormat,
    checkpoints: bool,
) -> Result<()> {
    let mut client = target.connect().await?;
    let job = client
        .get_job(pb::GetJobRequest { job_id })
        .await
        .map_err(status_error)?
        .into_inner();
    match format {
        OutputFormat::Json => {
            let vertices: Vec<serde_json::Value> = job
                .vertices
                .iter()
                .map(|v| {
                    let subtasks: Vec<serde_json::Value> = v
                        .subtasks
                        .iter()
                        .map(|s| {
                            serde_json::json!({
                                "index": s.index, "taskmanager": s.taskmanager_id, "state": task_state(s.state),
                                "records_in": s.records_in, "records_out": s.records_out,
                            })
                        })
                        .collect();
                    let m = v.metrics.clone().unwrap_or_default();
                    let metrics = serde_json::json!({
                        "records_in_per_second": m.records_in_per_second,
                        "records_out_per_second": m.records_out_per_second,
                        "busy_ratio": m.busy_ratio, "backpressured_ratio": m.backpressured_ratio,
                        "watermark_out_ms": m.totals.and_then(|t| t.watermark_out),
                    });
                    serde_json::json!({"id": v.id, "name": v.name, "parallelism": v.parallelism, "metrics": metrics, "subtasks": subtasks})
                })
                .collect();
            let checkpoint_list: Vec<serde_json::Value> =
                job.checkpoints.iter().map(checkpoint_json).collect();
            let leader = job.leader.as_ref().map(|l| {
                serde_json::json!({"term": l.term, "holder": l.holder, "address": l.address, "since_ms": l.since_ms})
            });
            let value = serde_json::json!({
                "job_id": job.job_id, "name": job.name, "state": job_state(job.state), "reason": job.reason,
                "submitted_at_ms": job.submitted_at_ms, "started_at_ms": job.started_at_ms,
                "restarts": job.restarts, "restart_strategy": job.restart_strategy,
                "restart_attempts": job.restart_attempts, "restart_reset_at_ms": job.restart_reset_at_ms,
                "restored_from": job.restored_from, "vertices": vertices,
                "checkpoints": checkpoint_list, "leader": leader,
            });
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        OutputFormat::Table => {
            println!(
                "job {} ({}): {}",
                job.job_id,
                job.name,
                job_state(job.state)
            );
            if !job.reason.is_empty() {
                println!("  {}", job.reason);
            }
            println!("  restarts: {}", restarts_line(&job));
            if let Some(leader) = &job.leader {
                let now = eddy_common::event::wall_clock();
                println!(
                    "  jobmanager: {} at {} leads, term {} for {} s",
                    leader.holder,
                    leader.address,
                    leader.term,
                    (now - leader.since_ms).max(0) / 1000
                );
            }
            if job.restored_from > 0 {
                println!("  restored from checkpoint {}", job.restored_from);
            }
            print!("{}", crate::watch::vertex_table(&job));
            println!();
            println!(
                "  {:<24} {:>7}  {:<28} {:<10} {:>12} {:>12}",
                "VERTEX", "SUBTASK", "TASKMANAGER", "STATE", "RECORDS IN", "RECORDS OUT"
            );
            for v in &job.vertices {
                for s in &v.subtasks {
                    println!(
                        "  {:<24} {:>7}  {:<28} {:<10} {:>12} {:>12}",
                        v.name,
                        s.index,
                        s.taskmanager_id,
                        task_state(s.state),
                        s.records_in,
                        s.records_out
                    );
                }
            }
            if checkpoints {
                print_checkpoints(&job.checkpoints);
            }
        }
    }
    Ok(())
}

fn checkpoint_state(state: i32) -> &'static str {
    match pb::CheckpointState::try_from(state).unwrap_or(pb::CheckpointState::Unspecified) {
        pb::CheckpointState::InProgress => "IN_PROGRESS",
        pb::CheckpointState::Completed => "COMPLETED",
        pb::CheckpointState::Failed => "FAILED",
        pb::CheckpointState::Unspecified => "-",
    }
}

fn checkpoint_json(c: &pb::CheckpointInfo) -> serde_json::Value {
    let acks: Vec<serde_json::Value> = c
        .acks
        .iter()
        .map(|a| {
            serde_json::json!({
                "vertex": a.vertex, "subtask": a.subtask, "ack_ms": a.ack_ms,
                "alignment_ms": a.alignment_ms, "size_bytes": a.size_bytes,
            })
        })
        .collect();
    serde_json::json!({
        "id": c.id, "state": checkpoint_state(c.state), "triggered_at_ms": c.triggered_at_ms,
        "duration_ms": c.duration_ms, "size_bytes": c.size_bytes,
        "full_size_bytes": c.full_size_bytes, "alignment_ms": c.alignment_ms,
        "failure": c.failure, "acks": acks,
    })
}

fn print_checkpoints(checkpoints: &[pb::CheckpointInfo]) {
    println!(
        "  {:>6} {:<12} {:>15} {:>10} {:>12} {:>12}  TASK ACKS (vertex[subtask]: ms)",
        "ID", "STATE", "TRIGGERED (ms)", "DURATION", "SIZE", "ALIGNMENT"
    );
    for c in checkpoints {
        let acks: Vec<String> = c
            .acks
            .iter()
            .map(|a| format!("v{}[{}]: {}", a.vertex, a.subtask, a.ack_ms))
            .collect();
        println!(
            "  {:>6} {:<12} {:>15} {:>8}ms {:>10} B {:>10}ms  {}",
            c.id,
            checkpoint_state(c.state),
            c.triggered_at_ms,
            c.duration_ms,
            c.size_bytes,
            c.alignment_ms,
            if c.failure.is_empty() {
                acks.join(", ")
            } else {
                c.failure.clone()
            }
        );
    }
}

/// `eddy savepoint` and `eddy stop --savepoint`.
pub async fn savepoint(target: &Target, job_id: String, stop: bool) -> Result<()> {
    let mut client = target.connect().await?;
    let response = client
        .trigger_savepoint(pb::TriggerSavepointRequest { job_id, stop })
        .await
        .map_err(status_error)?;
    println!("{}", response.into_inner().path);
    Ok(())
}

/// `eddy cancel`.
pub async fn cancel(target: &Target, job_id: String) -> Result<()> {
    let mut client = target.connect().await?;
    client
        .cancel_job(pb::CancelJobRequest {
            job_id: job_id.clone(),
        })
        .await
        .map_err(status_error)?;
    println!("cancelled {job_id}");
    Ok(())
}

/// `eddy health ADDRESS`: whether something accepts connections there (for container
/// health checks, where there is no shell or curl).
pub async fn health(address: &str) -> Result<()> {
    let target = address
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let connect = tokio::net::TcpStream::connect(target);
    match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => bail!("{address}: {e}"),
        Err(_) => bail!("{address}: no answer within 2 s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_are_read_and_unknown_keys_rejected() {
        let dir = std::env::temp_dir().join(format!("eddy-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(
            &good,
            "slots = 4\njobmanager = \"http://jm:6123\"\nbind = \"0.0.0.0:6124\"\n",
        )
        .unwrap();
        let config = read_config(Some(&good)).unwrap();
        assert_eq!(config.slots, Some(4));
        assert_eq!(config.jobmanager.as_deref(), Some("http://jm:6123"));
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "slot = 4\n").unwrap();
        let error = format!("{:#}", read_config(Some(&bad)).unwrap_err());
        assert!(
            error.contains("bad.toml") && error.contains("slot"),
            "{error}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
