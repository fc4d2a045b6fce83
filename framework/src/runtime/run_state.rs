//! The state shared by all workers of one run: settings, the slot matrix, the counters each
//! worker publishes, the foreign-thread free hand-off, flags and error lists.
//!
//! Everything here is written either by one worker only (the counters, single writer each;
//! the slots, by the protocol of [`crate::channel::slot`]) or under a mutex; the flags are
//! monotonic (`false` to `true` once).

use super::export::{ExportTable, Owner};
use super::free::{self, ForeignFrees};
use super::idle::Sleepers;
use crate::channel::slot::SlotPair;
use crate::property::PropPtr;
use crate::stats::LiveStats;
use crate::sync::proto::AtomicU64;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// Runtime settings (from the builder).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) workers: usize,
    pub(crate) fibers_per_worker: usize,
    pub(crate) pin: bool,
    pub(crate) stack_size: usize,
    pub(crate) worker_stack_size: usize,
    pub(crate) slot_overflow: usize,
    /// Fake ranks of a loopback run (`Builder::loopback_ranks`); 1: not a loopback run.
    pub(crate) loopback_ranks: usize,
    /// Test hook: flip this byte of the first request envelope the loopback transport sends.
    pub(crate) loopback_corrupt: Option<usize>,
    /// The transport of a run over MPI ranks (`Builder::rack_transport`).
    pub(crate) rack_transport: crate::transport::RackTransport,
    /// Time the worker loop's phases (`Builder::anatomy`, `SKEIN_ANATOMY`).
    pub(crate) anatomy: bool,
    /// Time rounds' ends across ranks without the phases (`Builder::round_ends`,
    /// `SKEIN_ROUND_ENDS`; the anatomy times them too).
    pub(crate) round_ends: bool,
    /// Hold batches to other ranks until full or idle (`SKEIN_AGGREGATE=0` turns it off:
    /// every pass sends what is staged, as before per-pair aggregation).
    pub(crate) aggregate: bool,
    /// How many full batches' worth (`Transport::batch_limits`) one request envelope to
    /// another rank may hold, over all its segments (`Builder::envelope_batches`,
    /// `SKEIN_ENVELOPE_BATCHES`).
    pub(crate) envelope_batches: u32,
    /// The most wire bytes of a uniform batch to another rank over the rings
    /// (`Builder::rack_batch_bytes`).
    pub(crate) rack_batch_bytes: usize,
    /// How workers wait when the run's workers outnumber the cores (`Builder::crowded_waits`,
    /// `SKEIN_OVERSUBSCRIBED`).
    pub(crate) crowded_waits: super::idle::Crowded,
    /// Seconds with no task started or finished anywhere before the run prints a stall dump
    /// (`super::stall`); 0: never (a `SIGQUIT` still asks for one).
    pub(crate) stall_secs: u64,
    /// Threads that run the workers of a process (a run in one process, or a rank over the
    /// rings: `Builder::worker_threads`, `SKEIN_WORKER_THREADS`): 0 for as many as the cores
    /// when the workers outnumber them (over the rings, the rank's share of them:
    /// `transport::wake::node_threads`).
    pub(crate) worker_threads: usize,
}

impl Config {
    /// The threads that run this configuration's workers in one process unsplit
    /// (`super::worker::looping`): `worker_threads` (0: the cores this process may use,
    /// [`super::idle::cores`]), at least 1 and at most one per worker. Over the rings each
    /// rank's threads are resolved at set-up from what every rank of its node tells
    /// (`transport::wake::node_threads`).
    pub(crate) fn threads(&self) -> usize {
        let t = if self.worker_threads == 0 { super::idle::cores() } else { self.worker_threads };
        t.clamp(1, self.workers.max(1))
    }
}

