//! The state a trustee holds for one partition while a kernel runs, and the local
//! steps of the kernels on it. Nothing here knows about the runtime: a step that must
//! reach another partition calls the `send` function it is given, and the drivers in
//! [`crate::sssp`] and [`crate::bfs`] turn those calls into delegated requests.
//!
//! # SSSP (bucketed, label-correcting)
//!
//! Tentative distances live with the owning partition. Vertex `u` is *pending* while
//! `dist[u] < done[u]` (`done[u]` is the distance at which `u` last relaxed its arcs;
//! infinite before). Pending vertices wait in *bins* of width `delta / 16` by distance
//! (entries are never removed: an entry whose vertex is no longer pending in that bin
//! is skipped — lazy deletion). Globally, distances are cut into buckets of width
//! `delta` (16 bins) and all partitions work on the same bucket in a round; within the
//! round each partition takes its bins in increasing order, nearly as Dijkstra orders
//! vertices, so a vertex is rarely relaxed twice unless a *remote* relaxation improves
//! it later. (Taking a bucket's vertices in arbitrary order made Kronecker hubs rescan
//! their huge adjacency lists 5 to 11 times per search; a binary heap ordered them
//! exactly but cost a logarithmic factor and cache misses on large graphs.) Relaxing an arc happens in place when the
//! target is local and through `send` when it is remote; a remote target is only sent a
//! distance below the best one this partition already sent it, since the owner keeps
//! the minimum anyway.
//!
//! Each tentative distance is one binary32 addition `dist[u] + w`, so the final
//! distances are the exact binary32 shortest paths of the Graph500 reference, whatever
//! the order in which relaxations arrive.
//!
//! # BFS (level-synchronous, direction-optimizing)
//!
//! Each partition keeps its current frontier and the next one. A *top-down* level
//! expands the frontier: every neighbour is visited, locally in place, remotely through
//! `send` (each remote vertex at most once per partition and search, with a bitmap).
//! A *bottom-up* level (Beamer et al., "Direction-optimizing breadth-first search",
//! SC 2012) works the other way round: every partition first receives every
//! partition's frontier as a bitmap (a replica of the whole frontier, sent as data),
//! then each of its unvisited vertices looks for a neighbour in that bitmap and stops
//! at the first one found — no message at all, and few arcs read when the frontier is
//! large. The counts [`BfsPart::counts`] feed the switching heuristic.

use std::sync::Arc;

use skein_generators::{Csr, NO_PARENT, UNREACHED_LEVEL};

use crate::partition::Partitioning;

/// The graph as every partition sees it: the read-only adjacency and the partitioning.
///
/// Trustees only read it; each one touches the arcs of its own vertices.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) graph: Arc<Csr>,
    pub(crate) parts: Partitioning,
}

/// Bins per delta-bucket.
const SUB: usize = 16;

/// One partition's SSSP state.
#[derive(Debug)]
pub(crate) struct SsspPart {
    shared: Arc<Shared>,
    part: usize,
    first: u64,
    pub(crate) dist: Vec<f32>,
    pub(crate) parent: Vec<u64>,
    done: Vec<f32>,
    /// Best distance sent to each global vertex (only remote entries are used).
    sent: Vec<f32>,
    /// `bins[i]` holds local vertices made pending with a distance in bin `i`.
    bins: Vec<Vec<u32>>,
    /// No bin below this one holds an entry.
    cur: usize,
    /// Bins per unit of distance (`SUB / delta`).
    bins_per_unit: f32,
    /// Work counters of the last search.
    pub(crate) relaxed_arcs: u64,
    pub(crate) sent_msgs: u64,
}

impl SsspPart {
    pub(crate) fn new(shared: Arc<Shared>, part: usize, delta: f32) -> SsspPart {
        let len = shared.parts.len(part) as usize;
        let n = shared.parts.num_vertices() as usize;
        let first = shared.parts.range(part).start;
        // Only remote targets use `sent`; a single part never sends.
        let sent = if shared.parts.parts() > 1 { vec![f32::INFINITY; n] } else { Vec::new() };
        SsspPart {
            shared,
            part,
            first,
            dist: vec![f32::INFINITY; len],
            parent: vec![NO_PARENT; len],
            done: vec![f32::INFINITY; len],
            sent,
            bins: Vec::new(),
            cur: 0,
            bins_per_unit: SUB as f32 / delta,
            relaxed_arcs: 0,
            sent_msgs: 0,
        }
    }

