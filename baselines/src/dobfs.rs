//! Direction-optimizing parallel BFS (Beamer, Asanović, Patterson, SC 2012), organised like
//! GAP's `bfs.cc`.
//!
//! - `parent[v]` is an `AtomicU64`. An unvisited vertex holds `UNVISITED | degree(v)`, so
//!   the thread that claims it (compare-and-swap to its parent) learns the degree for free:
//!   the sum of the claimed degrees (`scout`) is the next frontier's arc count. A visited
//!   vertex holds its level in the high half and its parent in the low one: a claim writes
//!   one word, no level array is touched during the search, and the returned vectors are
//!   written from these words in one pass at the end.
//! - Top-down step: threads take 64-vertex chunks of the frontier queue and claim
//!   unvisited neighbours; each keeps the vertices it claimed in a local buffer and appends
//!   it to the shared queue (one `fetch_add` per buffer, no allocation per level).
//! - Bottom-up step: threads take chunks of 64-aligned words of the vertex range; every
//!   unvisited vertex scans its neighbours and stops at the first one in the frontier
//!   bitmap. A thread owns whole words of the next bitmap, so it stores them without atomics.
//!   The unvisited vertices come from a bitmap of those still to do (`todo`: unvisited, with
//!   at least one arc; set when the search starts, a bit cleared by the top-down claim or by
//!   the bottom-up step that reaches the vertex), 64 to a word: the visited vertices and those
//!   without arcs (a third of a Kronecker graph's, never reached) cost nothing.
//! - The frontier queue and the bitmaps are kept by the [`crate::Solver`] for its next
//!   search ([`Scratch`]); the parent and level arrays, which the search returns, are
//!   written into the caller's earlier result when it fits ([`crate::Solver::bfs_into`]):
//!   a search then allocates nothing and faults no fresh pages.
//! - Switching (alpha, beta as in GAP): go bottom-up when the frontier's arcs exceed the
//!   unexplored arcs / alpha (never when alpha is 0); go back top-down when the frontier
//!   stops growing and holds fewer than `vertices / beta` vertices.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;
use rayon::ThreadPool;
use skein_generators::{BfsResult, Csr, NO_PARENT, UNREACHED_LEVEL};

use crate::bitmap::Bitmap;
use crate::options::Options;

/// Marks an unvisited vertex in `parent`; the low bits hold its degree.
const UNVISITED: u64 = 1 << 63;
/// Top-down chunk (frontier vertices).
const TD_CHUNK: usize = 64;
/// Bottom-up chunk (bitmap words of 64 vertices).
const BU_CHUNK_WORDS: usize = 16;
/// Local buffer flushed to the shared queue when it reaches this length.
const LOCAL_QUEUE: usize = 1 << 12;

struct Search<'a> {
    offsets: &'a [u64],
    targets: &'a [u32],
    /// `UNVISITED | degree`, then `level << 32 | parent` (see the module docs).
    parent: Vec<AtomicU64>,
    /// Frontier queue: each vertex enters it at most once, so `n` slots suffice.
    queue: Vec<AtomicU32>,
    tail: AtomicUsize,
    /// The unvisited vertices with arcs (see the module docs).
    todo: Bitmap,
}

