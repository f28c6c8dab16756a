//! The state of one input of a join: for every join key, the rows of that input with the
//! key (a multiset: a row inserted twice is held twice). Rows are row-encoded back to back
//! in one arena and chained per key, so holding a row allocates nothing of its own.
//! Each row carries the epoch it was added in and removed rows are remembered, so a
//! snapshot can hold only the rows added and removed since an earlier one.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::row::RowConverter;
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use eddy_common::state::{Removals, StateReader, StateWriter};

use crate::group_keys::{GroupKeys, Slots};

/// The span of event time, in milliseconds, whose rows the expiry index lists together: a
/// row is dropped at most this much later than it could be.
const EXPIRY_BUCKET: i64 = 1000;

/// No entry: the end of a chain.
const NONE: u32 = u32::MAX;

/// One held row: where it is in the arena and the next row of its key.
#[derive(Debug, Clone, Copy)]
struct RowEntry {
    start: usize,
    len: u32,
    next: u32,
}

/// The first and last rows of a key.
#[derive(Debug, Clone, Copy)]
struct Chain {
    head: u32,
    tail: u32,
}

const EMPTY: Chain = Chain {
    head: NONE,
    tail: NONE,
};

/// One input of a join: its key expressions, how its rows are encoded, and the rows it
/// holds by key.
#[derive(Debug)]
pub(super) struct JoinSide {
    /// The join keys, evaluated on this input's rows.
    pub(super) keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Encodes this input's rows.
    pub(super) codec: RowConverter,
    index: GroupKeys,
    slots: Slots,
    /// Each key slot's rows, oldest first.
    chains: Vec<Chain>,
    /// The epoch a row was last added to each key slot in.
    added: Vec<u32>,
    /// Rows removed since the newest completed snapshot, as (key, row).
    removals: Removals,
    entries: Vec<RowEntry>,
    /// The epoch each entry's row was added in (beside `entries`, which it would pad).
    entry_epochs: Vec<u32>,
    free_entries: Vec<u32>,
    arena: Vec<u8>,
    /// Bytes of `arena` that belong to no row any more.
    garbage: usize,
    /// For the preserved side of an outer join: how many rows of the other side each entry
    /// joins, beside `entries` (at 0 its NULL-padded row is out).
    match_counts: Vec<u32>,
    /// With rows that expire (an interval join): each entry's event time, beside `entries`.
    entry_times: Vec<i64>,
    /// The key slots holding rows of each second of event time ([`EXPIRY_BUCKET`]), to
    /// find expired rows without a scan.
    expiry: BTreeMap<i64, Vec<u32>>,
}

impl JoinSide {
    /// An empty side for rows of `schema`, keyed by `keys`.
    pub(super) fn new(keys: Vec<Arc<dyn PhysicalExpr>>, schema: &SchemaRef) -> Result<Self> {
        let codec = crate::row_codec(schema)?;
        Ok(JoinSide {
            keys,
            codec,
            index: GroupKeys::default(),
            slots: Slots::default(),
            chains: Vec::new(),
            added: Vec::new(),
            removals: Removals::default(),
            entries: Vec::new(),
            entry_epochs: Vec::new(),
            free_entries: Vec::new(),
            arena: Vec::new(),
            garbage: 0,
            match_counts: Vec::new(),
            entry_times: Vec::new(),
            expiry: BTreeMap::new(),
        })
    }

    /// The rows held for `key` with their entries, oldest first.
    pub(super) fn matching(&self, key: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
        let slot = self.index.find(self.index.hash(key), key);
        let mut next = slot.map_or(NONE, |s| self.chains[s as usize].head);
        std::iter::from_fn(move || {
            let id = next;
            let entry = *self.entries.get(id as usize)?;
            next = entry.next;
            Some((id, self.row(entry)))
        })
    }

    /// How many rows of the other side entry `id` joins.
    pub(super) fn match_count(&self, id: u32) -> u32 {
        self.match_counts.get(id as usize).copied().unwrap_or(0)
    }

    /// Sets how many rows of the other side entry `id` joins.
    pub(super) fn set_match_count(&mut self, id: u32, count: u32) {
        if self.match_counts.len() <= id as usize {
            self.match_counts.resize(id as usize + 1, 0);
        }
        self.match_counts[id as usize] = count;
    }

    fn row(&self, entry: RowEntry) -> &[u8] {
        &self.arena[entry.start..entry.start + entry.len as usize]
    }

