//! Keyed state's keys (a `GROUP BY`'s groups, a join's keys): stored back to back in one
//! buffer and found through a hash table of slot numbers, so a new key allocates nothing of
//! its own and freeing every key is freeing two buffers. The table keeps each key's hash
//! next to its slot, so growing it never reads or hashes a key again.

use std::hash::BuildHasher;
use std::sync::Arc;

use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use arrow::row::{RowConverter, Rows, SortField};
use datafusion_physical_expr::PhysicalExpr;
use eddy_common::Result;
use hashbrown::{DefaultHashBuilder, HashTable};

use crate::evaluate;
use crate::partition::key_groups;

/// Where a slot's key is in the buffer; `len == FREE` for a slot without a group.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    len: u32,
}

const FREE: u32 = u32::MAX;

/// Group keys (row-encoded) by slot number.
#[derive(Debug, Default)]
pub(crate) struct GroupKeys {
    bytes: Vec<u8>,
    spans: Vec<Span>,
    /// (slot, 32-bit hash of its key).
    table: HashTable<(u32, u32)>,
    hasher: DefaultHashBuilder,
    /// Bytes of `bytes` that belong to no group any more.
    garbage: usize,
}

impl GroupKeys {
    /// The hash of `key`, for [`GroupKeys::find`] and [`GroupKeys::insert`].
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        spread(self.hasher.hash_one(key) as u32)
    }

    /// The slot of the group with `key` (whose hash is `hash`).
    pub(crate) fn find(&self, hash: u64, key: &[u8]) -> Option<u32> {
        self.table
            .find(hash, |(slot, _)| self.key(*slot) == key)
            .map(|(slot, _)| *slot)
    }

    /// Gives `slot` (free) the group with `key` (whose hash is `hash`, and which no slot
    /// holds).
    pub(crate) fn insert(&mut self, hash: u64, key: &[u8], slot: u32) {
        let index = slot as usize;
        if index >= self.spans.len() {
            self.spans.resize(
                index + 1,
                Span {
                    start: 0,
                    len: FREE,
                },
            );
        }
        self.spans[index] = Span {
            start: self.bytes.len(),
            len: key.len() as u32,
        };
        self.bytes.extend_from_slice(key);
        self.table
            .insert_unique(hash, (slot, hash as u32), |(_, h)| spread(*h));
    }

    /// Frees `slot`'s group.
    pub(crate) fn remove(&mut self, slot: u32) {
        let span = self.spans[slot as usize];
        if span.len == FREE {
            return;
        }
        let hash = self.hash(span_bytes(&self.bytes, span));
        if let Ok(entry) = self.table.find_entry(hash, |(s, _)| *s == slot) {
            entry.remove();
        }
        self.spans[slot as usize].len = FREE;
        self.garbage += span.len as usize;
        if self.garbage > 1 << 20 && self.garbage > self.bytes.len() / 2 {
            self.compact();
        }
    }

    /// Whether `slot` holds a group.
    pub(crate) fn holds(&self, slot: u32) -> bool {
        self.spans
            .get(slot as usize)
            .is_some_and(|span| span.len != FREE)
    }

    /// The key of `slot`'s group (empty for a free slot).
    pub(crate) fn key(&self, slot: u32) -> &[u8] {
        match self.spans.get(slot as usize) {
            Some(span) if span.len != FREE => span_bytes(&self.bytes, *span),
            _ => &[],
        }
    }

    /// Copies the live keys into a new buffer, leaving the freed bytes behind.
    fn compact(&mut self) {
        let mut bytes = Vec::with_capacity(self.bytes.len() - self.garbage);
        for span in self.spans.iter_mut().filter(|s| s.len != FREE) {
            let start = bytes.len();
            bytes.extend_from_slice(span_bytes(&self.bytes, *span));
            span.start = start;
        }
        self.bytes = bytes;
        self.garbage = 0;
    }
}

/// A 32-bit hash as the table's 64-bit one: the low bits pick the bucket and the high bits
/// the tag, both from the stored 32 bits.
fn spread(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

fn span_bytes(bytes: &[u8], span: Span) -> &[u8] {
    &bytes[span.start..span.start + span.len as usize]
}

/// Slot numbers for groups, reused once a group is gone.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    free: Vec<u32>,
    /// Slots handed out so far (the size state arrays need).
    pub(crate) len: usize,
}

impl Slots {
    /// A free slot; `true` when the slot is new (state must grow).
    pub(crate) fn acquire(&mut self) -> (u32, bool) {
        match self.free.pop() {
            Some(slot) => (slot, false),
            None => {
                self.len += 1;
                ((self.len - 1) as u32, true)
            }
        }
    }

    pub(crate) fn release(&mut self, slot: u32) {
        self.free.push(slot);
    }

    /// Slots handed out and in use.
    pub(crate) fn in_use(&self) -> usize {
        self.len - self.free.len()
    }
}

/// The partitions of an operator keyed by `PARTITION BY` expressions (Top-N, OVER): each
/// partition's key row-encoded, and a slot number that indexes its state.
#[derive(Debug)]
pub(crate) struct PartitionKeys {
    exprs: Vec<Arc<dyn PhysicalExpr>>,
    codec: RowConverter,
    index: GroupKeys,
    slots: Slots,
}

