//! Envelopes: the bytes that carry request batches to another rank and their results back,
//! their encoders, and their validation (`docs/rack-mode.md` §3.1, §3.3, §3.4).
//!
//! One *envelope* carries the batches of one client worker for trustees of one remote rank
//! (one *segment* per trustee), or the answers to them. Everything is little-endian, every
//! field and every record starts at a multiple of 8 bytes from the envelope's start, and
//! every byte is either a field, a record's argument or result bytes, or zero padding that
//! the validator checks is zero (so an accepted envelope re-encodes to exactly its bytes).
//!
//! # Byte layout
//!
//! Envelope header, 64 bytes:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | job token (`rack::job_token`) |
//! | 8 | 4 | `job_run`: the run of the job this batch belongs to |
//! | 12 | 1 | kind: 1 requests, 2 responses |
//! | 13 | 3 | zero |
//! | 16 | 4 | `from`: global id of the sending worker |
//! | 20 | 4 | `to rank` |
//! | 24 | 8 | envelope sequence number (the sender's; not checked, for diagnostics) |
//! | 32 | 4 | number of segments (at least 1) |
//! | 36 | 4 | total bytes, this header included |
//! | 40 | 4 | `to`: global id of the receiving worker (a request's landing worker, a response's client) |
//! | 44 | 20 | zero |
//!
//! Then the segments, back to back, each a 24-byte header and `bytes` bytes of body:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | trustee (global id); strictly increasing over an envelope's segments |
//! | 4 | 4 | flags: bit 0 *uniform* (requests only); other bits zero |
//! | 8 | 8 | pair sequence number of this batch, per (client, trustee) (`docs/rack-mode.md` §4.3) |
//! | 16 | 4 | records (at least 1) |
//! | 20 | 4 | body bytes |
//!
//! (§3.3 of the design sketched a 16-byte segment header; the fields it lists take 21
//! bytes, so the header is 24, which keeps the records 8-aligned.)
//!
//! A request segment's body is its records, back to back:
//!
//! | size | field |
//! | --- | --- |
//! | 8 | code id (`code_id`), naming the record's `RemoteVTable` |
//! | 8 | target: export slot (low 32 bits) and generation (high 32 bits, at most 2^30 − 1) of the property; ignored for spawns. Bit 63 set ([`ADDR_TARGET`]): an address in the sending process instead, accepted only in loopback mode |
//! | `arg_bytes` | the argument (`A`'s bytes, rounded up to 8), or, for a serialized argument: `len: u32`, `0u32`, `len` bytes, zeros to a multiple of 8 |
//!
//! A *uniform* segment holds records of one table, written once: the body is the code id
//! (8 bytes), then per record its target and argument. Its table's argument must be of fixed
//! size, so the whole segment is checked in O(1): `bytes == 8 + records · (8 + arg_bytes)`.
//!
//! A response segment answers the request segment with the same trustee and pair sequence
//! number, record for record: its body is, per record in order, the result (`result_bytes`
//! of its table, or `len: u32`, `0u32`, `len` bytes, zero padding for a serialized one),
//! then the panic list: `count: u32`, `0u32`, and per panic `record index: u32` (strictly
//! increasing), `len: u32`, `len` bytes of UTF-8 message, zeros to a multiple of 8. A record
//! that panicked still has its result space (zeros).
//!
//! # Validation (what an accepted envelope guarantees)
//!
//! [`validate`] and [`validate_response`] are pure functions of the bytes and of what the
//! caller expects ([`Expect`], [`ExpectResponse`]: the job, this worker, and the per-pair
//! state that stays outside), so they can be fuzzed. They accept an envelope only if every
//! rule below holds, and look at every byte at most a constant number of times (O(bytes),
//! O(1) per uniform segment in loopback mode, one word per record otherwise, no allocation):
//!
//! 1. header: at least 64 bytes; the kind; zero reserved bytes; the job token and run;
//!    `from` is a worker of the MPI source rank (passed in, never read from the bytes);
//!    `to rank` and `to` are this rank and this worker; total bytes equals the length
//!    received;
//! 2. segments: each header fits; flags known; trustees strictly increasing; for requests
//!    the trustee is a worker of this rank and the pair sequence number is within the window
//!    of the next one expected for `(from, trustee)`; for responses the trustee is a worker
//!    of the source rank and `(trustee, pair seq)` names a batch in flight from this client;
//!    the segments tile the rest of the envelope exactly;
//! 3. records: every code id names a table (`code_id::resolve`), or is a control id with
//!    its fixed fields ([`CONTROL_SPAWN`], [`CONTROL_JOINED`], [`CONTROL_LAUNCH`],
//!    [`CONTROL_RELEASE`], [`CONTROL_GRANT`]: the table they name resolved and of the right kind, sizes,
//!    status, non-zero weight, client count, padding; any
//!    validator), or [`LOOPBACK_CONTROL`] in a loopback validator (whose record is the
//!    in-process record of a runtime-internal request and never leaves the process); the
//!    other control ids are refused as not yet supported, and a `KIND_LAUNCH` table outside
//!    a launch record is refused; a target with [`ADDR_TARGET`] set (in a request, a launch
//!    or a release record) is refused unless in loopback mode; every argument has exactly
//!    its table's size, or a length prefix within the bytes left and [`MAX_SERIALIZED_BYTES`]; the records tile the segment
//!    exactly and their count is the header's; the response such a request envelope needs
//!    (its fixed part: headers, fixed-size results, length prefixes and empty panic lists)
//!    fits [`Expect::max_response_bytes`]; for responses, every result has its in-flight
//!    table's size, and the panic list is well formed (indexes in range and increasing,
//!    UTF-8 messages).
//!
//! So a record handed out by an accepted [`Envelope`] has a real table (`code_id`'s
//! argument) and an argument of exactly the size its `run` reads; by `remote`'s module docs
//! running it is then safe for any argument bytes, given a valid target. Targets are the one
//! thing left: the export table translates and checks them as each record runs
//! (`docs/rack-mode.md` §3.4 item 4, §5.2).

use super::code_id::{code_id, resolve, BadCode};
use super::remote::{RemoteVTable, RunError, KIND_LAUNCH, KIND_SPAWN, MAX_SERIALIZED_BYTES};
use crate::channel::record::MAX_RESULT_BYTES;
use std::fmt;

/// Envelope header size.
pub(crate) const HEADER_BYTES: usize = 64;
/// Segment header size.
pub(crate) const SEGMENT_HEADER_BYTES: usize = 24;
/// Envelope kind: request batches.
pub(crate) const KIND_REQUESTS: u8 = 1;
/// Envelope kind: response batches.
pub(crate) const KIND_RESPONSES: u8 = 2;
/// Segment flag: one table for all records, written once.
pub(crate) const FLAG_UNIFORM: u32 = 1;
/// The longest panic message a response carries (longer ones are cut at a char boundary).
pub(crate) const MAX_PANIC_MESSAGE: usize = 4096;

/// The header fields of an envelope, as the encoder takes them and [`Envelope`] gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// The job token.
    pub(crate) token: u64,
    /// The job's run.
    pub(crate) job_run: u32,
    /// Global id of the sending worker.
    pub(crate) from: u32,
    /// The receiving rank.
    pub(crate) to_rank: u32,
    /// Global id of the receiving worker.
    pub(crate) to: u32,
    /// The sender's envelope sequence number (not checked).
    pub(crate) seq: u64,
}

/// What the receiving worker knows about its job (both directions).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    /// This job's token.
    pub(crate) token: u64,
    /// The current run.
    pub(crate) job_run: u32,
    /// Global id of the receiving worker.
    pub(crate) me: u32,
    /// Workers per rank (`W`).
    pub(crate) workers: u32,
    /// Ranks (`R`).
    pub(crate) ranks: u32,
}

/// What a trustee's rank expects of a request envelope.
pub(crate) struct Expect<'a> {
    /// The job.
    pub(crate) job: Job,
    /// The most bytes the response to one request envelope may take (its fixed part).
    pub(crate) max_response_bytes: usize,
    /// The next pair sequence number expected from `(client, trustee)` (global ids).
    pub(crate) next_seq: &'a dyn Fn(u32, u32) -> u64,
    /// How many batches of one pair may arrive ahead of the next expected (the credits, at
    /// least 1): a batch is accepted if `0 <= seq - next < seq_window`.
    pub(crate) seq_window: u64,
    /// Whether [`LOOPBACK_CONTROL`] records are accepted: only by the loopback transport
    /// (`crate::runtime::remote`), whose envelopes never leave the process. Every other
    /// validator refuses them ([`Fault::LoopbackOnly`]).
    pub(crate) loopback: bool,
}

