//! A data block's entries: encoding one, and reading them back in order.

use std::path::Path;

use super::varint;
use crate::error::{Result, StateError};

/// Appends an entry: `value` `None` records a deletion.
pub(crate) fn put_entry(out: &mut Vec<u8>, key: &[u8], value: Option<&[u8]>) {
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