impl Search<'_> {
    #[inline]
    fn neighbors(&self, u: usize) -> &[u32] {
        &self.targets[self.offsets[u] as usize..self.offsets[u + 1] as usize]
    }

    fn flush(&self, local: &mut Vec<u32>) {
        let at = self.tail.fetch_add(local.len(), Ordering::Relaxed);
        for (slot, &v) in self.queue[at..at + local.len()].iter().zip(local.iter()) {
            slot.store(v, Ordering::Relaxed);
        }
        local.clear();
    }

    /// Expands `queue[start..end]`; returns the claimed vertices' total degree.
    fn top_down(&self, pool: &ThreadPool, start: usize, end: usize, depth: u32) -> u64 {
        let cursor = AtomicUsize::new(start);
        let scouts = pool.broadcast(|_| {
            let mut local = Vec::with_capacity(LOCAL_QUEUE);
            let mut scout = 0u64;
            loop {
                let s = cursor.fetch_add(TD_CHUNK, Ordering::Relaxed);
                if s >= end {
                    break;
                }
                for slot in &self.queue[s..(s + TD_CHUNK).min(end)] {
                    let u = slot.load(Ordering::Relaxed);
                    for &v in self.neighbors(u as usize) {
                        let p = &self.parent[v as usize];
                        let cur = p.load(Ordering::Relaxed);
                        if cur & UNVISITED != 0
                            && p.compare_exchange(
                                cur,
                                u64::from(depth) << 32 | u64::from(u),
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                        {
                            self.todo.clear_atomic(v as usize);
                            scout += cur & !UNVISITED;
                            local.push(v);
                            if local.len() == LOCAL_QUEUE {
                                self.flush(&mut local);
                            }
                        }
                    }
                }
            }
            self.flush(&mut local);
            scout
        });
        scouts.into_iter().sum()
    }

    /// One bottom-up step from `front` into `next`; returns how many vertices it reached.
    fn bottom_up(&self, pool: &ThreadPool, front: &Bitmap, next: &Bitmap, depth: u32) -> usize {
        let words = next.words();
        let cursor = AtomicUsize::new(0);
        let awake = pool.broadcast(|_| {
            let mut awake = 0usize;
            loop {
                let w0 = cursor.fetch_add(BU_CHUNK_WORDS, Ordering::Relaxed);
                if w0 >= words {
                    break;
                }
                for w in w0..(w0 + BU_CHUNK_WORDS).min(words) {
                    // This thread is the only one to touch word `w` of `todo` in this step.
                    let todo = self.todo.word(w);
                    let (mut left, mut bits) = (todo, 0u64);
                    while left != 0 {
                        let i = left.trailing_zeros();
                        left &= left - 1;
                        let u = w * 64 + i as usize;
                        for &v in self.neighbors(u) {
                            if front.get(v as usize) {
                                let word = u64::from(depth) << 32 | u64::from(v);
                                self.parent[u].store(word, Ordering::Relaxed);
                                bits |= 1 << i;
                                awake += 1;
                                break;
                            }
                        }
                    }
                    next.store_word(w, bits);
                    if bits != 0 {
                        self.todo.store_word(w, todo & !bits);
                    }
                }
            }
            awake
        });
        awake.into_iter().sum()
    }

    fn queue_to_bitmap(&self, pool: &ThreadPool, start: usize, end: usize, bitmap: &Bitmap) {
        pool.install(|| {
            let words = bitmap.words();
            (0..words)
                .into_par_iter()
                .with_min_len(4096)
                .for_each(|w| bitmap.clear_words(w..w + 1));
            self.queue[start..end]
                .par_iter()
                .with_min_len(1024)
                .for_each(|v| bitmap.set_atomic(v.load(Ordering::Relaxed) as usize));
        });
    }

    fn bitmap_to_queue(&self, pool: &ThreadPool, bitmap: &Bitmap) {
        let words = bitmap.words();
        let cursor = AtomicUsize::new(0);
        pool.broadcast(|_| {
            let mut local = Vec::with_capacity(LOCAL_QUEUE);
            loop {
                let w0 = cursor.fetch_add(BU_CHUNK_WORDS * 4, Ordering::Relaxed);
                if w0 >= words {
                    break;
                }
                for w in w0..(w0 + BU_CHUNK_WORDS * 4).min(words) {
                    let mut bits = bitmap.word(w);
                    while bits != 0 {
                        local.push((w * 64) as u32 + bits.trailing_zeros());
                        bits &= bits - 1;
                        if local.len() == LOCAL_QUEUE {
                            self.flush(&mut local);
                        }
                    }
                }
            }
            self.flush(&mut local);
        });
    }
}

/// The arrays a search uses but does not return, kept by the caller for the next search
/// of the same graph (no fresh pages to fault in): the frontier queue and the three
/// bitmaps. Nothing needs clearing: a search writes every queue slot it reads, clears the
/// frontier bitmap before filling it, stores every word of the next one and of `todo`
/// when it starts.
#[derive(Debug)]
pub(crate) struct Scratch {
    queue: Vec<AtomicU32>,
    front: Bitmap,
    next: Bitmap,
    todo: Bitmap,
}

