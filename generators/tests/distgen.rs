//! Each rank's share of a Kronecker graph: edge ranges against the Graph500 reference
//! vectors, and rank-local CSRs (built by the in-memory simulation of several ranks)
//! against the single-process CSR.

mod common;

use skein_generators::kronecker::{self, KroneckerParams};

/// Any edge range of SCALE 10 equals the same lines of the reference file, weights
/// included (bit for bit), whatever the cut: lane-width and block boundaries alike.
#[test]
fn edge_ranges_match_the_reference_scale_10() {
    let want = common::edges(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let m = p.num_edges();
    assert_eq!(want.len() as u64, m);
    let ranges = [
        (0, 1),
        (0, 0),
        (3, 11),
        (7, 8),
        (5, 5000),
        (8191, 8193),
        (m / 3, 2 * m / 3),
        (m - 9, m),
        (12_345, m),
    ];
    for (lo, hi) in ranges {
        let el = kronecker::generate_range(&p, lo..hi);
        assert_eq!(el.len() as u64, hi - lo, "range {lo}..{hi}");
        assert_eq!(el.num_vertices, 1 << 10);
        let w = el.weights.as_ref().expect("generated lists are weighted");
        for i in 0..el.len() {
            let k = lo as usize + i;
            assert_eq!((el.src[i], el.dst[i], w[i].to_bits()), want[k], "edge {k} of {lo}..{hi}");
        }
    }
    // The rank shares of 3 ranks cover the file exactly, in order.
    let mut joined = Vec::new();
    for r in 0..3u64 {
        let el = kronecker::generate_range(&p, r * m / 3..(r + 1) * m / 3);
        let w = el.weights.unwrap();
        joined.extend((0..el.src.len()).map(|i| (el.src[i], el.dst[i], w[i].to_bits())));
    }
    assert_eq!(joined, want);
}
