//! Session windows: each key's open sessions, and (with the LSM backend) the keys whose
//! sessions left memory.
//!
//! A session's bounds move as rows bridge gaps, so a session cannot be a store key as an
//! aligned window is. The store holds a key's open sessions as one value under the key
//! (table 0, through [`ColdSlots`]), and a timer per stored session at its end
//! ([`StoredTimers`], table [`TIMERS`]), written whenever the key's value is. When the
//! watermark passes a stored timer, the key is read back into memory, where its due
//! sessions fire as any other. A timer left behind by a key that changed since it was
//! written only reads the key back: its sessions fire by their own timers.

use eddy_common::Result;
use eddy_common::event::Timestamp;
use eddy_common::state::StateReader;

use super::WindowAggregate;
use crate::aggregate::Slots;
use crate::cold_slots::{self, ColdSlots, SlotState};
use crate::group_keys::GroupKeys;
use crate::partition::KeyScope;
#[cfg(doc)]
use crate::stored_timers::StoredTimers;
use crate::ttl::StateTtl;

/// The table of the store that holds a timer per stored session, under its end and key.
pub(super) const TIMERS: u8 = 1;

/// Each key's open sessions: a slot per key (the unit the LSM backend moves in and out of
/// memory), with the slots of its sessions.
#[derive(Debug, Default)]
pub(super) struct SessionKeys {
    index: GroupKeys,
    slots: Slots,
    /// Per key slot: its open sessions' slots.
    sessions: Vec<Vec<u32>>,
    /// Per session slot: its key's slot.
    owner: Vec<u32>,
}

impl SessionKeys {
    /// The slot of `key`, if it has open sessions in memory.
    pub(super) fn find(&self, key: &[u8]) -> Option<u32> {
        self.index.find(self.index.hash(key), key)
    }

    /// A slot for `key`, which has none; `true` when the key slots grew.
    pub(super) fn insert(&mut self, key: &[u8]) -> (u32, bool) {
        let (slot, grown) = self.slots.acquire();
        if grown {
            self.sessions.resize_with(self.slots.len, Vec::new);
        }
        self.index.insert(self.index.hash(key), key, slot);
        (slot, grown)
    }

    /// Room for `sessions` session slots.
    pub(super) fn grow_sessions(&mut self, sessions: usize) {
        self.owner.resize(sessions, 0);
    }

    /// `session` is a session of the key in `key_slot`.
    pub(super) fn add(&mut self, key_slot: u32, session: u32) {
        self.sessions[key_slot as usize].push(session);
        self.owner[session as usize] = key_slot;
    }

    /// Takes `session` from its key's; returns the key's slot and whether that was its
    /// last session.
    pub(super) fn remove(&mut self, session: u32) -> (u32, bool) {
        let key_slot = self.owner[session as usize];
        let list = &mut self.sessions[key_slot as usize];
        list.retain(|s| *s != session);
        (key_slot, list.is_empty())
    }

    /// Frees `key_slot`, whose sessions are gone.
    pub(super) fn release(&mut self, key_slot: u32) {
        self.sessions[key_slot as usize].clear();
        self.index.remove(key_slot);
        self.slots.release(key_slot);
    }

    /// The open sessions of the key in `key_slot`.
    pub(super) fn sessions(&self, key_slot: u32) -> &[u32] {
        &self.sessions[key_slot as usize]
    }

    /// The key in `key_slot`.
    pub(super) fn key(&self, key_slot: u32) -> &[u8] {
        self.index.key(key_slot)
    }

    /// The slot of `session`'s key.
    pub(super) fn owner(&self, session: u32) -> u32 {
        self.owner[session as usize]
    }

    /// The key of `session`.
    pub(super) fn key_of(&self, session: u32) -> &[u8] {
        self.key(self.owner(session))
    }

    /// Key slots handed out so far (in use or free).
    pub(super) fn len(&self) -> usize {
        self.slots.len
    }

    /// Keys with open sessions in memory.
    pub(super) fn in_use(&self) -> usize {
        self.slots.in_use()
    }

    /// The slots of the keys with open sessions in memory.
    pub(super) fn live(&self) -> Vec<u32> {
        (0..self.sessions.len() as u32)
            .filter(|k| !self.sessions[*k as usize].is_empty())
            .collect()
    }
}

/// A window aggregate of session windows, as the LSM backend's generic steps see it: a
/// slot is a key with all its open sessions.
pub(super) struct SessionStore<'a>(pub(super) &'a mut WindowAggregate);

