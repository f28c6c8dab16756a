//! What the tests of operators share: scratch directories, the LSM backend with the least
//! memory, handing a snapshot's files to a restore, seeded randomness, and restores from
//! chains of snapshots checked against an operator never restored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use eddy_common::chunk::Chunk;
use eddy_common::config::state::StateBackendKind;
use eddy_common::state::{OperatorState, SnapshotRequest, StateKind};

use crate::state_context::StateContext;
use crate::{KeyScope, Operator};

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

/// Drives `make()` through `steps` (each step's chunks, by input) beside a copy that never
/// snapshots, asserting that every chunk emits the same rows (in any order). After each
/// step it takes a snapshot of changes where it can, and at random (from `seed`) it
/// completes it, leaves it uncompleted, or restores a new operator from its chain, which
/// must hold the same `state` as the copy and goes on in its place.
pub(crate) fn restores_go_on_as_never_restored<O, S>(
    seed: u64,
    steps: Vec<Vec<(usize, Chunk)>>,
    make: impl Fn() -> O,
    state: impl Fn(&O) -> S,
) where
    O: Operator,
    S: PartialEq + std::fmt::Debug,
{
    let emitted = |operator: &mut O, input: usize, chunk: Chunk| -> Vec<String> {
        let mut out = Vec::new();
        operator.process_input(input, chunk, &mut out).unwrap();
        let mut rows: Vec<String> = out.iter().flat_map(Chunk::to_pretty).collect();
        rows.sort();
        rows
    };
    let mut next = xorshift(seed * 7919);
    let (mut reference, mut operator) = (make(), make());
    let mut chains: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    let mut completed = None;
    for (step, chunks) in steps.into_iter().enumerate() {
        for (input, chunk) in chunks {
            let expected = emitted(&mut reference, input, chunk.clone());
            let got = emitted(&mut operator, input, chunk);
            assert_eq!(got, expected, "seed {seed}, step {step}");
        }
        let checkpoint = step as u64 + 1;
        let request = SnapshotRequest {
            checkpoint,
            completed,
            changes: true,
        };
        let snapshot = operator.snapshot(&request).unwrap();
        let mut chain = match snapshot.kind {
            StateKind::Changes => {
                chains[&completed.expect("changes extend a completed one")].clone()
            }
            StateKind::Full => Vec::new(),
        };
        chain.push(snapshot.bytes.to_vec());
        chains.insert(checkpoint, chain.clone());
        match next() % 3 {
            0 => {
                let mut restored = make();
                let pieces: Vec<&[u8]> = chain.iter().map(Vec::as_slice).collect();
                restored.restore(&pieces, &KeyScope::everything()).unwrap();
                restored.restored_from(checkpoint);
                assert_eq!(
                    state(&restored),
                    state(&reference),
                    "seed {seed}, step {step}"
                );
                operator = restored;
                completed = Some(checkpoint);
            }
            1 => completed = Some(checkpoint),
            // Not (yet) completed: the next snapshot extends an older one.
            _ => {}
        }
    }
}
