//! The sequential engine: Dijkstra and queue BFS, one thread. The COST reference.

use skein_generators::{BfsResult, Csr, SsspResult, NO_PARENT, UNREACHED_LEVEL};

use crate::compact::WeightedArc;
use crate::heap::IndexedHeap;

/// Dijkstra with an indexed 4-ary heap. Each tentative distance is the single binary32
/// addition `dist[u] + w`; a vertex's parent is the vertex that last lowered its distance,
/// which was settled before it, so the parent tree has no cycle even with zero weights.
/// `arcs` are `csr`'s arcs in the compact layout.
pub(crate) fn dijkstra(csr: &Csr, arcs: &[WeightedArc], root: u32) -> SsspResult {
    let n = csr.num_vertices() as usize;
    let offsets = csr.offsets();
    let inf = f32::INFINITY.to_bits();
    // Distances as bit patterns: for non-negative floats they order like the values.
    let mut dist = vec![inf; n];
    let mut parent = vec![NO_PARENT; n];
    let mut heap = IndexedHeap::new(n);
    dist[root as usize] = 0;
    parent[root as usize] = u64::from(root);
    heap.push_or_decrease(root, 0);
    while let Some((u, du_bits)) = heap.pop() {
        let du = f32::from_bits(du_bits);
        let (a, b) = (offsets[u as usize] as usize, offsets[u as usize + 1] as usize);
        for &WeightedArc { target: v, weight: w } in &arcs[a..b] {
            let nd = (du + w).to_bits();
            if nd < dist[v as usize] {
                dist[v as usize] = nd;
                parent[v as usize] = u64::from(u);
                heap.push_or_decrease(v, nd);
            }
        }
    }
    SsspResult {
        root: u64::from(root),
        dist: dist.into_iter().map(f32::from_bits).collect(),
        parent,
    }
}

/// Breadth-first search with a FIFO queue (one array: each vertex enters it once);
/// `targets` are `csr`'s targets as `u32`.
pub(crate) fn bfs(csr: &Csr, targets: &[u32], root: u32) -> BfsResult {
    let n = csr.num_vertices() as usize;
    let offsets = csr.offsets();
    let mut level = vec![UNREACHED_LEVEL; n];
    let mut parent = vec![NO_PARENT; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    level[root as usize] = 0;
    parent[root as usize] = u64::from(root);
    queue.push(root);
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        let next = level[u as usize] + 1;
        let (a, b) = (offsets[u as usize] as usize, offsets[u as usize + 1] as usize);
        for &v in &targets[a..b] {
            if level[v as usize] == UNREACHED_LEVEL {
                level[v as usize] = next;
                parent[v as usize] = u64::from(u);
                queue.push(v);
            }
        }
    }
    BfsResult { root: u64::from(root), level, parent }
}