/// The reserved control id of a *loopback control record*: a runtime-internal request (a free
/// handed to the property's owner, a quiescence wake-up: records without a `RemoteVTable`)
/// crossing between fake ranks of one process. Its argument names the in-process record (the
/// loopback transport's: the address and length of a box holding it), which means something
/// only inside the process that wrote it: only a validator with [`Expect::loopback`] accepts
/// it.
/// Remote spawns, joins and launches already travel as typed control records
/// ([`CONTROL_SPAWN`], [`CONTROL_JOINED`], [`CONTROL_LAUNCH`]); the free hand-offs these
/// records still carry become `Release`/`Grant` records with the export table
/// (`docs/rack-mode.md` §4.4, §5).
pub(crate) const LOOPBACK_CONTROL: u64 = super::code_id::CONTROL_IDS;

/// The table that stands for a [`LOOPBACK_CONTROL`] record in a batch's list of tables: a
/// serialized argument, no result. Its `magic` is 0, so it is not a `RemoteVTable` any code id
/// can name, and its `run` refuses.
pub(crate) static LOOPBACK_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 0,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// `run` of [`LOOPBACK_TABLE`]: a loopback control record is run by the loopback transport
/// itself, never through a table.
///
/// # Safety
/// None (it touches nothing).
unsafe fn refuse_loopback_run(_: *mut u8, _: &[u8], out: &mut Vec<u8>) -> Result<(), RunError> {
    let _ = out;
    Err(RunError::Refused("a loopback control record has no table to run".into()))
}

/// True when `vt` is [`LOOPBACK_TABLE`].
pub(crate) fn is_loopback_table(vt: &RemoteVTable) -> bool {
    std::ptr::eq(vt, &LOOPBACK_TABLE)
}

/// Control id of a remote spawn (`docs/rack-mode.md` §4.4 `Spawn`). Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `1` (this id) |
/// | 8 | join id: names the waiting `JoinHandle` on the sending worker |
/// | 8 | code id of a [`KIND_SPAWN`] table (`RemoteVTable::of_spawn`) |
/// | `arg_bytes` of that table | the `Plain` argument, rounded up to 8 |
///
/// Its response is an empty result (answered like any request).
pub(crate) const CONTROL_SPAWN: u64 = 1;

/// Control id of the end of a remote spawn (`docs/rack-mode.md` §4.4 `Joined`), sent by the
/// spawned fiber's worker to the worker that spawned it. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `2` (this id) |
/// | 8 | join id (the `Spawn`'s) |
/// | 4 | status: 0 the fiber returned, 1 it panicked |
/// | 4 | `len`: at most [`MAX_RESULT_BYTES`] for a result, [`MAX_PANIC_MESSAGE`] for a panic |
/// | `len` | the result's bytes, or the panic message (UTF-8, named with rank and worker) |
/// | to a multiple of 8 | zero |
///
/// Its response is an empty result. The receiver checks the join id and the result's size
/// against the `JoinHandle` it names.
pub(crate) const CONTROL_JOINED: u64 = 2;

/// Control id of a remote `launch` on a `Latch` property (`docs/rack-mode.md` §4.4
/// `Launch`): a spawn on the property's trustee whose fiber runs a [`KIND_LAUNCH`] table on
/// the latch. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `3` (this id) |
/// | 8 | join id (answered by a [`CONTROL_JOINED`] record) |
/// | 8 | code id of a [`KIND_LAUNCH`] table (`RemoteVTable::of_launch`) |
/// | 8 | target: the property, as in a request record |
/// | `arg_bytes` of that table | the `Plain` argument, rounded up to 8 |
pub(crate) const CONTROL_LAUNCH: u64 = 3;

/// Control id of a return of weight to an export slot (`docs/rack-mode.md` §5.2 item 4
/// `Release`), sent by a rank whose last handle of a proxy was dropped to the property's
/// trustee. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `4` (this id) |
/// | 8 | target: export slot (low 32 bits) and generation (high 32 bits), as in a request |
/// | 8 | `weight`: the proxy's weight, at least 1 |
/// | 4 | `n`: the sending rank's workers counted, at most [`MAX_RELEASE_CLIENTS`] |
/// | 4 | zero |
/// | 8·`n` | `issued[c]`: requests worker `c` of the sending rank had issued to the trustee |
///
/// Its response is an empty result. The trustee applies the return only once it has served
/// `issued[c]` requests from every client `c` (`crate::runtime::export::Owner::process`),
/// and checks the slot, generation, weight and client count against its export table.
pub(crate) const CONTROL_RELEASE: u64 = 4;

/// Control id of a request for more weight (`docs/rack-mode.md` §5.2 item 5 `Grant`), sent by
/// a proxy whose weight runs low to the property's trustee. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `5` (this id) |
/// | 8 | target: export slot (low 32 bits) and generation (high 32 bits), as in a request |
///
/// Its response is a result of 8 bytes: the weight granted (`W0`), which the trustee has
/// added to the slot's budget and the proxy adds to its weight.
pub(crate) const CONTROL_GRANT: u64 = 5;

/// The most clients a [`CONTROL_RELEASE`] record may list (a bound on the record's size; the
/// trustee's export table checks the sending rank's real worker count).
pub(crate) const MAX_RELEASE_CLIENTS: usize = 1 << 16;

/// Status of a [`CONTROL_JOINED`] record: the fiber returned.
pub(crate) const JOINED_OK: u32 = 0;
/// Status of a [`CONTROL_JOINED`] record: the fiber panicked.
pub(crate) const JOINED_PANIC: u32 = 1;

/// The table that stands for a [`CONTROL_SPAWN`] record in a batch's list of tables (no
/// result). Like [`LOOPBACK_TABLE`] its `magic` is 0 (no code id names it) and its `run`
/// refuses: the transport runs control records itself.
pub(crate) static SPAWN_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 0,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// The table that stands for a [`CONTROL_LAUNCH`] record (as [`SPAWN_TABLE`]).
pub(crate) static LAUNCH_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 0,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// The table that stands for a [`CONTROL_JOINED`] record (as [`SPAWN_TABLE`]).
pub(crate) static JOINED_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 0,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// The table that stands for a [`CONTROL_GRANT`] record (as [`SPAWN_TABLE`], with an 8-byte
/// result: the weight granted).
pub(crate) static GRANT_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    // Not a fixed size: a control record never goes into a uniform segment.
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 8,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// The table that stands for a [`CONTROL_RELEASE`] record (as [`SPAWN_TABLE`]).
pub(crate) static RELEASE_TABLE: RemoteVTable = RemoteVTable {
    magic: 0,
    arg_bytes: super::remote::LEN_PREFIXED,
    result_bytes: 0,
    kind: 0,
    run: refuse_loopback_run,
    target_type: std::any::type_name::<()>,
    run_uniform: None,
};

/// The control id `vt` stands for, if it is one of the control tables.
pub(crate) fn control_id(vt: &RemoteVTable) -> Option<u64> {
    if std::ptr::eq(vt, &SPAWN_TABLE) {
        Some(CONTROL_SPAWN)
    } else if std::ptr::eq(vt, &JOINED_TABLE) {
        Some(CONTROL_JOINED)
    } else if std::ptr::eq(vt, &LAUNCH_TABLE) {
        Some(CONTROL_LAUNCH)
    } else if std::ptr::eq(vt, &RELEASE_TABLE) {
        Some(CONTROL_RELEASE)
    } else if std::ptr::eq(vt, &GRANT_TABLE) {
        Some(CONTROL_GRANT)
    } else {
        None
    }
}

/// The parts of an accepted [`CONTROL_SPAWN`] record's argument: the spawn table (resolved
/// again: validation resolved it already) and the `Plain` argument's bytes.
pub(crate) fn spawn_parts(arg: &[u8]) -> Result<(&'static RemoteVTable, &[u8]), BadCode> {
    let code = if arg.len() >= 8 { le64(arg, 0) } else { 0 };
    Ok((resolve(code)?, &arg[8..]))
}

/// The parts of an accepted [`CONTROL_LAUNCH`] record's argument: the launch table
/// (resolved again), the property's target word and the `Plain` argument's bytes.
pub(crate) fn launch_parts(arg: &[u8]) -> Result<(&'static RemoteVTable, u64, &[u8]), BadCode> {
    let code = if arg.len() >= 16 { le64(arg, 0) } else { 0 };
    Ok((resolve(code)?, le64(arg, 8), &arg[16..]))
}

