//! Quiescence detection across ranks (rack mode): the pipelined detector that worker 0 of
//! every rank runs from its idle loop, one non-blocking sum all-reduce per round, and the
//! all-reduce seam it runs on ([`AllReduce`]: [`ThreadsAllReduce`] for fake ranks in one
//! process, `mpi::MpiAllReduce`, an exchange of point-to-point MPI messages, with the `mpi`
//! feature: an outstanding `MPI_Iallreduce` cost every MPI call of the rank a poll of
//! libnbc under its lock, `mpi.rs`; `shm::ShmAllReduce`, vectors posted on the
//! shared-memory transport's board when that transport runs, `shm.rs`). The design
//! is `docs/rack-mode.md`, section 6; this module holds the code and the argument.
//!
//! # Counting
//!
//! Tasks, their counters and the *rule of activity* are those of [`super::quiesce`],
//! unchanged on every worker of every rank: a request (remote or local, control messages
//! included) is created when its client queues it (`issued[c][g]`, indexed by global
//! trustee) and finished when its client has run its completion, after the response arrived.
//! Control messages across ranks are answered like requests, so every task is still created
//! and finished on one worker, which is the first premise of the proof in `quiesce.rs`.
//!
//! # The detector: rounds
//!
//! On every rank, worker 0 runs a [`Detector`] in rounds `d = 0, 1, 2, ...`, one all-reduce
//! per round. Round `d`, on each rank, once the all-reduce of round `d − 1` has completed
//! there:
//!
//! 1. act on verdict `d − 2` (decided by all-reduce `d − 1`) if it was positive: wake this
//!    rank's `wait_quiescent` waiters, or stop ([`Verdict::action`]; the caller does this);
//! 2. read `C` = the rank's creation counters (Acquire): wave 2 of detection `d − 1`;
//! 3. read `F` = the rank's `finished` counters (Acquire): wave 1 of detection `d`; then
//!    the gauges `parked`, `quiesce_waiters`, `main_done`, `aborted`, the lanes of
//!    `skein::quiescent_add` and the minimum lanes of `skein::quiescent_min`;
//! 4. post the all-reduce of `[C, F, parked, waiters, main_done, aborted, lanes, !mins,
//!    last_work]` (every word summed but the complemented minima and the rank's latest end
//!    of a loop pass that worked, maximized: [`fold`]). When it completes, detection
//!    `d − 1` is positive iff `ΣF(d − 1) == ΣC(d − 1)` (`ΣF(d − 1)` came with all-reduce
//!    `d − 1`), and every rank computes the same [`Verdict`] from the same sums. The last
//!    word is statistics only (`WorkerStats::round_ends`: a positive verdict's round was
//!    read after the job's last work, so its maximum is where the round's end began); no
//!    verdict depends on it.
//!
//! A rank with work keeps taking part: the all-reduce is non-blocking, and a busy rank only
//! makes every rank's detection lag, never wait.
//!
//! # Why it is correct
//!
//! The proof in `quiesce.rs` uses two facts about the waves: (i) per worker, wave 2 is read
//! after wave 1, so `C[w] >= F[w]`; (ii) every wave-1 read happens before every wave-2 read.
//! Here:
//!
//! * (i) on each rank, `C(d)` is read after `F(d)`: step 3 of round `d`, then step 2 of
//!   round `d + 1`, both by worker 0, in program order.
//! * (ii) every rank's wave-1 reads `F(d)` precede its contribution to all-reduce `d`, and
//!   every rank reads wave 2 `C(d)` only after all-reduce `d` completed on that rank.
//!   **Transport condition T1**: an all-reduce completes on a rank only after every rank has
//!   contributed (true of any all-reduce: its result depends on every input), and its
//!   completion orders memory: the reads precede the call in program order, and the
//!   completion follows the other ranks' calls ([`ThreadsAllReduce`]: its lock;
//!   `MpiAllReduce`: a round completes only once every other rank's message of that round
//!   was received).
//! * The proof's case "the parent is a request from client `v`, served on `w`" now crosses
//!   ranks: the child `Z` is created on the trustee before the response is sent; the
//!   client's completion runs after the response is received, then `finished[v]` is bumped,
//!   then read in wave 1. **Transport condition T2**: a response's receipt happens after its
//!   send, and a trustee sends a response only after the records' closures returned (so
//!   their creations are counted, Release-bumped, before the send). Each trustee answers
//!   its own segment of an envelope in a response of its own (a forwarded segment too,
//!   `super::remote`, invariant 4), so the chain is: the trustee's bump → its send (the
//!   transport's publication: a ring's Release `tail`, `MPI_Isend`) → receipt on the
//!   client → completion → `finished` bump: a chain of happens-before.
//! * Equal sums then give `C[w] == F[w]` on every worker of every rank, and the argument of
//!   `quiesce.rs` (take a task `Z` created beyond the count whose parent was counted; its
//!   creation would have been counted) goes through word for word. Messages in flight need no
//!   counter of their own: a request envelope in flight belongs to an unfinished request task
//!   of its client, and so does a response in flight.
//! * Wake-ups by the detector (the proof's exception: roots with no counted parent) happen
//!   in step 1 of round `d`: after this rank's wave-1 read `F(d − 1)` (round `d − 1`, step 3)
//!   and before its wave-2 read `C(d − 1)` (round `d`, step 2). Waking creates a task on
//!   worker 0 (`Worker::wake_parked` bumps `created`; a wake-up posted to another worker is
//!   a request `issued` by worker 0), so it is counted in `C(d − 1)` while its finish is not
//!   in `F(d − 1)`: with `C[w] >= F[w]` everywhere, `ΣC > ΣF`, and detection `d − 1` is
//!   negative. So a positive detection never overlaps a wake-up, and no rank acts twice on
//!   one quiescent state. This is why [`Detector::poll`] posts the next round only on the
//!   call after a positive verdict: the caller must act in between.
//! * The gauges read in step 3 of round `d` are exact for a positive detection `d − 1`: the
//!   job is quiescent from the completion of all-reduce `d − 1` on, and nothing but the
//!   detector's own action (step 1 of round `d + 1`) changes them. The lanes of
//!   `skein::quiescent_add` and the minimum lanes of `skein::quiescent_min` are such gauges
//!   (only code running inside a task changes them), so every fiber a positive verdict
//!   wakes, on every rank, gets the same exact totals and minima.
//! * **Whom a verdict wakes.** The ranks act on one verdict at different times: the round
//!   that decides it completes on each rank when that rank tests it. A rank that acted
//!   first may start work (its `main` spawns fibers on other ranks, its woken drivers send
//!   requests) that reaches a rank which has not acted yet, and park a new `wait_quiescent`
//!   caller there. That caller did not wait in the verdict's quiescence, and waking it would
//!   end its wait early (seen under the MPI transport). So a rank wakes, on each of its
//!   workers, only the first `k` waiters in the worker's list, `k` being that worker's
//!   `quiesce_waiters` read by the post whose round decided the verdict
//!   ([`Detector::waiters`]: exact, like the other gauges, and earlier waiters were all
//!   woken by earlier verdicts); later ones wait for a later quiescence. In one process the
//!   same holds for the wake-ups worker 0 posts to the other workers (`quiesce::detect`).
//! * Agreement: every rank sees the same sums, hence the same verdict in the same round; all
//!   ranks wake their waiters, or all stop, or all report the same deadlock. A rank must not
//!   override a verdict with local state (that would break agreement).
//!
//! # How the worker loop calls it (`Worker::poll_detector`)
//!
//! * At `Runtime::run`, on every rank, on the thread that calls `run` (collective):
//!   `mpi::MpiAllReduce::new()` (a loopback split makes one handle of
//!   `ThreadsAllReduce::group(R)` per fake rank), kept in the run state until the rank's
//!   first worker (global id `rank·W`) takes it (`RunState::take_all_reduce`) and wraps it in
//!   its [`Detector`]. Nothing else uses that all-reduce. A run of one rank keeps
//!   `quiesce::detect` on worker 0.
//! * That worker polls ([`Detector::poll`] over a [`RankView`]: its rank's workers, the run's
//!   `main_done` on the rank of global worker 0, its `aborted` flag) every 32 idle passes, also
//!   while a response is due, and every 16,384 busy passes, and acts on [`Verdict::action`]
//!   *before* its next `poll`: `Continue`: nothing; `WakeWaiters`: wake this rank's waiters
//!   (its own, and a post to each other worker of the rank that has some, then flush);
//!   `Stop { deadlock }`: `RunState::set_deadlock` if `Some`, set `shutdown`, stop the loop
//!   and never poll again. Every rank takes the same action in the same round, so no
//!   all-reduce is left outstanding at a stop.
//! * **Over the shared-memory rings** (`runtime/idle.rs`, `Policy::Rings`) the worker may
//!   block between steps. It steps in the pass that re-checks before blocking and in the pass
//!   after a wake-up, and it is woken by every other rank's post on the board (the post that
//!   completes its round among them: `transport/board.rs`), by arrivals, and by each worker
//!   of its rank about to block. It posts (`Detector::step` with [`Post::UnlessWasted`]) only
//!   when every other worker of its rank is armed or blocked (or, with [`Post::Yes`], after a
//!   wait nobody ended: the safety net's timeout, so that a rank busy on another worker
//!   still posts now and then); the last of them to block wakes it, and it then posts. It
//!   holds the post back while a task of its rank is open (below, "Posts that would be
//!   wasted"): the task's end wakes it (a response's arrival, the last worker of the rank to
//!   block), and it posts then. A post wakes the ranks that have not posted its round, and
//!   every other rank once it completes the round, never a rank whose round it leaves incomplete
//!   (`transport/board.rs`): so after a step that posted, the worker tests the new round
//!   again at once (it may be complete already:
//!   the others posted first, and may even have stopped on its verdict). After acting on a
//!   positive verdict, a rank that had no waiters of its own posts the next round in the same
//!   call; a rank that woke waiters posts it once it is idle again (its first worker's next
//!   idle step with every other worker armed or blocked, as after any work), so that the
//!   round's wave 1 counts the woken fibers' segments finished and its detection can be the
//!   next positive one: a round's end then takes two all-reduces, not three (posted at
//!   once, wave 1 would find the woken waiters unfinished; `skein bench rounds`,
//!   `docs/performance.md`). Over MPI messages and in a loopback split, where an idle pass
//!   may wait (50 µs over MPI) and rounds go out every 32 idle passes, a worker that owes
//!   that post steps on every idle pass until it has posted. So a rank whose workers are
//!   all idle always has its round posted and tested after the others' posts it saw, every
//!   rank's idle first worker is woken when the round it waits for completes, and no step
//!   the proof needs waits for a timeout. A delayed post changes nothing in the argument
//!   above (`Detector::step`). A rank with work still posts every 16,384 busy passes of its
//!   first worker, as before.
//! * **Aborts.** A run stopped before quiescence (a refused envelope) cannot wait for
//!   quiescence, which will never come, and a rank that stops alone leaves the others
//!   waiting for its part of the next round. So over MPI an abort only sets
//!   `RunState::aborted`; the gauge `aborted` travels in the next round's all-reduce, and a
//!   verdict whose sums show it is `Stop` on every rank, quiescent or not.
//!
//! # Posts that would be wasted
//!
//! A rank that has a task open (created and not finished: a response it awaits, a fiber
//! woken and not yet parked) when it would post round `d` takes part only in negative
//! detections with that post. `Detector::post` reads, after wave 1 `F(d)`, the rank's
//! creation counters once more, `C'`; `C' >= F(d)` per worker (fact (i) above), and
//! `C' != F(d)` means a task open at that read. Then:
//!
//! * detection `d` is negative: its wave 2 `C(d)`, read after all-reduce `d`, is at least
//!   `C'` (monotonic), so `C(d) > F(d)` on this rank, and `C >= F` on every other;
//! * detection `d − 1`, which all-reduce `d` decides, is negative too: were it positive, the
//!   job would be quiescent from the completion of all-reduce `d − 1` on until a rank acts on
//!   that verdict, which needs all-reduce `d`, which needs this post; so no task would be
//!   open at this read.
//!
//! So with [`Post::UnlessWasted`] such a post is not made: its reads are dropped, and the
//! round is posted by a later step, with reads of its own. A delayed post changes nothing in
//! the argument above (`Detector::step`), and since both detections it would have decided
//! were negative, no verdict comes later than it would have, counted in detections. Over the
//! rings the worker loop holds such posts back
//! (`Worker::pass`): each would wake every other rank for nothing, and on a machine with
//! more ranks than cores every such wake-up costs a context switch (`skein bench rounds`
//! and the kernels' all-reduces per verdict, `docs/performance.md`). The rank's own abort
//! always goes out. The task's end wakes the worker. After 10 ms of holding
//! (`worker.rs`, `HOLD_LIMIT`) its next step posts with [`Post::Yes`], and so does
//! the step after a wait nobody ended (the safety net's timeout,
//! `transport::wake::BLOCK_LIMIT`, 50 ms).
//! So a task that stays open (a fiber that works for long, a response that will never come
//! because another rank aborted) keeps no round from the other ranks for longer: the posts
//! tell them, and their stall dumps, that this rank lives, and an abort elsewhere reaches
//! this rank in such a round. A busy rank's posts every 16,384 busy passes are
//! [`Post::Yes`] too.

