//! Every engine against the petgraph oracle, against each other (bit for bit, any thread
//! count), against Graph500 validation and against the Graph500 reference's root-0 vectors.

use skein_baselines::{oracle, BaselineError, Engine, Options, Solver};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::splitmix::SplitMix64;
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::{Csr, EdgeList, NO_PARENT, UNREACHED_LEVEL};

/// (engine, threads) pairs every test runs.
const CONFIGS: [(Engine, usize); 4] =
    [(Engine::Seq, 1), (Engine::Rayon, 1), (Engine::Rayon, 2), (Engine::Rayon, 3)];

/// Random test graphs from the workspace's SplitMix64.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(SplitMix64::from_state(seed))
    }

    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }

    /// A weight in [0, 1), exactly zero one time in eight.
    fn weight(&mut self) -> f32 {
        if self.below(8) == 0 {
            0.0
        } else {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
    }
}

fn graph(n: u64, edges: &[(u64, u64, f32)]) -> Csr {
    let el = EdgeList {
        num_vertices: n,
        src: edges.iter().map(|e| e.0).collect(),
        dst: edges.iter().map(|e| e.1).collect(),
        weights: Some(edges.iter().map(|e| e.2).collect()),
    };
    Csr::from_edge_list(&el)
}

/// A random graph: `n` vertices, `m` edges with self-loops, repeats and zero weights; some
/// vertices stay isolated, and several components are likely when `m` is small.
fn random_graph(seed: u64, n: u64, m: usize) -> Csr {
    let mut rng = Rng::new(seed);
    let edges: Vec<_> = (0..m)
        .map(|_| {
            let u = rng.below(n);
            // A quarter of the edges repeat an earlier one's endpoints.
            let v = if rng.below(10) == 0 { u } else { rng.below(n) };
            (u, v, rng.weight())
        })
        .collect();
    graph(n, &edges)
}

fn bits(d: &[f32]) -> Vec<u32> {
    d.iter().map(|x| x.to_bits()).collect()
}

/// Runs every config from `root`, checks each result with the oracle and the validator, and
/// returns nothing: any mismatch panics with the config named.
fn check_all(csr: &Csr, root: u64, options: &Options) {
    let want_dist = bits(&oracle::sssp_distances(csr, root).unwrap());
    let want_level = oracle::bfs_levels(csr, root).unwrap();
    for (engine, threads) in CONFIGS {
        let opts = Options { threads, ..options.clone() };
        let solver = Solver::new(engine, csr, &opts).unwrap();
        let s = solver.sssp(root).unwrap();
        assert_eq!(bits(&s.dist), want_dist, "{engine} x{threads} distances, root {root}");
        validate_sssp(csr, &s)
            .unwrap_or_else(|e| panic!("{engine} x{threads} SSSP root {root}: {e}"));
        let b = solver.bfs(root).unwrap();
        assert_eq!(b.level, want_level, "{engine} x{threads} levels, root {root}");
        validate_bfs(csr, &b)
            .unwrap_or_else(|e| panic!("{engine} x{threads} BFS root {root}: {e}"));
        // Again after a search from elsewhere: arrays kept from earlier searches.
        let other = (root + 1) % csr.num_vertices();
        validate_bfs(csr, &solver.bfs(other).unwrap()).unwrap();
        let again = solver.bfs(root).unwrap();
        assert_eq!(again.level, want_level, "{engine} x{threads} levels again, root {root}");
        // Into the vectors of another root's result: overwritten, the same as fresh ones.
        let mut into = solver.bfs(other).unwrap();
        solver.bfs_into(root, &mut into).unwrap();
        assert_eq!(into.level, want_level, "{engine} x{threads} bfs_into, root {root}");
        validate_bfs(csr, &into).unwrap();
    }
}

#[test]
fn random_graphs_match_the_oracle() {
    for seed in 1..=8u64 {
        let mut rng = Rng::new(seed * 7919);
        let n = 2 + rng.below(300);
        let m = 1 + rng.below(4 * n) as usize;
        let csr = random_graph(seed, n, m);
        if csr.num_arcs() == 0 {
            continue;
        }
        for _ in 0..3 {
            check_all(&csr, rng.below(n), &Options::default());
        }
    }
}

