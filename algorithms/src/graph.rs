//! The graph as every partition sees it while a kernel runs: the partitioning, the tag
//! encoding of vertices, and the arcs of the partitions whose rows this process holds, in
//! the layouts the kernels read ([`crate::adjacency`]), each copied on first use. Trustees
//! only read it.
//!
//! # Rows, own parts and ranks
//!
//! The partitioning and the tags are global (all `R × W` parts of the job). A process holds
//! the rows of some vertices (`Rows`: a whole [`Csr`], or a [`LocalCsr`] with the rows of
//! its rank's range) and makes arc copies for its *own* parts only: under `mpirun` the
//! parts `r·W .. (r+1)·W` of its rank `r`, in one process (also a loopback split, whose
//! fake ranks share the process) every part.
//!
//! The *rank of a part* is `part / per_rank`, with `per_rank` the workers per rank of the
//! runtime (the fake ranks' in a loopback split), so the "another rank" tests below are the
//! same under `mpirun` and in a loopback split, and a loopback split exercises every
//! cross-rank path in one process.
//!
//! When the job has more than one rank, each own part also gets its **in-arcs**
//! (`crate::adjacency::InArcs`): the arcs from vertices of other ranks' parts into it,
//! grouped by source, built from its own rows (the graph is symmetric: see
//! [`crate::adjacency`]). An SSSP scan from a partition of another rank is relaxed over
//! them instead of the sender's arc copy, which this process need not hold.
//!
//! # Memory per rank
//!
//! With `A` the arcs of the rank's rows, `A_x` those of them whose target lies in another
//! rank, `S` the distinct sources of other ranks among those targets, `n_r` the rank's
//! vertices, `P` the pairs (vertex of the rank, partition of another rank) joined by at
//! least one arc, `W` its workers, `T` the tag space (`< 2n` for equal parts; under twice
//! the parts times the largest part's vertices for parts balanced by arcs, in one process).
//! The SSSP copy summarizes a vertex's arcs to each partition of another rank in one entry
//! (`crate::adjacency::build`), since the receiver relaxes its in-arcs, so in-arcs and copy
//! together cost what the copy of every arc cost in one process:
//!
//! ```text
//! rows (held by the caller)       16·A + 8·n_r
//! SSSP arc copy                    8·(A − A_x + P) + 8·n_r
//! SSSP in-arcs (ranks > 1)         8·A_x + 8·S + W·(T/8 + T/16) (bitmap, per-64 counts);
//!                                  while built, 8·T more (one part at a time)
//! BFS arc copy                     4·A + 8·n_r
//! SSSP, kept across searches       ~8.2·n_r (distance, parent tag, pending bit) + bins
//! BFS, kept across searches        ~8·n_r + W·T/8 + 2·T/8 (send filters, two frontier
//!                                  bitmaps per rank)
//! ```
//!
//! A search's result slice adds 12 (SSSP) or 12 (BFS) bytes per vertex of the rank
//! (`Engine::sssp_local`); a whole result gathered on rank 0 (`Engine::sssp`) adds that
//! per vertex of the graph there.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use skein_generators::distributed::LocalCsr;
use skein_generators::Csr;

use crate::adjacency::{self, Arc32, InArcs, PartArcs, RowsRef, Tag, Tags, NO_TAG};
use crate::partition::Partitioning;

/// The rows a process holds.
#[derive(Debug, Clone)]
pub(crate) enum Rows {
    /// Every row.
    Whole(Arc<Csr>),
    /// The rows of one range of vertices.
    Local(Arc<LocalCsr>),
}

impl Rows {
    /// The rows as slices.
    pub(crate) fn get(&self) -> RowsRef<'_> {
        match self {
            Rows::Whole(g) => RowsRef {
                first: 0,
                offsets: g.offsets(),
                targets: g.targets(),
                weights: g.weights(),
            },
            Rows::Local(g) => RowsRef {
                first: g.range().start,
                offsets: g.offsets(),
                targets: g.targets(),
                weights: g.weights(),
            },
        }
    }

    /// Vertices of the whole graph.
    pub(crate) fn num_vertices(&self) -> u64 {
        match self {
            Rows::Whole(g) => g.num_vertices(),
            Rows::Local(g) => g.num_vertices(),
        }
    }
}

