//! A kernel's partitions and the generic steps of a kernel over them: a partition state
//! ([`Part`]) entrusted to every worker of every rank ([`entrust`]), given each other's handles
//! ([`connect`], undone by [`disconnect`]: the handles form a reference cycle that would
//! otherwise keep every partition alive), driven in supersteps ([`superstep`]: a driver fiber
//! on every worker, [`chunks`] of work with yields between, then "everything sent this
//! round has been applied": [`skein::wait_quiescent`]), cleared between searches ([`reset`])
//! and its result collected ([`collect`], [`gather`]; [`gather_into`] writes into an
//! earlier result's vectors, [`gather_values_into`] and [`collect_values_into`] the values
//! alone).
//!
//! The SSSP, BFS, PageRank and connected-components kernels of this crate are built on these
//! steps; a kernel of your own is too (`docs/writing-kernels.md`, `examples/pagerank.rs`).
//!
//! **Handles for fibers on any rank.** A fiber started with [`skein::spawn_on`] takes only a
//! `Plain` argument, so it cannot be handed a [`Trust`]. [`connect`] files each partition's
//! own handle on its trustee's rank under the kernel's id (a `u64`, from
//! [`crate::registry::new_search`]); a driver fiber finds its partition with [`me`] (and
//! every partition holds all handles, [`Part::set_peers`], to send to the others).
//!
//! ```
//! use std::sync::Arc;
//! use skein_algorithms::{graph::GraphView, parts, Engine, EngineOptions};
//!
//! /// A partition that counts its vertices' arcs.
//! #[derive(Debug)]
//! struct Count { part: usize, view: Arc<GraphView>, arcs: u64 }
//!
//! impl parts::Part for Count {
//!     type Value = u64;
//!     fn write(&self, _: usize, _: &mut [u64], _: &mut [u64]) {}
//! }
//!
//! let g = skein_generators::Csr::from_edge_list(&skein_generators::EdgeList {
//!     num_vertices: 4, src: vec![0, 1, 2], dst: vec![1, 2, 3], weights: None,
//! });
//! let engine = Engine::new(Arc::new(g), EngineOptions::default()).unwrap();
//! let graph = engine.graph_id();
//! let total = engine.run(move || {
//!     let all = parts::entrust(graph, |view, part| Count { part, view, arcs: 0 });
//!     let id = parts::connect(&all);
//!     // One superstep: every partition counts its arcs, 2 vertices at a time.
//!     let counts = parts::superstep(id, |id| {
//!         let me = parts::me::<Count>(id);
//!         let n = me.apply((), |s, ()| s.view.parts.len(s.part)) as usize;
//!         parts::chunks(&me, n, 2, (), |s, (), range| {
//!             let arcs = s.view.out_arcs(s.part);
//!             s.arcs += range.map(|l| arcs.degree(l)).sum::<u64>();
//!         });
//!         skein::wait_quiescent();
//!         me.apply((), |s, ()| s.arcs)
//!     });
//!     parts::disconnect(id, &all);
//!     counts.iter().sum::<u64>()
//! }).unwrap();
//! assert_eq!(total, 6); // 3 edges, both directions
//!
//! // The same with a `Kernel` (entrust, connect, a sweep, a reduction, finish):
//! let total = engine.run(move || {
//!     let k = parts::Kernel::start(graph, |view, part| Count { part, view, arcs: 0 });
//!     k.sweep(2, (), |s: &mut Count, (), range, _peers| {
//!         let arcs = s.view.out_arcs(s.part);
//!         s.arcs += range.map(|l| arcs.degree(l)).sum::<u64>();
//!     });
//!     let counts = k.each((), |s: &mut Count, ()| s.arcs);
//!     k.finish();
//!     counts.iter().sum::<u64>()
//! }).unwrap();
//! assert_eq!(total, 6);
//! ```

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use skein::Trust;

use crate::graph::GraphView;
use crate::output;
use crate::partition::Partitioning;
use crate::registry;

pub use crate::output::Filled as Gathered;

/// A search's counters without the runtime's (the engine's `SearchStats` adds them): what a
/// search returns from `main` to every rank (as bytes).
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub(crate) struct KernelStats {
    pub(crate) seconds: f64,
    pub(crate) rounds: u64,
    pub(crate) messages: u64,
    pub(crate) arcs: u64,
}

