//! The transport seam: how the requests of a (client, trustee) pair across ranks travel, and
//! the loopback transport that carries them between the fake ranks of one process
//! (`Builder::loopback_ranks`; `docs/rack-mode.md` §4.1, §8 step 4).
//!
//! # The cut
//!
//! The worker loop keeps calling the slots (`crate::channel::slot`) directly for pairs on its
//! own rank: `Worker::poll_client` costs one compare more (`Worker::is_remote`, never true
//! outside a split run) and the loop one predictable branch per pass. For a pair across
//! ranks, `poll_client` instead encodes the staged records of one batch with the wire's
//! `RequestWriter` (per record its `RemoteVTable`'s code id, a target word and the argument
//! bytes, from the record's `RemoteHook`, a uniform batch's in one `take_uniform` call where
//! the record type has one; per batch the pair sequence number) and hands the
//! envelope to the [`Transport`]. The trustee's worker polls the transport, `validate`s each
//! envelope, runs each record with `ResponseWriter::run` (its panic becomes a message) and
//! hands back the response envelope; the client `validate_response`s it, translates each
//! result into the record's result space (`RemoteHook::put_result`; a uniform batch of
//! `Plain` results without panics is read where it lies in the envelope,
//! `RemoteHook::wire_result`) and runs the completions in order
//! (`RecordQueue::complete_front`), a remote panic becoming the `String` payload
//! `"rank R worker g: <message>"` (resumed by `apply`, recorded as the run's error by
//! `apply_then`).
//!
//! # Invariants
//!
//! 1. **Counting (the rule of activity of `super::quiesce`).** A request to a remote trustee
//!    is created exactly as one to a slot (`Worker::request` bumps `issued`), and finished
//!    exactly as one (`finished` is bumped by the client when its completion has run, after
//!    the response envelope came back). The trustee adds the requests it served from a client
//!    to that pair's `served` count, slots and transport alike, after they ran: frees
//!    (`super::free`) and `incoming_due` read it. One process, so the detector (every
//!    worker's counters) needs nothing else.
//! 2. **The idle policy.** An envelope waiting for a worker is always due work for it: a
//!    request envelope means its client's `issued` is above the trustee's `served`
//!    (`incoming_due`), a response envelope means the client has requests in flight
//!    (`own_work_due`). Neither lets a worker sleep, and every loop pass polls the inbox.
//! 3. **Order.** Per pair, batches carry consecutive sequence numbers; the trustee accepts
//!    only the next one (window 1) and the client completes only its oldest batch in flight.
//!    The loopback inboxes are FIFO, so nothing arrives early; a transport that may reorder
//!    (several MPI communicators, RDMA queue pairs) must hold early batches up to its credit
//!    window (`docs/rack-mode.md` §4.3). So what the protocol needs from a transport is
//!    **reliable delivery of whole messages**; per-pair order is built from the sequence
//!    numbers.
//! 4. **Aggregation per destination rank.** A client writes one request envelope for every
//!    trustee of one remote rank it has staged requests for (one segment per trustee,
//!    [`Worker::poll_remote`]), sent to its *landing worker* on that rank, always the same
//!    one for a client ([`landing`]: the worker with the client's index within its rank).
//!    The landing worker validates the whole envelope (every segment but the sequence
//!    numbers of the others' segments), serves its own segment and hands every other one,
//!    cut out as an envelope of one segment (`Envelope::forward`), to its trustee through
//!    that worker's [`Forwarded`] queue (FIFO), which validates it again in full and serves
//!    it as if it had arrived from the transport. Per pair, order holds: a pair's segments
//!    always travel through the same landing worker, over the transport's FIFO channel
//!    (client, landing) and then the FIFO queue (landing, trustee). Credits stay per pair
//!    ([`IN_FLIGHT`] batches), as the sequence numbers the trustees check and the
//!    responses are: every trustee answers its own segments in a response envelope of its
//!    own, straight to the client. A forwarded segment is counted like any request: its
//!    client's `issued` is above the trustee's `served` until it has run (invariant 1), so
//!    the detector cannot see the job idle while one waits in a queue.
//! 5. **A refused envelope ends the run.** A `BadBatch` (from `validate`, a response that
//!    does not match the batch in flight, or a refused target) is recorded as the run's
//!    error, naming the ranks, and the run is stopped (`RunState::aborted`): its requests are
//!    lost, which quiescence would wait for forever.
//!
//! # Control records (`docs/rack-mode.md` §4.4, §8 step 5)
//!
//! A fiber started on, or a `launch` run by, a worker of another rank travels as a typed
//! control record: a request record whose code id is a reserved control id
//! (`wire::envelope`: [`CONTROL_SPAWN`] = 1, [`CONTROL_JOINED`] = 2, [`CONTROL_LAUNCH`] = 3;
//! byte layouts there), in the same batches as the requests of its (client, trustee) pair,
//! answered like a request with an empty result. They are real wire records: `validate`
//! checks their fixed fields and sizes with or without `Expect::loopback` (the spawn's or
//! launch's code id resolved, of kind `KIND_SPAWN` or `KIND_LAUNCH`, the argument of exactly
//! that table's size; a `Joined` status, length and padding).
//!
//! * `spawn_on(g, arg, f)` (g on another rank) registers a `JoinFn` under a fresh join id in
//!   this worker's [`RemoteSide`] and queues a [`ControlReq`]`<CONTROL_SPAWN>` towards `g`:
//!   `poll_remote` writes it as `1 | join | code id of RemoteVTable::of_spawn | arg`.
//! * Worker `g` serves it (`run_control`): it starts a fiber, which runs the table and queues
//!   a `ControlReq<CONTROL_JOINED>` back to the client: `2 | join | status | len | result or
//!   "rank R worker g: <panic message>"`.
//! * The client serves the `Joined` record: it takes the `JoinFn` out of its table (an unknown
//!   join id, or a result of the wrong size, refuses the envelope) and completes the
//!   `JoinHandle`'s cell, which wakes a fiber parked in `join` (or, if the handle was
//!   dropped, discards the result; a panic of a detached fiber is the run's error, as on one
//!   rank).
//! * A `Release` record ([`CONTROL_RELEASE`], `docs/rack-mode.md` §5.2 item 4) is handed to
//!   the serving trustee's export table (`super::export::Owner::schedule_release`, the
//!   `issued` counts being those of the sender's rank's workers), which applies it once the
//!   requests it counts have been served; a `Release` naming no live export of this trustee
//!   (or listing more clients than a rank has workers) refuses the envelope.
//! * A `Grant` record ([`CONTROL_GRANT`], §5.2 item 5) is answered by the trustee's export
//!   table (`Owner::grant`: the slot's budget grows by `W0`) with an 8-byte result, the
//!   weight, which the client's completion adds to the proxy (`Worker::send_grant`); a
//!   `Grant` naming no live export refuses the envelope.
//! * `Trust::launch` on a `Latch` of another rank is the same with `CONTROL_LAUNCH`, the
//!   property's target word and a `KIND_LAUNCH` table, whose `run` locks the latch in the
//!   fiber (refused by the validator in any other record: it may park). `entrust_new` on a
//!   trustee of another rank is a remote spawn of "build `f(arg)`, allocate the property for
//!   this worker, export it, answer the export's `(slot, generation, weight)`"; the caller
//!   makes a proxy of it (`crate::runtime::proxy`).
//!
//! # Targets
//!
//! A request's target word (and a `Launch`'s) is resolved by the serving trustee as the
//! record runs (`resolve_target`): an export `(slot, generation)` of its table, through
//! `export::Owner::lookup` (one Acquire load, no lock; an unknown, free or stale one, or a
//! property of another trustee, refuses the envelope as a `BadBatch` naming the sending
//! rank), or, with bit 63 set (`export::ADDR_TARGET`), an address in this process, which only
//! a loopback run accepts (the validator refuses it otherwise, `Expect::loopback`). A proxy
//! handle's requests carry its export; the address form is kept only for the loopback-only
//! handles listed below.
//!
//! Two things are remembered, neither of which skips a check that could fail:
//!
//! * **The type check** of an export (the record's table's `target_type` against the type
//!   the export recorded) is skipped when the `(target word, table)` pair is the last one
//!   that passed it on this worker (`RemoteSide::typed`). The lookup still runs first, so the
//!   export is live; a `(slot, generation)` names one export for the whole run (the
//!   generation grows at every recycle, a slot at the last one is retired), holding one
//!   property, so the answer for that pair cannot have changed.
//! * **In a uniform segment** (one table, run in one loop by `RemoteVTable::run_uniform`)
//!   a target word equal to the previous record's resolves to the previous record's value,
//!   without the lookup. The trustee's `Owner` stays borrowed (shared) for the whole
//!   segment, and an export is recycled only through `&mut Owner` (`apply_return`,
//!   `end_of_run`): nothing can recycle the slot, so nothing can drop the property, between
//!   two records of the segment (a closure that tried would panic on the borrow, caught as
//!   its record's panic). The first record with each new word is resolved in full.
//!
//! A record whose table or word differs from the remembered one is checked in full, so a
//! batch whose records alternate between exports, or between tables on one export, is
//! checked record by record (`export::wired_tests`,
//! `batches_alternating_between_targets_and_tables_are_checked_per_record`).
//!
//! **Why quiescence counting stays exact.** Each arrow creates its successor before it
//! finishes, and each task is created and finished once (the rule of activity of
//! `super::quiesce`):
//!
//! 1. The `Spawn` record is a request: `issued` on the client when queued (`Worker::request`,
//!    as any request), `finished` on the client when its empty response is back and its
//!    no-op completion ran (`take_responses`).
//! 2. The trustee serves it in `serve_requests`, which calls `spawn_local` (the fiber's
//!    `created`) *before* the response is published, so before the client can count the
//!    `Spawn` finished: from the `Spawn`'s creation to the fiber's end there is always an
//!    active task.
//! 3. The fiber queues the `Joined` record (issued on its worker) *before* it returns (its
//!    `finished` in `run_fiber`).
//! 4. The client serves `Joined`: completing the cell wakes the parked joiner
//!    (`wake_parked`: `created`) or posts the wake-up to its worker (a request: `issued`),
//!    before the response to `Joined` is published, so before the fiber's worker counts
//!    `Joined` finished.
//!
//! A fiber parked in `join` on a remote fiber is not active (it counted itself finished in
//! `park`), but the remote fiber, or the record carrying its start or its end, is: the
//! detector never sees the job idle while the join can still complete, and it sees a real
//! deadlock (a join whose fiber itself waits forever) as one.
//!
//! # Loopback only (never on the MPI path)
//!
//! * **Address targets** (bit 63 set, `export::ADDR_TARGET`): the address of the value
//!   (`Place::value_addr`) for the handles that are still shared through the process's
//!   memory: handles of properties entrusted on one fake rank and used on another (test
//!   statics), `TrustArray::new`'s parts and `entrust_new` from delegated context, and a proxy
//!   handle that reached another fake rank through memory (found through the owner's export
//!   table). The trustee checks the address is not null; a validator not in loopback mode
//!   refuses the word.
//! * **Runtime-internal posts** (a free handed to the property's owner, quiescence
//!   wake-ups) are closure records with no `RemoteVTable`. Between fake ranks they travel as
//!   `LOOPBACK_CONTROL` records whose argument is the in-process record, moved into a box
//!   (its address and length: 16 bytes, so no uninitialised byte of a closure is read as a
//!   byte), accepted only by a validator in loopback mode (`Expect::loopback`). The free
//!   hand-offs of properties reached through an address stay such posts (a proxy's last drop
//!   is a `Release` control record, a real wire record); quiescence wake-ups need none
//!   across ranks (§6).
//! * A `Launch` record's target is an address for the same handles (an export for a proxy).
//! * `entrust_new` and `TrustArray::new` from delegated context (which cannot wait for an
//!   answer) still build the value here, in the shared memory, for a trustee of another fake
//!   rank; under MPI they refuse, naming `entrust_new_then` and `TrustArray::new_then`, which
//!   build on the trustee (a remote spawn whose `Joined` record runs the continuation), as
//!   both blocking forms do from a fiber.
//! * A proxy handle's last drop on another fake rank than its own posts its `Release` to
//!   the first worker of its rank (`free::proxy_dropped`).