/// What the weights of the rows held say, for SSSP: the first weight it cannot use and the
/// largest weight.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct WeightSummary {
    /// The first arc (index in the rows held) whose weight is negative, NaN or infinite.
    pub(crate) bad: Option<(u64, f32)>,
    /// The largest weight (0 without arcs).
    pub(crate) max: f32,
    /// Arcs held.
    pub(crate) arcs: u64,
}

impl WeightSummary {
    /// Over `weights`, in parallel.
    pub(crate) fn of(weights: &[f32]) -> WeightSummary {
        let bad = weights
            .par_iter()
            .position_first(|&w| !w.is_finite() || w < 0.0)
            .map(|arc| (arc as u64, weights[arc]));
        let max = weights.par_iter().copied().reduce(|| 0.0, f32::max);
        WeightSummary { bad, max, arcs: weights.len() as u64 }
    }
}

/// A partition's own handle on its graph's [`GraphView`]. A kernel's partition clones its
/// handle to read the view while its own state is borrowed mutably, once per batch it
/// serves: cloning the shared `Arc<GraphView>` bumped one count, on one cache line, that
/// every worker of the process bumped too (13 % of the SSSP scan loop's samples with 8
/// workers on 2 cores, `docs/performance.md`, "Scans that carry their address"). This
/// handle's count is the partition's alone.
#[derive(Debug, Clone)]
// The second allocation is the point: a count of the partition's own.
#[allow(clippy::redundant_allocation)]
pub(crate) struct OwnView(Arc<Arc<GraphView>>);

impl OwnView {
    pub(crate) fn new(view: Arc<GraphView>) -> OwnView {
        OwnView(Arc::new(view))
    }
}

impl std::ops::Deref for OwnView {
    type Target = GraphView;
    #[inline]
    fn deref(&self) -> &GraphView {
        &self.0
    }
}

/// The graph as every partition sees it: the partitioning, the tag encoding and the arcs of
/// this process's own parts in the layouts the kernels read (each copied on first use).
///
/// Trustees only read it; each one touches the arcs of its own vertices, and an SSSP
/// trustee also the arcs into its partition that a `crate::sssp::Scan` names.
///
/// A kernel reaches its rank's view from any trustee by the graph's id
/// ([`crate::registry::graph`], the id from [`crate::Engine::graph_id`]): a partition reads
/// the owner of any vertex ([`GraphView::parts`], [`Tags`]), its own rows as global ids
/// ([`GraphView::rows`]) and its out-arcs as tags ([`GraphView::out_arcs`]). The graphs the
/// engine holds are symmetric (every edge in both directions, `skein_generators::Csr`), so a
/// vertex's out-arcs are also its in-arcs: a pull kernel reads the same arrays.
#[derive(Debug)]
pub struct GraphView {
    rows: Rows,
    /// Which partition owns which vertex: `R × W` contiguous blocks of global ids, balanced
    /// by arcs when this process knows every degree ([`Partitioning::balanced`]).
    pub parts: Partitioning,
    /// The tag encoding (owner and local index in one `u32`) of the arc copies.
    pub tags: Tags,
    /// Workers per rank of the runtime: the rank of part `p` is `p / per_rank`.
    per_rank: usize,
    /// The parts whose rows this process holds and copies.
    own: Range<usize>,
    weighted: OnceLock<Vec<PartArcs<Arc32>>>,
    bare: OnceLock<Vec<PartArcs<Tag>>>,
    /// The first arc copied (in the rows held) and the own parts' targets as `u32`.
    targets32: OnceLock<(u64, Vec<u32>)>,
    in_arcs: OnceLock<Vec<InArcs>>,
}

