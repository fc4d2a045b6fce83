//! Weakly connected components, sequential (union-find) and rayon (Afforest: Sutton, Ben-Nun
//! and Barak, IPDPS 2018, on a lock-free union-find). Both label each vertex by the smallest
//! vertex of its component.
//!
//! The rayon union-find links the larger root under the smaller with a compare-and-swap
//! (roots are the minima of their sets, so a vertex's root is its label). Afforest links
//! only each vertex's first [`SAMPLE_ROUNDS`] arcs, compresses, guesses the largest
//! component from [`SAMPLES`] vertices drawn at random (fixed seed), then links every arc
//! of the vertices *outside* it; the vertices in it are skipped, since each arc leaving it
//! is linked from its other end (the graph is symmetric). On a Kronecker graph that skips
//! most arcs.

use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;
use skein_generators::analytics::ComponentsResult;
use skein_generators::Csr;

/// The root of `x` (halving the path on the way: each step only points a vertex to an
/// ancestor, so concurrent finds and links stay a forest whose roots are minima).
#[inline]
fn find(p: &[AtomicU32], mut x: u32) -> u32 {
    loop {
        let px = p[x as usize].load(Ordering::Relaxed);
        if px == x {
            return x;
        }
        let gp = p[px as usize].load(Ordering::Relaxed);
        if gp != px {
            // Halving: x skips to its grandparent (an ancestor: parents only decrease).
            let _ = p[x as usize].compare_exchange(px, gp, Ordering::Relaxed, Ordering::Relaxed);
        }
        x = gp;
    }
}

/// Joins the components of `a` and `b`: the larger root goes under the smaller.
#[inline]
fn link(p: &[AtomicU32], a: u32, b: u32) {
    let (mut a, mut b) = (a, b);
    loop {
        a = find(p, a);
        b = find(p, b);
        if a == b {
            return;
        }
        let (hi, lo) = if a > b { (a, b) } else { (b, a) };
        if p[hi as usize].compare_exchange(hi, lo, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return;
        }
    }
}

/// Arcs per vertex linked before the largest component is guessed (GAP's `cc` uses 2).
const SAMPLE_ROUNDS: usize = 2;
/// Vertices drawn to guess the largest component (GAP's `cc` uses 1024).
const SAMPLES: usize = 1024;

/// Components of `csr` (`targets`: its targets as `u32`), on one thread, or on `pool`.
pub(crate) fn components(
    pool: Option<&rayon::ThreadPool>,
    csr: &Csr,
    targets: &[u32],
) -> ComponentsResult {
    let n = csr.num_vertices() as usize;
    let offsets = csr.offsets();
    let parent: Vec<AtomicU32> = (0..n as u32).map(AtomicU32::new).collect();
    let row = |u: usize| &targets[offsets[u] as usize..offsets[u + 1] as usize];
    let label = |v: usize| u64::from(find(&parent, v as u32));
    let Some(pool) = pool else {
        for u in 0..n {
            // Each edge is stored both ways: link it once.
            row(u).iter().filter(|&&v| (v as usize) < u).for_each(|&v| link(&parent, u as u32, v));
        }
        return ComponentsResult { label: (0..n).map(label).collect() };
    };
    let compress = || {
        (0..n).into_par_iter().with_min_len(1024).for_each(|v| {
            let r = find(&parent, v as u32);
            parent[v].store(r, Ordering::Relaxed);
        })
    };
    let label = pool.install(|| {
        for i in 0..SAMPLE_ROUNDS {
            (0..n).into_par_iter().with_min_len(1024).for_each(|u| {
                if let Some(&v) = row(u).get(i) {
                    link(&parent, u as u32, v);
                }
            });
            compress();
        }
        let largest = if n == 0 { 0 } else { most_frequent(&parent, n) };
        (0..n).into_par_iter().with_min_len(256).for_each(|u| {
            if parent[u].load(Ordering::Relaxed) == largest {
                return;
            }
            let rest = row(u).get(SAMPLE_ROUNDS..).unwrap_or(&[]);
            rest.iter().for_each(|&v| link(&parent, u as u32, v));
        });
        (0..n).into_par_iter().with_min_len(1024).map(label).collect()
    });
    ComponentsResult { label }
}

/// The most frequent parent among [`SAMPLES`] vertices drawn at random (fixed seed).
fn most_frequent(parent: &[AtomicU32], n: usize) -> u32 {
    let mut rng = skein_generators::splitmix::SplitMix64::new(0x5eed, 0);
    let mut drawn: Vec<u32> = (0..SAMPLES)
        .map(|_| parent[rng.below(n as u64) as usize].load(Ordering::Relaxed))
        .collect();
    drawn.sort_unstable();
    let mut best = (0, drawn[0]);
    for run in drawn.chunk_by(|a, b| a == b) {
        if run.len() > best.0 {
            best = (run.len(), run[0]);
        }
    }
    best.1
}
