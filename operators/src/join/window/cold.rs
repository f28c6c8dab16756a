//! The rows of a window join that need not stay in memory (the LSM backend). Past the
//! memory budget, the rows in memory of the windows that close last are written to an LSM
//! store, each under its window's bounds ([`sortable`], end first), its join key (its
//! length first), its side and a sequence number; the window is then *spilled*. When a
//! spilled window closes, its rows still in memory are written too, and the store's rows
//! of the window are read back one key group at a time, in batches that end where a key
//! ends. Each batch is joined as a window of its own: a key's rows all meet in one batch,
//! so matches, padding and semi and anti joins come out as for the whole window. Rows read
//! back are deleted.
//!
//! A snapshot holds the rows in memory inline, then the store's runs.

use arrow::array::RecordBatch;
use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use super::{WindowJoin, WindowRows};
use crate::partition::{KeyScope, key_groups};
use crate::spilled_windows::{SpilledWindows, window_of, window_prefix};
use crate::state_context::StateContext;
use crate::stored_runs::{self, KeyRange};

/// The table of the store the rows are in: each operator has a store of its own.
const TABLE: u8 = 0;

/// Rows read back from the store and joined at once, at least (a batch ends with a key).
const FIRE_ROWS: usize = 8192;

/// A window join's rows in an LSM store.
#[derive(Debug)]
pub(super) struct ColdRows {
    pub(super) store: Store,
    /// Bytes of rows to keep in memory.
    hot_bytes: usize,
    /// Numbers each row written, so that equal rows stay apart; restored with the store,
    /// so that no new row takes a stored row's number.
    pub(super) next_row: u64,
    /// The windows whose rows the store may hold.
    pub(super) spilled: SpilledWindows,
    /// Rows joined at once when a stored window closes, at least ([`FIRE_ROWS`]).
    pub(super) fire_rows: usize,
    state_key: Vec<u8>,
    entry_key: Vec<u8>,
}

impl ColdRows {
    /// A store in `context`'s directory, sized by its memory.
    pub(super) fn new(context: &StateContext) -> Result<Self> {
        Ok(ColdRows {
            store: Store::create(&context.dir, context.store_options())?,
            hot_bytes: context.hot_bytes(),
            next_row: 0,
            spilled: SpilledWindows::default(),
            fire_rows: FIRE_ROWS,
            state_key: Vec::new(),
            entry_key: Vec::new(),
        })
    }

    /// Writes `row` of `side` with join key `key` (of `key_group`) in the window whose
    /// bounds are `window` ([`window_prefix`]).
    fn put(
        &mut self,
        window: &[u8],
        key: &[u8],
        key_group: u16,
        side: u8,
        row: &[u8],
    ) -> Result<()> {
        self.entry_key.clear();
        self.entry_key.extend_from_slice(window);
        self.entry_key
            .extend_from_slice(&(key.len() as u32).to_be_bytes());
        self.entry_key.extend_from_slice(key);
        self.entry_key.push(side);
        self.entry_key
            .extend_from_slice(&self.next_row.to_be_bytes());
        self.next_row += 1;
        key::encode(key_group, TABLE, &self.entry_key, &mut self.state_key);
        self.store.put(&self.state_key, row)?;
        self.spilled.mark(window, key_group);
        Ok(())
    }

    /// Deletes the entry of `entry_key` (an operator key read back) in `key_group`.
    fn delete(&mut self, key_group: u16, entry_key: &[u8]) -> Result<()> {
        key::encode(key_group, TABLE, entry_key, &mut self.state_key);
        Ok(self.store.delete(&self.state_key)?)
    }
}

