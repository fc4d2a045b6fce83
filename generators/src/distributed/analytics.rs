//! PageRank and connected components results spread over the ranks, checked on the ranks'
//! rows ([`LocalCsr`]): no rank holds the whole graph. The rules are those of
//! [`crate::analytics`] on the whole graph, and every rank returns the same verdict.
//!
//! # PageRank
//!
//! [`pagerank_distributed`] is a reference written without the runtime: bulk-synchronous
//! iterations over the ranks' rows, each gathering every vertex's contribution
//! ([`all_gather_u64`], `8·n` bytes on every rank, as the kernel's own contribution array)
//! and summing each row in the graph's order with the expression every engine evaluates
//! ([`analytics::update`]). So its ranks are bit for bit those of the sequential engine, and
//! it stops after the same iteration (the L1 change summed in 64.64 fixed point, exactly, over
//! the ranks). [`validate_pagerank_distributed`] compares a rank's slice with it: every rank
//! within the tolerance, the same number of iterations, and the ranks summing to 1 within
//! 1e-6.
//!
//! # Connected components
//!
//! [`validate_components_distributed`] checks, without computing the components again:
//!
//! 1. every edge joins equal labels (the far ends' labels gathered, or asked from their
//!    owners in rounds when `8·n` bytes exceed the budget);
//! 2. every label is at most its vertex, and the vertex named by a label carries that label
//!    itself;
//! 3. every vertex is reached from the vertices that are their own label ([`reach_from`]
//!    over the rows).
//!
//! Together they say that each label is the smallest vertex of its component: by 1 a
//! component has one label `L`; by 3 it holds a vertex `s` with label `s`, so `s = L` lies in
//! the component; by 2 no vertex of it is below `L`. A failure names the smallest failing
//! vertex over the ranks (the ranks agree on it), as the one-process check scans vertices in
//! order.

use crate::analytics::{self, AnalyticsError, PageRankParams};

use super::collective::{all_gather_u64, all_reduce, fetch, reach_from, Layout};
use super::{DistError, Exchange, LocalCsr};

/// This rank's slice of a PageRank result.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalPageRank {
    /// The first vertex of the slice (this rank's range).
    pub first: u64,
    /// Rank per vertex of the slice.
    pub rank: Vec<f64>,
    /// Iterations run (the same on every rank).
    pub iterations: u32,
    /// The L1 change of the last iteration (the same on every rank).
    pub l1: f64,
}