//! # Checks
//!
//! * `sim` (unit tests): a seeded simulation of 2 to 4 fake ranks of 1 to 3 fake workers
//!   whose real counters move (requests across ranks whose closures spawn on the trustee,
//!   completions, `wait_quiescent` and its wake-ups, a deadlock), with worker steps slipped
//!   between single counter reads of the detector's waves. Every positive verdict is checked
//!   against the truth (no task alive, sums equal to every task ever created, exact gauges),
//!   for promptness, and for agreement; the broken variant (wave 2 before the all-reduce) is
//!   caught. The same checks hold with every post that would be wasted held back
//!   ([`Post::UnlessWasted`] on every step); a hold that kept back posts that were not
//!   wasted would leave a quiet job undetected (checked by hand: the schedules never end).
//!   Every wake-up is checked too: a waiter woken by a verdict must have parked
//!   before any rank acted on it; a rank that wakes every waiter it finds (not only those
//!   [`Detector::waiters`] counted) is caught.
//! * `threaded_tests`: ranks as real threads exchanging requests over channels: agreement and
//!   counting under real concurrency (a smoke test; its interleavings are coarse).
//! * `loom_tests`: two ranks of one worker over the real detector and the real
//!   [`ThreadsAllReduce`] under loom, posting on every step and holding back the posts that
//!   would be wasted, and the same broken variant, caught.
//! * `mpi::tests` (feature `mpi`): the test binary re-launched under `mpirun -np 3`.