/// How a kernel's work spread over its partitions, round by round: with the work (arcs)
/// each partition did in each round, a round takes about as long as its busiest partition,
/// so `arcs / (partitions × busiest_arcs)` bounds the parallel efficiency the rounds allow
/// (1: perfectly even; `1 / partitions`: one partition did everything). Counts, not time:
/// the same on any machine for the same work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct RoundSpread {
    /// Partitions (the mean of a round is its arcs over these).
    pub partitions: u64,
    /// Rounds that did any work (the others count in none of the sums).
    pub rounds: u64,
    /// Σ over rounds of the busiest partition's arcs: the rounds' critical path.
    pub busiest_arcs: u64,
    /// Σ over rounds of the busiest partition's arcs over the mean partition's.
    pub max_over_mean: f64,
}

impl RoundSpread {
    /// Adds a round in which partition `i` did `arcs[i]` arcs of work.
    pub fn add_round(&mut self, arcs: &[u64]) {
        self.partitions = arcs.len() as u64;
        let (max, sum) = (arcs.iter().copied().max().unwrap_or(0), arcs.iter().sum::<u64>());
        if sum > 0 {
            self.rounds += 1;
            self.busiest_arcs += max;
            self.max_over_mean += max as f64 * arcs.len() as f64 / sum as f64;
        }
    }

    /// Adds another search's spread (same partitions).
    pub fn accumulate(&mut self, other: &RoundSpread) {
        self.partitions = self.partitions.max(other.partitions);
        self.rounds += other.rounds;
        self.busiest_arcs += other.busiest_arcs;
        self.max_over_mean += other.max_over_mean;
    }

    /// The mean over rounds of the busiest partition's arcs over the mean partition's
    /// (1 with one partition or no work; at most `partitions`).
    pub fn mean_max_over_mean(&self) -> f64 {
        if self.rounds == 0 {
            1.0
        } else {
            self.max_over_mean / self.rounds as f64
        }
    }

    /// `busiest_arcs × partitions / arcs`, for the total `arcs` of the same rounds: how
    /// many times the even split's time the rounds take at one arc per unit (1: even).
    pub fn critical_over_even(&self, arcs: u64) -> f64 {
        if arcs == 0 {
            1.0
        } else {
            (self.busiest_arcs * self.partitions) as f64 / arcs as f64
        }
    }
}

/// A kernel's partition state, as the generic steps of a kernel see it.
pub trait Part: Send + Sized + 'static {
    /// The per-vertex result (distance, level, rank, label).
    type Value: Copy + Default + Send + Serialize + DeserializeOwned + 'static;
    /// The partition's index: its trustee's global worker id (the default, which is right
    /// when [`connect`] calls it, on the trustee, for a partition built by [`entrust`]).
    fn index(&self) -> usize {
        skein::current_worker()
    }
    /// Gives the partition every partition's handle (empty: drops them); see [`connect`].
    /// By default it keeps none: [`Kernel::sweep`] hands its steps the handles, and [`peers`]
    /// finds them on the trustee.
    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        drop(peers);
    }
    /// Writes the values and parents (global ids) of local vertices `from..from + len`
    /// (`len` is `values.len()`; a kernel without parents leaves `parents` as it is: zeros,
    /// or empty when the values are gathered alone, [`gather_values_into`]).
    fn write(&self, from: usize, values: &mut [Self::Value], parents: &mut [u64]);
    /// `(requests sent, arcs relaxed or scanned)` of the kernel (default: none counted).
    fn counters(&self) -> (u64, u64) {
        (0, 0)
    }
    /// Clears the arrays an earlier search left, when the partition reuses them
    /// ([`reset`]; default: nothing to clear).
    fn reset(&mut self) {}
}

/// Entrusts one partition to every worker of every rank (call it from the main fiber of a
/// run, e.g. [`crate::Engine::run`]): `make(view, part)` builds partition `part` on its
/// trustee, with `view` that rank's copy of graph `graph` ([`crate::Engine::graph_id`]).
/// `make` captures nothing (it runs on the trustee's rank). Returns the handles, by
/// partition.
pub fn entrust<P, F>(graph: u64, make: F) -> Vec<Trust<P>>
where
    P: Send + 'static,
    F: Fn(Arc<GraphView>, usize) -> P + Copy + Send + 'static,
{
    entrust_with(graph, move |_, view, part| make(view, part))
}