/// The parts of an accepted [`CONTROL_JOINED`] record's argument: `Ok(result bytes)` or
/// `Err(panic message)`.
pub(crate) fn joined_parts(arg: &[u8]) -> Result<&[u8], &str> {
    let (status, len) = (le32(arg, 0), le32(arg, 4) as usize);
    let bytes = &arg[8..8 + len];
    if status == JOINED_OK {
        Ok(bytes)
    } else {
        Err(std::str::from_utf8(bytes).unwrap_or("<bad panic message>"))
    }
}

/// The parts of an accepted [`CONTROL_RELEASE`] record's argument: the weight and the
/// `issued` counts, one per worker of the sending rank.
pub(crate) fn release_parts(arg: &[u8]) -> (u64, impl Iterator<Item = u64> + '_) {
    let n = le32(arg, 8) as usize;
    (le64(arg, 0), (0..n).map(move |c| le64(arg, 16 + 8 * c)))
}

/// The argument bytes of a [`CONTROL_RELEASE`] record (weight, count, zero, `issued`).
pub(crate) fn release_body(weight: u64, issued: &[u64]) -> Vec<u8> {
    assert!(weight > 0, "skein: a release of zero weight");
    assert!(issued.len() <= MAX_RELEASE_CLIENTS, "skein: a release lists too many clients");
    let mut out = Vec::with_capacity(16 + 8 * issued.len());
    out.extend_from_slice(&weight.to_le_bytes());
    out.extend_from_slice(&(issued.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for n in issued {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out
}

/// The argument bytes of a [`CONTROL_JOINED`] record (status, length, bytes, zero padding).
/// A panic message longer than [`MAX_PANIC_MESSAGE`] is cut at a char boundary.
pub(crate) fn joined_body(result: Result<&[u8], &str>) -> Vec<u8> {
    let (status, bytes) = match result {
        Ok(b) => {
            assert!(b.len() <= MAX_RESULT_BYTES, "skein: spawn result too big");
            (JOINED_OK, b)
        }
        Err(msg) => {
            let mut cut = msg.len().min(MAX_PANIC_MESSAGE);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            (JOINED_PANIC, &msg.as_bytes()[..cut])
        }
    };
    let mut out = Vec::with_capacity(8 + bytes.len().next_multiple_of(8));
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
    out.resize(out.len() + pad_of(bytes.len()), 0);
    out
}

/// Reads a control record's target and argument (after its id): its fixed fields and sizes
/// (the layouts of [`CONTROL_SPAWN`], [`CONTROL_JOINED`], [`CONTROL_LAUNCH`] and
/// [`CONTROL_RELEASE`]).
fn read_control<'b>(r: &mut Reader<'b>, id: u64, loopback: bool) -> Result<Record<'b>, Fault> {
    let target = r.u64().ok_or(Fault::Overrun)?;
    let start = r.at;
    let vt = match id {
        CONTROL_SPAWN => {
            let code = r.u64().ok_or(Fault::Overrun)?;
            let spawn = resolve(code).map_err(Fault::Code)?;
            if spawn.kind != KIND_SPAWN || spawn.arg_prefixed() {
                return Err(Fault::Control("spawn record naming a table that is not a spawn"));
            }
            r.take(spawn.arg_bytes as usize).ok_or(Fault::Overrun)?;
            &SPAWN_TABLE
        }
        CONTROL_LAUNCH => {
            let code = r.u64().ok_or(Fault::Overrun)?;
            let launch = resolve(code).map_err(Fault::Code)?;
            if launch.kind != KIND_LAUNCH || launch.arg_prefixed() {
                return Err(Fault::Control("launch record naming a table that is not a launch"));
            }
            check_target(r.u64().ok_or(Fault::Overrun)?, loopback)?;
            r.take(launch.arg_bytes as usize).ok_or(Fault::Overrun)?;
            &LAUNCH_TABLE
        }
        CONTROL_JOINED => {
            let status = r.u32().ok_or(Fault::Overrun)?;
            let len = r.u32().ok_or(Fault::Overrun)? as usize;
            let max = match status {
                JOINED_OK => MAX_RESULT_BYTES,
                JOINED_PANIC => MAX_PANIC_MESSAGE,
                _ => return Err(Fault::Control("joined record with an unknown status")),
            };
            if len > max {
                return Err(Fault::Length(len as u32));
            }
            let bytes = r.take(len).ok_or(Fault::Overrun)?;
            if status == JOINED_PANIC && std::str::from_utf8(bytes).is_err() {
                return Err(Fault::Control("joined record with a panic message that is not UTF-8"));
            }
            let pad = r.take(pad_of(len)).ok_or(Fault::Overrun)?;
            if pad.iter().any(|&b| b != 0) {
                return Err(Fault::Padding);
            }
            &JOINED_TABLE
        }
        CONTROL_GRANT => {
            if target & ADDR_TARGET != 0 {
                return Err(Fault::AddressTarget(target));
            }
            &GRANT_TABLE
        }
        CONTROL_RELEASE => {
            if target & ADDR_TARGET != 0 {
                return Err(Fault::AddressTarget(target));
            }
            if r.u64().ok_or(Fault::Overrun)? == 0 {
                return Err(Fault::Control("release record of zero weight"));
            }
            let n = r.u32().ok_or(Fault::Overrun)? as usize;
            if r.u32().ok_or(Fault::Overrun)? != 0 {
                return Err(Fault::Padding);
            }
            if n > MAX_RELEASE_CLIENTS {
                return Err(Fault::Control("release record listing too many clients"));
            }
            r.take(8 * n).ok_or(Fault::Overrun)?;
            &RELEASE_TABLE
        }
        _ => return Err(Fault::Code(BadCode::Control(id))),
    };
    Ok(Record { vt, target, arg: &r.b[start..r.at] })
}

/// The tables of the records of the batch in flight to `(trustee, pair seq)`, or `None`.
pub(crate) type InFlight<'a> = dyn Fn(u32, u64) -> Option<&'a [&'static RemoteVTable]> + 'a;

/// What a client expects of a response envelope.
pub(crate) struct ExpectResponse<'a> {
    /// The job.
    pub(crate) job: Job,
    /// The batches this client has in flight. The accepted [`Response`] calls it again to
    /// walk its segments, so it must answer the same until the `Response` is dropped.
    pub(crate) in_flight: &'a InFlight<'a>,
}

/// A refused envelope: who sent it and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad batch from rank {rank}: {reason}")]
pub(crate) struct BadBatch {
    /// The MPI source rank.
    pub(crate) rank: usize,
    /// What is wrong.
    pub(crate) reason: Reason,
}

/// Why an envelope was refused. Offsets are from the envelope's start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Reason {
    /// Shorter than a header.
    #[error("{0} bytes, shorter than the {HEADER_BYTES}-byte header")]
    Short(usize),
    /// Not the expected kind.
    #[error("envelope kind {got}, expected {want}")]
    Kind {
        /// Found.
        got: u8,
        /// Expected.
        want: u8,
    },
    /// A reserved header byte is not zero.
    #[error("reserved header byte {0} is not zero")]
    Reserved(usize),
    /// Another job's token.
    #[error("job token {0:#018x} is not this job's")]
    Token(u64),
    /// Another run.
    #[error("job run {got}, this is run {want}")]
    JobRun {
        /// Found.
        got: u32,
        /// Expected.
        want: u32,
    },
    /// The sending worker is not on the source rank.
    #[error("sending worker {0} is not a worker of the source rank")]
    From(u32),
    /// Sent to another rank or worker.
    #[error("addressed to rank {rank} worker {to}, this is worker {me}")]
    To {
        /// The header's rank.
        rank: u32,
        /// The header's worker.
        to: u32,
        /// This worker.
        me: u32,
    },
    /// The header's length is not the length received.
    #[error("header says {header} bytes, {received} received")]
    Total {
        /// The header's.
        header: u32,
        /// Received.
        received: usize,
    },
    /// No segments.
    #[error("no segments")]
    NoSegments,
    /// A segment header or body runs past the end.
    #[error("segment {segment} at byte {at} runs past the end of the envelope")]
    SegmentOverrun {
        /// Segment index.
        segment: u32,
        /// Its offset.
        at: usize,
    },
    /// Bytes left after the last segment.
    #[error("{0} byte(s) after the last segment")]
    Trailing(usize),
    /// Unknown segment flags.
    #[error("segment {segment}: unknown flags {flags:#x}")]
    Flags {
        /// Segment index.
        segment: u32,
        /// The flags.
        flags: u32,
    },
    /// The trustee is not where it must be, or out of order.
    #[error("segment {segment}: trustee {trustee} is not a worker of {what}")]
    Trustee {
        /// Segment index.
        segment: u32,
        /// The trustee.
        trustee: u32,
        /// "this rank", "the source rank", or "increasing order".
        what: &'static str,
    },
    /// A pair sequence number out of the window.
    #[error("segment {segment}: pair seq {got} from worker {from} to trustee {trustee}, expected {want} (window {window})")]
    PairSeq {
        /// Segment index.
        segment: u32,
        /// Client.
        from: u32,
        /// Trustee.
        trustee: u32,
        /// Found.
        got: u64,
        /// Next expected.
        want: u64,
        /// Accepted window.
        window: u64,
    },
    /// A response to no batch in flight.
    #[error("segment {segment}: no batch {seq} to trustee {trustee} in flight")]
    NotInFlight {
        /// Segment index.
        segment: u32,
        /// Trustee.
        trustee: u32,
        /// Pair seq.
        seq: u64,
    },
    /// A record count that does not fit.
    #[error("segment {segment}: {records} record(s) in {bytes} bytes (expected {expected})")]
    Records {
        /// Segment index.
        segment: u32,
        /// The header's count.
        records: u32,
        /// The header's body bytes.
        bytes: u32,
        /// What the rest of the envelope implies (records, or bytes for uniform segments).
        expected: u64,
    },
    /// A bad record.
    #[error("segment {segment}, record {record} (byte {at}): {fault}")]
    Record {
        /// Segment index.
        segment: u32,
        /// Record index in the segment.
        record: u32,
        /// Offset of the record.
        at: usize,
        /// What is wrong.
        fault: Fault,
    },
    /// A request segment with no records.
    #[error("segment {0} has no records")]
    EmptySegment(u32),
    /// A uniform segment of a table with serialized arguments.
    #[error("segment {0}: uniform, but its records have serialized arguments")]
    UniformPrefixed(u32),
    /// The response would not fit.
    #[error("its response needs {need} bytes, more than {max}")]
    ResponseSpace {
        /// Needed.
        need: u64,
        /// Allowed.
        max: usize,
    },
    /// A record whose target was refused as it ran (`docs/rack-mode.md` §3.4 item 4), or a
    /// segment for another worker than the one serving it.
    #[error("segment {segment}, record {record}: {why}")]
    Target {
        /// Segment index.
        segment: u32,
        /// Record index in the segment.
        record: u32,
        /// What is wrong.
        why: String,
    },
    /// A bad panic list.
    #[error("segment {segment}: panic list at byte {at}: {what}")]
    Panics {
        /// Segment index.
        segment: u32,
        /// Offset of the offending entry.
        at: usize,
        /// What is wrong.
        what: &'static str,
    },
}

