//! Graph500 validation of a BFS or SSSP result spread over the ranks: each rank checks the
//! arcs of its own vertices ([`LocalCsr`]), asking the owners for the far ends' values; no
//! rank gathers the graph or the whole result.
//!
//! # Same verdict as the single-process validator
//!
//! The rules, the error kinds ([`Rule`]), the messages and the statistics
//! ([`ValidationStats`]) are those of [`crate::validate`] on the whole graph, and so is
//! *which* failure is reported: [`crate::validate`] reports the failure of the smallest
//! vertex whose check fails (a vertex's check runs its own tests, then its arcs in row
//! order). Here each rank finds the first failing vertex of its range, and the ranks agree
//! on the smallest one (`agree`); as ranks own contiguous ranges in rank order, that is
//! the same vertex, hence the same error, whatever the number of ranks. Every rank returns
//! the same verdict.
//!
//! # Protocol
//!
//! `R` ranks, round size `B` (ids asked per rank and round, [`DEFAULT_VALIDATE_ROUND`]),
//! `n_r` vertices and `A_r` arcs on rank `r`. All steps are collective.
//!
//! 1. [`Layout::gather`]: every rank sends every rank its range (3 words).
//! 2. Shape: each rank checks its slices' lengths against `n_r`; the root's owner checks
//!    its parent and value. One `agree` each (an exchange of one encoded error, or one
//!    word, from every rank to every rank).
//! 3. Vertex pass: in `ceil(max_r n_r / B)` rounds, each rank asks the owners of the
//!    parents of `B` of its reached vertices for their values ([`fetch`]: the ids to the
//!    owners, the values back), and runs each vertex's own tests.
//! 4. Arc pass: in `ceil(max_r A_r / B)` rounds, each rank asks for the values of the far
//!    ends of `B` of its arcs (arcs to its own vertices are answered locally) and tests
//!    each arc in row order. A rank that has found a failure asks for nothing more but
//!    still takes part in the rounds. Then one `agree`.
//! 5. SSSP only, the tree: each rank sends each reached vertex `v` to its parent's owner
//!    (pairs `(parent, v)`, `B / 2` pairs per round), which builds the child lists of its
//!    vertices; [`reach`] from the root over the child lists marks the vertices whose
//!    parent pointers lead to the root. The smallest reached vertex left unmarked (one
//!    [`all_reduce`]), if any, starts a walk along its parent pointers, one exchange of
//!    `R` words per step, each owner remembering the vertices of the walk it owns, until a
//!    vertex repeats: [`Rule::TreeCycle`] there.
//! 6. On a failure: [`reach`] from the root over the graph's rows gives the root's
//!    component; the smallest reached vertex outside it, if any, is reported instead
//!    ([`Rule::OutsideComponent`]), as [`crate::validate`] does.
//! 7. Statistics: one [`all_reduce`] of (vertices reached, sum of their degrees).
//!
//! # Gathered values
//!
//! Asking the owners arc by arc moves a word each way for every arc whose far end another
//! rank owns, in `2·ceil(max_r A_r / B)` exchanges: at SCALE 21 on 2 ranks that took
//! seconds per root against a fraction of a second for the single-process validator. So
//! when the values of *all* vertices fit a budget (`4·n <= gather_bytes`,
//! [`DEFAULT_GATHER_BYTES`], the same test on every rank), each rank first gathers every
//! rank's values (32 bits each, [`all_gather_u32`]: `ceil(max_r n_r / 2B)` exchanges of
//! at most `B` words per pair of ranks), and steps 3 and 4 then look the far ends up
//! locally, in one pass each, without any exchange. For SSSP's step 5, the values are
//! dropped and the parents of the reached vertices gathered the same way (32 bits each);
//! each rank follows the parent pointers from its own reached vertices with a fate per
//! vertex (`n` bytes: leads to the root or not), the ranks agree on the smallest vertex
//! that does not lead to the root, and every rank walks from it to the first repeated
//! vertex ([`Rule::TreeCycle`]): no child lists, no rounds of [`reach`]. The verdict, the error and the
//! statistics are the same either way (tests run both ways). Beyond the budget (SCALE 28
//! and up with the default), the rounds below ask the owners.
//!
//! Rounds: steps 3 and 4 take `2·ceil(max_r n_r / B) + 2·ceil(max_r A_r / B)` exchanges;
//! [`reach`] one per round of at most `B` ids per rank (at least the component's diameter).
//!
//! # Memory per rank
//!
//! Besides the rank's rows and its slice of the result (the caller's):
//!
//! ```text
//! gathered values: 4·n (every vertex's value) + 8·(R - 1)·B (send) + 8·R·B (received),
//!                  when 4·n <= gather_bytes (and n < 2^32); steps 3 and 4 then need
//!                  nothing more; SSSP tree (5): 4·n (parents) + n (fates) + the same
//!                  round buffers, the values freed first
//! rounds (3, 4):   8·B (ids asked) + 8·B (send buffer) + 8·B (slot of each id)
//!                + 8·B (values back) + 16·R·B (ids received and the replies: at most
//!                  every rank's B ids)                       = (32 + 16·R)·B bytes
//! SSSP tree (5):   8·n_r (the rank's reached vertices) + 16·c_r (the (parent, child)
//!                  pairs received; c_r <= A_r, the children of the rank's vertices, each
//!                  a neighbour) + 16·R·B (a round's pairs); then the child lists,
//!                  8·(n_r + 1) + 8·c_r, and reach's n_r + 8·n_r + n/8 (marks, stack, ids sent); the
//!                  walk (error path) one hash-set entry per step on the step's owner
//! component (6):   n_r (marks) + 8·n_r (stack) + n/8 (ids sent) + 8·B (to send)
//!                + 8·R·B (ids received)
//! ```
//!
//! so `O(n_r + A_r + R·B)` when the values are asked, plus the `4·n` bytes of the gathered
//! values (at most `gather_bytes`) when they are gathered.
//!
//! # Validating a distributed result in `skein run`
//!
//! On every rank, with the rank's rows `g` ([`super::build_local_csr`] or
//! `mpi::build_local_csr_mpi` (feature `mpi`)) and its slice of the result (one entry per vertex
//! of `g.range()`, in order), after the search:
//!
//! ```text
//! let mut ex = MpiExchange::world()?;                  // MPI already initialised
//! let stats = validate_sssp_distributed(&g, root, &dist, &parent,
//!                                       DEFAULT_VALIDATE_ROUND, &mut ex)?;
//! // or validate_bfs_distributed(&g, root, &level, &parent, DEFAULT_VALIDATE_ROUND, &mut ex)
//! ```
//!
//! Every rank gets the same `Ok(ValidationStats)` (`teps_edges` is the TEPS edge count of
//! the run) or the same `Err(DistValidationError::Invalid(e))`; rank 0 reports it.
//! `DistValidationError::Dist` means the exchange itself failed (or the ranks' rows do not
//! tile the vertices); it too is returned on every rank when the ranks' inputs disagree.

