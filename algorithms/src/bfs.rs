//! The BFS kernel: level-synchronous and direction-optimizing, over partitions entrusted
//! to the workers. [`BfsPart`] is one partition's state and its local steps (nothing
//! there knows about the runtime: a step that must reach another partition calls the
//! `send` function it is given); [`search`] is the level loop on the runtime.
//!
//! Each partition keeps its current frontier and the next one. A *top-down* level
//! expands the frontier: every neighbour is visited, locally in place, remotely through
//! `send` (each remote vertex at most once per partition and search, with a bitmap;
//! 8 visits to a request, a [`crate::outbox::Packet`] of 8 words). A frontier vertex with at least
//! [`SCAN_ARCS`] arcs into another partition of its rank sends that partition one
//! [`HubScan`] instead (the range of those arcs in its copy, read by the receiver in
//! shared memory), so that a hub's arcs are read by the partitions its neighbours live in,
//! not by its owner alone.
//! A *bottom-up* level (Beamer et al., "Direction-optimizing breadth-first search",
//! SC 2012) works the other way round: the whole frontier is first gathered into one
//! bitmap per rank (over every partition's tags), then each unvisited vertex looks for a
//! neighbour in that bitmap and stops at the first one found — no message per vertex,
//! and few arcs read when the frontier is large. Each partition sets its frontier's bits
//! in its rank's bitmap (shared memory, `crate::registry::shared`; when its tags fill whole
//! 64-bit words, as on any graph of more than 64 vertices per partition, it builds the words
//! in a buffer of its own and stores them, no atomic OR per vertex) and sends them, as one
//! bitmap over its own vertices, to one partition of every *other* rank, which merges
//! them into its rank's bitmap: in one process no message at all. After a bottom-up level
//! a partition shares its next frontier at once, before the quiescence that ends the level
//! (a bottom-up level is often followed by another, which then needs no quiescence of its
//! own for the shares). A rank keeps three such bitmaps, by level modulo 3: one read, the
//! next written ahead, the previous one cleared (each partition its slice, at the start of
//! the level after it was read), with a quiescence every partition waited in between each
//! write, read and clear of one bitmap; all three are cleared before a search. (Stale bits
//! would not change a result: they name vertices reached at earlier levels, which no
//! unreached vertex of the symmetric graph neighbours; the clearing keeps the bitmaps
//! exact.) A bottom-up level visits only the vertices still to do: each partition keeps a
//! bitmap over its local indices of the unreached vertices that have arcs (`todo`, copied
//! from the partition's bitmap of vertices with arcs at the start of a search, a bit
//! cleared when a vertex is reached), and walks its set bits,
//! 64 vertices to a word: reached vertices and those without arcs (about a third of a
//! Kronecker graph's, never reached) cost nothing after the first level.
//!
//! The counts [`BfsPart::counts`] (the frontier's vertices, and its arcs summed as its
//! vertices are reached) feed the switching heuristic, GAP's (`bfs.cc`): go bottom-up when
//! the frontier's arcs exceed the arcs not yet examined by a top-down level / alpha
//! (never when alpha is 0); stay bottom-up while the frontier grows or holds more than
//! `vertices / beta` vertices; after bottom-up levels, at least one top-down level. The
//! arcs "not examined" are all arcs less those of every top-down level's frontier (GAP
//! subtracts 1 for the first top-down level after bottom-up ones), so bottom-up levels do
//! not lower them: a search does not go back bottom-up for the few vertices of its last
//! levels (a pass over every unreached vertex for nothing).
//!
//! Each level is one round, and one driver fiber per partition runs all of them: the main
//! fiber starts a driver on every worker of every rank once per search (`spawn_on`; the
//! driver finds its partition's handle in its rank's registry, `crate::registry`). A level
//! ends with `skein::wait_quiescent_sum` over every rank (every visit of the level applied
//! everywhere), and its lanes carry the next frontier's counts: each partition adds the
//! vertices it reaches and their arcs where it reaches them (in the visits' closures, in its
//! driver's steps: [`BfsPart::publish`]), so every driver reads the same sums and takes the
//! same direction, with no join and no new spawn between levels (`levels_driver`). The
//! vertices a partition reaches are kept by the level's parity, since a driver past a
//! level's end may send visits of the level after while this partition's driver has not
//! yet made its next level the frontier. Levels do not depend on the number of workers or
//! ranks.
//!
//! Across ranks the code is the same: a batch of visits is the `Plain` argument of an
//! `apply_then` (a packet of 8 visits and the level, 80 bytes),
//! and a frontier bitmap for another rank is the serialized argument of an
//! `apply_with_then`, both sent by
//! the partition from its delegated context through the handles every partition receives
//! when the search starts. Each partition is built on its trustee from the graph's id in
//! its rank's registry, whose view holds the arcs of that rank's own partitions only
//! (`crate::graph`): a BFS partition reads the arcs of its own vertices alone, so nothing
//! else is needed when each rank holds only its rows.
//!
//! Arcs come from each partition's own copy ([`crate::adjacency`]); vertices are named by
//! [`Tag`]s there, and parents are kept as tags until the results are gathered. A
//! partition's arrays are kept for the next search (`Buffers`), and the gathered result
//! can be written into an earlier result's vectors (`crate::Engine::bfs_into`): repeated
//! searches of a graph fault no fresh pages.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use skein::codec::Raw;
use skein::Trust;
use skein_generators::UNREACHED_LEVEL;

