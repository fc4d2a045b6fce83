//! Why an envelope is refused: [`BadBatch`] (the sending rank and a [`Reason`]) and the
//! record-level [`Fault`]s.

use super::*;

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
