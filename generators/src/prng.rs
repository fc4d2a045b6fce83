//! The Graph500 random number generator: a multiple recursive generator (MRG) over
//! GF(p), p = 2^31 - 1, with a five-word state.
//!
//! One step maps `(z1, z2, z3, z4, z5)` to `(new, z1, z2, z3, z4)` with
//! `new = (107374182 z1 + 104480 z5) mod p`, and outputs `new`. The step is linear, so
//! it is the 5x5 matrix [`Matrix::step`] over GF(p) and advancing by `k` steps is a
//! multiplication by `A^k`. The generator cuts three streams from the seeded base
//! state `S0` (see `GENERATOR.md` beside the test vectors):
//!
//! - edge `k`: `A^(k * 2^64) S0`, computed by [`Jumps::edge_state`] from precomputed
//!   powers of `A^(2^64)` (one matrix-vector product per non-zero hex digit of `k`), or
//!   by [`Jumps::next_edge_state`] from edge `k - 1`'s state (one product);
//! - scramble keys: `A^(50 * 2^128 + 7 * 2^64) S0`;
//! - search roots: `A^(2 * 2^128) S0`.
//!
//! All arithmetic is exact integer arithmetic mod p: every product of two residues is
//! below 2^62 and is folded back below p without division.

use std::sync::OnceLock;

/// The field prime 2^31 - 1.
pub(crate) const P: u64 = 0x7FFF_FFFF;
/// First coefficient of the recurrence (multiplies z1).
const A1: u64 = 107_374_182;
/// Last coefficient of the recurrence (multiplies z5).
const A5: u64 = 104_480;

/// Edges generated side by side: independent streams kept as a structure of arrays
/// ([`MrgLanes`]) so that the compiler turns the lane loops into SIMD instructions
/// (and, without SIMD, interleaves the dependent multiply-reduce chains).
pub(crate) const LANES: usize = 8;

/// Hex digits of an edge index covered by the jump tables: 13 digits = 52 bits, more
/// than the largest supported edge count (2^50).
const EDGE_DIGITS: usize = 13;

/// Reduces `x < 2^63` modulo p.
#[inline(always)]
fn reduce(x: u64) -> u64 {
    // x = hi * 2^31 + lo and 2^31 = 1 (mod p), so x = hi + lo (mod p).
    let t = (x & P) + (x >> 31); // < 2^31 + 2^32
    let t = (t & P) + (t >> 31); // <= p + 2
    if t >= P {
        t - P
    } else {
        t
    }
}

/// A 5x5 matrix over GF(p), entries in `[0, p)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Matrix([[u64; 5]; 5]);

impl Matrix {
    /// The identity.
    pub(crate) fn identity() -> Matrix {
        let mut m = [[0; 5]; 5];
        for (i, row) in m.iter_mut().enumerate() {
            row[i] = 1;
        }
        Matrix(m)
    }

    /// The one-step matrix A.
    pub(crate) fn step() -> Matrix {
        let mut m = [[0; 5]; 5];
        m[0][0] = A1;
        m[0][4] = A5;
        for i in 1..5 {
            m[i][i - 1] = 1;
        }
        Matrix(m)
    }

    /// `self * other`.
    pub(crate) fn mul(&self, other: &Matrix) -> Matrix {
        let mut out = [[0; 5]; 5];
        for (i, row) in out.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                let mut s = 0u64;
                for l in 0..5 {
                    // Each reduced product is < p, so five of them fit easily.
                    s += reduce(self.0[i][l] * other.0[l][j]);
                }
                *cell = reduce(s);
            }
        }
        Matrix(out)
    }

    /// `self^(2^k)` by `k` squarings.
    pub(crate) fn pow2k(&self, k: u32) -> Matrix {
        let mut m = *self;
        for _ in 0..k {
            m = m.mul(&m);
        }
        m
    }

    /// `self^e` by square and multiply.
    pub(crate) fn pow(&self, mut e: u64) -> Matrix {
        let mut result = Matrix::identity();
        let mut base = *self;
        while e != 0 {
            if e & 1 == 1 {
                result = result.mul(&base);
            }
            base = base.mul(&base);
            e >>= 1;
        }
        result
    }

    /// `self * s`.
    #[inline(always)]
    pub(crate) fn apply(&self, s: &MrgState) -> MrgState {
        let z = s.z.map(u64::from);
        let mut out = [0u32; 5];
        for (i, o) in out.iter_mut().enumerate() {
            let r = &self.0[i];
            // Each term: product < 2^62, folded once to < 2^32; the sum stays < 2^35.
            let fold = |x: u64| (x & P) + (x >> 31);
            let s = fold(r[0] * z[0])
                + fold(r[1] * z[1])
                + fold(r[2] * z[2])
                + fold(r[3] * z[3])
                + fold(r[4] * z[4]);
            *o = reduce(s) as u32;
        }
        MrgState { z: out }
    }
}

