//! Envelopes: the bytes that carry request batches to another rank and their results back,
//! their encoders, and their validation (`docs/rack-mode.md` §3.1, §3.3, §3.4).
//!
//! One *envelope* carries the batches of one client worker for trustees of one remote rank
//! (one *segment* per trustee), or the answers to them. A request envelope lands on one
//! worker of the destination rank (its `to`), which serves its own segment and forwards
//! each other one, cut out as an envelope of one segment ([`Envelope::forward`]), to its
//! trustee; every trustee answers its segments in a response envelope of its own. Everything is little-endian, every
//! field and every record starts at a multiple of 8 bytes from the envelope's start, and
//! every byte is either a field, a record's argument or result bytes, or zero padding that
//! the validator checks is zero (so an accepted envelope re-encodes to exactly its bytes).
//!
//! This file holds the byte layout (the constants, [`Head`], [`Job`], [`Expect`]); the rest is
//! one file per concern: `control.rs` (the control records and their tables), `validate.rs`
//! (validating a request envelope), `writers.rs` ([`RequestWriter`], [`ResponseWriter`]),
//! `response.rs` (reading a response, [`validate_response`]) and `reason.rs` (why an
//! envelope is refused: [`BadBatch`], [`Reason`]).
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
//! [`validate`](fn@validate) and [`validate_response`] are pure functions of the bytes and of what the
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
//!    of the next one expected for `(from, trustee)` (checked by the trustee itself: a
//!    segment for another worker of this rank is checked when that worker serves it, after
//!    the landing worker forwarded it, [`Envelope::forward`]); for responses the trustee is a worker
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

mod control;
mod reason;
mod response;
mod validate;
mod writers;

pub(crate) use control::*;
pub(crate) use reason::*;
pub(crate) use response::*;
pub(crate) use validate::*;
pub(crate) use writers::*;

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
    /// The next pair sequence number expected from `(client, trustee)` (global ids), or
    /// `None` for a trustee of this rank other than the receiving worker (`Job::me`): the
    /// receiving worker is the envelope's landing worker, which forwards that segment to its
    /// trustee ([`Envelope::forward`]); the trustee validates it again and checks its number
    /// then.
    pub(crate) next_seq: &'a dyn Fn(u32, u32) -> Option<u64>,
    /// How many batches of one pair may arrive ahead of the next expected (the credits, at
    /// least 1): a batch is accepted if `0 <= seq - next < seq_window`.
    pub(crate) seq_window: u64,
    /// Whether [`LOOPBACK_CONTROL`] records are accepted: only by the loopback transport
    /// (`crate::runtime::remote`), whose envelopes never leave the process. Every other
    /// validator refuses them ([`Fault::LoopbackOnly`]).
    pub(crate) loopback: bool,
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

#[cfg(test)]
mod tests;
