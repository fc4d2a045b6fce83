//! The property-free path: the reference count of a property's handles, and everything that
//! happens from the drop of the last handle to the free on the trustee. The argument that a
//! property is freed exactly once, on its trustee, after every request to it, is here too.
//!
//! # The path
//!
//! 1. [`clone_ref`] and [`drop_ref`] (called by `Trust::clone` and `Trust::drop`) keep one
//!    atomic count per property, in its header ([`crate::property::PropHead`]). Nothing on the
//!    request path touches it.
//! 2. The handle whose drop takes the count to zero calls [`release_last`], which hands the
//!    free to the property's trustee: directly when it runs on the trustee, as a posted request
//!    when it runs on another worker of the run, through the run's [`ForeignFrees`] when it
//!    runs on a thread that is not a worker of the run.
//! 3. The trustee queues the free in its [`PendingFrees`] with a snapshot of how many requests
//!    every client has issued to it so far ([`snapshot_issued`]), and frees the property once it
//!    has served that many from every client ([`PendingFrees::process`], in the worker loop).
//! 4. Frees handed over by foreign threads are taken by their trustee's loop ([`take_foreign`],
//!    when idle and at shutdown); those that arrive after the workers stopped are freed by
//!    [`Runtime::run`](crate::Runtime::run) ([`free_leftovers`]), and a foreign drop after that
//!    frees in place.
//!
//! # Why the count is right
//!
//! Clone increments the count (Relaxed) *before* the new handle exists, drop decrements it
//! (Release) after the handle's last use, and the thread that takes it to zero executes an
//! Acquire fence before it goes on: it is the only one that frees, and every other handle's
//! last use and its decrement happen before its free (the decrements form one release
//! sequence, which the fence synchronizes with). So the count is never zero while a handle
//! exists, in every interleaving: clone on worker A, move the clone to B, drop the original on
//! A, drop the clone on B — whichever drop comes second sees the other's decrement and is the
//! one that frees. (A scheme that announced clones and drops as messages on different channels
//! would let a drop overtake the clone's announcement; a single count updated synchronously
//! cannot be overtaken.)
//!
//! # Why the free waits, and for what
//!
//! Reaching zero does not free at once: a request issued through some handle before it was
//! dropped may still be queued or in flight on another channel (A queues `apply_then`, then
//! moves its handle to B, which drops it last; B's free must not overtake A's request). So the
//! trustee snapshots, for every client `c`, how many requests `c` has queued for it so far
//! (`issued[c][trustee]`, a single-writer counter that `c` bumps with a Release store when it
//! queues a request). Every request that names the property was queued before its handle's
//! drop, which happens before the final decrement, which happens before the snapshot (the
//! fence above, then the post to the trustee, whose slot hand-over is Release/Acquire) — so the
//! snapshot covers it. The trustee serves each client's requests in order and frees the
//! property once it has served `issued[c][trustee]` requests from every `c`. Frees always run
//! in the worker loop, never inside a delegated closure, so a closure that drops the last
//! handle of its own property is fine. Properties are thus dropped exactly once, on their
//! trustee's worker.
//!
//! # Frees from foreign threads
//!
//! A handle dropped last on a thread that is not a worker of its run finds the run's state
//! ([`find_run`]) and calls [`ForeignFrees::hand_off`]: under the hand-off's mutex, if the run
//! still runs, the free joins the list (and a flag tells the trustees to look), else it is
//! given back and the thread frees in place. The check and the push are one critical section,
//! and [`ForeignFrees::close`] (after the workers stopped) flips `running` and empties the list
//! in one critical section too, so every free handed over is taken exactly once: by its
//! trustee ([`ForeignFrees::take_for`]), by [`free_leftovers`], or back by the foreign thread.
//! The mutex orders the foreign thread's last use of the property before the free.
//!
//! # Model checking
//!
//! The `loom_*` tests at the bottom run the real [`clone_ref`], [`drop_ref`],
//! [`snapshot_issued`] and [`ForeignFrees`] under loom (their atomics and mutex come from
//! [`crate::sync::proto`]); the threads around them are small models of their callers:
//!
//! * `loom_refcount_*`: a handle is cloned, the clone moved to another thread, each holder
//!   issues a request (the `issued` bump of `Worker::request`) and drops its handle; the last
//!   dropper snapshots the counters (as the trustee does in [`PendingFrees::schedule`]) and
//!   frees. Loom checks that exactly one drop frees, that the free comes after every holder's
//!   use of the property, and that the snapshot covers both requests. The broken variant
//!   decrements with Relaxed and no fence, and loom finds the race.
//! * `loom_foreign_*`: a foreign thread hands a free over while the trustee's loop takes its
//!   frees (as in the worker loop, then once more at shutdown) and the run closes the hand-off
//!   (as `Runtime::run` after joining the workers). Loom checks that the property is freed
//!   exactly once, after the foreign thread's use. The broken variant checks `running` and
//!   pushes in two critical sections; loom finds the interleaving that loses the free.
//!
//! What the models leave out: the post from a non-trustee worker to the trustee (an ordinary
//! request; its Release/Acquire hand-over is the slot protocol's, checked in
//! [`crate::channel::slot`]) and the choice between the three ways of step 2, which reads the
//! thread-local worker context.