use crate::adjacency::Tag;
use crate::graph::{GraphView, OwnView};
use crate::outbox::{Outbox, Packet};

/// Words of a visit packet: 8 visits of 8 bytes.
const VISIT_WORDS: usize = 8;
/// Words of a hub-scan packet: 8 scans of 24 bytes.
const HUB_WORDS: usize = 24;
use crate::parts::{
    collect_into, connect_as, disconnect, superstep, until_done, Collect, KernelStats, Part,
};
use crate::registry;

/// A remote BFS visit of the owner's `local` vertex from `parent`.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct Visit {
    local: u32,
    parent: Tag,
}

// SAFETY: repr(C) of two u32: no address, every bit pattern is a valid value (an
// out-of-range index from corrupted bytes panics on its slice).
unsafe impl skein::Plain for Visit {}

/// A top-down scan of one frontier vertex's arcs into the receiving partition, sent to a
/// partition of the sender's rank only: the receiver visits the targets of the arcs
/// `start..end` of the copy of the partition owning `parent` (all of them its own
/// vertices), reading that copy in shared memory.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct HubScan {
    start: u64,
    end: u64,
    parent: Tag,
    /// Zero: makes the size a multiple of 8 without padding.
    zero: u32,
}

// SAFETY: repr(C) of two u64 and two u32, no padding: no address, every bit pattern is a
// valid value (an out-of-range arc range panics on its slice).
unsafe impl skein::Plain for HubScan {}

/// A frontier vertex's arcs into a partition of its own rank travel as one [`HubScan`]
/// when there are at least this many (fewer go as [`Visit`]s, filtered by the sent bitmap),
/// so that the receiver, not the owner alone, reads a hub's arcs.
const SCAN_ARCS: usize = 16;

/// What [`BfsPart::expand`] hands its `send` function.
#[derive(Debug)]
pub(crate) enum Out {
    /// Visits of the owner's vertices.
    Visits(Packet<Visit, VISIT_WORDS>),
    /// Arc ranges the owner scans.
    Scans(Packet<HubScan, HUB_WORDS>),
}

/// A partition's arrays of one search, kept for the next search of the same graph on the
/// same worker (`crate::registry::keep_buffers`): a search then faults no fresh pages.
#[derive(Debug, Default)]
struct Buffers {
    state: Vec<u64>,
    frontier: Vec<u32>,
    next: [Vec<u32>; 2],
    sent: Vec<u64>,
    words: Vec<u64>,
    todo: Vec<u64>,
    with_arcs: Vec<u64>,
}

/// Bits over a partition's local indices: set for the vertices with at least one arc.
fn with_arcs(arcs: &crate::adjacency::PartArcs<Tag>, len: usize) -> Vec<u64> {
    let mut bits = vec![0u64; len.div_ceil(64)];
    for l in 0..len as u32 {
        if arcs.degree(l) > 0 {
            bits[l as usize / 64] |= 1 << (l % 64);
        }
    }
    bits
}

/// The frontier of a bottom-up level as one bitmap per rank, over every partition's tags
/// (see the module docs): three, by level modulo 3, so that while one is read (the level's
/// bottom-up step) the next is written (the next level's frontier, shared ahead) and the
/// previous one is cleared, each step separated from the last use of its bitmap by a
/// quiescence every partition of the rank waited in ([`levels_driver`]).
#[derive(Debug)]
struct SharedFrontier {
    bits: [Vec<AtomicU64>; 3],
}

/// The state of an unreached vertex of `degree` arcs: [`UNREACHED_LEVEL`], and its degree
/// (at most `u32::MAX`) where the parent goes, so that the visit that reaches it finds the
/// degree (for the frontier's arcs) in the cache line it writes.
#[inline]
fn unreached(degree: u64) -> u64 {
    u64::from(UNREACHED_LEVEL) | degree.min(u64::from(u32::MAX)) << 32
}

/// The state of each local vertex of `arcs` before a search ([`unreached`]), into `state`.
fn fill_unreached(arcs: &crate::adjacency::PartArcs<Tag>, state: &mut [u64]) {
    for (l, s) in state.iter_mut().enumerate() {
        *s = unreached(arcs.degree(l as u32));
    }
}