/// [`entrust`] whose `make(graph, view, part)` also receives the graph's id (to file
/// per-rank data under it: [`crate::registry::shared`], [`crate::registry::keep_buffers`]).
pub fn entrust_with<P, F>(graph: u64, make: F) -> Vec<Trust<P>>
where
    P: Send + 'static,
    F: Fn(u64, Arc<GraphView>, usize) -> P + Copy + Send + 'static,
{
    (0..skein::num_workers())
        .map(|g| {
            skein::trustee(g).entrust_new((graph, g as u64), move |(id, g): (u64, u64)| {
                make(id, registry::graph(id), g as usize)
            })
        })
        .collect()
}

/// One superstep: runs `driver(arg)` in a fiber on every worker of every rank at once and
/// returns their results, by worker. A driver finds its partition with [`me`], works on it
/// (in [`chunks`], so that its worker serves requests in between), and usually ends with
/// [`skein::wait_quiescent`]: when that returns, everything any partition sent in the round
/// has been applied everywhere, and the driver can read its partition's state for the next
/// round. `driver` captures nothing (it may run on another rank).
pub fn superstep<A, R, D>(arg: A, driver: D) -> Vec<R>
where
    A: skein::Plain,
    R: skein::Plain,
    D: FnOnce(A) -> R + Copy + Send + 'static,
{
    let fibers: Vec<_> =
        (0..skein::num_workers()).map(|g| skein::spawn_on(g, arg, driver)).collect();
    fibers.into_iter().map(|f| f.join()).collect()
}

/// In a driver fiber on the trustee of `me`: runs `step(state, arg, range)` over the local
/// vertices `0..len` in ranges of `chunk`, yielding to the worker loop between them (which
/// serves incoming requests and sends the batched outgoing ones). Each step is one inline
/// delegated call (`me` is local), so it may send requests (`apply_then`, an
/// [`crate::outbox::Outbox`]) but not block.
pub fn chunks<P, A, S>(me: &Trust<P>, len: usize, chunk: usize, arg: A, step: S)
where
    P: Send + 'static,
    A: skein::Plain,
    S: Fn(&mut P, A, std::ops::Range<u32>) + Copy + Send + 'static,
{
    chunks_sum(me, len, chunk, arg, move |s, arg, r| {
        step(s, arg, r);
        0u8
    });
}

/// [`chunks`] whose steps return a value: their sum.
pub fn chunks_sum<P, A, R, S>(me: &Trust<P>, len: usize, chunk: usize, arg: A, step: S) -> R
where
    P: Send + 'static,
    A: skein::Plain,
    R: skein::Plain + Default + std::ops::Add<Output = R>,
    S: Fn(&mut P, A, std::ops::Range<u32>) -> R + Copy + Send + 'static,
{
    let chunk = chunk.max(1);
    let (mut from, mut sum) = (0, R::default());
    while from < len {
        let to = (from + chunk).min(len);
        sum =
            sum + me.apply((arg, from as u32, to as u32), move |s, (arg, a, b)| step(s, arg, a..b));
        from = to;
        if from < len {
            skein::yield_now();
        }
    }
    sum
}

/// In a driver fiber: calls `step(state, arg)` on the local partition `me` until it returns
/// false, yielding between calls (as [`chunks`], for work that is not a range of vertices:
/// a frontier, a queue).
pub fn until_done<P, A, S>(me: &Trust<P>, arg: A, step: S)
where
    P: Send + 'static,
    A: skein::Plain,
    S: Fn(&mut P, A) -> bool + Copy + Send + 'static,
{
    while me.apply(arg, move |s, arg| u8::from(step(s, arg))) != 0 {
        skein::yield_now();
    }
}

/// A kernel's partitions on every worker of every rank, connected ([`entrust`] and
/// [`connect`] in one), with the supersteps most kernels need; [`Kernel::finish`] gathers the
/// values and disconnects the partitions, which hold each other's handles (a `Kernel`
/// dropped without it disconnects them too). Made and used by the main fiber of a run
/// ([`crate::Engine::run`]).
#[derive(Debug)]
pub struct Kernel<P: Part> {
    graph: u64,
    id: u64,
    all: Vec<Trust<P>>,
    /// Disconnected already ([`Kernel::finish`]).
    done: bool,
}

