//! The worker loop: one *pass* at a time ([`Worker::pass`]), run by a thread of its own
//! ([`Worker::run_loop`]) or, when a run's workers outnumber the cores, by a thread that
//! several workers share ([`run_shared`]).
//!
//! # Sharing a thread (`Builder::worker_threads`, `SKEIN_WORKER_THREADS`)
//!
//! A worker is a trustee, a client and its fibers' scheduler; nothing of it needs a thread of
//! its own. Its state is thread-owned (`Cell`s), its counters are single-writer, and
//! everything it does for another worker is non-blocking: a request is published into a slot
//! and served in the trustee's pass, a fiber that waits parks (its worker's loop goes on). So
//! a thread may run the passes of several workers in turn, each pass inside that worker's
//! context (`super::super::context::enter`), and the workers behave as they do on threads of
//! their own, only interleaved at pass boundaries, as a scheduler interleaves threads on one
//! core. What changes is the cost of waiting: a worker that waits for another worker of its
//! thread hands it the thread within a pass, where a thread of its own would spin, yield or
//! block and the one it waits for would wait for a core (`super::super::idle`, "More workers
//! than cores").
//!
//! The idle policy applies to the thread: it pauses only in a sweep in which none of its
//! workers did anything, by the smallest step any of them asked for (spin, then yield), and
//! it parks only when every one of them armed ([`idle::Sleepers::arm`]) in an earlier sweep
//! and found nothing in this one (its re-check). Every worker's `Sleepers` entry names the
//! thread, so a wake-up of any of them unparks it, and an `unpark` between a worker's arm and
//! the park is kept by the thread's token: the argument of `idle.rs` holds for each worker.
//! A worker that is about to park does not wake the rank's first worker when that one runs
//! on its own thread: in the sweep in which the thread parks, the first worker's pass (a
//! re-check that detects quiescence, `quiesce::detect`) comes after every worker of the
//! thread armed, in program order.
//!
//! What a user should know: a fiber that waits for another worker must wait through the
//! runtime (`apply`, a join, a latch, `wait_quiescent`, `yield_now` in a loop); a fiber that
//! blocks its thread (a busy loop that never yields, a blocking lock held across workers)
//! blocks every worker of that thread.
//!
//! # Over the shared-memory rings
//!
//! A rank shares threads among its workers in the same way (`RunState::rank_threads`: by
//! default its cores divided among the node's ranks with the same affinity mask, resolved
//! at the set-up of `transport::shm` by `transport::wake::node_threads`). There a
//! blocked worker waits on a futex word in the memory the ranks share, which other processes
//! wake; the workers of a thread all use the word of its first worker
//! (`transport::wake::thread_group`, the same blocks as `start_workers`'), every rank
//! having learnt every rank's thread count at set-up. The thread arms that word once per
//! worker and blocks on it as above; a disarm by one of its workers (a useful pass) is
//! followed by that worker's arm before the thread can block again, so the word is armed
//! whenever it blocks, and the argument of `transport/wake.rs` holds. Over MPI messages and
//! in loopback splits every worker keeps a thread of its own.

use super::super::anatomy::Part;
use super::super::idle::{self, Policy, Step};
use super::super::quiesce_ranks::Post;
use super::super::remote::Flush;
use super::super::{context, free, quiesce};
use super::{Worker, AGGREGATE_PASSES, DETECT_BUSY_EVERY, DETECT_EVERY};
use crate::sync::{bump, Ordering};
use crate::transport::IdlePolicy;

/// What a pass ended with: what the worker's thread does before its next pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Work was done, or the worker armed (its next pass is the re-check): go on at once.
    Again,
    /// Nothing to do: pause by this step (never [`Step::Park`]) before the next pass.
    Idle(Step),
    /// Armed, and this re-check pass found nothing: park (the caller, [`Worker::parked`]).
    Park,
    /// The run is over for this worker ([`Worker::end_loop`] next).
    Stop,
}

