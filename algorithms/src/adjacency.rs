//! Each partition's out-arcs, in the layout its kernels read.
//!
//! The shared [`skein_generators::Csr`] stores targets as global `u64` ids and weights in a second array:
//! 12 bytes per arc in two streams, and every arc's owner found by a multiply. The
//! kernels read each partition's arcs instead from a copy made once per graph and
//! [`Layout`] when a kernel first needs it: 8 bytes per arc in one stream for SSSP (a
//! [`Tag`], the target's owner and local index in one `u32`, and the weight), 4 bytes
//! per arc for BFS (the tag alone).
//!
//! # Tags
//!
//! `tag = owner << shift | local`, with `shift` the bits of the largest local index, so
//! decoding is a shift and a mask. Tags are dense enough to index arrays over all
//! vertices (the send filters, the BFS frontier bitmaps): the tag space has
//! `parts << shift < 2 * parts * max_part_len` entries. The encoding needs the tag space
//! to fit `u32` with [`NO_TAG`] left free, so graphs of about 2^31 vertices and more are
//! refused by [`Tags::new`] ("not yet supported").
//!
//! # Local arcs first
//!
//! Each vertex's arcs are stored with the arcs to its own partition first and the
//! arcs to other partitions after them, grouped by owner in ascending order (each group
//! in the graph's order). A kernel reads the own arcs in one loop ([`PartArcs::split`]: the
//! split point is found from the tags, [`PartArcs::own_len`]), then the others by owner
//! ([`PartArcs::segments_of`]): no owner test per arc that may go either way. That test is a coin flip with two partitions: its
//! mispredictions stalled the arc loop and the random reads in flight behind it.
//!
//! # Bounds: 8 bytes per vertex
//!
//! A partition's copy keeps one offset per vertex (and one more): the arcs of local vertex
//! `l` are `offsets[l]..offsets[l + 1]`, as in the CSR. The split point between own and
//! other arcs is not stored (it was, as a second `u64` per vertex: 16 bytes of bounds per
//! vertex, a cache line per 4 vertices where a bottom-up BFS step reads one per 8).
//!
//! The copies ask for transparent huge pages, as the CSR's arrays do: every vertex's
//! arcs start at a random place, and 4 KiB pages would make that a TLB miss too.
//!
//! # Invariants (the unsafe code of `InArcs::build` relies on them)
//!
//! 1. Its last pass writes each in-arc at an index taken with a `fetch_add` on its
//!    source's cursor, which starts at the group's first index; the group holds exactly as
//!    many slots as the pass before counted arcs of that source (the same arcs, by the same
//!    test), so every index is below the group's end, hence the array's length (asserted),
//!    and is given out once: no two writers share an element.
//! 2. The array written is neither read, moved nor freed until the parallel pass has
//!    returned (the pass borrows only the raw pointer, and is joined by rayon).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use skein_generators::hugepage::filled_vec;
use skein_generators::splitmix::SplitMix64;

use crate::partition::Partitioning;

/// Borrowed rows `first..first + offsets.len() - 1`: `offsets[v - first]..offsets[v - first
/// + 1]` index the arcs of `v` in `targets` and `weights`.
#[derive(Debug, Clone, Copy)]
pub struct RowsRef<'a> {
    /// The first vertex held.
    pub first: u64,
    /// One entry more than vertices held: `offsets[v - first]..offsets[v - first + 1]`.
    pub offsets: &'a [u64],
    /// Every arc's target, a global id.
    pub targets: &'a [u64],
    /// Every arc's weight.
    pub weights: &'a [f32],
}

impl<'a> RowsRef<'a> {
    /// The neighbours of `v` (a vertex held) as global ids, in the graph's order.
    #[inline]
    pub fn neighbors(&self, v: u64) -> &'a [u64] {
        let i = (v - self.first) as usize;
        &self.targets[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }
}

impl RowsRef<'_> {
    /// The vertices held.
    pub fn range(&self) -> Range<u64> {
        self.first..self.first + self.offsets.len() as u64 - 1
    }

    /// The index of the first arc of `v` (held) in `targets`.
    #[inline]
    pub fn start(&self, v: u64) -> u64 {
        self.offsets[(v - self.first) as usize]
    }

    /// True when `range` lies inside the rows held.
    pub fn holds(&self, range: &Range<u64>) -> bool {
        let mine = self.range();
        range.is_empty() || (mine.start <= range.start && range.end <= mine.end)
    }
}

/// A vertex as `owner << shift | local` (see the module docs).
pub type Tag = u32;

/// "No vertex" (an unreached vertex's parent).
pub const NO_TAG: Tag = u32::MAX;

/// What a partition's copy stores per arc: [`Arc32`] for SSSP, a bare [`Tag`] for BFS
/// (which needs no weights, and reads half the bytes without them).
pub trait Layout: Copy + Send + Sync + std::fmt::Debug + 'static {
    /// The arc to `tag` weighing `weight`.
    fn new(tag: Tag, weight: f32) -> Self;
    /// Its target.
    fn tag(&self) -> Tag;
}

impl Layout for Tag {
    #[inline]
    fn new(tag: Tag, _weight: f32) -> Self {
        tag
    }
    #[inline]
    fn tag(&self) -> Tag {
        *self
    }
}

impl Layout for Arc32 {
    #[inline]
    fn new(tag: Tag, weight: f32) -> Self {
        Arc32 { tag, weight }
    }
    #[inline]
    fn tag(&self) -> Tag {
        self.tag
    }
}

/// One arc of a partition: its target's tag and its weight; or, in a copy that summarizes
/// the arcs to other ranks (`build` with `far`), one of the two entries of such a
/// summary: the owner's tag of local index 0, and in the weight's bits
/// ([`Arc32::count`]) the number of arcs to that owner, then their address in the
/// owner's in-arcs (`PartArcs::far_group`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct Arc32 {
    pub tag: Tag,
    pub weight: f32,
}

