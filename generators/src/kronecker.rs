//! The Graph500 Kronecker generator, bit-compatible with the Graph500 reference 3.0.1.
//!
//! The same parameters give the reference's edge list in its edge-index order, the
//! same binary32 SSSP weights and the same search roots. The facts it follows are in
//! `testdata/graph500/GENERATOR.md`; the test vectors there check it.
//!
//! Edge `k` is a pure function of `(seeds, SCALE, k)` ([`edge`]): generation is split
//! over rayon tasks by fixed blocks of edge indices, so the output never depends on the
//! number of threads, and [`generate_range`] produces any slice of the list on its own.
//!
//! Supported parameters: SCALE in [`SCALE_RANGE`] (1 to 40) and edgefactor in
//! [`EDGEFACTOR_RANGE`] (1 to 1024), any two 64-bit seeds. The largest of these graphs
//! do not fit in any machine's memory; callers that allocate should call
//! [`KroneckerParams::check_memory`] first.
//!
//! ```
//! use skein_generators::kronecker::{self, KroneckerParams};
//!
//! let p = KroneckerParams::new(8, 16, 2, 3).unwrap();
//! let el = kronecker::generate(&p);
//! assert_eq!(el.len() as u64, p.num_edges());
//! assert_eq!(kronecker::edge(&p, 5), (el.src[5], el.dst[5], el.weight(5)));
//! ```

use std::collections::HashSet;
use std::ops::{Range, RangeInclusive};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::graph::{Csr, EdgeList};
use crate::hugepage;
use crate::memory::{self, MemoryError};
use crate::prng::{jumps, MrgLanes, MrgState, LANES};

/// Supported SCALE values (`2^SCALE` vertices).
pub const SCALE_RANGE: RangeInclusive<u32> = 1..=40;
/// Supported edgefactor values (`edgefactor * 2^SCALE` edges).
pub const EDGEFACTOR_RANGE: RangeInclusive<u32> = 1..=1024;

/// Bytes of one generated edge in an [`EdgeList`] (two `u64` endpoints, one `f32`).
pub const EDGE_LIST_BYTES_PER_EDGE: u64 = 20;

/// Edges per rayon task (fixed, so task boundaries never depend on the thread count).
const BLOCK: usize = 1 << 14;

/// Draws below this are rejected (`(2^31 - 1) mod 10000`), so `u mod 10000` is unbiased.
const REJECT_BELOW: u32 = 3647;
/// `1 / (2^31 - 1)` as the reference writes it: weights and root doubles.
#[allow(clippy::excessive_precision)] // the reference's literal, verbatim (same double)
const INV_P: f64 = 4.656_612_875_245_796_92e-10;
/// `2^-31 / (2^31 - 1)`: the low half of a root-stream double.
#[allow(clippy::excessive_precision)] // the reference's literal, verbatim (same double)
const INV_P2: f64 = 2.168_404_346_990_492_787e-19;

/// Parameters of a Graph500 Kronecker graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KroneckerParams {
    /// log2 of the vertex count.
    pub scale: u32,
    /// Edges per vertex: the graph has `edgefactor * 2^scale` edges.
    pub edgefactor: u32,
    /// First user seed (Graph500 `userseed1`, default 2).
    pub seed1: u64,
    /// Second user seed (Graph500 `userseed2`, default 3).
    pub seed2: u64,
}

impl Default for KroneckerParams {
    /// SCALE 16, edgefactor 16, seeds 2 and 3 (the Graph500 reference's default seeds).
    fn default() -> Self {
        KroneckerParams { scale: 16, edgefactor: 16, seed1: 2, seed2: 3 }
    }
}

/// Why [`KroneckerParams::new`] refused its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// SCALE outside [`SCALE_RANGE`].
    #[error("SCALE {0} is out of range: supported SCALE is 1 to 40")]
    Scale(u32),
    /// Edgefactor outside [`EDGEFACTOR_RANGE`].
    #[error("edgefactor {0} is out of range: supported edgefactor is 1 to 1024")]
    EdgeFactor(u32),
}

