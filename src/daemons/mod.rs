//! The daemons: `eddy jobmanager` and `eddy taskmanager`, from their options to a running
//! component.

pub mod args;
pub mod config_file;

use std::time::Duration;

use anyhow::{Context, Result, bail};

use args::Secured;
pub use args::{JobManagerArgs, TaskManagerArgs};

/// `eddy jobmanager`.
pub async fn jobmanager(args: JobManagerArgs) -> Result<()> {
    let Secured {
        tls,
        guard,
        bind,
        http_bind,
    } = args
        .security
        .secure("jobmanager", (args.bind, 6123), args.http_bind, true)?;
    let config = eddy_jobmanager::JobManagerConfig {
        heartbeat_interval: Duration::from_millis(args.heartbeat_interval_ms),
        heartbeat_timeout: Duration::from_millis(args.heartbeat_timeout_ms),
        checkpoint_root: args.checkpoint_dir,
        http_bind,
        high_availability: args.high_availability.resolve(bind, tls.as_ref())?,
        tls,
        guard,
        policy: args.limits.policy()?,
        lease: None,
        planning: eddy_planner::PlanningContext::CHECKING,
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
    if args.slots == 0 {
        bail!("--slots must be at least 1");
    }
    let host = host_name();
    let host = host.as_str();
    let Secured {
        tls,
        guard,
        bind,
        http_bind,
    } = args
        .security
        .secure("taskmanager", (args.bind, 0), args.http_bind, false)?;
    let scheme = eddy_proto::tls::scheme(tls.as_ref());
    let advertise = match args.advertise_hostname {
        true if bind.port() == 0 => bail!("--advertise-hostname needs a fixed port in --bind"),
        true if host.is_empty() => bail!("--advertise-hostname: /etc/hostname names no host"),
        true => Some(format!("{scheme}://{host}:{}", bind.port())),
        false => args.advertise,
    };
    let config = eddy_taskmanager::daemon::TaskManagerConfig {
        id: args
            .id
            .unwrap_or_else(|| format!("tm-{host}-{}", std::process::id())),
        bind,
        advertise,
        jobmanager: args.jobmanager,
        slots: args.slots,
        http_bind,
        tls,
        guard,
    };
    eddy_taskmanager::daemon::run(config, termination())
        .await
        .context("taskmanager")
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