/// A kernel dropped without [`Kernel::finish`] still breaks its partitions' cycle (not while
/// a panic unwinds: the runtime ends the run and frees what it holds).
impl<P: Part> Drop for Kernel<P> {
    fn drop(&mut self) {
        if !self.done && !std::thread::panicking() {
            disconnect(self.id, &self.all);
        }
    }
}

impl<P: Part> Kernel<P> {
    /// Builds partition `make(view, part)` on every worker of every rank and connects them.
    pub fn start<F>(graph: u64, make: F) -> Kernel<P>
    where
        F: Fn(Arc<GraphView>, usize) -> P + Copy + Send + 'static,
    {
        let all = entrust(graph, make);
        let id = connect(&all);
        Kernel { graph, id, all, done: false }
    }

    /// The kernel's id ([`me`]), for supersteps of your own ([`superstep`]).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Every partition's handle, by partition.
    pub fn handles(&self) -> &[Trust<P>] {
        &self.all
    }

    /// A superstep over every partition's vertices: `step(state, arg, range, peers)` on
    /// ranges of `chunk` local vertices ([`chunks`]), with `peers` every partition's handle
    /// (to send to), then quiescence (everything the steps sent has been applied when it
    /// returns).
    pub fn sweep<A, S>(&self, chunk: usize, arg: A, step: S)
    where
        A: skein::Plain,
        S: Fn(&mut P, A, std::ops::Range<u32>, &[Trust<P>]) + Copy + Send + 'static,
    {
        superstep((self.graph, self.id, chunk as u64, arg), move |(graph, id, chunk, arg)| {
            let len = registry::graph(graph).parts.len(skein::current_worker()) as usize;
            chunks(&me::<P>(id), len, chunk as usize, (id, arg), move |s, (id, arg), r| {
                step(s, arg, r, &peers::<P>(id))
            });
            skein::wait_quiescent();
        });
    }

    /// A superstep of one call per partition, `f(state, arg)`, all at once (no quiescence:
    /// for reading or updating the partitions' own state); the results by partition.
    pub fn each<A, R, F>(&self, arg: A, f: F) -> Vec<R>
    where
        A: skein::Plain,
        R: skein::Plain,
        F: Fn(&mut P, A) -> R + Copy + Send + 'static,
    {
        superstep((self.id, arg), move |(id, arg)| me::<P>(id).apply(arg, f))
    }

    /// Gathers every partition's values into one vector by global id ([`gather`]) and
    /// disconnects the partitions.
    pub fn finish(mut self) -> Vec<P::Value> {
        let values = gather(&self.all, &registry::graph(self.graph).parts).values;
        disconnect(self.id, &self.all);
        self.done = true;
        values
    }
}

/// Every partition's handle of kernel `id` ([`connect`]), on a trustee or in a fiber of a
/// worker that holds a partition of it.
pub fn peers<P: Send + 'static>(id: u64) -> Arc<Vec<Trust<P>>> {
    registry::peers::<P>(id, skein::current_worker())
}

/// The handle of this worker's partition of kernel `id` ([`connect`]), in a fiber on its
/// trustee (a driver of [`superstep`]).
///
/// # Panics
/// If no partition of type `P` is filed for this worker under `id`.
pub fn me<P: Send + 'static>(id: u64) -> Trust<P> {
    registry::part::<P>(id, skein::current_worker())
}

/// Has every partition of search `search` clear the arrays its previous search left
/// ([`Part::reset`]), all at once: a fiber on every worker of every rank, joined.
pub fn reset<P: Part>(search: u64) {
    let fibers: Vec<_> =
        (0..skein::num_workers()).map(|g| skein::spawn_on(g, search, reset_part::<P>)).collect();
    fibers.into_iter().for_each(|f| f.join());
}

/// A fiber on the trustee of its partition (argument the search): [`Part::reset`].
fn reset_part<P: Part>(search: u64) {
    let me = registry::part::<P>(search, skein::current_worker());
    me.apply((), |s, ()| s.reset());
}