impl KroneckerParams {
    /// Checked constructor: SCALE in [`SCALE_RANGE`], edgefactor in [`EDGEFACTOR_RANGE`].
    pub fn new(scale: u32, edgefactor: u32, seed1: u64, seed2: u64) -> Result<Self, ParamError> {
        let p = KroneckerParams { scale, edgefactor, seed1, seed2 };
        p.check()?;
        Ok(p)
    }

    /// Checks the ranges (for parameters built as a struct literal).
    pub fn check(&self) -> Result<(), ParamError> {
        if !SCALE_RANGE.contains(&self.scale) {
            return Err(ParamError::Scale(self.scale));
        }
        if !EDGEFACTOR_RANGE.contains(&self.edgefactor) {
            return Err(ParamError::EdgeFactor(self.edgefactor));
        }
        Ok(())
    }

    /// `2^scale`.
    pub fn num_vertices(&self) -> u64 {
        1u64 << self.scale
    }

    /// `edgefactor * 2^scale` (self-loops and repeated edges included).
    pub fn num_edges(&self) -> u64 {
        u64::from(self.edgefactor) << self.scale
    }

    /// Bytes of the full generated [`EdgeList`] (`20 * num_edges()`), saturating.
    pub fn edge_list_bytes(&self) -> u64 {
        self.num_edges().saturating_mul(EDGE_LIST_BYTES_PER_EDGE)
    }

    /// Checks that this graph fits in the available memory while it is loaded: its edge
    /// list (weighted) next to the CSR being built from it ([`crate::build::graph_bytes`]).
    /// Call it before [`generate`], which would abort on a failed allocation. Never
    /// panics, whatever the fields hold (an unchecked SCALE of 64 or more counts as
    /// needing more than any memory).
    pub fn check_memory(&self) -> Result<(), MemoryError> {
        let n = 1u64.checked_shl(self.scale).unwrap_or(u64::MAX);
        let m = u64::from(self.edgefactor).saturating_mul(n);
        let need = if n == u64::MAX { u128::MAX } else { crate::build::graph_bytes(n, m, true) };
        memory::check_fits(need, || {
            format!(
                "the Kronecker graph of SCALE {} and edgefactor {} ({} vertices and {m} edges: \
                 edge list and CSR)",
                self.scale, self.edgefactor, n
            )
        })
    }

    /// Upper bound of the bytes of the [`Csr`] built from this graph: offsets plus
    /// two arcs of 12 bytes per edge (self-loops, which are dropped, counted too).
    pub fn csr_bytes_bound(&self) -> u64 {
        (self.num_vertices() + 1)
            .saturating_mul(8)
            .saturating_add(self.num_edges().saturating_mul(24))
    }
}

/// The scramble of vertex labels: a bijection on `[0, 2^scale)` keyed by the seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scrambler {
    v0: u64,
    v1: u64,
    scale: u32,
}

impl Scrambler {
    /// The scramble of the graph `p` (keys from the scramble stream of `p`'s seeds).
    pub fn new(p: &KroneckerParams) -> Scrambler {
        assert!(SCALE_RANGE.contains(&p.scale), "SCALE {} out of range", p.scale);
        let mut s = jumps().scramble_state(&MrgState::from_seeds(p.seed1, p.seed2));
        let mut draw = || u64::from(s.next());
        let (a, b, c, d) = (draw(), draw(), draw(), draw());
        Scrambler {
            v0: a.wrapping_mul(0xFFFF_FFFF).wrapping_add(b),
            v1: c.wrapping_mul(0xFFFF_FFFF).wrapping_add(d),
            scale: p.scale,
        }
    }

    /// The two 64-bit keys `(val0, val1)`.
    pub fn keys(&self) -> (u64, u64) {
        (self.v0, self.v1)
    }

    /// The scrambled label of `x < 2^scale`.
    #[inline(always)]
    pub fn apply(&self, x: u64) -> u64 {
        let shift = 64 - self.scale;
        let mut x = x.wrapping_add(self.v0).wrapping_add(self.v1);
        x = x.wrapping_mul(self.v0 | 0x4519_8402_1149_3211);
        x = x.reverse_bits() >> shift;
        x = x.wrapping_mul(self.v1 | 0x3050_8521_02C8_43A5);
        x.reverse_bits() >> shift
    }
}