/// What is wrong with one record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Fault {
    /// Runs past the end of its segment.
    #[error("runs past the end of its segment")]
    Overrun,
    /// The code id names no table.
    #[error("{0}")]
    Code(BadCode),
    /// A length prefix over the limit.
    #[error("serialized length {0} over the limit")]
    Length(u32),
    /// Non-zero padding or reserved bytes.
    #[error("non-zero padding")]
    Padding,
    /// A control record whose fixed fields are wrong.
    #[error("{0}")]
    Control(&'static str),
    /// A loopback control record outside a loopback run.
    #[error(
        "loopback control record (id {LOOPBACK_CONTROL}) refused: only a loopback run accepts it"
    )]
    LoopbackOnly,
    /// An address target (`ADDR_TARGET` set) outside a loopback run.
    #[error("address target {0:#x} refused: only a loopback run accepts one, not an export")]
    AddressTarget(u64),
}

/// Wire target bit: an address in the sending process, not an export `(slot, gen)`
/// (`crate::runtime::export::ADDR_TARGET`); accepted only by a validator in loopback mode.
pub(crate) const ADDR_TARGET: u64 = 1 << 63;

/// Checks a target word against the validator's mode (an address only in loopback mode).
fn check_target(target: u64, loopback: bool) -> Result<u64, Fault> {
    if target & ADDR_TARGET != 0 && !loopback {
        return Err(Fault::AddressTarget(target));
    }
    Ok(target)
}

/// Bytes from `b`, with a position; every read is checked.
#[derive(Debug, Clone)]
struct Reader<'b> {
    b: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn new(b: &'b [u8]) -> Self {
        Reader { b, at: 0 }
    }
    fn left(&self) -> usize {
        self.b.len() - self.at
    }
    fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    }
    /// `len: u32 | 0u32 | len bytes | zero padding`; returns the `len` bytes.
    fn prefixed(&mut self, max: usize) -> Result<&'b [u8], Fault> {
        let len = self.u32().ok_or(Fault::Overrun)?;
        if self.u32().ok_or(Fault::Overrun)? != 0 {
            return Err(Fault::Padding);
        }
        if len as usize > max {
            return Err(Fault::Length(len));
        }
        let bytes = self.take(len as usize).ok_or(Fault::Overrun)?;
        let pad = self.take(pad_of(len as usize)).ok_or(Fault::Overrun)?;
        if pad.iter().any(|&b| b != 0) {
            return Err(Fault::Padding);
        }
        Ok(bytes)
    }
}

fn pad_of(n: usize) -> usize {
    n.next_multiple_of(8) - n
}

/// The `u32` at `b[at..at + 4]` (panics if out of bounds: callers check lengths first).
#[inline]
fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The `u64` at `b[at..at + 8]` (one bounds check and one load).
#[inline]
fn le64(b: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// One request, as an accepted envelope hands it out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'b> {
    /// Its table (resolved from the code id).
    pub(crate) vt: &'static RemoteVTable,
    /// The target word: export slot (low 32 bits) and generation (high 32 bits).
    pub(crate) target: u64,
    /// The argument: `arg_bytes` bytes, or a serialized argument without its prefix.
    pub(crate) arg: &'b [u8],
}

/// Reads one record (the code id is `uniform`'s if given, else read first).
fn read_record<'b>(
    r: &mut Reader<'b>,
    uniform: Option<&'static RemoteVTable>,
    loopback: bool,
) -> Result<Record<'b>, Fault> {
    let vt = match uniform {
        Some(vt) => vt,
        None => match r.u64().ok_or(Fault::Overrun)? {
            LOOPBACK_CONTROL if loopback => &LOOPBACK_TABLE,
            LOOPBACK_CONTROL => return Err(Fault::LoopbackOnly),
            id @ (CONTROL_SPAWN | CONTROL_JOINED | CONTROL_LAUNCH | CONTROL_RELEASE
            | CONTROL_GRANT) => return read_control(r, id, loopback),
            code => match resolve(code).map_err(Fault::Code)? {
                // (A uniform segment's table was checked once, in `validate_requests`.)
                vt if vt.kind == KIND_LAUNCH => {
                    return Err(Fault::Control("a launch table outside a launch record"))
                }
                vt => vt,
            },
        },
    };
    let target = check_target(r.u64().ok_or(Fault::Overrun)?, loopback)?;
    let arg = if vt.arg_prefixed() {
        r.prefixed(MAX_SERIALIZED_BYTES)?
    } else {
        r.take(vt.arg_bytes as usize).ok_or(Fault::Overrun)?
    };
    Ok(Record { vt, target, arg })
}

/// The fixed part of a result in the response: its bytes, or its length prefix.
fn fixed_result_bytes(vt: &RemoteVTable) -> u64 {
    if vt.result_prefixed() {
        8
    } else {
        vt.result_bytes as u64
    }
}

/// A segment header, read.
#[derive(Debug, Clone, Copy)]
struct SegHead {
    trustee: u32,
    flags: u32,
    pair_seq: u64,
    records: u32,
    bytes: u32,
}

fn read_seg_head(r: &mut Reader<'_>) -> Option<SegHead> {
    Some(SegHead {
        trustee: r.u32()?,
        flags: r.u32()?,
        pair_seq: r.u64()?,
        records: r.u32()?,
        bytes: r.u32()?,
    })
}

