//! The runtime: the builder, `Runtime::run` (starting and joining the worker threads), and the
//! free functions a program calls inside a run.
//!
//! * [`worker`]: one worker thread's state and its loop (fibers, client role, trustee role).
//! * [`run_state`]: what the workers of one run share.
//! * [`context`]: the thread-local pointer from a worker thread to its worker.
//! * [`mod@spawn`]: fibers as user code sees them (`spawn`, `spawn_on`, `JoinHandle`).
//! * [`quiesce`]: global quiescence detection and its proof.
//! * [`quiesce_ranks`]: quiescence detection across ranks (rack mode), its all-reduce seam
//!   and its proof.
//! * [`free`]: the reference count and the property-free path, with their proof.
//! * [`export`]: reference counting across ranks, the owner side (export slots, returns).
//! * [`transport`](crate::transport): the seam between the worker loop and a transport for pairs across ranks,
//!   and the loopback transport of a split run ([`Builder::loopback_ranks`]).

pub(crate) mod anatomy;
pub(crate) mod context;
pub(crate) mod export;

pub(crate) mod free;
pub(crate) mod idle;
pub(crate) mod latch;
pub(crate) mod pool;
pub(crate) mod proxy;
pub(crate) mod quiesce;
pub(crate) mod quiesce_ranks;
pub(crate) mod refusal;
pub(crate) mod remote;
pub(crate) mod run_state;
pub(crate) mod spawn;
pub(crate) mod stall;
pub(crate) mod worker;

#[cfg(all(test, not(fw_loom)))]
mod kept_tests;

pub use spawn::{spawn, spawn_local_on, spawn_on, JoinHandle};

use crate::error::{panic_message, Error, Result};
use crate::stats::{RunTimes, Stats};
use crate::sync::{Arc, Mutex, Ordering};
use crate::transport::RackTransport;
use run_state::{Config, RunState, Split};
use std::panic::{catch_unwind, AssertUnwindSafe};
use worker::Worker;

/// Configures a [`Runtime`].
///
/// ```
/// let rt = skein::Runtime::builder().workers(2).fibers_per_worker(8).pin(false).build()?;
/// assert_eq!(rt.workers(), 2);
/// # Ok::<(), skein::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    cfg: Config,
    /// Whether `slot_size` was called; otherwise `build` picks the default for the worker count.
    slot_explicit: bool,
    /// A bad `SKEIN_LOOPBACK_RANKS` value, reported by `build`.
    env_error: Option<String>,
    /// `SKEIN_LOOPBACK_RANKS`, unless `loopback_ranks` was called.
    env_loopback: Option<usize>,
    /// `SKEIN_STALL_SECS`, which wins over [`Builder::stall_secs`].
    env_stall: Option<u64>,
}

/// A boolean environment variable: `Some(false)` for `0` or empty, `Some(true)` otherwise,
/// `None` when unset.
fn env_flag(name: &str) -> Option<bool> {
    std::env::var_os(name).map(|v| v != "0" && !v.is_empty())
}

/// The accepted values of [`Builder::rack_batch_bytes`].
const RACK_BATCH_BYTES: std::ops::RangeInclusive<usize> = 1024..=65536;
/// The default of [`Builder::rack_batch_bytes`]: the MPI transport's envelope.
const DEFAULT_RACK_BATCH_BYTES: usize = 4032;

/// The most batches' worth one request envelope may hold ([`Builder::envelope_batches`]).
const MAX_ENVELOPE_BATCHES: u32 = 16;
/// The default of [`Builder::envelope_batches`]: measured on 2 ranks of 2 and 4 workers
/// (`docs/performance.md`, "One envelope per destination rank"): with 1, an envelope's
/// segments share one batch's room, so batches shrink and response envelopes (one per
/// segment) grow in number; with 4, batches stay as full as with one envelope per pair and
/// the request envelopes are 1.7x (2 workers) to 3x (4 workers) fewer.
const DEFAULT_ENVELOPE_BATCHES: u32 = 4;

impl Default for Builder {
    /// The default settings. `SKEIN_LOOPBACK_RANKS=r` in the environment splits every runtime
    /// whose worker count `r` divides into `r` fake ranks ([`Builder::loopback_ranks`]; the
    /// others run unsplit), so that a whole test suite can run split; a value that is not a
    /// number of ranks is reported by [`Builder::build`]. Split, the calls that stay within
    /// one process (`entrust`, `apply_local`, `spawn_local_on`) refuse a worker of another
    /// fake rank as they do one of another MPI rank: the crate's doc examples, written for one
    /// process, fail under the variable, so `.ci/run` splits the test targets only
    /// (`cargo test --tests`). `SKEIN_ANATOMY=1` turns the loop timing on
    /// ([`Builder::anatomy`]), `SKEIN_ROUND_ENDS=1` the timing of rounds' ends alone
    /// ([`Builder::round_ends`]); `SKEIN_AGGREGATE=0` sends the requests staged for
    /// another rank on every loop pass instead of holding them until a batch is full or the
    /// worker goes idle (for measuring the aggregation). `SKEIN_WORKER_THREADS=t` sets
    /// [`Builder::worker_threads`].
    fn default() -> Self {
        let mut b = Builder {
            cfg: Config {
                workers: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
                fibers_per_worker: 4,
                pin: false,
                stack_size: 256 * 1024,
                worker_stack_size: 16 * 1024 * 1024,
                slot_overflow: crate::channel::slot::DEFAULT_OVERFLOW,
                loopback_ranks: 1,
                loopback_corrupt: None,
                rack_transport: RackTransport::Auto,
                anatomy: env_flag("SKEIN_ANATOMY").unwrap_or(false),
                round_ends: env_flag("SKEIN_ROUND_ENDS").unwrap_or(false),
                aggregate: env_flag("SKEIN_AGGREGATE").unwrap_or(true),
                envelope_batches: DEFAULT_ENVELOPE_BATCHES,
                rack_batch_bytes: DEFAULT_RACK_BATCH_BYTES,
                crowded_waits: idle::Crowded::Off,
                stall_secs: 0,
                worker_threads: 0,
            },
            slot_explicit: false,
            env_error: None,
            env_loopback: None,
            env_stall: None,
        };
        if let Ok(v) = std::env::var("SKEIN_TRANSPORT") {
            match v.parse::<RackTransport>() {
                Ok(t) => b.cfg.rack_transport = t,
                Err(e) => b.env_error = Some(format!("SKEIN_TRANSPORT: {e}")),
            }
        }
        if let Ok(v) = std::env::var("SKEIN_ENVELOPE_BATCHES") {
            match v.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_ENVELOPE_BATCHES).contains(&n) => b.cfg.envelope_batches = n,
                _ => {
                    b.env_error = Some(format!(
                        "SKEIN_ENVELOPE_BATCHES must be a number of batches from 1 to \
                         {MAX_ENVELOPE_BATCHES}, got {v:?}"
                    ))
                }
            }
        }
        if let Ok(v) = std::env::var("SKEIN_RACK_BATCH_BYTES") {
            match v.trim().parse::<usize>() {
                Ok(n) if RACK_BATCH_BYTES.contains(&n) => b.cfg.rack_batch_bytes = n,
                _ => {
                    b.env_error = Some(format!(
                        "SKEIN_RACK_BATCH_BYTES must be a number of bytes from {} to {}, got \
                         {v:?}",
                        RACK_BATCH_BYTES.start(),
                        RACK_BATCH_BYTES.end()
                    ))
                }
            }
        }
        if let Ok(v) = std::env::var("SKEIN_OVERSUBSCRIBED") {
            match idle::Crowded::parse(&v) {
                Some(c) => b.cfg.crowded_waits = c,
                None => {
                    b.env_error = Some(format!(
                        "SKEIN_OVERSUBSCRIBED must be 0 (off), auto (when the workers \
                         outnumber the cores) or 1 (always), got {v:?}"
                    ))
                }
            }
        }
        if let Ok(v) = std::env::var("SKEIN_WORKER_THREADS") {
            match v.trim().parse::<usize>() {
                Ok(t) => b.cfg.worker_threads = t,
                Err(_) => {
                    b.env_error = Some(format!(
                        "SKEIN_WORKER_THREADS must be a number of threads (0: as many as the \
                         cores when the workers outnumber them), got {v:?}"
                    ))
                }
            }
        }
        if let Ok(v) = std::env::var("SKEIN_STALL_SECS") {
            match v.trim().parse::<u64>() {
                Ok(s) => b.env_stall = Some(s),
                Err(_) => {
                    b.env_error = Some(format!(
                        "SKEIN_STALL_SECS must be a number of seconds (0 disables), got {v:?}"
                    ))
                }
            }
        }
        if let Ok(v) = std::env::var("SKEIN_LOOPBACK_RANKS") {
            match v.trim().parse::<usize>() {
                Ok(r) if r > 0 => b.env_loopback = Some(r),
                _ => {
                    b.env_error = Some(format!(
                        "SKEIN_LOOPBACK_RANKS must be a number of ranks (1 or more), got {v:?}"
                    ))
                }
            }
        }
        b
    }
}

