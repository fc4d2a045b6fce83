//! Graph500 validation: the reference's root-0 results pass, corrupted copies fail with
//! the rule that was broken.

mod common;

use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{teps_edge_count, validate_bfs, validate_sssp, Rule};
use skein_generators::{BfsResult, Csr, EdgeList, SsspResult, NO_PARENT, UNREACHED_LEVEL};

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
    validate_bfs(&g, &bfs).expect("reference BFS is valid");
    validate_sssp(&g, &sssp).expect("reference SSSP is valid");
    Fixture { g, bfs, sssp }
}

/// Vertices that are nobody's parent (leaves of the tree), reached, not the root.
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

#[track_caller]
fn bfs_fails(f: &Fixture, r: &BfsResult, rule: Rule, vertex: u64) {
    let e = validate_bfs(&f.g, r).expect_err("corrupted BFS must fail");
    assert_eq!((e.rule, e.vertex), (rule, vertex), "got: {e}");
    let msg = e.to_string();
    assert!(msg.contains(&format!("{rule:?}")) && msg.contains(&vertex.to_string()), "{msg}");
}

#[track_caller]
fn sssp_fails(f: &Fixture, r: &SsspResult, rule: Rule, vertex: u64) {
    let e = validate_sssp(&f.g, r).expect_err("corrupted SSSP must fail");
    assert_eq!((e.rule, e.vertex), (rule, vertex), "got: {e}");
}

#[test]
fn corrupted_bfs_results_fail() {
    let f = fixture(8);
    let g = &f.g;
    let root = f.bfs.root;
    let level = |v: u64| f.bfs.level[v as usize];

    // Length.
    let mut r = f.bfs.clone();
    r.level.pop();
    bfs_fails(&f, &r, Rule::Length, 255);
    let mut r = f.bfs.clone();
    r.parent.push(0);
    bfs_fails(&f, &r, Rule::Length, 256);

    // Root: not a vertex, wrong parent, wrong level.
    let mut r = f.bfs.clone();
    r.root = 256;
    bfs_fails(&f, &r, Rule::Root, 256);
    let mut r = f.bfs.clone();
    r.parent[root as usize] = g.neighbors(root)[0];
    bfs_fails(&f, &r, Rule::Root, root);
    let mut r = f.bfs.clone();
    r.level[root as usize] = 1;
    bfs_fails(&f, &r, Rule::Root, root);

    // Parent: a reached vertex without a parent.
    let leaf = leaves(&f.bfs.parent, root)[0];
    let mut r = f.bfs.clone();
    r.parent[leaf as usize] = NO_PARENT;
    bfs_fails(&f, &r, Rule::Parent, leaf);

    // ParentEdge: a parent one level up that is not a neighbour.
    let v = leaf;
    let fake = (0..256)
        .find(|&u| level(u) + 1 == level(v) && !g.neighbors(v).contains(&u))
        .expect("a non-neighbour one level up");
    let mut r = f.bfs.clone();
    r.parent[v as usize] = fake;
    bfs_fails(&f, &r, Rule::ParentEdge, v);

    // TreeLevel: a parent that is a neighbour at the same level.
    let (v, u) = leaves(&f.bfs.parent, root)
        .into_iter()
        .find_map(|v| g.neighbors(v).iter().find(|&&u| level(u) == level(v)).map(|&u| (v, u)))
        .expect("an edge inside one level");
    let mut r = f.bfs.clone();
    r.parent[v as usize] = u;
    bfs_fails(&f, &r, Rule::TreeLevel, v);

    // Wrong level at a leaf, parent kept: the tree check fails there.
    let mut r = f.bfs.clone();
    r.level[leaf as usize] += 1;
    let e = validate_bfs(g, &r).unwrap_err();
    assert!(matches!(e.rule, Rule::TreeLevel | Rule::EdgeLevel), "{e}");

    // EdgeLevel: the leaf v moved one level down under its same-level neighbour u, so
    // the edge from its old parent spans two levels (the tree itself stays consistent).
    let max = level(v);
    let mut r = f.bfs.clone();
    r.level[v as usize] = max + 1;
    r.parent[v as usize] = u;
    let e = validate_bfs(g, &r).unwrap_err();
    assert_eq!(e.rule, Rule::EdgeLevel, "{e}");
    let old_parent = f.bfs.parent[v as usize];
    assert!(e.vertex == v || e.vertex == old_parent || g.neighbors(v).contains(&e.vertex), "{e}");

    // Unreached: a leaf of the component dropped.
    let mut r = f.bfs.clone();
    r.level[leaf as usize] = UNREACHED_LEVEL;
    r.parent[leaf as usize] = NO_PARENT;
    bfs_fails(&f, &r, Rule::Unreached, leaf);

    // Parent: an unreached vertex with a parent.
    let isolated = (0..256).find(|&v| g.degree(v) == 0).expect("an isolated vertex");
    let mut r = f.bfs.clone();
    r.parent[isolated as usize] = root;
    bfs_fails(&f, &r, Rule::Parent, isolated);

    // OutsideComponent: an isolated vertex reported reached under the root.
    let mut r = f.bfs.clone();
    r.level[isolated as usize] = 1;
    r.parent[isolated as usize] = root;
    bfs_fails(&f, &r, Rule::OutsideComponent, isolated);
}

