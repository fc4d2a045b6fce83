//! petgraph as a test oracle: distances and levels computed by a library that shares no
//! code with the engines. Slow (hash maps, a second copy of the graph): small graphs only.
//!
//! petgraph's Dijkstra also computes each tentative distance as one addition
//! `dist[u] + w` in the weight type, so with `f32` weights its distances must equal the
//! engines' bit for bit.

use petgraph::graph::{NodeIndex, UnGraph};
use skein_generators::{Csr, VertexId, UNREACHED_LEVEL};

use crate::{check, Result};

/// The undirected petgraph copy of `csr`: one edge per pair of arcs `u -> v`, `v -> u`
/// (repeated edges kept, with their own weights).
pub fn to_petgraph(csr: &Csr) -> UnGraph<(), f32, u32> {
    let n = csr.num_vertices() as usize;
    let mut g = UnGraph::with_capacity(n, csr.num_arcs() as usize / 2);
    for _ in 0..n {
        g.add_node(());
    }
    for u in 0..n as VertexId {
        for (v, w) in csr.arcs(u) {
            if u < v {
                g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), w);
            }
        }
    }
    g
}

/// Shortest-path distances from `root` by petgraph's Dijkstra (`+inf` when unreached).
pub fn sssp_distances(csr: &Csr, root: VertexId) -> Result<Vec<f32>> {
    check::graph(csr)?;
    check::root(csr, root)?;
    check::weights(csr)?;
    let g = to_petgraph(csr);
    let scores = petgraph::algo::dijkstra(&g, NodeIndex::new(root as usize), None, |e| *e.weight());
    let mut dist = vec![f32::INFINITY; csr.num_vertices() as usize];
    for (v, d) in scores {
        dist[v.index()] = d;
    }
    Ok(dist)
}

/// BFS levels from `root` by petgraph's Dijkstra with unit costs ([`UNREACHED_LEVEL`]
/// when unreached).
pub fn bfs_levels(csr: &Csr, root: VertexId) -> Result<Vec<u32>> {
    check::graph(csr)?;
    check::root(csr, root)?;
    let g = to_petgraph(csr);
    let scores = petgraph::algo::dijkstra(&g, NodeIndex::new(root as usize), None, |_| 1u32);
    let mut level = vec![UNREACHED_LEVEL; csr.num_vertices() as usize];
    for (v, l) in scores {
        level[v.index()] = l;
    }
    Ok(level)
}
