//! The idle policy of a worker, and the protocol that lets an idle worker block until it is
//! woken: spin, then yield the core, then *park* (block in the kernel) until another thread
//! makes work for it.
//!
//! # Why a worker blocks
//!
//! A worker that waits (for a response, for requests a client is about to publish, for the
//! end of a round) must give its core to the worker that has the work when there are more
//! workers than free cores. `sched_yield` does not do that reliably: the yielding thread stays
//! runnable and is picked again at once, so W waiting workers on C < W cores starve the one
//! that would answer them (a run of 4 workers on 2 busy cores was 100x slower than 1 worker).
//! A parked thread is not runnable: the core goes to whoever has work.
//!
//! # The protocol (no lost wake-up)
//!
//! Every worker has a [`Sleepers`] entry: a `sleeping` flag and its thread.
//!
//! * **Sleeper** (worker `w`, [`Sleepers::arm`] then [`Sleepers::park`]): stores
//!   `sleeping[w] = true`, then a `SeqCst` fence, then runs one more *whole* pass of its loop,
//!   which looks at every source of work (its slots, its responses, its ready fibers, frees
//!   handed over, the shutdown flag). Only if that pass found nothing does it park
//!   (`std::thread::park`); when it runs again it clears the flag.
//! * **Waker** (any thread that makes work for `w`: a client publishing a batch into `w`'s
//!   slot, a trustee publishing a response to `w`, a foreign thread handing `w` a free, the
//!   detector ending the run, [`Sleepers::wake`]): makes the work visible (its Release store),
//!   then a `SeqCst` fence, then loads `sleeping[w]`; if set, unparks `w`.
//!
//! This is the store-buffering pattern with a `SeqCst` fence on both sides: either the
//! sleeper's re-check pass sees the waker's store (and does not park), or the waker's load
//! sees `sleeping[w] = true` (and unparks). `unpark` before `park` is not lost: the thread's
//! token makes the next `park` return at once. `park` may also return spuriously; the loop
//! then simply looks again. So a worker never stays parked while work for it is visible, and
//! the idle policy never relies on a timed sleep for progress.
//!
//! # More workers than cores
//!
//! In one process (not split into ranks) workers beyond the cores share threads by default
//! (`Builder::worker_threads`, `worker/looping.rs`): a worker that waits for another of its
//! thread hands it the thread within a pass, and the policy below applies to the thread
//! (it pauses only in a sweep where none of its workers did anything, by the smallest step
//! they asked for, and parks once every one of them armed and re-checked: loom model
//! `loom_shared_thread_no_lost_wakeup`, and its broken variant that skips a re-check,
//! `loom_shared_thread_without_every_recheck_loses_a_wakeup`). Over the rings each rank
//! shares threads among its workers the same way, a thread's workers waiting on one futex
//! word. What follows concerns the threads that still outnumber the cores: the ranks of a
//! node together (by default each runs its cores divided among the node's ranks with the
//! same affinity mask, `transport::wake::node_threads`), or a run asked for more threads than
//! cores.
//!
//! Spinning and yielding pay only while the worker being waited for runs on another core.
//! When the run's threads outnumber the cores they share ([`oversubscribed`]: the threads of
//! one process against the cores it may use, or over the rings the threads of every rank of
//! the node against the union of the ranks' `sched_getaffinity` masks, [`run_cores`]: ranks
//! a launcher bound to a core each share no core), some worker with work is always waiting
//! for a core, and a waiter that spins takes it for its whole budget, one that yields hands
//! it to another waiter as often as not. A run may then wait *crowded* ([`Crowded`],
//! `Builder::crowded_waits`,
//! `SKEIN_OVERSUBSCRIBED=auto|1`; off by default, since on a quiet 2-core machine it measured
//! slower than spinning and yielding first, and faster only while other processes loaded the
//! cores: `docs/performance.md`). Its budget is nil ([`Spin::crowded`]): an idle worker arms at once,
//! re-checks once and blocks; the publication it waits for wakes it. Since every
//! publication to a blocked worker is then a wake-up and a context switch, a client also
//! holds its batches to the trustees of its rank while its fibers are ready, until they
//! fill their slot or age (`Worker::poll_client` with `Flush::Full`). Counted per worker:
//! parks, yields, the thread's context switches (`WorkerStats::yields`,
//! `switches_voluntary`, `switches_involuntary`), and its time on a core and waiting for one
//! (`on_core_ns`, `runnable_ns`: [`thread_times`]): a worker that waited for a core most of
//! its loop shows where the cores went.
//!
//! Without crowded waits, waits are still cut short when the workers outnumber the cores (in
//! one process, or over the rings, whose ranks' workers are all on this node):
//!
//! * A wait with nothing due (no response to this worker, no request announced to it: the
//!   end of a round, a detector round) spins its [`SPIN`] passes, yields twice and blocks
//!   ([`Spin::calm`]), where it used to yield up to [`YIELD`] times. Such waits are what
//!   every rank does between the rounds of a kernel; at 4 and 8 ranks on 2 cores the idle
//!   ranks yielded 400 to 900 times per round and never blocked, handing the core around
//!   each other while the rank whose post would end the round waited for one (`skein bench
//!   rounds`: an empty round 3 to 5 times slower than with blocking).
//! * A wait for due work keeps its adaptive budget, but one that grows to [`SPIN_DUE_OVER`]
//!   passes, not [`SPIN_DUE`] ([`Spin::oversubscribed`]). Up to 2,048 passes of spinning
//!   (about a millisecond) held the core for a whole time slice of the scheduler while
//!   the worker that would answer waited for it: BFS at 1 x 8 and 2 x 4 on 2 cores ran 1.4
//!   to 2 times faster with the cap, SSSP level. Blocking at once there measured slower
//!   (a blocked worker serves the requests sent to it only once it is woken and
//!   scheduled).
//!
//! # Quiescence
//!
//! Worker 0 detects quiescence ([`super::quiesce`]) in its idle passes, so it must look
//! again once every other worker is idle: a worker about to park wakes worker 0
//! ([`Sleepers::wake`]) if every other worker but worker 0 is armed or parked. Of the last
//! workers to arm, each stores its flag, fences (`SeqCst`) and then loads the others': the
//! last fence in that order sees every flag, so at least one of them wakes worker 0 (loom
//! model `loom_sleepers_last_idle_worker_wakes_the_detector`; without the fence both may
//! miss: `loom_sleepers_last_idle_without_fence_loses_a_wakeup`). A worker that parks while
//! another still works leaves worker 0 alone: a detection then could only fail. The last
//! task of every worker finished before its arm (program order, then the fence), so worker
//! 0's next detection sees them all; worker 0 itself runs a detection in the re-check pass
//! before it parks. Ending the run (shutdown, abort) wakes every worker. (Over the rings the
//! last worker of a rank to block wakes its rank's first worker, which runs the detector
//! across ranks: below.)
//!
//! # Across ranks over the shared-memory rings ([`Policy::Rings`])
//!
//! Envelopes, credits and the detector's rounds come from other processes, which cannot
//! unpark a thread of this one. Over the rings every worker's wait point is instead a futex
//! word in the memory the ranks share (`transport/wake.rs`): [`Sleepers::arm`],
//! [`Sleepers::park`] and [`Sleepers::wake`] use it in place of the flag and the thread's park
//! token, with the same steps (store, `SeqCst` fence, re-check / publish, `SeqCst` fence,
//! load, wake). The transport's writers wake the worker they made work for (a ring's reader
//! after its `tail`, a ring's writer after its credit, every rank's first worker after a board
//! post), and the threads of the rank wake it as above (a slot published, a free handed over,
//! the run's end): one word, every waker, local or remote. The futex wait has a timeout
//! (`transport::wake::BLOCK_LIMIT`) as a safety net only: [`Sleepers::park`] says whether the
//! worker was woken, and the loop counts waits that ended unwoken before a useful pass
//! (`WorkerStats::park_timeouts_useful`, which the tests check is 0).
//!
//! The cross-rank detector (`super::quiesce_ranks`) runs on each rank's first worker, which
//! may block too. What wakes it: another rank's post on the board that completes its round
//! or starts one it has not posted (`transport/board.rs`), an arrival, and the last worker of
//! its rank to block (as worker 0 in one process). It holds its post back while a task of
//! its rank is open (a response it awaits, a fiber not yet parked): no detection of that
//! round could be positive, and each post wakes every other rank (`super::quiesce_ranks`,
//! "Posts that would be wasted"); the task's end wakes it, and after 10 ms of holding it
//! posts anyway. It steps in its re-check pass before blocking and in the pass after a
//! wake-up, and posts its next round only when every other worker of its
//! rank is armed or blocked (else that worker's blocking wakes it): a rank whose other
//! workers still work would only add rounds that cannot be quiescent, traded back and forth
//! with the other ranks' idle first workers (`Worker::poll_detector`). While they work, a
//! wait that nobody ended (the safety net) also lets a round out, so that the other ranks
//! (and their stall dumps) still hear from this rank; no detection needs it.
//!
//! # Where it does not apply
//!
//! Over MPI (and the RDMA verbs rings, whose writes wake nobody), requests arrive unannounced
//! (an MPI message wakes nobody), and the cross-rank detector needs every rank's first worker
//! to keep stepping: these workers never park. They fall back to a timed wait that still
//! progresses the transport ([`Policy::Ranks`]); in a loopback split they spin and yield while
//! work is due and back off to timed waits otherwise ([`Policy::Loopback`]).
//!
//! The loom model `loom_sleepers_no_lost_wakeup` runs the protocol's steps (the loads,
//! stores and fences of [`Sleepers::arm`], the re-check and [`Sleepers::wake`], in their
//! order, with a flag standing for the park token) against a publisher, and shows that a
//! waker without its fence loses a wake-up.

