//! Baselines Skein is measured against: sequential, rayon shared-memory and petgraph
//! single-source shortest paths (SSSP) and breadth-first search (BFS).
//!
//! Every engine runs on the same graph type, the [`Csr`] of `skein-generators`, and
//! returns the same result types ([`SsspResult`], [`BfsResult`]), so one Graph500
//! validator and one report writer serve them all.
//!
//! # Glossary
//!
//! - **Engine**: one implementation of the kernels ([`Engine::Seq`], [`Engine::Rayon`]).
//!   The petgraph implementation ([`oracle`]) is only a test oracle: it is slow and
//!   allocates a second copy of the graph.
//! - **COST reference**: the sequential engine. A parallel engine is worth its threads only
//!   when it beats this single thread (McSherry et al., "Scalability! But at what COST?").
//! - **Delta (Δ)**: the bucket width of delta-stepping (Meyer and Sanders, 2003): vertices
//!   whose tentative distance falls in `[iΔ, (i+1)Δ)` are settled together in round `i`.
//! - **Direction-optimizing BFS**: Beamer, Asanović and Patterson (SC 2012): top-down steps
//!   while the frontier is small, bottom-up steps (each unvisited vertex looks for a parent
//!   in the frontier bitmap) while it is large; switching thresholds alpha and beta.
//!
//! # Distances are binary32 and exact
//!
//! Every tentative distance is one binary32 addition `dist[u] + w`. Rounding is monotone,
//! so every correct algorithm (Dijkstra, delta-stepping, any thread count) converges to the
//! same value per vertex, bit for bit: the minimum over paths of the left-to-right binary32
//! sum of its weights. That is also what the Graph500 reference 3.0.1 computes.
//!
//! # Limits
//!
//! The baselines index vertices with `u32` internally (half the memory traffic of `u64` in
//! heaps, bins and queues): graphs with `u32::MAX` vertices or more are refused with
//! [`BaselineError::TooManyVertices`].

mod barrier;
mod bitmap;
mod check;
mod delta;
mod dobfs;
mod error;
mod heap;
pub mod locks;
pub mod oracle;
mod parents;
mod seq;

use std::cell::OnceCell;

pub use error::{BaselineError, Result};
use rayon::ThreadPool;
use skein_generators::{BfsResult, Csr, SsspResult, VertexId};

/// Default delta-stepping bucket width, as a fraction of the graph's largest weight: for
/// Graph500 Kronecker weights (uniform in `[0, 1)`) it is the bucket width itself.
///
/// Chosen on Kronecker graphs of SCALE 18 to 22, edgefactor 16 (about 32 arcs per vertex)
/// by counting work, which noise on a shared machine does not blur. At SCALE 20 on one
/// thread, vertex relaxations (each scans all arcs of a vertex) and rounds per search:
/// delta 0.01: 1.51 M, 201 rounds; 0.005: 0.76 M, 360; 0.003: 0.73 M, 566; 0.001: 0.67 M,
/// 1462. 0.003 keeps the redundant work near its floor and the round count near GAP's
/// (~500), each round costing one barrier. Scaling by
/// the largest weight keeps the number of buckets (largest distance / delta) the same for
/// a graph whose weights are the Kronecker ones times a constant.
pub const DEFAULT_RELATIVE_DELTA: f32 = 0.003;

/// Default direction-optimizing BFS switching parameter alpha (top-down to bottom-up when
/// the frontier's arcs exceed the unexplored arcs divided by alpha), as in GAP.
pub const DEFAULT_ALPHA: u64 = 15;

/// Default direction-optimizing BFS parameter beta (bottom-up back to top-down when the
/// frontier shrinks below `vertices / beta`), as in GAP.
pub const DEFAULT_BETA: u64 = 18;

/// Which implementation runs a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// Single thread: Dijkstra with an indexed 4-ary heap, queue BFS. The COST reference.
    Seq,
    /// rayon thread pool: delta-stepping SSSP, direction-optimizing BFS.
    Rayon,
}

impl Engine {
    /// Every engine, in the order reports list them.
    pub const ALL: [Engine; 2] = [Engine::Seq, Engine::Rayon];

    /// The engine's command-line name (`seq`, `rayon`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Seq => "seq",
            Engine::Rayon => "rayon",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = BaselineError;

    fn from_str(s: &str) -> Result<Engine> {
        match s {
            "seq" => Ok(Engine::Seq),
            "rayon" => Ok(Engine::Rayon),
            other => Err(BaselineError::UnknownEngine(other.to_owned())),
        }
    }
}