#[test]
fn extreme_tuning_gives_the_same_results() {
    let csr = random_graph(99, 400, 3000);
    for delta in [1e-4, 0.003, 0.5, 100.0] {
        check_all(&csr, 5, &Options { delta: Some(delta), ..Options::default() });
    }
    // alpha 1: bottom-up almost at once; a huge alpha or 0: top-down only; beta 1 and huge.
    for (alpha, beta) in [(1, 1), (1, 1 << 40), (1 << 40, 18), (2, 2), (0, 18)] {
        check_all(&csr, 7, &Options { alpha, beta, ..Options::default() });
    }
}

#[test]
fn isolated_root_reaches_only_itself() {
    let csr = graph(5, &[(0, 1, 0.5), (1, 2, 0.25)]);
    check_all(&csr, 4, &Options::default());
    for (engine, threads) in CONFIGS {
        let s = skein_baselines::sssp(engine, &csr, 4, &Options::with_threads(threads)).unwrap();
        assert_eq!(s.dist[4], 0.0);
        assert_eq!(s.parent[4], 4);
        assert!(s.dist[..4].iter().all(|d| d.is_infinite()));
        assert!(s.parent[..4].iter().all(|&p| p == NO_PARENT));
        let b = skein_baselines::bfs(engine, &csr, 4, &Options::with_threads(threads)).unwrap();
        assert_eq!(
            b.level,
            vec![UNREACHED_LEVEL, UNREACHED_LEVEL, UNREACHED_LEVEL, UNREACHED_LEVEL, 0]
        );
    }
}

#[test]
fn disconnected_multi_edges_self_loops() {
    // Two components; repeated edges with different weights; self-loops.
    let csr = graph(
        7,
        &[
            (0, 1, 0.9),
            (1, 0, 0.1),
            (0, 1, 0.5),
            (1, 2, 0.3),
            (2, 2, 0.0),
            (0, 2, 0.45),
            (3, 4, 0.2),
            (4, 5, 0.2),
            (5, 3, 0.0),
            (6, 6, 0.7),
        ],
    );
    for root in 0..7 {
        check_all(&csr, root, &Options::default());
    }
    let s = skein_baselines::sssp(Engine::Rayon, &csr, 0, &Options::with_threads(2)).unwrap();
    assert_eq!(s.dist[1], 0.1);
    assert_eq!(s.dist[2], 0.1f32 + 0.3f32);
    assert!(s.dist[3..].iter().all(|d| d.is_infinite()));
}

#[test]
fn zero_weight_cycles_get_acyclic_parents() {
    // A clique of zero-weight edges hanging off the root by one positive edge, listed so
    // that a naive "first tight neighbour" rule would pick a cycle.
    let csr =
        graph(6, &[(1, 2, 0.0), (2, 3, 0.0), (3, 1, 0.0), (3, 4, 0.0), (4, 5, 0.0), (0, 5, 0.25)]);
    for root in 0..6 {
        check_all(&csr, root, &Options::default());
    }
    // All zero weights: every distance is 0.
    let zeros = graph(4, &[(0, 1, 0.0), (1, 2, 0.0), (2, 3, 0.0), (3, 0, 0.0)]);
    for root in 0..4 {
        check_all(&zeros, root, &Options::default());
    }
}

#[test]
fn absorbed_weights_get_acyclic_parents() {
    // 1.0 + 2^-30 == 1.0 in binary32: equal distances joined by positive weights.
    let tiny = 2f32.powi(-30);
    let csr = graph(5, &[(0, 1, 1.0), (1, 2, tiny), (2, 3, tiny), (3, 1, tiny), (3, 4, tiny)]);
    check_all(&csr, 0, &Options::default());
}

