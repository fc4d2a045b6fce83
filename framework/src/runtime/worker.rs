//! One worker: its fibers, its client queues, its trustee role, and the loop that interleaves
//! them.
//!
//! All state here is owned by the worker thread (`Cell`/`RefCell`, no atomics; the request
//! queues are plain `UnsafeCell`s behind one accessor, [`ClientSide::out`]) except the
//! single-writer counters in [`crate::runtime::run_state::WorkerCounters`] and the slots.
//! The frees waiting on this trustee are in [`super::free`], quiescence detection (which
//! worker 0's loop calls when idle) in [`super::quiesce`].
//! No borrow is ever held while user code runs: every piece of user code (fiber bodies,
//! delegated closures, continuations) is first moved out of the worker's structures (a request
//! queue whose requests run is taken out of its cell whole, [`ClientSide::take_out`]).

use super::anatomy::Clock;
use super::export::Owner;
use super::free::PendingFrees;
use super::idle;
use super::quiesce_ranks::{Action, Detector, Post, RankView};
use super::remote::Flush;
use super::run_state::{AllReduceBox, RunState, WorkerCounters};
use crate::channel::batch::{serve_batch, tag_count, untag_count};
use crate::channel::prefetch::prefetch;
use crate::channel::queue::RecordQueue;
pub(crate) use crate::channel::record::Outcome;
use crate::channel::record::{NoResult, ResultSize, HEADER_WORDS};
use crate::channel::slot::{PanicPayload, PIPELINE};
use crate::fiber::{self, Fiber, StackPool};
use crate::property::PropPtr;
use crate::sync::proto::{self, AtomicU64};
use crate::sync::{bump, Arc, Ordering};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;

mod dump;
pub(crate) mod looping;

/// Client-side state of one (this worker, trustee) pair; the trustee may be this worker.
#[derive(Default)]
pub(super) struct ClientSide {
    /// The requests towards the trustee: in flight (remote trustees only), then staged. Only
    /// [`ClientSide::out`] touches it.
    out: UnsafeCell<RecordQueue>,
    /// The number of requests in the batch in flight in each lane (the first ones in `out`,
    /// lane by lane in batch order), tagged by [`tag_count`] as the batch was.
    in_lane: [Cell<u32>; PIPELINE],
    /// An empty queue that keeps its buffer between batches.
    spare: RefCell<RecordQueue>,
    /// The last batch published.
    pub(super) sent: Cell<u64>,
    /// The last batch whose response has been consumed.
    pub(super) acked: Cell<u64>,
    /// Fibers suspended by [`Worker::throttle`] until the next batch to this trustee leaves
    /// (or, for the local trustee, until the local requests have run).
    pub(super) throttled: RefCell<Vec<u32>>,
}

impl ClientSide {
    /// Runs `f` on the request queue. `f` must not run user code or call `out` again: the
    /// queue is a plain cell on the issuing fast path (a `RefCell`'s flag would be one more
    /// load-and-store chain from one request to the next).
    #[inline(always)]
    pub(super) fn out<R>(&self, f: impl FnOnce(&mut RecordQueue) -> R) -> R {
        // SAFETY: a ClientSide belongs to one Worker, which only its own thread uses (it is not
        // Sync); every caller passes code that runs no user code and does not re-enter `out`
        // (the queue's methods run user code only in `complete_front` and `run_local`, which
        // are called on a queue taken out with `take_out`), so this `&mut` is the only
        // reference to the queue while `f` runs.
        f(unsafe { &mut *self.out.get() })
    }

    /// Takes the queue out (leaving the spare one in its place) so that user code can run its
    /// requests while new ones are queued.
    pub(super) fn take_out(&self) -> RecordQueue {
        let spare = std::mem::take(&mut *self.spare.borrow_mut());
        self.out(|q| std::mem::replace(q, spare))
    }

    /// Puts back a queue from [`ClientSide::take_out`], with what was queued meanwhile behind
    /// it; keeps the emptied buffer as the spare.
    pub(super) fn put_back(&self, q: RecordQueue) {
        let mut newer = self.out(|cur| {
            let mut newer = std::mem::replace(cur, q);
            cur.append(&mut newer);
            newer
        });
        std::mem::swap(&mut *self.spare.borrow_mut(), &mut newer);
    }
}

/// Trustee-side state of one (client, this worker) pair.
#[derive(Default)]
pub(super) struct TrusteeSide {
    /// The last batch served.
    pub(super) served_seq: Cell<u64>,
    /// Requests served (slots and transport alike: frees and `incoming_due` read it).
    pub(super) served: Cell<u64>,
}

