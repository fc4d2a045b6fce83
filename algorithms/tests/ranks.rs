//! The kernels across (fake) ranks: a loopback split (`EngineOptions::loopback_ranks`)
//! encodes every request between fake ranks as it would travel over MPI, and the partition
//! is the same function of ranks × workers as of one process's workers, so distances are
//! bit-identical and levels identical to the sequential baselines for every split.

mod common;
use common::{graph, opts, SPLITS};

use std::sync::Arc;

use skein_algorithms::{Engine, EngineOptions};
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::Csr;

fn engine(g: &Arc<Csr>, ranks: usize, workers: usize) -> Engine {
    Engine::new(Arc::clone(g), opts(ranks, workers)).unwrap()
}

#[test]
fn sssp_is_bit_identical_on_every_split_of_ranks_and_workers() {
    let seq = skein_baselines::Options::with_threads(1);
    for scale in [8, 10] {
        let (g, roots) = graph(scale);
        for (ranks, workers) in SPLITS {
            let e = engine(&g, ranks, workers);
            assert_eq!(e.partitioning().parts(), ranks * workers);
            for &root in &roots {
                let want = skein_baselines::sssp(skein_baselines::Engine::Seq, &g, root, &seq)
                    .unwrap()
                    .dist;
                let (r, stats) = e.sssp(root).unwrap();
                let same = r.dist.len() == want.len()
                    && r.dist.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "SCALE {scale}, {ranks}x{workers}, root {root}: distances differ");
                validate_sssp(&g, &r).unwrap();
                assert!(stats.messages > 0, "partitions must have talked");
            }
        }
    }
}

#[test]
fn bfs_levels_are_identical_on_every_split_of_ranks_and_workers() {
    let seq = skein_baselines::Options::with_threads(1);
    for scale in [8, 10] {
        let (g, roots) = graph(scale);
        for (ranks, workers) in SPLITS {
            let e = engine(&g, ranks, workers);
            for &root in &roots {
                let want = skein_baselines::bfs(skein_baselines::Engine::Seq, &g, root, &seq)
                    .unwrap()
                    .level;
                let (r, stats) = e.bfs(root).unwrap();
                assert!(
                    r.level == want,
                    "SCALE {scale}, {ranks}x{workers}, root {root}: levels differ"
                );
                validate_bfs(&g, &r).unwrap();
                assert!(stats.messages > 0 || stats.rounds > 0);
            }
        }
    }
}

/// Bottom-up levels (every frontier bitmap sent to every partition as data) and top-down
/// only (alpha 0) give the same levels across fake ranks.
#[test]
fn bfs_directions_agree_across_fake_ranks() {
    let (g, roots) = graph(9);
    for alpha in [0, 1, 15] {
        let opts = EngineOptions {
            workers: 3,
            loopback_ranks: Some(3),
            alpha,
            chunk: 8,
            ..EngineOptions::default()
        };
        let e = Engine::new(Arc::clone(&g), opts).unwrap();
        let seq = skein_baselines::Options::with_threads(1);
        let root = roots[0];
        let want =
            skein_baselines::bfs(skein_baselines::Engine::Seq, &g, root, &seq).unwrap().level;
        assert!(e.bfs(root).unwrap().0.level == want, "alpha {alpha}");
    }
}

/// Several engines (several graphs in the rank-local registry) live side by side, and a
/// search after another engine was dropped still finds its own graph.
#[test]
fn engines_on_different_graphs_keep_their_own_graph() {
    let (small, r1) = graph(8);
    let (big, r2) = graph(9);
    let a = engine(&small, 2, 1);
    let b = engine(&big, 2, 1);
    let seq = skein_baselines::Options::with_threads(1);
    let want = skein_baselines::bfs(skein_baselines::Engine::Seq, &big, r2[0], &seq).unwrap().level;
    drop(a);
    assert!(b.bfs(r2[0]).unwrap().0.level == want);
    let c = engine(&small, 2, 1);
    let want =
        skein_baselines::bfs(skein_baselines::Engine::Seq, &small, r1[0], &seq).unwrap().level;
    assert!(c.bfs(r1[0]).unwrap().0.level == want);
}

/// The `*_on_rank0` variants return the result in the process that ran the search (rank 0
/// of a loopback split is this process), equal to the one every rank receives.
#[test]
fn results_kept_on_rank_0_equal_the_broadcast_ones() {
    let (g, roots) = graph(9);
    let e = engine(&g, 2, 1);
    for &root in &roots {
        let (s, _) = e.sssp(root).unwrap();
        let (s0, stats) = e.sssp_on_rank0(root).unwrap();
        let s0 = s0.expect("kept on rank 0");
        assert!(s0.dist.iter().zip(&s.dist).all(|(a, b)| a.to_bits() == b.to_bits()));
        assert_eq!(s0.parent.len(), s.parent.len());
        validate_sssp(&g, &s0).unwrap();
        assert!(stats.rounds > 0);
        let (b, _) = e.bfs(root).unwrap();
        let b0 = e.bfs_on_rank0(root).unwrap().0.expect("kept on rank 0");
        assert!(b0.level == b.level);
        validate_bfs(&g, &b0).unwrap();
    }
}
