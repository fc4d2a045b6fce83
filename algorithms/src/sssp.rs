//! The SSSP kernel: bucketed, label-correcting delta-stepping over partitions entrusted
//! to the workers. [`SsspPart`] is one partition's state and its local steps (nothing
//! there knows about the runtime: a step that must reach another partition calls the
//! `send` function it is given); [`search`] is the round loop on the runtime, which turns
//! those calls into delegated requests.
//!
//! # Buckets and bins
//!
//! Tentative distances live with the owning partition. Vertex `u` is *pending* from
//! an improvement of `dist[u]` until it relaxes its arcs (one bit per vertex, small
//! enough to stay in cache where a second array of distances would not). Pending
//! vertices wait in *bins* of width `delta / 16` by distance (far ahead, in one vector per
//! bucket until their bucket comes near: "Filing" below; entries are never
//! removed: an entry whose vertex is no longer pending in that bin is skipped — lazy
//! deletion). Globally, distances are cut into buckets of width
//! `delta` (16 bins) and all partitions work on the same bucket in a round; within the
//! round each partition takes its bins in increasing order, nearly as Dijkstra orders
//! vertices, so a vertex is rarely relaxed twice unless a *remote* relaxation improves
//! it later. (Taking a bucket's vertices in arbitrary order made Kronecker hubs rescan
//! their huge adjacency lists 5 to 11 times per search; a binary heap ordered them
//! exactly but cost a logarithmic factor and cache misses on large graphs.)
//!
//! Bins are keyed by [`skein_buckets::BucketIndex`] (`floor(d * 16 / delta)`
//! in 64-bit arithmetic, never overflowing for any positive delta) and held in a
//! [`BucketQueue`]: a cyclic window of bins sized from the largest weight plus an
//! ordered map of the non-empty bins beyond it. So a partition's memory is bounded by
//! its pending entries, not by `largest distance / delta`, and the next non-empty bin is
//! found by a bitmap scan instead of a walk over empty bins. The bucket of bin key `k`
//! is `k / 16` for keys below [`LINEAR_KEYS`] and `k` itself above (where keys are no
//! longer linear in the distance: each is its own bucket).
//!
//! # Filing
//!
//! An improvement lands up to the largest weight ahead of the distance relaxed: with the
//! default delta (`0.002 ×` the largest weight) anywhere in the next 500 buckets, 8,000
//! bins. Filing it in its bin was a write to the tail of one of thousands of vectors (a
//! cache miss per improvement, on top of the distance's), and most of those entries went
//! stale before their bin was taken (at SCALE 20, 1.65 M improvements per search for
//! 0.65 M vertices taken). So bins exist only for the buckets below `split`: an
//! improvement into a later bucket is filed under its *bucket* in a second
//! [`BucketQueue`] (`coarse`, one vector per bucket: about 500 tails, which stay in
//! cache). When a partition runs out of bins, it splits its lowest coarse bucket
//! ([`SsspPart::split_bucket`]): each entry whose vertex is still pending in that bucket
//! goes into its bin, the others are dropped there, in one pass that asks for the
//! distances ahead of it, instead of each stale entry costing a lookahead and a miss when
//! its bin is taken. The order in which a partition takes its vertices is the same as with
//! bins for every bucket.
//!
//! # Remote relaxations
//!
//! Arcs are relaxed by the partition that owns their *target*. A vertex relaxes its
//! arcs into its own partition in place; for each other partition its arcs reach, it
//! sends one [`Scan`] (the range of those arcs in its partition's read-only arc copy,
//! its distance and its tag), and the receiver relaxes that range against its own
//! distances. So every distance check is local, no partition keeps a filter of what
//! it sent (which cost a random read per remote arc), and a hub's arc scan is split
//! among the partitions its neighbours live in instead of falling on its owner alone
//! (the round waits for the busiest partition). Scans to one owner travel
//! 8 to a request (a [`crate::outbox::Packet`] of 24 words), handed to `send` when full and at the end of
//! every [`SsspPart::process_bucket`] call.
//!
//! # Rounds
//!
//! The main fiber starts one driver fiber per partition, on its worker of its rank, once
//! per search (`spawn_on`, argument `(search, chunk)`; the driver finds its partition's
//! handle in its rank's registry, `crate::registry`), and joins them when the search is
//! over: between rounds there is no spawn and no join, only a quiescence. In each round a
//! driver works through its partition's pending vertices from the round's bucket on, in
//! chunks (`apply` on its own worker: an inline call), yielding between chunks so that its
//! worker serves incoming scans; then it waits for quiescence over every rank
//! (`skein::wait_quiescent_totals`: every scan of the round applied everywhere). That
//! quiescence also gives every driver the next round's bucket, the lowest non-empty bucket
//! of every partition: rounds jump over empty buckets, however many.
//!
//! # Rounds across ranks: the next bucket at quiescence
//!
//! Each partition keeps its lowest pending bucket in its worker's minimum lane 0
//! (`skein::quiescent_min`), whose minimum over every worker the quiescence hands to every
//! driver. The driver sets it ([`SsspPart::tell_next`], `u64::MAX` for none) once its
//! round's work is done, from its bins; every batch of scans applied after that lowers it
//! to the bucket of the lowest vertex the batch filed ([`SsspPart::tell_lower`]). At the
//! round's quiescence it is exactly the partition's lowest pending bucket: a vertex pending
//! then was pending when the driver set the lane (and counted, unless improved since,
//! which lowered the lane to its new bucket) or was improved after (and lowered it); and
//! the lane's value is that of a vertex still pending, since nothing takes a vertex after
//! the driver's set. (A lowering before the set, by the driver's own relaxations or early
//! scans, is overwritten by it.)
//!
//! A driver past a round's quiescence may send the next round's scans to a partition whose
//! driver has not woken yet. They are that round's work, as scans arriving during a round
//! always were; only the count of arcs per round (the [`RoundSpread`] statistics) must
//! tell them apart: a scan names its round, and a partition counts arcs by the round's
//! parity, taking a round's count after its quiescence, before any scan two rounds later
//! can come ([`SsspPart::end_round`]).
//!
//! A round's bucket `b` is the lowest with a pending vertex anywhere, and each partition
//! takes all of bucket `b` (refilled by its own relaxations and by scans arriving during
//! the round). Past it, a partition goes on taking its later bins, lowest first, while the
//! arcs it relaxed in the round (its own and those of the scans it received) stay below
//! its *budget*, `1 / (round_share × partitions)` of its arcs
//! (`crate::engine::EngineOptions::round_share`, at least [`MIN_BUDGET`]). So a dense
//! stretch of distances (where a Kronecker graph's hubs lie) takes about a bucket per
//! round, as classic delta-stepping, while a sparse one (the long tail of low-degree
//! vertices, half the vertices over about nine tenths of the distances) is swept in a few
//! rounds instead of one per bucket: at SCALE 20, 21 rounds per search on one worker and
//! 35 to 50 on 2 to 16 instead of 800 to 900. Taking a vertex early is only ever extra
//! work, never a wrong result: a vertex improved after it relaxed its arcs becomes pending
//! again and relaxes them again.
//!
//! The extra work comes from partitions that run ahead of others: a partition that has
//! finished the round's bucket takes its later bins while a slower one still sends it
//! scans that improve them. With more partitions there are more senders to lag behind, so
//! the budget, a partition's share of the round, shrinks with the partitions: the round's
//! work past its bucket is about `1 / (round_share × partitions)` of the graph's arcs. A
//! budget of `1 / 32` of each partition's arcs (the round's work independent of the
//! partitions) relaxed 2.1 to 2.3 times Dijkstra's arcs with 16 workers on 2 cores (1.27 on
//! 16 cores) for 13 rounds at SCALE 20; the shrinking one with the default `round_share`
//! of 64, 1.11 times for 49 rounds (`docs/performance.md`, "SSSP at many workers").
//!
//! # Cost per arc
//!
//! The kernel's time is cache misses, not instructions (`docs/performance.md`, "SSSP: the
//! cost per arc"): per vertex taken, its bounds and the first line of its arcs (random
//! places in the copy), per arc the target's distance. Nothing of the next vertex is known
//! to the hardware, but the bin is: [`SsspPart::process_bucket`] looks [`AHEAD_BOUNDS`]
//! entries down the current bin (the next pops, unless relaxations file new entries there
//! first, which is rare with bins a sixteenth of a bucket wide), and on into the bucket's
//! next bins when the current one holds fewer ([`BucketQueue::peek_ahead`]), and asks for
//! that vertex's bounds and distance, and [`AHEAD_ARCS`] entries down for the first
//! [`AHEAD_LINES`] lines and the last line of its arcs, whose bounds have arrived by then;
//! a stale entry's lines are asked for in vain, which costs bandwidth only (few are left
//! after a split). Each relaxation loop asks for the distance of the arc [`AHEAD_DIST`]
//! places ahead, and a batch of scans asks for the first lines and the last of each of its
//! ranges before relaxing the first, wherever the range lies (the sender's copy, or the
//! receiver's in-arcs for a scan from another rank). A scan from another rank once found
//! its arcs through three loads that each needed the one before (the source's index words,
//! its group's bounds, the arcs); with 8 ranks of a `kron:18` graph a scan holds about 4
//! arcs, so those misses were most of its cost. It now carries its group's address (below,
//! "Across ranks"): one load (`docs/performance.md`, "Scans that carry their address").
//!
//! A vertex whose arcs all point into its own
//! partition (the last one does) relaxes them in one loop with no test per arc; one with
//! arcs elsewhere relaxes its own ones up to the first other one (a test per arc that fails
//! once), where a binary search for the split waited for one miss after another.
//!
//! # Across ranks
//!
//! Nothing above depends on where a partition lives: a batch of scans is the `Plain`
//! argument of an `apply_then` (a [`Batch`]: a [`crate::outbox::Packet`] of 8 scans of 24 bytes,
//! 200 bytes in all) sent by the sending partition from its delegated context through the
//! handles it received when the search started, whether the receiver is on this rank or
//! another. Each partition is built on its trustee from the graph's id in its rank's
//! registry, whose view holds the arcs of that rank's own partitions only
//! (`crate::graph`). A scan between partitions of the same rank names a range of the
//! sender's copy, which the receiver reads in shared memory (in one process, the only
//! case); a scan from a partition of another rank names the sender, its distance, and
//! where its arcs lie among the receiver's *in-arcs* (`crate::adjacency::InArcs`, built by
//! the receiver from its own rows since the graph is symmetric). The receiver's in-arcs are
//! grouped by source in tag order, so one sender partition's groups form one span, in the
//! order of its local indices: the sender knows each group's place in that span without
//! asking (the arcs of its earlier vertices to that receiver), and its copy keeps two
//! entries per such partition reached (the count and that address,
//! `crate::adjacency::PartArcs::far_group`) in place of the arcs. The scan is `start..end`
//! in the sender's span, which the receiver reads directly. That the addresses are right
//! (the graph symmetric) is checked once per graph before its first search: the senders'
//! and the receivers' fingerprints of every group agree (`check_symmetric`); a range that
//! still leaves its span ends the search with the same error. The in-arcs' order may differ
//! from the sender's row: the distances are minima of the same binary32 sums, so they are
//! bit-identical (parents may differ where paths tie).
//!
//! Each tentative distance is one binary32 addition `dist[u] + w`, so the final
//! distances are the exact binary32 shortest paths of the Graph500 reference, whatever
//! the order in which relaxations arrive or the number of workers.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use skein::Trust;
use skein_buckets::{BucketIndex, BucketQueue, LINEAR_KEYS};

