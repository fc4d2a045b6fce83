//! PageRank on the public building blocks ([`crate::parts`]): pull style, with the
//! contributions of every vertex (`rank / degree`) shared per rank.
//!
//! One driver fiber per partition runs every iteration (`main` starts them once and joins
//! them once); each iteration is two steps, each ending in a quiescence over every rank:
//!
//! 1. **scatter**: every partition writes its vertices' contributions into its rank's
//!    contribution array (one `f64` per vertex of the graph, shared by the rank's partitions
//!    in memory, [`crate::registry::shared`]) and sends them, as one serialized slice per
//!    64 Ki vertices (`apply_with_then`), to one partition of every *other* rank, which copies
//!    them into that rank's array; then quiescence: every rank's array is whole;
//! 2. **pull**: every vertex sums its neighbours' contributions in the graph's order (its
//!    row), `new = (1 - d) / n + d · (sum + dangling / n)`, and each partition adds the L1
//!    change of its vertices to its worker's lanes ([`add_l1`]); then quiescence: every
//!    driver reads the same L1 change of the iteration (`skein::wait_quiescent_sum`, less
//!    the totals of the first quiescence) and stops, or goes on, at the same iteration.
//!
//! No array is written while another reads it: a scatter of iteration `i + 1` comes after
//! the quiescence that ends every pull of iteration `i`, and a pull after the one that ends
//! every scatter.
//!
//! **Identical results.** The sums run in the graph's order, whatever the partitioning, and
//! the rest is the same expression in every engine (`skein_baselines::pagerank`), so the
//! ranks are bit for bit those of the sequential baseline for any workers and ranks. The
//! dangling mass needs no global floating-point sum: the graph is symmetric, so the vertices
//! without arcs are isolated, receive nothing and all hold the same rank, `k` of them (counted
//! once, as integers); and the L1 change is summed in 64.64 fixed point (integers, so in any
//! order), so every engine stops after the same iteration.
//!
//! Memory per rank: 8 bytes per vertex of the graph (the contributions) and 8 per own vertex
//! (the ranks).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use skein::codec::Raw;
use skein::Trust;
use skein_generators::analytics::{self, PageRankParams};

use crate::graph::GraphView;
use crate::parts::{self, Collect, KernelStats, Part};
use crate::registry;

/// Vertices per serialized contribution slice sent to another rank.
const SLICE: usize = 1 << 16;

/// Bits of each of the three lanes that carry an L1 change (64.64 fixed point, below
/// 2^129): each partition's limbs are below 2^43, so the limbs of up to 2^20 partitions sum
/// in a lane with no carry lost.
const LIMB: u32 = 43;

/// Adds `l1` (64.64 fixed point) to the calling worker's lanes 0 to 2, in limbs of
/// [`LIMB`] bits (`skein::quiescent_add`).
fn add_l1(l1: u128) {
    let mask = (1u128 << LIMB) - 1;
    let limb = |i: u32| ((l1 >> (LIMB * i)) & mask) as u64;
    skein::quiescent_add([limb(0), limb(1), limb(2), 0]);
}

/// The L1 change added between two lane totals ([`add_l1`]).
fn l1_between(before: [u64; skein::QUIESCENT_LANES], after: [u64; skein::QUIESCENT_LANES]) -> u128 {
    (0..3)
        .fold(0u128, |x, i| x + (u128::from(after[i].wrapping_sub(before[i])) << (LIMB * i as u32)))
}

/// The contributions of every vertex of the graph, one array per rank (f64 bits).
#[derive(Debug)]
struct Contributions {
    bits: Vec<AtomicU64>,
}

/// One partition's PageRank state.
#[derive(Debug)]
pub(crate) struct PrPart {
    view: Arc<GraphView>,
    part: usize,
    first: u64,
    rank: Vec<f64>,
    peers: Arc<Vec<Trust<PrPart>>>,
    shared: Arc<Contributions>,
    requests: u64,
    arcs: u64,
}

impl PrPart {
    fn new(graph: u64, view: Arc<GraphView>, part: usize) -> PrPart {
        let n = view.parts.num_vertices() as usize;
        let first = view.parts.range(part).start;
        let len = view.parts.len(part) as usize;
        let rank_first = view.rank_parts(part).start;
        let shared = registry::shared(graph, rank_first, || Contributions {
            // Asked for transparent huge pages: every pull reads it at random.
            bits: skein_generators::hugepage::zeroed_vec::<u64>(n)
                .into_iter()
                .map(AtomicU64::new)
                .collect(),
        });
        let rank = vec![1.0 / n as f64; len];
        PrPart {
            view,
            part,
            first,
            rank,
            peers: Arc::new(Vec::new()),
            shared,
            requests: 0,
            arcs: 0,
        }
    }

    /// Isolated vertices of the partition.
    fn isolated(&self) -> u64 {
        let rows = self.view.rows();
        (0..self.rank.len() as u64).filter(|&l| rows.neighbors(self.first + l).is_empty()).count()
            as u64
    }

    /// Writes the contributions of local vertices `range` into this rank's array.
    fn scatter(&mut self, range: std::ops::Range<u32>) {
        let rows = self.view.rows();
        for l in range {
            let v = self.first + u64::from(l);
            let deg = rows.neighbors(v).len();
            let c = if deg > 0 { self.rank[l as usize] / deg as f64 } else { 0.0 };
            self.shared.bits[v as usize].store(c.to_bits(), Ordering::Relaxed);
        }
    }

