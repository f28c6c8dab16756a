//! What a JobManager call can fail with.

use eddy_common::EddyError;

use crate::lifecycle::JobState;

/// A refused or failed request to the JobManager.
#[derive(Debug, thiserror::Error)]
pub enum JobManagerError {
    /// No job has that id.
    #[error("no job {0}")]
    NoSuchJob(String),
    /// The job is not in a state that allows the request.
    #[error("job {job} is {state}")]
    WrongState {
        /// The job.
        job: String,
        /// Its state.
        state: JobState,
    },
    /// The request needs checkpoints the job does not take.
    #[error("the job does not checkpoint; savepoints need execution.checkpointing.interval")]
    NotCheckpointing,
    /// A stop-with-savepoint is under way.
    #[error("the job is stopping with a savepoint; it takes no further savepoint")]
    Stopping,
    /// The cluster's policy refuses the job.
    #[error(transparent)]
    Refused(#[from] crate::policy::PolicyViolation),
    /// The job's SQL or options are invalid.
    #[error(transparent)]
    InvalidJob(EddyError),
    /// A TaskManager that has not registered (or was forgotten) called.
    #[error("unknown TaskManager '{0}'; register first")]
    UnknownTaskManager(String),
    /// A message that makes no sense (no task, a bad id, a task elsewhere).
    #[error("{0}")]
    BadMessage(String),
    /// A savepoint was taken but could not be kept, or could not be taken.
    #[error("the savepoint failed: {0}")]
    SavepointFailed(String),
    /// The job's run ended before the savepoint completed.
    #[error("the job ended before the savepoint completed")]
    SavepointAborted,
    /// The savepoint did not complete in time.
    #[error("the savepoint did not complete in time")]
    SavepointTimedOut,
}