/// A worker's thread-owned state.
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) n: usize,
    /// `run_state.run_id`, one load closer.
    pub(crate) run_id: u32,
    /// This worker's `issued` counters (`run_state.counters[index].issued`), one load closer.
    issued: Arc<[AtomicU64]>,
    pub(crate) run_state: Arc<RunState>,
    /// Workers per rank (W; `n` in a run of one rank).
    pub(crate) local_n: usize,
    /// This worker's rank (its fake rank in a loopback run).
    pub(crate) rank: usize,
    /// The first global id of this worker's rank.
    rank_lo: usize,
    /// The transport's per-worker state, in a split run (MPI or loopback).
    pub(super) remote: Option<Box<super::remote::RemoteSide>>,
    /// Quiescence detection across ranks, on the first worker of each rank of a split run
    /// (`super::quiesce_ranks`); one rank's worker 0 uses [`super::quiesce::detect`] instead.
    detector: Option<RefCell<Detector<AllReduceBox>>>,
    pub(super) clients: Box<[ClientSide]>,
    pub(super) trustees: Box<[TrusteeSide]>,
    /// Requests this worker has served for itself.
    local_served: Cell<u64>,
    /// Requests this worker queued for other trustees and has not completed (staged, in a
    /// slot or an envelope, or answered and not yet completed): while 0, a loop pass skips
    /// the client role, which has nothing to send and nothing to complete
    /// (`Worker::client_busy`).
    open_requests: Cell<u64>,
    ready: RefCell<VecDeque<u32>>,
    fibers: RefCell<Vec<Option<Fiber>>>,
    free_ids: RefCell<Vec<u32>>,
    pool: RefCell<StackPool>,
    current: Cell<Option<u32>>,
    delegated: Cell<u32>,
    /// The frees of this trustee's properties that wait for requests to be served.
    pub(super) frees: PendingFrees,
    /// This trustee's part of its export table in a split run (`docs/rack-mode.md` §5.2):
    /// lookups of remote targets, pending `Release`s, the end of the run.
    pub(super) owner: Option<RefCell<Owner<PropPtr>>>,
    quiesce_waiters: RefCell<Vec<u32>>,
    /// The job's lane totals and minima at the quiescence that last woke this worker's
    /// `wait_quiescent` callers (`wait_quiescent_totals` returns them).
    lane_totals: Cell<crate::QuiescentTotals>,
    /// This worker's detector (across ranks) woke waiters and has not posted its next round
    /// yet: it steps on every idle pass until it has, not every `DETECT_EVERY` (over MPI an
    /// idle pass may wait 50 µs; not over the rings, where it posts in its re-check pass).
    post_owed: Cell<bool>,
    /// Since when this worker's detector has held its next post back ([`Post::UnlessWasted`]);
    /// after [`HOLD_LIMIT`] its next step posts anyway.
    held_since: Cell<Option<std::time::Instant>>,
    next_spawn: Cell<usize>,
    /// The loop's phase timer (`super::anatomy`; off unless `Builder::anatomy`).
    pub(super) clock: Clock,
    /// What each fiber waits on, for stall dumps (`super::stall`).
    dump: dump::WorkerDump,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Worker {
    /// Worker `index` of the run, with the fiber stacks `stacks` its thread kept from an
    /// earlier run (`super::pool`) when they have the run's stack size, else fresh ones.
    pub(crate) fn new(
        index: usize,
        run_state: Arc<RunState>,
        stacks: Option<StackPool>,
    ) -> std::io::Result<Worker> {
        let n = run_state.n;
        let (anatomy, round_ends) = (run_state.cfg.anatomy, run_state.cfg.round_ends);
        let size = run_state.cfg.stack_size;
        let pool = match stacks {
            Some(kept) if kept.size() == size => kept,
            _ => StackPool::new(size, run_state.cfg.fibers_per_worker)?,
        };
        let local_n = run_state.local_n;
        // Global ids: `index = rank·W + w` (one rank: `rank` 0, `local_n` = n).
        let (rank, rank_lo) = (index / local_n, index / local_n * local_n);
        let owner = run_state.take_owner(index).map(RefCell::new);
        let detector = if index == rank_lo {
            run_state.take_all_reduce(rank).map(|a| RefCell::new(Detector::new(a)))
        } else {
            None
        };
        Ok(Worker {
            local_n,
            rank,
            rank_lo,
            remote: run_state.is_split().then(|| Box::new(super::remote::RemoteSide::new(n))),
            detector,
            index,
            n,
            run_id: run_state.run_id,
            issued: run_state.counters[index].issued.clone(),
            clients: (0..n).map(|_| ClientSide::default()).collect(),
            trustees: (0..n).map(|_| TrusteeSide::default()).collect(),
            run_state,
            local_served: Cell::new(0),
            open_requests: Cell::new(0),
            ready: RefCell::default(),
            fibers: RefCell::default(),
            free_ids: RefCell::default(),
            pool: RefCell::new(pool),
            current: Cell::new(None),
            delegated: Cell::new(0),
            frees: PendingFrees::default(),
            owner,
            quiesce_waiters: RefCell::default(),
            lane_totals: Cell::new(crate::QuiescentTotals::default()),
            post_owed: Cell::new(false),
            held_since: Cell::new(None),
            next_spawn: Cell::new(index),
            clock: Clock::new(anatomy, round_ends),
            dump: dump::WorkerDump::default(),
        })
    }

    /// Takes the fiber stacks this worker holds free, for its thread to keep for the next run
    /// (`super::pool`); the worker's loop has ended.
    pub(crate) fn take_stacks(&self) -> StackPool {
        let size = self.pool.borrow().size();
        self.pool.replace(StackPool::empty(size))
    }

    /// The pair sequence number of the next request batch from this worker to worker `to`
    /// (the forge test hook, `crate::forge`, writes its envelope under it).
    #[cfg(feature = "testing")]
    pub(crate) fn next_pair_seq(&self, to: usize) -> u64 {
        self.clients[to].sent.get() + 1
    }

    /// Whether this worker's export table holds the live export `(slot, gen)` (the forge test
    /// hook waits until a dropped export is stale).
    #[cfg(feature = "testing")]
    pub(crate) fn export_live(&self, slot: u32, gen: u32) -> bool {
        self.owner.as_ref().is_some_and(|o| o.borrow().lookup(slot, gen).is_ok())
    }

    /// True when global worker `g` is on this worker's rank (its fake rank in a loopback run).
    #[inline(always)]
    pub(crate) fn is_local(&self, g: usize) -> bool {
        g / self.local_n == self.rank
    }

    /// True when `trustee` is on another rank: its pair goes through the transport. One
    /// compare (outside a loopback run `rank_lo` is 0 and `local_n` is `n`: never true).
    #[inline(always)]
    pub(super) fn is_remote(&self, trustee: usize) -> bool {
        trustee.wrapping_sub(self.rank_lo) >= self.local_n
    }

    #[inline]
    pub(super) fn ctr(&self) -> &WorkerCounters {
        &self.run_state.counters[self.index]
    }

    // ----- context checks -------------------------------------------------------------

    /// True while delegated code (a trustee-side closure or a continuation) runs.
    #[inline]
    pub(crate) fn in_delegated(&self) -> bool {
        self.delegated.get() > 0
    }

    /// Panics unless the caller may block (a fiber, not delegated context).
    #[track_caller]
    pub(crate) fn check_may_block(&self, what: &str) {
        if self.in_delegated() {
            panic!(
                "skein: `{what}` would block inside delegated context (a closure running on a \
                 trustee, or an apply_then continuation); use `apply_then` or `launch` instead"
            );
        }
        if self.current.get().is_none() || !fiber::in_fiber() {
            panic!("skein: `{what}` must be called from a fiber");
        }
    }

    /// True when the caller may block: a fiber, not delegated context (what
    /// [`Worker::check_may_block`] requires).
    pub(crate) fn may_block(&self) -> bool {
        !self.in_delegated() && self.current.get().is_some() && fiber::in_fiber()
    }

    /// Runs `f` as delegated code (blocking calls inside panic).
    #[inline]
    pub(crate) fn delegated<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Guard<'a>(&'a Cell<u32>);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        self.delegated.set(self.delegated.get() + 1);
        let _g = Guard(&self.delegated);
        f()
    }

    /// Records a panic of user code that has nobody to resume it.
    pub(crate) fn record_panic(&self, p: PanicPayload, what: &str) {
        self.run_state
            .record_error(format!("{what} panicked: {}", crate::error::panic_message(&*p)));
    }

    // ----- fibers -----------------------------------------------------------------------

    /// Id of the running fiber.
    pub(crate) fn current_fiber(&self) -> Option<u32> {
        self.current.get()
    }

    /// Starts a fiber on this worker (a new task for quiescence detection).
    pub(crate) fn spawn_local(&self, body: impl FnOnce() + 'static) {
        let stack = self.pool.borrow_mut().take();
        let f = Fiber::new(stack, body);
        let id = match self.free_ids.borrow_mut().pop() {
            Some(id) => {
                self.fibers.borrow_mut()[id as usize] = Some(f);
                id
            }
            None => {
                let mut v = self.fibers.borrow_mut();
                v.push(Some(f));
                (v.len() - 1) as u32
            }
        };
        proto::bump(&self.ctr().created, 1);
        bump(&self.ctr().stats.fibers_spawned, 1);
        self.ready.borrow_mut().push_back(id);
    }

    fn run_fiber(&self, id: u32) {
        let mut f = self.fibers.borrow_mut()[id as usize].take().expect("skein: fiber slot empty");
        self.current.set(Some(id));
        bump(&self.ctr().stats.fibers_run, 1);
        let done = f.resume();
        self.current.set(None);
        if done {
            self.pool.borrow_mut().put(f.into_stack());
            self.free_ids.borrow_mut().push(id);
            proto::bump(&self.ctr().finished, 1);
        } else {
            self.fibers.borrow_mut()[id as usize] = Some(f);
        }
    }

    /// Makes a fiber blocked in a request runnable again (it stayed an active task).
    pub(crate) fn make_ready(&self, id: u32) {
        self.ready.borrow_mut().push_back(id);
    }

    /// Parks the current fiber: it stops being an active task until [`Worker::wake_parked`].
    pub(crate) fn park(&self) {
        let c = self.ctr();
        proto::set(&c.parked, c.parked.load(Ordering::Relaxed) + 1);
        proto::bump(&c.finished, 1);
        fiber::suspend();
    }

    /// Wakes a fiber parked with [`Worker::park`] (creates a task).
    pub(crate) fn wake_parked(&self, id: u32) {
        let c = self.ctr();
        proto::bump(&c.created, 1);
        proto::set(&c.parked, c.parked.load(Ordering::Relaxed) - 1);
        self.ready.borrow_mut().push_back(id);
    }

    /// Lets other fibers and the loop run; the fiber stays runnable.
    pub(crate) fn yield_now(&self) {
        let id = self.current.get().expect("skein: yield_now outside a fiber");
        self.ready.borrow_mut().push_back(id);
        fiber::suspend();
    }

    /// Suspends the current fiber until the requests it queued towards `trustee` have moved
    /// on: until the next batch to `trustee` is published, or the local queue has been run. The
    /// fiber stays an active task (like one blocked in `apply`), and is resumed once per batch
    /// instead of after every loop pass.
    pub(crate) fn throttle(&self, trustee: usize) {
        let id = self.current.get().expect("skein: throttle outside a fiber");
        self.clients[trustee].throttled.borrow_mut().push(id);
        fiber::suspend();
    }

    pub(super) fn wake_throttled(&self, list: &RefCell<Vec<u32>>) {
        if !list.borrow().is_empty() {
            let ids = std::mem::take(&mut *list.borrow_mut());
            self.ready.borrow_mut().extend(ids);
        }
    }

    /// The next worker for a round-robin `spawn` (a worker of this rank).
    pub(crate) fn next_spawn_target(&self) -> usize {
        let t = self.next_spawn.get();
        self.next_spawn.set(self.rank_lo + (t + 1 - self.rank_lo) % self.local_n);
        t
    }

    /// Blocks the current fiber until the job is quiescent (see [`super::quiesce`]); returns
    /// the job's lane totals and minima at that quiescence (`skein::wait_quiescent_totals`).
    pub(crate) fn wait_quiescent(&self) -> crate::QuiescentTotals {
        self.check_may_block("wait_quiescent");
        let id = self.current.get().expect("fiber");
        self.quiesce_waiters.borrow_mut().push(id);
        let c = self.ctr();
        proto::set(&c.quiesce_waiters, c.quiesce_waiters.load(Ordering::Relaxed) + 1);
        self.park();
        // Woken by `wake_quiesce_waiters`, which set the totals first; no later quiescence
        // can have overwritten them: this fiber's segment is unfinished until it parks or
        // returns, so no detection is positive before it has run.
        self.lane_totals.get()
    }

    /// Adds `values` to this worker's lanes (`skein::quiescent_add`). Only this worker's
    /// thread writes them (plain load and Release store, as every counter here).
    pub(crate) fn add_to_lanes(&self, values: [u64; crate::QUIESCENT_LANES]) {
        for (lane, v) in self.ctr().lanes.iter().zip(values) {
            proto::set(lane, lane.load(Ordering::Relaxed).wrapping_add(v));
        }
    }

    /// Sets this worker's minimum lane `lane` to `value` (`set`: `skein::quiescent_set_min`)
    /// or lowers it to `value` when below (`skein::quiescent_min`). Only this worker's
    /// thread writes it (plain load and Release store).
    pub(crate) fn lower_min(&self, lane: usize, value: u64, set: bool) {
        let Some(m) = self.ctr().mins.get(lane) else {
            panic!("minimum lane {lane} does not exist (there are {})", crate::QUIESCENT_MINS)
        };
        if set || value < m.load(Ordering::Relaxed) {
            proto::set(m, value);
        }
    }

    /// This worker's minimum lanes (`skein::quiescent_mins`).
    pub(crate) fn mins(&self) -> [u64; crate::QUIESCENT_MINS] {
        self.ctr().mins.each_ref().map(|m| m.load(Ordering::Relaxed))
    }

    /// This worker's lanes (`skein::quiescent_lanes`).
    pub(crate) fn lanes(&self) -> [u64; crate::QUIESCENT_LANES] {
        self.ctr().lanes.each_ref().map(|l| l.load(Ordering::Relaxed))
    }

    /// True when a fiber of this worker waits in `wait_quiescent`.
    pub(super) fn has_quiesce_waiters(&self) -> bool {
        !self.quiesce_waiters.borrow().is_empty()
    }

    /// True when a fiber of this worker is ready to run.
    pub(super) fn has_ready_fibers(&self) -> bool {
        !self.ready.borrow().is_empty()
    }

    /// Wakes the first `count` fibers of this worker that wait in `wait_quiescent` (on a
    /// positive detection, [`super::quiesce`]: those that were waiting in the quiescence it
    /// found; later ones wait for a later one), with the job's lane totals and minima at
    /// that quiescence.
    pub(crate) fn wake_quiesce_waiters(&self, totals: crate::QuiescentTotals, count: u64) {
        self.lane_totals.set(totals);
        let ws: Vec<u32> = {
            let mut all = self.quiesce_waiters.borrow_mut();
            let k = usize::try_from(count).unwrap_or(usize::MAX).min(all.len());
            all.drain(..k).collect()
        };
        for id in ws {
            self.wake_parked(id);
            let c = self.ctr();
            proto::set(&c.quiesce_waiters, c.quiesce_waiters.load(Ordering::Relaxed) - 1);
        }
    }

    // ----- client role: issuing requests ---------------------------------------------

    /// True when a local request would not overtake an earlier one.
    pub(crate) fn local_queue_empty(&self) -> bool {
        self.clients[self.index].out(|q| q.is_empty())
    }

    /// Queues a request for `trustee` (this worker or another): `request(target, out)` runs
    /// there as delegated code, with `out` pointing to `Space::BYTES` bytes of result space (a
    /// multiple of 8); `completion(outcome)` runs here afterwards, also as delegated code. `target` is
    /// the address the request works on (the trustee prefetches it), or null. Returns true
    /// when [`STAGING_YIELD`](crate::channel::queue::STAGING_YIELD) or more requests to `trustee`
    /// are staged on this worker.
    ///
    /// # Safety
    /// `trustee < self.n` (the issuing path reads `trustee` out of a handle of this run, which is below
    /// `n` by construction, and indexes without a bounds check).
    #[inline]
    pub(crate) unsafe fn request<Space: ResultSize, Request, Completion>(
        &self,
        trustee: usize,
        target: *mut u8,
        request: Request,
        completion: Completion,
    ) -> bool
    where
        Request: crate::channel::record::RequestHalf + Send,
        Completion: FnOnce(Outcome),
    {
        debug_assert!(
            trustee < self.n && self.clients.len() == self.n && self.issued.len() == self.n
        );
        // SAFETY: trustee < n (caller promise), the length of both.
        let (side, issued) =
            unsafe { (self.clients.get_unchecked(trustee), self.issued.get_unchecked(trustee)) };
        let over = side.out(|q| q.push::<Space, _, _>(target, request, completion));
        // The one counter a request bumps: it is the request's creation for quiescence
        // detection, the count that frees wait for, and the `requests_sent` statistic.
        proto::bump(issued, 1);
        if trustee != self.index {
            self.open_requests.set(self.open_requests.get() + 1);
        }
        over
    }

    /// Runs `f` on worker `trustee` (in its loop, as delegated code); fire and forget.
    pub(crate) fn post(&self, trustee: usize, f: impl FnOnce() + Send + 'static) {
        assert!(trustee < self.n, "skein: post to worker {trustee} of {}", self.n);
        let req = move |_, _out| {
            f();
            None
        };
        // SAFETY: trustee < n, checked above.
        unsafe { self.request::<NoResult, _, _>(trustee, std::ptr::null_mut(), req, |_o| {}) };
    }

    // ----- trustee role --------------------------------------------------------------

    /// Serves the batches `client` has published (up to one per lane, in order).
    fn serve(&self, client: usize) -> bool {
        let pair = self.run_state.pair(client, self.index);
        let ts = &self.trustees[client];
        let mut useful = false;
        loop {
            let seq = ts.served_seq.get() + 1;
            let lane = pair.lane(seq);
            if lane.req.seq() != seq {
                return useful;
            }
            // SAFETY: slot rule (2) — we Acquire-loaded the next batch's seq in its lane, so
            // its request data and the lane's response slot belong to us until we publish.
            let (words, count, uniform, resp_data) = unsafe {
                let (words, tagged) = lane.req.batch();
                let (count, uniform) = untag_count(tagged);
                (words as usize, count, uniform, lane.resp.data() as *mut u8)
            };
            // Ask for every line of the batch at once: they arrive from the client's cache in
            // parallel instead of one miss after the other as the records are run.
            let data = lane.req.data() as *const u8;
            for off in (0..words * 8).step_by(64) {
                prefetch(data.wrapping_add(off));
            }
            // SAFETY: the client copied exactly `count` records into req.data() with `send_to`
            // (rule 1), all of one type if it said `uniform`; their request halves are ours and
            // consumed only here, once. The client sized the batch so that the results fit in
            // the response slot, which we own (rule 2).
            let panics = self
                .delegated(|| unsafe { serve_batch(lane.req.data(), count, uniform, resp_data) });
            ts.served.set(ts.served.get() + count as u64);
            ts.served_seq.set(seq);
            let st = &self.ctr().stats;
            bump(&st.requests_served, count as u64);
            bump(&st.batches_served, 1);
            // SAFETY: rule (2) — we own the lane's response slot and hand it to the client now.
            unsafe {
                if !panics.is_empty() {
                    lane.resp.put_panics(panics);
                }
                lane.resp.publish(seq, 0, count as u32)
            };
            self.run_state.sleepers.wake(client);
            useful = true;
        }
    }

    fn run_local(&self) -> bool {
        let cs = &self.clients[self.index];
        let n = cs.out(|q| q.staged());
        if n == 0 {
            return false;
        }
        // Exactly the `n` requests queued now, taken out of their cell while they run: the ones
        // they queue land in the spare queue, are appended behind, and wait for the next pass.
        let mut q = cs.take_out();
        self.delegated(|| q.run_local(n));
        cs.put_back(q);
        self.local_served.set(self.local_served.get() + n as u64);
        proto::bump(&self.ctr().finished, n as u64);
        self.wake_throttled(&cs.throttled);
        true
    }

    // ----- client role: responses and flushing ------------------------------------------

    /// Whether the client role has anything to do: a request queued for another trustee and
    /// not completed (every request goes through [`Worker::request`], which counts it; its
    /// completion, from a slot or an envelope, counts it off).
    #[inline]
    pub(super) fn client_busy(&self) -> bool {
        self.open_requests.get() != 0
    }

    /// `n` requests to other trustees completed.
    #[inline]
    pub(super) fn completed_requests(&self, n: usize) {
        let open = self.open_requests.get();
        debug_assert!(open >= n as u64, "{n} requests completed of {open} open");
        self.open_requests.set(open.saturating_sub(n as u64));
    }

    /// Publishes the requests staged towards every other trustee while a lane is free (and
    /// runs the completions of answered batches on the way).
    pub(super) fn flush_requests(&self) {
        for trustee in 0..self.n {
            if trustee != self.index {
                self.poll_client(trustee, Flush::Now);
            }
        }
    }

    /// Runs the completions of the batches to `trustee` that have been answered (in order),
    /// then publishes queued requests while a lane is free (to another rank: one envelope for
    /// all its trustees, polled at the rank's first; full envelopes only, unless `flush`;
    /// `Worker::poll_remote`).
    fn poll_client(&self, trustee: usize, flush: Flush) -> bool {
        if self.is_remote(trustee) {
            // One envelope for every trustee of a rank: polled once per rank, at its first.
            return trustee % self.local_n == 0 && self.poll_remote(trustee / self.local_n, flush);
        }
        let cs = &self.clients[trustee];
        let pair = self.run_state.pair(self.index, trustee);
        let mut useful = false;
        while cs.acked.get() < cs.sent.get() {
            let seq = cs.acked.get() + 1;
            let lane = pair.lane(seq);
            if lane.resp.seq() != seq {
                break;
            }
            // SAFETY: rule (3) — Acquire-loaded the lane's resp.seq == seq: the response is ours.
            let panics = unsafe { lane.resp.take_panics() };
            let resp = lane.resp.data() as *const u8;
            // The requests are taken out of their cell while their completions run; what
            // those queue meanwhile lands in the spare queue, and is appended behind after.
            let tagged = cs.in_lane[(seq % PIPELINE as u64) as usize].get();
            let (n, uniform) = untag_count(tagged);
            let mut q = cs.take_out();
            self.delegated(|| q.complete_front(n, uniform, resp, panics));
            cs.put_back(q);
            cs.acked.set(seq);
            proto::bump(&self.ctr().finished, n as u64);
            self.completed_requests(n);
            useful = true;
        }
        while cs.sent.get() - cs.acked.get() < PIPELINE as u64 && cs.out(|q| q.has_staged()) {
            let seq = cs.sent.get() + 1;
            let lane = pair.lane(seq);
            let max_words = lane.req.data_words();
            let max_result_bytes = lane.resp.data_bytes();
            // With more workers than cores, while this worker's fibers are ready (`Full`: the
            // loop passes it only then, `Worker::run_loop`) a batch leaves only once it fills
            // its slot: each publication may wake a blocked trustee, a context switch.
            if flush == Flush::Full {
                let (words, result) = cs.out(|q| q.staged_size());
                if words + HEADER_WORDS < max_words && (result == 0 || result < max_result_bytes) {
                    break;
                }
            }
            // SAFETY: rule (1) — the lane's previous batch (seq - PIPELINE) has been answered
            // and consumed (acked >= seq - PIPELINE), so its request slot is ours; the data
            // area holds `max_words` words.
            let (words, count, uniform) =
                cs.out(|q| unsafe { q.send_to(lane.req.data(), max_words, max_result_bytes) });
            assert!(count > 0, "skein: a request does not fit in an empty slot");
            let count = tag_count(count, uniform);
            cs.in_lane[(seq % PIPELINE as u64) as usize].set(count);
            debug_assert!(words >= HEADER_WORDS);
            cs.sent.set(seq);
            // SAFETY: rule (1) — we own the request slot and publish it now.
            unsafe { lane.req.publish(seq, words as u32, count) };
            self.run_state.sleepers.wake(trustee);
            bump(&self.ctr().stats.batches_sent, 1);
            self.wake_throttled(&cs.throttled);
            useful = true;
        }
        useful
    }

    // ----- property frees ----------------------------------------------------------------

    /// Requests this trustee has served from `client` (the counts frees wait for,
    /// [`super::free`]).
    pub(super) fn served_from(&self, client: usize) -> u64 {
        if client == self.index {
            self.local_served.get()
        } else {
            self.trustees[client].served.get()
        }
    }

    /// Applies the `Release`s this trustee holds whose requests have all been served
    /// ([`Owner::process`]); true when one was applied. A return that the table refuses
    /// (more weight than is outstanding: a corrupt message) is the run's error and stops it.
    #[inline]
    fn process_releases(&self, o: &RefCell<Owner<PropPtr>>) -> bool {
        let p = o.borrow_mut().process(|c| self.served_from(c));
        if !p.errors.is_empty() {
            for e in &p.errors {
                self.run_state
                    .record_error(format!("rank {} worker {}: {e}", self.rank, self.index));
            }
            self.run_state.abort();
        }
        p.applied > 0
    }

    // ----- quiescence across ranks ---------------------------------------------------

    /// One step of this rank's detector (`super::quiesce_ranks`), if this worker runs one;
    /// acts on a positive verdict before the next step, as the proof requires. True when the
    /// run stops (every rank stops in the same round).
    fn poll_detector(&self, post: Post) -> bool {
        let Some(d) = &self.detector else { return false };
        let post = match (post, self.held_since.get()) {
            (Post::UnlessWasted, Some(t)) if t.elapsed() >= HOLD_LIMIT => Post::Yes,
            _ => post,
        };
        if self.run_state.shutdown.load(Ordering::Acquire) {
            // Stopping already (in a loopback split an abort stops every fake rank at once,
            // and a stopped rank leaves the all-reduce group): no further round.
            return true;
        }
        let view = RankView { run_state: &self.run_state, lo: self.rank_lo, len: self.local_n };
        let st = &self.ctr().stats;
        bump(&st.detector_steps, 1);
        let mut d = d.borrow_mut();
        let (posted, completed, held) = (d.posted_count(), d.completed_count(), d.held_count());
        let mut v = d.step(&view, post);
        if self.run_state.sleepers.on_words() {
            // Over the rings, a worker may block after this step: a round it just posted may
            // be complete already (the other ranks posted first and wait for this one's next
            // post, or stopped on its verdict), and no later post would wake it for that.
            // Test it now, while the steps decide nothing to act on.
            let mut last = posted;
            while d.posted_count() != last && !v.is_some_and(|v| v.action() != Action::Continue) {
                last = d.posted_count();
                match d.step(&view, post) {
                    Some(next) => v = Some(next),
                    None => break,
                }
            }
        }
        if d.posted_count() != posted {
            self.post_owed.set(false);
            self.held_since.set(None);
        } else if d.held_count() != held && self.held_since.get().is_none() {
            self.held_since.set(Some(std::time::Instant::now()));
        }
        bump(&st.all_reduces_posted, d.posted_count() - posted);
        bump(&st.all_reduces_completed, d.completed_count() - completed);
        bump(&st.posts_held, d.held_count() - held);
        // The waiters a positive verdict wakes: those its round's post counted.
        let waiters = if v.is_some_and(|v| v.action() == Action::WakeWaiters) {
            d.waiters().to_vec()
        } else {
            Vec::new()
        };
        drop(d);
        let Some(v) = v else { return false };
        if v.quiescent {
            bump(&st.quiescent_verdicts, 1);
            if self.clock.stamps() && v.last_work_ns > 0 {
                // From the job's last work to this rank's knowing the round is over.
                st.round_end(super::anatomy::mono_ns().saturating_sub(v.last_work_ns));
            }
        }
        self.run_state.stall.note_round(v.detection + 1, v.finished, v.created);
        match v.action() {
            Action::Continue => false,
            Action::WakeWaiters => {
                // The next round is posted once this rank is idle again: its wave 1, read
                // after the woken fibers ran, can then be the next positive detection (posted
                // now, it would read the waiters' tasks unfinished, and the next positive
                // verdict would come one all-reduce later). A rank with no waiters of its own
                // is idle now and posts at once, as it would after a negative verdict.
                if self.wake_rank_waiters(v.gauges.totals, &waiters) {
                    self.post_owed.set(true);
                    false
                } else {
                    self.poll_detector(post)
                }
            }
            Action::Stop { deadlock } => {
                if v.gauges.aborted {
                    // Another rank refused an envelope (or a release): this rank stops without
                    // quiescence too, so envelopes may be left over here (`run_ranks`).
                    self.run_state.aborted.store(true, Ordering::Release);
                }
                if let Some((parked, main_done)) = deadlock {
                    self.run_state.set_deadlock(parked, main_done);
                }
                self.run_state.stop();
                true
            }
        }
    }

    /// Wakes the `wait_quiescent` callers of this worker's rank that the verdict's
    /// quiescence counted (`waiters[i]` on the rank's worker `i`: `Detector::waiters`): its
    /// own, and a wake-up posted to each other worker of the rank that has some (then
    /// published at once, as [`super::quiesce::detect`] does). True when the rank had any.
    fn wake_rank_waiters(&self, totals: crate::QuiescentTotals, waiters: &[u64]) -> bool {
        let (mut posted, mut any) = (false, false);
        for (g, &k) in (self.rank_lo..).zip(waiters) {
            if k == 0 {
                continue;
            }
            any = true;
            if g == self.index {
                self.wake_quiesce_waiters(totals, k);
            } else {
                posted = true;
                self.post(g, move || {
                    super::context::expect("wake").wake_quiesce_waiters(totals, k)
                });
            }
        }
        if posted {
            self.flush_requests();
        }
        any
    }

    /// While [`Worker::own_work_due`] or [`Worker::incoming_due`] holds the idle policy
    /// ([`super::idle`]) spins longer before giving the core away: the work is on its way.
    ///
    /// True when one of this worker's own requests awaits a response, or local work is queued.
    fn own_work_due(&self) -> bool {
        self.clients.iter().any(|c| !c.out(|q| q.is_empty())) || !self.ready.borrow().is_empty()
    }

    /// True when every worker of this worker's rank but itself and `skip` (if any) has
    /// announced that it may park, or parked. With no `skip`: this worker armed first, in its
    /// re-check pass, or was just woken (`idle.rs`). Skipping the rank's first worker: this
    /// worker armed first, and the store-buffering argument of `idle.rs`, "Quiescence", makes
    /// the last of them to arm see the others.
    fn rank_idle_except(&self, sleepers: &idle::Sleepers, skip: Option<usize>) -> bool {
        (self.rank_lo..self.rank_lo + self.local_n)
            .all(|g| g == self.index || Some(g) == skip || sleepers.is_armed(g))
    }

    /// True when a fiber of this worker's rank waits in `wait_quiescent` (the anatomy's
    /// classification of an idle pass; read only while timing is on).
    fn rank_waits_quiescence(&self) -> bool {
        (self.rank_lo..self.rank_lo + self.local_n)
            .any(|g| self.run_state.counters[g].quiesce_waiters.load(Ordering::Relaxed) > 0)
    }

    /// True when some client has issued requests to this trustee that it has not served yet:
    /// they are staged on the client or in a slot (the client bumped `issued` when it queued
    /// them; their publication wakes this worker if it parks.
    fn incoming_due(&self) -> bool {
        // Request segments forwarded by a landing worker of this rank (`super::remote`).
        self.run_state.forwarded.get(self.index).is_some_and(|f| f.waiting() > 0)
            || (0..self.n).any(|client| {
                client != self.index
                    && self.run_state.counters[client].issued[self.index].load(Ordering::Relaxed)
                        > self.trustees[client].served.get()
            })
    }
}

/// Passes that requests to another rank may wait for a fuller batch while the worker stays
/// busy (`Worker::run_loop`); an idle pass sends them at once.
const AGGREGATE_PASSES: u32 = 16;

/// How long the detector's worker holds a post back while a task of its rank is open
/// ([`Post::UnlessWasted`]): its first detector step after that posts (a blocked worker steps
/// at its next wake-up, at the latest at the futex wait's safety net,
/// `transport::wake::BLOCK_LIMIT`). So a task that stays open longer (a fiber that works for
/// a while, a response that will never come because another rank aborted) no longer keeps
/// the round from the other ranks: the posts tell them, and their stall dumps, that this
/// rank lives, and carry an abort. A hold pays off for a response on its way (microseconds
/// to a few scheduler ticks).
const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// Idle passes between two steps of the detector across ranks (`Worker::poll_detector`).
const DETECT_EVERY: u32 = 32;
/// Useful passes between two steps of the detector while its worker is busy.
const DETECT_BUSY_EVERY: u32 = 1 << 14;
