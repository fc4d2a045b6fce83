//! SSSP and BFS on the delegation runtime reproduce the Graph500 reference's own
//! root-0 results exactly (binary32 distance bits, BFS levels) for any number of
//! workers, and every result passes Graph500 validation.

use std::sync::Arc;

use skein_algorithms::{Engine, EngineOptions};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::{Csr, UNREACHED_LEVEL};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/graph500/");

/// (root, bfs levels, sssp distance bits) from `kron_sNN_ef16_root0.txt`.
fn root0(scale: u32) -> (u64, Vec<u32>, Vec<u32>) {
    let path = format!("{VECTORS}kron_s{scale:02}_ef16_root0.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (mut levels, mut dists, mut root) = (Vec::new(), Vec::new(), None);
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let level: i64 = f[1].parse().unwrap();
        levels.push(if level < 0 { UNREACHED_LEVEL } else { level as u32 });
        let bits = u32::from_str_radix(f[2], 16).unwrap();
        dists.push(if bits == 0xbf80_0000 { f32::INFINITY.to_bits() } else { bits });
        if level == 0 {
            root = Some(f[0].parse().unwrap());
        }
    }
    (root.unwrap(), levels, dists)
}

fn graph(scale: u32) -> Arc<Csr> {
    let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
    Arc::new(Csr::from_edge_list(&kronecker::generate(&p)))
}

fn engine(g: &Arc<Csr>, workers: usize) -> Engine {
    let opts = EngineOptions { workers, chunk: 16, ..EngineOptions::default() };
    Engine::new(Arc::clone(g), opts).unwrap()
}

#[test]
fn sssp_matches_the_reference_bit_for_bit_on_any_worker_count() {
    for scale in [8, 10] {
        let g = graph(scale);
        let (root, _, want) = root0(scale);
        for workers in [1, 2, 3, 4] {
            let (r, stats) = engine(&g, workers).sssp(root).unwrap();
            let got: Vec<u32> = r.dist.iter().map(|d| d.to_bits()).collect();
            assert!(got == want, "SCALE {scale}, {workers} workers: distances differ");
            validate_sssp(&g, &r).unwrap();
            assert!(stats.rounds > 0);
            if workers > 1 {
                assert!(stats.messages > 0, "partitions must have talked");
            }
        }
    }
}

#[test]
fn bfs_matches_the_reference_levels_on_any_worker_count() {
    for scale in [8, 10] {
        let g = graph(scale);
        let (root, want, _) = root0(scale);
        for workers in [1, 2, 3, 4] {
            let (r, _) = engine(&g, workers).bfs(root).unwrap();
            assert!(r.level == want, "SCALE {scale}, {workers} workers: levels differ");
            validate_bfs(&g, &r).unwrap();
        }
    }
}

