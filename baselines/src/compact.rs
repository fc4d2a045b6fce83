//! The baselines' own arc layout, built once per graph outside the timed kernels.
//!
//! The shared [`Csr`] stores targets as `u64` (global ids may exceed 32 bits) and weights in
//! a separate array: 12 bytes per arc in two streams. The baselines index vertices with
//! `u32` (see the crate docs), so they copy the arcs once into the layout GAP's kernels
//! read: `u32` targets for BFS (4 bytes per arc), and `(u32 target, f32 weight)` pairs for
//! SSSP (8 bytes per arc, one stream). At SCALE 22 that halves the bytes a search streams
//! and costs 0.5 GiB (BFS) or 1 GiB (SSSP) once per graph. Like the CSR's arrays, the
//! copies ask for transparent huge pages (see `skein_generators::hugepage`).

use rayon::prelude::*;
use skein_generators::hugepage::{filled_vec, zeroed_vec};
use skein_generators::Csr;

/// One weighted arc: target vertex and weight, read together.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub(crate) struct WeightedArc {
    pub(crate) target: u32,
    pub(crate) weight: f32,
}

/// Arcs pieces copied at a time by one rayon task.
const COPY_CHUNK: usize = 1 << 16;

/// `csr`'s targets as `u32` (the graph was checked to have fewer than `u32::MAX`
/// vertices).
pub(crate) fn targets(csr: &Csr) -> Vec<u32> {
    let src = csr.targets();
    let mut out: Vec<u32> = zeroed_vec(src.len());
    out.par_chunks_mut(COPY_CHUNK).zip(src.par_chunks(COPY_CHUNK)).for_each(|(o, s)| {
        for (o, &s) in o.iter_mut().zip(s) {
            *o = s as u32;
        }
    });
    out
}

/// `csr`'s arcs as `(u32 target, f32 weight)` pairs.
pub(crate) fn weighted_arcs(csr: &Csr) -> Vec<WeightedArc> {
    let (targets, weights) = (csr.targets(), csr.weights());
    let mut out = filled_vec(targets.len(), WeightedArc { target: 0, weight: 0.0 });
    out.par_chunks_mut(COPY_CHUNK)
        .zip(targets.par_chunks(COPY_CHUNK).zip(weights.par_chunks(COPY_CHUNK)))
        .for_each(|(o, (t, w))| {
            for ((o, &t), &w) in o.iter_mut().zip(t).zip(w) {
                *o = WeightedArc { target: t as u32, weight: w };
            }
        });
    out
}
