//! Protobuf's wire format: varints, tags, and the four kinds of values a tag announces.

/// A field's wire type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// A varint (int32, int64, uint*, sint*, bool, enum).
    Varint,
    /// 8 bytes (fixed64, sfixed64, double).
    Fixed64,
    /// A length and as many bytes (string, bytes, messages, packed repeated fields).
    Delimited,
    /// The start of a group (proto2's deprecated groups).
    StartGroup,
    /// The end of a group.
    EndGroup,
    /// 4 bytes (fixed32, sfixed32, float).
    Fixed32,
}

impl WireType {
    fn of(bits: u64) -> Option<WireType> {
        Some(match bits {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Delimited,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::Fixed32,
            _ => return None,
        })
    }

    /// The wire type's number.
    pub fn number(self) -> u64 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::Delimited => 2,
            WireType::StartGroup => 3,
            WireType::EndGroup => 4,
            WireType::Fixed32 => 5,
        }
    }
}

/// A value read off the wire, its bytes left in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue {
    /// A varint.
    Varint(u64),
    /// Four bytes, little-endian.
    Fixed32(u32),
    /// Eight bytes, little-endian.
    Fixed64(u64),
    /// A length-delimited value: its range in the record.
    Delimited(usize, usize),
}

/// Reads a record's fields in order.
pub struct WireReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Why the bytes are not a message, and where (the byte offset in the record).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at byte {at}")]
pub struct WireError {
    /// What is wrong.
    pub message: String,
    /// The byte offset in the record.
    pub at: usize,
}

impl<'a> WireReader<'a> {
    /// A reader of `bytes[start..end]`, whose offsets are counted in `bytes`.
    pub fn new(bytes: &'a [u8], start: usize, end: usize) -> Self {
        WireReader {
            bytes: &bytes[..end],
            at: start,
        }
    }

    fn error(&self, message: impl Into<String>) -> WireError {
        WireError {
            message: message.into(),
            at: self.at,
        }
    }

    /// The next field's number, wire type and value; `None` at the end.
    pub fn next_field(&mut self) -> Result<Option<(u32, WireType, WireValue)>, WireError> {
        if self.at >= self.bytes.len() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 || number > u64::from(u32::MAX >> 3) {
            return Err(self.error(format!("field number {number} is not valid")));
        }
        let Some(wire_type) = WireType::of(tag & 7) else {
            return Err(self.error(format!("wire type {} is not valid", tag & 7)));
        };
        let value = match wire_type {
            WireType::StartGroup => {
                self.skip_group(number)?;
                return self.next_field();
            }
            WireType::EndGroup => {
                return Err(self.error(format!("an end of group {number} outside a group")));
            }
            other => self.value(other)?,
        };
        Ok(Some((number as u32, wire_type, value)))
    }

    /// The next value of a packed run of `wire_type` values; `None` at its end.
    pub fn next_packed(&mut self, wire_type: WireType) -> Result<Option<WireValue>, WireError> {
        match self.at >= self.bytes.len() {
            true => Ok(None),
            false => self.value(wire_type).map(Some),
        }
    }

    fn value(&mut self, wire_type: WireType) -> Result<WireValue, WireError> {
        Ok(match wire_type {
            WireType::Varint => WireValue::Varint(self.varint()?),
            WireType::Fixed32 => {
                let bytes = self.take(4)?;
                WireValue::Fixed32(u32::from_le_bytes(bytes.try_into().expect("4 bytes")))
            }
            WireType::Fixed64 => {
                let bytes = self.take(8)?;
                WireValue::Fixed64(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
            }
            WireType::Delimited => {
                let length = self.varint()?;
                let start = self.at;
                let length = usize::try_from(length).map_err(|_| self.error("a huge length"))?;
                self.take(length)?;
                WireValue::Delimited(start, start + length)
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(self.error("a group where a value was expected"));
            }
        })
    }

    /// Skips a group's fields up to its end tag.
    fn skip_group(&mut self, number: u64) -> Result<(), WireError> {
        loop {
            if self.at >= self.bytes.len() {
                return Err(self.error(format!("group {number} does not end")));
            }
            let tag = self.varint()?;
            match WireType::of(tag & 7) {
                Some(WireType::EndGroup) if tag >> 3 == number => return Ok(()),
                Some(WireType::EndGroup) => {
                    return Err(self.error(format!("group {number} ends with another's end")));
                }
                Some(WireType::StartGroup) => self.skip_group(tag >> 3)?,
                Some(other) => {
                    self.value(other)?;
                }
                None => return Err(self.error(format!("wire type {} is not valid", tag & 7))),
            }
        }
    }

    fn take(&mut self, length: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(length)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| {
                self.error(format!(
                    "a value of {length} bytes runs past the end ({} bytes left)",
                    self.bytes.len() - self.at
                ))
            })?;
        let bytes = &self.bytes[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(byte) = self.bytes.get(self.at) else {
                return Err(self.error("a varint runs past the end"));
            };
            self.at += 1;
            if shift == 63 && *byte > 1 {
                return Err(self.error("a varint of more than 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("a varint of more than 10 bytes"))
    }
}

/// Appends `value` as a varint.
pub fn put_varint(out: &mut Vec<u8>, value: u64) {
    let (bytes, size) = varint_bytes(value);
    out.extend_from_slice(&bytes[..size]);
}

/// `value` as a varint: its bytes, and how many of them there are.
pub fn varint_bytes(mut value: u64) -> ([u8; 10], usize) {
    let mut bytes = [0u8; 10];
    let mut size = 0;
    while value >= 0x80 {
        bytes[size] = (value as u8) | 0x80;
        value >>= 7;
        size += 1;
    }
    bytes[size] = value as u8;
    (bytes, size + 1)
}

/// Appends a field's tag.
pub fn put_tag(out: &mut Vec<u8>, number: u32, wire_type: WireType) {
    put_varint(out, (u64::from(number) << 3) | wire_type.number());
}

/// Appends a length-delimited value.
pub fn put_delimited(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(out, number, WireType::Delimited);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// ZigZag-decodes a 64-bit value (sint64).
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// ZigZag-decodes a 32-bit value (sint32).
pub fn unzigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// ZigZag-encodes a 64-bit value.
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// ZigZag-encodes a 32-bit value.
pub fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put_tag(&mut out, 1, WireType::Varint);
            put_varint(&mut out, v);
            let mut reader = WireReader::new(&out, 0, out.len());
            let field = reader.next_field().unwrap().unwrap();
            assert_eq!(field, (1, WireType::Varint, WireValue::Varint(v)));
            assert_eq!(reader.next_field().unwrap(), None);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag64(zigzag64(v)), v);
        }
        for v in [0i32, -1, 1, i32::MIN, i32::MAX] {
            assert_eq!(unzigzag32(zigzag32(v)), v);
        }
    }

    #[test]
    fn groups_are_skipped_and_bad_bytes_named() {
        // Field 2 a group holding field 1 = 5, then field 3 = 7.
        let bytes = [0x13, 0x08, 0x05, 0x14, 0x18, 0x07];
        let mut reader = WireReader::new(&bytes, 0, bytes.len());
        let field = reader.next_field().unwrap().unwrap();
        assert_eq!(field, (3, WireType::Varint, WireValue::Varint(7)));
        let cut = [0x0a, 0x05, b'a'];
        let error = WireReader::new(&cut, 0, cut.len())
            .next_field()
            .unwrap_err();
        assert_eq!(error.at, 2);
        assert!(error.message.contains("5 bytes runs past the end"));
        let long = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert!(WireReader::new(&long, 0, long.len()).next_field().is_err());
    }
}