impl Builder {
    /// Number of worker threads (default: available parallelism). Each is a trustee and a
    /// client.
    pub fn workers(mut self, n: usize) -> Self {
        self.cfg.workers = n;
        self
    }

    /// How many fibers per worker to expect: their stacks are allocated up front (a hint; any
    /// number of fibers may be spawned).
    pub fn fibers_per_worker(mut self, n: usize) -> Self {
        self.cfg.fibers_per_worker = n;
        self
    }

    /// Pin worker `w` to CPU `w % cpus` (Linux; ignored elsewhere).
    pub fn pin(mut self, pin: bool) -> Self {
        self.cfg.pin = pin;
        self
    }

    /// Stack size of each fiber in bytes (default 256 KiB; memory is committed lazily).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.cfg.stack_size = bytes;
        self
    }

    /// Size of the overflow block of each slot in bytes; the primary block is 128 bytes.
    /// Bigger slots mean bigger batches (fewer round trips per request) but cost
    /// `4 × workers²` slots of memory (a request and a response slot in each of the two lanes
    /// of every (client, trustee) pair, so that one batch is served while the next is filled).
    /// Default: 8192 with up to 16 workers (a batch then holds the 512 small requests of 16
    /// bytes a fiber stages before it waits; on 2 workers this took 15-30% fewer cycles per
    /// `apply_then` than 4096), 1024 above that.
    pub fn slot_size(mut self, overflow_bytes: usize) -> Self {
        self.cfg.slot_overflow = overflow_bytes;
        self.slot_explicit = true;
        self
    }

    /// Times the worker loop's phases (serving, issuing, transport progress, quiescence
    /// detection, waiting for a response, waiting for quiescence, idle) into
    /// [`crate::WorkerStats::anatomy`]: a clock read at each phase boundary of a loop pass,
    /// none per request. Off by default; `SKEIN_ANATOMY=1` in the environment turns it on for
    /// every runtime. The counters of [`crate::WorkerStats`] are always on.
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).anatomy(true).build()?;
    /// rt.run(|| skein::trustee(1).entrust(0u8).apply((), |c, ()| *c += 1))?;
    /// let a = rt.stats().total().anatomy;
    /// assert!(a.passes > 0 && a.total_ns() > 0);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn anatomy(mut self, on: bool) -> Self {
        self.cfg.anatomy = on;
        self
    }

    /// Times how long rounds take to end across ranks ([`crate::WorkerStats::round_ends`]:
    /// from the job's last work to each rank's verdict), without the rest of the anatomy
    /// ([`Builder::anatomy`] times them too): one clock read per loop pass that did
    /// something, where the anatomy reads the clock at every phase of every pass (at about 30
    /// ns a read on a VM, the anatomy made empty rounds between 2 ranks 2.5 times longer).
    /// Off by default; `SKEIN_ROUND_ENDS=1` in the environment turns it on for every runtime.
    /// Counted in runs over ranks only.
    pub fn round_ends(mut self, on: bool) -> Self {
        self.cfg.round_ends = on;
        self
    }

    /// Whether a worker holds the requests it stages for the trustees of another rank while
    /// it has fibers ready to run, until they fill an envelope (one per destination rank, a
    /// segment per trustee), the worker is about to go idle, or
    /// 16 busy loop passes went by (default on), rather than sending what is staged on every
    /// loop pass (fewer, fuller envelopes;
    /// `WorkerStats::mean_envelope`). `SKEIN_AGGREGATE=0` in the environment turns it off for
    /// every runtime. No effect on a run of one rank.
    pub fn aggregate(mut self, on: bool) -> Self {
        self.cfg.aggregate = on;
        self
    }

    /// How many full batches' worth one request envelope to another rank may hold over all
    /// its segments (one per trustee of the rank, each at most one batch; default 4, at most
    /// 16): an envelope leaves when the requests staged for the rank fill that much (or when
    /// the worker goes idle, [`Builder::aggregate`]). A batch is sized by the transport
    /// (over MPI and the shared-memory rings, an envelope of one batch stays under Open
    /// MPI's 4096-byte eager limit; a longer one goes by rendezvous over the MPI transport,
    /// while the rings take any length: 1 keeps every envelope under the limit). Values
    /// outside 1 to 16 are clamped. `SKEIN_ENVELOPE_BATCHES=n` in the
    /// environment sets the default of every runtime (a value outside 1 to 16 is reported by
    /// [`Builder::build`]).
    pub fn envelope_batches(mut self, n: u32) -> Self {
        self.cfg.envelope_batches = n.clamp(1, MAX_ENVELOPE_BATCHES);
        self
    }

    /// The most bytes one batch to another rank takes on the wire over the rings (shared
    /// memory within a node, RDMA verbs between nodes), when its requests are all of one
    /// closure type with a fixed-size argument (otherwise the budget scales with it). The
    /// default, 4032, is the MPI transport's (an envelope under Open MPI's 4096-byte eager
    /// limit), which the MPI transport always keeps; the rings take any length. Larger
    /// batches carry more requests per envelope: on 2 ranks of a 2-core machine 8192 made
    /// the 32-byte echo 1.6x faster and SSSP about 5 % slower (`docs/performance.md`, "What a
    /// run costs, and batches sized for the rings"). Values outside 1024 to 65536 are
    /// clamped. `SKEIN_RACK_BATCH_BYTES=n` in the environment sets the default of every
    /// runtime (a value outside that range is reported by [`Builder::build`]).
    pub fn rack_batch_bytes(mut self, bytes: usize) -> Self {
        self.cfg.rack_batch_bytes = bytes.clamp(*RACK_BATCH_BYTES.start(), *RACK_BATCH_BYTES.end());
        self
    }

    /// Whether a run whose workers outnumber the cores this process may use (over the
    /// shared-memory rings: every rank's workers on the node) waits *crowded*: an idle worker
    /// blocks at once, without spinning or yielding, a client holds its batches to the
    /// trustees of its own rank until they fill or age, and over the rings a first worker
    /// awaiting a response of its own posts only detector rounds another rank started
    /// (`runtime/idle.rs`, "More workers than cores"). Off by default: on a quiet 2-core
    /// machine it measured slower than spinning and yielding first (4 ranks of 1 worker
    /// 0.8x, 2 ranks of 2 workers 0.8x to 0.9x, 4 workers in one process 0.7x to 1x), and
    /// faster only where other processes loaded the cores (`docs/performance.md`).
    /// `SKEIN_OVERSUBSCRIBED=auto` (or `0`) in the environment sets the default of every
    /// runtime; `1` waits crowded whatever the count (for measuring).
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(8).crowded_waits(true).build()?;
    /// assert_eq!(rt.run(|| 6 * 7)?, 42);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn crowded_waits(mut self, on: bool) -> Self {
        self.cfg.crowded_waits = if on { idle::Crowded::Auto } else { idle::Crowded::Off };
        self
    }

    /// How many threads run the workers of a process (of a run in one process, or of a rank
    /// over the shared-memory rings): `0` (the default) for as many as the cores this
    /// process may use when the workers
    /// outnumber them, else one per worker; `t` for `t` threads (at most one per worker).
    /// Workers that share a thread run a pass of their loop each in turn
    /// (`runtime/worker/looping.rs`): a worker that waits for another of its thread hands it
    /// the thread at once, where a thread of its own would wait for a core. Results do not
    /// depend on it (the workers, their partitions and their trustees are the same); a fiber
    /// that blocks its thread (a busy loop that never yields, a lock held while waiting for
    /// another worker) blocks every worker of that thread. Over the shared-memory rings each
    /// rank does the same with its own workers, by default on its share of its cores (divided
    /// among the node's ranks with the same affinity mask: all of them when no launcher bound
    /// them; none when each was bound to cores of its own), the workers of a thread waiting
    /// on one futex word, which the other ranks learn at set-up (`transport/shm.rs`); over
    /// MPI messages and in loopback splits every worker keeps a thread of its own.
    /// `SKEIN_WORKER_THREADS=t` in the environment sets the default of every runtime.
    ///
    /// ```
    /// // Eight workers on one thread.
    /// let rt = skein::Runtime::builder().workers(8).worker_threads(1).build()?;
    /// let sum = rt.run(|| {
    ///     let handles: Vec<_> = (0..8).map(|w| skein::spawn_on(w, w as u64, |w| w * w)).collect();
    ///     handles.into_iter().map(|h| h.join()).sum::<u64>()
    /// })?;
    /// assert_eq!(sum, 140);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn worker_threads(mut self, threads: usize) -> Self {
        self.cfg.worker_threads = threads;
        self
    }

    /// A testing aid: runs the program as `r` fake ranks of `workers / r` workers inside one
    /// process. Requests between fake ranks travel as bytes through the rack-mode wire format
    /// and its validation (`docs/rack-mode.md` §3, §4.1), so a rack program can be tested
    /// without `mpirun`. Inside such a run [`crate::rank`] is the calling worker's fake rank,
    /// [`crate::ranks`] is `r`, [`crate::local_workers`] is `workers / r`, and
    /// [`crate::rank_of`] follows; [`crate::num_workers`] counts all workers. So the local-only
    /// calls (`apply_local`, `entrust`, `spawn_local_on`, ...) refuse ids of another fake
    /// rank, as they will refuse ids of another real rank, and every remote-capable call
    /// (`apply*`, `launch`, `spawn_on`, `entrust_new*`, `TrustArray`) crosses fake ranks as it
    /// crosses real ones. Default 1 (no split); see
    /// [`Builder::default`] for the environment variable `SKEIN_LOOPBACK_RANKS`.
    ///
    /// `workers` must be a multiple of `r` ([`Builder::build`] says so otherwise).
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(4).loopback_ranks(2).build()?;
    /// let r = rt.run(|| {
    ///     let t = skein::trustee(3).entrust_new(40u64, |x| x); // on fake rank 1
    ///     assert!(!t.is_local());
    ///     (skein::rank(), skein::ranks(), skein::local_workers(), t.apply(2u64, |c, k| *c + k))
    /// })?;
    /// assert_eq!(r, (0, 2, 2, 42));
    /// assert!(skein::Runtime::builder().workers(3).loopback_ranks(2).build().is_err());
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn loopback_ranks(mut self, r: usize) -> Self {
        self.cfg.loopback_ranks = r;
        self.env_error = None;
        self.env_loopback = None;
        self
    }

    /// How a run over MPI ranks moves envelopes between them (default [`RackTransport::Auto`]:
    /// shared-memory rings when every rank runs on one node; across nodes, the rings within
    /// each node that holds several ranks, and between nodes RDMA verbs where every rank has
    /// an active RDMA port (feature `rdma`), else MPI messages; or
    /// `SKEIN_TRANSPORT=auto|mpi|shm|verbs` in the environment, which [`Builder::default`]
    /// reads). Every run prints the transport it chose when it differs from the last
    /// (rank 0, to stderr), and [`crate::rack_transports`] says it per rank.
    /// Every rank must choose the same (checked at the start of every run); ignored outside
    /// `mpirun`.
    ///
    /// ```
    /// let b = skein::Runtime::builder().workers(2).rack_transport(skein::RackTransport::Mpi);
    /// let rt = b.build()?;
    /// assert_eq!(rt.workers(), 2);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn rack_transport(mut self, t: RackTransport) -> Self {
        self.cfg.rack_transport = t;
        if self.env_error.as_deref().is_some_and(|e| e.starts_with("SKEIN_TRANSPORT")) {
            self.env_error = None;
        }
        self
    }

    /// Prints a stall dump (every worker's fibers and what each waits on, requests staged and
    /// in flight, the transport's queues, the ranks not heard from; to stderr) when no task
    /// has started or finished anywhere for `secs` seconds; 0 (the default) never. A
    /// `SIGQUIT` (Ctrl-\\) asks for one at any time. The dump never changes the run's outcome.
    /// `SKEIN_STALL_SECS` in the environment wins over this setting.
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(1).stall_secs(60).build()?;
    /// assert_eq!(rt.run(|| 1)?, 1);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn stall_secs(mut self, secs: u64) -> Self {
        self.cfg.stall_secs = secs;
        self
    }

    /// Test hook of the loopback transport: flips byte `at` of the first request envelope it
    /// sends, so that a test can check that a corrupted envelope is refused with a clear error
    /// (never undefined behaviour). Not part of the API (feature `testing`).
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn loopback_corrupt_first_envelope(mut self, at: usize) -> Self {
        self.cfg.loopback_corrupt = Some(at);
        self
    }

    /// Checks the settings and returns the runtime (threads start in [`Runtime::run`]).
    ///
    /// ```
    /// assert!(skein::Runtime::builder().workers(0).build().is_err());
    /// ```
    ///
    /// Under `mpirun` (feature `mpi`) the first call runs the rack bootstrap
    /// ([`crate::rack::init`]), which is collective, and returns its error if this rank may not
    /// take part in the job.
    pub fn build(mut self) -> Result<Runtime> {
        crate::rack::init()?;
        if !self.slot_explicit {
            self.cfg.slot_overflow = if self.cfg.workers <= 16 {
                crate::channel::slot::DEFAULT_OVERFLOW_FEW_WORKERS
            } else {
                crate::channel::slot::DEFAULT_OVERFLOW
            };
        }
        if let Some(s) = self.env_stall {
            self.cfg.stall_secs = s;
        }
        if let Some(r) = self.env_loopback {
            if self.cfg.workers % r == 0 {
                self.cfg.loopback_ranks = r;
            }
        }
        let c = &self.cfg;
        if c.workers == 0 || c.workers > 4096 {
            return Err(Error::Config(format!("workers must be in 1..=4096, got {}", c.workers)));
        }
        if c.stack_size < 16 * 1024 {
            return Err(Error::Config(format!(
                "stack_size must be at least 16384 bytes, got {}",
                c.stack_size
            )));
        }
        if let Some(e) = &self.env_error {
            return Err(Error::Config(e.clone()));
        }
        if c.loopback_ranks == 0 || c.workers % c.loopback_ranks != 0 {
            return Err(Error::Config(format!(
                "loopback_ranks must be 1 or more and divide workers ({}), got {}",
                c.workers, c.loopback_ranks
            )));
        }
        if !(512..=1 << 24).contains(&c.slot_overflow) {
            return Err(Error::Config(format!(
                "slot_size (overflow bytes) must be in 512..=16777216, got {}",
                c.slot_overflow
            )));
        }
        Ok(Runtime {
            cfg: self.cfg,
            last_stats: Mutex::new(Stats::default()),
            pool: pool::Pool::default(),
            kept_pairs: Mutex::new(None),
        })
    }
}