#[test]
fn every_graph500_root_validates_with_several_deltas() {
    let g = graph(9);
    let p = KroneckerParams::new(9, 16, 2, 3).unwrap();
    let roots = kronecker::search_roots(&p, &g, 8);
    for delta in [0.01, 0.3, 10.0] {
        let opts =
            EngineOptions { workers: 3, delta: Some(delta), chunk: 5, ..EngineOptions::default() };
        let e = Engine::new(Arc::clone(&g), opts).unwrap();
        let first = e.sssp(roots[0]).unwrap().0;
        for &root in &roots {
            validate_sssp(&g, &e.sssp(root).unwrap().0).unwrap();
            validate_bfs(&g, &e.bfs(root).unwrap().0).unwrap();
        }
        // Same distances whatever delta.
        let again = engine(&g, 2).sssp(roots[0]).unwrap().0;
        assert!(first.dist.iter().zip(&again.dist).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}

#[test]
fn budgeted_rounds_keep_the_distances_and_take_fewer_rounds() {
    let g = graph(12);
    let p = KroneckerParams::new(12, 16, 2, 3).unwrap();
    let root = kronecker::search_roots(&p, &g, 1)[0];
    let run = |workers, round_share| {
        let opts = EngineOptions { workers, round_share, ..EngineOptions::default() };
        Engine::new(Arc::clone(&g), opts).unwrap().sssp(root).unwrap()
    };
    let (classic, classic_stats) = run(3, 0);
    for workers in [1, 3] {
        let (r, stats) = run(workers, skein_algorithms::DEFAULT_ROUND_SHARE);
        validate_sssp(&g, &r).unwrap();
        assert!(r.dist.iter().zip(&classic.dist).all(|(a, b)| a.to_bits() == b.to_bits()));
        // One bucket per round takes hundreds of rounds here; the budgeted rounds a few
        // dozen, for at most a quarter more relaxations.
        assert!(
            stats.rounds * 4 < classic_stats.rounds,
            "{} vs {}",
            stats.rounds,
            classic_stats.rounds
        );
        assert!(
            stats.arcs * 4 < classic_stats.arcs * 5,
            "{} vs {}",
            stats.arcs,
            classic_stats.arcs
        );
    }
}

#[test]
fn round_spread_counts_every_partitions_arcs_per_round() {
    let g = graph(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let root = kronecker::search_roots(&p, &g, 1)[0];
    for workers in [1, 3, 4] {
        let (_, stats) = engine(&g, workers).sssp(root).unwrap();
        let s = stats.round_spread.expect("SSSP counts its rounds' spread");
        assert_eq!(s.partitions, workers as u64);
        // Every round relaxes some vertex's arcs (a reached vertex has at least one).
        assert_eq!(s.rounds, stats.rounds);
        let (mean, critical) = (s.mean_max_over_mean(), s.critical_over_even(stats.arcs));
        if workers == 1 {
            assert_eq!((s.busiest_arcs, mean, critical), (stats.arcs, 1.0, 1.0));
        } else {
            assert!(s.busiest_arcs < stats.arcs && s.busiest_arcs * workers as u64 >= stats.arcs);
            assert!(mean >= 1.0 && mean <= workers as f64, "{mean}");
            assert!(critical >= 1.0 && critical <= workers as f64, "{critical}");
        }
    }
    // Only partition 0 has arcs (the path 0..4 weighs less than the 28 vertices without arcs:
    // parts are balanced by arcs plus a term per vertex, `Partitioning::balanced`): it
    // relaxes every arc of every round.
    let mut offsets = vec![0u64, 1, 3, 5];
    offsets.resize(33, 6);
    let path = Csr::from_parts(32, offsets, vec![1, 0, 2, 1, 3, 2], None);
    let (_, stats) = engine(&Arc::new(path.unwrap()), 2).sssp(0).unwrap();
    let s = stats.round_spread.unwrap();
    assert_eq!((stats.arcs, s.busiest_arcs, s.rounds), (6, 6, stats.rounds));
    assert_eq!((s.mean_max_over_mean(), s.critical_over_even(6)), (2.0, 2.0));
    // Kernels without SSSP's rounds leave it out.
    assert!(engine(&g, 2).bfs(root).unwrap().1.round_spread.is_none());
}

#[test]
fn searches_that_reuse_the_arrays_of_earlier_ones_give_fresh_results() {
    let g = graph(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let roots = kronecker::search_roots(&p, &g, 3);
    let reused = engine(&g, 3);
    for &root in &roots {
        let fresh = engine(&g, 3);
        let (a, b) = (reused.sssp(root).unwrap().0, fresh.sssp(root).unwrap().0);
        assert!(a.dist.iter().zip(&b.dist).all(|(x, y)| x.to_bits() == y.to_bits()));
        validate_sssp(&g, &a).unwrap();
        let (a, b) = (reused.bfs(root).unwrap().0, fresh.bfs(root).unwrap().0);
        assert_eq!(a.level, b.level);
        validate_bfs(&g, &a).unwrap();
    }
}

#[test]
fn bfs_into_overwrites_an_earlier_result_in_place() {
    let g = graph(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let roots = kronecker::search_roots(&p, &g, 3);
    for workers in [1, 3] {
        let e = engine(&g, workers);
        let mut out = e.bfs(roots[0]).unwrap().0;
        for &root in &roots[1..] {
            let at = (out.level.as_ptr(), out.parent.as_ptr());
            e.bfs_into(root, &mut out).unwrap();
            assert_eq!(at, (out.level.as_ptr(), out.parent.as_ptr()), "the same vectors");
            assert_eq!(out.level, e.bfs(root).unwrap().0.level, "workers {workers}, root {root}");
            validate_bfs(&g, &out).unwrap();
        }
        // Vectors of another length are replaced.
        let mut small =
            skein_generators::BfsResult { root: 0, level: vec![7; 3], parent: vec![1; 3] };
        e.bfs_into(roots[0], &mut small).unwrap();
        assert_eq!(small.level, e.bfs(roots[0]).unwrap().0.level);
        validate_bfs(&g, &small).unwrap();
    }
}

#[test]
fn bad_roots_and_options_are_errors() {
    let g = graph(6);
    let e = engine(&g, 2);
    assert!(e.sssp(1 << 6).unwrap_err().to_string().contains("not a vertex"));
    assert!(e.bfs(u64::MAX).is_err());
    let bad = EngineOptions { workers: 0, ..EngineOptions::default() };
    assert!(Engine::new(Arc::clone(&g), bad).is_err());
    let bad = EngineOptions { delta: Some(0.0), ..EngineOptions::default() };
    assert!(Engine::new(g, bad).is_err());
}

#[test]
fn negative_weights_are_refused_for_sssp() {
    let g = Csr::from_parts(2, vec![0, 1, 2], vec![1, 0], Some(vec![-1.0, -1.0])).unwrap();
    let e = engine(&Arc::new(g), 2);
    assert!(e.sssp(0).unwrap_err().to_string().contains("non-negative"));
    assert!(e.bfs(0).is_ok());
}

#[test]
fn isolated_root_reaches_only_itself() {
    // Vertex 2 has no arcs.
    let g = Arc::new(Csr::from_parts(3, vec![0, 1, 2, 2], vec![1, 0], None).unwrap());
    let e = engine(&g, 2);
    let (r, _) = e.sssp(2).unwrap();
    assert_eq!(r.reached(), 1);
    validate_sssp(&g, &r).unwrap();
    let (b, _) = e.bfs(2).unwrap();
    assert_eq!(b.reached(), 1);
}

#[test]
fn bfs_directions_all_give_the_reference_levels() {
    let g = graph(10);
    let (root, want, _) = root0(10);
    // alpha 0: top-down only; huge alpha and beta: bottom-up from the first level on.
    for (alpha, beta) in [(0, 18), (1 << 40, 1 << 40), (15, 18), (2, 2)] {
        for workers in [1, 2, 3, 4] {
            let opts =
                EngineOptions { workers, alpha, beta, chunk: 16, ..EngineOptions::default() };
            let (r, stats) = Engine::new(Arc::clone(&g), opts).unwrap().bfs(root).unwrap();
            assert!(r.level == want, "alpha {alpha} beta {beta}, {workers} workers: levels differ");
            validate_bfs(&g, &r).unwrap();
            if alpha == 1 << 40 {
                // Bottom-up levels send no visits at all.
                assert_eq!(stats.messages, 0, "{workers} workers");
            }
        }
    }
}

/// Dijkstra's distances (the sequential baseline) as bits.
fn dijkstra_bits(g: &Csr, root: u64) -> Vec<u32> {
    let opts = skein_baselines::Options::with_threads(1);
    let r = skein_baselines::sssp(skein_baselines::Engine::Seq, g, root, &opts).unwrap();
    r.dist.iter().map(|d| d.to_bits()).collect()
}

fn sssp_bits(g: &Arc<Csr>, workers: usize, delta: Option<f32>, root: u64) -> Vec<u32> {
    let opts = EngineOptions { workers, delta, ..EngineOptions::default() };
    let (r, _) = Engine::new(Arc::clone(g), opts).unwrap().sssp(root).unwrap();
    r.dist.iter().map(|d| d.to_bits()).collect()
}

#[test]
fn tiny_and_subnormal_deltas_give_dijkstras_distances() {
    // Each of these once overflowed the bucket index (a panic, or gigabytes of bins).
    let g = graph(10);
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let root = kronecker::search_roots(&p, &g, 1)[0];
    let want = dijkstra_bits(&g, root);
    for delta in [1e-30, 1e-9, f32::MIN_POSITIVE, f32::from_bits(1)] {
        for workers in [1, 2, 3] {
            let got = sssp_bits(&g, workers, Some(delta), root);
            assert!(got == want, "delta {delta:e}, {workers} workers");
        }
    }
}

/// A path `0 - 1 - ... - n-1` whose edges all weigh `w`.
fn path(n: u64, w: f32) -> Arc<Csr> {
    let el = skein_generators::EdgeList {
        num_vertices: n,
        src: (0..n - 1).collect(),
        dst: (1..n).collect(),
        weights: Some(vec![w; n as usize - 1]),
    };
    Arc::new(Csr::from_edge_list(&el))
}

#[test]
fn integer_weighted_paths_match_dijkstra() {
    // The 11-vertex chain weighing 100000 per edge once made this engine allocate 19 GB
    // of bins (its default delta was an absolute 0.002); long paths aborted it.
    for (n, w) in [(11, 100_000.0), (100_000, 1.0), (100_000, 100_000.0)] {
        let g = path(n, w);
        let want = dijkstra_bits(&g, n / 3);
        // An absolute 0.002 (the old default) as well on the short chain.
        let deltas = if n < 1000 { vec![None, Some(0.002)] } else { vec![None] };
        for delta in deltas {
            let got = sssp_bits(&g, 2, delta, n / 3);
            assert!(got == want, "path of {n} weighing {w}, delta {delta:?}");
        }
    }
}

#[test]
fn default_delta_follows_the_largest_weight() {
    let g = path(5, 100_000.0);
    let e = Engine::new(Arc::clone(&g), EngineOptions::default()).unwrap();
    assert_eq!(e.delta(), skein_algorithms::default_delta(100_000.0));
    assert!((e.delta() - 200.0).abs() < 1e-3, "{}", e.delta());
    let e = Engine::new(g, EngineOptions { delta: Some(0.5), ..EngineOptions::default() });
    assert_eq!(e.unwrap().delta(), 0.5);
    let kron = graph(8);
    let e = Engine::new(kron, EngineOptions::default()).unwrap();
    // Graph500 weights: the largest is just below 1, so the tuned 0.002 up to rounding.
    assert!((e.delta() - 0.002).abs() < 1e-6, "{}", e.delta());
}

#[test]
fn huge_weights_match_dijkstra() {
    // Sums overflow to +inf: those vertices stay unreached, as in Dijkstra.
    let big = f32::MAX * 0.75;
    let edges = [(0, 1, big), (1, 2, big), (2, 3, 1.0), (0, 4, 1e30), (4, 5, 3e38), (1, 5, 0.0)];
    let el = skein_generators::EdgeList {
        num_vertices: 6,
        src: edges.iter().map(|e| e.0).collect(),
        dst: edges.iter().map(|e| e.1).collect(),
        weights: Some(edges.iter().map(|e| e.2).collect()),
    };
    let g = Arc::new(Csr::from_edge_list(&el));
    for root in 0..6 {
        let want = dijkstra_bits(&g, root);
        for workers in [1, 2, 3] {
            for delta in [None, Some(1e-30), Some(f32::MAX)] {
                let got = sssp_bits(&g, workers, delta, root);
                assert!(got == want, "root {root}, {workers} workers, delta {delta:?}");
            }
        }
    }
}

#[test]
fn grids_with_integer_weights_match_dijkstra() {
    // A 40 x 40 grid, weights 1..=1000 (a small xorshift): high diameter, many
    // distinct distances, every round's bucket far from the previous one.
    let side = 40u64;
    let mut x = 88172645463325252u64;
    let mut weight = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (1 + x % 1000) as f32
    };
    let (mut src, mut dst, mut w) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..side {
        for c in 0..side {
            let v = r * side + c;
            if c + 1 < side {
                src.push(v);
                dst.push(v + 1);
                w.push(weight());
            }
            if r + 1 < side {
                src.push(v);
                dst.push(v + side);
                w.push(weight());
            }
        }
    }
    let el = skein_generators::EdgeList { num_vertices: side * side, src, dst, weights: Some(w) };
    let g = Arc::new(Csr::from_edge_list(&el));
    let want = dijkstra_bits(&g, 0);
    for workers in [1, 2, 3] {
        for delta in [None, Some(1.0), Some(1e-3)] {
            let got = sssp_bits(&g, workers, delta, 0);
            assert!(got == want, "{workers} workers, delta {delta:?}");
        }
    }
}

/// `EngineOptions::worker_threads`: the engine's workers share the threads asked for (a
/// fiber on each worker reads its thread's name), and the kernels give the reference's
/// results on them.
#[test]
fn workers_on_shared_threads_give_the_reference_results() {
    let g = graph(10);
    let (root, levels, dists) = root0(10);
    for threads in [1, 2] {
        let opts = EngineOptions {
            workers: 4,
            worker_threads: Some(threads),
            // One process unsplit (fake ranks keep a thread per worker).
            loopback_ranks: Some(1),
            chunk: 16,
            ..EngineOptions::default()
        };
        let e = Engine::new(Arc::clone(&g), opts).unwrap();
        let names = e
            .run(|| {
                let fibers: Vec<_> = (0..skein::num_workers())
                    .map(|w| {
                        skein::spawn_on(w, (), |()| {
                            let name = std::thread::current().name().unwrap_or("").to_string();
                            let mut bytes = [0u8; 32];
                            let n = name.len().min(32);
                            bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
                            bytes
                        })
                    })
                    .collect();
                fibers.into_iter().map(|f| f.join().to_vec()).collect::<Vec<_>>()
            })
            .unwrap();
        let distinct: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), threads, "{threads} threads for 4 workers");
        let (r, _) = e.sssp(root).unwrap();
        let got: Vec<u32> = r.dist.iter().map(|d| d.to_bits()).collect();
        assert!(got == dists, "{threads} threads: distances differ");
        let (b, _) = e.bfs(root).unwrap();
        assert!(b.level == levels, "{threads} threads: levels differ");
        validate_bfs(&g, &b).unwrap();
    }
}
