//! A store's recent writes, not yet in a run: hash tables, one per key prefix (an
//! operator's key group and table), so that a write stays a hash-table insert while a scan
//! of a range reads only the prefixes the range spans, not every write since the flush.

use std::collections::{BTreeMap, btree_map};

use hashbrown::HashMap;
use hashbrown::hash_map::EntryRef;

use crate::run::Entry;

/// Per-entry bookkeeping a memtable entry costs beside its bytes (table slot, two vectors).
const ENTRY_OVERHEAD: usize = 64;

/// What a partition's own hash table costs beside its entries: keys laid out otherwise
/// than an operator's (a prefix per few keys) fill the budget sooner rather than outgrow it.
const PARTITION_OVERHEAD: usize = 256;

/// Bytes of a key that name its partition: [`crate::key::PREFIX_LEN`].
const PARTITION_BYTES: usize = crate::key::PREFIX_LEN;

// A partition is a `u32`: its prefix bytes, then their count.
const _: () = assert!(PARTITION_BYTES < 4);

/// Writes by key, a deletion as `None`. (hashbrown's default hasher, foldhash, seeded per
/// process: with the standard library's SipHash, `bench/state-store.sh` wrote 15-25 % slower.)
type Writes = HashMap<Vec<u8>, Option<Vec<u8>>>;

/// The writes of a store since its last flush, by key prefix.
#[derive(Debug, Default)]
pub(super) struct Memtable {
    /// By [`partition`]: in key order, as the partitions sort as their keys do.
    partitions: BTreeMap<u32, Writes>,
    /// Bytes of keys and values, with their bookkeeping.
    bytes: usize,
}

impl Memtable {
    /// What it holds of `key`: `Some(None)` for a deletion, `None` when it holds nothing.
    pub(super) fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.partitions.get(&partition(key))?.get(key)
    }

    /// Records `value` for `key` (`None`: a deletion).
    pub(super) fn insert(&mut self, key: &[u8], value: Option<&[u8]>) {
        let writes = match self.partitions.entry(partition(key)) {
            btree_map::Entry::Occupied(writes) => writes.into_mut(),
            btree_map::Entry::Vacant(slot) => {
                self.bytes += PARTITION_OVERHEAD;
                slot.insert(Writes::new())
            }
        };
        self.bytes += entry_bytes(key, value);
        match writes.entry_ref(key) {
            EntryRef::Occupied(mut old) => {
                self.bytes -= entry_bytes(key, old.get().as_deref());
                *old.get_mut() = value.map(<[u8]>::to_vec);
            }
            EntryRef::Vacant(slot) => {
                slot.insert(value.map(<[u8]>::to_vec));
            }
        }
    }

    /// Forgets what it holds of `key`.
    pub(super) fn remove(&mut self, key: &[u8]) {
        let part = partition(key);
        let Some(writes) = self.partitions.get_mut(&part) else {
            return;
        };
        if let Some(old) = writes.remove(key) {
            self.bytes -= entry_bytes(key, old.as_deref());
        }
        if writes.is_empty() {
            self.partitions.remove(&part);
            self.bytes -= PARTITION_OVERHEAD;
        }
    }

    /// Whether it holds nothing.
    pub(super) fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// Bytes its entries cost.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every entry, in key order.
    pub(super) fn sorted(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.partitions.values().flat_map(|writes| {
            let mut entries: Vec<_> = writes.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .map(|(key, value)| (key.as_slice(), value.as_deref()))
        })
    }

    /// Copies of its entries from `start` up to `end` (excluded; `None`: to the last), in
    /// key order. Only the partitions the range spans are read.
    pub(super) fn range(&self, start: &[u8], end: Option<&[u8]>) -> Vec<Entry> {
        let in_range = |key: &[u8]| key >= start && end.is_none_or(|end| key < end);
        let last = end.map_or(u32::MAX, partition);
        let first = partition(start);
        if first > last {
            return Vec::new();
        }
        let mut entries = Vec::new();
        for writes in self.partitions.range(first..=last).map(|(_, w)| w) {
            let from = entries.len();
            entries.extend(
                writes
                    .iter()
                    .filter(|(key, _)| in_range(key))
                    .map(|(key, value)| (key.clone(), value.clone())),
            );
            entries[from..].sort_unstable_by(|a, b| a.0.cmp(&b.0));
        }
        entries
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.partitions.clear();
        self.bytes = 0;
    }
}

/// The partition of `key`: its first [`PARTITION_BYTES`] bytes (zeros past a shorter
/// key's end) and, last, how many of them it has. Partitions sort as their keys do: a key
/// before another never lies in a later partition.
fn partition(key: &[u8]) -> u32 {
    let len = key.len().min(PARTITION_BYTES);
    let mut bytes = [0u8; 4];
    bytes[..len].copy_from_slice(&key[..len]);
    bytes[PARTITION_BYTES] = len as u8;
    u32::from_be_bytes(bytes)
}

fn entry_bytes(key: &[u8], value: Option<&[u8]>) -> usize {
    key.len() + value.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys of every length up to five over a few byte values: short keys, prefixes of
    /// each other, and keys across partitions.
    fn keys() -> Vec<Vec<u8>> {
        let mut keys = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..5 {
            last = last
                .iter()
                .flat_map(|key: &Vec<u8>| [0u8, 1, 0xff].map(|b| [key.as_slice(), &[b]].concat()))
                .collect();
            keys.extend(last.iter().cloned());
        }
        keys
    }

    #[test]
    fn partitions_sort_as_their_keys() {
        let keys = keys();
        for a in &keys {
            for b in &keys {
                if a < b {
                    assert!(partition(a) <= partition(b), "{a:?} < {b:?}");
                }
            }
        }
    }

    #[test]
    fn a_range_reads_what_a_filter_of_every_entry_would() {
        let keys = keys();
        let mut memtable = Memtable::default();
        for (i, key) in keys.iter().enumerate() {
            let value = (i % 3 != 0).then(|| vec![i as u8]);
            memtable.insert(key, value.as_deref());
        }
        let mut all: Vec<Entry> = keys
            .iter()
            .map(|k| (k.clone(), memtable.get(k).cloned().unwrap()))
            .collect();
        all.sort();
        assert_eq!(
            memtable
                .sorted()
                .map(|(k, _)| k.to_vec())
                .collect::<Vec<_>>(),
            all.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
        );
        for start in keys.iter().step_by(7) {
            for end in keys.iter().step_by(11).map(Some).chain([None]) {
                let expected: Vec<Entry> = all
                    .iter()
                    .filter(|(k, _)| k >= start && end.is_none_or(|end| k < end))
                    .cloned()
                    .collect();
                assert_eq!(
                    memtable.range(start, end.map(Vec::as_slice)),
                    expected,
                    "{start:?}..{end:?}"
                );
            }
        }
    }

    #[test]
    fn bytes_follow_overwrites_and_removals() {
        let mut memtable = Memtable::default();
        memtable.insert(b"abcd", Some(b"12"));
        memtable.insert(b"abcd", Some(b"1234"));
        memtable.insert(b"x", None);
        assert_eq!(
            memtable.bytes(),
            8 + 1 + 2 * ENTRY_OVERHEAD + 2 * PARTITION_OVERHEAD
        );
        memtable.remove(b"abcd");
        memtable.remove(b"x");
        memtable.remove(b"absent");
        assert_eq!(memtable.bytes(), 0);
        assert!(memtable.is_empty());
    }
}
