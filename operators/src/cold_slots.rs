//! Keyed state kept in memory as a cache of an LSM store (the LSM backend's way for
//! operators whose state is one value per key: a GROUP BY's groups, a Top-N's partitions).
//!
//! The operator keeps each key it holds in memory in a slot; this tracks per slot whether
//! it changed since it was last written to the store, whether the store may hold it, and
//! when it was last used, and picks the least recently used slots to move out of memory
//! when more than the memory budget allows are held. A key absent from memory is read
//! back from the store when a row of it arrives.

use std::ops::Range;
use std::path::Path;

use eddy_common::state::{OperatorState, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use crate::partition::KeyScope;
use crate::state_context::StateContext;
use crate::stored_runs;
use crate::ttl::StateTtl;

/// The table of the store the operator's keys are in: each operator has a store of its
/// own (see [`key::encode`]).
const TABLE: u8 = 0;

/// Keys kept in memory however small the budget: fewer would read the store for most rows.
const MIN_HOT: usize = 64;

/// The values of one operator's keys written to an LSM store, and which of those in memory
/// are.
#[derive(Debug)]
pub(crate) struct ColdSlots {
    pub(crate) store: Store,
    hot_bytes: usize,
    /// Roughly what a key in memory takes, learnt from the values written.
    bytes_per_slot: f64,
    /// Per slot: changed since it was last written to the store.
    dirty: Vec<bool>,
    /// Per slot: the store may hold an entry for it (its removal must be written).
    stored: Vec<bool>,
    /// Per slot: the key group of its key.
    key_group: Vec<u16>,
    /// Per slot: the chunk that last touched it.
    last_used: Vec<u64>,
    /// Chunks processed.
    chunks: u64,
    /// A store key, reused.
    pub(crate) state_key: Vec<u8>,
}

impl ColdSlots {
    /// A store in `context`'s directory, sized by its memory, for an operator that has
    /// handed out `slots` slots so far.
    pub(crate) fn new(context: &StateContext, slots: usize) -> Result<Self> {
        let mut cold = ColdSlots {
            store: Store::create(&context.dir, context.store_options())?,
            hot_bytes: context.hot_bytes(),
            bytes_per_slot: 256.0,
            dirty: Vec::new(),
            stored: Vec::new(),
            key_group: Vec::new(),
            last_used: Vec::new(),
            chunks: 0,
            state_key: Vec::new(),
        };
        cold.resize(slots);
        Ok(cold)
    }

    /// Room for `slots` keys.
    pub(crate) fn resize(&mut self, slots: usize) {
        self.dirty.resize(slots, false);
        self.stored.resize(slots, false);
        self.key_group.resize(slots, 0);
        self.last_used.resize(slots, 0);
    }

    /// The most keys to keep in memory.
    pub(crate) fn max_hot(&self) -> usize {
        ((self.hot_bytes as f64 / self.bytes_per_slot) as usize).max(MIN_HOT)
    }

    /// A new chunk begins.
    pub(crate) fn next_chunk(&mut self) {
        self.chunks += 1;
    }

    /// The stored value of `key` (in `key_group`), if any.
    pub(crate) fn fetch(&mut self, key_group: u16, key: &[u8]) -> Result<Option<Vec<u8>>> {
        key::encode(key_group, TABLE, key, &mut self.state_key);
        Ok(self.store.get(&self.state_key)?)
    }

    /// Deletes the stored value of `key` (in `key_group`), which no slot holds.
    pub(crate) fn delete(&mut self, key_group: u16, key: &[u8]) -> Result<()> {
        key::encode(key_group, TABLE, key, &mut self.state_key);
        Ok(self.store.delete(&self.state_key)?)
    }

    /// `slot` now holds a key of `key_group`, read from the store (`stored`) or new.
    pub(crate) fn placed(&mut self, slot: u32, key_group: u16, stored: bool) {
        let slot = slot as usize;
        self.key_group[slot] = key_group;
        self.stored[slot] = stored;
        self.dirty[slot] = !stored;
        self.last_used[slot] = self.chunks;
    }

    /// `slot`'s value changed.
    pub(crate) fn touched(&mut self, slot: u32) {
        self.dirty[slot as usize] = true;
        self.last_used[slot as usize] = self.chunks;
    }

    /// The key group of the key in `slot`.
    pub(crate) fn key_group(&self, slot: u32) -> u16 {
        self.key_group[slot as usize]
    }

    /// Up to `limit` stored keys of `key_group` that start with `prefix` and come after
    /// `after` (from the first when `None`), with their values, in key order.
    pub(crate) fn entries_with_prefix(
        &self,
        key_group: u16,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let range = stored_runs::KeyRange {
            table: TABLE,
            key_group,
            prefix,
        };
        range.entries_after(&self.store, after, limit)
    }

    /// Whether `slot`'s value changed since it was last written.
    pub(crate) fn is_dirty(&self, slot: u32) -> bool {
        self.dirty[slot as usize]
    }

    /// `slot`'s key (`key`) is gone: its stored entry, if any, is deleted.
    pub(crate) fn removed(&mut self, slot: u32, key: &[u8]) -> Result<()> {
        let slot = slot as usize;
        if self.stored[slot] {
            key::encode(self.key_group[slot], TABLE, key, &mut self.state_key);
            self.store.delete(&self.state_key)?;
        }
        self.stored[slot] = false;
        self.dirty[slot] = false;
        Ok(())
    }

    /// Writes `slot`'s value (of `key`) as `value`; `held_bytes` is what it takes in
    /// memory, which sizes how many keys stay there.
    pub(crate) fn write(
        &mut self,
        slot: u32,
        key: &[u8],
        value: &[u8],
        held_bytes: usize,
    ) -> Result<()> {
        let slot_index = slot as usize;
        key::encode(self.key_group[slot_index], TABLE, key, &mut self.state_key);
        self.store.put(&self.state_key, value)?;
        self.stored[slot_index] = true;
        self.dirty[slot_index] = false;
        self.bytes_per_slot = 0.99 * self.bytes_per_slot + 0.01 * held_bytes as f64;
        Ok(())
    }

    /// Of the slots in `live`, those to move out of memory so that `max_hot` minus a
    /// quarter stay: the least recently used, never one the current chunk touched.
    pub(crate) fn to_evict(&self, live: &[u32]) -> Vec<u32> {
        let max_hot = self.max_hot();
        if live.len() <= max_hot {
            return Vec::new();
        }
        let keep = max_hot - max_hot / 4;
        let mut by_age: Vec<(u64, u32)> = live
            .iter()
            .map(|slot| (self.last_used[*slot as usize], *slot))
            .filter(|(used, _)| *used < self.chunks)
            .collect();
        let count = (live.len() - keep).min(by_age.len());
        if count == 0 {
            return Vec::new();
        }
        by_age.select_nth_unstable(count - 1);
        by_age[..count].iter().map(|(_, slot)| *slot).collect()
    }
}

/// An operator whose keyed state is one value per key, kept in memory slots that cache a
/// [`ColdSlots`] store: what the store's generic steps (write, evict, snapshot, restore)
/// need of it.
pub(crate) trait SlotState {
    /// What the operator is, in errors.
    const WHAT: &'static str;

    /// The store, with the LSM backend.
    fn cold(&self) -> Option<&ColdSlots>;

    /// The store, with the LSM backend, to change.
    fn cold_mut(&mut self) -> Option<&mut ColdSlots>;

    /// The key of `slot`, and the store to write it to (borrowed together, so that the key
    /// need not be copied).
    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>);

    /// The slots in memory that hold state.
    fn live_slots(&self) -> Vec<u32>;

    /// The slots in memory that may move to the store (by default every live one).
    fn evictable_slots(&self) -> Vec<u32> {
        self.live_slots()
    }

    /// Slots in memory.
    fn slots_in_use(&self) -> usize;

    /// `slot`'s value as the store holds it, and the bytes it takes in memory.
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize);

    /// Puts a stored value of `key` (in `key_group`) into a slot; `None` when its TTL
    /// passed by `now`.
    fn place(
        &mut self,
        key: &[u8],
        key_group: u16,
        value: &[u8],
        now: Option<i64>,
    ) -> Result<Option<u32>>;

    /// Frees `slot` in memory, leaving what the store holds of it.
    fn free_slot(&mut self, slot: u32);

    /// `slot`'s value was just written to the store (what else the operator stores of it
    /// goes now).
    fn written(&mut self, _slot: u32) -> Result<()> {
        Ok(())
    }

    /// Frees `slots` in memory, leaving what the store holds of them.
    fn free_slots(&mut self, slots: &[u32]) {
        for slot in slots {
            self.free_slot(*slot);
        }
    }

    /// The operator's state TTL, if it has one.
    fn ttl(&self) -> Option<&StateTtl>;
}

