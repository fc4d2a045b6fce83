//! Per-worker statistics: cheap, always on, readable while a job runs ([`crate::stats()`])
//! and after it ([`crate::Runtime::stats`]). [`LiveStats`] are the counters a worker bumps;
//! [`WorkerStats`] and [`Stats`] are the snapshots users read.
//!
//! Every counter has a single writer (its worker) that bumps it with a plain load and Release
//! store; readers may see slightly stale values while the job runs.

use crate::sync::{AtomicU64, Ordering};

/// Counters of one worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Requests this worker applied as a trustee, received from other workers in batches.
    pub requests_served: u64,
    /// Batches (non-empty request slots) this worker served as a trustee.
    pub batches_served: u64,
    /// Requests this worker sent to other trustees (including runtime-internal ones).
    pub requests_sent: u64,
    /// Batches this worker published as a client.
    pub batches_sent: u64,
    /// Requests to properties of this very worker, applied from its local queue.
    pub local_requests: u64,
    /// Fibers started on this worker.
    pub fibers_spawned: u64,
    /// Times a fiber was resumed (first start included).
    pub fibers_run: u64,
    /// Passes of the worker loop that found something to do.
    pub useful_polls: u64,
    /// Passes of the worker loop that found nothing to do.
    pub idle_polls: u64,
    /// Times the worker blocked (gave its core away) until another thread made work for it
    /// (in one process, and across ranks over the shared-memory rings, where a thread of
    /// another rank wakes it; over MPI a worker waits briefly instead). Where workers share
    /// a thread, a park of the thread counts once on each of its workers.
    pub parks: u64,
    /// Of those, the blocks no thread ended: the safety net's timeout (over the rings only;
    /// never needed for progress).
    pub park_timeouts: u64,
    /// Of those timeouts, the ones whose next loop pass found work: a wake-up that was lost.
    /// Always 0 unless the wake-up protocol is broken (the tests check it).
    pub park_timeouts_useful: u64,
    /// Idle passes that gave the core away with `sched_yield` (the thread stays runnable).
    pub yields: u64,
    /// Context switches of the worker's thread while its loop ran, that it asked for
    /// (blocking: a park, a futex wait, a timed wait, a blocking system call), from
    /// `getrusage(RUSAGE_THREAD)` (Linux; 0 elsewhere). Where workers share a thread
    /// (`Builder::worker_threads`), the thread's switches are counted on its first worker,
    /// and 0 on the others.
    pub switches_voluntary: u64,
    /// Context switches of the worker's thread while its loop ran that it did not ask for:
    /// preemption, and a `sched_yield` that found another runnable thread (counted as
    /// `switches_voluntary` where workers share a thread).
    pub switches_involuntary: u64,
    /// Nanoseconds the worker's thread ran on a core while its loop ran, from its CPU-time
    /// clock (`CLOCK_THREAD_CPUTIME_ID`; Linux, 0 elsewhere). Counted as the switches are
    /// where workers share a thread. Against the loop's wall time ([`Anatomy::total_ns`]) it
    /// tells a worker that had a core from one that waited for it (it is taken from the
    /// loop's set-up to its end, so it may pass the anatomy's total by a little).
    pub on_core_ns: u64,
    /// Nanoseconds the worker's thread was runnable but waited for a core while its loop ran
    /// (the scheduler's run queue, from `/proc/thread-self/schedstat`; read only when the
    /// loop is timed, [`Anatomy`], and where the kernel keeps scheduler statistics: 0
    /// otherwise): the time lost to other threads when the runnable threads outnumber the
    /// cores.
    pub runnable_ns: u64,
    /// On the first worker of a thread: the workers that thread ran, itself included (1 on
    /// a thread of its own); 0 on the thread's other workers (`Builder::worker_threads`).
    /// [`Stats::threads`] counts the threads of a run from it. Summed over runs like the
    /// other counters ([`Stats::accumulate`]).
    pub thread_workers: u64,
    /// Request envelopes this worker sent to other ranks (each carries a batch, a segment,
    /// for one or several trustees of one rank).
    pub envelopes_sent: u64,
    /// Segments (batches, one per trustee) in those request envelopes.
    pub segments_sent: u64,
    /// Bytes of those request envelopes.
    pub envelope_bytes_sent: u64,
    /// Requests carried by those envelopes (control records included).
    pub remote_requests_sent: u64,
    /// Of those envelopes, the ones sent because their batch was full (the others were sent
    /// when the worker was about to go idle, or were aged out, or aggregation was off).
    pub envelopes_full: u64,
    /// Of those envelopes, the ones sent not full after their requests waited a few busy
    /// loop passes (`Builder::aggregate`).
    pub envelopes_aged: u64,
    /// Request segments this worker, as the landing worker of their envelopes, handed to
    /// another trustee of its rank (the others it served itself).
    pub segments_forwarded: u64,
    /// Response envelopes this worker sent back to clients of other ranks.
    pub responses_sent: u64,
    /// Bytes of those response envelopes.
    pub response_bytes_sent: u64,
    /// Per destination rank (index = rank): the request and response envelopes this worker
    /// sent there. Empty outside a split run.
    pub to_ranks: Vec<RankTraffic>,
    /// Steps of quiescence detection this worker ran (the first worker of each rank across
    /// ranks, worker 0 in one process): one call of the detector.
    pub detector_steps: u64,
    /// All-reduces of the detector across ranks this worker posted.
    pub all_reduces_posted: u64,
    /// All-reduces of the detector across ranks that completed here.
    pub all_reduces_completed: u64,
    /// Posts of the detector across ranks this worker held back because its rank had a task
    /// open (a response it awaited, a fiber not yet parked): no detection of that round could
    /// have been positive (over the shared-memory rings).
    pub posts_held: u64,
    /// Detections that found the run quiescent (woke `wait_quiescent` callers, or stopped
    /// the run).
    pub quiescent_verdicts: u64,
    /// Where the worker loop's time went; all zero unless timing was on
    /// ([`crate::Builder::anatomy`], `SKEIN_ANATOMY=1`).
    pub anatomy: Anatomy,
    /// How long rounds took to end, on the worker that runs its rank's detector across
    /// ranks; empty unless they were timed ([`crate::Builder::round_ends`], or the anatomy).
    pub round_ends: RoundEnds,
}