/// Header checks shared by both directions (rule 1).
fn check_head(bytes: &[u8], from_rank: usize, job: &Job, kind: u8) -> Result<(Head, u32), Reason> {
    if bytes.len() < HEADER_BYTES {
        return Err(Reason::Short(bytes.len()));
    }
    if bytes[12] != kind {
        return Err(Reason::Kind { got: bytes[12], want: kind });
    }
    if let Some(i) = (13..16).chain(44..64).find(|&i| bytes[i] != 0) {
        return Err(Reason::Reserved(i));
    }
    let head = Head {
        token: le64(bytes, 0),
        job_run: le32(bytes, 8),
        from: le32(bytes, 16),
        to_rank: le32(bytes, 20),
        to: le32(bytes, 40),
        seq: le64(bytes, 24),
    };
    if head.token != job.token {
        return Err(Reason::Token(head.token));
    }
    if head.job_run != job.job_run {
        return Err(Reason::JobRun { got: head.job_run, want: job.job_run });
    }
    if rank_of(head.from, job) != Some(from_rank) {
        return Err(Reason::From(head.from));
    }
    if head.to != job.me || rank_of(head.to, job) != Some(head.to_rank as usize) {
        return Err(Reason::To { rank: head.to_rank, to: head.to, me: job.me });
    }
    let total = le32(bytes, 36);
    if total as usize != bytes.len() {
        return Err(Reason::Total { header: total, received: bytes.len() });
    }
    let segments = le32(bytes, 32);
    if segments == 0 {
        return Err(Reason::NoSegments);
    }
    Ok((head, segments))
}

/// The rank of global worker `g`, if `g` is a worker of the job.
fn rank_of(g: u32, job: &Job) -> Option<usize> {
    let w = job.workers.max(1);
    let r = g / w;
    (r < job.ranks).then_some(r as usize)
}

/// An accepted request envelope ([`validate`]).
#[derive(Debug, Clone)]
pub(crate) struct Envelope<'b> {
    /// Its header.
    pub(crate) head: Head,
    segments: u32,
    /// The segments' bytes (after the header).
    body: &'b [u8],
    /// The fixed part of its response's size (rule 3).
    #[cfg_attr(not(test), allow(dead_code))] // read by the tests only
    pub(crate) response_bytes: u64,
    /// Validated with [`Expect::loopback`].
    loopback: bool,
}

/// One segment of an accepted request envelope.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment<'b> {
    /// The trustee (global id).
    pub(crate) trustee: u32,
    /// The batch's pair sequence number.
    pub(crate) pair_seq: u64,
    /// Records of one table, written once.
    pub(crate) uniform: Option<&'static RemoteVTable>,
    /// How many records.
    pub(crate) records: u32,
    /// The records' bytes (after the code id, for uniform segments).
    body: &'b [u8],
    /// Validated with [`Expect::loopback`].
    loopback: bool,
}

/// Checks a request envelope received from MPI source rank `from_rank` (module docs, rules
/// 1–3) and returns its view, or why it is refused. Runs nothing.
pub(crate) fn validate<'b>(
    bytes: &'b [u8],
    from_rank: usize,
    expect: &Expect<'_>,
) -> Result<Envelope<'b>, BadBatch> {
    validate_requests(bytes, from_rank, expect)
        .map_err(|reason| BadBatch { rank: from_rank, reason })
}

fn validate_requests<'b>(
    bytes: &'b [u8],
    from_rank: usize,
    expect: &Expect<'_>,
) -> Result<Envelope<'b>, Reason> {
    let job = &expect.job;
    let (head, segments) = check_head(bytes, from_rank, job, KIND_REQUESTS)?;
    let my_rank = rank_of(job.me, job);
    let mut r = Reader::new(bytes);
    r.at = HEADER_BYTES;
    let mut response = HEADER_BYTES as u64;
    let mut last_trustee = None;
    for s in 0..segments {
        let at = r.at;
        let h = read_seg_head(&mut r).ok_or(Reason::SegmentOverrun { segment: s, at })?;
        if h.flags & !FLAG_UNIFORM != 0 {
            return Err(Reason::Flags { segment: s, flags: h.flags });
        }
        if rank_of(h.trustee, job) != my_rank {
            return Err(Reason::Trustee { segment: s, trustee: h.trustee, what: "this rank" });
        }
        if last_trustee.is_some_and(|t| t >= h.trustee) {
            return Err(Reason::Trustee {
                segment: s,
                trustee: h.trustee,
                what: "increasing order",
            });
        }
        last_trustee = Some(h.trustee);
        let want = (expect.next_seq)(head.from, h.trustee);
        if h.pair_seq.wrapping_sub(want) >= expect.seq_window.max(1) {
            return Err(Reason::PairSeq {
                segment: s,
                from: head.from,
                trustee: h.trustee,
                got: h.pair_seq,
                want,
                window: expect.seq_window.max(1),
            });
        }
        let body = r.take(h.bytes as usize).ok_or(Reason::SegmentOverrun { segment: s, at })?;
        let body_at = at + SEGMENT_HEADER_BYTES;
        let records_err =
            |expected| Reason::Records { segment: s, records: h.records, bytes: h.bytes, expected };
        if h.records == 0 {
            return Err(Reason::EmptySegment(s));
        }
        response += SEGMENT_HEADER_BYTES as u64 + 8; // header, empty panic list
        if h.flags & FLAG_UNIFORM != 0 {
            let mut b = Reader::new(body);
            let code = b.u64().ok_or(records_err(8))?;
            let vt = resolve(code).map_err(|e| Reason::Record {
                segment: s,
                record: 0,
                at: body_at,
                fault: Fault::Code(e),
            })?;
            if vt.kind == KIND_LAUNCH {
                return Err(Reason::Record {
                    segment: s,
                    record: 0,
                    at: body_at,
                    fault: Fault::Control("a launch table outside a launch record"),
                });
            }
            if vt.arg_prefixed() {
                return Err(Reason::UniformPrefixed(s));
            }
            let size = 8 + h.records as u64 * (8 + vt.arg_bytes as u64);
            if size != h.bytes as u64 {
                return Err(records_err(size));
            }
            if !expect.loopback {
                // Address targets are refused outside loopback mode: one word per record
                // (the rest of a uniform segment stays O(1)).
                let stride = 8 + vt.arg_bytes as usize;
                for k in 0..h.records as usize {
                    let at = 8 + k * stride;
                    check_target(le64(body, at), false).map_err(|fault| Reason::Record {
                        segment: s,
                        record: k as u32,
                        at: body_at + at,
                        fault,
                    })?;
                }
            }
            response += h.records as u64 * fixed_result_bytes(vt);
        } else {
            // Each record takes 16 bytes or more: refuse an impossible count before looping.
            if h.records as u64 * 16 > h.bytes as u64 {
                return Err(records_err(h.bytes as u64 / 16));
            }
            let mut b = Reader::new(body);
            for k in 0..h.records {
                let rec_at = body_at + b.at;
                let rec = read_record(&mut b, None, expect.loopback)
                    .map_err(|fault| Reason::Record { segment: s, record: k, at: rec_at, fault })?;
                response += fixed_result_bytes(rec.vt);
            }
            if b.left() != 0 {
                return Err(Reason::Record {
                    segment: s,
                    record: h.records,
                    at: body_at + b.at,
                    fault: Fault::Overrun,
                });
            }
        }
    }
    if r.left() != 0 {
        return Err(Reason::Trailing(r.left()));
    }
    if response > expect.max_response_bytes as u64 {
        return Err(Reason::ResponseSpace { need: response, max: expect.max_response_bytes });
    }
    Ok(Envelope {
        head,
        segments,
        body: &bytes[HEADER_BYTES..],
        response_bytes: response,
        loopback: expect.loopback,
    })
}

impl<'b> Envelope<'b> {
    /// Its segments, in order.
    pub(crate) fn segments(&self) -> impl Iterator<Item = Segment<'b>> + '_ {
        let mut r = Reader::new(self.body);
        (0..self.segments).map_while(move |_| {
            let h = read_seg_head(&mut r)?;
            let mut body = r.take(h.bytes as usize)?;
            let uniform = if h.flags & FLAG_UNIFORM != 0 {
                let vt = resolve(le64(body, 0)).ok()?;
                body = &body[8..];
                Some(vt)
            } else {
                None
            };
            Some(Segment {
                trustee: h.trustee,
                pair_seq: h.pair_seq,
                uniform,
                records: h.records,
                body,
                loopback: self.loopback,
            })
        })
    }
}

impl<'b> Segment<'b> {
    /// Its records, in order.
    pub(crate) fn records(&self) -> impl Iterator<Item = Record<'b>> + '_ {
        let mut r = Reader::new(self.body);
        let (uniform, loopback) = (self.uniform, self.loopback);
        // Validation read every record already: these reads succeed.
        (0..self.records).map_while(move |_| read_record(&mut r, uniform, loopback).ok())
    }

    /// A uniform segment's table and its records' bytes (per record its target word, then
    /// its argument; the code id is not included); `None` for a mixed segment.
    pub(crate) fn uniform_body(&self) -> Option<(&'static RemoteVTable, &'b [u8])> {
        self.uniform.map(|vt| (vt, self.body))
    }

