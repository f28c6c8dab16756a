//! What the tests of operators on the LSM backend share: scratch directories, the backend
//! with the least memory, handing a snapshot's files to a restore, and seeded randomness.

use std::path::{Path, PathBuf};

use eddy_common::config::state::StateBackendKind;
use eddy_common::state::OperatorState;

use crate::state_context::StateContext;

/// A fresh directory (with an empty `restored` directory in it) for the test `name` of
/// `operator`.
pub(crate) fn scratch(operator: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("eddy-{operator}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("restored")).unwrap();
    dir
}

/// The LSM backend in `dir` with the least memory it takes (16 kB of hot keys).
pub(crate) fn lsm_context(dir: &Path) -> StateContext {
    StateContext {
        backend: StateBackendKind::Lsm,
        dir: dir.join("store"),
        restored: dir.join("restored"),
        memory_bytes: 0,
    }
}

/// The `hashmap` backend, restoring from the snapshot files handed over to `dir`.
pub(crate) fn memory_context(dir: &Path) -> StateContext {
    StateContext {
        restored: dir.join("restored"),
        ..StateContext::in_memory()
    }
}

/// Copies a snapshot's files where a restore in `dir` finds them (as a task downloads
/// them).
pub(crate) fn hand_over(state: &OperatorState, dir: &Path) {
    let restored = dir.join("restored");
    std::fs::create_dir_all(&restored).unwrap();
    for file in &state.files {
        std::fs::copy(&file.path, restored.join(&file.name)).unwrap();
    }
}

/// Passes `watermark` to `op` as a task does: again while it has output due (a window
/// read back from a store in parts). Returns the calls it took.
pub(crate) fn pass_watermark(
    op: &mut dyn crate::Operator,
    watermark: eddy_common::event::Timestamp,
    out: &mut Vec<eddy_common::chunk::Chunk>,
) -> usize {
    let mut calls = 1;
    op.on_watermark(watermark, out).unwrap();
    while op.has_due_output() {
        op.on_watermark(watermark, out).unwrap();
        calls += 1;
    }
    calls
}

/// A xorshift generator from `seed` (not 0).
pub(crate) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}