use crate::adjacency::{Arc32, Tag, Tags, NO_TAG};
use crate::graph::{GraphView, OwnView};
use crate::outbox::{Outbox, Packet};

/// Words of a scan packet: 8 scans of 24 bytes.
const SCAN_WORDS: usize = 24;

/// Up to 8 scans for one partition, one request.
pub(crate) type Batch<T> = Packet<T, SCAN_WORDS>;
use crate::parts::{
    collect_into, connect_as, disconnect, reset, superstep, until_done, Collect, KernelStats, Part,
    RoundSpread,
};
use crate::registry;

/// Bins per delta-bucket.
const SUB: u32 = 16;

/// How far ahead in a bin [`SsspPart::process_bucket`] asks for a vertex's bounds (and its
/// distance), and for its arcs: see the module docs, "Cost per arc".
const AHEAD_BOUNDS: usize = 16;
const AHEAD_ARCS: usize = 8;
/// How many cache lines of a row's (or a scan's range's) arcs the lookahead asks for,
/// besides the last.
const AHEAD_LINES: u64 = 4;
/// How many arcs ahead a relaxation loop asks for a target's distance.
const AHEAD_DIST: usize = 16;
/// How many entries ahead [`SsspPart::split_bucket`] asks for a vertex's distance.
const AHEAD_SPLIT: usize = 16;