use super::collective::{all_gather_u32, all_reduce, clamp_round, exchange, fetch, reach, Layout};
use super::{prefetch, DistError, Exchange, LocalCsr, PREFETCH_AHEAD};
use crate::graph::VertexId;
use crate::result::{NO_PARENT, UNREACHED_LEVEL};
use crate::validate::{Rule, ValidationError, ValidationStats};

/// Default round size `B`: 2^18 ids asked per rank and round (a round's buffers take
/// `(32 + 16·R)·B` bytes, 12 MiB on 2 ranks).
pub const DEFAULT_VALIDATE_ROUND: usize = 1 << 18;

/// Default budget for the values gathered on every rank (module docs, "Gathered values"):
/// 512 MiB, i.e. graphs of up to 2^27 vertices (SCALE 27) validate without asking the
/// owners arc by arc.
pub const DEFAULT_GATHER_BYTES: u64 = 512 << 20;

/// Why a distributed validation did not accept a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DistValidationError {
    /// The result breaks a Graph500 rule (the same error on every rank).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The exchange between ranks failed, or the ranks' rows do not tile the vertices.
    #[error(transparent)]
    Dist(#[from] DistError),
}

fn fail(rule: Rule, vertex: u64, detail: String) -> ValidationError {
    ValidationError { rule, vertex, detail }
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

/// What differs between BFS and SSSP: the value type and the tests that use it.
trait Kind {
    type V: Copy;
    /// Name of the value slice in length errors.
    const NAME: &'static str;
    /// Whether the parent pointers can form cycles the other tests miss (SSSP: zero and
    /// absorbed weights; BFS levels make them impossible).
    const WALK_TREE: bool;
    fn word(x: Self::V) -> u64;
    fn from_word(w: u64) -> Self::V;
    fn reached(x: Self::V) -> bool;
    fn root_error(root: u64, parent: VertexId, x: Self::V) -> Option<ValidationError>;
    /// The vertex's tests before its parent's (SSSP: the value is a number).
    fn value_check(v: u64, x: Self::V) -> Result<(), ValidationError>;
    /// The tree edge `(p, v)`, given both values; `g` holds `v`'s row.
    fn tree_check(
        g: &LocalCsr,
        v: u64,
        xv: Self::V,
        p: u64,
        xp: Self::V,
    ) -> Result<(), ValidationError>;
    /// The arc `v -> u` of weight `w`, both reached.
    fn arc_check(v: u64, xv: Self::V, u: u64, w: f32, xu: Self::V) -> Result<(), ValidationError>;
}

struct Bfs;

impl Kind for Bfs {
    type V = u32;
    const NAME: &'static str = "level";
    const WALK_TREE: bool = false;
    fn word(x: u32) -> u64 {
        u64::from(x)
    }
    fn from_word(w: u64) -> u32 {
        w as u32
    }
    fn reached(x: u32) -> bool {
        x != UNREACHED_LEVEL
    }
    fn root_error(root: u64, parent: VertexId, x: u32) -> Option<ValidationError> {
        (parent != root || x != 0).then(|| {
            let level = if x == UNREACHED_LEVEL { "unreached".into() } else { x.to_string() };
            fail(
                Rule::Root,
                root,
                format!(
                    "root has parent {} and level {level} (expected {root} and 0)",
                    show_parent(parent)
                ),
            )
        })
    }
    fn value_check(_: u64, _: u32) -> Result<(), ValidationError> {
        Ok(())
    }
    fn tree_check(g: &LocalCsr, v: u64, lv: u32, p: u64, lp: u32) -> Result<(), ValidationError> {
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
        Ok(())
    }
    fn arc_check(v: u64, lv: u32, u: u64, _: f32, lu: u32) -> Result<(), ValidationError> {
        if lv.abs_diff(lu) > 1 {
            return Err(fail(
                Rule::EdgeLevel,
                v,
                format!("level {lv}, but neighbour {u} has level {lu}"),
            ));
        }
        Ok(())
    }
}

struct Sssp;

impl Kind for Sssp {
    type V = f32;
    const NAME: &'static str = "dist";
    const WALK_TREE: bool = true;
    fn word(x: f32) -> u64 {
        u64::from(x.to_bits())
    }
    fn from_word(w: u64) -> f32 {
        f32::from_bits(w as u32)
    }
    fn reached(x: f32) -> bool {
        x != f32::INFINITY
    }
    fn root_error(root: u64, parent: VertexId, x: f32) -> Option<ValidationError> {
        (parent != root || x != 0.0).then(|| {
            fail(
                Rule::Root,
                root,
                format!(
                    "root has parent {} and distance {x:?} (expected {root} and 0)",
                    show_parent(parent)
                ),
            )
        })
    }
    fn value_check(v: u64, dv: f32) -> Result<(), ValidationError> {
        if dv.is_nan() || dv < 0.0 {
            return Err(fail(Rule::Value, v, format!("distance {dv:?}")));
        }
        Ok(())
    }
    fn tree_check(g: &LocalCsr, v: u64, dv: f32, p: u64, dp: f32) -> Result<(), ValidationError> {
        let mut has_arc = false;
        for (u, w) in g.arcs(v) {
            if u == p {
                has_arc = true;
                if dp + w == dv {
                    return Ok(());
                }
            }
        }
        if !has_arc {
            return Err(fail(Rule::ParentEdge, v, format!("parent {p} is not a neighbour")));
        }
        Err(fail(
            Rule::TreeDistance,
            v,
            format!("distance {dv:?}, but no arc from parent {p} (distance {dp:?}) adds up to it"),
        ))
    }
    fn arc_check(v: u64, dv: f32, u: u64, w: f32, du: f32) -> Result<(), ValidationError> {
        if du > dv + w {
            return Err(fail(
                Rule::TriangleInequality,
                u,
                format!("distance {du:?} > {dv:?} + {w:?} via neighbour {v}"),
            ));
        }
        Ok(())
    }
}

/// Validates this rank's slice of a BFS result: `level` and `parent` hold one entry per
/// vertex of `g.range()`, `root` is the search root (the same on every rank). Collective
/// over `ex`, rounds of `round` ids (module docs); the same verdict on every rank.
pub fn validate_bfs_distributed<E: Exchange + ?Sized>(
    g: &LocalCsr,
    root: VertexId,
    level: &[u32],
    parent: &[VertexId],
    round: usize,
    ex: &mut E,
) -> Result<ValidationStats, DistValidationError> {
    validate::<Bfs, E>(g, root, level, parent, round, DEFAULT_GATHER_BYTES, ex)
}

/// [`validate_bfs_distributed`] with a budget for the gathered values (module docs,
/// "Gathered values"): when `4·n <= gather_bytes` every rank gathers all the levels,
/// otherwise it asks the owners for the values it needs, round by round. The same verdict
/// either way.
pub fn validate_bfs_distributed_with_budget<E: Exchange + ?Sized>(
    g: &LocalCsr,
    root: VertexId,
    level: &[u32],
    parent: &[VertexId],
    round: usize,
    gather_bytes: u64,
    ex: &mut E,
) -> Result<ValidationStats, DistValidationError> {
    validate::<Bfs, E>(g, root, level, parent, round, gather_bytes, ex)
}

/// Validates this rank's slice of an SSSP result: `dist` and `parent` hold one entry per
/// vertex of `g.range()`, `root` is the search root (the same on every rank). Collective
/// over `ex`, rounds of `round` ids (module docs); the same verdict on every rank.
pub fn validate_sssp_distributed<E: Exchange + ?Sized>(
    g: &LocalCsr,
    root: VertexId,
    dist: &[f32],
    parent: &[VertexId],
    round: usize,
    ex: &mut E,
) -> Result<ValidationStats, DistValidationError> {
    validate::<Sssp, E>(g, root, dist, parent, round, DEFAULT_GATHER_BYTES, ex)
}

/// [`validate_sssp_distributed`] with a budget for the gathered values, as
/// [`validate_bfs_distributed_with_budget`].
pub fn validate_sssp_distributed_with_budget<E: Exchange + ?Sized>(
    g: &LocalCsr,
    root: VertexId,
    dist: &[f32],
    parent: &[VertexId],
    round: usize,
    gather_bytes: u64,
    ex: &mut E,
) -> Result<ValidationStats, DistValidationError> {
    validate::<Sssp, E>(g, root, dist, parent, round, gather_bytes, ex)
}

fn validate<K: Kind, E: Exchange + ?Sized>(
    g: &LocalCsr,
    root: VertexId,
    value: &[K::V],
    parent: &[VertexId],
    round: usize,
    gather_bytes: u64,
    ex: &mut E,
) -> Result<ValidationStats, DistValidationError> {
    let round = clamp_round(round, ex);
    let layout = Layout::gather(g, ex)?;
    let n = layout.num_vertices();
    let first = layout.first();
    let local_n = layout.local_len();
    let rank = layout.rank();

    // Shape: the slices' lengths (the first short or long entry, as a global vertex).
    let mut shape = None;
    for (name, len) in [(K::NAME, value.len()), ("parent", parent.len())] {
        if len != local_n {
            let end = first + local_n as u64;
            let v = first + len.min(local_n) as u64;
            shape = Some(fail(
                Rule::Length,
                v,
                format!(
                    "{name} has {len} entries on rank {rank}, which owns the {local_n} vertices \
                     {first}..{end} of {n}"
                ),
            ));
            break;
        }
    }
    agree(ex, shape.map(|e| (e.vertex, e)))?;
    if root >= n {
        return Err(fail(Rule::Root, root, format!("root {root} is not a vertex (n = {n})")).into());
    }
    let root_err = layout.local(root).and_then(|i| K::root_error(root, parent[i], value[i]));
    agree(ex, root_err.map(|e| (root, e)))?;

    // Every rank takes the same branch: it depends on `n` and the budget only.
    // (Gathered parents travel as u32, u32::MAX for none: the ids must fit below it.)
    let gather = 4 * u128::from(n) <= u128::from(gather_bytes) && n < u64::from(u32::MAX);
    let far = if gather {
        FarValues::Gathered(all_gather_u32(ex, &layout, |i| K::word(value[i]) as u32, round)?)
    } else {
        FarValues::Asked { round }
    };
    let checked = match far {
        FarValues::Gathered(all) => per_vertex_gathered::<K>(g, &layout, root, value, parent, &all),
        FarValues::Asked { round } => {
            per_vertex::<K, E>(g, &layout, root, value, parent, round, ex)
        }
    };
    let verdict = match checked {
        Ok(first_fail) => agree(ex, first_fail),
        Err(e) => return Err(e.into()),
    };
    let reached = |i: usize| K::reached(value[i]);
    if let Err(DistValidationError::Invalid(e)) = verdict {
        return Err(explain(g, &layout, root, &reached, e, round, ex)?.into());
    }
    verdict?;
    if K::WALK_TREE {
        let cycle = if gather {
            tree_cycle_gathered(&layout, root, &reached, parent, round, ex)?
        } else {
            tree_cycle(&layout, root, &reached, parent, round, ex)?
        };
        if let Some(e) = cycle {
            return Err(explain(g, &layout, root, &reached, e, round, ex)?.into());
        }
    }
    let (mut count, mut degrees) = (0u64, 0u64);
    for (i, v) in g.range().enumerate() {
        if reached(i) {
            count += 1;
            degrees += g.degree(v);
        }
    }
    let sums = all_reduce(ex, &[count, degrees], u64::wrapping_add)?;
    Ok(ValidationStats { reached: sums[0], teps_edges: sums[1] / 2 })
}

/// How the vertex and arc passes learn the values of vertices other ranks own.
enum FarValues {
    /// Every vertex's value word, in vertex order ([`all_gather_u32`]).
    Gathered(Vec<u32>),
    /// Asked from the owners ([`fetch`]) in rounds of `round` ids.
    Asked { round: usize },
}

/// The first failing vertex of this rank, as `(vertex, error)`: its own tests (with its
/// parent's value asked from the owner), then its arcs (module docs, steps 3 and 4).
fn per_vertex<K: Kind, E: Exchange + ?Sized>(
    g: &LocalCsr,
    layout: &Layout,
    root: u64,
    value: &[K::V],
    parent: &[VertexId],
    round: usize,
    ex: &mut E,
) -> Result<Option<(u64, ValidationError)>, DistError> {
    let n = layout.num_vertices();
    let first = layout.first();
    let local_n = layout.local_len();
    let arcs = g.num_arcs() as usize;
    let plan =
        all_reduce(ex, &[local_n.div_ceil(round) as u64, arcs.div_ceil(round) as u64], u64::max)?;
    let answer = |i: usize| K::word(value[i]);

    // Step 3: each vertex's own tests.
    let mut found: Option<(u64, ValidationError)> = None;
    let mut ids: Vec<u64> = Vec::with_capacity(round.min(local_n));
    let mut asked: Vec<usize> = Vec::with_capacity(round.min(local_n));
    for t in 0..plan[0] as usize {
        ids.clear();
        asked.clear();
        let chunk = (t * round).min(local_n)..((t + 1) * round).min(local_n);
        if found.is_none() {
            for i in chunk.clone() {
                let (v, p) = (first + i as u64, parent[i]);
                if v != root && K::reached(value[i]) && p < n && p != v {
                    ids.push(p);
                    asked.push(i);
                }
            }
        }
        let got = fetch(ex, layout, &ids, answer)?;
        if found.is_some() {
            continue;
        }
        let mut next = 0;
        for i in chunk {
            let v = first + i as u64;
            let xp = (asked.get(next) == Some(&i)).then(|| {
                next += 1;
                K::from_word(got[next - 1])
            });
            if let Err(e) = own_tests::<K>(g, v, root, n, value[i], parent[i], xp) {
                found = Some((v, e));
                break;
            }
        }
    }

    // Step 4: the arcs, in row order, up to the first failing vertex found so far.
    let stop = found.as_ref().map_or(u64::MAX, |f| f.0);
    let (offsets, targets, weights) = (g.offsets(), g.targets(), g.weights());
    let mut arc_fail: Option<(u64, ValidationError)> = None;
    let mut i = 0usize; // the source of the next arc, as a local index
    for t in 0..plan[1] as usize {
        let span = (t * round).min(arcs)..((t + 1) * round).min(arcs);
        let active = arc_fail.is_none() && first + (i as u64) < stop;
        let ids: &[u64] = if active { &targets[span.clone()] } else { &[] };
        let got = fetch(ex, layout, ids, answer)?;
        if !active {
            continue;
        }
        for (j, k) in span.enumerate() {
            while offsets[i + 1] as usize <= k {
                i += 1;
            }
            let v = first + i as u64;
            if v >= stop {
                break;
            }
            let (xv, xu) = (value[i], K::from_word(got[j]));
            let u = targets[k];
            let bad = match (K::reached(xv), K::reached(xu)) {
                (true, true) => K::arc_check(v, xv, u, weights[k], xu).err(),
                (true, false) => Some(unreached(u, v)),
                (false, true) => Some(unreached(v, u)),
                (false, false) => None,
            };
            if let Some(e) = bad {
                arc_fail = Some((v, e));
                break;
            }
        }
    }
    Ok(match (found, arc_fail) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    })
}