    /// The tables of its records, in order (what a client keeps for the response's check).
    #[cfg(test)]
    pub(crate) fn tables(&self) -> impl Iterator<Item = &'static RemoteVTable> + '_ {
        self.records().map(|r| r.vt)
    }
}

/// Starts an envelope: writes the header with placeholders for the counts.
#[cfg(any(test, feature = "testing"))]
fn start(kind: u8, head: &Head) -> Vec<u8> {
    start_in(Vec::with_capacity(4096), kind, head)
}

/// [`start`] in the buffer `buf` (its contents are dropped, its capacity kept).
fn start_in(mut buf: Vec<u8>, kind: u8, head: &Head) -> Vec<u8> {
    buf.clear();
    buf.extend_from_slice(&head.token.to_le_bytes());
    buf.extend_from_slice(&head.job_run.to_le_bytes());
    buf.extend_from_slice(&[kind, 0, 0, 0]);
    buf.extend_from_slice(&head.from.to_le_bytes());
    buf.extend_from_slice(&head.to_rank.to_le_bytes());
    buf.extend_from_slice(&head.seq.to_le_bytes());
    buf.extend_from_slice(&[0; 8]); // segments, total: at `finish`
    buf.extend_from_slice(&head.to.to_le_bytes());
    buf.extend_from_slice(&[0; 20]);
    debug_assert_eq!(buf.len(), HEADER_BYTES);
    buf
}

/// The open segment of a writer.
#[derive(Debug)]
struct Open {
    at: usize,
    records: u32,
    uniform: Option<&'static RemoteVTable>,
}

fn begin(buf: &mut Vec<u8>, trustee: u32, flags: u32, pair_seq: u64) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&trustee.to_le_bytes());
    buf.extend_from_slice(&flags.to_le_bytes());
    buf.extend_from_slice(&pair_seq.to_le_bytes());
    buf.extend_from_slice(&[0; 8]); // records, bytes: at `end`
    at
}

fn end(buf: &mut [u8], open: &Open) {
    let bytes = (buf.len() - open.at - SEGMENT_HEADER_BYTES) as u32;
    buf[open.at + 16..open.at + 20].copy_from_slice(&open.records.to_le_bytes());
    buf[open.at + 20..open.at + 24].copy_from_slice(&bytes.to_le_bytes());
}

fn finish(mut buf: Vec<u8>, segments: u32) -> Vec<u8> {
    let total = u32::try_from(buf.len()).expect("skein: envelope over 4 GiB");
    buf[32..36].copy_from_slice(&segments.to_le_bytes());
    buf[36..40].copy_from_slice(&total.to_le_bytes());
    buf
}

/// Writes a request envelope: [`begin_segment`](Self::begin_segment), records,
/// [`end_segment`](Self::end_segment), ..., [`finish`](Self::finish). Misuse (a record
/// outside a segment, an argument of the wrong size) is a bug of the caller and panics.
#[derive(Debug)]
pub(crate) struct RequestWriter {
    buf: Vec<u8>,
    segments: u32,
    open: Option<Open>,
}

impl RequestWriter {
    /// An empty request envelope with this header.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(head: &Head) -> Self {
        RequestWriter { buf: start(KIND_REQUESTS, head), segments: 0, open: None }
    }

    /// [`RequestWriter::new`] writing into `buf` (a transport's buffer; its contents are
    /// dropped, its capacity kept).
    pub(crate) fn new_in(buf: Vec<u8>, head: &Head) -> Self {
        RequestWriter { buf: start_in(buf, KIND_REQUESTS, head), segments: 0, open: None }
    }

    /// Opens the segment of batch `pair_seq` to `trustee` (trustees in increasing order);
    /// with `uniform`, every record of the segment must use that table.
    pub(crate) fn begin_segment(
        &mut self,
        trustee: u32,
        pair_seq: u64,
        uniform: Option<&'static RemoteVTable>,
    ) {
        assert!(self.open.is_none(), "skein: segment already open");
        let flags = if uniform.is_some() { FLAG_UNIFORM } else { 0 };
        let at = begin(&mut self.buf, trustee, flags, pair_seq);
        if let Some(vt) = uniform {
            assert!(!vt.arg_prefixed(), "skein: a uniform segment needs fixed-size arguments");
            self.buf.extend_from_slice(&code_id(vt).to_le_bytes());
        }
        self.open = Some(Open { at, records: 0, uniform });
    }

    /// Writes a record's code id (unless uniform) and target word.
    fn push_head(&mut self, vt: &'static RemoteVTable, target: u64) {
        let open = self.open.as_mut().expect("skein: no segment open");
        match open.uniform {
            Some(u) => assert!(std::ptr::eq(u, vt), "skein: another table in a uniform segment"),
            None => self.buf.extend_from_slice(&code_id(vt).to_le_bytes()),
        }
        self.buf.extend_from_slice(&target.to_le_bytes());
        open.records += 1;
    }

    /// Appends a record: its table, its target word, its argument (`arg_bytes` bytes, or the
    /// serialized argument without a prefix).
    /// A control table ([`control_id`]) writes its control id, the target word and `arg` as
    /// it is (its fields, already laid out and padded by the caller).
    pub(crate) fn push(&mut self, vt: &'static RemoteVTable, target: u64, arg: &[u8]) {
        if let Some(id) = control_id(vt) {
            let open = self.open.as_mut().expect("skein: no segment open");
            assert!(open.uniform.is_none(), "skein: a control record in a uniform segment");
            assert!(arg.len() % 8 == 0, "skein: control record fields not padded");
            self.buf.extend_from_slice(&id.to_le_bytes());
            self.buf.extend_from_slice(&target.to_le_bytes());
            self.buf.extend_from_slice(arg);
            open.records += 1;
        } else if vt.arg_prefixed() {
            assert!(arg.len() <= MAX_SERIALIZED_BYTES, "skein: serialized argument too long");
            self.push_head(vt, target);
            super::remote::push_prefixed(&mut self.buf, arg);
        } else {
            assert_eq!(arg.len(), vt.arg_bytes as usize, "skein: argument of the wrong size");
            self.push_head(vt, target);
            self.buf.extend_from_slice(arg);
        }
    }

    /// Appends a record of table `vt`, whose argument has a fixed size, written in place:
    /// `write` appends exactly `arg_bytes` bytes to the envelope and returns the target word
    /// (a `RemoteHook::take_arg`, given the envelope instead of a scratch buffer: the
    /// argument is copied once, with its size known to the compiler).
    pub(crate) fn push_with(
        &mut self,
        vt: &'static RemoteVTable,
        write: impl FnOnce(&mut Vec<u8>) -> u64,
    ) {
        assert!(
            control_id(vt).is_none() && !vt.arg_prefixed(),
            "skein: push_with needs a table with fixed-size arguments"
        );
        self.push_head(vt, 0);
        let at = self.buf.len() - 8;
        let target = write(&mut self.buf);
        assert_eq!(
            self.buf.len() - at - 8,
            vt.arg_bytes as usize,
            "skein: argument of the wrong size"
        );
        self.buf[at..at + 8].copy_from_slice(&target.to_le_bytes());
    }

    /// Appends `n` records of table `vt` to the open uniform segment of that table, each
    /// written in place as by [`push_with`](Self::push_with): `write(i, buf)` appends record
    /// `i`'s argument (exactly `arg_bytes` bytes) and returns its target word.
    pub(crate) fn push_uniform(
        &mut self,
        vt: &'static RemoteVTable,
        n: usize,
        mut write: impl FnMut(usize, &mut Vec<u8>) -> u64,
    ) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(
            open.uniform.is_some_and(|u| std::ptr::eq(u, vt)),
            "skein: push_uniform outside a uniform segment of its table"
        );
        let size = vt.arg_bytes as usize;
        self.buf.reserve(n * (8 + size));
        for i in 0..n {
            let at = self.buf.len();
            self.buf.extend_from_slice(&[0; 8]);
            let target = write(i, &mut self.buf);
            assert_eq!(self.buf.len() - at - 8, size, "skein: argument of the wrong size");
            self.buf[at..at + 8].copy_from_slice(&target.to_le_bytes());
        }
        open.records += n as u32;
    }

    /// Appends `n` records of table `vt` to the open uniform segment of that table at once:
    /// `write(buf)` appends exactly `n` wire records (per record the target word, then
    /// `arg_bytes` bytes of argument), as [`push_uniform`](Self::push_uniform) would one by
    /// one (a `RemoteHook::take_uniform`).
    pub(crate) fn push_uniform_block(
        &mut self,
        vt: &'static RemoteVTable,
        n: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(
            open.uniform.is_some_and(|u| std::ptr::eq(u, vt)),
            "skein: push_uniform_block outside a uniform segment of its table"
        );
        let at = self.buf.len();
        write(&mut self.buf);
        assert_eq!(
            self.buf.len() - at,
            n * (8 + vt.arg_bytes as usize),
            "skein: uniform records of the wrong size"
        );
        open.records += n as u32;
    }

    /// Appends a [`LOOPBACK_CONTROL`] record: `target` and `record`, the bytes that name the
    /// in-process record (length-prefixed). Only the loopback transport writes these.
    pub(crate) fn push_loopback(&mut self, target: u64, record: &[u8]) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(open.uniform.is_none(), "skein: a loopback record in a uniform segment");
        assert!(record.len() <= MAX_SERIALIZED_BYTES, "skein: loopback record too long");
        self.buf.extend_from_slice(&LOOPBACK_CONTROL.to_le_bytes());
        self.buf.extend_from_slice(&target.to_le_bytes());
        open.records += 1;
        super::remote::push_prefixed(&mut self.buf, record);
    }

    /// Appends a record whose argument is a `Plain` value (its table's `arg_bytes` must be
    /// its size rounded up to 8).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn push_plain<A: crate::Plain>(
        &mut self,
        vt: &'static RemoteVTable,
        target: u64,
        arg: A,
    ) {
        assert_eq!(
            vt.arg_bytes as usize,
            std::mem::size_of::<A>().next_multiple_of(8),
            "skein: argument of the wrong size"
        );
        self.push_head(vt, target);
        super::remote::push_plain(&mut self.buf, arg);
    }

    /// Appends a record on element `index` of a `TrustArray` part (a table of
    /// `RemoteVTable::of_element`): the index, then the `Plain` argument.
    #[cfg(test)]
    pub(crate) fn push_element<A: crate::Plain>(
        &mut self,
        vt: &'static RemoteVTable,
        target: u64,
        index: u64,
        arg: A,
    ) {
        assert_eq!(vt.kind, super::remote::KIND_ELEMENT, "skein: not an element table");
        assert_eq!(
            vt.arg_bytes as usize,
            8 + std::mem::size_of::<A>().next_multiple_of(8),
            "skein: argument of the wrong size"
        );
        self.push_head(vt, target);
        super::remote::push_plain(&mut self.buf, index);
        super::remote::push_plain(&mut self.buf, arg);
    }

    /// Closes the open segment.
    pub(crate) fn end_segment(&mut self) {
        let open = self.open.take().expect("skein: no segment open");
        end(&mut self.buf, &open);
        self.segments += 1;
    }

    /// The envelope's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        assert!(self.open.is_none(), "skein: segment still open");
        finish(self.buf, self.segments)
    }
}