/// The generator state `(z1, z2, z3, z4, z5)`, each word in `[0, p)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MrgState {
    /// `z[0]` is z1 (the latest output), `z[4]` is z5 (the oldest).
    pub(crate) z: [u32; 5],
}

impl MrgState {
    /// The base state S0 made from the two 64-bit user seeds.
    pub(crate) fn from_seeds(s1: u64, s2: u64) -> MrgState {
        let m = (1u64 << 30) - 1;
        let z = [
            (s1 & m) + 1,
            ((s1 >> 30) & m) + 1,
            (s2 & m) + 1,
            ((s2 >> 30) & m) + 1,
            ((s2 >> 60) << 4) + (s1 >> 60) + 1,
        ];
        MrgState { z: z.map(|w| w as u32) }
    }

    /// One step; returns the new z1, in `[0, p)`.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> u32 {
        let z = &mut self.z;
        // 107374182 * z1 < 2^58 and 104480 * z5 < 2^48: no overflow before reduction.
        let x = A1 * u64::from(z[0]) + A5 * u64::from(z[4]);
        let t = (x & P) + (x >> 31); // < 2^31 + 2^28 < 2p
        let new = if t >= P { t - P } else { t } as u32;
        *z = [new, z[0], z[1], z[2], z[3]];
        new
    }
}

/// `LANES` generator states side by side: `z[w][l]` is word `w` (z1..z5) of lane `l`.
///
/// Every operation is an element-wise loop over the lanes with the same arithmetic as
/// [`MrgState`], values kept in `u64` below 2^31 so products map to 32x32->64-bit SIMD
/// multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MrgLanes {
    z: [[u64; LANES]; 5],
}

/// `x mod p` for `x < 2^35`: one fold leaves `t < 2^31 + 2^4 < 2p`.
#[inline(always)]
fn reduce_small(x: u64) -> u64 {
    let t = (x & P) + (x >> 31); // < 2^31 + 2^4
    if t >= P {
        t - P
    } else {
        t
    }
}

impl MrgLanes {
    /// Lanes holding `states`.
    pub(crate) fn new(states: &[MrgState; LANES]) -> MrgLanes {
        let mut z = [[0; LANES]; 5];
        for (l, s) in states.iter().enumerate() {
            for (row, &word) in z.iter_mut().zip(&s.z) {
                row[l] = u64::from(word);
            }
        }
        MrgLanes { z }
    }

    /// The state of lane `l`.
    pub(crate) fn lane(&self, l: usize) -> MrgState {
        MrgState { z: std::array::from_fn(|w| self.z[w][l] as u32) }
    }

    /// Replaces the state of lane `l`.
    pub(crate) fn set_lane(&mut self, l: usize, s: &MrgState) {
        for w in 0..5 {
            self.z[w][l] = u64::from(s.z[w]);
        }
    }

    /// One step of every lane; returns the outputs.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> [u64; LANES] {
        let mut new = [0u64; LANES];
        for (l, n) in new.iter_mut().enumerate() {
            // The masks tell the compiler the factors fit in 32 bits.
            let x = A1 * (self.z[0][l] & 0xFFFF_FFFF) + A5 * (self.z[4][l] & 0xFFFF_FFFF);
            let t = (x & P) + (x >> 31); // < 2^31 + 2^28 < 2p
            *n = if t >= P { t - P } else { t };
        }
        self.z = [new, self.z[0], self.z[1], self.z[2], self.z[3]];
        new
    }

    /// Every lane multiplied by `m`.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // one index into several arrays vectorizes best
    pub(crate) fn apply(&mut self, m: &Matrix) {
        let z = self.z;
        for i in 0..5 {
            let r = &m.0[i];
            for l in 0..LANES {
                // Each term: product < 2^62 folded to < 2^32; the sum stays < 2^35.
                let fold = |a: u64, b: u64| {
                    let x = a * (b & 0xFFFF_FFFF);
                    (x & P) + (x >> 31)
                };
                let s = fold(r[0], z[0][l])
                    + fold(r[1], z[1][l])
                    + fold(r[2], z[2][l])
                    + fold(r[3], z[3][l])
                    + fold(r[4], z[4][l]);
                self.z[i][l] = reduce_small(s);
            }
        }
    }
}

/// Precomputed jump matrices, built once per process.
#[derive(Debug)]
pub(crate) struct Jumps {
    /// `A^(2^64)`: from edge k's stream to edge k+1's.
    edge_step: Matrix,
    /// `A^(LANES * 2^64)`: from edge k's stream to edge k+LANES's.
    edge_step_lanes: Matrix,
    /// `edge_digits[i][d - 1] = A^(d * 16^i * 2^64)` for `d` in 1..=15.
    edge_digits: Vec<[Matrix; 15]>,
    /// `A^(50 * 2^128 + 7 * 2^64)`.
    scramble: Matrix,
    /// `A^(2 * 2^128)`.
    roots: Matrix,
}

