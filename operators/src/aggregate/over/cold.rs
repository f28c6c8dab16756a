//! The partitions of an OVER aggregation that need not stay in memory (the LSM backend).
//! An LSM store holds every partition written out: its rows waiting for the watermark,
//! its frame's rows and its aggregates, as one value. The operator's slots keep the
//! recently used partitions, a cache of the store; past the memory budget the least
//! recently used partitions *without rows waiting* are written out (if they changed) and
//! dropped from memory: those with rows waiting stay until the watermark emits them, so
//! that no timer has to read the store. A partition is read back when a row of its key
//! arrives. A snapshot writes every changed partition and is the store's runs, after the
//! keys of the partitions with rows waiting, which a restore reads back into memory (their
//! timers are in memory only).

use eddy_common::Result;
use eddy_common::state::{StateReader, StateWriter};

use super::OverAggregate;
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::partition::KeyScope;
use crate::state_context::StateContext;
use crate::ttl::StateTtl;

impl OverAggregate {
    /// Keeps partitions where `context` says: with the LSM backend, those beyond its memory
    /// in an LSM store (an OVER without `PARTITION BY` keeps its one in memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.keys.is_keyed() {
            self.cold = Some(ColdSlots::new(context, self.keys.len())?);
        }
        Ok(self)
    }

    /// Writes the key group and key of each partition with rows waiting, with a store
    /// (none without one: a snapshot then holds the partitions themselves).
    pub(super) fn write_waiting(&self, out: &mut StateWriter) {
        let Some(cold) = &self.cold else {
            out.u64(0);
            return;
        };
        let waiting: Vec<u32> = (0..self.keys.len() as u32)
            .filter(|s| !self.partitions[*s as usize].pending.is_empty())
            .collect();
        out.u64(waiting.len() as u64);
        for slot in waiting {
            out.u64(cold.key_group(slot) as u64)
                .bytes(self.keys.key(slot));
        }
    }

    /// Reads back from the store the partitions with rows waiting (key group, key) that
    /// are not in memory.
    pub(super) fn load_waiting(&mut self, waiting: Vec<(u16, Vec<u8>)>) -> Result<()> {
        for (key_group, key) in waiting {
            if self.keys.find(&key).is_none() {
                cold_slots::load(self, &key, key_group, None)?;
            }
        }
        Ok(())
    }
}

/// Reads what [`OverAggregate::write_waiting`] wrote: the partitions `scope` owns.
pub(super) fn read_waiting(
    input: &mut StateReader<'_>,
    scope: &KeyScope,
) -> Result<Vec<(u16, Vec<u8>)>> {
    let mut waiting = Vec::new();
    for _ in 0..input.count(2)? {
        let key_group = input.u64()?;
        let key = input.bytes()?;
        if usize::try_from(key_group).is_ok_and(|g| scope.owns(g)) {
            waiting.push((key_group as u16, key.to_vec()));
        }
    }
    Ok(waiting)
}

impl SlotState for OverAggregate {
    const WHAT: &'static str = "an OVER aggregate";

    fn cold(&self) -> Option<&ColdSlots> {
        self.cold.as_ref()
    }

    fn cold_mut(&mut self) -> Option<&mut ColdSlots> {
        self.cold.as_mut()
    }

    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>) {
        (self.keys.key(slot), self.cold.as_mut())
    }

    fn live_slots(&self) -> Vec<u32> {
        (0..self.keys.len() as u32)
            .filter(|s| self.partitions[*s as usize].used)
            .collect()
    }

    /// Partitions without rows waiting for the watermark.
    fn evictable_slots(&self) -> Vec<u32> {
        (0..self.keys.len() as u32)
            .filter(|s| {
                let partition = &self.partitions[*s as usize];
                partition.used && partition.pending.is_empty()
            })
            .collect()
    }

    fn slots_in_use(&self) -> usize {
        self.keys.in_use()
    }

    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
        cold_slots::encode_twice_held(|out| self.write_partition(slot, out))
    }

    fn place(
        &mut self,
        key: &[u8],
        _key_group: u16,
        value: &[u8],
        _now: Option<i64>,
    ) -> Result<Option<u32>> {
        let mut input = StateReader::new(value, "an OVER aggregate's stored partition");
        input.compact();
        let slot = self.new_slot(key);
        self.read_partition(slot, &mut input)?;
        Ok(Some(slot))
    }

    fn free_slot(&mut self, slot: u32) {
        self.release(slot);
    }

    fn ttl(&self) -> Option<&StateTtl> {
        None
    }
}
