//! Where the rows an open transaction wrote are, by their key: a row deleted (or written
//! again) before its transaction commits is deleted by its position, since an equality
//! delete only reaches rows of earlier commits (the spec: data sequence number strictly
//! lower). Keys are row-encoded and stored back to back in one buffer, so a row written
//! allocates nothing of its own; the whole index is dropped when its transaction is
//! prepared.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

/// A row of a data file of the open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowPosition {
    /// The data file, by its number in the transaction.
    pub file: u32,
    /// The row's position in it, from 0.
    pub pos: i64,
}

/// A key's place in the buffer, and its row.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: usize,
    len: u32,
    at: RowPosition,
}

/// The rows written in the open transaction, by their key.
#[derive(Debug, Default)]
pub struct InsertedRows {
    bytes: Vec<u8>,
    table: HashTable<Entry>,
    hasher: DefaultHashBuilder,
}

impl InsertedRows {
    /// Records that the row of `key` is `at`; returns where the row of the same key
    /// written before in the transaction was, if one was.
    pub fn insert(&mut self, key: &[u8], at: RowPosition) -> Option<RowPosition> {
        let hash = self.hasher.hash_one(key);
        let bytes = &self.bytes;
        let found = self
            .table
            .find_mut(hash, |e| &bytes[e.start..e.start + e.len as usize] == key);
        if let Some(entry) = found {
            return Some(std::mem::replace(&mut entry.at, at));
        }
        let entry = Entry {
            start: self.bytes.len(),
            len: key.len() as u32,
            at,
        };
        self.bytes.extend_from_slice(key);
        let (bytes, hasher) = (&self.bytes, &self.hasher);
        self.table.insert_unique(hash, entry, |e| {
            hasher.hash_one(&bytes[e.start..e.start + e.len as usize])
        });
        None
    }

    /// Forgets the row of `key`; returns where it was, if the transaction wrote one.
    pub fn remove(&mut self, key: &[u8]) -> Option<RowPosition> {
        let hash = self.hasher.hash_one(key);
        let bytes = &self.bytes;
        let entry = self
            .table
            .find_entry(hash, |e| &bytes[e.start..e.start + e.len as usize] == key)
            .ok()?
            .remove()
            .0;
        Some(entry.at)
    }

    /// Forgets every row (the transaction was prepared or aborted).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.table.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_written_again_or_deleted_gives_its_last_row() {
        let mut rows = InsertedRows::default();
        let at = |file, pos| RowPosition { file, pos };
        for k in 0..1000i64 {
            assert_eq!(rows.insert(&k.to_be_bytes(), at(0, k)), None);
        }
        assert_eq!(rows.insert(&7i64.to_be_bytes(), at(1, 0)), Some(at(0, 7)));
        assert_eq!(rows.remove(&7i64.to_be_bytes()), Some(at(1, 0)));
        assert_eq!(rows.remove(&7i64.to_be_bytes()), None);
        assert_eq!(rows.remove(&999i64.to_be_bytes()), Some(at(0, 999)));
        assert_eq!(rows.remove(b"other"), None);
        rows.clear();
        assert_eq!(rows.remove(&3i64.to_be_bytes()), None);
    }
}
