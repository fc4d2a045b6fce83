//! The client half of the remote protocol (module docs of [`super`]): a worker sends the
//! requests staged for the trustees of another rank as request envelopes of one segment per
//! trustee ([`Worker::poll_remote`]) and, when the response envelope arrives, checks it against the
//! batches in flight and runs the completions in order ([`Worker::take_responses`]).

use super::*;

/// The share of a batch's limits (`(words, result bytes)`, `Transport::batch_limits`) that
/// `words` words of records and `result` result bytes take (result bytes count only under a
/// limit above zero, as in `RecordQueue::fills_batch`).
fn share(words: usize, result: usize, (max_words, max_result): (usize, usize)) -> f64 {
    let w = words as f64 / max_words.max(1) as f64;
    let r = if max_result > 0 { result as f64 / max_result as f64 } else { 0.0 };
    w.max(r)
}

/// What is left of a request envelope's budget (`Builder::envelope_batches` batches), as
/// its segments are planned or written: each segment after the first costs
/// [`SEGMENT_SHARE`], and each its [`share`] of its batch limits.
struct Budget {
    left: f64,
    segments: usize,
}

impl Budget {
    fn new(batches: u32) -> Budget {
        Budget { left: f64::from(batches), segments: 0 }
    }

    /// Opens the next segment: the part of its batch limits it may take (1: a whole batch,
    /// always for the first), or `None` when the envelope has no room for another.
    fn open(&mut self) -> Option<f64> {
        if self.segments > 0 {
            self.left -= SEGMENT_SHARE;
            if self.left <= 0.0 {
                return None;
            }
        }
        Some(if self.segments == 0 { 1.0 } else { self.left.min(1.0) })
    }

    /// Closes the segment opened last, of `words` words and `result` result bytes under
    /// batch limits `limits`; true when that used the envelope up.
    fn spend(&mut self, words: usize, result: usize, limits: (usize, usize)) -> bool {
        self.segments += 1;
        self.left -= share(words, result, limits);
        self.left <= 0.0
    }
}

/// `x` scaled by a segment's part of its batch (`Budget::open`), exact for a whole one.
fn scaled(x: usize, part: f64) -> usize {
    if part >= 1.0 {
        x
    } else {
        (x as f64 * part) as usize
    }
}

impl Worker {
    /// Whether the pair to `trustee` (of another rank) has requests staged and a credit left.
    #[inline]
    fn pair_ready(&self, trustee: usize) -> bool {
        let cs = &self.clients[trustee];
        cs.sent.get() - cs.acked.get() < IN_FLIGHT && cs.out(|q| q.has_staged())
    }

    /// The limits of a batch to `trustee` (`Transport::batch_limits`, for its staged records).
    fn limits_to(&self, trustee: usize) -> (usize, usize) {
        self.transport().batch_limits(self.clients[trustee].out(|q| q.uniform_vtable()))
    }

    /// Whether the requests staged for the trustees of the rank starting at worker `base`
    /// (the pairs with a credit left) fill one request envelope: one pair's fill a whole
    /// batch (a segment takes at most one, so waiting cannot make that segment fuller: it
    /// leaves now, with what the other pairs have staged; with one worker per rank every
    /// full batch leaves at once, as it did with an envelope per pair), or the sum of each
    /// segment's share of its batch limits, plus [`SEGMENT_SHARE`] per segment after the
    /// first, reaches the envelope's budget (`Builder::envelope_batches` batches).
    fn rank_fills_envelope(&self, base: usize) -> bool {
        let mut budget = Budget::new(self.run_state.cfg.envelope_batches);
        for t in (base..base + self.local_n).filter(|&t| self.pair_ready(t)) {
            if budget.open().is_none() {
                return true;
            }
            let (words, result) = self.clients[t].out(|q| q.staged_size());
            let limits = self.limits_to(t);
            if words >= limits.0 || (result > 0 && result >= limits.1) {
                return true;
            }
            if budget.spend(words, result, limits) {
                return true;
            }
        }
        false
    }

    /// The client role towards the trustees of rank `rank` (another rank): sends the
    /// requests staged for them as request envelopes of one segment per trustee (module
    /// invariant 4), to this client's landing worker there, while some pair has requests
    /// staged and fewer than [`IN_FLIGHT`] batches in flight (responses come through
    /// [`Worker::poll_transport`]). An envelope holds about `Builder::envelope_batches` full
    /// batches' worth (`Transport::batch_limits`; 4 by default): each segment takes at most
    /// one batch, and at most the share of its own batch limits that the segments before it
    /// left. With [`Flush::Full`] only full envelopes leave:
    /// while fibers are ready, the worker loop aggregates a rank's requests until they fill
    /// an envelope, the worker is about to go idle, or a few busy passes went by
    /// (`Worker::run_loop`, `AGGREGATE_PASSES`).
    ///
    /// Inline, the test alone: an idle pass polls every other rank, mostly with nothing
    /// staged, and the envelope's writing is a large out-of-line frame.
    #[inline]
    pub(in crate::runtime) fn poll_remote(&self, rank: usize, flush: Flush) -> bool {
        let base = rank * self.local_n;
        (base..base + self.local_n).any(|t| self.pair_ready(t)) && self.send_remote(rank, flush)
    }