use crate::transport::wake::{Blocked, WakeWords, BLOCK_LIMIT};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Loop passes spent spinning (`pause`) before yielding the core.
pub(crate) const SPIN: u32 = 64;
/// Most loop passes spent spinning before yielding while a response or an incoming request
/// is due (tens of µs: longer than a busy peer's loop pass, so that a loaded machine does not
/// take the core away between every two batches). The budget adapts ([`Spin`]).
pub(crate) const SPIN_DUE: u32 = 2048;
/// The fewest passes the adaptive budget spins while work is due.
const SPIN_DUE_MIN: u32 = 16;
/// The most passes the adaptive budget spins while work is due, in a run whose workers
/// outnumber the cores ([`Spin::oversubscribed`]); its yield stretch shrinks with it, to
/// `YIELD * SPIN_DUE_OVER / SPIN_DUE` (8) yields.
const SPIN_DUE_OVER: u32 = 64;
/// Most loop passes spent in `sched_yield` after spinning, before parking (at the full
/// spin budget: [`Spin::yields`]).
pub(crate) const YIELD: u32 = 256;
/// Passes spent in `sched_yield` before blocking by a wait with nothing due, in a run whose
/// workers outnumber the cores ([`Spin::calm`]).
const CALM_YIELDS: u32 = 2;
/// In a loopback split: passes spent in `sched_yield` before timed waits, when nothing is due.
const LOOPBACK_YIELD: u32 = 2048;
/// Over MPI: passes spent in `sched_yield` before the timed wait ([`MPI_WAIT`]).
const MPI_YIELD: u32 = 1 << 12;
/// Over MPI: the timed wait of a worker that has yielded for a long stretch: short enough
/// that a round trip across ranks pays it rarely, long enough to hand the core over.
const MPI_WAIT: Duration = Duration::from_micros(50);

