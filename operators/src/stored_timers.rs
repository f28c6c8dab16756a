//! Timers kept in an operator's LSM store, for keys whose state left memory but must come
//! back by event time (session windows that close, interval-join rows that expire).
//!
//! A timer is a store key of one table, key group and time: the time's [`sortable`] bytes,
//! then what the operator says fires (its key), with an empty value. Per key group the
//! operator remembers in memory the earliest time the store may hold, so that a watermark
//! reads the store only where a timer is due. Fired timers are deleted; a key group's next
//! scan starts after the last one read, not over those deletions again.

use std::collections::BTreeMap;

use eddy_common::event::Timestamp;
use eddy_common::{EddyError, Result};
use eddy_state::{Store, key};

use crate::partition::KeyScope;
use crate::spilled_windows::{sortable, unsortable};
use crate::stored_runs::KeyRange;

/// Where an operator's store holds timers: per key group, the earliest time it may hold.
#[derive(Debug)]
pub(crate) struct StoredTimers {
    /// The store's table of timers.
    table: u8,
    /// The operator, for errors.
    what: &'static str,
    earliest: BTreeMap<u16, Timestamp>,
    /// Per key group: the last timer read and deleted, where the next scan goes on. A
    /// timer written later sorts after it: the operator writes a timer only at a time
    /// later than every bound timers were read to.
    read_to: BTreeMap<u16, Vec<u8>>,
    /// Whether the store may hold timers at all (if not, a key absent from memory has no
    /// state in the store either).
    pub(crate) any: bool,
    state_key: Vec<u8>,
}

impl StoredTimers {
    /// No timers yet, in table `table` of the store of `what` (an operator, for errors).
    pub(crate) fn new(table: u8, what: &'static str) -> Self {
        StoredTimers {
            table,
            what,
            earliest: BTreeMap::new(),
            read_to: BTreeMap::new(),
            any: false,
            state_key: Vec::new(),
        }
    }

    /// Writes to `store` a timer at `time` for `fires` (the operator's bytes: a key, with
    /// whatever else it needs back), in key group `key_group`.
    pub(crate) fn write(
        &mut self,
        store: &mut Store,
        key_group: u16,
        time: Timestamp,
        fires: &[u8],
    ) -> Result<()> {
        let mut timer = Vec::with_capacity(8 + fires.len());
        timer.extend_from_slice(&sortable(time));
        timer.extend_from_slice(fires);
        key::encode(key_group, self.table, &timer, &mut self.state_key);
        store.put(&self.state_key, &[])?;
        self.any = true;
        let earliest = self.earliest.entry(key_group).or_insert(time);
        *earliest = (*earliest).min(time);
        Ok(())
    }

    /// A key group with a stored timer at `bound` or before.
    pub(crate) fn due(&self, bound: Timestamp) -> Option<u16> {
        self.earliest
            .iter()
            .find(|(_, time)| **time <= bound)
            .map(|(key_group, _)| *key_group)
    }

    /// Deletes from `store` up to `limit` timers at `bound` or before, and returns what
    /// they fire, with their key groups. Fewer than `limit` means none is due any more.
    pub(crate) fn take_due(
        &mut self,
        store: &mut Store,
        bound: Timestamp,
        limit: usize,
    ) -> Result<Vec<(u16, Vec<u8>)>> {
        let mut fired = Vec::new();
        while fired.len() < limit
            && let Some(key_group) = self.due(bound)
        {
            let batch = limit - fired.len();
            let timers = self.due_timers(store, key_group, bound, batch)?;
            for timer in &timers {
                key::encode(key_group, self.table, timer, &mut self.state_key);
                store.delete(&self.state_key)?;
                fired.push((key_group, timer[8..].to_vec()));
            }
            if let Some(timer) = timers.last() {
                self.read_to.insert(key_group, timer.clone());
            }
            if timers.len() < batch {
                // Where the scan stopped stays: the next one, after timers are written
                // again, starts there, not over the deleted timers before it.
                let next = match bound.checked_add(1) {
                    Some(after) => self.first_from(store, key_group, after)?,
                    None => None,
                };
                match next {
                    Some(time) => self.earliest.insert(key_group, time),
                    None => self.earliest.remove(&key_group),
                };
            }
        }
        Ok(fired)
    }

