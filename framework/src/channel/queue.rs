//! The client's queue of requests towards one trustee: records in flight (handed to a batch,
//! waiting for the response), then staged ones, in issue order.
//!
//! One queue per (client, trustee) pair, the client's own trustee role included: issuing a
//! request is the same few stores whichever worker the property belongs to
//! ([`RecordQueue::push`]). For a remote trustee the client copies a prefix of the staged
//! records into a request slot ([`RecordQueue::send_to`]) and later runs their completions
//! ([`RecordQueue::complete_front`]). A request to the worker's own trustee role is never
//! copied: [`RecordQueue::run_local`] runs request and completion in place.
//!
//! The queue also tracks whether its staged records are all of one type (two words updated
//! without branches on every push, and the run of like records pushed last, which makes them
//! exact again after a partial send: [`RecordQueue::restaged`]), so that a batch of them, or
//! a local run, takes the type's own loop ([`super::batch`]).
//!
//! The unsafe code relies on the record invariants of [`super::record`]; the queue is where
//! invariant 1 (which records are staged, which in flight) is maintained.

use super::batch::{walk, Outcomes};
use super::record::{
    self, fits_inline, header, vtable_of, Outcome, RequestHalf, ResultSize, VTable, VTableOf,
};
use super::slot::PanicPayload;
use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;

/// Requests staged towards one trustee from which [`RecordQueue::push`] says so: a fiber that
/// issues `apply_then` is then suspended until the loop has flushed a batch of them (bounds
/// memory; does not apply in delegated context).
pub(crate) const STAGING_YIELD: usize = 512;

/// The requests a client has queued towards one trustee: first those in flight (handed to a
/// batch, waiting for its response), then the staged ones, in issue order.
pub(crate) struct RecordQueue {
    buf: Vec<MaybeUninit<u64>>,
    head: usize,
    /// End of the records in flight (start of the staged ones).
    sent_end: usize,
    tail: usize,
    in_flight: usize,
    staged: usize,
    /// Sum of the staged records' result bytes.
    staged_result_bytes: usize,
    /// Bitwise OR and AND of the staged records' vtable addresses: the records are all alike
    /// iff the two are equal (two branch-free updates per push). [`NO_VT`] when nothing is
    /// staged; after a partial [`RecordQueue::send_to`] they still cover the sent records too,
    /// which can only turn a uniform rest into "not known to be uniform".
    vt_or: usize,
    vt_and: usize,
    /// The vtable address of the record pushed last, and how many records pushed in a row
    /// (staged or not) end with that type: when no more records than that are staged, they
    /// are all of that type, so [`RecordQueue::restaged`] makes `(vt_or, vt_and)` exact again
    /// after a partial send. Without it one record of another type (a `spawn_on` among a
    /// stream of `apply_then`s) made the queue "not known to be uniform" until it drained,
    /// which a queue that is never empty (a client ahead of its credits) never does.
    tail_vt: usize,
    tail_run: usize,
}

/// `(vt_or, vt_and)` of no records.
const NO_VT: (usize, usize) = (0, usize::MAX);

impl std::fmt::Debug for RecordQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordQueue")
            .field("in_flight", &self.in_flight)
            .field("staged", &self.staged)
            .finish()
    }
}

impl Default for RecordQueue {
    fn default() -> Self {
        RecordQueue {
            buf: Vec::new(),
            head: 0,
            sent_end: 0,
            tail: 0,
            in_flight: 0,
            staged: 0,
            staged_result_bytes: 0,
            vt_or: NO_VT.0,
            vt_and: NO_VT.1,
            tail_vt: 0,
            tail_run: 0,
        }
    }
}

impl RecordQueue {
    /// Number of staged requests.
    #[inline]
    pub(crate) fn staged(&self) -> usize {
        self.staged
    }

    /// The vtable of every staged record if they are known to be all alike, else null.
    #[inline]
    fn uniform(&self) -> *const VTable {
        if self.staged > 0 && self.vt_or == self.vt_and {
            self.vt_or as *const VTable
        } else {
            ptr::null()
        }
    }

