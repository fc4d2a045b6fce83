//! PageRank, sequential and rayon (pull): the update of `skein_generators::analytics`,
//! each vertex summing its neighbours' contributions in row order, so both engines (and
//! Skein's) give the same ranks bit for bit.

use rayon::prelude::*;
use skein_generators::analytics::{self, PageRankParams, PageRankResult};
use skein_generators::Csr;

/// The arcs of `v` in `targets` (the CSR's order).
#[inline]
fn row<'a>(csr: &Csr, targets: &'a [u32], v: usize) -> &'a [u32] {
    let o = csr.offsets();
    &targets[o[v] as usize..o[v + 1] as usize]
}

/// PageRank on `csr` (`targets`: its targets as `u32`), on one thread, or on `pool`.
pub(crate) fn pagerank(
    pool: Option<&rayon::ThreadPool>,
    csr: &Csr,
    targets: &[u32],
    params: &PageRankParams,
) -> PageRankResult {
    let n = csr.num_vertices();
    let nu = n as usize;
    let degree = |v: usize| row(csr, targets, v).len();
    let k = match pool {
        None => (0..nu).filter(|&v| degree(v) == 0).count(),
        Some(p) => p.install(|| (0..nu).into_par_iter().filter(|&v| degree(v) == 0).count()),
    } as u64;
    let mut rank = vec![1.0 / n as f64; nu];
    let mut contrib = vec![0.0f64; nu];
    let (mut r_iso, mut iterations, mut l1) = (1.0 / n as f64, 0u32, f64::INFINITY);
    let d = params.damping;
    while iterations < params.max_iterations {
        let dangle = analytics::dangle(n, k, r_iso);
        {
            let rank = &rank;
            let fill = |(v, c): (usize, &mut f64)| {
                let deg = degree(v);
                *c = if deg > 0 { rank[v] / deg as f64 } else { 0.0 };
            };
            match pool {
                None => contrib.iter_mut().enumerate().for_each(fill),
                Some(p) => p.install(|| {
                    contrib.par_iter_mut().enumerate().with_min_len(1024).for_each(fill)
                }),
            }
        }
        let contrib = &contrib;
        let step = |(v, r): (usize, &mut f64)| {
            let mut sum = 0.0f64;
            for &u in row(csr, targets, v) {
                sum += contrib[u as usize];
            }
            let new = analytics::update(d, n, sum, dangle);
            let change = analytics::fixed(new - *r);
            *r = new;
            change
        };
        let sum: u128 = match pool {
            None => rank.iter_mut().enumerate().map(step).sum(),
            Some(p) => {
                p.install(|| rank.par_iter_mut().enumerate().with_min_len(1024).map(step).sum())
            }
        };
        r_iso = analytics::update(d, n, 0.0, dangle);
        iterations += 1;
        l1 = analytics::from_fixed(sum);
        if l1 < params.tolerance {
            break;
        }
    }
    PageRankResult { rank, iterations, l1 }
}