/// Counters one worker publishes to the others (single writer: that worker, with
/// [`crate::sync::proto::bump`]). The task counters are the ones quiescence detection sums
/// ([`super::quiesce`]), and `issued` is also what frees wait for ([`super::free`]); they are
/// `sync::proto` atomics, so the loom models run on this very type.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct WorkerCounters {
    /// Fiber segments created on this worker (requests are counted in `issued`).
    pub(crate) created: AtomicU64,
    /// Tasks finished on this worker.
    pub(crate) finished: AtomicU64,
    /// Fibers parked (join, latch, wait_quiescent) right now.
    pub(crate) parked: AtomicU64,
    /// Fibers parked in `wait_quiescent` right now.
    pub(crate) quiesce_waiters: AtomicU64,
    /// What code on this worker added with `skein::quiescent_add` so far in this run (wrapping
    /// sums, per lane): a gauge the detector sums at quiescence (`wait_quiescent_sum`).
    pub(crate) lanes: [AtomicU64; crate::QUIESCENT_LANES],
    /// The minimum lanes of `skein::quiescent_min` (`u64::MAX` until set): values, read at
    /// quiescence as they are, whose minimum the detector hands to `wait_quiescent_totals`.
    pub(crate) mins: [AtomicU64; crate::QUIESCENT_MINS],
    /// `issued[trustee]`: requests this worker has queued for `trustee` (local ones for
    /// itself). Each is also a task created on this worker.
    pub(crate) issued: Arc<[AtomicU64]>,
    /// Statistics.
    pub(crate) stats: LiveStats,
}

impl WorkerCounters {
    /// The counters of a worker of a run of `n` workers, all zero.
    #[cfg_attr(not(test), allow(dead_code))] // the tests' and models' constructor
    pub(crate) fn new(n: usize) -> WorkerCounters {
        WorkerCounters::with_ranks(n, 1, false)
    }

    /// The counters of a worker of a run of `n` workers over `ranks` ranks (per destination
    /// rank statistics when more than 1; round ends when `detects`, the rank's first
    /// worker's), all zero.
    pub(crate) fn with_ranks(n: usize, ranks: usize, detects: bool) -> WorkerCounters {
        WorkerCounters {
            created: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            parked: AtomicU64::new(0),
            quiesce_waiters: AtomicU64::new(0),
            lanes: std::array::from_fn(|_| AtomicU64::new(0)),
            mins: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            issued: (0..n).map(|_| AtomicU64::new(0)).collect(),
            stats: LiveStats::new(ranks, detects),
        }
    }
}

/// A rank's all-reduce for quiescence detection.
pub(crate) type AllReduceBox = Box<dyn super::quiesce_ranks::AllReduce + Send>;

/// How a run spans ranks.
pub(crate) enum Split {
    /// One process, or the fake ranks of a loopback run (`Config::loopback_ranks`).
    InProcess,
    /// Rank `rank` of `ranks` MPI ranks, each with `Config::workers` workers, over
    /// `transport`, with this rank's all-reduce for quiescence detection.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Mpi {
        /// The run's number in the job, the same on every rank (`crate::rack::outcome`).
        job_run: u32,
        rank: usize,
        ranks: usize,
        transport: Box<dyn crate::transport::Transport>,
        all_reduce: AllReduceBox,
    },
}

