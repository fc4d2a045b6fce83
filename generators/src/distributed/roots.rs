//! The Graph500 search roots and the per-root component edge counts (`nedge`) on a graph
//! spread over the ranks ([`LocalCsr`]): the same roots and counts as on the whole graph,
//! whatever the number of ranks.
//!
//! # Roots
//!
//! [`crate::kronecker::search_roots_counted`] draws candidates from one stream that does
//! not depend on the answers (each candidate is two draws), and accepts a candidate when
//! it was not chosen before and has a non-zero degree (until the counter passes `2n`).
//! Every rank runs that very procedure, with the degrees it has learnt so far; an unknown
//! degree reads as 0 (rejected) and the candidate is noted, up to `batch` of them. Then
//! one [`all_reduce`] (each owner contributes the degrees of its noted candidates; `R ·
//! batch` words received per rank) teaches every rank those degrees, and the procedure
//! runs again from the start. Everything up to the first noted candidate was decided on
//! true degrees, so each pass decides at least one more candidate, and the pass that
//! notes none is the single-process answer. Every rank sees the same degrees, so every
//! rank takes the same passes and returns the same roots. With 64 roots and a batch of
//! [`DEFAULT_ROOT_BATCH`], a Kronecker graph takes one or two exchanges.
//!
//! Memory per rank: the degrees learnt, 16 bytes per candidate drawn (a few hundred).
//!
//! # `nedge`
//!
//! For each root, the TEPS edge count of its component (non-self-loop input edges with
//! both ends in it, repeats counted: [`crate::validate::teps_edge_count`] over the
//! component), as the jobs' `nedge` statistics use. The root's owner tells every rank
//! whether the root's component is known already (one [`all_reduce`]); if not,
//! [`reach`] from the root over the rows marks the component (rounds of at most `B` ids
//! per rank), and one [`all_reduce`] adds up the degrees of its vertices. Memory per rank:
//! a component label per local vertex (`4·n_r` bytes) and [`reach`]'s `9·n_r + n/8 + 8·(R + 1)·B`
//! bytes (`n/8`: the bitmap of the ids sent).

use std::cell::RefCell;
use std::collections::HashMap;

use super::collective::{all_reduce, clamp_round, reach, Layout};
use super::{DistError, Exchange, LocalCsr};
use crate::kronecker::{self, KroneckerParams};

/// Default number of candidates whose degrees one exchange asks for.
pub const DEFAULT_ROOT_BATCH: usize = 256;

/// [`search_roots_distributed_for`] with the Kronecker graph's seeds: the roots
/// [`kronecker::search_roots`] gives on the whole graph (collective).
pub fn search_roots_distributed<E: Exchange + ?Sized>(
    p: &KroneckerParams,
    g: &LocalCsr,
    count: usize,
    ex: &mut E,
) -> Result<Vec<u64>, DistError> {
    Ok(search_roots_distributed_for(g, p.seed1, p.seed2, count, DEFAULT_ROOT_BATCH, ex)?.0)
}

/// The Graph500 roots of the graph whose rows of this rank are `g` (module docs): what
/// [`kronecker::search_roots_counted`] returns with the whole graph's degrees, the final
/// candidate counter included. Collective; `batch` degrees asked per exchange (at least 1).
pub fn search_roots_distributed_for<E: Exchange + ?Sized>(
    g: &LocalCsr,
    seed1: u64,
    seed2: u64,
    count: usize,
    batch: usize,
    ex: &mut E,
) -> Result<(Vec<u64>, u64), DistError> {
    let layout = Layout::gather(g, ex)?;
    let n = layout.num_vertices();
    let batch = clamp_round(batch, ex);
    let mut known: HashMap<u64, u64> = HashMap::new();
    loop {
        let unknown: RefCell<Vec<u64>> = RefCell::new(Vec::new());
        let answer = kronecker::search_roots_counted(
            n,
            |v| match known.get(&v) {
                Some(&d) => d,
                None => {
                    let mut u = unknown.borrow_mut();
                    if u.len() < batch && !u.contains(&v) {
                        u.push(v);
                    }
                    0
                }
            },
            seed1,
            seed2,
            count,
        );
        let unknown = unknown.into_inner();
        if unknown.is_empty() {
            return Ok(answer);
        }
        let mine: Vec<u64> =
            unknown.iter().map(|&v| layout.local(v).map_or(0, |_| g.degree(v))).collect();
        let degrees = all_reduce(ex, &mine, u64::wrapping_add)?;
        known.extend(unknown.into_iter().zip(degrees));
    }
}

/// For each root, the TEPS edge count of its component on the graph whose rows of this
/// rank are `g` (module docs): the per-root `nedge` values, the same on every rank.
/// Collective; rounds of `round` ids per rank.
pub fn component_edge_counts<E: Exchange + ?Sized>(
    g: &LocalCsr,
    roots: &[u64],
    round: usize,
    ex: &mut E,
) -> Result<Vec<u64>, DistError> {
    const NONE: u32 = u32::MAX;
    let round = clamp_round(round, ex);
    let layout = Layout::gather(g, ex)?;
    let n = layout.num_vertices();
    if let Some(&r) = roots.iter().find(|&&r| r >= n) {
        return Err(DistError::Exchange(format!("root {r} is not a vertex (n = {n})")));
    }
    let mut label = vec![NONE; layout.local_len()];
    let mut counts: Vec<u64> = Vec::new();
    let mut out = Vec::with_capacity(roots.len());
    for &root in roots {
        // The root's label + 1 from its owner (0: not labelled yet).
        let mine = layout.local(root).map_or(0, |i| u64::from(label[i].wrapping_add(1)));
        let known = all_reduce(ex, &[mine], u64::max)?[0];
        if known != 0 {
            out.push(counts[(known - 1) as usize]);
            continue;
        }
        let id = counts.len() as u32;
        let mut seen = vec![false; layout.local_len()];
        let seed = layout.local(root).map(|_| root);
        reach(ex, &layout, g.offsets(), g.targets(), seed, &mut seen, round)?;
        let mut degrees = 0u64;
        for (i, v) in g.range().enumerate() {
            if seen[i] {
                label[i] = id;
                degrees += g.degree(v);
            }
        }
        let total = all_reduce(ex, &[degrees], u64::wrapping_add)?[0];
        counts.push(total / 2);
        out.push(total / 2);
    }
    Ok(out)
}