#[test]
fn bad_input_is_a_clear_error() {
    let empty = graph(0, &[]);
    assert_eq!(
        skein_baselines::sssp(Engine::Seq, &empty, 0, &Options::default()),
        Err(BaselineError::EmptyGraph)
    );
    let loops = graph(3, &[(1, 1, 0.5)]);
    for engine in Engine::ALL {
        let e = skein_baselines::bfs(engine, &loops, 0, &Options::default()).unwrap_err();
        assert_eq!(e, BaselineError::NoEdges { vertices: 3 });
    }
    let g = graph(3, &[(0, 1, 0.5), (1, 2, -0.25)]);
    let e = skein_baselines::sssp(Engine::Rayon, &g, 3, &Options::default()).unwrap_err();
    assert_eq!(e, BaselineError::RootOutOfRange { root: 3, vertices: 3 });
    assert!(e.to_string().contains("root 3"), "{e}");
    let e = skein_baselines::sssp(Engine::Seq, &g, 0, &Options::default()).unwrap_err();
    assert!(matches!(e, BaselineError::BadWeight { weight, .. } if weight == -0.25), "{e:?}");
    assert!(e.to_string().contains("-0.25"), "{e}");
    // BFS ignores weights.
    assert!(skein_baselines::bfs(Engine::Rayon, &g, 0, &Options::default()).is_ok());
    let nan = graph(2, &[(0, 1, f32::NAN)]);
    assert!(matches!(
        skein_baselines::sssp(Engine::Rayon, &nan, 0, &Options::default()),
        Err(BaselineError::BadWeight { .. })
    ));
    for delta in [0.0, -1e-30, f32::INFINITY, f32::NAN] {
        let bad_delta = Options { delta: Some(delta), ..Options::default() };
        let e = Solver::new(Engine::Rayon, &g, &bad_delta).unwrap_err();
        assert!(matches!(e, BaselineError::BadOption { name: "delta", .. }), "{e:?}");
        assert!(e.to_string().contains("delta"), "{e}");
    }
    assert_eq!("gpu".parse::<Engine>(), Err(BaselineError::UnknownEngine("gpu".into())));
}

#[test]
fn kronecker_engines_agree_bit_for_bit() {
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let roots = kronecker::search_roots(&p, &csr, 4);
    for &root in &roots {
        check_all(&csr, root, &Options::default());
    }
}

/// Columns of a reference root-0 file: (bfs level, sssp distance bits) per vertex.
fn reference_root0(scale: u32) -> Vec<(i64, u32)> {
    let path = format!(
        "{}/../testdata/graph500/kron_s{scale:02}_ef16_root0.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f[0].parse::<usize>().unwrap(), i, "{path}: vertex order");
            (f[1].parse().unwrap(), u32::from_str_radix(f[2], 16).unwrap())
        })
        .collect()
}

#[test]
fn graph500_reference_root0_vectors() {
    for scale in [8, 10, 12] {
        let want = reference_root0(scale);
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let csr = Csr::from_edge_list(&kronecker::generate(&p));
        let root = kronecker::search_roots(&p, &csr, 1)[0];
        assert_eq!(want[root as usize], (0, 0), "SCALE {scale}: root {root} at level 0");
        for (engine, threads) in CONFIGS {
            let solver = Solver::new(engine, &csr, &Options::with_threads(threads)).unwrap();
            let s = solver.sssp(root).unwrap();
            let b = solver.bfs(root).unwrap();
            for (v, &(level, dist_bits)) in want.iter().enumerate() {
                let got_bits =
                    if s.dist[v].is_finite() { s.dist[v].to_bits() } else { 0xbf80_0000 };
                assert_eq!(got_bits, dist_bits, "SCALE {scale} {engine} x{threads} dist[{v}]");
                let got_level =
                    if b.level[v] == UNREACHED_LEVEL { -1 } else { i64::from(b.level[v]) };
                assert_eq!(got_level, level, "SCALE {scale} {engine} x{threads} level[{v}]");
            }
            validate_sssp(&csr, &s).unwrap();
            validate_bfs(&csr, &b).unwrap();
        }
    }
}

/// Distances of `engine` with `threads` threads from `root`, as bits.
fn distances(csr: &Csr, engine: Engine, threads: usize, root: u64, delta: Option<f32>) -> Vec<u32> {
    let opts = Options { threads, delta, ..Options::default() };
    bits(&Solver::new(engine, csr, &opts).unwrap().sssp(root).unwrap().dist)
}

