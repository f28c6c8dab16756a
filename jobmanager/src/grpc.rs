//! The JobManager's gRPC adapters: its `JobService` and `ResourceManager` services over a
//! [`JobManager`], and TaskManagers reached as [`TaskExecutorGateway`]s. Only here do
//! calls become `tonic` requests and statuses.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::ExecutionId;
use eddy_proto::auth::require_write;
use eddy_proto::tls::{Tls, peer_is_member};
use eddy_proto::v1 as pb;
use eddy_proto::v1::task_executor_client::TaskExecutorClient;
use eddy_proto::{call_error, with_term};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use crate::error::JobManagerError;
use crate::gateway::{Deployment, TaskExecutorGateway};
use crate::manager::JobManager;

/// A JobManager error as the client sees it.
fn status(error: JobManagerError) -> Status {
    let message = error.to_string();
    match error {
        JobManagerError::NoSuchJob(_) | JobManagerError::UnknownTaskManager(_) => {
            Status::not_found(message)
        }
        JobManagerError::WrongState { .. }
        | JobManagerError::NotCheckpointing
        | JobManagerError::Stopping => Status::failed_precondition(message),
        JobManagerError::InvalidJob(_) | JobManagerError::BadMessage(_) => {
            Status::invalid_argument(message)
        }
        JobManagerError::Refused(_) => Status::permission_denied(message),
        JobManagerError::SavepointFailed(_) => Status::internal(message),
        JobManagerError::SavepointAborted => Status::aborted(message),
        JobManagerError::SavepointTimedOut => Status::deadline_exceeded(message),
    }
}

/// The `JobService` over a JobManager.
pub struct JobServiceImpl(pub Arc<JobManager>);