/// One partition's BFS state.
#[derive(Debug)]
pub(crate) struct BfsPart {
    view: OwnView,
    /// The graph's id in the registry (where the buffers go back when the search ends).
    graph: u64,
    part: usize,
    /// The arrays come from an earlier search and need [`Part::reset`].
    dirty: bool,
    /// Every partition's handle (given by `crate::parts::connect`), to send visits.
    peers: Arc<Vec<Trust<BfsPart>>>,
    /// Per local vertex, its level (low 32 bits) and its parent's tag (high 32 bits), in
    /// one word so that a visit reads and writes one cache line; until the vertex is
    /// reached, [`UNREACHED_LEVEL`] and its degree ([`unreached`]).
    pub(crate) state: Vec<u64>,
    frontier: Vec<u32>,
    /// The vertices reached at a level, by the level's parity: those of the next level, and
    /// (early) those of the level after it, which the drivers that passed a level's end
    /// reach while this partition's driver has not made the next level its frontier yet
    /// ([`BfsPart::advance`]).
    next: [Vec<u32>; 2],
    /// One bit per tag: already sent a visit this search.
    sent: Vec<u64>,
    /// The frontier as bits over the local indices ([`BfsPart::share_frontier`]).
    words: Vec<u64>,
    /// Bits over the local indices: the vertices with arcs not reached yet (those a
    /// bottom-up level looks at).
    todo: Vec<u64>,
    /// Bits over the local indices: the vertices with arcs (`todo` at the start).
    with_arcs: Vec<u64>,
    outbox: Outbox<Visit, VISIT_WORDS>,
    /// Arc ranges sent to partitions of this rank ([`HubScan`]).
    scans: Outbox<HubScan, HUB_WORDS>,
    /// The partitions of this partition's rank.
    same_rank: std::ops::Range<usize>,
    /// The whole frontier of bottom-up levels, shared by the partitions of this rank.
    shared: Arc<SharedFrontier>,
    /// The words of each shared bitmap this partition clears.
    slice: std::ops::Range<usize>,
    /// Arcs of the partition not examined by a top-down level yet ([`BfsCounts::unexamined`]).
    unexamined: u64,
    /// Arcs of the vertices in `next`, by parity (those of `frontier` after
    /// [`BfsPart::advance`]).
    next_arcs: [u64; 2],
    /// What of `next` and `next_arcs` (vertices, arcs), by parity, was added to the worker's
    /// lanes ([`BfsPart::publish`]).
    published: [(u64, u64); 2],
    frontier_arcs: u64,
    pub(crate) scanned_arcs: u64,
}

/// What a partition tells the direction heuristic after a level.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct BfsCounts {
    /// Vertices in the new frontier.
    pub(crate) frontier: u64,
    /// Arcs leaving the new frontier.
    pub(crate) frontier_arcs: u64,
    /// Arcs not examined by a top-down level yet (the partition's arcs less those of its
    /// frontier at every top-down level).
    pub(crate) unexamined: u64,
}

// SAFETY: repr(C) of three u64: no address, every bit pattern is a valid value.
unsafe impl skein::Plain for BfsCounts {}

impl BfsPart {
    /// Partition `part`'s state for a search on graph `graph` (its id in the registry):
    /// the arrays the previous search of this graph on this worker left
    /// (`crate::registry::take_buffers`), to be cleared by [`Part::reset`] (on every
    /// trustee at once) before the search starts, or fresh ones.
    pub(crate) fn new(graph: u64, view: Arc<GraphView>, part: usize) -> BfsPart {
        let len = view.parts.len(part) as usize;
        let np = view.parts.parts();
        let words = view.tags.space(np).div_ceil(64);
        let sent_words = if np > 1 { words } else { 0 };
        let unexamined = view.bare(part).num_arcs();
        let kept = registry::take_buffers::<Buffers>(graph, part)
            .filter(|b| b.state.len() == len && b.sent.len() == sent_words);
        let rank = view.rank_parts(part);
        let shared = registry::shared(graph, rank.start, || SharedFrontier {
            bits: [0, 1, 2].map(|_| (0..words).map(|_| AtomicU64::new(0)).collect()),
        });
        let (i, k) = (part - rank.start, rank.len());
        let slice = words * i / k..words * (i + 1) / k;
        let dirty = kept.is_some();
        let b = kept.unwrap_or_else(|| {
            let with_arcs = with_arcs(view.bare(part), len);
            let mut state = vec![0; len];
            fill_unreached(view.bare(part), &mut state);
            Buffers {
                state,
                // Each vertex enters a frontier at most once per search: room for all of them
                // from the start, so that no later search grows (and faults in) these.
                frontier: Vec::with_capacity(len),
                next: [Vec::with_capacity(len), Vec::with_capacity(len)],
                sent: vec![0u64; sent_words],
                words: Vec::new(),
                todo: with_arcs.clone(),
                with_arcs,
            }
        });
        BfsPart {
            view: OwnView::new(view),
            graph,
            part,
            dirty,
            peers: Arc::new(Vec::new()),
            state: b.state,
            frontier: b.frontier,
            next: b.next,
            sent: b.sent,
            words: b.words,
            todo: b.todo,
            with_arcs: b.with_arcs,
            outbox: Outbox::new(np),
            scans: Outbox::new(np),
            same_rank: rank.clone(),
            shared,
            slice,
            unexamined,
            next_arcs: [0; 2],
            published: [(0, 0); 2],
            frontier_arcs: 0,
            scanned_arcs: 0,
        }
    }