/// Per rank, the transport of this process's last run over MPI ranks (empty before the
/// first).
#[cfg(feature = "mpi")]
static TRANSPORTS: Mutex<Vec<RackTransport>> = Mutex::new(Vec::new());

/// Per rank of the job, the transport this process's last run over MPI ranks reached it
/// with ([`RackTransport::Mpi`], [`RackTransport::Shm`] or [`RackTransport::Verbs`]; what
/// `auto` chose). This rank's own entry is its node's transport (its own workers talk
/// through in-process slots). A run that mixes has [`RackTransport::Shm`] for the ranks of
/// this rank's node and [`RackTransport::Mpi`] for the others (`docs/rack-mode.md` §4.6).
/// Empty before any such run, and always without the `mpi` feature. Rank 0 also prints the
/// choice (to stderr) when a run chooses otherwise than the last.
pub fn rack_transports() -> Vec<RackTransport> {
    #[cfg(feature = "mpi")]
    {
        TRANSPORTS.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    #[cfg(not(feature = "mpi"))]
    Vec::new()
}

/// The transport this process's last run over MPI ranks moved its envelopes with, when it
/// used one for every rank (the same on every rank); `None` before any such run, without
/// the `mpi` feature, or when the run mixed transports ([`rack_transports`] then says which
/// per rank).
pub fn rack_transport_used() -> Option<RackTransport> {
    let all = rack_transports();
    let first = *all.first()?;
    all.iter().all(|&t| t == first).then_some(first)
}

/// A delegation runtime: `workers` threads, each a trustee of its properties and a scheduler
/// of fibers. The threads start with the first [`Runtime::run`] and are kept, blocked,
/// between runs (with their fibers' stacks and the slots between them), so that a run does
/// not pay for starting them; dropping the runtime ends them. So a thread-local value that
/// code on a worker sets is still there in the next run of the same runtime (on the same
/// worker); a run of the runtime started while another of its runs goes on (from another
/// thread) gets threads and slots of its own.
#[derive(Debug)]
pub struct Runtime {
    cfg: Config,
    last_stats: Mutex<Stats>,
    /// The worker threads kept between runs.
    pool: pool::Pool,
    /// The slot pairs of the last run that ended, for the next one
    /// ([`RunState::into_pairs`]; a run started meanwhile makes its own).
    kept_pairs: Mutex<Option<Box<[crate::channel::slot::SlotPair]>>>,
}

impl Runtime {
    /// A builder with default settings.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.cfg.workers
    }

    /// The slot pairs kept from the last run, if any (for [`RunState::start`]).
    fn take_pairs(&self) -> Option<Box<[crate::channel::slot::SlotPair]>> {
        self.kept_pairs.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Ends a run whose workers have stopped, and keeps its slot pairs for the next run.
    fn keep_pairs(&self, run_state: Arc<RunState>) {
        if let Some(p) = run_state.into_pairs() {
            *self.kept_pairs.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        }
    }

    /// Per-worker counters of the last completed [`Runtime::run`]. Over MPI ranks they are
    /// every rank's workers, by global id, gathered at the end of the run (the same on every
    /// rank).
    pub fn stats(&self) -> Stats {
        self.last_stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Starts the workers, runs `main` as a fiber on worker 0, waits until the job is
    /// quiescent (every fiber finished, every request served, every continuation run), stops
    /// the workers and returns `main`'s value.
    ///
    /// Errors: a panic anywhere in user code ([`Error::Panicked`]; a panic of `main` itself is
    /// reported there too), a deadlock ([`Error::Deadlock`]), or a failure to start threads.
    /// Under `mpirun` with more than one rank the run is **collective**: every rank calls
    /// `run` (in the same order), `main` runs once, as a fiber on global worker 0 (rank 0),
    /// the workers of every rank serve requests and run fibers spawned on them, and the run
    /// ends when the job is quiescent on every rank. `main`'s value travels as bytes:
    /// every rank returns the same `Ok(value)` or the same error (panics recorded on any
    /// rank, named with their rank). The closure is dropped unrun on the other ranks. Every
    /// remote-capable call works across ranks: requests to properties of any rank (every call
    /// kind), `launch`, `spawn_on` and `JoinHandle::join`, `entrust_new` and
    /// `entrust_new_then`, handles inside `apply_with` messages, `TrustArray` over every
    /// rank, and [`wait_quiescent`] (`docs/rack-mode.md`, "Status"). A refused envelope (a
    /// forged or corrupted batch) ends the run on every rank with an error naming the sending
    /// rank.
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).build()?;
    /// let v = rt.run(|| {
    ///     let t = skein::trustee(1).entrust(40);
    ///     t.apply((), |x, ()| *x + 2)
    /// })?;
    /// assert_eq!(v, 42);
    /// # Ok::<(), skein::Error>(())
    /// ```
    ///
    /// `main`'s value must be serializable: across ranks it will travel as bytes to every rank
    /// (`docs/rack-mode.md` §1.2). A program that returns anything else (closures, `Arc`s,
    /// and handles, which serialize only inside their run) uses [`Runtime::run_local`]:
    ///
    /// ```compile_fail
    /// let rt = skein::Runtime::builder().workers(2).build()?;
    /// let _f = rt.run(|| || 1u64)?; // a closure is not serializable
    /// # Ok::<(), skein::Error>(())
    /// ```
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).build()?;
    /// let t = rt.run_local(|| skein::trustee(1).entrust(1u64))?;
    /// assert_eq!(t.trustee().worker(), 1);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn run<F, R>(&self, main: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        crate::rack::init()?;
        if crate::rack::ranks() > 1 {
            return self.run_ranks(main);
        }
        self.run_inner(main)
    }

    /// [`Runtime::run`] for a `main` whose value is not serializable (any `Send` value). It
    /// can only run on one rank: under `mpirun` with more than one rank it returns
    /// [`Error::Rack`] on every rank.
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).build()?;
    /// let counter = rt.run_local(|| std::sync::Arc::new(std::sync::atomic::AtomicU64::new(7)))?;
    /// assert_eq!(counter.load(std::sync::atomic::Ordering::Relaxed), 7);
    /// # Ok::<(), skein::Error>(())
    /// ```
    pub fn run_local<F, R>(&self, main: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        crate::rack::init()?;
        let ranks = crate::rack::ranks();
        if ranks > 1 {
            return Err(Error::Rack {
                rank: crate::rack::rank(),
                message: format!(
                    "run_local cannot run on {ranks} ranks; return a serializable value from run"
                ),
            });
        }
        self.run_inner(main)
    }

    /// Starts the workers `lo .. lo + cfg.workers` (global ids) of `run_state`, `main` on
    /// global worker 0 when it is among them, on the threads the runtime keeps between runs
    /// (`lease`: slots `0 .. cfg.workers`). On a failure to start one, the run is shut down
    /// and the error is returned beside the workers already started.
    fn start_workers(
        &self,
        run_state: &Arc<RunState>,
        lease: &mut pool::Lease<'_>,
        lo: usize,
        mut main: Option<impl FnOnce() + Send + 'static>,
    ) -> (Vec<pool::Pending>, Option<Error>) {
        // Workers share threads in one process unsplit, and over the shared-memory rings
        // (`RunState::rank_threads`): thread `t` of `T` runs the consecutive workers
        // `t·W/T .. (t+1)·W/T` (`transport::wake::thread_group`, by which the rings' wakers
        // find the word a group waits on).
        let workers = self.cfg.workers;
        let groups = run_state.rank_threads.clamp(1, workers);
        let mut started = Vec::with_capacity(groups);
        for slot in 0..groups {
            let block =
                crate::transport::wake::thread_group(slot * workers / groups, workers, groups);
            let ids = lo + block.start..lo + block.end;
            let rs = run_state.clone();
            let m = if ids.contains(&0) { main.take() } else { None };
            let first = ids.start;
            let name = || {
                if ids.len() == 1 {
                    format!("skein-worker-{first}")
                } else {
                    format!("skein-workers-{first}-{}", ids.end - 1)
                }
            };
            let job: pool::Job = Box::new({
                let ids = ids.clone();
                // Pinned as worker `w` would be (`Builder::pin`), or a shared thread by its
                // place among the threads.
                let pin_at = if ids.len() == 1 { first } else { slot };
                move |kept| worker_thread(ids, pin_at, rs, m, kept)
            });
            match lease.start(slot, name, self.cfg.worker_stack_size, job) {
                Ok(p) => started.push(p),
                Err(e) => {
                    run_state.stop();
                    return (started, Some(Error::Spawn { worker: first, source: e }));
                }
            }
        }
        (started, None)
    }

    /// Waits until the workers have finished; their failures (not user panics, which are
    /// recorded as the run's errors) in order. Then keeps the run's statistics and frees what
    /// foreign threads handed over after the workers stopped.
    fn join_workers(&self, run_state: &Arc<RunState>, started: Vec<pool::Pending>) -> Vec<Error> {
        let internal: Vec<Error> = started.into_iter().filter_map(|p| p.wait().err()).collect();
        *self.last_stats.lock().unwrap_or_else(|e| e.into_inner()) = Stats {
            workers: (0..run_state.n).map(|w| run_state.stats_of(w)).collect(),
            run: RunTimes::default(),
        };
        // Frees that arrived from foreign threads after the workers stopped.
        free::free_leftovers(run_state);
        internal
    }

    /// `main` wrapped to record its result (or panic) and mark the run's `main_done`.
    fn wrap_main<F, R>(
        run_state: &Arc<RunState>,
        main: F,
    ) -> (impl FnOnce() + Send + 'static, MainSlot<R>)
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let result: MainSlot<R> = Arc::new(Mutex::new(None));
        let wrapped = {
            let result = result.clone();
            let run_state = run_state.clone();
            move || {
                let r = catch_unwind(AssertUnwindSafe(main));
                *result.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                run_state.main_done.store(true, Ordering::Release);
            }
        };
        (wrapped, result)
    }

    /// A run in this process (one rank, or the fake ranks of a loopback split).
    fn run_inner<F, R>(&self, main: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let called = std::time::Instant::now();
        let run_state = RunState::start(self.cfg.clone(), Split::InProcess, self.take_pairs())
            .ok_or(Error::TooManyRuns)?;
        let (main, result) = Self::wrap_main(&run_state, main);
        let mut lease = self.pool.lease();
        let watchdog = stall::Watchdog::start(&run_state, &mut lease, self.cfg.workers);
        let start = std::time::Instant::now();
        let (started, spawn_err) = self.start_workers(&run_state, &mut lease, 0, Some(main));
        let internal = self.join_workers(&run_state, started);
        let ended = std::time::Instant::now();
        drop(watchdog);
        let main_result = result.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut errors =
            std::mem::take(&mut *run_state.errors.lock().unwrap_or_else(|e| e.into_inner()));
        let aborted = run_state.aborted.load(Ordering::Acquire);
        let deadlock = *run_state.deadlock.lock().unwrap_or_else(|e| e.into_inner());
        // Ends the run (its workers have stopped).
        self.keep_pairs(run_state);
        self.last_stats.lock().unwrap_or_else(|e| e.into_inner()).run =
            RunTimes::of(called, start, ended);
        if let Some(e) = spawn_err {
            return Err(e);
        }
        if let Some(e) = internal.into_iter().next() {
            return Err(e);
        }
        if let Some(Err(p)) = &main_result {
            errors.insert(0, format!("main fiber panicked: {}", panic_message(&**p)));
        }
        if !errors.is_empty() {
            let (first, count) = (errors[0].clone(), errors.len());
            if aborted {
                return Err(Error::Refused { first, count });
            }
            return Err(Error::Panicked { first, count });
        }
        if let Some((blocked, main_finished)) = deadlock {
            return Err(Error::Deadlock { blocked, main_finished });
        }
        match main_result {
            Some(Ok(r)) => Ok(r),
            _ => Err(Error::Internal("main fiber produced no result".into())),
        }
    }

    /// A run over the MPI ranks of the job (`docs/rack-mode.md` §1.2): collective; `main`
    /// runs on rank 0, every rank returns the same outcome.
    #[cfg(not(feature = "mpi"))]
    fn run_ranks<F, R>(&self, _main: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        // Without the feature the bootstrap never reports more than one rank.
        Err(Error::RackNotYetSupported { rank: crate::rack::rank(), ranks: crate::rack::ranks() })
    }

    /// A run over the MPI ranks of the job (`docs/rack-mode.md` §1.2): collective; `main`
    /// runs on rank 0, every rank returns the same outcome.
    #[cfg(feature = "mpi")]
    fn run_ranks<F, R>(&self, main: F) -> Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: serde::Serialize + serde::de::DeserializeOwned + Send + 'static,
    {
        use crate::rack::outcome::{self, MainFailure, RankReport};
        use crate::transport::mpi::endpoint as mt;
        use crate::transport::mpi::MpiLink;
        use crate::transport::shm::{self, ShmLink};
        use crate::transport::RackTransport as Kind;
        /// The run's transport, kept to close it after the workers stopped.
        enum Opened {
            Mpi(mt::Endpoints, Arc<MpiLink>),
            Shm(Arc<ShmLink>),
            /// The rings within each node, MPI between nodes.
            Mixed(mt::Endpoints, Arc<MpiLink>, Arc<ShmLink>),
            #[cfg(feature = "rdma")]
            Verbs(Arc<crate::transport::verbs::VerbsLink>),
            /// The rings within each node, RDMA verbs between nodes.
            #[cfg(feature = "rdma")]
            MixedVerbs(Arc<crate::transport::verbs::VerbsLink>, Arc<ShmLink>),
        }
        let called = std::time::Instant::now();
        let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
        let rack_err = |message: String| Error::Rack { rank, message };
        let w = self.cfg.workers;
        let kind = self.cfg.rack_transport;
        // Every rank must take the same decision before the first collective of the run.
        crate::rack::agree_shape(w, self.cfg.loopback_ranks, kind.code(), Kind::name_of)
            .map_err(rack_err)?;
        let job_run = outcome::next_job_run();
        let token = crate::rack::job_token().unwrap_or(0);
        const MAX_ENVELOPE: usize = 1 << 30;
        let open_mpi_link = || -> Result<(mt::Endpoints, Arc<MpiLink>)> {
            let config = mt::Config {
                max_envelope_bytes: MAX_ENVELOPE,
                window: mt::DEFAULT_WINDOW,
                body_timeout: mt::BODY_TIMEOUT,
            };
            let (endpoints, eps) = mt::open(w, config).map_err(rack_err)?;
            Ok((endpoints, Arc::new(MpiLink::new(token, rank, eps))))
        };
        let open_mpi = || -> Result<(Opened, Box<dyn crate::transport::Transport>)> {
            let (endpoints, link) = open_mpi_link()?;
            Ok((Opened::Mpi(endpoints, link.clone()), Box::new(link)))
        };
        // `auto`'s fallback when a transport could not be set up on every rank (agreed):
        // rank 0 says why, and every rank takes MPI.
        let mpi_instead = |e: String| -> Result<(Opened, Box<dyn crate::transport::Transport>)> {
            if rank == 0 {
                eprintln!("skein: {e}; using the MPI transport instead");
            }
            open_mpi()
        };
        // Every rank's node (collective; `auto` and `shm` only).
        let nodes = match kind {
            Kind::Auto | Kind::Shm => shm::node_keys().map_err(rack_err)?,
            Kind::Mpi | Kind::Verbs => Vec::new(),
        };
        let one_node = shm::other_node(&nodes).is_none();
        // The settings the rings were set up or taken with, to keep them at the end.
        let shm_config = std::cell::Cell::new(None);
        // Collective, and failing on every rank alike (agreed), so that `auto` falls back on
        // every rank or on none.
        let open_shm = || -> std::result::Result<Arc<ShmLink>, String> {
            // The settings, agreed, and the rings of the last run when every rank kept them
            // for this shape (one collective).
            let config = shm::Config::from_env(
                MAX_ENVELOPE,
                self.cfg.rack_batch_bytes,
                self.cfg.worker_threads,
                idle::cores(),
            );
            let (config, kept) = shm::agree_and_reuse(w, config, &nodes)?;
            shm_config.set(Some(config));
            match kept {
                Some(link) => Ok(link),
                None => ShmLink::open(w, token, job_run, config, &nodes).map(Arc::new),
            }
        };
        let near: Vec<bool> =
            nodes.iter().map(|&n| n == nodes.get(rank).copied().unwrap_or(0)).collect();
        // Some node holds several ranks: the rings pay off within it.
        let shared_node = nodes.iter().any(|&n| nodes.iter().filter(|&&m| m == n).count() > 1);
        // The rings within each node (set up already), MPI between nodes.
        let mixed_mpi =
            |rings: Arc<ShmLink>| -> Result<(Opened, Box<dyn crate::transport::Transport>)> {
                let (endpoints, mpi) = open_mpi_link()?;
                let mixed = crate::transport::mixed::Mixed::new(
                    rings.clone(),
                    mpi.clone(),
                    near.clone(),
                    w,
                );
                Ok((Opened::Mixed(endpoints, mpi, rings), Box::new(mixed)))
            };
        let open_mixed = || -> Result<(Opened, Box<dyn crate::transport::Transport>)> {
            match open_shm() {
                Ok(rings) => mixed_mpi(rings),
                Err(e) => mpi_instead(e),
            }
        };
        // Collective, failing on every rank alike: every rank has an active RDMA port and
        // every rank set the queue pairs up, or the error of the first rank that could not.
        // Between every pair of ranks (`links`), or between nodes only.
        #[cfg(feature = "rdma")]
        let open_verbs = |links: &crate::transport::verbs_conn::Links| -> std::result::Result<
            Arc<crate::transport::verbs::VerbsLink>,
            String,
        > {
            // (The verbs rings share no threads: the threads and cores are not used there.)
            let config = crate::rack::agree_ok(shm::Config::from_env(
                MAX_ENVELOPE,
                self.cfg.rack_batch_bytes,
                self.cfg.threads(),
                idle::cores(),
            ))?;
            crate::transport::verbs::VerbsLink::open(w, token, config, links).map(Arc::new)
        };
        #[cfg(feature = "rdma")]
        let every_pair = crate::transport::verbs_conn::Links::all(ranks);
        // The rings within each node, verbs between nodes; the rings with MPI where verbs
        // cannot be set up, MPI alone where the rings cannot.
        #[cfg(feature = "rdma")]
        let open_mixed_verbs = || -> Result<(Opened, Box<dyn crate::transport::Transport>)> {
            let rings = match open_shm() {
                Ok(rings) => rings,
                Err(e) => return mpi_instead(e),
            };
            let links = crate::transport::verbs_conn::Links::between_nodes(&nodes);
            match open_verbs(&links) {
                Ok(verbs) => {
                    let mixed = crate::transport::mixed::Mixed::new(
                        rings.clone(),
                        verbs.clone(),
                        near.clone(),
                        w,
                    );
                    Ok((Opened::MixedVerbs(verbs, rings), Box::new(mixed)))
                }
                Err(e) => {
                    if rank == 0 {
                        eprintln!("skein: {e}; using MPI between the nodes instead");
                    }
                    mixed_mpi(rings)
                }
            }
        };
        #[cfg(not(feature = "rdma"))]
        let open_verbs = |()| -> std::result::Result<std::convert::Infallible, String> {
            crate::rack::agree_ok(Err("the RDMA verbs transport was asked for, but skein was \
                 built without the `rdma` feature (build with `--features rdma`, or use \
                 SKEIN_TRANSPORT=shm or mpi)"
                .to_string()))
        };
        let shm_opened = |link: Arc<ShmLink>| {
            (Opened::Shm(link.clone()), Box::new(link) as Box<dyn crate::transport::Transport>)
        };
        #[cfg(feature = "rdma")]
        let verbs_opened = |link: Arc<crate::transport::verbs::VerbsLink>| {
            (Opened::Verbs(link.clone()), Box::new(link) as Box<dyn crate::transport::Transport>)
        };
        // Across nodes, `auto` asks every rank for an active RDMA port (collective, once).
        #[cfg(feature = "rdma")]
        let rdma_ports =
            kind == Kind::Auto && !one_node && crate::transport::verbs::every_rank_has_a_port();
        let (opened, transport) = match kind {
            Kind::Mpi => open_mpi()?,
            Kind::Shm => {
                if let Some(r) = shm::other_node(&nodes) {
                    return Err(rack_err(format!(
                        "the shared-memory transport needs every rank on one node; rank {r} runs \
                         on another node than rank 0 (use SKEIN_TRANSPORT=auto to mix it with \
                         MPI between nodes, or mpi)"
                    )));
                }
                shm_opened(open_shm().map_err(rack_err)?)
            }
            #[cfg(feature = "rdma")]
            Kind::Verbs => verbs_opened(open_verbs(&every_pair).map_err(rack_err)?),
            #[cfg(not(feature = "rdma"))]
            Kind::Verbs => match open_verbs(()).map_err(rack_err)? {},
            Kind::Auto if one_node => match open_shm() {
                Ok(link) => shm_opened(link),
                Err(e) => mpi_instead(e)?,
            },
            // Across nodes: verbs where every rank has an active RDMA port (with the rings
            // within the nodes that hold several ranks), else MPI.
            #[cfg(feature = "rdma")]
            Kind::Auto if shared_node && rdma_ports => open_mixed_verbs()?,
            #[cfg(feature = "rdma")]
            Kind::Auto if rdma_ports => match open_verbs(&every_pair) {
                Ok(link) => verbs_opened(link),
                Err(e) => mpi_instead(e)?,
            },
            // Across nodes, some of which hold several ranks: the rings within them.
            Kind::Auto if shared_node => open_mixed()?,
            Kind::Auto => open_mpi()?,
        };
        let one = |t: Kind| vec![t; ranks];
        let used = match &opened {
            Opened::Mpi(..) => one(Kind::Mpi),
            Opened::Shm(..) => one(Kind::Shm),
            Opened::Mixed(..) => {
                near.iter().map(|&n| if n { Kind::Shm } else { Kind::Mpi }).collect()
            }
            #[cfg(feature = "rdma")]
            Opened::Verbs(..) => one(Kind::Verbs),
            #[cfg(feature = "rdma")]
            Opened::MixedVerbs(..) => {
                near.iter().map(|&n| if n { Kind::Shm } else { Kind::Verbs }).collect()
            }
        };
        let changed = {
            let mut last = TRANSPORTS.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *last, used.clone()) != used
        };
        if changed && rank == 0 {
            // Once per process and change (a job runs many runs).
            match &opened {
                Opened::Mixed(..) => eprintln!(
                    "skein: rack transport: shm within each node, mpi between nodes (nodes: {}; \
                     asked: {kind})",
                    shm::describe_nodes(&nodes)
                ),
                #[cfg(feature = "rdma")]
                Opened::MixedVerbs(..) => eprintln!(
                    "skein: rack transport: shm within each node, verbs between nodes (nodes: \
                     {}; asked: {kind})",
                    shm::describe_nodes(&nodes)
                ),
                _ => eprintln!(
                    "skein: rack transport: {} between all {ranks} ranks (asked: {kind})",
                    used[0]
                ),
            }
        }
        // Over the rings, the detector's rounds go over the rings' board too (no MPI call).
        let all_reduce: Box<dyn quiesce_ranks::AllReduce + Send> = match &opened {
            Opened::Shm(link) => Box::new(quiesce_ranks::shm::ShmAllReduce::new(link.board())),
            #[cfg(feature = "rdma")]
            Opened::Verbs(..) | Opened::MixedVerbs(..) => {
                Box::new(quiesce_ranks::mpi::MpiAllReduce::new().map_err(rack_err)?)
            }
            Opened::Mpi(..) | Opened::Mixed(..) => {
                Box::new(quiesce_ranks::mpi::MpiAllReduce::new().map_err(rack_err)?)
            }
        };
        let split = Split::Mpi { job_run, rank, ranks, transport, all_reduce };
        let Some(run_state) = RunState::start(self.cfg.clone(), split, self.take_pairs()) else {
            // The other ranks are in the run already: fate sharing.
            crate::rack::abort(1, &Error::TooManyRuns.to_string());
        };
        let (main, result) = Self::wrap_main(&run_state, main);
        let mut lease = self.pool.lease();
        let watchdog = stall::Watchdog::start(&run_state, &mut lease, w);
        let start = std::time::Instant::now();
        let (started, spawn_err) = self.start_workers(&run_state, &mut lease, rank * w, Some(main));
        if let Some(e) = spawn_err {
            // The other ranks would wait for this one's workers forever: fate sharing.
            crate::rack::abort(1, &e.to_string());
        }
        let internal = self.join_workers(&run_state, started);
        let ended = std::time::Instant::now();
        drop(watchdog);
        let mut report = RankReport {
            errors: std::mem::take(
                &mut *run_state.errors.lock().unwrap_or_else(|e| e.into_inner()),
            ),
            deadlock: *run_state.deadlock.lock().unwrap_or_else(|e| e.into_inner()),
            internal: internal.iter().map(|e| e.to_string()).collect(),
            aborted: run_state.aborted.load(Ordering::Acquire),
            main: None,
            stats: (rank * w..(rank + 1) * w).map(|g| run_state.stats_of(g)).collect(),
        };
        let aborted = run_state.aborted.load(Ordering::Acquire);
        let close_mpi =
            |report: &mut RankReport, endpoints: mt::Endpoints, link: Arc<MpiLink>| match endpoints
                .close(link.take_endpoints())
            {
                Ok(left) => {
                    if !aborted
                        && (left.sends_in_flight > 0
                            || left.receives_in_flight > 0
                            || left.undelivered > 0)
                    {
                        report.internal.push(format!(
                            "the transport closed with messages left over: {left:?}"
                        ));
                    }
                }
                Err(e) => report.internal.push(format!("the transport did not close: {e}")),
            };
        let close_shm = |report: &mut RankReport, link: Arc<ShmLink>| {
            let left = link.leftovers();
            if !aborted && (left.unsent > 0 || left.undelivered > 0) {
                report
                    .internal
                    .push(format!("the transport closed with messages left over: {left:?}"));
            }
        };
        #[cfg(feature = "rdma")]
        let close_verbs =
            |report: &mut RankReport, link: Arc<crate::transport::verbs::VerbsLink>| {
                // Collective: every rank's writes retired before any rank's memory goes.
                if let Err(e) = link.close(std::time::Duration::from_secs(10)) {
                    report.internal.push(format!("the transport did not close: {e}"));
                }
                let left = link.leftovers();
                if !aborted && (left.unsent > 0 || left.undelivered > 0) {
                    report
                        .internal
                        .push(format!("the transport closed with messages left over: {left:?}"));
                }
            };
        // The rings, kept for the next run if this one ends cleanly on every rank.
        let rings = match &opened {
            Opened::Shm(rings) | Opened::Mixed(_, _, rings) => Some(rings.clone()),
            #[cfg(feature = "rdma")]
            Opened::MixedVerbs(_, rings) => Some(rings.clone()),
            Opened::Mpi(..) => None,
            #[cfg(feature = "rdma")]
            Opened::Verbs(..) => None,
        };
        match opened {
            Opened::Mpi(endpoints, link) => close_mpi(&mut report, endpoints, link),
            Opened::Shm(link) => close_shm(&mut report, link),
            Opened::Mixed(endpoints, mpi, rings) => {
                close_mpi(&mut report, endpoints, mpi);
                close_shm(&mut report, rings);
            }
            #[cfg(feature = "rdma")]
            Opened::Verbs(link) => close_verbs(&mut report, link),
            #[cfg(feature = "rdma")]
            Opened::MixedVerbs(verbs, rings) => {
                close_verbs(&mut report, verbs);
                close_shm(&mut report, rings);
            }
        }
        if rank == 0 {
            report.main = Some(match result.lock().unwrap_or_else(|e| e.into_inner()).take() {
                Some(Ok(r)) => {
                    crate::wire::codec::encode(&r).map_err(|e| MainFailure::Encode(e.to_string()))
                }
                Some(Err(p)) => Err(MainFailure::Panicked(panic_message(&*p))),
                None => Err(MainFailure::Missing),
            });
        }
        self.keep_pairs(run_state);
        let decision = outcome::exchange(&report, w).map_err(rack_err)?;
        // The same decision on every rank: every rank keeps its rings, or none does.
        if let (Some(rings), Some(config)) = (rings, shm_config.get()) {
            if decision.outcome.leaves_transport_clean() {
                shm::keep(w, config, &nodes, rings);
            }
        }
        // Every rank's workers, as `Runtime::stats` shows them in one process.
        *self.last_stats.lock().unwrap_or_else(|e| e.into_inner()) =
            Stats { workers: decision.stats, run: RunTimes::of(called, start, ended) };
        let bytes = decision.outcome.into_result()?;
        crate::wire::codec::decode::<R>(&bytes).map_err(|e| {
            Error::Internal(format!("rank {rank}: the value of main does not decode: {e}"))
        })
    }
}

