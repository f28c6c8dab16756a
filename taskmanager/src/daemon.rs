//! The TaskManager daemon: serves `TaskExecutor` and `DataExchange`, and stays registered
//! with the JobManager over gRPC.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use eddy_common::{EddyError, Result};
use eddy_proto::auth::Guard;
use eddy_proto::http_listener::HttpListener;
use eddy_proto::tls::{ClientAuth, Tls};
use eddy_proto::v1::data_exchange_server::DataExchangeServer;
use eddy_proto::v1::task_executor_server::TaskExecutorServer;

use crate::grpc::{GrpcResourceManager, TaskExecutorService, TermFence};
use crate::membership::stay_registered;
use crate::network::{Channels, DataExchangeService};
use crate::node::{CHANNEL_CAPACITY, TaskManager};

/// How a TaskManager daemon is configured.
#[derive(Debug, Clone)]
pub struct TaskManagerConfig {
    /// Its id (unique in the cluster).
    pub id: String,
    /// Where to listen.
    pub bind: SocketAddr,
    /// The address others reach it at (default: the bound address, with 127.0.0.1 for
    /// an unspecified IP).
    pub advertise: Option<String>,
    /// The JobManager, e.g. `http://jobmanager:6123`.
    pub jobmanager: String,
    /// Slots offered.
    pub slots: usize,
    /// Where its HTTP port (`/metrics`, `/health`) listens, if anywhere.
    pub http_bind: Option<SocketAddr>,
    /// Mutual TLS on every connection (gRPC in and out, the data exchange) and TLS on
    /// the HTTP port, if set.
    pub tls: Option<Tls>,
    /// Who may read `/metrics`.
    pub guard: Guard,
}

/// The TaskManager's membership (registration and heartbeats) on a thread and runtime of
/// its own, as Flink keeps its RPC thread apart from task threads: tasks that keep the main
/// runtime's workers busy (restoring a large state, a burst of chunks on few cores) cannot
/// delay a heartbeat past the JobManager's timeout, which would fail the job again on
/// every restore.
struct Membership {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Membership {
    fn start(node: Arc<TaskManager>) -> Result<Membership> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("membership".into())
            .spawn(move || {
                runtime.block_on(async {
                    tokio::select! {
                        () = stay_registered(node) => {}
                        _ = stopped => {}
                    }
                })
            })?;
        Ok(Membership {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops heartbeating (the JobManager then loses this TaskManager) and waits for the
    /// thread.
    fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `SCHEME://IP:PORT` of a bound address, 127.0.0.1 standing for an unspecified IP.
fn url_of(local: SocketAddr, tls: Option<&Tls>) -> String {
    let ip = match local.ip().is_unspecified() {
        true => "127.0.0.1".to_string(),
        false => local.ip().to_string(),
    };
    format!("{}://{ip}:{}", eddy_proto::tls::scheme(tls), local.port())
}

/// Runs a TaskManager until `shutdown` resolves; then cancels its tasks and stops.
pub async fn run(config: TaskManagerConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    let local = listener.local_addr()?;
    let tls = config.tls.as_ref();
    let address = config
        .advertise
        .clone()
        .unwrap_or_else(|| url_of(local, tls));
    let jobmanager = GrpcResourceManager::new(&config.jobmanager, tls)
        .map_err(|e| EddyError::Config(e.to_string()))?;
    let node = TaskManager::new(
        config.id.clone(),
        address.clone(),
        config.slots,
        Arc::new(jobmanager),
        Arc::new(Channels::new(CHANNEL_CAPACITY).with_tls(config.tls.clone())),
        None,
    );
    tracing::info!(id = %config.id, %address, slots = config.slots, jobmanager = %config.jobmanager, tls = tls.is_some(), "taskmanager starting");
    let (http_stop, http_stopped) = tokio::sync::oneshot::channel::<()>();
    if let Some(bind) = config.http_bind {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        let http_address = url_of(listener.local_addr()?, tls);
        tracing::info!(address = %http_address, "taskmanager http listening (/metrics)");
        node.set_http_address(http_address);
        let listener = HttpListener::new(listener, tls.and_then(Tls::acceptor))?;
        let router = crate::http::router(node.clone(), config.guard.clone());
        tokio::spawn(async move {
            let stopped = async {
                let _ = http_stopped.await;
            };
            if let Err(error) = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(%error, "taskmanager http port failed");
            }
        });
    }
    let membership = Membership::start(node.clone())?;
    // Only cluster members (the JobManager, other TaskManagers) call a TaskManager.
    let server = eddy_proto::tls::server(tls, ClientAuth::Required)?
        .add_service(TaskExecutorServer::with_interceptor(
            TaskExecutorService::new(node.clone()),
            TermFence::new(node.clone()),
        ))
        .add_service(DataExchangeServer::new(DataExchangeService::new(
            node.channels(),
        )))
        .serve_with_incoming_shutdown(eddy_proto::incoming(listener), shutdown);
    let result = server.await;
    membership.stop();
    let _ = http_stop.send(());
    node.cancel_all().await;
    tracing::info!(id = %config.id, "taskmanager stopped");
    result.map_err(|e| EddyError::Server {
        component: "taskmanager",
        source: Box::new(e),
    })
}