/// Draws the next value of `s` that is not rejected (`>= REJECT_BELOW`).
#[inline(always)]
fn draw_accepted(s: &mut MrgState) -> u32 {
    let u = s.next();
    if u < REJECT_BELOW {
        redraw(s)
    } else {
        u
    }
}

/// The rare rejection path (probability 1.7e-6 per draw).
#[cold]
#[inline(never)]
fn redraw(s: &mut MrgState) -> u32 {
    loop {
        let u = s.next();
        if u >= REJECT_BELOW {
            return u;
        }
    }
}

/// `u mod 10000` for `u < 2^31`, by a 32x32-bit multiply (SIMD-friendly):
/// `m = ceil(2^45 / 10000)` errs by `10000 m - 2^45 = 1168 <= 2^(45 - 31)`, so the
/// quotient is exact for every 31-bit `u`.
#[inline(always)]
fn mod10000(u: u64) -> u64 {
    let q = ((u & 0xFFFF_FFFF) * 3_518_437_209) >> 45;
    u - q * 10000
}

/// One level of the recursion: the endpoint bits for draw `u` (already accepted,
/// `< 2^31`), given whether the endpoints are still equal. Branch-free.
#[inline(always)]
fn quadrant(u: u64, equal: bool) -> (u64, u64) {
    let r = mod10000(u);
    // Quadrants: B (0,1) below 1900, C (1,0) below 3800, A (0,0) below 9500, else D.
    let d = u64::from(r >= 9500);
    let sb = u64::from(r.wrapping_sub(1900) < 1900) | d;
    let db = u64::from(r < 1900) | d;
    // Clip and flip: stay in the upper triangle while the endpoints are equal.
    let flip = u64::from(equal) & sb & (db ^ 1);
    (sb & !flip, db | flip)
}

/// The weight made of the draw `w < 2^31`: both roundings to binary32 matter.
#[inline(always)]
fn weight_of(w: u64) -> f32 {
    // w < 2^31, so the i32 conversion is exact and rounds like the reference's.
    (f64::from(w as i32 as f32) * INV_P) as f32
}

/// The unscrambled endpoints and the weight of the edge whose stream is `s`.
#[inline(always)]
fn raw_edge(s: &mut MrgState, scale: u32) -> (u64, u64, f32) {
    let mut src = 0u64;
    let mut dst = 0u64;
    for bit in (0..scale).rev() {
        let (sb, db) = quadrant(u64::from(draw_accepted(s)), src == dst);
        src |= sb << bit;
        dst |= db << bit;
    }
    (src, dst, weight_of(u64::from(s.next())))
}

/// Unscrambled edges of `LANES` streams side by side (element-wise lane loops).
#[derive(Debug)]
struct LaneEdges {
    src: [u64; LANES],
    dst: [u64; LANES],
    weight: [f32; LANES],
}

/// [`raw_edge`] for the `LANES` streams of `lanes` at once.
#[inline(always)]
fn raw_edges(lanes: &mut MrgLanes, scale: u32) -> LaneEdges {
    let mut src = [0u64; LANES];
    let mut dst = [0u64; LANES];
    for bit in (0..scale).rev() {
        let mut u = lanes.next();
        if u.iter().fold(false, |r, &x| r | (x < u64::from(REJECT_BELOW))) {
            redraw_lanes(lanes, &mut u);
        }
        for l in 0..LANES {
            let (sb, db) = quadrant(u[l], src[l] == dst[l]);
            src[l] |= sb << bit;
            dst[l] |= db << bit;
        }
    }
    let w = lanes.next();
    LaneEdges { src, dst, weight: w.map(weight_of) }
}

/// The rare rejections of [`raw_edges`]: redraws the lanes whose draw was rejected.
#[cold]
#[inline(never)]
fn redraw_lanes(lanes: &mut MrgLanes, u: &mut [u64; LANES]) {
    for (l, x) in u.iter_mut().enumerate() {
        if *x < u64::from(REJECT_BELOW) {
            let mut s = lanes.lane(l);
            *x = u64::from(redraw(&mut s));
            lanes.set_lane(l, &s);
        }
    }
}