/// Tuning knobs. `Options::default()` is what the benchmarks use.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Threads of the rayon engine (0: rayon's default, the number of CPUs). Ignored by
    /// [`Engine::Seq`].
    pub threads: usize,
    /// Delta-stepping bucket width (`None`: [`DEFAULT_RELATIVE_DELTA`] times the largest
    /// weight). Must be finite and > 0, and so must its inverse.
    pub delta: Option<f32>,
    /// Direction-optimizing BFS alpha ([`DEFAULT_ALPHA`]). Must be > 0.
    pub alpha: u64,
    /// Direction-optimizing BFS beta ([`DEFAULT_BETA`]). Must be > 0.
    pub beta: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options { threads: 0, delta: None, alpha: DEFAULT_ALPHA, beta: DEFAULT_BETA }
    }
}

impl Options {
    /// The options with `threads` threads.
    pub fn with_threads(threads: usize) -> Options {
        Options { threads, ..Options::default() }
    }

    /// The bucket width for a graph whose largest weight is `max_weight`.
    pub fn delta_for(&self, max_weight: f32) -> f32 {
        self.delta.unwrap_or(if max_weight > 0.0 {
            (DEFAULT_RELATIVE_DELTA * max_weight).max(f32::MIN_POSITIVE)
        } else {
            DEFAULT_RELATIVE_DELTA
        })
    }
}

/// Runs kernels of one engine on one graph, many roots in a row.
///
/// It checks the graph once ([`Solver::new`]) and its weights once (at the first SSSP), and
/// keeps the rayon thread pool between searches.
#[derive(Debug)]
pub struct Solver<'g> {
    csr: &'g Csr,
    engine: Engine,
    options: Options,
    pool: Option<ThreadPool>,
    /// The weight check's outcome: the largest weight.
    max_weight: OnceCell<Result<f32>>,
}

impl<'g> Solver<'g> {
    /// Checks the graph (not empty, has edges, fewer than `u32::MAX` vertices) and the
    /// options, and starts the thread pool of the rayon engine.
    pub fn new(engine: Engine, csr: &'g Csr, options: &Options) -> Result<Solver<'g>> {
        check::graph(csr)?;
        check::options(options)?;
        let pool = match engine {
            Engine::Seq => None,
            Engine::Rayon => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(options.threads)
                    .thread_name(|i| format!("baseline-{i}"))
                    .build()
                    .map_err(|e| BaselineError::ThreadPool(e.to_string()))?,
            ),
        };
        Ok(Solver { csr, engine, options: options.clone(), pool, max_weight: OnceCell::new() })
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Threads the engine uses (1 for [`Engine::Seq`]).
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, ThreadPool::current_num_threads)
    }

    /// The graph.
    pub fn graph(&self) -> &'g Csr {
        self.csr
    }

    /// Single-source shortest paths from `root`.
    pub fn sssp(&self, root: VertexId) -> Result<SsspResult> {
        check::root(self.csr, root)?;
        let max_weight = self.max_weight.get_or_init(|| check::weights(self.csr)).clone()?;
        Ok(match &self.pool {
            None => seq::dijkstra(self.csr, root as u32),
            Some(pool) => {
                let delta = self.options.delta_for(max_weight);
                delta::delta_stepping(pool, self.csr, root as u32, delta)
            }
        })
    }

    /// Breadth-first search from `root`.
    pub fn bfs(&self, root: VertexId) -> Result<BfsResult> {
        check::root(self.csr, root)?;
        Ok(match &self.pool {
            None => seq::bfs(self.csr, root as u32),
            Some(pool) => dobfs::direction_optimizing(pool, self.csr, root as u32, &self.options),
        })
    }
}

/// Single-source shortest paths from `root` with `engine` (checks the graph each call:
/// use a [`Solver`] for many roots).
pub fn sssp(engine: Engine, csr: &Csr, root: VertexId, options: &Options) -> Result<SsspResult> {
    Solver::new(engine, csr, options)?.sssp(root)
}

/// Breadth-first search from `root` with `engine` (checks the graph each call: use a
/// [`Solver`] for many roots).
pub fn bfs(engine: Engine, csr: &Csr, root: VertexId, options: &Options) -> Result<BfsResult> {
    Solver::new(engine, csr, options)?.bfs(root)
}

/// Checks that `csr` is something the baselines accept: at least one vertex, at least one
/// arc, fewer than `u32::MAX` vertices.
pub fn check_graph(csr: &Csr) -> Result<()> {
    check::graph(csr)
}

/// Checks that every weight of `csr` is finite and not negative (what SSSP requires);
/// returns the largest weight.
pub fn check_weights(csr: &Csr) -> Result<f32> {
    check::weights(csr)
}