/// A worker loop's state between passes.
pub(crate) struct LoopState {
    policy: Policy,
    /// Set while this worker has announced that it may park (`idle`): the next idle pass is
    /// the re-check, after which it parks.
    armed: bool,
    /// Set by a park that ended unwoken (a futex word's safety net: `idle.rs`); the next pass
    /// then tells whether a wake-up was lost.
    unwoken: bool,
    /// Set by every park: the next pass steps the detector across ranks (a board post may
    /// have woken it).
    after_park: bool,
    /// Waiting crowded (`Builder::crowded_waits`; with `auto`, when the threads outnumber the
    /// cores): block at once, never spin nor yield (`idle.rs`).
    crowded: bool,
    spin: idle::Spin,
    calm: Option<idle::Spin>,
    /// The thread's context switches and times when the loop started (counted by the
    /// thread's first worker only: `None` for the others of a shared thread).
    thread_start: Option<idle::ThreadTimes>,
    /// On the first worker of a thread, the workers it runs (`WorkerStats::thread_workers`).
    thread_workers: u64,
    /// Whether the current idle stretch waited for due work (it then teaches `spin`).
    waited_due: bool,
    idle: u32,
    busy_passes: u32,
    incoming: bool,
    /// The anatomy (`super::super::anatomy`): what the end of the previous pass was.
    tail: Part,
    /// Passes since the last pass that flushed every batch to another rank.
    held: u32,
    aggregate: bool,
    /// The rank's first worker runs on this worker's thread (a shared thread): no need to
    /// wake it before parking.
    first_on_thread: bool,
}

impl Worker {
    /// The state of this worker's loop, on a thread of its own (`shared`: the workers with
    /// these global ids share its thread, [`run_shared`]).
    pub(crate) fn loop_state(&self, shared: Option<std::ops::Range<usize>>) -> LoopState {
        // The transport's kind of waiting (`crate::transport::IdlePolicy`): none in one process
        // (workers park), in memory (a loopback split), or over a network (MPI).
        let policy = match self.run_state.transport.as_deref().map(|t| t.idle_policy()) {
            None => Policy::Local,
            Some(IdlePolicy::Memory) => Policy::Loopback,
            Some(IdlePolicy::Network) => Policy::Ranks,
            Some(IdlePolicy::Rings) => Policy::Rings,
        };
        // In one process, or over the rings, every worker of the run is on this node; what
        // competes for its cores is the threads that run them.
        let one_node = matches!(policy, Policy::Local | Policy::Rings);
        let (threads, cores) = (self.run_state.threads, self.run_state.cores);
        let crowded = one_node && self.run_state.cfg.crowded_waits.applies(threads, cores);
        // Whether the run's threads outnumber this node's cores.
        let over = one_node && idle::oversubscribed(threads, cores);
        // With more threads than cores, waits for due work spin SPIN_DUE_OVER passes at most
        // (`Spin::oversubscribed`), and waits with nothing due spin, yield twice and block
        // (`Spin::calm`).
        let spin = if crowded {
            idle::Spin::crowded()
        } else if over {
            idle::Spin::oversubscribed()
        } else {
            idle::Spin::default()
        };
        let first = shared.as_ref().is_none_or(|r| r.start == self.index);
        // Over the rings a rank's first worker posts a round only once the rank's other
        // workers are armed (`Worker::rank_idle_except`). Workers that share a thread arm
        // after the thread's idle sweeps have run through their budget: with the full one
        // (256 yields), every round's end waited for those sweeps (a rank bound to one core
        // running 4 workers: 256 yields per verdict, SSSP at half the speed). So they wait
        // calm, as on shared cores: spin, yield twice, arm; and they spin SPIN passes in all,
        // not each (`Spin::calm_shared`: with SPIN each, a thread of 4 workers took 256
        // passes to arm them, and 2 ranks of 4 workers ended a round in 120 to 150 µs; with
        // the share, 45 to 75, `docs/performance.md`, "Round ends").
        let shares = shared.as_ref().is_some_and(|r| r.len() > 1);
        let calm = !crowded && (over || (policy == Policy::Rings && shares));
        LoopState {
            policy,
            armed: false,
            unwoken: false,
            after_park: false,
            crowded,
            spin,
            calm: calm.then(|| match shared.as_ref().map_or(1, |r| r.len()) {
                1 => idle::Spin::calm(),
                k => idle::Spin::calm_shared(k),
            }),
            thread_start: first.then(|| idle::thread_times(self.clock.on())),
            thread_workers: if first { shared.as_ref().map_or(1, |r| r.len() as u64) } else { 0 },
            waited_due: false,
            idle: 0,
            busy_passes: 0,
            incoming: false,
            tail: Part::Idle,
            held: 0,
            aggregate: self.run_state.cfg.aggregate,
            first_on_thread: shared.is_some_and(|r| r.contains(&self.rank_lo)),
        }
    }

