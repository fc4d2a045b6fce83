//! Parallel CSR construction from an edge list.
//!
//! The [`Csr`] holds the symmetric adjacency of the undirected graph: each input edge
//! `{u, v}` with `u != v` becomes the arcs `u -> v` and `v -> u`, both with the edge's
//! weight; self-loops are dropped; repeated edges are all kept. The arcs of every
//! vertex are in **edge-index order** (the arc made from edge `k` comes before the one
//! made from edge `k' > k`), so the CSR is the same whatever the thread count.
//!
//! # Algorithm
//!
//! The edge list is cut into `C` contiguous chunks (about one per thread).
//! 1. Each chunk counts, in its own array, the arcs it gives each vertex.
//! 2. Per vertex, the chunk counts become exclusive prefix sums over the chunks (where
//!    chunk `c`'s arcs start inside the vertex's segment) and their total the degree;
//!    a prefix sum of the degrees gives the offsets.
//! 3. Each chunk walks its edges again and writes each arc at its vertex's offset plus
//!    its own cursor. Chunks write disjoint position ranges, and within a chunk the
//!    edges are visited in order, hence the edge-index order of every vertex's arcs.
//!
//! Memory: the CSR's arrays plus `C` counters per vertex (4 bytes each while the
//! graph has fewer than 2^31 edges), besides the input. No other full-size temporary:
//! building SCALE 22 (67 M edges) takes the 1.3 GB edge list, the 1.6 GB CSR and 32 MB
//! of counters.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::graph::{Csr, CsrError, EdgeList};
use crate::hugepage;

/// Edges between two progress reports of one chunk.
const PROGRESS_EVERY: usize = 1 << 16;
/// Edges between the one whose arcs are written and the one whose arc positions are
/// prefetched.
const PREFETCH_AHEAD: usize = 16;
/// Vertices per task in the per-vertex prefix pass.
const VERTEX_BLOCK: usize = 1 << 14;

impl Csr {
    /// Builds the symmetric adjacency of `el` (see the [module docs](crate::build)).
    ///
    /// # Panics
    /// If `el` breaks the [`EdgeList`] invariants (an endpoint `>= num_vertices`, arrays
    /// of different lengths); [`Csr::try_from_edge_list`] reports those as errors.
    pub fn from_edge_list(el: &EdgeList) -> Csr {
        Self::from_edge_list_with_progress(el, &|_| {})
    }

    /// [`Csr::from_edge_list`], calling `progress(done)` from the worker threads as work
    /// completes: `done` counts edge visits and ends at `2 * el.len()` (two passes).
    ///
    /// # Panics
    /// As [`Csr::from_edge_list`].
    pub fn from_edge_list_with_progress(el: &EdgeList, progress: &(dyn Fn(u64) + Sync)) -> Csr {
        match Self::try_from_edge_list_with_progress(el, progress) {
            Ok(csr) => csr,
            Err(e) => panic!("invalid edge list: {e}"),
        }
    }

    /// [`Csr::from_edge_list`] taking the edge list by value, so its memory is released
    /// as soon as the CSR is built.
    pub fn from_edges(el: EdgeList) -> Csr {
        Self::from_edge_list(&el)
    }

    /// [`Csr::from_edge_list`] that reports a broken edge list instead of panicking.
    pub fn try_from_edge_list(el: &EdgeList) -> Result<Csr, CsrError> {
        Self::try_from_edge_list_with_progress(el, &|_| {})
    }