/// What an idle loop pass does before the next one, from the shortest pause to the longest
/// (the order `worker/looping.rs` takes the smallest of).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Step {
    /// Spin: the work is expected within a few passes.
    Spin,
    /// Give the core to another runnable thread, then look again.
    Yield,
    /// Wait a short, fixed time (over MPI, where an arrival wakes nobody), then look again.
    Wait(Duration),
    /// Block until woken ([`Sleepers`]): arm, look once more, then park.
    Park,
}

/// The policy that applies to a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// One process, every worker reachable by [`Sleepers::wake`]: spin, yield, park.
    Local,
    /// A loopback split run: the fake ranks' detector must keep stepping, so no parking:
    /// spin and yield while work is due, else back off to timed waits of 25..400 µs.
    Loopback,
    /// A run over MPI: spin, yield, then timed waits between polls of the transport.
    Ranks,
    /// A run over the shared-memory rings: spin, yield, then block on the worker's futex
    /// word, which the rings' writers and the rank's threads wake (module docs).
    Rings,
}

/// The adaptive spin budget of waits for work that is on its way (a response, a request a
/// client is about to publish). Spinning pays only while the peer runs on another core: when
/// waits keep outlasting the budget (more workers than free cores, or a machine busy with
/// other processes: the peer needs *this* core), the budget halves, down to
/// [`SPIN_DUE_MIN`], and the core is given away early; when waits end within it, it grows
/// back towards [`SPIN_DUE`].
///
/// In a run whose workers outnumber the cores ([`Spin::crowded`]) there is no budget at all:
/// the worker blocks at once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spin {
    due: u32,
    /// The most the budget grows back to: [`SPIN_DUE`], or [`SPIN_DUE_OVER`].
    max: u32,
    /// The run's workers outnumber the cores ([`oversubscribed`]): never spin nor yield.
    crowded: bool,
    /// Passes spent spinning by a wait with nothing due: [`SPIN`], or its share on a thread
    /// that runs several workers ([`Spin::calm_shared`]).
    idle: u32,
}

impl Default for Spin {
    fn default() -> Self {
        Spin { due: SPIN_DUE, max: SPIN_DUE, crowded: false, idle: SPIN }
    }
}

impl Spin {
    /// The budget of a worker of a run with more workers than cores ([`oversubscribed`]):
    /// an idle worker arms at once and blocks after one re-check pass. Spinning or yielding
    /// there only takes the core from the worker it waits for (module docs).
    pub(crate) fn crowded() -> Spin {
        Spin { due: 0, max: 0, crowded: true, idle: SPIN }
    }

    /// The budget of a wait with nothing due (no response, no announced request: the end
    /// of a round, a detector round, requests nobody announced) in a run whose workers
    /// outnumber the cores ([`oversubscribed`]): spin [`SPIN`] passes, yield [`CALM_YIELDS`]
    /// times, then block. Such a wait that outlasts its spinning waits for a worker without
    /// a core, and a long yield stretch only passes the core around the other waiters.
    pub(crate) fn calm() -> Spin {
        let due = SPIN_DUE * CALM_YIELDS / YIELD;
        Spin { due, max: due, crowded: false, idle: SPIN }
    }

    /// [`Spin::calm`] for one of `workers` workers that share a thread: its workers spin in
    /// turn, one pass each per sweep of the thread, so each spins its share of [`SPIN`] (at
    /// least one pass) and the thread spins [`SPIN`] passes in all before it yields, as a
    /// thread of one worker does. With [`SPIN`] passes each, a thread of 4 workers spun 256
    /// passes at the end of every round, and its rank's round ended only once they had all
    /// armed (`docs/performance.md`, "Round ends").
    pub(crate) fn calm_shared(workers: usize) -> Spin {
        let share = SPIN / u32::try_from(workers.max(1)).unwrap_or(SPIN);
        Spin { idle: share.max(1), ..Spin::calm() }
    }

    /// The budget of a worker of a run whose workers outnumber the cores ([`oversubscribed`])
    /// that does not wait crowded: it adapts as the default one does, but grows to
    /// [`SPIN_DUE_OVER`] passes at most (and yields 8 times at most). A wait that outlasts
    /// that many passes waits for a worker without a core; spinning longer only keeps the
    /// core from it until the scheduler's time slice ends (about a millisecond:
    /// `docs/performance.md`, "Short spins on shared cores").
    pub(crate) fn oversubscribed() -> Spin {
        Spin { due: SPIN_DUE_OVER, max: SPIN_DUE_OVER, crowded: false, idle: SPIN }
    }

    /// True for [`Spin::crowded`].
    pub(crate) fn is_crowded(&self) -> bool {
        self.crowded
    }

    /// A wait for due work ended after `idle` idle passes (the work arrived).
    pub(crate) fn ended(&mut self, idle: u32) {
        if self.crowded {
            return;
        }
        if idle >= self.due {
            self.due = (self.due / 2).max(SPIN_DUE_MIN);
        } else {
            self.due = (self.due + self.due / 8 + 1).min(self.max);
        }
    }

    /// The spin budget now (passes), for due work.
    pub(crate) fn due(&self) -> u32 {
        self.due
    }

    /// Passes spent in `sched_yield` before parking: [`YIELD`] at the full budget, fewer (at
    /// least 2) as it shrinks.
    pub(crate) fn yields(&self) -> u32 {
        if self.crowded {
            return 0;
        }
        (YIELD * self.due / SPIN_DUE).max(2)
    }
}