mod client;
mod trustee;

use super::anatomy::Part;
use super::export::{split_target, Owner, ADDR_TARGET};
use super::worker::Worker;
use crate::channel::record::{header, HEADER_WORDS};
use crate::channel::record::{NoResult, RemoteHook, RequestHalf};
use crate::channel::result::{PlainSpace, ReadBack};
use crate::channel::slot::PanicPayload;
use crate::property::PropPtr;
use crate::runtime::proxy::Release;
use crate::sync::bump;
use crate::sync::proto;
use crate::transport::{Arrived, Transport, BATCH_WORDS};
use crate::wire::envelope::{
    control_id, is_loopback_table, joined_body, joined_parts, launch_parts, release_parts,
    spawn_parts, validate, validate_response, BadBatch, Expect, ExpectResponse, Head, Job, Reason,
    Record, RequestWriter, ResponseWriter, CONTROL_GRANT, CONTROL_JOINED, CONTROL_LAUNCH,
    CONTROL_RELEASE, CONTROL_SPAWN, GRANT_TABLE, JOINED_TABLE, KIND_RESPONSES, LAUNCH_TABLE,
    LOOPBACK_TABLE, RELEASE_TABLE, SPAWN_TABLE,
};
use crate::wire::remote::{panic_message, RemoteVTable, RunError};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::mem::MaybeUninit;

