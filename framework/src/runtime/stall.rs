//! A stuck run explains itself: on `SIGQUIT`, and after
//! [`Config::stall_secs`](super::run_state::Config::stall_secs) seconds with no task started or
//! finished anywhere (`SKEIN_STALL_SECS`; 0: never), every process of the run prints to
//! stderr what it is waiting for, without changing the run's outcome.
//!
//! # How it stays cheap
//!
//! * A fiber records why it suspends ([`Wait`]) in its worker's table (`worker/dump.rs`)
//!   at each suspension point (`apply`'s wait for a response, a throttle, a latch, a join,
//!   `wait_quiescent`); nothing is cleared on resume: the dump shows a fiber in the ready queue
//!   as ready, whatever it recorded last.
//! * A dump request is a counter ([`RunStall::epoch`]) each worker compares with the last one
//!   it answered, once per loop pass (one relaxed load of a line that is written once per
//!   dump); a worker that sees it move writes its own section (its fibers, its requests, its
//!   transport queues) from its own thread, where its state lives.
//! * One watchdog per run ([`Watchdog`], on a thread the runtime keeps between runs,
//!   `super::pool`) ticks every [`TICK`]: it reads the workers'
//!   published counters, keeps the coarse clock that envelope receipts stamp
//!   ([`RunStall::heard`]), and on `SIGQUIT` or a stall writes the process's header (counter
//!   sums, the detector's last round, which ranks were last heard from when, which workers
//!   have not made a loop pass) and bumps the epoch, waking every worker.
//! * The `SIGQUIT` handler only bumps an atomic counter ([`QUITS`]); it is installed at the
//!   first run when the signal's disposition is the default (outside a run it then restores
//!   the default and raises the signal again: a quit is still a quit between runs) or ignored
//!   (as a background job of a non-interactive shell inherits it; outside a run it is then
//!   still ignored).
//!
//! A process prints one dump per stuck stretch (progress re-arms it) and one per `SIGQUIT`.
//! Across ranks, "progress anywhere" is this rank's counters and the sums of the quiescence
//! detector's rounds (`super::quiesce_ranks`): when a round completes, every rank was heard
//! from; when rounds stop completing, a rank that sends nothing else is named as silent.

use super::run_state::RunState;
use crate::sync::Arc;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The watchdog's period: the resolution of the clock envelope receipts stamp.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// A rank not heard from for this long is named as silent in a dump asked for by `SIGQUIT`
/// in a run without a stall limit (with one: half the limit).
const SILENCE_MS: u64 = 5000;

/// `SIGQUIT`s received by this process (bumped by the handler, read by the watchdogs).
static QUITS: AtomicU64 = AtomicU64::new(0);
/// Whether `SIGQUIT` was ignored when the handler was installed (outside a run it stays so).
static QUIT_IGNORED: AtomicBool = AtomicBool::new(false);
/// Runs with a watchdog right now: outside them a `SIGQUIT` quits.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Complete dumps (every worker of the process wrote its section) so far in this process.
static DUMPS: AtomicU64 = AtomicU64::new(0);

/// Why a fiber is suspended (what it recorded last; see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Nothing recorded (a fiber that has not run yet).
    #[default]
    Nothing,
    /// `apply` and friends: the response of trustee `trustee` (a global worker id).
    Response { trustee: usize },
    /// Its requests to `trustee` are staged beyond the staging limit: it waits for them to
    /// leave.
    Throttled { trustee: usize },
    /// `Latch::lock` of the latch at this address.
    Latch { addr: usize },
    /// `JoinHandle::join` of a fiber on `worker` (a fiber's end, a launch, a remote
    /// `entrust_new`).
    Join { worker: usize },
    /// `wait_quiescent`.
    Quiescence,
}

impl Wait {
    /// Words for the dump; `local_n` maps a worker to its rank.
    pub(crate) fn describe(self, local_n: usize, out: &mut String) {
        let _ = match self {
            Wait::Nothing => write!(out, "not started yet"),
            Wait::Response { trustee } => write!(
                out,
                "waits for a response from trustee {trustee} on rank {}",
                trustee / local_n.max(1)
            ),
            Wait::Throttled { trustee } => write!(
                out,
                "waits for its staged requests to trustee {trustee} on rank {} to leave",
                trustee / local_n.max(1)
            ),
            Wait::Latch { addr } => write!(out, "waits for a latch (Latch::lock, at {addr:#x})"),
            Wait::Join { worker } => write!(
                out,
                "waits for a join: the end of a fiber or launch on worker {worker} (rank {})",
                worker / local_n.max(1)
            ),
            Wait::Quiescence => write!(out, "waits for quiescence (wait_quiescent)"),
        };
    }
}