    /// Up to `limit` timers of `key_group` at `bound` or before, after the last one read.
    fn due_timers(
        &self,
        store: &Store,
        key_group: u16,
        bound: Timestamp,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let range = self.range(key_group);
        let last = self.read_to.get(&key_group).map(Vec::as_slice);
        let timers = match bound.checked_add(1) {
            Some(until) => {
                // The first key after the last one read (or the first of the range).
                let from = last.map_or(Vec::new(), |last| [last, &[0]].concat());
                range.entries_between(store, &from, Some(&sortable(until)), limit)?
            }
            None => range.entries_after(store, last, limit)?,
        };
        timers
            .into_iter()
            .map(|(timer, _)| match timer.len() {
                8.. => Ok(timer),
                len => Err(EddyError::Snapshot(format!(
                    "a state file of {} holds a timer of {len} bytes",
                    self.what
                ))),
            })
            .collect()
    }

    /// The time of the first timer of `key_group` at `from` or after, if any.
    fn first_from(
        &self,
        store: &Store,
        key_group: u16,
        from: Timestamp,
    ) -> Result<Option<Timestamp>> {
        let first = self
            .range(key_group)
            .entries_between(store, &sortable(from), None, 1)?;
        Ok(first.first().and_then(|(timer, _)| unsortable(timer)))
    }

    /// The timers of `key_group` in the store.
    fn range(&self, key_group: u16) -> KeyRange<'static> {
        KeyRange {
            table: self.table,
            key_group,
            prefix: &[],
        }
    }

    /// After a restore into `store`: where its timers are, in the key groups of `scope`.
    pub(crate) fn find(&mut self, store: &Store, scope: &KeyScope) -> Result<()> {
        let mut found = StoredTimers {
            any: true,
            ..StoredTimers::new(self.table, self.what)
        };
        for key_group in scope.key_groups() {
            let key_group = key_group as u16;
            if let Some(time) = self.first_from(store, key_group, Timestamp::MIN)? {
                found.earliest.insert(key_group, time);
            }
        }
        *self = found;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_state::StoreOptions;

    fn store(name: &str) -> Store {
        let dir = crate::lsm_testing::scratch("timers", name);
        Store::create(dir.join("store"), StoreOptions::default()).unwrap()
    }

    #[test]
    fn due_timers_fire_once_in_time_order_per_key_group_and_in_parts() {
        let mut store = store("order");
        let mut timers = StoredTimers::new(1, "a test");
        for (key_group, time, key) in [(3, 50, "c"), (3, 10, "a"), (7, 20, "b"), (3, 90, "d")] {
            timers
                .write(&mut store, key_group, time, key.as_bytes())
                .unwrap();
        }
        assert_eq!(timers.due(9), None);
        let fired = timers.take_due(&mut store, 60, 2).unwrap();
        assert_eq!(fired, [(3, b"a".to_vec()), (3, b"c".to_vec())]);
        assert!(timers.due(60).is_some(), "a full part: more may be due");
        let fired = timers.take_due(&mut store, 60, 10).unwrap();
        assert_eq!(fired, [(7, b"b".to_vec())]);
        assert_eq!(timers.due(60), None);
        assert!(timers.take_due(&mut store, 60, 10).unwrap().is_empty());
        // A timer written after the scans is found.
        timers.write(&mut store, 3, 70, b"e").unwrap();
        let fired = timers.take_due(&mut store, 100, 10).unwrap();
        assert_eq!(fired, [(3, b"e".to_vec()), (3, b"d".to_vec())]);
        assert_eq!(timers.due(i64::MAX), None, "every timer fired");
        // A key group whose timers all fired takes new ones, later than those.
        timers.write(&mut store, 3, 120, b"f").unwrap();
        assert_eq!(timers.due(119), None);
        let fired = timers.take_due(&mut store, i64::MAX, 10).unwrap();
        assert_eq!(fired, [(3, b"f".to_vec())]);
    }

    #[test]
    fn a_restore_finds_the_earliest_timer_of_each_owned_key_group() {
        let mut store = store("find");
        let mut timers = StoredTimers::new(1, "a test");
        timers.write(&mut store, 2, 40, b"x").unwrap();
        timers.write(&mut store, 2, 30, b"y").unwrap();
        timers.write(&mut store, 100, 10, b"z").unwrap();
        let mut found = StoredTimers::new(1, "a test");
        let first_half = KeyScope {
            subtask: 0,
            parallelism: 2,
            max_parallelism: 128,
        };
        found.find(&store, &first_half).unwrap();
        assert!(found.any);
        assert_eq!(found.due(29), None);
        assert_eq!(found.due(30), Some(2));
        let fired = found.take_due(&mut store, i64::MAX, 10).unwrap();
        assert_eq!(
            fired,
            [(2, b"y".to_vec()), (2, b"x".to_vec())],
            "not key group 100"
        );
    }
}
