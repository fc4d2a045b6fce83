//! Weakly connected components on the public building blocks ([`crate::parts`],
//! [`crate::outbox`], [`crate::registry::shared`]): a union-find within each partition, then,
//! as Afforest does (Sutton, Ben-Nun and Barak, IPDPS 2018; GAP's `cc`) but across
//! partitions, every local component that touches another partition's largest local
//! component *hooks* to the giant component by one arc read, and min-label propagation runs
//! only over the few local components left. Most arcs are never read.
//!
//! 1. **Local** (no messages on one rank): each partition joins the ends of its own arcs (those
//!    within the partition) in a union-find over its local indices whose roots are the smallest
//!    index of their set, so a local component's root is its smallest vertex. Afforest: it first
//!    joins each vertex's first [`SAMPLE_ROUNDS`] own arcs, guesses the largest local component
//!    (the most frequent root of [`SAMPLES`] vertices drawn with a fixed seed), then joins the
//!    remaining own arcs of the vertices outside it only (an own arc leaving it is joined from its
//!    other end, so the arcs skipped lie inside it). With more than one partition the sample pass
//!    lists the vertices whose sampled arcs are own and that have more arcs (`more`): only they can
//!    have own arcs left, so the second pass ([`CcPart::join_more`]) visits them alone, not every
//!    vertex. A third pass ([`CcPart::publish`]) then points every vertex at its root (two loads
//!    and no branch: no union follows) and *publishes* the largest component: one bit per vertex in
//!    it, by tag, in an array every partition of its rank reads in memory ([`Largest`],
//!    `registry::shared`), sent to one partition of every other rank (`apply_with`, [`SLICE`] words
//!    a request). The passes also note the hook step's *candidates*, the vertices outside the
//!    largest component with remote arcs, each with its first remote arc's target, read next to the
//!    arcs the pass reads anyway: the sample pass lists the vertices without own arcs (a local
//!    component of its own each, and most candidates) and notes those with fewer own arcs than it
//!    samples, the second pass the others with remote arcs; those noted are kept when the third
//!    pass finds them outside the largest component. The local step's passes read a few arcs of
//!    most vertices, so its time follows the vertices: `skein cc` balances its parts by vertices
//!    ([`crate::CC_VERTEX_ARCS`]).
//! 2. **Probe** (no messages on one rank): each partition reads the remote arcs of up to
//!    [`PROBE_VERTICES`] vertices of its largest component and notes which other partitions'
//!    largest components they reach: a row of bits of a link matrix (with each largest component's
//!    size) in the same shared array, sent to the other ranks likewise.
//! 3. **Hook**: every partition computes the same classes of linked largest
//!    components from the matrix; the class of the most vertices is the *giant*, `J`. The
//!    largest component of a partition in `J` is labelled [`GIANT`] (one outside `J` makes
//!    all its vertices with remote arcs candidates). Then each candidate outside a
//!    component labelled giant reads its remote arcs, the listed one first, until one
//!    reaches a vertex published in the largest component of a partition in `J`: its local
//!    component is then labelled giant too (Afforest's hook, by one arc), and its other
//!    vertices are skipped.
//!    A vertex that reaches none (all its remote neighbours outside those largest
//!    components) sends a pair `(remote vertex, own root)` on each remote arc to the arc's
//!    owner (an [`Outbox`]), which files it as a *contracted edge* `(remote root, the
//!    sender's root)`; the sender keeps `(own root, remote vertex)` itself. So every arc
//!    between two local components of which at least one is not labelled giant after this
//!    step is a contracted edge at both ends: a component not labelled giant reads all its
//!    remote arcs, and an arc it shares with one labelled giant was not (or, if it was,
//!    hooked it). Arcs between two components labelled giant are not needed: they are
//!    joined.
//! 4. **Rounds**: min-label propagation over the contracted edges only. Labels are ids
//!    shifted by one, [`GIANT`] (0) below them all; in the first round every component with
//!    a contracted edge offers its label to its neighbours, then those whose label dropped,
//!    `(remote vertex, label)` through another [`Outbox`]; an offer lowers the label of the
//!    vertex's root. A neighbour is offered only a label smaller than its vertex's id plus
//!    one (a bound on all its root's labels). A round ends at quiescence, the kernel when no
//!    label dropped. Each partition keeps the smallest id of its roots labelled giant; the
//!    smallest over all partitions is the giant's label.
//!
//! One driver per partition runs the four steps ([`components_driver`]), each step ended by
//! a quiescence every driver waits in (with one partition the kernel is the local step alone,
//! and waits in none);
//! the rounds learn whether another must follow, and the giant's label, from the lanes of
//! that quiescence. `main` spawns the drivers once and joins them once per run.
//!
//! Each component ends labelled by its smallest vertex, for any workers and ranks (the result
//! is a fixed point, not an order): a component labelled giant is joined to the giant class
//! (through a largest component of `J`, and the classes are joined by the probes' arcs);
//! every other component reaches, by contracted edges, every local component of its true
//! component, or one labelled giant if it lies in the giant component. On one partition the
//! kernel is step 1 only.
//!
//! Counters ([`CcCounters`], in the engine's `SearchStats::counters`): `hooked`, the local
//! components hooked to the giant by one arc; `unhooked`, the candidates that reached no
//! largest component of `J` (and so sent pairs); the pairs sent; the contracted edges (both
//! ends counted); the labels sent in the rounds. The arcs read are the kernel's `arcs`: the
//! own arcs joined, the candidates' remote arcs read and the probes' arcs (a remote arc is
//! read at most twice, by a probe and by the hook step, and that only from a largest
//! component outside `J`). At SCALE 20 on 2 workers (`docs/performance.md`; parts
//! balanced by vertices, as `skein cc` runs): 99,562 components hooked, 469 vertices not,
//! 696 contracted edges, 2 label rounds.
//!
//! Memory: per partition 4 bytes per own vertex (the forest), three bits per own vertex (the
//! giant flags, the lowered labels, the published bits), 8 bytes per candidate, per noted
//! vertex and per contracted edge and 4 per vertex the second pass visits, kept with the graph between runs (`registry::keep_buffers`: a repeated
//! run faults no fresh pages); per rank one bit per tag of the whole graph and the link
//! matrix (a bit per pair of partitions), kept with the graph. The labels are gathered
//! alone (no parents vector), into the caller's vector when it fits
//! ([`crate::Engine::components_into`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use skein::codec::Raw;
use skein::Trust;

