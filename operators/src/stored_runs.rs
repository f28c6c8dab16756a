//! What operators on the LSM backend share: a snapshot that is a manifest of the runs of
//! the operator's store, and reading such a snapshot back.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eddy_common::state::{OperatorState, SnapshotFile, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Run, Store, StoreOptions, key};

/// The keys of one table and key group of a store that start with a prefix.
pub(crate) struct KeyRange<'a> {
    /// The operator's table.
    pub table: u8,
    /// The key group.
    pub key_group: u16,
    /// What the operator keys start with.
    pub prefix: &'a [u8],
}

impl KeyRange<'_> {
    /// Up to `limit` entries of the range in `store` after the operator key `after` (from
    /// the first when `None`), as operator key and value, in key order.
    pub(crate) fn entries_after(
        &self,
        store: &Store,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let from = match after {
            // The first key after `after`.
            Some(after) => [after, &[0]].concat(),
            None => self.prefix.to_vec(),
        };
        self.entries_between(store, &from, None, limit)
    }

    /// Up to `limit` entries of the range in `store` from the operator key `from` on and
    /// before `until` (the range's end when `None`), as operator key and value, in key order.
    pub(crate) fn entries_between(
        &self,
        store: &Store,
        from: &[u8],
        until: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut start = Vec::new();
        key::encode(self.key_group, self.table, from, &mut start);
        let end = match until {
            Some(until) => {
                let mut end = Vec::new();
                key::encode(self.key_group, self.table, until, &mut end);
                Some(end)
            }
            None => {
                let mut prefix = Vec::new();
                key::encode(self.key_group, self.table, self.prefix, &mut prefix);
                prefix_end(prefix)
            }
        };
        let mut entries = Vec::new();
        for entry in store.entries_between(&start, end.as_deref())? {
            let (state_key, value) = entry?;
            if let Some(value) = value {
                entries.push((state_key[key::PREFIX_LEN..].to_vec(), value));
            }
            if entries.len() == limit {
                break;
            }
        }
        Ok(entries)
    }
}

/// The first key after every key that starts with `prefix` (`None`: there is none).
fn prefix_end(mut prefix: Vec<u8>) -> Option<Vec<u8>> {
    while let Some(last) = prefix.pop() {
        if last < u8::MAX {
            prefix.push(last + 1);
            return Some(prefix);
        }
    }
    None
}

/// A snapshot's layout, after its format version: the state itself ...
pub(crate) const INLINE_LAYOUT: u64 = 0;
/// ... or the names of the runs of an LSM store that holds it.
pub(crate) const RUNS_LAYOUT: u64 = 1;

/// A snapshot of `store`: after the operator's header in `out`, the runs layout and the
/// names of the store's runs once flushed, which the snapshot refers to (holding one keeps
/// its file until the snapshot is stored).
pub(crate) fn snapshot(mut out: StateWriter, store: &mut Store) -> Result<OperatorState> {
    let runs = store.checkpoint()?;
    let files: Vec<SnapshotFile> = runs.into_iter().map(snapshot_file).collect();
    out.u64(RUNS_LAYOUT);
    write_manifest(&files, &mut out);
    Ok(OperatorState::with_files(out.finish(), files))
}

fn snapshot_file(run: Arc<Run>) -> SnapshotFile {
    let meta = run.meta();
    SnapshotFile::new(run.name().to_string(), meta.path.clone(), meta.bytes, run)
}

/// Writes the names of `files`, newest first.
fn write_manifest(files: &[SnapshotFile], out: &mut StateWriter) {
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

/// Reads the rest of a snapshot of `what` laid out as `layout` says: its state inline,
/// through `inline`, or the names of an LSM store's runs, returned.
pub(crate) fn read_layout(
    layout: u64,
    input: &mut StateReader<'_>,
    what: &str,
    inline: impl FnOnce(&mut StateReader<'_>) -> Result<()>,
) -> Result<Option<Vec<String>>> {
    match layout {
        INLINE_LAYOUT => inline(input).map(|()| None),
        RUNS_LAYOUT => read_manifest(input, what).map(Some),
        other => Err(EddyError::Snapshot(format!(
            "a snapshot of {what} has layout {other}, which this Eddy does not know"
        ))),
    }
}

/// Where the runs `names` were fetched to under `dir`; a missing one is named.
fn local_paths(dir: &Path, names: &[String], what: &str) -> Result<Vec<PathBuf>> {
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

/// Opens the stores of a restore, one per previous subtask, each named by its run names
/// (fetched into `dir`). A store that is this subtask's alone (the only one, holding only
/// `key_groups`) becomes `own` when `own` is an empty store of the operator; the others are
/// returned, for the operator to copy its key groups out of.
pub(crate) fn adopt_or_open(
    own: Option<&mut Store>,
    dir: &Path,
    stores: Vec<Vec<String>>,
    key_groups: &Range<usize>,
    what: &str,
) -> Result<Vec<Store>> {
    let reading = StoreOptions {
        block_cache_bytes: 1 << 20,
        ..StoreOptions::default()
    };
    let only_one = stores.len() == 1;
    let mut own = own.filter(|own| only_one && own.runs().is_empty());
    let mut sources = Vec::new();
    for names in stores {
        let paths = local_paths(dir, &names, what)?;
        if let Some(own) = own.take() {
            let store = Store::open(own.dir(), own.options(), paths)?;
            match holds_only(&store, key_groups)? {
                true => *own = store,
                false => sources.push(store),
            }
            continue;
        }
        sources.push(Store::open(dir, reading, paths)?);
    }
    Ok(sources)
}

/// Whether every key `store` holds is in `key_groups`.
fn holds_only(store: &Store, key_groups: &Range<usize>) -> Result<bool> {
    let (start, end) = key::key_group_bounds(key_groups);
    let first = store.entries_from(b"")?.next().transpose()?;
    let before = first.is_some_and(|(k, _)| k < start);
    let after = match end {
        Some(end) => store.entries_from(&end)?.next().is_some(),
        None => false,
    };
    Ok(!before && !after)
}
