//! The MPI envelope transport (feature `mpi`): moves **opaque byte envelopes** between
//! (worker, rank) endpoints with non-blocking MPI calls only. It knows nothing of what the
//! bytes mean: the wire encoder fills them, the validator checks them (`crate::wire`); this
//! layer delivers each one whole, once, to the endpoint it was addressed to, and says which
//! rank sent it.
//!
//! # Shape
//!
//! * [`open`] (collective, on the thread that will call `Runtime::run`) all-gathers every
//!   rank's worker count, makes `2 · max W` duplicates of `MPI_COMM_WORLD` (duplicates `k`
//!   and `max W + k` are worker `k`'s on every rank: envelopes, and long envelopes' bodies),
//!   posts every endpoint's receives, and returns a [`Endpoints`] and one [`Endpoint`] per local
//!   worker, in worker order.
//! * Each [`Endpoint`] is handed to its worker thread and used only there: it **sends** on the
//!   communicator of the receiving worker ([`Endpoint::claim`] + [`Endpoint::publish`]),
//!   **receives** on its own ([`Endpoint::take_ready`], then the buffer back with
//!   [`Endpoint::give_back`]), and moves bytes in [`Endpoint::progress`]. None of them
//!   blocks. (The tests' `send`, `poll_recv` and `release` are shorthands of these.)
//! * [`Endpoints::close`] (collective, on the thread that called [`open`], with every endpoint
//!   handed back) frees the communicators, in worker order on every rank.
//!
//! # Sending: claim, fill, publish
//!
//! A send is *claim a pooled buffer, fill it, publish it*, not `send(&[u8])` with a copy:
//! the client keeps one envelope being filled per remote rank and writes its batches straight
//! into it (as into a slot), so the bytes are written once, by the encoder, and handed to
//! `MPI_Isend` as they are. (The tests' `Endpoint::send` is claim + copy + publish.) The
//! claim reserves a place in the window, so a publish cannot fail for want of one, and a
//! caller that could not claim has not yet built anything.
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
//! [`Endpoint::progress`]: receiving is never gated by a window or
//! by the pool (a buffer is allocated when the pool is empty), so two endpoints with full
//! windows towards each other cannot wait for each other.
//!
//! # Receiving: pre-posted receives
//!
//! Each endpoint keeps [`RING`] receives posted on its own communicator (`MPI_Irecv`, any
//! source, any tag, [`POSTED_BYTES`] each, into owned buffers): a message that arrives is
//! matched and copied at once by MPI's progress, and the worker's pass costs one `MPI_Test`
//! of the oldest receive when nothing came (instead of an `MPI_Improbe`, which takes the
//! matching lock on every call). A completed receive's buffer is handed over as it is
//! (exactly the message's length), and its slot is re-posted with a pooled buffer *after* the
//! envelope was handled: by the endpoint's next send (a response, a request: the MPI call is
//! then off the round trip's path), by the second idle pass in a row, or at the latest when
//! every slot is empty. A message that finds no posted receive meanwhile waits in MPI's
//! unexpected queue (one more copy), which changes nothing else.
//!
//! An envelope longer than [`POSTED_BYTES`] cannot go into a posted receive (MPI fails a
//! message longer than the receive it matches). Its sender sends an **announcement**
//! instead, on the same communicator ([`ANNOUNCE_TAG`]: its length and the sender's worker),
//! and the body on the receiver's second duplicate (the *long* communicator) tagged with the
//! sender's worker index. The receiver, when the announcement's turn comes, posts an
//! `MPI_Irecv` of exactly that length from that rank with that tag; the body's place in the
//! stream of envelopes is the announcement's. Bodies of one (rank, worker) to one endpoint
//! are sent by one thread on one (communicator, tag), so MPI matches them in the order of
//! their announcements. `POSTED_BYTES` is a constant, the same on every rank, whatever the
//! [`Config`]: sender and receiver must agree on it. The receiver allocates the announced
//! length, so an announcement above its envelope limit ([`Config::max_envelope_bytes`], 1 GiB
//! in a run) ends the job naming the sender, and so does a body that has not come
//! [`Config::body_timeout`] after its announcement (it would hold up every later envelope of
//! the receiving worker).
//!
//! The sending rank comes from the `MPI_Status`, never from the bytes.
//!
//! # Ordering
//!
//! **Per sending endpoint, envelopes are delivered in the order they were published.** The
//! posted receives are identical, so MPI matches each arriving message with the oldest of
//! them (posting order), and two messages of one sending thread on one communicator arrive
//! in the order they were sent (MPI's non-overtaking rule, which holds across tags for
//! receives that match any tag). The endpoint takes completed receives from the oldest on
//! and re-posts each slot as the newest, so it sees messages in matching order, and it
//! delivers an announced body at the announcement's place (the stream's front waits for it).
//! Envelopes of different senders are interleaved in any order. The runtime relies on the
//! per-pair order: its trustee accepts only the next batch of a pair
//! (`crate::runtime::remote`, invariant 3).
//!
//! # What the caller must do
//!
//! * Call [`open`] and [`Endpoints::close`] on every rank, from the run's own thread, in the
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
//! * incoming: the [`RING`] posted receives per endpoint (buffers of the pool's capacity, of
//!   which MPI writes at most [`POSTED_BYTES`]), the buffers the caller holds (received, not
//!   yet released) and the long envelopes announced and not yet complete; MPI's own
//!   unexpected-message buffers hold the messages that found no posted receive. Both are bounded by the callers' credits: with the design's credit rule at most
//!   `W · (R − 1) · P` request envelopes and as many response envelopes can be unreceived at
//!   a rank, which is the `W · (R − 1) · P · 4 · B` of §4.5 (request out and response in on
//!   the client side, request in and response out on the trustee side);
//! * the per-endpoint pool keeps every buffer that comes back whose capacity is between
//!   `B` clamped to [`POSTED_BYTES`]..64 KiB and four times that (a bigger one, grown by a longer message, is
//!   dropped), so it holds at most the endpoint's peak of buffers in use.
//!
//! # Invariants (every `unsafe` block below relies on them)
//!
//! 1. **Communicators.** [`open`] makes the duplicates with `MPI_Comm_dup` on the calling
//!    thread; they are freed only by [`Endpoints::close`], once, with every endpoint back and
//!    consumed, in index order on every rank (`MPI_Comm_free` is collective). A
//!    [`Endpoints`] dropped without `close` leaks them, which is sound. Handles are copied
//!    into nothing else: endpoints reach them through the shared [`Comms`].
//! 2. **Threads.** MPI was initialised with `MPI_THREAD_MULTIPLE` (the bootstrap refuses
//!    less, and [`open`] runs it), so any thread may call MPI with any handle. Each
//!    [`Endpoint`] is used by one thread at a time (`&mut self` on every call): created on
//!    the thread that calls [`open`], then moved to its worker (`unsafe impl Send`), which
//!    is its only user until it is handed back for [`Endpoints::close`]. The communicators
//!    are shared read-only (`Comms: Sync`): concurrent sends on one communicator from
//!    several threads are allowed under `MPI_THREAD_MULTIPLE`; only its owner receives on
//!    it.
//! 3. **Buffers.** A buffer (`Vec<u8>`) handed to `MPI_Isend` or `MPI_Irecv` is owned by
//!    MPI from that call until `MPI_Test`/`MPI_Testsome` reports its request complete: it
//!    stays beside its request (in the request set, the ring slot or the stream entry), and nothing reads, writes, resizes or
//!    frees it meanwhile (moving the `Vec` value moves no heap bytes). A request set dropped
//!    with requests outstanding leaks their buffers (`std::mem::forget`) instead of freeing
//!    memory MPI may still touch. A completed receive's buffer has exactly the message's
//!    length: MPI wrote that many bytes at its start (the `MPI_Get_count` of the completed
//!    receive), and its `Vec` length is set to it only then.
//! 4. **Requests.** A request set holds only live (non-null) requests, each exactly once:
//!    completed ones are removed as `MPI_Testsome` reports them (MPI has set them to
//!    `MPI_REQUEST_NULL`).
//! 5. **Posted receives.** A [`Ring`]'s slots are posted or empty. While it is posted,
//!    the `taken` slots just before `head` are empty (their receives completed and their
//!    buffers were taken out after `MPI_Test` said so), and every other slot holds one live
//!    receive into its buffer, whose capacity is at least [`POSTED_BYTES`] (the count
//!    posted), posted in ring order from `head` (each slot is re-posted as the newest, the
//!    oldest empty one first).
//!    `Endpoints::close` cancels them (`MPI_Cancel`, then `MPI_Test` until each has ended,
//!    for at most a second; one that does not end leaks its buffer); a ring dropped while
//!    posted (an endpoint dropped without `close`) leaks its buffers, as do long receives
//!    still under way in a dropped stream. A long receive's buffer has capacity for the
//!    announced length, and its length is set only once the receive completed with exactly
//!    that many bytes.