#[cfg(feature = "mpi")]
pub(crate) mod mpi;
#[cfg(any(test, feature = "mpi"))]
pub(crate) mod shm;

use super::run_state::{RunState, WorkerCounters};
use crate::sync::proto::Mutex;
use crate::sync::{Arc, Ordering};
use std::collections::VecDeque;

// ----- the all-reduce seam -------------------------------------------------------------------

/// A non-blocking sum all-reduce over `u64` vectors, one outstanding at a time, among the
/// ranks of one group (one handle per rank).
///
/// Collective: every rank starts its `i`-th all-reduce with a vector of the same length, and
/// the `i`-th result is every rank's `i`-th vector folded element-wise by [`fold`] (a
/// wrapping sum, the maximum from word [`MAXIMA`] on). The
/// result is complete on a rank only after every rank has started its `i`-th all-reduce
/// (transport condition T1 of the module docs), and what each rank did before `start`
/// happens before what any rank does after `test` returned the result.
pub(crate) trait AllReduce: std::fmt::Debug {
    /// Starts the next all-reduce with this rank's `values`. Panics if one is outstanding
    /// (a bug in the caller: the detector never does it).
    fn start(&mut self, values: &[u64]);
    /// Never blocks: the sums once the outstanding all-reduce has completed on this rank (and
    /// then it is no longer outstanding), `None` while it has not, or when none is outstanding.
    fn test(&mut self) -> Option<&[u64]>;
    /// For a stall dump (`super::stall`): the ranks whose part of the outstanding all-reduce
    /// has not arrived here, if this all-reduce can tell (never blocks).
    fn waiting_for(&mut self) -> Option<Vec<usize>> {
        None
    }
}

