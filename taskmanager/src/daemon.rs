//! The TaskManager daemon: serves `TaskExecutor` and `DataExchange`, registers with the
//! JobManager (again whenever the JobManager forgets it) and heartbeats it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use eddy_common::{EddyError, Result};
use eddy_proto::v1 as pb;
use eddy_proto::v1::data_exchange_server::DataExchangeServer;
use eddy_proto::v1::task_executor_server::TaskExecutorServer;
use tonic::Code;
use tonic::transport::Server;

use crate::network::DataExchangeService;
use crate::service::{TaskExecutorService, TaskManagerNode};

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
}

/// Runs a TaskManager until `shutdown` resolves; then cancels its tasks and stops.
pub async fn run(config: TaskManagerConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(config.bind).await?;
    let local = listener.local_addr()?;
    let address = config.advertise.clone().unwrap_or_else(|| {
        let ip = if local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            local.ip().to_string()
        };
        format!("http://{ip}:{}", local.port())
    });
    let node = TaskManagerNode::new(
        config.id.clone(),
        address.clone(),
        config.slots,
        &config.jobmanager,
    )
    .map_err(EddyError::Config)?;
    tracing::info!(id = %config.id, %address, slots = config.slots, jobmanager = %config.jobmanager, "taskmanager starting");
    let membership = tokio::spawn(stay_registered(node.clone()));
    let server = Server::builder()
        .add_service(TaskExecutorServer::new(TaskExecutorService::new(
            node.clone(),
        )))
        .add_service(DataExchangeServer::new(DataExchangeService::new(
            node.channels(),
        )))
        .serve_with_incoming_shutdown(eddy_proto::incoming(listener), shutdown);
    let result = server.await;
    membership.abort();
    node.cancel_all().await;
    tracing::info!(id = %config.id, "taskmanager stopped");
    result.map_err(|e| EddyError::Runtime(format!("taskmanager server: {e}")))
}

/// Registers, then heartbeats; registers again when the JobManager says it does not know
/// this TaskManager (e.g. after a JobManager restart).
async fn stay_registered(node: Arc<TaskManagerNode>) {
    loop {
        let mut client = node.jobmanager();
        let request = pb::RegisterTaskManagerRequest {
            taskmanager_id: node.id().to_string(),
            address: node.address().to_string(),
            slots: node.slots() as u32,
        };
        let interval = match client.register_task_manager(request).await {
            Ok(response) => {
                tracing::info!(id = %node.id(), "registered with the jobmanager");
                Duration::from_millis(response.into_inner().heartbeat_interval_ms.max(50))
            }
            Err(status) => {
                tracing::warn!(%status, "cannot register with the jobmanager, retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            tokio::time::sleep(interval).await;
            let heartbeat = pb::HeartbeatRequest {
                taskmanager_id: node.id().to_string(),
                tasks: node.counters(),
            };
            match client.heartbeat(heartbeat).await {
                Ok(_) => {}
                Err(status) if status.code() == Code::NotFound => {
                    // A new JobManager, or one that gave this TaskManager up: what runs
                    // here belongs to runs it no longer follows. Stop it (fencing), then
                    // register afresh.
                    tracing::warn!(
                        "the jobmanager does not know this taskmanager; cancelling its tasks and registering again"
                    );
                    node.cancel_all().await;
                    break;
                }
                Err(status) => {
                    tracing::warn!(%status, "heartbeat failed");
                    client = node.jobmanager();
                }
            }
        }
    }
}