impl SlotState for SessionStore<'_> {
    const WHAT: &'static str = "a session window aggregate";

    fn cold(&self) -> Option<&ColdSlots> {
        self.0.cold.as_ref()
    }

    fn cold_mut(&mut self) -> Option<&mut ColdSlots> {
        self.0.cold.as_mut()
    }

    fn slot_key_and_store(&mut self, slot: u32) -> (&[u8], Option<&mut ColdSlots>) {
        (self.0.sessions.key(slot), self.0.cold.as_mut())
    }

    fn live_slots(&self) -> Vec<u32> {
        self.0.sessions.live()
    }

    fn slots_in_use(&self) -> usize {
        self.0.sessions.in_use()
    }

    /// The key's sessions: how many, then each one's bounds and accumulators. In memory a
    /// key takes about twice that.
    fn encode_slot(&self, slot: u32) -> (Vec<u8>, usize) {
        let op = &self.0;
        let sessions = op.sessions.sessions(slot);
        cold_slots::encode_twice_held(|out| {
            out.u64(sessions.len() as u64);
            for session in sessions {
                let (start, end) = op.bounds[*session as usize];
                out.i64(start).i64(end);
                op.accumulators.save(*session, out);
            }
        })
    }

    fn place(
        &mut self,
        key: &[u8],
        _key_group: u16,
        value: &[u8],
        _now: Option<i64>,
    ) -> Result<Option<u32>> {
        let op = &mut *self.0;
        let (key_slot, grown) = op.sessions.insert(key);
        if let (true, Some(cold)) = (grown, &mut op.cold) {
            cold.resize(op.sessions.len());
        }
        let mut input = StateReader::new(value, "a key's stored sessions");
        input.compact();
        for _ in 0..input.count(16)? {
            let (start, end) = (input.i64()?, input.i64()?);
            let session = op.open_slot(start, end);
            op.sessions.add(key_slot, session);
            op.accumulators.load(session, &mut input)?;
        }
        Ok(Some(key_slot))
    }

    /// Frees the key's slot and its sessions' (slots, timers, accumulators).
    fn free_slot(&mut self, slot: u32) {
        let op = &mut *self.0;
        for session in op.sessions.sessions(slot).to_vec() {
            let (start, end) = op.bounds[session as usize];
            op.remove_timer(start, end, session);
            op.accumulators.reset(session);
            op.slots.release(session);
        }
        op.sessions.release(slot);
    }

    /// Writes a timer for each of the key's sessions, at its end.
    fn written(&mut self, slot: u32) -> Result<()> {
        let op = &mut *self.0;
        let Some(cold) = op.cold.as_mut() else {
            return Ok(());
        };
        let key_group = cold.key_group(slot);
        let key = op.sessions.key(slot);
        for session in op.sessions.sessions(slot) {
            let end = op.bounds[*session as usize].1;
            op.stored_timers
                .write(&mut cold.store, key_group, end, key)?;
        }
        Ok(())
    }

    fn ttl(&self) -> Option<&StateTtl> {
        None
    }
}

impl WindowAggregate {
    /// The slot of `key` (of `key_group`) read back from the store into memory, if the
    /// store holds sessions of it.
    pub(super) fn load_sessions(&mut self, key: &[u8], key_group: u16) -> Result<Option<u32>> {
        if self.cold.is_none() || !self.stored_timers.any {
            return Ok(None);
        }
        cold_slots::load(&mut SessionStore(self), key, key_group, None)
    }

    /// Reads back into memory the keys with a stored session that `watermark` closes (a
    /// part's worth of timers at most: [`Operator::has_due_output`](crate::Operator) says
    /// when more are due), where their timers fire them.
    pub(super) fn load_due_sessions(&mut self, watermark: Timestamp) -> Result<()> {
        let Some(cold) = &mut self.cold else {
            return Ok(());
        };
        // A session ending at `end` closes once the watermark reaches `end - 1`.
        let bound = watermark.saturating_add(1);
        let part = self.spilled.part;
        for (key_group, key) in self.stored_timers.take_due(&mut cold.store, bound, part)? {
            if self.sessions.find(&key).is_none() {
                cold_slots::load(&mut SessionStore(self), &key, key_group, None)?;
            }
        }
        Ok(())
    }

    /// After a restore into a store: where its timers are, in the key groups of `scope`.
    pub(super) fn find_stored_timers(&mut self, scope: &KeyScope) -> Result<()> {
        match &self.cold {
            Some(cold) => self.stored_timers.find(&cold.store, scope),
            None => Ok(()),
        }
    }
}
