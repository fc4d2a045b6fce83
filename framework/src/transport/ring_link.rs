//! One transport over rings, written once: the shared-memory transport (`transport::shm`)
//! and the RDMA verbs transport (`transport::verbs`) are this [`RingLink`] over two
//! [`Medium`]s, which say how the bytes a worker pushed into a ring reach the remote reader
//! and how the reader's credit gets back (issue 34's "the ring protocol, once").
//!
//! # Shape
//!
//! One [`End`] per local worker, taken by that worker only ([`Owned`]). Per destination
//! global worker on another rank, the end holds the ring it writes ([`Medium::Out`]) with
//! its [`Writer`], and a backlog of envelopes waiting for room (the front may be part-way
//! through its ring: an envelope larger than the ring streams through it in pieces); per
//! source global worker on another rank, the ring it reads ([`Medium::In`]) with its
//! [`Reader`]. Publishing never fails: an envelope that does not fit waits in the backlog,
//! pushed on by `progress`; `progress` reads every inbound ring and queues the envelopes read
//! whole for `poll`. The runtime's credits bound the backlogs and the queue (at most
//! `IN_FLIGHT` requests per (client, remote trustee), each answered once).
//!
//! # What a medium does
//!
//! * After a writer pushed bytes ([`Writer::push`] stored the new `tail` in the ring's
//!   counters), [`Medium::published`] makes them visible to the reader: nothing more over
//!   shared memory but waking the reader if it blocks (a `SeqCst` fence, then its futex
//!   word); over verbs, RDMA writes of the new bytes and then of the tail.
//! * After a reader consumed bytes ([`Reader::pull`] stored the new `head`),
//!   [`Medium::consumed`] gives the credit back: waking the writer over shared memory (it
//!   reads `head` in the shared ring), an RDMA write of `head` into the writer's mirror over
//!   verbs.
//! * [`Medium::progress`] runs on every pass (verbs: retiring completed writes).
//! * [`Medium::news`] says whether a pass must read the inbound rings: over shared memory
//!   every writer rings the reader's doorbell after publishing, and a pass with no ring
//!   since the last reads no ring (one load where it would load `(R − 1) · W` tails:
//!   `transport::wake`, "The doorbell"); over verbs every pass reads them all.
//!
//! A torn or forged ring (impossible counters, a length above the reader's limit) ends the
//! job naming the sending worker and rank, as a forged envelope does; envelopes read whole
//! are validated by the runtime exactly as over MPI.

use super::owned::Owned;
use super::ring::{Reader, RingMem, Writer};
use super::wake::WakeWords;
use super::{Arrived, IdlePolicy, Transport};
use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Buffers a worker keeps for envelopes it claims and reads.
pub(crate) const POOL: usize = 64;

/// How bytes reach a remote ring (module docs); one per worker, inside its [`End`].
pub(crate) trait Medium: Debug + Send {
    /// A ring this worker writes, in (or mirrored for) another rank's memory.
    type Out: RingMem + Debug + Send;
    /// A ring this worker reads, in this rank's memory.
    type In: RingMem + Debug + Send;
    /// What the link keeps for all its workers (mappings, verbs resources) while it lives.
    type Shared: Debug + Send + Sync;
    /// The transport's name in errors and `describe` ("shared-memory", "RDMA").
    const NAME: &'static str;
    /// How a worker of a link over this medium waits (`runtime/idle.rs`).
    fn idle_policy(shared: &Self::Shared) -> IdlePolicy;
    /// The workers' futex words, where an arrival can wake a blocked worker.
    fn wake_words(shared: &Self::Shared) -> Option<Arc<dyn WakeWords>>;
    /// `ring` (to global worker `to`) has new bytes up to `tail`: make them reach the reader.
    fn published(&mut self, to: usize, ring: &Self::Out, tail: u64) -> Result<(), String>;
    /// `ring` (from global worker `from`) was read up to `head`: give the credit back.
    fn consumed(&mut self, from: usize, ring: &Self::In, head: u64) -> Result<(), String>;
    /// Whether an inbound ring may hold bytes not read yet: false only when no writer
    /// published into one since the last call that said true (the shared-memory doorbell,
    /// `transport::wake`), and then the pass skips the rings. After a true, the caller reads
    /// every inbound ring until each is empty or part-way through an envelope. A medium
    /// without a doorbell says true.
    fn news(&mut self) -> bool {
        true
    }
    /// Runs on every progress pass and while draining.
    fn progress(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// What the medium holds in flight, for a stall report ("" when nothing).
    fn describe(&self) -> String {
        String::new()
    }
}

/// A worker's rings and what waits in them (module docs).
#[derive(Debug)]
pub(crate) struct End<M: Medium> {
    /// The worker's medium (its queue pairs over verbs).
    pub(crate) medium: M,
    /// Per destination global worker: the ring this worker writes to it (None for workers
    /// of this rank).
    out: Vec<Option<(M::Out, Writer)>>,
    /// Per destination: envelopes waiting for room, oldest first.
    backlog: Vec<VecDeque<Vec<u8>>>,
    /// Envelopes in all backlogs.
    waiting: usize,
    /// Per source global worker of another rank: the ring it writes to this worker.
    inbound: Vec<(usize, M::In, Reader)>,
    /// Envelopes read whole, for `poll`.
    ready: VecDeque<Arrived>,
    pool: Vec<Vec<u8>>,
    /// Workers per rank (global worker `g` is on rank `g / workers`).
    workers: usize,
}

impl<M: Medium> End<M> {
    /// A worker's end: `out` indexed by destination global worker, `inbound` with each
    /// ring's source global worker and the reader's largest envelope.
    pub(crate) fn new(
        medium: M,
        out: Vec<Option<M::Out>>,
        inbound: Vec<(usize, M::In)>,
        max_envelope_bytes: usize,
        workers: usize,
    ) -> End<M> {
        let backlog = out.iter().map(|_| VecDeque::new()).collect();
        End {
            medium,
            out: out.into_iter().map(|o| o.map(|ring| (ring, Writer::default()))).collect(),
            backlog,
            waiting: 0,
            inbound: inbound
                .into_iter()
                .map(|(s, ring)| (s, ring, Reader::new(max_envelope_bytes)))
                .collect(),
            ready: VecDeque::new(),
            pool: Vec::new(),
            workers,
        }
    }