/// Where `main`'s result (or panic) lands.
type MainSlot<R> = Arc<Mutex<Option<std::thread::Result<R>>>>;

fn worker_thread(
    ids: std::ops::Range<usize>,
    pin_at: usize,
    run_state: Arc<RunState>,
    main: Option<impl FnOnce() + 'static>,
    kept: &mut pool::Kept,
) -> Result<()> {
    crate::rack::mark_worker_thread();
    struct StopOnPanic(Arc<RunState>);
    impl Drop for StopOnPanic {
        fn drop(&mut self) {
            if std::thread::panicking() {
                if self.0.mpi_rank.is_some() {
                    // The other ranks would wait for this one forever: fate sharing.
                    crate::rack::abort(1, "a skein worker failed (see the panic above)");
                }
                self.0.stop();
            }
        }
    }
    let _stop = StopOnPanic(run_state.clone());
    if run_state.cfg.pin {
        pin_current_thread(pin_at);
    }
    let mut workers = Vec::with_capacity(ids.len());
    for index in ids.clone() {
        match Worker::new(index, run_state.clone(), kept.stacks.pop()) {
            Ok(w) => workers.push(w),
            Err(e) => {
                run_state.stop();
                return Err(Error::Spawn { worker: index, source: e });
            }
        }
    }
    if let Some(m) = main {
        // Global worker 0 is the first of its thread's workers.
        let _entered = context::enter(&workers[0]);
        workers[0].spawn_local(m);
    }
    if let [w] = &workers[..] {
        let _entered = context::enter(w);
        w.run_loop();
    } else {
        worker::looping::run_shared(&workers);
    }
    kept.stacks.extend(workers.iter().map(|w| w.take_stacks()));
    Ok(())
}

