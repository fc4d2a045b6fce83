//! The MPI envelope transport (feature `mpi`): moves **opaque byte envelopes** between
//! (worker, rank) endpoints with non-blocking MPI calls only. It knows nothing of what the
//! bytes mean: the wire encoder fills them, the validator checks them (`crate::wire`); this
//! layer delivers each one whole, once, to the endpoint it was addressed to, and says which
//! rank sent it.
//!
//! # Shape
//!
//! * [`open`] (collective, on the thread that will call `Runtime::run`) all-gathers every
//!   rank's worker count, makes `max W` duplicates of `MPI_COMM_WORLD` (duplicate `k` is
//!   worker `k`'s on every rank) and returns a [`Transport`] and one [`Endpoint`] per local
//!   worker, in worker order.
//! * Each [`Endpoint`] is handed to its worker thread and used only there: it **sends** on the
//!   communicator of the receiving worker ([`Endpoint::claim`] + [`Endpoint::publish`], or
//!   [`Endpoint::send`]), **receives** on its own ([`Endpoint::poll_recv`] +
//!   [`Endpoint::release`]), and moves bytes in [`Endpoint::progress`]. None of them blocks.
//! * [`Transport::close`] (collective, on the thread that called [`open`], with every endpoint
//!   handed back) frees the communicators, in worker order on every rank.
//!
//! # Sending: claim, fill, publish
//!
//! A send is *claim a pooled buffer, fill it, publish it*, not `send(&[u8])` with a copy:
//! the client keeps one envelope being filled per remote rank and writes its batches straight
//! into it (as into a slot), so the bytes are written once, by the encoder, and handed to
//! `MPI_Isend` as they are. ([`Endpoint::send`] is claim + copy + publish, for callers that
//! have the bytes already.) The claim reserves a place in the window, so a publish cannot
//! fail for want of one, and a caller that could not claim has not yet built anything.
//!
//! # Windows and credits
//!
//! At most `window` (`P`) envelopes per (endpoint, destination rank) are *in flight*: from
//! [`Endpoint::claim`] until `MPI_Testsome` reports the `MPI_Isend` complete (the buffer is
//! MPI's no more) or until the claim is abandoned. A claim beyond that returns
//! [`SendError::WouldBlock`], never waits. This is **local** completion: an eager envelope
//! (under the eager limit) completes as soon as MPI has copied it out, before the receiver
//! has it, so the window bounds this endpoint's buffers and requests, not the receiver's.
//! The end-to-end **credit** of the design (`docs/rack-mode.md` §4.2: a request envelope's
//! credit returns with its response envelope) is the caller's: it counts its request
//! envelopes per remote rank that have no response yet and stops at `P`. That credit is what
//! bounds the unreceived envelopes at a rank (below). [`Endpoint::in_flight`] gives this
//! layer's count.
//!
//! Every send eventually completes locally as long as its receiving endpoint calls
//! [`Endpoint::progress`] or [`Endpoint::poll_recv`]: receiving is never gated by a window or
//! by the pool (a buffer is allocated when the pool is empty), so two endpoints with full
//! windows towards each other cannot wait for each other.
//!
//! # Receiving
//!
//! `MPI_Improbe` (any source, the envelope tag) on the endpoint's own communicator, then
//! `MPI_Imrecv` of the matched message into a pooled buffer sized to the message's length,
//! then `MPI_Test` at once (an eager envelope is complete then) and `MPI_Testsome` on later
//! passes for the others. Not `MPI_Mrecv`: after a successful `MPI_Improbe` it cannot match
//! another message, but it is still a blocking call: a message above the eager limit goes
//! by rendezvous, and `MPI_Mrecv` returns only once the data has arrived, which depends on
//! the sender's progress. The sending rank comes from the probe's `MPI_Status`, never from
//! the bytes.
//!
//! # Ordering
//!
//! None is promised beyond **whole messages, each delivered exactly once** (MPI's reliable
//! delivery). Receives complete in any order (a rendezvous envelope may complete after an
//! eager one matched after it), and envelopes of one sender are not kept in order here. The
//! caller restores per-pair order from the sequence numbers in the bytes
//! (`docs/rack-mode.md` §4.3).
//!
//! # What the caller must do
//!
//! * Call [`open`] and [`Transport::close`] on every rank, from the run's own thread, in the
//!   same order relative to its other collectives on `MPI_COMM_WORLD` (after the start-of-run
//!   join, so that no rank waits in them for a rank that never comes).
//! * Use each endpoint on one thread at a time; call [`Endpoint::progress`] once per loop
//!   pass and while idle, and not sleep while [`Endpoint::busy`] or while its own credits
//!   are out.
//! * Publish or abandon every claimed buffer; release every received one (or drop it, which
//!   only forgoes the reuse).
//! * Manage the end-to-end credits (above), restore per-pair order (above), validate every
//!   envelope before acting on it (the bytes may be anything; only the source rank is
//!   MPI's word).
//! * Close only once every envelope sent has been received and every send has completed
//!   (quiescence of the run): an envelope still on its way when its communicator is freed
//!   could be matched by a later transport's duplicate (which the job token and run number
//!   in the envelope header would then refuse). `close` reports what it found left over.
//!
//! # Memory (`docs/rack-mode.md` §4.5, as this layer realises it)
//!
//! With `W` workers per rank, `R` ranks, envelope size `B` ([`Config::max_envelope_bytes`])
//! and window `P` ([`Config::window`]), per rank:
//!
//! * outgoing: at most `W · R_dest · P · B` in flight, where `R_dest` is the number of ranks
//!   sent to (`R − 1` when, as designed, only remote ranks are; this layer also allows sends
//!   to the own rank);
//! * incoming: the buffers the caller holds (received, not yet released) plus the messages
//!   matched and not yet complete; MPI's own unexpected-message buffers hold those not yet
//!   probed. Both are bounded by the callers' credits: with the design's credit rule at most
//!   `W · (R − 1) · P` request envelopes and as many response envelopes can be unreceived at
//!   a rank, which is the `W · (R − 1) · P · 4 · B` of §4.5 (request out and response in on
//!   the client side, request in and response out on the trustee side);
//! * the per-endpoint pool keeps every buffer that comes back whose capacity is between
//!   `min(B, 64 KiB)` and four times that (a bigger one, grown by a longer message, is
//!   dropped), so it holds at most the endpoint's peak of buffers in use.
//!
//! # Invariants (every `unsafe` block below relies on them)
//!
//! 1. **Communicators.** [`open`] makes the duplicates with `MPI_Comm_dup` on the calling
//!    thread; they are freed only by [`Transport::close`], once, with every endpoint back and
//!    consumed, in index order on every rank (`MPI_Comm_free` is collective). A
//!    [`Transport`] dropped without `close` leaks them, which is sound. Handles are copied
//!    into nothing else: endpoints reach them through the shared [`Comms`].
//! 2. **Threads.** MPI was initialised with `MPI_THREAD_MULTIPLE` (the bootstrap refuses
//!    less, and [`open`] runs it), so any thread may call MPI with any handle. Each
//!    [`Endpoint`] is used by one thread at a time (`&mut self` on every call): created on
//!    the thread that calls [`open`], then moved to its worker (`unsafe impl Send`), which
//!    is its only user until it is handed back for [`Transport::close`]. The communicators
//!    are shared read-only (`Comms: Sync`): concurrent sends on one communicator from
//!    several threads are allowed under `MPI_THREAD_MULTIPLE`; only its owner receives on
//!    it.
//! 3. **Buffers.** A buffer (`Vec<u8>`) handed to `MPI_Isend` or `MPI_Imrecv` is owned by
//!    MPI from that call until `MPI_Test`/`MPI_Testsome` reports its request complete: it
//!    stays in the request set beside its request, and nothing reads, writes, resizes or
//!    frees it meanwhile (moving the `Vec` value moves no heap bytes). A request set dropped
//!    with requests outstanding leaks their buffers (`std::mem::forget`) instead of freeing
//!    memory MPI may still touch. A completed receive's buffer has exactly the message's
//!    length (its `Vec` length is set to the probed count before `MPI_Imrecv`, so MPI never
//!    writes beyond it and every byte is initialised).
//! 4. **Requests.** A request set holds only live (non-null) requests, each exactly once:
//!    completed ones are removed as `MPI_Testsome` reports them (MPI has set them to
//!    `MPI_REQUEST_NULL`).