    /// The ring this worker writes to global worker `to`, if `to` is on another rank.
    #[cfg(feature = "rdma")]
    pub(crate) fn out_ring(&self, to: usize) -> Option<&M::Out> {
        self.out.get(to)?.as_ref().map(|(ring, _)| ring)
    }

    /// Pushes the backlog to `to` on as far as its ring allows, then hands what moved to
    /// the medium; true if any byte moved.
    fn flush_to(&mut self, to: usize) -> Result<bool, String> {
        let Some((ring, w)) = self.out[to].as_mut() else { return Ok(false) };
        let before = w.written();
        while let Some(msg) = self.backlog[to].front() {
            if !w.push(ring, msg) {
                // Part of it may have gone; the rest waits for credit.
                break;
            }
            let msg = self.backlog[to].pop_front().expect("front exists");
            self.waiting -= 1;
            give(&mut self.pool, msg);
        }
        let tail = w.written();
        if tail == before {
            return Ok(false);
        }
        self.medium.published(to, ring, tail)?;
        Ok(true)
    }

    /// Pushes every backlog on; true if any byte moved.
    fn flush_all(&mut self) -> Result<bool, String> {
        let mut moved = false;
        if self.waiting > 0 {
            for to in 0..self.backlog.len() {
                if !self.backlog[to].is_empty() {
                    moved |= self.flush_to(to)?;
                }
            }
        }
        Ok(moved)
    }

    /// Reads every inbound ring, giving credit back for what it read; true if an envelope
    /// was read whole.
    fn read(&mut self) -> Result<bool, String> {
        if !self.medium.news() {
            return Ok(false);
        }
        let mut got = false;
        let End { medium, inbound, ready, pool, workers, .. } = self;
        for (s, ring, r) in inbound.iter_mut() {
            let before = r.consumed();
            while r.has_bytes(ring) {
                match r.pull(ring, || pool.pop().unwrap_or_default()) {
                    Ok(Some(bytes)) => {
                        ready.push_back(Arrived { from_rank: *s / *workers, bytes });
                        got = true;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        return Err(format!(
                            "the {} ring from worker {s} (rank {}) is torn or forged: {e}",
                            M::NAME,
                            *s / *workers
                        ))
                    }
                }
            }
            let head = r.consumed();
            if head != before {
                medium.consumed(*s, ring, head)?;
            }
        }
        Ok(got)
    }
}

/// Keeps `msg` for reuse if the pool has room.
fn give(pool: &mut Vec<Vec<u8>>, mut msg: Vec<u8>) {
    if pool.len() < POOL {
        msg.clear();
        pool.push(msg);
    }
}

/// What was left in the transport when it closed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Leftovers {
    /// Envelopes never written whole into their ring.
    pub(crate) unsent: usize,
    /// Envelopes read whole and never polled.
    pub(crate) undelivered: usize,
}

/// The runtime's transport over rings of medium `M` (module docs).
#[derive(Debug)]
pub(crate) struct RingLink<M: Medium> {
    token: u64,
    /// The most wire bytes of a uniform batch to another rank (`Builder::rack_batch_bytes`).
    batch_bytes: usize,
    /// This rank's first global worker.
    lo: usize,
    ends: Box<[Owned<End<M>>]>,
    shared: M::Shared,
}

impl<M: Medium> RingLink<M> {
    /// The link of this rank's workers `lo..lo + ends.len()`, with batches to another rank
    /// of at most `batch_bytes` on the wire.
    pub(crate) fn new(
        token: u64,
        lo: usize,
        ends: Vec<End<M>>,
        shared: M::Shared,
        batch_bytes: usize,
    ) -> Self {
        let ends = ends.into_iter().map(Owned::new).collect();
        RingLink { token, batch_bytes, lo, ends, shared }
    }