    /// Runs the worker loop until shutdown, on a thread of its own.
    pub(crate) fn run_loop(&self) {
        self.run_state.sleepers.register(self.index);
        let mut s = self.loop_state(None);
        loop {
            match self.pass(&mut s) {
                Pass::Again => {}
                Pass::Idle(step) => idle::pause(step),
                Pass::Park => {
                    let woken = self.run_state.sleepers.park(self.index);
                    self.parked(&mut s, woken);
                }
                Pass::Stop => break,
            }
        }
        self.end_loop(&s);
    }

    /// After a park of this worker's thread (`woken`: by a wake-up, not a safety net's
    /// timeout): its counts, and its next pass is an after-park pass.
    pub(crate) fn parked(&self, s: &mut LoopState, woken: bool) {
        let st = &self.ctr().stats;
        bump(&st.parks, 1);
        if !woken {
            bump(&st.park_timeouts, 1);
            s.unwoken = true;
        }
        s.after_park = true;
        s.armed = false;
    }

    /// One pass of the loop: every source of work looked at once, then the idle policy's
    /// decision (which the caller carries out: [`Pass`]). Inlined into both loops, so that
    /// a thread of its own keeps the loop's state in registers as one loop body did.
    #[inline(always)]
    pub(crate) fn pass(&self, s: &mut LoopState) -> Pass {
        let sleepers = &self.run_state.sleepers;
        let policy = s.policy;
        let st = &self.ctr().stats;
        let clock = &self.clock;
        clock.mark(st, s.tail);
        clock.pass(st);
        // A stall dump asked for (`super::super::stall`): this worker's section.
        self.check_dump();
        let mut useful = false;
        // 1. ready fibers, FIFO (only those ready now; newly readied ones wait a pass).
        let n = self.ready.borrow().len();
        for _ in 0..n {
            let Some(id) = self.ready.borrow_mut().pop_front() else { break };
            self.run_fiber(id);
            useful = true;
        }
        clock.mark(st, Part::Issuing);
        // 2. trustee role: local queue, then incoming slots.
        useful |= self.run_local();
        // Slots exist between the workers of one rank only.
        for client in self.rank_lo..self.rank_lo + self.local_n {
            if client != self.index {
                useful |= self.serve(client);
            }
        }
        clock.mark(st, Part::Serving);
        // 3. client role: responses, continuations, flushes. Batches to other ranks leave
        // at once when no fiber is ready (nothing here will add to them before the next
        // pass but what the trustee role serves: a fiber blocked in `apply` waits for
        // this very batch); while fibers are ready, when full and every AGGREGATE_PASSES
        // passes (a fiber that yields in a loop keeps every pass busy); the rest when the
        // worker is about to go idle (below).
        s.held = s.held.wrapping_add(1);
        let flush_remote = if !s.aggregate || !self.has_ready_fibers() {
            Flush::Now
        } else if s.held % AGGREGATE_PASSES == 0 {
            Flush::Aged
        } else {
            Flush::Full
        };
        // Batches to trustees of this rank are held the same way, but only with more
        // workers than cores (a trustee then often waits blocked, and every publication
        // wakes it); else they leave at once.
        let flush_local = if s.crowded { flush_remote } else { Flush::Now };
        // Nothing queued for another trustee and nothing awaited from one: the client role
        // has nothing to do (an idle pass at 16 workers skips 15 looks).
        if self.client_busy() {
            for trustee in 0..self.n {
                if trustee != self.index {
                    let flush = if self.is_remote(trustee) { flush_remote } else { flush_local };
                    useful |= self.poll_client(trustee, flush);
                }
            }
        }
        clock.mark(st, Part::Issuing);
        // 4. in a split run, the envelopes that arrived: requests to serve, responses to
        // complete. After the flushes: the requests the fibers just issued leave before
        // this pass's MPI progress call, not after it (a round trip across ranks waits
        // for one call less), and a fiber woken by a response here runs at the top of
        // the next pass, whose flushes send what it issues.
        // Releases and frees are the runtime's housekeeping, not the job's work: a pass that
        // did only those is useful but stamps no round's end (`Clock::worked`).
        let mut chores = false;
        if self.remote.is_some() {
            useful |= self.poll_transport();
            // Served counts of remote clients change only above: the `Release`s they
            // complete are applied here (an owner exists exactly in a split run).
            if let Some(o) = &self.owner {
                chores |= self.process_releases(o);
            }
        }
        chores |= self.frees.process(self);
        let mut worked = useful;
        useful |= chores;
        clock.mark(st, Part::Serving);
        // About to go idle: what is staged for other ranks leaves now (aggregation per
        // destination rank, `Worker::poll_remote`). Not needed when step 3 sent
        // everything: a pass that did nothing useful staged nothing after it.
        if !useful && flush_remote != Flush::Now && self.remote.is_some() && self.client_busy() {
            for rank in (0..self.run_state.ranks).filter(|&r| r != self.rank) {
                useful |= self.poll_remote(rank, Flush::Now);
            }
            worked |= useful;
            s.held = 0;
            clock.mark(st, Part::Issuing);
        }
        s.tail = Part::Issuing;
        let woke = std::mem::take(&mut s.after_park);
        let was_unwoken = std::mem::take(&mut s.unwoken);
        if was_unwoken && useful {
            bump(&st.park_timeouts_useful, 1);
        }
        if useful {
            if worked {
                clock.worked(st);
            }
            if s.armed {
                sleepers.disarm(self.index);
                s.armed = false;
            }
            if s.waited_due {
                s.spin.ended(s.idle);
                s.waited_due = false;
            }
            s.idle = 0;
            s.incoming = false;
            bump(&st.useful_polls, 1);
            s.busy_passes = s.busy_passes.wrapping_add(1);
            // A rank's detector also runs now and then while its first worker is busy:
            // every rank's detection waits for each rank's part of a round. Rarely: each
            // step posts the next all-reduce (a message to every other rank,
            // `quiesce_ranks::mpi`), in the way of the requests.
            if s.busy_passes % DETECT_BUSY_EVERY == 0 {
                let stop = self.poll_detector(Post::Yes);
                clock.mark(st, Part::Detector);
                if stop {
                    return Pass::Stop;
                }
            }
            return Pass::Again;
        }
        bump(&st.idle_polls, 1);
        if self.run_state.shutdown.load(Ordering::Acquire) {
            return Pass::Stop;
        }
        let took_frees = free::take_foreign(self);
        s.idle = s.idle.saturating_add(1);
        let idle = s.idle;
        // Across ranks, every DETECT_EVERY idle passes (also while a response is due: a
        // rank waiting for an answer must still take part in the rounds, or an abort
        // elsewhere could never reach it). Not on every pass: each completed round posts
        // the next all-reduce, and rounds back to back would keep every rank's progress
        // engine busy with them, in the way of the requests.
        // (`idle` saturates: from then on, every pass.)
        // Over the rings also in the re-check pass before blocking and after a wake-up, and
        // a round is posted only once the rank's other workers are idle (`idle.rs`).
        // A round owed after waking waiters: on every idle pass, where a pass may wait
        // (over MPI, 50 µs); over the rings the re-check pass before blocking posts it.
        let owed = policy != Policy::Rings && self.post_owed.get();
        if idle % DETECT_EVERY == 0 || idle == u32::MAX || s.armed || woke || owed {
            // While another worker of the rank works, a round goes out only after a wait
            // that nobody ended (the safety net: rounds then still tell the other ranks,
            // and their stall dumps, that this rank lives).
            let rank_idle = policy != Policy::Rings || self.rank_idle_except(sleepers, None);
            // Over the rings a rank with a task open (a response it awaits, a fiber not yet
            // parked) holds its post back: no detection of that round could be positive, and
            // each post wakes the other ranks. The task's end wakes this worker (a response's
            // arrival, the last worker of the rank to block). A wait nobody ended posts
            // anyway, and so does a hold past `HOLD_LIMIT` (`Worker::poll_detector`): an
            // abort elsewhere, whose rank will never answer, then reaches this rank in that
            // round (`quiesce_ranks`, "Posts that would be wasted").
            let post = if was_unwoken {
                Post::Yes
            } else if !rank_idle {
                Post::No
            } else if policy == Policy::Rings {
                Post::UnlessWasted
            } else {
                Post::Yes
            };
            let completed = st.all_reduces_completed.load(Ordering::Relaxed);
            let outstanding = st.all_reduces_posted.load(Ordering::Relaxed) != completed;
            let stop = self.poll_detector(post);
            // A round outstanding before an unwoken park that completed after it: its last
            // post did not wake this worker (a lost wake-up, as a useful pass would be).
            if was_unwoken
                && outstanding
                && st.all_reduces_completed.load(Ordering::Relaxed) != completed
            {
                bump(&st.park_timeouts_useful, 1);
            }
            clock.mark(st, Part::Detector);
            if stop {
                return Pass::Stop;
            }
        }
        // A response is due, or (below) requests are on their way to us: spin longer
        // before giving the core away (a busy peer's pass takes a while), then yield, then
        // park (the peer's publication wakes us) or, over MPI, wait briefly between polls.
        let due = self.own_work_due();
        // Worker 0 detects quiescence every 16 idle passes, on every pass after a long
        // stretch, and always in the pass before it parks (`armed`): the other workers
        // wake it when they park, and nobody else would run the detection.
        if !due
            && self.detector.is_none()
            && self.index == 0
            && (idle % 16 == 0 || s.armed || idle > idle::SPIN + idle::YIELD)
        {
            bump(&st.detector_steps, 1);
            let stop = quiesce::detect(self);
            clock.mark(st, Part::Detector);
            if stop {
                return Pass::Stop;
            }
        }
        // Requests on their way to us: treated like a due response. Other workers'
        // counters are only read every SPIN passes: reading a client's `issued` line on
        // every idle pass would pull it away from that client's hot path.
        if !due && idle % idle::SPIN == 0 {
            s.incoming = self.incoming_due();
        }
        s.waited_due |= due || s.incoming;
        if clock.on() {
            s.tail = if due {
                Part::WaitResponse
            } else if self.rank_waits_quiescence() {
                Part::WaitQuiescence
            } else {
                Part::Idle
            };
        }
        let budget = match &s.calm {
            Some(calm) if !(due || s.incoming) => calm,
            _ => &s.spin,
        };
        match policy.step(idle, due || s.incoming, budget) {
            // Over MPI a pass already waits in an MPI call: no `pause` on top; and no
            // timed wait while sends or receives are under way (they need progress calls).
            Step::Spin if policy == Policy::Ranks => Pass::Again,
            Step::Wait(_)
                if self.run_state.transport.as_deref().is_some_and(|t| t.busy(self.index)) =>
            {
                bump(&st.yields, 1);
                Pass::Idle(Step::Yield)
            }
            // Work this pass made for this very worker, which no other thread will wake
            // it for: frees taken over, fibers the detector just woke (`detect` wakes
            // the `wait_quiescent` callers of worker 0 after `due` was computed).
            Step::Park if took_frees || self.has_ready_fibers() => Pass::Again,
            Step::Park if !s.armed => {
                sleepers.arm(self.index);
                s.armed = true;
                Pass::Again
            }
            Step::Park => {
                // The pass after arming found nothing: park. The rank's first worker
                // detects quiescence in its idle passes, so it looks again once this
                // worker is idle, if every other worker of the rank is idle too: the
                // last of them to arm sees the others armed (`idle.rs`, "Quiescence").
                // Not when it shares this thread: its own re-check pass, in the sweep that
                // parks the thread, comes after this worker's arm (module docs).
                if self.index != self.rank_lo
                    && !s.first_on_thread
                    && self.rank_idle_except(sleepers, Some(self.rank_lo))
                {
                    sleepers.wake(self.rank_lo);
                }
                Pass::Park
            }
            step => {
                if step == Step::Yield {
                    bump(&st.yields, 1);
                }
                Pass::Idle(step)
            }
        }
    }

