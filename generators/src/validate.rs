//! Graph500 validation of BFS and SSSP results, for any engine.
//!
//! The checks follow the Graph500 specification's validation rules:
//!
//! 1. the arrays have one entry per vertex ([`Rule::Length`]);
//! 2. the root is a vertex, is its own parent and has level / distance 0 ([`Rule::Root`]);
//! 3. values are sane: SSSP distances are not NaN nor negative ([`Rule::Value`]); a
//!    vertex is reached exactly when it has a parent, and the parent of a reached
//!    vertex is another reached vertex ([`Rule::Parent`]);
//! 4. every tree edge `(parent[v], v)` is an edge of the graph ([`Rule::ParentEdge`]);
//! 5. BFS: `level[v] == level[parent[v]] + 1` ([`Rule::TreeLevel`]); SSSP:
//!    `dist[v] == dist[parent[v]] + w` in binary32 for some arc `parent[v] -> v` of
//!    weight `w` ([`Rule::TreeDistance`]);
//! 6. every graph edge `{u, v}` with both ends reached: BFS `|level[u] - level[v]| <= 1`
//!    ([`Rule::EdgeLevel`]); SSSP `dist[v] <= dist[u] + w` in binary32, both ways
//!    ([`Rule::TriangleInequality`]);
//! 7. no edge joins a reached and an unreached vertex: the unreached one is in the
//!    root's component and should have been reached ([`Rule::Unreached`]);
//! 8. SSSP: the parent pointers of every reached vertex lead to the root
//!    ([`Rule::TreeCycle`]; BFS levels make cycles impossible).
//!
//! Rules 4, 5 and 8 make every reached vertex connected to the root, and rule 7 makes
//! every vertex of the root's component reached, so a result that passes has reached
//! exactly the root's component. When a check fails, the validator computes the
//! component (a plain BFS, on the error path only) and, if some reached vertex lies
//! outside it, reports that ([`Rule::OutsideComponent`]) as the cause.
//!
//! Floats are compared exactly (no tolerance), as the reference does. The per-vertex
//! checks run in parallel (rayon); the first failure in vertex order is reported, so
//! the error does not depend on the thread count.

use std::collections::VecDeque;
use std::fmt;

use rayon::prelude::*;

use crate::graph::{Csr, VertexId};
use crate::result::{BfsResult, SsspResult, NO_PARENT, UNREACHED_LEVEL};

/// What a valid result yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValidationStats {
    /// Vertices reached, the root included.
    pub reached: u64,
    /// The Graph500 TEPS edge count: input edges that are not self-loops with both
    /// endpoints in the root's component, repeats counted each time.
    pub teps_edges: u64,
}

/// A Graph500 validation rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// The result's arrays do not have one entry per vertex.
    Length,
    /// The root is not a vertex, not its own parent, or its level/distance is not 0.
    Root,
    /// A distance is NaN or negative.
    Value,
    /// Reached-ness and parent disagree: a reached vertex without a valid reached
    /// parent, or an unreached vertex with a parent.
    Parent,
    /// The tree edge `(parent[v], v)` is not an edge of the graph.
    ParentEdge,
    /// BFS: `level[v] != level[parent[v]] + 1`.
    TreeLevel,
    /// SSSP: `dist[v] != dist[parent[v]] + w` for every arc `parent[v] -> v`.
    TreeDistance,
    /// BFS: a graph edge spans more than one level.
    EdgeLevel,
    /// SSSP: a graph edge `u -> v` with `dist[v] > dist[u] + w`.
    TriangleInequality,
    /// A vertex of the root's component (adjacent to a reached vertex) is unreached.
    Unreached,
    /// A reached vertex is not in the root's component.
    OutsideComponent,
    /// SSSP: parent pointers form a cycle that never reaches the root.
    TreeCycle,
}

