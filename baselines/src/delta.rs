//! Parallel delta-stepping SSSP (Meyer and Sanders 2003), organised like GAP's `sssp.cc`
//! (Beamer, Asanović, Patterson: "The GAP Benchmark Suite", 2015).
//!
//! # Data
//!
//! - `dist[v]`: an `AtomicU32` holding the bits of a non-negative binary32 distance
//!   (`+inf` when unreached). For non-negative floats the bit patterns order like the
//!   values, so an integer atomic minimum is a distance minimum. Every arc scan reads it:
//!   4 bytes per vertex keep it cache-friendly (16 MiB at SCALE 22).
//! - `offer[v]`: an `AtomicU64` packing a distance offered to `v` (high half) and the vertex
//!   that offered it (low half), updated by atomic minimum for every offer that is not
//!   worse than `dist[v]` at the time (a few per vertex, against tens of arc checks). An
//!   offer of the final distance is never worse than `dist[v]`, so in the end `offer[v]`
//!   holds the final distance and the smallest *tight* neighbour, whatever the thread
//!   count or timing. Parents come for free, deterministic (see [`crate::parents`]).
//! - Each thread owns `bins`: bin `i` lists vertices whose distance fell in
//!   `[iΔ, (i+1)Δ)` when the thread lowered it. Entries are never removed when a distance
//!   drops further (*lazy deletion*): a stale entry is recognised and skipped when its bin
//!   is processed, because the vertex's current distance belongs to an earlier bin.
//! - `outboxes[round % 2][t]`: thread `t`'s offer for a round, one of its bins moved there
//!   without copying and tagged with the bin's index; the round's frontier is the
//!   concatenation of the offers tagged with the round's bucket.
//!
//! # One round (all threads inside one `broadcast`, one [`SpinBarrier`] per round)
//!
//! 0. The round's bucket `b` is the smallest bin index offered in the previous round. A
//!    thread whose offer was a later bin takes it back into its bins.
//! 1. Every thread takes chunks of the frontier (the concatenation of the outboxes offered
//!    for `b`) from a shared cursor and relaxes the arcs of each vertex still in bucket `b`.
//! 2. *Bucket fusion*: while its own bin `b` is non-empty and small
//!    (< [`FUSION_THRESHOLD`]), a thread keeps processing it without a barrier. This
//!    removes most of the rounds of a Kronecker graph's long, thin tail.
//! 3. Each thread moves its first non-empty bin into its outbox for the next round (outboxes
//!    alternate by round parity), tags it with the bin's index and takes the atomic minimum
//!    of the tags; barrier. Offering before the minimum is known saves GAP's second barrier.
//!
//! The search ends when no thread has a non-empty bin. Distances are exact binary32
//! (see the crate docs).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

use rayon::ThreadPool;
use skein_generators::{Csr, SsspResult};

use crate::barrier::SpinBarrier;
use crate::compact::WeightedArc;

/// A thread keeps processing its own current bin without a barrier while it holds fewer
/// entries than this (GAP's `kBinSizeThreshold`).
const FUSION_THRESHOLD: usize = 1000;

/// Frontier vertices taken from the shared cursor at a time.
const CHUNK: usize = 64;

/// "No bin": the search is over.
const NO_BIN: usize = usize::MAX;

/// A distance and the vertex that offered it, ordered by distance then vertex.
#[inline]
fn pack(d: f32, from: u32) -> u64 {
    (u64::from(d.to_bits()) << 32) | u64::from(from)
}

#[inline]
fn distance(state: u64) -> f32 {
    f32::from_bits((state >> 32) as u32)
}

struct Shared<'a> {
    offsets: &'a [u64],
    arcs: &'a [WeightedArc],
    dist: Vec<AtomicU32>,
    offer: Vec<AtomicU64>,
    inv_delta: f32,
    /// `outboxes[i & 1][t]`: thread `t`'s offer for round `i`, a bin of index
    /// `tags[i & 1][t]` (`NO_BIN`: nothing).
    outboxes: [Vec<RwLock<Vec<u32>>>; 2],
    tags: [Vec<AtomicUsize>; 2],
    /// `bucket[i % 3]` is round `i`'s bucket; `bucket[(i + 1) % 3]` collects the next one
    /// (an atomic minimum of the offers); `bucket[(i + 2) % 3]` is reset for round `i + 2`.
    bucket: [AtomicUsize; 3],
    /// `cursor[i % 3]` hands out round `i`'s frontier.
    cursor: [AtomicUsize; 3],
    barrier: SpinBarrier,
}