// Some of the layer's calls (`claim`/`publish`, `send`, `stats`, ...) are used only by its
// tests: the runtime's link (`super::link`) sends with `send_owned`.

use mpi::ffi;
use mpi::traits::*;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::Arc;

/// The MPI tag of an envelope of at most [`POSTED_BYTES`] on the receiver's own communicator.
const ENVELOPE_TAG: c_int = 0x5e;
/// The MPI tag of the announcement of a longer envelope (module docs, receiving).
const ANNOUNCE_TAG: c_int = 0x5f;
/// An announcement's length: the envelope's length and the sender's worker, `u64` each.
const ANNOUNCEMENT_BYTES: usize = 16;

/// The receives posted in advance per endpoint (invariant 5): more than the envelopes that
/// usually arrive between two passes; a message that finds none waits in MPI's queue of
/// unexpected messages until one is re-posted.
const RING: usize = 16;

/// Outstanding sends from which a pass that received envelopes also tests the sends (a pass
/// that received none always does).
const SENDS_BEFORE_TEST: usize = 8;

/// The size of each pre-posted receive, the same on every rank (a message longer than the
/// receive that matches it is an error in MPI, so senders must agree on it): an envelope up
/// to this long goes as one message; a longer one is announced (module docs). Batches stay
/// under Open MPI's 4096-byte eager limit (`DEFAULT_ENVELOPE_BYTES`), so a posted receive
/// usually completes as soon as it is matched; a batch of one longer record (a few KiB of
/// argument or result) still goes as one message, by MPI's rendezvous into the posted
/// receive, instead of an announcement and a second message.
pub(crate) const POSTED_BYTES: usize = 16 << 10;