use crate::adjacency::Tag;
use crate::graph::GraphView;
use crate::outbox::Outbox;
use crate::parts::{self, Collect, KernelStats, Part};
use crate::registry;

/// No root.
const NONE: u32 = u32::MAX;
/// The label of the giant component: below every vertex's (id + 1).
const GIANT: u64 = 0;
/// Own arcs per vertex joined before the largest local component is guessed (Afforest;
/// GAP's `cc` uses 2).
const SAMPLE_ROUNDS: usize = 2;
/// Local vertices drawn to guess the largest local component (GAP's `cc` uses 1024).
const SAMPLES: usize = 1024;
/// Vertices of its largest component with remote arcs a partition probes, at most.
const PROBE_VERTICES: usize = 4096;
/// Vertices per step of the passes over a partition's vertices: the engine's chunk times
/// this. The passes send nothing (or a few pairs): a step yields only so that the worker
/// serves the requests of others, and every yield costs (64 vertices a step made the
/// passes a fifth slower at SCALE 20).
const PASS: usize = 64;
/// Words of the largest-component bitmap per request to another rank.
const SLICE: usize = 1 << 16;

/// What the partitions of one rank share (`registry::shared`, kept with the graph and
/// rewritten by every run): the largest local components of every partition of every rank.
#[derive(Debug)]
struct Largest {
    /// Bit `tag`: the vertex lies in its partition's largest local component.
    bits: Vec<AtomicU64>,
    /// `words` words per partition: bit `q` of row `p` when a probe from `p`'s largest
    /// component reached `q`'s.
    links: Vec<AtomicU64>,
    words: usize,
    /// Each partition's largest component's size.
    sizes: Vec<AtomicU64>,
}

impl Largest {
    fn new(tags: usize, parts: usize) -> Largest {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        let words = parts.div_ceil(64);
        Largest {
            bits: zeros(tags.div_ceil(64)),
            links: zeros(parts * words),
            words,
            sizes: zeros(parts),
        }
    }

    /// Whether vertex `t` lies in its partition's largest component.
    #[inline]
    fn has(&self, t: Tag) -> bool {
        self.bits[t as usize / 64].load(Ordering::Relaxed) >> (t % 64) & 1 == 1
    }

    /// Writes bits `at..at + len` (`len <= 64`, `at` possibly not a word's start) from
    /// `bits`, leaving the others as they are.
    fn write(&self, at: usize, len: usize, bits: u64) {
        if at % 64 == 0 && len == 64 {
            self.bits[at / 64].store(bits, Ordering::Relaxed);
            return;
        }
        // Partitions of fewer than 64 tags share words: one bit at a time, atomically.
        for i in 0..len {
            let (w, b) = (&self.bits[(at + i) / 64], 1u64 << ((at + i) % 64));
            if bits >> i & 1 == 1 {
                w.fetch_or(b, Ordering::Relaxed);
            } else {
                w.fetch_and(!b, Ordering::Relaxed);
            }
        }
    }

    /// The partitions whose largest components form the class of the most vertices
    /// (ties: the class of the smallest partition), joined by the links of every row.
    fn giant(&self, parts: usize) -> Vec<bool> {
        let mut up: Vec<usize> = (0..parts).collect();
        fn find(up: &mut [usize], mut x: usize) -> usize {
            while up[x] != x {
                up[x] = up[up[x]];
                x = up[x];
            }
            x
        }
        for p in 0..parts {
            for q in 0..parts {
                let w = self.links[p * self.words + q / 64].load(Ordering::Relaxed);
                if w >> (q % 64) & 1 == 1 {
                    let (a, b) = (find(&mut up, p), find(&mut up, q));
                    up[a.max(b)] = a.min(b);
                }
            }
        }
        let mut size = vec![0u64; parts];
        for p in 0..parts {
            let r = find(&mut up, p);
            size[r] += self.sizes[p].load(Ordering::Relaxed);
        }
        let best = (0..parts).max_by_key(|&r| (size[r], std::cmp::Reverse(r))).unwrap_or(0);
        (0..parts).map(|p| find(&mut up, p) == best).collect()
    }
}