/// When a run waits crowded (`Builder::crowded_waits`, `SKEIN_OVERSUBSCRIBED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Crowded {
    /// Never: spin, yield, then block (the default).
    Off,
    /// When the run's workers outnumber the cores ([`oversubscribed`]).
    Auto,
    /// Always (measuring both ways of waiting in one build).
    Always,
}

impl Crowded {
    /// `SKEIN_OVERSUBSCRIBED`'s values: `0`, `auto`, `1`.
    pub(crate) fn parse(v: &str) -> Option<Crowded> {
        match v.trim() {
            "0" | "" => Some(Crowded::Off),
            "auto" => Some(Crowded::Auto),
            "1" => Some(Crowded::Always),
            _ => None,
        }
    }

    /// Whether a run of `threads` worker threads on `cores` cores (all on this machine,
    /// [`run_cores`]) waits crowded.
    pub(crate) fn applies(self, threads: usize, cores: usize) -> bool {
        match self {
            Crowded::Off => false,
            Crowded::Auto => oversubscribed(threads, cores),
            Crowded::Always => true,
        }
    }
}

/// Whether `threads` worker threads, every one of them on this machine (one process, or the
/// ranks of one node over the shared-memory rings), outnumber the `cores` they share
/// ([`run_cores`]).
pub(crate) fn oversubscribed(threads: usize, cores: usize) -> bool {
    threads > cores
}

/// The cores a run's threads on this machine share: this process's ([`cores`]) in one
/// process; over the shared-memory rings, the union of the affinity masks of the node's ranks
/// (`node_union`, [`crate::transport::wake::WakeWords::node_cores`]; 0: unknown), so that
/// ranks a launcher bound to one core each (Open MPI binds two ranks to a core each by
/// default) do not count as 2 threads on 1 core. A CPU quota that caps this process below
/// its affinity (a cgroup's, which [`cores`] honours) caps the node's cores too: its ranks
/// run in the same cgroup.
pub(crate) fn run_cores(node_union: Option<usize>) -> usize {
    node_cores(cores(), affinity_cores(), node_union)
}

/// [`run_cores`] from this process's `own` cores (its quota honoured), the CPUs of its
/// affinity mask, and the node's union (`None` or 0: unknown).
fn node_cores(own: usize, affinity: usize, node_union: Option<usize>) -> usize {
    match node_union {
        None | Some(0) => own,
        // A quota below the mask caps the node's ranks too (one cgroup).
        Some(union) if affinity > own => union.min(own),
        Some(union) => union,
    }
}

/// The CPUs in this process's affinity mask ([`crate::transport::wake::affinity_mask`]; 0
/// where it is not known), counted once per process like [`cores`], so the two agree.
fn affinity_cores() -> usize {
    static AFFINITY: OnceLock<usize> = OnceLock::new();
    *AFFINITY.get_or_init(|| {
        crate::transport::wake::union_cores([&crate::transport::wake::affinity_mask()[..]])
    })
}

/// The cores this process may run on (`sched_getaffinity`, through
/// [`std::thread::available_parallelism`], which also honours a cgroup's CPU quota; counted
/// once per process).
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// What the kernel counted of the calling thread so far: its context switches and its time
/// on a core and waiting for one ([`thread_times`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ThreadTimes {
    /// Context switches it asked for (blocking, a timed wait).
    pub(crate) voluntary: u64,
    /// Context switches it did not ask for (preemption, a `sched_yield` that found another
    /// runnable thread).
    pub(crate) involuntary: u64,
    /// Nanoseconds it ran on a core.
    pub(crate) on_core_ns: u64,
    /// Nanoseconds it was runnable but waited for a core (the scheduler's run queue).
    pub(crate) runnable_ns: u64,
}

impl ThreadTimes {
    /// What happened between `start` and `self` (counters that went back read as 0).
    pub(crate) fn since(self, start: ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            voluntary: self.voluntary.saturating_sub(start.voluntary),
            involuntary: self.involuntary.saturating_sub(start.involuntary),
            on_core_ns: self.on_core_ns.saturating_sub(start.on_core_ns),
            runnable_ns: self.runnable_ns.saturating_sub(start.runnable_ns),
        }
    }
}

/// The calling thread's [`ThreadTimes`]: the switches from `getrusage(RUSAGE_THREAD)`, the
/// time on a core from its CPU-time clock (`CLOCK_THREAD_CPUTIME_ID`, exact at the call),
/// and, with `run_queue`, the time it waited on a run queue from `/proc/thread-self/schedstat`
/// (its second field; complete up to the thread's last switch onto a core, so exact when the
/// thread reads its own). Whatever is not available reads as 0: everything off Linux, the run
/// queue where the kernel keeps no scheduler statistics. The run queue costs a file read (a
/// few µs), so the loop asks for it only when it is timed.
#[cfg(target_os = "linux")]
pub(crate) fn thread_times(run_queue: bool) -> ThreadTimes {
    // SAFETY: `ru` is a plain struct on our stack, zero-initialised; getrusage only writes
    // it. On failure it is left zeroed, which reads as nothing.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let on_core_ns = super::anatomy::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let runnable_ns = if run_queue {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| parse_schedstat(&s))
            .unwrap_or(0)
    } else {
        0
    };
    ThreadTimes {
        voluntary: ru.ru_nvcsw as u64,
        involuntary: ru.ru_nivcsw as u64,
        on_core_ns,
        runnable_ns,
    }
}

/// The calling thread's [`ThreadTimes`] (not available on this OS: zeros).
#[cfg(not(target_os = "linux"))]
pub(crate) fn thread_times(_run_queue: bool) -> ThreadTimes {
    ThreadTimes::default()
}

