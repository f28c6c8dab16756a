//! The JobManager daemon: serves `JobService` and `ResourceManager` and watches
//! TaskManager heartbeats.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use eddy_common::{EddyError, Result};
use eddy_proto::v1::job_service_server::JobServiceServer;
use eddy_proto::v1::resource_manager_server::ResourceManagerServer;
use tonic::transport::Server;

use crate::cluster::{Cluster, ClusterConfig, JobServiceImpl, ResourceManagerImpl};
use crate::store::JobStore;
use eddy_common::storage::resolve;

/// Runs a JobManager on `bind` until `shutdown` resolves; it resumes the unfinished jobs
/// of its job store.
pub async fn run(
    bind: SocketAddr,
    config: ClusterConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    serve(listener, config, true, shutdown).await
}

/// Runs a JobManager on a bound listener until `shutdown` resolves; with `recover` it first
/// resumes the unfinished jobs of its job store.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ClusterConfig,
    recover: bool,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let local = listener.local_addr()?;
    let root = resolve(&config.checkpoint_root, &[])?;
    let store = JobStore::new(root);
    store.check().await.map_err(|e| {
        EddyError::Config(format!("job store at '{}': {e}", config.checkpoint_root))
    })?;
    let cluster = Cluster::new(config.clone(), Some(store));
    if recover {
        cluster.recover().await?;
    }
    let watcher = {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            let mut last_expiry = Instant::now();
            loop {
                tick.tick().await;
                cluster.tick_checkpoints();
                if last_expiry.elapsed() >= cluster.config().heartbeat_interval {
                    last_expiry = Instant::now();
                    cluster.expire_silent();
                }
            }
        })
    };
    tracing::info!(address = %local, "jobmanager listening");
    let result = Server::builder()
        .add_service(JobServiceServer::new(JobServiceImpl(cluster.clone())))
        .add_service(ResourceManagerServer::new(ResourceManagerImpl(cluster)))
        .serve_with_incoming_shutdown(eddy_proto::incoming(listener), shutdown)
        .await;
    watcher.abort();
    tracing::info!("jobmanager stopped");
    result.map_err(|e| EddyError::Runtime(format!("jobmanager server: {e}")))
}