    /// The bin of distance `d` (monotone in `d`; a bucket is `SUB` consecutive bins).
    #[inline]
    fn bin_of(&self, d: f32) -> usize {
        (d * self.bins_per_unit) as usize
    }

    /// Offers distance `d` through `parent` to local vertex `local`; true if it improved.
    #[inline]
    pub(crate) fn relax(&mut self, local: u32, d: f32, parent: u64) -> bool {
        let l = local as usize;
        if d < self.dist[l] {
            self.dist[l] = d;
            self.parent[l] = parent;
            let bin = self.bin_of(d);
            if bin >= self.bins.len() {
                self.bins.resize_with(bin + 1, Vec::new);
            }
            self.bins[bin].push(local);
            self.cur = self.cur.min(bin);
            true
        } else {
            false
        }
    }

    /// True when `u`, found in bin `bin`, is pending there.
    #[inline]
    fn is_live(&self, u: u32, bin: usize) -> bool {
        let d = self.dist[u as usize];
        d < self.done[u as usize] && self.bin_of(d) == bin
    }

    /// The bucket of the closest pending vertex, if any (never below the current
    /// bucket: relaxations only produce distances at or above the one relaxed).
    /// Drops the stale entries it passes.
    pub(crate) fn next_bucket(&mut self) -> Option<usize> {
        while self.cur < self.bins.len() {
            let bin = self.cur;
            while let Some(&u) = self.bins[bin].last() {
                if self.is_live(u, bin) {
                    return Some(bin / SUB);
                }
                self.bins[bin].pop();
            }
            self.cur += 1;
        }
        None
    }

    /// Relaxes the arcs of pending vertices of bucket `b`, lowest bin first, taking at
    /// most `limit` entries; relaxations that land in bucket `b` are taken in the same
    /// call. Remote relaxations go to `send(part, local, dist, parent)`.
    /// Returns the number of entries taken: 0 means bucket `b` has no pending vertex here.
    pub(crate) fn process_bucket(
        &mut self,
        b: usize,
        limit: usize,
        send: &mut impl FnMut(usize, u32, f32, u64),
    ) -> usize {
        let shared = Arc::clone(&self.shared);
        let (graph, parts) = (&*shared.graph, &shared.parts);
        let end = (b + 1) * SUB;
        let mut taken = 0;
        while taken < limit && self.cur < end.min(self.bins.len()) {
            let bin = self.cur;
            let Some(u) = self.bins[bin].pop() else {
                self.cur += 1;
                continue;
            };
            taken += 1;
            if !self.is_live(u, bin) {
                continue; // stale entry: improved since, or already relaxed
            }
            let du = self.dist[u as usize];
            self.done[u as usize] = du;
            let gu = self.first + u as u64;
            let (targets, weights) = (graph.neighbors(gu), graph.neighbor_weights(gu));
            self.relaxed_arcs += targets.len() as u64;
            for (&v, &w) in targets.iter().zip(weights) {
                let nd = du + w;
                let (owner, lv) = parts.locate(v);
                if owner == self.part {
                    self.relax(lv, nd, gu);
                } else if nd < self.sent[v as usize] {
                    self.sent[v as usize] = nd;
                    self.sent_msgs += 1;
                    send(owner, lv, nd, gu);
                }
            }
        }
        taken
    }

    /// First global id of the partition.
    #[cfg(test)]
    pub(crate) fn first(&self) -> u64 {
        self.first
    }
}

/// One partition's BFS state.
#[derive(Debug)]
pub(crate) struct BfsPart {
    shared: Arc<Shared>,
    part: usize,
    first: u64,
    pub(crate) level: Vec<u32>,
    pub(crate) parent: Vec<u64>,
    frontier: Vec<u32>,
    next: Vec<u32>,
    /// One bit per global vertex: already sent a visit this search.
    sent: Vec<u64>,
    /// One bit per global vertex: the whole current frontier (bottom-up levels only).
    replica: Vec<u64>,
    /// Arcs of the vertices not reached yet.
    unvisited_arcs: u64,
    pub(crate) sent_msgs: u64,
    pub(crate) scanned_arcs: u64,
}

/// What a partition tells the direction heuristic after a level.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BfsCounts {
    /// Vertices in the new frontier.
    pub(crate) frontier: u64,
    /// Arcs leaving the new frontier.
    pub(crate) frontier_arcs: u64,
    /// Arcs of vertices not reached yet.
    pub(crate) unvisited_arcs: u64,
}

