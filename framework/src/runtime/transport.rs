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
//! 4. **A refused envelope ends the run.** A `BadBatch` (from `validate`, a response that
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
//! checked record by record (`export_wired_tests`,
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
use crate::transport::{Arrived, Transport};
use crate::wire::envelope::{
    control_id, is_loopback_table, joined_body, joined_parts, launch_parts, release_parts,
    spawn_parts, validate, validate_response, BadBatch, Expect, ExpectResponse, Head, Job, Reason,
    Record, RequestWriter, ResponseWriter, CONTROL_GRANT, CONTROL_JOINED, CONTROL_LAUNCH,
    CONTROL_RELEASE, CONTROL_SPAWN, GRANT_TABLE, HEADER_BYTES, JOINED_TABLE, KIND_RESPONSES,
    LAUNCH_TABLE, LOOPBACK_TABLE, RELEASE_TABLE, SEGMENT_HEADER_BYTES, SPAWN_TABLE,
};
use crate::wire::remote::{panic_message, RemoteVTable, RunError};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::collections::VecDeque;
use std::mem::MaybeUninit;

/// The most words of in-process records one loopback batch takes from a client's queue.
const BATCH_WORDS: usize = 1024;
/// Batches in flight per (client, remote trustee) pair (the credits of the pair).
const IN_FLIGHT: u64 = 8;
/// The most in-process result bytes of one loopback batch.
const BATCH_RESULT_BYTES: usize = 64 << 10;
/// Over MPI, the most words of in-process records, and result bytes, of one batch: small
/// enough that a request envelope and its response stay under Open MPI's eager limit (4096
/// bytes with its header; a longer message goes by rendezvous, several times slower:
/// `docs/rack-mode.md`, facts).
const MPI_BATCH_WORDS: usize = 400;
const MPI_BATCH_RESULT_BYTES: usize = 3 << 10;
/// Over MPI, the most bytes of a request envelope and of its response when the batch is
/// sized by its wire bytes ([`mpi_batch_limits`]): the rack transport's envelope size `B`
/// (`rack::transport::DEFAULT_ENVELOPE_BYTES`, under Open MPI's 4096-byte eager limit with
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
fn mpi_batch_limits(uniform: Option<&'static crate::channel::record::VTable>) -> (usize, usize) {
    let fixed = (MPI_BATCH_WORDS, MPI_BATCH_RESULT_BYTES);
    let Some((vt, remote)) = uniform.and_then(|vt| Some((vt, vt.remote?.vt()))) else {
        return fixed;
    };
    if remote.arg_prefixed() || remote.result_prefixed() {
        return fixed;
    }
    let room = MPI_ENVELOPE_BYTES - HEADER_BYTES - SEGMENT_HEADER_BYTES - 8;
    let n = (room / (8 + remote.arg_bytes as usize))
        .min(room.checked_div(remote.result_bytes as usize).unwrap_or(usize::MAX));
    if n == 0 {
        return fixed;
    }
    let (words, result) = vt.totals(n);
    (words.min(BATCH_WORDS), result.min(BATCH_RESULT_BYTES))
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

    /// Runs a control record from worker `client` (module docs, "Control records").
    fn run_control(&self, id: u64, client: usize, rec: &Record<'_>) -> Result<Option<u64>, String> {
        match id {
            CONTROL_SPAWN => {
                let (vt, arg) = spawn_parts(rec.arg).map_err(|e| e.to_string())?;
                let (arg, join) = (arg.to_vec(), rec.target);
                // SAFETY: `validate` checked the table's kind (`KIND_SPAWN`: no target) and
                // sized `arg` to it.
                self.spawn_local(move || unsafe {
                    run_remote_spawn(vt, std::ptr::null_mut(), arg, client, join)
                });
                Ok(None)
            }
            CONTROL_LAUNCH => {
                let (vt, target, arg) = launch_parts(rec.arg).map_err(|e| e.to_string())?;
                let latch = self.resolve_target(target, vt, true)?;
                let (arg, join) = (arg.to_vec(), rec.target);
                // SAFETY: `validate` checked the table's kind (`KIND_LAUNCH`) and sized `arg`
                // to it. The target word names the `Latch<T>` inside the client's live
                // property (`resolve_target`: an export of this trustee, or a loopback
                // address), of the type the table was made for (`Trust::launch` wrote both
                // from one handle), owned by this worker (the segment's trustee, checked by
                // `serve_requests`); the client's `launch` holds its handle (so its proxy's
                // weight, or the property) until the `Joined` record has come back, which
                // this fiber sends after the latch is unlocked.
                self.spawn_local(move || unsafe { run_remote_spawn(vt, latch, arg, client, join) });
                Ok(None)
            }
            CONTROL_JOINED => {
                let f = self.side().joins.borrow_mut().remove(&rec.target).ok_or_else(|| {
                    format!("joined record for join id {}, which is not waiting", rec.target)
                })?;
                f(joined_parts(rec.arg)).map(|()| None)
            }
            CONTROL_RELEASE => {
                let o = self.owner.as_ref().ok_or("release record outside a split run")?;
                let (slot, gen) = split_target(rec.target);
                let (weight, issued) = release_parts(rec.arg);
                let rel =
                    Release { owner: self.index, slot, gen, weight, issued: issued.collect() };
                // The `issued` counts are those of the sending rank's workers, in order.
                let client_base = client / self.local_n * self.local_n;
                o.borrow_mut()
                    .schedule_release(rel, client_base)
                    .map(|()| None)
                    .map_err(|e| e.to_string())
            }
            CONTROL_GRANT => {
                let o = self.owner.as_ref().ok_or("grant record outside a split run")?;
                let (slot, gen) = split_target(rec.target);
                o.borrow_mut().grant(slot, gen).map(Some).map_err(|e| e.to_string())
            }
            _ => Err(format!("control record {id} is not handled here")),
        }
    }

    /// The client role towards a trustee of another rank: sends staged requests as request
    /// envelopes while fewer than [`IN_FLIGHT`] batches are in flight (responses come through
    /// [`Worker::poll_transport`]).
    pub(super) fn poll_remote(&self, trustee: usize) -> bool {
        let cs = &self.clients[trustee];
        let mut useful = false;
        while cs.sent.get() - cs.acked.get() < IN_FLIGHT && cs.out(|q| q.has_staged()) {
            let Some(buf) = self.transport().claim(self.index, trustee) else { break };
            let seq = cs.sent.get() + 1;
            let side = self.side();
            let mut scratch = side.scratch.borrow_mut();
            let dst = scratch.as_mut_ptr() as *mut u64;
            let (max_words, max_result) = if self.run_state.mpi_rank.is_some() {
                mpi_batch_limits(cs.out(|q| q.uniform_vtable()))
            } else {
                (BATCH_WORDS, BATCH_RESULT_BYTES)
            };
            // SAFETY: `scratch` holds BATCH_WORDS (≥ max_words) words, 8-aligned; the copied
            // request halves are consumed below, each once, by `take_arg` or by moving their
            // bytes into the envelope (record invariant 2).
            let (words, count, uniform) =
                cs.out(|q| unsafe { q.send_to(dst, max_words, max_result) });
            assert!(count > 0, "skein: a request does not fit in an empty batch to another rank");
            let head = Head {
                token: self.transport().token(),
                job_run: self.run_state.job_run,
                from: self.index as u32,
                to_rank: (trustee / self.local_n) as u32,
                to: trustee as u32,
                seq: self.next_envelope_seq(),
            };
            let mut wr = RequestWriter::new_in(buf, &head);
            // A batch of one record type with a fixed-size argument travels as a uniform
            // segment: its code id once, checked in O(1) by the trustee.
            // SAFETY: `count > 0` records were copied to `scratch`; the first starts there.
            let first = unsafe { header(dst) };
            let uniform_vt = match first.remote {
                Some(hook) if uniform && !hook.vt().arg_prefixed() => Some(hook.vt()),
                _ => None,
            };
            wr.begin_segment(trustee as u32, seq, uniform_vt);
            let mut b = side.spare.borrow_mut().pop().unwrap_or_else(|| InFlight {
                seq,
                tables: Vec::with_capacity(count),
                result_bytes: Vec::with_capacity(count),
                put: Vec::with_capacity(count),
                uniform: false,
                wire_results: false,
            });
            b.seq = seq;
            b.uniform = false;
            b.wire_results = false;
            let mut arg = side.arg.borrow_mut();
            let mut w = 0;
            if let (Some(vt), Some(hook)) = (uniform_vt, first.remote) {
                // One record type: its header read once, the records at a fixed stride.
                let stride = first.words as usize;
                // SAFETY: `count` records of `first`'s type were copied to `scratch`, one
                // after the other (record invariants 1 and 4), each `stride` words; each
                // request half is live and ours (send_to) and consumed here, once.
                match hook.take_uniform {
                    Some(take) => wr.push_uniform_block(vt, count, |buf| {
                        // SAFETY: as above, all `count` records in one call.
                        unsafe { take(dst, stride, count, buf) }
                    }),
                    None => wr.push_uniform(vt, count, |i, buf| {
                        // SAFETY: as above, record `i`.
                        unsafe {
                            (hook.take_arg)(dst.add(i * stride + HEADER_WORDS) as *mut u8, buf)
                        }
                    }),
                }
                b.tables.resize(count, vt);
                b.put.resize(count, Some(hook.put_result));
                b.result_bytes.resize(count, first.result_bytes);
                b.uniform = true;
                b.wire_results = hook.wire_result && first.result_bytes == vt.result_bytes;
                w = count * stride;
            }
            // Record by record otherwise (none left after the uniform path above).
            let rest = if b.uniform { 0 } else { count };
            for _ in 0..rest {
                // SAFETY: `count` records were copied to `scratch`, one after the other
                // (record invariants 1 and 4).
                let (h, at) = unsafe { (header(dst.add(w)), dst.add(w)) };
                let p = at.wrapping_add(HEADER_WORDS) as *mut u8;
                match h.remote {
                    Some(hook) if !hook.vt().arg_prefixed() => {
                        // SAFETY: the record's request half is live in `scratch` and ours
                        // (send_to); consumed here, its argument written into the envelope.
                        wr.push_with(hook.vt(), |buf| unsafe { (hook.take_arg)(p, buf) });
                        b.tables.push(hook.vt());
                        b.put.push(Some(hook.put_result));
                    }
                    Some(hook) => {
                        arg.clear();
                        // SAFETY: the record's request half is live in `scratch` and ours
                        // (send_to); consumed here.
                        let target = unsafe { (hook.take_arg)(p, &mut arg) };
                        wr.push(hook.vt(), target, &arg);
                        b.tables.push(hook.vt());
                        b.put.push(Some(hook.put_result));
                    }
                    None => {
                        assert_eq!(
                            h.result_bytes, 0,
                            "skein: a local-only request to another rank"
                        );
                        let words = h.words as usize;
                        let mut rec = Box::<[u64]>::new_uninit_slice(words);
                        // SAFETY: the record's `words` words are in `scratch` (the queue wrote
                        // them); an untyped copy into a box of that size. The request half
                        // moves with them (record invariant 3) and the serving worker
                        // consumes it (`run_loopback_record`).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                at as *const MaybeUninit<u64>,
                                rec.as_mut_ptr(),
                                words,
                            )
                        };
                        // SAFETY: the target word follows the header.
                        let target = unsafe { *at.add(HEADER_WORDS) };
                        let addr = Box::into_raw(rec) as *mut MaybeUninit<u64> as usize as u64;
                        let mut arg = [0u8; 16];
                        arg[..8].copy_from_slice(&addr.to_le_bytes());
                        arg[8..].copy_from_slice(&(words as u64).to_le_bytes());
                        wr.push_loopback(target, &arg);
                        b.tables.push(&LOOPBACK_TABLE);
                        b.put.push(None);
                    }
                }
                b.result_bytes.push(h.result_bytes);
                w += h.words as usize;
            }
            debug_assert_eq!(w, words);
            drop((arg, scratch));
            wr.end_segment();
            side.in_flight[trustee].borrow_mut().push_back(b);
            cs.sent.set(seq);
            self.transport().publish(self.index, trustee, wr.finish());
            bump(&self.ctr().stats.batches_sent, 1);
            self.wake_throttled(&cs.throttled);
            useful = true;
        }
        useful
    }

    /// Handles the envelopes that arrived for this worker: serves request envelopes, completes
    /// response envelopes. A refused one ends the run (module invariant 4).
    pub(super) fn poll_transport(&self) -> bool {
        let t = self.transport();
        let mut useful = t.progress(self.index);
        while let Some(Arrived { from_rank, bytes }) = t.poll(self.index) {
            useful = true;
            let r = if bytes.get(12) == Some(&KIND_RESPONSES) {
                self.take_responses(from_rank, &bytes)
            } else {
                self.serve_requests(from_rank, &bytes)
            };
            t.release(self.index, bytes);
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

    /// The trustee role for a request envelope from `from_rank`.
    fn serve_requests(&self, from_rank: usize, bytes: &[u8]) -> Result<(), BadBatch> {
        let next_seq =
            |c: u32, _t: u32| self.trustees.get(c as usize).map_or(0, |ts| ts.served_seq.get() + 1);
        let expect = Expect {
            job: self.job(),
            max_response_bytes: usize::MAX,
            next_seq: &next_seq,
            seq_window: 1,
            loopback: self.run_state.is_loopback(),
        };
        let env = validate(bytes, from_rank, &expect)?;
        let client = env.head.from as usize;
        let bad = |reason| BadBatch { rank: from_rank, reason };
        // The loopback transport always has a buffer; one without credit for a response
        // would hold the request envelope until it has (not needed here).
        let buf = self.transport().claim(self.index, client).unwrap_or_default();
        let mut rw = ResponseWriter::new_in(
            buf,
            &Head {
                token: expect.job.token,
                job_run: self.run_state.job_run,
                from: self.index as u32,
                to_rank: from_rank as u32,
                to: client as u32,
                seq: env.head.seq,
            },
        );
        for (s, seg) in env.segments().enumerate() {
            let s = s as u32;
            if seg.trustee as usize != self.index {
                return Err(bad(Reason::Target {
                    segment: s,
                    record: 0,
                    why: format!(
                        "trustee {} is not the serving worker {}",
                        seg.trustee, self.index
                    ),
                }));
            }
            rw.begin_segment(seg.trustee, seg.pair_seq);
            let mut k = 0u32;
            // A uniform segment of a table with its own loop runs in one call; its targets are
            // resolved one by one as below.
            let ran = seg.uniform_body().and_then(|(vt, body)| {
                let loopback = expect.loopback;
                // The owner stays borrowed for the whole segment: no export of this trustee
                // can be recycled meanwhile (only `&mut Owner` recycles; a closure that tried
                // would panic on the borrow, never free the slot under a reused target), so
                // a target word equal to the previous record's, which `run_uniform` does not
                // resolve again, names the same live value of the same, checked, type
                // (module docs, "Targets").
                let owner = self.owner.as_ref().map(|o| o.borrow());
                let mut resolve = |word| self.resolve_in(owner.as_deref(), word, vt, loopback);
                // SAFETY: as for `rw.run` below, record by record: each target is what
                // `resolve_in` found for the record's word, or for the same word earlier in
                // this segment with the owner borrowed since (above) (the client wrote the
                // code id and the target from one handle; a target of another type is refused
                // before its record runs), alive until the request has been served, and this
                // runs as delegated code on its trustee (the segment is ours, checked above).
                self.delegated(|| unsafe { rw.run_uniform(vt, body, &mut resolve) })
            });
            let uniform_ran = match ran {
                Some(r) => {
                    r.map_err(|(record, why)| bad(Reason::Target { segment: s, record, why }))?;
                    k = seg.records;
                    true
                }
                None => false,
            };
            if !uniform_ran {
                for rec in seg.records() {
                    let refused = |why| bad(Reason::Target { segment: s, record: k, why });
                    if let Some(id) = control_id(rec.vt) {
                        let r = self.delegated(|| self.run_control(id, client, &rec));
                        match r.map_err(refused)? {
                            Some(granted) => rw.push_result(rec.vt, &granted.to_le_bytes()),
                            None => rw.push_result(rec.vt, &[]),
                        }
                    } else if is_loopback_table(rec.vt) {
                        let panic = self.run_loopback_record(rec.arg).map_err(refused)?;
                        rw.push_result(&LOOPBACK_TABLE, &[]);
                        if let Some(p) = panic {
                            rw.push_panic(k, &panic_message(p));
                        }
                    } else {
                        let target = self
                            .resolve_target(rec.target, rec.vt, expect.loopback)
                            .map_err(refused)?;
                        // SAFETY: `target` is the value the record works on, of the type its table
                        // was made for (the client wrote the code id and the target from one
                        // handle; `resolve_target`), alive until this request has been served (an
                        // export's weight, or a loopback handle, `super::free`), and this runs as
                        // delegated code on its trustee (checked above: the segment is ours), so
                        // nothing else accesses it.
                        let r = self.delegated(|| unsafe { rw.run(&rec, target) });
                        r.map_err(refused)?;
                    }
                    k += 1;
                }
            }
            rw.end_segment();
            let ts = &self.trustees[client];
            ts.served.set(ts.served.get() + k as u64);
            ts.served_seq.set(seg.pair_seq);
            let st = &self.ctr().stats;
            bump(&st.requests_served, k as u64);
            bump(&st.batches_served, 1);
        }
        self.transport().publish(self.index, client, rw.finish());
        Ok(())
    }

    /// The value a request's wire target word names on this trustee: an export `(slot, gen)`
    /// of this trustee's table, found with the owner's lock-free lookup (an unknown, free or
    /// stale one is refused: `export::LookupError`), or, in a loopback run only, an address
    /// in this process (`export::ADDR_TARGET`; module docs, "Loopback only").
    ///
    /// The export's property is alive while a request through it is unserved: the weight of
    /// the proxy it was issued through is returned only after this rank has served it (the
    /// `Release`'s snapshot, `super::export`). An export's value must be of the type `vt` was
    /// made for ([`RemoteVTable::target_type`] against the name the export recorded): a wire
    /// target of a live export of another type is refused before anything runs. A loopback
    /// address carries no type; the client wrote the code id and the target from one handle.
    fn resolve_target(
        &self,
        word: u64,
        vt: &RemoteVTable,
        loopback: bool,
    ) -> Result<*mut u8, String> {
        let owner = self.owner.as_ref().map(|o| o.borrow());
        self.resolve_in(owner.as_deref(), word, vt, loopback)
    }

    /// [`Worker::resolve_target`] with this worker's export table already borrowed (`None`:
    /// not a split run).
    fn resolve_in(
        &self,
        owner: Option<&Owner<PropPtr>>,
        word: u64,
        vt: &RemoteVTable,
        loopback: bool,
    ) -> Result<*mut u8, String> {
        if word & ADDR_TARGET != 0 {
            let addr = word & !ADDR_TARGET;
            if !loopback {
                return Err("an address target outside a loopback run".into());
            }
            if addr == 0 {
                return Err("null target".into());
            }
            return Ok(std::ptr::with_exposed_provenance_mut(addr as usize));
        }
        let (slot, gen) = split_target(word);
        let o = owner.ok_or("an export target outside a split run")?;
        let p = o.lookup(slot, gen).map_err(|e| e.to_string())?;
        // The type check, unless this live export passed it for this table last time: a
        // `(slot, generation)` names one export for the whole run (the generation grows at
        // every recycle, a slot at the last one is retired), which holds one property, so
        // the answer cannot have changed; the lookup above still ran.
        let key = (word, vt as *const RemoteVTable as usize);
        let typed = &self.side().typed;
        if typed.get() != key {
            let (want, have) = ((vt.target_type)(), p.type_name());
            if !std::ptr::eq(want, have) && want != have {
                return Err(format!(
                    "export (slot {slot}, generation {gen}) holds a {have}, the record is for a \
                     {want}"
                ));
            }
            typed.set(key);
        }
        Ok(p.value_addr())
    }

    /// Runs a loopback control record as the slots would: its request half, as delegated
    /// code. Its argument is the address and the length in words of a box holding the
    /// in-process record (moved there by `poll_remote`), which this takes back. Returns the
    /// record's panic, or why it is refused.
    fn run_loopback_record(&self, arg: &[u8]) -> Result<Option<PanicPayload>, String> {
        let word = |i: usize| u64::from_le_bytes(arg[i..i + 8].try_into().unwrap_or([0; 8]));
        if arg.len() != 16 {
            return Err(format!("loopback record argument of {} bytes, not 16", arg.len()));
        }
        let (addr, words) = (word(0) as usize, word(8) as usize);
        if addr == 0 || addr % 8 != 0 || words < 2 {
            return Err(format!("loopback record at {addr:#x} of {words} words"));
        }
        // SAFETY: loopback only (module docs): the validator accepted a LOOPBACK_CONTROL record,
        // which only a loopback validator does; loopback envelopes are written by this
        // process's clients (`poll_remote`) and never leave it (the test hook corrupts header
        // bytes only, which `validate` checks before any record, and `super::forge` writes no
        // loopback record). So `(addr, words)` is a box
        // `poll_remote` leaked for this record, taken back exactly once, here (each envelope
        // is served once: its pair sequence number is accepted once).
        let rec: Box<[MaybeUninit<u64>]> = unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(addr as *mut MaybeUninit<u64>, words))
        };
        let at = rec.as_ptr() as *mut u64;
        // SAFETY: the box holds the record the client moved out of its queue (record
        // invariant 3), whose word 0 is its `&'static VTable`.
        let h = unsafe { header(at) };
        if h.words as usize != words || h.result_bytes != 0 {
            return Err("loopback record does not match its vtable".into());
        }
        let mut space = 0u64;
        // SAFETY: the record's request half is live (moved here from the client's queue) and
        // consumed once, here; no result bytes; delegated code on this trustee as with slots.
        // The box is freed afterwards without dropping anything (`MaybeUninit`): the
        // completion's bytes in it are dead (the client kept its own copy).
        let panic = self.delegated(|| unsafe {
            (h.run_request)(at.add(HEADER_WORDS) as *mut u8, &mut space as *mut u64 as *mut u8)
        });
        drop(rec);
        Ok(panic)
    }

    /// The client role for a response envelope from `from_rank`: checks it against the
    /// batches in flight, then runs the completions of each answered batch in order.
    fn take_responses(&self, from_rank: usize, bytes: &[u8]) -> Result<(), BadBatch> {
        let side = self.side();
        // Buffers of earlier responses: no allocation per envelope (a re-entrant call, which
        // cannot happen, would find them taken and allocate its own).
        let mut answered = std::mem::take(&mut *side.answered.borrow_mut());
        {
            let front = |t: usize| -> Option<&InFlight> {
                let q = side.in_flight.get(t)?;
                // SAFETY: no `in_flight` queue is borrowed mutably while the references this
                // block takes live: it runs no user code (`validate_response` is a pure
                // function of the bytes, `put` writes a result into `results`), and the
                // queues are changed only after it ends (`pop_front` below).
                unsafe { q.try_borrow_unguarded() }.ok()?.front()
            };
            let in_flight = |t: u32, seq: u64| {
                let b = front(t as usize).filter(|b| b.seq == seq)?;
                Some(b.tables.as_slice())
            };
            let expect = ExpectResponse { job: self.job(), in_flight: &in_flight };
            let resp = validate_response(bytes, from_rank, &expect)?;
            for seg in resp.segments() {
                let t = seg.trustee as usize;
                let Some(b) = front(t) else { continue };
                let panicked: Vec<(u32, &str)> = seg.panics().collect();
                let mut results = side.results.borrow_mut().pop().unwrap_or_default();
                results.clear();
                // A uniform batch whose wire results are its result spaces, without panics:
                // the completions read them where they are, in this envelope.
                if b.wire_results && panicked.is_empty() {
                    if let Some(wire) = b.tables.first().and_then(|&vt| seg.uniform_results(vt)) {
                        answered.push(Answered {
                            trustee: t,
                            seq: seg.pair_seq,
                            n: b.tables.len(),
                            results,
                            resp: wire.as_ptr(),
                            uniform: true,
                            panics: Vec::new(),
                        });
                        continue;
                    }
                }
                let total: usize = b.result_bytes.iter().map(|&r| r as usize).sum();
                results.resize(total.div_ceil(8), 0);
                let base = results.as_mut_ptr() as *mut u8;
                // A uniform batch without panics: one `put`, results at fixed strides.
                let uniform = match (b.uniform, b.put.first(), b.tables.first()) {
                    (true, Some(&Some(put)), Some(&vt)) if panicked.is_empty() => {
                        seg.uniform_results(vt).map(|wire| (put, vt.result_bytes as usize, wire))
                    }
                    _ => None,
                };
                if let Some((put, size, wire)) = uniform {
                    let space = b.result_bytes[0] as usize;
                    for k in 0..b.tables.len() {
                        // SAFETY: `k · space` plus this record's result bytes is within
                        // `results` (sized by their sum: `n · space`); the wire result has its
                        // table's size (validated); the value is read once by its completion.
                        unsafe { put(&wire[k * size..(k + 1) * size], base.add(k * space)) };
                    }
                } else {
                    let mut off = 0;
                    for (k, wire) in seg.results().enumerate() {
                        if !panicked.iter().any(|&(i, _)| i as usize == k) {
                            if let Some(put) = b.put[k] {
                                // SAFETY: `off` plus this record's result bytes is within
                                // `results` (sized by their sum); `wire` has its table's size
                                // (validated); the value is read once by its completion.
                                unsafe { put(wire, base.add(off)) };
                            }
                        }
                        off += b.result_bytes[k] as usize;
                    }
                }
                let panics = panicked
                    .into_iter()
                    .map(|(i, m)| {
                        let msg = format!("rank {from_rank} worker {t}: {m}");
                        (i, Box::new(msg) as PanicPayload)
                    })
                    .collect();
                answered.push(Answered {
                    trustee: t,
                    seq: seg.pair_seq,
                    n: b.tables.len(),
                    resp: results.as_ptr() as *const u8,
                    results,
                    uniform: b.uniform,
                    panics,
                });
            }
        }
        for a in answered.drain(..) {
            if let Some(mut b) = side.in_flight[a.trustee].borrow_mut().pop_front() {
                b.tables.clear();
                b.result_bytes.clear();
                b.put.clear();
                side.spare.borrow_mut().push(b);
            }
            let cs = &self.clients[a.trustee];
            // As in `poll_client`: the requests are taken out of their cell while their
            // completions run.
            let mut q = cs.take_out();
            // SAFETY (of reading `a.resp`): it points into `a.results` (alive here) or into
            // `bytes`, the envelope this call handles, borrowed until it returns; `n` results
            // lie there one after the other, validated above.
            self.delegated(|| q.complete_front(a.n, a.uniform, a.resp, a.panics));
            cs.put_back(q);
            cs.acked.set(a.seq);
            proto::bump(&self.ctr().finished, a.n as u64);
            side.results.borrow_mut().push(a.results);
        }
        *side.answered.borrow_mut() = answered;
        Ok(())
    }
}