/// How long a round's end took to reach a rank (issue 30, item 2): for each quiescent
/// verdict the rank's detector acted on, the time from the end of the job's last loop pass
/// that did something (served requests, ran a fiber or a continuation, moved envelopes, on
/// any rank) to this rank's learning the verdict. Both ends are read on the machine's
/// monotonic clock, so the figure is exact between the ranks of one node and meaningless
/// across nodes (their clocks differ). Counted in runs over ranks, when asked for
/// ([`crate::Builder::round_ends`], `SKEIN_ROUND_ENDS=1`) or while the loop is timed
/// ([`crate::Builder::anatomy`], `--stats`, whose clock reads make rounds slower).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RoundEnds {
    /// Round ends counted.
    pub count: u64,
    /// Their sum, in ns.
    pub sum_ns: u64,
    /// The longest, in ns.
    pub max_ns: u64,
    /// How many fell in each of [`ROUND_END_BUCKETS`] buckets, four to a power of two from
    /// 256 ns ([`RoundEnds::bucket`]); empty when `count` is 0.
    pub buckets: Vec<u64>,
}

/// The buckets of [`RoundEnds::buckets`]: 256 ns to 2^36 ns (69 s), four to a power of two.
pub const ROUND_END_BUCKETS: usize = 28 * 4;

impl RoundEnds {
    /// The bucket of a round end of `ns` nanoseconds: below 320 ns the first, from 2^36 ns
    /// on the last, else its power of two and which quarter of it.
    pub fn bucket(ns: u64) -> usize {
        if ns < 256 {
            return 0;
        }
        let octave = 63 - ns.leading_zeros() as usize; // 8 and up
        let quarter = ((ns >> (octave - 2)) & 3) as usize;
        ((octave - 8) * 4 + quarter).min(ROUND_END_BUCKETS - 1)
    }

