//! State shared by all workers of one run: the slot matrix, the published counters, flags.

use crate::channel::slot::SlotPair;
use crate::stats::StatCounters;
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex};
use crate::trust::prop::PropPtr;
use std::sync::Weak;

/// The runs whose shared state is alive, by id: a handle dropped on a thread that is not a
/// worker of its run finds the run here (a property does not point to its run).
static LIVE_RUNS: Mutex<Vec<(u32, Weak<Shared>)>> = Mutex::new(Vec::new());

/// The shared state of run `id`, if it is still alive.
pub(crate) fn find_run(id: u32) -> Option<Arc<Shared>> {
    let weak = {
        let runs = LIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
        runs.iter().find(|(r, _)| *r == id).map(|(_, w)| w.clone())
    };
    // Upgraded outside the lock: dropping the last `Arc` takes the lock again (`Drop`).
    weak.and_then(|w| w.upgrade())
}

/// Runtime settings (from the builder).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) fibers_per_worker: usize,
    pub(crate) pin: bool,
    pub(crate) stack_size: usize,
    pub(crate) worker_stack_size: usize,
    pub(crate) slot_overflow: usize,
}

/// Counters one worker publishes to the others (single writer: that worker).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerCounters {
    /// Fiber segments created on this worker (quiescence detection, see `quiesce`; requests
    /// are counted in `issued`).
    pub(crate) created: AtomicU64,
    /// Tasks finished on this worker.
    pub(crate) finished: AtomicU64,
    /// Fibers parked (join, latch, wait_quiescent) right now.
    pub(crate) parked: AtomicU64,
    /// Fibers parked in `wait_quiescent` right now.
    pub(crate) quiesce_waiters: AtomicU64,
    /// `issued[t]`: requests this worker has queued for trustee `t` (local ones for itself).
    /// Each is also a task created on this worker (see `quiesce`).
    pub(crate) issued: Arc<[AtomicU64]>,
    /// Statistics.
    pub(crate) stats: StatCounters,
}

/// A property whose last handle is gone, waiting until every request issued before that
/// moment has been served (`targets[c]` requests from client `c`).
#[derive(Debug)]
pub(crate) struct PendingFree {
    pub(crate) prop: PropPtr,
    pub(crate) targets: Box<[u64]>,
}

/// Frees requested from threads that are not workers of this run.
#[derive(Debug, Default)]
pub(crate) struct Foreign {
    pub(crate) running: bool,
    pub(crate) frees: Vec<(usize, PropPtr)>,
}

/// Everything the workers of one run share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) n: usize,
    /// Distinguishes this run from every other run whose handles exist ([`super::run_ids`]):
    /// a handle of another run is refused without touching memory.
    pub(crate) run_id: u32,
    pub(crate) cfg: Config,
    pairs: Box<[SlotPair]>,
    pub(crate) counters: Box<[WorkerCounters]>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) main_done: AtomicBool,
    pub(crate) errors: Mutex<Vec<String>>,
    pub(crate) deadlock: Mutex<Option<(u64, bool)>>,
    pub(crate) foreign: Mutex<Foreign>,
    pub(crate) foreign_pending: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        LIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner()).retain(|(r, _)| *r != self.run_id);
        super::run_ids::run_ended(self.run_id);
    }
}

impl Shared {
    /// The shared state of a new run, registered for [`find_run`]; `None` when no run id is
    /// free ([`super::run_ids`]).
    pub(crate) fn start(cfg: Config) -> Option<Arc<Shared>> {
        let s = Arc::new(Shared::new(cfg, super::run_ids::acquire()?));
        LIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner()).push((s.run_id, Arc::downgrade(&s)));
        Some(s)
    }

    fn new(cfg: Config, run_id: u32) -> Shared {
        let n = cfg.workers;
        Shared {
            n,
            run_id,
            pairs: (0..n * n).map(|_| SlotPair::new(cfg.slot_overflow)).collect(),
            counters: (0..n)
                .map(|_| WorkerCounters {
                    created: AtomicU64::new(0),
                    finished: AtomicU64::new(0),
                    parked: AtomicU64::new(0),
                    quiesce_waiters: AtomicU64::new(0),
                    issued: (0..n).map(|_| AtomicU64::new(0)).collect(),
                    stats: StatCounters::default(),
                })
                .collect(),
            cfg,
            shutdown: AtomicBool::new(false),
            main_done: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            deadlock: Mutex::new(None),
            foreign: Mutex::new(Foreign { running: true, frees: Vec::new() }),
            foreign_pending: AtomicBool::new(false),
        }
    }

    /// The statistics of worker `w` (requests sent and local requests come from `issued`).
    pub(crate) fn stats_of(&self, w: usize) -> crate::stats::WorkerStats {
        let c = &self.counters[w];
        let mut s = c.stats.snapshot();
        for (t, i) in c.issued.iter().enumerate() {
            let i = i.load(crate::sync::Ordering::Acquire);
            if t == w {
                s.local_requests = i;
            } else {
                s.requests_sent += i;
            }
        }
        s
    }

    /// The slots of pair (client `c`, trustee `t`).
    #[inline]
    pub(crate) fn pair(&self, c: usize, t: usize) -> &SlotPair {
        &self.pairs[c * self.n + t]
    }

    pub(crate) fn record_error(&self, msg: String) {
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }

    pub(crate) fn set_deadlock(&self, blocked: u64, main_finished: bool) {
        *self.deadlock.lock().unwrap_or_else(|e| e.into_inner()) = Some((blocked, main_finished));
    }
}