/// The least budget of a partition's round, in arcs (see [`SsspPart::new`]): below it, a
/// round's quiescence wait costs more than the relaxations it holds back.
const MIN_BUDGET: u64 = 1024;

/// The bucket of bin key `bin` (see the module docs).
#[inline]
fn bucket_of(bin: u64) -> u64 {
    if bin < LINEAR_KEYS {
        bin / u64::from(SUB)
    } else {
        bin
    }
}

/// The bin keys of bucket `b`: `first..end`.
#[inline]
fn bins_of(b: u64) -> (u64, u64) {
    if b < LINEAR_KEYS / u64::from(SUB) {
        (b * u64::from(SUB), (b + 1) * u64::from(SUB))
    } else {
        (b, b + 1)
    }
}

/// A remote SSSP scan: the receiving partition relaxes the arcs `start..end` of the
/// partition that owns `parent` (all of them point into the receiver) with `parent`'s
/// distance `dist`; from a partition of another rank, its in-arcs from `parent`
/// (`end - start` of them: `start` is 0).
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub(crate) struct Scan {
    start: u64,
    end: u64,
    parent: Tag,
    dist: f32,
}

// SAFETY: repr(C) of two u64, a u32 and an f32: no address, every bit pattern is a valid
// value (an out-of-range arc range from corrupted bytes panics on its slice, never reads
// out of bounds).
unsafe impl skein::Plain for Scan {}

/// Test-only fault injection: where a partition panics.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fault {
    /// Partition `.0` panics in its driver's first processing step of a bucket `>= .1`.
    Process(usize, u64),
    /// Partition `.0` panics when it applies its first remote scan (a delegated closure).
    Scan(usize),
}

#[cfg(test)]
impl Fault {
    /// As a `Plain` request argument.
    fn encode(self) -> [u64; 3] {
        match self {
            Fault::Process(p, b) => [0, p as u64, b],
            Fault::Scan(p) => [1, p as u64, 0],
        }
    }

    fn decode(code: [u64; 3]) -> Fault {
        match code {
            [0, p, b] => Fault::Process(p as usize, b),
            [_, p, _] => Fault::Scan(p as usize),
        }
    }
}

/// A partition's arrays of one search, kept for the next search of the same graph on the
/// same worker (`crate::registry::keep_buffers`), as BFS does (`crate::bfs`).
#[derive(Debug)]
struct Buffers {
    dist: Vec<f32>,
    parent: Vec<Tag>,
    pending: Vec<u64>,
    bins: BucketQueue,
    coarse: BucketQueue,
    scratch: Vec<u32>,
}

/// One partition's SSSP state.
#[derive(Debug)]
pub(crate) struct SsspPart {
    view: OwnView,
    /// The graph's id in the registry (where the buffers go back when the search ends).
    graph: u64,
    part: usize,
    /// The arrays come from an earlier search and need [`Part::reset`].
    dirty: bool,
    /// The partitions of this partition's rank (their scans name ranges of their copies).
    same_rank: std::ops::Range<usize>,
    /// Every partition's handle (given by `crate::parts::connect`), to send scans.
    peers: Arc<Vec<Trust<SsspPart>>>,
    pub(crate) dist: Vec<f32>,
    pub(crate) parent: Vec<Tag>,
    /// Bit `u` set: `u` is pending (improved since it last relaxed its arcs).
    pending: Vec<u64>,
    outbox: Outbox<Scan, SCAN_WORDS>,
    /// Local vertices made pending in buckets below `split`, filed by the bin key of
    /// their distance then.
    bins: BucketQueue,
    /// Local vertices made pending in buckets `split` and above, filed by bucket (see the
    /// module docs, "Filing").
    coarse: BucketQueue,
    /// Buckets below this are split into `bins`; `coarse` holds no entry below it (its
    /// base).
    split: u64,
    /// A spare vector for [`SsspPart::split_bucket`].
    scratch: Vec<u32>,
    /// No bin below this key holds an entry.
    cur: u64,
    /// Bin keys of distances.
    index: BucketIndex,
    /// Work counters of the last search.
    pub(crate) relaxed_arcs: u64,
    /// `relaxed_arcs` when the current round started ([`SsspPart::start_round`]).
    round_start: u64,
    /// The round this partition's driver works in ([`SsspPart::start_round`]).
    round: u64,
    /// The arcs relaxed here in the rounds of each parity, its own and those of the scans
    /// it received (a scan names its round): the driver takes the count of a round when
    /// it ends ([`SsspPart::end_round`]), before any scan of the round after next can come.
    round_arcs: [u64; 2],
    /// The arcs relaxed here in each round of the search, in order ([`SsspPart::end_round`]).
    arcs_by_round: Vec<u64>,
    /// The lowest bin key this partition filed a vertex in since it last told its lowest
    /// bucket ([`SsspPart::tell_next`], [`SsspPart::tell_lower`]); `u64::MAX`: none.
    low_bin: u64,
    /// Arcs this partition relaxes in a round before it stops taking buckets past the
    /// round's first (see the module docs, "Rounds"); 0: one bucket per round.
    budget: u64,
    #[cfg(test)]
    fault: Option<Fault>,
}

