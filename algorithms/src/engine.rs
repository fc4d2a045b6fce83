//! The engine: a runtime of workers, the graph view partitioned over them, the options,
//! and the two kernels' entry points ([`Engine::sssp`], [`Engine::bfs`]; the kernels
//! themselves are `crate::sssp` and `crate::bfs`).
//!
//! The graph's vertices are split over all workers of the job, on every rank
//! ([`Partitioning`] over `skein::num_workers()`); each worker is the trustee of one
//! partition (its vertices' distances or levels, parents and work
//! queue) and reads the out-arcs of its own vertices from a read-only copy made once
//! per graph and kernel (8 bytes per arc for SSSP: a 32-bit tag naming the target's
//! owner and local index, and the weight; the tag alone for BFS). An SSSP trustee also
//! reads the arcs into its partition that another partition's scan request names.
//!
//! Both kernels run in rounds driven by the main fiber:
//!
//! 1. every worker runs a *driver* fiber (started with [`skein::spawn_on`], whose argument
//!    is `Plain`: the search id and the round) that works through its own partition (an
//!    inline delegated call, since the partition's trustee is the driver's worker) in
//!    chunks of [`EngineOptions::chunk`] vertices, yielding between chunks so that its
//!    worker serves incoming requests and flushes its outgoing batches;
//! 2. a relaxation (SSSP) or visit (BFS) of a vertex owned elsewhere is an
//!    [`skein::Trust::apply_then`] to the owner's partition, sent by the sending partition
//!    from its own delegated context, with a fixed-size batch of updates as its `Plain`
//!    argument (`crate::outbox`), batched further by the runtime;
//! 3. each driver then calls [`skein::wait_quiescent`], the framework's termination
//!    detector: when it returns, every request of the round has been applied
//!    everywhere, so the driver can read where its partition's next round starts (a
//!    local call) and return it; the main fiber joins the drivers and takes the minimum.
//!    (BFS drivers likewise return the size of their next frontier.)
//!
//! No round ever ends on a timeout. An SSSP round starts at the lowest delta-stepping
//! bucket with a pending vertex (empty buckets are skipped) and each partition goes on
//! to its later buckets until it has done a budget of relaxations
//! ([`EngineOptions::round_share`]; `crate::sssp`, "Rounds"); BFS rounds are levels. Distances and levels do not depend on
//! the number of workers.
//!
//! Communication volume per partition and search: for SSSP one scan (24 bytes) per
//! relaxed vertex and other partition its arcs reach (the receiver relaxes those arcs
//! against its own distances); for BFS at most one message per remote vertex.
//!
//! # Across ranks
//!
//! The same code runs in one process and over the ranks of an `mpirun` job (or the fake
//! ranks of a loopback split, [`EngineOptions::loopback_ranks`]), because every request
//! obeys the runtime's travel rule (closures capture nothing; their data is a `Plain` or
//! serialized argument):
//!
//! - the partitions are built by the main fiber with `trustee(g).entrust_new(arg, make)`,
//!   each on its trustee's rank; `arg` names the graph by its id in the *rank-local*
//!   registry (`crate::registry`), where every rank filed its copy of the graph when it
//!   built its [`Engine`];
//! - each partition then receives every partition's handle once (`apply_with`: handles
//!   travel inside messages) to send its updates, and files its own handle on its rank for
//!   the driver fibers started there;
//! - results come back with `apply_with`, in chunks of at most 65536 vertices, from the
//!   partitions of other ranks; those of rank 0 write the result vectors in place, in
//!   parallel (`crate::output`), into an earlier result's vectors with
//!   [`Engine::bfs_into`] and [`Engine::sssp_into`] (no fresh pages per search);
//! - [`Engine::sssp`] and [`Engine::bfs`] run with [`skein::Runtime::run`], so the result
//!   travels as bytes and every rank returns the same one.
//!
//! Under `mpirun` the program is SPMD: every rank builds the same graph (or its own rows of
//! it, [`Engine::from_local`]) and the same [`Engine`] (same options; `workers` is then per
//! rank), in the same order, and calls each search with the same root at the same time
//! (the runs are collective).
//!
//! # Rank-local rows
//!
//! [`Engine::from_local`] builds the engine of a rank from the rows of its own vertices
//! only (a [`LocalCsr`], e.g. from `skein_generators::distributed`): rank `r` holds the
//! range `rank_bounds(n, R, W)[r]..[r + 1]` ([`rank_bounds`]), the vertices of its
//! partitions (equal blocks of ids, [`Partitioning::new`]: the rows are built before any
//! degree is known; so are the parts of [`Engine::new`] under `mpirun`, while one process
//! balances its parts by arcs, [`Partitioning::balanced`]).
//! Each process copies the arcs of its own partitions only (also under
//! [`Engine::new`], whose ranks hold the whole [`Csr`]); SSSP relaxes a scan from another
//! rank over the receiver's in-arcs (`crate::graph`, which also states the memory per
//! rank). [`Engine::sssp_local`] and [`Engine::bfs_local`] leave each rank its own slice of
//! the result; [`Engine::sssp`] and the `*_on_rank0` variants still gather the whole result
//! (on rank 0, then to every rank for [`Engine::sssp`]).
//!
//! The weights' checks (a weight SSSP cannot use, the largest weight, which sets the
//! default delta) are made on each rank's rows and agreed on over every rank when the
//! engine is built (one run: a fiber on every rank's first worker reads what its rank
//! found), so every rank takes the same delta and refuses the same bad weight.
//!
//! A panic anywhere in a search (a bug) ends it with [`EngineError::Runtime`] naming the
//! panic: the runtime resumes a driver's panic in the main fiber and records a panic in a
//! delegated closure, and the round's quiescence still comes, so nothing hangs.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use skein::Runtime;
use skein_generators::distributed::analytics::LocalPageRank;
use skein_generators::distributed::LocalCsr;
use skein_generators::{BfsResult, Csr, SsspResult, NO_PARENT, UNREACHED_LEVEL};

