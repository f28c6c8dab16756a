//! The TaskManager's gRPC adapters: the `TaskExecutor` service over a [`TaskManager`], and
//! the JobManager's `ResourceManager` reached as a [`ResourceManagerGateway`]. Only here do
//! calls become `tonic` requests and statuses.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};

use crate::gateway::{Registration, ResourceManagerGateway};
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

/// Refuses every `TaskExecutor` call of a deposed leader (a term earlier than the one its
/// TaskManager follows) before the call is decoded, whichever call it is.
#[derive(Clone)]
pub struct TermFence(Arc<TaskManager>);

impl TermFence {
    /// The fence of `node`.
    pub fn new(node: Arc<TaskManager>) -> Self {
        TermFence(node)
    }
}

impl Interceptor for TermFence {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.0
            .admit_term(eddy_proto::term_of(&request)?)
            .map_err(status)?;
        Ok(request)
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

/// How long a call to the JobManager may take: a paused JobManager holds a call that long
/// before the next one is tried.
const CALL_TIMEOUT: Duration = eddy_proto::JOBMANAGER_CALL_TIMEOUT;

/// The JobManager's resource manager over gRPC.
pub struct GrpcResourceManager {
    /// The JobManagers, one of which leads (a single one without high availability).
    endpoints: Vec<Endpoint>,
    /// The one calls go to; the next one after a call finds it unreachable.
    current: AtomicUsize,
}

impl GrpcResourceManager {
    /// The resource manager at `addresses`, comma-separated (several JobManagers of which
    /// one leads, e.g. `http://jm-1:6123,http://jm-2:6123`), reached over mutual TLS with
    /// `tls`.
    pub fn new(addresses: &str, tls: Option<&Tls>) -> Result<Self, CallError> {
        let endpoints = eddy_proto::jobmanager_addresses(addresses)
            .map(|address| {
                let endpoint = eddy_proto::tls::endpoint(address, tls).map_err(|e| {
                    CallError::Refused(format!("bad JobManager address '{address}': {e}"))
                })?;
                Ok(endpoint
                    .connect_timeout(Duration::from_secs(2))
                    .timeout(CALL_TIMEOUT))
            })
            .collect::<Result<Vec<_>, CallError>>()?;
        if endpoints.is_empty() {
            return Err(CallError::Refused("no JobManager address given".into()));
        }
        Ok(GrpcResourceManager {
            endpoints,
            current: AtomicUsize::new(0),
        })
    }

    /// Makes a call of `call` on the current JobManager (on a fresh connection, so that a
    /// restarted JobManager is reached at once, without a broken channel's backoff); when
    /// it is unreachable (a standby keeps its port closed, a dead leader's is closed too, a
    /// paused one does not answer), on the next ones in turn, remembering the one that
    /// answered.
    async fn call<T, F>(
        &self,
        call: impl Fn(ResourceManagerClient<Channel>) -> F,
    ) -> Result<T, CallError>
    where
        F: std::future::Future<Output = Result<T, Status>>,
    {
        let start = self.current.load(Ordering::Relaxed);
        let mut last = None;
        for k in 0..self.endpoints.len() {
            let index = (start + k) % self.endpoints.len();
            let client = ResourceManagerClient::new(self.endpoints[index].connect_lazy());
            match call(client).await {
                // Unreachable, or timed out (a paused JobManager).
                Err(status)
                    if matches!(
                        status.code(),
                        Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded
                    ) =>
                {
                    last = Some(CallError::Unavailable(status.message().to_string()));
                }
                answered => {
                    if k > 0 && self.current.swap(index, Ordering::Relaxed) != index {
                        tracing::info!(address = %self.endpoints[index].uri(), "following the jobmanager that answers");
                    }
                    return answered.map_err(call_error);
                }
            }
        }
        Err(last.expect("at least one endpoint"))
    }
}

#[async_trait]
impl ResourceManagerGateway for GrpcResourceManager {
    async fn register(
        &self,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<Registration, CallError> {
        let response = self
            .call(|mut client| {
                let request = request.clone();
                async move { client.register_task_manager(request).await }
            })
            .await?;
        let response = response.into_inner();
        Ok(Registration {
            heartbeat_interval: Duration::from_millis(response.heartbeat_interval_ms),
            term: response.term,
        })
    }

    async fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), CallError> {
        self.call(|mut client| {
            let request = request.clone();
            async move { client.heartbeat(request).await }
        })
        .await
        .map(drop)
    }

