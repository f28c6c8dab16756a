//! A Bloom filter over a run's keys: a `get` of a key the run does not hold reads no block
//! with probability ~99 % (10 bits and 7 probes per key).

/// Bits per key: about 1 % false positives with [`PROBES`].
const BITS_PER_KEY: usize = 10;
/// Probes per key.
const PROBES: u32 = 7;

/// A key's 64-bit hash, stable across builds and platforms (XXH3): it is stored in files.
pub(crate) fn hash(key: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(key)
}

/// The bit positions of a hash among `bits`, by double hashing.
fn probes(hash: u64, bits: u64) -> impl Iterator<Item = u64> {
    let (h1, h2) = (hash as u32 as u64, (hash >> 32) | 1);
    (0..u64::from(PROBES)).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % bits)
}

/// Builds a filter's bytes from the hashes of every key.
pub(crate) fn build(hashes: &[u64]) -> Vec<u8> {
    let bytes = (hashes.len() * BITS_PER_KEY).div_ceil(8).max(8);
    let mut filter = vec![0u8; bytes];
    let bits = (bytes * 8) as u64;
    for hash in hashes {
        for bit in probes(*hash, bits) {
            filter[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
    filter
}

/// Whether the filter may hold a key of `hash` (false: it certainly does not).
pub(crate) fn may_contain(filter: &[u8], hash: u64) -> bool {
    if filter.is_empty() {
        return true;
    }
    let bits = (filter.len() * 8) as u64;
    probes(hash, bits).all(|bit| filter[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_every_key_and_few_others() {
        let keys: Vec<Vec<u8>> = (0..10_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let filter = build(&keys.iter().map(|k| hash(k)).collect::<Vec<_>>());
        assert!(keys.iter().all(|k| may_contain(&filter, hash(k))));
        let false_positives = (10_000..110_000u32)
            .filter(|i| may_contain(&filter, hash(&i.to_be_bytes())))
            .count();
        assert!(false_positives < 2_000, "{false_positives} of 100000");
    }
}