/// Batches in flight per (client, remote trustee) pair (the credits of the pair).
const IN_FLIGHT: u64 = 8;

/// Each segment of a request envelope after its first takes this share of the envelope's
/// budget for its header (24 bytes and the code id of a uniform segment: about 1/64 of a
/// 4032-byte MPI batch), so that an envelope of several segments stays about the size of the
/// batches' worth it may hold (`Builder::envelope_batches`, `Transport::batch_limits`;
/// `Worker::poll_remote`).
const SEGMENT_SHARE: f64 = 1.0 / 64.0;

/// The landing worker on rank `rank` of the request envelopes of client `client`, in a run
/// of `w` workers per rank: the worker with the client's index within its rank (so the
/// clients of a rank spread their envelopes over the workers of another).
pub(in crate::runtime) fn landing(client: usize, rank: usize, w: usize) -> usize {
    rank * w + client % w
}

/// The segments a landing worker forwarded to another worker of its rank (module invariant
/// 4), waiting for that worker: each an envelope of one segment, with its sending rank, in
/// the order they were forwarded. One per worker of the run (`RunState::forwarded`).
#[derive(Debug, Default)]
pub(crate) struct Forwarded {
    queue: crate::sync::Mutex<ForwardQueue>,
    /// How many wait in `queue` (read without the lock on every loop pass).
    waiting: std::sync::atomic::AtomicUsize,
}

