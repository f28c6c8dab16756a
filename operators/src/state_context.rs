//! Where an operator subtask keeps the state that does not stay in memory.

use std::path::PathBuf;

use eddy_common::config::state::StateBackendKind;
use eddy_state::StoreOptions;

/// What the job's state backend gives one operator subtask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateContext {
    /// The backend.
    pub backend: StateBackendKind,
    /// A directory the operator alone writes (removed with its task).
    pub dir: PathBuf,
    /// Where the files the restored snapshots refer to were put, under their names.
    pub restored: PathBuf,
    /// Bytes of memory the operator's store and the keys it keeps hot may use.
    pub memory_bytes: usize,
}

impl StateContext {
    /// State in memory only (the `hashmap` backend), restoring nothing from files.
    pub fn in_memory() -> Self {
        StateContext {
            backend: StateBackendKind::HashMap,
            dir: PathBuf::new(),
            restored: PathBuf::new(),
            memory_bytes: 0,
        }
    }

    /// Whether keyed state goes to an LSM store.
    pub fn is_lsm(&self) -> bool {
        self.backend == StateBackendKind::Lsm
    }

    /// The store's share of the memory: a quarter each for its write buffer and its block
    /// cache (the other half is for keys kept hot in the operator). Merges write up to
    /// eight write buffers' worth per flush: more than the tiers need on average, so they
    /// keep up, and a bound on what one checkpoint uploads for them.
    pub fn store_options(&self) -> StoreOptions {
        let quarter = (self.memory_bytes / 4).max(64 << 10);
        StoreOptions {
            memtable_bytes: quarter,
            block_cache_bytes: quarter,
            merge_bytes_per_flush: 8 * quarter,
            ..StoreOptions::default()
        }
    }

    /// Bytes the operator may keep in hot keys.
    pub fn hot_bytes(&self) -> usize {
        (self.memory_bytes / 2).max(16 << 10)
    }
}