use crate::graph::{GraphView, Rows, WeightSummary};
use crate::partition::{rank_bounds, Partitioning};
use crate::parts::{Collect, KernelStats};
use crate::{bfs, cc, pagerank, registry, sssp};
use skein_generators::analytics::{ComponentsResult, PageRankParams, PageRankResult};

/// Default SSSP bucket width as a fraction of the graph's largest weight (see
/// [`default_delta`]); for Graph500 weights (uniform in `[0, 1)`) it is the width itself.
///
/// Chosen with `examples/sweep.rs` on SCALE 18 and 20 Kronecker graphs with 2 workers:
/// from 0.001 to 0.004 the time is flat within noise (SCALE 20: 69.6, 74.6, 76.3 MTEPS
/// at 0.001, 0.002, 0.004; 1.00x to 1.04x the relaxations of Dijkstra, 1478 to 442
/// rounds); above, relaxations arriving late from other partitions redo work (1.46x the
/// relaxations and 62 MTEPS at 0.008). Below, rounds (each a quiescence detection) cost
/// more than the finer order saves: at 0.0007, the rayon engine's constant, SCALE 18
/// took 2.5 times the rounds of 0.002 and up to 3.7 times the time. Bins of a sixteenth
/// of a bucket keep the order within a round close to Dijkstra's anyway.
pub const DEFAULT_RELATIVE_DELTA: f32 = 0.002;

/// The default bucket width for Graph500 weights: [`default_delta`]`(1.0)`.
pub const DEFAULT_DELTA: f32 = DEFAULT_RELATIVE_DELTA;

/// The default SSSP bucket width for a graph whose largest weight is `max_weight`: the
/// rule every engine shares, [`skein_buckets::relative_delta`], with this engine's
/// [`DEFAULT_RELATIVE_DELTA`]. Finite and > 0 for any `max_weight`.
pub fn default_delta(max_weight: f32) -> f32 {
    skein_buckets::relative_delta(DEFAULT_RELATIVE_DELTA, max_weight)
}

/// Default [`EngineOptions::round_share`]: see `docs/performance.md` (SSSP rounds, and
/// "SSSP at many workers").
pub const DEFAULT_ROUND_SHARE: u64 = 64;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Worker threads (each one trustee of one partition).
    pub workers: usize,
    /// Fibers per worker the runtime keeps stacks for.
    pub fibers: usize,
    /// Pin workers to cores.
    pub pin: bool,
    /// SSSP bucket width: finite and > 0 (subnormals are accepted). `None`:
    /// [`default_delta`] of the graph's largest weight (0.002 times it; see
    /// [`Engine::delta`]).
    pub delta: Option<f32>,
    /// Vertices a driver processes before it yields to its worker loop (and flushes its
    /// batches). 64 measured about 5% faster than 16 and 256 for SSSP at SCALE 20 with 2
    /// workers (`examples/sweep.rs --chunk 16,64,256`), with a third fewer requests than 16;
    /// BFS is indifferent.
    pub chunk: usize,
    /// Bytes of each request/response slot's overflow block: the batch size between
    /// two workers (see [`skein::Builder::slot_size`]). Each (client, trustee) pair has two
    /// lanes of two slots, so a search allocates `4 × workers² × slot_bytes`; 32 KiB keeps
    /// that at the footprint the runtime had with one lane of 64 KiB slots.
    pub slot_bytes: usize,
    /// SSSP rounds: past a round's first bucket, a partition goes on taking its later
    /// buckets in the same round until it has relaxed `1 / (round_share × partitions)` of
    /// its arcs in the round (at least 1024), so that sparse stretches of distances (a
    /// Kronecker graph's long tail) take a few rounds instead of one per bucket, while the
    /// more partitions there are (the more of them a partition may run ahead of), the less
    /// each takes ahead. 0: one bucket per round (classic delta-stepping rounds).
    pub round_share: u64,
    /// BFS goes bottom-up when the frontier's arcs exceed the arcs not yet examined by a
    /// top-down level / `alpha` (0: never bottom-up), as GAP's `bfs.cc`.
    pub alpha: u64,
    /// BFS goes back top-down when the frontier stops growing and has at most
    /// `vertices / beta` vertices, as GAP's `bfs.cc`.
    pub beta: u64,
    /// A testing aid: split the workers into this many fake ranks of one process
    /// ([`skein::Builder::loopback_ranks`]; `workers` counts all of them then). `None`: the
    /// runtime's default (the `SKEIN_LOOPBACK_RANKS` variable, else no split).
    pub loopback_ranks: Option<usize>,
    /// How the runtime's MPI ranks move requests ([`skein::Builder::rack_transport`]).
    /// `None`: the runtime's default (the `SKEIN_TRANSPORT` variable, else auto).
    pub rack_transport: Option<skein::RackTransport>,
    /// Threads that run a process's workers ([`skein::Builder::worker_threads`]): `Some(t)`
    /// for `t` (at most one per worker), `Some(0)` for as many as the process's cores when the
    /// workers outnumber them. `None`: the runtime's default (the `SKEIN_WORKER_THREADS`
    /// variable, else `0`).
    pub worker_threads: Option<usize>,
    /// In one process, where the parts are balanced by their work: what a vertex counts
    /// for, in arcs ([`crate::Partitioning::balanced_by`]; default
    /// [`crate::partition::VERTEX_ARCS`], what SSSP, BFS and PageRank cost). A kernel whose
    /// work follows the vertices gets even parts with a large value: `skein cc` runs its
    /// engine with [`CC_VERTEX_ARCS`]. Across processes the parts are equal blocks anyway.
    pub vertex_arcs: u64,
}