/// A slot's value as `write` writes it (compact), and what it takes in memory when that is
/// about twice its stored bytes: what [`SlotState::encode_slot`] returns.
pub(crate) fn encode_twice_held(write: impl FnOnce(&mut StateWriter)) -> (Vec<u8>, usize) {
    let mut out = StateWriter::with_capacity(64);
    out.compact();
    write(&mut out);
    let value = out.finish();
    let held = 2 * value.len();
    (value, held)
}

/// The value of `key` (in `key_group`) read back from `op`'s store into a slot, if the
/// store holds it and its TTL has not passed by `now`.
pub(crate) fn load<S: SlotState>(
    op: &mut S,
    key: &[u8],
    key_group: u16,
    now: Option<i64>,
) -> Result<Option<u32>> {
    let Some(cold) = op.cold_mut() else {
        return Ok(None);
    };
    let Some(value) = cold.fetch(key_group, key)? else {
        return Ok(None);
    };
    let slot = op.place(key, key_group, &value, now)?;
    if let Some(cold) = op.cold_mut() {
        match slot {
            Some(slot) => cold.placed(slot, key_group, true),
            // Expired: its entry goes.
            None => cold.delete(key_group, key)?,
        }
    }
    Ok(slot)
}

/// Reads back into slots of `op` up to `batch` stored keys of `key_group` that start
/// with `prefix` and come after `after`, in key order. Returns their slots, and the last
/// key read when more may follow (a full batch).
pub(crate) fn load_batch<S: SlotState>(
    op: &mut S,
    key_group: u16,
    prefix: &[u8],
    after: Option<&[u8]>,
    batch: usize,
) -> Result<(Vec<u32>, Option<Vec<u8>>)> {
    let Some(cold) = op.cold() else {
        return Ok((Vec::new(), None));
    };
    let entries = cold.entries_with_prefix(key_group, prefix, after, batch)?;
    let mut slots = Vec::with_capacity(entries.len());
    for (key, value) in &entries {
        if let Some(slot) = op.place(key, key_group, value, None)? {
            if let Some(cold) = op.cold_mut() {
                cold.placed(slot, key_group, true);
            }
            slots.push(slot);
        }
    }
    let last = match entries.len() < batch {
        true => None,
        false => entries.last().map(|(key, _)| key.clone()),
    };
    Ok((slots, last))
}