    /// The vtable every staged record shares, when they are known to be all alike.
    #[inline]
    pub(crate) fn uniform_vtable(&self) -> Option<&'static VTable> {
        // SAFETY: a non-null `uniform()` is the address of the `&'static VTable` that every
        // staged record's push recorded (`vt_or == vt_and`).
        unsafe { self.uniform().as_ref() }
    }

    /// The staged requests' words of records and result bytes (to compare with the limits
    /// of [`RecordQueue::send_to`]; requests without results take no result bytes).
    #[inline]
    pub(crate) fn staged_size(&self) -> (usize, usize) {
        (self.tail - self.sent_end, self.staged_result_bytes)
    }

    /// True when a request is staged.
    #[inline]
    pub(crate) fn has_staged(&self) -> bool {
        self.staged > 0
    }

    /// True when nothing is staged or in flight.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.staged + self.in_flight == 0
    }

    #[inline(always)]
    fn reserve_words(&mut self, need: usize) {
        if self.tail + need > self.buf.len() {
            self.grow(need);
        }
    }

    /// Makes room for `need` more words at `tail` (compacting or reallocating).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, need: usize) {
        let live = self.tail - self.head;
        if self.head > 0 && live + need <= self.buf.len() && self.head >= live {
            // Compact: move the records to the front (a memcpy move, record invariant 3).
            self.buf.copy_within(self.head..self.tail, 0);
        } else {
            let mut nb: Vec<MaybeUninit<u64>> = Vec::new();
            let cap = (live + need).max(self.buf.len() * 2).max(64);
            nb.resize(cap, MaybeUninit::uninit());
            nb[..live].copy_from_slice(&self.buf[self.head..self.tail]);
            self.buf = nb;
        }
        self.sent_end -= self.head;
        self.head = 0;
        self.tail = live;
    }

    /// Stages the request `(request, completion)` on `target`; `request` gets `Space::BYTES`
    /// bytes of result space. Returns true when [`STAGING_YIELD`] or more requests are staged.
    #[inline]
    pub(crate) fn push<Space, Request, Completion>(
        &mut self,
        target: *mut u8,
        request: Request,
        completion: Completion,
    ) -> bool
    where
        Space: ResultSize,
        Request: RequestHalf,
        Completion: FnOnce(Outcome),
    {
        // A closure that does not fit is boxed, and the record holds the box (one word).
        match (fits_inline::<Request>(), fits_inline::<Completion>()) {
            (true, true) => {
                let vt = VTableOf::<Request, Completion, Space>::VTABLE;
                // SAFETY: the vtable is (Request, Completion)'s own; both fit inline.
                unsafe { self.push_record(vt, target, request, completion) }
            }
            (false, true) => {
                let b = Box::new(request);
                let request = move |t: *mut u8, o: *mut u8| {
                    // SAFETY: this closure is the record's request half; its caller's promise.
                    unsafe { (*b).call(t, o) }
                };
                let vt = vtable_of::<_, _, Space>(&request, &completion);
                // SAFETY: the vtable is that of the pair written; both fit inline.
                unsafe { self.push_record(vt, target, request, completion) }
            }
            (true, false) => {
                let b = Box::new(completion);
                let completion = move |o: Outcome| (*b)(o);
                let vt = vtable_of::<_, _, Space>(&request, &completion);
                // SAFETY: as above.
                unsafe { self.push_record(vt, target, request, completion) }
            }
            (false, false) => {
                let (br, bc) = (Box::new(request), Box::new(completion));
                let request = move |t: *mut u8, o: *mut u8| {
                    // SAFETY: this closure is the record's request half; its caller's promise.
                    unsafe { (*br).call(t, o) }
                };
                let completion = move |o: Outcome| (*bc)(o);
                let vt = vtable_of::<_, _, Space>(&request, &completion);
                // SAFETY: as above.
                unsafe { self.push_record(vt, target, request, completion) }
            }
        }
    }

    /// Stages one record.
    ///
    /// # Safety
    /// `vt` is `(Request, Completion)`'s vtable and both fit inline.
    #[inline(always)]
    unsafe fn push_record<Request, Completion>(
        &mut self,
        vt: &'static VTable,
        target: *mut u8,
        request: Request,
        completion: Completion,
    ) -> bool {
        let words = vt.words as usize;
        self.reserve_words(words);
        // The queue's fields are read and updated before the record is written: the compiler
        // cannot tell the record's stores from the fields, and would read them all again.
        let (tail, staged) = (self.tail, self.staged + 1);
        self.tail = tail + words;
        self.staged = staged;
        self.staged_result_bytes += vt.result_bytes as usize;
        let vt_addr = vt as *const VTable as usize;
        self.vt_or |= vt_addr;
        self.vt_and &= vt_addr;
        self.tail_run = if self.tail_vt == vt_addr { self.tail_run + 1 } else { 1 };
        self.tail_vt = vt_addr;
        // SAFETY: `reserve_words` made room for the whole record at `tail`, past every live
        // record; the buffer is 8-aligned; `vt` and the fit are the caller's promise.
        unsafe {
            let at = (self.buf.as_mut_ptr() as *mut u64).add(tail);
            record::write(at, vt, target, request, completion);
        }
        staged >= STAGING_YIELD
    }

    /// Copies the longest prefix of the staged requests whose total size is at most
    /// `max_words` words and whose summed result bytes are at most `max_result_bytes` into
    /// `dst` (at least one record if one is staged and the first fits), and marks them in
    /// flight. Returns `(words, count, uniform)`: `uniform` when all of them are of one type.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `max_words` words and 8-aligned. The request halves of
    /// the copied records pass to `dst`: each must later be consumed exactly once with
    /// [`super::batch::serve_batch`] (or leaked); their completions stay here (see
    /// [`RecordQueue::complete_front`]).
    pub(crate) unsafe fn send_to(
        &mut self,
        dst: *mut u64,
        max_words: usize,
        max_result_bytes: usize,
    ) -> (usize, usize, bool) {
        let (mut w, mut n, mut bytes) = (0usize, 0usize, 0usize);
        let uniform_vt = self.uniform();
        let uniform = !uniform_vt.is_null();
        let base = self.buf[self.sent_end..].as_ptr() as *const u64;
        if self.tail - self.sent_end <= max_words && self.staged_result_bytes <= max_result_bytes {
            // Everything fits: no need to walk the records.
            (w, n, bytes) = (self.tail - self.sent_end, self.staged, self.staged_result_bytes);
        } else if uniform {
            // All records alike: the prefix that fits is a division away.
            // SAFETY: a vtable constant (the address every staged record's push recorded).
            let u = unsafe { &*uniform_vt };
            let (rw, rb) = (u.words as usize, u.result_bytes as usize);
            n = self.staged.min(max_words / rw);
            if let Some(by_bytes) = max_result_bytes.checked_div(rb) {
                n = n.min(by_bytes);
            }
            (w, bytes) = (n * rw, n * rb);
        }
        while n < self.staged {
            // SAFETY: n < staged, so a record starts at sent_end + w (record invariants 1, 4).
            let h = unsafe { header(base.add(w)) };
            let rw = h.words as usize;
            if w + rw > max_words || bytes + h.result_bytes as usize > max_result_bytes {
                break;
            }
            w += rw;
            bytes += h.result_bytes as usize;
            n += 1;
        }
        // SAFETY: the caller promised `dst` holds `max_words >= w` words; source and
        // destination are distinct buffers. The request halves now belong to `dst` (record
        // invariant 1: these records are in flight from here on).
        unsafe { ptr::copy_nonoverlapping(base, dst, w) };
        self.sent_end += w;
        self.in_flight += n;
        self.staged -= n;
        self.staged_result_bytes -= bytes;
        self.restaged();
        (w, n, uniform && n > 0)
    }

    /// Brings `(vt_or, vt_and)` up to date after staged records left from the front: the
    /// identity when none is left, exact when those left are all in the run of like records
    /// pushed last (else they keep covering records that left, which is only pessimistic).
    #[inline]
    fn restaged(&mut self) {
        if self.staged == 0 {
            (self.vt_or, self.vt_and) = NO_VT;
        } else if self.staged <= self.tail_run {
            (self.vt_or, self.vt_and) = (self.tail_vt, self.tail_vt);
        }
    }

    /// Moves all of `other`'s staged records to the back of this queue, in order (`other`
    /// keeps its buffer, empty). `other` has nothing in flight.
    pub(crate) fn append(&mut self, other: &mut RecordQueue) {
        assert_eq!(other.in_flight, 0, "skein: appending a queue with requests in flight");
        if other.staged == 0 {
            return;
        }
        let w = other.tail - other.head;
        self.reserve_words(w);
        // SAFETY: this queue has room for `w` words at its tail; the buffers are distinct (two
        // `&mut`). The records move (record invariant 3): live here, dead in `other`.
        unsafe {
            ptr::copy_nonoverlapping(
                other.buf[other.head..].as_ptr() as *const u64,
                self.buf[self.tail..].as_mut_ptr() as *mut u64,
                w,
            )
        };
        // With nothing staged here, (vt_or, vt_and) is NO_VT, the identity of this merge.
        self.vt_or |= other.vt_or;
        self.vt_and &= other.vt_and;
        // The run pushed last: `other`'s, longer by this queue's when `other` is one run of
        // the same type (everything of `other` is staged: nothing in flight).
        self.tail_run = if other.tail_vt == self.tail_vt && other.tail_run >= other.staged {
            self.tail_run + other.staged
        } else {
            other.tail_run.min(other.staged)
        };
        self.tail_vt = other.tail_vt;
        self.tail += w;
        self.staged += other.staged;
        self.staged_result_bytes += other.staged_result_bytes;
        other.clear();
    }

    /// Marks the queue empty (its records were consumed or moved elsewhere).
    fn clear(&mut self) {
        (self.head, self.sent_end, self.tail) = (0, 0, 0);
        (self.in_flight, self.staged, self.staged_result_bytes) = (0, 0, 0);
        (self.vt_or, self.vt_and) = NO_VT;
        (self.tail_vt, self.tail_run) = (0, 0);
    }

    /// Runs the completions of the first `n` requests in flight (`n` at most their number), in
    /// order, and removes them; `uniform` if they are all of one type (they were sent as one
    /// uniform batch). Their results lie one after the other from `resp`; `panics` (sorted by
    /// index, as [`super::batch::serve_batch`] returns them) name the requests that panicked
    /// instead. Nothing can be pushed meanwhile (`&mut self`); if a completion unwinds, the
    /// ones after it stay in flight (and are dropped with the queue), the ones before it and
    /// itself are consumed: none twice.
    pub(crate) fn complete_front(
        &mut self,
        n: usize,
        uniform: bool,
        resp: *const u8,
        panics: Vec<(u32, PanicPayload)>,
    ) {
        assert!(n <= self.in_flight, "skein: complete_front({n}) of {}", self.in_flight);
        let mut outcomes = Outcomes::new(resp, panics);
        // SAFETY: the first `n` records are in flight, their completions live (record
        // invariant 1), all of one type if `uniform`; each is consumed once, by
        // `run_completion`.
        unsafe {
            self.consume_front(n, false, |start, progress| {
                if uniform {
                    let h = header(start);
                    (h.complete_uniform)(start, n, &mut outcomes, progress);
                    h.totals(n)
                } else {
                    walk::<false>(start, n, progress, |i, h, p| {
                        (h.run_completion)(p, outcomes.next(i, h.result_bytes as usize))
                    })
                }
            })
        }
    }

    /// Runs the first `n` staged requests in place (request, then completion with its
    /// result), in order, prefetching the targets of those ahead, and removes them. Only for a
    /// queue with nothing in flight (the local trustee's). Unwinding as in
    /// [`RecordQueue::complete_front`].
    pub(crate) fn run_local(&mut self, n: usize) {
        assert!(
            n <= self.staged && self.in_flight == 0,
            "skein: run_local({n}) of {} staged, {} in flight",
            self.staged,
            self.in_flight
        );
        let uniform = !self.uniform().is_null();
        // SAFETY: the first `n` records are staged, both halves live (record invariant 1), all
        // of one type if `uniform` is set (the field's meaning); each is consumed once, by
        // `run_in_place`.
        unsafe {
            self.consume_front(n, true, |start, progress| {
                if uniform {
                    let h = header(start);
                    (h.run_in_place_uniform)(start, n, progress);
                    h.totals(n)
                } else {
                    walk::<true>(start, n, progress, |_, h, p| (h.run_in_place)(p))
                }
            })
        }
    }

    /// Runs the first `n` records (`staged` ones, or else in flight) with `run(start,
    /// progress)`, then removes exactly those `run` counted in `progress` — also if it unwinds
    /// — so none is consumed twice. `run` returns the records' summed `(words, result bytes)`.
    ///
    /// # Safety
    /// `run` must consume each of the `n` records at `start` at most once, count each in
    /// `progress` right before consuming it, and return their true totals.
    unsafe fn consume_front(
        &mut self,
        n: usize,
        staged: bool,
        run: impl FnOnce(*const u64, &Cell<usize>) -> (usize, usize),
    ) {
        if n == 0 {
            return;
        }
        let progress = Cell::new(0);
        let start = self.buf[self.head..].as_ptr() as *const u64;
        let mut g = Consume { queue: self, start, progress: &progress, total: None, staged };
        // The buffer cannot change while `&mut self` is held (invariant 1 holds throughout).
        g.total = Some(run(start, &progress));
    }
}