/// Everything the workers of one run share.
#[derive(Debug)]
pub(crate) struct RunState {
    pub(crate) n: usize,
    /// The threads that run the workers on this node: [`Config::threads`] in one process
    /// unsplit (workers then share threads, `super::worker::looping`); over the rings the sum
    /// of every rank's (as agreed at set-up, `transport::shm`); else one per worker (`n`).
    /// The idle policy's count of what competes for the cores
    /// (`super::idle::oversubscribed`).
    pub(crate) threads: usize,
    /// The cores [`RunState::threads`] share ([`super::idle::run_cores`]): this process's, or
    /// over the rings those of every rank of the node together.
    pub(crate) cores: usize,
    /// The threads that run this process's workers: fewer than its workers where they share
    /// threads (in one process, [`Config::threads`]; over the shared-memory rings, what the
    /// ranks agreed, `transport::shm`), else one per worker.
    pub(crate) rank_threads: usize,
    /// Distinguishes this run from every other run whose handles exist ([`crate::run_ids`]):
    /// a handle of another run is refused without touching memory.
    pub(crate) run_id: u32,
    /// What envelopes carry to name this run (`job_run`): the run id in one process, the
    /// run's number in the job over MPI (the same on every rank).
    pub(crate) job_run: u32,
    pub(crate) cfg: Config,
    pairs: Box<[SlotPair]>,
    pub(crate) counters: Box<[WorkerCounters]>,
    pub(crate) shutdown: AtomicBool,
    /// The workers' sleeping flags: an idle worker parks, and whoever makes work for it wakes
    /// it ([`super::idle`]).
    pub(crate) sleepers: Sleepers,
    pub(crate) main_done: AtomicBool,
    pub(crate) errors: Mutex<Vec<String>>,
    pub(crate) deadlock: Mutex<Option<(u64, bool)>>,
    /// Frees handed over by threads that are not workers of this run ([`free`]).
    pub(crate) foreign_frees: ForeignFrees<PropPtr>,
    /// Ranks of the run (R): the MPI ranks of a run over MPI, the fake ranks of a loopback
    /// run, else 1.
    pub(crate) ranks: usize,
    /// Workers per rank (W): `n / ranks`.
    pub(crate) local_n: usize,
    /// In a run over MPI, this process's rank (its workers are `rank·W .. (rank+1)·W`, the
    /// only ones with threads here; the other ranks' counters stay zero). `None` otherwise.
    pub(crate) mpi_rank: Option<usize>,
    /// The slot pairs exist for the workers `pair_lo ..` (this process's): `pair(c, t)` is
    /// `pairs[(c − pair_lo)·pair_stride + (t − pair_lo)]` (`0` and `n`, except over MPI).
    pair_lo: usize,
    pair_stride: usize,
    /// The transport for pairs across ranks: the loopback transport in a loopback run, the
    /// MPI link in a run over MPI, else none (`docs/rack-mode.md` §4.1).
    pub(crate) transport: Option<Box<dyn crate::transport::Transport>>,
    /// Each rank's all-reduce for quiescence detection across ranks
    /// (`super::quiesce_ranks`), until its first worker takes it; empty when not split.
    all_reduces: Mutex<Vec<Option<AllReduceBox>>>,
    /// Set when the run was stopped before quiescence (a refused batch): requests were lost,
    /// so the end-of-run checks that assume quiescence do not apply.
    pub(crate) aborted: AtomicBool,
    /// Set by [`RunState::end`].
    ended: AtomicBool,
    /// The export tables of a split run, one per global trustee (`docs/rack-mode.md` §5.2
    /// item 1; empty when the run is not split): any worker of the trustee's rank exports
    /// through its trustee's table.
    pub(crate) exports: Box<[Arc<ExportTable<PropPtr>>]>,
    /// The trustees' [`Owner`] parts until each worker takes its own ([`RunState::take_owner`]).
    owners: Mutex<Vec<Option<Owner<PropPtr>>>>,
    /// Stall dumps: requests, the clock receipts stamp, the detector's last round
    /// (`super::stall`).
    pub(crate) stall: super::stall::RunStall,
    /// Per worker, the request segments a landing worker of its rank forwarded to it
    /// (`super::remote`, invariant 4); empty when the run is not split.
    pub(crate) forwarded: Box<[super::remote::Forwarded]>,
}

impl Drop for RunState {
    fn drop(&mut self) {
        self.end();
    }
}

impl RunState {
    /// The shared state of a new run, registered for [`free::find_run`]; `None` when no run
    /// id is free ([`crate::run_ids`]).
    ///
    /// `kept` are the slot pairs of an earlier run of the same runtime
    /// ([`RunState::into_pairs`]), used when they are as many and as large as this run's:
    /// a run of many workers then allocates and faults in no fresh slots (W² pairs of four
    /// slots, 8 KiB each by default: 2 MiB at 8 workers, which `free` gave back to the
    /// system at every run's end and the next run faulted in again).
    pub(crate) fn start(
        cfg: Config,
        split: Split,
        kept: Option<Box<[SlotPair]>>,
    ) -> Option<Arc<RunState>> {
        let s = Arc::new(RunState::new(cfg, crate::run_ids::acquire()?, split, kept));
        free::register_run(&s);
        Some(s)
    }