/// Pins the calling thread to CPU `index % cpus`, as [`Builder::pin`] does for workers
/// (Linux; elsewhere it does nothing). Best effort: a refusal by the OS is ignored.
/// Benchmarks use it to pin the threads they compare against workers.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(index: usize) {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    // SAFETY: `set` is a plain bitmask on our stack, zero-initialised as CPU_ZERO requires, and
    // sched_setaffinity only reads it; pid 0 means the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(index % cpus, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Pins the calling thread (not supported on this OS: does nothing).
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_index: usize) {}

/// Lets the other fibers of this worker and its loop run, then continues.
///
/// # Panics
/// Outside a fiber or in delegated context.
pub fn yield_now() {
    let w = context::expect("yield_now");
    w.check_may_block("yield_now");
    w.yield_now();
}

/// Blocks the calling fiber until the whole job is quiescent: every request issued so far by
/// anyone (and everything those requests and their continuations issued, transitively) has
/// been served and its continuation has run, and every other fiber has finished or is parked
/// in `wait_quiescent` too. Detection never uses timeouts; see the `quiesce` module docs
/// (in the source) for the correctness argument.
///
/// **Memory:** within one process, every write made by a task that finished before the
/// quiescence (a fiber's segment, a delegated closure, a continuation, on any worker)
/// happens before `wait_quiescent` returns: each task's finish is published with a Release
/// store, the detector reads it with Acquire, and the wake-up reaches the caller through a
/// Release/Acquire slot publication. Kernels rely on it to read, after a round, what other
/// workers wrote during the round into memory they share (`skein-algorithms`' BFS frontier).
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// use std::sync::Arc;
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let hits = Arc::new(AtomicU64::new(0));
/// let t = skein::trustee(1).entrust(0u64);
/// for _ in 0..100 {
///     let h = hits.clone();
///     t.apply_then((), |c, ()| *c += 1, move |()| { h.fetch_add(1, Relaxed); });
/// }
/// skein::wait_quiescent();
/// assert_eq!(hits.load(Relaxed), 100);
/// # }).unwrap();
/// ```
///
/// # Panics
/// Outside a fiber or in delegated context.
pub fn wait_quiescent() {
    let w = context::expect("wait_quiescent");
    w.note_wait(stall::Wait::Quiescence);
    w.wait_quiescent();
}