impl SsspPart {
    /// Partition `part`'s state for a search with bucket width `delta` (finite, > 0) on
    /// a graph whose largest weight is `max_weight`, taking buckets past a round's first
    /// until it has relaxed `1 / (round_share × partitions)` of its arcs in the round (0:
    /// never).
    ///
    /// The arrays are those the previous search of graph `graph` (its id in the registry)
    /// on this worker left, to be cleared by [`Part::reset`] (on every trustee at once)
    /// before the search starts, or fresh ones.
    pub(crate) fn new(
        graph: u64,
        view: Arc<GraphView>,
        part: usize,
        delta: f32,
        max_weight: f32,
        round_share: u64,
    ) -> SsspPart {
        let len = view.parts.len(part) as usize;
        let np = view.parts.parts();
        let index = BucketIndex::subdivided(delta, SUB);
        // `1 / (round_share × partitions)` of the partition's arcs: see the module docs,
        // "Rounds".
        let budget = match round_share.saturating_mul(np as u64) {
            0 => 0,
            share => (view.weighted(part).num_arcs() / share).max(MIN_BUDGET),
        };
        // A relaxation moves a distance by at most `max_weight`: with the default delta its
        // bin stays inside the window.
        let reach = index.reach(max_weight);
        let window = BucketQueue::window_for(reach);
        // Buckets are `SUB` bins: a relaxation reaches `reach / SUB` buckets ahead, plus one
        // for the floor of each.
        let coarse_reach = reach / u64::from(SUB) + 2;
        let coarse_window = BucketQueue::window_for(coarse_reach);
        let kept = registry::take_buffers::<Buffers>(graph, part).filter(|b| {
            b.dist.len() == len && b.bins.window() == window && b.coarse.window() == coarse_window
        });
        let dirty = kept.is_some();
        let b = kept.unwrap_or_else(|| Buffers {
            dist: vec![f32::INFINITY; len],
            parent: vec![NO_TAG; len],
            pending: vec![0; len.div_ceil(64)],
            bins: BucketQueue::new(reach),
            coarse: BucketQueue::new(coarse_reach),
            scratch: Vec::new(),
        });
        SsspPart {
            same_rank: view.rank_parts(part),
            view: OwnView::new(view),
            graph,
            part,
            dirty,
            peers: Arc::new(Vec::new()),
            dist: b.dist,
            parent: b.parent,
            pending: b.pending,
            outbox: Outbox::new(np),
            bins: b.bins,
            coarse: b.coarse,
            split: 0,
            scratch: b.scratch,
            cur: 0,
            index,
            relaxed_arcs: 0,
            round_start: 0,
            round: 0,
            round_arcs: [0; 2],
            arcs_by_round: Vec::new(),
            low_bin: u64::MAX,
            budget,
            #[cfg(test)]
            fault: None,
        }
    }

    /// Starts round `round`: the arcs relaxed from now on count against the round's
    /// budget, and in the round's count.
    pub(crate) fn start_round(&mut self, round: u64) {
        self.round_start = self.relaxed_arcs;
        self.round = round;
    }

    /// Ends round `round` (all its scans applied everywhere): records the arcs this
    /// partition relaxed in it, its own and those of the scans it received.
    pub(crate) fn end_round(&mut self, round: u64) {
        let arcs = std::mem::take(&mut self.round_arcs[(round % 2) as usize]);
        self.arcs_by_round.push(arcs);
    }

    /// Counts `n` arcs relaxed here in round `round`.
    #[inline]
    fn count_arcs(&mut self, round: u64, n: u64) {
        self.relaxed_arcs += n;
        self.round_arcs[(round % 2) as usize] += n;
    }

