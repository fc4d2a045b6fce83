//! Parallel delta-stepping SSSP (Meyer and Sanders 2003), organised like GAP's `sssp.cc`
//! (Beamer, Asanović, Patterson: "The GAP Benchmark Suite", 2015).
//!
//! # Data
//!
//! - `dist[v]`: an `AtomicU32` holding the bits of a non-negative binary32 distance
//!   (`+inf` when unreached). For non-negative floats the bit patterns order like the
//!   values, so an integer atomic minimum is a distance minimum. Every arc scan reads it:
//!   4 bytes per vertex keep it cache-friendly (16 MiB at SCALE 22).
//! - No parent array during the search: an improvement is one atomic minimum on `dist`
//!   (a second locked update per improvement, to record who offered the distance, cost
//!   about 18 % at SCALE 20). Parents are derived afterwards from the final distances, in
//!   parallel, deterministic whatever the thread count ([`crate::parents::sssp_parents`]).
//! - Each thread owns `bins`, a [`BucketQueue`]: vertices filed under the bucket key
//!   ([`BucketIndex::key`], `floor(d / Δ)` for all but absurdly small Δ) of the distance
//!   the thread lowered them to. Its storage is bounded by the entries, not by the
//!   number of buckets, and its next non-empty bucket is found by a bitmap scan (see
//!   [`skein_buckets`]). Entries are never removed when a distance drops further (*lazy
//!   deletion*): a stale entry is recognised and skipped when its bucket is processed,
//!   because the vertex's current distance belongs to an earlier bucket.
//! - `outboxes[round % 2][t]`: thread `t`'s offer for a round, one of its buckets moved
//!   there without copying and tagged with the bucket's key; the round's frontier is the
//!   concatenation of the offers tagged with the round's bucket.
//!
//! # One round (all threads inside one `broadcast`, one [`SpinBarrier`] per round)
//!
//! 0. The round's bucket `b` is the smallest key offered in the previous round: rounds
//!    jump over empty buckets, however many. A thread whose offer was a later bucket
//!    takes it back into its queue.
//! 1. Every thread takes chunks of the frontier (the concatenation of the outboxes offered
//!    for `b`) from a shared cursor and relaxes the arcs of each vertex still in bucket `b`.
//! 2. *Bucket fusion*: while its own bucket `b` is non-empty and small
//!    (< [`FUSION_THRESHOLD`]), a thread keeps processing it without a barrier. This
//!    removes most of the rounds of a Kronecker graph's long, thin tail.
//! 3. Each thread moves its first non-empty bucket into its outbox for the next round
//!    (outboxes alternate by round parity), tags it with the bucket's key and takes the
//!    atomic minimum of the tags; barrier. Offering before the minimum is known saves
//!    GAP's second barrier.
//!
//! The search ends when no thread has a non-empty bucket. Distances are exact binary32
//! (see the crate docs).
//!
//! A frontier's vertices are known before they are taken: [`Shared::process_all`] asks for
//! the bounds and distance of the vertex 16 places ahead and the arcs of the one 8 places
//! ahead, and [`Shared::relax`] for the distance of the arc 16 places ahead (hints only,
//! `crate::prefetch`); at SCALE 20 on 2 threads this took about a third off the CPU time
//! per arc (`docs/performance.md`, "SSSP: the cost per arc").
//!
//! # Panics
//!
//! A thread that panics poisons the barrier while it unwinds ([`PoisonOnPanic`]), so the
//! others leave their loop instead of waiting for it forever; `broadcast` then hands the
//! panic to the caller, and [`crate::Solver`] turns it into an error.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

use rayon::ThreadPool;
use skein_generators::{Csr, SsspResult};

use crate::barrier::{PoisonOnPanic, Poisoned, SpinBarrier};
use crate::compact::WeightedArc;
use crate::prefetch::prefetch;
use skein_buckets::{BucketIndex, BucketQueue};

/// How far ahead in a frontier [`Shared::process_all`] asks for a vertex's bounds and
/// distance, and for its arcs; how many arcs ahead [`Shared::relax`] asks for a distance.
const AHEAD_BOUNDS: usize = 16;
const AHEAD_ARCS: usize = 8;
const AHEAD_DIST: usize = 16;