/// The envelopes waiting, and buffers of served ones kept for the next forwards.
#[derive(Debug, Default)]
struct ForwardQueue {
    waiting: VecDeque<(usize, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
}

/// Buffers a [`Forwarded`] queue keeps for reuse.
const FORWARD_SPARE: usize = 16;

impl Forwarded {
    fn lock(&self) -> impl std::ops::DerefMut<Target = ForwardQueue> + '_ {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty buffer for an envelope of about `len` bytes to this queue's worker: one its
    /// worker gave back, or a new one.
    fn buffer(&self, len: usize) -> Vec<u8> {
        self.lock().spare.pop().unwrap_or_else(|| Vec::with_capacity(len))
    }

    /// Hands an envelope of one segment from `from_rank` to this queue's worker.
    fn push(&self, from_rank: usize, bytes: Vec<u8>) {
        let mut q = self.lock();
        q.waiting.push_back((from_rank, bytes));
        self.waiting.store(q.waiting.len(), std::sync::atomic::Ordering::Release);
    }

    /// The oldest forwarded envelope, if any.
    fn pop(&self) -> Option<(usize, Vec<u8>)> {
        if self.waiting.load(std::sync::atomic::Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = self.lock();
        let r = q.waiting.pop_front();
        self.waiting.store(q.waiting.len(), std::sync::atomic::Ordering::Release);
        r
    }

    /// Keeps a served envelope's buffer for the next forward to this queue's worker.
    fn give_back(&self, mut bytes: Vec<u8>) {
        let mut q = self.lock();
        if q.spare.len() < FORWARD_SPARE {
            bytes.clear();
            q.spare.push(bytes);
        }
    }

    /// How many envelopes wait (the idle policy: `Worker::incoming_due`).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Which staged requests [`Worker::poll_remote`] sends (aggregation per destination rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::runtime) enum Flush {
    /// Only full envelopes (the requests staged for the rank's trustees fill one).
    Full,
    /// Everything: the requests waited for `AGGREGATE_PASSES` busy passes.
    Aged,
    /// Everything: the worker is about to go idle, or something must leave now.
    Now,
}

/// What the client of a remote spawn does with its `Joined` record: completes the
/// `JoinHandle`'s cell with the result bytes (checked against the result type's size) or the
/// panic message; `Err` when the bytes do not fit (the record is refused).
pub(crate) type JoinFn = Box<dyn FnOnce(Result<&[u8], &str>) -> Result<(), String>>;

/// The request half of a control record sent to a worker of another rank (`ID`:
/// [`CONTROL_SPAWN`] or [`CONTROL_JOINED`]): its join id (the wire target word) and its fields
/// after the target, laid out as on the wire (`wire::envelope`'s tables). Issued only towards
/// remote workers (`Worker::send_control`), so `poll_remote` always takes it out of the
/// queue as wire bytes; it never runs through a slot.
pub(crate) struct ControlReq<const ID: u64> {
    join: u64,
    body: Vec<u8>,
}

impl<const ID: u64> ControlReq<ID> {
    const HOOK: &'static RemoteHook = &RemoteHook {
        code: RemoteVTable::code(match ID {
            CONTROL_SPAWN => &SPAWN_TABLE,
            CONTROL_LAUNCH => &LAUNCH_TABLE,
            CONTROL_RELEASE => &RELEASE_TABLE,
            CONTROL_GRANT => &GRANT_TABLE,
            _ => &JOINED_TABLE,
        }),
        take_arg: take_control::<ID>,
        put_result: if ID == CONTROL_GRANT { put_word } else { put_nothing },
        take_uniform: None,
        wire_result: false,
    };
}

impl<const ID: u64> RequestHalf for ControlReq<ID> {
    const REMOTE: Option<&'static RemoteHook> = Some(Self::HOOK);