    /// The smallest value of bucket `b` (0 for the first) and its width, in ns.
    fn bucket_range(b: usize) -> (u64, u64) {
        let (octave, quarter) = (b / 4 + 8, (b % 4) as u64);
        let width = 1u64 << (octave - 2);
        (if b == 0 { 0 } else { (4 + quarter) * width }, width)
    }

    /// The median round end, in ns, to within a bucket (the middle of the bucket that holds
    /// it: within 12.5 %); `None` when none was counted.
    ///
    /// ```
    /// let mut r = skein::RoundEnds::default();
    /// for ns in [40_000, 50_000, 1_000_000] {
    ///     r.record(ns);
    /// }
    /// let m = r.median_ns().unwrap();
    /// assert!((44_000..=56_000).contains(&m), "{m}");
    /// assert_eq!(r.max_ns, 1_000_000);
    /// ```
    pub fn median_ns(&self) -> Option<u64> {
        let half = self.count.div_ceil(2);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if n > 0 && seen >= half {
                let (lo, width) = RoundEnds::bucket_range(b);
                return Some(lo + width / 2);
            }
        }
        None
    }

    /// The mean round end, in ns; `None` when none was counted.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// Counts a round end of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; ROUND_END_BUCKETS];
        }
        self.buckets[RoundEnds::bucket(ns)] += 1;
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }
}

impl std::ops::AddAssign<&RoundEnds> for RoundEnds {
    fn add_assign(&mut self, r: &RoundEnds) {
        if r.count == 0 {
            return;
        }
        if self.buckets.len() < r.buckets.len() {
            self.buckets.resize(r.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&r.buckets) {
            *a += b;
        }
        self.count += r.count;
        self.sum_ns = self.sum_ns.saturating_add(r.sum_ns);
        self.max_ns = self.max_ns.max(r.max_ns);
    }
}

/// Envelopes one worker sent to one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RankTraffic {
    /// Request envelopes.
    pub envelopes: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their segments (one per trustee of the rank they carried requests for).
    pub segments: u64,
    /// The requests they carried.
    pub requests: u64,
    /// Response envelopes.
    pub responses: u64,
    /// Their bytes.
    pub response_bytes: u64,
}

impl std::ops::AddAssign<&RankTraffic> for RankTraffic {
    fn add_assign(&mut self, o: &RankTraffic) {
        self.envelopes += o.envelopes;
        self.bytes += o.bytes;
        self.segments += o.segments;
        self.requests += o.requests;
        self.responses += o.responses;
        self.response_bytes += o.response_bytes;
    }
}

/// A worker loop's time split by what each stretch of a pass did, in nanoseconds (sampled
/// at the boundaries of a pass's phases, never per request). The parts tile the loop: their
/// sum is the time from the worker's first pass to its last.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Anatomy {
    /// Loop passes timed (0: timing was off).
    pub passes: u64,
    /// Running requests as a trustee: the local queue, the slots, request envelopes from
    /// other ranks (validation and the response envelope included), frees.
    pub serving_ns: u64,
    /// Running fibers, completing responses (continuations), publishing batches and writing
    /// request envelopes.
    pub issuing_ns: u64,
    /// The transport's progress calls and receive polls (MPI tests, loopback inboxes).
    pub transport_ns: u64,
    /// Quiescence detection: the detector's steps (counter waves, all-reduces posted and
    /// tested).
    pub detector_ns: u64,
    /// The rest of idle passes while one of this worker's requests awaited its response.
    pub wait_response_ns: u64,
    /// The rest of idle passes while a fiber of this worker's rank waited in
    /// `wait_quiescent` (and no response was due here).
    pub wait_quiescence_ns: u64,
    /// The rest of idle passes otherwise (spinning, yielding, parked).
    pub idle_ns: u64,
}

