//! The partitions of a Top-N that need not stay in memory (the LSM backend). An LSM store
//! holds every partition written out; the operator's slots keep the recently used ones, a
//! cache of the store. A partition is written out when it leaves memory (if it changed
//! since it was last written) and, if it changed, at every checkpoint, whose snapshot is
//! then the store's runs; a partition is read back when a row of its key arrives.
//!
//! Top-N over windows keeps its partitions in memory: they live until their window fires.

use std::ops::Range;

use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use super::{SNAPSHOT_VERSION, TopN};
use crate::cold_slots::ColdSlots;
use crate::partition::KeyScope;
use crate::state_context::StateContext;
use crate::stored_runs;
use crate::ttl::StateTtl;
use crate::versioned_snapshot;

/// The table a Top-N's partitions are in.
const TABLE: u8 = 0;

impl TopN {
    /// Keeps partitions where `context` says: with the LSM backend, those beyond its memory
    /// in an LSM store (a Top-N without partition keys, or over windows, keeps them in
    /// memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.spec.window_end.is_none() && self.keys.is_keyed() {
            let mut cold = ColdSlots::new(context, TABLE)?;
            cold.resize(self.keys.len());
            self.cold = Some(cold);
        }
        Ok(self)
    }

    /// The partition of `key` (in `key_group`) read back from the store into a slot, if
    /// the store holds it and its TTL has not passed by `now`.
    pub(super) fn load_cold(
        &mut self,
        key: &[u8],
        key_group: u16,
        now: Option<Timestamp>,
    ) -> Result<Option<u32>> {
        let Some(cold) = &mut self.cold else {
            return Ok(None);
        };
        match cold.fetch(key_group, key)? {
            Some(value) => self.place(key, key_group, &value, now),
            None => Ok(None),
        }
    }

    /// Puts a stored partition (`value` as [`TopN::encode_partition`] wrote it) into a
    /// slot; `None` (and its stored entry deleted) when its TTL passed by `now`.
    fn place(
        &mut self,
        key: &[u8],
        key_group: u16,
        value: &[u8],
        now: Option<Timestamp>,
    ) -> Result<Option<u32>> {
        let mut input = StateReader::new(value, "a Top-N's stored partition");
        input.compact();
        let written = match input.u64()? {
            1 => Some(input.i64()?),
            _ => None,
        };
        if let (Some(ttl), Some(now), Some(written)) = (&self.ttl, now, written)
            && written.saturating_add(ttl.ttl_ms()) <= now
        {
            if let Some(cold) = &mut self.cold {
                cold.delete(key_group, key)?;
            }
            return Ok(None);
        }
        let slot = self.new_slot(key, key_group, 0);
        let partition = &mut self.partitions[slot as usize];
        for _ in 0..input.count(2)? {
            let (sort_key, row) = (input.bytes()?, input.bytes()?);
            partition.push(sort_key, row);
        }
        if let Some(ttl) = &mut self.ttl {
            let now = now.unwrap_or_else(|| ttl.now());
            ttl.write(slot, written.unwrap_or(now));
        }
        if let Some(cold) = &mut self.cold {
            cold.placed(slot, key_group, true);
        }
        Ok(Some(slot))
    }

    /// A partition as the store holds it: whether it carries a write time, the write time,
    /// its rows in sort order (each its sort key and row).
    fn encode_partition(&self, slot: u32) -> Vec<u8> {
        let partition = &self.partitions[slot as usize];
        let mut out = StateWriter::with_capacity(partition.held_bytes() + 16);
        out.compact();
        let written = self.ttl.as_ref().and_then(|ttl| ttl.written(slot));
        out.u64(written.is_some() as u64);
        if let Some(written) = written {
            out.i64(written);
        }
        out.u64(partition.len() as u64);
        for i in 0..partition.len() {
            let (sort_key, row) = partition.get(i);
            out.bytes(sort_key).bytes(row);
        }
        out.finish()
    }

    /// Writes a partition to the store if it changed since it was last written.
    fn write_cold(&mut self, slot: u32) -> Result<()> {
        if !self.cold.as_ref().is_some_and(|c| c.is_dirty(slot)) {
            return Ok(());
        }
        let value = self.encode_partition(slot);
        let held = self.partitions[slot as usize].held_bytes() + 2 * self.keys.key(slot).len();
        if let Some(cold) = &mut self.cold {
            cold.write(slot, self.keys.key(slot), &value, held + 64)?;
        }
        Ok(())
    }

    /// Moves the least recently used partitions out of memory while more than the budget
    /// allows are in it.
    pub(super) fn evict_cold(&mut self) -> Result<()> {
        let Some(cold) = &self.cold else {
            return Ok(());
        };
        if self.keys.in_use() <= cold.max_hot() {
            return Ok(());
        }
        let evicted = cold.to_evict(&self.live_slots());
        for slot in evicted {
            self.write_cold(slot)?;
            self.free_slot(slot);
        }
        Ok(())
    }

    /// A snapshot whose state is the store's runs, once every changed partition is
    /// written.
    pub(super) fn snapshot_runs(&mut self) -> Result<OperatorState> {
        for slot in self.live_slots() {
            self.write_cold(slot)?;
        }
        let mut out = versioned_snapshot(SNAPSHOT_VERSION);
        out.i64(self.watermark).u64(self.ttl.is_some() as u64);
        let Some(cold) = &mut self.cold else {
            return Err(EddyError::Internal(
                "a Top-N without a store snapshots its runs".into(),
            ));
        };
        stored_runs::snapshot(out, &mut cold.store)
    }

    /// Restores the partitions `scope` owns from the stores whose runs `stores` name (one
    /// per previous subtask): the store itself when it is this subtask's alone, its share
    /// of the key groups otherwise (into memory with the `hashmap` backend).
    pub(super) fn restore_runs(
        &mut self,
        stores: Vec<Vec<String>>,
        scope: &KeyScope,
    ) -> Result<()> {
        if stores.is_empty() {
            return Ok(());
        }
        let key_groups = scope.key_groups();
        let own = self.cold.as_mut().map(|cold| &mut cold.store);
        let sources =
            stored_runs::adopt_or_open(own, &self.restored_files, stores, &key_groups, "Top-N")?;
        for source in &sources {
            self.copy_partitions(source, &key_groups)?;
        }
        Ok(())
    }

    /// Copies the partitions of `key_groups` from `from` into this operator's store, or
    /// into memory when it has none.
    fn copy_partitions(&mut self, from: &Store, key_groups: &Range<usize>) -> Result<()> {
        let now = self.ttl.as_ref().map(StateTtl::now);
        for entry in from.entries_of_key_groups(key_groups)? {
            let (state_key, value) = entry?;
            let Some(value) = value else { continue };
            match &mut self.cold {
                Some(cold) => cold.store.put(&state_key, &value)?,
                None => {
                    let (key_group, _, key) = key::decode(&state_key).ok_or_else(|| {
                        EddyError::Snapshot(
                            "a Top-N state file holds a key too short to be one".into(),
                        )
                    })?;
                    self.place(key, key_group, &value, now)?;
                }
            }
        }
        Ok(())
    }
}
