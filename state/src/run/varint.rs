//! LEB128 variable-length integers, the lengths inside blocks and index entries.

/// Appends `value` in 1 to 10 bytes.
pub(crate) fn put(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Reads a value at `*pos`, moving `*pos` past it; `None` if the bytes end first or the
/// value does not fit 64 bits.
pub(crate) fn get(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return (shift < 63 || byte <= 1).then_some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_truncation_is_seen() {
        for value in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, value);
            let mut pos = 0;
            assert_eq!(get(&out, &mut pos), Some(value));
            assert_eq!(pos, out.len());
            let mut pos = 0;
            assert_eq!(get(&out[..out.len() - 1], &mut pos), None);
        }
        let mut pos = 0;
        assert_eq!(get(&[0xff; 10], &mut pos), None, "over 64 bits");
    }
}