/// The work counters of one run, summed over every partition of every rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CcCounters {
    /// Local components labelled giant by one remote arc into a largest component.
    pub(crate) hooked: u64,
    /// Vertices outside the giant whose remote arcs reach no largest component of it.
    pub(crate) unhooked: u64,
    /// `(remote vertex, own root)` pairs sent by those vertices.
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
            ("hooked", self.hooked),
            ("unhooked", self.unhooked),
            ("pairs sent", self.pairs),
            ("contracted edges", self.edges),
            ("labels sent", self.labels),
        ]
    }

    fn add(self, o: CcCounters) -> CcCounters {
        CcCounters {
            hooked: self.hooked + o.hooked,
            unhooked: self.unhooked + o.unhooked,
            pairs: self.pairs + o.pairs,
            edges: self.edges + o.edges,
            labels: self.labels + o.labels,
        }
    }
}

/// A partition's arrays of one run, kept for the next run of the same graph on the same
/// worker (`registry::keep_buffers`, when the partition is dropped): a repeated run then
/// faults no fresh pages for them.
#[derive(Debug, Default)]
struct Buffers {
    parent: Vec<u32>,
    giant: Vec<u64>,
    low: Vec<u64>,
    mine: Vec<u64>,
    candidates: Vec<(u32, Tag)>,
    more: Vec<u32>,
    maybe: Vec<(u32, Tag)>,
    edges: Vec<u64>,
}

/// One partition's union-find, labels and contracted edges.
#[derive(Debug)]
pub(crate) struct CcPart {
    /// The graph's id in the registry (where [`Buffers`] are kept).
    graph: u64,
    view: Arc<GraphView>,
    part: usize,
    /// The partition's first global id.
    first: u64,
    /// The union-find over local indices (a root is the smallest index of its set; with
    /// more than one partition every vertex points at its root after the local step).
    parent: Vec<u32>,
    /// The local component guessed largest ([`CcPart::guess_largest`]): a vertex of it,
    /// its root after the local step; [`NONE`] in an empty partition.
    largest: u32,
    /// The rank's shared bitmap and link matrix (more than one partition only).
    shared: Option<Arc<Largest>>,
    /// Per partition: whether its largest component belongs to the giant class.
    joined: Vec<bool>,
    /// A bit per local root: labelled [`GIANT`].
    giant: Vec<u64>,
    /// A bit per local vertex: in the largest component (what [`CcPart::join`] published,
    /// for the other ranks).
    mine: Vec<u64>,
    /// The vertices outside the largest component with remote arcs, each with its first
    /// remote arc's target ([`CcPart::join`]; read there, next to the own arcs, it is
    /// mostly all the hook step reads of the vertex).
    candidates: Vec<(u32, Tag)>,
    /// More than one partition: the vertices whose first [`SAMPLE_ROUNDS`] arcs are own and
    /// that have more arcs ([`CcPart::sample`]), for [`CcPart::join_more`].
    more: Vec<u32>,
    /// More than one partition: vertices with own and remote arcs, each with its first
    /// remote arc's target; those outside the largest component become candidates
    /// ([`CcPart::list_candidates`]).
    maybe: Vec<(u32, Tag)>,
    /// Labels of the roots neither giant nor labelled by their own id + 1.
    lower: HashMap<u32, u64>,
    /// A bit per local root: in `lower` (so that the labels of the others, most of them,
    /// are read without hashing).
    low: Vec<u64>,
    /// The smallest global id of a root labelled giant here (`u64::MAX`: none).
    gmin: u64,
    /// The giant's label: the smallest `gmin` of every partition (set after the rounds).
    giant_label: u64,
    /// Contracted edges `root << 32 | remote vertex's tag`, sorted after the hook step.
    edges: Vec<u64>,
    /// The roots that offer their label this round.
    work: Vec<u32>,
    /// Roots whose label dropped this round (repeats removed by [`CcPart::advance`]).
    changed: Vec<u32>,
    peers: Arc<Vec<Trust<CcPart>>>,
    contract: Outbox<(u32, Tag)>,
    offers: Outbox<(u32, u64)>,
    /// Requests sent outside the outboxes (the bitmap and links to other ranks).
    requests: u64,
    arcs: u64,
    counters: CcCounters,
}

