//! Vertex partitioning: which trustee owns a vertex, and at which local index.
//!
//! Vertices are split into contiguous blocks of global ids, one block per trustee (see
//! `crate::engine` for how trustees use them, and `docs/ARCHITECTURE.md`). Two ways:
//!
//! - **Equal blocks** ([`Partitioning::new`]): about `n / parts` vertices each. The owner
//!   function is one multiply: `owner(v) = (v * m) >> 64` with `m = floor(2^64 * parts /
//!   n)` (128-bit arithmetic). It never decreases as `v` grows and stays below `parts` for
//!   every `v < n` (since `(n - 1) * m < 2^64 * parts`), so it defines contiguous blocks;
//!   their first vertices are found once, at construction, by binary search. It differs
//!   from the exact `floor(v * parts / n)` only where that quotient is within `v / 2^64` of
//!   an integer, so block sizes are within 2 of `n / parts`. These are the blocks of rack
//!   mode ([`rank_bounds`]: each rank's rows are built for them before any degree is known).
//!
//! - **Balanced by arcs** ([`Partitioning::balanced`], from the rows' offsets, used by
//!   one process, which holds every row): each part holds about the same *work*, its arcs plus
//!   [`VERTEX_ARCS`] per vertex. Graph500 ids are scrambled by the generator, yet equal
//!   blocks are not even in arcs: hubs crowd some blocks (1.21x the mean arcs in the
//!   busiest of 16 parts at SCALE 20), and a round of a kernel lasts as long as its
//!   busiest part. The vertices are cut into coarse blocks of `2^shift` ids (about 64
//!   blocks per part) and part boundaries fall on block edges, so the owner is one load
//!   from a small table, `owners[v >> shift]` (a few KiB: it stays in L1), instead of the
//!   multiply. The boundaries are where the running sum of the blocks' work crosses
//!   `p · total / parts` (nearest block edge), so a part is within one block of its share.
//!
//! Either way the local index is `v - start[owner]`. The results of every kernel do not
//! depend on where the boundaries fall (the kit tests run them on both).

use std::ops::Range;

/// What a part's work is counted in, per vertex, beside its arcs ([`Partitioning::balanced`]):
/// a vertex costs a kernel a little even without arcs (its state, its bounds, a bottom-up
/// BFS's test), about as much as this many arcs.
pub const VERTEX_ARCS: u64 = 2;

/// Coarse blocks per part of [`Partitioning::balanced`] (at least; fewer only when the
/// blocks are single vertices): a part's work is within one block of its share.
const BLOCKS_PER_PART: u64 = 64;

/// How the owner of a vertex is found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// Equal blocks: `(v * m) >> 64`, with `m` in 64 bits when it fits (whenever `parts
    /// <= num_vertices`: one 64x64 -> 128-bit multiply).
    Multiply { multiplier: u128, multiplier64: Option<u64> },
    /// Balanced blocks: `owners[v >> shift]`.
    Table { shift: u32, owners: Vec<u32> },
}

/// The mapping vertex → (part, local index) for `num_vertices` vertices over `parts` parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitioning {
    num_vertices: u64,
    owner: Owner,
    /// `starts[p]` is the first vertex of part `p`; `starts[parts] == num_vertices`.
    starts: Vec<u64>,
}