/// Fills `src`, `dst`, `w` with the edges starting at index `first`.
#[inline(always)]
fn fill_block_impl(
    scale: u32,
    scr: &Scrambler,
    s0: &MrgState,
    first: u64,
    src: &mut [u64],
    dst: &mut [u64],
    w: &mut [f32],
) {
    let j = jumps();
    let n = src.len();
    let full = n / LANES * LANES;
    if full > 0 {
        let mut states = [j.edge_state(s0, first); LANES];
        for l in 1..LANES {
            states[l] = j.next_edge_state(&states[l - 1]);
        }
        let mut lanes = MrgLanes::new(&states);
        for i in (0..full).step_by(LANES) {
            let e = raw_edges(&mut lanes.clone(), scale);
            for l in 0..LANES {
                src[i + l] = scr.apply(e.src[l]);
                dst[i + l] = scr.apply(e.dst[l]);
                w[i + l] = e.weight[l];
            }
            j.next_lane_states(&mut lanes);
        }
    }
    for i in full..n {
        let mut st = j.edge_state(s0, first + i as u64);
        let (u, v, wt) = raw_edge(&mut st, scale);
        src[i] = scr.apply(u);
        dst[i] = scr.apply(v);
        w[i] = wt;
    }
}

mod simd {
    //! Runtime dispatch to an AVX2 build of the block kernel (same results: the
    //! kernel is integer arithmetic plus IEEE conversions that SIMD performs
    //! identically).

    use super::{fill_block_impl, MrgState, Scrambler};

    /// [`fill_block_impl`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn fill_block_avx2(
        scale: u32,
        scr: &Scrambler,
        s0: &MrgState,
        first: u64,
        src: &mut [u64],
        dst: &mut [u64],
        w: &mut [f32],
    ) {
        fill_block_impl(scale, scr, s0, first, src, dst, w)
    }

    /// Fills `src`, `dst`, `w` with the edges starting at index `first`, with AVX2
    /// when the CPU has it.
    pub(super) fn fill_block(
        scale: u32,
        scr: &Scrambler,
        s0: &MrgState,
        first: u64,
        src: &mut [u64],
        dst: &mut [u64],
        w: &mut [f32],
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above), the only
            // requirement for calling a function compiled with that feature.
            unsafe { fill_block_avx2(scale, scr, s0, first, src, dst, w) };
            return;
        }
        fill_block_impl(scale, scr, s0, first, src, dst, w)
    }
}

/// Edge `k` of the graph `p`: `(u, v, weight)` as the reference emits it.
///
/// # Panics
/// If `k >= p.num_edges()` or the parameters are out of range.
pub fn edge(p: &KroneckerParams, k: u64) -> (u64, u64, f32) {
    p.check().expect("invalid Kronecker parameters");
    assert!(k < p.num_edges(), "edge {k} out of range: the graph has {} edges", p.num_edges());
    let scr = Scrambler::new(p);
    let mut s = jumps().edge_state(&MrgState::from_seeds(p.seed1, p.seed2), k);
    let (u, v, w) = raw_edge(&mut s, p.scale);
    (scr.apply(u), scr.apply(v), w)
}

/// All edges of `p` in edge-index order, with weights, generated in parallel.
///
/// # Panics
/// If the parameters are out of range (see [`KroneckerParams::check`]).
pub fn generate(p: &KroneckerParams) -> EdgeList {
    generate_range_with_progress(p, 0..p.num_edges(), &|_| {})
}

/// [`generate`], calling `progress(edges_done)` as blocks of edges complete (from the
/// worker threads; the calls are cheap and a few thousand at most per million edges,
/// `edges_done` reaches `num_edges()` at the end).
pub fn generate_with_progress(p: &KroneckerParams, progress: &(dyn Fn(u64) + Sync)) -> EdgeList {
    generate_range_with_progress(p, 0..p.num_edges(), progress)
}

/// Edges `range` of `p` (their indices in the full list), in order; with weights.
///
/// Concatenating the pieces of any partition of `0..num_edges()` gives [`generate`].
///
/// # Panics
/// If the range is not inside `0..p.num_edges()` or the parameters are out of range.
pub fn generate_range(p: &KroneckerParams, range: Range<u64>) -> EdgeList {
    generate_range_with_progress(p, range, &|_| {})
}

