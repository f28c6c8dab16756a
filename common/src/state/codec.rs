//! A compact, versioned binary encoding of snapshot state, read with bounds checks so a
//! corrupt or truncated snapshot is an error, never a panic or a huge allocation.

use crate::{EddyError, Result};

/// Appends values to a snapshot buffer.
#[derive(Debug, Default)]
pub struct StateWriter {
    bytes: Vec<u8>,
}

impl StateWriter {
    /// An empty buffer.
    pub fn new() -> Self {
        StateWriter::default()
    }

    /// An empty buffer with room for `bytes` bytes (saves regrowing a large snapshot).
    pub fn with_capacity(bytes: usize) -> Self {
        StateWriter {
            bytes: Vec::with_capacity(bytes),
        }
    }

    /// Appends an unsigned integer.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a signed integer.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a 128-bit signed integer.
    pub fn i128(&mut self, v: i128) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a float.
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u64(v.len() as u64);
        self.bytes.extend_from_slice(v);
        self
    }

    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads values back, checking every length against what is there.
#[derive(Debug)]
pub struct StateReader<'a> {
    bytes: &'a [u8],
    what: &'a str,
}

impl<'a> StateReader<'a> {
    /// Reads `bytes`; `what` names the snapshot in errors.
    pub fn new(bytes: &'a [u8], what: &'a str) -> Self {
        StateReader { bytes, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(EddyError::Runtime(format!(
                "corrupt snapshot of {}: needs {n} more bytes, has {}",
                self.what,
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("length checked"))
    }

    /// Reads an unsigned integer.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads a count of items, each at least `min_item_size` bytes: a count the rest of the
    /// snapshot cannot hold is corruption.
    pub fn count(&mut self, min_item_size: usize) -> Result<usize> {
        let n = self.u64()?;
        if n.saturating_mul(min_item_size.max(1) as u64) > self.bytes.len() as u64 {
            return Err(EddyError::Runtime(format!(
                "corrupt snapshot of {}: {n} items cannot fit in {} bytes",
                self.what,
                self.bytes.len()
            )));
        }
        Ok(n as usize)
    }

    /// Reads a signed integer.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// Reads a 128-bit signed integer.
    pub fn i128(&mut self) -> Result<i128> {
        Ok(i128::from_le_bytes(self.array()?))
    }

    /// Reads a float.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array()?))
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u64()?;
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Whether everything has been read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// CRC-32 (IEEE) of `bytes`, for snapshot checksums.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let mut w = StateWriter::new();
        w.u64(7).i64(-3).f64(2.5).bytes(b"key").i128(-9);
        let bytes = w.finish();
        let mut r = StateReader::new(&bytes, "test");
        assert_eq!(r.u64().unwrap(), 7);
        assert_eq!(r.i64().unwrap(), -3);
        assert_eq!(r.f64().unwrap(), 2.5);
        assert_eq!(r.bytes().unwrap(), b"key");
        assert_eq!(r.i128().unwrap(), -9);
        assert!(r.is_empty());
        let mut truncated = StateReader::new(&bytes[..10], "test");
        truncated.u64().unwrap();
        assert!(truncated.bytes().is_err());
        let mut huge = StateWriter::new();
        huge.u64(u64::MAX);
        assert!(StateReader::new(&huge.finish(), "test").count(1).is_err());
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