/// [`EngineOptions::vertex_arcs`] for connected components: parts balanced by vertices
/// (within a coarse block). Components' union-find reads at most two arcs of most vertices
/// (Afforest's sample, `cc.rs`), so its local step's time follows the vertices: at SCALE 20
/// on 2 workers the parts balanced by arcs gave worker 0 548,864 vertices and worker 1
/// 499,712.
pub const CC_VERTEX_ARCS: u64 = u32::MAX as u64;

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            workers: 2,
            fibers: 8,
            pin: false,
            delta: None,
            chunk: 64,
            slot_bytes: 32 * 1024,
            round_share: DEFAULT_ROUND_SHARE,
            alpha: 15,
            beta: 18,
            loopback_ranks: None,
            rack_transport: None,
            worker_threads: None,
            vertex_arcs: crate::partition::VERTEX_ARCS,
        }
    }
}

impl From<skein::Error> for EngineError {
    fn from(e: skein::Error) -> EngineError {
        EngineError::Runtime(e)
    }
}

/// Why the engine failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The runtime failed (a panic in a delegated closure, a failure to start workers). Its
    /// message is part of this one, so the runtime's error is not also the `source` (a
    /// reporter that prints the chain would print it twice).
    #[error("runtime: {0}")]
    Runtime(skein::Error),
    /// The root is not a vertex of the graph.
    #[error("root {root} is not a vertex (the graph has {num_vertices} vertices)")]
    Root {
        /// The root asked for.
        root: u64,
        /// Vertex count.
        num_vertices: u64,
    },
    /// The options make no sense.
    #[error("invalid engine options: {0}")]
    Options(String),
    /// SSSP needs non-negative weights.
    #[error("SSSP needs non-negative, finite weights: arc {arc} weighs {weight}")]
    NegativeWeight {
        /// Index of the offending arc (in the whole graph's CSR order, also when each rank
        /// holds its rows only).
        arc: usize,
        /// Its weight.
        weight: f32,
    },
    /// The ranks did not make a collective call the same way (an SPMD program's ranks must
    /// build the same engines and call the same searches in the same order).
    #[error("collective call: {0}")]
    Collective(String),
}

/// This rank's slice of a single-source shortest paths result ([`Engine::sssp_local`]):
/// the entries of the vertices `first .. first + dist.len()`, with the encodings of
/// [`SsspResult`] (`f32::INFINITY` and `NO_PARENT` when unreached; parents are global ids).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSssp {
    /// The search root.
    pub root: u64,
    /// The first vertex of the slice.
    pub first: u64,
    /// Distance per vertex of the slice.
    pub dist: Vec<f32>,
    /// Parent (global id) per vertex of the slice.
    pub parent: Vec<u64>,
}

/// This rank's slice of a components result ([`Engine::components_local`]): the labels of
/// the vertices `first .. first + label.len()` (each the smallest vertex of its component).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalComponents {
    /// The first vertex of the slice.
    pub first: u64,
    /// Label per vertex of the slice.
    pub label: Vec<u64>,
}

/// PageRank's parameters, checked ([`EngineError::Options`] otherwise).
fn check_pagerank_params(params: &PageRankParams) -> Result<(), EngineError> {
    let ok = params.damping > 0.0
        && params.damping < 1.0
        && params.tolerance >= 0.0
        && params.tolerance.is_finite()
        && params.max_iterations >= 1;
    if ok {
        return Ok(());
    }
    Err(EngineError::Options(format!(
        "PageRank needs 0 < damping < 1, a finite tolerance >= 0 and at least one iteration, \
         got {params:?}"
    )))
}

/// This rank's slice of a BFS result ([`Engine::bfs_local`]): the entries of the vertices
/// `first .. first + level.len()`, with the encodings of [`BfsResult`] (`UNREACHED_LEVEL`
/// and `NO_PARENT` when unreached; parents are global ids).
#[derive(Debug, Clone, PartialEq)]
pub struct LocalBfs {
    /// The search root.
    pub root: u64,
    /// The first vertex of the slice.
    pub first: u64,
    /// Level per vertex of the slice.
    pub level: Vec<u32>,
    /// Parent (global id) per vertex of the slice.
    pub parent: Vec<u64>,
}

