//! Every Graph500 reference vector: edges, weights, roots, checksums, root-0 results.

mod common;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use skein_generators::checksum::{fnv1a64_edges, nonisolated_vertices, EdgeSummary};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::{BfsResult, Csr, EdgeList, SsspResult, NO_PARENT, UNREACHED_LEVEL};

fn params(scale: u32) -> KroneckerParams {
    KroneckerParams::new(scale, 16, 2, 3).unwrap()
}

/// Generated edges equal the reference's, edge by edge (u, v, weight bits).
fn check_edges(scale: u32) {
    let want = common::edges(scale);
    let p = params(scale);
    let el = kronecker::generate(&p);
    assert_eq!(el.num_vertices, 1 << scale);
    assert_eq!(want.len() as u64, p.num_edges());
    assert_eq!(el.len(), want.len());
    let w = el.weights.as_ref().expect("generated lists are weighted");
    for (k, &(u, v, wbits)) in want.iter().enumerate() {
        let got = (el.src[k], el.dst[k], w[k].to_bits());
        assert_eq!(got, (u, v, wbits), "SCALE {scale} edge {k}");
    }
    // Random access agrees with bulk generation.
    for k in [0, 1, 2, 777, want.len() as u64 - 1] {
        let (u, v, wt) = kronecker::edge(&p, k);
        assert_eq!((u, v, wt.to_bits()), want[k as usize], "edge({k})");
    }
}

#[test]
fn edges_scale_08() {
    check_edges(8);
}

#[test]
fn edges_scale_10() {
    check_edges(10);
}

#[test]
fn edges_scale_12() {
    check_edges(12);
}

#[test]
fn roots_files() {
    for scale in [8, 10, 12] {
        let (want, counter) = common::roots(scale);
        assert_eq!(want.len(), 64);
        let p = params(scale);
        let g = Csr::from_edge_list(&kronecker::generate(&p));
        assert_eq!(kronecker::search_roots(&p, &g, 64), want, "SCALE {scale}");
        let (roots, c) =
            kronecker::search_roots_counted(g.num_vertices(), |v| g.degree(v), 2, 3, 64);
        assert_eq!((roots, c), (want, counter), "SCALE {scale}");
    }
}

/// Plain sequential BFS (levels only) as an oracle.
fn bfs_levels(g: &Csr, root: u64) -> Vec<u32> {
    let mut level = vec![UNREACHED_LEVEL; g.num_vertices() as usize];
    level[root as usize] = 0;
    let mut q = VecDeque::from([root]);
    while let Some(v) = q.pop_front() {
        for &u in g.neighbors(v) {
            if level[u as usize] == UNREACHED_LEVEL {
                level[u as usize] = level[v as usize] + 1;
                q.push_back(u);
            }
        }
    }
    level
}

/// Plain binary32 Dijkstra with parents, as an oracle.
fn dijkstra(g: &Csr, root: u64) -> SsspResult {
    let n = g.num_vertices() as usize;
    let mut dist = vec![f32::INFINITY; n];
    let mut parent = vec![NO_PARENT; n];
    dist[root as usize] = 0.0;
    parent[root as usize] = root;
    // Non-negative floats order like their bit patterns.
    let mut heap = BinaryHeap::from([Reverse((0u32, root))]);
    while let Some(Reverse((bits, v))) = heap.pop() {
        if bits != dist[v as usize].to_bits() {
            continue;
        }
        for (u, w) in g.arcs(v) {
            let d = dist[v as usize] + w;
            if d < dist[u as usize] {
                dist[u as usize] = d;
                parent[u as usize] = v;
                heap.push(Reverse((d.to_bits(), u)));
            }
        }
    }
    SsspResult { root, dist, parent }
}

/// A BFS tree from levels: each vertex's first neighbour one level up.
fn bfs_tree(g: &Csr, root: u64, level: Vec<u32>) -> BfsResult {
    let parent = (0..g.num_vertices())
        .map(|v| match level[v as usize] {
            UNREACHED_LEVEL => NO_PARENT,
            0 => v,
            l => *g.neighbors(v).iter().find(|&&u| level[u as usize] == l - 1).unwrap(),
        })
        .collect();
    BfsResult { root, level, parent }
}