// Some of the layer's calls (`claim`/`publish`, `send`, `stats`, ...) are used only by its
// tests: the runtime's link (`super::link`) sends with `send_owned`.
#![allow(dead_code)]

use mpi::ffi;
use mpi::traits::*;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::Arc;

/// The MPI tag of every envelope (other tags are left for later kinds of message).
const ENVELOPE_TAG: c_int = 0x5e;

/// At most this many messages are matched by one [`Endpoint::progress`] pass, so that a flood
/// of arrivals cannot keep one pass from returning.
const PROBES_PER_PASS: usize = 32;

/// The default envelope size `B`: 63 cache lines, under Open MPI's 4096-byte eager limit
/// with MPI's own header (`docs/rack-mode.md` §4.2).
pub(crate) const DEFAULT_ENVELOPE_BYTES: usize = 4032;

/// The largest capacity of a pooled buffer (envelopes may be longer, up to
/// [`Config::max_envelope_bytes`]: their buffers are not kept).
pub(crate) const POOL_BUFFER_BYTES: usize = 64 << 10;

/// The default window `P`: envelopes in flight per (worker, destination rank).
pub(crate) const DEFAULT_WINDOW: usize = 4;

/// The transport's sizes. The same on every rank is expected but not required: a receiver
/// takes a message of any length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    /// `B`: the largest envelope a sender may publish, and the capacity of pooled buffers.
    pub(crate) max_envelope_bytes: usize,
    /// `P`: envelopes in flight per (endpoint, destination rank), at least 1.
    pub(crate) window: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config { max_envelope_bytes: DEFAULT_ENVELOPE_BYTES, window: DEFAULT_WINDOW }
    }
}

