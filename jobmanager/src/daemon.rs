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
use crate::manager::JobManager;

/// Runs a JobManager on `bind` until `shutdown` resolves; it resumes the unfinished jobs
/// of its job store.
pub async fn run(
    bind: SocketAddr,
    config: JobManagerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    serve(listener, config, shutdown).await
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
    let store = JobStore::new(root);
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
    let result = server
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(jobs)
        .add_service(ResourceManagerServer::new(ResourceManagerImpl(jobmanager)))
        .serve_with_incoming_shutdown(eddy_proto::incoming(listener), shutdown)
        .await;
    timers.abort();
    let _ = http_stop.send(());
    tracing::info!("jobmanager stopped");
    result.map_err(|e| EddyError::Server {
        component: "jobmanager",
        source: Box::new(e),
    })
}
