//! Write your own kernel: PageRank (push style) on Skein's public building blocks.
//!
//! The same program runs in one process, on the fake ranks of a loopback split and under
//! `mpirun`, because every delegated call travels: closures capture nothing, their data is a
//! `Plain` argument (`docs/writing-kernels.md` walks through it):
//!
//! 1. [`parts::entrust`] builds one partition on every worker of every rank, from the graph
//!    every rank's [`Engine`] holds (reached by id on the trustee);
//! 2. [`parts::connect`] gives every partition all handles, and files each one where the
//!    driver fibers of its rank find it ([`parts::me`]);
//! 3. each iteration is two [`parts::superstep`]s: every partition pushes `rank / degree` to its
//!    neighbours (in place for its own vertices, through an [`Outbox`] of `(local index,
//!    contribution)` pairs for the others, 15 to a request), in [`parts::chunks`], then waits
//!    for quiescence (every contribution of the round applied); then every partition makes
//!    its new ranks and returns its L1 change;
//! 4. [`parts::gather`] collects the ranks, and [`parts::disconnect`] breaks the partitions'
//!    reference cycle (without it they would never be dropped).
//!
//! It checks itself against the sequential baseline (`skein_baselines`).
//!
//! ```sh
//! cargo run --release -p skein-algorithms --example pagerank -- 16 2         # SCALE, workers
//! SKEIN_LOOPBACK_RANKS=2 cargo run --release -p skein-algorithms --example pagerank -- 12 4
//! cargo build --release -p skein-algorithms --features mpi --example pagerank
//! mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
//!     target/release/examples/pagerank 16 1
//! ```

use std::ops::Range;
use std::sync::Arc;

use skein::Trust;
use skein_algorithms::graph::GraphView;
use skein_algorithms::outbox::Outbox;
use skein_algorithms::parts::{Kernel, Part};
use skein_algorithms::{Engine, EngineError, EngineOptions};
use skein_generators::analytics::PageRankParams;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

const DAMPING: f64 = 0.85;

// ---- the kernel -------------------------------------------------------------------------

/// One partition: its vertices' ranks, the contributions they received this round, and the
/// rank of its vertices without arcs (which goes to every vertex).
struct Pr {
    view: Arc<GraphView>,
    part: usize,
    rank: Vec<f64>,
    sum: Vec<f64>,
    dangling: f64,
    out: Outbox<(u32, f64)>,
}

/// Runs on the receiving partition's trustee: a packet of contributions.
fn add(p: &mut Pr, items: &[(u32, f64)]) {
    items.iter().for_each(|&(l, c)| p.sum[l as usize] += c);
}

impl Pr {
    fn new(view: Arc<GraphView>, part: usize) -> Pr {
        let (len, n) = (view.parts.len(part) as usize, view.parts.num_vertices() as f64);
        let out = Outbox::new(view.parts.parts());
        Pr { view, part, rank: vec![1.0 / n; len], sum: vec![0.0; len], dangling: 0.0, out }
    }

    /// Pushes `rank / degree` of local vertices `r` to their neighbours (`peers`: every
    /// partition's handle).
    fn push(&mut self, r: Range<u32>, peers: &[Trust<Pr>]) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in r {
            let (own, other) = arcs.split(u);
            let c = self.rank[u as usize] / arcs.degree(u) as f64;
            own.iter().for_each(|&t| self.sum[tags.local(t) as usize] += c);
            other.iter().for_each(|&t| self.out.send(tags.part(t), (tags.local(t), c), peers, add));
            self.dangling += if arcs.degree(u) == 0 { self.rank[u as usize] } else { 0.0 };
        }
        self.out.flush_to(peers, add);
    }

    /// The new ranks (`dangling`: the whole graph's); returns their L1 change.
    fn update(&mut self, dangling: f64) -> f64 {
        let n = self.view.parts.num_vertices() as f64;
        let base = (1.0 - DAMPING) / n + DAMPING * dangling / n;
        let new = self.sum.iter_mut().map(|s| base + DAMPING * std::mem::take(s));
        new.zip(&mut self.rank).map(|(x, r)| (x - std::mem::replace(r, x)).abs()).sum()
    }
}

impl Part for Pr {
    type Value = f64;
    fn write(&self, from: usize, values: &mut [f64], _parents: &mut [u64]) {
        values.copy_from_slice(&self.rank[from..from + values.len()]);
    }
}

/// PageRank on the engine's graph: at most `iterations`, until the L1 change is below `tol`.
fn pagerank(engine: &Engine, iterations: u32, tol: f64) -> Result<Vec<f64>, EngineError> {
    let graph = engine.graph_id();
    engine.run(move || {
        let k = Kernel::start(graph, Pr::new);
        for _ in 0..iterations {
            k.sweep(4096, (), |s: &mut Pr, (), r, peers| s.push(r, peers));
            let lost = k.each((), |s: &mut Pr, ()| std::mem::take(&mut s.dangling));
            let l1 = k.each(lost.iter().sum::<f64>(), |s: &mut Pr, x| s.update(x));
            if l1.iter().sum::<f64>() < tol {
                break;
            }
        }
        k.finish()
    })
}

// ---- the program ------------------------------------------------------------------------

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let scale: u32 = args.get(1).map_or(Ok(14), |s| s.parse())?;
    let workers: usize = args.get(2).map_or(Ok(2), |s| s.parse())?;
    // Every rank builds the same graph and engine (an SPMD program under mpirun).
    let params = KroneckerParams::new(scale, 16, 2, 3)?;
    let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&params)));
    let engine = Engine::new(Arc::clone(&graph), EngineOptions { workers, ..Default::default() })?;
    let start = std::time::Instant::now();
    let ranks = pagerank(&engine, 20, 0.0)?;
    let seconds = start.elapsed().as_secs_f64();
    // The sequential baseline, 20 iterations too: the same ranks up to rounding (the
    // contributions arrive in another order, and the dangling mass is summed differently).
    let p = PageRankParams { damping: DAMPING, tolerance: 0.0, max_iterations: 20 };
    let seq = skein_baselines::Solver::new(
        skein_baselines::Engine::Seq,
        &graph,
        &skein_baselines::Options::with_threads(1),
    )?
    .pagerank(&p)?;
    let diff = ranks.iter().zip(&seq.rank).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let sum: f64 = ranks.iter().sum();
    if skein::rank() == 0 {
        let (n, w) = (engine.partitioning().parts(), workers);
        println!("SCALE {scale}, {n} partitions ({w} workers per process): {seconds:.3} s");
        println!("sum of ranks {sum:.12}, largest difference to the sequential ranks {diff:.2e}");
    }
    if diff > 1e-12 || (sum - 1.0).abs() > 1e-9 {
        return Err("the ranks differ from the sequential baseline".into());
    }
    Ok(())
}