/// Why a send could not be started. Only [`SendError::WouldBlock`] is expected in a correct
/// caller (try again after [`Endpoint::progress`]); the others are the caller's bugs, reported
/// instead of sending something no one receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// `window` envelopes to that rank are in flight already.
    WouldBlock,
    /// No such (rank, worker): the rank or worker index is out of range.
    NoSuchEndpoint { rank: usize, worker: usize, ranks: usize, workers_there: usize },
    /// The envelope is longer than [`Config::max_envelope_bytes`] (nothing was sent).
    TooLong { len: usize, max: usize },
    /// The buffer was claimed by another endpoint (nothing was sent).
    ForeignBuffer,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::WouldBlock => write!(f, "the window to that rank is full"),
            SendError::NoSuchEndpoint { rank, worker, ranks, workers_there } => write!(
                f,
                "no endpoint (rank {rank}, worker {worker}): {ranks} ranks, {workers_there} \
                 workers on that rank"
            ),
            SendError::TooLong { len, max } => {
                write!(f, "envelope of {len} bytes is longer than the maximum {max}")
            }
            SendError::ForeignBuffer => {
                write!(f, "the buffer was claimed by another endpoint")
            }
        }
    }
}

/// Ends the job (`crate::rack::abort`) if an MPI call failed. With the default error handler
/// (`MPI_ERRORS_ARE_FATAL`, inherited by the duplicates) MPI aborts by itself first; this is
/// for a program that installed another handler.
fn check(rc: c_int, call: &str) {
    if rc != ffi::MPI_SUCCESS as c_int {
        crate::rack::abort(1, &format!("{call} failed (MPI error code {rc}) in the transport"));
    }
}

/// The communicators and the shape of the rack, shared by the endpoints of one [`Transport`].
#[derive(Debug)]
pub(crate) struct Comms {
    /// Duplicate `k` of `MPI_COMM_WORLD`: worker `k`'s on every rank (invariant 1).
    handles: Vec<ffi::MPI_Comm>,
    rank: usize,
    /// Worker count of each rank, all-gathered by [`open`].
    workers_of: Vec<usize>,
    config: Config,
}

// SAFETY: the handles are plain values, only read after `open` and passed to MPI, which any
// thread may call under `MPI_THREAD_MULTIPLE` (invariant 2); they are freed only by
// `Transport::close` once no endpoint can reach them (invariant 1).
unsafe impl Send for Comms {}
// SAFETY: as for `Send`: shared use is reads of the handles, and concurrent MPI calls on one
// communicator are allowed under `MPI_THREAD_MULTIPLE`.
unsafe impl Sync for Comms {}

/// The transport of one run: owns the communicators until [`Transport::close`].
#[derive(Debug)]
pub(crate) struct Transport {
    comms: Arc<Comms>,
    workers: usize,
}