/// Writes `slot`'s value to the store if it changed since it was last written.
fn write<S: SlotState>(op: &mut S, slot: u32) -> Result<()> {
    if !op.cold().is_some_and(|c| c.is_dirty(slot)) {
        return Ok(());
    }
    let (value, held) = op.encode_slot(slot);
    if let (key, Some(cold)) = op.slot_key_and_store(slot) {
        cold.write(slot, key, &value, held + 2 * key.len() + 64)?;
    }
    op.written(slot)
}

/// Moves the least recently used slots of `op` out of memory while more than its budget
/// allows are in it.
pub(crate) fn evict<S: SlotState>(op: &mut S) -> Result<()> {
    let Some(cold) = op.cold() else {
        return Ok(());
    };
    if op.slots_in_use() <= cold.max_hot() {
        return Ok(());
    }
    let evicted = cold.to_evict(&op.evictable_slots());
    for slot in &evicted {
        write(op, *slot)?;
    }
    op.free_slots(&evicted);
    Ok(())
}

/// A snapshot of `op` whose state is its store's runs, after the operator's header in
/// `out`, once every changed slot is written.
pub(crate) fn snapshot<S: SlotState>(op: &mut S, out: StateWriter) -> Result<OperatorState> {
    for slot in op.live_slots() {
        write(op, slot)?;
    }
    let Some(cold) = op.cold_mut() else {
        return Err(EddyError::Internal(format!(
            "{} without a store snapshots its runs",
            S::WHAT
        )));
    };
    stored_runs::snapshot(out, &mut cold.store)
}

/// Restores into `op` the keys `scope` owns from the stores whose runs `stores` name (one
/// per previous subtask, fetched into `restored`): the store itself when it is this
/// subtask's alone, its share of the key groups otherwise (into memory with the `hashmap`
/// backend).
pub(crate) fn restore<S: SlotState>(
    op: &mut S,
    restored: &Path,
    stores: Vec<Vec<String>>,
    scope: &KeyScope,
) -> Result<()> {
    if stores.is_empty() {
        return Ok(());
    }
    let key_groups = scope.key_groups();
    let own = op.cold_mut().map(|cold| &mut cold.store);
    let sources = stored_runs::adopt_or_open(own, restored, stores, &key_groups, S::WHAT)?;
    for source in &sources {
        copy(op, source, &key_groups)?;
    }
    Ok(())
}

/// Copies the keys of `key_groups` from `from` into `op`'s store, or into memory when it
/// has none.
fn copy<S: SlotState>(op: &mut S, from: &Store, key_groups: &Range<usize>) -> Result<()> {
    let now = op.ttl().map(StateTtl::now);
    for entry in from.entries_of_key_groups(key_groups)? {
        let (state_key, value) = entry?;
        let Some(value) = value else { continue };
        match op.cold_mut() {
            Some(cold) => cold.store.put(&state_key, &value)?,
            None => {
                let (key_group, table, key) = key::decode(&state_key).ok_or_else(|| {
                    EddyError::Snapshot(format!(
                        "a state file of {} holds a key too short to be one",
                        S::WHAT
                    ))
                })?;
                // Other tables index the values (a session's timers): memory needs none.
                if table == TABLE {
                    op.place(key, key_group, &value, now)?;
                }
            }
        }
    }
    Ok(())
}