impl Anatomy {
    /// The sum of the parts.
    pub fn total_ns(&self) -> u64 {
        self.parts().iter().map(|(_, v)| v).sum()
    }

    /// The parts with their names, in the order of the fields.
    pub fn parts(&self) -> [(&'static str, u64); 7] {
        [
            ("serving", self.serving_ns),
            ("issuing", self.issuing_ns),
            ("transport", self.transport_ns),
            ("detector", self.detector_ns),
            ("wait_response", self.wait_response_ns),
            ("wait_quiescence", self.wait_quiescence_ns),
            ("idle", self.idle_ns),
        ]
    }
}

impl std::ops::AddAssign<&Anatomy> for Anatomy {
    fn add_assign(&mut self, o: &Anatomy) {
        self.passes += o.passes;
        self.serving_ns += o.serving_ns;
        self.issuing_ns += o.issuing_ns;
        self.transport_ns += o.transport_ns;
        self.detector_ns += o.detector_ns;
        self.wait_response_ns += o.wait_response_ns;
        self.wait_quiescence_ns += o.wait_quiescence_ns;
        self.idle_ns += o.idle_ns;
    }
}

impl WorkerStats {
    /// Mean number of requests per served batch (0 when none was served).
    ///
    /// ```
    /// let mut s = skein::WorkerStats::default();
    /// s.requests_served = 10;
    /// s.batches_served = 4;
    /// assert_eq!(s.mean_batch(), 2.5);
    /// ```
    pub fn mean_batch(&self) -> f64 {
        if self.batches_served == 0 {
            0.0
        } else {
            self.requests_served as f64 / self.batches_served as f64
        }
    }

    /// Fraction of loop passes that did useful work (0 when the loop never ran).
    pub fn busy_fraction(&self) -> f64 {
        let all = self.useful_polls + self.idle_polls;
        if all == 0 {
            0.0
        } else {
            self.useful_polls as f64 / all as f64
        }
    }

    /// Mean number of requests per request envelope sent to other ranks (0 when none).
    pub fn mean_envelope(&self) -> f64 {
        ratio(self.remote_requests_sent, self.envelopes_sent)
    }

    /// Mean number of segments (trustees) per request envelope sent to other ranks (0 when
    /// none).
    pub fn segments_per_envelope(&self) -> f64 {
        ratio(self.segments_sent, self.envelopes_sent)
    }

    /// Mean number of requests per batch (segment) sent to a trustee of another rank (0 when
    /// none).
    pub fn requests_per_remote_batch(&self) -> f64 {
        ratio(self.remote_requests_sent, self.segments_sent)
    }
}

/// `a / b`, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Counters of every worker of a run, indexed by worker.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// One entry per worker.
    pub workers: Vec<WorkerStats>,
    /// What the run cost this rank (this process) around its workers' loops.
    pub run: RunTimes,
}

/// What runs cost the calling rank around their workers' loops, in nanoseconds of its clock
/// (summed over runs by [`Stats::accumulate`]). Across the ranks of an `mpirun` this is
/// where the run's collectives go: its set-up agrees on the run's shape and sets the transport
/// up (or takes the last run's rings), its close exchanges every rank's outcome and
/// statistics; a rank that reaches a collective first also waits there for the others.
///
/// ```
/// let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// rt.run(|| ()).unwrap();
/// let run = rt.stats().run;
/// assert_eq!(run.runs, 1);
/// assert!(run.workers_ns > 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunTimes {
    /// Runs counted.
    pub runs: u64,
    /// From the call of `Runtime::run` to its workers' start (across ranks: the agreement on
    /// the run's shape and the transport's set-up).
    pub setup_ns: u64,
    /// From the workers' start to the end of the last one.
    pub workers_ns: u64,
    /// From the workers' end to the outcome (across ranks: the transport's close and the
    /// exchange of every rank's outcome and statistics).
    pub close_ns: u64,
}

