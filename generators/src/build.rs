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
//! The edge list is cut into `C` contiguous chunks (one per thread, at most 8).
//! 1. Each chunk counts, in its own array, the arcs it gives each vertex.
//! 2. The degree of a vertex is the sum of its chunk counts; a prefix sum of the
//!    degrees gives the offsets; each chunk count then becomes the chunk's absolute
//!    start position inside the vertex's segment (chunks in order).
//! 3. Each chunk walks its edges again and writes each arc at its cursor, prefetching
//!    the positions of the edge 16 places ahead (the writes are random; the prefetch
//!    keeps many cache misses in flight). Chunks write disjoint position ranges, and
//!    within a chunk the edges are visited in order, hence the edge-index order of
//!    every vertex's arcs.
//!
//! Memory: the CSR's arrays plus `C` cursors of 8 bytes per vertex, besides the input;
//! no other full-size temporary. Building SCALE 22 (67 M edges, 4 M vertices) holds the
//! 1.25 GiB edge list, the 1.53 GiB CSR and 64 MiB of cursors (2 threads): peak RSS
//! 2.8 GiB, under twice the CSR. The CSR's big arrays are zeroed pages straight from
//! `mmap`, advised for huge pages, and faulted in by the scatter itself.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::graph::{Csr, CsrError, EdgeList};
use crate::{hugepage, memory};

/// Edges between two progress reports of one chunk.
const PROGRESS_EVERY: usize = 1 << 16;
/// Edges between the one whose arcs are written and the one whose arc positions are
/// prefetched.
const PREFETCH_AHEAD: usize = 16;
/// Most edge chunks (each holds one `u64` cursor per vertex: 8 chunks are 64 bytes
/// per vertex, within the build's memory bound for edgefactor 16).
const MAX_CHUNKS: usize = 8;
/// Vertices per task in the per-vertex prefix pass.
const VERTEX_BLOCK: usize = 1 << 14;

impl Csr {
    /// Builds the symmetric adjacency of `el` (see the [module docs](crate::build)).
    ///
    /// # Panics
    /// If `el` breaks the [`EdgeList`] invariants (an endpoint `>= num_vertices`, arrays
    /// of different lengths) or the CSR would not fit in the available memory
    /// ([`Csr::build_bytes`]); [`Csr::try_from_edge_list`] reports those as errors.
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

    /// [`Csr::from_edge_list`] that reports a broken edge list, or a graph too large for
    /// the available memory ([`memory::check_fits`] of [`Csr::build_bytes`], checked
    /// before anything is allocated), instead of panicking.
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
        let need = Csr::build_bytes(el.num_vertices, m as u64);
        memory::check_fits(need, || {
            format!(
                "building the CSR of {} (edge list aside)",
                memory::describe_graph(el.num_vertices, Some(m as u64))
            )
        })?;
        // check_fits refuses needs beyond isize::MAX bytes, and the offsets alone take 8
        // bytes per vertex: the vertex count fits in a usize.
        let n = usize::try_from(el.num_vertices).expect("bounded by check_fits");
        build(el, n, build_chunks(m), progress)
    }

    /// Bytes a CSR construction allocates for `num_vertices` vertices and `num_edges`
    /// edges on rayon's current pool: the CSR itself (offsets, then a target and a
    /// weight per arc, two arcs per edge at most) and one cursor per vertex for each
    /// edge chunk. The edge list is not included ([`graph_bytes`] adds it).
    /// Computed in `u128`: never overflows.
    pub fn build_bytes(num_vertices: u64, num_edges: u64) -> u128 {
        let chunks = build_chunks(usize::try_from(num_edges).unwrap_or(usize::MAX)) as u128;
        let n = u128::from(num_vertices);
        (n + 1) * 8 + chunks * n * 8 + u128::from(num_edges) * 2 * 12
    }
}

/// Bytes of a graph of `num_vertices` vertices and `num_edges` edges while it is loaded:
/// its edge list ([`memory::edge_list_bytes`]) next to the CSR being built from it
/// ([`Csr::build_bytes`]). Computed in `u128`: never overflows.
pub fn graph_bytes(num_vertices: u64, num_edges: u64, weighted: bool) -> u128 {
    memory::edge_list_bytes(num_edges, weighted) + Csr::build_bytes(num_vertices, num_edges)
}

/// Edge chunks of a build over `m` edges on rayon's current pool.
fn build_chunks(m: usize) -> usize {
    rayon::current_num_threads().clamp(1, MAX_CHUNKS).min(m / PROGRESS_EVERY).max(1)
}

/// The edge range of chunk `c` of `chunks` over `m` edges.
fn chunk_range(m: usize, chunks: usize, c: usize) -> std::ops::Range<usize> {
    (m * c / chunks)..(m * (c + 1) / chunks)
}