    /// The end of this worker's loop (after [`Pass::Stop`]): counts, the run's last frees,
    /// sends completed.
    pub(crate) fn end_loop(&self, s: &LoopState) {
        let st = &self.ctr().stats;
        self.clock.mark(st, s.tail);
        if let Some(start) = s.thread_start {
            let d = idle::thread_times(self.clock.on()).since(start);
            bump(&st.switches_voluntary, d.voluntary);
            bump(&st.switches_involuntary, d.involuntary);
            bump(&st.on_core_ns, d.on_core_ns);
            bump(&st.runnable_ns, d.runnable_ns);
            bump(&st.thread_workers, s.thread_workers);
        }
        // Shutdown is only decided at quiescence: every request has been served, so every
        // pending free is eligible now. No request of this run can arrive any more: the
        // export counts of the slots still live are dropped (`docs/rack-mode.md` §5.4), their
        // last local counts going down the free path below.
        if let Some(o) = &self.owner {
            o.borrow_mut().end_of_run();
        }
        free::take_foreign(self);
        self.frees.process(self);
        debug_assert!(self.frees.is_empty() || self.run_state.aborted.load(Ordering::Acquire));
        // Every envelope of the run has been received (quiescence across ranks): complete
        // this worker's sends before the transport is closed. An aborted run may have
        // rendezvous sends that a stopped peer never receives: give up on those after a while
        // (their buffers are leaked, never freed under MPI's feet).
        if matches!(s.policy, Policy::Ranks | Policy::Rings) {
            if let Some(t) = self.run_state.transport.as_deref() {
                let limit = std::time::Duration::from_secs(5);
                if !t.drain(self.index, limit) && !self.run_state.aborted.load(Ordering::Acquire) {
                    self.run_state.record_error(format!(
                        "rank {} worker {}: sends still incomplete {limit:?} after the run ended",
                        self.rank, self.index
                    ));
                }
            }
        }
        // Deadlocked fibers (reported as Error::Deadlock) are leaked, never unwound.
        for f in self.fibers.borrow_mut().drain(..).flatten() {
            std::mem::forget(f);
        }
    }
}

