//! Idle state retention (`table.exec.state.ttl`), as Flink's state TTL for SQL: a key's
//! state not written for the TTL, by the wall clock, is gone: never read again (a row of the
//! key starts afresh) and dropped without a scan, from a queue of keys by the time they were
//! written. The time each key was written is kept in snapshots, so a restore keeps the
//! clock running rather than starting it again.

use std::collections::BTreeMap;

use eddy_common::event::Timestamp;

/// Slots (of some keyed state) and the wall-clock time each was last written.
#[derive(Debug)]
pub struct StateTtl {
    ttl: i64,
    /// When each slot was last written; [`UNUSED`] for a slot without state.
    written: Vec<Timestamp>,
    /// Whether a slot is in `queue`.
    queued: Vec<bool>,
    /// Slots by the bucket of time they were written in, each slot at most once (a slot
    /// written again after it was queued goes back in the queue when its bucket comes).
    queue: BTreeMap<i64, Vec<u32>>,
    /// The width of a bucket in milliseconds: a slot is dropped at most this much after it
    /// expired (until then it only cannot be read).
    bucket: i64,
    /// The wall clock (replaced in tests).
    clock: fn() -> Timestamp,
}

/// The write time of a slot without state.
const UNUSED: Timestamp = Timestamp::MAX;

impl StateTtl {
    /// State that lives `ttl_ms` milliseconds after its last write.
    pub fn new(ttl_ms: i64) -> Self {
        StateTtl {
            ttl: ttl_ms.max(1),
            written: Vec::new(),
            queued: Vec::new(),
            queue: BTreeMap::new(),
            bucket: (ttl_ms / 16).clamp(1, 1000),
            clock: crate::wall_clock,
        }
    }

    /// The TTL in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        self.ttl
    }

    /// The wall-clock time now.
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// Replaces the wall clock.
    #[cfg(test)]
    pub(crate) fn with_clock(mut self, clock: fn() -> Timestamp) -> Self {
        self.clock = clock;
        self
    }

    /// `slot` was written at `time` (now, or when a restored snapshot says).
    pub fn write(&mut self, slot: u32, time: Timestamp) {
        let index = slot as usize;
        if self.written.len() <= index {
            self.written.resize(index + 1, UNUSED);
            self.queued.resize(index + 1, false);
        }
        self.written[index] = time;
        if !self.queued[index] {
            self.queued[index] = true;
            self.queue
                .entry(time.div_euclid(self.bucket))
                .or_default()
                .push(slot);
        }
    }

    /// When `slot` was last written, if it holds state.
    pub fn written(&self, slot: u32) -> Option<Timestamp> {
        self.written
            .get(slot as usize)
            .copied()
            .filter(|t| *t != UNUSED)
    }

    /// Whether `slot`'s state has outlived the TTL at `now` (it must not be read).
    pub fn is_expired(&self, slot: u32, now: Timestamp) -> bool {
        self.written(slot).is_some_and(|t| self.has_passed(t, now))
    }

    /// Whether state written at `written` has expired by `now`.
    pub fn has_passed(&self, written: Timestamp, now: Timestamp) -> bool {
        written.saturating_add(self.ttl) <= now
    }

    /// Whether state written at `written` (if known) has expired by `now` (if known),
    /// under `ttl` (if any).
    pub fn expired_by(
        ttl: Option<&StateTtl>,
        written: Option<Timestamp>,
        now: Option<Timestamp>,
    ) -> bool {
        matches!((ttl, written, now), (Some(ttl), Some(written), Some(now)) if ttl.has_passed(written, now))
    }

    /// `slot` holds no state any more.
    pub fn forget(&mut self, slot: u32) {
        if let Some(written) = self.written.get_mut(slot as usize) {
            *written = UNUSED;
        }
    }

    /// The slots whose state expired by `now`, forgotten here: the caller drops their
    /// state. Only the queue's buckets that are wholly past are looked at.
    pub fn expired(&mut self, now: Timestamp) -> Vec<u32> {
        let mut expired = Vec::new();
        let mut requeue = Vec::new();
        while let Some(entry) = self.queue.first_entry() {
            let bucket_end = (*entry.key() + 1) * self.bucket;
            if bucket_end.saturating_add(self.ttl) > now {
                break;
            }
            for slot in entry.remove() {
                let index = slot as usize;
                self.queued[index] = false;
                match self.written[index] {
                    UNUSED => {}
                    t if t.saturating_add(self.ttl) <= now => {
                        self.written[index] = UNUSED;
                        expired.push(slot);
                    }
                    t => requeue.push((slot, t)),
                }
            }
        }
        for (slot, time) in requeue {
            self.write(slot, time);
        }
        expired
    }
}

/// A wall clock the tests of this thread set.
#[cfg(test)]
pub(crate) mod test_clock {
    use std::cell::Cell;

    use eddy_common::event::Timestamp;

    thread_local! {
        static NOW: Cell<Timestamp> = const { Cell::new(0) };
    }

    /// The time set last.
    pub(crate) fn now() -> Timestamp {
        NOW.with(|now| now.get())
    }

    /// Sets the time.
    pub(crate) fn set(now: Timestamp) {
        NOW.with(|cell| cell.set(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_expire_a_ttl_after_their_last_write_and_only_once() {
        let mut ttl = StateTtl::new(1000);
        ttl.write(0, 0);
        ttl.write(1, 100);
        ttl.write(2, 100);
        ttl.forget(2);
        // Written again: its first queue entry finds it alive and queues it again.
        ttl.write(1, 900);
        assert!(ttl.expired(999).is_empty());
        assert!(ttl.is_expired(0, 1000) && !ttl.is_expired(1, 1000));
        assert_eq!(ttl.expired(1200), [0]);
        assert!(ttl.expired(1800).is_empty());
        assert!(!ttl.is_expired(0, 5000), "an expired slot is forgotten");
        assert_eq!(ttl.expired(2000), [1]);
        assert!(ttl.expired(10_000).is_empty());
        assert_eq!(ttl.queue.len(), 0);
    }
}
