//! Conversion between Skein graphs and [`petgraph`], for small graphs, tests and the
//! petgraph oracle baseline.
//!
//! A petgraph graph here is [`PetGraph`]: undirected, no node weights, `f32` edge
//! weights. Node `i` (its [`NodeIndex`] position) is Skein vertex `i`; edge `k` (its
//! [`EdgeIndex`](petgraph::graph::EdgeIndex) position) is edge list entry `k`, with its
//! two endpoints in the stored order. Self-loops and parallel edges are kept both ways.
//!
//! ```
//! use skein_generators::{interop, EdgeList};
//! let el = EdgeList { num_vertices: 3, src: vec![0, 1], dst: vec![1, 2], weights: Some(vec![0.5, 2.0]) };
//! let g = interop::to_petgraph(&el).unwrap();
//! assert_eq!((g.node_count(), g.edge_count()), (3, 2));
//! assert_eq!(interop::edge_list_from_petgraph(&g), el);
//! ```

use petgraph::graph::NodeIndex;

use crate::graph::{Csr, EdgeList};
use crate::memory::{self, MemoryError};

/// The petgraph graph type Skein converts to and from.
pub type PetGraph = petgraph::Graph<(), f32, petgraph::Undirected>;

/// Why a graph cannot become a [`PetGraph`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InteropError {
    /// petgraph's default `u32` indices hold fewer vertices than the graph has.
    #[error("{num_vertices} vertices do not fit petgraph's 32-bit node indices (at most {max})")]
    TooManyVertices {
        /// Vertices of the graph.
        num_vertices: u64,
        /// Most vertices a [`PetGraph`] can hold.
        max: u64,
    },
    /// petgraph's default `u32` indices hold fewer edges than the graph has.
    #[error("{num_edges} edges do not fit petgraph's 32-bit edge indices (at most {max})")]
    TooManyEdges {
        /// Edges of the graph.
        num_edges: u64,
        /// Most edges a [`PetGraph`] can hold.
        max: u64,
    },
    /// The edge list is inconsistent (an endpoint beyond the vertex count, or arrays of
    /// different lengths).
    #[error("invalid edge list: {0}")]
    InvalidEdgeList(String),
    /// The petgraph graph would not fit in the available memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// Checks that a [`PetGraph`] of `n` nodes and `m` edges fits in memory (petgraph's own
/// node and edge records, allocated up front by `with_capacity`).
fn check_memory(n: u64, m: u64) -> Result<(), InteropError> {
    let node = std::mem::size_of::<petgraph::graph::Node<(), u32>>() as u128;
    let edge = std::mem::size_of::<petgraph::graph::Edge<f32, u32>>() as u128;
    let need = u128::from(n) * node + u128::from(m) * edge;
    memory::check_fits(need, || {
        format!(
            "a petgraph graph of {} and {}",
            memory::count(n, "vertex", "vertices"),
            memory::count(m, "edge", "edges")
        )
    })?;
    Ok(())
}

/// Most vertices (and edges) of a [`PetGraph`]: `u32::MAX` is petgraph's "no index".
const MAX_INDEX: u64 = u32::MAX as u64 - 1;

/// The edge list of a petgraph graph: every node is a vertex, every edge (in edge index
/// order, endpoints as stored) an edge, with its weight.
pub fn edge_list_from_petgraph(g: &PetGraph) -> EdgeList {
    let m = g.edge_count();
    let mut src = Vec::with_capacity(m);
    let mut dst = Vec::with_capacity(m);
    let mut weights = Vec::with_capacity(m);
    for e in g.raw_edges() {
        src.push(e.source().index() as u64);
        dst.push(e.target().index() as u64);
        weights.push(e.weight);
    }
    EdgeList { num_vertices: g.node_count() as u64, src, dst, weights: Some(weights) }
}

/// Builds Skein's CSR of a petgraph graph (self-loops dropped, parallel edges kept: the
/// rules of [`Csr`]).
pub fn csr_from_petgraph(g: &PetGraph) -> Csr {
    Csr::from_edge_list(&edge_list_from_petgraph(g))
}

/// A petgraph graph with the vertices and edges of `el`, in order (weight 1.0 on every
/// edge of an unweighted list).
pub fn to_petgraph(el: &EdgeList) -> Result<PetGraph, InteropError> {
    let n = el.num_vertices;
    if n > MAX_INDEX {
        return Err(InteropError::TooManyVertices { num_vertices: n, max: MAX_INDEX });
    }
    if el.len() as u64 > MAX_INDEX {
        return Err(InteropError::TooManyEdges { num_edges: el.len() as u64, max: MAX_INDEX });
    }
    if el.src.len() != el.dst.len() || el.weights.as_ref().is_some_and(|w| w.len() != el.len()) {
        return Err(InteropError::InvalidEdgeList(format!(
            "{} sources, {} destinations, {:?} weights",
            el.src.len(),
            el.dst.len(),
            el.weights.as_ref().map(Vec::len)
        )));
    }
    if let Some(k) = el.src.iter().zip(&el.dst).position(|(&u, &v)| u >= n || v >= n) {
        return Err(InteropError::InvalidEdgeList(format!(
            "edge {k} ({}, {}) has an endpoint beyond the {n} vertices",
            el.src[k], el.dst[k]
        )));
    }
    check_memory(n, el.len() as u64)?;
    let mut g = PetGraph::with_capacity(n as usize, el.len());
    for _ in 0..n {
        g.add_node(());
    }
    for k in 0..el.len() {
        let (u, v) = (NodeIndex::new(el.src[k] as usize), NodeIndex::new(el.dst[k] as usize));
        g.add_edge(u, v, el.weight(k));
    }
    Ok(g)
}

/// A petgraph graph of a CSR: one edge per pair of arcs `u -> v`, `v -> u` (added from
/// the arc with `u < v`, in vertex order), so the CSR of the result equals `csr` up to
/// the order of each vertex's arcs.
pub fn csr_to_petgraph(csr: &Csr) -> Result<PetGraph, InteropError> {
    let n = csr.num_vertices();
    if n > MAX_INDEX {
        return Err(InteropError::TooManyVertices { num_vertices: n, max: MAX_INDEX });
    }
    if csr.num_arcs() / 2 > MAX_INDEX {
        return Err(InteropError::TooManyEdges { num_edges: csr.num_arcs() / 2, max: MAX_INDEX });
    }
    check_memory(n, csr.num_arcs() / 2)?;
    let mut g = PetGraph::with_capacity(n as usize, (csr.num_arcs() / 2) as usize);
    for _ in 0..n {
        g.add_node(());
    }
    for u in 0..n {
        for (v, w) in csr.arcs(u) {
            if u < v {
                g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), w);
            }
        }
    }
    Ok(g)
}