    /// The arcs relaxed here in each round of the search (taken).
    pub(crate) fn take_arcs_by_round(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.arcs_by_round)
    }

    /// Tells this partition's lowest bucket ([`SsspPart::next_bucket`]; `u64::MAX` when it
    /// has none) as its worker's minimum lane 0 (`skein::quiescent_set_min`). Its driver
    /// does it once its round's work is done; the scans that come after lower it
    /// ([`SsspPart::tell_lower`]), so that it is this partition's lowest bucket at the
    /// round's quiescence (see the module docs, "Rounds across ranks").
    pub(crate) fn tell_next(&mut self) {
        let b = self.next_bucket().unwrap_or(u64::MAX);
        self.low_bin = u64::MAX;
        skein::quiescent_set_min(0, b);
    }

    /// Lowers the worker's minimum lane 0 to the bucket of the lowest vertex filed since
    /// the partition last told it (in the closure that applies a batch of scans).
    pub(crate) fn tell_lower(&mut self) {
        let bin = std::mem::replace(&mut self.low_bin, u64::MAX);
        if bin != u64::MAX {
            skein::quiescent_min(0, bucket_of(bin));
        }
    }

    /// The fingerprints of this partition's far groups as a sender
    /// ([`crate::adjacency::PartArcs::far_print`]) and of the groups it holds as a receiver
    /// ([`crate::adjacency::InArcs::print`]).
    pub(crate) fn prints(&self) -> (u64, u64) {
        (self.view.weighted(self.part).far_print(), self.view.in_arcs(self.part).print())
    }

    /// Requests this partition sent.
    pub(crate) fn requests(&self) -> u64 {
        self.outbox.requests
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
    ///
    /// A scan from a partition of this rank names a range of the sender's arc copy; one
    /// from another rank is relaxed over this partition's in-arcs from its sender
    /// ([`crate::adjacency::InArcs`]), which must have as many arcs as the range (a check
    /// of the graph's symmetry).
    pub(crate) fn scan_batch(&mut self, batch: &Batch<Scan>, round: u64) {
        #[cfg(test)]
        if let Some(Fault::Scan(p)) = self.fault {
            if p == self.part {
                self.fault = None;
                panic!("injected panic in a scan of partition {p}");
            }
        }
        let view = self.view.clone();
        let tags = view.tags;
        let copies = view.all_weighted();
        let (own, same) = (view.own().start, self.same_rank.clone());
        // Each scan's first arcs are a random read, in the sender's copy (a scan from this
        // rank) or in this partition's in-arcs (from another rank, at the address the
        // sender gave): ask for all of them before relaxing the first (a batch holds at
        // most 8). (In one process every sender is of the same rank, and no in-arcs are
        // built.)
        let ins = batch
            .items()
            .iter()
            .any(|s| !same.contains(&tags.part(s.parent)))
            .then(|| view.in_arcs(self.part));
        for s in batch.items() {
            let sender = tags.part(s.parent);
            if same.contains(&sender) {
                copies[sender - own].prefetch_range(s.start, s.end, AHEAD_LINES);
            } else if let Some(ins) = ins {
                ins.prefetch_addressed(sender, s.start, s.end, AHEAD_LINES as usize);
            }
        }
        for s in batch.items() {
            let sender = tags.part(s.parent);
            let arcs = match ins {
                Some(ins) if !same.contains(&sender) => {
                    let arcs = ins.addressed(sender, s.start, s.end);
                    debug_assert!(
                        arcs.is_none_or(|a| a == ins.group(s.parent)),
                        "scan from {} addresses another group",
                        s.parent
                    );
                    arcs.unwrap_or_else(|| asymmetric(&view, s.parent, self.part))
                }
                _ => copies[sender - own].range(s.start, s.end),
            };
            self.count_arcs(round, arcs.len() as u64);
            self.relax_row(arcs, s.dist, s.parent, tags);
        }
    }

    /// Relaxes every arc of `row` (all into this partition) from vertex `parent` at
    /// distance `d`, asking for the distance [`AHEAD_DIST`] arcs ahead as it goes.
    #[inline(always)]
    fn relax_row(&mut self, row: &[Arc32], d: f32, parent: Tag, tags: Tags) {
        for (i, &Arc32 { tag, weight }) in row.iter().enumerate() {
            if let Some(a) = row.get(i + AHEAD_DIST) {
                self.prefetch_dist(tags.local(a.tag));
            }
            self.relax(tags.local(tag), d + weight, parent);
        }
    }

    /// Hints the CPU to load the distance of `local` (nothing when out of range: the
    /// target of an arc to another partition).
    #[inline(always)]
    fn prefetch_dist(&self, local: u32) {
        if let Some(x) = self.dist.get(local as usize) {
            skein::prefetch(x);
        }
    }

    /// Lowers `local`'s distance to `d` (known to be an improvement) and files it.
    #[inline(never)]
    fn improve(&mut self, local: u32, d: f32, parent: Tag) {
        let l = local as usize;
        self.dist[l] = d;
        self.parent[l] = parent;
        self.pending[l / 64] |= 1 << (l % 64);
        let bin = self.index.key(d);
        self.low_bin = self.low_bin.min(bin);
        let bucket = bucket_of(bin);
        if bucket < self.split {
            self.bins.push(bin, local);
            self.cur = self.cur.min(bin);
        } else {
            self.coarse.push(bucket, local);
        }
    }

    /// The first bin from `from` (at least the bins' base) with an entry, splitting the
    /// lowest coarse buckets into bins ([`SsspPart::split_bucket`]) while the bins have
    /// none; `None` when neither holds an entry.
    fn next_bin(&mut self, from: u64) -> Option<u64> {
        loop {
            if let Some(k) = self.bins.first_from(from) {
                return Some(k);
            }
            // Every bin is empty from `from` on (and below it): the lowest coarse bucket
            // is the next.
            let c = self.coarse.first_from(self.split)?;
            self.split_bucket(c);
        }
    }

    /// Moves the entries of coarse bucket `c` (the lowest with any) into its bins, each
    /// under the bin of its vertex's distance now, dropping those whose vertex is no longer
    /// pending in bucket `c` (relaxed since, or improved into a lower bucket, where it has
    /// another entry); buckets up to `c` are split from now on.
    fn split_bucket(&mut self, c: u64) {
        let mut entries = std::mem::take(&mut self.scratch);
        self.coarse.swap_out(c, &mut entries);
        self.split = c + 1;
        self.coarse.advance(self.split);
        for (i, &u) in entries.iter().enumerate() {
            if let Some(&v) = entries.get(i + AHEAD_SPLIT) {
                self.prefetch_dist(v);
            }
            if self.is_pending(u) {
                let bin = self.index.key(self.dist[u as usize]);
                if bucket_of(bin) == c {
                    self.bins.push(bin, u);
                }
            }
        }
        entries.clear();
        self.scratch = entries;
    }

    /// True when `u` is pending (improved since it last relaxed its arcs).
    #[inline]
    fn is_pending(&self, u: u32) -> bool {
        let u = u as usize;
        self.pending[u / 64] & (1 << (u % 64)) != 0
    }

    /// True when `u`, found in bin `bin`, is pending there.
    #[inline]
    fn is_live(&self, u: u32, bin: u64) -> bool {
        self.is_pending(u) && self.index.key(self.dist[u as usize]) == bin
    }

    /// The bucket of the closest pending vertex, if any (never below the current
    /// bucket: relaxations only produce distances at or above the one relaxed).
    /// Drops the stale entries it passes.
    pub(crate) fn next_bucket(&mut self) -> Option<u64> {
        while let Some(bin) = self.next_bin(self.cur) {
            self.cur = bin;
            while let Some(u) = self.bins.last(bin) {
                if self.is_live(u, bin) {
                    return Some(bucket_of(bin));
                }
                self.bins.pop(bin);
            }
        }
        None
    }

    /// Relaxes the arcs of pending vertices from bucket `b` on, lowest bin first, taking
    /// at most `limit` entries; relaxations that land in bucket `b` are taken in the same
    /// call. Past bucket `b`, it goes on to later bins while the arcs relaxed since
    /// [`SsspPart::start_round`] are below the partition's budget. Remote relaxations go
    /// to `send(owner, batch)`, every batch flushed before returning. Returns the number
    /// of entries taken: 0 means the round has nothing more to take here.
    ///
    /// `b` is at most the bucket of every pending vertex of every partition (the
    /// minimum of their [`SsspPart::next_bucket`]).
    pub(crate) fn process_bucket(
        &mut self,
        b: u64,
        limit: usize,
        send: &mut impl FnMut(usize, Batch<Scan>),
    ) -> usize {
        #[cfg(test)]
        if let Some(Fault::Process(p, round)) = self.fault {
            if p == self.part && b >= round {
                self.fault = None;
                panic!("injected panic in partition {p}, bucket {b}");
            }
        }
        let (first, end) = bins_of(b);
        if self.bins.base() < first {
            // No entry is below `first`: `next_bucket` dropped the stale ones, and every
            // live one is in bucket `b` or later.
            self.bins.advance(first);
        }
        if self.split < b {
            // Likewise no coarse entry is below bucket `b` (`next_bucket` split buckets up
            // to its partition's first live vertex, and `b` is at most that).
            self.coarse.advance(b);
            self.split = b;
        }
        self.cur = self.cur.max(first);
        let view = self.view.clone();
        let arcs = view.weighted(self.part);
        let tags = view.tags;
        let mut taken = 0;
        while taken < limit {
            let bin = self.cur;
            if bin >= end && self.relaxed_arcs - self.round_start >= self.budget {
                break; // past bucket `b`, and the round's budget is spent
            }
            let Some(u) = self.bins.pop(bin) else {
                // Skip to the next non-empty bin, if any.
                match self.next_bin(bin) {
                    Some(k) => self.cur = k,
                    None => break,
                }
                continue;
            };
            // The vertices the next pops take (unless relaxations file new ones first):
            // their bounds, then their arcs, loaded while this one relaxes (see the module
            // docs, "Cost per arc").
            let stop = bins_of(bucket_of(bin)).1;
            if let Some(v) = self.bins.peek_ahead(bin, stop, AHEAD_BOUNDS) {
                arcs.prefetch_bounds(v);
                if let Some(d) = self.dist.get(v as usize) {
                    skein::prefetch(d);
                }
            }
            if let Some(v) = self.bins.peek_ahead(bin, stop, AHEAD_ARCS) {
                arcs.prefetch_arcs(v, AHEAD_LINES);
            }
            taken += 1;
            if !self.is_live(u, bin) {
                continue; // stale entry: improved since, or already relaxed
            }
            let du = self.dist[u as usize];
            self.pending[u as usize / 64] &= !(1 << (u % 64));
            let me = tags.tag(self.part, u);
            let (first, last) = arcs.bounds(u);
            let row = arcs.range(first, last);
            let own = if row.last().is_some_and(|a| !arcs.is_own(a)) {
                // Arcs to other partitions at the end: the own ones are a prefix, relaxed
                // until the first other one (a test per arc that fails once, where a
                // binary search for the split would wait for one miss after another).
                let mut i = 0;
                while let Some(&Arc32 { tag, weight }) = row.get(i).filter(|a| arcs.is_own(a)) {
                    if let Some(a) = row.get(i + AHEAD_DIST) {
                        self.prefetch_dist(tags.local(a.tag));
                    }
                    self.relax(tags.local(tag), du + weight, me);
                    i += 1;
                }
                i
            } else {
                self.relax_row(row, du, me, tags);
                row.len()
            };
            self.count_arcs(self.round, own as u64);
            for (owner, start, end) in arcs.segments_of(first + own as u64, last, tags) {
                let scan = if self.same_rank.contains(&owner) {
                    Scan { start, end, parent: me, dist: du }
                } else {
                    // A summary: the receiver relaxes its in-arcs from `me`, as many, from
                    // the address in its span of this partition's groups.
                    let (n, address) = arcs.far_group(start, end);
                    Scan { start: address, end: address + n, parent: me, dist: du }
                };
                self.outbox.push(owner, scan, send);
            }
        }
        self.outbox.flush(send);
        taken
    }

    /// [`SsspPart::process_bucket`] with the scans sent to their owners as delegated
    /// requests (`Plain` batches, with the round), from the delegated context this runs
    /// in. Each owner lowers its worker's minimum lane 0 as it applies them. The entries
    /// taken are added to lane [`TAKEN_LANE`].
    pub(crate) fn process_chunk(&mut self, b: u64, limit: usize) -> usize {
        let (peers, round) = (Arc::clone(&self.peers), self.round);
        let taken = self.process_bucket(b, limit, &mut |owner, batch| {
            peers[owner].apply_then(
                (batch, round),
                |t, (batch, round)| {
                    t.scan_batch(&batch, round);
                    t.tell_lower();
                },
                |()| (),
            );
        });
        let mut lanes = [0; skein::QUIESCENT_LANES];
        lanes[TAKEN_LANE] = taken as u64;
        skein::quiescent_add(lanes);
        taken
    }
}

