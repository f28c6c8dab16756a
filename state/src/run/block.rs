//! A data block: its entries, then restart points (the offset of every
//! [`RESTART_INTERVAL`]th entry, u32 each, and their count, u32), so that a key is found by
//! a binary search over the restarts and a scan of at most that many entries.

use std::path::Path;

use super::varint;
use crate::error::{Result, StateError};

/// Entries between two restart points.
pub(crate) const RESTART_INTERVAL: usize = 16;

/// A block being filled.
#[derive(Debug, Default)]
pub(crate) struct BlockBuilder {
    bytes: Vec<u8>,
    restarts: Vec<u32>,
    entries: usize,
}

impl BlockBuilder {
    /// Appends an entry: `value` `None` records a deletion.
    pub fn add(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.entries.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.bytes.len() as u32);
        }
        put_entry(&mut self.bytes, key, value);
        self.entries += 1;
    }

    /// Bytes of entries so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Appends the restarts to the entries and returns the block's bytes, leaving the
    /// builder empty (its buffer is given back with [`BlockBuilder::reuse`]).
    pub fn finish(&mut self) -> Vec<u8> {
        for restart in &self.restarts {
            self.bytes.extend_from_slice(&restart.to_le_bytes());
        }
        self.bytes
            .extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.entries = 0;
        std::mem::take(&mut self.bytes)
    }

    /// Takes back a finished block's buffer to fill the next one.
    pub fn reuse(&mut self, mut buffer: Vec<u8>) {
        buffer.clear();
        self.bytes = buffer;
    }
}

/// A block's content (its CRC checked) split into entries and restart points.
pub(crate) struct BlockView<'a> {
    entries: &'a [u8],
    restarts: &'a [u8],
    path: &'a Path,
}

impl<'a> BlockView<'a> {
    /// Splits `content`, a block of the run at `path`.
    pub fn new(content: &'a [u8], path: &'a Path) -> Result<Self> {
        let corrupt = || StateError::corrupt(path, "a block's restart points are out of place");
        let count_at = content.len().checked_sub(4).ok_or_else(corrupt)?;
        let count = u32::from_le_bytes(content[count_at..].try_into().expect("4 bytes")) as usize;
        let restarts_at = count
            .checked_mul(4)
            .and_then(|len| count_at.checked_sub(len))
            .ok_or_else(corrupt)?;
        let view = BlockView {
            entries: &content[..restarts_at],
            restarts: &content[restarts_at..count_at],
            path,
        };
        if (0..count).any(|i| view.restart(i) > view.entries.len()) {
            return Err(corrupt());
        }
        Ok(view)
    }

    fn restart(&self, i: usize) -> usize {
        u32::from_le_bytes(self.restarts[i * 4..i * 4 + 4].try_into().expect("4 bytes")) as usize
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> Entries<'a> {
        Entries::new(self.entries, self.path)
    }

    /// The entries from the last restart point whose key is at most `key`: a key in the
    /// block is among the first [`RESTART_INTERVAL`] of them.
    pub fn seek(&self, key: &[u8]) -> Result<Entries<'a>> {
        let (mut low, mut high) = (0, self.restarts.len() / 4);
        while high - low > 1 {
            let mid = (low + high) / 2;
            let mut at = Entries::new(&self.entries[self.restart(mid)..], self.path);
            match at.next().transpose()? {
                Some((found, _)) if found <= key => low = mid,
                _ => high = mid,
            }
        }
        let start = match self.restarts.is_empty() {
            true => self.entries.len(),
            false => self.restart(low),
        };
        Ok(Entries::new(&self.entries[start..], self.path))
    }
}

/// Appends an entry: `value` `None` records a deletion.
fn put_entry(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
    varint::put(out, key.len() as u64);
    varint::put(out, value.map_or(0, |v| v.len() as u64 + 1));
    out.extend_from_slice(key);
    if let Some(value) = value {
        out.extend_from_slice(value);
    }
}

/// The entries of a block's content (its CRC already checked), in key order.
pub(crate) struct Entries<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Entries<'a> {
    /// Reads the entries of `bytes`, a block of the run at `path`.
    pub fn new(bytes: &'a [u8], path: &'a Path) -> Self {
        Entries {
            bytes,
            pos: 0,
            path,
        }
    }

    fn entry(&mut self) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let key_len = varint::get(self.bytes, &mut self.pos)? as usize;
        let tag = varint::get(self.bytes, &mut self.pos)? as usize;
        let key = self.bytes.get(self.pos..self.pos.checked_add(key_len)?)?;
        self.pos += key_len;
        let value = match tag {
            0 => None,
            n => {
                let value = self.bytes.get(self.pos..self.pos.checked_add(n - 1)?)?;
                self.pos += n - 1;
                Some(value)
            }
        };
        Some((key, value))
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<(&'a [u8], Option<&'a [u8]>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        match self.entry() {
            Some(entry) => Some(Ok(entry)),
            None => {
                self.pos = self.bytes.len();
                Some(Err(StateError::corrupt(
                    self.path,
                    "a block entry runs past its block",
                )))
            }
        }
    }
}