impl std::ops::Add for BfsCounts {
    type Output = BfsCounts;
    fn add(self, o: BfsCounts) -> BfsCounts {
        BfsCounts {
            frontier: self.frontier + o.frontier,
            frontier_arcs: self.frontier_arcs + o.frontier_arcs,
            unvisited_arcs: self.unvisited_arcs + o.unvisited_arcs,
        }
    }
}

impl BfsPart {
    pub(crate) fn new(shared: Arc<Shared>, part: usize) -> BfsPart {
        let len = shared.parts.len(part) as usize;
        let n = shared.parts.num_vertices() as usize;
        let first = shared.parts.range(part).start;
        let sent = if shared.parts.parts() > 1 { vec![0u64; n.div_ceil(64)] } else { Vec::new() };
        let range = shared.parts.range(part);
        let offsets = shared.graph.offsets();
        let unvisited_arcs = offsets[range.end as usize] - offsets[range.start as usize];
        BfsPart {
            shared,
            part,
            first,
            level: vec![UNREACHED_LEVEL; len],
            parent: vec![NO_PARENT; len],
            frontier: Vec::new(),
            next: Vec::new(),
            sent,
            replica: vec![0u64; n.div_ceil(64)],
            unvisited_arcs,
            sent_msgs: 0,
            scanned_arcs: 0,
        }
    }

    /// Visits local vertex `local` at `level` from `parent` (first visit wins).
    #[inline]
    pub(crate) fn visit(&mut self, local: u32, level: u32, parent: u64) {
        let l = local as usize;
        if self.level[l] == UNREACHED_LEVEL {
            self.level[l] = level;
            self.parent[l] = parent;
            self.next.push(local);
            self.unvisited_arcs -= self.shared.graph.degree(self.first + local as u64);
        }
    }

    /// The heuristic's counts for the current frontier.
    pub(crate) fn counts(&self) -> BfsCounts {
        let g = &self.shared.graph;
        BfsCounts {
            frontier: self.frontier.len() as u64,
            frontier_arcs: self.frontier.iter().map(|&u| g.degree(self.first + u as u64)).sum(),
            unvisited_arcs: self.unvisited_arcs,
        }
    }

    /// This partition's frontier as `(first vertex, bits over the partition's vertices)`.
    pub(crate) fn frontier_bits(&self) -> (u64, Vec<u64>) {
        let mut bits = vec![0u64; self.level.len().div_ceil(64)];
        for &u in &self.frontier {
            bits[u as usize / 64] |= 1 << (u % 64);
        }
        (self.first, bits)
    }

    /// Adds another partition's frontier (from [`BfsPart::frontier_bits`]) to the replica.
    pub(crate) fn merge_frontier(&mut self, first: u64, bits: &[u64]) {
        for (i, &word) in bits.iter().enumerate() {
            let mut w = word;
            while w != 0 {
                let v = first + i as u64 * 64 + w.trailing_zeros() as u64;
                self.replica[(v / 64) as usize] |= 1 << (v % 64);
                w &= w - 1;
            }
        }
    }

    /// A bottom-up level: every unvisited local vertex with a neighbour in the replica
    /// of the frontier (level `level`) gets level `level + 1`. Clears the replica.
    pub(crate) fn bottom_up(&mut self, level: u32) {
        let shared = Arc::clone(&self.shared);
        let graph = &*shared.graph;
        for u in 0..self.level.len() {
            if self.level[u] != UNREACHED_LEVEL {
                continue;
            }
            let gu = self.first + u as u64;
            for &v in graph.neighbors(gu) {
                self.scanned_arcs += 1;
                if self.replica[(v / 64) as usize] & (1 << (v % 64)) != 0 {
                    self.visit(u as u32, level + 1, v);
                    break;
                }
            }
        }
        self.replica.fill(0);
        self.frontier.clear();
    }

    /// Makes the vertices visited last round the frontier; returns its size.
    pub(crate) fn advance(&mut self) -> usize {
        std::mem::swap(&mut self.frontier, &mut self.next);
        self.next.clear();
        self.frontier.len()
    }

