//! The MPI envelope transport ([`endpoint`]) as a [`Transport`]: what the worker loop calls in a run
//! over MPI ranks (`Runtime::run` under `mpirun`, `docs/rack-mode.md` §4).
//!
//! # Shape
//!
//! One [`Endpoint`] per local worker, each in an [`Owned`] cell that only its worker takes
//! (the runtime's transport calls are made by the worker they name: never contended). A
//! taken flag instead of a mutex: one atomic swap and a plain store per call, where a
//! mutex's lock and unlock are two read-modify-writes, on every loop pass (an idle pass over
//! MPI is one `MPI_Test` and this). A second thread that finds the flag taken ends the job
//! instead of waiting (it would be a bug of the runtime). Envelopes are plain
//! `Vec<u8>`s from the endpoint's pool: [`MpiLink::claim`] hands one out, the runtime's
//! encoder fills it, [`MpiLink::publish`] hands it to `MPI_Isend` as it is (no copy,
//! [`Endpoint::send_owned`]); a received envelope's buffer is handed to the runtime as it is
//! and comes back through [`MpiLink::release`].
//!
//! # Publishing never fails
//!
//! The runtime publishes a response as soon as it has served a request envelope, and it
//! cannot hold one back. So when the endpoint's window to a rank is full, the envelope waits
//! in the worker's backlog, and [`MpiLink::progress`] (every loop pass) retries the backlog
//! in order. The backlog is bounded by the runtime's credits: at most `IN_FLIGHT` request
//! envelopes per (client, remote trustee) pair are outstanding, each answered by one
//! response envelope (`runtime::remote`), so a worker holds at most
//! `IN_FLIGHT · (R − 1) · W` envelopes in its window and backlog together.
//!
//! # Global ids
//!
//! The runtime names workers by global id `g = r·W + w`; the endpoints by (rank, local
//! worker): `(g / W, g % W)`.

pub(crate) mod endpoint;

use super::owned::Owned;
use super::{Arrived, IdlePolicy, Transport, BATCH_RESULT_BYTES, BATCH_WORDS};
use crate::channel::record::VTable;
use crate::wire::envelope::{HEADER_BYTES, SEGMENT_HEADER_BYTES};
use endpoint::{Endpoint, SendError};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One worker's endpoint and the envelopes waiting for a place in its window.
#[derive(Debug)]
struct End {
    ep: Endpoint,
    backlog: VecDeque<(usize, Vec<u8>)>,
}

impl End {
    /// Sends what the backlog holds, in order, while the windows allow; true if it sent any.
    fn flush(&mut self, workers: usize) -> bool {
        let mut sent = false;
        while let Some((to, msg)) = self.backlog.pop_front() {
            match self.ep.send_owned(to / workers, to % workers, msg) {
                Ok(()) => sent = true,
                Err((SendError::WouldBlock, msg)) => {
                    self.backlog.push_front((to, msg));
                    break;
                }
                Err((e, _)) => fail(&e),
            }
        }
        sent
    }
}

/// A refused send other than a full window is a bug of the runtime (a worker id out of
/// range, an envelope above the 1 GiB limit): the job cannot go on consistently.
#[cold]
fn fail(e: &SendError) -> ! {
    crate::rack::abort(1, &format!("the rack transport refused an envelope: {e}"))
}

/// One worker's end and whether an envelope waits in it, on a cache line of their own (only
/// that worker touches them).
#[derive(Debug)]
#[repr(align(64))]
struct Slot {
    /// True when the endpoint may hold an envelope received whole: set by `progress` from
    /// the endpoint, cleared by `poll` when it finds none. Read and written by the slot's
    /// worker only (`Relaxed`: the atomic is there for `Sync`), so that a pass that received
    /// nothing polls without locking the end.
    ready: AtomicBool,
    end: Owned<Option<End>>,
}

/// The runtime's transport over MPI (module docs).
#[derive(Debug)]
pub(crate) struct MpiLink {
    token: u64,
    /// Workers per rank (W).
    workers: usize,
    /// The first global id of this rank.
    lo: usize,
    ends: Box<[Slot]>,
}

impl MpiLink {
    /// Whether worker `me`'s pool keeps a released buffer of `capacity` bytes (a mixed run
    /// hands the others to the rings' pool: `transport::mixed`).
    pub(crate) fn keeps(&self, me: usize, capacity: usize) -> bool {
        self.with(me, |e| e.ep.keeps(capacity))
    }

    /// The link of rank `rank` over `endpoints` (one per local worker, in order, from
    /// `endpoint::open`), carrying envelopes of job token `token`.
    pub(crate) fn new(token: u64, rank: usize, endpoints: Vec<Endpoint>) -> MpiLink {
        let workers = endpoints.len();
        MpiLink {
            token,
            workers,
            lo: rank * workers,
            ends: endpoints
                .into_iter()
                .map(|ep| Slot {
                    ready: AtomicBool::new(false),
                    end: Owned::new(Some(End { ep, backlog: VecDeque::new() })),
                })
                .collect(),
        }
    }

    /// Runs `f` on worker `g`'s end (taken by that worker only: never contended).
    #[inline]
    fn with<R>(&self, g: usize, f: impl FnOnce(&mut End) -> R) -> R {
        self.ends[g - self.lo].end.with(|end| match end.as_mut() {
            Some(end) => f(end),
            None => crate::rack::abort(1, "the rack transport was used after it was closed"),
        })
    }

    /// Takes the endpoints back, in worker order, for `endpoint::Endpoints::close`
    /// (after the workers stopped; any later use of the link ends the job).
    pub(crate) fn take_endpoints(&self) -> Vec<Endpoint> {
        self.ends.iter().filter_map(|s| s.end.with(Option::take)).map(|end| end.ep).collect()
    }
}

