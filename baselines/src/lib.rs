//! Baselines Skein is measured against: sequential, rayon shared-memory and petgraph
//! single-source shortest paths (SSSP) and breadth-first search (BFS); sequential and rayon
//! PageRank and connected components ([`Solver::pagerank`], [`Solver::components`]).
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
mod cc;
mod check;
mod compact;
mod delta;
mod dobfs;
mod error;
mod heap;
pub mod locks;
mod options;
pub mod oracle;
mod pagerank;
mod parents;
mod prefetch;
mod seq;

use std::cell::OnceCell;

pub use error::{BaselineError, Result};
pub use options::{
    default_delta, relative_delta, Options, DEFAULT_ALPHA, DEFAULT_BETA, DEFAULT_RELATIVE_DELTA,
};
use rayon::ThreadPool;
use skein_generators::analytics::{ComponentsResult, PageRankParams, PageRankResult};
use skein_generators::{BfsResult, Csr, SsspResult, VertexId};

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

/// Runs kernels of one engine on one graph, many roots in a row.
///
/// It checks the graph once ([`Solver::new`]) and its weights once (at the first SSSP),
/// copies the arcs once into the engines' compact layout (at the first search of each
/// kernel, or earlier with [`Solver::prepare_sssp`] / [`Solver::prepare_bfs`], so that no
/// timed search pays for it), and keeps the rayon thread pool between searches.
#[derive(Debug)]
pub struct Solver<'g> {
    csr: &'g Csr,
    engine: Engine,
    options: Options,
    pool: Option<ThreadPool>,
    /// The weight check's outcome: the largest weight.
    max_weight: OnceCell<Result<f32>>,
    /// The engines' arc layouts, built at the first search of each kernel (or by
    /// [`Solver::prepare_sssp`] / [`Solver::prepare_bfs`]).
    weighted_arcs: OnceCell<Vec<compact::WeightedArc>>,
    targets: OnceCell<Vec<u32>>,
    /// The rayon BFS's arrays that a search does not return, kept for the next one.
    bfs_scratch: std::sync::Mutex<Option<dobfs::Scratch>>,
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
        Ok(Solver {
            csr,
            engine,
            options: options.clone(),
            pool,
            max_weight: OnceCell::new(),
            weighted_arcs: OnceCell::new(),
            targets: OnceCell::new(),
            bfs_scratch: std::sync::Mutex::new(None),
        })
    }

    /// Does once, before timing, what the first [`Solver::sssp`] would: checks the weights
    /// and copies the arcs into the engines' compact layout (`(u32 target, f32 weight)`,
    /// 8 bytes per arc). Returns the largest weight.
    pub fn prepare_sssp(&self) -> Result<f32> {
        let max_weight = self.max_weight.get_or_init(|| check::weights(self.csr)).clone()?;
        self.weighted_arcs.get_or_init(|| self.in_pool(|| compact::weighted_arcs(self.csr)));
        Ok(max_weight)
    }

    /// Does once, before timing, what the first [`Solver::bfs`] would: copies the targets
    /// as `u32` (4 bytes per arc).
    pub fn prepare_bfs(&self) {
        self.targets.get_or_init(|| self.in_pool(|| compact::targets(self.csr)));
    }

    /// Runs `f` on the engine's pool (the sequential engine has none: rayon's global one).
    fn in_pool<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
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
    ///
    /// A panic in any thread of the engine (a bug) ends the search with
    /// [`BaselineError::Panicked`] once every thread has stopped; nothing hangs.
    pub fn sssp(&self, root: VertexId) -> Result<SsspResult> {
        check::root(self.csr, root)?;
        let max_weight = self.prepare_sssp()?;
        let arcs = self.weighted_arcs.get().expect("prepared above");
        self.catch_panic(|| match &self.pool {
            None => seq::dijkstra(self.csr, arcs, root as u32),
            Some(pool) => {
                let delta = self.options.delta_for(max_weight);
                delta::delta_stepping(pool, self.csr, arcs, root as u32, delta, max_weight)
            }
        })
    }

    /// Breadth-first search from `root`.
    ///
    /// A panic in any thread of the engine (a bug) ends the search with
    /// [`BaselineError::Panicked`].
    pub fn bfs(&self, root: VertexId) -> Result<BfsResult> {
        let mut out = BfsResult { root, level: Vec::new(), parent: Vec::new() };
        self.bfs_into(root, &mut out)?;
        Ok(out)
    }

    /// [`Solver::bfs`] into `out`, an earlier result (or an empty one): the rayon engine
    /// overwrites its vectors in place when they have one entry per vertex, so that a search
    /// faults no fresh pages for its result; otherwise (and on the sequential engine) they
    /// are replaced. On an error `out` is left empty or as it was.
    pub fn bfs_into(&self, root: VertexId, out: &mut BfsResult) -> Result<()> {
        check::root(self.csr, root)?;
        self.prepare_bfs();
        let targets = self.targets.get().expect("prepared above");
        self.catch_panic(|| match &self.pool {
            None => *out = seq::bfs(self.csr, targets, root as u32),
            Some(pool) => {
                // Taken out for the search and put back after (a panic loses it only).
                let mut scratch = self.bfs_scratch.lock().map(|mut s| s.take()).unwrap_or(None);
                dobfs::direction_optimizing(
                    pool,
                    self.csr,
                    targets,
                    root as u32,
                    &self.options,
                    &mut scratch,
                    out,
                );
                if let Ok(mut s) = self.bfs_scratch.lock() {
                    *s = scratch;
                }
            }
        })
    }

    /// PageRank (pull; `skein_generators::analytics` states the update): the same ranks, bit
    /// for bit, from both engines (and from Skein's).
    pub fn pagerank(&self, params: &PageRankParams) -> Result<PageRankResult> {
        self.prepare_bfs();
        let targets = self.targets.get().expect("prepared above");
        self.catch_panic(|| pagerank::pagerank(self.pool.as_ref(), self.csr, targets, params))
    }

    /// Weakly connected components: each vertex labelled by the smallest vertex of its
    /// component (union-find; lock-free on the rayon engine).
    pub fn components(&self) -> Result<ComponentsResult> {
        self.prepare_bfs();
        let targets = self.targets.get().expect("prepared above");
        self.catch_panic(|| cc::components(self.pool.as_ref(), self.csr, targets))
    }

    /// Runs a search, turning a panic of any of its threads into an error.
    fn catch_panic<T>(&self, search: impl FnOnce() -> T) -> Result<T> {
        // Unwind safety: a search only reads the solver (its cells are filled before),
        // and everything it writes is its own, dropped during the unwinding.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(search)).map_err(|payload| {
            BaselineError::Panicked { engine: self.engine.name(), message: panic_text(&*payload) }
        })
    }
}