    unsafe fn call(self, _target: *mut u8, _out: *mut u8) -> Option<PanicPayload> {
        // Unreachable: `send_control` only queues these towards workers of other ranks, whose
        // records leave through `poll_remote` (`take_control`). Answer with a panic rather
        // than run anything.
        Some(Box::new(format!("skein: control record {ID} run on its own rank (a bug)")))
    }
}

/// [`RemoteHook::take_arg`] of a [`ControlReq`]: its fields; the join id is the target word.
///
/// # Safety
/// `p` is the target word of a live `ControlReq<ID>` record owned by the caller; its request
/// half (right after the word, record invariant 1) is consumed here.
unsafe fn take_control<const ID: u64>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise; this is the request half's one consumption (invariant 2).
    let req = unsafe { std::ptr::read(p.add(8) as *const ControlReq<ID>) };
    arg.extend_from_slice(&req.body);
    req.join
}

/// [`RemoteHook::put_result`] of a [`ControlReq`]: no result.
///
/// # Safety
/// None (it writes nothing).
unsafe fn put_nothing(_wire: &[u8], _out: *mut u8) {}

/// [`RemoteHook::put_result`] of a `Grant` [`ControlReq`]: the weight granted (8 bytes,
/// checked by `validate_response` against `GRANT_TABLE`).
///
/// # Safety
/// `out` is the record's result space of 8 bytes (`Worker::send_grant`).
unsafe fn put_word(wire: &[u8], out: *mut u8) {
    let n = wire.len().min(8);
    // SAFETY: caller promise on `out`; `wire` holds `n` bytes.
    unsafe { std::ptr::copy_nonoverlapping(wire.as_ptr(), out, n) };
}

/// The body of a fiber started by a [`CONTROL_SPAWN`] or [`CONTROL_LAUNCH`] record: runs the
/// table on `target` with the argument and sends the result, or the panic message named with
/// this rank and worker, back to `client` as a [`CONTROL_JOINED`] record with the same join
/// id.
///
/// # Safety
/// `vt` is a `KIND_SPAWN` table (its `run` ignores `target`), or a `KIND_LAUNCH` table and
/// `target` a live `Latch` of its type owned by this worker, kept alive until the `Joined`
/// record is sent; `arg` has the table's `arg_bytes` bytes.
unsafe fn run_remote_spawn(
    vt: &'static RemoteVTable,
    target: *mut u8,
    arg: Vec<u8>,
    client: usize,
    join: u64,
) {
    let w = super::context::expect("spawn_on");
    let mut out = Vec::with_capacity(vt.result_bytes as usize);
    // SAFETY: caller promise; this runs in a fiber of this worker (a launch may park).
    let r = unsafe { vt.run(target, &arg, &mut out) };
    let body = match r {
        Ok(()) => joined_body(Ok(&out)),
        Err(RunError::Panicked(m) | RunError::Refused(m)) => {
            joined_body(Err(&format!("rank {} worker {}: {m}", w.rank, w.index)))
        }
    };
    w.send_control::<CONTROL_JOINED>(client, join, body);
}