    /// Adds one copy of `row` of event time `time` under `key`, in epoch `epoch`: it
    /// expires with [`JoinSide::expire_through`]. Returns its entry.
    pub(super) fn insert_expiring(&mut self, key: &[u8], row: &[u8], epoch: u32, time: i64) -> u32 {
        let (slot, id) = self.insert(key, row, epoch);
        self.set_time(slot, id, time);
        id
    }

    /// Removes every row of event time `bound` or earlier (remembering the removals, in
    /// epoch `epoch`); the rows that joined nothing go into `unmatched`, and the keys that
    /// lost rows into `expired`, when given.
    pub(super) fn expire_through(
        &mut self,
        bound: i64,
        epoch: u32,
        mut unmatched: Option<&mut Unmatched>,
        mut expired: Option<&mut ExpiredKeys>,
    ) {
        while let Some(entry) = self.expiry.first_entry() {
            if bucket_end(*entry.key()) > bound {
                break;
            }
            for slot in entry.remove() {
                // An index entry may be stale (its slot freed, or reused): only a slot
                // that lost rows is freed, never one already free.
                if !self.remove_expired(slot, bound, epoch, unmatched.as_deref_mut()) {
                    continue;
                }
                if let Some(expired) = expired.as_deref_mut() {
                    match self.chains[slot as usize].head {
                        NONE => expired.emptied.push(self.index.key(slot).to_vec()),
                        _ => expired.changed.push(slot),
                    }
                }
                self.tidy(slot);
            }
        }
    }

    /// The time by which every row of `slot` has expired at a bound of that time or
    /// later: the end of its earliest row's expiry bucket (`None` for an empty slot).
    pub(super) fn earliest_expiry(&self, slot: u32) -> Option<i64> {
        let mut next = self.chains[slot as usize].head;
        let mut earliest = None;
        while next != NONE {
            let time = self.time_of(next);
            earliest = Some(earliest.map_or(time, |e: i64| e.min(time)));
            next = self.entries[next as usize].next;
        }
        earliest.map(expires_by)
    }

    /// Removes the rows of `slot` of event time `bound` or earlier, leaving the slot for
    /// the caller to tidy; whether it removed any.
    fn remove_expired(
        &mut self,
        slot: u32,
        bound: i64,
        epoch: u32,
        mut unmatched: Option<&mut Unmatched>,
    ) -> bool {
        let Some(chain) = self.chains.get(slot as usize).copied() else {
            return false;
        };
        let mut removed = false;
        let (mut previous, mut current) = (NONE, chain.head);
        while current != NONE {
            let entry = self.entries[current as usize];
            // By its bucket, not its time: a row leaves at the same watermark whichever
            // index entry (its own, or a stale one of its slot) finds it.
            if expires_by(self.entry_times[current as usize]) > bound {
                previous = current;
                current = entry.next;
                continue;
            }
            let born = self.entry_epochs[current as usize];
            let row = &self.arena[entry.start..entry.start + entry.len as usize];
            if let Some(unmatched) = unmatched.as_deref_mut()
                && self.match_count(current) == 0
            {
                unmatched.push(row);
            }
            self.removals.push(epoch, born, self.index.key(slot), row);
            self.unlink(slot, previous, current);
            removed = true;
            current = entry.next;
        }
        removed
    }

    /// Every held row with its key slot and entry, to give restored rows their times.
    pub(super) fn entries(&self) -> Vec<(u32, u32)> {
        let mut out = Vec::with_capacity(self.len());
        for (slot, chain) in self.chains.iter().enumerate() {
            let mut next = chain.head;
            while next != NONE {
                out.push((slot as u32, next));
                next = self.entries[next as usize].next;
            }
        }
        out
    }

    /// The row of entry `id`.
    pub(super) fn entry_row(&self, id: u32) -> &[u8] {
        self.row(self.entries[id as usize])
    }

    /// The time entry `id` expires by (its event time, or when it was last written).
    pub(super) fn time_of(&self, id: u32) -> i64 {
        self.entry_times
            .get(id as usize)
            .copied()
            .unwrap_or(i64::MIN)
    }

    /// Gives entry `id` of `key` a new time (its row was written again).
    pub(super) fn renew(&mut self, key: &[u8], id: u32, time: i64) {
        if let Some(slot) = self.index.find(self.index.hash(key), key) {
            self.set_time(slot, id, time);
        }
    }

