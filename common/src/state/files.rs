//! Files a snapshot refers to instead of holding their bytes: the immutable runs of an LSM
//! store. A checkpoint stores each once; later checkpoints that still need it refer to the
//! stored copy, so a snapshot's upload follows the state changed, not the state held.

use std::any::Any;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// An immutable local file an operator's snapshot refers to by name.
#[derive(Clone)]
pub struct SnapshotFile {
    /// Its name, unique among the files of every snapshot of the job (the state refers to
    /// it by this name, and a restore finds it under it).
    pub name: String,
    /// Where it is on local disk.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Whatever keeps the file on disk until the snapshot is stored (the run it holds).
    pub keep: Arc<dyn Any + Send + Sync>,
}

impl SnapshotFile {
    /// A file kept on disk for as long as `keep` lives.
    pub fn new(name: String, path: PathBuf, size: u64, keep: Arc<dyn Any + Send + Sync>) -> Self {
        SnapshotFile {
            name,
            path,
            size,
            keep,
        }
    }
}

impl fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("size", &self.size)
            .finish()
    }
}

impl PartialEq for SnapshotFile {
    fn eq(&self, other: &Self) -> bool {
        (&self.name, &self.path, self.size) == (&other.name, &other.path, other.size)
    }
}

impl Eq for SnapshotFile {}
