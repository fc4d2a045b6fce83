//! Rank-local data the kernels reach by id, because a closure sent to a trustee captures
//! nothing (its data is its argument, which may cross ranks as bytes):
//!
//! - **graphs**: every [`crate::Engine`] registers its [`GraphView`] (the arcs of its
//!   rank's own partitions) under a `u64` id when it is built and removes it when dropped. A partition is built on its trustee from the
//!   id alone ([`graph`]), on whatever rank that trustee runs. Ids are a per-process
//!   counter, so they agree across ranks when every rank builds the same engines in the same
//!   order, as an SPMD program under `mpirun` does (the engine's docs require it).
//! - **partition handles**: during a search, each partition's own handle is filed under
//!   `(search id, worker)` on the rank of its trustee ([`register_part`]), so that a driver
//!   fiber started there by `spawn_on` (whose argument must be `Plain`) finds the partition
//!   it drives ([`part`]).
//!
//! - **results kept on rank 0** (`stash`, `take`): `main` runs on rank 0, in the
//!   process of rank 0's caller, so a search can leave its result vectors there and return
//!   only its counters from the run (which every rank receives as bytes).
//!
//! - **result slices** (`stash_slice`, `take_slices`): a search that leaves each rank's
//!   slice of its result on that rank (`Engine::sssp_local`) has a fiber on every rank file
//!   the rank's slice under a key that every rank's caller drew in the same order
//!   (`new_slices`); the caller takes the slices filed in its process (one, or every fake
//!   rank's in a loopback split).
//! - **kept buffers** ([`keep_buffers`], [`take_buffers`]): a partition's large arrays,
//!   left on its rank when a search ends, by graph, worker and type, so that the next
//!   search's partition of the same graph and worker reuses them instead of faulting fresh
//!   pages; and what a rank's partitions share ([`shared`]: BFS's frontier bitmaps).
//!   Dropped with the graph.
//! - **probes** (`file_probe`, `probe`): what each rank's caller found about its rows
//!   when it built an engine, read by a fiber on that rank during the engine's first run.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use skein::Trust;

use crate::graph::GraphView;

static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);
static GRAPHS: Mutex<Option<HashMap<u64, Arc<GraphView>>>> = Mutex::new(None);

static NEXT_SEARCH: AtomicU64 = AtomicU64::new(1);
type PartKey = (u64, usize);
static PARTS: Mutex<Option<HashMap<PartKey, Box<dyn Any + Send>>>> = Mutex::new(None);

/// Locks `m`, also after a panic elsewhere (the maps stay consistent: every update is one
/// insert or remove).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Files `view` on this rank and returns its id (the same on every rank that registers
/// its graphs in the same order).
#[cfg(test)]
pub(crate) fn register_graph(view: Arc<GraphView>) -> u64 {
    let id = new_graph_id();
    insert_graph(id, view);
    id
}

/// A fresh graph id (the same on every rank that draws its ids in the same order).
pub(crate) fn new_graph_id() -> u64 {
    NEXT_GRAPH.fetch_add(1, Ordering::Relaxed)
}

/// Files `view` on this rank under `id` (from [`new_graph_id`]).
pub(crate) fn insert_graph(id: u64, view: Arc<GraphView>) {
    lock(&GRAPHS).get_or_insert_with(HashMap::new).insert(id, view);
}

/// Removes graph `id` from this rank's registry, with the buffers kept for it.
pub(crate) fn unregister_graph(id: u64) {
    if let Some(m) = lock(&GRAPHS).as_mut() {
        m.remove(&id);
    }
    let dropped: Vec<_> = match lock(&BUFFERS).as_mut() {
        Some(m) => {
            let keys: Vec<_> = m.keys().filter(|k| k.0 == id).copied().collect();
            keys.into_iter().filter_map(|k| m.remove(&k)).collect()
        }
        None => Vec::new(),
    };
    drop(dropped); // outside the lock
}

type BufferKey = (u64, usize, TypeId);
static BUFFERS: Mutex<Option<HashMap<BufferKey, Box<dyn Any + Send>>>> = Mutex::new(None);

