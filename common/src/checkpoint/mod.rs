//! Checkpoints in object storage (DESIGN §6):
//!
//! ```text
//! {root}/{job}/chk-{n}/{vertex}-{subtask}.state   task snapshots, written first (each may
//!                                                 extend files of earlier checkpoints)
//! {root}/{job}/chk-{n}/shared/{name}             files task snapshots refer to (LSM runs),
//!                                                 shared by later checkpoints
//! {root}/{job}/chk-{n}/_metadata                  written last: its presence means complete
//! ```
//!
//! `_metadata` lists every task snapshot with its size and CRC-32; a checkpoint whose
//! metadata or files do not check out is skipped, with a warning, for the previous one.

mod shared;
mod snapshot;
mod storage;

pub use snapshot::TaskSnapshot;
/// The format version of task snapshots this build writes.
pub const SNAPSHOT_FORMAT: u64 = snapshot::VERSION;
pub use storage::{
    CheckpointDir, CheckpointMetadata, CheckpointStorage, RestartPoint, StateFile, StateHandle,
    Unreadable,
};

/// The newest checkpoint the JobManager has declared complete, as tasks learn it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompletedCheckpoint {
    /// Its id (0: none yet).
    pub checkpoint: u64,
    /// Every source had read all its input when it was taken: it is the job's last, and
    /// sources may end once it is complete.
    pub end_of_input: bool,
}
