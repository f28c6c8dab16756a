//! Where keyed state lives: the state backend a job chooses, and what it may use.

use std::path::PathBuf;

use crate::{EddyError, Result};

/// The state backend of a job (`state.backend.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateBackendKind {
    /// Keyed state in hash maps in memory; snapshots hold it (or its changes).
    #[default]
    HashMap,
    /// Keyed state in an LSM store on local disk, memory a cache of it; snapshots refer
    /// to the store's immutable runs, stored once. Flink's name for its disk backend,
    /// `rocksdb`, selects it: the store is Eddy's own, not RocksDB.
    Lsm,
}

/// Where keyed state lives and what it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateBackendConfig {
    /// The backend.
    pub kind: StateBackendKind,
    /// Where LSM stores keep their runs (`None`: the system's temporary directory).
    pub local_dir: Option<PathBuf>,
    /// Bytes of memory the LSM stores of one subtask share: write buffers, block caches
    /// and the keys kept hot in operators.
    pub memory_per_slot: usize,
}

impl StateBackendConfig {
    /// Keyed state in memory.
    pub fn in_memory() -> Self {
        StateBackendConfig::unset()
    }

    /// Before the declared defaults are applied.
    pub(super) fn unset() -> Self {
        StateBackendConfig {
            kind: StateBackendKind::HashMap,
            local_dir: None,
            memory_per_slot: 0,
        }
    }
}

/// `hashmap`, or `rocksdb` (also `lsm`).
pub(super) fn parse_kind(key: &str, value: &str) -> Result<StateBackendKind> {
    match value.trim().to_ascii_lowercase().as_str() {
        "hashmap" => Ok(StateBackendKind::HashMap),
        "rocksdb" | "lsm" => Ok(StateBackendKind::Lsm),
        "forst" => Err(EddyError::Config(format!(
            "'{key}' = '{value}': ForSt (state primarily in object storage) is not supported; \
             `rocksdb` keeps state on local disk and stores its runs at checkpoints"
        ))),
        _ => Err(EddyError::Config(format!(
            "'{key}' = '{value}': expected hashmap or rocksdb"
        ))),
    }
}

/// A memory size as Flink writes one: a number of bytes with an optional unit (`b`, `kb`,
/// `mb`, `gb`, `tb`, also `k`, `m`, `g`, `t`, `kib`, `mib`, ...; powers of 1024).
pub(super) fn parse_memory_size(key: &str, value: &str) -> Result<usize> {
    let text = value.trim().to_ascii_lowercase();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim() {
        "" | "b" | "bytes" => 0,
        "k" | "kb" | "kib" | "kibibytes" => 10,
        "m" | "mb" | "mib" | "mebibytes" => 20,
        "g" | "gb" | "gib" | "gibibytes" => 30,
        "t" | "tb" | "tib" | "tebibytes" => 40,
        _ => usize::MAX,
    };
    number
        .parse::<usize>()
        .ok()
        .filter(|_| shift != usize::MAX)
        .and_then(|n| n.checked_mul(1usize.checked_shl(shift as u32)?))
        .filter(|bytes| *bytes > 0)
        .ok_or_else(|| {
            EddyError::Config(format!(
                "'{key}' = '{value}': expected a memory size greater than 0, e.g. 256mb"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_read_as_flink_writes_them() {
        let size = |v| parse_memory_size("k", v);
        assert_eq!(size("256mb").unwrap(), 256 << 20);
        assert_eq!(size(" 2 GB").unwrap(), 2 << 30);
        assert_eq!(size("1024").unwrap(), 1024);
        assert_eq!(size("64k").unwrap(), 64 << 10);
        for bad in [
            "",
            "mb",
            "0",
            "12 parsecs",
            "-1mb",
            "99999999999999999999tb",
        ] {
            assert!(size(bad).is_err(), "{bad}");
        }
    }
}