/// Sets up the transport for `workers` local workers: **collective** (every rank calls it, in
/// the same order relative to its other collectives on `MPI_COMM_WORLD`), on the thread that
/// will call [`Transport::close`]. Returns the endpoints in worker order. Errors when MPI is
/// not up (outside `mpirun`, bootstrap failed, finalised: then before any collective, alike on
/// every rank), and on **every** rank when any rank's `workers` or `config` is out of range
/// (`workers` 0, `window` 0, `max_envelope_bytes` 0 or above `i32::MAX`), naming those ranks.
pub(crate) fn open(workers: usize, config: Config) -> Result<(Transport, Vec<Endpoint>), String> {
    crate::rack::init().map_err(|e| e.to_string())?;
    if !mpi::is_initialized() || mpi::is_finalized() {
        return Err("the rack transport needs MPI initialised by the rack bootstrap (run \
                    under mpirun with the `mpi` feature), and not yet finalised"
            .into());
    }
    let refusal = if workers == 0 || workers > u32::MAX as usize {
        Some(format!("the rack transport needs 1..=u32::MAX workers, got {workers}"))
    } else if config.window == 0 {
        Some("the rack transport's window must be at least 1 envelope".into())
    } else if config.max_envelope_bytes == 0 || config.max_envelope_bytes > i32::MAX as usize {
        Some(format!(
            "the rack transport's envelope size must be 1..={} bytes, got {}",
            i32::MAX,
            config.max_envelope_bytes
        ))
    } else {
        None
    };
    let world = mpi::topology::SimpleCommunicator::world();
    let rank = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    // [refused, workers] per rank: every rank learns whether every rank can go on.
    let mine = [u64::from(refusal.is_some()), workers as u64];
    let mut all = vec![0u64; 2 * ranks];
    world.all_gather_into(&mine[..], &mut all[..]);
    let refused: Vec<String> =
        (0..ranks).filter(|&r| all[2 * r] != 0).map(|r| r.to_string()).collect();
    if !refused.is_empty() {
        let mut e = format!("rank(s) {} refused to open the rack transport", refused.join(", "));
        if let Some(own) = refusal {
            e.push_str(&format!("; rank {rank}: {own}"));
        }
        return Err(e);
    }
    let workers_of: Vec<usize> = (0..ranks).map(|r| all[2 * r + 1] as usize).collect();
    let count = workers_of.iter().copied().max().unwrap_or(workers);
    let mut handles = Vec::with_capacity(count);
    for _ in 0..count {
        // SAFETY: MPI is initialised with MPI_THREAD_MULTIPLE and not finalised (checked
        // above, invariant 2); RSMPI_COMM_* are constants of rsmpi's shim set at load time;
        // `comm` is a valid place for MPI to write the new handle. Every rank makes `count`
        // duplicates (the same maximum everywhere), so the collective calls match.
        let comm = unsafe {
            let mut comm = ffi::RSMPI_COMM_NULL;
            check(ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm), "MPI_Comm_dup");
            comm
        };
        handles.push(comm);
    }
    let comms = Arc::new(Comms { handles, rank, workers_of, config });
    let endpoints = (0..workers).map(|w| Endpoint::new(Arc::clone(&comms), w)).collect();
    Ok((Transport { comms, workers }, endpoints))
}

/// What [`Transport::close`] found left over: none of it is expected after a run whose
/// caller waited for every envelope to be received and every send to complete.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Leftovers {
    /// Sends not complete at close: their buffers are leaked (invariant 3).
    pub(crate) sends_in_flight: usize,
    /// Receives matched but not complete at close: their buffers are leaked.
    pub(crate) receives_in_flight: usize,
    /// Envelopes received and never taken with `poll_recv`.
    pub(crate) undelivered: usize,
}

impl Transport {
    /// Number of local workers (endpoints).
    pub(crate) fn workers(&self) -> usize {
        self.workers
    }

    /// Tears the transport down: **collective**, on the thread that called [`open`], with
    /// every endpoint it returned (any order). Each endpoint gets one last progress pass; sends
    /// and receives still outstanding after it have their buffers leaked, and are reported.
    /// The communicators are freed in index order (the same on every rank). Errors, without
    /// freeing anything, when an endpoint is missing or belongs to another transport (then
    /// the communicators leak, which is sound).
    pub(crate) fn close(self, endpoints: Vec<Endpoint>) -> Result<Leftovers, String> {
        let mut seen = vec![false; self.workers];
        for e in &endpoints {
            if !Arc::ptr_eq(&e.comms, &self.comms) || e.worker >= self.workers {
                return Err("Transport::close got an endpoint of another transport".into());
            }
            seen[e.worker] = true;
        }
        if endpoints.len() != self.workers || seen.iter().any(|s| !s) {
            return Err(format!(
                "Transport::close needs all {} endpoints back, got {}",
                self.workers,
                endpoints.len()
            ));
        }
        let mut left = Leftovers::default();
        for mut e in endpoints {
            e.progress();
            left.sends_in_flight += e.sends.len();
            left.receives_in_flight += e.recvs.len();
            left.undelivered += e.ready.len();
            // Dropping the endpoint leaks the buffers of outstanding requests (invariant 3).
        }
        let comms = match Arc::try_unwrap(self.comms) {
            Ok(c) => c,
            Err(_) => return Err("an endpoint outlived Transport::close".into()),
        };
        if mpi::is_finalized() {
            return Ok(left);
        }
        for mut comm in comms.handles {
            // SAFETY: a duplicate made by `open`, freed once, here, after every endpoint that
            // could use it has been consumed (invariant 1); outstanding operations on it (if
            // any, reported above) complete normally and their buffers were leaked.
            let rc = unsafe { ffi::MPI_Comm_free(&mut comm) };
            check(rc, "MPI_Comm_free");
        }
        Ok(left)
    }
}