/// Runs the loops of `workers` (consecutive global ids of one rank: in one process unsplit,
/// `Policy::Local`, or over the rings, `Policy::Rings`) on the calling thread, a pass of each
/// in turn, until every one of them has stopped (module docs).
pub(crate) fn run_shared(workers: &[Worker]) {
    let (Some(first), Some(last)) = (workers.first(), workers.last()) else { return };
    let ids = first.index..last.index + 1;
    let sleepers = &first.run_state.sleepers;
    let mut states: Vec<LoopState> = workers
        .iter()
        .map(|w| {
            sleepers.register(w.index);
            w.loop_state(Some(ids.clone()))
        })
        .collect();
    // In one process the thread's park token, over the rings the futex word of its first
    // worker, which every worker of the thread waits on (`transport::wake::thread_group`).
    debug_assert!(states.iter().all(|s| matches!(s.policy, Policy::Local | Policy::Rings)));
    let mut stopped = vec![false; workers.len()];
    let mut left = workers.len();
    while left > 0 {
        // Whether some worker did something (or armed), every live one is ready to park, and
        // the smallest pause asked for.
        let (mut again, mut park, mut pause) = (false, true, Step::Park);
        for (i, w) in workers.iter().enumerate() {
            if stopped[i] {
                continue;
            }
            let pass = {
                let _entered = context::enter(w);
                w.pass(&mut states[i])
            };
            match pass {
                Pass::Again => (again, park) = (true, false),
                Pass::Idle(step) => {
                    park = false;
                    pause = pause.min(step);
                }
                Pass::Park => {}
                Pass::Stop => {
                    stopped[i] = true;
                    left -= 1;
                }
            }
        }
        if again || left == 0 {
            continue;
        }
        if park {
            // Every live worker armed in an earlier sweep and found nothing in this one.
            let woken = sleepers.park_shared(ids.clone());
            for (i, w) in workers.iter().enumerate() {
                if !stopped[i] {
                    w.parked(&mut states[i], woken);
                }
            }
        } else {
            idle::pause(pause);
        }
    }
    for (w, s) in workers.iter().zip(&states) {
        let _entered = context::enter(w);
        w.end_loop(s);
    }
}