/// A thread keeps processing its own current bucket without a barrier while it holds
/// fewer entries than this (GAP's `kBinSizeThreshold`).
const FUSION_THRESHOLD: usize = 1000;

/// Frontier vertices taken from the shared cursor at a time.
const CHUNK: usize = 64;

/// "No bucket": the search is over (bucket keys stay below `2^63 + 2^62`).
const NO_BIN: u64 = u64::MAX;

struct Shared<'a> {
    offsets: &'a [u64],
    arcs: &'a [WeightedArc],
    dist: Vec<AtomicU32>,
    index: BucketIndex,
    /// Keys one relaxation can move a distance by, at most: the window of the queues.
    reach: u64,
    /// `outboxes[i & 1][t]`: thread `t`'s offer for round `i`, the bucket of key
    /// `tags[i & 1][t]` (`NO_BIN`: nothing).
    outboxes: [Vec<RwLock<Vec<u32>>>; 2],
    tags: [Vec<AtomicU64>; 2],
    /// `bucket[i % 3]` is round `i`'s bucket; `bucket[(i + 1) % 3]` collects the next one
    /// (an atomic minimum of the offers); `bucket[(i + 2) % 3]` is reset for round `i + 2`.
    bucket: [AtomicU64; 3],
    /// `cursor[i % 3]` hands out round `i`'s frontier.
    cursor: [AtomicUsize; 3],
    barrier: SpinBarrier,
    /// Test-only fault injection: thread `.0` panics at the start of round `.1`.
    #[cfg(test)]
    panic_at: Option<(usize, usize)>,
}