/// `RemoteHook::put_result`'s type.
type PutResult = unsafe fn(&[u8], *mut u8);

/// One batch in flight to a remote trustee: what its response is checked against and how its
/// results are laid out for the completions.
struct InFlight {
    seq: u64,
    /// The wire tables of its records, in order (`LOOPBACK_TABLE` for control records).
    tables: Vec<&'static RemoteVTable>,
    /// The in-process result bytes of its records, in order.
    result_bytes: Vec<u32>,
    /// Their `RemoteHook::put_result`, `None` for control records.
    put: Vec<Option<PutResult>>,
    /// Sent as a uniform segment: one table, one `put`, one result size for every record.
    uniform: bool,
    /// Uniform, and the wire results are the in-process result spaces byte for byte
    /// (`RemoteHook::wire_result`, the same size): the completions read them in the response.
    wire_results: bool,
}

/// A worker's transport state (a loopback run only): per remote trustee its batches in
/// flight, and scratch buffers.
pub(crate) struct RemoteSide {
    in_flight: Box<[RefCell<VecDeque<InFlight>>]>,
    scratch: RefCell<Vec<MaybeUninit<u64>>>,
    arg: RefCell<Vec<u8>>,
    envelopes: Cell<u64>,
    /// The remote spawns of this worker waiting for their `Joined` record, by join id.
    joins: RefCell<HashMap<u64, JoinFn>>,
    /// The last join id handed out.
    next_join: Cell<u64>,
    /// Answered batches' records, emptied, for the next batches (their vectors keep their
    /// capacity: no allocation per batch). At most the most batches ever in flight at once.
    spare: RefCell<Vec<InFlight>>,
    /// Result buffers of answered batches, for the next responses (as many as the most
    /// segments of one response envelope).
    results: RefCell<Vec<Vec<u64>>>,
    /// The answered segments of one response envelope (kept empty between envelopes, for its
    /// capacity).
    answered: RefCell<Vec<Answered>>,
    /// The last `(target word, table address)` whose export passed the type check of
    /// `resolve_target` (module docs, "Targets"): the next record with both equal skips the
    /// type names' comparison, not the lookup. `(0, 0)` matches nothing (no table is at 0).
    typed: Cell<(u64, usize)>,
}

impl RemoteSide {
    /// The batches in flight to `trustee` and the requests they hold (for stall dumps).
    pub(super) fn in_flight_of(&self, trustee: usize) -> (usize, usize) {
        let q = self.in_flight[trustee].borrow();
        (q.len(), q.iter().map(|b| b.tables.len()).sum())
    }

    /// The state of a worker of a run of `n` workers.
    pub(crate) fn new(n: usize) -> RemoteSide {
        RemoteSide {
            in_flight: (0..n).map(|_| RefCell::default()).collect(),
            scratch: RefCell::new(vec![MaybeUninit::uninit(); BATCH_WORDS]),
            arg: RefCell::default(),
            envelopes: Cell::new(0),
            joins: RefCell::default(),
            next_join: Cell::new(0),
            spare: RefCell::default(),
            results: RefCell::default(),
            answered: RefCell::default(),
            typed: Cell::new((0, 0)),
        }
    }
}

/// A response segment read out of its envelope, ready for the completions.
struct Answered {
    trustee: usize,
    seq: u64,
    n: usize,
    /// The results' buffer (empty when they are read in the envelope).
    results: Vec<u64>,
    /// Where the results lie one after the other: in `results`, or in the response envelope
    /// being handled (which outlives the completions, `take_responses`).
    resp: *const u8,
    /// The records are all of one type (a uniform batch).
    uniform: bool,
    panics: Vec<(u32, PanicPayload)>,
}

impl Worker {
    fn transport(&self) -> &dyn Transport {
        self.run_state.transport.as_deref().expect("skein: no transport in this run")
    }

    fn side(&self) -> &RemoteSide {
        self.remote.as_ref().expect("skein: no transport state on this worker")
    }

