//! A task's directory on local disk for keyed state (LSM stores) and the files a restore
//! fetched; it goes when the task ends.

use std::path::{Path, PathBuf};

use eddy_common::config::state::{StateBackendConfig, StateBackendKind};
use eddy_operators::state_context::StateContext;

/// One task's state directory: `{local dir}/eddy-state/{job}-{vertex}-{subtask}-{n}`,
/// created on first use and removed with the value.
#[derive(Debug)]
pub struct TaskStateDir {
    path: PathBuf,
    config: StateBackendConfig,
}

impl TaskStateDir {
    /// The directory of subtask `subtask` of `vertex` of job attempt `execution`.
    pub fn new(
        config: &StateBackendConfig,
        execution: &str,
        vertex: usize,
        subtask: usize,
    ) -> Self {
        static TASKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = TASKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = config.local_dir.clone().unwrap_or_else(std::env::temp_dir);
        let name = format!("{execution}-{vertex}-{subtask}-{}-{n}", std::process::id());
        TaskStateDir {
            path: root.join("eddy-state").join(name),
            config: config.clone(),
        }
    }

    /// No directory: for chains of operators that keep no state (a source's scan).
    pub fn stateless() -> Self {
        TaskStateDir {
            path: PathBuf::new(),
            config: StateBackendConfig::in_memory(),
        }
    }

    /// Where a restore puts the files the restored snapshots refer to.
    pub fn restored(&self) -> PathBuf {
        self.path.join("restored")
    }

    /// What operator `position` of the chain (one of `stateful` stateful ones) gets: its
    /// own store directory and an equal share of the slot's memory.
    pub fn operator(&self, position: usize, stateful: usize) -> StateContext {
        StateContext {
            backend: self.config.kind,
            dir: self.path.join(format!("operator-{position}")),
            restored: self.restored(),
            memory_bytes: self.config.memory_per_slot / stateful.max(1),
        }
    }

    /// Whether operators write stores here.
    pub fn is_lsm(&self) -> bool {
        self.config.kind == StateBackendKind::Lsm
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TaskStateDir {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty()
            && self.path.exists()
            && let Err(error) = std::fs::remove_dir_all(&self.path)
        {
            tracing::warn!(%error, dir = %self.path.display(), "cannot remove a task's state directory");
        }
    }
}