#[tonic::async_trait]
impl pb::job_service_server::JobService for JobServiceImpl {
    async fn submit_job(
        &self,
        request: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let principal = require_write(&request)?;
        let request = request.into_inner();
        let restore_path = (!request.restore_path.is_empty()).then_some(request.restore_path);
        let jobmanager = self.0.clone();
        // Planning is CPU work: off the server's threads.
        let job_id = tokio::task::spawn_blocking(move || {
            jobmanager.submit(request.sql, request.options, restore_path, &principal.name)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(status)?;
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

    async fn list_task_managers(
        &self,
        _: Request<pb::ListTaskManagersRequest>,
    ) -> Result<Response<pb::ListTaskManagersResponse>, Status> {
        Ok(Response::new(pb::ListTaskManagersResponse {
            taskmanagers: self.0.taskmanagers(),
        }))
    }

    async fn get_job(
        &self,
        request: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::JobInfo>, Status> {
        let mut job = self.0.job(&request.into_inner().job_id).map_err(status)?;
        job.leader = self.0.leadership();
        Ok(Response::new(job))
    }

    async fn cancel_job(
        &self,
        request: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::CancelJobResponse>, Status> {
        require_write(&request)?;
        self.0
            .cancel(&request.into_inner().job_id)
            .map_err(status)?;
        Ok(Response::new(pb::CancelJobResponse {}))
    }

    async fn trigger_savepoint(
        &self,
        request: Request<pb::TriggerSavepointRequest>,
    ) -> Result<Response<pb::TriggerSavepointResponse>, Status> {
        require_write(&request)?;
        let request = request.into_inner();
        let path = self
            .0
            .savepoint(&request.job_id, request.stop)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::TriggerSavepointResponse { path }))
    }
}

/// The `ResourceManager` service over a JobManager: TaskManagers that register here are
/// called back over gRPC at the address they give. With TLS, only peers presenting a
/// certificate of the cluster CA are served.
pub struct ResourceManagerImpl(pub Arc<JobManager>);

impl ResourceManagerImpl {
    fn check_member<T>(&self, request: &Request<T>) -> Result<(), Status> {
        if peer_is_member(request, self.0.config().tls.is_some()) {
            return Ok(());
        }
        tracing::warn!(peer = ?request.remote_addr(), "a peer without a cluster certificate called the resource manager; refused");
        Err(Status::unauthenticated(
            "only cluster members (a certificate signed by the cluster CA) may call the resource manager",
        ))
    }
}

#[tonic::async_trait]
impl pb::resource_manager_server::ResourceManager for ResourceManagerImpl {
    async fn register_task_manager(
        &self,
        request: Request<pb::RegisterTaskManagerRequest>,
    ) -> Result<Response<pb::RegisterTaskManagerResponse>, Status> {
        self.check_member(&request)?;
        let request = request.into_inner();
        let term = self.0.term();
        let gateway = GrpcTaskExecutor::new(&request.address, self.0.config().tls.as_ref(), term)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.0
            .register(request, Arc::new(gateway))
            .map_err(status)?;
        Ok(Response::new(pb::RegisterTaskManagerResponse {
            heartbeat_interval_ms: self.0.config().heartbeat_interval.as_millis() as u64,
            term,
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        self.check_member(&request)?;
        self.0.heartbeat(request.into_inner()).map_err(status)?;
        Ok(Response::new(pb::HeartbeatResponse {}))
    }

    async fn report_task_state(
        &self,
        request: Request<pb::TaskStateReport>,
    ) -> Result<Response<pb::TaskStateAck>, Status> {
        self.check_member(&request)?;
        self.0.report(request.into_inner()).map_err(status)?;
        Ok(Response::new(pb::TaskStateAck {}))
    }

    async fn acknowledge_checkpoint(
        &self,
        request: Request<pb::CheckpointAck>,
    ) -> Result<Response<pb::CheckpointAckResponse>, Status> {
        self.check_member(&request)?;
        self.0.acknowledge(request.into_inner()).map_err(status)?;
        Ok(Response::new(pb::CheckpointAckResponse {}))
    }
}

/// A TaskManager's task executor over gRPC.
pub struct GrpcTaskExecutor {
    client: TaskExecutorClient<Channel>,
    /// The leader term every call carries, so that TaskManagers refuse a deposed leader's.
    term: u64,
}

impl GrpcTaskExecutor {
    /// The task executor at `address` (connected on first use), over mutual TLS with `tls`,
    /// called by the JobManager of leader term `term`.
    pub fn new(address: &str, tls: Option<&Tls>, term: u64) -> Result<Self, CallError> {
        let endpoint = eddy_proto::tls::endpoint(address, tls)
            .map_err(|e| CallError::Refused(format!("bad address '{address}': {e}")))?
            .connect_timeout(Duration::from_secs(3));
        Ok(GrpcTaskExecutor {
            client: TaskExecutorClient::new(endpoint.connect_lazy()),
            term,
        })
    }
}

#[async_trait]
impl TaskExecutorGateway for GrpcTaskExecutor {
    async fn deploy(&self, deployment: Deployment) -> Result<(), CallError> {
        // The TaskManager plans the job from the request's SQL itself.
        let mut client = self.client.clone();
        client
            .deploy_tasks(with_term(deployment.request, self.term))
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn stop(&self, execution: &ExecutionId, how: StopRequest) -> Result<(), CallError> {
        let request = pb::CancelTasksRequest {
            execution_id: execution.to_string(),
            drain: how == StopRequest::Drain,
        };
        let mut client = self.client.clone();
        client
            .cancel_tasks(with_term(request, self.term))
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn trigger_checkpoint(
        &self,
        execution: &ExecutionId,
        barrier: Barrier,
    ) -> Result<(), CallError> {
        let request = pb::TriggerCheckpointRequest {
            execution_id: execution.to_string(),
            checkpoint: barrier.checkpoint,
            triggered_at_ms: barrier.triggered_at,
            unaligned: barrier.unaligned,
        };
        let mut client = self.client.clone();
        client
            .trigger_checkpoint(with_term(request, self.term))
            .await
            .map_err(call_error)?;
        Ok(())
    }

    async fn notify_checkpoint_complete(
        &self,
        execution: &ExecutionId,
        notice: CompletedCheckpoint,
    ) -> Result<(), CallError> {
        let request = pb::NotifyCheckpointCompleteRequest {
            execution_id: execution.to_string(),
            checkpoint: notice.checkpoint,
            end_of_input: notice.end_of_input,
        };
        let mut client = self.client.clone();
        client
            .notify_checkpoint_complete(with_term(request, self.term))
            .await
            .map_err(call_error)?;
        Ok(())
    }
}