/// How many counters [`quiescent_add`] adds to and [`wait_quiescent_sum`] sums.
pub const QUIESCENT_LANES: usize = 4;

/// Adds `values` to the calling worker's *lanes*: [`QUIESCENT_LANES`] counters (wrapping)
/// that the quiescence detector sums over every worker of every rank, so that
/// [`wait_quiescent_sum`] returns their job-wide totals. Callable from any code that runs on
/// a worker: a fiber, a delegated closure on its trustee, a continuation.
///
/// This lets a kernel learn what a round did (vertices reached, arcs relaxed) from the
/// quiescence that ends the round, with no gather of its own: a trustee counts what it
/// applies as it applies it, and every driver reads the same totals when the round ends.
///
/// # Panics
/// Outside a runtime.
pub fn quiescent_add(values: [u64; QUIESCENT_LANES]) {
    context::expect("quiescent_add").add_to_lanes(values);
}

/// The calling worker's own lanes ([`quiescent_add`]): what code on this worker added so far
/// in this run. Summed over every worker at a moment when nothing adds to them (say, in the
/// fibers of a superstep that follows a quiescence), they are the totals a
/// [`wait_quiescent_sum`] would return then: a baseline to subtract from later totals.
///
/// # Panics
/// Outside a runtime.
pub fn quiescent_lanes() -> [u64; QUIESCENT_LANES] {
    context::expect("quiescent_lanes").lanes()
}