impl Arc32 {
    /// The number of arcs a summary entry stands for.
    #[inline]
    pub fn count(&self) -> u64 {
        u64::from(self.weight.to_bits())
    }
}

/// The tag encoding of one partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tags {
    shift: u32,
    mask: u32,
}

impl Tags {
    /// The encoding for `parts`, or why it cannot have one.
    pub fn new(parts: &Partitioning) -> Result<Tags, String> {
        let max_len = (0..parts.parts()).map(|p| parts.len(p)).max().unwrap_or(0);
        let shift = u32::BITS - max_len.saturating_sub(1).leading_zeros();
        let space = (parts.parts() as u64) << shift;
        if space > u64::from(NO_TAG) {
            return Err(format!(
                "{} vertices over {} workers need more than 32-bit vertex tags: graphs of \
                 2^31 vertices or more are not yet supported by the skein engine",
                parts.num_vertices(),
                parts.parts()
            ));
        }
        Ok(Tags { shift, mask: ((1u64 << shift) - 1) as u32 })
    }

    /// The tag of `local` in `part`.
    #[inline]
    pub fn tag(&self, part: usize, local: u32) -> Tag {
        ((part as u32) << self.shift) | local
    }

    /// The owner of `tag`.
    #[inline]
    pub fn part(&self, tag: Tag) -> usize {
        (tag >> self.shift) as usize
    }

    /// The local index of `tag` in its owner.
    #[inline]
    pub fn local(&self, tag: Tag) -> u32 {
        tag & self.mask
    }

    /// How many tags there are (the length of an array indexed by tag).
    pub fn space(&self, parts: usize) -> usize {
        parts << self.shift
    }

    /// The tag of global vertex `v` under `parts`.
    #[inline]
    pub fn tag_of(&self, parts: &Partitioning, v: u64) -> Tag {
        let (p, l) = parts.locate(v);
        self.tag(p, l)
    }

    /// log2 of the tags per part.
    pub fn shift(&self) -> u32 {
        self.shift
    }
}

/// One partition's out-arcs in CSR form over its local indices.
#[derive(Debug)]
pub struct PartArcs<A: Layout> {
    /// `offsets[l]..offsets[l + 1]` are the arcs of local vertex `l` (one entry more than
    /// vertices): 8 bytes per vertex, eight vertices' bounds to a cache line. Those to its own partition come first (see the module docs); where
    /// they end is found from the arcs themselves ([`PartArcs::own_len`]), not stored.
    offsets: Vec<u64>,
    /// The tags of the partition's own vertices: `own_tags..own_tags + own_span`.
    own_tags: Tag,
    own_span: u32,
    arcs: Vec<A>,
    /// Far groups summarized ([`build`] with `far`): each takes [`FAR_ENTRIES`] entries.
    far_groups: u64,
    /// The sum of [`far_print`] over the far groups.
    far_print: u64,
}

impl<A: Layout> PartArcs<A> {
    /// The arcs of local vertex `local`.
    #[inline]
    pub fn arcs(&self, local: u32) -> &[A] {
        let (s, e) = self.bounds(local);
        &self.arcs[s as usize..e as usize]
    }

    /// `(start, end)`: the arcs of local vertex `local` are `range(start, end)`.
    #[inline]
    pub fn bounds(&self, local: u32) -> (u64, u64) {
        let l = local as usize;
        (self.offsets[l], self.offsets[l + 1])
    }

    /// Hints the CPU to load the bounds of local vertex `local` ([`PartArcs::bounds`]), for
    /// a kernel that knows which vertex it takes a few steps ahead. Changes nothing but
    /// timing, whatever `local` is.
    #[inline]
    pub fn prefetch_bounds(&self, local: u32) {
        let l = local as usize;
        if let (Some(s), Some(e)) = (self.offsets.get(l), self.offsets.get(l + 1)) {
            skein::prefetch(s);
            skein::prefetch(e);
        }
    }

    /// Hints the CPU to load the arcs of local vertex `local` ([`PartArcs::prefetch_range`]
    /// of its bounds, which it reads: best prefetched earlier, [`PartArcs::prefetch_bounds`]).
    /// Changes nothing but timing, whatever `local` is.
    #[inline]
    pub fn prefetch_arcs(&self, local: u32, lines: u64) {
        let l = local as usize;
        if let (Some(&s), Some(&e)) = (self.offsets.get(l), self.offsets.get(l + 1)) {
            self.prefetch_range(s, e, lines);
        }
    }

    /// Hints the CPU to load the arcs `start..end` (a range for [`PartArcs::range`]): the
    /// cache lines of its first `lines × 64` bytes, and its last line. Changes nothing but
    /// timing, whatever the range is.
    #[inline]
    pub fn prefetch_range(&self, start: u64, end: u64, lines: u64) {
        let step = (64 / std::mem::size_of::<A>()).max(1) as u64;
        let stop = end.min(start.saturating_add(lines.saturating_mul(step)));
        let mut at = start;
        while at < stop {
            if let Some(a) = self.arcs.get(at as usize) {
                skein::prefetch(a);
            }
            at += step;
        }
        if end > stop {
            if let Some(a) = self.arcs.get((end - 1) as usize) {
                skein::prefetch(a);
            }
        }
    }

    /// True when `a` points into this partition.
    #[inline]
    pub fn is_own(&self, a: &A) -> bool {
        a.tag().wrapping_sub(self.own_tags) < self.own_span
    }

    /// How many of `arcs` (a vertex's arcs, or their tail from some own arc on) point into
    /// this partition: they are a prefix. All of them when the last one does (one test:
    /// every vertex with one partition, most with few), else a binary search; either way
    /// the kernel's loop over the own arcs then has a known count, no test per arc.
    #[inline]
    pub fn own_len(&self, arcs: &[A]) -> usize {
        match arcs.last() {
            Some(a) if !self.is_own(a) => prefix_len(arcs, |a| self.is_own(a)),
            _ => arcs.len(),
        }
    }