impl PartitionKeys {
    /// Partitions by `exprs`, of types `types` (none: one partition for every row).
    pub(crate) fn new(exprs: Vec<Arc<dyn PhysicalExpr>>, types: &[DataType]) -> Result<Self> {
        let codec = RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())?;
        Ok(PartitionKeys {
            exprs,
            codec,
            index: GroupKeys::default(),
            slots: Slots::default(),
        })
    }

    /// The partition keys of `batch`'s rows, encoded (`None` when there are no keys: every
    /// row's key is empty).
    #[cfg(test)]
    pub(crate) fn encode(&self, batch: &RecordBatch) -> Result<Option<Rows>> {
        Ok(self.encode_with_key_groups(batch, None)?.0)
    }

    /// As [`PartitionKeys::encode`], with each row's key group among `max_parallelism`
    /// when that is given (empty otherwise; all 0 without keys).
    pub(crate) fn encode_with_key_groups(
        &self,
        batch: &RecordBatch,
        max_parallelism: Option<usize>,
    ) -> Result<(Option<Rows>, Vec<usize>)> {
        if self.exprs.is_empty() {
            let groups = max_parallelism.map_or(0, |_| batch.num_rows());
            return Ok((None, vec![0; groups]));
        }
        let columns = self
            .exprs
            .iter()
            .map(|k| evaluate(k, batch))
            .collect::<Result<Vec<_>>>()?;
        let groups = match max_parallelism {
            Some(max_parallelism) => key_groups(&columns, max_parallelism)?,
            None => Vec::new(),
        };
        Ok((Some(self.codec.convert_columns(&columns)?), groups))
    }

    /// The slot of the partition with `key`, if it has one.
    pub(crate) fn find(&self, key: &[u8]) -> Option<u32> {
        self.index.find(self.index.hash(key), key)
    }

    /// A slot for the partition with `key`, which has none; `true` when the slot is new
    /// (per-slot state must grow).
    pub(crate) fn insert(&mut self, key: &[u8]) -> (u32, bool) {
        let (slot, grown) = self.slots.acquire();
        self.index.insert(self.index.hash(key), key, slot);
        (slot, grown)
    }

    /// Frees `slot`.
    pub(crate) fn release(&mut self, slot: u32) {
        self.index.remove(slot);
        self.slots.release(slot);
    }

    /// The key of `slot`'s partition.
    pub(crate) fn key(&self, slot: u32) -> &[u8] {
        self.index.key(slot)
    }

    /// Slots handed out so far (in use or free).
    pub(crate) fn len(&self) -> usize {
        self.slots.len
    }

    /// Partitions held.
    pub(crate) fn in_use(&self) -> usize {
        self.slots.in_use()
    }

    /// Whether a partition's key decides the subtask (there are keys).
    pub(crate) fn is_keyed(&self) -> bool {
        !self.exprs.is_empty()
    }

    /// The key groups of the partitions in `slots` (all 0 without keys).
    pub(crate) fn key_groups(&self, slots: &[u32], max_parallelism: usize) -> Result<Vec<usize>> {
        if !self.is_keyed() || slots.is_empty() {
            return Ok(vec![0; slots.len()]);
        }
        let parser = self.codec.parser();
        let keys = slots.iter().map(|s| parser.parse(self.key(*s)));
        key_groups(&self.codec.convert_rows(keys)?, max_parallelism)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(keys: &mut GroupKeys, key: &[u8], slot: u32) {
        let hash = keys.hash(key);
        assert_eq!(keys.find(hash, key), None);
        keys.insert(hash, key, slot);
    }

    fn find(keys: &GroupKeys, key: &[u8]) -> Option<u32> {
        keys.find(keys.hash(key), key)
    }

    #[test]
    fn keys_are_found_removed_and_reused_across_compactions() {
        let mut keys = GroupKeys::default();
        let key = |i: u32| format!("key-{i:06}").into_bytes();
        let n = 300_000;
        for i in 0..n {
            insert(&mut keys, &key(i), i);
        }
        // Free two of every three slots (enough garbage to compact), then reuse half.
        for i in (0..n).filter(|i| i % 3 != 0) {
            keys.remove(i);
        }
        assert!(keys.bytes.len() < n as usize * 10 / 2, "compacted");
        for i in (0..n).filter(|i| i % 3 == 1) {
            insert(&mut keys, &key(1_000_000 + i), i);
        }
        for i in 0..n {
            match i % 3 {
                0 => {
                    assert_eq!(find(&keys, &key(i)), Some(i));
                    assert_eq!(keys.key(i), key(i));
                }
                1 => {
                    assert_eq!(find(&keys, &key(1_000_000 + i)), Some(i));
                    assert_eq!(keys.key(i), key(1_000_000 + i));
                    assert_eq!(find(&keys, &key(i)), None);
                }
                _ => {
                    assert_eq!(find(&keys, &key(i)), None);
                    assert_eq!(keys.key(i), b"");
                }
            }
        }
        // The empty key (a GROUP BY without keys) is a key like any other.
        insert(&mut keys, b"", n);
        assert_eq!(find(&keys, b""), Some(n));
    }
}