/// Everything `summary_by_scale.txt` says about one SCALE.
fn check_summary(scale: u32) {
    let s = common::summary(scale);
    let p = params(scale);
    let el = kronecker::generate(&p);
    let sum = EdgeSummary::of(&el);
    assert_eq!(sum.edges, s.get::<u64>("edges"), "SCALE {scale} edges");
    assert_eq!(format!("{:016x}", sum.fnv1a64), s.fields["fnv1a64"], "SCALE {scale} fnv1a64");
    assert_eq!(sum.fnv1a64, fnv1a64_edges(&el));
    assert_eq!(sum.selfloops, s.get::<u64>("selfloops"), "SCALE {scale} selfloops");
    assert_eq!(sum.sum_u, s.get::<u128>("sum_u"), "SCALE {scale} sum_u");
    assert_eq!(sum.sum_v, s.get::<u128>("sum_v"), "SCALE {scale} sum_v");
    assert_eq!(sum.sum_wbits, s.get::<u128>("sum_wbits"), "SCALE {scale} sum_wbits");
    assert_eq!(nonisolated_vertices(&el), s.get::<u64>("nonisolated_vertices"));

    let g = Csr::from_edge_list(&el);
    assert_eq!(g.num_arcs(), 2 * (sum.edges - sum.selfloops));
    let nonisolated = (0..g.num_vertices()).filter(|&v| g.degree(v) > 0).count() as u64;
    assert_eq!(nonisolated, s.get::<u64>("nonisolated_vertices"));
    let (roots, counter) =
        kronecker::search_roots_counted(g.num_vertices(), |v| g.degree(v), 2, 3, 64);
    assert_eq!(roots, s.roots, "SCALE {scale} roots");
    assert_eq!(counter, s.get::<u64>("root_counter"), "SCALE {scale} root_counter");

    // Root 0: an oracle BFS and Dijkstra reproduce the reference's summary, and pass
    // validation with the reference's TEPS edge count.
    let root: u64 = s.bfs["root"].parse().unwrap();
    assert_eq!(root, roots[0]);
    let bfs = bfs_tree(&g, root, bfs_levels(&g, root));
    let reached: Vec<u32> = bfs.level.iter().copied().filter(|&l| l != UNREACHED_LEVEL).collect();
    assert_eq!(reached.len().to_string(), s.bfs["reached"]);
    assert_eq!(reached.iter().map(|&l| u64::from(l)).sum::<u64>().to_string(), s.bfs["sum_levels"]);
    assert_eq!(reached.iter().max().unwrap().to_string(), s.bfs["max_level"]);
    let stats = validate_bfs(&g, &bfs).expect("oracle BFS validates");
    assert_eq!(stats.reached.to_string(), s.bfs["reached"]);
    assert_eq!(stats.teps_edges.to_string(), s.bfs["teps_nedge"]);

    let sssp = dijkstra(&g, root);
    let dists: Vec<f32> = sssp.dist.iter().copied().filter(|d| d.is_finite()).collect();
    assert_eq!(dists.len().to_string(), s.sssp["reached"]);
    let bits_sum: u64 = dists.iter().map(|d| u64::from(d.to_bits())).sum();
    assert_eq!(bits_sum.to_string(), s.sssp["sum_dist_bits"]);
    let max = dists.iter().copied().fold(0.0f32, f32::max);
    assert_eq!(format!("{:08x}", max.to_bits()), s.sssp["max_dist"]);
    let stats = validate_sssp(&g, &sssp).expect("oracle SSSP validates");
    assert_eq!(stats.teps_edges.to_string(), s.sssp["teps_nedge"]);
}

#[test]
fn summary_scale_08() {
    check_summary(8);
}

#[test]
fn summary_scale_10() {
    check_summary(10);
}

#[test]
fn summary_scale_12() {
    check_summary(12);
}

#[test]
fn summary_scale_14() {
    check_summary(14);
}

#[test]
fn summary_scale_16() {
    check_summary(16);
}

#[test]
#[ignore = "SCALE 18: slow in the test profile; run with --ignored (ideally --release)"]
fn summary_scale_18() {
    check_summary(18);
}

#[test]
#[ignore = "SCALE 20: slow in the test profile; run with --ignored (ideally --release)"]
fn summary_scale_20() {
    check_summary(20);
}

#[test]
fn summary_file_covers_every_scale() {
    let scales: Vec<u32> = common::summaries().iter().map(|s| s.scale).collect();
    assert_eq!(scales, [8, 10, 12, 14, 16, 18, 20]);
}