/// The time waiting on a run queue, in ns, from a `schedstat` line (`"<on core> <run queue>
/// <time slices>"`: the second field; the first is taken from the CPU-time clock instead);
/// `None` if it does not read so.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_schedstat(s: &str) -> Option<u64> {
    let mut fields = s.split_ascii_whitespace().map(str::parse::<u64>);
    fields.next()?.ok()?;
    fields.next()?.ok()
}

impl Policy {
    /// The step after `idle` consecutive idle passes; `due` when a response to this worker
    /// or a request to it is on its way (spin longer, `spin` passes, before giving the core
    /// away).
    pub(crate) fn step(self, idle: u32, due: bool, spin: &Spin) -> Step {
        // The yield stretch shrinks with the spin budget: where waits outlast it, yielding
        // only hands the core to other waiting workers, one context switch each.
        let yields = spin.yields();
        let spin = if spin.is_crowded() {
            0
        } else if due {
            spin.due()
        } else {
            spin.idle
        };
        if idle < spin {
            return Step::Spin;
        }
        match self {
            Policy::Local | Policy::Rings if idle >= spin + yields => Step::Park,
            Policy::Local | Policy::Rings => Step::Yield,
            Policy::Loopback if !due && idle >= spin + LOOPBACK_YIELD => {
                let k = ((idle - spin - LOOPBACK_YIELD) / 64).min(4);
                Step::Wait(Duration::from_micros(25 << k))
            }
            Policy::Loopback => Step::Yield,
            Policy::Ranks if idle >= spin + MPI_YIELD => Step::Wait(MPI_WAIT),
            Policy::Ranks => Step::Yield,
        }
    }
}

/// Carries out a step other than [`Step::Park`] (which needs the worker: see
/// [`Sleepers::park`]).
pub(crate) fn pause(step: Step) {
    match step {
        Step::Spin => std::hint::spin_loop(),
        Step::Yield => std::thread::yield_now(),
        Step::Wait(d) => std::thread::sleep(d),
        Step::Park => {}
    }
}

/// One worker's entry, alone in its cache line: wakers of every worker read it.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Sleeper {
    sleeping: AtomicBool,
    thread: OnceLock<std::thread::Thread>,
}

/// The sleeping flags and threads of a run's workers (see the module docs), or their futex
/// words over the shared-memory rings.
#[derive(Debug)]
pub(crate) struct Sleepers {
    slots: Box<[Sleeper]>,
    /// Over the rings: the workers' futex words, their single wait point (module docs).
    words: Option<Arc<dyn WakeWords>>,
}

impl Sleepers {
    /// Entries for `n` workers (global indices; over MPI only this rank's ever register);
    /// with `words`, they wait on those (`Policy::Rings`).
    pub(crate) fn new(n: usize, words: Option<Arc<dyn WakeWords>>) -> Sleepers {
        Sleepers { slots: (0..n).map(|_| Sleeper::default()).collect(), words }
    }

    /// Registers the calling thread as worker `w`'s (once, when its loop starts).
    pub(crate) fn register(&self, w: usize) {
        let _ = self.slots[w].thread.set(std::thread::current());
    }

    /// The sleeper's first step: announces that worker `w` may park. The caller must then
    /// run one whole pass of its loop and park only if that pass found nothing to do.
    pub(crate) fn arm(&self, w: usize) {
        if let Some(word) = self.word(w) {
            return word.arm();
        }
        self.slots[w].sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Withdraws [`Sleepers::arm`] (the re-check pass found work).
    pub(crate) fn disarm(&self, w: usize) {
        if let Some(word) = self.word(w) {
            return word.disarm();
        }
        self.slots[w].sleeping.store(false, Ordering::Relaxed);
    }

    /// Whether worker `w` announced that it may park (or is parked). For the store-buffering
    /// argument the caller has armed itself first (its `SeqCst` fence).
    pub(crate) fn is_armed(&self, w: usize) -> bool {
        match self.word(w) {
            Some(word) => word.is_armed(),
            None => self.slots[w].sleeping.load(Ordering::Relaxed),
        }
    }

    /// Parks worker `w` (the calling thread, armed, after an idle re-check pass) until a
    /// wake-up (or spuriously, or, on a futex word, at its safety net's timeout), then
    /// disarms it. False when nobody woke it (only on a futex word: a thread's park cannot
    /// tell).
    pub(crate) fn park(&self, w: usize) -> bool {
        if let Some(word) = self.word(w) {
            return word.block(BLOCK_LIMIT) == Blocked::Woken;
        }
        std::thread::park();
        self.disarm(w);
        true
    }

    /// Parks the thread that runs the workers `ids` (`worker/looping.rs`, every one of them
    /// armed, after their re-check passes) until a wake-up of any of them, then disarms them:
    /// in one process the thread's park token (every entry names the thread), over the rings
    /// the futex word they share (the first one's, `transport::wake::thread_group`). False
    /// when nobody woke it (a futex word's safety net).
    pub(crate) fn park_shared(&self, ids: std::ops::Range<usize>) -> bool {
        if let Some(word) = self.word(ids.start) {
            return word.block(BLOCK_LIMIT) == Blocked::Woken;
        }
        std::thread::park();
        for w in ids {
            self.disarm(w);
        }
        true
    }

    /// True when the workers wait on futex words (over the rings: `Policy::Rings`).
    pub(crate) fn on_words(&self) -> bool {
        self.words.is_some()
    }

    /// Worker `w`'s futex word, over the rings.
    #[inline]
    fn word(&self, w: usize) -> Option<&crate::transport::wake::WakeWord> {
        self.words.as_deref().and_then(|ws| ws.word(w))
    }

    /// The waker's side: call after making work for worker `w` visible (a Release store).
    #[inline]
    pub(crate) fn wake(&self, w: usize) {
        fence(Ordering::SeqCst);
        self.wake_after_fence(w);
    }

    /// [`Sleepers::wake`] for every worker (the run ends: shutdown or abort).
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for w in 0..self.slots.len() {
            self.wake_after_fence(w);
        }
    }

