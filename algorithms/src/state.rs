//! The state a trustee holds for one partition while a kernel runs, and the local
//! steps of the kernels on it. Nothing here knows about the runtime: a step that must
//! reach another partition calls the `send` function it is given, and the drivers in
//! `crate::engine` turn those calls into delegated requests.
//!
//! # SSSP (bucketed, label-correcting)
//!
//! Tentative distances live with the owning partition. Vertex `u` is *pending* from
//! an improvement of `dist[u]` until it relaxes its arcs (one bit per vertex, small
//! enough to stay in cache where a second array of distances would not). Pending
//! vertices wait in *bins* of width `delta / 16` by distance (entries are never
//! removed: an entry whose vertex is no longer pending in that bin is skipped — lazy
//! deletion). Globally, distances are cut into buckets of width
//! `delta` (16 bins) and all partitions work on the same bucket in a round; within the
//! round each partition takes its bins in increasing order, nearly as Dijkstra orders
//! vertices, so a vertex is rarely relaxed twice unless a *remote* relaxation improves
//! it later. (Taking a bucket's vertices in arbitrary order made Kronecker hubs rescan
//! their huge adjacency lists 5 to 11 times per search; a binary heap ordered them
//! exactly but cost a logarithmic factor and cache misses on large graphs.)
//!
//! Arcs are relaxed by the partition that owns their *target*. A vertex relaxes its
//! arcs into its own partition in place; for each other partition its arcs reach, it
//! sends one [`Scan`] (the range of those arcs in its partition's read-only arc copy,
//! its distance and its tag), and the receiver relaxes that range against its own
//! distances. So every distance check is local, no partition keeps a filter of what
//! it sent (which cost a random read per remote arc), and a hub's arc scan is split
//! among the partitions its neighbours live in instead of falling on its owner alone
//! (the round waits for the busiest partition). Scans to one owner travel [`BATCH`] to
//! a request (a [`Batch`] captured by value), handed to `send` when full and at the end
//! of every [`SsspPart::process_bucket`] call.
//!
//! Each tentative distance is one binary32 addition `dist[u] + w`, so the final
//! distances are the exact binary32 shortest paths of the Graph500 reference, whatever
//! the order in which relaxations arrive.
//!
//! # BFS (level-synchronous, direction-optimizing)
//!
//! Each partition keeps its current frontier and the next one. A *top-down* level
//! expands the frontier: every neighbour is visited, locally in place, remotely through
//! `send` (each remote vertex at most once per partition and search, with a bitmap;
//! [`BATCH`] visits to a request).
//! A *bottom-up* level (Beamer et al., "Direction-optimizing breadth-first search",
//! SC 2012) works the other way round: every partition first receives every
//! partition's frontier as a bitmap (a replica of the whole frontier, sent as data),
//! then each of its unvisited vertices looks for a neighbour in that bitmap and stops
//! at the first one found — no message at all, and few arcs read when the frontier is
//! large. The counts [`BfsPart::counts`] feed the switching heuristic.

//!
//! Arcs come from each partition's own copy ([`crate::adjacency`]); vertices are named by
//! [`Tag`]s there, and parents are kept as tags until the results are gathered.

use std::sync::{Arc, OnceLock};

use skein_generators::{Csr, UNREACHED_LEVEL};

use crate::adjacency::{self, Arc32, PartArcs, Tag, Tags, NO_TAG};
use crate::partition::Partitioning;

/// The graph as every partition sees it: the partitioning, the tag encoding and each
/// partition's arcs in the layouts the kernels read (each copied on first use).
///
/// Trustees only read it; each one touches the arcs of its own vertices, and an SSSP
/// trustee also the arcs into its partition that a [`Scan`] names.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) graph: Arc<Csr>,
    pub(crate) parts: Partitioning,
    pub(crate) tags: Tags,
    weighted: OnceLock<Vec<PartArcs<Arc32>>>,
    bare: OnceLock<Vec<PartArcs<Tag>>>,
}