/// Where the words of an all-reduced vector stop being summed and start being maximized:
/// the detector's vector holds the minimum lanes there, as complements (`!min`), whose
/// maximum is the complement of the minimum, and whose identity is 0 as the sum's is; then
/// the latest end of a loop pass that worked on any rank.
pub(crate) const MAXIMA: usize = MINS;

/// Folds `v` into `acc`, word by word: a wrapping sum below [`MAXIMA`], the maximum from
/// there on. Every [`AllReduce`] combines its ranks' vectors with it.
#[inline]
pub(crate) fn fold(acc: &mut [u64], v: &[u64]) {
    for (i, (a, &v)) in acc.iter_mut().zip(v).enumerate() {
        *a = if i < MAXIMA { a.wrapping_add(v) } else { (*a).max(v) };
    }
}

impl<T: AllReduce + ?Sized> AllReduce for Box<T> {
    fn start(&mut self, values: &[u64]) {
        (**self).start(values)
    }

    fn test(&mut self) -> Option<&[u64]> {
        (**self).test()
    }

    fn waiting_for(&mut self) -> Option<Vec<usize>> {
        (**self).waiting_for()
    }
}

/// The all-reduce among threads of one process that play ranks ("fake ranks": the tests, and
/// the single-process loopback split of rack mode). Each handle is one rank; the exchange is
/// a mutex-protected table of rounds, so the lock gives the happens-before of T1.
pub(crate) struct ThreadsAllReduce {
    rank: usize,
    group: Arc<Group>,
    /// Index of this rank's outstanding all-reduce, or of its next one.
    round: u64,
    outstanding: bool,
    result: Vec<u64>,
}

struct Group {
    ranks: usize,
    state: Mutex<GroupState>,
}

/// Rounds `base..base + rounds.len()`: started by at least one rank and not yet collected by
/// every rank. At most two are live (a rank starts round `i + 1` only after round `i` is
/// complete, i.e. after every rank started round `i`).
struct GroupState {
    base: u64,
    rounds: VecDeque<Round>,
    /// Per rank, once its handle is dropped: the first round it never contributes to.
    left: Vec<Option<u64>>,
}

struct Round {
    sums: Vec<u64>,
    contributed: usize,
    collected: usize,
}

impl std::fmt::Debug for ThreadsAllReduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadsAllReduce")
            .field("rank", &self.rank)
            .field("ranks", &self.group.ranks)
            .field("round", &self.round)
            .field("outstanding", &self.outstanding)
            .finish()
    }
}

impl ThreadsAllReduce {
    /// One handle per rank of a new group of `ranks` ranks, in rank order.
    pub(crate) fn group(ranks: usize) -> Vec<ThreadsAllReduce> {
        assert!(ranks > 0, "an all-reduce group needs at least one rank");
        let group = Arc::new(Group {
            ranks,
            state: Mutex::new(GroupState {
                base: 0,
                rounds: VecDeque::new(),
                left: vec![None; ranks],
            }),
        });
        (0..ranks)
            .map(|rank| ThreadsAllReduce {
                rank,
                group: group.clone(),
                round: 0,
                outstanding: false,
                result: Vec::new(),
            })
            .collect()
    }

