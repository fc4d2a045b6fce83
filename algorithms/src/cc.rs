//! Weakly connected components on the public building blocks ([`crate::parts`],
//! [`crate::outbox`]): a union-find within each partition, the partitions' local components
//! contracted once into a graph of components, then min-label propagation over that
//! contracted graph only, in supersteps. No arc is read twice, and most arcs not at all.
//!
//! 1. **Local** (one superstep, no messages): each partition joins the ends of its own arcs
//!    (those within the partition) in a union-find over its local indices whose roots are
//!    the smallest index of their set, so a local component's root is its smallest vertex.
//!    As Afforest does (Sutton, Ben-Nun and Barak, IPDPS 2018; GAP's `cc`): it first joins
//!    each vertex's first [`SAMPLE_ROUNDS`] own arcs, guesses the largest local component
//!    (the most frequent root of [`SAMPLES`] vertices drawn with a fixed seed), then joins
//!    the remaining own arcs of the vertices outside it only: an own arc leaving it is
//!    joined from its other end, so the arcs skipped lie inside it. A component is named
//!    across partitions by its root's tag (`Tags`); its id (first label) is its root's
//!    global id.
//! 2. **Contract** (three supersteps), Afforest's skip across partitions: a pair `(t, tag of
//!    u's root)` sent for an arc `u → t` to `t`'s owner (an [`Outbox`], 31 pairs to a
//!    request) is filed there as a *contracted edge* `(root of t, remote component)`.
//!    - *Probe*: each partition sends such pairs for a few arcs ([`PROBES`] per partition,
//!      from at most [`PROBE_VERTICES`] vertices) from its largest local component to each
//!      partition *below* it; a receiver whose own largest component is hit learns that the
//!      two largest components are joined (`joined`).
//!    - *Read*: a vertex outside its partition's largest component sends a pair for each of
//!      its remote arcs; a vertex in it only for its arcs to the partitions *above* whose
//!      largest component is not known joined to it. So every arc is read from at least one
//!      end, except those between two largest components already joined by a probe's edge:
//!      an arc leaving a largest component is read from its other end (the graph is
//!      symmetric), an arc between two of them from the lower partition unless skipped. A
//!      pair is not sent again while the same root keeps reaching `t` (a mark per remote
//!      tag).
//!    - *Reply*: each partition sorts and deduplicates the edges it filed and sends each back
//!      to its other end, which files it as it is. At quiescence each partition groups its
//!      contracted edges by root and lowers each root's label to its smallest neighbour's id
//!      (known from the neighbour's tag, so without a message).
//! 3. **Rounds**: every local component whose label dropped offers it to its contracted
//!    neighbours, `(neighbour's root, label)` through another [`Outbox`]; an offer lowers the
//!    receiver's label. A neighbour is offered only a label smaller than its id (a bound on
//!    all its labels). A round ends at quiescence, the kernel when no label dropped. A drop
//!    costs the component's contracted edges (a partition's giant component is one node),
//!    not its boundary's arcs.
//!
//! Each component ends labelled by its smallest vertex, for any workers and ranks (the result
//! is a fixed point, not an order). On one partition the kernel is step 1 only.
//!
//! Counters ([`CcCounters`], in the engine's `SearchStats::counters`): the pairs sent by the
//! contraction and its replies, the contracted edges (both ends counted) and the labels sent
//! in the rounds (the probes and replies count as pairs); the arcs read are the kernel's
//! `arcs` (the own arcs joined, the probes' arcs and the remote arcs read).
//!
//! Memory per partition: 4 bytes per tag of the whole graph (the marks, during the
//! contraction, with more than one partition), 13 bytes per own vertex (forest, labels, edge
//! index, flags), 8 per pair filed and per contracted edge.

use std::sync::Arc;
use std::time::Instant;

use skein::Trust;

use crate::adjacency::Tag;
use crate::graph::GraphView;
use crate::outbox::Outbox;
use crate::parts::{self, Collect, KernelStats, Part};