impl Rule {
    /// A short description of the rule.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Length => "array lengths match the vertex count",
            Rule::Root => "root is its own parent at level/distance 0",
            Rule::Value => "distances are non-negative numbers",
            Rule::Parent => "reached vertices have a reached parent, unreached ones none",
            Rule::ParentEdge => "tree edges are graph edges",
            Rule::TreeLevel => "level is the parent's level plus one",
            Rule::TreeDistance => "distance is the parent's distance plus the edge weight",
            Rule::EdgeLevel => "graph edges span at most one level",
            Rule::TriangleInequality => "distances satisfy the triangle inequality",
            Rule::Unreached => "every vertex of the root's component is reached",
            Rule::OutsideComponent => "no vertex outside the root's component is reached",
            Rule::TreeCycle => "parent pointers lead to the root",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self, self.describe())
    }
}

/// A failed validation: which rule, at which vertex, and the values involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// The rule that failed.
    pub rule: Rule,
    /// The vertex where it failed.
    pub vertex: u64,
    /// The values involved.
    pub detail: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rule {} failed at vertex {}: {}", self.rule, self.vertex, self.detail)
    }
}

impl std::error::Error for ValidationError {}

fn fail(rule: Rule, vertex: u64, detail: String) -> ValidationError {
    ValidationError { rule, vertex, detail }
}

/// The Graph500 TEPS edge count of the component `reached`: half the sum of the degrees
/// of its vertices, i.e. the non-self-loop input edges inside it (when `reached` is a
/// union of components, as for a valid result).
pub fn teps_edge_count(g: &Csr, reached: impl Fn(u64) -> bool + Sync) -> u64 {
    let arcs: u64 = (0..g.num_vertices() as usize)
        .into_par_iter()
        .with_min_len(1 << 12)
        .map(|v| v as u64)
        .filter(|&v| reached(v))
        .map(|v| g.degree(v))
        .sum();
    arcs / 2
}

/// Checks that the arrays have `n` entries and the root is a vertex.
fn check_shape(n: u64, root: VertexId, lens: [(&str, usize); 2]) -> Result<(), ValidationError> {
    for (name, len) in lens {
        if len as u64 != n {
            return Err(fail(
                Rule::Length,
                (len as u64).min(n),
                format!("{name} has {len} entries, the graph has {n} vertices"),
            ));
        }
    }
    if root >= n {
        return Err(fail(Rule::Root, root, format!("root {root} is not a vertex (n = {n})")));
    }
    Ok(())
}

/// Common per-vertex parent check: `Ok(Some(p))` for a reached non-root vertex with a
/// reached parent `p`, `Ok(None)` when there is nothing more to check.
fn check_parent(
    v: u64,
    root: u64,
    n: u64,
    reached: impl Fn(u64) -> bool,
    parent: &[VertexId],
) -> Result<Option<u64>, ValidationError> {
    let p = parent[v as usize];
    if v == root {
        return Ok(None);
    }
    if !reached(v) {
        if p != NO_PARENT {
            return Err(fail(Rule::Parent, v, format!("unreached vertex has parent {p}")));
        }
        return Ok(None);
    }
    if p == NO_PARENT {
        return Err(fail(Rule::Parent, v, "reached vertex has no parent".into()));
    }
    if p >= n {
        return Err(fail(Rule::Parent, v, format!("parent {p} is not a vertex (n = {n})")));
    }
    if p == v {
        return Err(fail(Rule::Parent, v, "non-root vertex is its own parent".into()));
    }
    if !reached(p) {
        return Err(fail(Rule::Parent, v, format!("parent {p} is unreached")));
    }
    Ok(Some(p))
}

