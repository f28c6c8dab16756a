//! The layout of a run file, version 1. All integers are little-endian.
//!
//! ```text
//! data block*   entries, restart points, then the CRC-32 of both
//!               entry: varint key length, varint value tag (0: deleted, n: n - 1 bytes
//!               follow the key), key, value
//!               restart points: the offset of every 16th entry (u32 each), their count
//!               (u32)
//! index         varint block count; per block varint offset, varint length (with its
//!               CRC), varint last-key length, last key; then the CRC-32 of all that
//! bloom         the Bloom filter's bits; then their CRC-32
//! footer        64 bytes: index offset, index length, bloom offset, bloom length, entry
//!               count, deletion count (u64 each), format version (u32), the CRC-32 of
//!               those 52 bytes (u32), magic "EDDYRUN\0"
//! ```
//!
//! Blocks, index and filter each carry a CRC, so a torn or overwritten file is refused
//! with the part that failed, never read as other keys.

use std::path::Path;

use crate::error::{Result, StateError};

/// The format version this build writes and reads.
pub(crate) const VERSION: u32 = 1;
/// The last bytes of every run file.
pub(crate) const MAGIC: &[u8; 8] = b"EDDYRUN\0";
/// Bytes of the footer.
pub(crate) const FOOTER_LEN: usize = 64;
/// A data block is closed once its entries reach this many bytes.
pub(crate) const BLOCK_BYTES: usize = 4096;

/// Where a run's parts are, read from its footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    pub index: Span,
    pub bloom: Span,
    pub entries: u64,
    pub deletions: u64,
}

/// A byte range of a file: offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub offset: u64,
    pub len: u64,
}

impl Footer {
    /// The footer's 64 bytes.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.index.offset,
            self.index.len,
            self.bloom.offset,
            self.bloom.len,
            self.entries,
            self.deletions,
        ];
        for (i, field) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&field.to_le_bytes());
        }
        out[48..52].copy_from_slice(&VERSION.to_le_bytes());
        let crc = crc32fast::hash(&out[..52]);
        out[52..56].copy_from_slice(&crc.to_le_bytes());
        out[56..].copy_from_slice(MAGIC);
        out
    }

    /// Reads a footer of a file of `file_len` bytes, checking magic, CRC, version and that
    /// every part lies inside the file.
    pub fn decode(bytes: &[u8; FOOTER_LEN], file_len: u64, path: &Path) -> Result<Footer> {
        let corrupt = |what: String| StateError::corrupt(path, what);
        if &bytes[56..] != MAGIC {
            return Err(corrupt("no run-file magic at its end".into()));
        }
        let stored = u32::from_le_bytes(bytes[52..56].try_into().expect("4 bytes"));
        if crc32fast::hash(&bytes[..52]) != stored {
            return Err(corrupt("footer checksum mismatch".into()));
        }
        let version = u32::from_le_bytes(bytes[48..52].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(corrupt(format!(
                "run format version {version}; this Eddy reads version {VERSION}"
            )));
        }
        let field =
            |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let footer = Footer {
            index: Span {
                offset: field(0),
                len: field(1),
            },
            bloom: Span {
                offset: field(2),
                len: field(3),
            },
            entries: field(4),
            deletions: field(5),
        };
        let body = file_len.saturating_sub(FOOTER_LEN as u64);
        for (name, span) in [("index", footer.index), ("bloom filter", footer.bloom)] {
            if span.len < 4
                || span
                    .offset
                    .checked_add(span.len)
                    .is_none_or(|end| end > body)
            {
                return Err(corrupt(format!("{name} lies outside the file")));
            }
        }
        Ok(footer)
    }
}

/// Splits `bytes` into its content and trailing CRC-32, checking it; `what` names the part
/// in the error.
pub(crate) fn checked<'a>(bytes: &'a [u8], what: &str, path: &Path) -> Result<&'a [u8]> {
    let Some(split) = bytes.len().checked_sub(4) else {
        return Err(StateError::corrupt(
            path,
            format!("{what} is shorter than its checksum"),
        ));
    };
    let (content, crc) = bytes.split_at(split);
    if crc32fast::hash(content).to_le_bytes() != crc {
        return Err(StateError::corrupt(
            path,
            format!("{what} checksum mismatch"),
        ));
    }
    Ok(content)
}

/// Appends the CRC-32 of `bytes` to them.
pub(crate) fn seal(bytes: &mut Vec<u8>) {
    let crc = crc32fast::hash(bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
}