    /// [`Worker::poll_remote`] once some pair to rank `rank` has requests staged and a credit.
    #[inline(never)]
    fn send_remote(&self, rank: usize, flush: Flush) -> bool {
        let base = rank * self.local_n;
        let mut useful = false;
        while (base..base + self.local_n).any(|t| self.pair_ready(t)) {
            let full = self.rank_fills_envelope(base);
            if !full && flush == Flush::Full {
                break;
            }
            let to = landing(self.index, rank, self.local_n);
            let Some(buf) = self.transport().claim(self.index, to) else { break };
            let st = &self.ctr().stats;
            match (full, flush) {
                (true, _) => bump(&st.envelopes_full, 1),
                (false, Flush::Aged) => bump(&st.envelopes_aged, 1),
                _ => {}
            }
            let head = Head {
                token: self.transport().token(),
                job_run: self.run_state.job_run,
                from: self.index as u32,
                to_rank: rank as u32,
                to: to as u32,
                seq: self.next_envelope_seq(),
            };
            let mut wr = RequestWriter::new_in(buf, &head);
            let mut budget = Budget::new(self.run_state.cfg.envelope_batches);
            let mut requests = 0usize;
            for t in base..base + self.local_n {
                if !self.pair_ready(t) {
                    continue;
                }
                // At most one batch per segment; less when the envelope has less left.
                let Some(part) = budget.open() else { break };
                let limits = self.limits_to(t);
                let Some((words, result, count)) =
                    self.write_segment(&mut wr, t, scaled(limits.0, part), scaled(limits.1, part))
                else {
                    // The envelope has no room left for this pair's next request.
                    assert!(
                        budget.segments > 0,
                        "skein: a request does not fit in an empty batch to another rank"
                    );
                    break;
                };
                requests += count;
                if budget.spend(words, result, limits) {
                    break;
                }
            }
            let segments = budget.segments;
            let env = wr.finish();
            st.sent_envelope(rank, env.len(), segments, requests, false);
            self.transport().publish(self.index, to, env);
            useful = true;
        }
        useful
    }

    /// Writes the next batch of the pair to `trustee` (at most `max_words` words of records
    /// and `max_result` result bytes) as a segment of `wr`, and records it in flight; returns
    /// its words, result bytes and requests, or `None` (nothing written) when the first
    /// staged request does not fit.
    fn write_segment(
        &self,
        wr: &mut RequestWriter,
        trustee: usize,
        max_words: usize,
        max_result: usize,
    ) -> Option<(usize, usize, usize)> {
        let cs = &self.clients[trustee];
        let side = self.side();
        let mut scratch = side.scratch.borrow_mut();
        let dst = scratch.as_mut_ptr() as *mut u64;
        let max_words = max_words.min(BATCH_WORDS);
        // SAFETY: `scratch` holds BATCH_WORDS (≥ max_words) words, 8-aligned; the copied
        // request halves are consumed below, each once, by `take_arg` or by moving their
        // bytes into the envelope (record invariant 2).
        let (words, count, uniform) = cs.out(|q| unsafe { q.send_to(dst, max_words, max_result) });
        if count == 0 {
            return None;
        }
        let seq = cs.sent.get() + 1;
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
                    unsafe { (hook.take_arg)(dst.add(i * stride + HEADER_WORDS) as *mut u8, buf) }
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
                    assert_eq!(h.result_bytes, 0, "skein: a local-only request to another rank");
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
        let result: usize = b.result_bytes.iter().map(|&r| r as usize).sum();
        side.in_flight[trustee].borrow_mut().push_back(b);
        cs.sent.set(seq);
        bump(&self.ctr().stats.batches_sent, 1);
        self.wake_throttled(&cs.throttled);
        Some((words, result, count))
    }

    /// The client role for a response envelope from `from_rank`: checks it against the
    /// batches in flight, then runs the completions of each answered batch in order.
    pub(super) fn take_responses(&self, from_rank: usize, bytes: &[u8]) -> Result<(), BadBatch> {
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
            self.completed_requests(a.n);
            side.results.borrow_mut().push(a.results);
        }
        *side.answered.borrow_mut() = answered;
        Ok(())
    }
}
