//! Reading a response envelope: [`validate_response`] checks it against the batches in flight,
//! then [`Response`] walks its segments' results and panics.

use super::*;

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

pub(super) fn validate_responses<'b, 'a>(
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
pub(super) fn split_response<'b>(
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