/// The most workers per rank: a long envelope's body is tagged with its sender's worker
/// index, and MPI guarantees tags up to 32767 only.
const MAX_WORKERS: usize = 32767;

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
    /// How long the body of an announced long envelope may take to arrive after its
    /// announcement before the job ends, naming the sender (a body that never comes would
    /// hold up every later envelope of the receiving worker).
    pub(crate) body_timeout: std::time::Duration,
}

/// The default [`Config::body_timeout`]: generous (a 1 GiB body at 100 MB/s takes 10 s).
pub(crate) const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The capacity of the buffers an endpoint of `config` pools: `max_envelope_bytes`, at most
/// [`POOL_BUFFER_BYTES`] (a transport that allows huge envelopes does not allocate its limit
/// for every buffer) and at least [`POSTED_BYTES`] (every pooled buffer can be posted).
fn pool_capacity(config: &Config) -> usize {
    config.max_envelope_bytes.clamp(POSTED_BYTES, POOL_BUFFER_BYTES)
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_envelope_bytes: DEFAULT_ENVELOPE_BYTES,
            window: DEFAULT_WINDOW,
            body_timeout: BODY_TIMEOUT,
        }
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

/// The communicators and the shape of the rack, shared by the endpoints of one [`Endpoints`].
#[derive(Debug)]
pub(crate) struct Comms {
    /// Duplicates of `MPI_COMM_WORLD` (invariant 1): `k` is worker `k`'s on every rank (its
    /// envelopes and announcements), `per_kind + k` its long envelopes' bodies.
    handles: Vec<ffi::MPI_Comm>,
    /// The most workers of a rank: the number of duplicates of each kind.
    per_kind: usize,
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests only
    rank: usize,
    /// Worker count of each rank, all-gathered by [`open`].
    workers_of: Vec<usize>,
    config: Config,
}

// SAFETY: the handles are plain values, only read after `open` and passed to MPI, which any
// thread may call under `MPI_THREAD_MULTIPLE` (invariant 2); they are freed only by
// `Endpoints::close` once no endpoint can reach them (invariant 1).
unsafe impl Send for Comms {}
// SAFETY: as for `Send`: shared use is reads of the handles, and concurrent MPI calls on one
// communicator are allowed under `MPI_THREAD_MULTIPLE`.
unsafe impl Sync for Comms {}

/// The transport of one run: owns the communicators until [`Endpoints::close`].
#[derive(Debug)]
pub(crate) struct Endpoints {
    comms: Arc<Comms>,
    workers: usize,
}

/// Sets up the transport for `workers` local workers: **collective** (every rank calls it, in
/// the same order relative to its other collectives on `MPI_COMM_WORLD`), on the thread that
/// will call [`Endpoints::close`]. Returns the endpoints in worker order. Errors when MPI is
/// not up (outside `mpirun`, bootstrap failed, finalised: then before any collective, alike on
/// every rank), and on **every** rank when any rank's `workers` or `config` is out of range
/// (`workers` 0, `window` 0, `max_envelope_bytes` 0 or above `i32::MAX`), naming those ranks.
pub(crate) fn open(workers: usize, config: Config) -> Result<(Endpoints, Vec<Endpoint>), String> {
    crate::rack::init().map_err(|e| e.to_string())?;
    if !mpi::is_initialized() || mpi::is_finalized() {
        return Err("the rack transport needs MPI initialised by the rack bootstrap (run \
                    under mpirun with the `mpi` feature), and not yet finalised"
            .into());
    }
    let refusal = if workers == 0 || workers > MAX_WORKERS {
        Some(format!("the rack transport needs 1..={MAX_WORKERS} workers, got {workers}"))
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
    // Duplicate k for worker k's envelopes and announcements, duplicate count + k for the
    // bodies of its long envelopes.
    let mut handles = Vec::with_capacity(2 * count);
    for _ in 0..2 * count {
        // SAFETY: MPI is initialised with MPI_THREAD_MULTIPLE and not finalised (checked
        // above, invariant 2); RSMPI_COMM_* are constants of rsmpi's shim set at load time;
        // `comm` is a valid place for MPI to write the new handle. Every rank makes `2·count`
        // duplicates (the same maximum everywhere), so the collective calls match.
        let comm = unsafe {
            let mut comm = ffi::RSMPI_COMM_NULL;
            check(ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm), "MPI_Comm_dup");
            comm
        };
        handles.push(comm);
    }
    let comms = Arc::new(Comms { handles, per_kind: count, rank, workers_of, config });
    let endpoints = (0..workers).map(|w| Endpoint::new(Arc::clone(&comms), w)).collect();
    Ok((Endpoints { comms, workers }, endpoints))
}