/// Validates a BFS result on `g` by the Graph500 rules (module docs).
pub fn validate_bfs(g: &Csr, r: &BfsResult) -> Result<ValidationStats, ValidationError> {
    let n = g.num_vertices();
    let root = r.root;
    check_shape(n, root, [("level", r.level.len()), ("parent", r.parent.len())])?;
    let (level, parent) = (&r.level[..], &r.parent[..]);
    let reached = |v: u64| level[v as usize] != UNREACHED_LEVEL;
    if parent[root as usize] != root || level[root as usize] != 0 {
        return Err(fail(
            Rule::Root,
            root,
            format!(
                "root has parent {} and level {} (expected {root} and 0)",
                show_parent(parent[root as usize]),
                show_level(level[root as usize])
            ),
        ));
    }
    let check = |v: u64| -> Result<(), ValidationError> {
        let lv = level[v as usize];
        if let Some(p) = check_parent(v, root, n, reached, parent)? {
            let lp = level[p as usize];
            if lp.checked_add(1) != Some(lv) {
                return Err(fail(
                    Rule::TreeLevel,
                    v,
                    format!("level {lv}, but parent {p} has level {lp}"),
                ));
            }
            if !g.neighbors(v).contains(&p) {
                return Err(fail(Rule::ParentEdge, v, format!("parent {p} is not a neighbour")));
            }
        }
        for &u in g.neighbors(v) {
            let lu = level[u as usize];
            match (reached(v), reached(u)) {
                (true, true) if lv.abs_diff(lu) > 1 => {
                    return Err(fail(
                        Rule::EdgeLevel,
                        v,
                        format!("level {lv}, but neighbour {u} has level {lu}"),
                    ))
                }
                (true, false) => return Err(unreached(u, v)),
                (false, true) => return Err(unreached(v, u)),
                _ => {}
            }
        }
        Ok(())
    };
    run_checks(g, root, n, check, reached)?;
    Ok(ValidationStats {
        reached: (0..n).into_par_iter().filter(|&v| reached(v)).count() as u64,
        teps_edges: teps_edge_count(g, reached),
    })
}

/// Validates an SSSP result on `g` by the Graph500 rules (module docs).
pub fn validate_sssp(g: &Csr, r: &SsspResult) -> Result<ValidationStats, ValidationError> {
    let n = g.num_vertices();
    let root = r.root;
    check_shape(n, root, [("dist", r.dist.len()), ("parent", r.parent.len())])?;
    let (dist, parent) = (&r.dist[..], &r.parent[..]);
    let reached = |v: u64| dist[v as usize] != f32::INFINITY;
    if parent[root as usize] != root || dist[root as usize] != 0.0 {
        return Err(fail(
            Rule::Root,
            root,
            format!(
                "root has parent {} and distance {:?} (expected {root} and 0)",
                show_parent(parent[root as usize]),
                dist[root as usize]
            ),
        ));
    }
    let check = |v: u64| -> Result<(), ValidationError> {
        let dv = dist[v as usize];
        if dv.is_nan() || dv < 0.0 {
            return Err(fail(Rule::Value, v, format!("distance {dv:?}")));
        }
        if let Some(p) = check_parent(v, root, n, reached, parent)? {
            let dp = dist[p as usize];
            let mut has_arc = false;
            let mut adds_up = false;
            for (u, w) in g.arcs(v) {
                if u == p {
                    has_arc = true;
                    if dp + w == dv {
                        adds_up = true;
                        break;
                    }
                }
            }
            if !has_arc {
                return Err(fail(Rule::ParentEdge, v, format!("parent {p} is not a neighbour")));
            }
            if !adds_up {
                return Err(fail(
                    Rule::TreeDistance,
                    v,
                    format!(
                        "distance {dv:?}, but no arc from parent {p} (distance {dp:?}) adds up to it"
                    ),
                ));
            }
        }
        for (u, w) in g.arcs(v) {
            let du = dist[u as usize];
            match (reached(v), reached(u)) {
                (true, true) if du > dv + w => {
                    return Err(fail(
                        Rule::TriangleInequality,
                        u,
                        format!("distance {du:?} > {dv:?} + {w:?} via neighbour {v}"),
                    ))
                }
                (true, false) => return Err(unreached(u, v)),
                (false, true) => return Err(unreached(v, u)),
                _ => {}
            }
        }
        Ok(())
    };
    run_checks(g, root, n, check, reached)?;
    if let Err(e) = check_tree_reaches_root(root, parent, reached) {
        return Err(explain(g, root, reached, e));
    }
    Ok(ValidationStats {
        reached: (0..n).into_par_iter().filter(|&v| reached(v)).count() as u64,
        teps_edges: teps_edge_count(g, reached),
    })
}