/// [`generate_range`] with a progress callback, as in [`generate_with_progress`].
pub fn generate_range_with_progress(
    p: &KroneckerParams,
    range: Range<u64>,
    progress: &(dyn Fn(u64) + Sync),
) -> EdgeList {
    p.check().expect("invalid Kronecker parameters");
    assert!(
        range.start <= range.end && range.end <= p.num_edges(),
        "edge range {range:?} is not inside 0..{}",
        p.num_edges()
    );
    let n = usize::try_from(range.end - range.start).expect("edge range too large");
    // Zeroed pages straight from mmap, faulted in by the block writers below.
    let mut src: Vec<u64> = hugepage::zeroed_vec(n);
    let mut dst: Vec<u64> = hugepage::zeroed_vec(n);
    let mut weights: Vec<f32> = hugepage::zeroed_vec(n);

    let s0 = MrgState::from_seeds(p.seed1, p.seed2);
    let scr = Scrambler::new(p);
    let done = AtomicU64::new(0);
    src.par_chunks_mut(BLOCK)
        .zip(dst.par_chunks_mut(BLOCK))
        .zip(weights.par_chunks_mut(BLOCK))
        .enumerate()
        .for_each(|(b, ((s, d), w))| {
            simd::fill_block(p.scale, &scr, &s0, range.start + (b * BLOCK) as u64, s, d, w);
            let len = s.len() as u64;
            progress(done.fetch_add(len, Ordering::Relaxed) + len);
        });
    EdgeList { num_vertices: p.num_vertices(), src, dst, weights: Some(weights) }
}

/// Writes the edges `first .. first + src.len()` of `p` into `src`, `dst` and `weights`
/// (in parallel, as [`generate_range`] does, but into buffers the caller reuses).
///
/// # Panics
/// If the three slices differ in length, the range is not inside `0..p.num_edges()` or the
/// parameters are out of range.
pub fn generate_range_into(
    p: &KroneckerParams,
    first: u64,
    src: &mut [u64],
    dst: &mut [u64],
    weights: &mut [f32],
) {
    p.check().expect("invalid Kronecker parameters");
    assert!(src.len() == dst.len() && src.len() == weights.len(), "slices differ in length");
    assert!(
        first.checked_add(src.len() as u64).is_some_and(|end| end <= p.num_edges()),
        "edge range {first}+{} is not inside 0..{}",
        src.len(),
        p.num_edges()
    );
    let s0 = MrgState::from_seeds(p.seed1, p.seed2);
    let scr = Scrambler::new(p);
    src.par_chunks_mut(BLOCK)
        .zip(dst.par_chunks_mut(BLOCK))
        .zip(weights.par_chunks_mut(BLOCK))
        .enumerate()
        .for_each(|(b, ((s, d), w))| {
            simd::fill_block(p.scale, &scr, &s0, first + (b * BLOCK) as u64, s, d, w);
        });
}

/// The Graph500 search roots of the graph `p` built as `csr` (normally 64 of them).
///
/// Equivalent to [`search_roots_for`] with `csr`'s vertex count and degrees.
pub fn search_roots(p: &KroneckerParams, csr: &Csr, count: usize) -> Vec<u64> {
    search_roots_for(csr.num_vertices(), |v| csr.degree(v), p.seed1, p.seed2, count)
}

/// The Graph500 root procedure for any graph of `num_vertices` vertices.
///
/// `degree(v)` must count the non-self-loop edges incident to `v` (a [`Csr`]'s
/// degree); vertices of degree 0 and repeats are rejected until the candidate counter
/// passes `2 * num_vertices`, after which candidates are taken as drawn (so any
/// `count` terminates, possibly with repeats). File graphs use seeds 2 and 3.
/// Returns no roots for an empty graph.
pub fn search_roots_for(
    num_vertices: u64,
    degree: impl Fn(u64) -> u64,
    seed1: u64,
    seed2: u64,
    count: usize,
) -> Vec<u64> {
    search_roots_counted(num_vertices, degree, seed1, seed2, count).0
}