impl CcPart {
    /// Partition `part`'s state for a run on graph `graph` (its id in the registry), in
    /// the arrays the previous run of this graph on this worker left
    /// (`registry::take_buffers`) or in fresh ones, cleared by [`CcPart::prepare`].
    fn new(graph: u64, view: Arc<GraphView>, part: usize) -> CcPart {
        let np = view.parts.parts();
        let first = view.parts.range(part).start;
        let shared = (np > 1).then(|| {
            let space = view.tags.space(np);
            registry::shared(graph, view.rank_parts(part).start, || Largest::new(space, np))
        });
        // Cleared by `prepare`, in the local step: every worker at once.
        let b = registry::take_buffers::<Buffers>(graph, part).unwrap_or_default();
        CcPart {
            graph,
            first,
            parent: b.parent,
            largest: NONE,
            shared,
            joined: vec![false; np],
            giant: b.giant,
            low: b.low,
            candidates: b.candidates,
            more: b.more,
            maybe: b.maybe,
            mine: b.mine,
            lower: HashMap::new(),
            gmin: u64::MAX,
            giant_label: u64::MAX,
            edges: b.edges,
            work: Vec::new(),
            changed: Vec::new(),
            peers: Arc::new(Vec::new()),
            contract: Outbox::new(np),
            offers: Outbox::new(np),
            requests: 0,
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
    #[inline]
    fn root(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    /// Joins `a` and `b`: the larger root goes under the smaller (and `largest` follows
    /// its component's root).
    #[inline]
    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b) as usize] = a.min(b);
            if a.max(b) == self.largest {
                self.largest = a.min(b);
            }
        }
    }

    #[inline]
    fn is_giant(&self, r: u32) -> bool {
        self.giant[r as usize / 64] >> (r % 64) & 1 == 1
    }

    /// The label of root `r`.
    #[inline]
    fn label(&self, r: u32) -> u64 {
        if self.is_giant(r) {
            GIANT
        } else if self.low[r as usize / 64] >> (r % 64) & 1 == 0 {
            self.first + u64::from(r) + 1
        } else {
            self.lower.get(&r).copied().unwrap_or(self.first + u64::from(r) + 1)
        }
    }

    /// Lowers root `r`'s label to `label` when that is smaller; true when it dropped.
    fn lower_to(&mut self, r: u32, label: u64) -> bool {
        if label >= self.label(r) {
            return false;
        }
        if label == GIANT {
            self.giant[r as usize / 64] |= 1 << (r % 64);
            self.gmin = self.gmin.min(self.first + u64::from(r));
            // Hash only a root in `lower`: the hook step labels some 50 thousand roots
            // giant per partition at SCALE 20, nearly none of them lowered before.
            if self.low[r as usize / 64] >> (r % 64) & 1 == 1 {
                self.lower.remove(&r);
                self.low[r as usize / 64] &= !(1 << (r % 64));
            }
        } else {
            self.lower.insert(r, label);
            self.low[r as usize / 64] |= 1 << (r % 64);
        }
        true
    }

    /// Afforest's first step on local vertices `range`: joins each one's first
    /// [`SAMPLE_ROUNDS`] own arcs.
    ///
    /// With more than one partition (`SEVERAL`) it also lists the vertices without own arcs
    /// but with remote ones as candidates of the hook step, with their first remote arc's
    /// target (read here in the order of the arcs, so streamed from memory): such a vertex
    /// is a local component of its own (no own arc reaches it either: the own arcs are
    /// symmetric), and most of the hook step's candidates are. It notes the vertices with
    /// fewer own arcs than it joins and a remote one ([`CcPart::maybe`]), and lists those
    /// whose joined arcs are own and that have more ([`CcPart::more`]). (A constant: on one
    /// partition the pass is the plain loop; with the lists' pushes compiled in, unused, it
    /// took 11 to 16 % more perf samples of one worker at SCALE 20.)
    fn sample<const SEVERAL: bool>(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in range {
            // The own arcs are a prefix of the row: the sample needs only its first few, and
            // a row that starts with a remote arc has no own arc (no search for the split).
            let all = arcs.arcs(u);
            let k = all.iter().take(SAMPLE_ROUNDS).take_while(|a| arcs.is_own(a)).count();
            if SEVERAL && all.len() > k {
                if k == 0 {
                    self.arcs += 1;
                    self.candidates.push((u, all[0]));
                    continue;
                } else if k < SAMPLE_ROUNDS {
                    // Its only own arcs are the `k` joined here, and `all[k]` is remote.
                    self.arcs += 1;
                    self.maybe.push((u, all[k]));
                } else {
                    self.more.push(u);
                }
            }
            let first = &all[..k];
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

    /// One partition: joins the own arcs of local vertices `range` past their first
    /// [`SAMPLE_ROUNDS`] (joined by [`CcPart::sample`]), skipping the vertices in the
    /// component guessed largest: each own arc leaving it is joined from its other end (the
    /// own arcs are symmetric), so only the arcs inside it are skipped, whose ends are
    /// joined already.
    fn join(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in range {
            // One partition: every arc is its own.
            let own = arcs.arcs(u);
            if own.len() > SAMPLE_ROUNDS && self.find(u) != self.largest {
                self.arcs += (own.len() - SAMPLE_ROUNDS) as u64;
                own[SAMPLE_ROUNDS..].iter().for_each(|&t| self.union(u, tags.local(t)));
            }
        }
    }

    /// More than one partition: [`CcPart::join`] of the vertices `range` of
    /// [`CcPart::more`] (those whose first [`SAMPLE_ROUNDS`] arcs are own and that have
    /// more: no other vertex has own arcs left to join), the own arcs a prefix counted by a
    /// scan (most of these vertices have few). A vertex outside the largest component with
    /// remote arcs is noted with its first remote arc's target ([`CcPart::maybe`]).
    fn join_more(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for i in range {
            let u = self.more[i as usize];
            if self.find(u) == self.largest {
                continue;
            }
            let all = arcs.arcs(u);
            let rest = &all[SAMPLE_ROUNDS..];
            let own = rest.iter().take_while(|a| arcs.is_own(a)).count();
            self.arcs += own as u64;
            rest[..own].iter().for_each(|&t| self.union(u, tags.local(t)));
            if let Some(&t) = rest.get(own) {
                self.arcs += 1;
                self.maybe.push((u, t));
            }
        }
    }

    /// More than one partition, after [`CcPart::join_more`] (no union follows): points
    /// local vertices `range` (starting at a multiple of 64) at their roots and publishes
    /// those in the largest component (a bit each, [`Largest`] and [`CcPart::mine`]). A
    /// parent is never above its child (a root is the smallest index of its set) and the
    /// vertices are visited in ascending order, so a vertex's parent points at its root
    /// already: two loads, no branch.
    fn publish(&mut self, range: std::ops::Range<u32>) {
        let Some(shared) = self.shared.clone() else { return };
        let base = self.view.tags.tag(self.part, 0) as usize;
        let (mut bits, mut size) = (0u64, 0);
        let largest = self.largest;
        for u in range.clone() {
            let r = self.parent[self.parent[u as usize] as usize];
            self.parent[u as usize] = r;
            bits |= u64::from(r == largest) << (u % 64);
            if u % 64 == 63 || u + 1 == range.end {
                let from = u - u % 64;
                shared.write(base + from as usize, (u - from + 1) as usize, bits);
                self.mine[from as usize / 64] = bits;
                size += u64::from(bits.count_ones());
                bits = 0;
            }
        }
        shared.sizes[self.part].fetch_add(size, Ordering::Relaxed);
    }

    /// After [`CcPart::publish`]: the vertices noted by [`CcPart::sample`] and
    /// [`CcPart::join_more`] outside the largest component become the hook step's
    /// candidates (after those without own arcs, which [`CcPart::sample`] listed).
    fn list_candidates(&mut self) {
        let (parent, largest) = (&self.parent, self.largest);
        let outside = self.maybe.iter().filter(|&&(u, _)| parent[u as usize] != largest);
        self.candidates.extend(outside);
    }

    /// Before [`CcPart::sample`], in the local step (so on every worker at once, not
    /// one partition after the other as [`CcPart::new`] runs): the arrays, kept from the
    /// previous run or new, cleared (every vertex its own root) and this partition's count
    /// of published vertices zeroed. True with more than one partition (then the local
    /// step publishes).
    fn prepare(&mut self) -> bool {
        if let Some(s) = &self.shared {
            s.sizes[self.part].store(0, Ordering::Relaxed);
        }
        let len = self.view.parts.len(self.part);
        let words = (len as usize).div_ceil(64);
        self.parent.clear();
        self.parent.extend(0..len);
        for bits in [&mut self.giant, &mut self.low] {
            bits.clear();
            bits.resize(words, 0);
        }
        self.mine.clear();
        self.mine.resize(if self.shared.is_some() { words } else { 0 }, 0);
        self.candidates.clear();
        self.more.clear();
        self.maybe.clear();
        self.edges.clear();
        self.shared.is_some()
    }

    /// After [`CcPart::join`]: sends this partition's bits ([`CcPart::mine`]) and its
    /// largest component's size to one partition of every other rank, which writes them
    /// into its rank's array.
    fn share_bits(&mut self) {
        let Some(shared) = self.shared.clone() else { return };
        let size = shared.sizes[self.part].load(Ordering::Relaxed);
        let (len, p) = (self.parent.len() as u64, self.part as u64);
        for other in self.other_ranks() {
            for (k, words) in self.mine.chunks(SLICE).enumerate() {
                self.peers[other].apply_with_then(
                    (p, size, len, (k * SLICE) as u64, Raw(words.to_vec())),
                    |s: &mut CcPart, (p, size, len, at, words): (u64, u64, u64, u64, Raw<u64>)| {
                        let shared = s.shared.as_ref().expect("more than one partition");
                        let base = s.view.tags.tag(p as usize, 0) as usize;
                        for (i, &w) in words.0.iter().enumerate() {
                            let from = (at as usize + i) * 64;
                            shared.write(base + from, (len as usize - from).min(64), w);
                        }
                        shared.sizes[p as usize].store(size, Ordering::Relaxed);
                    },
                    |()| (),
                );
                self.requests += 1;
            }
        }
    }

    /// The first partition of every rank but this one's.
    fn other_ranks(&self) -> Vec<usize> {
        let (mine, np) = (self.view.rank_parts(self.part), self.view.parts.parts());
        (0..np).step_by(mine.len()).filter(|&p| p != mine.start).collect()
    }

    /// After every partition has published: reads the remote arcs of up to
    /// [`PROBE_VERTICES`] vertices of the largest component and notes the partitions whose
    /// largest component they reach, in this partition's row of the link matrix (sent to
    /// the other ranks).
    fn probe(&mut self) {
        let Some(shared) = self.shared.clone() else { return };
        let view = Arc::clone(&self.view);
        let (arcs, tags, np) = (view.out_arcs(self.part), view.tags, view.parts.parts());
        let mut row = vec![0u64; shared.words];
        let mut missing = np - 1;
        let mut scanned = 0;
        if self.largest != NONE {
            for u in 0..self.parent.len() as u32 {
                if missing == 0 || scanned == PROBE_VERTICES {
                    break;
                }
                if self.mine[u as usize / 64] >> (u % 64) & 1 == 0 || arcs.split(u).1.is_empty() {
                    continue;
                }
                scanned += 1;
                for (q, start, end) in arcs.segments(u, tags) {
                    if row[q / 64] >> (q % 64) & 1 == 1 {
                        continue;
                    }
                    for &t in arcs.range(start, end) {
                        self.arcs += 1;
                        if shared.has(t) {
                            row[q / 64] |= 1 << (q % 64);
                            missing -= 1;
                            break;
                        }
                    }
                }
            }
        }
        let at = self.part * shared.words;
        for (w, &v) in shared.links[at..at + shared.words].iter().zip(&row) {
            w.store(v, Ordering::Relaxed);
        }
        for other in self.other_ranks() {
            self.peers[other].apply_with_then(
                (at as u64, Raw(row.clone())),
                |s: &mut CcPart, (at, row): (u64, Raw<u64>)| {
                    let shared = s.shared.as_ref().expect("more than one partition");
                    for (w, v) in shared.links[at as usize..].iter().zip(row.0) {
                        w.store(v, Ordering::Relaxed);
                    }
                },
                |()| (),
            );
            self.requests += 1;
        }
    }

    /// After every partition's probe: the giant class, and this partition's largest
    /// component labelled giant when it belongs to it; when it does not, its vertices are
    /// candidates of the hook step too (all vertices with remote arcs).
    fn classes(&mut self) {
        let Some(shared) = self.shared.clone() else { return };
        self.joined = shared.giant(self.view.parts.parts());
        if self.largest != NONE && self.joined[self.part] {
            self.lower_to(self.largest, GIANT);
        } else {
            let arcs = self.view.out_arcs(self.part);
            let before = self.candidates.len() as u64;
            self.candidates.clear();
            let len = self.parent.len() as u32;
            let first = |u: u32| arcs.split(u).1.first().map(|&t| (u, t));
            self.candidates.extend((0..len).filter_map(first));
            // The first arcs of the largest component's vertices, read here.
            self.arcs += self.candidates.len() as u64 - before;
        }
    }

    /// The hook step on candidates `range` ([`CcPart::join`]): each vertex outside a
    /// component labelled giant reads its remote arcs until one reaches the largest component of a partition
    /// of the giant class (its component is then labelled giant); one that reaches none
    /// sends a pair on each remote arc and keeps the contracted edges on its side.
    fn hook(&mut self, range: std::ops::Range<u32>) {
        let Some(shared) = self.shared.clone() else { return };
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (arcs, tags, me) = (view.out_arcs(self.part), view.tags, self.part);
        for i in range {
            let (u, first) = self.candidates[i as usize];
            let r = self.find(u);
            if self.is_giant(r) {
                continue;
            }
            let joined = &self.joined;
            let hits = |&t: &Tag| joined[tags.part(t)] && shared.has(t);
            // The listed arc first (read and counted by `sample` or `join`), then the
            // others: `read` arcs more, and whether one hit.
            let (hit, remote) = if hits(&first) {
                (true, &[][..])
            } else {
                let remote = arcs.split(u).1;
                match remote[1..].iter().position(hits) {
                    Some(i) => (true, &remote[..i + 2]),
                    None => (false, remote),
                }
            };
            self.arcs += remote.len().saturating_sub(1) as u64;
            if hit {
                self.counters.hooked += 1;
                self.lower_to(r, GIANT);
                continue;
            }
            self.counters.unhooked += 1;
            let c = tags.tag(me, r);
            for &t in remote {
                self.counters.pairs += 1;
                self.edges.push(u64::from(r) << 32 | u64::from(t));
                self.contract.send(tags.part(t), (tags.local(t), c), &peers, file);
            }
        }
        self.contract.flush_to(&peers, file);
    }

    /// After the hook step's quiescence: sorts and deduplicates the contracted edges; the
    /// first round's work is every root with one (pushed to [`CcPart::changed`], as a
    /// dropped label is). Returns how many roots have one.
    fn group(&mut self) -> u64 {
        self.edges.sort_unstable();
        self.edges.dedup();
        self.counters.edges = self.edges.len() as u64;
        // Offers of the first round may have come already (`components_driver`): they stay,
        // and the roots of the (sorted) edges join them, once each.
        let before = self.changed.len();
        let roots = self.edges.chunk_by(|a, b| a >> 32 == b >> 32).map(|g| (g[0] >> 32) as u32);
        self.changed.extend(roots);
        (self.changed.len() - before) as u64
    }

    /// Offers the labels of the work list's roots `range` to their contracted neighbours.
    fn propagate(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let tags = view.tags;
        for i in range {
            let r = self.work[i as usize];
            let label = self.label(r);
            let from = self.edges.partition_point(|&e| (e >> 32) < u64::from(r));
            for &e in self.edges[from..].iter().take_while(|&&e| (e >> 32) as u32 == r) {
                let t = e as u32;
                // The neighbour's label is at most its vertex's id + 1: offer only smaller.
                if label <= view.global(t) {
                    self.counters.labels += 1;
                    self.offers.send(tags.part(t), (tags.local(t), label), &peers, receive);
                }
            }
        }
        self.offers.flush_to(&peers, receive);
    }

    /// Makes the roots pushed to [`CcPart::changed`] since the last call (the first time:
    /// those of [`CcPart::group`] too) the next round's work; returns how many.
    fn advance(&mut self) -> usize {
        self.work.clear();
        self.work.append(&mut self.changed);
        self.work.sort_unstable();
        self.work.dedup();
        self.work.len()
    }
}

impl Drop for CcPart {
    fn drop(&mut self) {
        let b = Buffers {
            parent: std::mem::take(&mut self.parent),
            giant: std::mem::take(&mut self.giant),
            low: std::mem::take(&mut self.low),
            mine: std::mem::take(&mut self.mine),
            candidates: std::mem::take(&mut self.candidates),
            more: std::mem::take(&mut self.more),
            maybe: std::mem::take(&mut self.maybe),
            edges: std::mem::take(&mut self.edges),
        };
        registry::keep_buffers(self.graph, self.part, b);
    }
}

/// Runs on the receiving partition's trustee: a packet of contraction pairs `(local vertex,
/// the sender's root)`, filed as contracted edges of the vertex's root.
fn file(p: &mut CcPart, items: &[(u32, Tag)]) {
    for &(l, c) in items {
        let r = p.find(l);
        p.edges.push(u64::from(r) << 32 | u64::from(c));
    }
}

/// Runs on the receiving partition's trustee: a packet of label offers `(local vertex,
/// label)`, for the vertex's root.
///
/// Counts the roots whose label dropped in lane 0 and lowers minimum lane [`GMIN_LANE`] to
/// the partition's smallest id labelled giant ([`components_driver`]).
fn receive(p: &mut CcPart, items: &[(u32, u64)]) {
    let before = p.changed.len();
    for &(l, label) in items {
        let r = p.find(l);
        if p.lower_to(r, label) {
            p.changed.push(r);
        }
    }
    let dropped = (p.changed.len() - before) as u64;
    if dropped > 0 {
        skein::quiescent_add([dropped, 0, 0, 0]);
        skein::quiescent_min(GMIN_LANE, p.gmin);
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
        if self.shared.is_none() {
            // One partition: every label is its root's id.
            for (i, v) in values.iter_mut().enumerate() {
                *v = self.first + u64::from(self.root((from + i) as u32));
            }
            return;
        }
        // Every vertex points at its root since `publish` (no union follows it, and the
        // `find`s of the later steps leave such a forest as it is): one load.
        for (v, &r) in values.iter_mut().zip(&self.parent[from..]) {
            let (w, b) = (r as usize / 64, r % 64);
            *v = if self.low[w] >> b & 1 == 1 {
                // Lowered: an id + 1 (a label in `lower` is never GIANT).
                self.label(r) - 1
            } else {
                // The giant's label or its own root's id, without a branch: roots labelled
                // giant and not lie mixed (isolated vertices among the giant's).
                let own = self.first + u64::from(r);
                let giant = (self.giant[w] >> b & 1).wrapping_neg();
                own ^ ((own ^ self.giant_label) & giant)
            };
        }
    }

    fn counters(&self) -> (u64, u64) {
        (self.contract.requests + self.offers.requests + self.requests, self.arcs)
    }
}

/// Connected components of graph `graph`, run by the main fiber, `chunk` vertices per step
/// of the rounds (the passes take [`PASS`] times more): the labels by global id (empty with
/// [`Collect::Slices`]; written into `reuse` when it has one entry per vertex, e.g. the
/// previous run's labels, so that a repeated run neither zeroes nor faults fresh pages)
/// and the kernel's counters.
///
/// One driver per partition runs every step ([`components_driver`]); `main` spawns them
/// once and joins them once.
pub(crate) fn run(
    graph: u64,
    view: Arc<GraphView>,
    chunk: usize,
    how: Collect,
    reuse: Vec<u64>,
) -> (Vec<u64>, KernelStats, CcCounters) {
    let all = parts::entrust_with(graph, CcPart::new);
    let id = parts::connect(&all);
    let start = Instant::now();
    let pass = (chunk.max(1) * PASS) as u64;
    let done = parts::superstep((id, pass, chunk as u64), components_driver);
    let seconds = start.elapsed().as_secs_f64();
    // Every driver ran the same rounds: they all stop at the same quiescence.
    let rounds = done.first().map_or(0, |d| d.0);
    debug_assert!(done.iter().all(|d| d.0 == rounds), "the drivers disagree on the rounds");
    let counters = done.iter().fold(CcCounters::default(), |a, &(_, [h, u, p, e, l])| {
        a.add(CcCounters { hooked: h, unhooked: u, pairs: p, edges: e, labels: l })
    });
    // The labels alone, into the caller's vector when it fits (no parents).
    let g = parts::collect_values_into(graph, id, &all, &view.parts, how, reuse);
    parts::disconnect(id, &all);
    (g.values, KernelStats { seconds, rounds, messages: g.messages, arcs: g.arcs }, counters)
}

/// The minimum lane ([`skein::quiescent_min`]) of the smallest id labelled giant.
const GMIN_LANE: usize = 1;

/// One partition's driver ([`run`]): every step of the kernel, each ended by a quiescence
/// that every driver waits in (so no partition starts a step before every partition has
/// finished the one before, as a join of the drivers would ensure, with no round trip to
/// `main`). Returns the rounds and the partition's counters (`hooked`, `unhooked`,
/// `pairs`, `edges`, `labels`).
///
/// The rounds learn what they need from the quiescence that ends them
/// (`skein::wait_quiescent_totals`), the same on every driver:
///
/// * whether a round must follow: lane 0 counts the roots whose label dropped
///   ([`receive`]): each drop is the next round's work of its partition. A round follows
///   while the lane grew during the round. A driver past a quiescence may offer labels to a
///   partition whose driver has not woken yet (or, in the first round, not yet grouped
///   its contracted edges); those drops are counted in the round that follows, and that
///   partition's [`CcPart::advance`] takes them into the same round's work (they were
///   pushed before it). So when the lane did not grow during a round, no root holds a
///   dropped label not yet offered. (A round may so find no work left: it costs one
///   quiescence.) The first round runs in any case: the hook step's work (the roots with
///   a contracted edge, [`CcPart::group`]) is counted on lane 1 only for the rounds'
///   count, which counts the first round when some partition had work.
/// * the giant's label: minimum lane [`GMIN_LANE`], set by each partition to its smallest
///   id labelled giant ([`CcPart::gmin`]) after the hook step, and lowered by every offer
///   that labels a root giant ([`receive`]): exact at each quiescence, as a partition's
///   `gmin` only drops.
fn components_driver((id, pass, chunk): (u64, u64, u64)) -> (u64, [u64; 5]) {
    let me = parts::me::<CcPart>(id);
    let pass = pass as usize;
    // 1. Local (`prepare`: true with more than one partition).
    let many = me.apply((), |s, ()| u8::from(s.prepare())) == 1;
    let len = me.apply((), |s, ()| s.parent.len());
    if many {
        parts::chunks(&me, len, pass, (), |s, (), r| s.sample::<true>(r));
    } else {
        parts::chunks(&me, len, pass, (), |s, (), r| s.sample::<false>(r));
    }
    me.apply((), |s, ()| s.guess_largest());
    if many {
        let more = me.apply((), |s, ()| s.more.len());
        parts::chunks(&me, more, pass, (), |s, (), r| s.join_more(r));
        parts::chunks(&me, len, pass, (), |s, (), r| s.publish(r));
        me.apply((), |s, ()| s.list_candidates());
        me.apply((), |s, ()| s.share_bits());
        skein::wait_quiescent();
    } else {
        parts::chunks(&me, len, pass, (), |s, (), r| s.join(r));
    }
    let mut rounds = 0;
    let mut gmin = u64::MAX;
    if many {
        // 2. Probe.
        me.apply((), |s, ()| s.probe());
        skein::wait_quiescent();
        // 3. Hook.
        let len = me.apply((), |s, ()| {
            s.classes();
            s.candidates.len()
        });
        parts::chunks(&me, len, pass, (), |s, (), r| s.hook(r));
        let mut before = skein::wait_quiescent_sum();
        me.apply((), |s, ()| {
            let work = s.group();
            skein::quiescent_set_min(GMIN_LANE, s.gmin);
            skein::quiescent_add([0, work, 0, 0]);
        });
        // 4. Rounds.
        loop {
            let len = me.apply((), |s, ()| s.advance());
            parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.propagate(r));
            let t = skein::wait_quiescent_totals();
            gmin = t.mins[GMIN_LANE];
            let dropped = t.sums[0].wrapping_sub(before[0]);
            let work = t.sums[1].wrapping_sub(before[1]);
            before = t.sums;
            // The first round counts when some partition had work (lane 1: the hook step's).
            if rounds > 0 || work > 0 {
                rounds += 1;
            }
            if dropped == 0 {
                break;
            }
        }
    }
    me.apply((rounds, gmin), |s, (rounds, gmin)| {
        s.giant_label = gmin;
        let c = s.counters;
        (rounds, [c.hooked, c.unhooked, c.pairs, c.edges, c.labels])
    })
}