/// What [`Endpoints::close`] found left over: none of it is expected after a run whose
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

impl Endpoints {
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
                return Err("Endpoints::close got an endpoint of another transport".into());
            }
            seen[e.worker] = true;
        }
        if endpoints.len() != self.workers || seen.iter().any(|s| !s) {
            return Err(format!(
                "Endpoints::close needs all {} endpoints back, got {}",
                self.workers,
                endpoints.len()
            ));
        }
        let mut left = Leftovers::default();
        for mut e in endpoints {
            e.progress();
            left.sends_in_flight += e.sends.len();
            left.receives_in_flight += e.stream.pending();
            left.undelivered += e.stream.items.len() - e.stream.pending();
            // The pre-posted receives are cancelled; one that was matched all the same holds
            // an envelope never delivered.
            let (arrived, stuck) = e.ring.cancel(std::time::Duration::from_secs(1));
            left.undelivered += arrived;
            left.receives_in_flight += stuck;
            // Dropping the endpoint leaks the buffers of outstanding requests (invariant 3).
        }
        let comms = match Arc::try_unwrap(self.comms) {
            Ok(c) => c,
            Err(_) => return Err("an endpoint outlived Endpoints::close".into()),
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
/// [`Endpoint::give_back`] (its [`Received::into_bytes`]) so its buffer is reused (dropping it
/// only frees the buffer).
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
    #[cfg(test)]
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
    /// Whether its completion frees a place in the window: false for an announcement (the
    /// long envelope's body holds the place).
    counts: bool,
}

/// Counters of one endpoint, for tests and reports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EndpointStats {
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
    /// The pre-posted receives (invariant 5).
    ring: Ring,
    /// Whether the last receive pass completed any receive (then an idle pass does not
    /// re-post yet: module docs, receiving).
    received_last: bool,
    /// Envelopes matched, in order: received whole and not yet taken, or long ones under way.
    stream: Stream,
    /// Free buffers (capacity `pool_capacity()` to four times that).
    pool: Vec<Vec<u8>>,
    stats: EndpointStats,
}