/// Over MPI, the most words of in-process records, and result bytes, of one batch: small
/// enough that a request envelope and its response stay under Open MPI's eager limit (4096
/// bytes with its header; a longer message goes by rendezvous, several times slower:
/// `docs/rack-mode.md`, facts).
const MPI_BATCH_WORDS: usize = 400;
const MPI_BATCH_RESULT_BYTES: usize = 3 << 10;
/// Over MPI, the most bytes of a request envelope and of its response when the batch is
/// sized by its wire bytes ([`mpi_batch_limits`]): the rack transport's envelope size `B`
/// (`transport::mpi::endpoint::DEFAULT_ENVELOPE_BYTES`, under Open MPI's 4096-byte eager limit with
/// MPI's own header).
const MPI_ENVELOPE_BYTES: usize = 4032;

/// The batch limits over MPI (most words of in-process records, most in-process result
/// bytes) for a queue whose staged records are all of `uniform`'s type, if known.
///
/// A batch of one record type with a fixed-size argument and result travels as a uniform
/// segment, whose wire size is exact: `HEADER_BYTES + SEGMENT_HEADER_BYTES + 8 + n · (8 +
/// arg)` for the requests (the code id once, then per record its target and argument), and
/// `HEADER_BYTES + SEGMENT_HEADER_BYTES + n · result + 8` for the response (an empty panic
/// list). So it takes as many records as keep both under [`MPI_ENVELOPE_BYTES`]: far more
/// than the fixed word budget allows for small arguments, whose in-process records (header,
/// target, argument and completion) are longer than their wire form. Any other batch keeps
/// the fixed budget ([`MPI_BATCH_WORDS`], [`MPI_BATCH_RESULT_BYTES`]).
pub(super) fn mpi_batch_limits(uniform: Option<&'static VTable>) -> (usize, usize) {
    batch_limits_within(MPI_ENVELOPE_BYTES, uniform)
}

/// The batch limits of a transport whose request envelopes and responses should stay
/// within `envelope` bytes: a uniform batch takes as many records as keep both under it (as
/// [`mpi_batch_limits`] explains), any other the fixed budget of [`MPI_ENVELOPE_BYTES`]
/// scaled to `envelope` (within [`BATCH_WORDS`] and [`BATCH_RESULT_BYTES`]).
pub(super) fn batch_limits_within(
    envelope: usize,
    uniform: Option<&'static VTable>,
) -> (usize, usize) {
    let fixed = (
        (MPI_BATCH_WORDS * envelope / MPI_ENVELOPE_BYTES).min(BATCH_WORDS),
        (MPI_BATCH_RESULT_BYTES * envelope / MPI_ENVELOPE_BYTES).min(BATCH_RESULT_BYTES),
    );
    let Some((vt, remote)) = uniform.and_then(|vt| Some((vt, vt.remote?.vt()))) else {
        return fixed;
    };
    if remote.arg_prefixed() || remote.result_prefixed() {
        return fixed;
    }
    let room = envelope - HEADER_BYTES - SEGMENT_HEADER_BYTES - 8;
    let n = (room / (8 + remote.arg_bytes as usize))
        .min(room.checked_div(remote.result_bytes as usize).unwrap_or(usize::MAX));
    if n == 0 {
        return fixed;
    }
    let (words, result) = vt.totals(n);
    (words.min(BATCH_WORDS), result.min(BATCH_RESULT_BYTES))
}

impl Transport for MpiLink {
    fn token(&self) -> u64 {
        self.token
    }

    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy::Network
    }

    fn batch_limits(&self, uniform: Option<&'static VTable>) -> (usize, usize) {
        mpi_batch_limits(uniform)
    }

    fn claim(&self, from: usize, _to: usize) -> Option<Vec<u8>> {
        Some(self.with(from, |e| e.ep.buffer()))
    }

    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        let workers = self.workers;
        self.with(from, |e| {
            e.backlog.push_back((to, msg));
            e.flush(workers);
        })
    }

    fn poll(&self, me: usize) -> Option<Arrived> {
        // The worker calls `progress` first on every pass, which completes the receives and
        // says whether any envelope is whole.
        let ready = &self.ends[me - self.lo].ready;
        if !ready.load(Ordering::Relaxed) {
            return None;
        }
        let r = self.with(me, |e| e.ep.take_ready());
        if r.is_none() {
            ready.store(false, Ordering::Relaxed);
        }
        let r = r?;
        Some(Arrived { from_rank: r.source_rank(), bytes: r.into_bytes() })
    }

    fn release(&self, me: usize, msg: Vec<u8>) {
        self.with(me, |e| e.ep.give_back(msg))
    }

    fn progress(&self, me: usize) -> bool {
        let workers = self.workers;
        let (moved, ready) = self.with(me, |e| {
            let moved = e.ep.progress();
            let flushed = !e.backlog.is_empty() && e.flush(workers);
            (moved || flushed, e.ep.has_ready())
        });
        if ready {
            self.ends[me - self.lo].ready.store(true, Ordering::Relaxed);
        }
        moved
    }

    fn busy(&self, me: usize) -> bool {
        self.with(me, |e| e.ep.busy() || !e.backlog.is_empty())
    }

    fn describe(&self, me: usize) -> String {
        self.with(me, |e| format!("{}; backlog {} envelopes", e.ep.describe(), e.backlog.len()))
    }

    fn drain(&self, me: usize, limit: Duration) -> bool {
        let start = Instant::now();
        let workers = self.workers;
        loop {
            let done = self.with(me, |e| {
                e.ep.progress();
                e.flush(workers);
                e.ep.sends_in_flight() == 0 && e.backlog.is_empty()
            });
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