    /// [`Csr::try_from_edge_list`] with a progress callback as in
    /// [`Csr::from_edge_list_with_progress`].
    pub fn try_from_edge_list_with_progress(
        el: &EdgeList,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Csr, CsrError> {
        let m = el.src.len();
        if el.dst.len() != m || el.weights.as_ref().is_some_and(|w| w.len() != m) {
            return Err(CsrError::EdgeArrays {
                src: m,
                dst: el.dst.len(),
                weights: el.weights.as_ref().map(Vec::len),
            });
        }
        let n = usize::try_from(el.num_vertices).expect("vertex count exceeds the address space");
        let chunks = rayon::current_num_threads().clamp(1, 64).min(m / PROGRESS_EVERY).max(1);
        // Per-chunk counters and cursors stay below the largest degree, at most 2m.
        if (m as u64) < (1 << 31) {
            build::<u32>(el, n, chunks, progress)
        } else {
            build::<u64>(el, n, chunks, progress)
        }
    }
}

/// A per-vertex counter: `u32` when every degree fits, `u64` otherwise.
trait Count: Copy + Send + Sync {
    const ZERO: Self;
    fn get(self) -> u64;
    fn from_u64(x: u64) -> Self;
}

impl Count for u32 {
    const ZERO: u32 = 0;
    #[inline(always)]
    fn get(self) -> u64 {
        u64::from(self)
    }
    #[inline(always)]
    fn from_u64(x: u64) -> u32 {
        x as u32
    }
}

impl Count for u64 {
    const ZERO: u64 = 0;
    #[inline(always)]
    fn get(self) -> u64 {
        self
    }
    #[inline(always)]
    fn from_u64(x: u64) -> u64 {
        x
    }
}

/// The edge range of chunk `c` of `chunks` over `m` edges.
fn chunk_range(m: usize, chunks: usize, c: usize) -> std::ops::Range<usize> {
    (m * c / chunks)..(m * (c + 1) / chunks)
}

fn build<C: Count>(
    el: &EdgeList,
    n: usize,
    chunks: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Csr, CsrError> {
    let m = el.src.len();
    let (src, dst) = (&el.src[..], &el.dst[..]);
    let done = AtomicU64::new(0);
    let report = |k: usize| progress(done.fetch_add(k as u64, Ordering::Relaxed) + k as u64);

    // Pass 1: per-chunk arc counts, checking the endpoints on the way.
    let mut counts: Vec<Vec<C>> = (0..chunks)
        .into_par_iter()
        .map(|c| -> Result<Vec<C>, CsrError> {
            let mut cnt = hugepage::filled_vec(n, C::ZERO);
            let range = chunk_range(m, chunks, c);
            let mut start = range.start;
            while start < range.end {
                let end = (start + PROGRESS_EVERY).min(range.end);
                for k in start..end {
                    let (u, v) = (src[k], dst[k]);
                    if u.max(v) >= n as u64 {
                        return Err(CsrError::Endpoint {
                            edge: k,
                            vertex: u.max(v),
                            num_vertices: n as u64,
                        });
                    }
                    if u != v {
                        let (u, v) = (u as usize, v as usize);
                        cnt[u] = C::from_u64(cnt[u].get() + 1);
                        cnt[v] = C::from_u64(cnt[v].get() + 1);
                    }
                }
                report(end - start);
                start = end;
            }
            Ok(cnt)
        })
        .collect::<Result<_, _>>()?;

    // Pass 2: per vertex, counts become each chunk's start inside the vertex's segment;
    // the totals (degrees) go to offsets[v + 1], then a prefix sum makes the offsets.
    let mut offsets = hugepage::filled_vec(n + 1, 0u64);
    {
        let mut per_chunk: Vec<_> = counts.iter_mut().map(|c| c.chunks_mut(VERTEX_BLOCK)).collect();
        let blocks: Vec<Vec<&mut [C]>> = (0..n.div_ceil(VERTEX_BLOCK))
            .map(|_| {
                per_chunk.iter_mut().map(|it| it.next().expect("one block per chunk")).collect()
            })
            .collect();
        offsets[1..].par_chunks_mut(VERTEX_BLOCK).zip(blocks).for_each(|(deg, mut cs)| {
            for (i, d) in deg.iter_mut().enumerate() {
                let mut run = 0u64;
                for c in cs.iter_mut() {
                    let t = c[i].get();
                    c[i] = C::from_u64(run);
                    run += t;
                }
                *d = run;
            }
        });
    }
    let mut total = 0u64;
    for o in offsets.iter_mut() {
        total += *o;
        *o = total;
    }

    // Pass 3: scatter the arcs.
    let arcs = total as usize;
    let weighted = el.weights.is_some();
    let mut targets: Vec<u64> = hugepage::zeroed_vec(arcs);
    let mut weights: Vec<f32> =
        if weighted { hugepage::zeroed_vec(arcs) } else { hugepage::filled_vec(arcs, 1.0) };
    {
        let tw = scatter::Scatter::new(&mut targets);
        let ww = scatter::Scatter::new(&mut weights);
        let offsets = &offsets[..];
        let in_weights = el.weights.as_deref();
        counts.par_iter_mut().enumerate().for_each(|(c, cur)| {
            let range = chunk_range(m, chunks, c);
            let mut start = range.start;
            while start < range.end {
                let end = (start + PROGRESS_EVERY).min(range.end);
                for k in start..end {
                    if k + PREFETCH_AHEAD < end {
                        // Warm the lines the arcs of a later edge will go to (the
                        // positions are exact unless a vertex repeats in between).
                        let (a, b) =
                            (src[k + PREFETCH_AHEAD] as usize, dst[k + PREFETCH_AHEAD] as usize);
                        let pa = (offsets[a] + cur[a].get()) as usize;
                        let pb = (offsets[b] + cur[b].get()) as usize;
                        tw.prefetch(pa);
                        tw.prefetch(pb);
                        ww.prefetch(pa);
                        ww.prefetch(pb);
                    }
                    let (u, v) = (src[k] as usize, dst[k] as usize);
                    if u == v {
                        continue;
                    }
                    let pu = (offsets[u] + cur[u].get()) as usize;
                    cur[u] = C::from_u64(cur[u].get() + 1);
                    let pv = (offsets[v] + cur[v].get()) as usize;
                    cur[v] = C::from_u64(cur[v].get() + 1);
                    // SAFETY: pass 2 gave chunk c the positions offsets[x] + [start_c(x),
                    // start_c(x) + count_c(x)) of each vertex x, disjoint from every other
                    // (chunk, vertex) pair; pass 1 counted exactly the arcs written here
                    // (same unchanged edges, same rule), so each position is written once.
                    unsafe {
                        tw.write(pu, v as u64);
                        tw.write(pv, u as u64);
                        if let Some(w) = in_weights {
                            ww.write(pu, w[k]);
                            ww.write(pv, w[k]);
                        }
                    }
                }
                report(end - start);
                start = end;
            }
        });
    }
    drop(counts);
    Ok(Csr::from_parts_unchecked(el.num_vertices, offsets, targets, weights, weighted))
}

mod scatter {
    //! Writes to disjoint indices of one slice from several threads.

    use std::marker::PhantomData;

    /// A write-only view of a `&mut [T]` that several threads share.
    #[derive(Debug)]
    pub(super) struct Scatter<'a, T> {
        ptr: *mut T,
        len: usize,
        _slice: PhantomData<&'a mut [T]>,
    }

    // SAFETY: a Scatter only moves `T` values into the slice (like `&mut [T]`, which is
    // Send when T is); callers of `write` guarantee that no index is written twice
    // concurrently, so sharing it between threads creates no data race.
    unsafe impl<T: Send> Send for Scatter<'_, T> {}
    // SAFETY: as above: `write` is the only access and its contract excludes races.
    unsafe impl<T: Send> Sync for Scatter<'_, T> {}

    impl<'a, T: Copy> Scatter<'a, T> {
        /// Borrows `slice` mutably for the Scatter's lifetime.
        pub(super) fn new(slice: &'a mut [T]) -> Self {
            Scatter { ptr: slice.as_mut_ptr(), len: slice.len(), _slice: PhantomData }
        }

        /// Writes `value` at index `i` (bounds-checked).
        ///
        /// # Safety
        /// No other call may write index `i` concurrently (from any thread) while this
        /// Scatter is alive; in practice every index is written by one thread only.
        #[inline(always)]
        pub(super) unsafe fn write(&self, i: usize, value: T) {
            assert!(i < self.len, "scatter index {i} out of bounds ({})", self.len);
            // SAFETY: i < len, so the pointer is inside the borrowed slice; T: Copy needs
            // no drop of the old value; the caller excludes concurrent writes to i.
            unsafe { self.ptr.add(i).write(value) }
        }

        /// Hints that index `i` will be written soon (no effect if out of bounds).
        #[inline(always)]
        pub(super) fn prefetch(&self, i: usize) {
            #[cfg(target_arch = "x86_64")]
            if i < self.len {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                // SAFETY: a prefetch is only a hint: it never faults nor changes memory,
                // and i < len keeps the address inside the borrowed slice anyway.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(self.ptr.add(i).cast::<i8>()) }
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(n: u64, edges: &[(u64, u64, f32)]) -> EdgeList {
        EdgeList {
            num_vertices: n,
            src: edges.iter().map(|e| e.0).collect(),
            dst: edges.iter().map(|e| e.1).collect(),
            weights: Some(edges.iter().map(|e| e.2).collect()),
        }
    }

    #[test]
    fn small_graph_in_edge_order() {
        let g = Csr::from_edge_list(&el(
            4,
            &[(0, 1, 0.5), (2, 2, 9.0), (1, 0, 0.25), (3, 1, 1.0), (0, 3, 2.0)],
        ));
        assert_eq!(g.num_vertices(), 4);
        assert_eq!(g.num_arcs(), 8);
        assert_eq!(g.offsets(), &[0, 3, 6, 6, 8]);
        assert_eq!(g.neighbors(0), &[1, 1, 3]);
        assert_eq!(g.neighbor_weights(0), &[0.5, 0.25, 2.0]);
        assert_eq!(g.neighbors(1), &[0, 0, 3]);
        assert_eq!(g.neighbors(2), &[] as &[u64]);
        assert_eq!(g.neighbors(3), &[1, 0]);
        assert!(g.is_weighted());
    }

    #[test]
    fn unweighted_and_empty() {
        let mut e = el(3, &[(0, 1, 0.0), (1, 2, 0.0)]);
        e.weights = None;
        let g = Csr::from_edge_list(&e);
        assert!(!g.is_weighted());
        assert_eq!(g.weights(), &[1.0; 4]);
        let g = Csr::from_edge_list(&EdgeList::default());
        assert_eq!(g.num_vertices(), 0);
        assert_eq!(g.offsets(), &[0]);
    }

    #[test]
    fn broken_lists_are_errors() {
        let e = el(3, &[(0, 1, 0.0), (1, 3, 0.0)]);
        assert_eq!(
            Csr::try_from_edge_list(&e),
            Err(CsrError::Endpoint { edge: 1, vertex: 3, num_vertices: 3 })
        );
        let mut e = el(3, &[(0, 1, 0.0)]);
        e.dst.push(2);
        assert!(matches!(Csr::try_from_edge_list(&e), Err(CsrError::EdgeArrays { .. })));
    }

    #[test]
    fn many_chunks_same_result() {
        // Enough edges for several chunks; compare with a sequential build.
        let n = 1000u64;
        let edges: Vec<_> = (0..300_000u64)
            .map(|k| ((k * 7919) % n, (k * k + 3) % n, (k % 97) as f32 / 97.0))
            .collect();
        let e = el(n, &edges);
        let g = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap()
            .install(|| Csr::from_edge_list(&e));
        let mut adj = vec![Vec::new(); n as usize];
        for &(u, v, w) in &edges {
            if u != v {
                adj[u as usize].push((v, w));
                adj[v as usize].push((u, w));
            }
        }
        for v in 0..n {
            let got: Vec<_> = g.arcs(v).collect();
            assert_eq!(got, adj[v as usize], "vertex {v}");
        }
    }
}