/// Writes a response envelope: per answered batch, [`begin_segment`](Self::begin_segment),
/// one result per record in order ([`run`](Self::run) or [`push_result`](Self::push_result)),
/// [`end_segment`](Self::end_segment); then [`finish`](Self::finish).
#[derive(Debug)]
pub(crate) struct ResponseWriter {
    buf: Vec<u8>,
    segments: u32,
    open: Option<Open>,
    panics: Vec<(u32, String)>,
}

impl ResponseWriter {
    /// An empty response envelope with this header.
    #[cfg(test)]
    pub(crate) fn new(head: &Head) -> Self {
        Self::new_in(Vec::with_capacity(4096), head)
    }

    /// [`ResponseWriter::new`] writing into `buf` (a transport's buffer; its contents are
    /// dropped, its capacity kept).
    pub(crate) fn new_in(buf: Vec<u8>, head: &Head) -> Self {
        ResponseWriter {
            buf: start_in(buf, KIND_RESPONSES, head),
            segments: 0,
            open: None,
            panics: Vec::new(),
        }
    }

    /// Opens the answer to batch `pair_seq` of `trustee`.
    pub(crate) fn begin_segment(&mut self, trustee: u32, pair_seq: u64) {
        assert!(self.open.is_none(), "skein: segment already open");
        let at = begin(&mut self.buf, trustee, 0, pair_seq);
        self.open = Some(Open { at, records: 0, uniform: None });
    }

    /// Runs `rec` on `target` and appends its result; a panic is added to the segment's
    /// panic list. A record that cannot run (`RunError::Refused`) still takes its result
    /// space, and its reason is returned: the batch is bad (`docs/rack-mode.md` §3.4 item 4).
    ///
    /// # Safety
    /// As [`RemoteVTable::run`]: `target` is what `rec.target` names on this rank, valid for
    /// `rec.vt`'s kind and used by nothing else during the call.
    pub(crate) unsafe fn run(&mut self, rec: &Record<'_>, target: *mut u8) -> Result<(), String> {
        let open = self.open.as_mut().expect("skein: no segment open");
        let index = open.records;
        open.records += 1;
        // SAFETY: caller promise on `target`; `rec.arg` comes from an accepted envelope, so
        // it has the table's size (module docs, rule 3).
        match unsafe { rec.vt.run(target, rec.arg, &mut self.buf) } {
            Ok(()) => Ok(()),
            Err(RunError::Panicked(msg)) => {
                self.panics.push((index, msg));
                Ok(())
            }
            Err(RunError::Refused(why)) => Err(why),
        }
    }

    /// Runs the records of the uniform segment `body` of table `vt` (what
    /// [`Segment::uniform_body`] hands out) in one loop and appends their results, as
    /// [`run`](Self::run) would record by record ([`RemoteVTable::run_uniform`]): each
    /// record's target word goes through `resolve` right before it runs, and a refused one
    /// stops the segment, its reason returned with the record's index in the segment.
    /// `None` when the table has no such loop (nothing ran: the caller runs the records one by
    /// one).
    ///
    /// # Safety
    /// As [`run`](Self::run) for each record, with "`target`" what `resolve` returns for its
    /// target word.
    pub(crate) unsafe fn run_uniform(
        &mut self,
        vt: &RemoteVTable,
        body: &[u8],
        resolve: &mut super::remote::Resolve<'_>,
    ) -> Option<Result<(), (u32, String)>> {
        let open = self.open.as_mut().expect("skein: no segment open");
        let first = open.records;
        let stride = 8 + vt.arg_bytes as usize;
        let panicked = self.panics.len();
        // SAFETY: caller promise; `body` is a uniform segment of `vt` from an accepted
        // envelope (module docs, rule 3).
        let r = unsafe { vt.run_uniform(body, resolve, &mut self.buf, &mut self.panics) }?;
        // Indexes in the segment: after the records written before.
        for p in &mut self.panics[panicked..] {
            p.0 += first;
        }
        open.records += (body.len() / stride.max(1)) as u32;
        Some(r.map_err(|(k, why)| (k + first, why)))
    }

    /// Appends the result of a record of table `vt`: `result_bytes` bytes, or a serialized
    /// result without its prefix.
    pub(crate) fn push_result(&mut self, vt: &RemoteVTable, result: &[u8]) {
        let open = self.open.as_mut().expect("skein: no segment open");
        if vt.result_prefixed() {
            assert!(result.len() <= MAX_SERIALIZED_BYTES, "skein: serialized result too long");
            super::remote::push_prefixed(&mut self.buf, result);
        } else {
            assert_eq!(result.len(), vt.result_bytes as usize, "skein: result of the wrong size");
            self.buf.extend_from_slice(result);
        }
        open.records += 1;
    }

    /// Records that record `index` of the open segment panicked with `message` (indexes in
    /// increasing order; `run` does this itself).
    pub(crate) fn push_panic(&mut self, index: u32, message: &str) {
        self.panics.push((index, message.to_string()));
    }

    /// Closes the open segment: writes its panic list.
    pub(crate) fn end_segment(&mut self) {
        let open = self.open.take().expect("skein: no segment open");
        self.buf.extend_from_slice(&(self.panics.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        for (index, msg) in self.panics.drain(..) {
            assert!(index < open.records, "skein: panic of a record not written");
            let mut cut = msg.len().min(MAX_PANIC_MESSAGE);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            self.buf.extend_from_slice(&index.to_le_bytes());
            self.buf.extend_from_slice(&(cut as u32).to_le_bytes());
            self.buf.extend_from_slice(&msg.as_bytes()[..cut]);
            self.buf.resize(self.buf.len() + pad_of(cut), 0);
        }
        end(&mut self.buf, &open);
        self.segments += 1;
    }

    /// The envelope's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        assert!(self.open.is_none(), "skein: segment still open");
        finish(self.buf, self.segments)
    }
}

/// An accepted response envelope ([`validate_response`]).
pub(crate) struct Response<'b, 'a> {
    /// Its header.
    pub(crate) head: Head,
    segments: u32,
    body: &'b [u8],
    in_flight: &'a InFlight<'a>,
}

impl fmt::Debug for Response<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("head", &self.head)
            .field("segments", &self.segments)
            .finish()
    }
}