impl RunTimes {
    /// One run's times from its instants: called, workers started, workers ended, and now.
    pub(crate) fn of(
        called: std::time::Instant,
        started: std::time::Instant,
        ended: std::time::Instant,
    ) -> RunTimes {
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        RunTimes {
            runs: 1,
            setup_ns: ns(started.saturating_duration_since(called)),
            workers_ns: ns(ended.saturating_duration_since(started)),
            close_ns: ns(ended.elapsed()),
        }
    }
}

impl std::ops::AddAssign<&RunTimes> for RunTimes {
    fn add_assign(&mut self, r: &RunTimes) {
        self.runs += r.runs;
        self.setup_ns += r.setup_ns;
        self.workers_ns += r.workers_ns;
        self.close_ns += r.close_ns;
    }
}

impl Stats {
    /// The sum over all workers.
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// rt.run(|| {
    ///     let t = skein::trustee(1).entrust(0u32);
    ///     t.apply((), |c, ()| *c += 1);
    /// })
    /// .unwrap();
    /// assert!(rt.stats().total().requests_served >= 1);
    /// ```
    pub fn total(&self) -> WorkerStats {
        let mut t = WorkerStats::default();
        for w in &self.workers {
            t += w;
        }
        t
    }

    /// The threads that ran the workers (over every rank of a split run): the workers that
    /// were first on a thread ([`WorkerStats::thread_workers`]). 0 for stats not taken from
    /// a run.
    ///
    /// ```
    /// // One process (unsplit even under `SKEIN_LOOPBACK_RANKS`), 4 workers on 2 threads.
    /// let rt = skein::Runtime::builder().workers(4).worker_threads(2).loopback_ranks(1);
    /// let rt = rt.build().unwrap();
    /// rt.run(|| {}).unwrap();
    /// assert_eq!(rt.stats().threads(), 2);
    /// ```
    pub fn threads(&self) -> usize {
        self.workers.iter().filter(|w| w.thread_workers > 0).count()
    }

    /// Adds `other`'s counters worker by worker, and its run times (for totals over several
    /// runs).
    ///
    /// ```
    /// let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// let mut sum = skein::Stats::default();
    /// for _ in 0..2 {
    ///     rt.run(|| skein::trustee(1).entrust(0u8).apply((), |c, ()| *c += 1)).unwrap();
    ///     sum.accumulate(&rt.stats());
    /// }
    /// assert_eq!(sum.workers.len(), 2);
    /// assert!(sum.total().requests_served >= 2);
    /// ```
    pub fn accumulate(&mut self, other: &Stats) {
        if self.workers.len() < other.workers.len() {
            self.workers.resize_with(other.workers.len(), WorkerStats::default);
        }
        for (t, w) in self.workers.iter_mut().zip(&other.workers) {
            *t += w;
        }
        self.run += &other.run;
    }
}

impl std::ops::AddAssign<&WorkerStats> for WorkerStats {
    fn add_assign(&mut self, w: &WorkerStats) {
        self.requests_served += w.requests_served;
        self.batches_served += w.batches_served;
        self.requests_sent += w.requests_sent;
        self.batches_sent += w.batches_sent;
        self.local_requests += w.local_requests;
        self.fibers_spawned += w.fibers_spawned;
        self.fibers_run += w.fibers_run;
        self.useful_polls += w.useful_polls;
        self.idle_polls += w.idle_polls;
        self.parks += w.parks;
        self.park_timeouts += w.park_timeouts;
        self.park_timeouts_useful += w.park_timeouts_useful;
        self.yields += w.yields;
        self.switches_voluntary += w.switches_voluntary;
        self.switches_involuntary += w.switches_involuntary;
        self.on_core_ns += w.on_core_ns;
        self.runnable_ns += w.runnable_ns;
        self.thread_workers += w.thread_workers;
        self.envelopes_sent += w.envelopes_sent;
        self.segments_sent += w.segments_sent;
        self.segments_forwarded += w.segments_forwarded;
        self.envelope_bytes_sent += w.envelope_bytes_sent;
        self.remote_requests_sent += w.remote_requests_sent;
        self.envelopes_full += w.envelopes_full;
        self.envelopes_aged += w.envelopes_aged;
        self.responses_sent += w.responses_sent;
        self.response_bytes_sent += w.response_bytes_sent;
        if self.to_ranks.len() < w.to_ranks.len() {
            self.to_ranks.resize_with(w.to_ranks.len(), RankTraffic::default);
        }
        for (t, r) in self.to_ranks.iter_mut().zip(&w.to_ranks) {
            *t += r;
        }
        self.detector_steps += w.detector_steps;
        self.all_reduces_posted += w.all_reduces_posted;
        self.all_reduces_completed += w.all_reduces_completed;
        self.posts_held += w.posts_held;
        self.quiescent_verdicts += w.quiescent_verdicts;
        self.anatomy += &w.anatomy;
        self.round_ends += &w.round_ends;
    }
}