/// What one search did, besides its result.
#[derive(Debug, Clone, Default)]
pub struct SearchStats {
    /// Kernel time: from the root's seeding to the end of the last round (partition
    /// set-up and result gathering excluded).
    pub seconds: f64,
    /// Rounds (SSSP bucket passes, BFS levels).
    pub rounds: u64,
    /// Requests sent between partitions.
    pub messages: u64,
    /// Arcs relaxed (SSSP) or scanned (BFS), all partitions together: the work done,
    /// to compare with the `m` of a sequential search.
    pub arcs: u64,
    /// How the arcs spread over the partitions, round by round (SSSP; `None` for the other
    /// kernels).
    pub round_spread: Option<crate::parts::RoundSpread>,
    /// Runtime counters of the run.
    pub runtime: Option<skein::Stats>,
    /// The kernel's own work counters, by name (connected components: `crate::cc`; empty
    /// for the others).
    pub counters: Vec<(&'static str, u64)>,
}

/// SSSP and BFS on a graph, on Skein's delegation runtime: in one process, or over the
/// ranks of an `mpirun` job, where every rank builds the same engine (same graph, same
/// options, `workers` per rank) and calls the same searches in the same order; each search
/// then returns the same result on every rank (see the module docs, "Across ranks").
#[derive(Debug)]
pub struct Engine {
    rt: Runtime,
    view: Arc<GraphView>,
    opts: EngineOptions,
    /// The first arc whose weight SSSP cannot use (negative, NaN or infinite), found
    /// once per graph (over every rank).
    bad_weight: Option<(usize, f32)>,
    /// The largest weight (0 for a graph without arcs; meaningless with a bad weight).
    max_weight: f32,
    /// The SSSP bucket width: the option, or the default for `max_weight`.
    delta: f32,
    /// The view's id in this rank's registry (`crate::registry`).
    graph_id: u64,
    /// The vertices of this process's result slices (`*_local`): its rank's range under
    /// `mpirun`, every vertex in one process.
    range: std::ops::Range<u64>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        registry::unregister_graph(self.graph_id);
    }
}

impl KernelStats {
    fn into_stats(self, runtime: Option<skein::Stats>) -> SearchStats {
        let KernelStats { seconds, rounds, messages, arcs } = self;
        SearchStats {
            seconds,
            rounds,
            messages,
            arcs,
            round_spread: None,
            runtime,
            counters: Vec::new(),
        }
    }
}

impl Engine {
    /// Prepares a runtime of `opts.workers` workers (per rank under `mpirun`) and the
    /// partitioning of `graph` over the workers of every rank. Under `mpirun` this is
    /// collective (the runtime's bootstrap and one run), and each rank copies the arcs of
    /// its own partitions only. Each kernel's copy of the partitions' arcs is made on its
    /// first search, or before by [`Engine::prepare_sssp`] / [`Engine::prepare_bfs`].
    pub fn new(graph: Arc<Csr>, opts: EngineOptions) -> Result<Engine, EngineError> {
        Engine::build(Rows::Whole(graph), opts)
    }

    /// [`Engine::new`] on the rows of this rank's vertices only. Collective under
    /// `mpirun`: every rank calls it with its own rows and the same options. `graph` must
    /// hold the range `rank_bounds(n, ranks, opts.workers)[r]..[r + 1]` of this rank `r`
    /// ([`rank_bounds`]; [`EngineError::Options`] on every rank otherwise, naming the
    /// rank, the range it holds and the one expected). Outside `mpirun` (one rank, also
    /// with a loopback split) it holds every row and the engine is that of [`Engine::new`].
    pub fn from_local(graph: Arc<LocalCsr>, opts: EngineOptions) -> Result<Engine, EngineError> {
        Engine::build(Rows::Local(graph), opts)
    }