impl Jumps {
    fn compute() -> Jumps {
        let a64 = Matrix::step().pow2k(64);
        let a128 = a64.pow2k(64);
        let mut edge_digits = Vec::with_capacity(EDGE_DIGITS);
        let mut base = a64; // A^(16^i * 2^64)
        for _ in 0..EDGE_DIGITS {
            let mut row = [Matrix::identity(); 15];
            let mut m = base;
            for cell in row.iter_mut() {
                *cell = m;
                m = m.mul(&base);
            }
            edge_digits.push(row);
            base = base.pow2k(4);
        }
        Jumps {
            edge_step: a64,
            edge_step_lanes: a64.pow(LANES as u64),
            edge_digits,
            scramble: a128.pow(50).mul(&a64.pow(7)),
            roots: a128.pow(2),
        }
    }

    /// The stream of edge `k`: `A^(k * 2^64) s0`. `k` must be below 2^52.
    #[inline]
    pub(crate) fn edge_state(&self, s0: &MrgState, k: u64) -> MrgState {
        debug_assert!(k < 1 << (4 * EDGE_DIGITS));
        let mut s = *s0;
        let mut k = k;
        let mut i = 0;
        while k != 0 {
            let d = (k & 15) as usize;
            if d != 0 {
                s = self.edge_digits[i][d - 1].apply(&s);
            }
            k >>= 4;
            i += 1;
        }
        s
    }

    /// Edge `k + 1`'s stream from edge `k`'s.
    #[inline(always)]
    pub(crate) fn next_edge_state(&self, s: &MrgState) -> MrgState {
        self.edge_step.apply(s)
    }

    /// Edge `k + LANES`'s stream from edge `k`'s, for every lane.
    #[inline(always)]
    pub(crate) fn next_lane_states(&self, lanes: &mut MrgLanes) {
        lanes.apply(&self.edge_step_lanes)
    }

    /// The scramble-key stream.
    pub(crate) fn scramble_state(&self, s0: &MrgState) -> MrgState {
        self.scramble.apply(s0)
    }

    /// The search-root stream.
    pub(crate) fn root_state(&self, s0: &MrgState) -> MrgState {
        self.roots.apply(s0)
    }
}

/// The process-wide jump tables (computed on first use, in well under a millisecond).
pub(crate) fn jumps() -> &'static Jumps {
    static JUMPS: OnceLock<Jumps> = OnceLock::new();
    JUMPS.get_or_init(Jumps::compute)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_skip(s: &MrgState, steps: u64) -> MrgState {
        let mut s = *s;
        for _ in 0..steps {
            s.next();
        }
        s
    }

    #[test]
    fn reduce_is_mod_p() {
        for x in [0, 1, P - 1, P, P + 1, 2 * P, (1 << 62) - 1, (P - 1) * (P - 1), u64::MAX >> 1] {
            assert_eq!(reduce(x), x % P, "x = {x}");
        }
    }

    #[test]
    fn matrix_powers_match_stepping() {
        let s0 = MrgState::from_seeds(2, 3);
        for k in [0u64, 1, 2, 5, 17, 1000, 12345] {
            assert_eq!(Matrix::step().pow(k).apply(&s0), naive_skip(&s0, k), "k = {k}");
        }
        // A^(2^k) by squaring agrees with square-and-multiply.
        assert_eq!(Matrix::step().pow2k(10), Matrix::step().pow(1024));
    }

    #[test]
    fn edge_state_random_access_matches_sequential() {
        let j = jumps();
        let s0 = MrgState::from_seeds(2, 3);
        let mut s = s0;
        for k in 0..300u64 {
            assert_eq!(j.edge_state(&s0, k), s, "edge {k}");
            s = j.next_edge_state(&s);
        }
        // Lanes: stepping and advancing agree with the scalar state.
        let states: [MrgState; LANES] = std::array::from_fn(|l| j.edge_state(&s0, 3 + l as u64));
        let mut lanes = MrgLanes::new(&states);
        let mut scalar = states;
        for _ in 0..40 {
            let out = lanes.next();
            for l in 0..LANES {
                assert_eq!(out[l], u64::from(scalar[l].next()));
            }
        }
        let mut lanes = MrgLanes::new(&states);
        j.next_lane_states(&mut lanes);
        for l in 0..LANES {
            assert_eq!(lanes.lane(l), j.edge_state(&s0, 3 + (l + LANES) as u64));
        }
        lanes.set_lane(2, &s0);
        assert_eq!(lanes.lane(2), s0);
        // A large index: digits combine as powers of the same matrix.
        let k = 0x0003_0f00_1234_5678u64;
        let direct = j.edge_step.pow(k).apply(&s0);
        assert_eq!(j.edge_state(&s0, k), direct);
    }
}
