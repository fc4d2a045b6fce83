//! Edge-list checksums and summaries, as `summary_by_scale.txt` of the Graph500 test
//! vectors defines them, so a generated or loaded list can be compared with the
//! reference without storing its edges.
//!
//! The checksum is 64-bit FNV-1a (offset basis `cbf29ce484222325`, prime
//! `100000001b3`, xor then multiply per byte) over the edges in index order, each fed
//! as `u` (8 bytes little-endian), `v` (8 bytes LE) and the weight's binary32 bit
//! pattern (4 bytes LE). An **unweighted** list is hashed with weight 1.0 (bits
//! `3f800000`) on every edge, the weight [`EdgeList::weight`] reports, so it hashes
//! like the same list with explicit weights 1.0.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::graph::EdgeList;

/// FNV-1a 64-bit offset basis.
pub const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

#[inline(always)]
fn fnv_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// FNV-1a 64 of the edge list (see the module docs for the byte layout).
pub fn fnv1a64_edges(el: &EdgeList) -> u64 {
    let mut h = FNV_OFFSET_BASIS;
    for k in 0..el.len() {
        h = fnv_bytes(h, &el.src[k].to_le_bytes());
        h = fnv_bytes(h, &el.dst[k].to_le_bytes());
        h = fnv_bytes(h, &el.weight(k).to_bits().to_le_bytes());
    }
    h
}

/// Counts and sums over an edge list, as in `summary_by_scale.txt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EdgeSummary {
    /// Number of edges (self-loops and repeats included).
    pub edges: u64,
    /// FNV-1a 64 checksum ([`fnv1a64_edges`]).
    pub fnv1a64: u64,
    /// Edges with `u == v`.
    pub selfloops: u64,
    /// Sum of the first endpoints.
    pub sum_u: u128,
    /// Sum of the second endpoints.
    pub sum_v: u128,
    /// Sum of the weights' binary32 bit patterns as unsigned integers (1.0's bits per
    /// edge when unweighted).
    pub sum_wbits: u128,
}

impl EdgeSummary {
    /// Summarizes `el` (the sums in parallel, the checksum alongside on one thread).
    pub fn of(el: &EdgeList) -> EdgeSummary {
        let (fnv1a64, (selfloops, sum_u, sum_v, sum_wbits)) = rayon::join(
            || fnv1a64_edges(el),
            || {
                (0..el.len())
                    .into_par_iter()
                    .with_min_len(1 << 14)
                    .fold(
                        || (0u64, 0u128, 0u128, 0u128),
                        |(s, a, b, w), k| {
                            let (u, v) = (el.src[k], el.dst[k]);
                            (
                                s + u64::from(u == v),
                                a + u128::from(u),
                                b + u128::from(v),
                                w + u128::from(el.weight(k).to_bits()),
                            )
                        },
                    )
                    .reduce(|| (0, 0, 0, 0), |x, y| (x.0 + y.0, x.1 + y.1, x.2 + y.2, x.3 + y.3))
            },
        );
        EdgeSummary { edges: el.len() as u64, fnv1a64, selfloops, sum_u, sum_v, sum_wbits }
    }
}

/// Vertices with at least one incident non-self-loop edge.
///
/// # Panics
/// If an endpoint is `>= el.num_vertices`.
pub fn nonisolated_vertices(el: &EdgeList) -> u64 {
    let words = usize::try_from(el.num_vertices.div_ceil(64)).expect("vertex count too large");
    let bits: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
    let set = |x: u64| {
        assert!(x < el.num_vertices, "endpoint {x} >= vertex count {}", el.num_vertices);
        bits[(x / 64) as usize].fetch_or(1 << (x % 64), Ordering::Relaxed);
    };
    (0..el.len()).into_par_iter().with_min_len(1 << 14).for_each(|k| {
        let (u, v) = (el.src[k], el.dst[k]);
        if u != v {
            set(u);
            set(v);
        }
    });
    bits.iter().map(|w| u64::from(w.load(Ordering::Relaxed).count_ones())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_of_known_bytes() {
        // FNV-1a 64 of "a" is af63dc4c8601ec8c (published test value).
        assert_eq!(fnv_bytes(FNV_OFFSET_BASIS, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64_edges(&EdgeList::default()), FNV_OFFSET_BASIS);
    }

    #[test]
    fn unweighted_hashes_as_weight_one() {
        let mut el = EdgeList {
            num_vertices: 4,
            src: vec![0, 1, 3],
            dst: vec![1, 1, 2],
            weights: Some(vec![1.0; 3]),
        };
        let weighted = EdgeSummary::of(&el);
        el.weights = None;
        let unweighted = EdgeSummary::of(&el);
        assert_eq!(weighted, unweighted);
        assert_eq!(unweighted.selfloops, 1);
        assert_eq!(unweighted.sum_u, 4);
        assert_eq!(unweighted.sum_v, 4);
        assert_eq!(unweighted.sum_wbits, 3 * 0x3f80_0000);
        assert_eq!(nonisolated_vertices(&el), 4);
    }
}
