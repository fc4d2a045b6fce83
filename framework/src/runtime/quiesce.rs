//! Global quiescence detection: "no trustee has work and no request is in flight", and what
//! worker 0 does when it finds it ([`detect`]: wake the `wait_quiescent` callers, or end the
//! run, or report a deadlock).
//!
//! # Model
//!
//! Activity is split into *tasks*; every task is created and finished on the same worker:
//!
//! * a **request** (remote or local, including runtime-internal posts): created when its client
//!   queues it, finished when the client has run its completion (`then` continuation, or waking
//!   the fiber blocked in `apply`);
//! * a **fiber segment**: created when a fiber is spawned or woken from a park (`join`, `Latch`,
//!   `wait_quiescent`), finished when the fiber returns or parks. A fiber blocked in `apply` is
//!   not parked: its segment stays open, and its request is a task of its own.
//!
//! Worker `w` publishes monotonic counters, each written only by `w` (plain load + Release
//! store, no read-modify-write): `finished[w]`, and the creations, split in two so that a
//! request bumps a single counter: `created[w]` counts fiber segments and `issued[w][t]` the
//! requests `w` queued for trustee `t`. Below, `created[w]` stands for their sum
//! `created[w] + Σ_t issued[w][t]`. For every task the creation precedes the finish in `w`'s
//! program order, so `created[w] >= finished[w]` at all times.
//!
//! **Rule of activity**: a task is only ever created by code that runs *inside an unfinished
//! task*: a fiber segment, a delegated closure serving a request (the request is unfinished until
//! its client runs the completion, which is after the trustee published the response), or a
//! completion (the request finishes after it). The only exceptions are the main fiber (created
//! by `Runtime::run`) and the wake-ups issued by the detector itself below.
//!
//! # Detection (two waves, Mattern's four-counter idea)
//!
//! The detector ([`detect`]: worker 0, only when its loop is idle) reads all `finished[w]` (Acquire) in a
//! first wave, then all creation counters (Acquire) in a second wave, and declares quiescence
//! iff the sums are equal.
//!
//! # Why it is correct
//!
//! Let `F[w]` be the wave-1 value and `C[w]` the sum of the wave-2 values of `w`'s creation
//! counters. The Release store that produced `F[w]` follows (in `w`'s program order) the
//! creation of at least `F[w]` tasks, and the detector's Acquire read of `finished[w]`
//! precedes its reads of each creation counter, each of which is monotonic and so includes
//! every creation counted before that store: `C[w] >= F[w]`. Equal sums therefore give
//! `C[w] == F[w] =: k[w]` for every `w`: at the wave-1 read, `w` had created exactly `k[w]`
//! tasks and finished all of them, and it created none between that read and the wave-2 read
//! of the counter that would have counted the creation.
//!
//! Suppose some task is created on some worker beyond its `k[w]` (after the detection or
//! racing with it). Take one, `Z`, whose *parent* (the task whose code created it) is among the
//! counted tasks; one exists because every task descends from the counted main fiber.
//! * If the parent ran on the same worker `w`, the parent finished before the wave-1 read of
//!   `finished[w]`, and `Z` was created before the parent finished, hence before that read, and
//!   the wave-2 read of `created[w]` would include it: `Z`'s index would be `<= k[w]`.
//! * If the parent is a request from client `v` served on `w`, that request was finished on `v`
//!   before the wave-1 read of `finished[v]`; its completion ran after the client
//!   Acquire-loaded the response, which `w` published after creating `Z`. So `Z`'s creation
//!   happens before the wave-1 read of `v`, which precedes the wave-2 read of `created[w]`,
//!   which therefore includes `Z`: again `Z`'s index would be `<= k[w]`.
//!
//! Both contradict the choice of `Z`. So no task is ever created again and all counted tasks are
//! finished: the job is quiescent at the moment between the waves and stays so until the
//! detector itself wakes someone. In particular the gauges (`parked`, `quiesce_waiters`, the
//! lanes of `skein::quiescent_add` and the minimum lanes of `skein::quiescent_min`, which
//! only code running inside a task changes) read after a positive detection are exact,
//! which is how worker 0 tells "wake the `wait_quiescent` callers" from "the job is done"
//! from "deadlock", and what every woken `wait_quiescent_totals` returns.
//!
//! No timeouts are involved anywhere; a detection is only a handful of loads per worker, done
//! when worker 0 has nothing else to do.
//!
//! # Model checking
//!
//! The `loom_*` tests at the bottom run the real two-wave check on the real counters under
//! loom against a model of the workers (their doc comment lists the lines of the real code
//! each step mirrors), and show that reading the waves in the other order is caught.

use super::context;
use super::run_state::WorkerCounters;
use super::worker::Worker;
use crate::sync::Ordering;