// SAFETY: the raw MPI handles inside (requests, and the communicators behind `comms`) may be
// passed to MPI from any thread under MPI_THREAD_MULTIPLE, and the endpoint is used by one
// thread at a time (`&mut self`), its worker after the hand-over (invariant 2); buffers are
// owned `Vec`s, untouched while MPI owns them (invariant 3).
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// The endpoint of local worker `worker`, with its receives posted.
    fn new(comms: Arc<Comms>, worker: usize) -> Endpoint {
        let ranks = comms.workers_of.len();
        let cap = pool_capacity(&comms.config);
        let bufs = (0..RING).map(|_| Vec::with_capacity(cap)).collect();
        let ring = Ring::post(bufs, comms.handles[worker]);
        Endpoint {
            comms,
            worker,
            in_flight: vec![0; ranks],
            sends: Requests::new(),
            ring,
            received_last: false,
            stream: Stream::default(),
            pool: Vec::new(),
            stats: EndpointStats::default(),
        }
    }

    /// This endpoint's local worker index.
    #[cfg(test)]
    pub(crate) fn worker(&self) -> usize {
        self.worker
    }
    /// This process's rank.
    #[cfg(test)]
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
    /// Envelopes to `to_rank` claimed or in flight (≤ [`Config::window`]).
    #[cfg(test)]
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
        self.sends.len() > 0 || !self.stream.items.is_empty()
    }
    /// Its sends and receives under way, in words (a stall dump, `runtime::stall`).
    pub(crate) fn describe(&self) -> String {
        let windows: Vec<String> = (0..self.in_flight.len())
            .filter(|&r| self.in_flight[r] > 0)
            .map(|r| format!("rank {r}: {}", self.in_flight[r]))
            .collect();
        format!(
            "MPI sends incomplete {}, claimed or in flight per rank [{}], long receives under \
             way {}, envelopes received and not taken {}",
            self.sends.len(),
            windows.join(", "),
            self.stream.pending(),
            self.stream.items.iter().filter(|i| i.req.is_none()).count()
        )
    }
    /// Whether an envelope received whole waits to be taken ([`Endpoint::take_ready`]).
    pub(crate) fn has_ready(&self) -> bool {
        self.stream.front_ready()
    }
    /// This endpoint's counters.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// The capacity of the buffers this endpoint pools: `max_envelope_bytes`, at most
    /// [`POOL_BUFFER_BYTES`] (a transport that allows huge envelopes does not allocate its
    /// limit for every buffer).
    fn pool_capacity(&self) -> usize {
        pool_capacity(&self.comms.config)
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
        if self.keeps(data.capacity()) {
            self.pool.push(data);
        }
    }

    /// Whether the pool keeps a buffer of `capacity` bytes: [`Endpoint::pool_capacity`] up to
    /// four times that (a smaller one could not be posted, a larger one would hold memory).
    pub(crate) fn keeps(&self, capacity: usize) -> bool {
        let cap = self.pool_capacity();
        (cap..=4 * cap).contains(&capacity)
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
        if data.len() <= POSTED_BYTES {
            self.isend(data, to_rank, to_worker, ENVELOPE_TAG, true);
        } else {
            // Announced on the receiver's own communicator (in order with its other
            // envelopes), the body on its long one with this worker's tag (module docs).
            let a = announcement(data.len(), self.worker);
            self.isend(a, to_rank, to_worker, ANNOUNCE_TAG, false);
            let long = self.comms.per_kind + to_worker;
            self.isend(data, to_rank, long, self.worker as c_int, true);
        }
        self.stats.sent += 1;
        // After the send, off the path of the envelope just handled (module docs).
        self.repost();
        Ok(())
    }

    /// `MPI_Isend` of `data` to `to_rank` on duplicate `comm_index` with `tag`; the buffer
    /// stays in `sends` until complete.
    fn isend(
        &mut self,
        data: Vec<u8>,
        to_rank: usize,
        comm_index: usize,
        tag: c_int,
        counts: bool,
    ) {
        let comm = self.comms.handles[comm_index];
        let mut req = {
            // SAFETY: a constant of rsmpi's shim, read after initialisation.
            unsafe { ffi::RSMPI_REQUEST_NULL }
        };
        // SAFETY: `data` holds `len` (≤ i32::MAX, checked by `open`) initialised bytes and is
        // kept untouched in `sends` until the request completes (invariant 3); `comm` is a
        // live duplicate (invariant 1); `to_rank` < ranks (checked by `claim`); `tag` is one
        // of ours, at most 32767 (MAX_WORKERS); MPI writes the request handle.
        let rc = unsafe {
            ffi::MPI_Isend(
                data.as_ptr().cast(),
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                to_rank as c_int,
                tag,
                comm,
                &mut req,
            )
        };
        check(rc, "MPI_Isend");
        self.sends.push(req, Sending { data, to_rank, counts });
    }

    /// Claim, copy `bytes`, publish: for callers that have the envelope already.
    #[cfg(test)]
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
    /// one receive pass now. Never blocks.
    #[cfg(test)]
    pub(crate) fn poll_recv(&mut self) -> Option<Received> {
        if !self.stream.front_ready() {
            self.test_receives();
        }
        self.take_ready()
    }

    /// The next envelope received whole by an earlier [`Endpoint::progress`] (or the tests'
    /// `poll_recv`), without touching MPI (for a caller that calls `progress` on
    /// every pass anyway: one receive test per pass instead of two).
    pub(crate) fn take_ready(&mut self) -> Option<Received> {
        let r = self.stream.pop_ready()?;
        self.stats.received += 1;
        Some(r)
    }

    /// Returns a received envelope's buffer to the pool.
    #[cfg(test)]
    pub(crate) fn release(&mut self, r: Received) {
        self.recycle(r.data);
    }

    /// Moves bytes: completes sends (their buffers back to the pool, their window places
    /// freed) and receives (the pre-posted ones in posting order, re-posted at once, and the
    /// long envelope at the front of the stream). True when anything happened. Never blocks.
    pub(crate) fn progress(&mut self) -> bool {
        let received = self.test_receives();
        // Completed sends only free buffers and window places (a claim that finds its window
        // full tests them itself): while envelopes arrive, they are tested once a few are
        // outstanding, one `MPI_Testsome` for all (each MPI call takes Open MPI's lock).
        let sent = if received == 0 || self.sends.len() >= SENDS_BEFORE_TEST {
            self.test_sends()
        } else {
            0
        };
        sent + received > 0
    }

    fn test_sends(&mut self) -> usize {
        let cap = self.pool_capacity();
        let Endpoint { sends, in_flight, pool, .. } = self;
        sends.test_some(|s| {
            if s.counts {
                in_flight[s.to_rank] -= 1;
            }
            if (cap..=4 * cap).contains(&s.data.capacity()) {
                pool.push(s.data);
            }
        })
    }

    /// Completes what has arrived: the pre-posted receives from the oldest on (one `MPI_Test`
    /// of the oldest when nothing came), at most a ring's worth per pass; their slots are
    /// re-posted by the next send, by the second idle pass in a row, or when every slot is
    /// empty (module docs, receiving); an announcement posts the receive of its long envelope, whose
    /// place in the stream it takes. Then one test of the oldest long receive, if any. Returns
    /// how many receives completed.
    fn test_receives(&mut self) -> usize {
        if self.ring.taken == RING {
            self.repost();
        }
        let mut n = 0;
        while self.ring.taken < RING {
            let Some((status, data)) = self.ring.take_head() else { break };
            n += 1;
            let from_rank = usize::try_from(status.MPI_SOURCE).unwrap_or(usize::MAX);
            if status.MPI_TAG == ENVELOPE_TAG {
                self.stream.items.push_back(Incoming { from_rank, data, req: None });
            } else if status.MPI_TAG == ANNOUNCE_TAG {
                self.receive_long(from_rank, data);
            } else {
                crate::rack::abort(
                    1,
                    &format!(
                        "the rack transport got a message of unknown tag {} from rank {from_rank}",
                        status.MPI_TAG
                    ),
                );
            }
        }
        if n == 0 && !self.received_last {
            self.repost();
        }
        self.received_last = n > 0;
        n + self.stream.test_first_long(self.comms.config.body_timeout)
    }

    /// Re-posts the slots emptied since the last time, oldest first (invariant 5).
    fn repost(&mut self) {
        while self.ring.taken > 0 && self.ring.posted {
            let fresh = self.posted_buffer();
            let comm = self.comms.handles[self.worker];
            self.ring.repost_oldest(fresh, comm);
        }
    }

    /// Posts the receive of the long envelope that `announcement` (from `from_rank`) announces,
    /// on the long communicator of this worker, from that rank and with its sender's tag, and
    /// queues it in the stream at the announcement's place.
    fn receive_long(&mut self, from_rank: usize, announcement: Vec<u8>) {
        let max = self.comms.config.max_envelope_bytes;
        let Some((len, sender)) = parse_announcement(&announcement, max) else {
            crate::rack::abort(
                1,
                &format!(
                    "the rack transport refused an announcement from rank {from_rank}: {}",
                    announcement_fault(&announcement, max)
                ),
            )
        };
        self.recycle(announcement);
        let mut data: Vec<u8> = Vec::with_capacity(len);
        let comm = self.comms.handles[self.comms.per_kind + self.worker];
        let mut req = {
            // SAFETY: a constant of rsmpi's shim, read after initialisation.
            unsafe { ffi::RSMPI_REQUEST_NULL }
        };
        // SAFETY: `data` has room for `len` (≤ the envelope limit ≤ i32::MAX, checked by
        // `open` and `parse_announcement`)
        // bytes; it moves into the stream beside its request and nothing touches its bytes
        // until the request completes (invariant 3); `comm` is this endpoint's live long
        // duplicate (invariant 1), received on by its owner only (invariant 2); `sender` is a
        // worker index below the tag bound (checked by `parse_announcement`).
        let rc = unsafe {
            ffi::MPI_Irecv(
                data.as_mut_ptr().cast(),
                len as c_int,
                ffi::RSMPI_UINT8_T,
                from_rank as c_int,
                sender as c_int,
                comm,
                &mut req,
            )
        };
        check(rc, "MPI_Irecv");
        let since = std::time::Instant::now();
        self.stream.items.push_back(Incoming { from_rank, data, req: Some((req, len, since)) });
    }

    /// A buffer for a pre-posted receive: capacity at least [`POSTED_BYTES`], from the pool.
    fn posted_buffer(&mut self) -> Vec<u8> {
        let mut b = self.pooled();
        b.clear();
        b.reserve(POSTED_BYTES);
        b
    }
}

