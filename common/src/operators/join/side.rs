//! The state of one input of a join: for every join key, the rows of that input with the
//! key (a multiset: a row inserted twice is held twice), row-encoded back to back in one
//! buffer per key.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::row::{RowConverter, SortField};
use datafusion_physical_expr::PhysicalExpr;

use crate::Result;
use crate::operators::group_keys::{GroupKeys, Slots};
use crate::state::{StateReader, StateWriter};

/// Where one row is in its key's buffer.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: u32,
    len: u32,
}

/// The rows held for one key.
#[derive(Debug, Default)]
struct KeyRows {
    bytes: Vec<u8>,
    rows: Vec<Span>,
    /// Bytes of `bytes` that belong to no row any more.
    garbage: usize,
}

impl KeyRows {
    fn row(&self, span: Span) -> &[u8] {
        &self.bytes[span.start as usize..(span.start + span.len) as usize]
    }

    fn push(&mut self, row: &[u8]) {
        self.rows.push(Span {
            start: self.bytes.len() as u32,
            len: row.len() as u32,
        });
        self.bytes.extend_from_slice(row);
    }

    /// Takes one copy of `row` out; false when there is none. The newest copy goes first
    /// (a retraction usually follows the row it retracts closely).
    fn remove(&mut self, row: &[u8]) -> bool {
        let Some(position) = self.rows.iter().rposition(|span| self.row(*span) == row) else {
            return false;
        };
        self.rows.remove(position);
        self.garbage += row.len();
        if self.garbage > 4096 && self.garbage > self.bytes.len() / 2 {
            let mut bytes = Vec::with_capacity(self.bytes.len() - self.garbage);
            for span in &mut self.rows {
                let start = bytes.len() as u32;
                bytes.extend_from_slice(&self.bytes[span.start as usize..][..span.len as usize]);
                span.start = start;
            }
            self.bytes = bytes;
            self.garbage = 0;
        }
        true
    }
}

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
    by_slot: Vec<KeyRows>,
    /// Rows held.
    rows: usize,
}

impl JoinSide {
    /// An empty side for rows of `schema`, keyed by `keys`.
    pub(super) fn new(keys: Vec<Arc<dyn PhysicalExpr>>, schema: &SchemaRef) -> Result<Self> {
        let codec = RowConverter::new(
            schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(JoinSide {
            keys,
            codec,
            index: GroupKeys::default(),
            slots: Slots::default(),
            by_slot: Vec::new(),
            rows: 0,
        })
    }

    /// The rows held for `key` (row-encoded), newest last.
    pub(super) fn matches(&self, key: &[u8]) -> impl Iterator<Item = &[u8]> {
        let slot = self.index.find(self.index.hash(key), key);
        let rows = slot.map(|s| &self.by_slot[s as usize]);
        rows.into_iter()
            .flat_map(|rows| rows.rows.iter().map(move |span| rows.row(*span)))
    }

    /// Adds one copy of `row` under `key`.
    pub(super) fn insert(&mut self, key: &[u8], row: &[u8]) {
        let hash = self.index.hash(key);
        let slot = match self.index.find(hash, key) {
            Some(slot) => slot,
            None => {
                let (slot, grown) = self.slots.acquire();
                if grown {
                    self.by_slot.resize_with(self.slots.len, KeyRows::default);
                }
                self.index.insert(hash, key, slot);
                slot
            }
        };
        self.by_slot[slot as usize].push(row);
        self.rows += 1;
    }

    /// Takes one copy of `row` from `key`; false when it is not held (a retraction of a
    /// row never seen, which takes nothing back).
    pub(super) fn retract(&mut self, key: &[u8], row: &[u8]) -> bool {
        let Some(slot) = self.index.find(self.index.hash(key), key) else {
            return false;
        };
        let rows = &mut self.by_slot[slot as usize];
        if !rows.remove(row) {
            return false;
        }
        self.rows -= 1;
        if rows.rows.is_empty() {
            *rows = KeyRows::default();
            self.index.remove(slot);
            self.slots.release(slot);
        }
        true
    }

    /// Rows held.
    pub(super) fn len(&self) -> usize {
        self.rows
    }

    /// The slots holding rows, with their keys.
    pub(super) fn keys(&self) -> impl Iterator<Item = (u32, &[u8])> {
        (0..self.slots.len as u32)
            .filter(move |slot| !self.by_slot[*slot as usize].rows.is_empty())
            .map(move |slot| (slot, self.index.key(slot)))
    }

    /// Writes `slot`'s key, its key group and its rows.
    pub(super) fn save(&self, slot: u32, key_group: usize, out: &mut StateWriter) {
        let rows = &self.by_slot[slot as usize];
        out.bytes(self.index.key(slot))
            .u64(key_group as u64)
            .u64(rows.rows.len() as u64);
        for span in &rows.rows {
            out.bytes(rows.row(*span));
        }
    }

    /// Reads one key written by [`JoinSide::save`]; keeps its rows when `keep` says its
    /// key group is this subtask's.
    pub(super) fn load(
        &mut self,
        input: &mut StateReader<'_>,
        keep: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let key = input.bytes()?;
        let key_group = input.u64()? as usize;
        let keep = keep(key_group);
        for _ in 0..input.count(1)? {
            let row = input.bytes()?;
            if keep {
                self.insert(key, row);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};

    fn side() -> JoinSide {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        JoinSide::new(Vec::new(), &schema).unwrap()
    }

    #[test]
    fn rows_are_a_multiset_per_key() {
        let mut side = side();
        side.insert(b"k1", b"r1");
        side.insert(b"k1", b"r1");
        side.insert(b"k1", b"r2");
        side.insert(b"k2", b"r3");
        assert_eq!(side.len(), 4);
        assert_eq!(
            side.matches(b"k1").collect::<Vec<_>>(),
            [b"r1", b"r1", b"r2"]
        );
        assert!(side.retract(b"k1", b"r1"));
        assert_eq!(side.matches(b"k1").collect::<Vec<_>>(), [b"r1", b"r2"]);
        assert!(!side.retract(b"k1", b"r9"), "never held");
        assert!(!side.retract(b"k9", b"r1"), "unknown key");
        assert!(side.retract(b"k2", b"r3"));
        assert_eq!(side.matches(b"k2").count(), 0);
        assert_eq!(side.keys().count(), 1, "an emptied key is freed");
        assert_eq!(side.len(), 2);
    }

    #[test]
    fn removed_rows_are_compacted_away() {
        let mut side = side();
        let row = |i: u32| format!("row-{i:08}").into_bytes();
        for i in 0..2000 {
            side.insert(b"k", &row(i));
        }
        for i in (0..2000).filter(|i| i % 4 != 0) {
            assert!(side.retract(b"k", &row(i)));
        }
        let rows = &side.by_slot[0];
        assert!(rows.bytes.len() < 2000 * 12 / 2, "compacted");
        let left: Vec<Vec<u8>> = side.matches(b"k").map(<[u8]>::to_vec).collect();
        let expected: Vec<Vec<u8>> = (0..2000).filter(|i| i % 4 == 0).map(row).collect();
        assert_eq!(left, expected);
    }
}