/// The number of complete stall dumps this process has printed (every worker of the run
/// wrote its section). A test can wait for it; it never goes down.
pub fn stall_dumps() -> u64 {
    DUMPS.load(Ordering::Acquire)
}

/// Asks every run of this process for a dump now, as `SIGQUIT` does.
pub fn request_stall_dump() {
    QUITS.fetch_add(1, Ordering::Relaxed);
}

/// A counter alone on its cache line (every worker reads it once per loop pass; the other
/// fields here are written by envelope receipts, rounds and the watchdog's clock).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded(pub(crate) AtomicU64);

/// What the workers and the watchdog of one run share for dumps.
#[derive(Debug)]
pub(crate) struct RunStall {
    /// Dump requests so far; a worker answers each new value once.
    pub(crate) epoch: Padded,
    /// Sections written so far (every worker of the process once per dump).
    sections: AtomicU64,
    /// The coarse clock: milliseconds since the run started, as of the last tick.
    now_ms: AtomicU64,
    /// Per rank, `now_ms` when something last came from it (an envelope, or a completed
    /// round of the detector, which every rank took part in); `u64::MAX`: never.
    heard: Box<[AtomicU64]>,
    /// The detector's last completed round on this process, and its sums (`finished`,
    /// `created`), and when (`now_ms`).
    round: AtomicU64,
    round_finished: AtomicU64,
    round_created: AtomicU64,
    round_ms: AtomicU64,
    /// Workers of this process (they each write a section per dump).
    local: usize,
}

impl RunStall {
    pub(crate) fn new(ranks: usize, local_workers: usize) -> RunStall {
        RunStall {
            epoch: Padded::default(),
            sections: AtomicU64::new(0),
            now_ms: AtomicU64::new(0),
            heard: (0..ranks).map(|_| AtomicU64::new(u64::MAX)).collect(),
            round: AtomicU64::new(u64::MAX),
            round_finished: AtomicU64::new(0),
            round_created: AtomicU64::new(0),
            round_ms: AtomicU64::new(0),
            local: local_workers.max(1),
        }
    }

    /// Something arrived from `rank` (an envelope). Cheap: a store only when the clock moved.
    #[inline]
    pub(crate) fn heard(&self, rank: usize) {
        let now = self.now_ms.load(Ordering::Relaxed);
        if let Some(h) = self.heard.get(rank) {
            if h.load(Ordering::Relaxed) != now {
                h.store(now, Ordering::Relaxed);
            }
        }
    }

    /// The detector completed round `round` with these sums: every rank took part.
    pub(crate) fn note_round(&self, round: u64, finished: u64, created: u64) {
        let now = self.now_ms.load(Ordering::Relaxed);
        self.round_finished.store(finished, Ordering::Relaxed);
        self.round_created.store(created, Ordering::Relaxed);
        self.round_ms.store(now, Ordering::Relaxed);
        self.round.store(round, Ordering::Release);
        for h in self.heard.iter() {
            if h.load(Ordering::Relaxed) != now {
                h.store(now, Ordering::Relaxed);
            }
        }
    }

    /// A worker wrote its section: the last one of a dump counts the dump.
    pub(crate) fn section_written(&self) {
        let s = self.sections.fetch_add(1, Ordering::AcqRel) + 1;
        if s % self.local as u64 == 0 {
            DUMPS.fetch_add(1, Ordering::Release);
        }
    }
}

/// Installs the `SIGQUIT` handler once per process, if the signal's disposition is the
/// default one or ignored (a program's own handler is left alone).
fn install_sigquit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `old` is a zeroed sigaction (a valid bit pattern) that sigaction only writes;
        // a null new action only reads the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above; SIGQUIT is a valid signal number.
        if unsafe { libc::sigaction(libc::SIGQUIT, std::ptr::null(), &mut old) } != 0 {
            return;
        }
        // Ignored (a background job of a non-interactive shell inherits that): a `kill -QUIT`
        // is still the way to ask a stuck run, and outside a run the signal stays ignored.
        match old.sa_sigaction {
            libc::SIG_DFL => {}
            libc::SIG_IGN => QUIT_IGNORED.store(true, Ordering::Relaxed),
            _ => return,
        }
        // SAFETY: a zeroed sigaction with the handler's address and an empty mask is a valid
        // action; the handler only touches atomics and async-signal-safe calls (`on_quit`).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_quit as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGQUIT, &act, std::ptr::null_mut());
        }
    });
}

/// The `SIGQUIT` handler: async-signal-safe (atomics, `signal`, `raise`; no allocation, no
/// lock).
extern "C" fn on_quit(_sig: libc::c_int) {
    if ACTIVE.load(Ordering::Relaxed) == 0 {
        if QUIT_IGNORED.load(Ordering::Relaxed) {
            return;
        }
        // No run to explain: the default action (quit with a core dump), as without skein.
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            libc::raise(libc::SIGQUIT);
        }
        return;
    }
    QUITS.fetch_add(1, Ordering::Relaxed);
}