impl Shared {
    /// Partitions `graph` over `parts` parts; fails when the tags cannot encode it.
    pub(crate) fn new(graph: Arc<Csr>, parts: usize) -> Result<Shared, String> {
        let parts = Partitioning::new(graph.num_vertices(), parts);
        let tags = Tags::new(&parts)?;
        Ok(Shared { graph, parts, tags, weighted: OnceLock::new(), bare: OnceLock::new() })
    }

    /// Each partition's arcs with weights (SSSP), copied on the first call.
    pub(crate) fn weighted(&self) -> &[PartArcs<Arc32>] {
        self.weighted.get_or_init(|| adjacency::build(&self.graph, &self.parts, self.tags))
    }

    /// Each partition's arcs without weights (BFS), copied on the first call.
    pub(crate) fn bare(&self) -> &[PartArcs<Tag>] {
        self.bare.get_or_init(|| adjacency::build(&self.graph, &self.parts, self.tags))
    }

    /// The global id of `tag`, or `NO_PARENT` for [`NO_TAG`].
    pub(crate) fn global(&self, tag: Tag) -> u64 {
        if tag == NO_TAG {
            skein_generators::NO_PARENT
        } else {
            self.parts.global(self.tags.part(tag), self.tags.local(tag))
        }
    }

    /// Writes the global id of each of `tags` ([`Shared::global`]) into `out`.
    pub(crate) fn write_globals(&self, tags: &[Tag], out: &mut [u64]) {
        assert_eq!(tags.len(), out.len());
        for (o, &t) in out.iter_mut().zip(tags) {
            *o = self.global(t);
        }
    }

    /// The tag of global vertex `v`.
    pub(crate) fn tag(&self, v: u64) -> Tag {
        let (p, l) = self.parts.locate(v);
        self.tags.tag(p, l)
    }
}

/// Updates sent to one owner in one request.
pub(crate) const BATCH: usize = 8;

/// Up to [`BATCH`] updates for one owner, sent by value in one request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch<T: Copy> {
    len: u32,
    items: [T; BATCH],
}

impl<T: Copy + Default> Default for Batch<T> {
    fn default() -> Self {
        Batch { len: 0, items: [T::default(); BATCH] }
    }
}

impl<T: Copy> Batch<T> {
    /// Adds `item`; true when the batch is now full.
    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.items[self.len as usize] = item;
        self.len += 1;
        self.len as usize == BATCH
    }

    /// The updates.
    pub(crate) fn items(&self) -> &[T] {
        &self.items[..self.len as usize]
    }
}

/// One outgoing batch per partition, handed to `send` when full or flushed.
#[derive(Debug)]
struct Outbox<T: Copy> {
    batches: Vec<Batch<T>>,
    /// Requests sent this search.
    requests: u64,
}

impl<T: Copy + Default> Outbox<T> {
    fn new(parts: usize) -> Self {
        Outbox { batches: vec![Batch::default(); parts], requests: 0 }
    }

    #[inline]
    fn push(&mut self, owner: usize, item: T, send: &mut impl FnMut(usize, Batch<T>)) {
        let b = &mut self.batches[owner];
        if b.push(item) {
            send(owner, *b);
            b.len = 0;
            self.requests += 1;
        }
    }

    fn flush(&mut self, send: &mut impl FnMut(usize, Batch<T>)) {
        for (owner, b) in self.batches.iter_mut().enumerate() {
            if b.len > 0 {
                send(owner, *b);
                b.len = 0;
                self.requests += 1;
            }
        }
    }
}

/// Bins per delta-bucket.
const SUB: usize = 16;

/// A remote SSSP scan: the receiving partition relaxes the arcs `start..end` of the
/// partition that owns `parent` (all of them point into the receiver) with `parent`'s
/// distance `dist`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scan {
    start: u64,
    end: u64,
    parent: Tag,
    dist: f32,
}