    /// Requests this partition sent.
    pub(crate) fn requests(&self) -> u64 {
        self.outbox.requests + self.scans.requests
    }

    /// Visits local vertex `local` at `level` from `parent` (first visit wins).
    #[inline]
    pub(crate) fn visit(&mut self, local: u32, level: u32, parent: Tag) {
        let s = self.state[local as usize];
        if s as u32 == UNREACHED_LEVEL {
            self.reach(local, level, parent, s >> 32);
        }
    }

    /// Records unvisited local vertex `local` (of `degree` arcs) as visited at `level` from
    /// `parent`.
    #[inline]
    fn reach(&mut self, local: u32, level: u32, parent: Tag, degree: u64) {
        let l = local as usize;
        self.state[l] = u64::from(level) | u64::from(parent) << 32;
        self.todo[l / 64] &= !(1 << (l % 64));
        let p = level as usize % 2;
        self.next[p].push(local);
        self.next_arcs[p] += degree;
    }

    /// Applies a batch of arc scans from partitions of this rank: their targets get
    /// `level`.
    pub(crate) fn scan_batch(&mut self, batch: &Packet<HubScan, HUB_WORDS>, level: u32) {
        let view = self.view.clone();
        let tags = view.tags;
        for s in batch.items() {
            let arcs = view.bare(tags.part(s.parent)).range(s.start, s.end);
            self.scanned_arcs += arcs.len() as u64;
            for &t in arcs {
                self.visit(tags.local(t), level, s.parent);
            }
        }
    }

    /// Applies a batch of remote visits at `level`.
    pub(crate) fn visit_batch(&mut self, batch: &Packet<Visit, VISIT_WORDS>, level: u32) {
        for v in batch.items() {
            self.visit(v.local, level, v.parent);
        }
    }

    /// The heuristic's counts for the current frontier (its arcs summed as its vertices
    /// were reached, [`BfsPart::reach`]: no second pass over their degrees).
    pub(crate) fn counts(&self) -> BfsCounts {
        BfsCounts {
            frontier: self.frontier.len() as u64,
            frontier_arcs: self.frontier_arcs,
            unexamined: self.unexamined,
        }
    }

    /// Clears this partition's slice of the shared bitmap of level `level` (the previous
    /// level's, whose frontier was shared: [`levels_driver`] calls this once every partition
    /// of the rank has read it, and before any writes it again).
    pub(crate) fn clear_shared(&mut self, level: u32) {
        for w in &self.shared.bits[level as usize % 3][self.slice.clone()] {
            w.store(0, Ordering::Relaxed);
        }
    }

    /// This partition's frontier as bits over its local indices, into `words`.
    fn frontier_bits(&mut self) {
        self.words.clear();
        self.words.resize(self.state.len().div_ceil(64), 0);
        for &u in &self.frontier {
            self.words[u as usize / 64] |= 1 << (u % 64);
        }
    }

    /// Adds partition `part`'s frontier (bits over its local indices) to shared bitmap
    /// `i` of this rank.
    fn merge_frontier(&self, part: usize, i: usize, bits: &[u64]) {
        let tags = self.view.tags;
        let shared = &self.shared.bits[i];
        if tags.shift() >= 6 {
            // A part's tags start on a word boundary: whole words.
            let base = tags.tag(part, 0) as usize / 64;
            for (r, &w) in shared[base..base + bits.len()].iter().zip(bits) {
                if w != 0 {
                    r.fetch_or(w, Ordering::Relaxed);
                }
            }
            return;
        }
        for (k, &word) in bits.iter().enumerate() {
            let mut w = word;
            while w != 0 {
                let t = tags.tag(part, k as u32 * 64 + w.trailing_zeros()) as usize;
                shared[t / 64].fetch_or(1 << (t % 64), Ordering::Relaxed);
                w &= w - 1;
            }
        }
    }