impl Shared<'_> {
    /// Relaxes every arc of `u`, whose distance is `du`.
    #[inline]
    fn relax(&self, u: u32, du: f32, bins: &mut BucketQueue) {
        let (a, b) = (self.offsets[u as usize] as usize, self.offsets[u as usize + 1] as usize);
        let row = &self.arcs[a..b];
        for (j, &WeightedArc { target: v, weight: w }) in row.iter().enumerate() {
            if let Some(ahead) = row.get(j + AHEAD_DIST) {
                if let Some(slot) = self.dist.get(ahead.target as usize) {
                    prefetch(slot);
                }
            }
            let nd = du + w;
            let bits = nd.to_bits();
            let slot = &self.dist[v as usize];
            let current = slot.load(Ordering::Relaxed);
            if bits < current && bits < slot.fetch_min(bits, Ordering::Relaxed) {
                bins.push(self.index.key(nd), v);
            }
        }
    }

    /// [`Shared::process`] of every vertex of `us` in order, asking for the bounds and the
    /// distance of the vertex [`AHEAD_BOUNDS`] places ahead and for the first and last arc
    /// of the one [`AHEAD_ARCS`] places ahead (their reads are cache misses the hardware
    /// cannot foresee).
    #[inline]
    fn process_all(&self, us: &[u32], bucket: u64, bins: &mut BucketQueue) {
        for (i, &u) in us.iter().enumerate() {
            if let Some(&v) = us.get(i + AHEAD_BOUNDS) {
                if let (Some(o), Some(d)) =
                    (self.offsets.get(v as usize + 1), self.dist.get(v as usize))
                {
                    prefetch(o);
                    prefetch(d);
                }
            }
            if let Some(&v) = us.get(i + AHEAD_ARCS) {
                let (a, b) = (self.offsets.get(v as usize), self.offsets.get(v as usize + 1));
                if let (Some(&a), Some(&b)) = (a, b) {
                    if let Some(first) = self.arcs.get(a as usize) {
                        prefetch(first);
                    }
                    if let Some(last) = self.arcs.get((b as usize).wrapping_sub(1)) {
                        prefetch(last);
                    }
                }
            }
            self.process(u, bucket, bins);
        }
    }

    /// Relaxes `u` if it still belongs to bucket `bucket` (skips stale entries).
    #[inline]
    fn process(&self, u: u32, bucket: u64, bins: &mut BucketQueue) {
        let du = f32::from_bits(self.dist[u as usize].load(Ordering::Relaxed));
        if self.index.key(du) >= bucket {
            self.relax(u, du, bins);
        }
    }

    fn thread_main(&self, me: usize) -> Result<(), Poisoned> {
        let _poison = PoisonOnPanic(&self.barrier);
        let mut bins = BucketQueue::new(self.reach);
        // An empty vector whose allocation is reused for the fused buckets.
        let mut spare: Vec<u32> = Vec::new();
        let mut round = 0usize;
        loop {
            let (p, r3) = (round & 1, round % 3);
            let bucket = self.bucket[r3].load(Ordering::Relaxed);
            if bucket == NO_BIN {
                break;
            }
            #[cfg(test)]
            if self.panic_at == Some((me, round)) {
                panic!("injected panic in thread {me} at round {round}");
            }
            // Every entry of this thread, queued or offered, is in this bucket or later.
            bins.advance(bucket);
            // An outbox holding a later bucket than the round's goes back to the queue.
            let tag = self.tags[p][me].load(Ordering::Relaxed);
            if tag != bucket && tag != NO_BIN {
                let mut outbox = self.outboxes[p][me].write().expect("outbox lock");
                bins.put(tag, &mut outbox);
                self.tags[p][me].store(NO_BIN, Ordering::Relaxed);
            }
            // Phase 1: the shared frontier, the outboxes tagged with this round's bucket.
            {
                let guards: Vec<_> = (0..self.outboxes[p].len())
                    .filter(|&t| self.tags[p][t].load(Ordering::Relaxed) == bucket)
                    .map(|t| self.outboxes[p][t].read().expect("outbox lock"))
                    .collect();
                let total: usize = guards.iter().map(|g| g.len()).sum();
                let cursor = &self.cursor[r3];
                loop {
                    let start = cursor.fetch_add(CHUNK, Ordering::Relaxed);
                    if start >= total {
                        break;
                    }
                    let end = (start + CHUNK).min(total);
                    // Walk the outboxes that the chunk [start, end) spans.
                    let mut base = 0;
                    for g in &guards {
                        let (lo, hi) = (base, base + g.len());
                        base = hi;
                        if hi <= start {
                            continue;
                        }
                        if lo >= end {
                            break;
                        }
                        self.process_all(
                            &g[start.max(lo) - lo..end.min(hi) - lo],
                            bucket,
                            &mut bins,
                        );
                    }
                }
            }
            // Phase 2: bucket fusion.
            loop {
                let len = bins.len_of(bucket);
                if len == 0 || len >= FUSION_THRESHOLD {
                    break;
                }
                bins.swap_out(bucket, &mut spare);
                self.process_all(&spare, bucket, &mut bins);
                spare.clear();
            }
            // Phase 3: offer this thread's first non-empty bucket for the next round.
            // Nobody reads the other parity's outboxes until the barrier.
            {
                let q = 1 - p;
                let mut outbox = self.outboxes[q][me].write().expect("outbox lock");
                outbox.clear();
                match bins.first() {
                    Some(i) => {
                        bins.swap_out(i, &mut outbox);
                        self.tags[q][me].store(i, Ordering::Relaxed);
                        self.bucket[(round + 1) % 3].fetch_min(i, Ordering::Relaxed);
                    }
                    None => self.tags[q][me].store(NO_BIN, Ordering::Relaxed),
                }
            }
            // Everyone read round - 1's bucket and cursor before the last barrier: reset
            // them for round + 2.
            if me == 0 {
                self.bucket[(round + 2) % 3].store(NO_BIN, Ordering::Relaxed);
                self.cursor[(round + 2) % 3].store(0, Ordering::Relaxed);
            }
            round += 1;
            self.barrier.wait()?;
        }
        Ok(())
    }
}