    async fn report_task_state(&self, report: pb::TaskStateReport) -> Result<(), CallError> {
        self.call(|mut client| {
            let report = report.clone();
            async move { client.report_task_state(report).await }
        })
        .await
        .map(drop)
    }

    async fn acknowledge_checkpoint(&self, ack: pb::CheckpointAck) -> Result<(), CallError> {
        self.call(|mut client| {
            let ack = ack.clone();
            async move { client.acknowledge_checkpoint(ack).await }
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Channels;
    use eddy_proto::v1::task_executor_server::TaskExecutor;
    use eddy_proto::with_term;

    /// A JobManager that never answers (the tests call the TaskManager only).
    struct Unreachable;

    #[async_trait]
    impl ResourceManagerGateway for Unreachable {
        async fn register(
            &self,
            _: pb::RegisterTaskManagerRequest,
        ) -> Result<Registration, CallError> {
            Err(CallError::Unavailable("unreachable".into()))
        }
        async fn heartbeat(&self, _: pb::HeartbeatRequest) -> Result<(), CallError> {
            Err(CallError::Unavailable("unreachable".into()))
        }
        async fn report_task_state(&self, _: pb::TaskStateReport) -> Result<(), CallError> {
            Err(CallError::Unavailable("unreachable".into()))
        }
        async fn acknowledge_checkpoint(&self, _: pb::CheckpointAck) -> Result<(), CallError> {
            Err(CallError::Unavailable("unreachable".into()))
        }
    }

    fn service() -> (Arc<TaskManager>, Fenced) {
        let node = TaskManager::new(
            "tm-test".into(),
            "http://127.0.0.1:1".into(),
            1,
            Arc::new(Unreachable),
            Arc::new(Channels::new(4)),
            None,
        );
        let fenced = Fenced(
            TermFence::new(node.clone()),
            TaskExecutorService::new(node.clone()),
        );
        (node, fenced)
    }

    /// The service behind its fence, as the daemon serves it.
    struct Fenced(TermFence, TaskExecutorService);

    impl Fenced {
        async fn cancel_tasks(
            &self,
            request: Request<pb::CancelTasksRequest>,
        ) -> Result<Response<pb::CancelTasksResponse>, Status> {
            let (metadata, extensions, message) = request.into_parts();
            let admitted = self
                .0
                .clone()
                .call(Request::from_parts(metadata, extensions, ()))?;
            let (metadata, extensions, ()) = admitted.into_parts();
            let request = Request::from_parts(metadata, extensions, message);
            self.1.cancel_tasks(request).await
        }
    }
    fn cancel(term: u64) -> Request<pb::CancelTasksRequest> {
        let request = pb::CancelTasksRequest {
            execution_id: "job.1".into(),
            drain: false,
        };
        with_term(request, term)
    }

    #[tokio::test]
    async fn commands_of_a_deposed_leader_are_refused() {
        let (node, service) = service();
        node.follow_term(3);
        let refused = service.cancel_tasks(cancel(2)).await.unwrap_err();
        assert!(
            refused.message().contains("fenced") && refused.message().contains("term 3"),
            "{refused:?}"
        );
        service.cancel_tasks(cancel(3)).await.unwrap();
        // A later leader's command is carried out, and its term followed from then on.
        service.cancel_tasks(cancel(4)).await.unwrap();
        assert!(service.cancel_tasks(cancel(3)).await.is_err());
        // A call without a term is one of term 0.
        let untermed = Request::new(pb::CancelTasksRequest {
            execution_id: "job.1".into(),
            drain: false,
        });
        assert!(service.cancel_tasks(untermed).await.is_err());
        let mut garbled = cancel(4);
        garbled
            .metadata_mut()
            .insert(eddy_proto::TERM_METADATA, "x".parse().unwrap());
        let refused = service.cancel_tasks(garbled).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument);
    }

    #[tokio::test]
    async fn a_jobmanager_without_high_availability_is_followed_after_registration() {
        let (node, service) = service();
        node.follow_term(5);
        // High availability switched off: the JobManager of term 0 it registered with.
        node.follow_term(0);
        service.cancel_tasks(cancel(0)).await.unwrap();
    }
}