/// [`per_vertex`] with every vertex's value at hand (`all`, in vertex order): each
/// vertex's own tests, then its arcs, in one local pass without exchanges; the same
/// answer.
fn per_vertex_gathered<K: Kind>(
    g: &LocalCsr,
    layout: &Layout,
    root: u64,
    value: &[K::V],
    parent: &[VertexId],
    all: &[u32],
) -> Result<Option<(u64, ValidationError)>, DistError> {
    let n = layout.num_vertices();
    let first = layout.first();
    let (offsets, targets, weights) = (g.offsets(), g.targets(), g.weights());
    let far = |u: u64, v: u64| {
        all.get(u as usize).map(|&x| K::from_word(u64::from(x))).ok_or_else(|| {
            DistError::Exchange(format!("vertex {v} has an arc to {u}, not a vertex (n = {n})"))
        })
    };
    for (i, (&xv, &p)) in value.iter().zip(parent).enumerate() {
        let v = first + i as u64;
        let xp =
            if v != root && K::reached(xv) && p < n && p != v { Some(far(p, v)?) } else { None };
        if let Err(e) = own_tests::<K>(g, v, root, n, xv, p, xp) {
            return Ok(Some((v, e)));
        }
        let row = offsets[i] as usize..offsets[i + 1] as usize;
        let rv = K::reached(xv);
        for k in row {
            // The far ends' values are read at random: keep misses in flight.
            if let Some(&ahead) = targets.get(k + PREFETCH_AHEAD) {
                prefetch(all, ahead as usize);
            }
            let (u, w) = (targets[k], weights[k]);
            let xu = far(u, v)?;
            let bad = match (rv, K::reached(xu)) {
                (true, true) => K::arc_check(v, xv, u, w, xu).err(),
                (true, false) => Some(unreached(u, v)),
                (false, true) => Some(unreached(v, u)),
                (false, false) => None,
            };
            if let Some(e) = bad {
                return Ok(Some((v, e)));
            }
        }
    }
    Ok(None)
}