/// No tag (a mark never set), no root.
const NONE: u32 = u32::MAX;
/// Own arcs per vertex joined before the largest local component is guessed (Afforest;
/// GAP's `cc` uses 2).
const SAMPLE_ROUNDS: usize = 2;
/// Local vertices drawn to guess the largest local component (GAP's `cc` uses 1024).
const SAMPLES: usize = 1024;
/// Probes a partition sends to each partition below it from its largest component.
const PROBES: usize = 16;
/// Vertices of its largest component a partition looks at for probes, at most.
const PROBE_VERTICES: usize = 4096;

/// The work counters of one run, summed over every partition of every rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CcCounters {
    /// `(remote vertex, component)` pairs sent by the contraction.
    pub(crate) pairs: u64,
    /// Contracted edges after deduplication (each counted at both ends).
    pub(crate) edges: u64,
    /// Labels offered to contracted neighbours in the rounds.
    pub(crate) labels: u64,
}

impl CcCounters {
    /// The counters by name, as the engine reports them.
    pub(crate) fn named(self) -> Vec<(&'static str, u64)> {
        vec![
            ("pairs sent", self.pairs),
            ("contracted edges", self.edges),
            ("labels sent", self.labels),
        ]
    }
}

/// One partition's union-find, labels and contracted edges.
#[derive(Debug)]
pub(crate) struct CcPart {
    view: Arc<GraphView>,
    part: usize,
    /// The union-find over local indices (a root is the smallest index of its set).
    parent: Vec<u32>,
    /// The label of each local component, at its root.
    label: Vec<u64>,
    /// The root of the local component guessed largest ([`CcPart::guess_largest`]).
    largest: u32,
    /// The last remote tag marked with each root in the contraction (per remote tag: the
    /// last own root sent with it), to skip repeated pairs.
    mark: Vec<u32>,
    /// The last remote component filed for each root (receiver side), to skip repeats.
    last: Vec<u32>,
    /// Contracted edges as received `(own root, remote component)`, then sorted.
    pairs: Vec<(u32, Tag)>,
    /// Contracted edges sent back by their other ends, `root << 32 | remote component`.
    back: Vec<u64>,
    /// Per partition: whether the largest local component touches that partition's
    /// largest component (learnt from its probes).
    joined: Vec<bool>,
    /// The contracted edges `root << 32 | remote component`, sorted, so grouped by root:
    /// `edges[start[r]..start[r + 1]]`.
    start: Vec<u32>,
    edges: Vec<u64>,
    /// The roots that offer their label this round.
    work: Vec<u32>,
    /// Roots whose label dropped this round, and a flag per root.
    changed: Vec<u32>,
    queued: Vec<u8>,
    peers: Arc<Vec<Trust<CcPart>>>,
    contract: Outbox<(u32, Tag)>,
    offers: Outbox<(u32, u64)>,
    arcs: u64,
    counters: CcCounters,
}

impl CcPart {
    fn new(view: Arc<GraphView>, part: usize) -> CcPart {
        let np = view.parts.parts();
        let first = view.parts.range(part).start;
        let len = view.parts.len(part);
        let mark = if np > 1 { vec![NONE; view.tags.space(np)] } else { Vec::new() };
        CcPart {
            parent: (0..len).collect(),
            label: (first..first + u64::from(len)).collect(),
            largest: NONE,
            mark,
            last: Vec::new(),
            pairs: Vec::new(),
            back: Vec::new(),
            joined: vec![false; np],
            start: Vec::new(),
            edges: Vec::new(),
            work: Vec::new(),
            changed: Vec::new(),
            queued: Vec::new(),
            peers: Arc::new(Vec::new()),
            contract: Outbox::new(np),
            offers: Outbox::new(np),
            arcs: 0,
            counters: CcCounters::default(),
            view,
            part,
        }
    }

