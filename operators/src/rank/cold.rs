//! The partitions of a Top-N that need not stay in memory (the LSM backend). An LSM store
//! holds every partition written out; the operator's slots keep the recently used ones, a
//! cache of the store. A partition is written out when it leaves memory (if it changed
//! since it was last written) and, if it changed, at every checkpoint, whose snapshot is
//! then the store's runs; a partition is read back when a row of its key arrives.
//!
//! Over windows, a partition's key in the store starts with its window's end
//! ([`windowed_key`]); a window whose partitions were written out is *spilled*, and when it
//! fires its stored partitions are read back, a batch at a time.

use eddy_common::chunk::Chunk;
use eddy_common::event::Timestamp;
use eddy_common::state::{StateReader, StateWriter};
use eddy_common::{EddyError, Result};
use hashbrown::HashSet;

use super::{Emission, TopN, windowed_key};
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::spilled_windows::{SpilledWindows, sortable, unsortable};
use crate::state_context::StateContext;
use crate::ttl::StateTtl;

/// Partitions read back from the store at once when their window fires.
const FIRE_BATCH: usize = 4096;

impl TopN {
    /// Keeps partitions where `context` says: with the LSM backend, those beyond its memory
    /// in an LSM store (a Top-N without partition keys keeps its one in memory).
    pub fn with_state(mut self, context: &StateContext) -> Result<Self> {
        self.restored_files = context.restored.clone();
        if context.is_lsm() && self.keys.is_keyed() {
            self.cold = Some(ColdSlots::new(context, self.keys.len())?);
        }
        Ok(self)
    }

    /// Emits a batch of the partitions of `key_group` the store holds for the window
    /// ending at `end` after `after`, deleting them from the store; returns how many.
    pub(super) fn fire_stored(
        &mut self,
        end: Timestamp,
        (key_group, after): (u16, Option<Vec<u8>>),
        emission: &mut Emission,
        out: &mut Vec<Chunk>,
    ) -> Result<usize> {
        let window = sortable(end);
        let (slots, last) =
            cold_slots::load_batch(self, key_group, &window, after.as_deref(), FIRE_BATCH)?;
        // The partitions are fired here, not by their timer.
        self.timers.remove(&end);
        self.emit_window(&slots, emission)?;
        out.extend(self.chunk_of(std::mem::take(emission))?);
        self.spilled.read_back(&window, key_group, last);
        Ok(slots.len())
    }

    /// The windows the store holds partitions of once every partition is written: those
    /// spilled and those of the partitions in memory.
    pub(super) fn stored_windows(&self) -> SpilledWindows {
        let mut stored = self.spilled.clone();
        if let (Some(cold), Some(_)) = (&self.cold, self.spec.window_end) {
            for slots in self.timers.values() {
                for slot in slots {
                    let window = sortable(self.window_ends[*slot as usize]);
                    stored.mark(&window, cold.key_group(*slot));
                }
            }
        }
        stored
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

    /// Over windows, the key in the store starts with the window's end.
    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>) {
        if self.spec.window_end.is_none() {
            return (self.keys.key(slot), self.cold.as_mut());
        }
        let window_end = self.window_ends[slot as usize];
        windowed_key(&mut self.store_key, window_end, self.keys.key(slot));
        (&self.store_key, self.cold.as_mut())
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
        let (key, window_end) = match self.spec.window_end {
            None => (key, 0),
            Some(_) => {
                let window_end = unsortable(key).ok_or_else(|| {
                    EddyError::Snapshot(format!(
                        "a state file of {} holds a key of {} bytes, too short for a window",
                        Self::WHAT,
                        key.len()
                    ))
                })?;
                (&key[8..], window_end)
            }
        };
        let slot = self.new_slot(key, key_group, window_end);
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

    /// Over windows, the slots leave their windows' timers, and the windows are spilled.
    fn free_slots(&mut self, slots: &[u32]) {
        if let (Some(cold), Some(_)) = (&self.cold, self.spec.window_end) {
            let gone: HashSet<u32> = slots.iter().copied().collect();
            let mut windows = Vec::new();
            for slot in slots {
                let window_end = self.window_ends[*slot as usize];
                self.spilled
                    .mark(&sortable(window_end), cold.key_group(*slot));
                windows.push(window_end);
            }
            windows.sort_unstable();
            windows.dedup();
            for window_end in windows {
                if let Some(timer) = self.timers.get_mut(&window_end) {
                    timer.retain(|slot| !gone.contains(slot));
                    if timer.is_empty() {
                        self.timers.remove(&window_end);
                    }
                }
            }
        }
        for slot in slots {
            self.free_slot(*slot);
        }
    }

    fn ttl(&self) -> Option<&StateTtl> {
        self.ttl.as_ref()
    }
}
