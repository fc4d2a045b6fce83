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
    /// (one process only: across ranks a worker waits briefly instead).
    pub parks: u64,
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
}

/// Counters of every worker of a run, indexed by worker.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// One entry per worker.
    pub workers: Vec<WorkerStats>,
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

    /// Adds `other`'s counters worker by worker (for totals over several runs).
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
}

impl LiveStats {
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
        }
    }
}