/// Makes a full read of stored rows end where a key ends: the last key's rows wait for
/// the next read, unless they are all the read holds; then the read goes on to the key's
/// end.
fn whole_keys(
    range: &KeyRange<'_>,
    store: &Store,
    entries: &mut Vec<(Vec<u8>, Vec<u8>)>,
    page: usize,
) -> Result<()> {
    let key_of = |entry_key: &[u8]| -> Result<Vec<u8>> {
        let (_, key, _) = parse_entry(entry_key).ok_or_else(|| corrupt_entry(entry_key))?;
        Ok(key.to_vec())
    };
    let Some((last, _)) = entries.last() else {
        return Ok(());
    };
    let last_key = key_of(last)?;
    let mut start = entries.len();
    while start > 0 && key_of(&entries[start - 1].0)? == last_key {
        start -= 1;
    }
    if start > 0 {
        entries.truncate(start);
        return Ok(());
    }
    loop {
        let after = entries.last().map(|(key, _)| key.clone());
        let next = range.entries_after(store, after.as_deref(), page)?;
        let full = next.len() == page;
        let mut same = 0;
        while same < next.len() && key_of(&next[same].0)? == last_key {
            same += 1;
        }
        let ended = same < next.len() || !full;
        entries.extend(next.into_iter().take(same));
        if ended {
            return Ok(());
        }
    }
}

/// A stored row's key taken apart: window (end, start), join key, side.
fn parse_entry(entry_key: &[u8]) -> Option<((Timestamp, Timestamp), &[u8], usize)> {
    let window = window_of(entry_key)?;
    let length = u32::from_be_bytes(entry_key.get(16..20)?.try_into().ok()?) as usize;
    let key = entry_key.get(20..20 + length)?;
    let side = *entry_key.get(20 + length)?;
    (side < 2).then_some((window, key, side as usize))
}

fn corrupt_entry(entry_key: &[u8]) -> EddyError {
    EddyError::Snapshot(format!(
        "a state file of a window join holds a key of {} bytes that is no stored row",
        entry_key.len()
    ))
}

