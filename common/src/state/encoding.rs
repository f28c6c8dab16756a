//! A compact, versioned binary encoding of snapshot state, read with bounds checks so a
//! corrupt or truncated snapshot is an error, never a panic or a huge allocation.

use crate::{EddyError, Result};

/// Appends values to a snapshot buffer: fixed-width little-endian integers, or — once
/// [`StateWriter::compact`] — LEB128 varints (zigzag for signed ones), which roughly halve
/// a state of small numbers and short keys.
#[derive(Debug, Default)]
pub struct StateWriter {
    bytes: Vec<u8>,
    compact: bool,
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
            compact: false,
        }
    }

    /// Writes integers and lengths as varints from here on.
    pub fn compact(&mut self) -> &mut Self {
        self.compact = true;
        self
    }

    /// Appends an unsigned integer.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        match self.compact {
            true => {
                let mut v = v;
                while v >= 0x80 {
                    self.bytes.push((v as u8) | 0x80);
                    v >>= 7;
                }
                self.bytes.push(v as u8);
            }
            false => self.bytes.extend_from_slice(&v.to_le_bytes()),
        }
        self
    }

    /// Appends a signed integer.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        match self.compact {
            true => self.u64(((v << 1) ^ (v >> 63)) as u64),
            false => {
                self.bytes.extend_from_slice(&v.to_le_bytes());
                self
            }
        }
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
    compact: bool,
}

impl<'a> StateReader<'a> {
    /// Reads `bytes`; `what` names the snapshot in errors.
    pub fn new(bytes: &'a [u8], what: &'a str) -> Self {
        StateReader {
            bytes,
            what,
            compact: false,
        }
    }

    /// Reads integers and lengths as varints from here on (see [`StateWriter::compact`]).
    pub fn compact(&mut self) -> &mut Self {
        self.compact = true;
        self
    }

    fn corrupt(&self, problem: &str) -> EddyError {
        EddyError::Snapshot(format!("corrupt snapshot of {}: {problem}", self.what))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(EddyError::Snapshot(format!(
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
        if !self.compact {
            return Ok(u64::from_le_bytes(self.array()?));
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let [byte] = self.array::<1>()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.corrupt("a varint longer than 64 bits"))
    }

    /// Reads a count of items, each at least `min_item_size` bytes (fixed-width; at least
    /// one byte when compact): a count the rest of the snapshot cannot hold is corruption.
    pub fn count(&mut self, min_item_size: usize) -> Result<usize> {
        let n = self.u64()?;
        let min_item_size = if self.compact { 1 } else { min_item_size };
        if n.saturating_mul(min_item_size.max(1) as u64) > self.bytes.len() as u64 {
            return Err(EddyError::Snapshot(format!(
                "corrupt snapshot of {}: {n} items cannot fit in {} bytes",
                self.what,
                self.bytes.len()
            )));
        }
        Ok(n as usize)
    }

    /// Reads a signed integer.
    pub fn i64(&mut self) -> Result<i64> {
        if !self.compact {
            return Ok(i64::from_le_bytes(self.array()?));
        }
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
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
    fn compact_round_trip_and_corruption() {
        let values = [0i64, 1, -1, 63, -64, 64, 300, i64::MAX, i64::MIN];
        let mut w = StateWriter::new();
        w.u64(2).compact();
        for v in values {
            w.i64(v).u64(v as u64);
        }
        w.bytes(b"key").f64(1.5);
        let bytes = w.finish();
        let mut r = StateReader::new(&bytes, "test");
        assert_eq!(r.u64().unwrap(), 2);
        r.compact();
        for v in values {
            assert_eq!(r.i64().unwrap(), v);
            assert_eq!(r.u64().unwrap(), v as u64);
        }
        assert_eq!(r.bytes().unwrap(), b"key");
        assert_eq!(r.f64().unwrap(), 1.5);
        assert!(r.is_empty());
        // Small numbers take one byte; a varint that never ends is corruption.
        let mut small = StateWriter::new();
        small.compact().u64(5).i64(-3);
        assert_eq!(small.finish(), vec![5, 5]);
        let endless = [0xffu8; 11];
        assert!(StateReader::new(&endless, "test").compact().u64().is_err());
        assert!(StateReader::new(&[0x80], "test").compact().u64().is_err());
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }
}
