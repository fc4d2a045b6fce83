//! Vertex partitioning: which trustee owns a vertex, and at which local index.
//!
//! Vertices are split into contiguous blocks of global ids, one block per trustee (see
//! `crate::engine` for how trustees use them, and `docs/ARCHITECTURE.md`). Graph500 ids are already scrambled by the generator, so contiguous
//! blocks are balanced in edges as well as in vertices.
//!
//! The owner function is one multiply: `owner(v) = (v * m) >> 64` with
//! `m = floor(2^64 * parts / n)` (128-bit arithmetic). It never decreases as `v` grows
//! and stays below `parts` for every `v < n` (since `(n - 1) * m < 2^64 * parts`), so it
//! defines contiguous blocks; their first vertices are found once, at construction, by
//! binary search. It differs from the exact `floor(v * parts / n)` only where that
//! quotient is within `v / 2^64` of an integer, so block sizes are within 2 of `n / parts`.
//! The local index is `v - start[owner]`.

use std::ops::Range;

/// The mapping vertex → (part, local index) for `num_vertices` vertices over `parts` parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    num_vertices: u64,
    multiplier: u128,
    /// `multiplier` when it fits in 64 bits (whenever `parts <= num_vertices`): the
    /// owner is then one 64x64 -> 128-bit multiply, the hot path of every kernel.
    multiplier64: Option<u64>,
    /// `starts[p]` is the first vertex of part `p`; `starts[parts] == num_vertices`.
    starts: Vec<u64>,
}

impl Partitioning {
    /// Splits `num_vertices` vertices into `parts` contiguous blocks (`parts >= 1`).
    ///
    /// # Panics
    /// If `parts` is 0, or a part would hold more than `u32::MAX` vertices (local
    /// indices are `u32`).
    pub fn new(num_vertices: u64, parts: usize) -> Partitioning {
        assert!(parts >= 1, "a partitioning needs at least one part");
        let multiplier =
            if num_vertices == 0 { 0 } else { ((parts as u128) << 64) / num_vertices as u128 };
        let owner = |v: u64| ((v as u128 * multiplier) >> 64) as usize;
        let mut starts = Vec::with_capacity(parts + 1);
        for p in 0..parts {
            // First v with owner(v) >= p.
            let (mut lo, mut hi) = (0u64, num_vertices);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if owner(mid) >= p {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            starts.push(lo);
        }
        starts.push(num_vertices);
        let multiplier64 = u64::try_from(multiplier).ok();
        let p = Partitioning { num_vertices, multiplier, multiplier64, starts };
        for part in 0..parts {
            assert!(
                p.range(part).end - p.range(part).start <= u32::MAX as u64,
                "part {part} would hold more than 2^32 - 1 vertices: use more parts"
            );
        }
        p
    }

    /// Number of parts.
    pub fn parts(&self) -> usize {
        self.starts.len() - 1
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> u64 {
        self.num_vertices
    }

    /// The part that owns `v`.
    #[inline]
    pub fn owner(&self, v: u64) -> usize {
        match self.multiplier64 {
            Some(m) => ((v as u128 * m as u128) >> 64) as usize,
            None => ((v as u128 * self.multiplier) >> 64) as usize,
        }
    }

    /// `(part, local index)` of `v`.
    #[inline]
    pub fn locate(&self, v: u64) -> (usize, u32) {
        let p = self.owner(v);
        (p, (v - self.starts[p]) as u32)
    }

    /// The global ids owned by `part`.
    pub fn range(&self, part: usize) -> Range<u64> {
        self.starts[part]..self.starts[part + 1]
    }

    /// Number of vertices owned by `part`.
    pub fn len(&self, part: usize) -> u32 {
        (self.starts[part + 1] - self.starts[part]) as u32
    }

    /// True when there are no vertices at all.
    pub fn is_empty(&self) -> bool {
        self.num_vertices == 0
    }

    /// The global id of local index `local` of `part`.
    #[inline]
    pub fn global(&self, part: usize, local: u32) -> u64 {
        self.starts[part] + local as u64
    }
}

/// Bounds of each rank's vertex range when every rank runs `workers` workers: rank `r`
/// owns the partitions `r·W .. (r+1)·W` of `Partitioning::new(num_vertices, ranks·workers)`,
/// which are contiguous; returns `ranks + 1` entries (`bounds[r]..bounds[r + 1]` is rank
/// `r`'s range). These are the bounds `skein_generators::distributed` builds each rank's
/// rows for, and the ranges `Engine::from_local` expects.
///
/// # Panics
/// If `ranks` or `workers` is 0 (as [`Partitioning::new`] with 0 parts).
pub fn rank_bounds(num_vertices: u64, ranks: usize, workers: usize) -> Vec<u64> {
    let p = Partitioning::new(num_vertices, ranks * workers);
    let mut b: Vec<u64> = (0..ranks).map(|r| p.range(r * workers).start).collect();
    b.push(num_vertices);
    b
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_bounds_are_the_first_vertices_of_each_ranks_parts() {
        for (n, ranks, workers) in [(0u64, 1usize, 1usize), (10, 3, 2), (1000, 4, 1), (5, 7, 1)] {
            let b = rank_bounds(n, ranks, workers);
            let p = Partitioning::new(n, ranks * workers);
            assert_eq!(b.len(), ranks + 1);
            assert_eq!((b[0], b[ranks]), (0, n));
            for r in 0..ranks {
                assert_eq!(
                    b[r]..b[r + 1],
                    p.range(r * workers).start..p.range((r + 1) * workers - 1).end
                );
            }
        }
    }

    use super::*;

    fn check(n: u64, parts: usize) {
        let p = Partitioning::new(n, parts);
        assert_eq!(p.parts(), parts);
        let mut total = 0u64;
        for part in 0..parts {
            let r = p.range(part);
            total += r.end - r.start;
            for v in r.clone() {
                assert_eq!(p.locate(v), (part, (v - r.start) as u32), "n={n} parts={parts} v={v}");
                assert_eq!(p.global(part, (v - r.start) as u32), v);
            }
        }
        assert_eq!(total, n);
        if n >= parts as u64 {
            let sizes: Vec<u64> = (0..parts).map(|q| p.len(q) as u64).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 2, "unbalanced: {sizes:?}");
        }
    }

    #[test]
    fn every_vertex_has_exactly_one_owner() {
        for n in [0, 1, 2, 3, 7, 64, 100, 1000, 1024, 4099] {
            for parts in [1, 2, 3, 4, 5, 7, 16] {
                check(n, parts);
            }
        }
    }

    #[test]
    fn large_graphs_split_evenly() {
        let p = Partitioning::new(1 << 30, 3);
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner((1 << 30) - 1), 2);
        let l: Vec<u32> = (0..3).map(|q| p.len(q)).collect();
        assert!(l.iter().max().unwrap() - l.iter().min().unwrap() <= 2, "{l:?}");
    }
}
