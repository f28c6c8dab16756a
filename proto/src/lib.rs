//! Eddy's gRPC contracts: the job service and TaskManager registry on the JobManager, and
//! the task executor and data exchange on the TaskManagers. See `eddy.proto`.

#![allow(missing_docs, clippy::all)]

/// Version 1 of the contracts.
pub mod v1 {
    tonic::include_proto!("eddy.v1");
}

/// The connections an Eddy gRPC server accepts, without Nagle's algorithm (which
/// `TcpIncoming::from` leaves on): with it, small replies waited for the peer's delayed
/// acknowledgement, up to 40 ms.
pub fn incoming(
    listener: impl Into<tonic::transport::server::TcpIncoming>,
) -> tonic::transport::server::TcpIncoming {
    listener.into().with_nodelay(Some(true))
}
