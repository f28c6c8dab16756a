//! The JobManager as a TaskManager sees it: where it registers, heartbeats, reports task
//! states and acknowledges checkpoints. The daemon reaches it over gRPC
//! ([`crate::grpc::GrpcResourceManager`]); the embedded cluster calls it in-process.

use std::time::Duration;

use async_trait::async_trait;
use eddy_common::error::CallError;
use eddy_proto::v1 as pb;

/// What a JobManager answers a TaskManager that registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// How often it expects heartbeats.
    pub heartbeat_interval: Duration,
    /// Its leader term (0 without high availability): commands of earlier terms are
    /// refused from now on.
    pub term: u64,
}

/// The JobManager's resource manager, as a TaskManager calls it.
#[async_trait]
pub trait ResourceManagerGateway: Send + Sync + 'static {
    /// Registers the TaskManager (again after the JobManager forgot it).
    async fn register(
        &self,
        request: pb::RegisterTaskManagerRequest,
    ) -> Result<Registration, CallError>;

    /// A heartbeat with the counters of the running tasks; [`CallError::NotFound`] when
    /// the JobManager does not know this TaskManager (it registers again).
    async fn heartbeat(&self, request: pb::HeartbeatRequest) -> Result<(), CallError>;

    /// A task's new state.
    async fn report_task_state(&self, report: pb::TaskStateReport) -> Result<(), CallError>;

    /// A task's answer to a checkpoint.
    async fn acknowledge_checkpoint(&self, ack: pb::CheckpointAck) -> Result<(), CallError>;
}