/// The text of a panic payload (a `&str` or `String` message), or a placeholder.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;
    use skein_generators::EdgeList;

    #[test]
    fn a_panicking_search_is_an_error_naming_the_panic() {
        let el = EdgeList { num_vertices: 2, src: vec![0], dst: vec![1], weights: None };
        let csr = Csr::from_edge_list(&el);
        for engine in Engine::ALL {
            let solver = Solver::new(engine, &csr, &Options::with_threads(2)).unwrap();
            let err = solver.catch_panic(|| -> u32 { panic!("boom {}", 7) }).unwrap_err();
            assert_eq!(
                err,
                BaselineError::Panicked { engine: engine.name(), message: "boom 7".into() }
            );
            assert!(err.to_string().contains("panicked during the search: boom 7"), "{err}");
            assert_eq!(solver.catch_panic(|| 5), Ok(5));
        }
    }

    #[test]
    fn default_delta_is_positive_and_finite_for_any_largest_weight() {
        assert_eq!(default_delta(1.0), DEFAULT_RELATIVE_DELTA);
        assert_eq!(default_delta(100_000.0), DEFAULT_RELATIVE_DELTA * 100_000.0);
        for w in [0.0, -0.0, f32::from_bits(1), 1e-40, 1e30, f32::MAX, f32::INFINITY, f32::NAN] {
            for relative in [DEFAULT_RELATIVE_DELTA, 0.002, 1.0, 3.0] {
                let d = relative_delta(relative, w);
                assert!(d.is_finite() && d > 0.0, "max weight {w}, relative {relative}: {d}");
            }
        }
    }
}
