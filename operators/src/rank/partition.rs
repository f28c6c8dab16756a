//! The rows of one Top-N partition, kept sorted by their `ORDER BY` key. Each row is
//! stored as its sort key (row-encoded so that bytes compare as the `ORDER BY` does) and
//! the row itself, back to back in the partition's arena; the entries are kept in sort
//! order, so the top rows are the first entries and a row's rank is its position.

/// How rows that tie on the sort key are ordered among themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ties {
    /// The row that arrived first comes first (Flink's Top-N and keep-first deduplication).
    FirstArrivedFirst,
    /// The row that arrived last comes first (Flink's keep-last deduplication: a later row
    /// with the same time replaces the kept one).
    LastArrivedFirst,
}

/// One held row: where its sort key and its row are in the arena.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: u32,
    sort_len: u32,
    row_len: u32,
}

/// A partition's rows in sort order.
#[derive(Debug, Default)]
pub(super) struct Partition {
    entries: Vec<Entry>,
    arena: Vec<u8>,
    /// Bytes of `arena` that belong to no entry any more.
    garbage: usize,
}

impl Partition {
    fn sort_key(&self, entry: Entry) -> &[u8] {
        let start = entry.start as usize;
        &self.arena[start..start + entry.sort_len as usize]
    }

    fn row_of(&self, entry: Entry) -> &[u8] {
        let start = (entry.start + entry.sort_len) as usize;
        &self.arena[start..start + entry.row_len as usize]
    }

    /// Bytes of memory the partition takes.
    pub(super) fn held_bytes(&self) -> usize {
        self.arena.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>() + 48
    }

    /// Rows held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The sort key and row of the `i`-th row in sort order.
    pub(super) fn get(&self, i: usize) -> (&[u8], &[u8]) {
        let entry = self.entries[i];
        (self.sort_key(entry), self.row_of(entry))
    }

    /// Adds a row where its sort key and `ties` put it; returns its position.
    pub(super) fn insert(&mut self, sort_key: &[u8], row: &[u8], ties: Ties) -> usize {
        let position = match ties {
            Ties::FirstArrivedFirst => self
                .entries
                .partition_point(|e| self.sort_key(*e) <= sort_key),
            Ties::LastArrivedFirst => self
                .entries
                .partition_point(|e| self.sort_key(*e) < sort_key),
        };
        let entry = Entry {
            start: self.arena.len() as u32,
            sort_len: sort_key.len() as u32,
            row_len: row.len() as u32,
        };
        self.arena.extend_from_slice(sort_key);
        self.arena.extend_from_slice(row);
        self.entries.insert(position, entry);
        position
    }

    /// Appends a row known to sort after every held one (a restored partition, read back
    /// in order).
    pub(super) fn push(&mut self, sort_key: &[u8], row: &[u8]) {
        self.entries.push(Entry {
            start: self.arena.len() as u32,
            sort_len: sort_key.len() as u32,
            row_len: row.len() as u32,
        });
        self.arena.extend_from_slice(sort_key);
        self.arena.extend_from_slice(row);
    }

    /// Takes back one copy of `row` (the first in sort order); false when it is not held.
    pub(super) fn retract(&mut self, sort_key: &[u8], row: &[u8]) -> bool {
        let first = self
            .entries
            .partition_point(|e| self.sort_key(*e) < sort_key);
        let found = self.entries[first..]
            .iter()
            .take_while(|e| self.sort_key(**e) == sort_key)
            .position(|e| self.row_of(*e) == row);
        match found {
            Some(offset) => {
                self.remove(first + offset);
                true
            }
            None => false,
        }
    }

    /// Keeps only the first `end` rows. With inserts only, a row ranked past `end` never
    /// comes back into range, so it need not be held.
    pub(super) fn truncate_past(&mut self, end: u64) {
        while self.entries.len() as u64 > end {
            self.remove(self.entries.len() - 1);
        }
    }

    fn remove(&mut self, i: usize) {
        let entry = self.entries.remove(i);
        self.garbage += (entry.sort_len + entry.row_len) as usize;
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
    }

    /// Copies the held entries into a new arena, leaving removed rows behind.
    fn compact(&mut self) {
        let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
        for entry in &mut self.entries {
            let start = entry.start as usize;
            let len = (entry.sort_len + entry.row_len) as usize;
            let new_start = arena.len() as u32;
            arena.extend_from_slice(&self.arena[start..start + len]);
            entry.start = new_start;
        }
        self.arena = arena;
        self.garbage = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(partition: &Partition) -> Vec<&[u8]> {
        (0..partition.len()).map(|i| partition.get(i).1).collect()
    }

    #[test]
    fn rows_stay_sorted_and_ties_follow_the_policy() {
        let mut p = Partition::default();
        p.insert(b"b", b"b1", Ties::FirstArrivedFirst);
        p.insert(b"a", b"a1", Ties::FirstArrivedFirst);
        p.insert(b"b", b"b2", Ties::FirstArrivedFirst);
        assert_eq!(rows(&p), [b"a1", b"b1", b"b2"]);
        p.insert(b"b", b"b3", Ties::LastArrivedFirst);
        assert_eq!(rows(&p), [b"a1", b"b3", b"b1", b"b2"]);
        assert!(p.retract(b"b", b"b1"));
        assert!(!p.retract(b"b", b"b1"), "held once");
        assert!(!p.retract(b"c", b"b2"), "under another sort key");
        assert_eq!(rows(&p), [b"a1", b"b3", b"b2"]);
    }

    #[test]
    fn removed_rows_are_compacted_away() {
        let mut p = Partition::default();
        for i in 0..10_000u32 {
            p.insert(&i.to_be_bytes(), &[7; 16], Ties::FirstArrivedFirst);
        }
        let full = p.arena.len();
        p.truncate_past(10);
        assert!(p.arena.len() < full / 10, "{} of {full}", p.arena.len());
        assert_eq!(p.len(), 10);
        assert_eq!(p.get(9).0, 9u32.to_be_bytes());
    }
}