    /// The arcs of local vertex `local` split into those to its own partition and those
    /// to other partitions.
    #[inline]
    pub fn split(&self, local: u32) -> (&[A], &[A]) {
        let all = self.arcs(local);
        all.split_at(self.own_len(all))
    }

    /// The arcs `start..end` of the partition (a range from [`PartArcs::segments`]).
    #[inline]
    pub fn range(&self, start: u64, end: u64) -> &[A] {
        &self.arcs[start as usize..end as usize]
    }

    /// The arcs of local vertex `local` to other partitions, as `(owner, start, end)`
    /// ranges for [`PartArcs::range`], one per owner, owners ascending.
    pub fn segments(&self, local: u32, tags: Tags) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        let (start, end) = self.bounds(local);
        let own = self.own_len(self.range(start, end)) as u64;
        self.segments_of(start + own, end, tags)
    }

    /// [`PartArcs::segments`] of the arcs `at..end`: the arcs to other partitions of one
    /// vertex (`end` its last, `at` past its own arcs).
    #[inline]
    pub fn segments_of(
        &self,
        mut at: u64,
        end: u64,
        tags: Tags,
    ) -> impl Iterator<Item = (usize, u64, u64)> + '_ {
        std::iter::from_fn(move || {
            if at == end {
                return None;
            }
            let rest = self.range(at, end);
            let owner = tags.part(rest[0].tag());
            let same = |a: &A| tags.part(a.tag()) == owner;
            // One owner left (always so with two partitions): no search through the arcs.
            let len = if same(&rest[rest.len() - 1]) {
                rest.len() as u64
            } else {
                prefix_len(rest, same) as u64
            };
            let seg = (owner, at, at + len);
            at += len;
            Some(seg)
        })
    }

    /// The out-degree of local vertex `local`.
    #[inline]
    pub fn degree(&self, local: u32) -> u64 {
        let (s, e) = self.bounds(local);
        e - s
    }

    /// Arcs of the whole partition (entries: a far owner a vertex reaches counts once).
    pub fn num_arcs(&self) -> u64 {
        self.arcs.len() as u64 - self.far_groups * (FAR_ENTRIES - 1)
    }

    /// The sum of [`far_print`] over this partition's far groups (0 without `far`).
    pub(crate) fn far_print(&self) -> u64 {
        self.far_print
    }

    /// Bytes held by the arrays.
    pub fn heap_bytes(&self) -> u64 {
        (self.offsets.len() * 8 + self.arcs.len() * std::mem::size_of::<A>()) as u64
    }
}

impl PartArcs<Arc32> {
    /// The count and the address of a far group: the entries `range(start, end)` of a
    /// segment to a part of another rank ([`build`] with `far`). The arcs of the group are
    /// `count` in-arcs of the owner from this part, from `address` on
    /// ([`InArcs::addressed`]).
    #[inline]
    pub(crate) fn far_group(&self, start: u64, end: u64) -> (u64, u64) {
        debug_assert_eq!(end - start, FAR_ENTRIES, "a far group's entries");
        let e = self.range(start, end);
        (e[0].count(), e[1].count())
    }
}

/// How many items of `xs` satisfy `pred`, which holds for a prefix of them and not for
/// the last: a galloping search from the start (probes 1, 2, 4, ... items in, then a
/// binary search in the last stretch). A vertex's own arcs, and each segment of its arcs
/// to one other partition, are short when the partitions are many, so their end lies in
/// the first lines of the row, which the kernels' lookahead asked for; a binary search
/// over the whole row probed its middle, one miss after another (`docs/performance.md`,
/// "Scans from other ranks").
#[inline]
fn prefix_len<T>(xs: &[T], pred: impl Fn(&T) -> bool) -> usize {
    debug_assert!(xs.last().is_some_and(|x| !pred(x)), "the last item must fail");
    // `xs[lo]` satisfies `pred` (or `lo` is 0), `xs[hi]` does not: the first item that
    // fails lies in `lo + 1 ..= hi` (`lo` itself when it is 0 and `xs[0]` fails).
    let mut hi = 1;
    if !xs.first().is_some_and(&pred) {
        return 0;
    }
    while hi < xs.len() && pred(&xs[hi]) {
        hi *= 2;
    }
    let (lo, hi) = (hi / 2, hi.min(xs.len() - 1));
    lo + 1 + xs[lo + 1..hi].partition_point(pred)
}

/// The arcs into one part from the vertices of the *other ranks'* parts, grouped by
/// source: what an SSSP scan from a partition of another rank relaxes (`crate::sssp`).
///
/// Built from the part's own rows: the graph is symmetric (every builder of this
/// workspace stores each edge `{u, v}` as the arcs `u -> v` and `v -> u` with the same
/// weight, repeated edges kept, self-loops dropped), so the arcs of a remote vertex `u`
/// into part `p` are exactly the reverses of `p`'s arcs to `u`, with the same weights. A
/// group lists them in the order of `p`'s rows, which may differ from the order of `u`'s
/// row: SSSP distances are minima of the same binary32 sums either way.
///
/// # Index
///
/// A dense offset per remote vertex would cost 8 bytes per vertex of the graph per
/// partition. Instead: one bit per tag of the other ranks' parts (set when that vertex has
/// arcs into the part), a `u32` count of the set bits before each 64-bit word, and offsets
/// for the sources present only: a source's group is found with one popcount (rank
/// query). About `T/8 + T/16` bytes for a tag space of `T` (under 0.2 byte per remote
/// tag) plus 8 bytes per source present, plus 8 bytes per in-arc. Building it takes a
/// temporary count of 8 bytes per tag of the other ranks (one part at a time).
///
/// The kernel does not search the index: groups lie in tag order, so the groups of one
/// sender part form one span (`part_base`) in the order of its local indices, and the
/// sender, which knows how many arcs its earlier vertices have into this part, sends the
/// group's place in that span ([`InArcs::addressed`]). The index checks that place (the
/// senders' and the receivers' fingerprints, [`InArcs::print`]; and in debug builds every
/// scan against [`InArcs::group`]).
#[derive(Debug, Default)]
pub(crate) struct InArcs {
    /// The tags of the part's own rank, `gap_lo .. gap_lo + gap_len`, have no bit: a tag
    /// `t` above them has bit `t - gap_len`.
    gap_lo: u32,
    gap_len: u32,
    bits: Vec<u64>,
    /// `before[w]`: the set bits in `bits[..w]`.
    before: Vec<u32>,
    /// `offsets[k]..offsets[k + 1]`: the arcs of the `k`-th source present.
    offsets: Vec<u64>,
    /// Each arc's target (in the part) and weight.
    arcs: Vec<Arc32>,
    /// `part_base[q]..part_base[q + 1]`: the arcs from the vertices of part `q` (empty for
    /// the parts of the own rank). A sender addresses its group within its part's span
    /// ([`InArcs::addressed`]).
    part_base: Vec<u64>,
    /// The sum of [`far_print`] over the groups, as their senders compute it.
    print: u64,
}

