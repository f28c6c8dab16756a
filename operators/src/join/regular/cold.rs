//! The keys of a regular join that need not stay in memory (the LSM backend). An LSM store
//! holds, per side and join key, every row of the key (with its match count and write time
//! where the join keeps them), written as one value; each side keeps its recently used
//! keys in memory, a cache of the store. Before a chunk, the keys its rows touch are read
//! back on both sides; after it, the keys it changed are marked, and past the memory budget
//! the least recently used keys are written out (if they changed) and dropped from memory.
//! A snapshot writes every changed key and is the store's runs.
//!
//! An interval join's rows leave with the watermark, also those of keys in the store: a
//! key written to the store gets a timer ([`StoredTimers`]) at the watermark that puts its
//! earliest row out of reach. When the watermark passes it, the key is read back and its
//! rows expire in memory as any other (an emptied key is deleted from the store, a changed
//! one written again, with a new timer, when it leaves memory). A timer left behind by a
//! key that changed since only reads the key back.

use arrow::buffer::NullBuffer;
use eddy_common::chunk::Chunk;
use eddy_common::state::{OperatorState, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use super::StreamingJoin;
use crate::join::side::{ExpiredKeys, RowExtras};
use crate::partition::{KeyScope, key_groups};
use crate::state_context::StateContext;
use crate::stored_runs;
use crate::stored_timers::StoredTimers;

/// The table of the store that holds an interval join's timers: each fires the side (one
/// byte) and the key after it. (Tables 0 and 1 hold the left and right rows.)
const TIMERS: u8 = 2;

/// Stored keys an interval join reads back at once when the watermark reaches their rows.
const EXPIRING_BATCH: usize = 1024;

/// Per side, what the cache knows of each key slot.
#[derive(Debug, Default)]
struct SlotMarks {
    /// Changed since it was last written to the store.
    dirty: Vec<bool>,
    /// The chunk that last touched it.
    last_used: Vec<u64>,
}

impl SlotMarks {
    /// Room for `slot`; slots never marked (rows restored into memory) count as changed,
    /// as [`SlotMarks::is_dirty`] says of slots beyond the marks.
    fn grow_to(&mut self, slot: usize) {
        if self.dirty.len() <= slot {
            self.dirty.resize(slot + 1, true);
            self.last_used.resize(slot + 1, 0);
        }
    }

    /// `slot` changed, without being used (its rows expired).
    fn changed(&mut self, slot: u32) {
        self.grow_to(slot as usize);
        self.dirty[slot as usize] = true;
    }

    fn mark(&mut self, slot: u32, chunk: u64, dirty: bool) {
        let slot = slot as usize;
        self.grow_to(slot);
        self.dirty[slot] |= dirty;
        self.last_used[slot] = chunk;
    }

    /// `slot` holds what the store holds for its key.
    fn placed(&mut self, slot: u32, chunk: u64) {
        let slot = slot as usize;
        self.grow_to(slot);
        self.dirty[slot] = false;
        self.last_used[slot] = chunk;
    }

    fn is_dirty(&self, slot: u32) -> bool {
        self.dirty.get(slot as usize).copied().unwrap_or(true)
    }

    fn last_used(&self, slot: u32) -> u64 {
        self.last_used.get(slot as usize).copied().unwrap_or(0)
    }
}

/// A join's keys in an LSM store, and which of those in memory changed.
#[derive(Debug)]
pub(super) struct ColdKeys {
    store: Store,
    hot_bytes: usize,
    marks: [SlotMarks; 2],
    chunks: u64,
    state_key: Vec<u8>,
    /// When the rows of an interval join's stored keys expire.
    timers: StoredTimers,
}

/// A chunk's join keys, as the cache reads and marks them.
pub(super) struct ChunkKeys {
    keys: arrow::row::Rows,
    key_groups: Vec<usize>,
    valid: Option<NullBuffer>,
}

impl ChunkKeys {
    fn rows(&self) -> impl Iterator<Item = (&[u8], u16)> {
        (0..self.key_groups.len())
            .filter(|i| self.valid.as_ref().is_none_or(|v| v.is_valid(*i)))
            .map(|i| (self.keys.row(i).data(), self.key_groups[i] as u16))
    }
}

impl ColdKeys {
    /// A store in `context`'s directory, sized by its memory.
    pub(super) fn new(context: &StateContext) -> Result<Self> {
        Ok(ColdKeys {
            store: Store::create(&context.dir, context.store_options())?,
            hot_bytes: context.hot_bytes(),
            marks: Default::default(),
            chunks: 0,
            state_key: Vec::new(),
            timers: StoredTimers::new(TIMERS, "an interval join"),
        })
    }
}

impl StreamingJoin {
    /// With the LSM backend: reads back, on both sides, the keys of `chunk`'s rows (from
    /// input `input`) that are not in memory; returns the keys, to mark after the chunk.
    pub(super) fn fetch_keys(&mut self, input: usize, chunk: &Chunk) -> Result<Option<ChunkKeys>> {
        if self.cold.is_none() {
            return Ok(None);
        }
        let (key_arrays, valid) = self.evaluate_keys(input, chunk)?;
        let keys = ChunkKeys {
            keys: self.key_codec.convert_columns(&key_arrays)?,
            key_groups: key_groups(&key_arrays, self.max_parallelism)?,
            valid,
        };
        let Some(cold) = &mut self.cold else {
            return Ok(None);
        };
        cold.chunks += 1;
        let timed = self.load_times();
        for (key, key_group) in keys.rows() {
            for side in [input, 1 - input] {
                if self.sides[side].slot_of(key).is_none() {
                    self.load_key(side, key, key_group, timed[side])?;
                }
            }
        }
        Ok(Some(keys))
    }

    /// Reads `key`'s rows of side `side` back from the store into memory (their times as
    /// [`StreamingJoin::load_times`] says), if it holds them; returns their slot.
    fn load_key(
        &mut self,
        side: usize,
        key: &[u8],
        key_group: u16,
        timed: Option<i64>,
    ) -> Result<Option<u32>> {
        let epoch = self.epochs.current();
        let Some(cold) = &mut self.cold else {
            return Ok(None);
        };
        key::encode(key_group, side as u8, key, &mut cold.state_key);
        let Some(value) = cold.store.get(&cold.state_key)? else {
            return Ok(None);
        };
        let (mut reader, with) = open_value(&value)?;
        self.sides[side].load(&mut reader, epoch, with, timed, |_| true)?;
        let slot = self.sides[side].slot_of(key);
        if let Some(slot) = slot {
            cold.marks[side].placed(slot, cold.chunks);
        }
        Ok(slot)
    }

    /// What [`JoinSide::load`](crate::join::side::JoinSide::load) is told, per side, of
    /// the times of stored rows: an interval join's carry their event times; with a state
    /// TTL, rows written without one are written now.
    fn load_times(&self) -> [Option<i64>; 2] {
        if self.retention.interval().is_some() {
            return [Some(i64::MIN); 2];
        }
        let ttl = self.retention.state_ttl();
        let now = ttl.iter().any(Option::is_some).then(|| (self.clock)());
        ttl.map(|ttl| ttl.and(now))
    }

    /// What a stored row of side `side` carries.
    fn stored_extras(&self, side: usize) -> RowExtras {
        RowExtras {
            counts: self.kind.counts_matches(side),
            times: self.retention.state_ttl()[side].is_some()
                || self.retention.interval().is_some(),
        }
    }

    /// With the LSM backend: reads back (a batch at most) the stored keys of an interval
    /// join whose rows the watermark put out of reach, for them to expire in memory;
    /// whether more may be due.
    pub(super) fn load_expiring_keys(&mut self) -> Result<bool> {
        let Some(cold) = &mut self.cold else {
            return Ok(false);
        };
        cold.chunks += 1;
        let due = cold
            .timers
            .take_due(&mut cold.store, self.watermark, EXPIRING_BATCH)?;
        let more = due.len() == EXPIRING_BATCH;
        let timed = self.load_times();
        for (key_group, fires) in due {
            let side = match fires.first() {
                Some(side @ (0 | 1)) => *side as usize,
                _ => {
                    return Err(EddyError::Snapshot(
                        "a state file of an interval join holds a timer of neither side".into(),
                    ));
                }
            };
            let key = &fires[1..];
            let slot = match self.sides[side].slot_of(key) {
                Some(slot) => Some(slot),
                None => self.load_key(side, key, key_group, timed[side])?,
            };
            // Written again (with a new timer) when it leaves memory, even if none of its
            // rows expire now.
            if let (Some(slot), Some(cold)) = (slot, &mut self.cold) {
                cold.marks[side].changed(slot);
            }
        }
        Ok(more)
    }

    /// With the LSM backend, after rows of side `side` expired: the keys left with rows
    /// are marked changed, those left without are deleted from the store.
    pub(super) fn settle_expired(
        &mut self,
        side: usize,
        expired: Option<ExpiredKeys>,
    ) -> Result<()> {
        let Some(expired) = expired else {
            return Ok(());
        };
        let emptied: Vec<(u32, &[u8])> =
            expired.emptied.iter().map(|k| (0, k.as_slice())).collect();
        let groups = self.key_groups_of(&emptied)?;
        let Some(cold) = &mut self.cold else {
            return Ok(());
        };
        for slot in expired.changed {
            cold.marks[side].changed(slot);
        }
        for ((_, key), key_group) in emptied.iter().zip(groups) {
            key::encode(key_group as u16, side as u8, key, &mut cold.state_key);
            cold.store.delete(&cold.state_key)?;
        }
        // Removals feed snapshots of changes, which a store's snapshots never are.
        self.sides[side].forget_removals_through(u32::MAX);
        Ok(())
    }

    /// After a chunk from input `input`: its keys are marked used (changed on its side, and
    /// on the other where the other side's match counts changed), keys it emptied are
    /// deleted from the store, and past the memory budget keys are written out.
    pub(super) fn settle_keys(&mut self, input: usize, keys: Option<ChunkKeys>) -> Result<()> {
        let (Some(keys), Some(cold)) = (keys, &mut self.cold) else {
            return Ok(());
        };
        let other_changes = self.kind.counts_matches(1 - input);
        for (key, key_group) in keys.rows() {
            match self.sides[input].slot_of(key) {
                Some(slot) => cold.marks[input].mark(slot, cold.chunks, true),
                None => {
                    key::encode(key_group, input as u8, key, &mut cold.state_key);
                    cold.store.delete(&cold.state_key)?;
                }
            }
            if let Some(slot) = self.sides[1 - input].slot_of(key) {
                cold.marks[1 - input].mark(slot, cold.chunks, other_changes);
            }
        }
        // Removals feed snapshots of changes, which a store's snapshots never are.
        for side in &mut self.sides {
            side.forget_removals_through(u32::MAX);
        }
        self.evict_keys()
    }

    /// Writes out and drops the least recently used keys while the sides hold more than
    /// the budget, down to three quarters of it (never a key the last chunk touched).
    pub(super) fn evict_keys(&mut self) -> Result<()> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        let held: usize = self.sides.iter().map(|s| s.memory_bytes()).sum();
        if held <= cold.hot_bytes {
            return Ok(());
        }
        let mut by_age: Vec<(u64, usize, u32)> = Vec::new();
        for (side, marks) in cold.marks.iter().enumerate() {
            for (slot, _) in self.sides[side].keys(None) {
                let used = marks.last_used(slot);
                if used < cold.chunks {
                    by_age.push((used, side, slot));
                }
            }
        }
        // Rows per key vary: evict the older share in proportion to the bytes to free.
        let share = 1.0 - 0.75 * cold.hot_bytes as f64 / held as f64;
        let count = ((by_age.len() as f64 * share).ceil() as usize).min(by_age.len());
        if count == 0 {
            return Ok(());
        }
        by_age.select_nth_unstable(count - 1);
        let mut evicted: [Vec<u32>; 2] = Default::default();
        for (_, side, slot) in &by_age[..count] {
            evicted[*side].push(*slot);
        }
        for (side, slots) in evicted.into_iter().enumerate() {
            self.write_keys(side, &slots)?;
            for slot in slots {
                self.sides[side].drop_key(slot);
            }
        }
        Ok(())
    }

    /// Writes the changed keys among `slots` of side `side` to the store.
    fn write_keys(&mut self, side: usize, slots: &[u32]) -> Result<()> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        let dirty: Vec<(u32, &[u8])> = slots
            .iter()
            .filter(|slot| cold.marks[side].is_dirty(**slot))
            .map(|slot| (*slot, self.sides[side].key_of(*slot)))
            .collect();
        let groups = self.key_groups_of(&dirty)?;
        let with = self.stored_extras(side);
        let flags = with.counts as u64 | (with.times as u64) << 1;
        // An interval join's key expires (in part) once the watermark reaches this.
        let reach = self.retention.interval().map(|i| i.reach(side));
        let mut writes = Vec::with_capacity(dirty.len());
        for ((slot, key), key_group) in dirty.iter().zip(groups) {
            let mut value = StateWriter::with_capacity(64);
            value.compact();
            value.u64(flags);
            self.sides[side].save(*slot, key_group, None, with, &mut value);
            let mut state_key = Vec::new();
            key::encode(key_group as u16, side as u8, key, &mut state_key);
            let expires = reach.and_then(|reach| {
                let earliest = self.sides[side].earliest_expiry(*slot)?;
                let mut fires = Vec::with_capacity(1 + key.len());
                fires.push(side as u8);
                fires.extend_from_slice(key);
                Some((earliest.saturating_add(reach), fires))
            });
            writes.push((*slot, key_group as u16, state_key, value.finish(), expires));
        }
        let Some(cold) = &mut self.cold else {
            return Ok(());
        };
        for (slot, key_group, state_key, value, expires) in writes {
            cold.store.put(&state_key, &value)?;
            if let Some((time, fires)) = expires {
                cold.timers
                    .write(&mut cold.store, key_group, time, &fires)?;
            }
            cold.marks[side].placed(slot, cold.marks[side].last_used(slot));
        }
        Ok(())
    }

    /// A snapshot whose state is the store's runs, once every changed key is written.
    pub(super) fn snapshot_runs(&mut self) -> Result<OperatorState> {
        for side in 0..2 {
            let slots: Vec<u32> = self.sides[side].keys(None).map(|(slot, _)| slot).collect();
            self.write_keys(side, &slots)?;
        }
        let Some(cold) = &mut self.cold else {
            return Err(EddyError::Internal(
                "a join without a store snapshots its runs".into(),
            ));
        };
        let mut out = StateWriter::new();
        out.u64(super::SNAPSHOT_VERSION).compact();
        stored_runs::snapshot(out, &mut cold.store)
    }

    /// Restores the keys `scope` owns from the stores whose runs `stores` name (one per
    /// previous subtask): adopted whole when it is this subtask's alone, its key groups
    /// copied otherwise (into memory with the `hashmap` backend).
    pub(super) fn restore_runs(
        &mut self,
        stores: Vec<Vec<String>>,
        scope: &KeyScope,
    ) -> Result<()> {
        let key_groups = scope.key_groups();
        let own = self.cold.as_mut().map(|cold| &mut cold.store);
        let sources =
            stored_runs::adopt_or_open(own, &self.restored_files, stores, &key_groups, "join")?;
        for source in &sources {
            self.copy_keys(source, &key_groups)?;
        }
        match &mut self.cold {
            Some(cold) if self.retention.interval().is_some() => {
                cold.timers.find(&cold.store, scope)
            }
            _ => Ok(()),
        }
    }

    /// Copies the keys of `key_groups` from `from` into this join's store, or into memory
    /// when it has none.
    fn copy_keys(&mut self, from: &Store, key_groups: &std::ops::Range<usize>) -> Result<()> {
        let timed = self.load_times();
        for entry in from.entries_of_key_groups(key_groups)? {
            let (state_key, value) = entry?;
            let Some(value) = value else { continue };
            if let Some(cold) = &mut self.cold {
                cold.store.put(&state_key, &value)?;
                continue;
            }
            let side = match key::decode(&state_key) {
                Some((_, side @ (0 | 1), _)) => side as usize,
                // Rows in memory expire by the index of their times.
                Some((_, TIMERS, _)) => continue,
                _ => {
                    return Err(EddyError::Snapshot(
                        "a join's state file holds a key of neither side".into(),
                    ));
                }
            };
            let (mut reader, with) = open_value(&value)?;
            self.sides[side].load(&mut reader, 0, with, timed[side], |_| true)?;
        }
        Ok(())
    }
}

#[cfg(test)]
impl StreamingJoin {
    /// Rows the store holds, on both sides.
    pub(super) fn stored_rows(&self) -> usize {
        let Some(cold) = &self.cold else {
            return 0;
        };
        let mut rows = 0;
        for entry in cold
            .store
            .entries_of_key_groups(&(0..self.max_parallelism))
            .unwrap()
        {
            let (state_key, value) = entry.unwrap();
            if let (Some(value), Some((_, 0 | 1, _))) = (value, key::decode(&state_key)) {
                let (mut reader, _) = open_value(&value).unwrap();
                reader.bytes().unwrap();
                reader.u64().unwrap();
                rows += reader.u64().unwrap() as usize;
            }
        }
        rows
    }
}

/// A stored key's value, positioned at its rows, and what each row carries.
fn open_value(value: &[u8]) -> Result<(StateReader<'_>, RowExtras)> {
    let mut reader = StateReader::new(value, "a join's stored key");
    reader.compact();
    let flags = reader.u64()?;
    let with = RowExtras {
        counts: flags & 1 != 0,
        times: flags & 2 != 0,
    };
    Ok((reader, with))
}
