//! Eddy's gRPC contracts: the job service and TaskManager registry on the JobManager, and
//! the task executor and data exchange on the TaskManagers. See `eddy.proto`.

#![allow(missing_docs, clippy::all)]

/// Version 1 of the contracts.
pub mod v1 {
    tonic::include_proto!("eddy.v1");
}

pub mod auth;
pub mod http_listener;
pub mod tls;

/// The addresses of a comma-separated list of JobManagers (several with high
/// availability), blanks skipped.
pub fn jobmanager_addresses(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|a| !a.is_empty())
}

/// The connections an Eddy gRPC server accepts, without Nagle's algorithm (which
/// `TcpIncoming::from` leaves on): with it, small replies waited for the peer's delayed
/// acknowledgement, up to 40 ms.
pub fn incoming(
    listener: impl Into<tonic::transport::server::TcpIncoming>,
) -> tonic::transport::server::TcpIncoming {
    listener.into().with_nodelay(Some(true))
}

/// A call's error as the gRPC status that carries it.
pub fn status(error: eddy_common::error::CallError) -> tonic::Status {
    use eddy_common::error::CallError;
    match error {
        CallError::Unavailable(message) => tonic::Status::unavailable(message),
        CallError::NotFound(message) => tonic::Status::not_found(message),
        CallError::Refused(message) => tonic::Status::invalid_argument(message),
    }
}

/// A gRPC status as a call's error: the other side unreachable, not knowing what the call
/// names, or refusing it.
pub fn call_error(status: tonic::Status) -> eddy_common::error::CallError {
    use eddy_common::error::CallError;
    let message = status.message().to_string();
    match status.code() {
        tonic::Code::Unavailable => CallError::Unavailable(message),
        tonic::Code::NotFound => CallError::NotFound(message),
        _ => CallError::Refused(message),
    }
}
