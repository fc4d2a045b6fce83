//! Parallel delta-stepping SSSP (Meyer and Sanders 2003), organised like GAP's `sssp.cc`
//! (Beamer, Asanović, Patterson: "The GAP Benchmark Suite", 2015).
//!
//! # Data
//!
//! - `dist[v]`: an `AtomicU32` holding the bits of a non-negative binary32 distance
//!   (`+inf` when unreached). For non-negative floats the bit patterns order like the
//!   values, so an integer compare-and-swap minimum is a float minimum.
//! - Each thread owns `bins`: bin `i` lists vertices whose distance fell in
//!   `[iΔ, (i+1)Δ)` when the thread lowered it. Entries are never removed when a distance
//!   drops further (*lazy deletion*): a stale entry is recognised and skipped when its bin
//!   is processed, because the vertex's current distance belongs to an earlier bin.
//! - `outbox[t]`: thread `t`'s share of the current round's frontier (its local bin for
//!   the round's bucket, moved there without copying).
//!
//! # One round (all threads inside one `broadcast`, [`SpinBarrier`] between phases)
//!
//! 1. Every thread takes chunks of the frontier (the concatenation of all outboxes) from a
//!    shared cursor and relaxes the arcs of each vertex still in the round's bucket.
//! 2. *Bucket fusion*: while its own bin for the current bucket is non-empty and small
//!    (< [`FUSION_THRESHOLD`]), a thread keeps processing it without a barrier. This
//!    removes most of the rounds of a Kronecker graph's long, thin tail.
//! 3. Each thread publishes the index of its first non-empty bin (atomic minimum); barrier.
//! 4. Each thread moves its bin of that smallest index into its outbox; barrier.
//!
//! The search ends when no thread has a non-empty bin. Distances are exact binary32
//! (see the crate docs); parents are chosen afterwards by [`crate::parents`].

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::RwLock;

use rayon::ThreadPool;
use skein_generators::{Csr, SsspResult};

use crate::barrier::SpinBarrier;

/// A thread keeps processing its own current bin without a barrier while it holds fewer
/// entries than this (GAP's `kBinSizeThreshold`).
const FUSION_THRESHOLD: usize = 1000;

/// Frontier vertices taken from the shared cursor at a time.
const CHUNK: usize = 64;

/// "No bin": the search is over.
const NO_BIN: usize = usize::MAX;

struct Shared<'a> {
    offsets: &'a [u64],
    targets: &'a [u64],
    weights: &'a [f32],
    dist: Vec<AtomicU32>,
    inv_delta: f32,
    outboxes: Vec<RwLock<Vec<u32>>>,
    /// `bucket[i & 1]` is round `i`'s bucket, `bucket[(i + 1) & 1]` collects the next one.
    bucket: [AtomicUsize; 2],
    /// `cursor[i & 1]` hands out round `i`'s frontier.
    cursor: [AtomicUsize; 2],
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
        for (&v, &w) in self.targets[a..b].iter().zip(&self.weights[a..b]) {
            let nd = du + w;
            let nd_bits = nd.to_bits();
            let slot = &self.dist[v as usize];
            if nd_bits < slot.load(Ordering::Relaxed) {
                let old = slot.fetch_min(nd_bits, Ordering::Relaxed);
                if nd_bits < old {
                    let bin = self.bin_of(nd);
                    if bin >= bins.len() {
                        bins.resize_with(bin + 1, Vec::new);
                    }
                    bins[bin].push(v as u32);
                }
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
            let bucket = self.bucket[round & 1].load(Ordering::Relaxed);
            if bucket == NO_BIN {
                break;
            }
            // Phase 1: the shared frontier.
            {
                let guards: Vec<_> =
                    self.outboxes.iter().map(|o| o.read().expect("outbox lock")).collect();
                let total: usize = guards.iter().map(|g| g.len()).sum();
                let cursor = &self.cursor[round & 1];
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
            // Phase 3: publish this thread's next bucket.
            let next = &self.bucket[(round + 1) & 1];
            if let Some(i) = (bucket..bins.len()).find(|&i| !bins[i].is_empty()) {
                next.fetch_min(i, Ordering::Relaxed);
            }
            self.barrier.wait();
            // Phase 4: everyone has read this round's bucket and cursor: reset them for
            // round + 2, and move the next bucket's bin into this thread's outbox.
            if me == 0 {
                self.bucket[round & 1].store(NO_BIN, Ordering::Relaxed);
                self.cursor[round & 1].store(0, Ordering::Relaxed);
            }
            let next = next.load(Ordering::Relaxed);
            {
                let mut outbox = self.outboxes[me].write().expect("outbox lock");
                outbox.clear();
                if next < bins.len() {
                    std::mem::swap(&mut bins[next], &mut *outbox);
                }
            }
            round += 1;
            self.barrier.wait();
        }
    }
}

/// Delta-stepping from `root` with bucket width `delta` on `pool`'s threads.
pub(crate) fn delta_stepping(pool: &ThreadPool, csr: &Csr, root: u32, delta: f32) -> SsspResult {
    let threads = pool.current_num_threads();
    let n = csr.num_vertices() as usize;
    let inf = f32::INFINITY.to_bits();
    let mut outboxes: Vec<RwLock<Vec<u32>>> =
        (0..threads).map(|_| RwLock::new(Vec::new())).collect();
    outboxes[0].get_mut().expect("fresh lock").push(root);
    let shared = Shared {
        offsets: csr.offsets(),
        targets: csr.targets(),
        weights: csr.weights(),
        dist: pool.install(|| {
            use rayon::prelude::*;
            (0..n).into_par_iter().map(|_| AtomicU32::new(inf)).collect()
        }),
        inv_delta: 1.0 / delta,
        outboxes,
        bucket: [AtomicUsize::new(0), AtomicUsize::new(NO_BIN)],
        cursor: [AtomicUsize::new(0), AtomicUsize::new(0)],
        barrier: SpinBarrier::new(threads),
    };
    shared.dist[root as usize].store(0, Ordering::Relaxed);
    pool.broadcast(|ctx| shared.thread_main(ctx.index()));
    let dist: Vec<f32> = shared.dist.into_iter().map(|d| f32::from_bits(d.into_inner())).collect();
    let parent = crate::parents::sssp_parents(pool, csr, root, &dist);
    SsspResult { root: u64::from(root), dist, parent }
}