    /// Sends the partition's contributions to one partition of every other rank.
    fn share(&mut self) {
        let np = self.view.parts.parts();
        let mine = self.view.rank_parts(self.part);
        if mine.len() == np {
            return;
        }
        let (first, len) = (self.first as usize, self.rank.len());
        let mut rank = 0;
        while rank < np {
            let other = self.view.rank_parts(rank);
            if other != mine {
                let mut from = 0;
                while from < len {
                    let to = (from + SLICE).min(len);
                    let vals: Vec<u64> = self.shared.bits[first + from..first + to]
                        .iter()
                        .map(|b| b.load(Ordering::Relaxed))
                        .collect();
                    self.peers[other.start].apply_with_then(
                        ((first + from) as u64, Raw(vals)),
                        |s: &mut PrPart, (at, vals): (u64, Raw<u64>)| {
                            for (b, v) in s.shared.bits[at as usize..].iter().zip(vals.0) {
                                b.store(v, Ordering::Relaxed);
                            }
                        },
                        |()| (),
                    );
                    self.requests += 1;
                    from = to;
                }
            }
            rank = other.end;
        }
    }

    /// Pulls the new ranks of local vertices `range`; returns their L1 change in 64.64
    /// fixed point.
    fn pull(&mut self, range: std::ops::Range<u32>, damping: f64, dangle: f64) -> u128 {
        let n = self.view.parts.num_vertices();
        let bits = &self.shared.bits;
        let mut l1 = 0u128;
        for l in range {
            let ns = self.view.row32(self.first + u64::from(l));
            let mut sum = 0.0f64;
            for &u in ns {
                sum += f64::from_bits(bits[u as usize].load(Ordering::Relaxed));
            }
            self.arcs += ns.len() as u64;
            let new = analytics::update(damping, n, sum, dangle);
            let old = &mut self.rank[l as usize];
            l1 += analytics::fixed(new - *old);
            *old = new;
        }
        l1
    }
}

/// The argument of the drivers ([`iterate`]).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Iterate {
    id: u64,
    chunk: u64,
    /// Vertices of the graph, and the isolated ones.
    n: u64,
    k: u64,
    damping: f64,
    tolerance: f64,
    max_iterations: u64,
}

// SAFETY: repr(C) of u64s and f64s: no address, every bit pattern is a valid value.
unsafe impl skein::Plain for Iterate {}

/// Every iteration, in a driver fiber on the trustee of its partition (module docs): returns
/// the iterations run and the last L1 change (its bits; infinity when none ran).
fn iterate(a: Iterate) -> (u64, u64) {
    let me = parts::me::<PrPart>(a.id);
    let len = me.apply((), |s, ()| s.rank.len());
    let chunk = a.chunk as usize;
    let (mut r_iso, mut iterations, mut l1) = (1.0 / a.n as f64, 0u64, f64::INFINITY);
    while iterations < a.max_iterations {
        parts::chunks(&me, len, chunk, (), |s, (), r| s.scatter(r));
        me.apply((), |s, ()| s.share());
        // Every rank's contributions are whole; nothing adds to the lanes until the pulls.
        let before = skein::wait_quiescent_sum();
        let dangle = analytics::dangle(a.n, a.k, r_iso);
        let x =
            parts::chunks_sum(&me, len, chunk, (a.damping, dangle), |s, (d, x), r| s.pull(r, d, x));
        add_l1(x);
        let after = skein::wait_quiescent_sum();
        r_iso = analytics::update(a.damping, a.n, 0.0, dangle);
        iterations += 1;
        l1 = analytics::from_fixed(l1_between(before, after));
        if l1 < a.tolerance {
            break;
        }
    }
    (iterations, l1.to_bits())
}

impl Part for PrPart {
    type Value = f64;

    fn index(&self) -> usize {
        self.part
    }

    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        self.peers = peers;
    }

    fn write(&self, from: usize, values: &mut [f64], _parents: &mut [u64]) {
        values.copy_from_slice(&self.rank[from..from + values.len()]);
    }

    fn counters(&self) -> (u64, u64) {
        (self.requests, self.arcs)
    }
}

/// PageRank on graph `graph`, run by the main fiber, `chunk` vertices per step: the ranks
/// by global id (empty with [`Collect::Slices`]), the iterations run and the last L1 change.
pub(crate) fn run(
    graph: u64,
    view: Arc<GraphView>,
    params: PageRankParams,
    chunk: usize,
    how: Collect,
) -> (Vec<f64>, u32, f64, KernelStats) {
    let all = parts::entrust_with(graph, PrPart::new);
    let id = parts::connect(&all);
    let n = view.parts.num_vertices();
    let k: u64 = parts::superstep(id, |id| parts::me::<PrPart>(id).apply((), |s, ()| s.isolated()))
        .iter()
        .sum();
    let start = Instant::now();
    let args = Iterate {
        id,
        chunk: chunk as u64,
        n,
        k,
        damping: params.damping,
        tolerance: params.tolerance,
        max_iterations: u64::from(params.max_iterations),
    };
    // One driver per partition runs every iteration; each returns the iterations it ran and
    // the last L1 change (bits), the same on every driver.
    let ends = parts::superstep(args, iterate);
    debug_assert!(ends.iter().all(|&e| e == ends[0]), "the drivers agree");
    let (iterations, l1) = (ends[0].0 as u32, f64::from_bits(ends[0].1));
    let seconds = start.elapsed().as_secs_f64();
    // No parents: the ranks alone (no second vector of the graph's size to zero).
    let g = parts::collect_values_into(graph, id, &all, &view.parts, how, Vec::new());
    parts::disconnect(id, &all);
    let stats =
        KernelStats { seconds, rounds: u64::from(iterations), messages: g.messages, arcs: g.arcs };
    (g.values, iterations, l1, stats)
}