/// [`wait_quiescent`], returning the totals of the lanes ([`quiescent_add`]) over every worker
/// of every rank since the run started (wrapping sums), as they were at the quiescence that
/// woke the caller. They are exact (nothing runs during quiescence, so nothing adds), and
/// every fiber that one quiescence wakes, on every worker and rank, gets the same totals.
/// Across ranks they travel in the detector's all-reduce: no message of their own.
///
/// A round's own counts are the difference between the totals at its end and those at its
/// start (the previous round's end, or a baseline from [`quiescent_lanes`]).
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let t = skein::trustee(1).entrust(0u64);
/// for i in 1..=10 {
///     // Each closure counts on its trustee what it applied.
///     t.apply_then(i, |c, i| { *c += i; skein::quiescent_add([1, i, 0, 0]) }, |()| ());
/// }
/// let [calls, sum, ..] = skein::wait_quiescent_sum();
/// assert_eq!((calls, sum), (10, 55));
/// # }).unwrap();
/// ```
///
/// # Panics
/// Outside a fiber or in delegated context.
pub fn wait_quiescent_sum() -> [u64; QUIESCENT_LANES] {
    let w = context::expect("wait_quiescent_sum");
    w.note_wait(stall::Wait::Quiescence);
    w.wait_quiescent().sums
}