    /// The root of local vertex `x` (halving the path).
    #[inline]
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = self.parent[x as usize];
        }
        x
    }

    /// The root of `x` without changing the forest.
    fn root(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    /// Joins `a` and `b`: the larger root goes under the smaller.
    #[inline]
    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b) as usize] = a.min(b);
        }
    }

    /// Afforest's first step on local vertices `range`: joins each one's first
    /// [`SAMPLE_ROUNDS`] own arcs.
    fn sample(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in range {
            let own = arcs.split(u).0;
            let first = &own[..own.len().min(SAMPLE_ROUNDS)];
            self.arcs += first.len() as u64;
            for &t in first {
                self.union(u, tags.local(t));
            }
        }
    }

    /// After [`CcPart::sample`] of every local vertex: the most frequent root among
    /// [`SAMPLES`] local vertices drawn at random (a fixed seed per partition), the
    /// partition's largest component most likely.
    fn guess_largest(&mut self) {
        let len = self.parent.len() as u64;
        if len == 0 {
            return;
        }
        let mut rng = skein_generators::splitmix::SplitMix64::new(0x5eed, self.part as u64);
        let mut drawn: Vec<u32> = (0..SAMPLES).map(|_| self.find(rng.below(len) as u32)).collect();
        drawn.sort_unstable();
        let mut best = (0, NONE);
        for run in drawn.chunk_by(|a, b| a == b) {
            if run.len() > best.0 {
                best = (run.len(), run[0]);
            }
        }
        self.largest = best.1;
    }

    /// Joins the own arcs of local vertices `range` past their first [`SAMPLE_ROUNDS`]
    /// (joined by [`CcPart::sample`]), skipping the vertices in the component guessed
    /// largest: each own arc leaving it is joined from its other end (the own arcs are
    /// symmetric), so only the arcs inside it are skipped, whose ends are joined already.
    fn join(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in range {
            let own = arcs.split(u).0;
            if own.len() <= SAMPLE_ROUNDS || self.find(u) == self.largest {
                continue;
            }
            self.arcs += (own.len() - SAMPLE_ROUNDS) as u64;
            for &t in &own[SAMPLE_ROUNDS..] {
                self.union(u, tags.local(t));
            }
        }
    }

    /// After [`CcPart::join`] of every vertex of every partition: probes the partitions
    /// below this one from its largest component, so that each learns whether its own
    /// largest component touches this one's ([`file`] sets `joined`). Sends, from the
    /// first [`PROBE_VERTICES`] vertices of the largest component, the first arc to each
    /// partition below as a pair `(remote vertex, largest component)`, at most
    /// [`PROBES`] to each.
    fn probe(&mut self) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (arcs, tags, me) = (view.out_arcs(self.part), view.tags, self.part);
        if self.largest == NONE || me == 0 {
            return;
        }
        let c = tags.tag(me, self.largest);
        let mut sent = vec![0usize; me];
        let mut scanned = 0;
        for u in 0..self.parent.len() as u32 {
            if scanned == PROBE_VERTICES || sent.iter().all(|&n| n == PROBES) {
                break;
            }
            if arcs.split(u).1.is_empty() || self.find(u) != self.largest {
                continue;
            }
            scanned += 1;
            for (q, start, _) in arcs.segments(u, tags).take_while(|&(q, ..)| q < me) {
                if sent[q] < PROBES {
                    sent[q] += 1;
                    let t = arcs.range(start, start + 1)[0];
                    self.arcs += 1;
                    self.counters.pairs += 1;
                    self.contract.send(q, (tags.local(t), c), &peers, file);
                }
            }
        }
        self.contract.flush_to(&peers, file);
    }

    /// After the probes' quiescence: sends the pairs `(remote vertex, own component)` of
    /// the remote arcs of local vertices `range`, except those the other end reads or
    /// needs no more. A vertex outside the largest local component sends on all its remote
    /// arcs; a vertex in it only on its arcs to the partitions *above* whose largest
    /// component it is not known to touch (`joined`). So an arc is read from at least one
    /// end unless both ends lie in largest components known to be joined: an arc leaving a
    /// largest component is read from its other end (the graph is symmetric).
    fn contract(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (arcs, tags, me) = (view.out_arcs(self.part), view.tags, self.part);
        // Whether a vertex of the largest component sends on any arc at all.
        let largest_reads = self.joined[me + 1..].iter().any(|&j| !j);
        for u in range {
            if arcs.split(u).1.is_empty() {
                continue;
            }
            let r = self.find(u);
            if r == self.largest && !largest_reads {
                continue;
            }
            let c = tags.tag(me, r);
            for (q, start, end) in arcs.segments(u, tags) {
                if r == self.largest && (q < me || self.joined[q]) {
                    continue;
                }
                let to = arcs.range(start, end);
                self.arcs += to.len() as u64;
                for &t in to {
                    if self.mark[t as usize] != r {
                        self.mark[t as usize] = r;
                        self.counters.pairs += 1;
                        self.contract.send(q, (tags.local(t), c), &peers, file);
                    }
                }
            }
        }
        self.contract.flush_to(&peers, file);
    }

    /// After the contraction's quiescence: deduplicates the contracted edges filed here
    /// and sends each back to its other end, which files it as it is ([`file_back`]).
    fn reply(&mut self) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let tags = view.tags;
        let mut pairs = std::mem::take(&mut self.pairs);
        pairs.sort_unstable();
        pairs.dedup();
        for &(r, c) in &pairs {
            self.counters.pairs += 1;
            self.contract.send(
                tags.part(c),
                (tags.local(c), tags.tag(self.part, r)),
                &peers,
                file_back,
            );
        }
        self.contract.flush_to(&peers, file_back);
        self.mark = Vec::new();
        self.last = Vec::new();
        // The other ends' replies arrive in `self.back`; `group` merges.
        self.edges = pairs.iter().map(|&(r, c)| (u64::from(r) << 32) | u64::from(c)).collect();
    }

    /// After the replies' quiescence: groups the contracted edges by root, lowers each
    /// root's label to its smallest neighbour's id (the neighbours' first labels: no
    /// message needed) and makes the roots whose label dropped the first round's work.
    fn group(&mut self) {
        let view = Arc::clone(&self.view);
        let (tags, parts) = (view.tags, &view.parts);
        let mut all = std::mem::take(&mut self.edges);
        all.append(&mut self.back);
        all.sort_unstable();
        all.dedup();
        let len = self.parent.len();
        let mut start = vec![0u32; len + 1];
        all.iter().for_each(|&e| start[(e >> 32) as usize + 1] += 1);
        for i in 0..len {
            start[i + 1] += start[i];
        }
        self.queued = vec![0; len];
        for &e in &all {
            let (r, c) = ((e >> 32) as u32, e as u32);
            let id = parts.global(tags.part(c), tags.local(c));
            if id < self.label[r as usize] {
                self.label[r as usize] = id;
                if self.queued[r as usize] == 0 {
                    self.queued[r as usize] = 1;
                    self.changed.push(r);
                }
            }
        }
        self.edges = all;
        self.counters.edges = self.edges.len() as u64;
        self.start = start;
        self.advance();
    }

    /// Offers the labels of the work list's roots `range` to their contracted neighbours.
    fn propagate(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (tags, parts) = (view.tags, &view.parts);
        for i in range {
            let r = self.work[i as usize] as usize;
            let label = self.label[r];
            for &e in &self.edges[self.start[r] as usize..self.start[r + 1] as usize] {
                let (p, l) = (tags.part(e as u32), tags.local(e as u32));
                // The neighbour's label is at most its root's id: offer only smaller ones.
                if label < parts.global(p, l) {
                    self.counters.labels += 1;
                    self.offers.send(p, (l, label), &peers, receive);
                }
            }
        }
        self.offers.flush_to(&peers, receive);
    }

    /// Makes the roots whose label dropped the next round's work; returns how many.
    fn advance(&mut self) -> u64 {
        self.work.clear();
        for r in std::mem::take(&mut self.changed) {
            self.queued[r as usize] = 0;
            self.work.push(r);
        }
        self.work.len() as u64
    }
}