fn build(
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
    let mut cursors: Vec<Vec<u64>> = (0..chunks)
        .into_par_iter()
        .map(|c| -> Result<Vec<u64>, CsrError> {
            let mut cnt: Vec<u64> = hugepage::zeroed_vec(n);
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
                        cnt[u as usize] += 1;
                        cnt[v as usize] += 1;
                    }
                }
                report(end - start);
                start = end;
            }
            Ok(cnt)
        })
        .collect::<Result<_, _>>()?;

    // Pass 2: degrees (sums over the chunks) into offsets[v + 1], their prefix sum, then
    // each chunk's count becomes its absolute start position inside the vertex's segment.
    let mut offsets = hugepage::filled_vec(n + 1, 0u64);
    offsets[1..].par_chunks_mut(VERTEX_BLOCK).enumerate().for_each(|(b, deg)| {
        let base = b * VERTEX_BLOCK;
        for (i, d) in deg.iter_mut().enumerate() {
            *d = cursors.iter().map(|c| c[base + i]).sum();
        }
    });
    let mut total = 0u64;
    for o in offsets.iter_mut() {
        total += *o;
        *o = total;
    }
    {
        let mut per_chunk: Vec<_> =
            cursors.iter_mut().map(|c| c.chunks_mut(VERTEX_BLOCK)).collect();
        let blocks: Vec<Vec<&mut [u64]>> = (0..n.div_ceil(VERTEX_BLOCK))
            .map(|_| {
                per_chunk.iter_mut().map(|it| it.next().expect("one block per chunk")).collect()
            })
            .collect();
        let offsets = &offsets[..];
        blocks.into_par_iter().enumerate().for_each(|(b, mut cs)| {
            let base = b * VERTEX_BLOCK;
            for i in 0..cs.first().map_or(0, |c| c.len()) {
                let mut pos = offsets[base + i];
                for c in cs.iter_mut() {
                    let t = c[i];
                    c[i] = pos;
                    pos += t;
                }
            }
        });
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
        let in_weights = el.weights.as_deref();
        cursors.par_iter_mut().enumerate().for_each(|(c, cur)| {
            let range = chunk_range(m, chunks, c);
            let mut start = range.start;
            while start < range.end {
                let end = (start + PROGRESS_EVERY).min(range.end);
                for k in start..end {
                    if k + 2 * PREFETCH_AHEAD < end {
                        // First stage: the cursors of the edge twice as far ahead.
                        let far = k + 2 * PREFETCH_AHEAD;
                        prefetch_read(&cur[src[far] as usize]);
                        prefetch_read(&cur[dst[far] as usize]);
                    }
                    if k + PREFETCH_AHEAD < end {
                        // Warm the lines the arcs of a later edge will go to (exact
                        // unless a vertex repeats in between).
                        let ahead = k + PREFETCH_AHEAD;
                        let (a, b) = (cur[src[ahead] as usize], cur[dst[ahead] as usize]);
                        tw.prefetch(a as usize);
                        tw.prefetch(b as usize);
                        if weighted {
                            ww.prefetch(a as usize);
                            ww.prefetch(b as usize);
                        }
                    }
                    let (u, v) = (src[k] as usize, dst[k] as usize);
                    if u == v {
                        continue;
                    }
                    let pu = cur[u] as usize;
                    cur[u] += 1;
                    let pv = cur[v] as usize;
                    cur[v] += 1;
                    // SAFETY: pass 2 gave chunk c the positions [start_c(x), start_c(x) +
                    // count_c(x)) of each vertex x, disjoint from every other (chunk,
                    // vertex) pair; pass 1 counted exactly the arcs written here (same
                    // unchanged edges, same rule), so each position is written once.
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
    drop(cursors);
    Ok(Csr::from_parts_unchecked(el.num_vertices, offsets, targets, weights, weighted))
}

/// Hints that `x` will be read soon.
#[inline(always)]
fn prefetch_read<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint: it never faults nor changes memory, and the
        // address comes from a reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
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
    fn vertex_counts_beyond_memory_are_errors_not_aborts() {
        // 2^64 - 1 vertices used to panic with "capacity overflow"; 2^61 vertices need
        // more bytes than any address space holds: refused whatever the machine.
        for n in [u64::MAX, u64::MAX - 1, 1 << 61] {
            let e = el(n, &[(0, 1, 1.0), (1, n - 1, 2.0)]);
            let err = Csr::try_from_edge_list(&e).unwrap_err();
            assert!(matches!(err, CsrError::Memory(_)), "{err:?}");
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!(
                    "building the CSR of a graph of {n} vertices and 2 edges (edge list aside) needs "
                )) && msg.contains(" GiB, only "),
                "{msg}"
            );
        }
        assert!(Csr::build_bytes(u64::MAX, u64::MAX) > u128::from(u64::MAX));
        assert_eq!(Csr::build_bytes(0, 0), 8);
        // One chunk for few edges: offsets, one cursor array, two arcs per edge.
        assert_eq!(Csr::build_bytes(10, 3), 11 * 8 + 10 * 8 + 3 * 24);
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