/// A send buffer claimed from an endpoint's pool: fill it (it dereferences to a `Vec<u8>`,
/// empty, with capacity [`Config::max_envelope_bytes`]) and hand it to
/// [`Endpoint::publish`], or back with [`Endpoint::abandon`]. Dropping it instead keeps its
/// place in the window taken for the rest of the run.
#[must_use = "a claimed buffer holds a place in the window until published or abandoned"]
#[derive(Debug)]
pub(crate) struct SendBuf {
    data: Vec<u8>,
    to_rank: usize,
    to_worker: usize,
    /// The claiming endpoint's worker index and its transport's address (only compared),
    /// checked by `publish`.
    owner: usize,
    transport: usize,
}

impl SendBuf {
    /// The rank it will go to.
    pub(crate) fn to_rank(&self) -> usize {
        self.to_rank
    }
    /// The worker (on [`SendBuf::to_rank`]) it will go to.
    pub(crate) fn to_worker(&self) -> usize {
        self.to_worker
    }
}

impl std::ops::Deref for SendBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.data
    }
}

impl std::ops::DerefMut for SendBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.data
    }
}

/// An envelope received whole: its bytes and the rank MPI says sent it. Give it back with
/// [`Endpoint::release`] so its buffer is reused (dropping it only frees the buffer).
#[derive(Debug)]
pub(crate) struct Received {
    from_rank: usize,
    data: Vec<u8>,
}

impl Received {
    /// The sending rank, from the MPI status (never from the bytes).
    pub(crate) fn source_rank(&self) -> usize {
        self.from_rank
    }
    /// The envelope's bytes, exactly as sent.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data
    }
    /// The envelope's bytes, owned (give the buffer back with [`Endpoint::give_back`]).
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.data
    }
}

/// Outstanding MPI requests and what each one owns (a buffer, invariant 3), kept compact:
/// only live requests (invariant 4).
#[derive(Debug)]
struct Requests<T> {
    reqs: Vec<ffi::MPI_Request>,
    owned: Vec<T>,
    indices: Vec<c_int>,
}

impl<T> Requests<T> {
    fn new() -> Requests<T> {
        Requests { reqs: Vec::new(), owned: Vec::new(), indices: Vec::new() }
    }

    fn len(&self) -> usize {
        self.reqs.len()
    }

    fn push(&mut self, req: ffi::MPI_Request, owned: T) {
        self.reqs.push(req);
        self.owned.push(owned);
    }

    /// `MPI_Testsome` over the live requests; hands what each completed one owned to `done`.
    /// Returns how many completed. Never blocks.
    fn test_some(&mut self, mut done: impl FnMut(T)) -> usize {
        if self.reqs.is_empty() {
            return 0;
        }
        self.indices.resize(self.reqs.len(), 0);
        let incount = c_int::try_from(self.reqs.len()).expect("fewer than 2^31 requests");
        let mut outcount: c_int = 0;
        // SAFETY: `reqs` holds `incount` live requests (invariant 4) and `indices` room for as
        // many indices; MPI_Testsome never blocks, writes the completed indices and sets
        // those requests to MPI_REQUEST_NULL; statuses are ignored (rsmpi's constant).
        let rc = unsafe {
            ffi::MPI_Testsome(
                incount,
                self.reqs.as_mut_ptr(),
                &mut outcount,
                self.indices.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        check(rc, "MPI_Testsome");
        // MPI_UNDEFINED (no live request) cannot happen with a compact set; treat it as 0.
        let n = usize::try_from(outcount).unwrap_or(0).min(self.reqs.len());
        let completed = &mut self.indices[..n];
        // Highest index first: swap_remove then only moves requests not yet handled.
        completed.sort_unstable_by(|a, b| b.cmp(a));
        for &i in completed.iter() {
            let i = i as usize;
            self.reqs.swap_remove(i);
            done(self.owned.swap_remove(i));
        }
        n
    }
}

impl<T> Drop for Requests<T> {
    fn drop(&mut self) {
        // Outstanding requests: MPI may still read or write their buffers (invariant 3).
        for t in self.owned.drain(..) {
            std::mem::forget(t);
        }
    }
}

/// A send in flight: its buffer (MPI's until complete) and destination rank.
#[derive(Debug)]
struct Sending {
    data: Vec<u8>,
    to_rank: usize,
}

/// A receive matched but not complete: its buffer (MPI's until complete) and source rank.
#[derive(Debug)]
struct Receiving {
    data: Vec<u8>,
    from_rank: usize,
}

/// Counters of one endpoint, for tests and reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Envelopes published.
    pub(crate) sent: u64,
    /// Envelopes delivered by `poll_recv`.
    pub(crate) received: u64,
    /// Claims refused with [`SendError::WouldBlock`].
    pub(crate) would_block: u64,
}

/// One worker's end of the transport: sends to any (rank, worker), receives on its own
/// communicator. Used by one thread at a time (invariant 2); every method is non-blocking.
#[derive(Debug)]
pub(crate) struct Endpoint {
    comms: Arc<Comms>,
    worker: usize,
    /// Claimed or published, not yet complete, per destination rank (≤ `window`).
    in_flight: Vec<usize>,
    sends: Requests<Sending>,
    recvs: Requests<Receiving>,
    /// Received whole, not yet taken by `poll_recv`.
    ready: VecDeque<Received>,
    /// Free buffers (capacity `pool_capacity()` to four times that).
    pool: Vec<Vec<u8>>,
    stats: Stats,
}

// SAFETY: the raw MPI handles inside (requests, and the communicators behind `comms`) may be
// passed to MPI from any thread under MPI_THREAD_MULTIPLE, and the endpoint is used by one
// thread at a time (`&mut self`), its worker after the hand-over (invariant 2); buffers are
// owned `Vec`s, untouched while MPI owns them (invariant 3).
unsafe impl Send for Endpoint {}

impl Endpoint {
    fn new(comms: Arc<Comms>, worker: usize) -> Endpoint {
        let ranks = comms.workers_of.len();
        Endpoint {
            comms,
            worker,
            in_flight: vec![0; ranks],
            sends: Requests::new(),
            recvs: Requests::new(),
            ready: VecDeque::new(),
            pool: Vec::new(),
            stats: Stats::default(),
        }
    }