/// Runs on the receiving partition's trustee: a packet of contraction pairs `(local vertex,
/// remote component)`, filed by the vertex's root.
fn file(p: &mut CcPart, items: &[(u32, Tag)]) {
    if p.last.is_empty() {
        p.last = vec![NONE; p.parent.len()];
    }
    for &(l, c) in items {
        let r = p.find(l);
        if r == p.largest {
            let q = p.view.tags.part(c);
            p.joined[q] = true;
        }
        if p.last[r as usize] != c {
            p.last[r as usize] = c;
            p.pairs.push((r, c));
        }
    }
}

/// Runs on the receiving partition's trustee: a packet of contracted edges `(own root,
/// remote component)` sent back by their other ends.
fn file_back(p: &mut CcPart, items: &[(u32, Tag)]) {
    p.back.extend(items.iter().map(|&(r, c)| (u64::from(r) << 32) | u64::from(c)));
}

/// Runs on the receiving partition's trustee: a packet of label offers `(root, label)`.
fn receive(p: &mut CcPart, items: &[(u32, u64)]) {
    for &(r, label) in items {
        if label < p.label[r as usize] {
            p.label[r as usize] = label;
            if p.queued[r as usize] == 0 {
                p.queued[r as usize] = 1;
                p.changed.push(r);
            }
        }
    }
}