    /// Gives entry `id` (of `slot`) its event time, so that it expires.
    pub(super) fn set_time(&mut self, slot: u32, id: u32, time: i64) {
        if self.entry_times.len() <= id as usize {
            self.entry_times.resize(id as usize + 1, 0);
        }
        self.entry_times[id as usize] = time;
        let slots = self
            .expiry
            .entry(time.div_euclid(EXPIRY_BUCKET))
            .or_default();
        if slots.last() != Some(&slot) {
            slots.push(slot);
        }
    }

    /// Adds one copy of `row` under `key`, in epoch `epoch`; returns its key slot and entry.
    pub(super) fn insert(&mut self, key: &[u8], row: &[u8], epoch: u32) -> (u32, u32) {
        let hash = self.index.hash(key);
        let slot = match self.index.find(hash, key) {
            Some(slot) => slot,
            None => {
                let (slot, grown) = self.slots.acquire();
                if grown {
                    self.chains.resize(self.slots.len, EMPTY);
                    self.added.resize(self.slots.len, 0);
                }
                self.index.insert(hash, key, slot);
                slot
            }
        };
        let entry = RowEntry {
            start: self.arena.len(),
            len: row.len() as u32,
            next: NONE,
        };
        self.added[slot as usize] = epoch;
        self.arena.extend_from_slice(row);
        let id = match self.free_entries.pop() {
            Some(id) => {
                self.entries[id as usize] = entry;
                self.entry_epochs[id as usize] = epoch;
                id
            }
            None => {
                self.entries.push(entry);
                self.entry_epochs.push(epoch);
                (self.entries.len() - 1) as u32
            }
        };
        if let Some(count) = self.match_counts.get_mut(id as usize) {
            *count = 0;
        }
        let chain = &mut self.chains[slot as usize];
        match chain.tail {
            NONE => chain.head = id,
            tail => self.entries[tail as usize].next = id,
        }
        chain.tail = id;
        (slot, id)
    }

    /// Takes one copy of `row` from `key` (the oldest), in epoch `epoch`; false when it is
    /// not held (a retraction of a row never seen, which takes nothing back).
    /// Returns how many rows of the other side the row joined (`None`: not held).
    pub(super) fn retract(&mut self, key: &[u8], row: &[u8], epoch: u32) -> Option<u32> {
        let (born, count) = self.take(key, row)?;
        self.removals.push(epoch, born, key, row);
        Some(count)
    }

    /// Takes one copy of `row` from `key` (the oldest) without remembering the removal;
    /// returns the epoch the row was added in and its match count, or `None` when it is
    /// not held.
    fn take(&mut self, key: &[u8], row: &[u8]) -> Option<(u32, u32)> {
        let slot = self.index.find(self.index.hash(key), key)?;
        let (mut previous, mut current) = (NONE, self.chains[slot as usize].head);
        while current != NONE && self.row(self.entries[current as usize]) != row {
            previous = current;
            current = self.entries[current as usize].next;
        }
        if current == NONE {
            return None;
        }
        let born = self.entry_epochs[current as usize];
        let count = self.match_count(current);
        self.set_match_count(current, 0);
        self.unlink(slot, previous, current);
        self.tidy(slot);
        Some((born, count))
    }

    /// Takes entry `current` (after `previous`; `NONE`: it is the head) out of `slot`'s
    /// chain and frees it.
    fn unlink(&mut self, slot: u32, previous: u32, current: u32) {
        let entry = self.entries[current as usize];
        let chain = &mut self.chains[slot as usize];
        match previous {
            NONE => chain.head = entry.next,
            previous => self.entries[previous as usize].next = entry.next,
        }
        if chain.tail == current {
            chain.tail = previous;
        }
        self.free_entries.push(current);
        self.garbage += entry.len as usize;
    }

    /// Releases `slot` once its chain is empty, and compacts the arena once it is mostly
    /// garbage.
    fn tidy(&mut self, slot: u32) {
        if self.chains[slot as usize].head == NONE {
            self.chains[slot as usize] = EMPTY;
            self.index.remove(slot);
            self.slots.release(slot);
        }
        if self.garbage > 1 << 20 && self.garbage > self.arena.len() / 2 {
            self.compact();
        }
    }

