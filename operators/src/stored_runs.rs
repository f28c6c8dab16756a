//! What operators on the LSM backend share: a snapshot that is a manifest of the runs of
//! the operator's store, and reading such a snapshot back.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_common::state::{SnapshotFile, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Run, Store, key};

/// A snapshot's layout, after its format version: the state itself ...
pub(crate) const INLINE_LAYOUT: u64 = 0;
/// ... or the names of the runs of an LSM store that holds it.
pub(crate) const RUNS_LAYOUT: u64 = 1;

/// Flushes `store`; returns its runs as the files of a snapshot (holding one keeps its
/// file until the snapshot is stored).
pub(crate) fn checkpoint(store: &mut Store) -> Result<Vec<SnapshotFile>> {
    let runs = store.checkpoint()?;
    Ok(runs.into_iter().map(snapshot_file).collect())
}

fn snapshot_file(run: Arc<Run>) -> SnapshotFile {
    let meta = run.meta();
    SnapshotFile::new(run.name().to_string(), meta.path.clone(), meta.bytes, run)
}

/// Writes the names of `files`, newest first.
pub(crate) fn write_manifest(files: &[SnapshotFile], out: &mut StateWriter) {
    out.u64(files.len() as u64);
    for file in files {
        out.bytes(file.name.as_bytes());
    }
}

/// Reads the run names [`write_manifest`] wrote; each must be a plain file name.
pub(crate) fn read_manifest(input: &mut StateReader<'_>, what: &str) -> Result<Vec<String>> {
    (0..input.count(1)?)
        .map(|_| {
            let name = input.bytes()?;
            let name = std::str::from_utf8(name)
                .ok()
                .filter(|n| !n.is_empty() && !n.contains(['/', '\\']) && *n != "..")
                .ok_or_else(|| {
                    EddyError::Snapshot(format!(
                        "a snapshot of {what} names the state file {name:02x?}, which is no file name"
                    ))
                })?;
            Ok(name.to_string())
        })
        .collect()
}

/// Where the runs `names` were fetched to under `dir`; a missing one is named.
pub(crate) fn local_paths(dir: &Path, names: &[String], what: &str) -> Result<Vec<PathBuf>> {
    names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            match path.exists() {
                true => Ok(path),
                false => Err(EddyError::Snapshot(format!(
                    "the {what} state file {name} of the snapshot restored is not in {}",
                    dir.display()
                ))),
            }
        })
        .collect()
}

/// Whether every key `store` holds is in `key_groups`.
pub(crate) fn holds_only(store: &Store, key_groups: &Range<usize>) -> Result<bool> {
    let (start, end) = key::key_group_bounds(key_groups);
    let first = store.entries_from(b"")?.next().transpose()?;
    let before = first.is_some_and(|(k, _)| k < start);
    let after = match end {
        Some(end) => store.entries_from(&end)?.next().is_some(),
        None => false,
    };
    Ok(!before && !after)
}