impl Part for CcPart {
    type Value = u64;

    fn index(&self) -> usize {
        self.part
    }

    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        self.peers = peers;
    }

    fn write(&self, from: usize, values: &mut [u64], _parents: &mut [u64]) {
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.label[self.root((from + i) as u32) as usize];
        }
    }

    fn counters(&self) -> (u64, u64) {
        (self.contract.requests + self.offers.requests, self.arcs)
    }
}

/// Connected components of graph `graph`, run by the main fiber, `chunk` vertices per step:
/// the labels by global id (empty with [`Collect::Slices`]) and the kernel's counters.
pub(crate) fn run(
    graph: u64,
    view: Arc<GraphView>,
    chunk: usize,
    how: Collect,
) -> (Vec<u64>, KernelStats, CcCounters) {
    let all = parts::entrust(graph, CcPart::new);
    let id = parts::connect(&all);
    let start = Instant::now();
    parts::superstep((id, chunk as u64), |(id, chunk)| {
        let me = parts::me::<CcPart>(id);
        let len = me.apply((), |s, ()| s.parent.len());
        parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.sample(r));
        me.apply((), |s, ()| s.guess_largest());
        parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.join(r));
    });
    if view.parts.parts() > 1 {
        parts::superstep(id, |id| {
            parts::me::<CcPart>(id).apply((), |s, ()| s.probe());
            skein::wait_quiescent();
        });
        parts::superstep((id, chunk as u64), |(id, chunk)| {
            let me = parts::me::<CcPart>(id);
            let len = me.apply((), |s, ()| s.parent.len());
            parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.contract(r));
            skein::wait_quiescent();
        });
        parts::superstep(id, |id| {
            let me = parts::me::<CcPart>(id);
            me.apply((), |s, ()| s.reply());
            skein::wait_quiescent();
            me.apply((), |s, ()| s.group());
        });
    }
    let mut rounds = 0;
    while view.parts.parts() > 1 {
        let active = parts::superstep((id, chunk as u64), |(id, chunk)| {
            let me = parts::me::<CcPart>(id);
            let len = me.apply((), |s, ()| s.work.len());
            parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.propagate(r));
            skein::wait_quiescent();
            me.apply((), |s, ()| s.advance())
        });
        rounds += 1;
        if active.iter().sum::<u64>() == 0 {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let counted = parts::superstep(id, |id| {
        parts::me::<CcPart>(id).apply((), |s, ()| {
            let c = s.counters;
            (c.pairs, c.edges, c.labels)
        })
    });
    let counters = counted.iter().fold(CcCounters::default(), |a, &(p, e, l)| CcCounters {
        pairs: a.pairs + p,
        edges: a.edges + e,
        labels: a.labels + l,
    });
    let g = parts::collect(graph, id, &all, &view.parts, how);
    parts::disconnect(id, &all);
    (g.values, KernelStats { seconds, rounds, messages: g.messages, arcs: g.arcs }, counters)
}