/// Delta-stepping from `root` with bucket width `delta` (finite, > 0) on `pool`'s
/// threads; `arcs` are `csr`'s arcs in the compact layout, none heavier than
/// `max_weight`.
///
/// # Panics
/// If a thread panics (a bug): the panic reaches the caller once every thread has left.
pub(crate) fn delta_stepping(
    pool: &ThreadPool,
    csr: &Csr,
    arcs: &[WeightedArc],
    root: u32,
    delta: f32,
    max_weight: f32,
) -> SsspResult {
    run(pool, csr, arcs, root, delta, max_weight, None)
}

fn run(
    pool: &ThreadPool,
    csr: &Csr,
    arcs: &[WeightedArc],
    root: u32,
    delta: f32,
    max_weight: f32,
    #[cfg_attr(not(test), allow(unused_variables))] panic_at: Option<(usize, usize)>,
) -> SsspResult {
    let threads = pool.current_num_threads();
    let n = csr.num_vertices() as usize;
    let outbox = || (0..threads).map(|_| RwLock::new(Vec::new())).collect::<Vec<_>>();
    let tag = || (0..threads).map(|_| AtomicU64::new(NO_BIN)).collect::<Vec<_>>();
    let mut outboxes = [outbox(), outbox()];
    outboxes[0][0].get_mut().expect("fresh lock").push(root);
    let tags = [tag(), tag()];
    tags[0][0].store(0, Ordering::Relaxed);
    let index = BucketIndex::new(delta);
    let shared = Shared {
        offsets: csr.offsets(),
        arcs,
        dist: pool.install(|| {
            use rayon::prelude::*;
            (0..n).into_par_iter().map(|_| AtomicU32::new(f32::INFINITY.to_bits())).collect()
        }),
        index,
        reach: index.reach(max_weight),
        outboxes,
        tags,
        bucket: [AtomicU64::new(0), AtomicU64::new(NO_BIN), AtomicU64::new(NO_BIN)],
        cursor: [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)],
        barrier: SpinBarrier::new(threads),
        #[cfg(test)]
        panic_at,
    };
    shared.dist[root as usize].store(0.0f32.to_bits(), Ordering::Relaxed);
    let outcomes = pool.broadcast(|ctx| shared.thread_main(ctx.index()));
    // Only a panicking thread poisons the barrier, and its panic has been resumed above.
    assert!(outcomes.iter().all(Result::is_ok), "delta-stepping barrier poisoned");
    let dist: Vec<f32> = pool.install(|| {
        use rayon::prelude::*;
        shared.dist.into_par_iter().map(|d| f32::from_bits(d.into_inner())).collect()
    });
    let parent = crate::parents::sssp_parents(pool, csr, root, &dist);
    SsspResult { root: u64::from(root), dist, parent }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A 200-vertex path with weights 1, as CSR and compact arcs.
    fn path() -> (Csr, Vec<WeightedArc>) {
        let list = skein_generators::EdgeList {
            num_vertices: 200,
            src: (0..199).collect(),
            dst: (1..200).collect(),
            weights: Some(vec![1.0; 199]),
        };
        let csr = Csr::from_edge_list(&list);
        let arcs = crate::compact::weighted_arcs(&csr);
        (csr, arcs)
    }

    #[test]
    fn a_panicking_thread_ends_the_search_without_hanging() {
        let (done, finished) = std::sync::mpsc::channel();
        // The search runs on another thread, so that a hang fails the test (below)
        // instead of blocking it.
        std::thread::spawn(move || {
            let (csr, arcs) = path();
            let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
            for (thread, round) in [(0, 0), (1, 5), (2, 150)] {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run(&pool, &csr, &arcs, 0, 0.5, 1.0, Some((thread, round)))
                }));
                let payload = outcome.expect_err("the injected panic reaches the caller");
                let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
                assert!(message.contains("injected panic"), "{message}");
            }
            // The pool still works afterwards.
            let r = run(&pool, &csr, &arcs, 0, 0.5, 1.0, None);
            assert_eq!(r.dist[199], 199.0);
            done.send(()).unwrap();
        });
        let started = Instant::now();
        match finished.recv_timeout(Duration::from_secs(60)) {
            Ok(()) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the search hung after a thread panicked")
            }
            Err(e) => panic!("the test thread failed ({e}) after {:?}", started.elapsed()),
        }
    }
}
