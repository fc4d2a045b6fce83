//! The result types every BFS and SSSP engine returns, so one validator and one
//! report writer serve them all.

use crate::graph::VertexId;

/// Parent of a vertex the search did not reach.
pub const NO_PARENT: VertexId = VertexId::MAX;
/// Level of a vertex the BFS did not reach.
pub const UNREACHED_LEVEL: u32 = u32::MAX;

/// Breadth-first search from `root`: hop levels and a parent tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfsResult {
    /// The search root (its own parent, level 0).
    pub root: VertexId,
    /// Hop distance per vertex, [`UNREACHED_LEVEL`] when unreached.
    pub level: Vec<u32>,
    /// Parent per vertex, [`NO_PARENT`] when unreached; `parent[root] == root`.
    pub parent: Vec<VertexId>,
}

/// Single-source shortest paths from `root`: binary32 distances and a parent tree.
#[derive(Debug, Clone, PartialEq)]
pub struct SsspResult {
    /// The search root (its own parent, distance 0).
    pub root: VertexId,
    /// Distance per vertex, `f32::INFINITY` when unreached. Each tentative distance is
    /// one binary32 addition `dist[u] + w`, as in the Graph500 reference.
    pub dist: Vec<f32>,
    /// Parent per vertex, [`NO_PARENT`] when unreached; `parent[root] == root`.
    pub parent: Vec<VertexId>,
}

impl BfsResult {
    /// Number of vertices reached (the root included).
    pub fn reached(&self) -> u64 {
        self.level.iter().filter(|&&l| l != UNREACHED_LEVEL).count() as u64
    }
}

impl SsspResult {
    /// Number of vertices reached (the root included).
    pub fn reached(&self) -> u64 {
        self.dist.iter().filter(|d| d.is_finite()).count() as u64
    }
}