    /// A bottom-up level: every unvisited local vertex with a neighbour in the shared
    /// frontier of level `level` gets level `level + 1`. Only the vertices in `todo` are
    /// looked at (unreached, with arcs), a word of 64 at a time.
    pub(crate) fn bottom_up(&mut self, level: u32) {
        let view = self.view.clone();
        let shared = Arc::clone(&self.shared);
        let front = &shared.bits[level as usize % 3];
        let arcs = view.bare(self.part);
        let mut scanned = 0;
        for k in 0..self.todo.len() {
            let mut bits = self.todo[k];
            while bits != 0 {
                let u = k as u32 * 64 + bits.trailing_zeros();
                bits &= bits - 1;
                let mine = arcs.arcs(u);
                for &t in mine {
                    scanned += 1;
                    if front[t as usize / 64].load(Ordering::Relaxed) & (1 << (t % 64)) != 0 {
                        self.reach(u, level + 1, t, mine.len() as u64);
                        break;
                    }
                }
            }
        }
        self.scanned_arcs += scanned;
        self.frontier.clear();
    }

    /// Makes the vertices reached at `level` the frontier; returns its size.
    pub(crate) fn advance(&mut self, level: u32) -> usize {
        let p = level as usize % 2;
        std::mem::swap(&mut self.frontier, &mut self.next[p]);
        self.next[p].clear();
        self.frontier_arcs = std::mem::take(&mut self.next_arcs[p]);
        self.published[p] = (0, 0);
        self.frontier.len()
    }

    /// Adds what this partition reached since its last call (vertices, and their arcs) to
    /// lanes 0 and 1 of its worker (`skein::quiescent_add`): every driver reads the next
    /// frontier's counts, summed over every partition, in the totals of the quiescence that
    /// ends the level ([`search`]). Called by the code that reaches vertices in the runtime
    /// (the visits' and scans' closures, a driver's expansion and bottom-up step).
    fn publish(&mut self) {
        let (mut vertices, mut arcs) = (0, 0);
        for p in 0..2 {
            let now = (self.next[p].len() as u64, self.next_arcs[p]);
            vertices += now.0 - self.published[p].0;
            arcs += now.1 - self.published[p].1;
            self.published[p] = now;
        }
        if vertices > 0 {
            skein::quiescent_add([vertices, arcs, 0, 0]);
        }
    }

    /// Expands up to `limit` vertices of the frontier (level `level`): their
    /// neighbours get level `level + 1`, remote ones through `send(owner, batch)`, every
    /// batch flushed before returning. Returns true while frontier vertices remain.
    pub(crate) fn expand(
        &mut self,
        level: u32,
        limit: usize,
        send: &mut impl FnMut(usize, Out),
    ) -> bool {
        let view = self.view.clone();
        let arcs = view.bare(self.part);
        let tags = view.tags;
        for _ in 0..limit {
            let Some(u) = self.frontier.pop() else { break };
            let me = tags.tag(self.part, u);
            let (first, last) = arcs.bounds(u);
            let (own, other) = arcs.split(u);
            self.scanned_arcs += own.len() as u64;
            for &t in own {
                self.visit(tags.local(t), level + 1, me);
            }
            if other.len() < SCAN_ARCS || self.same_rank.len() == 1 {
                self.send_visits(other, me, send);
                continue;
            }
            for (owner, start, end) in arcs.segments_of(first + own.len() as u64, last, tags) {
                let range = arcs.range(start, end);
                if range.len() >= SCAN_ARCS && self.same_rank.contains(&owner) {
                    let scan = HubScan { start, end, parent: me, zero: 0 };
                    self.scans.push(owner, scan, &mut |o, b| send(o, Out::Scans(b)));
                } else {
                    self.send_visits(range, me, send);
                }
            }
        }
        self.outbox.flush(&mut |o, b| send(o, Out::Visits(b)));
        self.scans.flush(&mut |o, b| send(o, Out::Scans(b)));
        !self.frontier.is_empty()
    }

    /// Visits of the targets of `arcs` (all in other partitions) from `me`, each target at
    /// most once per search.
    #[inline]
    fn send_visits(&mut self, arcs: &[Tag], me: Tag, send: &mut impl FnMut(usize, Out)) {
        let tags = self.view.tags;
        self.scanned_arcs += arcs.len() as u64;
        for &t in arcs {
            let (word, bit) = (t as usize / 64, 1u64 << (t % 64));
            if self.sent[word] & bit == 0 {
                self.sent[word] |= bit;
                let v = Visit { local: tags.local(t), parent: me };
                self.outbox.push(tags.part(t), v, &mut |o, b| send(o, Out::Visits(b)));
            }
        }
    }