impl Drop for SsspPart {
    fn drop(&mut self) {
        let b = Buffers {
            dist: std::mem::take(&mut self.dist),
            parent: std::mem::take(&mut self.parent),
            pending: std::mem::take(&mut self.pending),
            bins: std::mem::replace(&mut self.bins, BucketQueue::new(0)),
            coarse: std::mem::replace(&mut self.coarse, BucketQueue::new(0)),
            scratch: std::mem::take(&mut self.scratch),
        };
        registry::keep_buffers(self.graph, self.part, b);
    }
}

impl Part for SsspPart {
    type Value = f32;

    fn index(&self) -> usize {
        self.part
    }

    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        self.peers = peers;
    }

    fn write(&self, from: usize, values: &mut [f32], parents: &mut [u64]) {
        let len = values.len();
        values.copy_from_slice(&self.dist[from..from + len]);
        self.view.write_globals(&self.parent[from..from + len], parents);
    }

    fn counters(&self) -> (u64, u64) {
        (self.requests(), self.relaxed_arcs)
    }

    /// Clears arrays an earlier search left (nothing for fresh ones).
    fn reset(&mut self) {
        if std::mem::take(&mut self.dirty) {
            self.dist.fill(f32::INFINITY);
            self.parent.fill(NO_TAG);
            self.pending.fill(0);
            self.bins.clear();
            self.coarse.clear();
        }
        self.round_arcs = [0; 2];
        self.arcs_by_round.clear();
        self.low_bin = u64::MAX;
    }
}

/// The lane (`skein::quiescent_add`) where the drivers count the entries they take.
const TAKEN_LANE: usize = 3;

