//! The keys of aligned windows that need not stay in memory (the LSM backend). An LSM
//! store holds every (window, key) written out, under its window's end and start first
//! ([`aligned_id`]), so that a window's keys of one key group are one range of the store.
//! The operator's slots keep the recently used ones. A slot is written out when it leaves
//! memory (its window is then *spilled*) and at every checkpoint, whose snapshot is then
//! the store's runs with the spilled windows; a key is read back when a row of it arrives
//! for a spilled window, and a spilled window's keys are read back, a batch at a time,
//! when it fires.

use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::state::{OperatorState, StateReader};
use eddy_common::{EddyError, Result};
use hashbrown::HashSet;

use super::{FIRE_BATCH, SessionStore, WINDOW_BOUNDS, WindowAggregate};
use crate::aggregate::snapshot_writer;
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::spilled_windows::{SpilledWindows, window_of, window_prefix};
use crate::ttl::StateTtl;

impl SlotState for WindowAggregate {
    const WHAT: &'static str = "a window aggregate";

    fn cold(&self) -> Option<&ColdSlots> {
        self.cold.as_ref()
    }

    fn cold_mut(&mut self) -> Option<&mut ColdSlots> {
        self.cold.as_mut()
    }

    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>) {
        (self.index.key(slot), self.cold.as_mut())
    }

    /// The slots of open windows.
    fn live_slots(&self) -> Vec<u32> {
        self.timers.values().flatten().copied().collect()
    }

    fn slots_in_use(&self) -> usize {
        self.slots.in_use()
    }

    /// The accumulators; in memory (slot, index entry, timer, accumulators) a slot takes
    /// about twice that.
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
        cold_slots::encode_twice_held(|out| self.accumulators.save(slot, out))
    }

    /// `id` is the slot's identity: window and key ([`aligned_id`]).
    fn place(
        &mut self,
        id: &[u8],
        _key_group: u16,
        value: &[u8],
        _now: Option<i64>,
    ) -> Result<Option<u32>> {
        let (end, start) = window_of(id).ok_or_else(|| {
            EddyError::Snapshot(format!(
                "a state file of {} holds a key of {} bytes, too short for a window",
                Self::WHAT,
                id.len()
            ))
        })?;
        let mut input = StateReader::new(value, "a window aggregate's stored window");
        input.compact();
        let hash = self.index.hash(id);
        let slot = self.open_slot(start, end);
        self.index.insert(hash, id, slot);
        self.accumulators.load(slot, &mut input)?;
        Ok(Some(slot))
    }

    fn free_slot(&mut self, slot: u32) {
        self.free_slots(&[slot]);
    }

    /// Frees the slots, and marks their windows as spilled (in their key groups).
    fn free_slots(&mut self, slots: &[u32]) {
        let gone: HashSet<u32> = slots.iter().copied().collect();
        for timer in self.timers.values_mut() {
            timer.retain(|slot| !gone.contains(slot));
        }
        self.timers.retain(|_, timer| !timer.is_empty());
        for &slot in slots {
            if let Some(cold) = &self.cold {
                let window = &self.index.key(slot)[..WINDOW_BOUNDS];
                self.spilled.mark(window, cold.key_group(slot));
            }
            WindowAggregate::free_slot(self, slot);
        }
    }

    fn ttl(&self) -> Option<&StateTtl> {
        None
    }
}

impl WindowAggregate {
    /// Emits a batch of the keys of `key_group` the store holds for `window` (start, end)
    /// after `after`, deleting them from the store; returns how many.
    pub(super) fn fire_stored(
        &mut self,
        (start, end): (Timestamp, Timestamp),
        key_group: u16,
        after: Option<Vec<u8>>,
        out: &mut Vec<Chunk>,
    ) -> Result<usize> {
        let window = window_prefix((end, start));
        let (slots, last) =
            cold_slots::load_batch(self, key_group, &window, after.as_deref(), FIRE_BATCH)?;
        // The slots are fired here, not by their timer.
        self.timers.remove(&(end, start));
        let count = slots.len();
        let mut fired = slots.into_iter().map(|slot| (start, end, slot)).collect();
        self.emit(&mut fired, out)?;
        self.spilled.read_back(&window, key_group, last);
        Ok(count)
    }

    /// A snapshot of the store's runs, after the watermark and the windows the store holds
    /// keys of (none for sessions: their timers are in the store), once every changed slot
    /// is written.
    pub(super) fn snapshot_runs(&mut self) -> Result<OperatorState> {
        if self.session_gap.is_some() {
            let mut out = snapshot_writer(64);
            out.i64(self.watermark);
            SpilledWindows::default().write(&mut out);
            return cold_slots::snapshot(&mut SessionStore(self), out);
        }
        let mut stored = self.spilled.clone();
        if let Some(cold) = &self.cold {
            for slots in self.timers.values() {
                for slot in slots {
                    let window = &self.index.key(*slot)[..WINDOW_BOUNDS];
                    stored.mark(window, cold.key_group(*slot));
                }
            }
        }
        let mut out = snapshot_writer(64 + 32 * stored.len());
        out.i64(self.watermark);
        stored.write(&mut out);
        cold_slots::snapshot(self, out)
    }
}
