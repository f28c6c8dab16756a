//! A task's directory on local disk for keyed state (LSM stores) and the files a restore
//! fetched; it goes when the task ends.

use std::path::{Path, PathBuf};

use eddy_common::config::state::{StateBackendConfig, StateBackendKind};
use eddy_operators::state_context::StateContext;

/// One task's state directory, `{local dir}/eddy-state/{host}-{pid}/{job}-{vertex}-{subtask}-{n}`
/// (the process's directory beside those of other TaskManagers sharing the local dir),
/// created on first use and removed with the value. What a process killed before its tasks
/// ended left behind is removed by the next process of the same host to use the local dir.
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
        let root = config
            .local_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join("eddy-state");
        sweep_once(&root);
        let name = format!("{execution}-{vertex}-{subtask}-{n}");
        TaskStateDir {
            path: root.join(process_dir_name(std::process::id())).join(name),
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

/// The directory of this host's process `pid` under `eddy-state`.
fn process_dir_name(pid: u32) -> String {
    format!("{}-{pid}", host_name())
}

/// The host's name (a container's own), `localhost` where it cannot be read; read once.
fn host_name() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().replace(['/', '-'], "_"))
            .ok()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| "localhost".into())
    })
}

/// Sweeps `root` of stale process directories, once per process.
fn sweep_once(root: &Path) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut swept = SWEPT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !swept.iter().any(|done| done == root) {
        swept.push(root.to_path_buf());
        sweep_stale(root, host_name());
    }
}

/// Removes the directories under `root` of processes of host `host` that no longer run
/// (killed before their tasks removed their state). Only where `/proc` tells which
/// processes run; directories of other hosts (containers sharing the directory) are left.
fn sweep_stale(root: &Path, host: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((entry_host, pid)) = name.to_str().and_then(|n| n.rsplit_once('-')) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let running =
            pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists();
        if entry_host != host || running {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => {
                tracing::info!(dir = %entry.path().display(), "removed the state a stopped process left")
            }
            Err(error) => {
                tracing::warn!(%error, dir = %entry.path().display(), "cannot remove the state a stopped process left")
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_left_by_a_stopped_process_of_this_host_is_swept_and_no_other() {
        let root = std::env::temp_dir().join(format!("eddy-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // A pid above Linux's largest (2^22) runs nowhere.
        let dirs = [
            ("gone", "here-4194999", false),
            ("running", &format!("here-{}", std::process::id()), true),
            ("other host", "there-4194999", true),
            ("not a process's", "here-x", true),
        ];
        for (_, name, _) in &dirs {
            std::fs::create_dir_all(root.join(name).join("task")).unwrap();
        }
        sweep_stale(&root, "here");
        for (what, name, kept) in &dirs {
            assert_eq!(root.join(name).exists(), *kept, "{what}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
}
