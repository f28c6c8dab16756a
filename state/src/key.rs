//! How operator state is keyed in a store: key group first, then the table the operator
//! declared, then the operator's own key bytes. Sorting by key group first makes a
//! subtask's share of the state after a rescale (a range of key groups) a range of keys.

use std::ops::Range;

/// Bytes before the operator's key: key group (2, big-endian) and table (1).
pub const PREFIX_LEN: usize = 3;

/// Key groups a store can hold: a job's maximum parallelism must not exceed it.
pub const MAX_KEY_GROUPS: usize = 1 << 16;

/// Writes the state key of `key` in `table` of `key_group` into `out` (cleared first).
pub fn encode(key_group: u16, table: u8, key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(PREFIX_LEN + key.len());
    out.extend_from_slice(&key_group.to_be_bytes());
    out.push(table);
    out.extend_from_slice(key);
}

/// The key group, table and operator key of a state key; `None` for bytes too short to be
/// one.
pub fn decode(state_key: &[u8]) -> Option<(u16, u8, &[u8])> {
    let (prefix, key) = state_key.split_at_checked(PREFIX_LEN)?;
    Some((u16::from_be_bytes([prefix[0], prefix[1]]), prefix[2], key))
}

/// The state keys `key_groups` occupy: from the first key of the first group to the first
/// key after the last (`None` when they run to the last group a store can hold).
pub fn key_group_bounds(key_groups: &Range<usize>) -> (Vec<u8>, Option<Vec<u8>>) {
    let bound = |group: usize| u16::try_from(group).ok().map(|g| g.to_be_bytes().to_vec());
    let start = bound(key_groups.start).unwrap_or_else(|| vec![0xff; PREFIX_LEN]);
    (start, bound(key_groups.end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_key_group_then_table_then_key() {
        let key = |group, table, key: &[u8]| {
            let mut out = Vec::new();
            encode(group, table, key, &mut out);
            out
        };
        let mut keys = [
            key(2, 0, b"a"),
            key(1, 1, b""),
            key(1, 0, b"zz"),
            key(256, 0, b"a"),
            key(1, 0, b"b"),
        ];
        keys.sort();
        let decoded: Vec<_> = keys.iter().map(|k| decode(k).unwrap()).collect();
        assert_eq!(
            decoded,
            [
                (1, 0, &b"b"[..]),
                (1, 0, b"zz"),
                (1, 1, b""),
                (2, 0, b"a"),
                (256, 0, b"a")
            ]
        );
        assert_eq!(decode(b"ab"), None);
        let (start, end) = key_group_bounds(&(1..256));
        assert!(keys[0] >= start && keys[3] < end.clone().unwrap() && keys[4] >= end.unwrap());
        assert_eq!(key_group_bounds(&(300..MAX_KEY_GROUPS)).1, None);
    }
}
