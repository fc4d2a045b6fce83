//! PageRank and connected components, the kernels built on the public building blocks
//! (`parts`, `outbox`, `registry`), on every split of (fake) ranks and workers: PageRank bit
//! for bit equal to the sequential and rayon baselines (and within the stated tolerance, with
//! ranks summing to 1), components equal to the union-find labels.

mod common;
use common::{graph, opts, SPLITS};

use std::sync::Arc;

use skein_algorithms::{Engine, EngineOptions};
use skein_baselines::{Engine as Baseline, Options, Solver};
use skein_generators::analytics::{check_components, check_pagerank, PageRankParams};
use skein_generators::{Csr, EdgeList};

fn params() -> PageRankParams {
    PageRankParams { damping: 0.85, tolerance: 1e-6, max_iterations: 30 }
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn pagerank_is_bit_identical_on_every_split_and_to_both_baselines() {
    for scale in [8, 10] {
        let (g, _) = graph(scale);
        let seq = Solver::new(Baseline::Seq, &g, &Options::with_threads(1)).unwrap();
        let want = seq.pagerank(&params()).unwrap();
        assert!(want.iterations > 1);
        let rayon = Solver::new(Baseline::Rayon, &g, &Options::with_threads(2)).unwrap();
        let r = rayon.pagerank(&params()).unwrap();
        assert!(same_bits(&r.rank, &want.rank) && r.iterations == want.iterations);
        check_pagerank(&want.rank, &want.rank, 0.0).unwrap();
        for (ranks, workers) in SPLITS {
            let e = Engine::new(Arc::clone(&g), opts(ranks, workers)).unwrap();
            let (got, stats) = e.pagerank(params()).unwrap();
            assert!(
                same_bits(&got.rank, &want.rank),
                "SCALE {scale}, {ranks}x{workers}: ranks differ from the sequential ones"
            );
            assert_eq!((got.iterations, got.l1), (want.iterations, want.l1));
            check_pagerank(&got.rank, &want.rank, 1e-12).unwrap();
            assert_eq!(stats.rounds, u64::from(want.iterations));
        }
    }
}

#[test]
fn components_equal_union_find_on_every_split() {
    // Several components: a sparse Kronecker graph (edgefactor 1) has many.
    let p = skein_generators::kronecker::KroneckerParams::new(10, 1, 2, 3).unwrap();
    let sparse = Arc::new(Csr::from_edge_list(&skein_generators::kronecker::generate(&p)));
    for g in [graph(8).0, graph(10).0, sparse] {
        let want = skein_generators::analytics::components_union_find(&g);
        for engine in Baseline::ALL {
            let s = Solver::new(engine, &g, &Options::with_threads(2)).unwrap();
            assert_eq!(s.components().unwrap().label, want, "{engine}");
        }
        // Parts balanced by arcs and by vertices (as `skein cc` runs it).
        let by = [skein_algorithms::partition::VERTEX_ARCS, skein_algorithms::CC_VERTEX_ARCS];
        for ((ranks, workers), vertex_arcs) in SPLITS.into_iter().flat_map(|s| by.map(|v| (s, v))) {
            let o = EngineOptions { vertex_arcs, ..opts(ranks, workers) };
            let e = Engine::new(Arc::clone(&g), o).unwrap();
            let (got, stats) = e.components().unwrap();
            assert_eq!(got.label, want, "{ranks}x{workers}, vertex_arcs {vertex_arcs}");
            check_components(&g, &got.label).unwrap();
            // Own arcs are read at most once (by the union-find), remote arcs at most twice
            // (a probe and the hook step, when a largest component is outside the giant
            // class), whatever the split; label rounds only between partitions, over the
            // contracted edges, which the pairs make (one at each end).
            assert!(stats.arcs <= 2 * g.num_arcs(), "{ranks}x{workers}");
            let counter = |name| stats.counters.iter().find(|c| c.0 == name).unwrap().1;
            assert!(counter("contracted edges") <= 2 * counter("pairs sent"));
            assert_eq!(stats.rounds > 0, counter("contracted edges") > 0, "{ranks}x{workers}");
            if ranks * workers == 1 {
                assert!(stats.counters.iter().all(|c| c.1 == 0), "{:?}", stats.counters);
            } else {
                assert!(counter("hooked") > 0, "{ranks}x{workers}");
            }
        }
    }
}

#[test]
fn repeated_components_reuse_the_labels_and_the_arrays() {
    // Runs on one engine: each partition takes back the arrays the previous run kept (they
    // must be cleared), and `components_into` writes over the previous labels in place.
    let p = skein_generators::kronecker::KroneckerParams::new(10, 1, 2, 3).unwrap();
    let sparse = Arc::new(Csr::from_edge_list(&skein_generators::kronecker::generate(&p)));
    for g in [graph(10).0, sparse] {
        let want = skein_generators::analytics::components_union_find(&g);
        for (ranks, workers) in SPLITS {
            let e = Engine::new(Arc::clone(&g), opts(ranks, workers)).unwrap();
            // Too short: replaced.
            let mut out = skein_generators::analytics::ComponentsResult { label: vec![7; 3] };
            let first = e.components_into(&mut out).unwrap();
            assert_eq!(out.label, want, "{ranks}x{workers}, first run");
            let at = out.label.as_ptr();
            for run in 2..=3 {
                out.label.iter_mut().for_each(|l| *l = u64::MAX);
                let stats = e.components_into(&mut out).unwrap();
                assert_eq!(out.label, want, "{ranks}x{workers}, run {run}");
                assert_eq!(out.label.as_ptr(), at, "{ranks}x{workers}: the labels were reused");
                // The same work, but for the labels sent: within a label round, an offer
                // that arrives before a root offers its own lowers what it sends (timing).
                let work = |c: &[(&'static str, u64)]| -> Vec<(&'static str, u64)> {
                    c.iter().filter(|c| c.0 != "labels sent").copied().collect()
                };
                assert_eq!(work(&stats.counters), work(&first.counters), "{ranks}x{workers}");
                assert_eq!(stats.arcs, first.arcs, "{ranks}x{workers}, run {run}");
            }
        }
    }
}

/// A graph of `n` vertices and the edges `(a, b)`.
fn edges(n: u64, e: &[(u64, u64)]) -> Arc<Csr> {
    let (src, dst) = e.iter().copied().unzip();
    Arc::new(Csr::from_edge_list(&EdgeList { num_vertices: n, src, dst, weights: None }))
}

#[test]
fn components_on_graphs_that_defeat_the_hooks() {
    let mut rng = skein_generators::splitmix::SplitMix64::new(7, 0);
    let random: Vec<(u64, u64)> = (0..60).map(|_| (rng.below(90), rng.below(90))).collect();
    let star: Vec<(u64, u64)> = (1..200).map(|v| (0, v)).collect();
    let shaped = [
        // A path: each partition's largest component is a stretch, linked to the next.
        edges(300, &(0..299).map(|v| (v, v + 1)).collect::<Vec<_>>()),
        // Two combs (even and odd vertices): every partition holds a part of both, its
        // largest component is one of them, and the other comb's partitions are outside
        // the giant class.
        edges(400, &(0..398).map(|v| (v, v + 2)).collect::<Vec<_>>()),
        // Small and random: partitions of fewer than 64 vertices share bitmap words.
        edges(90, &random),
        // A star: every other vertex a singleton of its partition, hooked through one arc.
        edges(200, &star),
        // No edges at all, and a graph smaller than the partitions.
        edges(50, &[]),
        edges(3, &[(0, 2)]),
    ];
    for g in shaped {
        let want = skein_generators::analytics::components_union_find(&g);
        for (ranks, workers) in SPLITS.into_iter().chain([(1, 1), (2, 3)]) {
            let e = Engine::new(Arc::clone(&g), opts(ranks, workers)).unwrap();
            for run in 0..2 {
                let (got, _) = e.components().unwrap();
                assert_eq!(
                    got.label,
                    want,
                    "{} vertices, {ranks}x{workers}, run {run}",
                    want.len()
                );
            }
        }
    }
}

#[test]
fn validation_refuses_wrong_results() {
    let el = EdgeList { num_vertices: 4, src: vec![0, 2], dst: vec![1, 3], weights: None };
    let g = Csr::from_edge_list(&el);
    assert!(check_components(&g, &[0, 0, 2, 2]).is_ok());
    assert!(check_components(&g, &[0, 1, 2, 2]).is_err(), "an edge joins two labels");
    assert!(check_components(&g, &[0, 0, 0, 0]).is_err(), "two components, one label");
    assert!(check_components(&g, &[1, 1, 2, 2]).is_err(), "not the smallest vertex");
    let r = [0.25; 4];
    assert!(check_pagerank(&r, &r, 0.0).is_ok());
    assert!(check_pagerank(&[0.3, 0.2, 0.25, 0.25], &r, 0.01).is_err());
    assert!(check_pagerank(&[0.5; 4], &[0.5; 4], 0.0).is_err(), "sum 2");
}