/// What one search needs besides the graph and the root.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    /// Bucket width (finite, > 0).
    pub(crate) delta: f32,
    /// The graph's largest weight (sizes the bin windows).
    pub(crate) max_weight: f32,
    /// Vertices a driver processes between yields.
    pub(crate) chunk: usize,
    /// Past a round's first bucket, a partition takes later buckets in the same round
    /// until it has relaxed `1 / (round_share × partitions)` of its arcs (0: one bucket
    /// per round).
    pub(crate) round_share: u64,
    #[cfg(test)]
    pub(crate) fault: Option<Fault>,
}

/// One SSSP search from `root`, run by the main fiber of a runtime whose workers (of every
/// rank) each own one partition of `view` (registered on every rank as graph `graph`,
/// `crate::registry`): distances and parents (global ids) indexed by global id, written
/// into the vectors `reuse` when they fit (an earlier result's: `crate::parts::gather_into`,
/// so that a search faults no fresh pages for its result), or, with [`Collect::Slices`],
/// empty vectors (each rank's slice is left on its rank); and the counters, with the arcs
/// each partition relaxed per round ([`RoundSpread`]).
pub(crate) fn search(
    graph: u64,
    view: Arc<GraphView>,
    root: u64,
    params: Params,
    how: Collect,
    reuse: (Vec<f32>, Vec<u64>),
) -> (Vec<f32>, Vec<u64>, (KernelStats, RoundSpread)) {
    let np = skein::num_workers();
    assert_eq!(np, view.parts.parts(), "one partition per worker of the job");
    let (delta, max_weight, chunk) = (params.delta, params.max_weight, params.chunk);
    let share = params.round_share;
    let parts: Vec<Trust<SsspPart>> = (0..np)
        .map(|g| {
            let arg = (graph, g as u64, (delta, max_weight), share);
            skein::trustee(g).entrust_new(arg, |(id, g, (d, m), share)| {
                SsspPart::new(id, registry::graph(id), g as usize, d, m, share)
            })
        })
        .collect();
    check_symmetric(graph, &parts);
    let search = registry::new_search();
    connect_as(search, &parts);
    reset::<SsspPart>(search);
    #[cfg(test)]
    if let Some(fault) = params.fault {
        for t in &parts {
            t.apply(fault.encode(), |s, f| s.fault = Some(Fault::decode(f)));
        }
    }
    let start = Instant::now();
    let (rp, rl) = view.parts.locate(root);
    parts[rp].apply((rl, view.tag(root)), |s, (rl, tag)| {
        s.relax(rl, 0.0, tag);
    });
    // One driver per partition runs every round; each returns the number of rounds, and
    // whether it stopped on a round that took nothing (a driver that panicked: its join
    // above resumed that panic).
    let drivers = superstep((search, chunk as u64), rounds_driver);
    debug_assert!(drivers.iter().all(|&r| r == drivers[0]), "the drivers agree");
    let (seconds, (rounds, stuck)) = (start.elapsed().as_secs_f64(), drivers[0]);
    assert!(stuck == 0, "SSSP: a round took no vertex while one was pending, and no driver failed");
    let by_part: Vec<Vec<u64>> =
        parts.iter().map(|t| t.apply_with((), |s, ()| s.take_arcs_by_round())).collect();
    let mut spread = RoundSpread::default();
    let mut arcs = Vec::with_capacity(np);
    for r in 0..rounds as usize {
        arcs.clear();
        arcs.extend(by_part.iter().map(|a| a.get(r).copied().unwrap_or(0)));
        spread.add_round(&arcs);
    }
    let g = collect_into(graph, search, &parts, &view.parts, how, reuse);
    disconnect(search, &parts);
    let stats = KernelStats { seconds, rounds, messages: g.messages, arcs: g.arcs };
    (g.values, g.parents, (stats, spread))
}

/// Checks once per graph, before its first search, that every scan across ranks will find
/// its sender's arcs at the address the sender gives (the graph is symmetric): the
/// fingerprints of the groups as the senders see them and as the receivers hold them sum to
/// the same over every partition ([`crate::adjacency::far_print`]). Panics (the run ends
/// with that error) when they differ. Nothing to check in one process.
fn check_symmetric(graph: u64, parts: &[Trust<SsspPart>]) {
    static CHECKED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let lock = || CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if lock().contains(&graph) {
        return;
    }
    let (mut sent, mut held) = (0u64, 0u64);
    for t in parts {
        let (s, h) = t.apply((), |s, ()| s.prints());
        sent = sent.wrapping_add(s);
        held = held.wrapping_add(h);
    }
    if sent != held {
        panic!(
            "the graph is not symmetric: the arcs its partitions have to other ranks are not \
             the reverses of the arcs those ranks have to them (the kernels across ranks need \
             every arc u -> v to have its reverse v -> u with the same weight)"
        );
    }
    lock().push(graph);
}

/// Ends the search: a scan from `parent` named arcs that partition `part` does not hold
/// from it (an asymmetric graph that [`check_symmetric`]'s fingerprints missed).
#[cold]
#[inline(never)]
fn asymmetric(view: &GraphView, parent: Tag, part: usize) -> ! {
    panic!(
        "the graph is not symmetric: vertex {} names arcs into partition {part} that its rows \
         do not have from that vertex's partition (the kernels across ranks need every arc \
         u -> v to have its reverse v -> u with the same weight)",
        view.global(parent)
    )
}

