//! A kernel's partitions, the generic steps of a search over them: a partition state
//! ([`Part`]) on every worker of every rank, given each other's handles ([`connect`],
//! undone by [`disconnect`]), cleared between searches ([`reset`]), and its result
//! collected ([`collect`]: gathered to the main fiber, or left as one slice per rank).
//! The SSSP and BFS kernels implement [`Part`]; the engine (`crate::engine`) runs them.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use skein::Trust;

use crate::output;
use crate::partition::Partitioning;
use crate::registry;

/// A search's counters without the runtime's (the engine's `SearchStats` adds them): what a
/// search returns from `main` to every rank (as bytes).
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub(crate) struct KernelStats {
    pub(crate) seconds: f64,
    pub(crate) rounds: u64,
    pub(crate) messages: u64,
    pub(crate) arcs: u64,
}

/// A kernel's partition state, as the generic steps of a search see it.
pub(crate) trait Part: Send + Sized + 'static {
    /// The per-vertex result (distance, level).
    type Value: Copy + Default + Send + Serialize + DeserializeOwned + 'static;
    /// The partition's index (its trustee's global worker id).
    fn index(&self) -> usize;
    /// Gives the partition every partition's handle (empty: drops them).
    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>);
    /// Writes the values and parents (global ids) of local vertices `from..from + len`.
    fn write(&self, from: usize, values: &mut [Self::Value], parents: &mut [u64]);
    /// `(requests sent, arcs relaxed or scanned)` of the search.
    fn counters(&self) -> (u64, u64);
    /// Clears the arrays an earlier search left, when the partition reuses them
    /// ([`reset`]).
    fn reset(&mut self);
}

/// Has every partition of search `search` clear the arrays its previous search left
/// ([`Part::reset`]), all at once: a fiber on every worker of every rank, joined.
pub(crate) fn reset<P: Part>(search: u64) {
    let fibers: Vec<_> =
        (0..skein::num_workers()).map(|g| skein::spawn_on(g, search, reset_part::<P>)).collect();
    fibers.into_iter().for_each(|f| f.join());
}

/// A fiber on the trustee of its partition (argument the search): [`Part::reset`].
fn reset_part<P: Part>(search: u64) {
    let me = registry::part::<P>(search, skein::current_worker());
    me.apply((), |s, ()| s.reset());
}

/// Gives every partition the handles of all partitions (they travel in the message) and
/// files each partition's own handle on its trustee's rank for search `search`
/// (`crate::registry`), where its driver fibers find it.
pub(crate) fn connect<P: Part>(search: u64, parts: &[Trust<P>]) {
    for t in parts {
        t.apply_with((search, parts.to_vec()), |s: &mut P, (search, all): (u64, Vec<Trust<P>>)| {
            let me = s.index();
            crate::registry::register_part(search, me, all[me].clone());
            s.set_peers(Arc::new(all));
        });
    }
}

/// Undoes [`connect`]: the partitions hold handles of each other, a cycle that would keep
/// them alive.
pub(crate) fn disconnect<P: Part>(search: u64, parts: &[Trust<P>]) {
    for t in parts {
        t.apply(search, |s: &mut P, search| {
            crate::registry::unregister_part(search, s.index());
            s.set_peers(Arc::new(Vec::new()));
        });
    }
}

/// Where a search's result goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Collect {
    /// To the main fiber, as vectors over every vertex ([`gather`]).
    Gather,
    /// Each rank's slice stays on its rank, filed under this key
    /// (`crate::registry::stash_slice`).
    Slices(u64),
}

/// Collects the result of search `search` on graph `graph` as `how` says, with the
/// partitions' counters summed over every rank (the vectors are empty for
/// [`Collect::Slices`]).
pub(crate) fn collect<P: Part>(
    graph: u64,
    search: u64,
    parts: &[Trust<P>],
    partitioning: &Partitioning,
    how: Collect,
) -> output::Filled<P::Value> {
    match how {
        Collect::Gather => gather(parts, partitioning),
        Collect::Slices(key) => {
            let lw = skein::local_workers();
            let fibers: Vec<_> = (0..skein::ranks())
                .map(|r| skein::spawn_on(r * lw, (graph, search, key), file_slice::<P>))
                .collect();
            let (mut messages, mut arcs) = (0, 0);
            for f in fibers {
                let (m, a) = f.join();
                messages += m;
                arcs += a;
            }
            output::Filled { values: Vec::new(), parents: Vec::new(), messages, arcs }
        }
    }
}

/// A fiber on the first worker of a rank (argument `(graph, search, key)`): writes the
/// values and parents of the rank's partitions into one slice over the rank's vertices
/// (each partition its range, in parallel: [`output::fill`]), files it under `key` in
/// this process (`crate::registry::stash_slice`) and returns the partitions' counters.
fn file_slice<P: Part>((graph, search, key): (u64, u64, u64)) -> (u64, u64) {
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
    let out = output::fill(&local, (end - first) as usize, |s, v, pa| {
        s.write(0, v, pa);
        s.counters()
    });
    registry::stash_slice(key, r, (out.values, out.parents));
    (out.messages, out.arcs)
}

/// Vertices one gathering request carries from a partition on another rank.
const GATHER_CHUNK: usize = 1 << 16;

/// Every partition's values and parents as vectors indexed by global id, with the
/// partitions' counters summed. The partitions of this rank write their ranges in
/// parallel, in place ([`output::fill`]); those of other ranks send theirs in chunks of
/// [`GATHER_CHUNK`] vertices (`apply_with`).
pub(crate) fn gather<P: Part>(
    parts: &[Trust<P>],
    partitioning: &Partitioning,
) -> output::Filled<P::Value> {
    let range = |p: usize| {
        let r = partitioning.range(p);
        r.start as usize..r.end as usize
    };
    let local: Vec<_> = (0..parts.len())
        .filter(|&p| parts[p].is_local())
        .map(|p| (parts[p].clone(), range(p)))
        .collect();
    let mut out = output::fill(&local, partitioning.num_vertices() as usize, |s, v, pa| {
        s.write(0, v, pa);
        s.counters()
    });
    for (p, t) in parts.iter().enumerate().filter(|(_, t)| !t.is_local()) {
        let r = range(p);
        let mut from = 0;
        while from < r.len() {
            let len = GATHER_CHUNK.min(r.len() - from);
            let (v, pa) = t.apply_with((from, len), |s: &mut P, (from, len): (usize, usize)| {
                let mut v = vec![P::Value::default(); len];
                let mut pa = vec![0u64; len];
                s.write(from, &mut v, &mut pa);
                (v, pa)
            });
            let at = r.start + from;
            out.values[at..at + len].copy_from_slice(&v);
            out.parents[at..at + len].copy_from_slice(&pa);
            from += len;
        }
        let (m, a) = t.apply((), |s: &mut P, ()| s.counters());
        out.messages += m;
        out.arcs += a;
    }
    out
}