    /// This handle's rank in its group.
    #[cfg(test)]
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// Runs `f` on the table of rounds, under the group's lock. A panic while holding it
    /// (only the length assert in `start`) leaves the table consistent: it comes before the
    /// first write.
    fn with_state<R>(&self, f: impl FnOnce(&mut GroupState) -> R) -> R {
        f(&mut self.group.state.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl AllReduce for ThreadsAllReduce {
    fn start(&mut self, values: &[u64]) {
        assert!(
            !self.outstanding,
            "rank {}: all-reduce {} is still outstanding",
            self.rank, self.round
        );
        let (rank, round) = (self.rank, self.round);
        self.with_state(|st| {
            // round >= base: base passes a round only once every rank has collected it.
            let i = usize::try_from(round - st.base).expect("live rounds fit in usize");
            if i == st.rounds.len() {
                let sums = vec![0; values.len()];
                st.rounds.push_back(Round { sums, contributed: 0, collected: 0 });
            }
            let r = &mut st.rounds[i];
            assert_eq!(
                r.sums.len(),
                values.len(),
                "rank {rank}: all-reduce {round} with {} values, another rank gave {}",
                values.len(),
                r.sums.len()
            );
            fold(&mut r.sums, values);
            r.contributed += 1;
        });
        self.outstanding = true;
    }

    fn test(&mut self) -> Option<&[u64]> {
        if !self.outstanding {
            return None;
        }
        let (ranks, round) = (self.group.ranks, self.round);
        let mut result = std::mem::take(&mut self.result);
        let outcome = self.with_state(|st| {
            let i = usize::try_from(round - st.base).expect("live rounds fit in usize");
            if st.rounds[i].contributed < ranks {
                // Not complete: some rank has not contributed yet, or left before it did
                // (which only happens once the process is stopping: see below). The rank
                // named here is kept for a debugger; the caller does not use it.
                return Err(st.left.iter().position(|l| l.is_some_and(|at| at <= round)));
            }
            let r = &mut st.rounds[i];
            result.clear();
            result.extend_from_slice(&r.sums);
            r.collected += 1;
            while st.rounds.front().is_some_and(|r| r.collected == ranks) {
                st.rounds.pop_front();
                st.base += 1;
            }
            Ok(())
        });
        self.result = result;
        match outcome {
            Ok(()) => {}
            // A rank left before contributing (`Some`): in a loopback split a rank's loop ends
            // only once the whole process is stopping (the shutdown flag is stored before any
            // rank's loop can end, and that rank's leaving, under this mutex, happens after
            // its loop saw the flag), so the caller's next pass sees the flag and stops
            // (`Worker::poll_detector` looks at it before every step). Not complete either way.
            Err(_) => return None,
        }
        self.outstanding = false;
        self.round += 1;
        Some(&self.result)
    }
}

impl Drop for ThreadsAllReduce {
    fn drop(&mut self) {
        let first_missing = self.round + u64::from(self.outstanding);
        let rank = self.rank;
        self.with_state(|st| st.left[rank] = Some(first_missing));
    }
}

// ----- the detector ----------------------------------------------------------------------------

/// What the detector reads on its rank: the task counters of `runtime/quiesce.rs`, summed
/// over the rank's workers, and the gauges. Every read is an Acquire load.
pub(crate) trait RankCounters {
    /// Wave 1: the sum of the workers' `finished` counters.
    fn finished(&self) -> u64;
    /// Wave 2: the sum of the workers' creation counters (`created` and every `issued`).
    fn created(&self) -> u64;
    /// The gauges: fibers parked, fibers in `wait_quiescent`, and whether `main` returned
    /// (true only on the rank that runs `main`).
    fn gauges(&self) -> Gauges;
    /// Each worker's `quiesce_waiters` (Acquire), in worker order, into `out` (read after
    /// the gauges): which waiters a positive verdict may wake ([`Detector::waiters`]). Empty
    /// where the caller does not wake waiters by these counts (the tests' and models'
    /// readers).
    fn waiters_each(&self, out: &mut Vec<u64>) {
        out.clear();
    }
    /// The latest end of a loop pass that did something (served requests, ran a fiber or a
    /// continuation, moved envelopes) on the rank's workers, on the machine's monotonic
    /// clock (`LiveStats::last_work_ns`, stamped only while the loop is timed or round ends
    /// are asked for, `Builder::round_ends`; 0 otherwise). Statistics only: no verdict
    /// depends on it.
    fn last_work_ns(&self) -> u64 {
        0
    }
}

/// A rank's gauges (read after wave 1), or their all-reduced sums.
/// (The default is that of no worker: zero sums, no minimum, as `QuiescentTotals::default`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Gauges {
    pub(crate) parked: u64,
    pub(crate) quiesce_waiters: u64,
    /// The lanes of `skein::quiescent_add` (wrapping sums) and the minimum lanes of
    /// `skein::quiescent_min` (minima).
    pub(crate) totals: crate::QuiescentTotals,
    pub(crate) main_done: bool,
    /// The run was aborted on some rank (a refused envelope, a corrupt release): every rank
    /// stops in the round that sees it, quiescent or not (its requests may be lost).
    pub(crate) aborted: bool,
}

/// `finished` of one worker (Acquire): its part of wave 1.
#[inline]
pub(crate) fn worker_finished(c: &WorkerCounters) -> u64 {
    c.finished.load(Ordering::Acquire)
}

/// The creation counters of one worker (Acquire), summed: its part of wave 2.
#[inline]
pub(crate) fn worker_created(c: &WorkerCounters) -> u64 {
    c.issued
        .iter()
        .fold(c.created.load(Ordering::Acquire), |s, i| s.wrapping_add(i.load(Ordering::Acquire)))
}

/// The gauges of one worker (Acquire); `main_done` false.
#[inline]
pub(crate) fn worker_gauges(c: &WorkerCounters) -> Gauges {
    Gauges {
        parked: c.parked.load(Ordering::Acquire),
        quiesce_waiters: c.quiesce_waiters.load(Ordering::Acquire),
        totals: crate::QuiescentTotals {
            sums: c.lanes.each_ref().map(|l| l.load(Ordering::Acquire)),
            mins: c.mins.each_ref().map(|m| m.load(Ordering::Acquire)),
        },
        main_done: false,
        aborted: false,
    }
}

/// The workers of a rank that does not run `main` (and the loom model's ranks).
impl RankCounters for [WorkerCounters] {
    fn finished(&self) -> u64 {
        self.iter().map(worker_finished).fold(0, u64::wrapping_add)
    }

    fn created(&self) -> u64 {
        self.iter().map(worker_created).fold(0, u64::wrapping_add)
    }

    fn gauges(&self) -> Gauges {
        self.iter().map(worker_gauges).fold(Gauges::default(), |a, g| Gauges {
            parked: a.parked.wrapping_add(g.parked),
            quiesce_waiters: a.quiesce_waiters.wrapping_add(g.quiesce_waiters),
            totals: a.totals.combine(g.totals),
            main_done: false,
            aborted: false,
        })
    }
}

/// A run's workers on one rank (its fake rank in a loopback split), with the run's
/// `main_done` flag on the rank that runs `main` (the one of global worker 0) and its
/// `aborted` flag.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankView<'a> {
    pub(crate) run_state: &'a RunState,
    /// The rank's first global worker id and its number of workers.
    pub(crate) lo: usize,
    pub(crate) len: usize,
}

impl RankView<'_> {
    fn workers(&self) -> &[WorkerCounters] {
        &self.run_state.counters[self.lo..self.lo + self.len]
    }
}