/// Keeps `value`, worker `g`'s buffers for graph `graph`, for [`take_buffers`]; dropped
/// instead when the graph is not registered on this rank (any more).
pub fn keep_buffers<T: Send + 'static>(graph: u64, g: usize, value: T) {
    let registered = lock(&GRAPHS).as_ref().is_some_and(|m| m.contains_key(&graph));
    if registered {
        let key = (graph, g, TypeId::of::<T>());
        let old = lock(&BUFFERS).get_or_insert_with(HashMap::new).insert(key, Box::new(value));
        drop(old); // outside the lock
    }
}

/// The `T` that the partitions of graph `graph` whose rank starts at worker `first` share
/// on this rank, made by `make` when none is filed yet (the first partition to ask files
/// it); dropped with the graph. When the graph is not registered on this rank (a test
/// that builds partitions by hand) every call makes its own, filed nowhere.
pub fn shared<T: Send + Sync + 'static>(
    graph: u64,
    first: usize,
    make: impl FnOnce() -> T,
) -> Arc<T> {
    let registered = lock(&GRAPHS).as_ref().is_some_and(|m| m.contains_key(&graph));
    if !registered {
        return Arc::new(make());
    }
    let key = (graph, first, TypeId::of::<Arc<T>>());
    let mut m = lock(&BUFFERS);
    let entry =
        m.get_or_insert_with(HashMap::new).entry(key).or_insert_with(|| Box::new(Arc::new(make())));
    Arc::clone(entry.downcast_ref::<Arc<T>>().expect("the key names the type"))
}

/// What [`keep_buffers`] kept for worker `g` of graph `graph`, if anything of type `T`.
pub fn take_buffers<T: Send + 'static>(graph: u64, g: usize) -> Option<T> {
    let key = (graph, g, TypeId::of::<T>());
    let b = lock(&BUFFERS).as_mut().and_then(|m| m.remove(&key))?;
    b.downcast::<T>().ok().map(|b| *b)
}

/// This rank's graph `id`.
///
/// # Panics
/// If this rank has not registered graph `id`: every rank must build the same engines, in
/// the same order.
pub fn graph(id: u64) -> Arc<GraphView> {
    let g = lock(&GRAPHS).as_ref().and_then(|m| m.get(&id).cloned());
    g.unwrap_or_else(|| {
        panic!(
            "graph {id} is not registered on rank {}: every rank must build the same \
             engines, in the same order",
            skein::rank()
        )
    })
}

/// A fresh search id (called on rank 0, where `main` runs).
pub fn new_search() -> u64 {
    NEXT_SEARCH.fetch_add(1, Ordering::Relaxed)
}

/// Files `handle`, the handle of worker `g`'s partition of search `search`, and `peers`, every
/// partition's handle, on this rank (called by the partition's trustee).
pub fn register_part<P: Send + 'static>(
    search: u64,
    g: usize,
    handle: Trust<P>,
    peers: Arc<Vec<Trust<P>>>,
) {
    lock(&PARTS).get_or_insert_with(HashMap::new).insert((search, g), Box::new((handle, peers)));
}

/// Drops the handles filed by [`register_part`] (called by the partition's trustee).
pub fn unregister_part(search: u64, g: usize) {
    let removed = lock(&PARTS).as_mut().and_then(|m| m.remove(&(search, g)));
    // Dropped outside the lock: a handle's drop may run runtime code.
    drop(removed);
}

type Filed<P> = (Trust<P>, Arc<Vec<Trust<P>>>);

/// What [`register_part`] filed for worker `g` of search `search` on this rank.
///
/// # Panics
/// If none of type `P` is filed (a driver started before the partitions were connected).
fn filed<P: Send + 'static, R>(search: u64, g: usize, f: impl FnOnce(&Filed<P>) -> R) -> R {
    let m = lock(&PARTS);
    let h = m.as_ref().and_then(|m| m.get(&(search, g))).and_then(|b| b.downcast_ref::<Filed<P>>());
    match h {
        Some(h) => f(h),
        None => panic!("search {search}: no partition of worker {g} filed on this rank"),
    }
}

/// The handle of worker `g`'s partition of search `search`, filed on this rank.
///
/// # Panics
/// If none of type `P` is filed (a driver started before the partitions were connected).
pub fn part<P: Send + 'static>(search: u64, g: usize) -> Trust<P> {
    filed::<P, _>(search, g, |(h, _)| h.clone())
}