/// One segment of an accepted response envelope: the answer to one batch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RespSegment<'b, 'a> {
    /// The trustee that served the batch.
    pub(crate) trustee: u32,
    /// The batch's pair sequence number.
    pub(crate) pair_seq: u64,
    /// The tables of the batch's records (the caller's, from `in_flight`).
    pub(crate) tables: &'a [&'static RemoteVTable],
    results: &'b [u8],
    panic_count: u32,
    panics: &'b [u8],
}

/// Checks a response envelope received from MPI source rank `from_rank` against the batches
/// in flight (module docs, rules 1–3).
pub(crate) fn validate_response<'b, 'a>(
    bytes: &'b [u8],
    from_rank: usize,
    expect: &ExpectResponse<'a>,
) -> Result<Response<'b, 'a>, BadBatch> {
    validate_responses(bytes, from_rank, expect)
        .map_err(|reason| BadBatch { rank: from_rank, reason })
}

fn validate_responses<'b, 'a>(
    bytes: &'b [u8],
    from_rank: usize,
    expect: &ExpectResponse<'a>,
) -> Result<Response<'b, 'a>, Reason> {
    let job = &expect.job;
    let (head, segments) = check_head(bytes, from_rank, job, KIND_RESPONSES)?;
    let mut r = Reader::new(bytes);
    r.at = HEADER_BYTES;
    let mut last_trustee = None;
    for s in 0..segments {
        let at = r.at;
        let h = read_seg_head(&mut r).ok_or(Reason::SegmentOverrun { segment: s, at })?;
        if h.flags != 0 {
            return Err(Reason::Flags { segment: s, flags: h.flags });
        }
        if rank_of(h.trustee, job) != Some(from_rank) {
            return Err(Reason::Trustee {
                segment: s,
                trustee: h.trustee,
                what: "the source rank",
            });
        }
        if last_trustee.is_some_and(|t| t >= h.trustee) {
            return Err(Reason::Trustee {
                segment: s,
                trustee: h.trustee,
                what: "increasing order",
            });
        }
        last_trustee = Some(h.trustee);
        let tables = (expect.in_flight)(h.trustee, h.pair_seq).ok_or(Reason::NotInFlight {
            segment: s,
            trustee: h.trustee,
            seq: h.pair_seq,
        })?;
        if h.records as usize != tables.len() {
            return Err(Reason::Records {
                segment: s,
                records: h.records,
                bytes: h.bytes,
                expected: tables.len() as u64,
            });
        }
        let body = r.take(h.bytes as usize).ok_or(Reason::SegmentOverrun { segment: s, at })?;
        split_response(body, at + SEGMENT_HEADER_BYTES, s, tables)?;
    }
    if r.left() != 0 {
        return Err(Reason::Trailing(r.left()));
    }
    Ok(Response { head, segments, body: &bytes[HEADER_BYTES..], in_flight: expect.in_flight })
}

/// Checks a response segment's body (`body_at`: its offset in the envelope) against the
/// tables of its batch: `(results, panic count, panic entries)`.
fn split_response<'b>(
    body: &'b [u8],
    body_at: usize,
    s: u32,
    tables: &[&'static RemoteVTable],
) -> Result<(&'b [u8], u32, &'b [u8]), Reason> {
    let mut b = Reader::new(body);
    // Fixed-size results (the common case) are checked as one length; record by record
    // otherwise, and to name the record that does not fit.
    let fixed = tables.iter().try_fold(0usize, |sum, vt| {
        (!vt.result_prefixed()).then(|| sum + vt.result_bytes as usize)
    });
    let per_record = match fixed {
        Some(total) if b.take(total).is_some() => &[][..],
        _ => tables,
    };
    for (k, vt) in per_record.iter().enumerate() {
        let rec_at = body_at + b.at;
        let fault = |fault| Reason::Record { segment: s, record: k as u32, at: rec_at, fault };
        if vt.result_prefixed() {
            b.prefixed(MAX_SERIALIZED_BYTES).map_err(fault)?;
        } else {
            b.take(vt.result_bytes as usize).ok_or(Fault::Overrun).map_err(fault)?;
        }
    }
    let results = &body[..b.at];
    let list_at = body_at + b.at;
    let bad = |at, what| Reason::Panics { segment: s, at, what };
    let count = b.u32().ok_or(bad(list_at, "missing"))?;
    if b.u32().ok_or(bad(list_at, "missing"))? != 0 {
        return Err(bad(list_at, "non-zero padding"));
    }
    if count as usize > tables.len() || count as usize > b.left() / 8 {
        return Err(bad(list_at, "more panics than records"));
    }
    let entries_start = b.at;
    let mut next = 0u32;
    for _ in 0..count {
        let at = body_at + b.at;
        let index = b.u32().ok_or(bad(at, "runs past the end"))?;
        if index < next || index as usize >= tables.len() {
            return Err(bad(at, "record index out of order or range"));
        }
        next = index + 1;
        let len = b.u32().ok_or(bad(at, "runs past the end"))? as usize;
        if len > MAX_PANIC_MESSAGE {
            return Err(bad(at, "message too long"));
        }
        let msg = b.take(len).ok_or(bad(at, "runs past the end"))?;
        if std::str::from_utf8(msg).is_err() {
            return Err(bad(at, "message is not UTF-8"));
        }
        let pad = b.take(pad_of(len)).ok_or(bad(at, "runs past the end"))?;
        if pad.iter().any(|&x| x != 0) {
            return Err(bad(at, "non-zero padding"));
        }
    }
    if b.left() != 0 {
        return Err(bad(body_at + b.at, "bytes after the panic list"));
    }
    Ok((results, count, &body[entries_start..]))
}

impl<'b, 'a> Response<'b, 'a> {
    /// Its segments, in order.
    pub(crate) fn segments(&self) -> impl Iterator<Item = RespSegment<'b, 'a>> + '_ {
        let mut r = Reader::new(self.body);
        (0..self.segments).map_while(move |s| {
            let h = read_seg_head(&mut r)?;
            let body = r.take(h.bytes as usize)?;
            let tables = (self.in_flight)(h.trustee, h.pair_seq)?;
            // Validation accepted this body against these tables: no error here.
            let (results, panic_count, panics) = split_response(body, 0, s, tables).ok()?;
            Some(RespSegment {
                trustee: h.trustee,
                pair_seq: h.pair_seq,
                tables,
                results,
                panic_count,
                panics,
            })
        })
    }
}

impl<'b> RespSegment<'b, '_> {
    /// The results, in record order: `result_bytes` bytes, or a serialized result without
    /// its prefix (zeros, or empty, for a record that panicked).
    pub(crate) fn results(&self) -> impl Iterator<Item = &'b [u8]> + '_ {
        let mut r = Reader::new(self.results);
        self.tables.iter().map_while(move |vt| {
            if vt.result_prefixed() {
                r.prefixed(MAX_SERIALIZED_BYTES).ok()
            } else {
                r.take(vt.result_bytes as usize)
            }
        })
    }

    /// The results, when every record's table is `vt` with a fixed-size result: the records'
    /// results back to back, `vt.result_bytes` each (validated against the batch's tables);
    /// `None` otherwise.
    pub(crate) fn uniform_results(&self, vt: &RemoteVTable) -> Option<&'b [u8]> {
        let fixed = !vt.result_prefixed()
            && self.tables.iter().all(|t| std::ptr::eq(*t, vt))
            && self.results.len() == self.tables.len() * vt.result_bytes as usize;
        fixed.then_some(self.results)
    }

    /// The panics: `(record index, message)`, in record order.
    pub(crate) fn panics(&self) -> impl Iterator<Item = (u32, &'b str)> + '_ {
        let mut r = Reader::new(self.panics);
        (0..self.panic_count).map_while(move |_| {
            let index = r.u32()?;
            let len = r.u32()? as usize;
            let msg = std::str::from_utf8(r.take(len)?).ok()?;
            r.take(pad_of(len))?;
            Some((index, msg))
        })
    }
}

#[cfg(test)]
mod tests;