/// How many minimum lanes [`quiescent_min`] lowers and [`wait_quiescent_totals`] reduces.
pub const QUIESCENT_MINS: usize = 2;

/// What a quiescence tells the fibers it wakes ([`wait_quiescent_totals`]), the same on every
/// worker of every rank: the lanes' totals and the minimum lanes' minima.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuiescentTotals {
    /// The lanes of [`quiescent_add`], summed (wrapping) over every worker of every rank.
    pub sums: [u64; QUIESCENT_LANES],
    /// The minimum lanes of [`quiescent_min`] and [`quiescent_set_min`], their minimum over
    /// every worker of every rank (`u64::MAX` where no worker lowered one).
    pub mins: [u64; QUIESCENT_MINS],
}

impl Default for QuiescentTotals {
    /// No sum yet, every minimum unset (`u64::MAX`).
    fn default() -> QuiescentTotals {
        QuiescentTotals { sums: [0; QUIESCENT_LANES], mins: [u64::MAX; QUIESCENT_MINS] }
    }
}

impl QuiescentTotals {
    /// Combines the totals of two sets of workers: sums add (wrapping), minima take the
    /// lower.
    #[must_use]
    pub fn combine(self, o: QuiescentTotals) -> QuiescentTotals {
        QuiescentTotals {
            sums: std::array::from_fn(|i| self.sums[i].wrapping_add(o.sums[i])),
            mins: std::array::from_fn(|i| self.mins[i].min(o.mins[i])),
        }
    }
}

/// Lowers the calling worker's minimum lane `lane` to `value` when it is below it: one of
/// [`QUIESCENT_MINS`] per-worker values (`u64::MAX` at the start of a run) whose minimum over
/// every worker of every rank the quiescence detector hands to [`wait_quiescent_totals`].
/// Callable from any code that runs on a worker, as [`quiescent_add`].
///
/// Unlike a lane, a minimum lane is a *value*, not a count: it is read at quiescence as it
/// is then. A kernel keeps it equal to something of its partition that it needs the minimum
/// of when its round ends (its lowest pending bucket, say): it sets it when it knows it
/// ([`quiescent_set_min`], which may raise it) and lowers it wherever the value may drop
/// after that (in the closures that serve the round's requests), so that it is exact when
/// the round's quiescence reads it.
///
/// # Panics
/// Outside a runtime, or when `lane >= QUIESCENT_MINS`.
pub fn quiescent_min(lane: usize, value: u64) {
    context::expect("quiescent_min").lower_min(lane, value, false);
}

/// Sets the calling worker's minimum lane `lane` to `value`, raising it or lowering it
/// ([`quiescent_min`]): `u64::MAX` withdraws this worker from that minimum.
///
/// # Panics
/// Outside a runtime, or when `lane >= QUIESCENT_MINS`.
pub fn quiescent_set_min(lane: usize, value: u64) {
    context::expect("quiescent_set_min").lower_min(lane, value, true);
}

/// [`wait_quiescent`], returning what the quiescence that woke the caller found: the totals
/// of the lanes ([`wait_quiescent_sum`]) and the minima of the minimum lanes
/// ([`quiescent_min`]) over every worker of every rank. Both are exact (nothing runs during
/// quiescence), the same for every fiber one quiescence wakes, and travel in the detector's
/// all-reduce across ranks.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(3).build().unwrap();
/// # rt.run(|| {
/// // Each worker's lowest value of a round: the lowest of all of them, at its end.
/// let fibers: Vec<_> = (0..3u64)
///     .map(|w| {
///         skein::spawn_on(w as usize, w, |w| {
///             skein::quiescent_set_min(0, 10 + w);
///             skein::wait_quiescent_totals().mins[0]
///         })
///     })
///     .collect();
/// assert!(fibers.into_iter().all(|f| f.join() == 10));
/// # }).unwrap();
/// ```
///
/// # Panics
/// Outside a fiber or in delegated context.
pub fn wait_quiescent_totals() -> QuiescentTotals {
    let w = context::expect("wait_quiescent_totals");
    w.note_wait(stall::Wait::Quiescence);
    w.wait_quiescent()
}

/// The calling worker's own minimum lanes ([`quiescent_min`]).
///
/// # Panics
/// Outside a runtime.
pub fn quiescent_mins() -> [u64; QUIESCENT_MINS] {
    context::expect("quiescent_mins").mins()
}

/// Index of the worker running the caller.
///
/// # Panics
/// Outside a runtime.
pub fn current_worker() -> usize {
    context::expect("current_worker").index
}

/// Number of workers of the running runtime (of every rank: `ranks() * local_workers()`).
///
/// # Panics
/// Outside a runtime.
pub fn num_workers() -> usize {
    context::expect("num_workers").n
}

/// This process's rank in the rack job: `0..ranks()`; 0 without the `mpi` feature and
/// outside `mpirun`. Inside a loopback run ([`Builder::loopback_ranks`]) it is the fake rank
/// of the calling worker. Outside a run it is [`crate::rack::rank`] (the first call may run
/// the bootstrap, which is collective).
///
/// ```
/// if skein::rank() == 0 {
///     println!("only rank 0 prints the report");
/// }
/// ```
pub fn rank() -> usize {
    match context::current() {
        Some(w) => w.rank,
        None => crate::rack::rank(),
    }
}

/// Number of ranks (processes) in the rack job: 1 without the `mpi` feature and outside
/// `mpirun`; inside a loopback run ([`Builder::loopback_ranks`]), its fake ranks. Outside a
/// run it is [`crate::rack::ranks`].
pub fn ranks() -> usize {
    match context::current() {
        Some(w) => w.run_state.ranks,
        None => crate::rack::ranks(),
    }
}

/// Number of workers of this rank (W): the global ids `rank() * W .. (rank() + 1) * W` are
/// this process's (`docs/rack-mode.md` §1.1). With one rank it is [`num_workers`].
///
/// ```
/// # let rt = skein::Runtime::builder().workers(3).build().unwrap();
/// # rt.run(|| {
/// assert_eq!(skein::local_workers(), 3); // one rank
/// assert_eq!(skein::local_workers() * skein::ranks(), skein::num_workers());
/// # }).unwrap();
/// ```
///
/// # Panics
/// Outside a runtime.
pub fn local_workers() -> usize {
    context::expect("local_workers").local_n
}

/// The rank that runs global worker id `g`: `g / local_workers()` (every rank has the same
/// number of workers), so 0 for every id with one rank. Worker ids (`trustee`, `spawn_on`,
/// `current_worker`, `TrusteeRef::worker`) are global ids (`docs/rack-mode.md` §1.1).
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// assert_eq!(skein::rank_of(skein::num_workers() - 1), 0); // one rank
/// assert_eq!(skein::rank_of(skein::current_worker()), skein::rank());
/// # }).unwrap();
/// ```
///
/// # Panics
/// Outside a runtime.
pub fn rank_of(g: usize) -> usize {
    g / local_workers()
}

/// True when called from delegated context (a closure applied by a trustee, or a
/// continuation), where blocking calls are not allowed.
pub fn in_delegated_context() -> bool {
    context::current().is_some_and(|w| w.in_delegated())
}

/// Live per-worker counters of the running job (values of other workers may be slightly
/// stale). Over MPI ranks only this rank's workers are live; the other ranks' entries are
/// zero until the end of the run ([`Runtime::stats`] then has them all).
///
/// # Panics
/// Outside a runtime; use [`Runtime::stats`] after a run.
pub fn stats() -> Stats {
    let w = context::expect("stats");
    Stats {
        workers: (0..w.run_state.n).map(|i| w.run_state.stats_of(i)).collect(),
        run: RunTimes::default(),
    }
}