/// One partition's SSSP state.
#[derive(Debug)]
pub(crate) struct SsspPart {
    shared: Arc<Shared>,
    part: usize,
    pub(crate) dist: Vec<f32>,
    pub(crate) parent: Vec<Tag>,
    /// Bit `u` set: `u` is pending (improved since it last relaxed its arcs).
    pending: Vec<u64>,
    outbox: Outbox<Scan>,
    /// `bins[i]` holds local vertices made pending with a distance in bin `i`.
    bins: Vec<Vec<u32>>,
    /// No bin below this one holds an entry.
    cur: usize,
    /// Bins per unit of distance (`SUB / delta`).
    bins_per_unit: f32,
    /// Work counters of the last search.
    pub(crate) relaxed_arcs: u64,
}

impl SsspPart {
    pub(crate) fn new(shared: Arc<Shared>, part: usize, delta: f32) -> SsspPart {
        let len = shared.parts.len(part) as usize;
        let np = shared.parts.parts();
        SsspPart {
            shared,
            part,
            dist: vec![f32::INFINITY; len],
            parent: vec![NO_TAG; len],
            pending: vec![0; len.div_ceil(64)],
            outbox: Outbox::new(np),
            bins: Vec::new(),
            cur: 0,
            bins_per_unit: SUB as f32 / delta,
            relaxed_arcs: 0,
        }
    }

    /// Requests this partition sent.
    pub(crate) fn requests(&self) -> u64 {
        self.outbox.requests
    }

    /// The bin of distance `d` (monotone in `d`; a bucket is `SUB` consecutive bins).
    #[inline]
    fn bin_of(&self, d: f32) -> usize {
        (d * self.bins_per_unit) as usize
    }

    /// Offers distance `d` through `parent` to local vertex `local`; true if it improved.
    #[inline]
    pub(crate) fn relax(&mut self, local: u32, d: f32, parent: Tag) -> bool {
        if d < self.dist[local as usize] {
            self.improve(local, d, parent);
            true
        } else {
            false
        }
    }

    /// Applies a batch of remote scans: relaxes the arcs they name, which all point into
    /// this partition.
    pub(crate) fn scan_batch(&mut self, batch: &Batch<Scan>) {
        let shared = Arc::clone(&self.shared);
        let tags = shared.tags;
        for s in batch.items() {
            let arcs = shared.weighted()[tags.part(s.parent)].range(s.start, s.end);
            self.relaxed_arcs += arcs.len() as u64;
            for &Arc32 { tag, weight } in arcs {
                self.relax(tags.local(tag), s.dist + weight, s.parent);
            }
        }
    }

    /// Lowers `local`'s distance to `d` (known to be an improvement) and files it.
    #[inline(never)]
    fn improve(&mut self, local: u32, d: f32, parent: Tag) {
        let l = local as usize;
        self.dist[l] = d;
        self.parent[l] = parent;
        self.pending[l / 64] |= 1 << (l % 64);
        let bin = self.bin_of(d);
        if bin >= self.bins.len() {
            self.bins.resize_with(bin + 1, Vec::new);
        }
        self.bins[bin].push(local);
        self.cur = self.cur.min(bin);
    }

    /// True when `u`, found in bin `bin`, is pending there.
    #[inline]
    fn is_live(&self, u: u32, bin: usize) -> bool {
        let u = u as usize;
        self.pending[u / 64] & (1 << (u % 64)) != 0 && self.bin_of(self.dist[u]) == bin
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
    /// call. Remote relaxations go to `send(owner, batch)`, every batch flushed before
    /// returning. Returns the number of entries taken: 0 means bucket `b` has no pending
    /// vertex here.
    pub(crate) fn process_bucket(
        &mut self,
        b: usize,
        limit: usize,
        send: &mut impl FnMut(usize, Batch<Scan>),
    ) -> usize {
        let shared = Arc::clone(&self.shared);
        let arcs = &shared.weighted()[self.part];
        let tags = shared.tags;
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
            self.pending[u as usize / 64] &= !(1 << (u % 64));
            let me = tags.tag(self.part, u);
            let (own, _) = arcs.split(u);
            self.relaxed_arcs += own.len() as u64;
            for &Arc32 { tag, weight } in own {
                self.relax(tags.local(tag), du + weight, me);
            }
            for (owner, start, end) in arcs.segments(u, tags) {
                let scan = Scan { start, end, parent: me, dist: du };
                self.outbox.push(owner, scan, send);
            }
        }
        self.outbox.flush(send);
        taken
    }