    /// [`BfsPart::expand`] with the visits and scans sent to their owners as delegated
    /// requests (`Plain` batches), from the delegated context this runs in.
    pub(crate) fn expand_chunk(&mut self, level: u32, limit: usize) -> bool {
        let peers = Arc::clone(&self.peers);
        let more = self.expand(level, limit, &mut |owner, out| match out {
            Out::Visits(batch) => peers[owner].apply_then(
                (batch, level + 1),
                |t, (batch, level)| {
                    t.visit_batch(&batch, level);
                    t.publish();
                },
                |()| (),
            ),
            Out::Scans(batch) => peers[owner].apply_then(
                (batch, level + 1),
                |t, (batch, level)| {
                    t.scan_batch(&batch, level);
                    t.publish();
                },
                |()| (),
            ),
        });
        self.publish();
        more
    }

    /// Puts this partition's frontier (level `level`) into its rank's shared bitmap and
    /// sends it, as bits over its local indices (data, through the codec), to one
    /// partition of every other rank, which merges it into that rank's bitmap.
    pub(crate) fn share_frontier(&mut self, level: u32) {
        let i = level as usize % 3;
        let tags = self.view.tags;
        self.frontier_bits();
        if tags.shift() >= 6 {
            // This partition's tags are whole words that no other partition writes: they
            // are stored, all of them, without atomic read-modify-writes (and need no
            // clearing first).
            let base = tags.tag(self.part, 0) as usize / 64;
            let shared = &self.shared.bits[i][base..base + self.words.len()];
            for (r, &w) in shared.iter().zip(&self.words) {
                r.store(w, Ordering::Relaxed);
            }
        } else {
            self.merge_frontier(self.part, i, &self.words);
        }
        let np = self.view.parts.parts();
        let mine = self.view.rank_parts(self.part);
        if mine.len() == np {
            return; // one rank
        }
        let mut first = 0;
        while first < np {
            let rank = self.view.rank_parts(first);
            if rank != mine {
                self.peers[rank.start].apply_with_then(
                    (self.part, i, Raw(self.words.clone())),
                    |s, (part, i, bits): (usize, usize, Raw<u64>)| {
                        s.merge_frontier(part, i, &bits.0)
                    },
                    |()| (),
                );
            }
            first = rank.end;
        }
    }
}

impl Drop for BfsPart {
    fn drop(&mut self) {
        let b = Buffers {
            state: std::mem::take(&mut self.state),
            frontier: std::mem::take(&mut self.frontier),
            next: std::mem::take(&mut self.next),
            sent: std::mem::take(&mut self.sent),
            words: std::mem::take(&mut self.words),
            todo: std::mem::take(&mut self.todo),
            with_arcs: std::mem::take(&mut self.with_arcs),
        };
        registry::keep_buffers(self.graph, self.part, b);
    }
}

impl Part for BfsPart {
    type Value = u32;