    fn new(cfg: Config, run_id: u32, split: Split, kept: Option<Box<[SlotPair]>>) -> RunState {
        let w = cfg.workers;
        type Parts = (usize, usize, Option<usize>, Option<Box<dyn crate::transport::Transport>>);
        let mut job_run = run_id;
        let (n, ranks, mpi_rank, transport, all_reduces): (_, _, _, _, Vec<Option<AllReduceBox>>) =
            match split {
                Split::InProcess => {
                    let ranks = cfg.loopback_ranks.max(1);
                    let (n, ranks, mpi_rank, transport): Parts = (
                        w,
                        ranks,
                        None,
                        (ranks > 1).then(|| {
                            Box::new(crate::transport::loopback::Loopback::new(
                                w,
                                ranks,
                                run_id,
                                cfg.loopback_corrupt,
                            )) as Box<dyn crate::transport::Transport>
                        }),
                    );
                    let ar = if ranks > 1 {
                        super::quiesce_ranks::ThreadsAllReduce::group(ranks)
                            .into_iter()
                            .map(|a| Some(Box::new(a) as AllReduceBox))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    (n, ranks, mpi_rank, transport, ar)
                }
                Split::Mpi { job_run: jr, rank, ranks, transport, all_reduce } => {
                    job_run = jr;
                    let mut ar: Vec<Option<AllReduceBox>> = (0..ranks).map(|_| None).collect();
                    ar[rank] = Some(all_reduce);
                    (w * ranks, ranks, Some(rank), Some(transport), ar)
                }
            };
        let local_n = n / ranks;
        let (pair_lo, pair_stride) = match mpi_rank {
            Some(r) => (r * local_n, local_n),
            None => (0, n),
        };
        let (exports, owners): (Vec<_>, Vec<_>) = if ranks > 1 {
            (0..n)
                .map(|g| {
                    let (table, mut owner) = ExportTable::new(g);
                    owner.set_max_clients(local_n);
                    (table, Some(owner))
                })
                .unzip()
        } else {
            (Vec::new(), Vec::new())
        };
        let here = if mpi_rank.is_some() { local_n } else { n };
        // Over the rings the workers wait on futex words the other ranks reach.
        let words = transport.as_deref().and_then(|t| t.wake_words());
        // The threads that run the workers: shared in one process unsplit, and over the rings
        // as the ranks agreed (each group on the word of its first worker).
        let (threads, rank_threads) = match (&words, mpi_rank) {
            (Some(ws), Some(r)) => {
                let here = ws.threads_of(r).clamp(1, local_n);
                (((0..ranks).map(|q| ws.threads_of(q)).sum::<usize>()).max(here), here)
            }
            (None, None) if ranks == 1 => (cfg.threads(), cfg.threads()),
            _ => (n, here),
        };
        let cores = super::idle::run_cores(words.as_ref().map(|ws| ws.node_cores()));
        let sleepers = Sleepers::new(n, words);
        let pairs = kept
            .filter(|k| {
                k.len() == pair_stride * pair_stride && k.iter().all(|p| p.fits(cfg.slot_overflow))
            })
            .unwrap_or_else(|| {
                (0..pair_stride * pair_stride).map(|_| SlotPair::new(cfg.slot_overflow)).collect()
            });
        RunState {
            stall: super::stall::RunStall::new(ranks, here),
            forwarded: (0..if ranks > 1 { n } else { 0 })
                .map(|_| super::remote::Forwarded::default())
                .collect(),
            exports: exports.into(),
            owners: Mutex::new(owners),
            ranks,
            local_n,
            mpi_rank,
            pair_lo,
            pair_stride,
            transport,
            all_reduces: Mutex::new(all_reduces),
            aborted: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            threads,
            cores,
            rank_threads,
            n,
            run_id,
            job_run,
            pairs,
            counters: (0..n)
                .map(|g| WorkerCounters::with_ranks(n, ranks, g % local_n.max(1) == 0))
                .collect(),
            cfg,
            shutdown: AtomicBool::new(false),
            sleepers,
            main_done: AtomicBool::new(false),
            errors: Mutex::new(Vec::new()),
            deadlock: Mutex::new(None),
            foreign_frees: ForeignFrees::new(),
        }
    }

    /// Ends the run ([`RunState::end`]) and returns its slot pairs, reset for the next run of
    /// the same runtime ([`SlotPair::reset`]), when nothing else holds the run's state any
    /// more (its workers and watchdog have stopped and dropped theirs); else `None`, and they
    /// go with the state.
    pub(crate) fn into_pairs(self: Arc<Self>) -> Option<Box<[SlotPair]>> {
        // Ended whether or not the pairs can be kept: another holder may never drop it.
        self.end();
        let mut rs = Arc::try_unwrap(self).ok()?;
        let mut pairs = std::mem::take(&mut rs.pairs);
        for p in pairs.iter_mut() {
            p.reset();
        }
        Some(pairs)
    }

    /// The all-reduce of rank `rank` for quiescence detection, once (the rank's first worker
    /// takes it when it starts); `None` when the run is not split.
    pub(crate) fn take_all_reduce(&self, rank: usize) -> Option<AllReduceBox> {
        self.all_reduces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(rank)
            .and_then(Option::take)
    }

    /// The [`Owner`] part of trustee `g`'s export table, once (its worker takes it when it
    /// starts); `None` outside a split run.
    pub(crate) fn take_owner(&self, g: usize) -> Option<Owner<PropPtr>> {
        self.owners.lock().unwrap_or_else(|e| e.into_inner()).get_mut(g).and_then(Option::take)
    }

    /// The statistics of worker `w` (requests sent and local requests come from `issued`).
    pub(crate) fn stats_of(&self, w: usize) -> crate::stats::WorkerStats {
        let c = &self.counters[w];
        let mut s = c.stats.snapshot();
        for (trustee, i) in c.issued.iter().enumerate() {
            let i = i.load(Ordering::Acquire);
            if trustee == w {
                s.local_requests = i;
            } else {
                s.requests_sent += i;
            }
        }
        s
    }

    /// The slots of the pair (`client`, `trustee`).
    #[inline]
    pub(crate) fn pair(&self, client: usize, trustee: usize) -> &SlotPair {
        &self.pairs[(client - self.pair_lo) * self.pair_stride + (trustee - self.pair_lo)]
    }

    /// True in a loopback run ([`Config::loopback_ranks`] above 1): fake ranks in one process,
    /// which share its memory.
    #[inline]
    pub(crate) fn is_loopback(&self) -> bool {
        self.ranks > 1 && self.mpi_rank.is_none()
    }

    /// True when the run spans ranks (MPI, or the fake ranks of a loopback run).
    #[inline]
    pub(crate) fn is_split(&self) -> bool {
        self.ranks > 1
    }

    /// Stops the run before quiescence (a refused envelope, a corrupt release): its requests
    /// may be lost. One process (and a loopback split) stops at once; over MPI every rank
    /// must stop in the same detection round, so the flag travels in the next round's
    /// all-reduce (`super::quiesce_ranks`, `Gauges::aborted`) and each rank stops there.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        if self.mpi_rank.is_none() {
            self.stop();
        }
    }

    /// The run is over (its workers joined, its leftover frees done): forgets it for
    /// [`free::find_run`] (a later foreign free frees in place) and gives its run id back
    /// ([`crate::run_ids`]: the id is free again once the run's last property is gone).
    /// Called at the end of every run, and from `Drop` (once in all): fibers that never
    /// finished (a deadlock, a run stopped by a refused message) are leaked with the `Arc`s
    /// they hold, so the state itself may never be dropped.
    pub(crate) fn end(&self) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            free::unregister_run(self.run_id);
            crate::run_ids::run_ended(self.run_id);
        }
    }

    /// Ends the run's loops: sets the shutdown flag and wakes every parked worker to see it.
    pub(crate) fn stop(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.sleepers.wake_all();
    }

    pub(crate) fn record_error(&self, msg: String) {
        self.errors.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }

    pub(crate) fn set_deadlock(&self, blocked: u64, main_finished: bool) {
        *self.deadlock.lock().unwrap_or_else(|e| e.into_inner()) = Some((blocked, main_finished));
    }
}