    /// This endpoint's local worker index.
    pub(crate) fn worker(&self) -> usize {
        self.worker
    }
    /// This process's rank.
    pub(crate) fn rank(&self) -> usize {
        self.comms.rank
    }
    /// Number of ranks.
    pub(crate) fn ranks(&self) -> usize {
        self.comms.workers_of.len()
    }
    /// Number of workers (endpoints) on `rank`, as that rank passed to [`open`].
    pub(crate) fn workers_of(&self, rank: usize) -> usize {
        self.comms.workers_of.get(rank).copied().unwrap_or(0)
    }
    /// The configuration (the same object on every endpoint of the transport).
    pub(crate) fn config(&self) -> Config {
        self.comms.config
    }
    /// Envelopes to `to_rank` claimed or in flight (≤ [`Config::window`]).
    pub(crate) fn in_flight(&self, to_rank: usize) -> usize {
        self.in_flight.get(to_rank).copied().unwrap_or(0)
    }
    /// Sends handed to MPI and not yet complete, to all ranks.
    pub(crate) fn sends_in_flight(&self) -> usize {
        self.sends.len()
    }
    /// Whether this endpoint has anything under way: a send not complete, a receive matched
    /// and not complete, or an envelope received and not yet taken. A worker must not sleep
    /// while it is (`docs/rack-mode.md` §4.2, the idle policy); false does not mean that
    /// nothing is on its way to it (that is the caller's credits to know).
    pub(crate) fn busy(&self) -> bool {
        self.sends.len() > 0 || self.recvs.len() > 0 || !self.ready.is_empty()
    }
    /// This endpoint's counters.
    pub(crate) fn stats(&self) -> Stats {
        self.stats
    }

    /// The capacity of the buffers this endpoint pools: `max_envelope_bytes`, at most
    /// [`POOL_BUFFER_BYTES`] (a transport that allows huge envelopes does not allocate its
    /// limit for every buffer).
    fn pool_capacity(&self) -> usize {
        self.comms.config.max_envelope_bytes.min(POOL_BUFFER_BYTES)
    }

    /// A buffer of capacity [`Endpoint::pool_capacity`] from the pool (or new). Pooled
    /// buffers keep the length they had, so that a receive into one zero-fills only what was
    /// never initialised; a send clears it.
    fn pooled(&mut self) -> Vec<u8> {
        match self.pool.pop() {
            Some(b) => b,
            None => Vec::with_capacity(self.pool_capacity()),
        }
    }

    /// Keeps a buffer that came back for reuse if its capacity is between the pool's and four
    /// times that (a buffer grown by a long envelope beyond that is freed).
    fn recycle(&mut self, data: Vec<u8>) {
        let cap = self.pool_capacity();
        if (cap..=4 * cap).contains(&data.capacity()) {
            self.pool.push(data);
        }
    }

    /// An empty buffer from the pool, for a caller that fills its own envelope and hands it
    /// to [`Endpoint::send_owned`].
    pub(crate) fn buffer(&mut self) -> Vec<u8> {
        let mut b = self.pooled();
        b.clear();
        b
    }

    /// Gives a buffer (of [`Endpoint::buffer`], or of a [`Received`]) back to the pool.
    pub(crate) fn give_back(&mut self, data: Vec<u8>) {
        self.recycle(data);
    }

