//! The partitions of a Top-N that need not stay in memory (the LSM backend). An LSM store
//! holds every partition written out; the operator's slots keep the recently used ones, a
//! cache of the store. A partition is written out when it leaves memory (if it changed
//! since it was last written) and, if it changed, at every checkpoint, whose snapshot is
//! then the store's runs; a partition is read back when a row of its key arrives.
//!
//! Top-N over windows keeps its partitions in memory: they live until their window fires.

use eddy_common::Result;
use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};

use super::TopN;
use crate::cold_slots::{ColdSlots, SlotState};
use crate::state_context::StateContext;
use crate::ttl::StateTtl;

impl TopN {
    /// Keeps partitions where `context` says: with the LSM backend, those beyond its memory
    /// in an LSM store (a Top-N without partition keys, or over windows, keeps them in
    /// memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.spec.window_end.is_none() && self.keys.is_keyed() {
            self.cold = Some(ColdSlots::new(context, self.keys.len())?);
        }
        Ok(self)
    }
}

impl SlotState for TopN {
    const WHAT: &'static str = "a Top-N";

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
            .filter(|s| self.partitions[*s as usize].len() > 0)
            .collect()
    }

    fn slots_in_use(&self) -> usize {
        self.keys.in_use()
    }

    /// Whether the partition carries a write time, the write time, its rows in sort order
    /// (each its sort key and row).
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
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
        (out.finish(), partition.held_bytes())
    }

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
        if StateTtl::expired_by(self.ttl.as_ref(), written, now) {
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
        Ok(Some(slot))
    }

    fn free_slot(&mut self, slot: u32) {
        if let Some(ttl) = &mut self.ttl {
            ttl.forget(slot);
        }
        self.keys.release(slot);
        self.partitions[slot as usize] = super::Partition::default();
    }

    fn ttl(&self) -> Option<&StateTtl> {
        self.ttl.as_ref()
    }
}