impl Partitioning {
    /// Splits `num_vertices` vertices into `parts` contiguous blocks (`parts >= 1`).
    ///
    /// # Panics
    /// If `parts` is 0, or a part would hold more than `u32::MAX` vertices (local
    /// indices are `u32`).
    pub fn new(num_vertices: u64, parts: usize) -> Partitioning {
        assert!(parts >= 1, "a partitioning needs at least one part");
        let multiplier =
            if num_vertices == 0 { 0 } else { ((parts as u128) << 64) / num_vertices as u128 };
        let owner = |v: u64| ((v as u128 * multiplier) >> 64) as usize;
        let mut starts = Vec::with_capacity(parts + 1);
        for p in 0..parts {
            // First v with owner(v) >= p.
            let (mut lo, mut hi) = (0u64, num_vertices);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if owner(mid) >= p {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            starts.push(lo);
        }
        starts.push(num_vertices);
        let multiplier64 = u64::try_from(multiplier).ok();
        let p = Partitioning {
            num_vertices,
            owner: Owner::Multiply { multiplier, multiplier64 },
            starts,
        };
        p.check_sizes();
        p
    }

    /// Splits the vertices of the rows `offsets` (`offsets[v]..offsets[v + 1]` are the arcs
    /// of vertex `v`, `offsets.len() - 1` vertices) into `parts` contiguous blocks of about
    /// the same work each: arcs plus [`VERTEX_ARCS`] per vertex, boundaries on the edges of
    /// coarse blocks of `2^shift` vertices (see the module docs). Deterministic: the same
    /// rows give the same parts.
    ///
    /// # Panics
    /// If `parts` is 0 or `offsets` is empty, or a part would hold more than `u32::MAX`
    /// vertices (local indices are `u32`).
    pub fn balanced(offsets: &[u64], parts: usize) -> Partitioning {
        Partitioning::balanced_by(offsets, parts, VERTEX_ARCS)
    }

    /// [`Partitioning::balanced`] with each vertex counted as `vertex_arcs` arcs instead of
    /// [`VERTEX_ARCS`]: a kernel whose work follows the vertices more than the arcs (the
    /// components' union-find reads at most a few arcs of most vertices) balances its
    /// parts by vertices with a large `vertex_arcs` (`u32::MAX`: by vertices alone, within
    /// a coarse block). Deterministic as `balanced`.
    ///
    /// # Panics
    /// As [`Partitioning::balanced`].
    pub fn balanced_by(offsets: &[u64], parts: usize, vertex_arcs: u64) -> Partitioning {
        assert!(parts >= 1, "a partitioning needs at least one part");
        let n = offsets.len() as u64 - 1;
        // The smallest blocks that still leave at most 2 * BLOCKS_PER_PART per part.
        let want = (parts as u64).saturating_mul(BLOCKS_PER_PART).max(1);
        let mut shift = 0;
        while (n >> shift) > 2 * want {
            shift += 1;
        }
        let blocks = n.div_ceil(1 << shift) as usize;
        let work = |lo: u64, hi: u64| {
            u128::from(offsets[hi as usize] - offsets[lo as usize])
                + u128::from(vertex_arcs) * u128::from(hi - lo)
        };
        let total = work(0, n);
        // Part `p` starts at the block edge nearest to where the running work reaches
        // `p * total / parts` (never before the previous part's start).
        let mut starts = Vec::with_capacity(parts + 1);
        starts.push(0u64);
        let (mut b, mut done) = (0usize, 0u128);
        for p in 1..parts {
            let goal = total * p as u128 / parts as u128;
            loop {
                if b == blocks {
                    break;
                }
                let (lo, hi) = ((b as u64) << shift, (((b + 1) as u64) << shift).min(n));
                let w = work(lo, hi);
                // Take block `b` while its middle is before the goal.
                if done + w / 2 >= goal {
                    break;
                }
                done += w;
                b += 1;
            }
            starts.push(((b as u64) << shift).min(n));
        }
        starts.push(n);
        let mut owners = vec![0u32; blocks];
        for p in (0..parts).filter(|&p| starts[p] < starts[p + 1]) {
            let (lo, hi) = (starts[p] >> shift, starts[p + 1].div_ceil(1 << shift));
            for o in &mut owners[lo as usize..(hi as usize).min(blocks)] {
                *o = u32::try_from(p).expect("under 2^32 parts");
            }
        }
        // Each block is written by the one non-empty part that holds it: boundaries are on
        // block edges but `n`, which may fall inside the last block.
        let p = Partitioning { num_vertices: n, owner: Owner::Table { shift, owners }, starts };
        p.check_sizes();
        p
    }

    fn check_sizes(&self) {
        for part in 0..self.parts() {
            assert!(
                self.range(part).end - self.range(part).start <= u32::MAX as u64,
                "part {part} would hold more than 2^32 - 1 vertices: use more parts"
            );
        }
    }

    /// Number of parts.
    pub fn parts(&self) -> usize {
        self.starts.len() - 1
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> u64 {
        self.num_vertices
    }

    /// The part that owns `v`.
    #[inline]
    pub fn owner(&self, v: u64) -> usize {
        match &self.owner {
            Owner::Table { shift, owners } => owners[(v >> shift) as usize] as usize,
            Owner::Multiply { multiplier64: Some(m), .. } => {
                ((v as u128 * *m as u128) >> 64) as usize
            }
            Owner::Multiply { multiplier, .. } => ((v as u128 * multiplier) >> 64) as usize,
        }
    }

    /// `(part, local index)` of `v`.
    #[inline]
    pub fn locate(&self, v: u64) -> (usize, u32) {
        let p = self.owner(v);
        (p, (v - self.starts[p]) as u32)
    }

    /// The global ids owned by `part`.
    pub fn range(&self, part: usize) -> Range<u64> {
        self.starts[part]..self.starts[part + 1]
    }

    /// Number of vertices owned by `part`.
    pub fn len(&self, part: usize) -> u32 {
        (self.starts[part + 1] - self.starts[part]) as u32
    }

    /// True when there are no vertices at all.
    pub fn is_empty(&self) -> bool {
        self.num_vertices == 0
    }

    /// The global id of local index `local` of `part`.
    #[inline]
    pub fn global(&self, part: usize, local: u32) -> u64 {
        self.starts[part] + local as u64
    }
}

/// Bounds of each rank's vertex range when every rank runs `workers` workers: rank `r`
/// owns the partitions `r·W .. (r+1)·W` of `Partitioning::new(num_vertices, ranks·workers)`,
/// which are contiguous; returns `ranks + 1` entries (`bounds[r]..bounds[r + 1]` is rank
/// `r`'s range). These are the bounds `skein_generators::distributed` builds each rank's
/// rows for, and the ranges `Engine::from_local` expects.
///
/// # Panics
/// If `ranks` or `workers` is 0 (as [`Partitioning::new`] with 0 parts).
pub fn rank_bounds(num_vertices: u64, ranks: usize, workers: usize) -> Vec<u64> {
    let p = Partitioning::new(num_vertices, ranks * workers);
    let mut b: Vec<u64> = (0..ranks).map(|r| p.range(r * workers).start).collect();
    b.push(num_vertices);
    b
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_bounds_are_the_first_vertices_of_each_ranks_parts() {
        for (n, ranks, workers) in [(0u64, 1usize, 1usize), (10, 3, 2), (1000, 4, 1), (5, 7, 1)] {
            let b = rank_bounds(n, ranks, workers);
            let p = Partitioning::new(n, ranks * workers);
            assert_eq!(b.len(), ranks + 1);
            assert_eq!((b[0], b[ranks]), (0, n));
            for r in 0..ranks {
                assert_eq!(
                    b[r]..b[r + 1],
                    p.range(r * workers).start..p.range((r + 1) * workers - 1).end
                );
            }
        }
    }

    use super::*;

    /// Checks that every vertex of `p` has exactly one owner, at the right local index.
    fn check_cover(p: &Partitioning, n: u64, parts: usize) {
        assert_eq!((p.parts(), p.num_vertices()), (parts, n));
        let mut total = 0u64;
        for part in 0..parts {
            let r = p.range(part);
            total += r.end - r.start;
            for v in r.clone() {
                assert_eq!(p.locate(v), (part, (v - r.start) as u32), "n={n} parts={parts} v={v}");
                assert_eq!(p.global(part, (v - r.start) as u32), v);
            }
        }
        assert_eq!(total, n);
    }

    fn check(n: u64, parts: usize) {
        let p = Partitioning::new(n, parts);
        check_cover(&p, n, parts);
        if n >= parts as u64 {
            let sizes: Vec<u64> = (0..parts).map(|q| p.len(q) as u64).collect();
            let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(max - min <= 2, "unbalanced: {sizes:?}");
        }
    }

    #[test]
    fn every_vertex_has_exactly_one_owner() {
        for n in [0, 1, 2, 3, 7, 64, 100, 1000, 1024, 4099] {
            for parts in [1, 2, 3, 4, 5, 7, 16] {
                check(n, parts);
            }
        }
    }

    /// Rows of `n` vertices with the degrees `deg(v)`, as offsets.
    fn offsets(n: u64, deg: impl Fn(u64) -> u64) -> Vec<u64> {
        let mut o = vec![0u64];
        for v in 0..n {
            o.push(o[v as usize] + deg(v));
        }
        o
    }

    /// Checks a balanced partitioning of `offsets` over `parts`: one owner per vertex, the
    /// owners' blocks contiguous and in order, and each part's work within one coarse
    /// block's (the heaviest) of its share.
    fn check_balanced(offsets: &[u64], parts: usize) {
        check_balanced_by(offsets, parts, VERTEX_ARCS);
        assert_eq!(
            Partitioning::balanced(offsets, parts),
            Partitioning::balanced_by(offsets, parts, VERTEX_ARCS)
        );
    }

    /// [`check_balanced`] of [`Partitioning::balanced_by`] with `vertex_arcs`.
    fn check_balanced_by(offsets: &[u64], parts: usize, vertex_arcs: u64) {
        let n = offsets.len() as u64 - 1;
        let p = Partitioning::balanced_by(offsets, parts, vertex_arcs);
        assert_eq!(p, Partitioning::balanced_by(offsets, parts, vertex_arcs), "deterministic");
        check_cover(&p, n, parts);
        let Owner::Table { shift, .. } = p.owner else { panic!("a table") };
        let work = |r: Range<u64>| {
            u128::from(offsets[r.end as usize] - offsets[r.start as usize])
                + u128::from(vertex_arcs) * u128::from(r.end - r.start)
        };
        let block = (0..n.div_ceil(1 << shift))
            .map(|b| work(b << shift..((b + 1) << shift).min(n)))
            .max()
            .unwrap_or(0);
        let share = work(0..n) / parts as u128;
        for part in 0..parts {
            let w = work(p.range(part));
            assert!(w <= share + block + 1, "part {part}: {w} > {share} + {block}");
        }
    }

    #[test]
    fn balanced_parts_cover_every_vertex_once() {
        for n in [0u64, 1, 2, 3, 7, 64, 100, 1000, 4099] {
            for parts in [1, 2, 3, 4, 5, 7, 16] {
                check_balanced(&offsets(n, |v| v % 5), parts);
                check_balanced(&offsets(n, |_| 0), parts);
            }
        }
    }

    #[test]
    fn parts_balanced_by_vertices_hold_about_as_many_each() {
        // Hubs in the first eighth: by arcs part 0 holds few vertices, by vertices a quarter.
        let n = 1 << 14;
        let o = offsets(n, |v| if v < n / 8 { 64 } else { 2 });
        for parts in [1, 2, 3, 4, 7] {
            check_balanced_by(&o, parts, u64::from(u32::MAX));
            check_balanced_by(&offsets(1000, |v| v % 5), parts, 16);
        }
        let p = Partitioning::balanced_by(&o, 4, u64::from(u32::MAX));
        let sizes: Vec<u64> = (0..4).map(|q| p.range(q).end - p.range(q).start).collect();
        let Owner::Table { shift, .. } = p.owner else { panic!("a table") };
        assert!(sizes.iter().all(|&s| s.abs_diff(n / 4) <= 1 << shift), "{sizes:?}");
        assert!(Partitioning::balanced(&o, 4).range(0).end < n / 8, "by arcs: hubs apart");
    }

    #[test]
    fn balanced_parts_even_out_hubs() {
        // Hubs in the first eighth: equal blocks put most arcs in part 0.
        let n = 1 << 14;
        let o = offsets(n, |v| if v < n / 8 { 64 } else { 2 });
        check_balanced(&o, 4);
        let p = Partitioning::balanced(&o, 4);
        let arcs = |r: Range<u64>| o[r.end as usize] - o[r.start as usize];
        let equal = Partitioning::new(n, 4);
        assert!(arcs(equal.range(0)) > 2 * arcs(equal.range(1)));
        // Work (arcs + VERTEX_ARCS per vertex) within 1 % of an even split; arcs within 20 %
        // (the hubs' part has fewer vertices, hence more arcs for the same work).
        let work = |r: Range<u64>| arcs(r.clone()) + VERTEX_ARCS * (r.end - r.start);
        let total = work(0..n);
        let most = (0..4).map(|q| work(p.range(q))).max().unwrap();
        assert!(most * 4 < total * 101 / 100, "work within 1 % of an even split: {most}");
        let most = (0..4).map(|q| arcs(p.range(q))).max().unwrap();
        assert!(most * 4 < o[n as usize] * 12 / 10, "arcs within 20 %: {most}");
        assert!(p.len(0) < p.len(3), "fewer vertices where the hubs are");
    }

    #[test]
    fn large_graphs_split_evenly() {
        let p = Partitioning::new(1 << 30, 3);
        assert_eq!(p.owner(0), 0);
        assert_eq!(p.owner((1 << 30) - 1), 2);
        let l: Vec<u32> = (0..3).map(|q| p.len(q)).collect();
        assert!(l.iter().max().unwrap() - l.iter().min().unwrap() <= 2, "{l:?}");
    }
}
