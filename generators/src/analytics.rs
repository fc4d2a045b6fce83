//! What every engine of PageRank and connected components shares: the PageRank update and
//! its L1 change in fixed point (so that engines agree bit for bit), the result types, and
//! the validation of results.
//!
//! # PageRank
//!
//! Damping `d`, `n` vertices, `k` of them without arcs. A graph here is symmetric, so those
//! are isolated: they receive nothing and all hold the same rank `r_iso`, and the dangling
//! mass is `k · r_iso`, needing no floating-point sum over vertices. One iteration:
//!
//! ```text
//! contribution(u) = rank(u) / degree(u)                  (0 for an isolated u)
//! dangle          = k · r_iso / n
//! rank'(v)        = (1 - d) / n + d · (Σ_{u ∈ N(v), in row order} contribution(u) + dangle)
//! ```
//!
//! ([`update`]), starting from `1 / n`, and stops after the first iteration whose L1 change
//! `Σ |rank' - rank|` is below the tolerance, or after the maximum number of iterations. The
//! change is summed in 64.64 fixed point ([`fixed`]), exact and so independent of the order.
//! The ranks sum to 1 (up to rounding).
//!
//! # Connected components
//!
//! Weakly connected components labelled by their smallest vertex id ([`check_components`]).

use crate::graph::Csr;

/// PageRank's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageRankParams {
    /// Damping factor (0.85).
    pub damping: f64,
    /// Stop when the L1 change of an iteration is below this.
    pub tolerance: f64,
    /// Stop after this many iterations anyway.
    pub max_iterations: u32,
}

impl Default for PageRankParams {
    fn default() -> Self {
        PageRankParams { damping: 0.85, tolerance: 1e-4, max_iterations: 20 }
    }
}

/// A PageRank result.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRankResult {
    /// Rank per vertex.
    pub rank: Vec<f64>,
    /// Iterations run.
    pub iterations: u32,
    /// The L1 change of the last iteration.
    pub l1: f64,
}

/// A connected-components result: per vertex, the smallest vertex id of its component.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentsResult {
    /// Label per vertex.
    pub label: Vec<u64>,
}

/// `|x|` in 64.64 fixed point (`x` below 2^64 in magnitude; ranks are at most 1).
#[inline]
pub fn fixed(x: f64) -> u128 {
    let v = x.abs() * 18_446_744_073_709_551_616.0;
    // Below 2^64 (every change of a rank, which is at most 1) through the cheap conversion to
    // u64; the same value as the u128 conversion, which is a library call.
    if v < 18_446_744_073_709_551_616.0 {
        u128::from(v as u64)
    } else {
        v as u128
    }
}

/// A 64.64 fixed-point sum back as a float.
pub fn from_fixed(x: u128) -> f64 {
    x as f64 / 18_446_744_073_709_551_616.0
}

/// The new rank of a vertex whose neighbours' contributions sum to `sum` (see the module
/// docs): the one expression every engine evaluates.
#[inline]
pub fn update(damping: f64, n: u64, sum: f64, dangle: f64) -> f64 {
    (1.0 - damping) / n as f64 + damping * (sum + dangle)
}

/// The dangling term of an iteration: `k` isolated vertices of rank `r_iso` each.
#[inline]
pub fn dangle(n: u64, k: u64, r_iso: f64) -> f64 {
    k as f64 * r_iso / n as f64
}