    /// Sends `data` as it is, without a copy: claim and publish in one call. On
    /// [`SendError::WouldBlock`] (and any other refusal) nothing is sent and the bytes come
    /// back with the error.
    pub(crate) fn send_owned(
        &mut self,
        to_rank: usize,
        to_worker: usize,
        data: Vec<u8>,
    ) -> Result<(), (SendError, Vec<u8>)> {
        let max = self.comms.config.max_envelope_bytes;
        if data.len() > max {
            return Err((SendError::TooLong { len: data.len(), max }, data));
        }
        let mut buf = match self.claim(to_rank, to_worker) {
            Ok(b) => b,
            Err(e) => return Err((e, data)),
        };
        let empty = std::mem::replace(&mut buf.data, data);
        self.recycle(empty);
        self.publish(buf).map_err(|e| (e, Vec::new()))
    }

    /// Claims an empty buffer for an envelope to (`to_rank`, `to_worker`), taking a place in
    /// the window to `to_rank`: [`SendError::WouldBlock`] when all `window` places are taken
    /// (after one test of the sends in flight; call [`Endpoint::progress`] and try again), [`SendError::NoSuchEndpoint`] when the
    /// destination does not exist. Never blocks.
    pub(crate) fn claim(&mut self, to_rank: usize, to_worker: usize) -> Result<SendBuf, SendError> {
        let workers_there = self.workers_of(to_rank);
        if to_worker >= workers_there {
            return Err(SendError::NoSuchEndpoint {
                rank: to_rank,
                worker: to_worker,
                ranks: self.ranks(),
                workers_there,
            });
        }
        if self.in_flight[to_rank] >= self.comms.config.window {
            // A full window may hold completed sends: test them once before refusing.
            self.test_sends();
        }
        if self.in_flight[to_rank] >= self.comms.config.window {
            self.stats.would_block += 1;
            return Err(SendError::WouldBlock);
        }
        self.in_flight[to_rank] += 1;
        let mut data = self.pooled();
        data.clear();
        Ok(SendBuf {
            data,
            to_rank,
            to_worker,
            owner: self.worker,
            transport: Arc::as_ptr(&self.comms) as usize,
        })
    }

    fn owns(&self, buf: &SendBuf) -> bool {
        buf.owner == self.worker && buf.transport == Arc::as_ptr(&self.comms) as usize
    }

    /// Gives a claimed buffer back unsent, freeing its place in the window.
    pub(crate) fn abandon(&mut self, buf: SendBuf) -> Result<(), SendError> {
        if !self.owns(&buf) {
            return Err(SendError::ForeignBuffer);
        }
        self.in_flight[buf.to_rank] -= 1;
        self.recycle(buf.data);
        Ok(())
    }