/// Two-wave check over the counters of every worker; true means the job was quiescent between
/// the waves (and still is).
pub(crate) fn is_quiescent(counters: &[WorkerCounters]) -> bool {
    let (finished, created) = waves(counters, true);
    finished == created
}

/// `(finished, created)` summed over all workers, read in two waves: all `finished` counters
/// first (the correct order, which the proof above needs), or, with `finished_first` false,
/// the creation counters first (wrong: the loom tests use it to show the model can fail).
#[inline(always)]
fn waves(counters: &[WorkerCounters], finished_first: bool) -> (u64, u64) {
    let finished =
        || counters.iter().map(|c| c.finished.load(Ordering::Acquire)).fold(0, u64::wrapping_add);
    let created = || {
        counters
            .iter()
            .flat_map(|c| std::iter::once(&c.created).chain(c.issued.iter()))
            .map(|x| x.load(Ordering::Acquire))
            .fold(0, u64::wrapping_add)
    };
    if finished_first {
        let f = finished();
        (f, created())
    } else {
        let c = created();
        (finished(), c)
    }
}

/// Worker 0's quiescence step, taken when its loop is idle: wakes `wait_quiescent` callers, or
/// decides shutdown (recording a deadlock if fibers are still parked or `main` has not
/// returned). Returns true when the loop must stop.
pub(crate) fn detect(w: &Worker) -> bool {
    let run_state = &w.run_state;
    if !is_quiescent(&run_state.counters) {
        return false;
    }
    crate::sync::bump(&w.ctr().stats.quiescent_verdicts, 1);
    // Quiescent: nothing changes until we act (see the proof above), so these sums are exact.
    let mut waiting_elsewhere = false;
    // The lanes are gauges too: exact now, and the same totals for every waiter woken here.
    let totals = run_state
        .counters
        .iter()
        .map(|c| crate::runtime::quiesce_ranks::worker_gauges(c).totals)
        .fold(crate::QuiescentTotals::default(), crate::QuiescentTotals::combine);
    for worker in 0..w.n {
        let q = run_state.counters[worker].quiesce_waiters.load(Ordering::Acquire);
        if q > 0 {
            // Exactly the `q` counted now: a fiber that parks on `worker` before this
            // wake-up reaches it (started by what the woken ones do) waits for the next
            // quiescence.
            if worker == w.index {
                w.wake_quiesce_waiters(totals, q);
            } else {
                waiting_elsewhere = true;
                w.post(worker, move || context::expect("wake").wake_quiesce_waiters(totals, q));
            }
        }
    }
    if waiting_elsewhere {
        // Publish those wake-ups now (nothing is in flight, so the slots are free). Otherwise
        // the waiters woken here run first, and one long delegated call among them would hold
        // every other worker's wake-up back until it returned: the other workers' rounds would
        // start only after this worker's round.
        w.flush_requests();
        return false;
    }
    if w.has_quiesce_waiters() || w.has_ready_fibers() {
        return false;
    }
    let parked: u64 = run_state.counters.iter().map(|c| c.parked.load(Ordering::Acquire)).sum();
    let main_done = run_state.main_done.load(Ordering::Acquire);
    if !main_done || parked > 0 {
        run_state.set_deadlock(parked, main_done);
    }
    run_state.stop();
    true
}

/// Model checking of the detector with loom: `RUSTFLAGS="--cfg fw_loom"
/// LOOM_MAX_PREEMPTIONS=3 cargo test -p skein --release --lib loom_`.
///
/// The detector is the real [`is_quiescent`] (through [`waves`]) over real [`WorkerCounters`],
/// whose atomics are loom's under `fw_loom`. The workers are a model of the worker loop (which
/// switches stacks and so cannot run under loom), doing what these lines of the real code do:
///
/// * `Runtime::run` spawns `main` on worker 0 before the loops start: `Worker::spawn_local`
///   bumps `created` (a fiber segment);
/// * `main` calls `apply_then` towards worker 1: `Worker::request` bumps `issued[1]`, and
///   `Worker::poll_client` publishes the batch (a Release store; the slot protocol);
/// * `main` returns: `Worker::run_fiber` bumps `finished` on worker 0;
/// * worker 1 serves the batch (`Worker::serve`, after an Acquire load); the delegated closure
///   spawns a fiber there (`spawn_local`: `created` on worker 1), then the response is
///   published (Release); worker 1 runs the fiber to its end (`finished` on worker 1);
/// * worker 0 takes the response (Acquire) and runs the completion, then `poll_client` bumps
///   `finished` on worker 0 (the request's end).
///
/// Three tasks in all. The detector runs as a thread of its own, so loom places its two waves
/// anywhere among the workers' steps (in the real runtime it runs on worker 0 between loop
/// passes, a subset of these placements). The property checked is the proof's conclusion: a
/// positive detection means no task is ever created afterwards, i.e. the sums it saw are the
/// job's total.
#[cfg(all(test, fw_loom))]
mod loom_tests;