/// Removes the records a run consumed from the front of the queue when it ends or unwinds.
struct Consume<'q> {
    queue: &'q mut RecordQueue,
    start: *const u64,
    /// Records consumed so far.
    progress: &'q Cell<usize>,
    /// `(words, result bytes)` of all of them, known when the run ended normally.
    total: Option<(usize, usize)>,
    /// The records were staged (else in flight).
    staged: bool,
}

impl Drop for Consume<'_> {
    fn drop(&mut self) {
        let n = self.progress.get();
        let (w, bytes) = self.total.unwrap_or_else(|| {
            let (mut w, mut bytes) = (0, 0);
            for _ in 0..n {
                // SAFETY: the first `n` records at `start` existed when the run began (record
                // invariant 1); headers stay readable after consumption (invariant 4).
                let h = unsafe { header(self.start.add(w)) };
                w += h.words as usize;
                bytes += h.result_bytes as usize;
            }
            (w, bytes)
        });
        let q = &mut *self.queue;
        q.head += w;
        if self.staged {
            q.sent_end += w;
            q.staged -= n;
            q.staged_result_bytes -= bytes;
            q.restaged();
        } else {
            q.in_flight -= n;
        }
        if q.is_empty() {
            q.clear();
        }
    }
}

impl Drop for RecordQueue {
    fn drop(&mut self) {
        let base = self.buf.as_mut_ptr() as *mut u64;
        let mut at = self.head;
        while at < self.tail {
            // SAFETY: a record starts at `at` (record invariants 1, 4); in flight: only the
            // completion is live, staged: both (invariant 1); each live half is consumed here,
            // once.
            unsafe {
                let h = header(base.add(at));
                let p = base.add(at + record::HEADER_WORDS) as *mut u8;
                if at >= self.sent_end {
                    (h.drop_request)(p);
                }
                (h.drop_completion)(p);
                at += h.words as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests;