impl InArcs {
    /// The in-arcs of part `p` from the parts outside `rank_parts` (the parts of `p`'s
    /// rank), from `rows`, which hold `p`'s rows.
    pub(crate) fn build(
        rows: RowsRef<'_>,
        parts: &Partitioning,
        tags: Tags,
        p: usize,
        rank_parts: Range<usize>,
    ) -> InArcs {
        let range = parts.range(p);
        let (lo_v, hi_v) =
            (parts.range(rank_parts.start).start, parts.range(rank_parts.end - 1).end);
        let gap_lo = tags.tag(rank_parts.start, 0);
        let gap_len = ((rank_parts.end - rank_parts.start) << tags.shift()) as u32;
        let space = tags.space(parts.parts()) - gap_len as usize;
        let mut ix =
            InArcs { gap_lo, gap_len, bits: vec![0u64; space.div_ceil(64)], ..InArcs::default() };
        let row = |v: u64| {
            let s = rows.start(v) as usize;
            let e = rows.start(v + 1) as usize;
            (&rows.targets[s..e], &rows.weights[s..e])
        };
        let remote = |u: u64| u < lo_v || u >= hi_v;
        // Blocks of BLOCK vertices, each pass over them in parallel.
        let nblocks = (range.end - range.start).div_ceil(BLOCK as u64);
        let blocks = || {
            (0..nblocks).into_par_iter().map(|i| {
                let lo = range.start + i * BLOCK as u64;
                lo..(lo + BLOCK as u64).min(range.end)
            })
        };
        // Counts each remote source's arcs, densely by bit index (a temporary of 8 bytes per
        // tag of the other ranks: one random increment per arc).
        let dense: Vec<AtomicU64> = (0..space).map(|_| AtomicU64::new(0)).collect();
        blocks().for_each(|b| {
            for v in b {
                for &u in row(v).0 {
                    if remote(u) {
                        dense[ix.bit(tags.tag_of(parts, u))].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        // The bitmap, the counts before each word, the offsets of the sources present;
        // `dense` becomes each source's cursor (its group's first index).
        let mut offsets = vec![0u64];
        let mut total = 0u64;
        ix.before = Vec::with_capacity(ix.bits.len());
        for (w, chunk) in dense.chunks(64).enumerate() {
            ix.before.push((offsets.len() - 1) as u32);
            let mut word = 0u64;
            for (i, c) in chunk.iter().enumerate() {
                let n = c.load(Ordering::Relaxed);
                if n > 0 {
                    word |= 1 << i;
                    c.store(total, Ordering::Relaxed);
                    total += n;
                    offsets.push(total);
                }
            }
            ix.bits[w] = word;
        }
        // Places the arcs: each takes the next free index of its source's group.
        let mut arcs = filled_vec(total as usize, Arc32 { tag: 0, weight: 0.0 });
        let out = RawArcs { ptr: arcs.as_mut_ptr(), len: total as usize };
        blocks().for_each(|b| {
            let out = &out;
            for v in b {
                let me = tags.tag(p, (v - range.start) as u32);
                let (ts, ws) = row(v);
                for (&u, &w) in ts.iter().zip(ws) {
                    if remote(u) {
                        let t = tags.tag_of(parts, u);
                        let i = dense[ix.bit(t)].fetch_add(1, Ordering::Relaxed) as usize;
                        assert!(i < out.len, "in-arc index");
                        // SAFETY: invariant 1 (module docs): `i` is below the length of
                        // `arcs` (checked) and no other writer is given `i`; `arcs` is not
                        // touched otherwise until every writer has returned (invariant 2).
                        unsafe { out.ptr.add(i).write(Arc32 { tag: me, weight: w }) };
                    }
                }
            }
        });
        drop(dense);
        ix.offsets = offsets;
        ix.arcs = arcs;
        // Tags, hence groups, ascend with the part: each part's groups are one span, in the
        // order of its local indices, as its own build numbers them.
        ix.part_base = (0..=parts.parts())
            .map(|q| {
                let t = tags.tag(q, 0);
                let pos = if t < ix.gap_lo {
                    t as usize
                } else {
                    (t.max(ix.gap_lo + ix.gap_len) - ix.gap_len) as usize
                };
                ix.offsets[ix.rank_of(pos.min(space))]
            })
            .collect();
        let mut k = 0;
        for (w, &word) in ix.bits.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let i = w * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let t = if i < ix.gap_lo as usize { i as Tag } else { i as Tag + ix.gap_len };
                let q = tags.part(t);
                let (lo, hi) = (ix.offsets[k], ix.offsets[k + 1]);
                let term = far_print(q, p, u64::from(tags.local(t)), hi - lo, lo - ix.part_base[q]);
                ix.print = ix.print.wrapping_add(term);
                k += 1;
            }
        }
        ix
    }

    /// The number of set bits before bit index `i` (at most the bits' length).
    fn rank_of(&self, i: usize) -> usize {
        let (w, b) = (i / 64, i % 64);
        match self.bits.get(w) {
            Some(&word) => (self.before[w] + (word & ((1u64 << b) - 1)).count_ones()) as usize,
            None => self.offsets.len() - 1,
        }
    }

    /// The arcs `start..end` of the span of part `q` (a sender's address and count,
    /// [`PartArcs::far_group`]): the group of the sender's vertex when the graph is
    /// symmetric. `None` when the range leaves the span.
    #[inline]
    pub(crate) fn addressed(&self, q: usize, start: u64, end: u64) -> Option<&[Arc32]> {
        let (lo, hi) = (*self.part_base.get(q)?, *self.part_base.get(q + 1)?);
        if start > end || end > hi - lo {
            return None;
        }
        Some(&self.arcs[(lo + start) as usize..(lo + end) as usize])
    }

    /// Hints the CPU to load the first `lines` cache lines and the last line of
    /// [`InArcs::addressed`]`(q, start, end)`. Changes nothing but timing.
    #[inline]
    pub(crate) fn prefetch_addressed(&self, q: usize, start: u64, end: u64, lines: usize) {
        if let Some(g) = self.addressed(q, start, end) {
            for a in g.iter().step_by(64 / std::mem::size_of::<Arc32>()).take(lines) {
                skein::prefetch(a);
            }
            if let Some(a) = g.last() {
                skein::prefetch(a);
            }
        }
    }

    /// The sum of [`far_print`] over this part's groups: over a job's parts, equal to the
    /// sum of [`PartArcs::far_print`] exactly when every scan addresses its own group.
    pub(crate) fn print(&self) -> u64 {
        self.print
    }

    /// The bit of tag `t` (of another rank).
    #[inline]
    fn bit(&self, t: Tag) -> usize {
        debug_assert!(
            t < self.gap_lo || t - self.gap_lo >= self.gap_len,
            "tag {t} of the own rank"
        );
        if t < self.gap_lo {
            t as usize
        } else {
            (t - self.gap_len) as usize
        }
    }

    /// The index of source `t` among the sources present (its bit set).
    #[inline]
    fn slot(&self, t: Tag) -> usize {
        let i = self.bit(t);
        let (w, b) = (i / 64, i % 64);
        (self.before[w] + (self.bits[w] & ((1u64 << b) - 1)).count_ones()) as usize
    }

    /// The arcs from `src` (a vertex of another rank) into the part: empty when it has
    /// none.
    #[inline]
    pub(crate) fn group(&self, src: Tag) -> &[Arc32] {
        match self.slot_present(src) {
            Some(k) => &self.arcs[self.offsets[k] as usize..self.offsets[k + 1] as usize],
            None => &[],
        }
    }

    /// The index of source `src` among the sources present, or `None` when it has no arcs
    /// into the part (or lies outside the index).
    #[inline]
    fn slot_present(&self, src: Tag) -> Option<usize> {
        let i = self.bit(src);
        match self.bits.get(i / 64) {
            Some(&w) if w & (1 << (i % 64)) != 0 => Some(self.slot(src)),
            _ => None,
        }
    }

    /// Arcs held.
    #[cfg(test)]
    pub(crate) fn num_arcs(&self) -> u64 {
        self.arcs.len() as u64
    }

    /// Sources present.
    #[cfg(test)]
    pub(crate) fn sources(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }

    /// Bytes held by the arrays.
    pub(crate) fn heap_bytes(&self) -> u64 {
        (self.bits.len() * 8 + self.before.len() * 4 + self.offsets.len() * 8 + self.arcs.len() * 8)
            as u64
    }
}

/// The array of in-arcs being filled by [`InArcs::build`]'s last pass.
struct RawArcs {
    ptr: *mut Arc32,
    len: usize,
}

// SAFETY: the pointer is used only for the disjoint writes of invariant 1 while the array
// stays put (invariant 2); `Arc32` is plain data, which any thread may write.
unsafe impl Sync for RawArcs {}

/// Vertices a rayon task converts at a time.
const BLOCK: usize = 1 << 10;

/// Copies the arcs of the parts `own` of `parts` (whose encoding is `tags`) from `rows`,
/// which hold them, into one [`PartArcs`] per part, in parallel.
///
/// With `far: Some(w)` (parts of `w` workers to a rank), the arcs of a vertex to each part
/// of *another rank* are summarized in [`FAR_ENTRIES`] entries ([`PartArcs::far_group`]):
/// their count, and their address in that part's in-arcs ([`InArcs`]) from this part (the
/// arcs to it of this part's earlier vertices: [`InArcs`] groups sources in tag order). An
/// SSSP scan to such a part names the sender and that range, and the receiver relaxes its
/// in-arcs there, so the sender need not hold those arcs. [`PartArcs::degree`] then counts
/// entries, and [`PartArcs::num_arcs`] counts a summary once.
pub(crate) fn build<A: Layout>(
    rows: RowsRef<'_>,
    parts: &Partitioning,
    tags: Tags,
    own: Range<usize>,
    far: Option<usize>,
) -> Vec<PartArcs<A>> {
    let (targets, weights) = (rows.targets, rows.weights);
    own.map(|p| {
        let range = parts.range(p);
        let src = if range.is_empty() {
            &[0u64][..]
        } else {
            let at = (range.start - rows.first) as usize;
            &rows.offsets[at..=at + (range.end - range.start) as usize]
        };
        let base = src[0];
        let len = src.len() - 1;
        let np = parts.parts();
        // True for the owners whose arcs are summarized (a table: no division per arc).
        let far_owners: Vec<bool> =
            (0..np).map(|owner| far.is_some_and(|w| owner / w != p / w)).collect();
        let is_far = |owner: usize| far_owners[owner];
        let mut local_offsets = filled_vec(src.len(), 0u64);
        // With `far`: per block of BLOCK vertices, the arcs its vertices have to each far
        // owner, then (below) the arcs to each far owner of the blocks before it: where the
        // block's first group lies in that owner's in-arcs from this part.
        let mut far_before: Vec<Vec<u64>> = Vec::new();
        if far.is_none() {
            local_offsets.par_iter_mut().zip(src).for_each(|(o, &s)| *o = s - base);
        } else {
            // Each vertex's entries: its arcs to near owners, two per far owner reached.
            far_before = local_offsets[1..]
                .par_chunks_mut(BLOCK)
                .enumerate()
                .map(|(b, out)| {
                    let mut seen = vec![usize::MAX; np];
                    let mut to_far = vec![0u64; np];
                    for (i, o) in out.iter_mut().enumerate() {
                        let l = b * BLOCK + i;
                        let mut n = 0;
                        for &v in &targets[src[l] as usize..src[l + 1] as usize] {
                            let owner = parts.owner(v);
                            if !is_far(owner) {
                                n += 1;
                            } else {
                                to_far[owner] += 1;
                                if seen[owner] != l {
                                    seen[owner] = l;
                                    n += FAR_ENTRIES;
                                }
                            }
                        }
                        *o = n;
                    }
                    to_far
                })
                .collect();
            for l in 1..local_offsets.len() {
                local_offsets[l] += local_offsets[l - 1];
            }
            // Exclusive prefix sums over the blocks, per owner.
            let mut sum = vec![0u64; np];
            for block in &mut far_before {
                for (s, c) in sum.iter_mut().zip(block.iter_mut()) {
                    let n = *c;
                    *c = *s;
                    *s += n;
                }
            }
        }
        let mut arcs = filled_vec(local_offsets[len] as usize, A::new(0, 0.0));
        // One disjoint slice of arcs per block of BLOCK vertices.
        let mut blocks = Vec::with_capacity(len.div_ceil(BLOCK));
        let mut rest: &mut [A] = &mut arcs;
        for lo in (0..len).step_by(BLOCK) {
            let hi = (lo + BLOCK).min(len);
            let n = (local_offsets[hi] - local_offsets[lo]) as usize;
            let (block, tail) = std::mem::take(&mut rest).split_at_mut(n);
            blocks.push(block);
            rest = tail;
        }
        // Order of the owners' groups: this part first, then the others ascending.
        let rank = |owner: usize| if owner == p { 0 } else { owner + 1 };
        let lo_offsets = &local_offsets;
        let far_before = &far_before;
        let print = blocks.into_par_iter().enumerate().map(|(b, out)| {
            let first = lo_offsets[b * BLOCK];
            let mut at = vec![0usize; np + 2];
            let mut count = vec![0usize; np + 2];
            // Where the next far group lies in its owner's in-arcs from this part.
            let mut address = far_before.get(b).cloned().unwrap_or_default();
            let (mut print, mut groups) = (0u64, 0u64);
            for l in b * BLOCK..((b + 1) * BLOCK).min(len) {
                let (s, e) = (lo_offsets[l], lo_offsets[l + 1]);
                let src = src[l] as usize..src[l + 1] as usize;
                let dst = &mut out[(s - first) as usize..(e - first) as usize];
                // A stable counting sort of the arcs by owner rank (a far owner's
                // group is one entry).
                count.fill(0);
                for &v in &targets[src.clone()] {
                    count[rank(parts.owner(v)) + 1] += 1;
                }
                at[0] = 0;
                for g in 0..np + 1 {
                    let size = if g > 0 && is_far(g - 1) {
                        count[g + 1].min(1) * FAR_ENTRIES as usize
                    } else {
                        count[g + 1]
                    };
                    at[g + 1] = at[g] + size;
                }
                for (&v, &w) in targets[src.clone()].iter().zip(&weights[src.clone()]) {
                    let (owner, local) = parts.locate(v);
                    if is_far(owner) {
                        continue;
                    }
                    let k = &mut at[rank(owner)];
                    dst[*k] = A::new(tags.tag(owner, local), w);
                    *k += 1;
                }
                if far.is_some() {
                    for &v in &targets[src.clone()] {
                        let owner = parts.owner(v);
                        let n = count[owner + 2];
                        if is_far(owner) && n > 0 {
                            let at = at[owner + 1];
                            let a = address[owner];
                            print = print.wrapping_add(far_print(p, owner, l as u64, n as u64, a));
                            let n = u32::try_from(n).expect("under 2^32 arcs to one part");
                            let a = u32::try_from(a)
                                .expect("under 2^32 arcs from one part to another rank's part");
                            dst[at] = A::new(tags.tag(owner, 0), f32::from_bits(n));
                            dst[at + 1] = A::new(tags.tag(owner, 0), f32::from_bits(a));
                            address[owner] += u64::from(n);
                            groups += 1;
                            count[owner + 2] = 0;
                        }
                    }
                }
            }
            (print, groups)
        });
        let (far_print, far_groups) =
            print.reduce(|| (0, 0), |a, b| (a.0.wrapping_add(b.0), a.1 + b.1));
        let own_tags = tags.tag(p, 0);
        let own_span = 1 << tags.shift();
        PartArcs { offsets: local_offsets, own_tags, own_span, arcs, far_groups, far_print }
    })
    .collect()
}

/// Entries of a partition's copy per far owner a vertex reaches ([`build`] with `far`):
/// the count ([`Arc32::count`]) and the address of the group in the owner's in-arcs.
pub(crate) const FAR_ENTRIES: u64 = 2;

/// One far group's term in the fingerprints that [`PartArcs::far_print`] and
/// [`InArcs::print`] sum: sender part `q`, receiver part `p`, the source's local index, its
/// arcs to `p` and the group's address in `p`'s in-arcs from `q`. The sums over every part
/// of a job agree when every scan across ranks addresses its own group (a symmetric graph)
/// and differ otherwise, but for a 2^-64 chance.
pub(crate) fn far_print(q: usize, p: usize, local: u64, count: u64, address: u64) -> u64 {
    // SplitMix64's step from a state: a bijection of `u64` whose outputs look independent.
    let mix = |x: u64| SplitMix64::from_state(x).next_u64();
    let mut x = mix((q as u64) << 32 | p as u64);
    for word in [local, count, address] {
        x = mix(x ^ word);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_len_agrees_with_partition_point() {
        for len in 1..=70usize {
            for k in 0..len {
                // `k` items pass, the rest (at least the last) fail.
                let xs: Vec<bool> = (0..len).map(|i| i < k).collect();
                assert_eq!(prefix_len(&xs, |&x| x), k, "len {len}, prefix {k}");
                assert_eq!(prefix_len(&xs, |&x| x), xs.partition_point(|&x| x));
            }
        }
    }
    use skein_generators::Csr;

    #[test]
    fn tags_round_trip_for_every_vertex() {
        for (n, parts) in [(1u64, 1usize), (5, 2), (64, 3), (1000, 4), (1 << 12, 2), (7, 7)] {
            let p = Partitioning::new(n, parts);
            let tags = Tags::new(&p).unwrap();
            let mut seen = std::collections::HashSet::new();
            for v in 0..n {
                let (owner, local) = p.locate(v);
                let t = tags.tag(owner, local);
                assert!((t as usize) < tags.space(parts) && t != NO_TAG);
                assert_eq!((tags.part(t), tags.local(t)), (owner, local), "n={n} parts={parts}");
                assert!(seen.insert(t));
            }
        }
    }

    #[test]
    fn graphs_beyond_the_tag_space_are_refused() {
        let p = Partitioning::new(1 << 32, 2);
        let e = Tags::new(&p).unwrap_err();
        assert!(e.contains("not yet supported"), "{e}");
        assert!(Tags::new(&Partitioning::new(1 << 30, 2)).is_ok());
    }

    /// Checks every vertex's copied arcs against the graph for 1 to 4 parts.
    fn check_arcs(csr: &Csr) {
        let n = csr.num_vertices();
        for parts in 1..=4 {
            let p = Partitioning::new(n, parts);
            let tags = Tags::new(&p).unwrap();
            let rows = RowsRef {
                first: 0,
                offsets: csr.offsets(),
                targets: csr.targets(),
                weights: csr.weights(),
            };
            let adj: Vec<PartArcs<Arc32>> = build(rows, &p, tags, 0..parts, None);
            let bare: Vec<PartArcs<Tag>> = build(rows, &p, tags, 0..parts, None);
            check_summaries(csr, &p, tags, &adj);
            let global = |a: &Arc32| (p.global(tags.part(a.tag), tags.local(a.tag)), a.weight);
            for v in 0..n {
                let (owner, local) = p.locate(v);
                let arcs = &adj[owner];
                let bare_tags: Vec<Tag> = arcs.arcs(local).iter().map(|a| a.tag).collect();
                assert_eq!(bare[owner].arcs(local), &bare_tags[..], "the layouts agree");
                let (own, other) = arcs.split(local);
                // Own partition's arcs first (in graph order), then the others' by owner.
                let all: Vec<(u64, f32)> = csr.arcs(v).collect();
                let is_own = |&(t, _): &(u64, f32)| p.locate(t).0 == owner;
                let want_own: Vec<_> = all.iter().copied().filter(is_own).collect();
                let want_other: Vec<_> = all.iter().copied().filter(|a| !is_own(a)).collect();
                assert_eq!(own.iter().map(global).collect::<Vec<_>>(), want_own, "v={v}");
                let mut got_other: Vec<_> = other.iter().map(global).collect();
                got_other.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let mut want_sorted = want_other.clone();
                want_sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
                assert_eq!(got_other, want_sorted, "v={v}");
                let mut owners = Vec::new();
                let mut segs = Vec::new();
                for (q, a, b) in arcs.segments(local, tags) {
                    assert!(a < b && arcs.range(a, b).iter().all(|x| tags.part(x.tag) == q));
                    owners.push(q);
                    segs.extend(arcs.range(a, b).iter().map(global));
                }
                assert!(owners.windows(2).all(|w| w[0] < w[1]), "owners ascending: {owners:?}");
                let mut sorted = want_other.clone();
                sorted.sort_by_key(|&(t, _)| p.locate(t).0); // stable: graph order per owner
                assert_eq!(segs, sorted, "parts={parts} v={v}");
                let whole: Vec<_> = arcs.arcs(local).iter().map(global).collect();
                assert_eq!(whole, [want_own, sorted].concat(), "parts={parts} v={v}");
                assert_eq!(arcs.degree(local), csr.degree(v));
            }
            let total: u64 = adj.iter().map(PartArcs::num_arcs).sum();
            assert_eq!(total, csr.num_arcs());
        }
    }

    #[test]
    fn arcs_keep_targets_and_weights_own_partition_first() {
        let csr = Csr::from_parts(
            4,
            vec![0, 4, 5, 6, 6],
            vec![3, 0, 2, 1, 2, 0],
            Some(vec![0.5, 0.25, 0.75, 0.125, 0.5, 0.25]),
        )
        .unwrap();
        check_arcs(&csr);
    }

    #[test]
    fn arcs_of_many_blocks() {
        use skein_generators::kronecker::{self, KroneckerParams};
        // 2^12 vertices: several conversion blocks per part, hubs among them.
        let p = KroneckerParams::new(12, 8, 2, 3).unwrap();
        check_arcs(&Csr::from_edge_list(&kronecker::generate(&p)));
    }

    /// Checks every part's in-arcs against the graph for the splits of (ranks, workers per
    /// rank): for every vertex `u` of another rank, the group of `u` holds exactly `u`'s
    /// arcs into the part (as a multiset), and nothing else is held.
    fn check_in_arcs(csr: &Csr) {
        let n = csr.num_vertices();
        let rows = RowsRef {
            first: 0,
            offsets: csr.offsets(),
            targets: csr.targets(),
            weights: csr.weights(),
        };
        for (ranks, per_rank) in [(2usize, 1usize), (2, 2), (3, 1), (4, 1), (3, 2)] {
            let np = ranks * per_rank;
            let p = Partitioning::new(n, np);
            let tags = Tags::new(&p).unwrap();
            let cross = (0..n)
                .flat_map(|u| csr.neighbors(u).iter().map(move |&v| (u, v)))
                .filter(|&(u, v)| p.locate(u).0 / per_rank != p.locate(v).0 / per_rank)
                .count() as u64;
            let mut total = 0;
            for part in 0..np {
                let rank = part / per_rank * per_rank..part / per_rank * per_rank + per_rank;
                let ix = InArcs::build(rows, &p, tags, part, rank.clone());
                let (mut arcs, mut sources) = (0, 0);
                for u in 0..n {
                    let (q, l) = p.locate(u);
                    if rank.contains(&q) {
                        continue;
                    }
                    let key = |a: &(u64, f32)| (a.0, a.1.to_bits());
                    let mut want: Vec<(u64, f32)> =
                        csr.arcs(u).filter(|&(v, _)| p.locate(v).0 == part).collect();
                    want.sort_by_key(key);
                    let mut got: Vec<(u64, f32)> = ix
                        .group(tags.tag(q, l))
                        .iter()
                        .map(|a| (p.global(tags.part(a.tag), tags.local(a.tag)), a.weight))
                        .collect();
                    got.sort_by_key(key);
                    assert_eq!(got, want, "{ranks}x{per_rank} part {part} source {u}");
                    arcs += want.len() as u64;
                    sources += u64::from(!want.is_empty());
                }
                assert_eq!((ix.num_arcs(), ix.sources()), (arcs, sources));
                total += arcs;
            }
            assert_eq!(total, cross, "{ranks}x{per_rank}: every arc across ranks, once");
            assert!(n < 64 || cross > 0);
        }
    }

    #[test]
    fn in_arcs_are_the_reverses_of_the_parts_arcs_to_other_ranks() {
        use skein_generators::kronecker::{self, KroneckerParams};
        for scale in [4, 9] {
            let p = KroneckerParams::new(scale, 8, 2, 3).unwrap();
            check_in_arcs(&Csr::from_edge_list(&kronecker::generate(&p)));
        }
        // Repeated edges and few vertices (some parts empty of arcs, one part's tags
        // fewer than a word).
        let el = skein_generators::EdgeList {
            num_vertices: 5,
            src: vec![0, 0, 1, 3, 4, 4],
            dst: vec![4, 4, 2, 1, 2, 0],
            weights: Some(vec![0.5, 0.25, 1.0, 0.75, 0.125, 2.0]),
        };
        check_in_arcs(&Csr::from_edge_list(&el));
    }

    /// Checks the summarizing copies against the full ones `full` for every split of
    /// `p`'s parts into ranks: the near arcs are the same, and each far owner reached
    /// has two entries: the number of arcs to it, and the address at which the owner's
    /// in-arcs hold them; and the senders' and the receivers' fingerprints agree.
    fn check_summaries(csr: &Csr, p: &Partitioning, tags: Tags, full: &[PartArcs<Arc32>]) {
        let rows = RowsRef {
            first: 0,
            offsets: csr.offsets(),
            targets: csr.targets(),
            weights: csr.weights(),
        };
        let np = p.parts();
        let arcs = |rev: bool| {
            let mut all: Vec<(u64, u64, u32)> = (0..csr.num_vertices())
                .flat_map(|u| csr.arcs(u).map(move |(v, w)| (u, v, w.to_bits())))
                .map(|(u, v, w)| if rev { (v, u, w) } else { (u, v, w) })
                .collect();
            all.sort_unstable();
            all
        };
        let symmetric = arcs(false) == arcs(true);
        for w in (1..=np).filter(|w| np % w == 0) {
            let sum: Vec<PartArcs<Arc32>> = build(rows, p, tags, 0..np, Some(w));
            let ins: Vec<InArcs> = (0..np)
                .map(|q| InArcs::build(rows, p, tags, q, q / w * w..q / w * w + w))
                .collect();
            let sent = sum.iter().fold(0u64, |s, a| s.wrapping_add(a.far_print()));
            let held = ins.iter().fold(0u64, |s, a| s.wrapping_add(a.print()));
            // An asymmetric graph's in-arcs are not its groups (`sssp` refuses it).
            assert!(!symmetric || sent == held, "{w} workers per rank: the fingerprints");
            for v in 0..csr.num_vertices() {
                let (owner, local) = p.locate(v);
                assert_eq!(sum[owner].split(local).0, full[owner].split(local).0, "v={v}");
                for (q, a, b) in full[owner].segments(local, tags) {
                    let got: Vec<_> =
                        sum[owner].segments(local, tags).filter(|s| s.0 == q).collect();
                    assert_eq!(got.len(), 1, "v={v} owner {q}");
                    let (_, sa, sb) = got[0];
                    if q / w == owner / w {
                        assert_eq!(sum[owner].range(sa, sb), full[owner].range(a, b));
                    } else {
                        assert_eq!(sb - sa, FAR_ENTRIES, "two entries for a far owner");
                        let (n, at) = sum[owner].far_group(sa, sb);
                        assert_eq!(n, b - a, "v={v} owner {q}");
                        let me = tags.tag(owner, local);
                        if !symmetric {
                            continue;
                        }
                        let group = ins[q].addressed(owner, at, at + n);
                        assert_eq!(group, Some(ins[q].group(me)), "v={v} owner {q}");
                        assert_eq!(ins[q].addressed(owner, at, at + n + 1).is_some(), {
                            // One arc more fits only while the span goes on.
                            ins[q].part_base[owner] + at + n < ins[q].part_base[owner + 1]
                        });
                    }
                }
                let entries = sum[owner].segments(local, tags).count();
                assert_eq!(entries, full[owner].segments(local, tags).count());
            }
        }
    }
}