use super::context;
use super::run_state::{RunState, WorkerCounters};
use super::worker::Worker;
use crate::property::{free_prop, PropHead, PropPtr};
use crate::sync::proto::{fence, AtomicBool, Mutex};
use crate::sync::{Arc, Ordering};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Weak;

// ----- the count ---------------------------------------------------------------------------

/// Counts a new handle of the property with header `head` (before the handle exists).
#[inline]
pub(crate) fn clone_ref(head: &PropHead) {
    let old = head.refs.fetch_add(1, Ordering::Relaxed);
    if old > isize::MAX as usize {
        // As `Arc`: so many handles can only come from leaked clones; wrapping would free a
        // property that handles still name.
        std::process::abort();
    }
}

/// Uncounts a handle after its last use; true when it was the last one, and the caller must
/// then pass the property to [`release_last`].
#[inline]
pub(crate) fn drop_ref(head: &PropHead) -> bool {
    drop_ref_ordered(head, Ordering::Release, true)
}

/// [`drop_ref`] with a chosen decrement ordering and optional Acquire fence: only
/// `(Release, true)` is correct; the loom tests pass `(Relaxed, false)` to show that the model
/// catches the race.
#[inline(always)]
fn drop_ref_ordered(head: &PropHead, order: Ordering, acquire_fence: bool) -> bool {
    if head.refs.fetch_sub(1, order) != 1 {
        return false;
    }
    if acquire_fence {
        fence(Ordering::Acquire);
    }
    true
}

// ----- handing the free to the trustee ---------------------------------------------------

/// Frees the property `p` of run `run`, whose last handle is gone, once that is safe: hands it
/// to its trustee (module docs, step 2), or frees it in place when its run is over.
pub(crate) fn release_last(p: PropPtr, run: u32) {
    let trustee = p.trustee();
    if let Some(w) = context::current().filter(|w| w.run_id == run) {
        if w.index == trustee {
            w.frees.schedule(p, &w.run_state, trustee);
        } else {
            w.post(trustee, move || {
                let w = context::expect("free");
                w.frees.schedule(p, &w.run_state, w.index);
            });
        }
        return;
    }
    // A thread that is not a worker of the property's run: hand the free to the trustee if the
    // run is still going.
    let p = match find_run(run) {
        Some(run_state) => match run_state.foreign_frees.hand_off(trustee, p) {
            None => {
                // The trustee may be parked: it takes the free in its next pass.
                run_state.sleepers.wake(trustee);
                return;
            }
            Some(p) => p,
        },
        None => p,
    };
    // SAFETY: the count is zero and the run is over (its workers stopped, or its state is
    // gone): no request can reach the property any more.
    unsafe { free_prop(p) };
}

/// The last handle of a proxy (`crate::runtime::proxy`) on this rank is gone: the proxy's
/// weight goes back to its owner in a `Release` control record, with the snapshot of the
/// requests this rank's workers had issued to the owner (`docs/rack-mode.md` §5.2 item 4; the
/// argument is in [`super::export`]), and the proxy is freed. The snapshot is taken here,
/// after `drop_ref`'s Acquire fence (the proxy's count is this module's count, with its proof
/// unchanged within the rank), so it covers every request issued through any handle of the
/// proxy. The record is sent from the proxy's own rank: from this worker, or, when the last
/// drop happens on a worker of another fake rank of a loopback run (a handle shared through
/// memory), from the first worker of the proxy's rank, to which the release is posted (the
/// snapshot is this rank-independent read of that rank's counters).
///
/// A drop after the proxy's run ended, or on a thread that is not a worker of it, only frees
/// the proxy: after the run the owner's `end_of_run` has dropped the export already; during
/// it the weight leaks, so the property is freed at the end of the run (never early).
///
/// # Safety
/// `p` is a proxy made by `Proxy::receive_on`, whose last count `drop_ref` has just given
/// up to the caller; nothing uses `p` afterwards.
#[cold]
#[inline(never)]
pub(crate) unsafe fn proxy_dropped(p: std::ptr::NonNull<crate::runtime::proxy::Proxy>) {
    use crate::runtime::proxy::Proxy;
    use crate::wire::envelope::{release_body, CONTROL_RELEASE};
    // SAFETY: caller promise: the memory is still the proxy's (freed below, once).
    let (home, run) = unsafe { (p.as_ref().home(), p.as_ref().run()) };
    let w = context::current().filter(|w| w.run_id == run && w.remote.is_some());
    let Some((w, lo)) = w.and_then(|w| {
        let lo = home.checked_mul(w.local_n)?;
        (lo + w.local_n <= w.run_state.counters.len()).then_some((w, lo))
    }) else {
        // SAFETY: caller promise.
        return unsafe { Proxy::forget(p) };
    };
    let counters = &w.run_state.counters[lo..lo + w.local_n];
    // SAFETY: caller promise.
    let rel = unsafe { Proxy::last_dropped(p, counters) };
    let target = super::export::wire_target(rel.slot, rel.gen);
    let body = release_body(rel.weight, &rel.issued);
    let owner = rel.owner;
    if w.rank == home {
        w.send_control::<CONTROL_RELEASE>(owner, target, body);
    } else {
        w.post(lo, move || {
            context::expect("drop").send_control::<CONTROL_RELEASE>(owner, target, body)
        });
    }
}

