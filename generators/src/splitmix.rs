//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
//! 2014): the small deterministic generator of the benchmarks and the tests, one definition
//! for the workspace. It is not the Graph500 generator (`prng.rs`, which the Kronecker graphs
//! and roots must reproduce bit for bit); use it where any well-mixed, seeded sequence does:
//! benchmark destinations and sequences, random test graphs.

/// A SplitMix64 generator: 64 bits of state, one addition and two multiply-xorshifts a draw.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

/// The golden-ratio increment of the state.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

impl SplitMix64 {
    /// A generator whose state is `state`.
    pub fn from_state(state: u64) -> SplitMix64 {
        SplitMix64(state)
    }

    /// Stream `stream` of seed `seed`: different streams of one seed start far apart (for
    /// one generator per worker, fiber or rank).
    pub fn new(seed: u64, stream: u64) -> SplitMix64 {
        SplitMix64(seed ^ stream.wrapping_add(1).wrapping_mul(GAMMA))
    }

    /// The next 64 bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`; the modulo bias is below `n / 2^64`).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `[0, 1)` with 53 random bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn matches_the_published_sequence() {
        // The reference implementation's first outputs for state 0 (splitmix64.c).
        let mut g = SplitMix64::from_state(0);
        assert_eq!(g.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(g.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn streams_differ_and_draws_stay_in_range() {
        let (mut a, mut b) = (SplitMix64::new(7, 0), SplitMix64::new(7, 1));
        assert_ne!(a.next_u64(), b.next_u64());
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
            let u = b.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
