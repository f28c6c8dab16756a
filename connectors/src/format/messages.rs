//! Records of a format that frames its own records (Avro's binary records), kept back to
//! back in one buffer with where each ends: any byte may be in a record, so records are
//! never joined into lines.

use eddy_common::Result;
use eddy_common::state::{StateReader, StateWriter};

/// Whole records, in order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Messages {
    bytes: Vec<u8>,
    /// The end of each record in `bytes`.
    ends: Vec<usize>,
}

impl Messages {
    /// Adds a record.
    pub fn push(&mut self, record: &[u8]) {
        self.bytes.extend_from_slice(record);
        self.ends.push(self.bytes.len());
    }

    /// Adds a record that is `prefix` followed by `record`.
    pub fn push_prefixed(&mut self, prefix: &[u8], record: &[u8]) {
        self.bytes.extend_from_slice(prefix);
        self.push(record);
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of all records.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Forgets every record.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// The records, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        (0..self.ends.len()).map(|i| {
            let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
            &self.bytes[start..self.ends[i]]
        })
    }

    /// Writes the records into a snapshot.
    pub fn save(&self, out: &mut StateWriter) {
        out.u64(self.len() as u64);
        for record in self.iter() {
            out.bytes(record);
        }
    }

    /// Reads records written by [`Messages::save`].
    pub fn load(input: &mut StateReader<'_>) -> Result<Messages> {
        let mut out = Messages::default();
        for _ in 0..input.count(8)? {
            out.push(input.bytes()?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_any_bytes_round_trip_through_a_snapshot() {
        let mut messages = Messages::default();
        messages.push(b"a\nb");
        messages.push(b"");
        messages.push_prefixed(&[0, 0], &[0xff, b'\n']);
        assert_eq!(messages.len(), 3);
        let records: Vec<&[u8]> = messages.iter().collect();
        assert_eq!(records, vec![&b"a\nb"[..], b"", &[0, 0, 0xff, b'\n']]);
        let mut out = StateWriter::new();
        messages.save(&mut out);
        let bytes = out.finish();
        let mut input = StateReader::new(&bytes, "test messages");
        assert_eq!(Messages::load(&mut input).unwrap(), messages);
    }
}