/// Weight that a handle received on the owner's rank gives back to its export slot
/// (`export::ExportTable::receive_on_owner`; no snapshot: the sender's requests are covered
/// by its own proxy's `Release`): posted to the trustee, whose `Owner` applies it. A refused
/// return (a corrupt message) is the run's error.
pub(crate) fn return_weight(w: &Worker, trustee: usize, slot: u32, gen: u32, weight: u64) {
    w.post(trustee, move || {
        let w = context::expect("return_weight");
        let r = match &w.owner {
            Some(o) => o
                .borrow_mut()
                .apply_return(slot, gen, weight)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            None => Err("no export table on this worker".into()),
        };
        if let Err(e) = r {
            w.run_state.record_error(format!("skein: a handle's weight return refused: {e}"));
        }
    });
}

/// How many requests each client has issued to `trustee` so far: the targets a free must wait
/// for (module docs). Acquire: pairs with the clients' Release bumps.
pub(crate) fn snapshot_issued(counters: &[WorkerCounters], trustee: usize) -> Box<[u64]> {
    counters.iter().map(|c| c.issued[trustee].load(Ordering::Acquire)).collect()
}

// ----- on the trustee ----------------------------------------------------------------------

/// A property whose last handle is gone, waiting until every request issued before that
/// moment has been served (`targets[c]` requests from client `c`).
#[derive(Debug)]
struct PendingFree {
    prop: PropPtr,
    targets: Box<[u64]>,
}

/// A trustee's frees that wait for requests to be served, in scheduling order (owned by its
/// worker thread).
#[derive(Debug, Default)]
pub(crate) struct PendingFrees {
    queue: RefCell<VecDeque<PendingFree>>,
}

impl PendingFrees {
    /// Queues the free of `prop`, entrusted to `trustee` (the calling worker), behind every
    /// request issued to it so far.
    pub(crate) fn schedule(&self, prop: PropPtr, run_state: &RunState, trustee: usize) {
        debug_assert_eq!(prop.trustee(), trustee);
        let targets = snapshot_issued(&run_state.counters, trustee);
        self.queue.borrow_mut().push_back(PendingFree { prop, targets });
    }

    /// True when no free waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.borrow().is_empty()
    }

    /// Frees, on worker `w` (their trustee), the properties whose requests have all been
    /// served; true when it freed one. A panic in a value's drop is recorded as the run's error.
    /// (Called on every pass of the worker loop: the common case, nothing pending, is inlined.)
    #[inline]
    pub(crate) fn process(&self, w: &Worker) -> bool {
        if self.queue.borrow().is_empty() {
            return false;
        }
        self.process_pending(w)
    }

    #[inline(never)]
    fn process_pending(&self, w: &Worker) -> bool {
        // Readiness is monotone in queue order: `schedule` snapshots the `issued` counters,
        // which only grow, so a later entry's targets are componentwise >= an earlier one's.
        // Hence the ready entries form a prefix, and a pass costs O(ready + 1) instead of a
        // scan of every pending free (which made dropping many trusts quadratic).
        let mut ready = Vec::new();
        {
            let mut pending = self.queue.borrow_mut();
            while let Some(pf) = pending.front() {
                let met = pf
                    .targets
                    .iter()
                    .enumerate()
                    .all(|(client, &target)| w.served_from(client) >= target);
                if !met {
                    break;
                }
                ready.push(pending.pop_front().expect("front exists").prop);
            }
        }
        let useful = !ready.is_empty();
        for p in ready {
            // SAFETY: the property's count reached zero and every request issued before that
            // has been served (targets met), so nothing can reach it any more; we are its
            // trustee's worker (`schedule` is only called there).
            let r = w.delegated(|| catch_unwind(AssertUnwindSafe(|| unsafe { free_prop(p) })));
            if let Err(e) = r {
                w.record_panic(e, "drop of a property");
            }
        }
        useful
    }
}

