//! Weakly connected components, sequential (union-find) and rayon (a lock-free union-find:
//! every edge links the larger root under the smaller with a compare-and-swap, then every
//! vertex finds its root). Both label each vertex by the smallest vertex of its component.

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

/// Components of `csr` (`targets`: its targets as `u32`), on one thread, or on `pool`.
pub(crate) fn components(
    pool: Option<&rayon::ThreadPool>,
    csr: &Csr,
    targets: &[u32],
) -> ComponentsResult {
    let n = csr.num_vertices() as usize;
    let offsets = csr.offsets();
    let parent: Vec<AtomicU32> = (0..n as u32).map(AtomicU32::new).collect();
    let edges = |u: usize| {
        let p = &parent;
        for &v in &targets[offsets[u] as usize..offsets[u + 1] as usize] {
            // Each edge is stored both ways: link it once.
            if (v as usize) < u {
                link(p, u as u32, v);
            }
        }
    };
    let label = |v: usize| u64::from(find(&parent, v as u32));
    let label = match pool {
        None => {
            (0..n).for_each(edges);
            (0..n).map(label).collect()
        }
        Some(pool) => pool.install(|| {
            (0..n).into_par_iter().with_min_len(256).for_each(edges);
            (0..n).into_par_iter().with_min_len(1024).map(label).collect()
        }),
    };
    ComponentsResult { label }
}