    fn build(rows: Rows, opts: EngineOptions) -> Result<Engine, EngineError> {
        if opts.workers == 0 || opts.fibers == 0 || opts.chunk == 0 {
            return Err(EngineError::Options(
                "workers, fibers and chunk must be at least 1".into(),
            ));
        }
        if let Some(delta) = opts.delta {
            if !(delta > 0.0 && delta.is_finite()) {
                return Err(EngineError::Options(format!(
                    "delta must be a finite number > 0, got {delta}"
                )));
            }
        }
        let mut builder = Runtime::builder()
            .workers(opts.workers)
            .fibers_per_worker(opts.fibers)
            .pin(opts.pin)
            .slot_size(opts.slot_bytes);
        if let Some(r) = opts.loopback_ranks {
            builder = builder.loopback_ranks(r);
        }
        if let Some(t) = opts.rack_transport {
            builder = builder.rack_transport(t);
        }
        if let Some(t) = opts.worker_threads {
            builder = builder.worker_threads(t);
        }
        let rt = builder.build()?;
        // Processes of the job (the runtime's ranks but for a loopback split's fake ones).
        let (rank, ranks) = (skein::rank(), skein::ranks());
        let n = rows.num_vertices();
        let held = rows.get().range();
        let summary = WeightSummary::of(rows.get().weights);
        // What this rank found, for every rank to read in the run below.
        let id = registry::new_graph_id();
        let b = |x: bool| u64::from(x);
        let (bad_arc, bad_w) = summary.bad.map_or((0, 0), |(a, w)| (a, u64::from(w.to_bits())));
        registry::file_probe(
            id,
            [
                n,
                held.start,
                held.end,
                b(summary.bad.is_some()),
                bad_arc,
                bad_w,
                u64::from(summary.max.to_bits()),
                summary.arcs,
            ],
        );
        let probed = rt.run(move || {
            let lw = skein::local_workers();
            let fibers: Vec<_> =
                (0..skein::ranks()).map(|r| skein::spawn_on(r * lw, id, registry::probe)).collect();
            let probes: Vec<[u64; 8]> = fibers.into_iter().map(|f| f.join()).collect();
            (lw as u64, probes)
        });
        registry::drop_probe(id);
        let (per_rank, probes) = probed?;
        let per_rank = per_rank as usize;
        // One partition per worker of the job: under mpirun `workers` is per rank; in a
        // loopback split it counts every fake rank's workers already.
        let parts = opts.workers * ranks;
        let bounds = rank_bounds(n, ranks, opts.workers);
        let local = matches!(rows, Rows::Local(_));
        // Every process checks every rank's rows (the same probes everywhere), so a bad
        // range is the same error on every rank.
        if local {
            let me = [n, held.start, held.end, 0, 0, 0, 0, 0];
            let seen: &[[u64; 8]] = if ranks > 1 { &probes } else { std::slice::from_ref(&me) };
            for (r, p) in seen.iter().enumerate() {
                if p[0] != n {
                    return Err(EngineError::Options(format!(
                        "rank {r}'s rows are of a graph of {} vertices, rank {rank}'s of {n}",
                        p[0]
                    )));
                }
                if (p[1], p[2]) != (bounds[r], bounds[r + 1]) {
                    return Err(EngineError::Options(format!(
                        "rank {r} of {ranks} holds the rows of vertices {}..{}, but with {} \
                         workers per rank it owns the vertices {}..{} (rank_bounds({n}, \
                         {ranks}, {}))",
                        p[1],
                        p[2],
                        opts.workers,
                        bounds[r],
                        bounds[r + 1],
                        opts.workers
                    )));
                }
            }
        }
        // The weights of every rank's rows: the first bad arc in the whole graph's order
        // (ranks hold consecutive rows), the largest weight of all.
        let (bad_weight, max_weight) = if local && ranks > 1 {
            let (mut before, mut bad, mut max) = (0u64, None, 0.0f32);
            for p in &probes {
                if bad.is_none() && p[3] != 0 {
                    bad = Some(((before + p[4]) as usize, f32::from_bits(p[5] as u32)));
                }
                max = max.max(f32::from_bits(p[6] as u32));
                before += p[7];
            }
            (bad, max)
        } else {
            (summary.bad.map(|(a, w)| (a as usize, w)), summary.max)
        };
        let own = if ranks > 1 { rank * opts.workers..(rank + 1) * opts.workers } else { 0..parts };
        let view = GraphView::new(rows, parts, per_rank, own, opts.vertex_arcs)
            .map_err(EngineError::Options)?;
        let delta = opts.delta.unwrap_or_else(|| default_delta(max_weight));
        let view = Arc::new(view);
        registry::insert_graph(id, Arc::clone(&view));
        // This rank's vertices: those of its parts (`bounds[r]..bounds[r + 1]` where ranks
        // hold their own rows; the balanced parts' where every rank holds every row).
        let mine = view.own();
        let range = if mine.is_empty() {
            0..0
        } else {
            view.parts.range(mine.start).start..view.parts.range(mine.end - 1).end
        };
        Ok(Engine { rt, view, opts, bad_weight, max_weight, delta, graph_id: id, range })
    }

    /// The SSSP bucket width searches use: [`EngineOptions::delta`], or by default
    /// [`default_delta`] of the graph's largest weight.
    pub fn delta(&self) -> f32 {
        self.delta
    }

    /// Copies the partitions' arcs for SSSP (8 bytes per arc, in parallel) unless done
    /// already, so that the first search's time does not include it.
    pub fn prepare_sssp(&self) {
        self.view.all_weighted();
        self.view.all_in_arcs();
    }

    /// Copies the partitions' arcs for BFS (4 bytes per arc, in parallel) unless done
    /// already.
    pub fn prepare_bfs(&self) {
        self.view.all_bare();
    }

    /// Copies what PageRank reads (the own rows' targets as `u32`, 4 bytes per arc) unless
    /// done already.
    pub fn prepare_pagerank(&self) {
        self.view.all_row32();
    }

    /// The vertices of this rank's result slices ([`Engine::sssp_local`]): its range
    /// under `mpirun` ([`rank_bounds`]), every vertex in one process.
    pub fn local_range(&self) -> std::ops::Range<u64> {
        self.range.clone()
    }

    /// Bytes of the arc copies and in-arcs this process holds (those made so far): what
    /// the engine adds to the rows.
    pub fn graph_bytes(&self) -> u64 {
        self.view.heap_bytes()
    }

    /// The options the engine runs with.
    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// The partitioning of the vertices over the workers.
    pub fn partitioning(&self) -> &Partitioning {
        &self.view.parts
    }

    fn check_root(&self, root: u64) -> Result<(), EngineError> {
        let n = self.view.parts.num_vertices();
        if root >= n {
            return Err(EngineError::Root { root, num_vertices: n });
        }
        Ok(())
    }

    /// Each rank's peak resident memory so far (`VmHWM`, bytes; 0 where the system does not
    /// say), in rank order, the same vector on every rank. Collective under `mpirun`.
    pub fn peak_rss_per_rank(&self) -> Result<Vec<u64>, EngineError> {
        Ok(self.rt.run(|| {
            let fibers: Vec<_> = (0..skein::ranks())
                .map(|r| {
                    skein::spawn_on(r * skein::local_workers(), (), |()| {
                        skein_generators::memory::peak_rss_bytes().unwrap_or(0)
                    })
                })
                .collect();
            fibers.into_iter().map(|f| f.join()).collect::<Vec<u64>>()
        })?)
    }

