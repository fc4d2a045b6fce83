//! Distributed Graph500 validation, roots and `nedge` on simulated ranks (`MemExchange`):
//! for 1 to 4 ranks, the same verdicts, errors and statistics as the single-process
//! validator, the same roots as `search_roots`, the same per-root component edge counts.

mod common;

use skein_generators::distributed::collective::Layout;
use skein_generators::distributed::roots::{
    component_edge_counts, search_roots_distributed, search_roots_distributed_for,
};
use skein_generators::distributed::validate::{
    validate_bfs_distributed, validate_bfs_distributed_with_budget,
    validate_sssp_distributed_with_budget, DistValidationError, DEFAULT_GATHER_BYTES,
};
use skein_generators::distributed::{DistError, LocalCsr, MemExchange};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{teps_edge_count, validate_bfs, validate_sssp, Rule};
use skein_generators::{BfsResult, Csr, EdgeList, SsspResult, NO_PARENT, UNREACHED_LEVEL};

/// Runs `f` on every rank of a simulated job of `ranks` ranks, one thread each.
fn on_ranks<T: Send>(ranks: usize, f: impl Fn(usize, &mut MemExchange) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = MemExchange::group(ranks)
            .into_iter()
            .enumerate()
            .map(|(r, mut ex)| s.spawn(move || f(r, &mut ex)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    })
}

/// Splits: (ranks, workers, round size).
const SPLITS: [(usize, usize, usize); 6] =
    [(1, 1, 1 << 18), (2, 1, 97), (2, 2, 1 << 18), (3, 1, 64), (4, 1, 1000), (4, 2, 5)];

type Verdict = Result<(u64, u64), DistValidationError>;

fn verdict_of(
    r: Result<
        skein_generators::validate::ValidationStats,
        skein_generators::validate::ValidationError,
    >,
) -> Verdict {
    r.map(|s| (s.reached, s.teps_edges)).map_err(DistValidationError::Invalid)
}

/// One rank's distributed validation of its slice (`values`, `parent`) of a result.
type Check<V> = fn(
    &LocalCsr,
    u64,
    &[V],
    &[u64],
    usize,
    u64,
    &mut MemExchange,
) -> Result<skein_generators::validate::ValidationStats, DistValidationError>;

/// The distributed verdict of `check` on every split equals `want`, the single-process one
/// (every rank returns it), both ways of learning the far ends' values: asked from the
/// owners (budget 0) and gathered on every rank. Returns it.
#[track_caller]
fn same_on_every_split<V: Sync>(
    g: &Csr,
    want: Verdict,
    root: u64,
    values: &[V],
    parent: &[u64],
    check: Check<V>,
) -> Verdict {
    for budget in [0, DEFAULT_GATHER_BYTES] {
        for (ranks, workers, round) in SPLITS {
            let b = common::bounds(g.num_vertices(), ranks, workers);
            let got = on_ranks(ranks, |k, ex| {
                let local = LocalCsr::from_csr(g, b[k]..b[k + 1]);
                let (lo, hi) = (b[k] as usize, b[k + 1] as usize);
                check(&local, root, &values[lo..hi], &parent[lo..hi], round, budget, ex)
                    .map(|s| (s.reached, s.teps_edges))
            });
            for (k, v) in got.iter().enumerate() {
                assert_eq!(
                    v, &want,
                    "rank {k} of {ranks} ({b:?}, rounds of {round}, budget {budget})"
                );
            }
        }
    }
    want
}

/// The distributed BFS verdict on every split equals the single-process one; returns it.
#[track_caller]
fn bfs_same(g: &Csr, r: &BfsResult) -> Verdict {
    let want = verdict_of(validate_bfs(g, r));
    same_on_every_split(g, want, r.root, &r.level, &r.parent, |g, root, v, p, round, b, ex| {
        validate_bfs_distributed_with_budget(g, root, v, p, round, b, ex)
    })
}

/// The distributed SSSP verdict on every split equals the single-process one; returns it.
#[track_caller]
fn sssp_same(g: &Csr, r: &SsspResult) -> Verdict {
    let want = verdict_of(validate_sssp(g, r));
    same_on_every_split(g, want, r.root, &r.dist, &r.parent, |g, root, v, p, round, b, ex| {
        validate_sssp_distributed_with_budget(g, root, v, p, round, b, ex)
    })
}