/// Every partition's handle of search `search`, as filed for worker `g` on this rank.
///
/// # Panics
/// As [`part`].
pub fn peers<P: Send + 'static>(search: u64, g: usize) -> Arc<Vec<Trust<P>>> {
    filed::<P, _>(search, g, |(_, all)| Arc::clone(all))
}

/// Results left by `main` (on rank 0) for the caller of `Runtime::run` in the same
/// process, by key: what a search keeps on rank 0 instead of broadcasting it to every rank.
static STASH: Mutex<Option<HashMap<u64, Box<dyn Any + Send>>>> = Mutex::new(None);

/// Leaves `value` under `key` (from [`new_search`]) for [`take`].
pub(crate) fn stash<T: Send + 'static>(key: u64, value: T) {
    lock(&STASH).get_or_insert_with(HashMap::new).insert(key, Box::new(value));
}

/// What [`stash`] left under `key` in this process, if any (and if of type `T`).
pub(crate) fn take<T: Send + 'static>(key: u64) -> Option<T> {
    let b = lock(&STASH).as_mut().and_then(|m| m.remove(&key))?;
    b.downcast::<T>().ok().map(|b| *b)
}

static NEXT_SLICES: AtomicU64 = AtomicU64::new(1);
type Slices = Vec<(usize, Box<dyn Any + Send>)>;
static SLICES: Mutex<Option<HashMap<u64, Slices>>> = Mutex::new(None);

/// A fresh key for the result slices of one search: drawn by every rank's caller, in the
/// same order on every rank (the searches are collective).
pub(crate) fn new_slices() -> u64 {
    NEXT_SLICES.fetch_add(1, Ordering::Relaxed)
}

/// Files rank `rank`'s slice `value` under `key` in this process.
pub(crate) fn stash_slice<T: Send + 'static>(key: u64, rank: usize, value: T) {
    let mut m = lock(&SLICES);
    m.get_or_insert_with(HashMap::new).entry(key).or_default().push((rank, Box::new(value)));
}

/// The slices filed under `key` in this process (of type `T`), by rank ascending.
pub(crate) fn take_slices<T: Send + 'static>(key: u64) -> Vec<(usize, T)> {
    let taken = lock(&SLICES).as_mut().and_then(|m| m.remove(&key)).unwrap_or_default();
    let mut out: Vec<(usize, T)> =
        taken.into_iter().filter_map(|(r, b)| b.downcast::<T>().ok().map(|b| (r, *b))).collect();
    out.sort_by_key(|&(r, _)| r);
    out
}

static PROBES: Mutex<Option<HashMap<u64, [u64; 8]>>> = Mutex::new(None);

/// Files what this process's caller found about graph `id`'s rows (read by [`probe`]).
pub(crate) fn file_probe(id: u64, words: [u64; 8]) {
    lock(&PROBES).get_or_insert_with(HashMap::new).insert(id, words);
}

/// What [`file_probe`] filed for graph `id` in this process (zeros when nothing).
pub(crate) fn probe(id: u64) -> [u64; 8] {
    lock(&PROBES).as_ref().and_then(|m| m.get(&id).copied()).unwrap_or_default()
}

/// Drops the probe of graph `id`.
pub(crate) fn drop_probe(id: u64) {
    if let Some(m) = lock(&PROBES).as_mut() {
        m.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_graph_is_a_clear_panic() {
        let e = std::panic::catch_unwind(|| graph(u64::MAX)).expect_err("no such graph");
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("graph 18446744073709551615 is not registered"), "{msg}");
    }

    #[test]
    fn graphs_are_filed_until_removed() {
        let g = skein_generators::Csr::from_edge_list(&skein_generators::EdgeList {
            num_vertices: 3,
            src: vec![0, 1],
            dst: vec![1, 2],
            weights: Some(vec![1.0, 1.0]),
        });
        let view = Arc::new(GraphView::whole(Arc::new(g), 2).unwrap());
        let a = register_graph(Arc::clone(&view));
        let b = register_graph(Arc::clone(&view));
        assert_ne!(a, b);
        assert!(Arc::ptr_eq(&graph(a), &view));
        unregister_graph(a);
        assert!(std::panic::catch_unwind(|| graph(a)).is_err());
        assert!(Arc::ptr_eq(&graph(b), &view));
        unregister_graph(b);
    }
}