    /// The graph's id in each rank's registry: what a kernel of your own passes to
    /// [`crate::parts::entrust`] (its partitions reach the graph by it on their trustees,
    /// [`crate::registry::graph`]). The same on every rank.
    pub fn graph_id(&self) -> u64 {
        self.graph_id
    }

    /// Runs `main` as the main fiber of the engine's runtime (on rank 0 under `mpirun`; every
    /// rank returns its value): where a kernel of your own runs, on the engine's workers and
    /// graph ([`Engine::graph_id`], [`crate::parts`]). Collective under `mpirun`.
    pub fn run<R, F>(&self, main: F) -> Result<R, EngineError>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Serialize + DeserializeOwned + Send + 'static,
    {
        Ok(self.rt.run(main)?)
    }

    /// PageRank (pull, `crate::pagerank`): ranks bit for bit equal to
    /// `skein_baselines::pagerank`'s for any workers and ranks. `SearchStats::rounds` counts
    /// iterations. Collective under `mpirun`; the ranks travel to every rank.
    ///
    /// # Complexity
    /// Per iteration `O(n / P + m / P)` per partition and one contribution array of `8·n`
    /// bytes per rank, sent once to every other rank.
    pub fn pagerank(
        &self,
        params: PageRankParams,
    ) -> Result<(PageRankResult, SearchStats), EngineError> {
        check_pagerank_params(&params)?;
        self.prepare_pagerank();
        let view = Arc::clone(&self.view);
        let (id, chunk) = (self.graph_id, self.opts.chunk * 64);
        let (rank, iterations, l1, stats) =
            self.rt.run(move || pagerank::run(id, view, params, chunk, Collect::Gather))?;
        let stats = stats.into_stats(Some(self.rt.stats()));
        Ok((PageRankResult { rank, iterations, l1 }, stats))
    }

    /// Weakly connected components (a union-find within each partition, local components
    /// hooked to the giant component by one arc into another partition's largest one, then
    /// min-label propagation over the few local components left, `crate::cc`): each vertex
    /// labelled by the smallest vertex of its component, for any workers and ranks.
    /// `SearchStats::rounds` counts the label rounds (none on one partition; the same on
    /// every rank, though one more may run when offers race ahead of a round's start),
    /// `SearchStats::counters` the hook and contraction work. Collective under
    /// `mpirun`; the labels travel to every rank. Its time follows the vertices more than
    /// the arcs: an engine built with [`EngineOptions::vertex_arcs`] = [`CC_VERTEX_ARCS`]
    /// gives it parts balanced by vertices (as `skein cc` does).
    pub fn components(&self) -> Result<(ComponentsResult, SearchStats), EngineError> {
        let mut out = ComponentsResult { label: Vec::new() };
        let stats = self.components_into(&mut out)?;
        Ok((out, stats))
    }

    /// [`Engine::components`] into `out`, an earlier result of this engine (or an empty
    /// one): its labels are overwritten in place when it has one per vertex, so that a run
    /// neither zeroes nor faults fresh pages for its result (8 bytes per vertex); otherwise
    /// they are replaced. On an error `out` is left empty or as it was.
    pub fn components_into(&self, out: &mut ComponentsResult) -> Result<SearchStats, EngineError> {
        self.prepare_bfs();
        let view = Arc::clone(&self.view);
        let (id, chunk) = (self.graph_id, self.opts.chunk);
        let reuse = std::mem::take(&mut out.label);
        let (label, stats, counters) =
            self.rt.run(move || cc::run(id, view, chunk, Collect::Gather, reuse))?;
        let mut stats = stats.into_stats(Some(self.rt.stats()));
        stats.counters = counters.named();
        out.label = label;
        Ok(stats)
    }

    /// [`Engine::pagerank`] whose ranks stay distributed: each rank gets the slice of its
    /// own vertices ([`Engine::local_range`]), every vertex in one process; nothing of the
    /// size of the graph is gathered on any rank. Collective under `mpirun`.
    pub fn pagerank_local(
        &self,
        params: PageRankParams,
    ) -> Result<(LocalPageRank, SearchStats), EngineError> {
        check_pagerank_params(&params)?;
        self.prepare_pagerank();
        let view = Arc::clone(&self.view);
        let (id, chunk) = (self.graph_id, self.opts.chunk * 64);
        let key = registry::new_slices();
        let run = self.rt.run(move || {
            let (_, iterations, l1, stats) =
                pagerank::run(id, view, params, chunk, Collect::Slices(key));
            (iterations, l1, stats)
        });
        let slices = self.take_slices::<f64>(key);
        let (iterations, l1, stats) = run?;
        let (rank, _) = slices?;
        let stats = stats.into_stats(Some(self.rt.stats()));
        Ok((LocalPageRank { first: self.range.start, rank, iterations, l1 }, stats))
    }

    /// [`Engine::components`] whose labels stay distributed, as [`Engine::pagerank_local`].
    pub fn components_local(&self) -> Result<(LocalComponents, SearchStats), EngineError> {
        self.prepare_bfs();
        let view = Arc::clone(&self.view);
        let (id, chunk) = (self.graph_id, self.opts.chunk);
        let key = registry::new_slices();
        let run = self.rt.run(move || {
            let (_, stats, counters) = cc::run(id, view, chunk, Collect::Slices(key), Vec::new());
            (stats, counters)
        });
        let slices = self.take_slices::<u64>(key);
        let (stats, counters) = run?;
        let mut stats = stats.into_stats(Some(self.rt.stats()));
        stats.counters = counters.named();
        let (label, _) = slices?;
        Ok((LocalComponents { first: self.range.start, label }, stats))
    }

