//! The TaskManager's gRPC adapters: the `TaskExecutor` service over a [`TaskManager`], and
//! the JobManager's `ResourceManager` reached as a [`ResourceManagerGateway`]. Only here do
//! calls become `tonic` requests and statuses.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::ExecutionId;
use eddy_proto::tls::Tls;
use eddy_proto::v1 as pb;
use eddy_proto::v1::resource_manager_client::ResourceManagerClient;
use eddy_proto::{call_error, status};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::gateway::ResourceManagerGateway;
use crate::node::TaskManager;

fn execution(id: &str) -> Result<ExecutionId, Status> {
    id.parse::<ExecutionId>()
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The `TaskExecutor` service of a TaskManager.
pub struct TaskExecutorService {
    node: Arc<TaskManager>,
}

impl TaskExecutorService {
    /// The service of `node`.
    pub fn new(node: Arc<TaskManager>) -> Self {
        TaskExecutorService { node }
    }
}

#[tonic::async_trait]
impl pb::task_executor_server::TaskExecutor for TaskExecutorService {
    async fn deploy_tasks(
        &self,
        request: Request<pb::DeployTasksRequest>,
    ) -> Result<Response<pb::DeployTasksResponse>, Status> {
        self.node
            .deploy(request.into_inner(), None)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::DeployTasksResponse {}))
    }

    async fn cancel_tasks(
        &self,
        request: Request<pb::CancelTasksRequest>,
    ) -> Result<Response<pb::CancelTasksResponse>, Status> {
        let request = request.into_inner();
        let how = match request.drain {
            true => StopRequest::Drain,
            false => StopRequest::Cancel,
        };
        self.node
            .stop(&execution(&request.execution_id)?, how)
            .await;
        Ok(Response::new(pb::CancelTasksResponse {}))
    }

    async fn trigger_checkpoint(
        &self,
        request: Request<pb::TriggerCheckpointRequest>,
    ) -> Result<Response<pb::TriggerCheckpointResponse>, Status> {
        let request = request.into_inner();
        let barrier = Barrier {
            checkpoint: request.checkpoint,
            triggered_at: request.triggered_at_ms,
            unaligned: request.unaligned,
        };
        self.node
            .trigger(&execution(&request.execution_id)?, barrier)
            .map_err(status)?;
        Ok(Response::new(pb::TriggerCheckpointResponse {}))
    }

    async fn notify_checkpoint_complete(
        &self,
        request: Request<pb::NotifyCheckpointCompleteRequest>,
    ) -> Result<Response<pb::NotifyCheckpointCompleteResponse>, Status> {
        let request = request.into_inner();
        tracing::debug!(job = %request.execution_id, checkpoint = request.checkpoint, "checkpoint complete");
        let notice = CompletedCheckpoint {
            checkpoint: request.checkpoint,
            end_of_input: request.end_of_input,
        };
        self.node
            .checkpoint_complete(&execution(&request.execution_id)?, notice);
        Ok(Response::new(pb::NotifyCheckpointCompleteResponse {}))
    }
}

/// The JobManager's resource manager over gRPC.
pub struct GrpcResourceManager {
    endpoint: Endpoint,
}

impl GrpcResourceManager {
    /// The resource manager at `address`, e.g. `http://jobmanager:6123`, reached over
    /// mutual TLS with `tls`.
    pub fn new(address: &str, tls: Option<&Tls>) -> Result<Self, CallError> {
        let endpoint = eddy_proto::tls::endpoint(address, tls)
            .map_err(|e| CallError::Refused(format!("bad JobManager address '{address}': {e}")))?
            .connect_timeout(Duration::from_secs(2));
        Ok(GrpcResourceManager { endpoint })
    }

    /// A client on a fresh connection, so that a restarted JobManager is reached at once,
    /// without a broken channel's backoff.
    fn client(&self) -> ResourceManagerClient<Channel> {
        ResourceManagerClient::new(self.endpoint.connect_lazy())
    }
}

#[async_trait]
impl ResourceManagerGateway for GrpcResourceManager {
    async fn register(
        &self,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<Duration, CallError> {
        let response = self
            .client()
            .register_task_manager(request)
            .await
            .map_err(call_error)?;
        Ok(Duration::from_millis(
            response.into_inner().heartbeat_interval_ms,
        ))
    }

    async fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), CallError> {
        self.client().heartbeat(request).await.map_err(call_error)?;
        Ok(())
    }

    async fn report_task_state(&self, report: pb::TaskStateReport) -> Result<(), CallError> {
        self.client()
            .report_task_state(report)
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn acknowledge_checkpoint(&self, ack: pb::CheckpointAck) -> Result<(), CallError> {
        self.client()
            .acknowledge_checkpoint(ack)
            .await
            .map_err(call_error)?;
        Ok(())
    }
}