/// Direction-optimizing BFS from `root` on `pool`'s threads into `out`; `targets` are
/// `csr`'s targets as `u32`. Uses the arrays in `scratch` when they fit the graph, and
/// leaves its own there; `out`'s vectors (an earlier result's) are overwritten in place
/// when they have one entry per vertex (no fresh pages), otherwise replaced.
pub(crate) fn direction_optimizing(
    pool: &ThreadPool,
    csr: &Csr,
    targets: &[u32],
    root: u32,
    options: &Options,
    scratch: &mut Option<Scratch>,
    out: &mut BfsResult,
) {
    let n = csr.num_vertices() as usize;
    let offsets = csr.offsets();
    let kept = scratch.take().filter(|s| s.queue.len() == n);
    let Scratch { queue, mut front, mut next, todo } = kept.unwrap_or_else(|| Scratch {
        queue: pool.install(|| (0..n).into_par_iter().map(|_| AtomicU32::new(0)).collect()),
        front: Bitmap::new(n),
        next: Bitmap::new(n),
        todo: Bitmap::new(n),
    });
    let (mut parent, mut level) = (std::mem::take(&mut out.parent), std::mem::take(&mut out.level));
    if parent.len() != n || level.len() != n {
        // Zeroed allocations: the parallel passes below map their pages.
        (parent, level) = (vec![0; n], vec![0; n]);
    }
    pool.install(|| {
        parent.par_chunks_mut(64).with_min_len(1 << 8).enumerate().for_each(|(w, ps)| {
            let mut bits = 0u64;
            for (i, p) in ps.iter_mut().enumerate() {
                let v = w * 64 + i;
                let degree = offsets[v + 1] - offsets[v];
                *p = UNVISITED | degree;
                bits |= u64::from(degree > 0) << i;
            }
            todo.store_word(w, bits);
        })
    });
    // The same allocation as atomics (same size and alignment: `collect` reuses it).
    let parent: Vec<AtomicU64> = parent.into_iter().map(AtomicU64::new).collect();
    let s = Search { offsets, targets, parent, queue, tail: AtomicUsize::new(1), todo };
    s.parent[root as usize].store(u64::from(root), Ordering::Relaxed);
    s.todo.clear_atomic(root as usize);
    s.queue[0].store(root, Ordering::Relaxed);

    let (mut start, mut end) = (0usize, 1usize);
    let mut edges_to_check = csr.num_arcs();
    let mut scout = csr.degree(u64::from(root));
    let mut depth = 0u32;
    while start < end {
        // A level shares its word with the UNVISITED bit: 31 bits (a caught panic, an
        // error of the solver, beyond; only a graph of 2^31 vertices or more gets there).
        assert!(depth < (1 << 31) - 2, "BFS levels of 2^31 and more are not yet supported");
        if options.alpha > 0 && scout > edges_to_check / options.alpha {
            s.queue_to_bitmap(pool, start, end, &front);
            let mut awake = end - start;
            start = end;
            loop {
                let old = awake;
                depth += 1;
                awake = s.bottom_up(pool, &front, &next, depth);
                std::mem::swap(&mut front, &mut next);
                if !(awake >= old || awake as u64 > n as u64 / options.beta) {
                    break;
                }
            }
            s.bitmap_to_queue(pool, &front);
            end = s.tail.load(Ordering::Relaxed);
            scout = 1;
        } else {
            edges_to_check = edges_to_check.saturating_sub(scout);
            depth += 1;
            scout = s.top_down(pool, start, end, depth);
            start = end;
            end = s.tail.load(Ordering::Relaxed);
        }
    }
    // Each word becomes the parent in place and the level beside it (unvisited: NO_PARENT
    // and UNREACHED_LEVEL); the atomics are unwrapped in place (same size and alignment,
    // so `collect` reuses the allocation: no new pages to fault in inside the timed search).
    let Search { mut parent, queue, todo, .. } = s;
    *scratch = Some(Scratch { queue, front, next, todo });
    pool.install(|| {
        parent.par_iter_mut().zip(level.par_iter_mut()).with_min_len(1 << 14).for_each(|(p, l)| {
            let p = p.get_mut();
            if *p & UNVISITED != 0 {
                (*p, *l) = (NO_PARENT, UNREACHED_LEVEL);
            } else {
                (*p, *l) = (*p & u64::from(u32::MAX), (*p >> 32) as u32);
            }
        })
    });
    out.parent = parent.into_iter().map(AtomicU64::into_inner).collect();
    out.level = level;
    out.root = u64::from(root);
}