/// The watchdog of one run, on a thread the runtime keeps between runs (`super::pool`);
/// dropping it stops the watch and waits until it has ended.
#[derive(Debug)]
pub(crate) struct Watchdog {
    stop: Arc<Stop>,
    watching: Option<super::pool::Pending>,
}

/// The watchdog's stop flag, and the condition variable its ticks wait on (a stop ends the
/// wait at once).
#[derive(Debug, Default)]
struct Stop {
    stopped: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    /// Waits one [`TICK`], or less if the watch is stopped meanwhile; whether it is.
    fn tick(&self) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        if *stopped {
            return true;
        }
        let (stopped, _) = self.cv.wait_timeout(stopped, TICK).unwrap_or_else(|e| e.into_inner());
        *stopped
    }
}

impl Watchdog {
    /// Starts the watchdog of `rs` (and installs the `SIGQUIT` handler, once) on slot `slot`
    /// of `lease`. `None` if no thread can take it: the run goes on without dumps.
    pub(crate) fn start(
        rs: &Arc<RunState>,
        lease: &mut super::pool::Lease<'_>,
        slot: usize,
    ) -> Option<Watchdog> {
        install_sigquit();
        let stop = Arc::new(Stop::default());
        let (rs2, stop2) = (rs.clone(), stop.clone());
        ACTIVE.fetch_add(1, Ordering::Relaxed);
        // The quits before this run, read here, before any worker starts: the thread may
        // first run after a `SIGQUIT` sent to this run (a loaded machine), which it must
        // still answer.
        let quits = QUITS.load(Ordering::Relaxed);
        let job: super::pool::Job = Box::new(move |_| {
            watch(&rs2, &stop2, quits);
            Ok(())
        });
        match lease.start(slot, || "skein-watchdog".into(), WATCHDOG_STACK, job) {
            Ok(watching) => Some(Watchdog { stop, watching: Some(watching) }),
            Err(_) => {
                ACTIVE.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// The watchdog thread's stack (a spawned thread's default).
const WATCHDOG_STACK: usize = 2 << 20;

impl Drop for Watchdog {
    fn drop(&mut self) {
        *self.stop.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.stop.cv.notify_all();
        if let Some(w) = self.watching.take() {
            let _ = w.wait();
        }
        ACTIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The workers of this process (global ids).
fn local_range(rs: &RunState) -> std::ops::Range<usize> {
    match rs.mpi_rank {
        Some(r) => r * rs.local_n..(r + 1) * rs.local_n,
        None => 0..rs.n,
    }
}

/// A worker's loop passes so far (its statistics' polls and parks).
fn passes(rs: &RunState, g: usize) -> u64 {
    let s = &rs.counters[g].stats;
    s.useful_polls.load(Ordering::Relaxed)
        + s.idle_polls.load(Ordering::Relaxed)
        + s.parks.load(Ordering::Relaxed)
}

/// The watchdog's loop (module docs); `quits`: [`QUITS`] when the run started.
fn watch(rs: &RunState, stop: &Stop, mut quits: u64) {
    let start = Instant::now();
    let limit = (rs.cfg.stall_secs > 0).then(|| Duration::from_secs(rs.cfg.stall_secs));
    let workers = local_range(rs);
    // Progress: this process's task counts and the detector's last sums.
    let progress = |rs: &RunState| -> u64 {
        let st = &rs.stall;
        let mut p =
            st.round_finished.load(Ordering::Relaxed) + st.round_created.load(Ordering::Relaxed);
        for g in local_range(rs) {
            let c = &rs.counters[g];
            p = p
                .wrapping_add(c.created.load(Ordering::Relaxed))
                .wrapping_add(c.finished.load(Ordering::Relaxed));
        }
        p
    };
    let mut last = progress(rs);
    let mut since = Instant::now();
    let mut dumped = false;
    // Per worker: its passes at the last change, and when that was.
    let mut pass_seen: Vec<(u64, Instant)> =
        workers.clone().map(|g| (passes(rs, g), Instant::now())).collect();
    loop {
        if stop.tick() {
            break;
        }
        let now = Instant::now();
        rs.stall.now_ms.store(now.duration_since(start).as_millis() as u64, Ordering::Relaxed);
        for (k, g) in workers.clone().enumerate() {
            let p = passes(rs, g);
            if p != pass_seen[k].0 {
                pass_seen[k] = (p, now);
            }
        }
        let p = progress(rs);
        if p != last {
            last = p;
            since = now;
            dumped = false;
        }
        let q = QUITS.load(Ordering::Relaxed);
        let reason = if q != quits {
            quits = q;
            Some("SIGQUIT".to_string())
        } else {
            match limit {
                Some(l) if !dumped && now.duration_since(since) >= l => {
                    dumped = true;
                    Some(format!(
                        "no task started or finished for {} s (SKEIN_STALL_SECS={})",
                        now.duration_since(since).as_secs(),
                        l.as_secs()
                    ))
                }
                _ => None,
            }
        };
        if let Some(reason) = reason {
            let stalled = now.duration_since(since);
            let header = header(rs, &reason, stalled, limit, &pass_seen, now);
            write_stderr(&header);
            rs.stall.epoch.0.fetch_add(1, Ordering::AcqRel);
            rs.sleepers.wake_all();
        }
    }
}

/// The process's part of a dump, before the workers' sections.
fn header(
    rs: &RunState,
    reason: &str,
    stalled: Duration,
    limit: Option<Duration>,
    pass_seen: &[(u64, Instant)],
    now: Instant,
) -> String {
    let mut s = String::new();
    let who = match rs.mpi_rank {
        Some(r) => format!("rank {r} of {}", rs.ranks),
        None if rs.ranks > 1 => format!("{} fake ranks (loopback)", rs.ranks),
        None => "one process".to_string(),
    };
    let _ = writeln!(
        s,
        "skein dump [{who}, pid {}]: {reason}; last task started or finished {:.1} s ago",
        std::process::id(),
        stalled.as_secs_f64()
    );
    let (mut created, mut finished, mut parked, mut waiters) = (0u64, 0u64, 0u64, 0u64);
    for g in local_range(rs) {
        let c = &rs.counters[g];
        created += c.created.load(Ordering::Relaxed);
        finished += c.finished.load(Ordering::Relaxed);
        parked += c.parked.load(Ordering::Relaxed);
        waiters += c.quiesce_waiters.load(Ordering::Relaxed);
    }
    let issued: u64 = local_range(rs)
        .map(|g| rs.counters[g].issued.iter().map(|i| i.load(Ordering::Relaxed)).sum::<u64>())
        .sum();
    let _ = writeln!(
        s,
        "  tasks here: fibers started or woken {created} and requests issued {issued}, \
         finished {finished} ({} active); fibers parked {parked}, in wait_quiescent \
         {waiters}; main returned: {}",
        (created + issued).saturating_sub(finished),
        if rs.main_done.load(Ordering::Acquire) { "yes" } else { "no" }
    );
    let st = &rs.stall;
    let now_ms = st.now_ms.load(Ordering::Relaxed);
    if rs.ranks > 1 {
        let round = st.round.load(Ordering::Acquire);
        if round == u64::MAX {
            let _ = writeln!(s, "  quiescence across ranks: no round has decided a detection yet");
        } else {
            let _ = writeln!(
                s,
                "  quiescence across ranks: round {round} completed {:.1} s ago, its sums: \
                 finished {}, created {}",
                now_ms.saturating_sub(st.round_ms.load(Ordering::Relaxed)) as f64 / 1000.0,
                st.round_finished.load(Ordering::Relaxed),
                st.round_created.load(Ordering::Relaxed)
            );
        }
        let me = rs.mpi_rank;
        // Silent: not heard from for half the stall limit (5 s without one). A live rank is
        // heard from at every round of the detector, many times a second.
        let limit_ms = limit.map_or(SILENCE_MS, |l| l.as_millis() as u64 / 2);
        for (r, h) in st.heard.iter().enumerate() {
            if Some(r) == me {
                continue;
            }
            let h = h.load(Ordering::Relaxed);
            let _ = if h == u64::MAX {
                writeln!(s, "  rank {r}: never heard from in this run (SILENT)")
            } else {
                let ago = now_ms.saturating_sub(h);
                let silent = if ago >= limit_ms {
                    format!(
                        " (SILENT for more than {:.1} s: stopped, swapped out, or stuck outside \
                         its loop?)",
                        limit_ms as f64 / 1e3
                    )
                } else {
                    String::new()
                };
                writeln!(s, "  rank {r}: last heard from {:.1} s ago{silent}", ago as f64 / 1e3)
            };
        }
    }
    for (k, g) in local_range(rs).enumerate() {
        let idle = now.duration_since(pass_seen[k].1);
        if idle >= TICK * 10 {
            let _ = writeln!(
                s,
                "  worker {g}: no loop pass for {:.1} s (parked, or inside one piece of user \
                 code or a system call: its section comes when it returns)",
                idle.as_secs_f64()
            );
        }
    }
    s
}

/// Writes `s` to stderr in one piece (one process's lines stay together).
pub(crate) fn write_stderr(s: &str) {
    use std::io::Write;
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(s.as_bytes());
    let _ = e.flush();
}