    /// Single-source shortest paths from `root` (binary32 distances, as the Graph500
    /// reference computes them).
    ///
    /// # Complexity
    /// `O(m)` relaxations per bucket pass in the worst case; in practice close to the
    /// `m` of one Dijkstra plus re-relaxations of vertices taken before their final
    /// distance. Memory per partition: 8 bytes and one bit per owned vertex, plus its
    /// pending-vertex bins: one entry per improvement not yet taken, and a window of at
    /// most 2^15 empty bins (never `largest distance / delta` of them). Rounds: at most
    /// one per non-empty bucket, however many empty buckets lie between; with the default
    /// [`EngineOptions::round_share`] 20 to 50 per search on Kronecker graphs (more with
    /// more workers: see the option). [`SearchStats::round_spread`] tells how evenly the
    /// rounds' work fell on the workers.
    pub fn sssp(&self, root: u64) -> Result<(SsspResult, SearchStats), EngineError> {
        let (r, stats) = self.sssp_search(root, true, Default::default())?;
        Ok((r.expect("the result travels to every rank"), stats))
    }

    /// [`Engine::sssp`] into `out`, an earlier result of this engine (or an empty one), as
    /// [`Engine::bfs_into`]: its vectors are overwritten in place when they have one entry
    /// per vertex, so that a search faults no fresh pages for its result (12 bytes per
    /// vertex); otherwise they are replaced. On an error `out` is left empty or as it was.
    pub fn sssp_into(&self, root: u64, out: &mut SsspResult) -> Result<SearchStats, EngineError> {
        let reuse = (std::mem::take(&mut out.dist), std::mem::take(&mut out.parent));
        let (r, stats) = self.sssp_search(root, true, reuse)?;
        *out = r.expect("the result travels to every rank");
        Ok(stats)
    }

    /// [`Engine::sssp`] whose result stays where the search's main fiber ran: `Some` on
    /// rank 0 (and in a process that is not part of an `mpirun` job), `None` on the other
    /// ranks, which get the counters only. Nothing of the size of the graph is sent to
    /// every rank. Collective under `mpirun`, as [`Engine::sssp`].
    pub fn sssp_on_rank0(
        &self,
        root: u64,
    ) -> Result<(Option<SsspResult>, SearchStats), EngineError> {
        self.sssp_search(root, false, Default::default())
    }

    /// [`Engine::sssp`] whose result stays distributed: each rank gets the slice of its
    /// own vertices ([`Engine::local_range`]), every vertex in one process. Collective
    /// under `mpirun`; the counters are those of the whole search, the same on every rank.
    pub fn sssp_local(&self, root: u64) -> Result<(LocalSssp, SearchStats), EngineError> {
        let (params, view, id) = self.sssp_params(root)?;
        let key = registry::new_slices();
        let run = self.rt.run(move || {
            sssp::search(id, view, root, params, Collect::Slices(key), Default::default()).2
        });
        let slices = self.take_slices::<f32>(key);
        let (stats, spread) = run?;
        let stats =
            SearchStats { round_spread: Some(spread), ..stats.into_stats(Some(self.rt.stats())) };
        let (dist, parent) = slices?;
        Ok((LocalSssp { root, first: self.range.start, dist, parent }, stats))
    }

    /// [`Engine::bfs`] whose result stays distributed, as [`Engine::sssp_local`].
    pub fn bfs_local(&self, root: u64) -> Result<(LocalBfs, SearchStats), EngineError> {
        self.check_root(root)?;
        self.prepare_bfs();
        let view = Arc::clone(&self.view);
        let params = self.bfs_params();
        let id = self.graph_id;
        let key = registry::new_slices();
        let run = self.rt.run(move || {
            bfs::search(id, view, root, params, Collect::Slices(key), Default::default()).2
        });
        let slices = self.take_slices::<u32>(key);
        let stats = run?.into_stats(Some(self.rt.stats()));
        let (level, parent) = slices?;
        Ok((LocalBfs { root, first: self.range.start, level, parent }, stats))
    }