/// Gives every partition the handles of all partitions and files each partition's own
/// handle on its trustee's rank ([`me`]) under a fresh id, returned; undo with
/// [`disconnect`] (the partitions hold each other's handles: a reference cycle, which
/// nothing but [`disconnect`] breaks, so a kernel that forgets it leaks every partition).
pub fn connect<P: Part>(parts: &[Trust<P>]) -> u64 {
    let id = registry::new_search();
    connect_as(id, parts);
    id
}

/// [`connect`] under the id `search` (from [`crate::registry::new_search`]).
pub fn connect_as<P: Part>(search: u64, parts: &[Trust<P>]) {
    for t in parts {
        t.apply_with((search, parts.to_vec()), |s: &mut P, (search, all): (u64, Vec<Trust<P>>)| {
            let me = s.index();
            let all = Arc::new(all);
            crate::registry::register_part(search, me, all[me].clone(), Arc::clone(&all));
            s.set_peers(all);
        });
    }
}

/// Undoes [`connect`]: the partitions hold handles of each other, a cycle that would keep
/// them alive.
pub fn disconnect<P: Part>(search: u64, parts: &[Trust<P>]) {
    for t in parts {
        t.apply(search, |s: &mut P, search| {
            crate::registry::unregister_part(search, s.index());
            s.set_peers(Arc::new(Vec::new()));
        });
    }
}

/// Where a search's result goes.
#[derive(Debug, Clone, Copy)]
pub enum Collect {
    /// To the main fiber, as vectors over every vertex ([`gather`]).
    Gather,
    /// Each rank's slice stays on its rank, filed under this key
    /// (`crate::registry::stash_slice`).
    Slices(u64),
}

/// Collects the result of search `search` on graph `graph` as `how` says, with the
/// partitions' counters summed over every rank (the vectors are empty for
/// [`Collect::Slices`]).
pub fn collect<P: Part>(
    graph: u64,
    search: u64,
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    how: Collect,
) -> output::Filled<P::Value> {
    collect_into(graph, search, parts, partitioning, how, (Vec::new(), Vec::new()))
}

/// [`collect`] that, for [`Collect::Gather`], writes into the vectors `reuse` (an earlier
/// result's, [`gather_into`]); they are dropped for [`Collect::Slices`].
pub fn collect_into<P: Part>(
    graph: u64,
    search: u64,
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    how: Collect,
    reuse: (Vec<P::Value>, Vec<u64>),
) -> output::Filled<P::Value> {
    match how {
        Collect::Gather => gather_into(parts, partitioning, reuse),
        Collect::Slices(key) => file_slices::<P>(graph, search, key, true),
    }
}

/// [`collect_into`] of the values only, for a kernel without parents: no parents vector
/// is made, gathered ([`gather_values_into`], into `values` when it fits) or filed (each
/// rank's slice has empty parents).
pub fn collect_values_into<P: Part>(
    graph: u64,
    search: u64,
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    how: Collect,
    values: Vec<P::Value>,
) -> output::Filled<P::Value> {
    match how {
        Collect::Gather => gather_values_into(parts, partitioning, values),
        Collect::Slices(key) => file_slices::<P>(graph, search, key, false),
    }
}

/// [`Collect::Slices`]: a [`file_slice`] fiber on the first worker of every rank, the
/// partitions' counters summed.
fn file_slices<P: Part>(
    graph: u64,
    search: u64,
    key: u64,
    with_parents: bool,
) -> output::Filled<P::Value> {
    let lw = skein::local_workers();
    let arg = (graph, search, key, u64::from(with_parents));
    let fibers: Vec<_> =
        (0..skein::ranks()).map(|r| skein::spawn_on(r * lw, arg, file_slice::<P>)).collect();
    let (mut messages, mut arcs) = (0, 0);
    for f in fibers {
        let (m, a) = f.join();
        messages += m;
        arcs += a;
    }
    output::Filled { values: Vec::new(), parents: Vec::new(), messages, arcs }
}