/// Why a distributed PageRank or components check did not accept a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DistAnalyticsError {
    /// The result is wrong (the same error on every rank).
    #[error(transparent)]
    Invalid(#[from] AnalyticsError),
    /// The exchange between ranks failed, or the ranks' rows do not tile the vertices.
    #[error(transparent)]
    Dist(#[from] DistError),
}

/// PageRank on the ranks' rows (module docs): this rank's slice, bit for bit the sequential
/// engine's. Collective; gathers `8·n` bytes per iteration on every rank, in rounds of
/// `round` words per pair of ranks.
pub fn pagerank_distributed<E: Exchange + ?Sized>(
    g: &LocalCsr,
    params: &PageRankParams,
    round: usize,
    ex: &mut E,
) -> Result<LocalPageRank, DistError> {
    let layout = Layout::gather(g, ex)?;
    let n = layout.num_vertices();
    let len = layout.local_len();
    let first = layout.first();
    let offsets = g.offsets();
    let targets = g.targets();
    let degree = |i: usize| offsets[i + 1] - offsets[i];
    let isolated = (0..len).filter(|&i| degree(i) == 0).count() as u64;
    let k = all_reduce(ex, &[isolated], u64::wrapping_add)?[0];
    let init = if n == 0 { 0.0 } else { 1.0 / n as f64 };
    let mut rank = vec![init; len];
    let (mut r_iso, mut iterations, mut l1) = (init, 0u32, f64::INFINITY);
    let d = params.damping;
    while iterations < params.max_iterations {
        let dangle = analytics::dangle(n, k, r_iso);
        let contrib = all_gather_u64(
            ex,
            &layout,
            |i| {
                let deg = degree(i);
                let c = if deg > 0 { rank[i] / deg as f64 } else { 0.0 };
                c.to_bits()
            },
            round,
        )?;
        let mut change = 0u128;
        for (i, r) in rank.iter_mut().enumerate() {
            let mut sum = 0.0f64;
            for &u in &targets[offsets[i] as usize..offsets[i + 1] as usize] {
                sum += f64::from_bits(contrib[u as usize]);
            }
            let new = analytics::update(d, n, sum, dangle);
            change = change.wrapping_add(analytics::fixed(new - *r));
            *r = new;
        }
        r_iso = analytics::update(d, n, 0.0, dangle);
        iterations += 1;
        l1 = analytics::from_fixed(sum_u128(ex, change)?);
        if l1 < params.tolerance {
            break;
        }
    }
    Ok(LocalPageRank { first, rank, iterations, l1 })
}

/// `x` summed over the ranks, exactly (in 32-bit limbs, each summed in 64 bits).
fn sum_u128<E: Exchange + ?Sized>(ex: &mut E, x: u128) -> Result<u128, DistError> {
    let limbs: Vec<u64> = (0..4).map(|k| (x >> (32 * k)) as u64 & 0xffff_ffff).collect();
    let sums = all_reduce(ex, &limbs, u64::wrapping_add)?;
    Ok(sums
        .iter()
        .enumerate()
        .fold(0u128, |acc, (k, &s)| acc.wrapping_add(u128::from(s) << (32 * k))))
}

/// Checks this rank's slice `rank` of a PageRank result that ran `iterations` iterations
/// against [`pagerank_distributed`] with the same `params`: every rank within `tolerance` of
/// the reference's, the same iterations, the ranks summing to 1 within 1e-6. Collective;
/// the same verdict on every rank.
pub fn validate_pagerank_distributed<E: Exchange + ?Sized>(
    g: &LocalCsr,
    rank: &[f64],
    iterations: u32,
    params: &PageRankParams,
    tolerance: f64,
    round: usize,
    ex: &mut E,
) -> Result<(), DistAnalyticsError> {
    let want = pagerank_distributed(g, params, round, ex)?;
    let first = want.first;
    let mine = if rank.len() != want.rank.len() {
        Some(Failure::length(first, rank.len(), want.rank.len()))
    } else {
        rank.iter().zip(&want.rank).enumerate().find_map(|(i, (&a, &b))| {
            ((a - b).abs() > tolerance || a.is_nan()).then(|| Failure {
                key: first + i as u64,
                error: AnalyticsError::Rank {
                    vertex: first + i as u64,
                    got: a,
                    want: b,
                    tolerance,
                },
            })
        })
    };
    agree(ex, mine)?;
    // The same iteration count (each rank's, the largest compared on every rank).
    let most = all_reduce(ex, &[u64::from(iterations)], u64::max)?[0];
    let got = u32::try_from(most).unwrap_or(u32::MAX);
    if got != want.iterations {
        return Err(AnalyticsError::Iterations { got, want: want.iterations }.into());
    }
    // The sum, from each rank's partial sum (in rank order).
    let (r, ranks) = (ex.rank(), ex.ranks());
    let mut partial = vec![0u64; ranks];
    partial[r] = rank.iter().sum::<f64>().to_bits();
    let partials = all_reduce(ex, &partial, |a, b| a | b)?;
    let sum: f64 = partials.iter().map(|&b| f64::from_bits(b)).sum();
    if (sum - 1.0).abs() > 1e-6 || sum.is_nan() {
        return Err(AnalyticsError::Sum(sum).into());
    }
    Ok(())
}

/// Checks this rank's slice `label` of a components result (module docs). Collective; asks
/// the owners in rounds of `round` ids when the labels of every vertex (`8·n` bytes) exceed
/// `gather_bytes` (e.g. [`super::validate::DEFAULT_GATHER_BYTES`]). The same verdict on every
/// rank.
pub fn validate_components_distributed<E: Exchange + ?Sized>(
    g: &LocalCsr,
    label: &[u64],
    round: usize,
    gather_bytes: u64,
    ex: &mut E,
) -> Result<(), DistAnalyticsError> {
    let layout = Layout::gather(g, ex)?;
    let (n, len, first) = (layout.num_vertices(), layout.local_len(), layout.first());
    let round = round.max(1);
    let mine = (label.len() != len).then(|| Failure::length(first, label.len(), len));
    agree(ex, mine)?;
    let offsets = g.offsets();
    let targets = g.targets();
    // The labels of the far ends, gathered once, or asked in rounds.
    let gathered = if n.saturating_mul(8) <= gather_bytes {
        Some(all_gather_u64(ex, &layout, |i| label[i], round)?)
    } else {
        None
    };
    let lookup = |ex: &mut E, ids: &[u64]| -> Result<Vec<u64>, DistError> {
        match &gathered {
            Some(all) => Ok(ids.iter().map(|&v| all[v as usize]).collect()),
            None => fetch(ex, &layout, ids, |i| label[i]),
        }
    };
    // The work of every rank in rounds of `round` items, the same count on every rank.
    let rounds = |ex: &mut E, items: usize| -> Result<usize, DistError> {
        if gathered.is_some() {
            return Ok(usize::from(items > 0).max(1));
        }
        Ok(all_reduce(ex, &[items.div_ceil(round) as u64], u64::max)?[0] as usize)
    };

    // 2. Labels at most their vertex, and the vertex named by a label labelled by it.
    let mut fail: Option<Failure> = None;
    let plan = rounds(ex, len)?;
    let per = if gathered.is_some() { len.max(1) } else { round };
    for t in 0..plan {
        let span = (t * per).min(len)..((t + 1) * per).min(len);
        let ids: Vec<u64> = if fail.is_some() {
            Vec::new()
        } else {
            span.clone().map(|i| label[i].min(n.saturating_sub(1))).collect()
        };
        let named = lookup(ex, &ids)?;
        if fail.is_some() {
            continue;
        }
        for (k, i) in span.enumerate() {
            let (v, l) = (first + i as u64, label[i]);
            let error = if l > v {
                AnalyticsError::Above { vertex: v, label: l }
            } else if named[k] != l {
                AnalyticsError::Named { vertex: v, label: l, named: named[k] }
            } else {
                continue;
            };
            fail = Some(Failure { key: v, error });
            break;
        }
    }
    agree(ex, fail.take())?;

    // 1. Every edge joins equal labels, arc by arc in row order.
    let arcs = targets.len();
    let plan = rounds(ex, arcs)?;
    let per = if gathered.is_some() { arcs.max(1) } else { round };
    let mut row = 0usize;
    for t in 0..plan {
        let span = (t * per).min(arcs)..((t + 1) * per).min(arcs);
        let ids: Vec<u64> =
            if fail.is_some() { Vec::new() } else { targets[span.clone()].to_vec() };
        let far = lookup(ex, &ids)?;
        if fail.is_some() {
            continue;
        }
        for (k, a) in span.enumerate() {
            while offsets[row + 1] as usize <= a {
                row += 1;
            }
            let (u, lu, lv) = (first + row as u64, label[row], far[k]);
            if lu != lv {
                fail = Some(Failure {
                    key: u,
                    error: AnalyticsError::Edge { u, v: targets[a], lu, lv },
                });
                break;
            }
        }
    }
    agree(ex, fail.take())?;

    // 3. Every vertex reached from the vertices that are their own label.
    let seeds: Vec<usize> = (0..len).filter(|&i| label[i] == first + i as u64).collect();
    let mut seen = vec![false; len];
    reach_from(ex, &layout, offsets, targets, &seeds, &mut seen, round)?;
    let mine = seen.iter().position(|&s| !s).map(|i| {
        let v = first + i as u64;
        Failure { key: v, error: AnalyticsError::Outside { vertex: v, label: label[i] } }
    });
    agree(ex, mine)?;
    Ok(())
}

/// A rank's first failure: the vertex it is about, and the error.
#[derive(Debug)]
struct Failure {
    key: u64,
    error: AnalyticsError,
}

impl Failure {
    fn length(first: u64, got: usize, want: usize) -> Failure {
        Failure { key: first, error: AnalyticsError::Length { got, want } }
    }

    /// The failure as 6 words: key, kind, 4 fields.
    fn words(&self) -> [u64; 6] {
        use AnalyticsError as A;
        let f = |x: f64| x.to_bits();
        let (kind, a, b, c, d) = match self.error {
            A::Length { got, want } => (0, got as u64, want as u64, 0, 0),
            A::Rank { vertex, got, want, tolerance } => (1, vertex, f(got), f(want), f(tolerance)),
            A::Sum(s) => (2, f(s), 0, 0, 0),
            A::Edge { u, v, lu, lv } => (3, u, v, lu, lv),
            A::Label { vertex, label, want } => (4, vertex, label, want, 0),
            A::Outside { vertex, label } => (5, vertex, label, 0, 0),
            A::Above { vertex, label } => (6, vertex, label, 0, 0),
            A::Named { vertex, label, named } => (7, vertex, label, named, 0),
            A::Iterations { got, want } => (8, u64::from(got), u64::from(want), 0, 0),
        };
        [self.key, kind, a, b, c, d]
    }

    fn of(w: &[u64]) -> AnalyticsError {
        use AnalyticsError as A;
        let f = f64::from_bits;
        match w[1] {
            0 => A::Length { got: w[2] as usize, want: w[3] as usize },
            1 => A::Rank { vertex: w[2], got: f(w[3]), want: f(w[4]), tolerance: f(w[5]) },
            2 => A::Sum(f(w[2])),
            3 => A::Edge { u: w[2], v: w[3], lu: w[4], lv: w[5] },
            4 => A::Label { vertex: w[2], label: w[3], want: w[4] },
            5 => A::Outside { vertex: w[2], label: w[3] },
            6 => A::Above { vertex: w[2], label: w[3] },
            7 => A::Named { vertex: w[2], label: w[3], named: w[4] },
            _ => A::Iterations { got: w[2] as u32, want: w[3] as u32 },
        }
    }
}

/// The ranks agree on the failure of the smallest key, if any rank failed (collective).
fn agree<E: Exchange + ?Sized>(
    ex: &mut E,
    mine: Option<Failure>,
) -> Result<(), DistAnalyticsError> {
    let (r, ranks) = (ex.rank(), ex.ranks());
    // Each rank writes its 6 words at its own place; the others are 0 there (OR combines).
    let mut words = vec![0u64; 7 * ranks];
    if let Some(f) = &mine {
        words[7 * r] = 1;
        words[7 * r + 1..7 * r + 7].copy_from_slice(&f.words());
    }
    let all = all_reduce(ex, &words, |a, b| a | b)?;
    let best = all.chunks_exact(7).filter(|w| w[0] == 1).min_by_key(|w| w[1]);
    match best {
        Some(w) => Err(Failure::of(&w[1..]).into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::MemExchange;
    use crate::Csr;

    /// A graph of three components (0-1-2, 3-4, 5 alone) plus an isolated vertex, 7 in all.
    fn small() -> Csr {
        Csr::from_edges(crate::graph::EdgeList {
            num_vertices: 7,
            src: vec![0, 1, 3, 2],
            dst: vec![1, 2, 4, 0],
            weights: Some(vec![0.5, 0.5, 0.5, 0.25]),
        })
    }

    /// Runs `f` on every rank of `bounds` (a `MemExchange` group) over `g`'s rows.
    fn on_ranks<T: Send>(
        g: &Csr,
        bounds: &[u64],
        f: impl Fn(&LocalCsr, &mut MemExchange) -> T + Sync,
    ) -> Vec<T> {
        std::thread::scope(|s| {
            let handles: Vec<_> = MemExchange::group(bounds.len() - 1)
                .into_iter()
                .map(|mut ex| {
                    let f = &f;
                    s.spawn(move || {
                        let r = ex.rank();
                        let local = LocalCsr::from_csr(g, bounds[r]..bounds[r + 1]);
                        f(&local, &mut ex)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn the_distributed_reference_is_the_sequential_pagerank_bit_for_bit() {
        let p = crate::kronecker::KroneckerParams::new(9, 8, 2, 3).unwrap();
        let g = Csr::from_edges(crate::kronecker::generate(&p));
        let params = PageRankParams { tolerance: 1e-9, max_iterations: 30, ..Default::default() };
        let seq = sequential_pagerank(&g, &params);
        let n = g.num_vertices();
        for bounds in [vec![0, n], vec![0, 100, n], vec![0, 0, 300, 301, n]] {
            let slices = on_ranks(&g, &bounds, |l, ex| pagerank_distributed(l, &params, 7, ex));
            let mut joined = Vec::new();
            for s in slices {
                let s = s.unwrap();
                assert_eq!((s.iterations, s.l1.to_bits()), (seq.iterations, seq.l1.to_bits()));
                joined.extend(s.rank);
            }
            assert!(joined.iter().zip(&seq.rank).all(|(a, b)| a.to_bits() == b.to_bits()));
            // Another iteration count fails on every rank.
            let got = on_ranks(&g, &bounds, |l, ex| {
                let r = l.range();
                let slice = &seq.rank[r.start as usize..r.end as usize];
                validate_pagerank_distributed(l, slice, seq.iterations + 1, &params, 1e-12, 5, ex)
            });
            for res in got {
                let want =
                    AnalyticsError::Iterations { got: seq.iterations + 1, want: seq.iterations };
                assert_eq!(res, Err(want.into()));
            }
            // The reference's own slices pass; one changed rank fails on every rank alike.
            let mut bad = seq.rank.clone();
            bad[150] += 1e-9;
            for (ranks, want) in [(&seq.rank, None), (&bad, Some(150u64))] {
                let got = on_ranks(&g, &bounds, |l, ex| {
                    let r = l.range();
                    let slice = &ranks[r.start as usize..r.end as usize];
                    validate_pagerank_distributed(l, slice, seq.iterations, &params, 1e-12, 5, ex)
                });
                for res in got {
                    match (res, want) {
                        (Ok(()), None) => {}
                        (
                            Err(DistAnalyticsError::Invalid(AnalyticsError::Rank {
                                vertex, ..
                            })),
                            Some(w),
                        ) => {
                            assert_eq!(vertex, w)
                        }
                        (other, _) => panic!("{bounds:?}: {other:?}"),
                    }
                }
            }
        }
    }

    /// The sequential PageRank of `analytics`' module docs, written out for the test.
    fn sequential_pagerank(g: &Csr, params: &PageRankParams) -> analytics::PageRankResult {
        let n = g.num_vertices();
        let k = (0..n).filter(|&v| g.neighbors(v).is_empty()).count() as u64;
        let mut rank = vec![1.0 / n as f64; n as usize];
        let (mut r_iso, mut iterations, mut l1) = (1.0 / n as f64, 0, f64::INFINITY);
        while iterations < params.max_iterations {
            let dangle = analytics::dangle(n, k, r_iso);
            let contrib: Vec<f64> = (0..n)
                .map(|v| {
                    let deg = g.neighbors(v).len();
                    if deg > 0 {
                        rank[v as usize] / deg as f64
                    } else {
                        0.0
                    }
                })
                .collect();
            let mut change = 0u128;
            for v in 0..n {
                let sum: f64 = g.neighbors(v).iter().fold(0.0, |s, &u| s + contrib[u as usize]);
                let new = analytics::update(params.damping, n, sum, dangle);
                change += analytics::fixed(new - rank[v as usize]);
                rank[v as usize] = new;
            }
            r_iso = analytics::update(params.damping, n, 0.0, dangle);
            iterations += 1;
            l1 = analytics::from_fixed(change);
            if l1 < params.tolerance {
                break;
            }
        }
        analytics::PageRankResult { rank, iterations, l1 }
    }

    #[test]
    fn components_pass_when_minimal_and_fail_on_the_smallest_wrong_vertex() {
        let g = small();
        let good = analytics::components_union_find(&g);
        assert_eq!(good, [0, 0, 0, 3, 3, 5, 6]);
        // Labels that break one rule each, and the error every rank must report.
        let edge = vec![0, 0, 0, 3, 4, 5, 6]; // 3-4 joins two labels
        let above = vec![0, 0, 0, 4, 4, 5, 6]; // 3's label is above it
        let named = vec![0, 0, 0, 0, 3, 5, 6]; // 4 names 3, whose label is 0
        let stray = vec![0, 0, 0, 3, 3, 3, 6]; // 5 names 3, not in its component
        let merged = vec![0, 0, 0, 0, 0, 5, 6]; // {3, 4} labelled 0, not in it
        for bounds in [vec![0, 7], vec![0, 2, 7], vec![0, 3, 3, 5, 7]] {
            for budget in [0, u64::MAX] {
                let check = |labels: &[u64]| {
                    on_ranks(&g, &bounds, |l, ex| {
                        let r = l.range();
                        validate_components_distributed(
                            l,
                            &labels[r.start as usize..r.end as usize],
                            2,
                            budget,
                            ex,
                        )
                    })
                };
                for res in check(&good) {
                    assert_eq!(res, Ok(()), "{bounds:?} {budget}");
                }
                let want = [
                    (&edge, AnalyticsError::Edge { u: 3, v: 4, lu: 3, lv: 4 }),
                    (&above, AnalyticsError::Above { vertex: 3, label: 4 }),
                    (&named, AnalyticsError::Named { vertex: 4, label: 3, named: 0 }),
                    (&stray, AnalyticsError::Outside { vertex: 5, label: 3 }),
                    (&merged, AnalyticsError::Outside { vertex: 3, label: 0 }),
                ];
                for (labels, error) in want {
                    for res in check(labels) {
                        assert_eq!(
                            res,
                            Err(error.clone().into()),
                            "{bounds:?} {budget} {labels:?}"
                        );
                    }
                }
            }
        }
    }
}