/// The live, single-writer counters of one worker (bumped with [`crate::sync::bump`]);
/// [`LiveStats::snapshot`] turns them into a [`WorkerStats`].
#[derive(Debug, Default)]
pub(crate) struct LiveStats {
    pub(crate) requests_served: AtomicU64,
    pub(crate) batches_served: AtomicU64,
    pub(crate) batches_sent: AtomicU64,
    pub(crate) fibers_spawned: AtomicU64,
    pub(crate) fibers_run: AtomicU64,
    pub(crate) useful_polls: AtomicU64,
    pub(crate) idle_polls: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) park_timeouts: AtomicU64,
    pub(crate) park_timeouts_useful: AtomicU64,
    pub(crate) yields: AtomicU64,
    pub(crate) switches_voluntary: AtomicU64,
    pub(crate) switches_involuntary: AtomicU64,
    pub(crate) on_core_ns: AtomicU64,
    pub(crate) runnable_ns: AtomicU64,
    pub(crate) thread_workers: AtomicU64,
    pub(crate) envelopes_sent: AtomicU64,
    pub(crate) segments_sent: AtomicU64,
    pub(crate) segments_forwarded: AtomicU64,
    pub(crate) envelope_bytes_sent: AtomicU64,
    pub(crate) remote_requests_sent: AtomicU64,
    pub(crate) envelopes_full: AtomicU64,
    pub(crate) envelopes_aged: AtomicU64,
    pub(crate) responses_sent: AtomicU64,
    pub(crate) response_bytes_sent: AtomicU64,
    /// Per destination rank, [`TRAFFIC`] counters (the fields of [`RankTraffic`], in order);
    /// empty outside a split run.
    pub(crate) to_ranks: Box<[AtomicU64]>,
    pub(crate) detector_steps: AtomicU64,
    pub(crate) all_reduces_posted: AtomicU64,
    pub(crate) all_reduces_completed: AtomicU64,
    pub(crate) posts_held: AtomicU64,
    pub(crate) quiescent_verdicts: AtomicU64,
    /// [`Anatomy::passes`], then the parts in the order of [`Anatomy::parts`].
    pub(crate) anatomy: [AtomicU64; 8],
    /// The machine's monotonic clock (`runtime::anatomy::mono_ns`) at the end of this
    /// worker's last loop pass that did the job's work (a pass that only processed frees or
    /// releases does not count), stamped only while the loop is timed or round ends are
    /// asked for (`Builder::round_ends`).
    pub(crate) last_work_ns: AtomicU64,
    /// [`RoundEnds`]: count, sum, max, then the buckets (those only in a split run).
    pub(crate) round_ends: [AtomicU64; 3],
    pub(crate) round_end_buckets: Box<[AtomicU64]>,
}

/// Counters per destination rank in [`LiveStats::to_ranks`].
pub(crate) const TRAFFIC: usize = 6;