/// A fiber on the first worker of a rank (argument `(graph, search, key, with_parents)`):
/// writes the values, and the parents when `with_parents` is 1, of the rank's partitions
/// into one slice over the rank's vertices (each partition its range, in parallel:
/// [`output::fill`]), files it under `key` in this process (`crate::registry::stash_slice`;
/// empty parents without them) and returns the partitions' counters.
fn file_slice<P: Part>((graph, search, key, with_parents): (u64, u64, u64, u64)) -> (u64, u64) {
    let view = registry::graph(graph);
    let (lw, r) = (skein::local_workers(), skein::rank());
    let first = view.parts.range(r * lw).start;
    let end = view.parts.range((r + 1) * lw - 1).end;
    let local: Vec<_> = (r * lw..(r + 1) * lw)
        .map(|g| {
            let rg = view.parts.range(g);
            (registry::part::<P>(search, g), (rg.start - first) as usize..(rg.end - first) as usize)
        })
        .collect();
    let write: output::Writer<P, P::Value> = |s, v, pa| {
        s.write(0, v, pa);
        s.counters()
    };
    let n = (end - first) as usize;
    let out = if with_parents == 1 {
        output::fill(&local, n, write)
    } else {
        output::fill_values_into(&local, n, Vec::new(), write)
    };
    registry::stash_slice(key, r, (out.values, out.parents));
    (out.messages, out.arcs)
}

/// Vertices one gathering request carries from a partition on another rank.
const GATHER_CHUNK: usize = 1 << 16;

/// Every partition's values and parents as vectors indexed by global id, with the
/// partitions' counters summed. The partitions of this rank write their ranges in
/// parallel, in place (`output::fill`); those of other ranks send theirs in chunks of
/// `GATHER_CHUNK` vertices (`apply_with`).
pub fn gather<P: Part>(
    parts: &[Trust<P>],
    partitioning: &Partitioning,
) -> output::Filled<P::Value> {
    gather_into(parts, partitioning, (Vec::new(), Vec::new()))
}

/// [`gather`] into the vectors `reuse` (e.g. the previous search's result): when both have
/// one entry per vertex they are overwritten in place, so that repeated searches fault no
/// fresh pages; otherwise new vectors are made.
pub fn gather_into<P: Part>(
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    reuse: (Vec<P::Value>, Vec<u64>),
) -> output::Filled<P::Value> {
    gather_parts(parts, partitioning, reuse, true)
}

/// [`gather_into`] of the values only, for a kernel without parents: no parents vector is
/// made (the result's `parents` is empty; [`Part::write`] gets an empty `parents`), and
/// `values` is overwritten in place when it has one entry per vertex (e.g. the previous
/// run's result), so that repeated runs neither zero nor fault fresh pages.
pub fn gather_values_into<P: Part>(
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    values: Vec<P::Value>,
) -> output::Filled<P::Value> {
    gather_parts(parts, partitioning, (values, Vec::new()), false)
}

/// [`gather_into`], with the parents when `with_parents`.
fn gather_parts<P: Part>(
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    reuse: (Vec<P::Value>, Vec<u64>),
    with_parents: bool,
) -> output::Filled<P::Value> {
    let range = |p: usize| {
        let r = partitioning.range(p);
        r.start as usize..r.end as usize
    };
    let local: Vec<_> = (0..parts.len())
        .filter(|&p| parts[p].is_local())
        .map(|p| (parts[p].clone(), range(p)))
        .collect();
    let n = partitioning.num_vertices() as usize;
    let write: output::Writer<P, P::Value> = |s, v, pa| {
        s.write(0, v, pa);
        s.counters()
    };
    let mut out = if with_parents {
        output::fill_into(&local, n, reuse, write)
    } else {
        output::fill_values_into(&local, n, reuse.0, write)
    };
    for (p, t) in parts.iter().enumerate().filter(|(_, t)| !t.is_local()) {
        let r = range(p);
        let mut from = 0;
        while from < r.len() {
            let len = GATHER_CHUNK.min(r.len() - from);
            let (v, pa) = t.apply_with(
                (from, len, with_parents),
                |s: &mut P, (from, len, with_parents): (usize, usize, bool)| {
                    let mut v = vec![P::Value::default(); len];
                    let mut pa = vec![0u64; if with_parents { len } else { 0 }];
                    s.write(from, &mut v, &mut pa);
                    (v, pa)
                },
            );
            let at = r.start + from;
            out.values[at..at + len].copy_from_slice(&v);
            if with_parents {
                out.parents[at..at + len].copy_from_slice(&pa);
            }
            from += len;
        }
        let (m, a) = t.apply((), |s: &mut P, ()| s.counters());
        out.messages += m;
        out.arcs += a;
    }
    out
}