/// [`search_roots_for`], also returning the final candidate counter (2 per candidate
/// drawn; the reference's `root_counter`).
pub fn search_roots_counted(
    num_vertices: u64,
    degree: impl Fn(u64) -> u64,
    seed1: u64,
    seed2: u64,
    count: usize,
) -> (Vec<u64>, u64) {
    if num_vertices == 0 {
        return (Vec::new(), 0);
    }
    let n = num_vertices;
    let nf = n as f64;
    let mut stream = RootStream::new(seed1, seed2);
    let mut chosen = HashSet::with_capacity(count);
    let mut roots = Vec::with_capacity(count);
    let mut counter = 0u64;
    for _ in 0..count {
        let root = loop {
            let d0 = stream.next_double();
            let d1 = stream.next_double();
            let r = (((d0 + d1) * nf) as u64) % n;
            counter += 2;
            if counter > 2 * n {
                break r;
            }
            if !chosen.contains(&r) && degree(r) != 0 {
                break r;
            }
        };
        chosen.insert(root);
        roots.push(root);
    }
    (roots, counter)
}

/// The search-root stream: doubles in [0, 1) made of two draws each.
#[derive(Debug)]
struct RootStream(MrgState);

impl RootStream {
    fn new(seed1: u64, seed2: u64) -> RootStream {
        RootStream(jumps().root_state(&MrgState::from_seeds(seed1, seed2)))
    }

    fn next_double(&mut self) -> f64 {
        let q0 = f64::from(self.0.next());
        let q1 = f64::from(self.0.next());
        q0 * INV_P + q1 * INV_P2
    }
}

#[cfg(test)]
mod tests {
    //! Checks of private streams against `prng_intermediates.txt`.
    use super::*;