impl RankCounters for RankView<'_> {
    fn finished(&self) -> u64 {
        self.workers().finished()
    }

    fn waiters_each(&self, out: &mut Vec<u64>) {
        out.clear();
        out.extend(self.workers().iter().map(|c| c.quiesce_waiters.load(Ordering::Acquire)));
    }

    fn last_work_ns(&self) -> u64 {
        self.workers()
            .iter()
            .map(|c| c.stats.last_work_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
    }

    fn created(&self) -> u64 {
        self.workers().created()
    }

    fn gauges(&self) -> Gauges {
        Gauges {
            main_done: self.lo == 0 && self.run_state.main_done.load(Ordering::Acquire),
            aborted: self.run_state.aborted.load(Ordering::Acquire),
            ..self.workers().gauges()
        }
    }
}

/// A run's workers on this rank, with its `main_done` flag (set only where `main` runs).
impl RankCounters for RunState {
    fn finished(&self) -> u64 {
        self.counters.finished()
    }

    fn created(&self) -> u64 {
        self.counters.created()
    }

    fn gauges(&self) -> Gauges {
        Gauges {
            main_done: self.main_done.load(Ordering::Acquire),
            aborted: self.aborted.load(Ordering::Acquire),
            ..self.counters.gauges()
        }
    }
}

/// Positions in the all-reduced vector of a round.
const C: usize = 0;
const F: usize = 1;
const PARKED: usize = 2;
const WAITERS: usize = 3;
const MAIN_DONE: usize = 4;
const ABORTED: usize = 5;
/// The lanes of `skein::quiescent_add`, `LANES..MINS`.
const LANES: usize = 6;
/// The minimum lanes of `skein::quiescent_min`, complemented (`!min`: [`fold`] maximizes
/// them), `MINS..LAST_WORK`.
const MINS: usize = LANES + crate::QUIESCENT_LANES;
/// The rank's latest end of a loop pass that worked ([`RankCounters::last_work_ns`],
/// maximized).
const LAST_WORK: usize = MINS + crate::QUIESCENT_MINS;
const LEN: usize = LAST_WORK + 1;

/// The outcome of detection `detection`, the same on every rank (computed from the same
/// sums).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Which detection: wave 1 in round `detection`, wave 2 in round `detection + 1`.
    pub(crate) detection: u64,
    /// The job was quiescent between the waves, and stays so until a detector acts on this.
    pub(crate) quiescent: bool,
    /// Σ wave 1 (tasks finished) and Σ wave 2 (tasks created) over every worker of every rank.
    pub(crate) finished: u64,
    pub(crate) created: u64,
    /// The gauges summed over every rank (`main_done`: on some rank), read in round
    /// `detection + 1`: exact when `quiescent`.
    pub(crate) gauges: Gauges,
    /// The latest end of a loop pass that worked on any rank as read in round
    /// `detection + 1` (the machine's monotonic clock, [`RankCounters::last_work_ns`]; 0 when
    /// no rank stamps its passes). When `quiescent`, every rank read it after the job's last work, so it is
    /// where the round's end began (statistics only: `WorkerStats::round_ends`).
    pub(crate) last_work_ns: u64,
}

/// What a rank does on a verdict: the same on every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Not quiescent: nothing.
    Continue,
    /// Quiescent with fibers in `wait_quiescent`: every rank wakes its own (the waiters on
    /// its workers), then goes on detecting.
    WakeWaiters,
    /// Quiescent with nobody to wake: every rank stops its loops. `deadlock` is
    /// `Some((parked, main_done))` when fibers are still parked or `main` has not returned
    /// (what `RunState::set_deadlock` records).
    Stop { deadlock: Option<(u64, bool)> },
}

impl Verdict {
    /// What every rank does on this verdict.
    pub(crate) fn action(&self) -> Action {
        let g = self.gauges;
        if g.aborted {
            Action::Stop { deadlock: None }
        } else if !self.quiescent {
            Action::Continue
        } else if g.quiesce_waiters > 0 {
            Action::WakeWaiters
        } else if g.parked > 0 || !g.main_done {
            Action::Stop { deadlock: Some((g.parked, g.main_done)) }
        } else {
            Action::Stop { deadlock: None }
        }
    }
}