/// Every round of a search, in a driver fiber on the trustee of its partition
/// (`spawn_on`, argument `(search, chunk)`), one per partition. Each round ends with
/// `skein::wait_quiescent_totals`: every relaxation of the round has been applied
/// everywhere, and minimum lane 0 is the lowest bucket of every partition
/// ([`SsspPart::tell_next`]), the same on every driver: the next round's bucket, or
/// `u64::MAX` when no vertex is pending anywhere (the search is over). A round works
/// through that bucket of the partition, yielding every `chunk` vertices. Returns the
/// number of rounds.
///
/// A round in which no partition took an entry although a bucket was pending means that a
/// driver is gone (it panicked: its partition's lane still names the bucket it did not
/// take): every other driver returns then (with 1 as its second value), and the main
/// fiber's join of the one that panicked ends the run with its error, where the rounds
/// would otherwise go on forever.
fn rounds_driver((search, chunk): (u64, u64)) -> (u64, u64) {
    let me = crate::parts::me::<SsspPart>(search);
    // The root's bucket on its partition, none on the others.
    me.apply((), |s, ()| s.tell_next());
    let (mut round, mut taken) = (0u64, 0u64);
    loop {
        let t = skein::wait_quiescent_totals();
        let (bucket, before) = (t.mins[0], std::mem::replace(&mut taken, t.sums[TAKEN_LANE]));
        if round > 0 {
            me.apply(round - 1, |s, r| s.end_round(r));
            if bucket != u64::MAX && taken == before {
                return (round, 1); // a driver is gone (above)
            }
        }
        if bucket == u64::MAX {
            return (round, 0);
        }
        me.apply(round, |s, r| s.start_round(r));
        until_done(&me, (bucket, chunk), |s, (b, c)| s.process_chunk(b, c as usize) > 0);
        me.apply((), |s, ()| s.tell_next());
        round += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skein_generators::kronecker::{self, KroneckerParams};
    use skein_generators::{Csr, EdgeList};

    fn view(scale: u32, parts: usize) -> Arc<GraphView> {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
        Arc::new(GraphView::whole(graph, parts).unwrap())
    }

    fn max_weight(g: &Csr) -> f32 {
        g.weights().iter().copied().fold(0.0, f32::max)
    }

    /// Runs the bucketed SSSP with every partition in this thread, delivering sends in
    /// a deliberately scrambled order, and returns global distances.
    fn simulate(sh: &Arc<GraphView>, root: u64, delta: f32, share: u64) -> Vec<f32> {
        let np = sh.parts.parts();
        let mw = max_weight(sh.csr());
        let mut parts: Vec<SsspPart> =
            (0..np).map(|p| SsspPart::new(0, Arc::clone(sh), p, delta, mw, share)).collect();
        let (rp, rl) = sh.parts.locate(root);
        parts[rp].relax(rl, 0.0, sh.tag(root));
        let mut b = 0;
        loop {
            let mut msgs = Vec::new();
            for part in parts.iter_mut() {
                part.start_round(0);
                while part.process_bucket(b, 5, &mut |o, batch| msgs.push((o, batch))) > 0 {}
            }
            msgs.reverse();
            for (o, batch) in msgs {
                parts[o].scan_batch(&batch, 0);
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

    fn same(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn bucketed_sssp_matches_dijkstra_for_any_part_count_and_delta() {
        for parts in [1, 2, 3, 5] {
            let sh = view(9, parts);
            let root =
                kronecker::search_roots(&KroneckerParams::new(9, 16, 2, 3).unwrap(), sh.csr(), 1)
                    [0];
            let want = dijkstra(sh.csr(), root);
            let tiny = [1e-30, f32::MIN_POSITIVE, f32::from_bits(1)];
            for delta in [0.01f32, 0.1, 1.0, 100.0].into_iter().chain(tiny) {
                for share in [0, 1, 8, 1 << 20] {
                    let got = simulate(&sh, root, delta, share);
                    assert!(same(&got, &want), "parts={parts} delta={delta:e} share={share}");
                }
            }
        }
    }

    #[test]
    fn bin_keys_map_to_ordered_buckets() {
        let keys = [0, 15, 16, 17, LINEAR_KEYS - 1, LINEAR_KEYS, LINEAR_KEYS + 5, u64::MAX - 1];
        for w in keys.windows(2) {
            assert!(bucket_of(w[0]) <= bucket_of(w[1]));
        }
        for &k in &keys {
            let (first, end) = bins_of(bucket_of(k));
            assert!(first <= k && k < end, "bin {k}: bucket bins {first}..{end}");
        }
    }

    #[test]
    fn integer_weighted_paths_keep_few_bins() {
        // A path whose weights are 100000: with delta 0.002 the old bins grew to one
        // vector per 0.000125 of distance (gigabytes); the window stays bounded.
        let n = 11u64;
        let el = EdgeList {
            num_vertices: n,
            src: (0..n - 1).collect(),
            dst: (1..n).collect(),
            weights: Some(vec![100_000.0; n as usize - 1]),
        };
        let graph = Arc::new(Csr::from_edge_list(&el));
        let sh = Arc::new(GraphView::whole(Arc::clone(&graph), 2).unwrap());
        let want = dijkstra(&graph, 0);
        for delta in [0.002, 70.0, 1e-30] {
            assert!(same(&simulate(&sh, 0, delta, 8), &want), "delta {delta}");
            let part = SsspPart::new(0, Arc::clone(&sh), 0, delta, 100_000.0, 0);
            assert!(part.bins.window() <= 1 << 15 && part.coarse.window() <= 1 << 15);
        }
    }

    /// Runs `f` on another thread; fails if it takes more than a minute (a hang).
    fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()).unwrap());
        rx.recv_timeout(std::time::Duration::from_secs(60)).expect("hung (or the thread died)")
    }

    #[test]
    fn a_panic_in_any_partition_ends_the_run_with_an_error() {
        for fault in [Fault::Process(1, 0), Fault::Process(0, 3), Fault::Scan(1), Fault::Scan(0)] {
            let outcome = within_a_minute(move || {
                let sh = view(8, 2);
                let mw = max_weight(sh.csr());
                let kp = KroneckerParams::new(8, 16, 2, 3).unwrap();
                let root = kronecker::search_roots(&kp, sh.csr(), 1)[0];
                let rt = skein::Runtime::builder().workers(2).build().unwrap();
                let params = Params {
                    delta: 0.01,
                    max_weight: mw,
                    chunk: 4,
                    round_share: 0,
                    fault: Some(fault),
                };
                let id = registry::register_graph(Arc::clone(&sh));
                let r = rt
                    .run(move || {
                        search(id, sh, root, params, Collect::Gather, Default::default()).0
                    })
                    .map_err(|e| e.to_string());
                registry::unregister_graph(id);
                r
            });
            let err = outcome.expect_err("the injected panic makes the run fail");
            assert!(err.contains("injected panic"), "{fault:?}: {err}");
        }
    }
}
