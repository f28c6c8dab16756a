//! Merging sorted sources (the memtable and runs, newest first) into one sorted stream in
//! which the newest entry of each key wins.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::Result;
use crate::run::Entry;

/// A sorted source of entries.
pub(crate) type Source<'a> = Box<dyn Iterator<Item = Result<Entry>> + 'a>;

/// The newest entry of each key among `sources` (index 0 newest), in key order; with
/// `hide_deletions`, keys whose newest entry is a deletion are left out.
pub(crate) struct Merged<'a> {
    sources: Vec<Source<'a>>,
    /// Each source's next entry's key and the source's index, smallest key (then newest
    /// source) first.
    heads: BinaryHeap<Reverse<(Vec<u8>, usize)>>,
    values: Vec<Option<Vec<u8>>>,
    hide_deletions: bool,
    failed: bool,
}

impl<'a> Merged<'a> {
    /// Merges `sources`, newest first.
    pub fn new(sources: Vec<Source<'a>>, hide_deletions: bool) -> Result<Self> {
        let mut merged = Merged {
            values: vec![None; sources.len()],
            sources,
            heads: BinaryHeap::new(),
            hide_deletions,
            failed: false,
        };
        for i in 0..merged.sources.len() {
            merged.advance(i)?;
        }
        Ok(merged)
    }

    /// Moves source `i` to its next entry.
    fn advance(&mut self, i: usize) -> Result<()> {
        if let Some(entry) = self.sources[i].next() {
            let (key, value) = entry?;
            self.values[i] = value;
            self.heads.push(Reverse((key, i)));
        }
        Ok(())
    }

    fn next_entry(&mut self) -> Result<Option<Entry>> {
        while let Some(Reverse((key, i))) = self.heads.pop() {
            let value = self.values[i].take();
            self.advance(i)?;
            // Older sources' entries of the same key are hidden by this one.
            while let Some(Reverse((next, _))) = self.heads.peek() {
                if *next != key {
                    break;
                }
                let Some(Reverse((_, older))) = self.heads.pop() else {
                    break;
                };
                self.values[older] = None;
                self.advance(older)?;
            }
            if value.is_some() || !self.hide_deletions {
                return Ok(Some((key, value)));
            }
        }
        Ok(None)
    }
}

impl Iterator for Merged<'_> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.next_entry();
        self.failed = next.is_err();
        next.transpose()
    }
}
