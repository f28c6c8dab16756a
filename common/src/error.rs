//! Typed errors of the engine.

use std::fmt;

/// A position in a SQL script, 1-based, as editors show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    /// Line number, starting at 1.
    pub line: u64,
    /// Column number, starting at 1.
    pub column: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum EddyError {
    /// The SQL script is invalid: a syntax error or a semantic one, at a position.
    #[error("SQL error at {location}: {message}")]
    Sql {
        /// Where in the script.
        location: Location,
        /// What is wrong.
        message: String,
    },
    /// The SQL is valid but asks for something Eddy cannot execute on a stream.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The planner could not turn a query into a streaming job.
    #[error("planning failed: {0}")]
    Plan(String),
    /// A connector's configuration is wrong.
    #[error("table '{table}': {message}")]
    Connector {
        /// The table whose `WITH (...)` options are wrong.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// A job option (`SET 'key' = 'value'`) is wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// A malformed input record.
    #[error("malformed record in {file} at line {line}: {message}")]
    Format {
        /// The file (or object) the record came from.
        file: String,
        /// Its line number, starting at 1.
        line: u64,
        /// What is wrong with it.
        message: String,
    },
    /// A file that cannot be read as its format says (a corrupt Parquet footer or page, a
    /// column of a type the table cannot take).
    #[error("file '{file}': {message}")]
    UnreadableFile {
        /// The file.
        file: String,
        /// What is wrong, and where in the file.
        message: String,
    },
    /// An error computing on Arrow arrays.
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    /// An error from DataFusion (planning or expression evaluation), kept whole: its
    /// message and its own sources.
    #[error(transparent)]
    DataFusion(Box<dyn std::error::Error + Send + Sync>),
    /// An error from object storage.
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    /// An I/O error.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A snapshot, checkpoint or savepoint that cannot be read or restored here: corrupt
    /// (sizes, checksums), of an unknown format version, or not matching the job's plan.
    #[error("{0}")]
    Snapshot(String),
    /// Keyed state on local disk (an LSM store's runs) could not be read or written.
    #[error(transparent)]
    State(#[from] eddy_state::StateError),
    /// A malformed data frame (from the network) or a channel that broke its protocol.
    #[error("{0}")]
    Frame(String),
    /// A channel to another task closed before its end: that task is gone.
    #[error("{0}")]
    Exchange(String),
    /// An external system (Kafka, PostgreSQL, object storage) failed a request.
    #[error("{system}: {message}")]
    External {
        /// The system.
        system: &'static str,
        /// What failed.
        message: String,
    },
    /// A connector's external system refused or failed a request for a table; `transient`
    /// when trying again may succeed (a lost connection, a serialization failure), not
    /// when the request itself is wrong (a missing table, a permission).
    #[error("table '{table}': {message}")]
    Remote {
        /// The table.
        table: String,
        /// What failed.
        message: String,
        /// Whether a retry may succeed.
        transient: bool,
    },
    /// A broken invariant of the engine: a bug, not bad input.
    #[error("internal error: {0}")]
    Internal(String),
    /// A daemon's server failed.
    #[error("{component} server: {source}")]
    Server {
        /// `jobmanager` or `taskmanager`.
        component: &'static str,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A JobManager of a later term took over the job's commit log (high availability):
    /// this one must stop acting.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The newest complete checkpoint cannot be read, and restoring an older one would
    /// write again what sinks committed for it.
    #[error(
        "checkpoint {checkpoint} completed but cannot be restored; its sinks may have \
         committed what it covers, so an older checkpoint is not restored in its place \
         (restore a savepoint, or repair the checkpoint): {source}"
    )]
    UnrestorableCheckpoint {
        /// The checkpoint.
        checkpoint: u64,
        /// Why it cannot be read.
        #[source]
        source: Box<EddyError>,
    },
}

impl EddyError {
    /// Whether this is a consequence of another task's failure (a channel to a task that
    /// is gone), not a cause of its own: that task's failure says why.
    pub fn is_consequential(&self) -> bool {
        matches!(self, EddyError::Exchange(_))
    }

    /// Whether the same request may succeed when tried again: a failure of a connection
    /// or of an external system that says so, not bad input, bad state or a bug.
    pub fn is_transient(&self) -> bool {
        match self {
            EddyError::Remote { transient, .. } => *transient,
            EddyError::External { .. } | EddyError::Io(_) | EddyError::Exchange(_) => true,
            EddyError::ObjectStore(e) => !matches!(
                e,
                object_store::Error::NotFound { .. }
                    | object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotSupported { .. }
                    | object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }
            ),
            _ => false,
        }
    }
}

/// The engine's result type.
pub type Result<T, E = EddyError> = std::result::Result<T, E>;

/// A call from one component to another (the JobManager and a TaskManager, in-process or
/// over gRPC) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The other side cannot be reached: gone, or not up yet.
    #[error("unreachable: {0}")]
    Unavailable(String),
    /// The other side does not know what the call names (e.g. a TaskManager that has not
    /// registered, or a job not deployed there).
    #[error("not found: {0}")]
    NotFound(String),
    /// The other side refused the call as invalid.
    #[error("refused: {0}")]
    Refused(String),
}

/// What a caught panic said (its `&str` or `String` payload), or `default`.
pub fn panic_message<'a>(panic: &'a (dyn std::any::Any + Send), default: &'a str) -> &'a str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or(default)
}
