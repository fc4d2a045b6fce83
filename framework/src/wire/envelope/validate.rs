//! Validation of a request envelope before anything runs (the guarantees are in the module
//! docs of [`super`]): the checked reader, targets, records, segment headers, [`validate`](fn@validate).

use super::*;

/// Wire target bit: an address in the sending process, not an export `(slot, gen)`
/// (`crate::runtime::export::ADDR_TARGET`); accepted only by a validator in loopback mode.
pub(crate) const ADDR_TARGET: u64 = 1 << 63;

/// Checks a target word against the validator's mode (an address only in loopback mode).
pub(super) fn check_target(target: u64, loopback: bool) -> Result<u64, Fault> {
    if target & ADDR_TARGET != 0 && !loopback {
        return Err(Fault::AddressTarget(target));
    }
    Ok(target)
}

/// Bytes from `b`, with a position; every read is checked.
#[derive(Debug, Clone)]
pub(super) struct Reader<'b> {
    pub(super) b: &'b [u8],
    pub(super) at: usize,
}

impl<'b> Reader<'b> {
    pub(super) fn new(b: &'b [u8]) -> Self {
        Reader { b, at: 0 }
    }
    pub(super) fn left(&self) -> usize {
        self.b.len() - self.at
    }
    pub(super) fn take(&mut self, n: usize) -> Option<&'b [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    pub(super) fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
    }
    pub(super) fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
    }
    /// `len: u32 | 0u32 | len bytes | zero padding`; returns the `len` bytes.
    pub(super) fn prefixed(&mut self, max: usize) -> Result<&'b [u8], Fault> {
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

pub(super) fn pad_of(n: usize) -> usize {
    n.next_multiple_of(8) - n
}

/// The `u32` at `b[at..at + 4]` (panics if out of bounds: callers check lengths first).
#[inline]
pub(super) fn le32(b: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The `u64` at `b[at..at + 8]` (one bounds check and one load).
#[inline]
pub(super) fn le64(b: &[u8], at: usize) -> u64 {
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
pub(super) fn read_record<'b>(
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
pub(super) fn fixed_result_bytes(vt: &RemoteVTable) -> u64 {
    if vt.result_prefixed() {
        8
    } else {
        vt.result_bytes as u64
    }
}

/// A segment header, read.
#[derive(Debug, Clone, Copy)]
pub(super) struct SegHead {
    pub(super) trustee: u32,
    pub(super) flags: u32,
    pub(super) pair_seq: u64,
    pub(super) records: u32,
    pub(super) bytes: u32,
}

pub(super) fn read_seg_head(r: &mut Reader<'_>) -> Option<SegHead> {
    Some(SegHead {
        trustee: r.u32()?,
        flags: r.u32()?,
        pair_seq: r.u64()?,
        records: r.u32()?,
        bytes: r.u32()?,
    })
}

/// Header checks shared by both directions (rule 1).
pub(super) fn check_head(
    bytes: &[u8],
    from_rank: usize,
    job: &Job,
    kind: u8,
) -> Result<(Head, u32), Reason> {
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
pub(super) fn rank_of(g: u32, job: &Job) -> Option<usize> {
    let w = job.workers.max(1);
    let r = g / w;
    (r < job.ranks).then_some(r as usize)
}

/// An accepted request envelope ([`validate`](fn@validate)).
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
    /// The whole segment as it lies in the envelope: its header, then its body (what
    /// [`Envelope::forward`] copies).
    raw: &'b [u8],
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

pub(super) fn validate_requests<'b>(
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
        // A segment for another worker of this rank is forwarded to it, which checks its
        // number (`Expect::next_seq`).
        if let Some(want) = (expect.next_seq)(head.from, h.trustee) {
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
            let at = r.at;
            let h = read_seg_head(&mut r)?;
            let mut body = r.take(h.bytes as usize)?;
            let raw = &self.body[at..r.at];
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
                raw,
                loopback: self.loopback,
            })
        })
    }

    /// Segment `seg` of this envelope (for another worker of this rank: the receiving one is
    /// its landing worker) as an envelope of its own, written into `buf`: this envelope's
    /// header with `to` the segment's trustee, then the segment's bytes as they are. Its
    /// trustee validates it as any envelope (its pair sequence number included) before it
    /// serves it; it carries the same job, run, client and envelope number.
    pub(crate) fn forward(&self, seg: &Segment<'_>, buf: Vec<u8>) -> Vec<u8> {
        let head = Head { to: seg.trustee, ..self.head };
        let mut buf = start_in(buf, KIND_REQUESTS, &head);
        buf.extend_from_slice(seg.raw);
        finish(buf, 1)
    }

    /// The length of [`Envelope::forward`]'s envelope for `seg` (to size its buffer).
    pub(crate) fn forward_len(seg: &Segment<'_>) -> usize {
        HEADER_BYTES + seg.raw.len()
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
