//! What can go wrong calling a user-defined function.

use std::time::Duration;

/// A failed call of a user-defined function. Each names the function (as its
/// `CREATE FUNCTION` does) and what the task should know to fix it.
#[derive(Debug, thiserror::Error)]
pub enum UdfError {
    /// The worker process could not be started.
    #[error("cannot start the Python worker '{executable}' (python.executable): {source}")]
    Start {
        /// The interpreter.
        executable: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The worker started but could not get ready (no pyarrow, a bad `python.files`, ...).
    #[error("the Python worker '{executable}' failed to start:\n{traceback}")]
    Startup {
        /// The interpreter.
        executable: String,
        /// Its Python traceback.
        traceback: String,
    },
    /// The function (or its import) raised.
    #[error("the Python function {function} raised:\n{traceback}")]
    Raised {
        /// `module.function`.
        function: String,
        /// Its Python traceback.
        traceback: String,
    },
    /// A call took longer than `python.worker.timeout`; the worker was stopped.
    #[error(
        "the Python function {function} did not answer within {timeout:?} \
         (python.worker.timeout); its worker (pid {pid}) was stopped"
    )]
    Timeout {
        /// `module.function`.
        function: String,
        /// The limit.
        timeout: Duration,
        /// The stopped worker.
        pid: u32,
    },
    /// The worker went away during a call.
    #[error("the Python worker (pid {pid}) running {function} died: {status}{output}")]
    Died {
        /// `module.function`.
        function: String,
        /// The worker's process id.
        pid: u32,
        /// How it ended (exit code or signal), as far as known.
        status: String,
        /// The last lines it wrote, if any (a `MemoryError`, a fatal error, ...).
        output: String,
    },
    /// The worker answered with something that is not the result asked for.
    #[error("the Python function {function} answered wrongly: {message}")]
    Protocol {
        /// `module.function`.
        function: String,
        /// What was wrong.
        message: String,
    },
    /// Arrow could not encode the arguments or decode the result.
    #[error("the Python function {function}: {source}")]
    Arrow {
        /// `module.function`.
        function: String,
        /// Arrow's error.
        #[source]
        source: arrow::error::ArrowError,
    },
}