fn unreached(v: u64, via: u64) -> ValidationError {
    fail(Rule::Unreached, v, format!("unreached, but its neighbour {via} is reached"))
}

fn show_parent(p: VertexId) -> String {
    if p == NO_PARENT {
        "none".into()
    } else {
        p.to_string()
    }
}

fn show_level(l: u32) -> String {
    if l == UNREACHED_LEVEL {
        "unreached".into()
    } else {
        l.to_string()
    }
}

/// Runs `check` on every vertex in parallel; the first failure in vertex order wins,
/// explained by [`explain`].
fn run_checks(
    g: &Csr,
    root: u64,
    n: u64,
    check: impl Fn(u64) -> Result<(), ValidationError> + Sync,
    reached: impl Fn(u64) -> bool + Sync,
) -> Result<(), ValidationError> {
    match (0..n as usize)
        .into_par_iter()
        .with_min_len(256)
        .find_map_first(|v| check(v as u64).err())
    {
        None => Ok(()),
        Some(e) => Err(explain(g, root, reached, e)),
    }
}

/// On the error path: if some reached vertex lies outside the root's component, that
/// is the root cause of the failure `e` (or of a later one), so report it instead.
fn explain(
    g: &Csr,
    root: u64,
    reached: impl Fn(u64) -> bool + Sync,
    e: ValidationError,
) -> ValidationError {
    let inside = component(g, root);
    match (0..g.num_vertices()).find(|&v| reached(v) && !inside[v as usize]) {
        Some(v) => fail(
            Rule::OutsideComponent,
            v,
            format!("reached, but not connected to root {root} (first failed check: {e})"),
        ),
        None => e,
    }
}

/// Membership in `root`'s connected component (sequential BFS).
fn component(g: &Csr, root: u64) -> Vec<bool> {
    let mut seen = vec![false; g.num_vertices() as usize];
    let mut queue = VecDeque::from([root]);
    seen[root as usize] = true;
    while let Some(v) = queue.pop_front() {
        for &u in g.neighbors(v) {
            if !seen[u as usize] {
                seen[u as usize] = true;
                queue.push_back(u);
            }
        }
    }
    seen
}

/// Follows the parent pointers of every reached vertex (each vertex visited once).
/// Assumes the per-vertex checks passed (parents of reached vertices are reached).
fn check_tree_reaches_root(
    root: u64,
    parent: &[VertexId],
    reached: impl Fn(u64) -> bool,
) -> Result<(), ValidationError> {
    const UNKNOWN: u8 = 0;
    const ON_PATH: u8 = 1;
    const GOOD: u8 = 2;
    let mut state = vec![UNKNOWN; parent.len()];
    state[root as usize] = GOOD;
    let mut path = Vec::new();
    for start in 0..parent.len() as u64 {
        if !reached(start) || state[start as usize] != UNKNOWN {
            continue;
        }
        let mut v = start;
        while state[v as usize] == UNKNOWN {
            state[v as usize] = ON_PATH;
            path.push(v);
            v = parent[v as usize];
        }
        if state[v as usize] == ON_PATH {
            return Err(fail(
                Rule::TreeCycle,
                v,
                format!("the parent pointers from vertex {start} loop through vertex {v}"),
            ));
        }
        for &x in &path {
            state[x as usize] = GOOD;
        }
        path.clear();
    }
    Ok(())
}
