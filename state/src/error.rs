//! The store's errors: each names the file and what in it was wrong.

use std::path::PathBuf;

/// What can go wrong reading or writing state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file system refused an operation on a state file.
    #[error("state file {path}: {action}: {source}")]
    Io {
        /// The file (or directory) acted on.
        path: PathBuf,
        /// What was being done: "create", "read block", "rename", ...
        action: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A state file's bytes are not what its writer wrote (torn, truncated, overwritten,
    /// or of a format this build does not read).
    #[error("state file {path} is corrupt: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What did not check out.
        what: String,
    },
    /// A caller broke the store's contract (keys out of order in a run, ...).
    #[error("state store misuse: {0}")]
    Misuse(String),
}

/// The store's result type.
pub type Result<T, E = StateError> = std::result::Result<T, E>;

impl StateError {
    /// An I/O error on `path` while doing `action` (also for callers that move state
    /// files: uploads, downloads).
    pub fn io(
        path: impl Into<PathBuf>,
        action: &'static str,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| StateError::Io {
            path,
            action,
            source,
        }
    }

    /// `path` is corrupt: `what`.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        StateError::Corrupt {
            path: path.into(),
            what: what.into(),
        }
    }
}