/// The announcement of a long envelope: its length and the sender's local worker index (the
/// tag of its body on the long communicator), little-endian `u64`s.
fn announcement(len: usize, sender: usize) -> Vec<u8> {
    let mut a = Vec::with_capacity(ANNOUNCEMENT_BYTES);
    a.extend_from_slice(&(len as u64).to_le_bytes());
    a.extend_from_slice(&(sender as u64).to_le_bytes());
    a
}

/// The (length, sender worker) of an announcement; `None` unless it is exactly
/// [`ANNOUNCEMENT_BYTES`] long with a length above [`POSTED_BYTES`] and at most `max` (the
/// envelope limit, [`Config::max_envelope_bytes`]) and `i32::MAX`, and a sender below
/// [`MAX_WORKERS`]. The receiver allocates the length: nothing above the limit is allocated.
fn parse_announcement(a: &[u8], max: usize) -> Option<(usize, usize)> {
    if a.len() != ANNOUNCEMENT_BYTES {
        return None;
    }
    let word = |i: usize| u64::from_le_bytes(a[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
    let (len, sender) = (word(0), word(1));
    let ok = len > POSTED_BYTES as u64
        && len <= i32::MAX as u64
        && len <= max as u64
        && sender < MAX_WORKERS as u64;
    ok.then_some((len as usize, sender as usize))
}

/// What is wrong with an announcement [`parse_announcement`] refused, in words.
#[cold]
fn announcement_fault(a: &[u8], max: usize) -> String {
    if a.len() != ANNOUNCEMENT_BYTES {
        return format!("{} bytes, not {ANNOUNCEMENT_BYTES}", a.len());
    }
    let word = |i: usize| u64::from_le_bytes(a[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]));
    let (len, sender) = (word(0), word(1));
    if sender >= MAX_WORKERS as u64 {
        format!("sender worker {sender}, beyond the tag bound {MAX_WORKERS}")
    } else if len <= POSTED_BYTES as u64 {
        format!("a length of {len} bytes, which fits a posted receive")
    } else {
        format!("a length of {len} bytes, above the envelope limit of {max} bytes")
    }
}

/// The pre-posted receives of one endpoint (invariant 5): `RING` receives of up to
/// [`POSTED_BYTES`] bytes, any source, any tag, on the endpoint's own communicator, posted in
/// ring order from `head`, so that they are matched (and, being eager, complete) in that
/// order.
#[derive(Debug)]
struct Ring {
    reqs: Vec<ffi::MPI_Request>,
    bufs: Vec<Vec<u8>>,
    /// The oldest posted slot (when `taken < RING`).
    head: usize,
    /// Slots emptied by `take_head` and not re-posted yet: the `taken` slots before `head`.
    taken: usize,
    /// Whether the receives are posted (false once `cancel` took them back).
    posted: bool,
}

impl Ring {
    /// Posts `RING` receives into `bufs` (each of capacity ≥ [`POSTED_BYTES`]) on `comm`.
    fn post(bufs: Vec<Vec<u8>>, comm: ffi::MPI_Comm) -> Ring {
        let null = {
            // SAFETY: a constant of rsmpi's shim, read after initialisation.
            unsafe { ffi::RSMPI_REQUEST_NULL }
        };
        let mut ring = Ring { reqs: vec![null; bufs.len()], bufs, head: 0, taken: 0, posted: true };
        for i in 0..ring.bufs.len() {
            ring.post_at(i, comm);
        }
        ring
    }

    /// `MPI_Irecv` into `bufs[i]`.
    fn post_at(&mut self, i: usize, comm: ffi::MPI_Comm) {
        let buf = &mut self.bufs[i];
        debug_assert!(buf.is_empty() && buf.capacity() >= POSTED_BYTES);
        // SAFETY: `buf` has room for POSTED_BYTES bytes (its capacity) and stays in `bufs[i]`,
        // untouched, until the request completes or is cancelled (invariant 5); `comm` is the
        // endpoint's live duplicate (invariant 1), received on by its owner only (invariant
        // 2); MPI writes the request handle; the sources and tag are rsmpi's constants.
        let rc = unsafe {
            ffi::MPI_Irecv(
                buf.as_mut_ptr().cast(),
                POSTED_BYTES as c_int,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                comm,
                &mut self.reqs[i],
            )
        };
        check(rc, "MPI_Irecv");
    }

    /// One `MPI_Test` of the oldest receive; when it completed, its status and its buffer
    /// (of exactly the message's length). The slot is empty until [`Endpoint::repost`].
    fn take_head(&mut self) -> Option<(ffi::MPI_Status, Vec<u8>)> {
        if !self.posted || self.taken == self.bufs.len() {
            return None;
        }
        let h = self.head;
        let mut done: c_int = 0;
        // SAFETY: a zeroed MPI_Status (plain integers) is a valid place for MPI to write.
        let mut status = unsafe { std::mem::zeroed::<ffi::MPI_Status>() };
        // SAFETY: `reqs[h]` is a live receive (invariant 5); MPI_Test never blocks, sets it to
        // MPI_REQUEST_NULL when complete and writes the status.
        let rc = unsafe { ffi::MPI_Test(&mut self.reqs[h], &mut done, &mut status) };
        check(rc, "MPI_Test");
        if done == 0 {
            return None;
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was written by the completed receive; MPI writes `count`.
        check(
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) },
            "MPI_Get_count",
        );
        let len = usize::try_from(count).unwrap_or(usize::MAX);
        if len > POSTED_BYTES {
            // MPI_UNDEFINED, or more than was posted: neither can come from a completed
            // receive of POSTED_BYTES bytes.
            crate::rack::abort(1, "MPI_Get_count: undefined length of a received envelope");
        }
        let mut data = std::mem::take(&mut self.bufs[h]);
        // SAFETY: the receive is complete (MPI is done with the buffer) and MPI wrote exactly
        // `len` ≤ capacity bytes at its start.
        unsafe { data.set_len(len) };
        self.head = (h + 1) % self.bufs.len();
        self.taken += 1;
        Some((status, data))
    }

    /// Posts a receive into `buf` in the oldest slot [`Ring::take_head`] emptied, which
    /// becomes the newest posted one (so the posted slots stay in ring order from `head`).
    fn repost_oldest(&mut self, buf: Vec<u8>, comm: ffi::MPI_Comm) {
        debug_assert!(self.taken > 0);
        let len = self.bufs.len();
        let slot = (self.head + len - self.taken) % len;
        self.bufs[slot] = buf;
        self.post_at(slot, comm);
        self.taken -= 1;
    }

    /// Takes the receives back (at close): `MPI_Cancel` on each, then tests it for up to
    /// `limit`. Returns (envelopes that arrived all the same, receives that did not end:
    /// their buffers are leaked).
    fn cancel(&mut self, limit: std::time::Duration) -> (usize, usize) {
        if !self.posted {
            return (0, 0);
        }
        self.posted = false;
        let len = self.bufs.len();
        // The posted slots: from `head`, all but the `taken` empty ones.
        let live: Vec<usize> = (0..len - self.taken).map(|k| (self.head + k) % len).collect();
        for &i in &live {
            // SAFETY: a live receive (invariant 5); MPI_Cancel only marks it.
            check(unsafe { ffi::MPI_Cancel(&mut self.reqs[i]) }, "MPI_Cancel");
        }
        let (mut arrived, mut stuck) = (0, 0);
        let start = std::time::Instant::now();
        for i in live {
            loop {
                let mut done: c_int = 0;
                // SAFETY: as in `take_head`.
                let mut status = unsafe { std::mem::zeroed::<ffi::MPI_Status>() };
                // SAFETY: a live request (cancelled or not); MPI_Test never blocks.
                let rc = unsafe { ffi::MPI_Test(&mut self.reqs[i], &mut done, &mut status) };
                check(rc, "MPI_Test");
                if done != 0 {
                    let mut cancelled: c_int = 0;
                    // SAFETY: the status of the completed request; MPI writes the flag.
                    let rc = unsafe { ffi::MPI_Test_cancelled(&status, &mut cancelled) };
                    check(rc, "MPI_Test_cancelled");
                    arrived += usize::from(cancelled == 0);
                    break;
                }
                if start.elapsed() > limit {
                    // MPI may still write it: never freed (invariant 5).
                    std::mem::forget(std::mem::take(&mut self.bufs[i]));
                    stuck += 1;
                    break;
                }
                std::thread::yield_now();
            }
        }
        (arrived, stuck)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.posted {
            // Still posted (an endpoint dropped without `Endpoints::close`): MPI may write the
            // buffers at any time (invariant 5).
            for b in self.bufs.drain(..) {
                std::mem::forget(b);
            }
        }
    }
}

