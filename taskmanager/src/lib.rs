//! The TaskManager: runs subtasks in its slots, chains their operators, and moves data
//! and in-band events between them, inside one process or across TaskManagers. The
//! [`TaskManager`] component is the same in the daemon ([`daemon`], behind [`grpc`]) and in
//! the embedded cluster of `eddy run`, which calls it in-process.

pub mod daemon;
pub mod deployment;
pub mod exchange;
pub mod gateway;
pub mod grpc;
pub mod http;
pub mod input;
pub mod membership;
pub mod metrics;
pub mod network;
pub mod node;
pub mod operator_chain;
pub mod output;
pub mod restore;
pub mod snapshot_chain;
pub mod state_dir;
pub mod task;

pub use gateway::{Registration, ResourceManagerGateway};
pub use node::TaskManager;
pub use task::{
    StopRequest, StopSignal, TaskAck, TaskCheckpointing, TaskDeployment, TaskEnd, TaskRestore,
    VertexRestore,
};