    /// Writes the parents as global ids into `out` (one per local vertex).
    pub(crate) fn write_parents(&self, out: &mut [u64]) {
        self.shared.write_globals(&self.parent, out);
    }
}

/// A remote BFS visit of the owner's `local` vertex from `parent`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Visit {
    local: u32,
    parent: Tag,
}

/// One partition's BFS state.
#[derive(Debug)]
pub(crate) struct BfsPart {
    shared: Arc<Shared>,
    part: usize,
    pub(crate) level: Vec<u32>,
    pub(crate) parent: Vec<Tag>,
    frontier: Vec<u32>,
    next: Vec<u32>,
    /// One bit per tag: already sent a visit this search.
    sent: Vec<u64>,
    outbox: Outbox<Visit>,
    /// One bit per tag: the whole current frontier (bottom-up levels only).
    replica: Vec<u64>,
    /// Arcs of the vertices not reached yet.
    unvisited_arcs: u64,
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
        let np = shared.parts.parts();
        let words = shared.tags.space(np).div_ceil(64);
        let sent = if np > 1 { vec![0u64; words] } else { Vec::new() };
        let unvisited_arcs = shared.bare()[part].num_arcs();
        BfsPart {
            shared,
            part,
            level: vec![UNREACHED_LEVEL; len],
            parent: vec![NO_TAG; len],
            frontier: Vec::new(),
            next: Vec::new(),
            sent,
            outbox: Outbox::new(np),
            replica: vec![0u64; words],
            unvisited_arcs,
            scanned_arcs: 0,
        }
    }

    /// Requests this partition sent.
    pub(crate) fn requests(&self) -> u64 {
        self.outbox.requests
    }

    /// Visits local vertex `local` at `level` from `parent` (first visit wins).
    #[inline]
    pub(crate) fn visit(&mut self, local: u32, level: u32, parent: Tag) {
        let l = local as usize;
        if self.level[l] == UNREACHED_LEVEL {
            self.level[l] = level;
            self.parent[l] = parent;
            self.next.push(local);
            self.unvisited_arcs -= self.shared.bare()[self.part].degree(local);
        }
    }

    /// Applies a batch of remote visits at `level`.
    pub(crate) fn visit_batch(&mut self, batch: &Batch<Visit>, level: u32) {
        for v in batch.items() {
            self.visit(v.local, level, v.parent);
        }
    }

    /// The heuristic's counts for the current frontier.
    pub(crate) fn counts(&self) -> BfsCounts {
        let arcs = &self.shared.bare()[self.part];
        BfsCounts {
            frontier: self.frontier.len() as u64,
            frontier_arcs: self.frontier.iter().map(|&u| arcs.degree(u)).sum(),
            unvisited_arcs: self.unvisited_arcs,
        }
    }

    /// This partition's frontier as `(part, bits over the partition's local indices)`.
    pub(crate) fn frontier_bits(&self) -> (usize, Vec<u64>) {
        let mut bits = vec![0u64; self.level.len().div_ceil(64)];
        for &u in &self.frontier {
            bits[u as usize / 64] |= 1 << (u % 64);
        }
        (self.part, bits)
    }

    /// Adds partition `part`'s frontier (from [`BfsPart::frontier_bits`]) to the replica.
    pub(crate) fn merge_frontier(&mut self, part: usize, bits: &[u64]) {
        let tags = self.shared.tags;
        if tags.shift() >= 6 {
            // A part's tags start on a word boundary: whole words.
            let base = tags.tag(part, 0) as usize / 64;
            for (r, &w) in self.replica[base..base + bits.len()].iter_mut().zip(bits) {
                *r |= w;
            }
            return;
        }
        for (i, &word) in bits.iter().enumerate() {
            let mut w = word;
            while w != 0 {
                let t = tags.tag(part, i as u32 * 64 + w.trailing_zeros()) as usize;
                self.replica[t / 64] |= 1 << (t % 64);
                w &= w - 1;
            }
        }
    }

    /// A bottom-up level: every unvisited local vertex with a neighbour in the replica
    /// of the frontier (level `level`) gets level `level + 1`. Clears the replica.
    pub(crate) fn bottom_up(&mut self, level: u32) {
        let shared = Arc::clone(&self.shared);
        let arcs = &shared.bare()[self.part];
        let mut scanned = 0;
        for u in 0..self.level.len() as u32 {
            if self.level[u as usize] != UNREACHED_LEVEL {
                continue;
            }
            for &t in arcs.arcs(u) {
                scanned += 1;
                if self.replica[t as usize / 64] & (1 << (t % 64)) != 0 {
                    self.visit(u, level + 1, t);
                    break;
                }
            }
        }
        self.scanned_arcs += scanned;
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
    /// neighbours get level `level + 1`, remote ones through `send(owner, batch)`, every
    /// batch flushed before returning. Returns true while frontier vertices remain.
    pub(crate) fn expand(
        &mut self,
        level: u32,
        limit: usize,
        send: &mut impl FnMut(usize, Batch<Visit>),
    ) -> bool {
        let shared = Arc::clone(&self.shared);
        let arcs = &shared.bare()[self.part];
        let tags = shared.tags;
        for _ in 0..limit {
            let Some(u) = self.frontier.pop() else { break };
            let me = tags.tag(self.part, u);
            let (own, other) = arcs.split(u);
            self.scanned_arcs += (own.len() + other.len()) as u64;
            for &t in own {
                self.visit(tags.local(t), level + 1, me);
            }
            for &t in other {
                let (word, bit) = (t as usize / 64, 1u64 << (t % 64));
                if self.sent[word] & bit == 0 {
                    self.sent[word] |= bit;
                    let v = Visit { local: tags.local(t), parent: me };
                    self.outbox.push(tags.part(t), v, send);
                }
            }
        }
        self.outbox.flush(send);
        !self.frontier.is_empty()
    }

    /// Writes the parents as global ids into `out` (one per local vertex).
    pub(crate) fn write_parents(&self, out: &mut [u64]) {
        self.shared.write_globals(&self.parent, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_generators::kronecker::{self, KroneckerParams};

    fn shared(scale: u32, parts: usize) -> Arc<Shared> {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
        Arc::new(Shared::new(graph, parts).unwrap())
    }

    /// Runs the bucketed SSSP with every partition in this thread, delivering sends in
    /// a deliberately scrambled order, and returns global distances.
    fn simulate_sssp(sh: &Arc<Shared>, root: u64, delta: f32) -> Vec<f32> {
        let np = sh.parts.parts();
        let mut parts: Vec<SsspPart> =
            (0..np).map(|p| SsspPart::new(Arc::clone(sh), p, delta)).collect();
        let (rp, rl) = sh.parts.locate(root);
        parts[rp].relax(rl, 0.0, sh.tag(root));
        let mut b = 0;
        loop {
            let mut msgs = Vec::new();
            for part in parts.iter_mut() {
                while part.process_bucket(b, 5, &mut |o, batch| msgs.push((o, batch))) > 0 {}
            }
            msgs.reverse();
            for (o, batch) in msgs {
                parts[o].scan_batch(&batch);
            }
            match parts.iter_mut().filter_map(|p| p.next_bucket()).min() {
                Some(nb) => b = nb,
                None => break,
            }
        }
        let mut dist = vec![f32::INFINITY; sh.parts.num_vertices() as usize];
        for (i, p) in parts.iter().enumerate() {
            let f = sh.parts.range(i).start as usize;
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
            ps[rp].visit(rl, 0, sh.tag(root));
            let mut level = 0;
            loop {
                let total: usize = ps.iter_mut().map(BfsPart::advance).sum();
                if total == 0 {
                    break;
                }
                let mut msgs = Vec::new();
                for p in ps.iter_mut() {
                    while p.expand(level, 7, &mut |o, batch| msgs.push((o, batch))) {}
                }
                for (o, batch) in msgs {
                    ps[o].visit_batch(&batch, level + 1);
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