    /// The slices the ranks of this process filed under `key`, joined: this process's
    /// range of the result.
    fn take_slices<V: Send + 'static>(&self, key: u64) -> Result<(Vec<V>, Vec<u64>), EngineError> {
        let slices = registry::take_slices::<(Vec<V>, Vec<u64>)>(key);
        let len = (self.range.end - self.range.start) as usize;
        let got: usize = slices.iter().map(|(_, (v, _))| v.len()).sum();
        if got != len {
            return Err(EngineError::Collective(format!(
                "rank {} received {got} result entries for its {len} vertices: every rank must \
                 build the same engines and call the same searches in the same order",
                skein::rank()
            )));
        }
        if slices.len() == 1 {
            return Ok(slices.into_iter().next().map(|(_, s)| s).unwrap_or_default());
        }
        let (mut values, mut parents) = (Vec::with_capacity(len), Vec::with_capacity(len));
        for (_, (v, p)) in slices {
            values.extend(v);
            parents.extend(p);
        }
        Ok((values, parents))
    }

    /// The checks and parameters of an SSSP search from `root`.
    fn sssp_params(&self, root: u64) -> Result<(sssp::Params, Arc<GraphView>, u64), EngineError> {
        self.check_root(root)?;
        if let Some((arc, weight)) = self.bad_weight {
            return Err(EngineError::NegativeWeight { arc, weight });
        }
        self.prepare_sssp();
        let params = sssp::Params {
            delta: self.delta,
            max_weight: self.max_weight,
            chunk: self.opts.chunk,
            round_share: self.opts.round_share,
            #[cfg(test)]
            fault: None,
        };
        Ok((params, Arc::clone(&self.view), self.graph_id))
    }

    fn bfs_params(&self) -> bfs::Params {
        bfs::Params { chunk: self.opts.chunk, alpha: self.opts.alpha, beta: self.opts.beta }
    }

    fn sssp_search(
        &self,
        root: u64,
        everywhere: bool,
        reuse: (Vec<f32>, Vec<u64>),
    ) -> Result<(Option<SsspResult>, SearchStats), EngineError> {
        let (params, view, id) = self.sssp_params(root)?;
        let (values, stats) = self.run_search(everywhere, move || {
            sssp::search(id, view, root, params, Collect::Gather, reuse)
        })?;
        let (stats, spread) = stats;
        let stats =
            SearchStats { round_spread: Some(spread), ..stats.into_stats(Some(self.rt.stats())) };
        Ok((values.map(|(dist, parent)| SsspResult { root, dist, parent }), stats))
    }

    /// Breadth-first search from `root`: hop levels and a parent tree.
    ///
    /// # Complexity
    /// `O(n + m)` work; one round per level. Memory per partition: 8 bytes and 2 bits per
    /// owned vertex (level and parent; the vertices with arcs and those still to do) plus
    /// a bit per vertex of the graph (the send filter), and per rank two bits per vertex of
    /// the graph (the frontier bitmaps); kept across searches.
    pub fn bfs(&self, root: u64) -> Result<(BfsResult, SearchStats), EngineError> {
        let (r, stats) = self.bfs_search(root, true, Default::default())?;
        Ok((r.expect("the result travels to every rank"), stats))
    }

    /// [`Engine::bfs`] into `out`, an earlier result of this engine (or an empty one): its
    /// vectors are overwritten in place when they have one entry per vertex, so that a
    /// search faults no fresh pages for its result (12 bytes per vertex); otherwise they are
    /// replaced. On an error `out` is left empty or as it was.
    pub fn bfs_into(&self, root: u64, out: &mut BfsResult) -> Result<SearchStats, EngineError> {
        let reuse = (std::mem::take(&mut out.level), std::mem::take(&mut out.parent));
        let (r, stats) = self.bfs_search(root, true, reuse)?;
        *out = r.expect("the result travels to every rank");
        Ok(stats)
    }

    /// [`Engine::bfs`] whose result stays on rank 0, as [`Engine::sssp_on_rank0`].
    pub fn bfs_on_rank0(&self, root: u64) -> Result<(Option<BfsResult>, SearchStats), EngineError> {
        self.bfs_search(root, false, Default::default())
    }

    fn bfs_search(
        &self,
        root: u64,
        everywhere: bool,
        reuse: (Vec<u32>, Vec<u64>),
    ) -> Result<(Option<BfsResult>, SearchStats), EngineError> {
        self.check_root(root)?;
        self.prepare_bfs();
        let view = Arc::clone(&self.view);
        let params = self.bfs_params();
        let id = self.graph_id;
        let (values, stats) = self.run_search(everywhere, move || {
            bfs::search(id, view, root, params, Collect::Gather, reuse)
        })?;
        let stats = stats.into_stats(Some(self.rt.stats()));
        if let Some((level, parent)) = &values {
            debug_assert!(level
                .iter()
                .zip(parent)
                .all(|(&l, &p)| (l == UNREACHED_LEVEL) == (p == NO_PARENT)));
        }
        Ok((values.map(|(level, parent)| BfsResult { root, level, parent }), stats))
    }

    /// Runs `search` as the runtime's main fiber. With `everywhere` its vectors travel to
    /// every rank with the run's value; otherwise they are left on rank 0
    /// (`crate::registry::stash`), and `None` is returned elsewhere.
    fn run_search<V, K, S>(&self, everywhere: bool, search: S) -> SearchOutcome<V, K>
    where
        V: Serialize + DeserializeOwned + Send + 'static,
        K: Serialize + DeserializeOwned + Send + 'static,
        S: FnOnce() -> (Vec<V>, Vec<u64>, K) + Send + 'static,
    {
        if everywhere {
            let (values, parents, stats) = self.rt.run(search)?;
            return Ok((Some((values, parents)), stats));
        }
        let key = registry::new_search();
        let run = self.rt.run(move || {
            let (values, parents, stats) = search();
            registry::stash(key, (values, parents));
            stats
        });
        // Taken also when the run failed, so that nothing stays behind.
        let values = registry::take::<(Vec<V>, Vec<u64>)>(key);
        Ok((values, run?))
    }
}

/// What [`Engine::run_search`] returns: the vectors (where they are), and the counters
/// (`K`: [`KernelStats`], with more for some kernels).
type SearchOutcome<V, K> = Result<(Option<(Vec<V>, Vec<u64>)>, K), EngineError>;