    #[inline]
    fn wake_after_fence(&self, w: usize) {
        if let Some(ws) = &self.words {
            // Over the rings: only this rank's workers have threads here to wake.
            if self.slots[w].thread.get().is_some() {
                if let Some(word) = ws.word(w) {
                    word.wake_after_fence();
                }
            }
            return;
        }
        let s = &self.slots[w];
        if s.sleeping.load(Ordering::Relaxed) {
            if let Some(t) = s.thread.get() {
                t.unpark();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_parse_and_thread_times_move_forward() {
        assert_eq!(parse_schedstat("375095437 1302668 77\n"), Some(1_302_668));
        assert_eq!(parse_schedstat("12 34"), Some(34));
        assert_eq!(parse_schedstat("12"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        assert_eq!(parse_schedstat(""), None);
        let start = thread_times(true);
        // Some work on a core: the time counted on it cannot go back.
        let mut x = 1u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        let d = thread_times(true).since(start);
        // A counter that went back (another thread's reading) is no time, not a wrap.
        let back = ThreadTimes { on_core_ns: 5, runnable_ns: 1, ..start };
        assert_eq!(back.since(ThreadTimes { on_core_ns: 7, ..start }).on_core_ns, 0);
        // On Linux that work shows as time on a core (the thread's CPU-time clock).
        if cfg!(target_os = "linux") {
            assert!(d.on_core_ns > 0, "2 M multiplications took no time on a core: {d:?}");
        }
        // Without the run queue asked for, none is read.
        assert_eq!(thread_times(false).runnable_ns, 0);
    }

    #[test]
    fn the_affinity_is_counted_as_the_wake_words_count_it() {
        if cfg!(target_os = "linux") {
            let mine =
                crate::transport::wake::union_cores([&crate::transport::wake::affinity_mask()[..]]);
            assert!(mine >= 1 && affinity_cores() == mine && cores() <= mine);
        }
    }

    #[test]
    fn the_run_cores_are_the_nodes_where_the_ranks_told_them() {
        // Unknown union: this process's cores.
        assert_eq!(node_cores(2, 2, None), 2);
        assert_eq!(node_cores(2, 2, Some(0)), 2);
        // Two ranks bound to a core each: 2 threads on 2 cores, not on this rank's one.
        assert_eq!(node_cores(1, 1, Some(2)), 2);
        assert!(!oversubscribed(2, node_cores(1, 1, Some(2))));
        // A quota below the mask caps the node too.
        assert_eq!(node_cores(2, 8, Some(8)), 2);
        assert!(oversubscribed(3, 2) && !oversubscribed(2, 2));
        assert_eq!(run_cores(None), cores());
        assert_eq!(run_cores(Some(cores())), cores());
    }

    #[test]
    fn a_shared_threads_calm_wait_spins_its_share_then_yields_twice_then_blocks() {
        let (p, c) = (Policy::Rings, Spin::calm_shared(4));
        assert_eq!(p.step(SPIN / 4 - 1, false, &c), Step::Spin);
        assert_eq!(p.step(SPIN / 4, false, &c), Step::Yield);
        assert_eq!(p.step(SPIN / 4 + CALM_YIELDS, false, &c), Step::Park);
        // At least one pass each, and a due wait keeps the calm budget.
        let many = Spin::calm_shared(1000);
        assert_eq!(p.step(0, false, &many), Step::Spin);
        assert_eq!(p.step(1, false, &many), Step::Yield);
        assert_eq!(many.due(), Spin::calm().due());
        assert_eq!(p.step(SPIN, true, &c), p.step(SPIN, true, &Spin::calm()));
    }

    #[test]
    fn local_workers_spin_then_yield_then_park() {
        let (p, s) = (Policy::Local, Spin::default());
        assert_eq!(p.step(0, false, &s), Step::Spin);
        assert_eq!(p.step(SPIN, false, &s), Step::Yield);
        assert_eq!(p.step(SPIN + YIELD, false, &s), Step::Park);
        // Work on its way: spin longer, but still park in the end (the publisher wakes us).
        assert_eq!(p.step(SPIN + YIELD, true, &s), Step::Spin);
        assert_eq!(p.step(SPIN_DUE + YIELD, true, &s), Step::Park);
    }

    #[test]
    fn a_calm_wait_spins_yields_twice_then_blocks_and_due_waits_keep_their_budget() {
        let (p, c) = (Policy::Rings, Spin::calm());
        assert_eq!(p.step(SPIN - 1, false, &c), Step::Spin);
        assert_eq!(p.step(SPIN, false, &c), Step::Yield);
        assert_eq!(p.step(SPIN + CALM_YIELDS - 1, false, &c), Step::Yield);
        assert_eq!(p.step(SPIN + CALM_YIELDS, false, &c), Step::Park);
        // The default budget yields YIELD times where the calm one blocks.
        assert_eq!(p.step(SPIN + CALM_YIELDS, false, &Spin::default()), Step::Yield);
        assert!(!c.is_crowded());
    }

    #[test]
    fn the_spin_budget_shrinks_when_waits_outlast_it_and_grows_back() {
        let mut s = Spin::default();
        // The peer needs this core: every wait outlasts the budget.
        for _ in 0..20 {
            let b = s.due();
            s.ended(b + 1);
        }
        assert_eq!(s.due(), SPIN_DUE_MIN);
        assert_eq!(Policy::Local.step(SPIN_DUE_MIN, true, &s), Step::Yield);
        // ... and the yield stretch with it: a few yields, then park.
        assert_eq!(s.yields(), 2);
        assert_eq!(Policy::Local.step(SPIN_DUE_MIN + 2, true, &s), Step::Park);
        assert_eq!(Policy::Local.step(SPIN + 2, false, &s), Step::Park);
        // Waits end within the budget again: it grows back to the full one.
        for _ in 0..200 {
            s.ended(1);
        }
        assert_eq!(s.due(), SPIN_DUE);
    }

    #[test]
    fn an_oversubscribed_budget_adapts_below_its_cap() {
        let mut s = Spin::oversubscribed();
        assert_eq!(s.due(), SPIN_DUE_OVER);
        assert_eq!(s.yields(), YIELD * SPIN_DUE_OVER / SPIN_DUE);
        assert_eq!(Policy::Local.step(SPIN_DUE_OVER - 1, true, &s), Step::Spin);
        assert_eq!(Policy::Local.step(SPIN_DUE_OVER, true, &s), Step::Yield);
        assert_eq!(Policy::Rings.step(SPIN_DUE_OVER + s.yields(), true, &s), Step::Park);
        // Waits that end within the budget never grow it past the cap ...
        for _ in 0..200 {
            s.ended(1);
        }
        assert_eq!(s.due(), SPIN_DUE_OVER);
        // ... and waits that outlast it shrink it to the common floor.
        for _ in 0..20 {
            let b = s.due();
            s.ended(b + 1);
        }
        assert_eq!((s.due(), s.yields()), (SPIN_DUE_MIN, 2));
        assert!(!s.is_crowded());
    }

    #[test]
    fn split_runs_never_park() {
        let s = Spin::default();
        for idle in [0, SPIN, SPIN_DUE + YIELD, u32::MAX] {
            for due in [false, true] {
                assert_ne!(Policy::Loopback.step(idle, due, &s), Step::Park);
                assert_ne!(Policy::Ranks.step(idle, due, &s), Step::Park);
            }
        }
        assert_eq!(Policy::Ranks.step(u32::MAX, true, &s), Step::Wait(MPI_WAIT));
        assert_eq!(Policy::Loopback.step(u32::MAX, true, &s), Step::Yield);
        // With nothing due a loopback split backs off to timed waits, up to 400 µs.
        assert_eq!(
            Policy::Loopback.step(u32::MAX, false, &s),
            Step::Wait(Duration::from_micros(400))
        );
    }

    #[test]
    fn ranks_over_the_rings_spin_then_yield_then_block() {
        let s = Spin::default();
        for (idle, due) in
            [(0, false), (SPIN, false), (SPIN + YIELD, false), (SPIN_DUE + YIELD, true)]
        {
            assert_eq!(Policy::Rings.step(idle, due, &s), Policy::Local.step(idle, due, &s));
        }
        assert_eq!(Policy::Rings.step(u32::MAX, true, &s), Step::Park);
    }

    /// Futex words in this process's heap (the rings' words are in shared memory).
    #[derive(Debug)]
    struct HeapWords(Vec<crate::transport::wake::WakeWord>);

    impl WakeWords for HeapWords {
        fn word(&self, g: usize) -> Option<&crate::transport::wake::WakeWord> {
            self.0.get(g)
        }
        fn threads_of(&self, _rank: usize) -> usize {
            self.0.len()
        }
        fn node_cores(&self) -> usize {
            0
        }
    }

    #[test]
    fn over_futex_words_a_local_waker_wakes_a_blocked_worker() {
        let words = HeapWords((0..2).map(|_| Default::default()).collect());
        let s = Arc::new(Sleepers::new(2, Some(Arc::new(words))));
        let work = Arc::new(AtomicBool::new(false));
        let (s2, work2) = (s.clone(), work.clone());
        let sleeper = std::thread::spawn(move || {
            s2.register(1);
            loop {
                s2.arm(1);
                assert!(s2.is_armed(1));
                if work2.load(Ordering::Acquire) {
                    s2.disarm(1);
                    return;
                }
                // Woken by the publisher, or (a slow publisher) the safety net's timeout:
                // either way the worker is awake again and looks once more.
                s2.park(1);
                assert!(!s2.is_armed(1), "awake after the park");
            }
        });
        // Wait until the worker has registered (a wake before registration skips it).
        while s.slots[1].thread.get().is_none() {
            std::thread::yield_now();
        }
        work.store(true, Ordering::Release);
        s.wake(1);
        sleeper.join().unwrap();
        // Worker 0 never registered: nothing to wake, and nothing breaks.
        s.wake_all();
    }

    #[test]
    fn a_wake_before_the_park_is_not_lost() {
        let s = std::sync::Arc::new(Sleepers::new(2, None));
        s.register(1);
        s.arm(1);
        // The wake-up comes between the re-check and the park: the token keeps it.
        s.wake(1);
        s.park(1);
        assert!(!s.slots[1].sleeping.load(Ordering::Relaxed), "disarmed after the park");
        // A worker that is not armed is not unparked (nothing to do), and an unregistered
        // one is skipped.
        s.wake(0);
        s.wake_all();
    }

    #[test]
    fn a_parked_worker_is_woken_by_a_publication() {
        let s = std::sync::Arc::new(Sleepers::new(1, None));
        let work = std::sync::Arc::new(AtomicBool::new(false));
        let (s2, work2) = (s.clone(), work.clone());
        let sleeper = std::thread::spawn(move || {
            s2.register(0);
            loop {
                s2.arm(0);
                if work2.load(Ordering::Acquire) {
                    s2.disarm(0);
                    return;
                }
                s2.park(0);
            }
        });
        work.store(true, Ordering::Release);
        s.wake(0);
        sleeper.join().unwrap();
    }
}

/// The sleep/wake protocol under loom: a publisher stores "work" and wakes; a sleeper arms
/// and re-checks. A sleeper that finds no work would park, so it must then have been
/// unparked (the token makes that park return, and the unpark, after the publication,
/// synchronizes with it: the next pass sees the work). Every execution must end with the
/// sleeper having seen the work or been unparked; the broken variant (the waker without its
/// fence) must be caught.
#[cfg(all(test, fw_loom))]
mod loom_tests {
    use loom::sync::atomic::{fence, AtomicBool};
    use loom::sync::Arc;
    use loom::thread;
    use std::sync::atomic::Ordering;

    /// The real protocol's steps (`Sleepers::arm`, the re-check pass, `Sleepers::wake`), in
    /// their order, with an `unparked` flag standing for the thread's park token.
    fn model(waker_fence: bool) {
        loom::model(move || {
            let sleeping = Arc::new(AtomicBool::new(false));
            let work = Arc::new(AtomicBool::new(false));
            let unparked = Arc::new(AtomicBool::new(false));
            let (s2, w2) = (sleeping.clone(), work.clone());
            let sleeper = thread::spawn(move || {
                // arm
                s2.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                // the re-check pass: true = saw the work, false = parks
                w2.load(Ordering::Acquire)
            });
            // publish, then wake
            work.store(true, Ordering::Release);
            if waker_fence {
                fence(Ordering::SeqCst);
            }
            if sleeping.load(Ordering::Relaxed) {
                unparked.store(true, Ordering::Relaxed);
            }
            let saw_work = sleeper.join().unwrap();
            assert!(
                saw_work || unparked.load(Ordering::Relaxed),
                "lost wake-up: the sleeper parked and nobody unparked it"
            );
        });
    }

    #[test]
    fn loom_sleepers_no_lost_wakeup() {
        model(true);
    }

    /// The wake-up of the detecting worker (worker 0, or a rank's first worker) by the last
    /// worker to go idle (`Worker::run_loop`, "Quiescence" in the module docs): workers 1
    /// and 2 finish their work, arm (store, fence) and read each other's flag; the one that
    /// sees the other armed wakes worker 0. When both are idle, one of them must have woken
    /// it. Without the sleeper's fence both may read the other's flag stale: caught.
    fn last_idle_model(arm_fence: bool) {
        loom::model(move || {
            let sleeping = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let woke0 = Arc::new(AtomicBool::new(false));
            let go = |me: usize| {
                let (s, w) = (sleeping.clone(), woke0.clone());
                move || {
                    // arm
                    s[me].store(true, Ordering::Relaxed);
                    if arm_fence {
                        fence(Ordering::SeqCst);
                    }
                    // the other workers of the rank but the first all armed: wake it
                    if s[1 - me].load(Ordering::Relaxed) {
                        w.store(true, Ordering::Relaxed);
                    }
                }
            };
            let t = thread::spawn(go(1));
            go(0)();
            t.join().unwrap();
            assert!(woke0.load(Ordering::Relaxed), "lost wake-up: nobody woke the detector");
        });
    }

    #[test]
    fn loom_sleepers_last_idle_worker_wakes_the_detector() {
        last_idle_model(true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn loom_sleepers_last_idle_without_fence_loses_a_wakeup() {
        last_idle_model(false);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn loom_sleepers_waker_without_fence_loses_a_wakeup() {
        model(false);
    }

    /// Two workers on one thread (`worker/looping.rs`, `run_shared`): the thread arms each
    /// (in the sweeps before), then re-checks each (the sweep in which it parks), and parks
    /// only if neither re-check found work; two publishers each make work for one of them
    /// and wake it (the thread's token, shared by both entries). Every publication must be
    /// seen by its worker's re-check or unpark the thread. With `rearm_between`, worker A's
    /// re-check comes before worker B's arm (a sweep in which A was ready to park and B only
    /// armed), and the thread parks only after a further re-check of both, as `run_shared`
    /// does. The broken variant parks after re-checking the last worker it armed only.
    fn shared_thread_model(rearm_between: bool, recheck_both: bool) {
        loom::model(move || {
            let sleeping = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let work = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let unparked = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let (s2, w2) = (sleeping.clone(), work.clone());
            let thread = thread::spawn(move || {
                let arm = |me: usize| {
                    s2[me].store(true, Ordering::Relaxed);
                    fence(Ordering::SeqCst);
                };
                let recheck = |me: usize| w2[me].load(Ordering::Acquire);
                arm(0);
                if rearm_between && recheck(0) {
                    return [true, false];
                }
                arm(1);
                // The sweep that parks: both re-checks after both arms.
                [recheck_both && recheck(0), recheck(1)]
            });
            let publish = |me: usize| {
                let (s, w, u) = (sleeping.clone(), work.clone(), unparked.clone());
                move || {
                    w[me].store(true, Ordering::Release);
                    fence(Ordering::SeqCst);
                    if s[me].load(Ordering::Relaxed) {
                        u[me].store(true, Ordering::Relaxed);
                    }
                }
            };
            let other = thread::spawn(publish(1));
            publish(0)();
            other.join().unwrap();
            let saw = thread.join().unwrap();
            for me in 0..2 {
                // A thread that saw any work does not park; one that saw none parks, and
                // each publication must then have unparked it.
                let parked = !saw[0] && !saw[1];
                assert!(
                    !parked || unparked[me].load(Ordering::Relaxed),
                    "lost wake-up: the shared thread parked with worker {me}'s work unseen"
                );
            }
        });
    }

    #[test]
    fn loom_shared_thread_no_lost_wakeup() {
        shared_thread_model(false, true);
        shared_thread_model(true, true);
    }

    #[test]
    #[should_panic(expected = "lost wake-up")]
    fn loom_shared_thread_without_every_recheck_loses_a_wakeup() {
        shared_thread_model(false, false);
    }
}