/// Why a PageRank or components result is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalyticsError {
    /// The result has the wrong number of vertices.
    #[error("{got} values for {want} vertices")]
    Length {
        /// Entries of the result.
        got: usize,
        /// Vertices of the graph.
        want: usize,
    },
    /// A rank differs from the reference by more than the tolerance.
    #[error("vertex {vertex}: rank {got:e}, the sequential reference has {want:e} (tolerance {tolerance:e})")]
    Rank {
        /// The vertex.
        vertex: u64,
        /// Its rank.
        got: f64,
        /// The reference's.
        want: f64,
        /// The tolerance allowed.
        tolerance: f64,
    },
    /// PageRank ran another number of iterations than the reference.
    #[error("{got} iterations, the sequential reference ran {want}")]
    Iterations {
        /// Iterations of the result.
        got: u32,
        /// Iterations of the reference.
        want: u32,
    },
    /// The ranks do not sum to 1.
    #[error("the ranks sum to {0}, not 1 (within 1e-6)")]
    Sum(f64),
    /// An edge joins two labels.
    #[error("edge {u}-{v} joins labels {lu} and {lv}")]
    Edge {
        /// One end.
        u: u64,
        /// The other.
        v: u64,
        /// `u`'s label.
        lu: u64,
        /// `v`'s label.
        lv: u64,
    },
    /// A label is not the smallest vertex of its component.
    #[error(
        "vertex {vertex} has label {label}, but the smallest vertex of its component is {want}"
    )]
    Label {
        /// The vertex.
        vertex: u64,
        /// Its label.
        label: u64,
        /// The smallest vertex of its component.
        want: u64,
    },
    /// A label above its vertex (a label is the smallest vertex of its component).
    #[error("vertex {vertex} has label {label}, above itself: a label must be the smallest vertex of its component")]
    Above {
        /// The vertex.
        vertex: u64,
        /// Its label.
        label: u64,
    },
    /// The vertex a label names does not carry that label.
    #[error("vertex {vertex} has label {label}, but vertex {label} has label {named}")]
    Named {
        /// The vertex.
        vertex: u64,
        /// Its label.
        label: u64,
        /// The label of vertex `label`.
        named: u64,
    },
    /// A vertex's label is not a vertex of its component.
    #[error("vertex {vertex} has label {label}, which is not a vertex of its component")]
    Outside {
        /// The vertex.
        vertex: u64,
        /// Its label.
        label: u64,
    },
}

/// Checks PageRank ranks against a reference computed by another engine (the sequential one):
/// every rank within `tolerance` of the reference's, and the ranks summing to 1 within 1e-6.
pub fn check_pagerank(
    rank: &[f64],
    reference: &[f64],
    tolerance: f64,
) -> Result<(), AnalyticsError> {
    if rank.len() != reference.len() {
        return Err(AnalyticsError::Length { got: rank.len(), want: reference.len() });
    }
    for (v, (&a, &b)) in rank.iter().zip(reference).enumerate() {
        if (a - b).abs() > tolerance || a.is_nan() {
            return Err(AnalyticsError::Rank { vertex: v as u64, got: a, want: b, tolerance });
        }
    }
    let sum: f64 = rank.iter().sum();
    if rank.is_empty() || (sum - 1.0).abs() > 1e-6 {
        return Err(AnalyticsError::Sum(sum));
    }
    Ok(())
}

/// The components of `g` by a sequential union-find: per vertex, the smallest vertex of its
/// component (the reference every engine's labels must equal).
pub fn components_union_find(g: &Csr) -> Vec<u64> {
    fn find(p: &mut [u64], mut x: u64) -> u64 {
        while p[x as usize] != x {
            p[x as usize] = p[p[x as usize] as usize];
            x = p[x as usize];
        }
        x
    }
    let n = g.num_vertices();
    let mut p: Vec<u64> = (0..n).collect();
    for u in 0..n {
        for &v in g.neighbors(u) {
            let (a, b) = (find(&mut p, u), find(&mut p, v));
            // The smaller root stays a root, so roots are the components' smallest vertices.
            if a < b {
                p[b as usize] = a;
            } else if b < a {
                p[a as usize] = b;
            }
        }
    }
    (0..n).map(|v| find(&mut p, v)).collect()
}

/// Checks component labels on `g`: every edge joins equal labels, and every label is the
/// smallest vertex of its component (equal to [`components_union_find`]).
pub fn check_components(g: &Csr, label: &[u64]) -> Result<(), AnalyticsError> {
    let n = g.num_vertices();
    if label.len() as u64 != n {
        return Err(AnalyticsError::Length { got: label.len(), want: n as usize });
    }
    for u in 0..n {
        let lu = label[u as usize];
        for &v in g.neighbors(u) {
            let lv = label[v as usize];
            if lu != lv {
                return Err(AnalyticsError::Edge { u, v, lu, lv });
            }
        }
    }
    let want = components_union_find(g);
    match label.iter().zip(&want).position(|(a, b)| a != b) {
        Some(v) => Err(AnalyticsError::Label { vertex: v as u64, label: label[v], want: want[v] }),
        None => Ok(()),
    }
}
