//! SSSP parents from converged distances, deterministic whatever the thread count.
//!
//! A reached vertex `v` (not the root) gets as parent a neighbour `u` with
//! `dist[u] + w == dist[v]` exactly in binary32 and `dist[u] < dist[v]`: the first in arc
//! order ([`sssp_parents`], a pass after the search, so the search itself keeps one atomic
//! minimum per improvement and no parent). Such a
//! `u` exists unless every tight arc into `v` comes from a vertex at the *same* distance
//! (a zero weight, or a weight absorbed by rounding): picking those blindly could close a
//! cycle. Those rare vertices are resolved afterwards by a sequential breadth-first pass
//! over tight equal-distance arcs, starting from vertices that already have a parent, so
//! every parent chain still ends at the root.

use rayon::prelude::*;
use rayon::ThreadPool;
use skein_generators::{Csr, VertexId, NO_PARENT};

/// The first neighbour `u` of `v` with `dist[u] < dist[v]` and `dist[u] + w == dist[v]`.
fn strict_tight_neighbour(csr: &Csr, dist: &[f32], v: usize) -> u64 {
    let dv = dist[v];
    csr.arcs(v as VertexId)
        .find(|&(u, w)| {
            let du = dist[u as usize];
            du < dv && du + w == dv
        })
        .map_or(NO_PARENT, |(u, _)| u)
}

/// Parents from converged distances: each reached vertex's first strictly closer tight
/// neighbour in arc order, found in parallel; the rare vertices without one are left to
/// [`resolve_ties`]. Deterministic: depends on the distances and the graph only.
pub(crate) fn sssp_parents(pool: &ThreadPool, csr: &Csr, root: u32, dist: &[f32]) -> Vec<u64> {
    let mut parent = vec![NO_PARENT; dist.len()];
    pool.install(|| {
        parent.par_iter_mut().enumerate().with_min_len(4096).for_each(|(v, p)| {
            if v != root as usize && dist[v].is_finite() {
                *p = strict_tight_neighbour(csr, dist, v);
            }
        })
    });
    parent[root as usize] = u64::from(root);
    resolve_ties(csr, dist, &mut parent);
    parent
}

/// Gives a parent to every reached vertex that has none yet (only equal-distance tight
/// arcs lead to it). Breadth-first from vertices that have one, so no cycle can form.
fn resolve_ties(csr: &Csr, dist: &[f32], parent: &mut [u64]) {
    let tight = |u: usize, w: f32, v: usize| dist[u] + w == dist[v];
    let pending: Vec<usize> = parent
        .par_iter()
        .enumerate()
        .filter(|&(v, &p)| p == NO_PARENT && dist[v].is_finite())
        .map(|(v, _)| v)
        .collect();
    if pending.is_empty() {
        return;
    }
    let mut queue = Vec::new();
    for &v in &pending {
        if parent[v] != NO_PARENT {
            continue;
        }
        if let Some((u, _)) = csr
            .arcs(v as VertexId)
            .find(|&(u, w)| parent[u as usize] != NO_PARENT && tight(u as usize, w, v))
        {
            parent[v] = u;
            queue.push(v);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for (v, w) in csr.arcs(u as VertexId) {
            let v = v as usize;
            if parent[v] == NO_PARENT && dist[v].is_finite() && tight(u, w, v) {
                parent[v] = u as u64;
                queue.push(v);
            }
        }
    }
    debug_assert!(pending.iter().all(|&v| parent[v] != NO_PARENT), "unresolved SSSP parent");
}