/// The reference's own root-0 results validate, with the reference's counts.
#[test]
fn reference_root0_results_validate() {
    for scale in [8, 10, 12] {
        let s = common::summary(scale);
        let root: u64 = s.bfs["root"].parse().unwrap();
        let (bfs, sssp) = common::root0(scale, root);
        let g = Csr::from_edge_list(&kronecker::generate(&params(scale)));
        let b = validate_bfs(&g, &bfs).unwrap_or_else(|e| panic!("SCALE {scale} BFS: {e}"));
        assert_eq!(b.reached.to_string(), s.bfs["reached"]);
        assert_eq!(b.teps_edges.to_string(), s.bfs["teps_nedge"]);
        let d = validate_sssp(&g, &sssp).unwrap_or_else(|e| panic!("SCALE {scale} SSSP: {e}"));
        assert_eq!(d.reached.to_string(), s.sssp["reached"]);
        assert_eq!(d.teps_edges.to_string(), s.sssp["teps_nedge"]);
        // And our oracle Dijkstra reproduces every distance bit for bit.
        let ours = dijkstra(&g, root);
        let bits = |v: &[f32]| v.iter().map(|d| d.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&ours.dist), bits(&sssp.dist), "SCALE {scale}");
        assert_eq!(bfs_levels(&g, root), bfs.level, "SCALE {scale}");
    }
}

#[test]
fn thread_count_independence() {
    // 262144 edges: 16 generation blocks, and 1 vs 3 CSR chunks.
    let p = KroneckerParams::new(14, 16, 11, 17).unwrap();
    let pool = |t| rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
    let (el1, g1) = pool(1).install(|| {
        let el = kronecker::generate(&p);
        let g = Csr::from_edge_list(&el);
        (el, g)
    });
    let (el2, g2) = pool(3).install(|| {
        let el = kronecker::generate(&p);
        let g = Csr::from_edge_list(&el);
        (el, g)
    });
    assert_eq!(el1, el2);
    assert_eq!(g1, g2);
}

#[test]
fn generate_range_pieces_concatenate() {
    let p = KroneckerParams::new(11, 16, 5, 9).unwrap();
    let full = kronecker::generate(&p);
    let cuts = [0, 1, 1, 1000, 16_384, 16_385, 20_000, p.num_edges()];
    let mut joined =
        EdgeList { num_vertices: p.num_vertices(), weights: Some(vec![]), ..Default::default() };
    for w in cuts.windows(2) {
        let piece = kronecker::generate_range(&p, w[0]..w[1]);
        assert_eq!(piece.len() as u64, w[1] - w[0]);
        assert_eq!(piece.num_vertices, p.num_vertices());
        joined.src.extend(&piece.src);
        joined.dst.extend(&piece.dst);
        joined.weights.as_mut().unwrap().extend(piece.weights.unwrap());
    }
    assert_eq!(joined, full);
}

#[test]
fn progress_reaches_the_total() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let p = KroneckerParams::new(12, 16, 2, 3).unwrap();
    let max = AtomicU64::new(0);
    let calls = AtomicU64::new(0);
    let el = kronecker::generate_with_progress(&p, &|d| {
        max.fetch_max(d, Ordering::Relaxed);
        calls.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(max.load(Ordering::Relaxed), p.num_edges());
    assert!(calls.load(Ordering::Relaxed) >= 1);
    let built = AtomicU64::new(0);
    let g = Csr::from_edge_list_with_progress(&el, &|d| {
        built.fetch_max(d, Ordering::Relaxed);
    });
    assert_eq!(built.load(Ordering::Relaxed), 2 * el.len() as u64);
    assert_eq!(g, Csr::from_edge_list(&el));
}

#[test]
fn scrambled_labels_cover_all_vertices() {
    // The scramble is a bijection on [0, 2^SCALE).
    for scale in [1, 5, 12] {
        let p = KroneckerParams::new(scale, 1, 2, 3).unwrap();
        let scr = kronecker::Scrambler::new(&p);
        let mut seen = vec![false; 1 << scale];
        for x in 0..1u64 << scale {
            let y = scr.apply(x) as usize;
            assert!(!seen[y], "SCALE {scale}: {y} twice");
            seen[y] = true;
        }
    }
}

#[test]
fn any_root_count_terminates() {
    let p = KroneckerParams::new(4, 1, 2, 3).unwrap();
    let g = Csr::from_edge_list(&kronecker::generate(&p));
    let roots = kronecker::search_roots(&p, &g, 100);
    assert_eq!(roots.len(), 100);
    assert!(roots.iter().all(|&r| r < 16));
    let nonisolated = (0..16).filter(|&v| g.degree(v) > 0).count();
    // The distinct nonisolated vertices come first, before the counter runs out.
    let first: std::collections::HashSet<_> = roots.iter().take(nonisolated.min(4)).collect();
    assert_eq!(first.len(), nonisolated.min(4));
    assert!(kronecker::search_roots_for(0, |_| 0, 2, 3, 5).is_empty());
}
