//! Engines on rank-local rows (`Engine::from_local`) and distributed results
//! (`Engine::sssp_local`, `Engine::bfs_local`) in one process: with a loopback split the
//! partitions of different fake ranks relax each other's scans over their in-arcs, so the
//! cross-rank path runs here without `mpirun`. Distances must be bit-identical and levels
//! identical to the one-process engine of the whole graph.

mod common;
use common::{graph, opts, SPLITS};

use std::sync::Arc;

use skein_algorithms::{rank_bounds, Engine, EngineError, EngineOptions, LocalBfs, LocalSssp};
use skein_generators::distributed::LocalCsr;
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::{BfsResult, Csr, EdgeList, SsspResult};

fn whole(g: &Csr) -> Arc<LocalCsr> {
    Arc::new(LocalCsr::from_csr(g, 0..g.num_vertices()))
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn check_sssp(g: &Csr, want: &SsspResult, got: &LocalSssp, what: &str) {
    assert_eq!((got.root, got.first), (want.root, 0), "{what}");
    assert!(same_bits(&got.dist, &want.dist), "{what}: distances differ");
    let full = SsspResult { root: got.root, dist: got.dist.clone(), parent: got.parent.clone() };
    validate_sssp(g, &full).unwrap_or_else(|e| panic!("{what}: {e}"));
}

fn check_bfs(g: &Csr, want: &BfsResult, got: &LocalBfs, what: &str) {
    assert_eq!((got.root, got.first), (want.root, 0), "{what}");
    assert!(got.level == want.level, "{what}: levels differ");
    let full = BfsResult { root: got.root, level: got.level.clone(), parent: got.parent.clone() };
    validate_bfs(g, &full).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Every split, engines of both kinds, both result forms: the same distances and levels as
/// the one-process engine of the whole graph with one worker per partition.
#[test]
fn local_results_equal_the_one_process_engine_on_every_split() {
    for scale in [8, 10] {
        let (g, roots) = graph(scale);
        for (ranks, workers) in SPLITS {
            let one = Engine::new(
                Arc::clone(&g),
                EngineOptions { workers: ranks * workers, chunk: 16, ..EngineOptions::default() },
            )
            .unwrap();
            let split = Engine::new(Arc::clone(&g), opts(ranks, workers)).unwrap();
            let local = Engine::from_local(whole(&g), opts(ranks, workers)).unwrap();
            assert_eq!(local.local_range(), 0..g.num_vertices());
            assert_eq!(local.delta().to_bits(), one.delta().to_bits());
            for (i, &root) in roots.iter().enumerate().take(2) {
                let what = format!("SCALE {scale}, {ranks}x{workers}, root {root}");
                let (want, want_stats) = one.sssp(root).unwrap();
                for e in [&split, &local] {
                    let (got, stats) = e.sssp_local(root).unwrap();
                    check_sssp(&g, &want, &got, &what);
                    assert!(stats.rounds > 0 && stats.arcs >= want_stats.arcs / 2, "{what}");
                    if ranks * workers > 1 {
                        assert!(stats.messages > 0, "{what}: the partitions talked");
                    }
                    if i == 0 {
                        let (full, _) = e.sssp(root).unwrap();
                        assert!(same_bits(&full.dist, &want.dist), "{what}: gathered distances");
                    }
                }
                let (want, _) = one.bfs(root).unwrap();
                for e in [&split, &local] {
                    let (got, _) = e.bfs_local(root).unwrap();
                    check_bfs(&g, &want, &got, &what);
                    if i == 0 {
                        assert!(e.bfs(root).unwrap().0.level == want.level, "{what}: gathered");
                    }
                }
            }
        }
    }
}

/// Outside `mpirun` the rows must be every row: a part of them is refused with an error
/// naming the range held and the one expected.
#[test]
fn a_wrong_range_is_a_clear_error() {
    let (g, _) = graph(8);
    let n = g.num_vertices();
    let part = Arc::new(LocalCsr::from_csr(&g, 0..n / 2));
    let err = Engine::from_local(part, opts(2, 1)).unwrap_err();
    assert!(matches!(err, EngineError::Options(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("0..{}", n / 2)) && msg.contains(&format!("0..{n}")), "{msg}");
    assert_eq!(rank_bounds(n, 1, 2), vec![0, n]);
}

/// A bad weight is found on the local rows, with its index in the whole graph's order.
#[test]
fn bad_weights_are_refused_on_local_rows() {
    let el = EdgeList {
        num_vertices: 4,
        src: vec![0, 1, 2],
        dst: vec![1, 2, 3],
        weights: Some(vec![0.5, -1.0, 0.25]),
    };
    let g = Csr::from_edge_list(&el);
    let want = g.weights().iter().position(|&w| w < 0.0).unwrap();
    let e = Engine::from_local(whole(&g), opts(2, 1)).unwrap();
    match e.sssp_local(0) {
        Err(EngineError::NegativeWeight { arc, weight }) => assert_eq!((arc, weight), (want, -1.0)),
        other => panic!("expected a weight error, got {other:?}"),
    }
    // BFS needs no weights.
    assert_eq!(e.bfs_local(0).unwrap().0.level, vec![0, 1, 2, 3]);
}

/// The kernels across ranks rely on the graph's symmetry (in-arcs are the reverses of the
/// own rows' arcs): an asymmetric graph across fake ranks fails with an error saying so,
/// where one rank computes it as before.
#[test]
fn an_asymmetric_graph_across_ranks_is_an_error() {
    // 0 -> 3 only (no 3 -> 0): with 2 ranks of 1 worker, vertex 0 is on rank 0, 3 on rank 1.
    let g = Arc::new(
        Csr::from_parts(4, vec![0, 2, 3, 4, 5], vec![1, 3, 0, 3, 2], Some(vec![1.0; 5])).unwrap(),
    );
    let one = Engine::new(Arc::clone(&g), opts(1, 2)).unwrap();
    assert_eq!(one.sssp_local(0).unwrap().0.dist, vec![0.0, 1.0, 2.0, 1.0]);
    let split = Engine::new(g, opts(2, 1)).unwrap();
    let err = split.sssp_local(0).unwrap_err().to_string();
    assert!(err.contains("not symmetric"), "{err}");
}

/// Tiny graphs: no vertex at all, and fewer vertices than partitions (empty partitions on
/// some fake ranks).
#[test]
fn tiny_graphs_on_local_rows() {
    let empty = Csr::from_parts(0, vec![0], vec![], Some(vec![])).unwrap();
    let e = Engine::from_local(whole(&empty), opts(2, 1)).unwrap();
    assert!(matches!(e.sssp_local(0), Err(EngineError::Root { root: 0, num_vertices: 0 })));
    let el = EdgeList { num_vertices: 3, src: vec![0], dst: vec![2], weights: Some(vec![0.5]) };
    let g = Csr::from_edge_list(&el);
    let e = Engine::from_local(whole(&g), opts(4, 1)).unwrap();
    let (r, _) = e.sssp_local(2).unwrap();
    assert_eq!(r.dist, vec![0.5, f32::INFINITY, 0.0]);
    assert_eq!(r.parent, vec![2, skein_generators::NO_PARENT, 2]);
    let (b, _) = e.bfs_local(0).unwrap();
    assert_eq!(b.level, vec![0, skein_generators::UNREACHED_LEVEL, 1]);
}