/// When [`Detector::step`] may post the next round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Post {
    /// Not now: the round waits for a later step.
    No,
    /// Now.
    Yes,
    /// Now, unless the post would be wasted: this rank has a task open as it reads its wave
    /// 1 (module docs, "Posts that would be wasted").
    UnlessWasted,
}

/// The pipelined detector of one rank (module docs): run by worker 0 of the rank, from its
/// idle loop, through [`Detector::poll`], which never blocks.
#[derive(Debug)]
pub(crate) struct Detector<A> {
    all_reduce: A,
    /// The round whose all-reduce is outstanding (`posted`), or the next one to post.
    round: u64,
    posted: bool,
    /// Σ wave 1 of the previous round's detection (from the previous all-reduce).
    prev_finished: u64,
    /// The broken variant the tests must catch: wave 2 of detection `d` read in round `d`
    /// right after its wave 1, before the all-reduce (so before the other ranks' wave 1).
    wave2_early: bool,
    /// All-reduces posted and completed so far, and posts held back because they would have
    /// been wasted (statistics only; the proof ignores them).
    posts: u64,
    completions: u64,
    held: u64,
    /// Each worker's waiters as the last post read them ([`RankCounters::waiters_each`]).
    waiters: Vec<u64>,
}

impl<A: AllReduce> Detector<A> {
    /// A detector over `all_reduce` (this rank's handle of a group that spans every rank of
    /// the run, used by nothing else). Its first `poll` posts round 0.
    pub(crate) fn new(all_reduce: A) -> Detector<A> {
        Detector {
            all_reduce,
            round: 0,
            posted: false,
            prev_finished: 0,
            wave2_early: false,
            posts: 0,
            completions: 0,
            held: 0,
            waiters: Vec::new(),
        }
    }

    /// The broken variant (see the field); tests only.
    #[cfg(test)]
    pub(crate) fn with_wave2_before_all_reduce(mut self) -> Detector<A> {
        self.wave2_early = true;
        self
    }

    /// The round whose all-reduce is outstanding, or the next one to post.
    #[cfg(test)]
    pub(crate) fn round(&self) -> u64 {
        self.round
    }

    /// Each worker's fibers in `wait_quiescent` when this rank posted the round whose
    /// completion decided the verdict [`Detector::step`] just returned (a positive one is
    /// returned before the next post). Exactly those fibers are the waiters of that
    /// quiescence on this rank, the first ones in each worker's list: a fiber that parked
    /// after the post did so after some rank acted on the verdict (nothing changes during
    /// quiescence), so it waits for a later quiescence, and waking it now would end its
    /// wait early. (Another rank may act on a verdict, and what it then does may reach
    /// this rank and park a new waiter, before this rank has tested the same round.)
    pub(crate) fn waiters(&self) -> &[u64] {
        &self.waiters
    }

    /// All-reduces posted so far.
    pub(crate) fn posted_count(&self) -> u64 {
        self.posts
    }

    /// All-reduces completed so far.
    pub(crate) fn completed_count(&self) -> u64 {
        self.completions
    }

    /// Posts held back so far because this rank had a task open ([`Post::UnlessWasted`]).
    pub(crate) fn held_count(&self) -> u64 {
        self.held
    }

    /// For a stall dump: the round outstanding, if one is, and the ranks whose part of it has
    /// not arrived (when the all-reduce can tell).
    pub(crate) fn outstanding(&mut self) -> Option<(u64, Option<Vec<usize>>)> {
        self.posted.then(|| (self.round, self.all_reduce.waiting_for()))
    }