    /// Copies the held rows into a new arena, leaving the retracted ones behind.
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for chain in &self.chains {
            let mut next = chain.head;
            while next != NONE {
                let entry = &mut self.entries[next as usize];
                let start = arena.len();
                arena.extend_from_slice(&self.arena[entry.start..entry.start + entry.len as usize]);
                entry.start = start;
                next = entry.next;
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// The key slot holding `key`'s rows, if it holds any.
    pub(super) fn slot_of(&self, key: &[u8]) -> Option<u32> {
        self.index.find(self.index.hash(key), key)
    }

    /// The key of `slot`.
    pub(super) fn key_of(&self, slot: u32) -> &[u8] {
        self.index.key(slot)
    }

    /// Takes every row of `slot` out of memory without remembering a removal (they are
    /// kept elsewhere: an LSM store), and frees the slot.
    pub(super) fn drop_key(&mut self, slot: u32) {
        let mut next = self.chains[slot as usize].head;
        while next != NONE {
            let entry = self.entries[next as usize];
            self.set_match_count(next, 0);
            self.free_entries.push(next);
            self.garbage += entry.len as usize;
            next = entry.next;
        }
        self.chains[slot as usize].tail = NONE;
        self.chains[slot as usize].head = NONE;
        self.tidy(slot);
    }

    /// Roughly the bytes the side's rows and keys take in memory.
    pub(super) fn memory_bytes(&self) -> usize {
        self.arena.len() - self.garbage
            + self.len() * std::mem::size_of::<RowEntry>() * 2
            + self.slots.in_use() * 48
    }

    /// Rows held.
    pub(super) fn len(&self) -> usize {
        self.entries.len() - self.free_entries.len()
    }

    /// The slots holding rows, with their keys; with `added_after`, only those that
    /// were given a row after that epoch.
    pub(super) fn keys(&self, added_after: Option<u32>) -> impl Iterator<Item = (u32, &[u8])> {
        (0..self.slots.len as u32)
            .filter(move |slot| {
                self.chains[*slot as usize].head != NONE
                    && added_after.is_none_or(|e| self.added[*slot as usize] > e)
            })
            .map(move |slot| (slot, self.index.key(slot)))
    }

    /// Forgets the removals of `epoch` and earlier (a completed snapshot holds them).
    pub(super) fn forget_removals_through(&mut self, epoch: u32) {
        self.removals.forget_through(epoch);
    }

    /// Writes the rows removed after `epoch` that were added by then (none for a full
    /// snapshot, `epoch` = `None`).
    pub(super) fn save_removals(&self, epoch: Option<u32>, out: &mut StateWriter) {
        self.removals.save(epoch, out);
    }

    /// Reads the removals written by [`JoinSide::save_removals`] and takes the rows back.
    pub(super) fn load_removals(&mut self, input: &mut StateReader<'_>) -> Result<()> {
        // Rows of keys another subtask owns now were never loaded: nothing to take.
        // The removal is in the snapshot being restored: nothing to remember.
        Removals::load(input, |key, row| {
            self.take(key, row);
        })
    }

    /// Writes `slot`'s key, its key group and its rows (with `added_after`, those added
    /// after that epoch), each with its match count (`with.counts`) and its time
    /// (`with.times`); returns the number of rows written.
    pub(super) fn save(
        &self,
        slot: u32,
        key_group: usize,
        added_after: Option<u32>,
        with: RowExtras,
        out: &mut StateWriter,
    ) -> u64 {
        let mut next = self.chains[slot as usize].head;
        if let Some(epoch) = added_after {
            // Rows are chained in the order added: the new ones are the chain's tail.
            while next != NONE && self.entry_epochs[next as usize] <= epoch {
                next = self.entries[next as usize].next;
            }
        }
        let first = next;
        let mut count = 0u64;
        while next != NONE {
            count += 1;
            next = self.entries[next as usize].next;
        }
        out.bytes(self.index.key(slot))
            .u64(key_group as u64)
            .u64(count);
        let mut next = first;
        while next != NONE {
            let entry = self.entries[next as usize];
            out.bytes(self.row(entry));
            if with.counts {
                out.u64(self.match_count(next) as u64);
            }
            if with.times {
                out.i64(self.time_of(next));
            }
            next = entry.next;
        }
        count
    }

    /// Reads one key written by [`JoinSide::save`] (`with` as it was written) and adds
    /// its rows (in epoch `epoch`) when `keep` says its key group is this subtask's; with
    /// `timed`, each row expires at its time written (or `timed`'s time when none was).
    pub(super) fn load(
        &mut self,
        input: &mut StateReader<'_>,
        epoch: u32,
        with: RowExtras,
        timed: Option<i64>,
        keep: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let key = input.bytes()?;
        let key_group = input.u64()? as usize;
        let keep = keep(key_group);
        for _ in 0..input.count(1)? {
            let row = input.bytes()?;
            let count = match with.counts {
                true => input.u64()? as u32,
                false => 0,
            };
            let time = match with.times {
                true => Some(input.i64()?),
                false => None,
            };
            if keep {
                let (slot, id) = self.insert(key, row, epoch);
                if with.counts {
                    self.set_match_count(id, count);
                }
                if let Some(now) = timed {
                    self.set_time(slot, id, time.unwrap_or(now));
                }
            }
        }
        Ok(())
    }
}

/// Rows dropped from a join side that joined nothing: an outer interval join emits them
/// padded.
#[derive(Debug, Default)]
pub(super) struct Unmatched {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Unmatched {
    fn push(&mut self, row: &[u8]) {
        self.bytes.extend_from_slice(row);
        self.ends.push(self.bytes.len());
    }

    /// The rows, in the order dropped.
    pub(super) fn rows(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// The keys a side's expiry took rows from.
#[derive(Debug, Default)]
pub(super) struct ExpiredKeys {
    /// The slots of keys that still hold rows.
    pub(super) changed: Vec<u32>,
    /// The keys left without rows (their slots freed).
    pub(super) emptied: Vec<Vec<u8>>,
}

/// The last millisecond of expiry bucket `bucket`: a bucket's rows go once all of its
/// span is out of reach.
fn bucket_end(bucket: i64) -> i64 {
    (bucket + 1).saturating_mul(EXPIRY_BUCKET) - 1
}

/// The bound at which a row of time `time` expires: the end of its bucket.
fn expires_by(time: i64) -> i64 {
    bucket_end(time.div_euclid(EXPIRY_BUCKET))
}

/// What a snapshot holds beside each row of a join side.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowExtras {
    /// Its match count (the preserved side of an outer join).
    pub(super) counts: bool,
    /// The time it expires by (with a state TTL: when it was written).
    pub(super) times: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};

    impl JoinSide {
        /// The rows held for `key`, oldest first.
        pub(in crate::join) fn matches(&self, key: &[u8]) -> impl Iterator<Item = &[u8]> {
            self.matching(key).map(|(_, row)| row)
        }
    }

    fn side() -> JoinSide {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        JoinSide::new(Vec::new(), &schema).unwrap()
    }

    #[test]
    fn rows_are_a_multiset_per_key() {
        let mut side = side();
        side.insert(b"k1", b"r1", 1);
        side.insert(b"k1", b"r1", 1);
        side.insert(b"k1", b"r2", 1);
        side.insert(b"k2", b"r3", 1);
        assert_eq!(side.len(), 4);
        assert_eq!(
            side.matches(b"k1").collect::<Vec<_>>(),
            [b"r1", b"r1", b"r2"]
        );
        assert!(side.retract(b"k1", b"r1", 1).is_some());
        assert_eq!(side.matches(b"k1").collect::<Vec<_>>(), [b"r1", b"r2"]);
        assert!(side.retract(b"k1", b"r9", 1).is_none(), "never held");
        assert!(side.retract(b"k9", b"r1", 1).is_none(), "unknown key");
        assert!(side.retract(b"k2", b"r3", 1).is_some());
        assert_eq!(side.matches(b"k2").count(), 0);
        assert_eq!(side.keys(None).count(), 1, "an emptied key is freed");
        assert_eq!(side.len(), 2);
    }

    #[test]
    fn removed_rows_are_compacted_away() {
        let mut side = side();
        let key = |k: u32| format!("key-{k:06}").into_bytes();
        let row = |k: u32, i: u32| format!("row-{k:06}-{i}").into_bytes();
        for k in 0..50_000 {
            for i in 0..4 {
                side.insert(&key(k), &row(k, i), 1);
            }
        }
        let full = side.arena.len();
        for k in 0..50_000 {
            for i in 1..4 {
                assert!(side.retract(&key(k), &row(k, i), 1).is_some());
            }
        }
        assert!(
            side.arena.len() < full / 2,
            "compacted: {} of {full}",
            side.arena.len()
        );
        assert_eq!(side.len(), 50_000);
        for k in [0, 777, 49_999] {
            let left: Vec<&[u8]> = side.matches(&key(k)).collect();
            assert_eq!(left, [row(k, 0).as_slice()]);
        }
        // Freed entries are reused, and chains stay in insertion order.
        side.insert(&key(5), b"later", 1);
        let rows: Vec<&[u8]> = side.matches(&key(5)).collect();
        assert_eq!(rows, [row(5, 0).as_slice(), b"later"]);
    }
}