#[test]
fn tiny_and_subnormal_deltas_give_dijkstras_distances() {
    // Each of these once overflowed the bucket index (a panic, a hang in the barrier, or
    // tens of gigabytes of buckets).
    let p = KroneckerParams::new(10, 16, 2, 3).unwrap();
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let root = kronecker::search_roots(&p, &csr, 1)[0];
    let want = distances(&csr, Engine::Seq, 1, root, None);
    let deltas = [1e-30, 1e-9, f32::MIN_POSITIVE, f32::from_bits(1), f32::from_bits(0x1234)];
    for delta in deltas {
        for threads in [1, 2, 3] {
            let got = distances(&csr, Engine::Rayon, threads, root, Some(delta));
            assert!(got == want, "delta {delta:e}, {threads} threads");
        }
    }
    let s = Solver::new(Engine::Rayon, &csr, &Options { delta: Some(1e-30), ..Options::default() })
        .unwrap()
        .sssp(root)
        .unwrap();
    validate_sssp(&csr, &s).unwrap();
}

/// A path `0 - 1 - ... - n-1` whose edges all weigh `w`.
fn path(n: u64, w: f32) -> Csr {
    let el = EdgeList {
        num_vertices: n,
        src: (0..n - 1).collect(),
        dst: (1..n).collect(),
        weights: Some(vec![w; n as usize - 1]),
    };
    Csr::from_edge_list(&el)
}

#[test]
fn long_paths_with_integer_weights_match_dijkstra() {
    // Buckets once grew with (largest distance / delta): these made the rayon engine
    // allocate gigabytes or abort. Default delta, and one far below the weights (most
    // keys then lie beyond the bucket window).
    let cases = [(11, 100_000.0, true), (100_000, 1.0, true), (100_000, 100_000.0, false)];
    for (n, w, far) in cases {
        let csr = path(n, w);
        let roots = if n < 1000 { vec![0, n / 3] } else { vec![n / 3] };
        for root in roots {
            let want = distances(&csr, Engine::Seq, 1, root, None);
            // Exact while the sums stay below 2^24 (binary32 integers).
            if w == 1.0 {
                assert_eq!(f32::from_bits(want[0]), root as f32);
            }
            let deltas = if far { vec![None, Some(w / 1e6)] } else { vec![None] };
            for delta in deltas {
                let got = distances(&csr, Engine::Rayon, 2, root, delta);
                assert!(got == want, "path of {n} weighing {w}, root {root}, delta {delta:?}");
            }
        }
    }
}

#[test]
fn grids_with_integer_weights_match_dijkstra() {
    // A 150 x 150 grid, weights 1..=1000: a high-diameter graph with many distinct distances.
    let side = 150u64;
    let mut rng = Rng::new(5);
    let mut edges = Vec::new();
    for r in 0..side {
        for c in 0..side {
            let v = r * side + c;
            if c + 1 < side {
                edges.push((v, v + 1, (1 + rng.below(1000)) as f32));
            }
            if r + 1 < side {
                edges.push((v, v + side, (1 + rng.below(1000)) as f32));
            }
        }
    }
    let csr = graph(side * side, &edges);
    let want = distances(&csr, Engine::Seq, 1, 0, None);
    for threads in [1, 2, 3] {
        for delta in [None, Some(1.0), Some(1e-3)] {
            let got = distances(&csr, Engine::Rayon, threads, 0, delta);
            assert!(got == want, "{threads} threads, delta {delta:?}");
        }
    }
}

#[test]
fn huge_weights_match_dijkstra() {
    // Sums overflow to +inf: those vertices stay unreached on every engine, and the
    // default delta (relative to the largest weight) stays finite.
    let big = f32::MAX * 0.75;
    let csr =
        graph(6, &[(0, 1, big), (1, 2, big), (2, 3, 1.0), (0, 4, 1e30), (4, 5, 3e38), (1, 5, 0.0)]);
    for root in 0..6 {
        let want = distances(&csr, Engine::Seq, 1, root, None);
        for threads in [1, 2, 3] {
            for delta in [None, Some(1e-30), Some(f32::MAX)] {
                let got = distances(&csr, Engine::Rayon, threads, root, delta);
                assert!(got == want, "root {root}, {threads} threads, delta {delta:?}");
            }
        }
    }
    let want = distances(&csr, Engine::Seq, 1, 0, None);
    assert_eq!(f32::from_bits(want[1]), big);
    assert!(
        f32::from_bits(want[2]).is_infinite(),
        "{:?}",
        want.iter().map(|&b| f32::from_bits(b)).collect::<Vec<_>>()
    );
}