/// Moves the frees that foreign threads handed to worker `w`'s trustee role into its pending
/// frees (cheap when there are none: one load); true when it took some.
pub(crate) fn take_foreign(w: &Worker) -> bool {
    let taken = w.run_state.foreign_frees.take_for(w.index);
    let took = !taken.is_empty();
    for p in taken {
        w.frees.schedule(p, &w.run_state, w.index);
    }
    took
}

/// Frees what foreign threads handed over after the workers of `run_state`'s run stopped, and
/// makes later foreign drops free in place. Called by `Runtime::run` once every worker thread
/// has been joined.
pub(crate) fn free_leftovers(run_state: &RunState) {
    for p in run_state.foreign_frees.close() {
        // SAFETY: the workers are gone, so no request can reach the property, and its count
        // is zero.
        unsafe { free_prop(p) };
    }
}

// ----- frees from foreign threads ----------------------------------------------------------

/// The hand-off of frees from threads that are not workers of a run to its trustees (module
/// docs, "Frees from foreign threads"). Generic over what is freed so that the loom model can
/// hand over a stand-in; the runtime hands over [`PropPtr`]s.
pub(crate) struct ForeignFrees<P> {
    list: Mutex<ForeignList<P>>,
    /// Set when `list.frees` may be non-empty: the trustees' loops read it without the lock.
    pending: AtomicBool,
}

struct ForeignList<P> {
    /// False once the run's workers have stopped ([`ForeignFrees::close`]).
    running: bool,
    /// `(trustee, free)`.
    frees: Vec<(usize, P)>,
}

impl<P> std::fmt::Debug for ForeignFrees<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForeignFrees").finish_non_exhaustive()
    }
}

impl<P> ForeignFrees<P> {
    /// An open hand-off with nothing in it.
    pub(crate) fn new() -> ForeignFrees<P> {
        ForeignFrees {
            list: Mutex::new(ForeignList { running: true, frees: Vec::new() }),
            pending: AtomicBool::new(false),
        }
    }

    /// Hands the free `p` to trustee `trustee` if the run still runs (`None`); else gives it
    /// back, and the caller frees it in place.
    pub(crate) fn hand_off(&self, trustee: usize, p: P) -> Option<P> {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if !list.running {
            return Some(p);
        }
        list.frees.push((trustee, p));
        self.pending.store(true, Ordering::Release);
        None
    }

    /// The frees handed to `trustee` so far, now the caller's.
    pub(crate) fn take_for(&self, trustee: usize) -> Vec<P> {
        if !self.pending.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut list.frees).into_iter().partition(|(to, _)| *to == trustee);
        list.frees = rest;
        self.pending.store(!list.frees.is_empty(), Ordering::Release);
        mine.into_iter().map(|(_, p)| p).collect()
    }

    /// Closes the hand-off (the workers have stopped) and returns what is left in it; later
    /// [`ForeignFrees::hand_off`]s give their free back.
    pub(crate) fn close(&self) -> Vec<P> {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        list.running = false;
        std::mem::take(&mut list.frees).into_iter().map(|(_, p)| p).collect()
    }
}

/// The runs whose state is alive, by id: a handle dropped on a thread that is not a worker of
/// its run finds the run here (a property does not point to its run).
static LIVE_RUNS: crate::sync::Mutex<Vec<(u32, Weak<RunState>)>> =
    crate::sync::Mutex::new(Vec::new());

/// Makes run `run_state` findable by [`find_run`] (at its start).
pub(crate) fn register_run(run_state: &Arc<RunState>) {
    LIVE_RUNS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((run_state.run_id, Arc::downgrade(run_state)));
}

/// Forgets run `id` (when its state is dropped).
pub(crate) fn unregister_run(id: u32) {
    LIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(r, _)| *r != id);
}

/// The state of run `id`, if it is still alive.
pub(crate) fn find_run(id: u32) -> Option<Arc<RunState>> {
    let weak = {
        let runs = LIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
        runs.iter().find(|(r, _)| *r == id).map(|(_, w)| w.clone())
    };
    // Upgraded outside the lock: dropping the last `Arc` takes the lock again (`Drop`).
    weak.and_then(|w| w.upgrade())
}

/// Model checking with loom (module docs, "Model checking"): `RUSTFLAGS="--cfg fw_loom"
/// LOOM_MAX_PREEMPTIONS=3 cargo test -p skein --release --lib loom_`.
#[cfg(all(test, fw_loom))]
mod loom_tests;