impl LiveStats {
    /// The counters of a worker of a run over `ranks` ranks (none per rank when 1);
    /// `detects`: the worker runs its rank's detector (the rank's first), the only one that
    /// counts round ends.
    pub(crate) fn new(ranks: usize, detects: bool) -> LiveStats {
        let per_rank = if ranks > 1 { ranks * TRAFFIC } else { 0 };
        let buckets = if ranks > 1 && detects { ROUND_END_BUCKETS } else { 0 };
        LiveStats {
            to_ranks: (0..per_rank).map(|_| AtomicU64::new(0)).collect(),
            round_end_buckets: (0..buckets).map(|_| AtomicU64::new(0)).collect(),
            ..LiveStats::default()
        }
    }

    /// Counts a round end of `ns` nanoseconds ([`RoundEnds`]; a run over ranks only, on a
    /// rank's first worker).
    pub(crate) fn round_end(&self, ns: u64) {
        use crate::sync::bump;
        if let Some(b) = self.round_end_buckets.get(RoundEnds::bucket(ns)) {
            bump(b, 1);
            bump(&self.round_ends[0], 1);
            bump(&self.round_ends[1], ns);
            let max = &self.round_ends[2];
            if ns > max.load(Ordering::Relaxed) {
                max.store(ns, Ordering::Release);
            }
        }
    }

    /// Counts an envelope of `bytes` bytes carrying `segments` segments of `requests`
    /// requests in all (a request envelope) or answering them (a response envelope) sent to
    /// `rank`.
    #[inline]
    pub(crate) fn sent_envelope(
        &self,
        rank: usize,
        bytes: usize,
        segments: usize,
        requests: usize,
        response: bool,
    ) {
        use crate::sync::bump;
        let (count, sum, at) = if response {
            (&self.responses_sent, &self.response_bytes_sent, 4)
        } else {
            bump(&self.remote_requests_sent, requests as u64);
            bump(&self.segments_sent, segments as u64);
            (&self.envelopes_sent, &self.envelope_bytes_sent, 0)
        };
        bump(count, 1);
        bump(sum, bytes as u64);
        if let Some(c) = self.to_ranks.get(rank * TRAFFIC..(rank + 1) * TRAFFIC) {
            bump(&c[at], 1);
            bump(&c[at + 1], bytes as u64);
            if !response {
                bump(&c[2], segments as u64);
                bump(&c[3], requests as u64);
            }
        }
    }