impl WindowJoin {
    /// Keeps rows where `context` says: with the LSM backend, those beyond its memory in an
    /// LSM store.
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() {
            self.cold = Some(ColdRows::new(context)?);
        }
        Ok(self)
    }

    /// Past the memory budget, writes the rows of the windows that close last to the
    /// store until a quarter of the budget is free.
    pub(super) fn evict(&mut self) -> Result<()> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        if self.held_bytes <= cold.hot_bytes {
            return Ok(());
        }
        let keep = cold.hot_bytes - cold.hot_bytes / 4;
        while self.held_bytes > keep {
            let Some((window, rows)) = self.windows.pop_last() else {
                break;
            };
            self.spill(window, rows)?;
        }
        Ok(())
    }

    /// Writes a window's rows in memory to the store.
    fn spill(&mut self, window: (Timestamp, Timestamp), rows: WindowRows) -> Result<()> {
        let prefix = window_prefix(window);
        for (side, batches) in rows.iter().enumerate() {
            for batch in batches {
                self.held_bytes = self
                    .held_bytes
                    .saturating_sub(batch.get_array_memory_size());
                let keys = self.spec.keys[side]
                    .iter()
                    .map(|k| crate::evaluate(k, batch))
                    .collect::<Result<Vec<_>>>()?;
                let groups = key_groups(&keys, self.max_parallelism)?;
                let keys = self.key_codec.convert_columns(&keys)?;
                let encoded = self.row_codecs[side].convert_columns(batch.columns())?;
                let Some(cold) = &mut self.cold else {
                    return Ok(());
                };
                for (i, row) in encoded.iter().enumerate() {
                    cold.put(
                        &prefix,
                        keys.row(i).data(),
                        groups[i] as u16,
                        side as u8,
                        row.data(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Closes the window, with its rows in memory, or, when it spilled, in the store too.
    /// Past a part's worth of rows read back ([`SpilledWindows::part`]) it stops and
    /// returns `false`: the window is still due ([`Operator::has_due_output`]).
    pub(super) fn close_window(
        &mut self,
        window: (Timestamp, Timestamp),
        out: &mut Vec<Chunk>,
    ) -> Result<bool> {
        let rows = self.windows.remove(&window);
        let prefix = window_prefix(window);
        let spilled = self
            .cold
            .as_ref()
            .is_some_and(|cold| cold.spilled.contains(&prefix));
        if !spilled {
            if let Some(rows) = rows {
                self.held_bytes = self.held_bytes.saturating_sub(held_bytes(&rows));
                out.extend(self.join_window(rows)?.map(Chunk::inserts));
            }
            return Ok(true);
        }
        if let Some(rows) = rows {
            self.spill(window, rows)?;
        }
        let mut read_back = 0;
        while let Some(cold) = &self.cold
            && let Some((key_group, after)) = cold.spilled.next_group(&prefix)
        {
            if read_back >= cold.spilled.part {
                return Ok(false);
            }
            let (count, last) = self.join_stored(&prefix, key_group, after, out)?;
            read_back += count;
            if let Some(cold) = &mut self.cold {
                cold.spilled.read_back(&prefix, key_group, last);
            }
        }
        Ok(true)
    }

    /// Joins the next rows of `key_group` the store holds for the window of `prefix`,
    /// after `after`: about [`ColdRows::fire_rows`] rows of whole keys (a key's rows all
    /// meet in one join), deleted once joined. Returns how many, and the last one when
    /// more may follow.
    fn join_stored(
        &mut self,
        prefix: &[u8],
        key_group: u16,
        after: Option<Vec<u8>>,
        out: &mut Vec<Chunk>,
    ) -> Result<(usize, Option<Vec<u8>>)> {
        let range = KeyRange {
            table: TABLE,
            key_group,
            prefix,
        };
        let Some(cold) = &self.cold else {
            return Ok((0, None));
        };
        let fire_rows = cold.fire_rows;
        let mut entries = range.entries_after(&cold.store, after.as_deref(), fire_rows)?;
        let more = entries.len() == fire_rows;
        if more {
            whole_keys(&range, &cold.store, &mut entries, fire_rows)?;
        }
        let mut rows: [Vec<Vec<u8>>; 2] = Default::default();
        for (entry_key, row) in &entries {
            let (_, _, side) = parse_entry(entry_key).ok_or_else(|| corrupt_entry(entry_key))?;
            rows[side].push(row.clone());
        }
        self.join_rows(rows, out)?;
        if let Some(cold) = &mut self.cold {
            for (entry_key, _) in &entries {
                cold.delete(key_group, entry_key)?;
            }
        }
        let last = entries.last().filter(|_| more).map(|(key, _)| key.clone());
        Ok((entries.len(), last))
    }

    /// Joins encoded rows of both sides as a window.
    fn join_rows(&self, rows: [Vec<Vec<u8>>; 2], out: &mut Vec<Chunk>) -> Result<()> {
        if rows[0].is_empty() && rows[1].is_empty() {
            return Ok(());
        }
        let [left, right] = rows;
        let window = [self.decode(0, left)?, self.decode(1, right)?];
        out.extend(self.join_window(window)?.map(Chunk::inserts));
        Ok(())
    }

    /// Encoded rows of `side` as one batch (none when there are none).
    fn decode(&self, side: usize, rows: Vec<Vec<u8>>) -> Result<Vec<RecordBatch>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let codec = &self.row_codecs[side];
        let parser = codec.parser();
        let columns = codec.convert_rows(rows.iter().map(|row| parser.parse(row)))?;
        Ok(vec![RecordBatch::try_new(
            self.spec.schemas[side].clone(),
            columns,
        )?])
    }

    /// Restores the store's rows the snapshots name (fetched into the restore directory)
    /// that `scope` owns: into this subtask's store, or into memory without one.
    pub(super) fn restore_stored(
        &mut self,
        stores: Vec<Vec<String>>,
        scope: &KeyScope,
    ) -> Result<()> {
        if stores.is_empty() {
            return Ok(());
        }
        let key_groups = scope.key_groups();
        let own = self.cold.as_mut().map(|cold| &mut cold.store);
        let restored = self.restored_files.clone();
        let sources =
            stored_runs::adopt_or_open(own, &restored, stores, &key_groups, "a window join")?;
        let mut in_memory: Vec<((Timestamp, Timestamp), usize, Vec<u8>)> = Vec::new();
        for source in &sources {
            for entry in source.entries_of_key_groups(&key_groups)? {
                let (state_key, value) = entry?;
                let Some(row) = value else { continue };
                match &mut self.cold {
                    Some(cold) => cold.store.put(&state_key, &row)?,
                    None => {
                        let (_, _, entry_key) =
                            key::decode(&state_key).ok_or_else(|| corrupt_entry(&state_key))?;
                        let (window, _, side) =
                            parse_entry(entry_key).ok_or_else(|| corrupt_entry(entry_key))?;
                        in_memory.push((window, side, row));
                    }
                }
            }
        }
        self.restore_rows(in_memory)
    }

    /// Puts restored rows (window, side, encoded row) into memory.
    fn restore_rows(
        &mut self,
        mut rows: Vec<((Timestamp, Timestamp), usize, Vec<u8>)>,
    ) -> Result<()> {
        rows.sort_by_key(|(window, side, _)| (*window, *side));
        let mut rest = rows.as_slice();
        while let Some(((window, side, _), _)) = rest.split_first() {
            let same = rest
                .iter()
                .take_while(|(w, s, _)| (w, s) == (window, side))
                .count();
            let (these, others) = rest.split_at(same);
            let batches =
                self.decode(*side, these.iter().map(|(_, _, row)| row.clone()).collect())?;
            for batch in batches {
                self.held_bytes += batch.get_array_memory_size();
                self.windows.entry(*window).or_default()[*side].push(batch);
            }
            rest = others;
        }
        Ok(())
    }

    /// With a store: the windows it holds rows of, then its runs, after `out`'s header and
    /// the rows in memory.
    pub(super) fn snapshot_store(
        &mut self,
        mut out: StateWriter,
    ) -> Result<eddy_common::state::OperatorState> {
        match &mut self.cold {
            Some(cold) => stored_runs::snapshot(out, &mut cold.store),
            None => {
                out.u64(stored_runs::INLINE_LAYOUT);
                Ok(eddy_common::state::OperatorState::full(out.finish()))
            }
        }
    }

    /// The windows the store holds rows of and the number of its next row (none and 0
    /// without one).
    pub(super) fn write_spilled(&self, out: &mut StateWriter) {
        match &self.cold {
            Some(cold) => {
                cold.spilled.write(out);
                out.u64(cold.next_row);
            }
            None => {
                SpilledWindows::default().write(out);
                out.u64(0);
            }
        }
    }

    /// Reads the windows a snapshot's store holds rows of, those of `scope`'s key groups.
    /// Without a store, the rows are read into memory and the windows are not needed.
    pub(super) fn read_spilled(
        &mut self,
        input: &mut StateReader<'_>,
        scope: &KeyScope,
    ) -> Result<()> {
        let mut ignored = SpilledWindows::default();
        let spilled = match &mut self.cold {
            Some(cold) => &mut cold.spilled,
            None => &mut ignored,
        };
        spilled.read(input, scope)?;
        let next_row = input.u64()?;
        if let Some(cold) = &mut self.cold {
            cold.next_row = cold.next_row.max(next_row);
        }
        Ok(())
    }

    /// The window that closes first, in memory or in the store.
    pub(super) fn next_window(&self) -> Option<(Timestamp, Timestamp)> {
        let in_memory = self.windows.keys().next().copied();
        let stored = self
            .cold
            .as_ref()
            .and_then(|cold| cold.spilled.first())
            .and_then(window_of);
        in_memory.into_iter().chain(stored).min()
    }
}

/// Bytes a window's rows take in memory.
pub(super) fn held_bytes(rows: &WindowRows) -> usize {
    rows.iter()
        .flatten()
        .map(RecordBatch::get_array_memory_size)
        .sum()
}