    /// One step, never blocking. Posts the next round when none is outstanding; otherwise
    /// tests the outstanding all-reduce and, when it has completed, returns the verdict it
    /// decides (round `d` decides detection `d − 1`; round 0 decides nothing).
    ///
    /// After a **positive** verdict the next round is only posted by the next call, so the
    /// caller must act on it (wake its waiters, or stop and not call again) *before* calling
    /// `poll` again: the proof needs the wake-ups before the next wave-2 read. After a
    /// negative one (nothing to do), the next round is posted in the same call.
    // The worker loop calls `step`; the tests and models call this.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn poll<K: RankCounters + ?Sized>(&mut self, counters: &K) -> Option<Verdict> {
        self.step(counters, Post::Yes)
    }

    /// [`Detector::poll`], posting a round only as `post` allows (else the next round waits
    /// for a later call that allows it). Delaying a post keeps the proof: each post still
    /// reads wave 2 then wave 1 in program order after the previous round completed, and T1
    /// is about the posts that happen; a delay only makes detection lag (the caller must allow
    /// a post eventually: "How the worker loop calls it").
    pub(crate) fn step<K: RankCounters + ?Sized>(
        &mut self,
        counters: &K,
        post: Post,
    ) -> Option<Verdict> {
        if !self.posted {
            self.post(counters, post);
            return None;
        }
        let sums: [u64; LEN] = self.all_reduce.test()?.try_into().unwrap_or_else(|_| {
            panic!("the all-reduce of round {} returned a vector of another length", self.round)
        });
        self.posted = false;
        self.completions += 1;
        let verdict = if self.wave2_early {
            // Broken: this round's own waves.
            Some(self.verdict(self.round, sums[F], sums))
        } else {
            // Detection round − 1: wave 1 from the previous all-reduce, wave 2 from this one.
            self.round.checked_sub(1).map(|d| self.verdict(d, self.prev_finished, sums))
        };
        self.prev_finished = sums[F];
        self.round += 1;
        if !verdict.is_some_and(|v| v.quiescent) {
            self.post(counters, post);
        }
        verdict
    }

    fn verdict(&self, detection: u64, finished: u64, sums: [u64; LEN]) -> Verdict {
        Verdict {
            detection,
            quiescent: finished == sums[C],
            finished,
            created: sums[C],
            gauges: Gauges {
                parked: sums[PARKED],
                quiesce_waiters: sums[WAITERS],
                main_done: sums[MAIN_DONE] > 0,
                aborted: sums[ABORTED] > 0,
                totals: crate::QuiescentTotals {
                    sums: std::array::from_fn(|i| sums[LANES + i]),
                    mins: std::array::from_fn(|i| !sums[MINS + i]),
                },
            },
            last_work_ns: sums[LAST_WORK],
        }
    }

    /// Round `self.round`, steps 2 to 4 (module docs; step 1 is the caller's action on the
    /// previous verdict), as `post` allows: not at all with [`Post::No`], and with
    /// [`Post::UnlessWasted`] not when this rank has a task open after its wave 1 (module
    /// docs, "Posts that would be wasted": the reads are then dropped, and the round is
    /// posted by a later call, with reads of its own).
    fn post<K: RankCounters + ?Sized>(&mut self, counters: &K, post: Post) {
        debug_assert!(!self.posted);
        if post == Post::No {
            return;
        }
        let mut v = [0u64; LEN];
        if !self.wave2_early && self.round > 0 {
            // Step 2: wave 2 of detection round − 1, after all-reduce round − 1 completed.
            v[C] = counters.created();
        }
        // Step 3: wave 1 of detection round, then the gauges.
        v[F] = counters.finished();
        if self.wave2_early {
            v[C] = counters.created();
        }
        let g = counters.gauges();
        v[PARKED] = g.parked;
        v[WAITERS] = g.quiesce_waiters;
        v[MAIN_DONE] = u64::from(g.main_done);
        v[ABORTED] = u64::from(g.aborted);
        v[LANES..MINS].copy_from_slice(&g.totals.sums);
        for (w, m) in v[MINS..LAST_WORK].iter_mut().zip(g.totals.mins) {
            *w = !m;
        }
        v[LAST_WORK] = counters.last_work_ns();
        // A task of this rank open now (read after wave 1, so `created >= finished`): both
        // detections this round would take part in are negative. Its own abort always goes.
        if post == Post::UnlessWasted && !g.aborted && counters.created() != v[F] {
            self.held += 1;
            return;
        }
        counters.waiters_each(&mut self.waiters);
        // Step 4.
        self.all_reduce.start(&v);
        self.posted = true;
        self.posts += 1;
    }
}

#[cfg(test)]
mod tests;

/// A deterministic simulation of a rack job: fake ranks of fake workers whose real
/// [`WorkerCounters`] move as tasks are created and finished, the real [`Detector`] on each
/// rank over the real [`ThreadsAllReduce`], and a seeded scheduler that interleaves worker
/// steps, message deliveries and detector polls at random, down to single counter reads inside
/// a detector's waves. The world knows the truth (tasks alive, parked fibers, waiters), which
/// every positive verdict is checked against.
#[cfg(test)]
mod sim;

#[cfg(test)]
mod detector_tests;

/// The detector with real concurrency: each rank a thread running its fake workers (whose
/// counters only it writes), its detector over [`ThreadsAllReduce`], and requests across
/// ranks over channels (a send happens before its receipt: T2). A smoke test of agreement and
/// counting under real threads: its interleavings are coarse (it does not catch the broken
/// variant); the adversarial checks are the simulation above and the loom model below.
#[cfg(test)]
mod threaded_tests;

/// Model checking of the pipelined detector with loom: `RUSTFLAGS="--cfg fw_loom"
/// LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom cargo test -p skein --release --lib
/// loom_`.
///
/// Two ranks of one worker each. The detector is the real [`Detector`] over the real
/// [`ThreadsAllReduce`] (its lock is loom's: the all-reduce is an exchange between the two
/// threads) reading real [`WorkerCounters`] (loom's atomics), run from each worker's idle
/// loop as the worker loop will run it. The workers do what the real code does for the job of
/// `quiesce.rs`'s model, with the request crossing ranks:
///
/// * `Runtime::run` creates `main` on rank 0's worker (`created`);
/// * `main` queues a request for the worker of rank 1 (`issued[1]`) and the envelope is sent
///   (a Release store, standing for `MPI_Isend`; its receipt is the Acquire load: T2), then
///   `main` returns (`finished`);
/// * rank 1's worker, idle and detecting until the request arrives, serves it: the closure
///   spawns a fiber (`created` on rank 1), the response is sent (Release), the fiber runs to
///   its end (`finished` on rank 1);
/// * rank 0's worker, idle and detecting until the response arrives, runs the completion
///   (`finished` on rank 0: the request's end).
///
/// Three tasks; each rank then keeps detecting, for at most [`ROUNDS`] all-reduces or until a
/// positive verdict. Checked: both ranks report the same verdicts, and a positive one counts
/// all three tasks (the job was over). The broken variant reads wave 2 before the all-reduce
/// and must be caught.
#[cfg(all(test, fw_loom))]
mod loom_tests;