    /// Runs `f` on worker `g`'s end (taken by that worker only, or after every worker
    /// stopped).
    #[inline]
    pub(crate) fn with<R>(&self, g: usize, f: impl FnOnce(&mut End<M>) -> R) -> R {
        self.ends[g - self.lo].with(f)
    }

    /// This rank's global workers.
    pub(crate) fn workers(&self) -> std::ops::Range<usize> {
        self.lo..self.lo + self.ends.len()
    }

    /// What the link keeps for all its workers.
    pub(crate) fn shared(&self) -> &M::Shared {
        &self.shared
    }

    /// Buffers worker `g`'s pool holds.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    pub(crate) fn pooled(&self, g: usize) -> usize {
        self.with(g, |e| e.pool.len())
    }

    /// What is left in the transport (after the workers stopped).
    pub(crate) fn leftovers(&self) -> Leftovers {
        let mut left = Leftovers::default();
        for g in self.workers() {
            self.with(g, |e| {
                left.unsent += e.waiting;
                left.undelivered += e.ready.len();
                // Bytes still in a ring, or an envelope part-way through one: one each.
                left.unsent += e.out.iter().flatten().filter(|(_, w)| !w.between_frames()).count();
                for (_, ring, r) in &mut e.inbound {
                    left.undelivered += usize::from(r.mid_frame() || r.has_bytes(ring));
                }
            });
        }
        left
    }
}

/// Ends the job with `e` (the data path cannot go on; the other ranks are told).
fn fatal<T>(r: Result<T, String>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => crate::rack::abort(1, &e),
    }
}

impl<M: Medium> Transport for RingLink<M> {
    fn token(&self) -> u64 {
        self.token
    }

    fn idle_policy(&self) -> IdlePolicy {
        M::idle_policy(&self.shared)
    }

    fn wake_words(&self) -> Option<Arc<dyn WakeWords>> {
        M::wake_words(&self.shared)
    }

    /// The MPI transport's batches (envelopes of about 4 KiB): with the runtime's aggregation
    /// (a pair's requests wait for a full batch while fibers are ready), the default's larger
    /// batches made SSSP on 2 ranks 0.93x of the MPI transport's over the shared-memory
    /// rings (2-core VM, SCALE 18, 3 runs alternated); with these, the two agree
    /// (`docs/rack-benchmarks.md`).
    fn batch_limits(
        &self,
        uniform: Option<&'static crate::channel::record::VTable>,
    ) -> (usize, usize) {
        // The rings take any length: the batch is as long as the setting asks.
        super::mpi::batch_limits_within(self.batch_bytes, uniform)
    }

    fn claim(&self, from: usize, _to: usize) -> Option<Vec<u8>> {
        Some(self.with(from, |e| e.pool.pop().unwrap_or_else(|| Vec::with_capacity(4096))))
    }

    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        fatal(self.with(from, |e| {
            if e.out.get(to).is_none_or(Option::is_none) {
                return Err(format!(
                    "the {} transport got an envelope for worker {to}, not on another rank",
                    M::NAME
                ));
            }
            e.backlog[to].push_back(msg);
            e.waiting += 1;
            // Behind others, it waits for room with them.
            if e.backlog[to].len() == 1 {
                e.flush_to(to)?;
            }
            Ok(())
        }))
    }

    fn poll(&self, me: usize) -> Option<Arrived> {
        self.with(me, |e| e.ready.pop_front())
    }

    fn release(&self, me: usize, msg: Vec<u8>) {
        self.with(me, |e| give(&mut e.pool, msg))
    }

    fn progress(&self, me: usize) -> bool {
        fatal(self.with(me, |e| {
            let moved = e.flush_all()?;
            e.medium.progress()?;
            Ok(e.read()? || moved)
        }))
    }

    fn busy(&self, me: usize) -> bool {
        self.with(me, |e| e.waiting > 0 || !e.ready.is_empty())
    }

    fn describe(&self, me: usize) -> String {
        self.with(me, |e| {
            let workers = e.workers;
            let waiting: Vec<String> = (0..e.backlog.len())
                .filter(|&to| !e.backlog[to].is_empty())
                .map(|to| format!("{} to worker {to} (rank {})", e.backlog[to].len(), to / workers))
                .collect();
            let part_read = e.inbound.iter().filter(|(_, _, r)| r.mid_frame()).count();
            let medium = e.medium.describe();
            format!(
                "{} rings: {} envelopes waiting for room{}{}; {} read and not yet taken; {} \
                 rings part-way through an envelope{}{medium}",
                M::NAME,
                e.waiting,
                if waiting.is_empty() { "" } else { ": " },
                waiting.join(", "),
                e.ready.len(),
                part_read,
                if medium.is_empty() { "" } else { "; " },
            )
        })
    }

    fn drain(&self, me: usize, limit: Duration) -> bool {
        let start = Instant::now();
        loop {
            let done = fatal(self.with(me, |e| {
                e.flush_all()?;
                e.medium.progress()?;
                Ok(e.waiting == 0)
            }));
            if done {
                return true;
            }
            if start.elapsed() > limit {
                return false;
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests;
