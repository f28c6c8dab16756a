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
use crate::stored_runs;
use crate::ttl::StateTtl;

/// The table a GROUP BY's groups are in.
pub(super) const TABLE: u8 = 0;

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
                cold.delete(key_group, key)?;
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
            let key = self.group_keys.key(group);
            // Slots, hash table and accumulators hold a group in about twice its encoding.
            let held = 2 * (key.len() + value.len()) + 64;
            cold.write(group, key, &value, held)?;
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