/// An envelope in the stream: received whole (`req` is `None`), or a long one whose receive
/// (request, length) is still under way.
#[derive(Debug)]
struct Incoming {
    from_rank: usize,
    data: Vec<u8>,
    /// A long receive under way: its request, its announced length, when it was posted.
    req: Option<(ffi::MPI_Request, usize, std::time::Instant)>,
}

/// The envelopes of one endpoint in the order their messages were matched (invariant 5):
/// delivered from the front only once the front is whole.
#[derive(Debug, Default)]
struct Stream {
    items: VecDeque<Incoming>,
}

impl Stream {
    fn front_ready(&self) -> bool {
        self.items.front().is_some_and(|i| i.req.is_none())
    }

    fn pop_ready(&mut self) -> Option<Received> {
        if !self.front_ready() {
            return None;
        }
        let i = self.items.pop_front()?;
        Some(Received { from_rank: i.from_rank, data: i.data })
    }

    /// Receives still under way.
    fn pending(&self) -> usize {
        self.items.iter().filter(|i| i.req.is_some()).count()
    }

    /// One `MPI_Test` of the oldest long receive under way; 1 when it completed. A body that
    /// has not come `timeout` after its announcement ends the job, naming its sender.
    fn test_first_long(&mut self, timeout: std::time::Duration) -> usize {
        let Some(item) = self.items.iter_mut().find(|i| i.req.is_some()) else { return 0 };
        let Some((req, len, since)) = item.req.as_mut() else { return 0 };
        let mut done: c_int = 0;
        // SAFETY: a zeroed MPI_Status (plain integers) is a valid place for MPI to write.
        let mut status = unsafe { std::mem::zeroed::<ffi::MPI_Status>() };
        // SAFETY: `req` is live (it is cleared below once complete); MPI_Test never blocks
        // and writes the status.
        let rc = unsafe { ffi::MPI_Test(req, &mut done, &mut status) };
        check(rc, "MPI_Test");
        if done == 0 {
            if since.elapsed() > timeout {
                crate::rack::abort(
                    1,
                    &format!(
                        "the rack transport waited {:.1} s for the body of a long envelope \
                         ({len} bytes) announced by rank {}: it never came (the limit is {} s)",
                        since.elapsed().as_secs_f64(),
                        item.from_rank,
                        timeout.as_secs_f64()
                    ),
                );
            }
            return 0;
        }
        let mut count: c_int = 0;
        // SAFETY: `status` was written by the completed receive; MPI writes `count`.
        check(
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) },
            "MPI_Get_count",
        );
        if usize::try_from(count).ok() != Some(*len) {
            crate::rack::abort(
                1,
                &format!(
                    "the rack transport got a long envelope of {count} bytes from rank {} \
                     announced as {len} bytes",
                    item.from_rank
                ),
            );
        }
        // SAFETY: the receive completed with exactly `len` bytes (checked just above): MPI
        // wrote `len` ≤ capacity bytes at the buffer's start and is done with it.
        unsafe { item.data.set_len(*len) };
        item.req = None;
        1
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        for i in self.items.drain(..) {
            if i.req.is_some() {
                // MPI may still write it (invariant 3).
                std::mem::forget(i.data);
            }
        }
    }
}

#[cfg(test)]
mod tests;
