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

/// How long a TaskManager's call to a JobManager may take before it tries the next one
/// (a paused JobManager holds a call that long): with its heartbeat interval, the longest a
/// TaskManager takes to find a new leader once that one serves.
pub const JOBMANAGER_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The addresses of a comma-separated list of JobManagers (several with high
/// availability), blanks skipped.
pub fn jobmanager_addresses(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|a| !a.is_empty())
}

/// The metadata key of a JobManager's leader term on the calls it makes to TaskManagers.
pub const TERM_METADATA: &str = "eddy-term";

/// `message` as a request carrying leader term `term`.
pub fn with_term<T>(message: T, term: u64) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request
        .metadata_mut()
        .insert(TERM_METADATA, term.to_string().parse().expect("digits"));
    request
}

/// The leader term a request carries: 0 when it carries none (a JobManager without high
/// availability, or one of before terms), an error when it is not a number.
pub fn term_of<T>(request: &tonic::Request<T>) -> Result<u64, tonic::Status> {
    match request.metadata().get(TERM_METADATA) {
        None => Ok(0),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or_else(|| {
                tonic::Status::invalid_argument(format!("{TERM_METADATA} is not a number"))
            }),
    }
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