    /// Expands up to `limit` vertices of the frontier (level `level`): their
    /// neighbours get level `level + 1`. Returns true while frontier vertices remain.
    pub(crate) fn expand(
        &mut self,
        level: u32,
        limit: usize,
        send: &mut impl FnMut(usize, u32, u32, u64),
    ) -> bool {
        let shared = Arc::clone(&self.shared);
        let (graph, parts) = (&*shared.graph, &shared.parts);
        for _ in 0..limit {
            let Some(u) = self.frontier.pop() else { return false };
            let gu = self.first + u as u64;
            self.scanned_arcs += graph.degree(gu);
            for &v in graph.neighbors(gu) {
                let (owner, lv) = parts.locate(v);
                if owner == self.part {
                    self.visit(lv, level + 1, gu);
                } else {
                    let (word, bit) = ((v / 64) as usize, 1u64 << (v % 64));
                    if self.sent[word] & bit == 0 {
                        self.sent[word] |= bit;
                        self.sent_msgs += 1;
                        send(owner, lv, level + 1, gu);
                    }
                }
            }
        }
        !self.frontier.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_generators::kronecker::{self, KroneckerParams};

    fn shared(scale: u32, parts: usize) -> Arc<Shared> {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
        let n = graph.num_vertices();
        Arc::new(Shared { graph, parts: Partitioning::new(n, parts) })
    }

    /// Runs the bucketed SSSP with every partition in this thread, delivering sends in
    /// a deliberately scrambled order, and returns global distances.
    fn simulate_sssp(sh: &Arc<Shared>, root: u64, delta: f32) -> Vec<f32> {
        let np = sh.parts.parts();
        let mut parts: Vec<SsspPart> =
            (0..np).map(|p| SsspPart::new(Arc::clone(sh), p, delta)).collect();
        let (rp, rl) = sh.parts.locate(root);
        parts[rp].relax(rl, 0.0, root);
        let mut b = 0;
        loop {
            let mut msgs = Vec::new();
            for part in parts.iter_mut() {
                while part.process_bucket(b, 5, &mut |o, l, d, p| msgs.push((o, l, d, p))) > 0 {}
            }
            msgs.reverse();
            for (o, l, d, p) in msgs {
                parts[o].relax(l, d, p);
            }
            match parts.iter_mut().filter_map(|p| p.next_bucket()).min() {
                Some(nb) => b = nb,
                None => break,
            }
        }
        let mut dist = vec![f32::INFINITY; sh.parts.num_vertices() as usize];
        for p in &parts {
            let f = p.first() as usize;
            dist[f..f + p.dist.len()].copy_from_slice(&p.dist);
        }
        dist
    }

    /// The sequential baseline (binary32 Dijkstra), the COST reference.
    fn dijkstra(g: &Csr, root: u64) -> Vec<f32> {
        let opts = skein_baselines::Options::with_threads(1);
        skein_baselines::sssp(skein_baselines::Engine::Seq, g, root, &opts).unwrap().dist
    }

    #[test]
    fn bucketed_sssp_matches_dijkstra_for_any_part_count_and_delta() {
        for parts in [1, 2, 3, 5] {
            let sh = shared(9, parts);
            let root =
                kronecker::search_roots(&KroneckerParams::new(9, 16, 2, 3).unwrap(), &sh.graph, 1)
                    [0];
            let want = dijkstra(&sh.graph, root);
            for delta in [0.01f32, 0.1, 1.0, 100.0] {
                let got = simulate_sssp(&sh, root, delta);
                let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "parts={parts} delta={delta}");
            }
        }
    }

    #[test]
    fn bfs_levels_match_a_queue_bfs() {
        for parts in [1, 2, 4] {
            let sh = shared(9, parts);
            let np = sh.parts.parts();
            let mut ps: Vec<BfsPart> = (0..np).map(|p| BfsPart::new(Arc::clone(&sh), p)).collect();
            let root = 0u64;
            let (rp, rl) = sh.parts.locate(root);
            ps[rp].visit(rl, 0, root);
            let mut level = 0;
            loop {
                let total: usize = ps.iter_mut().map(BfsPart::advance).sum();
                if total == 0 {
                    break;
                }
                let mut msgs = Vec::new();
                for p in ps.iter_mut() {
                    while p.expand(level, 7, &mut |o, l, lv, par| msgs.push((o, l, lv, par))) {}
                }
                for (o, l, lv, par) in msgs {
                    ps[o].visit(l, lv, par);
                }
                level += 1;
            }
            let opts = skein_baselines::Options::with_threads(1);
            let want = skein_baselines::bfs(skein_baselines::Engine::Seq, &sh.graph, root, &opts)
                .unwrap()
                .level;
            let mut got = Vec::new();
            for p in &ps {
                got.extend_from_slice(&p.level);
            }
            assert_eq!(got, want, "parts={parts}");
        }
    }
}