impl Shared<'_> {
    #[inline]
    fn bin_of(&self, d: f32) -> usize {
        // Monotone in `d` (a product and a truncation), so bins order like distances.
        (d * self.inv_delta) as usize
    }

    /// Relaxes every arc of `u`, whose distance is `du`.
    #[inline]
    fn relax(&self, u: u32, du: f32, bins: &mut Vec<Vec<u32>>) {
        let (a, b) = (self.offsets[u as usize] as usize, self.offsets[u as usize + 1] as usize);
        for &WeightedArc { target: v, weight: w } in &self.arcs[a..b] {
            let nd = du + w;
            let bits = nd.to_bits();
            let slot = &self.dist[v as usize];
            let current = slot.load(Ordering::Relaxed);
            if bits > current {
                continue;
            }
            // Not worse: record the offer (a tie may still bring a smaller parent id).
            self.offer[v as usize].fetch_min(pack(nd, u), Ordering::Relaxed);
            if bits < current && bits < slot.fetch_min(bits, Ordering::Relaxed) {
                let bin = self.bin_of(nd);
                if bin >= bins.len() {
                    bins.resize_with(bin + 1, Vec::new);
                }
                bins[bin].push(v);
            }
        }
    }

    /// Relaxes `u` if it still belongs to bucket `bucket` (skips stale entries).
    #[inline]
    fn process(&self, u: u32, bucket: usize, bins: &mut Vec<Vec<u32>>) {
        let du = f32::from_bits(self.dist[u as usize].load(Ordering::Relaxed));
        if self.bin_of(du) >= bucket {
            self.relax(u, du, bins);
        }
    }

    fn thread_main(&self, me: usize) {
        let mut bins: Vec<Vec<u32>> = Vec::new();
        let mut round = 0usize;
        loop {
            let (p, r3) = (round & 1, round % 3);
            let bucket = self.bucket[r3].load(Ordering::Relaxed);
            if bucket == NO_BIN {
                break;
            }
            // An outbox holding a later bin than the round's bucket goes back to its bin.
            let tag = self.tags[p][me].load(Ordering::Relaxed);
            if tag != bucket && tag != NO_BIN {
                let mut outbox = self.outboxes[p][me].write().expect("outbox lock");
                if bins[tag].is_empty() {
                    std::mem::swap(&mut bins[tag], &mut *outbox);
                } else {
                    bins[tag].append(&mut outbox);
                }
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
                        for &u in &g[start.max(lo) - lo..end.min(hi) - lo] {
                            self.process(u, bucket, &mut bins);
                        }
                    }
                }
            }
            // Phase 2: bucket fusion.
            while bucket < bins.len()
                && !bins[bucket].is_empty()
                && bins[bucket].len() < FUSION_THRESHOLD
            {
                let current = std::mem::take(&mut bins[bucket]);
                for &u in &current {
                    self.process(u, bucket, &mut bins);
                }
                // Keep the larger allocation for reuse.
                if bins[bucket].is_empty() && current.capacity() > bins[bucket].capacity() {
                    bins[bucket] = current;
                    bins[bucket].clear();
                }
            }
            // Phase 3: offer this thread's first non-empty bin for the next round. Nobody
            // reads the other parity's outboxes until the barrier.
            {
                let q = 1 - p;
                let mut outbox = self.outboxes[q][me].write().expect("outbox lock");
                outbox.clear();
                match (bucket..bins.len()).find(|&i| !bins[i].is_empty()) {
                    Some(i) => {
                        std::mem::swap(&mut bins[i], &mut *outbox);
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
            self.barrier.wait();
        }
    }
}

/// Delta-stepping from `root` with bucket width `delta` on `pool`'s threads; `arcs` are
/// `csr`'s arcs in the compact layout.
pub(crate) fn delta_stepping(
    pool: &ThreadPool,
    csr: &Csr,
    arcs: &[WeightedArc],
    root: u32,
    delta: f32,
) -> SsspResult {
    let threads = pool.current_num_threads();
    let n = csr.num_vertices() as usize;
    let unreached = pack(f32::INFINITY, u32::MAX);
    let outbox = || (0..threads).map(|_| RwLock::new(Vec::new())).collect::<Vec<_>>();
    let tag = || (0..threads).map(|_| AtomicUsize::new(NO_BIN)).collect::<Vec<_>>();
    let mut outboxes = [outbox(), outbox()];
    outboxes[0][0].get_mut().expect("fresh lock").push(root);
    let tags = [tag(), tag()];
    tags[0][0].store(0, Ordering::Relaxed);
    let shared = Shared {
        offsets: csr.offsets(),
        arcs,
        dist: pool.install(|| {
            use rayon::prelude::*;
            (0..n).into_par_iter().map(|_| AtomicU32::new(f32::INFINITY.to_bits())).collect()
        }),
        offer: pool.install(|| {
            use rayon::prelude::*;
            (0..n).into_par_iter().map(|_| AtomicU64::new(unreached)).collect()
        }),
        inv_delta: 1.0 / delta,
        outboxes,
        tags,
        bucket: [AtomicUsize::new(0), AtomicUsize::new(NO_BIN), AtomicUsize::new(NO_BIN)],
        cursor: [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)],
        barrier: SpinBarrier::new(threads),
    };
    shared.dist[root as usize].store(0.0f32.to_bits(), Ordering::Relaxed);
    shared.offer[root as usize].store(pack(0.0, root), Ordering::Relaxed);
    pool.broadcast(|ctx| shared.thread_main(ctx.index()));
    let (dist, offered): (Vec<f32>, Vec<u32>) = pool.install(|| {
        use rayon::prelude::*;
        shared
            .offer
            .into_par_iter()
            .map(|s| s.into_inner())
            .map(|s| (distance(s), s as u32))
            .unzip()
    });
    let parent = crate::parents::sssp_parents_from_offers(pool, csr, root, &dist, &offered);
    SsspResult { root: u64::from(root), dist, parent }
}
