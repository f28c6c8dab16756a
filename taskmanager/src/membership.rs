//! A TaskManager's membership: it registers with the JobManager, then heartbeats, and
//! registers again whenever the JobManager says it does not know it.

use std::sync::Arc;
use std::time::Duration;

use eddy_common::error::CallError;
use eddy_proto::v1 as pb;

use crate::node::TaskManager;

/// Keeps `node` registered until the future is dropped.
pub async fn stay_registered(node: Arc<TaskManager>) {
    loop {
        let interval = register(&node).await;
        heartbeat_until_forgotten(&node, interval).await;
    }
}

/// Registers `node`, retrying every second until the JobManager takes it; answers the
/// heartbeat interval.
pub async fn register(node: &TaskManager) -> Duration {
    loop {
        let request = pb::RegisterTaskManagerRequest {
            taskmanager_id: node.id().to_string(),
            address: node.address().to_string(),
            slots: node.slots() as u32,
            http_address: node.http_address().to_string(),
            held: node.held_tasks(),
        };
        match node.jobmanager().register(request).await {
            Ok(registration) => {
                node.follow_term(registration.term);
                tracing::info!(id = %node.id(), term = registration.term, "registered with the jobmanager");
                return registration
                    .heartbeat_interval
                    .max(Duration::from_millis(50));
            }
            Err(error) => {
                tracing::warn!(%error, "cannot register with the jobmanager, retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Heartbeats a registered `node` every `interval` until the JobManager does not know it
/// (a new leader, a restarted one, or one that gave it up); `node` then registers afresh
/// with the tasks it still runs, which the JobManager adopts or cancels.
pub async fn heartbeat_until_forgotten(node: &TaskManager, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let heartbeat = pb::HeartbeatRequest {
            taskmanager_id: node.id().to_string(),
            tasks: node.counters(),
        };
        match node.jobmanager().heartbeat(heartbeat).await {
            Ok(()) => {}
            Err(CallError::NotFound(_)) => {
                tracing::warn!(
                    "the jobmanager does not know this taskmanager; registering again with the tasks it runs"
                );
                return;
            }
            Err(error) => tracing::warn!(%error, "heartbeat failed"),
        }
    }
}
