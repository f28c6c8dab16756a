//! A TaskManager as the JobManager sees it: where it deploys, stops, and checkpoints tasks.
//! The daemon reaches TaskManagers over gRPC ([`crate::grpc::GrpcTaskExecutor`]); the
//! embedded cluster of `eddy run` calls its TaskManagers in-process.

use std::sync::Arc;

use async_trait::async_trait;
use eddy_common::checkpoint::CompletedCheckpoint;
use eddy_common::error::CallError;
use eddy_common::event::{Barrier, StopRequest};
use eddy_common::ids::ExecutionId;
use eddy_planner::plan::JobGraph;
use eddy_proto::v1 as pb;

/// Tasks of one execution for one TaskManager: the request as it goes over the wire, and
/// the graph the JobManager planned (an in-process TaskManager takes it as it is; a
/// remote one plans the request's SQL and checks it gets the same).
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The run the tasks belong to (the request's `execution_id`).
    pub execution: ExecutionId,
    /// What to run where.
    pub request: pb::DeployTasksRequest,
    /// The job's graph.
    pub graph: Arc<JobGraph>,
}

/// A TaskManager's task executor, as the JobManager calls it.
#[async_trait]
pub trait TaskExecutorGateway: Send + Sync + 'static {
    /// Starts the tasks of `deployment` placed there.
    async fn deploy(&self, deployment: Deployment) -> Result<(), CallError>;

    /// Stops the tasks of `execution` there: cancelled, or drained.
    async fn stop(&self, execution: &ExecutionId, how: StopRequest) -> Result<(), CallError>;

    /// Starts a checkpoint at the source tasks of `execution` there.
    async fn trigger_checkpoint(
        &self,
        execution: &ExecutionId,
        barrier: Barrier,
    ) -> Result<(), CallError>;

    /// A checkpoint of `execution` is complete: its sinks there may commit.
    async fn notify_checkpoint_complete(
        &self,
        execution: &ExecutionId,
        notice: CompletedCheckpoint,
    ) -> Result<(), CallError>;
}