#[test]
fn corrupted_sssp_results_fail() {
    let f = fixture(8);
    let g = &f.g;
    let root = f.sssp.root;
    let dist = |v: u64| f.sssp.dist[v as usize];
    let leaf_list = leaves(&f.sssp.parent, root);
    let leaf = leaf_list[0];

    let mut r = f.sssp.clone();
    r.dist.pop();
    sssp_fails(&f, &r, Rule::Length, 255);

    // Root.
    let mut r = f.sssp.clone();
    r.dist[root as usize] = 0.5;
    sssp_fails(&f, &r, Rule::Root, root);
    let mut r = f.sssp.clone();
    r.parent[root as usize] = NO_PARENT;
    sssp_fails(&f, &r, Rule::Root, root);

    // Value: NaN and negative distances.
    let mut r = f.sssp.clone();
    r.dist[leaf as usize] = f32::NAN;
    sssp_fails(&f, &r, Rule::Value, leaf);
    let mut r = f.sssp.clone();
    r.dist[leaf as usize] = -1.0;
    sssp_fails(&f, &r, Rule::Value, leaf);

    // Parent: reached without parent.
    let mut r = f.sssp.clone();
    r.parent[leaf as usize] = NO_PARENT;
    sssp_fails(&f, &r, Rule::Parent, leaf);

    // ParentEdge: parent not a neighbour.
    let fake = (0..256)
        .find(|&u| u != leaf && dist(u).is_finite() && !g.neighbors(leaf).contains(&u))
        .unwrap();
    let mut r = f.sssp.clone();
    r.parent[leaf as usize] = fake;
    sssp_fails(&f, &r, Rule::ParentEdge, leaf);

    // TreeDistance: a reached neighbour whose distance plus weight is not the distance.
    let (v, u) = leaf_list
        .iter()
        .find_map(|&v| {
            g.arcs(v)
                .find(|&(u, w)| u != f.sssp.parent[v as usize] && dist(u) + w != dist(v))
                .map(|(u, _)| (v, u))
        })
        .unwrap();
    let mut r = f.sssp.clone();
    r.parent[v as usize] = u;
    sssp_fails(&f, &r, Rule::TreeDistance, v);

    // TriangleInequality: a leaf's distance made too large, consistent with a new
    // parent (a longer way in), so only the edge from its real parent fails.
    let (v, u, d) = leaf_list
        .iter()
        .find_map(|&v| {
            g.arcs(v).find(|&(u, w)| dist(u) + w > dist(v)).map(|(u, w)| (v, u, dist(u) + w))
        })
        .unwrap();
    let mut r = f.sssp.clone();
    r.dist[v as usize] = d;
    r.parent[v as usize] = u;
    sssp_fails(&f, &r, Rule::TriangleInequality, v);

    // Unreached.
    let mut r = f.sssp.clone();
    r.dist[leaf as usize] = f32::INFINITY;
    r.parent[leaf as usize] = NO_PARENT;
    sssp_fails(&f, &r, Rule::Unreached, leaf);

    // OutsideComponent.
    let isolated = (0..256).find(|&v| g.degree(v) == 0).unwrap();
    let mut r = f.sssp.clone();
    r.dist[isolated as usize] = 0.5;
    r.parent[isolated as usize] = root;
    sssp_fails(&f, &r, Rule::OutsideComponent, isolated);
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
fn sssp_parent_cycle_fails() {
    // 0 -1.0- 1 -0- 2 -0- 3: 2 and 3 claim each other as parents at equal distance.
    let g = graph(4, &[(0, 1, 1.0), (1, 2, 0.0), (2, 3, 0.0)]);
    let good = SsspResult { root: 0, dist: vec![0.0, 1.0, 1.0, 1.0], parent: vec![0, 0, 1, 2] };
    let stats = validate_sssp(&g, &good).unwrap();
    assert_eq!((stats.reached, stats.teps_edges), (4, 3));
    let bad = SsspResult { parent: vec![0, 0, 3, 2], ..good };
    let e = validate_sssp(&g, &bad).unwrap_err();
    assert_eq!(e.rule, Rule::TreeCycle, "{e}");

    // A separate zero-weight component claimed reached through a cycle.
    let g = graph(4, &[(0, 1, 1.0), (2, 3, 0.0)]);
    let bad = SsspResult { root: 0, dist: vec![0.0, 1.0, 5.0, 5.0], parent: vec![0, 0, 3, 2] };
    let e = validate_sssp(&g, &bad).unwrap_err();
    assert_eq!((e.rule, e.vertex), (Rule::OutsideComponent, 2), "{e}");
}

#[test]
fn small_bfs_with_selfloops_and_repeats() {
    let g = graph(5, &[(0, 1, 1.0), (1, 1, 1.0), (1, 2, 1.0), (2, 1, 1.0), (3, 4, 1.0)]);
    let r = BfsResult {
        root: 0,
        level: vec![0, 1, 2, UNREACHED_LEVEL, UNREACHED_LEVEL],
        parent: vec![0, 0, 1, NO_PARENT, NO_PARENT],
    };
    let stats = validate_bfs(&g, &r).unwrap();
    // Self-loop dropped, repeated edge counted twice.
    assert_eq!((stats.reached, stats.teps_edges), (3, 3));
    assert_eq!(teps_edge_count(&g, |v| v >= 3), 1);
    // Unweighted graphs validate SSSP with weight 1.
    let s = SsspResult {
        root: 0,
        dist: vec![0.0, 1.0, 2.0, f32::INFINITY, f32::INFINITY],
        parent: vec![0, 0, 1, NO_PARENT, NO_PARENT],
    };
    assert_eq!(validate_sssp(&g, &s).unwrap().teps_edges, 3);
}

#[test]
fn larger_reference_results_validate_in_parallel() {
    // SCALE 12 on a 2-thread pool: same verdicts as the default pool.
    let f = fixture(12);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let (b, s) = pool.install(|| (validate_bfs(&f.g, &f.bfs), validate_sssp(&f.g, &f.sssp)));
    assert_eq!(b.unwrap().teps_edges, 65_327);
    assert_eq!(s.unwrap().reached, 3_351);
}