    fn intermediates() -> Vec<(String, Vec<String>)> {
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/graph500/prng_intermediates.txt");
        let text = std::fs::read_to_string(path).expect("read prng_intermediates.txt");
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let mut it = l.split_whitespace().map(str::to_owned);
                let key = it.next().unwrap();
                (key, it.collect())
            })
            .collect()
    }

    fn nums(v: &[String]) -> Vec<u64> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn state(s: &MrgState) -> Vec<u64> {
        s.z.iter().map(|&z| u64::from(z)).collect()
    }

    fn draws(mut s: MrgState, n: usize) -> Vec<u64> {
        (0..n).map(|_| u64::from(s.next())).collect()
    }

    #[test]
    fn every_prng_intermediate() {
        let s0 = MrgState::from_seeds(2, 3);
        let j = jumps();
        let mut checked = 0;
        for (key, vals) in intermediates() {
            match key.as_str() {
                "seed_state" => assert_eq!(state(&s0), nums(&vals)),
                "raw_uints_from_seed_state" => assert_eq!(draws(s0, vals.len()), nums(&vals)),
                "scramble_draws" => {
                    assert_eq!(draws(j.scramble_state(&s0), vals.len()), nums(&vals))
                }
                "val0" => {
                    let scr = Scrambler::new(&KroneckerParams::default());
                    assert_eq!(format!("{:016x}", scr.keys().0), vals[0]);
                    assert_eq!(vals[1], "val1");
                    assert_eq!(format!("{:016x}", scr.keys().1), vals[2]);
                }
                k if k.starts_with("scramble_SCALE") => {
                    let scale: u32 = k["scramble_SCALE".len()..].parse().unwrap();
                    assert_eq!(vals[0], "first16");
                    let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
                    let scr = Scrambler::new(&p);
                    let got: Vec<u64> = (0..16).map(|x| scr.apply(x)).collect();
                    assert_eq!(got, nums(&vals[1..]), "{k}");
                }
                k if k.starts_with("edge") && k.ends_with("_state") => {
                    let e: u64 = k[4..k.len() - 6].parse().unwrap();
                    assert_eq!(state(&j.edge_state(&s0, e)), nums(&vals), "{k}");
                }
                k if k.starts_with("edge") && k.ends_with("_raw_uints") => {
                    let e: u64 = k[4..k.len() - 10].parse().unwrap();
                    assert_eq!(draws(j.edge_state(&s0, e), vals.len()), nums(&vals), "{k}");
                }
                "root_stream_doubles" => {
                    let mut rs = RootStream::new(2, 3);
                    for v in &vals {
                        let hex = &v[..16];
                        let d = rs.next_double();
                        assert_eq!(format!("{:016x}", d.to_bits()), hex, "{v}");
                    }
                }
                "root_stream_raw_uints" => {
                    assert_eq!(draws(j.root_state(&s0), vals.len()), nums(&vals))
                }
                other => panic!("unknown key {other} in prng_intermediates.txt"),
            }
            checked += 1;
        }
        assert_eq!(checked, 15, "every line of prng_intermediates.txt checked");
    }

    #[test]
    fn edge0_weight_and_first_quadrants() {
        // SCALE 8: edge 0 uses draws 0..8 for quadrants and draw 8 for its weight.
        let p = KroneckerParams::new(8, 16, 2, 3).unwrap();
        let (_, _, w) = edge(&p, 0);
        let expect = (f64::from(908_085_286u32 as f32) * INV_P) as f32;
        assert_eq!(weight_of(908_085_286).to_bits(), expect.to_bits());
        assert_eq!(w.to_bits(), expect.to_bits());
    }

    #[test]
    fn mod10000_exact() {
        let p = (1u64 << 31) - 1;
        for u in (0..p).step_by(9973).chain(p - 20_000..p) {
            assert_eq!(mod10000(u), u % 10000, "u = {u}");
        }
        for q in 0..=p / 10000 {
            for u in [q * 10000, q * 10000 + 9999] {
                if u < p {
                    assert_eq!(mod10000(u), u % 10000, "u = {u}");
                }
            }
        }
    }

    #[test]
    fn lane_and_scalar_kernels_agree() {
        // Every block size around the lane width, scalar and SIMD paths alike.
        let p = KroneckerParams::new(9, 4, 7, 1).unwrap();
        let scr = Scrambler::new(&p);
        let s0 = MrgState::from_seeds(7, 1);
        for n in [0usize, 1, 7, 8, 9, 17, 64] {
            let (mut a, mut b, mut c) = (vec![0; n], vec![0; n], vec![0.0; n]);
            simd::fill_block(9, &scr, &s0, 100, &mut a, &mut b, &mut c);
            let (mut a2, mut b2, mut c2) = (vec![0; n], vec![0; n], vec![0.0; n]);
            fill_block_impl(9, &scr, &s0, 100, &mut a2, &mut b2, &mut c2);
            assert_eq!((&a, &b, &c), (&a2, &b2, &c2));
            for i in 0..n {
                assert_eq!(edge(&p, 100 + i as u64), (a[i], b[i], c[i]), "edge {}", 100 + i);
            }
        }
    }

    #[test]
    fn params_are_range_checked() {
        assert_eq!(KroneckerParams::new(0, 16, 2, 3), Err(ParamError::Scale(0)));
        assert_eq!(KroneckerParams::new(41, 16, 2, 3), Err(ParamError::Scale(41)));
        assert_eq!(KroneckerParams::new(10, 0, 2, 3), Err(ParamError::EdgeFactor(0)));
        assert_eq!(KroneckerParams::new(10, 1025, 2, 3), Err(ParamError::EdgeFactor(1025)));
        let msg = ParamError::Scale(41).to_string();
        assert!(msg.contains("1 to 40"), "{msg}");
        let p = KroneckerParams::new(40, 1024, u64::MAX, 0).unwrap();
        assert_eq!(p.num_edges(), 1 << 50);
        assert_eq!(KroneckerParams::default(), KroneckerParams::new(16, 16, 2, 3).unwrap());
    }

    #[test]
    fn memory_is_checked_without_overflow() {
        assert_eq!(KroneckerParams::new(4, 16, 2, 3).unwrap().check_memory(), Ok(()));
        // 2^50 edges: about 44 PiB, beyond any machine.
        let p = KroneckerParams::new(40, 1024, 2, 3).unwrap();
        let e = p.check_memory().unwrap_err().to_string();
        assert!(
            e.starts_with(
                "the Kronecker graph of SCALE 40 and edgefactor 1024 (1099511627776 vertices \
                 and 1125899906842624 edges: edge list and CSR) needs "
            ),
            "{e}"
        );
        // Unchecked fields never panic.
        for scale in [63, 64, 200, u32::MAX] {
            let p = KroneckerParams { scale, edgefactor: u32::MAX, seed1: 2, seed2: 3 };
            assert!(p.check_memory().is_err(), "SCALE {scale}");
        }
    }
}
