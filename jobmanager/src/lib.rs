//! The JobManager: takes SQL jobs, plans them, schedules their subtasks into the slots of
//! TaskManagers, coordinates their checkpoints, and follows them to their end.
//!
//! - [`manager`]: the [`JobManager`] component, the same in the daemon and in the embedded
//!   cluster of `eddy run`;
//! - [`lifecycle`]: the states a job moves through, and on which events;
//! - [`resources`]: the registered TaskManagers and their slots;
//! - [`coordinator`]: one run's checkpoints;
//! - [`job_store`]: jobs persisted for a restarted JobManager;
//! - [`adoption`]: runs a new JobManager takes over from the TaskManagers, unrestarted;
//! - [`leadership`]: the leader lease among JobManagers sharing a storage root;
//! - [`gateway`]: TaskManagers as the JobManager calls them; [`grpc`]: the gRPC adapters;
//! - [`http`]: the REST API, dashboard and Prometheus metrics;
//! - [`meter`]: rates of the tasks' counters;
//! - [`policy`]: what submitted jobs may do (locations, connectors, limits, secrets);
//! - [`daemon`]: `eddy jobmanager`.

pub mod adoption;
pub mod config;
pub mod coordinator;
pub mod daemon;
pub mod error;
pub mod gateway;
pub mod grpc;
pub mod http;
pub mod job;
pub mod job_store;
pub mod leadership;
pub mod lifecycle;
pub mod manager;
pub mod meter;
pub mod policy;
pub mod resources;

pub use config::JobManagerConfig;
pub use error::JobManagerError;
pub use gateway::{Deployment, TaskExecutorGateway};
pub use lifecycle::JobState;
pub use manager::JobManager;