impl GraphView {
    /// Partitions the graph of `rows` over `parts` parts, `per_rank` to a rank, of which
    /// this process owns `own`, balanced counting a vertex as `vertex_arcs` arcs
    /// ([`Partitioning::balanced_by`]) where the parts are balanced; fails when the tags
    /// cannot encode it or the rows of `own` are not held.
    pub(crate) fn new(
        rows: Rows,
        parts: usize,
        per_rank: usize,
        own: Range<usize>,
        vertex_arcs: u64,
    ) -> Result<GraphView, String> {
        assert!(per_rank >= 1 && parts % per_rank == 0 && own.end <= parts);
        let n = rows.num_vertices();
        let held = rows.get();
        // Parts balanced by arcs in one process (every part its own, every row held: also
        // a loopback split). Across processes the parts are equal blocks (`rank_bounds`):
        // ranks holding their own rows were built for them before any degree was known,
        // and a rank's slice of a result is its `rank_bounds` range either way.
        let parts = if own == (0..parts) && held.range() == (0..n) {
            Partitioning::balanced_by(held.offsets, parts, vertex_arcs)
        } else {
            Partitioning::new(n, parts)
        };
        let tags = Tags::new(&parts)?;
        let want = if own.is_empty() {
            0..0
        } else {
            parts.range(own.start).start..parts.range(own.end - 1).end
        };
        if !held.holds(&want) {
            return Err(format!(
                "the rows held ({}..{}) do not cover the vertices of this rank's partitions \
                 ({}..{})",
                held.range().start,
                held.range().end,
                want.start,
                want.end
            ));
        }
        Ok(GraphView {
            rows,
            parts,
            tags,
            per_rank,
            own,
            weighted: OnceLock::new(),
            bare: OnceLock::new(),
            targets32: OnceLock::new(),
            in_arcs: OnceLock::new(),
        })
    }

    /// A view of the whole graph `graph` over `parts` parts in one rank.
    #[cfg(test)]
    pub(crate) fn whole(graph: Arc<Csr>, parts: usize) -> Result<GraphView, String> {
        GraphView::new(Rows::Whole(graph), parts, parts, 0..parts, crate::partition::VERTEX_ARCS)
    }