    fn index(&self) -> usize {
        self.part
    }

    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        self.peers = peers;
    }

    fn write(&self, from: usize, values: &mut [u32], parents: &mut [u64]) {
        let state = &self.state[from..from + values.len()];
        for ((v, p), &s) in values.iter_mut().zip(parents.iter_mut()).zip(state) {
            *v = s as u32;
            *p = if s as u32 == UNREACHED_LEVEL {
                skein_generators::NO_PARENT
            } else {
                self.view.global((s >> 32) as Tag)
            };
        }
    }

    fn counters(&self) -> (u64, u64) {
        (self.requests(), self.scanned_arcs)
    }

    /// Clears arrays an earlier search left (nothing for fresh ones), and sets `todo` to
    /// the vertices with arcs.
    fn reset(&mut self) {
        if std::mem::take(&mut self.dirty) {
            fill_unreached(self.view.bare(self.part), &mut self.state);
            self.frontier.clear();
            self.next.iter_mut().for_each(Vec::clear);
            self.sent.fill(0);
            self.next_arcs = [0; 2];
            self.published = [(0, 0); 2];
            self.frontier_arcs = 0;
        }
        self.todo.clear();
        self.todo.extend_from_slice(&self.with_arcs);
        // Whatever an earlier search (of any partition) left in this slice.
        for bits in &self.shared.bits {
            for w in &bits[self.slice.clone()] {
                w.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// Direction-optimizing BFS parameters (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    /// Frontier vertices a driver expands between yields.
    pub(crate) chunk: usize,
    /// Bottom-up when frontier arcs > arcs not examined by top-down levels / alpha (0:
    /// never).
    pub(crate) alpha: u64,
    /// Back top-down when the frontier stops growing and has at most `vertices / beta`
    /// vertices.
    pub(crate) beta: u64,
}

/// One BFS from `root`, run by the main fiber of a runtime whose workers (of every rank)
/// each own one partition of `view` (registered on every rank as graph `graph`,
/// `crate::registry`): levels and parents (global ids) indexed by global id, written into
/// the vectors `reuse` when they fit (an earlier result's: `crate::parts::gather_into`), or,
/// with [`Collect::Slices`], empty vectors (each rank's slice is left on its rank).
pub(crate) fn search(
    graph: u64,
    view: Arc<GraphView>,
    root: u64,
    params: Params,
    how: Collect,
    reuse: (Vec<u32>, Vec<u64>),
) -> (Vec<u32>, Vec<u64>, KernelStats) {
    let Params { chunk, alpha, beta } = params;
    let np = skein::num_workers();
    assert_eq!(np, view.parts.parts(), "one partition per worker of the job");
    let parts: Vec<Trust<BfsPart>> = (0..np)
        .map(|g| {
            skein::trustee(g).entrust_new((graph, g as u64), |(id, g)| {
                BfsPart::new(id, registry::graph(id), g as usize)
            })
        })
        .collect();
    let search = registry::new_search();
    connect_as(search, &parts);
    // Every partition clears what the previous search left, and tells its arcs and its
    // worker's lanes: their sums are the search's baseline (nothing adds to the lanes now).
    let base = superstep(search, start_driver).into_iter().fold(Start::default(), |a, b| a + b);
    let start = Instant::now();
    let (rp, rl) = view.parts.locate(root);
    let root = parts[rp].apply((rl, view.tag(root)), |s, (rl, tag)| {
        s.visit(rl, 0, tag);
        s.advance(0);
        s.counts()
    });
    let levels = Levels {
        search,
        chunk: chunk as u64,
        alpha,
        beta,
        vertices: view.parts.num_vertices(),
        arcs: base.arcs,
        lanes: [base.lanes[0], base.lanes[1]],
        root,
    };
    // One driver per partition runs every level; each returns the number of levels.
    let drivers = superstep(levels, levels_driver);
    debug_assert!(drivers.iter().all(|&l| l == drivers[0]), "the drivers agree");
    let seconds = start.elapsed().as_secs_f64();
    let g = collect_into(graph, search, &parts, &view.parts, how, reuse);
    disconnect(search, &parts);
    let stats = KernelStats { seconds, rounds: drivers[0], messages: g.messages, arcs: g.arcs };
    (g.values, g.parents, stats)
}

/// What a partition tells [`search`] before it starts: its arcs, and its worker's lanes
/// (`skein::quiescent_lanes`); summed over the partitions.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
struct Start {
    arcs: u64,
    lanes: [u64; skein::QUIESCENT_LANES],
}

// SAFETY: repr(C) of u64s: no address, every bit pattern is a valid value.
unsafe impl skein::Plain for Start {}

impl std::ops::Add for Start {
    type Output = Start;
    fn add(self, o: Start) -> Start {
        Start {
            arcs: self.arcs + o.arcs,
            lanes: std::array::from_fn(|i| self.lanes[i].wrapping_add(o.lanes[i])),
        }
    }
}

/// Before a search, in a fiber on the trustee of its partition: [`Part::reset`], then what
/// [`Start`] holds.
fn start_driver(search: u64) -> Start {
    let me = crate::parts::me::<BfsPart>(search);
    let arcs = me.apply((), |s, ()| {
        s.reset();
        s.view.bare(s.part).num_arcs()
    });
    Start { arcs, lanes: skein::quiescent_lanes() }
}

/// The argument of a search's drivers ([`levels_driver`]).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Levels {
    search: u64,
    chunk: u64,
    alpha: u64,
    beta: u64,
    /// Vertices of the graph.
    vertices: u64,
    /// Arcs of every partition.
    arcs: u64,
    /// Lanes 0 and 1 summed over every worker before the search.
    lanes: [u64; 2],
    /// The root partition's counts after the root was reached.
    root: BfsCounts,
}

// SAFETY: repr(C) of u64s: no address, every bit pattern is a valid value.
unsafe impl skein::Plain for Levels {}

/// Every level of a search, in a driver fiber on the trustee of its partition (`spawn_on`),
/// one per partition. A top-down level expands the partition's frontier, yielding every
/// `chunk` vertices. A bottom-up level needs the whole frontier in its rank's shared bitmap:
/// the partition shares its own and waits for quiescence (every partition's share applied),
/// unless it shared it ahead, at the end of a bottom-up level; then its unvisited vertices
/// find their parents locally, the reached ones become its next frontier, and it shares
/// that one ahead (a bottom-up level is often followed by another; when it is not, the
/// bitmap is only cleared).
///
/// Either ends with `skein::wait_quiescent_sum`: every visit of the level has been applied
/// everywhere, and the totals of lanes 0 and 1 (the vertices every partition reached, and
/// their arcs: [`BfsPart::publish`]) less those at the level's start are the next
/// frontier's counts, the same on every driver. So every driver takes the same direction
/// at every level, and stops at the same one: the heuristic runs here, once per driver,
/// with no round trip to the main fiber between levels. Returns the number of levels.
///
/// The shared bitmaps (three, by level modulo 3): the one of level `l` is written by the
/// shares of level `l` (before the quiescence that ends level `l − 1` when shared ahead,
/// else before the one the level waits in first), read by the bottom-up step of level `l`
/// (before the quiescence that ends it), and cleared at the start of level `l + 1` (before
/// the quiescence that ends that level), each partition its slice; it is written again at
/// level `l + 3`, after that quiescence. So on each bitmap writes, reads and clears are
/// separated by a quiescence every partition waited in.
fn levels_driver(a: Levels) -> u64 {
    let me = crate::parts::me::<BfsPart>(a.search);
    // The direction heuristic of Beamer et al. as GAP's `bfs.cc` has it (module docs):
    // the frontier's arcs (1 after bottom-up levels, as GAP's) against the arcs not
    // examined by a top-down level yet; the frontier before the last level.
    // (At the first level the counts are the root partition's alone: its arcs stand for
    // the unexamined ones, fewer than the graph's, which matters only for a root with a
    // large share of them or a huge alpha.)
    let mut counts = a.root;
    let mut unexamined = a.arcs;
    let mut before = a.lanes;
    let mut scout = counts.frontier_arcs;
    let (mut level, mut bottom_up, mut awake) = (0u32, false, 0);
    // Whether the frontier of the previous level, and that of this one, were shared.
    let (mut shared_before, mut shared) = (false, false);
    loop {
        if shared_before {
            me.apply(level - 1, |s, l| s.clear_shared(l));
        }
        if bottom_up && counts.frontier < awake && counts.frontier <= a.vertices / a.beta.max(1) {
            (bottom_up, scout) = (false, 1);
        }
        if !bottom_up {
            bottom_up = a.alpha > 0 && scout > counts.unexamined / a.alpha;
        }
        awake = counts.frontier;
        let shares_next = bottom_up;
        if bottom_up {
            if !shared {
                me.apply(level, |s, level| s.share_frontier(level));
                skein::wait_quiescent();
                shared = true;
            }
            me.apply(level, |s, level| {
                s.bottom_up(level);
                s.publish();
                s.advance(level + 1);
                s.share_frontier(level + 1);
            });
        } else {
            until_done(&me, (level, a.chunk), |s, (l, c)| s.expand_chunk(l, c as usize));
            unexamined -= counts.frontier_arcs;
        }
        let totals = skein::wait_quiescent_sum();
        let next = [totals[0].wrapping_sub(before[0]), totals[1].wrapping_sub(before[1])];
        before = [totals[0], totals[1]];
        if !bottom_up {
            // The partition's own counts follow as before (`BfsPart::counts`).
            me.apply(level, |s, level| {
                s.unexamined -= s.frontier_arcs;
                s.advance(level + 1);
            });
        }
        counts = BfsCounts { frontier: next[0], frontier_arcs: next[1], unexamined };
        scout = counts.frontier_arcs;
        level += 1;
        (shared_before, shared) = (shared, shares_next);
        if counts.frontier == 0 {
            return u64::from(level);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_generators::kronecker::{self, KroneckerParams};
    use skein_generators::Csr;

    fn view(scale: u32, parts: usize) -> Arc<GraphView> {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
        Arc::new(GraphView::whole(graph, parts).unwrap())
    }

    #[test]
    fn bfs_levels_match_a_queue_bfs() {
        for parts in [1, 2, 4] {
            let sh = view(9, parts);
            let np = sh.parts.parts();
            let mut ps: Vec<BfsPart> =
                (0..np).map(|p| BfsPart::new(0, Arc::clone(&sh), p)).collect();
            let root = 0u64;
            let (rp, rl) = sh.parts.locate(root);
            ps[rp].visit(rl, 0, sh.tag(root));
            let mut level = 0;
            loop {
                let total: usize = ps.iter_mut().map(|p| p.advance(level)).sum();
                if total == 0 {
                    break;
                }
                let mut msgs = Vec::new();
                for p in ps.iter_mut() {
                    while p.expand(level, 7, &mut |o, out| msgs.push((o, out))) {}
                }
                for (o, out) in msgs {
                    match out {
                        Out::Visits(batch) => ps[o].visit_batch(&batch, level + 1),
                        Out::Scans(batch) => ps[o].scan_batch(&batch, level + 1),
                    }
                }
                level += 1;
            }
            let opts = skein_baselines::Options::with_threads(1);
            let want = skein_baselines::bfs(skein_baselines::Engine::Seq, sh.csr(), root, &opts)
                .unwrap()
                .level;
            let mut got = Vec::new();
            for p in &ps {
                got.extend(p.state.iter().map(|&s| s as u32));
            }
            assert_eq!(got, want, "parts={parts}");
        }
    }
}
