//! Eddy's gRPC contracts: the job service and TaskManager registry on the JobManager, and
//! the task executor and data exchange on the TaskManagers. See `eddy.proto`.

#![allow(missing_docs, clippy::all)]

/// Version 1 of the contracts.
pub mod v1 {
    tonic::include_proto!("eddy.v1");
}