    fn job(&self) -> Job {
        Job {
            token: self.transport().token(),
            job_run: self.run_state.job_run,
            me: self.index as u32,
            workers: self.local_n as u32,
            ranks: self.run_state.ranks as u32,
        }
    }

    fn next_envelope_seq(&self) -> u64 {
        let s = self.side().envelopes.get() + 1;
        self.side().envelopes.set(s);
        s
    }

    /// Queues a control record (`ID`) for worker `to` of another rank: a request like any
    /// other (counted as issued here, finished when its empty response is back), which
    /// `poll_remote` writes as the wire record of `ID` with `join` as target word and `body`
    /// as the fields after it.
    pub(crate) fn send_control<const ID: u64>(&self, to: usize, join: u64, body: Vec<u8>) {
        assert!(
            to < self.n && self.is_remote(to) && self.remote.is_some(),
            "skein: control record to worker {to}, which is not on another rank of a split run"
        );
        let req = ControlReq::<ID> { join, body };
        // SAFETY: to < n, checked above.
        unsafe { self.request::<NoResult, _, _>(to, std::ptr::null_mut(), req, |_o| {}) };
    }

    /// Queues a `Grant` control record for export `target` of trustee `to` (another rank):
    /// `granted(weight)` runs here with the weight the trustee added to the slot's budget (or
    /// is dropped unrun if the run is stopped first).
    pub(crate) fn send_grant(&self, to: usize, target: u64, granted: impl FnOnce(u64) + 'static) {
        assert!(
            to < self.n && self.is_remote(to) && self.remote.is_some(),
            "skein: grant record to worker {to}, which is not on another rank of a split run"
        );
        let req = ControlReq::<CONTROL_GRANT> { join: target, body: Vec::new() };
        let done = move |o: crate::runtime::worker::Outcome| {
            if o.panic.is_none() {
                // SAFETY: the result space of this record is a `PlainSpace<u64>` (below), which
                // `put_word` filled from the validated 8-byte result.
                granted(unsafe { <PlainSpace<u64> as ReadBack>::read(o.resp) });
            }
        };
        // SAFETY: to < n, checked above.
        unsafe { self.request::<PlainSpace<u64>, _, _>(to, std::ptr::null_mut(), req, done) };
    }

    /// Registers what to do with the `Joined` record of a remote spawn; returns its join id.
    pub(crate) fn register_join(&self, f: JoinFn) -> u64 {
        let side = self.side();
        let id = side.next_join.get() + 1;
        side.next_join.set(id);
        side.joins.borrow_mut().insert(id, f);
        id
    }

    /// Handles the envelopes that arrived for this worker: serves request envelopes, completes
    /// response envelopes. A refused one ends the run (module invariant 4).
    pub(super) fn poll_transport(&self) -> bool {
        let t = self.transport();
        let (st, clock) = (&self.ctr().stats, &self.clock);
        let mut useful = t.progress(self.index);
        while let Some(Arrived { from_rank, bytes }) = t.poll(self.index) {
            clock.mark(st, Part::Transport);
            useful = true;
            self.run_state.stall.heard(from_rank);
            let r = if bytes.get(12) == Some(&KIND_RESPONSES) {
                let r = self.take_responses(from_rank, &bytes);
                clock.mark(st, Part::Issuing);
                r
            } else {
                let r = self.serve_requests(from_rank, &bytes);
                clock.mark(st, Part::Serving);
                r
            };
            t.release(self.index, bytes);
            if let Err(e) = r {
                self.refuse(e);
                return true;
            }
        }
        clock.mark(st, Part::Transport);
        // Segments the landing workers of this rank forwarded here (module invariant 4).
        let forwarded = &self.run_state.forwarded[self.index];
        while let Some((from_rank, bytes)) = forwarded.pop() {
            useful = true;
            let r = self.serve_requests(from_rank, &bytes);
            forwarded.give_back(bytes);
            clock.mark(st, Part::Serving);
            if let Err(e) = r {
                self.refuse(e);
                return true;
            }
        }
        useful
    }

    /// Records a refused envelope as the run's error and stops the run.
    #[cold]
    fn refuse(&self, e: BadBatch) {
        self.run_state.record_error(format!("rank {} worker {}: {e}", self.rank, self.index));
        self.run_state.abort();
    }
}
