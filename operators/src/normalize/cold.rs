//! The kept rows of a changelog normalization that need not stay in memory (the LSM
//! backend): an LSM store holds every key's row written out; the operator's slots keep the
//! recently used ones, a cache of the store, written out when they leave memory (if
//! changed) and at every checkpoint, whose snapshot is then the store's runs.

use eddy_common::Result;
use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};

use super::ChangelogNormalize;
use crate::cold_slots::{ColdSlots, SlotState};
use crate::state_context::StateContext;
use crate::ttl::StateTtl;

impl ChangelogNormalize {
    /// Keeps rows where `context` says: with the LSM backend, those beyond its memory in an
    /// LSM store.
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.keys.is_keyed() {
            self.cold = Some(ColdSlots::new(context, self.keys.len())?);
        }
        Ok(self)
    }
}

impl SlotState for ChangelogNormalize {
    const WHAT: &'static str = "a changelog normalization";

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
            .filter(|s| !self.rows[*s as usize].is_empty())
            .collect()
    }

    fn slots_in_use(&self) -> usize {
        self.keys.in_use()
    }

    /// The time the row was written (`Timestamp::MIN` without a TTL), the row.
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
        let row = &self.rows[slot as usize];
        let written = self.ttl.as_ref().and_then(|ttl| ttl.written(slot));
        let mut out = StateWriter::with_capacity(row.len() + 16);
        out.compact();
        out.i64(written.unwrap_or(Timestamp::MIN)).bytes(row);
        (out.finish(), row.capacity() + 32)
    }

    fn place(
        &mut self,
        key: &[u8],
        key_group: u16,
        value: &[u8],
        now: Option<Timestamp>,
    ) -> Result<Option<u32>> {
        let mut input = StateReader::new(value, "a changelog normalization's stored row");
        input.compact();
        let written = Some(input.i64()?).filter(|w| *w != Timestamp::MIN);
        if StateTtl::expired_by(self.ttl.as_ref(), written, now) {
            return Ok(None);
        }
        let row = input.bytes()?;
        let slot = self.slot(key, key_group);
        self.rows[slot as usize] = row.to_vec();
        if let Some(ttl) = &mut self.ttl {
            let now = now.unwrap_or_else(|| ttl.now());
            ttl.write(slot, written.unwrap_or(now));
        }
        Ok(Some(slot))
    }

    fn free_slot(&mut self, slot: u32) {
        self.rows[slot as usize] = Vec::new();
        self.keys.release(slot);
        if let Some(ttl) = &mut self.ttl {
            ttl.forget(slot);
        }
    }

    fn ttl(&self) -> Option<&StateTtl> {
        self.ttl.as_ref()
    }
}