    /// Sends the filled buffer (its `len()` bytes) with `MPI_Isend` on the communicator of
    /// the receiving worker; the buffer is MPI's until the send completes, then returns to
    /// the pool. Never blocks. On an error nothing is sent and the place in the window is
    /// freed (a buffer of another endpoint is dropped, its owner's place stays taken).
    pub(crate) fn publish(&mut self, buf: SendBuf) -> Result<(), SendError> {
        if !self.owns(&buf) {
            return Err(SendError::ForeignBuffer);
        }
        let max = self.comms.config.max_envelope_bytes;
        if buf.data.len() > max {
            let len = buf.data.len();
            self.abandon(buf)?;
            return Err(SendError::TooLong { len, max });
        }
        let SendBuf { data, to_rank, to_worker, .. } = buf;
        let comm = self.comms.handles[to_worker];
        let mut req = {
            // SAFETY: a constant of rsmpi's shim, read after initialisation.
            unsafe { ffi::RSMPI_REQUEST_NULL }
        };
        // SAFETY: `data` holds `len` (≤ i32::MAX, checked by `open`) initialised bytes and is
        // kept untouched in `sends` until the request completes (invariant 3); `comm` is a
        // live duplicate (invariant 1); `to_rank` < ranks (checked by `claim`); MPI writes the
        // request handle.
        let rc = unsafe {
            ffi::MPI_Isend(
                data.as_ptr().cast(),
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                to_rank as c_int,
                ENVELOPE_TAG,
                comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend");
        self.sends.push(req, Sending { data, to_rank });
        self.stats.sent += 1;
        Ok(())
    }

    /// Claim, copy `bytes`, publish: for callers that have the envelope already.
    pub(crate) fn send(
        &mut self,
        to_rank: usize,
        to_worker: usize,
        bytes: &[u8],
    ) -> Result<(), SendError> {
        let max = self.comms.config.max_envelope_bytes;
        if bytes.len() > max {
            return Err(SendError::TooLong { len: bytes.len(), max });
        }
        let mut buf = self.claim(to_rank, to_worker)?;
        buf.extend_from_slice(bytes);
        self.publish(buf)
    }

    /// The next envelope received whole, if any: one that progress already completed, else
    /// one probe and receive attempt now. Never blocks.
    pub(crate) fn poll_recv(&mut self) -> Option<Received> {
        if self.ready.is_empty() {
            self.test_receives();
            self.probe();
        }
        let r = self.ready.pop_front()?;
        self.stats.received += 1;
        Some(r)
    }

    /// The next envelope received whole by an earlier [`Endpoint::progress`] or
    /// [`Endpoint::poll_recv`], without touching MPI (for a caller that calls `progress` on
    /// every pass anyway: one probe per pass instead of two).
    pub(crate) fn take_ready(&mut self) -> Option<Received> {
        let r = self.ready.pop_front()?;
        self.stats.received += 1;
        Some(r)
    }

    /// Returns a received envelope's buffer to the pool.
    pub(crate) fn release(&mut self, r: Received) {
        self.recycle(r.data);
    }

    /// Moves bytes: completes sends (their buffers back to the pool, their window places
    /// freed), completes receives, and matches up to a bounded number of new messages. True
    /// when anything happened. Never blocks.
    pub(crate) fn progress(&mut self) -> bool {
        let sent = self.test_sends();
        let received = self.test_receives();
        let matched = (0..PROBES_PER_PASS).take_while(|_| self.probe()).count();
        sent + received + matched > 0
    }

    fn test_sends(&mut self) -> usize {
        let cap = self.pool_capacity();
        let Endpoint { sends, in_flight, pool, .. } = self;
        sends.test_some(|s| {
            in_flight[s.to_rank] -= 1;
            if (cap..=4 * cap).contains(&s.data.capacity()) {
                pool.push(s.data);
            }
        })
    }

    fn test_receives(&mut self) -> usize {
        let Endpoint { recvs, ready, .. } = self;
        recvs.test_some(|r| ready.push_back(Received { from_rank: r.from_rank, data: r.data }))
    }

    /// One `MPI_Improbe` on the own communicator; on a match, `MPI_Imrecv` into a buffer of
    /// the message's length and one `MPI_Test`. True when a message was matched.
    fn probe(&mut self) -> bool {
        let comm = self.comms.handles[self.worker];
        let mut flag: c_int = 0;
        // SAFETY: constants of rsmpi's shim, read after initialisation; a zeroed MPI_Status
        // (plain integers) is a valid place for MPI to write.
        let (mut message, mut status) =
            unsafe { (ffi::RSMPI_MESSAGE_NULL, std::mem::zeroed::<ffi::MPI_Status>()) };
        // SAFETY: `comm` is this endpoint's live duplicate (invariant 1), probed only by its
        // owner (invariant 2); MPI_Improbe never blocks and writes flag, message and status.
        let rc = unsafe {
            ffi::MPI_Improbe(
                ffi::RSMPI_ANY_SOURCE,
                ENVELOPE_TAG,
                comm,
                &mut flag,
                &mut message,
                &mut status,
            )
        };
        check(rc, "MPI_Improbe");
        if flag == 0 {
            return false;
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was written by the successful probe; MPI writes `count`.
        check(
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) },
            "MPI_Get_count",
        );
        let len = match usize::try_from(count) {
            Ok(n) => n,
            // MPI_UNDEFINED cannot come for MPI_UINT8_T counts below 2^31.
            Err(_) => crate::rack::abort(1, "MPI_Get_count: undefined length of an envelope"),
        };
        let from_rank = usize::try_from(status.MPI_SOURCE).unwrap_or(usize::MAX);
        let mut data = self.pooled();
        // Exactly the message's length, every byte initialised (zeros past the buffer's old
        // length; a pooled buffer keeps its old bytes below it): MPI overwrites them all
        // (invariant 3). Within the pooled capacity this does not allocate.
        data.resize(len, 0);
        let mut req = {
            // SAFETY: a constant of rsmpi's shim, read after initialisation.
            unsafe { ffi::RSMPI_REQUEST_NULL }
        };
        // SAFETY: `message` is the handle the successful MPI_Improbe matched (MPI sets it to
        // MPI_MESSAGE_NULL); `data` has room for exactly `count` bytes and stays untouched
        // until the request completes (invariant 3); MPI writes the request handle.
        let rc = unsafe {
            ffi::MPI_Imrecv(
                data.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT8_T,
                &mut message,
                &mut req,
            )
        };
        check(rc, "MPI_Imrecv");
        let mut done: c_int = 0;
        // SAFETY: `req` is the live request just made; MPI_Test never blocks and sets it to
        // MPI_REQUEST_NULL when complete; the status is ignored.
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        check(rc, "MPI_Test");
        if done != 0 {
            self.ready.push_back(Received { from_rank, data });
        } else {
            self.recvs.push(req, Receiving { data, from_rank });
        }
        true
    }
}

#[cfg(test)]
mod tests;
