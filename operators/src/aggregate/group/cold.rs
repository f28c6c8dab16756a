//! The groups of a `GROUP BY` that need not stay in memory (the LSM backend). An LSM store
//! holds every group written out; the operator's slots keep the recently used ones, a
//! cache of the store. A group is written out when it leaves memory (if it changed since
//! it was last written) and, if it changed, at every checkpoint, whose snapshot is then
//! the store's runs; a group is read back when a row of its key arrives.

use eddy_common::state::{OperatorState, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use super::GroupAggregate;
use crate::aggregate::snapshot_writer;
use crate::partition::KeyScope;
use crate::state_context::StateContext;
use crate::stored_runs;
use crate::ttl::StateTtl;

/// A group's store key: its key group, table 0, its key.
const TABLE: u8 = 0;

/// The groups written to an LSM store, and which of those in memory are.
#[derive(Debug)]
pub(super) struct ColdGroups {
    pub(super) store: Store,
    hot_bytes: usize,
    /// Roughly what a group in memory takes, learnt from the groups written.
    bytes_per_group: f64,
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
    pub(super) state_key: Vec<u8>,
}

impl ColdGroups {
    /// A store in `context`'s directory, sized by its memory.
    pub(super) fn new(context: &StateContext) -> Result<Self> {
        Ok(ColdGroups {
            store: Store::create(&context.dir, context.store_options())?,
            hot_bytes: context.hot_bytes(),
            bytes_per_group: 256.0,
            dirty: Vec::new(),
            stored: Vec::new(),
            key_group: Vec::new(),
            last_used: Vec::new(),
            chunks: 0,
            state_key: Vec::new(),
        })
    }

    /// Room for `slots` groups.
    pub(super) fn resize(&mut self, slots: usize) {
        self.dirty.resize(slots, false);
        self.stored.resize(slots, false);
        self.key_group.resize(slots, 0);
        self.last_used.resize(slots, 0);
    }

    /// The most groups to keep in memory.
    pub(super) fn max_hot(&self) -> usize {
        ((self.hot_bytes as f64 / self.bytes_per_group) as usize).max(1024)
    }

    /// A new chunk begins.
    pub(super) fn next_chunk(&mut self) {
        self.chunks += 1;
    }

    /// The stored group of `key` (in `key_group`), if any.
    pub(super) fn fetch(&mut self, key_group: u16, key: &[u8]) -> Result<Option<Vec<u8>>> {
        key::encode(key_group, TABLE, key, &mut self.state_key);
        Ok(self.store.get(&self.state_key)?)
    }

    /// `slot` now holds a group of `key_group`, read from the store (`stored`) or new.
    pub(super) fn placed(&mut self, slot: u32, key_group: u16, stored: bool) {
        let slot = slot as usize;
        self.key_group[slot] = key_group;
        self.stored[slot] = stored;
        self.dirty[slot] = !stored;
        self.last_used[slot] = self.chunks;
    }

    /// `slot`'s group changed.
    pub(super) fn touched(&mut self, slot: u32) {
        self.dirty[slot as usize] = true;
        self.last_used[slot as usize] = self.chunks;
    }

    /// Whether `slot`'s group changed since it was last written.
    pub(super) fn is_dirty(&self, slot: u32) -> bool {
        self.dirty[slot as usize]
    }

    /// `slot`'s group (of `key`) is gone: its stored entry, if any, is deleted.
    pub(super) fn removed(&mut self, slot: u32, key: &[u8]) -> Result<()> {
        let slot = slot as usize;
        if self.stored[slot] {
            key::encode(self.key_group[slot], TABLE, key, &mut self.state_key);
            self.store.delete(&self.state_key)?;
        }
        self.stored[slot] = false;
        self.dirty[slot] = false;
        Ok(())
    }

    /// Writes `slot`'s group (of `key`) as `value`.
    pub(super) fn write(&mut self, slot: u32, key: &[u8], value: &[u8]) -> Result<()> {
        let slot_index = slot as usize;
        key::encode(self.key_group[slot_index], TABLE, key, &mut self.state_key);
        self.store.put(&self.state_key, value)?;
        self.stored[slot_index] = true;
        self.dirty[slot_index] = false;
        // Slots, hash table and accumulators hold a group in about twice its encoding.
        let bytes = 2.0 * (key.len() + value.len()) as f64 + 64.0;
        self.bytes_per_group = 0.99 * self.bytes_per_group + 0.01 * bytes;
        Ok(())
    }

    /// Of the groups in `live`, those to move out of memory so that `max_hot` minus a
    /// quarter stay: the least recently used, never one the current chunk touched.
    pub(super) fn to_evict(&self, live: &[u32]) -> Vec<u32> {
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

impl GroupAggregate {
    /// The group of `key` (in `key_group`) read back from the store into a slot, if the
    /// store holds it and its TTL has not passed by `now`.
    pub(super) fn load_cold(
        &mut self,
        hash: u64,
        key: &[u8],
        key_group: u16,
        now: Option<i64>,
    ) -> Result<Option<u32>> {
        let Some(cold) = &mut self.cold else {
            return Ok(None);
        };
        match cold.fetch(key_group, key)? {
            Some(value) => self.place(hash, key, key_group, &value, now),
            None => Ok(None),
        }
    }

    /// Puts a stored group (`value` as [`GroupAggregate::encode`] wrote it) into a slot;
    /// `None` (and its stored entry deleted) when its TTL passed by `now`.
    fn place(
        &mut self,
        hash: u64,
        key: &[u8],
        key_group: u16,
        value: &[u8],
        now: Option<i64>,
    ) -> Result<Option<u32>> {
        let mut input = StateReader::new(value, "a GROUP BY's stored group");
        input.compact();
        let timed = input.u64()? == 1;
        let rows = input.i64()?;
        let written = match timed {
            true => Some(input.i64()?),
            false => None,
        };
        if let (Some(ttl), Some(now), Some(written)) = (&self.ttl, now, written)
            && written.saturating_add(ttl.ttl_ms()) <= now
        {
            if let Some(cold) = &mut self.cold {
                key::encode(key_group, TABLE, key, &mut cold.state_key);
                cold.store.delete(&cold.state_key)?;
            }
            return Ok(None);
        }
        let group = self.insert_group(hash, key);
        self.row_counts[group as usize] = rows;
        self.accumulators.load(group, &mut input)?;
        if let Some(ttl) = &mut self.ttl {
            let now = now.unwrap_or_else(|| ttl.now());
            ttl.write(group, written.unwrap_or(now));
        }
        if let Some(cold) = &mut self.cold {
            cold.placed(group, key_group, true);
        }
        Ok(Some(group))
    }

    /// A group as the store holds it: whether it carries a write time, its row count, the
    /// write time, its accumulators.
    fn encode(&self, group: u32) -> Vec<u8> {
        let mut out = StateWriter::with_capacity(64);
        out.compact();
        let written = self.ttl.as_ref().and_then(|ttl| ttl.written(group));
        out.u64(written.is_some() as u64)
            .i64(self.row_counts[group as usize]);
        if let Some(written) = written {
            out.i64(written);
        }
        self.accumulators.save(group, &mut out);
        out.finish()
    }

    /// Writes a group to the store if it changed since it was last written.
    fn write_cold(&mut self, group: u32) -> Result<()> {
        if !self.cold.as_ref().is_some_and(|c| c.is_dirty(group)) {
            return Ok(());
        }
        let value = self.encode(group);
        if let Some(cold) = &mut self.cold {
            cold.write(group, self.group_keys.key(group), &value)?;
        }
        Ok(())
    }

    /// Moves the least recently used groups out of memory while more than the budget
    /// allows are in it.
    pub(super) fn evict_cold(&mut self) -> Result<()> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        if self.slots.in_use() <= cold.max_hot() {
            return Ok(());
        }
        let live = self.live_groups();
        let evicted = cold.to_evict(&live);
        for group in evicted {
            self.write_cold(group)?;
            self.free_slot(group);
        }
        Ok(())
    }

    /// The groups in memory that hold rows.
    fn live_groups(&self) -> Vec<u32> {
        (0..self.slots.len as u32)
            .filter(|g| self.row_counts[*g as usize] > 0)
            .collect()
    }

    /// A snapshot whose state is the store's runs, once every changed group is written.
    pub(super) fn snapshot_runs(&mut self) -> Result<OperatorState> {
        for group in self.live_groups() {
            self.write_cold(group)?;
        }
        let Some(cold) = &mut self.cold else {
            return Err(EddyError::Internal(
                "a GROUP BY without a store snapshots its runs".into(),
            ));
        };
        stored_runs::snapshot(snapshot_writer(256), &mut cold.store)
    }

    /// Restores the groups `scope` owns from the stores whose runs `stores` name (one per
    /// previous subtask): the store itself when it is this subtask's alone, its share of
    /// the key groups otherwise (into memory with the `hashmap` backend).
    pub(super) fn restore_runs(
        &mut self,
        stores: Vec<Vec<String>>,
        scope: &KeyScope,
    ) -> Result<()> {
        let key_groups = scope.key_groups();
        let own = self.cold.as_mut().map(|cold| &mut cold.store);
        let sources =
            stored_runs::adopt_or_open(own, &self.restored_files, stores, &key_groups, "GROUP BY")?;
        for source in &sources {
            self.copy_groups(source, &key_groups)?;
        }
        Ok(())
    }

    /// Copies the groups of `key_groups` from `from` into this operator's store, or into
    /// memory when it has none.
    fn copy_groups(&mut self, from: &Store, key_groups: &std::ops::Range<usize>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        for entry in from.entries_of_key_groups(key_groups)? {
            let (state_key, value) = entry?;
            let Some(value) = value else { continue };
            match &mut self.cold {
                Some(cold) => cold.store.put(&state_key, &value)?,
                None => {
                    let (key_group, _, key) = key::decode(&state_key).ok_or_else(|| {
                        EddyError::Snapshot(
                            "a GROUP BY state file holds a key too short to be one".into(),
                        )
                    })?;
                    let hash = self.group_keys.hash(key);
                    self.place(hash, key, key_group, &value, now)?;
                }
            }
        }
        Ok(())
    }
}
