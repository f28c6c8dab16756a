//! The JobManager daemon: serves `JobService` and `ResourceManager` over gRPC and runs the
//! JobManager's timers.

use std::future::Future;
use std::net::SocketAddr;

use eddy_common::object_storage::resolve;
use eddy_common::{EddyError, Result};
use eddy_proto::http_listener::HttpListener;
use eddy_proto::tls::{ClientAuth, Tls};
use eddy_proto::v1::job_service_server::JobServiceServer;
use eddy_proto::v1::resource_manager_server::ResourceManagerServer;
use tonic::service::interceptor::InterceptedService;

use crate::config::JobManagerConfig;
use crate::grpc::{JobServiceImpl, ResourceManagerImpl};
use crate::job_store::JobStore;
use crate::leadership::Leadership;
use crate::manager::JobManager;

/// Runs a JobManager on `bind` until `shutdown` resolves; it resumes the unfinished jobs
/// of its job store. With high availability it first stands by until it leads (its ports
/// closed meanwhile, so that TaskManagers and clients try the other JobManagers), and it
/// stops with [`EddyError::Fenced`] when it loses the lease.
pub async fn run(
    bind: SocketAddr,
    mut config: JobManagerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let Some(ha) = config.high_availability.clone() else {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        return serve(listener, config, shutdown).await;
    };
    let root = resolve(
        ha.storage_dir.as_ref().unwrap_or(&config.checkpoint_root),
        &[],
    )?;
    let http = config.http_bind.map(|b| b.to_string());
    let leadership = Leadership::new(&root, ha.lease, ha.id, ha.advertise, http);
    let mut shutdown = std::pin::pin!(shutdown);
    let held = tokio::select! {
        held = leadership.acquire() => held,
        () = &mut shutdown => return Ok(()),
    };
    config.lease = Some(held.lease.clone());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let (lost_tx, lost_rx) = tokio::sync::oneshot::channel();
    let holding = tokio::spawn(async move {
        let _ = lost_tx.send(leadership.hold(held).await);
    });
    let lost = async {
        match lost_rx.await {
            Ok(lost) => lost.to_string(),
            Err(_) => "the lease keeper stopped".into(),
        }
    };
    let result = serve_until_lost(listener, config, shutdown, lost).await;
    holding.abort();
    result
}

/// Serves until `shutdown`, or until `lost` says why the lease was lost: then at once,
/// without draining requests (a JobManager without the lease must not act a moment longer;
/// the process ends).
async fn serve_until_lost(
    listener: tokio::net::TcpListener,
    config: JobManagerConfig,
    shutdown: impl Future<Output = ()>,
    lost: impl Future<Output = String>,
) -> Result<()> {
    tokio::select! {
        result = serve(listener, config, shutdown) => result,
        reason = lost => {
            tracing::error!(%reason, "this jobmanager lost the leader lease; it stops");
            Err(EddyError::Fenced(reason))
        }
    }
}

/// Room for a request's fields besides its script.
const MESSAGE_SLACK: usize = 64 << 10;

/// Calls one connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 256;

/// Runs a JobManager on a bound listener until `shutdown` resolves; it first resumes the
/// unfinished jobs of its job store.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: JobManagerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let local = listener.local_addr()?;
    let root = resolve(&config.checkpoint_root, &[])?;
    let store = JobStore::new(root).with_term(config.term());
    store.check().await.map_err(|e| {
        EddyError::Config(format!("job store at '{}': {e}", config.checkpoint_root))
    })?;
    let jobmanager = JobManager::new(config.clone(), Some(store));
    jobmanager.recover().await?;
    let timers = tokio::spawn(jobmanager.clone().run_timers());
    let tls = config.tls.as_ref();
    tracing::info!(address = %local, tls = tls.is_some(), tokens = config.guard.enabled(), "jobmanager listening");
    let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(bind) = config.http_bind {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        tracing::info!(address = %listener.local_addr()?, tls = tls.is_some(), "jobmanager http listening (dashboard, /v1, /metrics)");
        let listener = HttpListener::new(listener, tls.and_then(Tls::acceptor))?;
        let stopped = async {
            let _ = http_stopped.await;
        };
        let jm = jobmanager.clone();
        tokio::spawn(async move {
            if let Err(error) = crate::http::serve(listener, jm, stopped).await {
                tracing::warn!(%error, "jobmanager http port failed");
            }
        });
    }
    // Users' clients may come without a certificate (they present tokens); the
    // ResourceManager serves only peers whose certificate the handshake verified.
    let server = eddy_proto::tls::server(tls, ClientAuth::Optional)?;
    // A request holds at most a script and its options; anything larger is refused
    // before it is buffered whole.
    let request_limit = config.policy.max_sql_bytes + MESSAGE_SLACK;
    let jobs = InterceptedService::new(
        JobServiceServer::new(JobServiceImpl(jobmanager.clone()))
            .max_decoding_message_size(request_limit),
        config.guard.clone(),
    );
    let mut deposition = jobmanager.deposition();
    let deposed = async move {
        let _ = deposition.wait_for(Option::is_some).await;
    };
    let stop = async {
        tokio::select! {
            () = shutdown => {}
            () = deposed => {}
        }
    };
    let fenced = jobmanager.deposition();
    let result = server
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(jobs)
        .add_service(ResourceManagerServer::new(ResourceManagerImpl(jobmanager)))
        .serve_with_incoming_shutdown(eddy_proto::incoming(listener), stop)
        .await;
    timers.abort();
    let _ = http_stop.send(());
    tracing::info!("jobmanager stopped");
    result.map_err(|e| EddyError::Server {
        component: "jobmanager",
        source: Box::new(e),
    })?;
    match fenced.borrow().clone() {
        Some(reason) => Err(EddyError::Fenced(reason)),
        None => Ok(()),
    }
}