    /// The rows this process holds (`RowsRef::range`: every vertex in one process, the
    /// rank's vertices under `mpirun` when built from rank-local rows): targets as global
    /// ids, in the graph's order.
    pub fn rows(&self) -> RowsRef<'_> {
        self.rows.get()
    }

    /// The out-arcs (= in-arcs: the graph is symmetric) of own part `p` as tags, local
    /// arcs first ([`PartArcs::split`]); every own part's copied on the first call (4 bytes
    /// per arc, shared with BFS).
    ///
    /// # Panics
    /// If this process does not hold part `p` (a part of another rank).
    #[inline]
    pub fn out_arcs(&self, p: usize) -> &PartArcs<Tag> {
        self.bare(p)
    }

    /// The neighbours of `v`, a vertex of an own part, as `u32` global ids in the rows' order:
    /// half the bytes of [`GraphView::rows`], for kernels that read whole rows in order. The
    /// own parts' rows are copied on the first call (in parallel).
    ///
    /// # Panics
    /// If the graph has `u32::MAX` vertices or more, or `v` is not a vertex of an own part.
    #[inline]
    pub fn row32(&self, v: u64) -> &[u32] {
        let (first, targets) = self.all_row32();
        let rows = self.rows.get();
        let i = (v - rows.first) as usize;
        &targets[(rows.offsets[i] - first) as usize..(rows.offsets[i + 1] - first) as usize]
    }

    /// The copy [`GraphView::row32`] reads: the first arc copied and the targets.
    pub fn all_row32(&self) -> &(u64, Vec<u32>) {
        self.targets32.get_or_init(|| {
            assert!(self.parts.num_vertices() < u64::from(u32::MAX), "too many vertices");
            let rows = self.rows.get();
            let own = if self.own.is_empty() {
                0..0
            } else {
                self.parts.range(self.own.start).start..self.parts.range(self.own.end - 1).end
            };
            let (a, b) =
                if own.is_empty() { (0, 0) } else { (rows.start(own.start), rows.start(own.end)) };
            let src = &rows.targets[a as usize..b as usize];
            // Asked for transparent huge pages, as the other copies.
            let mut t = skein_generators::hugepage::filled_vec(src.len(), 0u32);
            t.par_iter_mut().zip(src).for_each(|(t, &s)| *t = s as u32);
            (a, t)
        })
    }

    /// The whole graph, when this process holds it.
    #[cfg(test)]
    pub(crate) fn csr(&self) -> &Csr {
        match &self.rows {
            Rows::Whole(g) => g,
            Rows::Local(_) => panic!("not the whole graph"),
        }
    }

    /// The parts of the rank of part `p`.
    #[inline]
    pub fn rank_parts(&self, p: usize) -> Range<usize> {
        let first = p / self.per_rank * self.per_rank;
        first..first + self.per_rank
    }

    /// True when the job has more than one rank.
    pub fn ranked(&self) -> bool {
        self.per_rank < self.parts.parts()
    }

    /// The parts whose arcs this process holds.
    pub fn own(&self) -> Range<usize> {
        self.own.clone()
    }

    /// `all[p - own().start]`, one bounds check (a part below `own` wraps around to an
    /// index past the end).
    #[inline]
    fn own_part<'a, T>(&self, all: &'a [T], p: usize) -> &'a T {
        match all.get(p.wrapping_sub(self.own.start)) {
            Some(x) => x,
            None => self.not_own(p),
        }
    }

    #[cold]
    #[inline(never)]
    fn not_own(&self, p: usize) -> ! {
        panic!("partition {p} is not held by this process (it holds {:?})", self.own)
    }

    /// The arcs with weights (SSSP) of own part `p`; every own part's copied on the first
    /// call.
    #[inline]
    pub(crate) fn weighted(&self, p: usize) -> &PartArcs<Arc32> {
        self.own_part(self.all_weighted(), p)
    }

    /// Every own part's arcs with weights, by `part - own().start`.
    #[inline]
    pub(crate) fn all_weighted(&self) -> &[PartArcs<Arc32>] {
        self.weighted.get_or_init(|| {
            let far = self.ranked().then_some(self.per_rank);
            adjacency::build(self.rows.get(), &self.parts, self.tags, self.own(), far)
        })
    }

    /// The arcs without weights (BFS) of own part `p`; every own part's copied on the
    /// first call.
    #[inline]
    pub(crate) fn bare(&self, p: usize) -> &PartArcs<Tag> {
        self.own_part(self.all_bare(), p)
    }

    /// Every own part's arcs without weights, by `part - own().start`.
    #[inline]
    pub(crate) fn all_bare(&self) -> &[PartArcs<Tag>] {
        self.bare.get_or_init(|| {
            adjacency::build(self.rows.get(), &self.parts, self.tags, self.own(), None)
        })
    }

    /// The in-arcs (from other ranks' parts) of own part `p`; built for every own part on
    /// the first call (empty when the job has one rank).
    #[inline]
    pub(crate) fn in_arcs(&self, p: usize) -> &InArcs {
        self.own_part(self.all_in_arcs(), p)
    }

    /// Every own part's in-arcs, by `part - own().start`.
    #[inline]
    pub(crate) fn all_in_arcs(&self) -> &[InArcs] {
        self.in_arcs.get_or_init(|| {
            let rows = self.rows.get();
            // One part after the other (each built in parallel), so that one part's
            // temporary counts (8 bytes per tag of the other ranks) exist at a time.
            self.own()
                .map(|p| {
                    if self.ranked() {
                        InArcs::build(rows, &self.parts, self.tags, p, self.rank_parts(p))
                    } else {
                        InArcs::default()
                    }
                })
                .collect()
        })
    }

    /// Bytes of the arc copies and in-arcs made so far.
    pub(crate) fn heap_bytes(&self) -> u64 {
        let w: u64 = self.weighted.get().map_or(0, |v| v.iter().map(PartArcs::heap_bytes).sum());
        let b: u64 = self.bare.get().map_or(0, |v| v.iter().map(PartArcs::heap_bytes).sum());
        let i: u64 = self.in_arcs.get().map_or(0, |v| v.iter().map(InArcs::heap_bytes).sum());
        let t = self.targets32.get().map_or(0, |v| 4 * v.1.len() as u64);
        w + b + i + t
    }

    /// The global id of `tag`, or `NO_PARENT` for [`NO_TAG`].
    pub fn global(&self, tag: Tag) -> u64 {
        if tag == NO_TAG {
            skein_generators::NO_PARENT
        } else {
            self.parts.global(self.tags.part(tag), self.tags.local(tag))
        }
    }

    /// Writes the global id of each of `tags` ([`GraphView::global`]) into `out`.
    pub(crate) fn write_globals(&self, tags: &[Tag], out: &mut [u64]) {
        assert_eq!(tags.len(), out.len());
        for (o, &t) in out.iter_mut().zip(tags) {
            *o = self.global(t);
        }
    }

    /// The tag of global vertex `v`.
    pub fn tag(&self, v: u64) -> Tag {
        let (p, l) = self.parts.locate(v);
        self.tags.tag(p, l)
    }
}
