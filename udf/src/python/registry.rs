//! The Python workers alive in this process, for the TaskManager's metrics.

use std::sync::Mutex;

static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub(super) fn add(pid: u32) {
    LIVE.lock().unwrap_or_else(|p| p.into_inner()).push(pid);
}

pub(super) fn remove(pid: u32) {
    LIVE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|live| *live != pid);
}

/// The Python workers of this process and the memory they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerUsage {
    /// Workers alive.
    pub workers: usize,
    /// Their resident memory together, in bytes (read from `/proc`).
    pub resident_bytes: u64,
}

/// What the Python workers of this process hold now.
pub fn usage() -> WorkerUsage {
    let pids = LIVE.lock().unwrap_or_else(|p| p.into_inner()).clone();
    WorkerUsage {
        workers: pids.len(),
        resident_bytes: pids.iter().filter_map(|pid| resident_bytes(*pid)).sum(),
    }
}

/// A process's resident memory, from the `VmRSS` line of `/proc/PID/status`.
fn resident_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_size() {
        assert!(resident_bytes(std::process::id()).unwrap() > 0);
        assert_eq!(resident_bytes(u32::MAX), None);
    }
}
