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
        for (i, wi) in w.iter().enumerate() {
            let k = lo as usize + i;
            assert_eq!((el.src[i], el.dst[i], wi.to_bits()), want[k], "edge {k} of {lo}..{hi}");
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

use skein_generators::distributed::{self, DistError, LocalCsr, DEFAULT_ROUND_EDGES};
use skein_generators::Csr;

/// Every rank's rows equal the same rows of the single-process CSR (same arcs, same order)
/// and the checksums add up.
fn check_simulation(p: &KroneckerParams, csr: &Csr, b: &[u64], round_edges: u64) {
    let locals = distributed::simulate(p, b, round_edges).unwrap();
    assert_eq!(locals.len(), b.len() - 1);
    let mut sum = 0u64;
    let mut arcs = 0;
    for (r, local) in locals.iter().enumerate() {
        assert_eq!(local.range(), b[r]..b[r + 1], "rank {r}");
        assert_eq!(local.num_vertices(), p.num_vertices());
        for v in local.range() {
            let got: Vec<_> = local.arcs(v).map(|(t, w)| (t, w.to_bits())).collect();
            let want: Vec<_> = csr.arcs(v).map(|(t, w)| (t, w.to_bits())).collect();
            assert_eq!(got, want, "vertex {v} on rank {r} of {b:?}, rounds of {round_edges}");
        }
        assert_eq!(*local, LocalCsr::from_csr(csr, b[r]..b[r + 1]));
        sum = sum.wrapping_add(local.checksum());
        arcs += local.num_arcs();
    }
    assert_eq!(arcs, csr.num_arcs());
    assert_eq!(sum, distributed::csr_checksum(csr));
}

#[test]
fn simulated_ranks_hold_the_single_process_rows() {
    for (scale, seeds) in [(10, (2, 3)), (12, (5, 9))] {
        let p = KroneckerParams::new(scale, 16, seeds.0, seeds.1).unwrap();
        let csr = Csr::from_edge_list(&kronecker::generate(&p));
        let n = p.num_vertices();
        for ranks in [1, 2, 3, 5] {
            for workers in [1, 3] {
                let b = common::bounds(n, ranks, workers);
                check_simulation(&p, &csr, &b, 1000);
            }
        }
        check_simulation(&p, &csr, &common::bounds(n, 4, 2), DEFAULT_ROUND_EDGES);
        check_simulation(&p, &csr, &common::bounds(n, 2, 2), 1);
    }
}

#[test]
fn uneven_and_empty_ranks() {
    let p = KroneckerParams::new(10, 4, 7, 1).unwrap();
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let n = p.num_vertices();
    check_simulation(&p, &csr, &[0, 0, 10, 10, 1000, n], 333);
    check_simulation(&p, &csr, &[0, n, n], 100);
    check_simulation(&p, &csr, &[0, 0, n], 4096);
}

#[test]
fn bad_arguments_are_errors() {
    let p = KroneckerParams::new(8, 16, 2, 3).unwrap();
    let n = p.num_vertices();
    let bad = |b: &[u64], round: u64| distributed::simulate(&p, b, round).unwrap_err();
    for b in [&[0, 10][..], &[1, 100, n], &[0, 100, n - 1], &[0, 200, 100, n], &[0]] {
        let e = bad(b, 100);
        assert!(matches!(e, DistError::Bounds { .. }), "{b:?}: {e:?}");
        assert!(e.to_string().starts_with(&format!("rank boundaries {b:?}: ")), "{e}");
    }
    let e = bad(&[0, 100, n], 0);
    assert_eq!(e.to_string(), "round size of 0 edges is not supported with 2 ranks: it must be at least 1 and at most 2305843009213693951 (a round's exchange is limited to 18446744073709551615 words)");
    let big = KroneckerParams::new(33, 1, 2, 3).unwrap();
    let e = distributed::simulate(&big, &[0, big.num_vertices()], 100).unwrap_err();
    assert_eq!(e, DistError::RankTooLarge { rank: 0, vertices: 1 << 33 });
    // SCALE 33 on 3 ranks: 33-bit ids and 32-bit local indices do not share a word.
    let e = distributed::simulate(&big, &[0, 3 << 30, 6 << 30, 1 << 33], 100).unwrap_err();
    assert_eq!(e, DistError::ArcTooWide { target_bits: 33, source_bits: 32 });
    assert!(e.to_string().contains("use more ranks"), "{e}");
    let e = distributed::check_bounds(&[], 0, 4).unwrap_err();
    assert!(e.to_string().contains("no ranks"), "{e}");
}

#[test]
fn shares_and_rounds() {
    for (m, ranks) in [(16_384u64, 3usize), (10, 4), (3, 5), (1 << 40, 7)] {
        let mut next = 0;
        for r in 0..ranks {
            let s = distributed::rank_edges(m, r, ranks);
            assert_eq!(s.start, next);
            assert!(s.end - s.start <= m.div_ceil(ranks as u64));
            next = s.end;
        }
        assert_eq!(next, m);
    }
    assert_eq!(distributed::rounds(16_384, 3, 1000), 6);
    assert_eq!(distributed::rounds(16_384, 2, 8192), 1);
    assert_eq!(distributed::rounds(16_384, 2, 8191), 2);
    assert_eq!(distributed::rounds(0, 2, 10), 0);
}

/// Reused buffers get the same edges as the reference (the path each round takes).
#[test]
fn generate_range_into_reused_buffers() {
    let want = common::edges(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let (mut s, mut d, mut w) = (vec![0u64; 1000], vec![0u64; 1000], vec![0f32; 1000]);
    for (lo, len) in [(0u64, 1000usize), (5, 17), (15_384, 1000), (16_383, 1)] {
        kronecker::generate_range_into(&p, lo, &mut s[..len], &mut d[..len], &mut w[..len]);
        for i in 0..len {
            let k = lo as usize + i;
            assert_eq!((s[i], d[i], w[i].to_bits()), want[k], "edge {k}");
        }
    }
}

#[test]
fn memory_formula() {
    // SCALE 22 on 2 ranks, rank 0: the rounds phase dominates (the kept arcs, the round
    // buffers, the words received).
    let rounds = 12 * 68_603_327u128 + 140 * (1 << 20);
    assert_eq!(distributed::local_build_bytes(2_097_152, 68_603_327, 1 << 20), rounds);
    // Small rounds: the rows phase dominates (the kept arcs, the largest bucket's rows,
    // offsets and cursors).
    let rows = 12 * 68_603_327u128 + 24 * 68_603_327u128.div_ceil(64) + 12 * 2_097_152 + 8;
    assert_eq!(distributed::local_build_bytes(2_097_152, 68_603_327, 1 << 10), rows);
    // Few arcs, big rounds.
    assert_eq!(distributed::local_build_bytes(10, 100, 1 << 20), 12 * 100 + (140 << 20));
}