/// A vertex's own tests (value, parent, tree edge), `xp` the parent's value when it was
/// asked (reached non-root vertex with a parent in `0..n` other than itself).
fn own_tests<K: Kind>(
    g: &LocalCsr,
    v: u64,
    root: u64,
    n: u64,
    xv: K::V,
    p: VertexId,
    xp: Option<K::V>,
) -> Result<(), ValidationError> {
    K::value_check(v, xv)?;
    if v == root {
        return Ok(());
    }
    if !K::reached(xv) {
        if p != NO_PARENT {
            return Err(fail(Rule::Parent, v, format!("unreached vertex has parent {p}")));
        }
        return Ok(());
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
    let xp = xp.expect("the parent's value was asked for");
    if !K::reached(xp) {
        return Err(fail(Rule::Parent, v, format!("parent {p} is unreached")));
    }
    K::tree_check(g, v, xv, p, xp)
}

/// The rules in the order of their codes on the wire.
const RULES: [Rule; 12] = [
    Rule::Length,
    Rule::Root,
    Rule::Value,
    Rule::Parent,
    Rule::ParentEdge,
    Rule::TreeLevel,
    Rule::TreeDistance,
    Rule::EdgeLevel,
    Rule::TriangleInequality,
    Rule::Unreached,
    Rule::OutsideComponent,
    Rule::TreeCycle,
];

/// The ranks agree on the failure of smallest key (each rank's candidate, or none): one
/// exchange where every rank sends its encoded candidate to every rank. `Err` with that
/// failure on every rank, `Ok` on every rank when no rank has one.
fn agree<E: Exchange + ?Sized>(
    ex: &mut E,
    mine: Option<(u64, ValidationError)>,
) -> Result<(), DistValidationError> {
    let ranks = ex.ranks();
    let words = match &mine {
        None => vec![u64::MAX],
        Some((key, e)) => {
            let code = RULES.iter().position(|&r| r == e.rule).unwrap_or(RULES.len()) as u64;
            let bytes = e.detail.as_bytes();
            let mut w = vec![*key, code, e.vertex, bytes.len() as u64];
            w.extend(bytes.chunks(8).map(|c| {
                let mut b = [0u8; 8];
                b[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(b)
            }));
            w
        }
    };
    let send: Vec<u64> = (0..ranks).flat_map(|_| words.iter().copied()).collect();
    let (recv, from) = exchange(ex, &send, &vec![words.len(); ranks])?;
    let mut best: Option<&[u64]> = None;
    let mut at = 0;
    for &c in &from {
        let w = &recv[at..at + c];
        at += c;
        if w.first().is_some_and(|&k| k != u64::MAX) && best.is_none_or(|b| w[0] < b[0]) {
            best = Some(w);
        }
    }
    let Some(w) = best else { return Ok(()) };
    let bad = || DistError::Exchange(format!("a garbled validation verdict: {w:?}"));
    if w.len() < 4 {
        return Err(bad().into());
    }
    let rule = *RULES.get(w[1] as usize).ok_or_else(bad)?;
    let len = w[3] as usize;
    let bytes: Vec<u8> = w[4..].iter().flat_map(|x| x.to_le_bytes()).take(len).collect();
    if bytes.len() != len {
        return Err(bad().into());
    }
    let detail = String::from_utf8(bytes).map_err(|_| bad())?;
    Err(fail(rule, w[2], detail).into())
}

/// On a failure `e`: the smallest reached vertex outside the root's component, if any, is
/// the cause (module docs, step 6); otherwise `e`. Collective.
fn explain<E: Exchange + ?Sized>(
    g: &LocalCsr,
    layout: &Layout,
    root: u64,
    reached: &impl Fn(usize) -> bool,
    e: ValidationError,
    round: usize,
    ex: &mut E,
) -> Result<ValidationError, DistError> {
    let mut inside = vec![false; layout.local_len()];
    let seed = layout.local(root).map(|_| root);
    reach(ex, layout, g.offsets(), g.targets(), seed, &mut inside, round)?;
    let outside = (0..layout.local_len())
        .find(|&i| reached(i) && !inside[i])
        .map_or(u64::MAX, |i| layout.first() + i as u64);
    let v = all_reduce(ex, &[outside], u64::min)?[0];
    Ok(if v == u64::MAX {
        e
    } else {
        fail(
            Rule::OutsideComponent,
            v,
            format!("reached, but not connected to root {root} (first failed check: {e})"),
        )
    })
}

/// [`tree_cycle`] with every reached vertex's parent gathered on every rank (module docs,
/// "Gathered values"): each rank follows the parent pointers from its own reached
/// vertices locally, remembering each vertex's fate (`n` bytes), the ranks agree on the
/// smallest vertex that does not lead to the root, and every rank walks from it to the
/// first repeated vertex. The same answer as [`tree_cycle`]. Collective; needs
/// `n < u32::MAX`.
fn tree_cycle_gathered<E: Exchange + ?Sized>(
    layout: &Layout,
    root: u64,
    reached: &impl Fn(usize) -> bool,
    parent: &[VertexId],
    round: usize,
    ex: &mut E,
) -> Result<Option<ValidationError>, DistError> {
    const UNKNOWN: u8 = 0;
    const ON_PATH: u8 = 1;
    const GOOD: u8 = 2;
    const BAD: u8 = 3;
    let n = layout.num_vertices();
    let first = layout.first();
    // The per-vertex checks passed: a reached vertex's parent is a reached vertex (< n).
    let up = all_gather_u32(
        ex,
        layout,
        |i| if reached(i) { parent[i] as u32 } else { u32::MAX },
        round,
    )?;
    let step = |v: u64| -> Result<u64, DistError> {
        match up[v as usize] {
            u32::MAX => Err(DistError::Exchange(format!("tree walk: no parent for {v}"))),
            p => Ok(u64::from(p)),
        }
    };
    let mut state = vec![UNKNOWN; up.len()];
    state[root as usize] = GOOD;
    let mut path = Vec::new();
    let mut start = u64::MAX;
    for i in 0..layout.local_len() {
        let s = first + i as u64;
        if !reached(i) || state[s as usize] != UNKNOWN {
            continue;
        }
        let mut v = s;
        while state[v as usize] == UNKNOWN {
            state[v as usize] = ON_PATH;
            path.push(v);
            v = step(v)?;
        }
        let fate = if state[v as usize] == GOOD { GOOD } else { BAD };
        for x in path.drain(..) {
            state[x as usize] = fate;
        }
        if fate == BAD {
            start = s;
            break;
        }
    }
    drop(state);
    let start = all_reduce(ex, &[start], u64::min)?[0];
    if start == u64::MAX {
        return Ok(None);
    }
    if start >= n {
        return Err(DistError::Exchange(format!("tree walk: start {start} of {n}")));
    }
    // The walk (the same on every rank): to the first vertex seen twice.
    let mut on_path = std::collections::HashSet::new();
    let mut x = start;
    while on_path.insert(x) {
        x = step(x)?;
    }
    Ok(Some(fail(
        Rule::TreeCycle,
        x,
        format!("the parent pointers from vertex {start} loop through vertex {x}"),
    )))
}

/// SSSP: do the parent pointers of every reached vertex lead to the root? (module docs,
/// step 5; the per-vertex checks passed). Collective.
fn tree_cycle<E: Exchange + ?Sized>(
    layout: &Layout,
    root: u64,
    reached: &impl Fn(usize) -> bool,
    parent: &[VertexId],
    round: usize,
    ex: &mut E,
) -> Result<Option<ValidationError>, DistError> {
    let (rank, ranks) = (layout.rank(), layout.ranks());
    let (first, local_n) = (layout.first(), layout.local_len());
    // Children of this rank's vertices: (local parent, child) pairs, then child lists.
    let children: Vec<usize> =
        (0..local_n).filter(|&i| reached(i) && first + i as u64 != root).collect();
    let per_round = (round / 2).max(1);
    let plan = all_reduce(ex, &[children.len().div_ceil(per_round) as u64], u64::max)?[0];
    let mut pairs: Vec<(u32, u64)> = Vec::new();
    let mut counts = vec![0usize; ranks];
    for t in 0..plan as usize {
        let len = children.len();
        let chunk = &children[(t * per_round).min(len)..((t + 1) * per_round).min(len)];
        counts.iter_mut().for_each(|c| *c = 0);
        for &i in chunk {
            counts[layout.owner(parent[i])] += 2;
        }
        let mut pos: Vec<usize> = counts
            .iter()
            .scan(0, |at, &c| {
                let p = *at;
                *at += c;
                Some(p)
            })
            .collect();
        let mut send = vec![0u64; counts.iter().sum()];
        for &i in chunk {
            let o = layout.owner(parent[i]);
            send[pos[o]] = parent[i];
            send[pos[o] + 1] = first + i as u64;
            pos[o] += 2;
        }
        let (recv, _) = exchange(ex, &send, &counts)?;
        for pair in recv.chunks_exact(2) {
            let j = layout.local(pair[0]).ok_or_else(|| {
                DistError::Exchange(format!("rank {rank} was sent a child of {}", pair[0]))
            })?;
            pairs.push((j as u32, pair[1]));
        }
    }
    let mut offsets = vec![0u64; local_n + 1];
    for &(j, _) in &pairs {
        offsets[j as usize + 1] += 1;
    }
    for k in 0..local_n {
        offsets[k + 1] += offsets[k];
    }
    let mut cursor = offsets[..local_n].to_vec();
    let mut kids = vec![0u64; pairs.len()];
    for &(j, c) in &pairs {
        kids[cursor[j as usize] as usize] = c;
        cursor[j as usize] += 1;
    }
    drop((pairs, cursor, children));
    let mut good = vec![false; local_n];
    let seed = layout.local(root).map(|_| root);
    reach(ex, layout, &offsets, &kids, seed, &mut good, round)?;
    drop((offsets, kids));
    let start =
        (0..local_n).find(|&i| reached(i) && !good[i]).map_or(u64::MAX, |i| first + i as u64);
    let start = all_reduce(ex, &[start], u64::min)?[0];
    if start == u64::MAX {
        return Ok(None);
    }
    // The walk: each step, the owner of `x` answers (0, parent) or (1, x) when `x` repeats.
    let mut on_path = std::collections::HashSet::new();
    let mut x = start;
    loop {
        let mine = match layout.local(x) {
            Some(i) if !on_path.insert(i) => [2, x],
            Some(i) => [1, parent[i]],
            None => [0, 0],
        };
        let got = all_reduce(ex, &mine, u64::max)?;
        match got[0] {
            2 => {
                return Ok(Some(fail(
                    Rule::TreeCycle,
                    x,
                    format!("the parent pointers from vertex {start} loop through vertex {x}"),
                )))
            }
            1 if got[1] < layout.num_vertices() => x = got[1],
            _ => return Err(DistError::Exchange(format!("tree walk: no parent for {x}"))),
        }
    }
}