    pub(crate) fn snapshot(&self) -> WorkerStats {
        let l = |c: &AtomicU64| c.load(Ordering::Acquire);
        WorkerStats {
            requests_served: l(&self.requests_served),
            batches_served: l(&self.batches_served),
            requests_sent: 0,
            batches_sent: l(&self.batches_sent),
            local_requests: 0,
            fibers_spawned: l(&self.fibers_spawned),
            fibers_run: l(&self.fibers_run),
            useful_polls: l(&self.useful_polls),
            idle_polls: l(&self.idle_polls),
            parks: l(&self.parks),
            park_timeouts: l(&self.park_timeouts),
            park_timeouts_useful: l(&self.park_timeouts_useful),
            yields: l(&self.yields),
            switches_voluntary: l(&self.switches_voluntary),
            switches_involuntary: l(&self.switches_involuntary),
            on_core_ns: l(&self.on_core_ns),
            runnable_ns: l(&self.runnable_ns),
            thread_workers: l(&self.thread_workers),
            envelopes_sent: l(&self.envelopes_sent),
            segments_sent: l(&self.segments_sent),
            segments_forwarded: l(&self.segments_forwarded),
            envelope_bytes_sent: l(&self.envelope_bytes_sent),
            remote_requests_sent: l(&self.remote_requests_sent),
            envelopes_full: l(&self.envelopes_full),
            envelopes_aged: l(&self.envelopes_aged),
            responses_sent: l(&self.responses_sent),
            response_bytes_sent: l(&self.response_bytes_sent),
            to_ranks: self
                .to_ranks
                .chunks(TRAFFIC)
                .map(|c| RankTraffic {
                    envelopes: l(&c[0]),
                    bytes: l(&c[1]),
                    segments: l(&c[2]),
                    requests: l(&c[3]),
                    responses: l(&c[4]),
                    response_bytes: l(&c[5]),
                })
                .collect(),
            detector_steps: l(&self.detector_steps),
            all_reduces_posted: l(&self.all_reduces_posted),
            all_reduces_completed: l(&self.all_reduces_completed),
            posts_held: l(&self.posts_held),
            quiescent_verdicts: l(&self.quiescent_verdicts),
            anatomy: {
                let a = |i: usize| l(&self.anatomy[i]);
                Anatomy {
                    passes: a(0),
                    serving_ns: a(1),
                    issuing_ns: a(2),
                    transport_ns: a(3),
                    detector_ns: a(4),
                    wait_response_ns: a(5),
                    wait_quiescence_ns: a(6),
                    idle_ns: a(7),
                }
            },
            round_ends: match l(&self.round_ends[0]) {
                0 => RoundEnds::default(),
                count => RoundEnds {
                    count,
                    sum_ns: l(&self.round_ends[1]),
                    max_ns: l(&self.round_ends[2]),
                    buckets: self.round_end_buckets.iter().map(l).collect(),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ends_fall_in_quarter_octave_buckets() {
        // Below 320 ns the first; then four to a power of two; from 2^36 ns the last.
        assert_eq!(RoundEnds::bucket(0), 0);
        assert_eq!(RoundEnds::bucket(319), 0);
        assert_eq!(RoundEnds::bucket(320), 1);
        assert_eq!(RoundEnds::bucket(511), 3);
        assert_eq!(RoundEnds::bucket(512), 4);
        assert_eq!(RoundEnds::bucket(u64::MAX), ROUND_END_BUCKETS - 1);
        for b in 1..ROUND_END_BUCKETS - 1 {
            let (lo, width) = RoundEnds::bucket_range(b);
            assert_eq!(RoundEnds::bucket(lo), b, "{b}");
            assert_eq!(RoundEnds::bucket(lo + width - 1), b, "{b}");
            assert_eq!(RoundEnds::bucket(lo + width), b + 1, "{b}");
        }
    }

    #[test]
    fn round_ends_add_up_and_their_median_is_within_a_bucket() {
        let (mut a, mut b) = (RoundEnds::default(), RoundEnds::default());
        assert_eq!((a.median_ns(), a.mean_ns()), (None, None));
        for ns in [10_000, 20_000, 30_000] {
            a.record(ns);
        }
        b.record(5_000_000);
        b.record(7_000);
        let mut sum = RoundEnds::default();
        sum += &a;
        sum += &RoundEnds::default();
        sum += &b;
        assert_eq!((sum.count, sum.sum_ns, sum.max_ns), (5, 5_067_000, 5_000_000));
        assert_eq!(sum.buckets.iter().sum::<u64>(), 5);
        // The third of 7, 10, 20, 30 and 5,000 µs: 20 µs, to within 12.5 %.
        let m = sum.median_ns().unwrap();
        assert!((17_500..=22_500).contains(&m), "{m}");
        assert_eq!(sum.mean_ns(), Some(1_013_400.0));
    }

    #[test]
    fn live_round_ends_are_counted_in_split_runs_only_by_the_detector() {
        let st = LiveStats::new(2, true);
        st.round_end(40_000);
        st.round_end(60_000);
        let r = st.snapshot().round_ends;
        assert_eq!((r.count, r.sum_ns, r.max_ns), (2, 100_000, 60_000));
        assert_eq!(r.buckets.len(), ROUND_END_BUCKETS);
        let one = LiveStats::new(1, true);
        one.round_end(40_000);
        assert_eq!(one.snapshot().round_ends, RoundEnds::default());
        let other = LiveStats::new(2, false);
        other.round_end(40_000);
        assert_eq!(other.snapshot().round_ends, RoundEnds::default());
    }
}
