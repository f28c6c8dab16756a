//! The keys of a temporal join's versioned table that need not stay in memory (the LSM
//! backend). An LSM store holds every key written out with its versions, as one value; the
//! join's slots keep the recently used keys, a cache of the store. Past the memory budget
//! the least recently used keys are written out (if they changed) and dropped from memory;
//! a key is read back when a version of it arrives or a left row of it is joined. Pruning
//! reaches the versions of keys in memory only: a stored key keeps its old versions until
//! it is read back (none of them is ever joined: left rows join the latest version at or
//! before their time, and come after the watermark). A snapshot writes every changed key
//! and is the store's runs, after the left rows waiting, which stay in memory.

use eddy_common::Result;
use eddy_common::state::StateReader;

use super::TemporalJoin;
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::ttl::StateTtl;

impl SlotState for TemporalJoin {
    const WHAT: &'static str = "a temporal join";

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
        TemporalJoin::live_slots(self)
    }

    fn slots_in_use(&self) -> usize {
        self.keys.in_use()
    }

    /// The key's versions; in memory a key takes about twice that.
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
        cold_slots::encode_twice_held(|out| self.write_versions(slot, out))
    }

    fn place(
        &mut self,
        key: &[u8],
        _key_group: u16,
        value: &[u8],
        _now: Option<i64>,
    ) -> Result<Option<u32>> {
        let mut input = StateReader::new(value, "a temporal join's stored key");
        input.compact();
        let list = self.read_versions(&mut input, true)?;
        Ok(Some(self.place_versions(key, list)))
    }

    fn free_slot(&mut self, slot: u32) {
        self.release(slot);
    }

    fn ttl(&self) -> Option<&StateTtl> {
        None
    }
}
