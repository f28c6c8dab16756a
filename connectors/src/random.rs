//! A small, fast, seedable generator: the same seed gives the same values on any machine.

/// SplitMix64: one 64-bit state, good statistical quality, no allocation.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// A generator for one item of a stream, independent of the others.
    pub fn for_item(seed: u64, item: u64) -> Self {
        let mut g = SplitMix64::new(seed ^ item.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        g.next_u64();
        g
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// A value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_values_and_bounds_hold() {
        let a: Vec<u64> = (0..5)
            .map(|i| SplitMix64::for_item(7, i).next_u64())
            .collect();
        let b: Vec<u64> = (0..5)
            .map(|i| SplitMix64::for_item(7, i).next_u64())
            .collect();
        assert_eq!(a, b);
        let mut g = SplitMix64::new(1);
        assert!((0..1000).all(|_| g.below(10) < 10));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&g.unit())));
    }
}