#[track_caller]
fn rule_of(v: &Verdict) -> (Rule, u64) {
    match v {
        Err(DistValidationError::Invalid(e)) => (e.rule, e.vertex),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

struct Fixture {
    g: Csr,
    bfs: BfsResult,
    sssp: SsspResult,
}

fn fixture(scale: u32) -> Fixture {
    let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
    let g = Csr::from_edge_list(&kronecker::generate(&p));
    let root = kronecker::search_roots(&p, &g, 1)[0];
    let (bfs, sssp) = common::root0(scale, root);
    Fixture { g, bfs, sssp }
}

fn leaves(parent: &[u64], root: u64) -> Vec<u64> {
    let mut has_child = vec![false; parent.len()];
    for (v, &p) in parent.iter().enumerate() {
        if p != NO_PARENT && p != v as u64 {
            has_child[p as usize] = true;
        }
    }
    (0..parent.len() as u64)
        .filter(|&v| v != root && parent[v as usize] != NO_PARENT && !has_child[v as usize])
        .collect()
}

#[test]
fn reference_results_pass_with_the_same_stats() {
    for scale in [8, 10] {
        let f = fixture(scale);
        let b = bfs_same(&f.g, &f.bfs).expect("reference BFS is valid");
        let s = sssp_same(&f.g, &f.sssp).expect("reference SSSP is valid");
        assert_eq!(b, s);
        assert!(b.0 > 1 && b.1 > 0, "{b:?}");
    }
}

#[test]
fn corrupted_bfs_results_fail_alike() {
    let f = fixture(8);
    let (g, root) = (&f.g, f.bfs.root);
    let level = |v: u64| f.bfs.level[v as usize];
    let leaf = leaves(&f.bfs.parent, root)[0];
    let isolated = (0..256).find(|&v| g.degree(v) == 0).expect("an isolated vertex");
    let mut cases: Vec<(BfsResult, Rule, Option<u64>)> = Vec::new();
    let mut c = |edit: &dyn Fn(&mut BfsResult), rule: Rule, v: Option<u64>| {
        let mut r = f.bfs.clone();
        edit(&mut r);
        cases.push((r, rule, v));
    };
    c(&|r| r.root = 256, Rule::Root, Some(256));
    c(&|r| r.parent[root as usize] = g.neighbors(root)[0], Rule::Root, Some(root));
    c(&|r| r.level[root as usize] = 1, Rule::Root, Some(root));
    c(&|r| r.parent[leaf as usize] = NO_PARENT, Rule::Parent, Some(leaf));
    c(&|r| r.parent[leaf as usize] = 999, Rule::Parent, Some(leaf));
    c(&|r| r.parent[leaf as usize] = leaf, Rule::Parent, Some(leaf));
    let fake = (0..256)
        .find(|&u| level(u) + 1 == level(leaf) && !g.neighbors(leaf).contains(&u))
        .expect("a non-neighbour one level up");
    c(&|r| r.parent[leaf as usize] = fake, Rule::ParentEdge, Some(leaf));
    let (v, u) = leaves(&f.bfs.parent, root)
        .into_iter()
        .find_map(|v| g.neighbors(v).iter().find(|&&u| level(u) == level(v)).map(|&u| (v, u)))
        .expect("an edge inside one level");
    c(&|r| r.parent[v as usize] = u, Rule::TreeLevel, Some(v));
    c(
        &|r| {
            r.level[v as usize] = level(v) + 1;
            r.parent[v as usize] = u;
        },
        Rule::EdgeLevel,
        None,
    );
    c(
        &|r| {
            r.level[leaf as usize] = UNREACHED_LEVEL;
            r.parent[leaf as usize] = NO_PARENT;
        },
        Rule::Unreached,
        Some(leaf),
    );
    c(&|r| r.parent[isolated as usize] = root, Rule::Parent, Some(isolated));
    c(
        &|r| {
            r.level[isolated as usize] = 1;
            r.parent[isolated as usize] = root;
        },
        Rule::OutsideComponent,
        Some(isolated),
    );
    // The parent of a vertex made unreached: its children fail.
    let p = f.bfs.parent[leaf as usize];
    c(
        &|r| {
            r.level[p as usize] = UNREACHED_LEVEL;
            r.parent[p as usize] = NO_PARENT;
        },
        Rule::Parent,
        None,
    );
    for (r, rule, vertex) in cases {
        let got = bfs_same(g, &r);
        let (got_rule, got_vertex) = rule_of(&got);
        if rule == Rule::Parent && vertex.is_none() {
            assert!(matches!(got_rule, Rule::Parent | Rule::Unreached), "{got:?}");
        } else {
            assert_eq!(got_rule, rule, "{got:?}");
        }
        if let Some(v) = vertex {
            assert_eq!(got_vertex, v, "{got:?}");
        }
    }
}

#[test]
fn corrupted_sssp_results_fail_alike() {
    let f = fixture(8);
    let (g, root) = (&f.g, f.sssp.root);
    let dist = |v: u64| f.sssp.dist[v as usize];
    let leaf_list = leaves(&f.sssp.parent, root);
    let leaf = leaf_list[0];
    let isolated = (0..256).find(|&v| g.degree(v) == 0).unwrap();
    let mut cases: Vec<(SsspResult, Rule, Option<u64>)> = Vec::new();
    let mut c = |edit: &dyn Fn(&mut SsspResult), rule: Rule, v: Option<u64>| {
        let mut r = f.sssp.clone();
        edit(&mut r);
        cases.push((r, rule, v));
    };
    c(&|r| r.dist[root as usize] = 0.5, Rule::Root, Some(root));
    c(&|r| r.parent[root as usize] = NO_PARENT, Rule::Root, Some(root));
    c(&|r| r.dist[leaf as usize] = f32::NAN, Rule::Value, Some(leaf));
    c(&|r| r.dist[leaf as usize] = -1.0, Rule::Value, Some(leaf));
    c(&|r| r.parent[leaf as usize] = NO_PARENT, Rule::Parent, Some(leaf));
    let fake = (0..256)
        .find(|&u| u != leaf && dist(u).is_finite() && !g.neighbors(leaf).contains(&u))
        .unwrap();
    c(&|r| r.parent[leaf as usize] = fake, Rule::ParentEdge, Some(leaf));
    let (v, u) = leaf_list
        .iter()
        .find_map(|&v| {
            g.arcs(v)
                .find(|&(u, w)| u != f.sssp.parent[v as usize] && dist(u) + w != dist(v))
                .map(|(u, _)| (v, u))
        })
        .unwrap();
    c(&|r| r.parent[v as usize] = u, Rule::TreeDistance, Some(v));
    let (v, u, d) = leaf_list
        .iter()
        .find_map(|&v| {
            g.arcs(v).find(|&(u, w)| dist(u) + w > dist(v)).map(|(u, w)| (v, u, dist(u) + w))
        })
        .unwrap();
    c(
        &|r| {
            r.dist[v as usize] = d;
            r.parent[v as usize] = u;
        },
        Rule::TriangleInequality,
        Some(v),
    );
    c(
        &|r| {
            r.dist[leaf as usize] = f32::INFINITY;
            r.parent[leaf as usize] = NO_PARENT;
        },
        Rule::Unreached,
        Some(leaf),
    );
    c(
        &|r| {
            r.dist[isolated as usize] = 0.5;
            r.parent[isolated as usize] = root;
        },
        Rule::OutsideComponent,
        Some(isolated),
    );
    for (r, rule, vertex) in cases {
        let got = sssp_same(g, &r);
        let (got_rule, got_vertex) = rule_of(&got);
        assert_eq!(got_rule, rule, "{got:?}");
        if let Some(v) = vertex {
            assert_eq!(got_vertex, v, "{got:?}");
        }
    }
}

/// A tiny xorshift for reproducible corruptions.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Random one- and two-vertex corruptions of the SCALE 8 reference results: every
/// distributed verdict (error text included) equals the single-process one.
#[test]
fn random_corruptions_give_the_single_process_errors() {
    let f = fixture(8);
    let n = f.g.num_vertices();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut rules = std::collections::HashSet::new();
    for case in 0..24 {
        let mut b = f.bfs.clone();
        let mut s = f.sssp.clone();
        for _ in 0..1 + case % 2 {
            let v = (rng.next() % n) as usize;
            let u = rng.next() % n;
            match rng.next() % 5 {
                0 => b.level[v] = b.level[v].wrapping_add(1),
                1 => b.parent[v] = u,
                2 => {
                    b.level[v] = UNREACHED_LEVEL;
                    b.parent[v] = NO_PARENT;
                }
                3 => b.level[v] = b.level[u as usize].wrapping_add(1),
                _ => b.level[v] = 0,
            }
            match rng.next() % 5 {
                0 => s.dist[v] *= 1.5,
                1 => s.parent[v] = u,
                2 => {
                    s.dist[v] = f32::INFINITY;
                    s.parent[v] = NO_PARENT;
                }
                3 => s.dist[v] = s.dist[u as usize],
                _ => s.dist[v] = 0.25,
            }
        }
        for v in [bfs_same(&f.g, &b), sssp_same(&f.g, &s)] {
            if let Err(DistValidationError::Invalid(e)) = v {
                rules.insert(e.rule);
            }
        }
    }
    assert!(rules.len() >= 5, "too few kinds of errors exercised: {rules:?}");
}

fn graph(n: u64, edges: &[(u64, u64, f32)]) -> Csr {
    Csr::from_edge_list(&EdgeList {
        num_vertices: n,
        src: edges.iter().map(|e| e.0).collect(),
        dst: edges.iter().map(|e| e.1).collect(),
        weights: Some(edges.iter().map(|e| e.2).collect()),
    })
}

#[test]
fn parent_cycles_fail_alike() {
    // 0 -1.0- 1 -0- 2 -0- 3: 2 and 3 claim each other as parents at equal distance.
    let g = graph(4, &[(0, 1, 1.0), (1, 2, 0.0), (2, 3, 0.0)]);
    let good = SsspResult { root: 0, dist: vec![0.0, 1.0, 1.0, 1.0], parent: vec![0, 0, 1, 2] };
    assert_eq!(sssp_same(&g, &good).unwrap(), (4, 3));
    let bad = SsspResult { parent: vec![0, 0, 3, 2], ..good.clone() };
    assert_eq!(rule_of(&sssp_same(&g, &bad)), (Rule::TreeCycle, 2));
    // The walk from the smallest vertex off the tree enters the cycle further on.
    let g =
        graph(6, &[(0, 1, 1.0), (1, 2, 0.0), (2, 3, 0.0), (3, 4, 0.0), (4, 5, 0.0), (5, 3, 0.0)]);
    let bad = SsspResult {
        root: 0,
        dist: vec![0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        parent: vec![0, 0, 3, 5, 3, 4],
    };
    assert_eq!(rule_of(&sssp_same(&g, &bad)), (Rule::TreeCycle, 3));
    // A separate zero-weight component claimed reached through a cycle.
    let g = graph(4, &[(0, 1, 1.0), (2, 3, 0.0)]);
    let bad = SsspResult { root: 0, dist: vec![0.0, 1.0, 5.0, 5.0], parent: vec![0, 0, 3, 2] };
    assert_eq!(rule_of(&sssp_same(&g, &bad)), (Rule::OutsideComponent, 2));
}

#[test]
fn small_graphs_with_selfloops_repeats_and_empty_ranks() {
    let g = graph(5, &[(0, 1, 1.0), (1, 1, 1.0), (1, 2, 1.0), (2, 1, 1.0), (3, 4, 1.0)]);
    let r = BfsResult {
        root: 0,
        level: vec![0, 1, 2, UNREACHED_LEVEL, UNREACHED_LEVEL],
        parent: vec![0, 0, 1, NO_PARENT, NO_PARENT],
    };
    assert_eq!(bfs_same(&g, &r).unwrap(), (3, 3));
    // Ranks owning nothing, and the root on the last rank.
    for b in [vec![0, 0, 5], vec![0, 5, 5, 5], vec![0, 2, 2, 4, 5]] {
        let r = BfsResult {
            root: 4,
            level: vec![u32::MAX, u32::MAX, u32::MAX, 1, 0],
            parent: vec![NO_PARENT, NO_PARENT, NO_PARENT, 4, 4],
        };
        let got = on_ranks(b.len() - 1, |k, ex| {
            let local = LocalCsr::from_csr(&g, b[k]..b[k + 1]);
            let (lo, hi) = (b[k] as usize, b[k + 1] as usize);
            validate_bfs_distributed(&local, 4, &r.level[lo..hi], &r.parent[lo..hi], 2, ex)
                .map(|s| (s.reached, s.teps_edges))
        });
        assert!(got.iter().all(|v| v == &Ok((2, 1))), "{b:?}: {got:?}");
    }
}

/// Slices of the wrong length and rows that do not tile the vertices: clear errors on
/// every rank, naming the rank and the vertex.
#[test]
fn bad_slices_and_layouts_are_errors() {
    let f = fixture(8);
    let b = common::bounds(256, 3, 1);
    let got = on_ranks(3, |k, ex| {
        let local = LocalCsr::from_csr(&f.g, b[k]..b[k + 1]);
        let (lo, mut hi) = (b[k] as usize, b[k + 1] as usize);
        if k == 1 {
            hi -= 1;
        }
        validate_bfs_distributed(
            &local,
            f.bfs.root,
            &f.bfs.level[lo..hi],
            &f.bfs.parent[lo..hi],
            64,
            ex,
        )
    });
    for v in &got {
        let Err(DistValidationError::Invalid(e)) = v else { panic!("{v:?}") };
        assert_eq!((e.rule, e.vertex), (Rule::Length, b[2] - 1), "{e}");
        assert!(e.detail.contains("level has 84 entries on rank 1"), "{e}");
    }
    // Rank 1's rows overlap rank 0's.
    let got = on_ranks(2, |k, ex| {
        let range = if k == 0 { 0..128 } else { 100..256 };
        let local = LocalCsr::from_csr(&f.g, range);
        Layout::gather(&local, ex).map(|_| ())
    });
    for v in got {
        let e = v.unwrap_err();
        assert!(matches!(e, DistError::Exchange(_)), "{e}");
        assert!(e.to_string().contains("rank 1: 100..256 of 256"), "{e}");
    }
}

#[test]
fn roots_are_the_single_process_roots() {
    for (scale, seeds) in [(8u32, (2u64, 3u64)), (10, (2, 3)), (9, (5, 9))] {
        let p = KroneckerParams::new(scale, 16, seeds.0, seeds.1).unwrap();
        let g = Csr::from_edge_list(&kronecker::generate(&p));
        let n = g.num_vertices();
        let want = kronecker::search_roots_counted(n, |v| g.degree(v), seeds.0, seeds.1, 64);
        if seeds == (2, 3) {
            assert_eq!(want, common::roots(scale), "the reference's roots");
        }
        for (ranks, workers, _) in SPLITS {
            let b = common::bounds(n, ranks, workers);
            for batch in [1, 7, 256] {
                let got = on_ranks(ranks, |k, ex| {
                    let local = LocalCsr::from_csr(&g, b[k]..b[k + 1]);
                    search_roots_distributed_for(&local, seeds.0, seeds.1, 64, batch, ex).unwrap()
                });
                assert!(got.iter().all(|x| x == &want), "SCALE {scale}, {b:?}, batch {batch}");
            }
            let got = on_ranks(ranks, |k, ex| {
                search_roots_distributed(&p, &LocalCsr::from_csr(&g, b[k]..b[k + 1]), 64, ex)
                    .unwrap()
            });
            assert!(got.iter().all(|x| x == &want.0));
        }
    }
    // A graph with fewer good candidates than roots: the counter passes 2n, repeats kept.
    let g = graph(16, &[(1, 2, 1.0), (5, 5, 1.0)]);
    let want = kronecker::search_roots_counted(16, |v| g.degree(v), 2, 3, 8);
    let got = on_ranks(3, |k, ex| {
        let b = [0, 4, 9, 16];
        search_roots_distributed_for(&LocalCsr::from_csr(&g, b[k]..b[k + 1]), 2, 3, 8, 3, ex)
            .unwrap()
    });
    assert!(got.iter().all(|x| x == &want), "{got:?} vs {want:?}");
}

/// The per-root component edge counts of `nedge`, single-process: what
/// `skein_nedge_stats` computes per root (component by BFS, `teps_edge_count` over it).
fn nedge_single(g: &Csr, roots: &[u64]) -> Vec<u64> {
    roots
        .iter()
        .map(|&root| {
            let mut seen = vec![false; g.num_vertices() as usize];
            let mut stack = vec![root];
            seen[root as usize] = true;
            while let Some(v) = stack.pop() {
                for &u in g.neighbors(v) {
                    if !seen[u as usize] {
                        seen[u as usize] = true;
                        stack.push(u);
                    }
                }
            }
            teps_edge_count(g, |v| seen[v as usize])
        })
        .collect()
}

#[test]
fn nedge_equals_the_single_process_counts() {
    for scale in [8u32, 10] {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let g = Csr::from_edge_list(&kronecker::generate(&p));
        let mut roots = kronecker::search_roots(&p, &g, 64);
        // Vertices of small components and isolated ones too.
        roots.extend((0..g.num_vertices()).filter(|&v| g.degree(v) <= 1).take(6));
        let want = nedge_single(&g, &roots);
        assert!(want.contains(&0) && want.iter().any(|&c| c > 1000), "{want:?}");
        for (ranks, workers, round) in SPLITS {
            let b = common::bounds(g.num_vertices(), ranks, workers);
            let got = on_ranks(ranks, |k, ex| {
                component_edge_counts(&LocalCsr::from_csr(&g, b[k]..b[k + 1]), &roots, round, ex)
                    .unwrap()
            });
            assert!(got.iter().all(|x| x == &want), "SCALE {scale}, {b:?}, rounds of {round}");
        }
    }
    // Two components and a repeated edge.
    let g = graph(6, &[(0, 1, 1.0), (1, 0, 1.0), (2, 3, 1.0), (3, 4, 1.0), (4, 4, 1.0)]);
    let got = on_ranks(2, |k, ex| {
        let b = [0, 3, 6];
        component_edge_counts(&LocalCsr::from_csr(&g, b[k]..b[k + 1]), &[0, 3, 5, 1], 1, ex)
            .unwrap()
    });
    assert!(got.iter().all(|x| x == &[2, 2, 0, 2]), "{got:?}");
}

/// Round sizes beyond what an exchange moves at once are clamped (1 at least).
#[test]
fn round_sizes_are_clamped() {
    use skein_generators::distributed::collective::clamp_round;
    let group = MemExchange::group(3);
    assert_eq!(clamp_round(0, &group[0]), 1);
    assert_eq!(clamp_round(1000, &group[0]), 1000);
    assert_eq!(clamp_round(usize::MAX, &group[0]) as u64, u64::MAX / 3 - 1);
    // A huge round validates like any other.
    let f = fixture(8);
    let got = on_ranks(2, |k, ex| {
        let b = [0, 100, 256];
        let local = LocalCsr::from_csr(&f.g, b[k]..b[k + 1]);
        let (lo, hi) = (b[k] as usize, b[k + 1] as usize);
        validate_bfs_distributed(
            &local,
            f.bfs.root,
            &f.bfs.level[lo..hi],
            &f.bfs.parent[lo..hi],
            usize::MAX,
            ex,
        )
        .map(|s| (s.reached, s.teps_edges))
    });
    let want = validate_bfs(&f.g, &f.bfs).map(|s| (s.reached, s.teps_edges)).unwrap();
    assert!(got.iter().all(|v| v == &Ok(want)), "{got:?}");
}

/// The gathered values are every rank's values in vertex order, with ranks owning nothing,
/// odd counts and rounds smaller than a rank's share (several rounds, a rank done early).
#[test]
fn all_gather_puts_every_value_in_place() {
    use skein_generators::distributed::collective::all_gather_u32;
    let value = |v: u64| (v as u32).wrapping_mul(2_654_435_761) ^ 0x5a5a;
    for bounds in [vec![0, 7], vec![0, 0, 9], vec![0, 5, 5, 12], vec![0, 1, 10, 10, 13]] {
        let ranks = bounds.len() - 1;
        let n = bounds[ranks];
        for round in [1, 2, 3, 1000] {
            let got = on_ranks(ranks, |k, ex| {
                let layout = Layout::from_bounds(&bounds, k).unwrap();
                all_gather_u32(ex, &layout, |i| value(bounds[k] + i as u64), round).unwrap()
            });
            let want: Vec<u32> = (0..n).map(value).collect();
            for (k, g) in got.iter().enumerate() {
                assert_eq!(g, &want, "rank {k}, bounds {bounds:?}, rounds of {round}");
            }
        }
    }
}

/// `reach` sends each far vertex to its owner once, however many arcs lead to it: with
/// rounds of one id, 15 arcs each way between the ranks take a handful of rounds, not 30.
#[test]
fn reach_sends_each_far_vertex_once() {
    use skein_generators::distributed::collective::reach;
    let mut edges = vec![(0, 1, 1.0), (0, 2, 1.0), (0, 3, 1.0), (0, 4, 1.0), (8, 9, 1.0)];
    for v in 0..5 {
        edges.extend([(v, 7, 1.0); 3]);
    }
    let g = graph(10, &edges);
    let bounds = [0u64, 5, 10];
    let got = on_ranks(2, |k, ex| {
        let layout = Layout::from_bounds(&bounds, k).unwrap();
        let local = LocalCsr::from_csr(&g, bounds[k]..bounds[k + 1]);
        let mut seen = vec![false; 5];
        let seed = (k == 0).then_some(0);
        let rounds = reach(ex, &layout, local.offsets(), local.targets(), seed, &mut seen, 1);
        (rounds.unwrap(), seen)
    });
    assert_eq!(got[0].1, [true; 5]);
    assert_eq!(got[1].1, [false, false, true, false, false]);
    assert_eq!(got[0].0, got[1].0);
    assert!(got[0].0 <= 8, "{} rounds", got[0].0);
}
