//! The groups of a `GROUP BY` that need not stay in memory (the LSM backend). An LSM store
//! holds every group written out; the operator's slots keep the recently used ones, a
//! cache of the store. A group is written out when it leaves memory (if it changed since
//! it was last written) and, if it changed, at every checkpoint, whose snapshot is then
//! the store's runs; a group is read back when a row of its key arrives.

use eddy_common::Result;
use eddy_common::state::{StateReader, StateWriter};

use super::GroupAggregate;
use crate::cold_slots::{ColdSlots, SlotState};
use crate::ttl::StateTtl;

impl SlotState for GroupAggregate {
    const WHAT: &'static str = "a GROUP BY";

    fn cold(&self) -> Option<&ColdSlots> {
        self.cold.as_ref()
    }

    fn cold_mut(&mut self) -> Option<&mut ColdSlots> {
        self.cold.as_mut()
    }

    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>) {
        (self.group_keys.key(slot), self.cold.as_mut())
    }

    /// The groups in memory that hold rows.
    fn live_slots(&self) -> Vec<u32> {
        (0..self.slots.len as u32)
            .filter(|g| self.row_counts[*g as usize] > 0)
            .collect()
    }

    fn slots_in_use(&self) -> usize {
        self.slots.in_use()
    }

    /// Whether the group carries a write time, its row count, the write time, its
    /// accumulators; in memory (slots, hash table and accumulators) it takes about twice
    /// that.
    fn encode_slot(&self, group: u32) -> (Vec<u8>, usize) {
        let mut out = StateWriter::with_capacity(64);
        out.compact();
        let written = self.ttl.as_ref().and_then(|ttl| ttl.written(group));
        out.u64(written.is_some() as u64)
            .i64(self.row_counts[group as usize]);
        if let Some(written) = written {
            out.i64(written);
        }
        self.accumulators.save(group, &mut out);
        let value = out.finish();
        let held = 2 * value.len();
        (value, held)
    }

    fn place(
        &mut self,
        key: &[u8],
        _key_group: u16,
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
        if StateTtl::expired_by(self.ttl.as_ref(), written, now) {
            return Ok(None);
        }
        let group = self.insert_group(self.group_keys.hash(key), key);
        self.row_counts[group as usize] = rows;
        self.accumulators.load(group, &mut input)?;
        if let Some(ttl) = &mut self.ttl {
            let now = now.unwrap_or_else(|| ttl.now());
            ttl.write(group, written.unwrap_or(now));
        }
        Ok(Some(group))
    }

    fn free_slot(&mut self, group: u32) {
        GroupAggregate::free_slot(self, group);
    }

    fn ttl(&self) -> Option<&StateTtl> {
        self.ttl.as_ref()
    }
}
