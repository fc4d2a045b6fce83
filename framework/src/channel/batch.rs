//! Running records in order: a batch's request halves on the trustee ([`serve_batch`]), and
//! the loops that run a sequence of records for the client's queue (completions, local
//! requests).
//!
//! A *batch* is a prefix of a client's staged records copied into a request slot
//! ([`super::queue::RecordQueue::send_to`]); the trustee runs the request closures of the copy
//! with [`serve_batch`], skipping the completions' bytes (the record size in the vtable covers
//! both), and writes the results one after the other into the response slot. The client keeps
//! its own copy of the records, whose completions it runs when the response comes back
//! ([`super::queue::RecordQueue::complete_front`]).
//!
//! Two ways to run a sequence of records:
//!
//! * a **uniform** run (all records of one type, which the queue tracks as it stages them, and
//!   which travels as a flag in the batch's count, [`tag_count`]) runs in that type's own loop
//!   ([`serve_uniform`], [`complete_uniform`], [`run_in_place_uniform`], reached through the
//!   vtable of the first record): the closures' code is inlined, with no header read and no
//!   indirect call per record;
//! * a mixed run is walked record by record ([`walk`]), each run through its vtable.
//!
//! Either way a trustee reads the targets of the records [`PREFETCH_AHEAD`] ahead of the one it
//! runs and prefetches them, so the cache misses of a batch over many properties overlap.
//!
//! The unsafe code relies on the record invariants of [`super::record`].

use super::prefetch::prefetch;
use super::record::{
    header, record_words, run_completion, run_in_place, run_request, target, Outcome, VTable,
    HEADER_WORDS,
};
use super::slot::PanicPayload;
use std::cell::Cell;

/// How many records ahead of the one running a trustee prefetches targets.
const PREFETCH_AHEAD: usize = 32;
/// The flag bit of a batch's record count (as it travels in a slot header) that says all its
/// records are of one type: the trustee then runs them with that type's own loop.
const UNIFORM_BATCH: u32 = 1 << 31;

/// A batch's record count as it travels in a slot header: tagged when all its records are of
/// one type.
#[inline]
pub(crate) fn tag_count(count: usize, uniform: bool) -> u32 {
    debug_assert!(count < UNIFORM_BATCH as usize);
    count as u32 | if uniform { UNIFORM_BATCH } else { 0 }
}

/// `(count, uniform)` of a count made by [`tag_count`].
#[inline]
pub(crate) fn untag_count(tagged: u32) -> (usize, bool) {
    ((tagged & !UNIFORM_BATCH) as usize, tagged & UNIFORM_BATCH != 0)
}

/// Hands out the outcomes of a served batch's requests in order: their results lie one after
/// the other from `resp`; the panics (sorted by index) replace the results of those requests.
pub(crate) struct Outcomes {
    resp: *const u8,
    panics: std::iter::Peekable<std::vec::IntoIter<(u32, PanicPayload)>>,
}

impl Outcomes {
    #[inline]
    pub(crate) fn new(resp: *const u8, panics: Vec<(u32, PanicPayload)>) -> Outcomes {
        Outcomes { resp, panics: panics.into_iter().peekable() }
    }

    /// The outcome of request `i`, whose result takes `result_bytes` bytes.
    #[inline(always)]
    pub(crate) fn next(&mut self, i: usize, result_bytes: usize) -> Outcome {
        let panic = match self.panics.peek() {
            Some((j, _)) if *j as usize == i => self.panics.next().map(|x| x.1),
            _ => None,
        };
        let o = Outcome { resp: self.resp, panic };
        self.resp = self.resp.wrapping_add(result_bytes);
        o
    }
}

/// Runs the request halves of the `count` records of a batch at `src` (copied there by
/// [`super::queue::RecordQueue::send_to`]) in order, writing their results one after the other
/// from `out`, and returns the panics as `(index, payload)`. A `uniform` batch (all its
/// records of one type, as `send_to` reports) runs in that type's own loop.
///
/// # Safety
/// `src` must hold exactly `count` records whose request halves are live and owned by the
/// caller (record invariants 1 and 3), not consumed before, all of one type if `uniform`; they
/// are all consumed here. `out` must be valid for writes of the records' summed result bytes
/// and 8-aligned. Nothing else may access either while this runs.
pub(crate) unsafe fn serve_batch(
    src: *const u64,
    count: usize,
    uniform: bool,
    out: *mut u8,
) -> Vec<(u32, PanicPayload)> {
    let mut panics = Vec::new();
    if uniform && count > 0 {
        // SAFETY: caller promise: `count` records of the type of the first one.
        unsafe { (header(src).serve_uniform)(src, count, out, &mut panics) };
        return panics;
    }
    let mut o = out;
    // SAFETY: caller promise; each record's request closure is consumed once, by
    // `run_request`, with its result space (the records' result bytes add up to what the
    // caller provided).
    unsafe {
        walk::<true>(src, count, &Cell::new(0), |i, h, p| {
            let at = o;
            o = o.wrapping_add(h.result_bytes as usize);
            if let Some(e) = (h.run_request)(p, at) {
                panics.push((i as u32, e));
            }
        })
    };
    panics
}

/// Walks `count` records at `src`, calling `f(index, vtable, target word address)` on each
/// after counting it in `progress`. With `PREFETCH`, the targets of the next
/// [`PREFETCH_AHEAD`] records are prefetched while one runs. Returns the words and the summed
/// result bytes of the records.
///
/// # Safety
/// `count` records start at `src` (record invariant 4), and `f` may consume each as it
/// pleases.
#[inline(always)]
pub(crate) unsafe fn walk<const PREFETCH: bool>(
    src: *const u64,
    count: usize,
    progress: &Cell<usize>,
    mut f: impl FnMut(usize, &'static VTable, *mut u8),
) -> (usize, usize) {
    let mut result_bytes = 0;
    let mut p = src as *mut u64;
    let mut ahead = src;
    let mut ahead_n = 0;
    for i in 0..count {
        let stop = if PREFETCH { count.min(i + PREFETCH_AHEAD + 1) } else { 0 };
        while ahead_n < stop {
            // SAFETY: ahead_n < count, so a record starts at `ahead`, its target word after
            // the header (record invariants 1, 4).
            let (h, t) = unsafe { (header(ahead), target(ahead)) };
            if !t.is_null() {
                prefetch(t);
            }
            // SAFETY: the next record starts right after this one (or the batch ends).
            ahead = unsafe { ahead.add(h.words as usize) };
            ahead_n += 1;
        }
        // SAFETY: i < count: a record starts at `p`.
        let h = unsafe { header(p) };
        result_bytes += h.result_bytes as usize;
        progress.set(i + 1);
        // SAFETY: the record's word 1 is inside the record (every record has a target word).
        f(i, h, unsafe { p.add(HEADER_WORDS) } as *mut u8);
        // SAFETY: the next record starts right after this one (still inside the batch).
        p = unsafe { p.add(h.words as usize) };
    }
    // SAFETY: both point into (or one past) the same buffer.
    (unsafe { p.offset_from(src) } as usize, result_bytes)
}

/// Prefetches the target of record `i` of a run of `n` records of `words` words at `src`.
///
/// # Safety
/// `n` records of `words` words each start at `src`.
#[inline(always)]
unsafe fn prefetch_target(src: *const u64, words: usize, i: usize, n: usize) {
    if i < n {
        // SAFETY: record i exists (caller promise, i < n).
        let t = unsafe { target(src.add(i * words)) };
        if !t.is_null() {
            prefetch(t);
        }
    }
}

/// The result bytes of the record at `src`.
///
/// # Safety
/// A record starts at `src`.
#[inline(always)]
unsafe fn result_bytes_of(src: *const u64) -> usize {
    // SAFETY: caller promise.
    unsafe { header(src) }.result_bytes as usize
}

/// The vtable entry `serve_uniform` of `(Request, Completion)`: runs the request halves of
/// `n >= 1` records of that type at `src`, the results one after the other from `out`, and
/// pushes the panics as `(index, payload)`.
///
/// # Safety
/// As [`serve_batch`] with `uniform` and `count = n >= 1`: `n` records of type
/// `(Request, Completion)` start at `src`, their request halves live and owned by the caller
/// (consumed here), and `out` has room for their results.
pub(crate) unsafe fn serve_uniform<Request, Completion>(
    src: *const u64,
    n: usize,
    out: *mut u8,
    panics: &mut Vec<(u32, PanicPayload)>,
) where
    Request: super::record::RequestHalf,
{
    // SAFETY: n >= 1 records start at `src` (caller promise).
    let (words, result_bytes) =
        (record_words::<Request, Completion>(), unsafe { result_bytes_of(src) });
    for i in 0..PREFETCH_AHEAD.min(n) {
        // SAFETY: caller promise (n records of this type at `src`).
        unsafe { prefetch_target(src, words, i, n) };
    }
    for i in 0..n {
        // SAFETY: as above; record i's request closure is live and consumed here once (record
        // invariant 2), with its own result space.
        unsafe {
            prefetch_target(src, words, i + PREFETCH_AHEAD, n);
            let p = src.add(i * words + HEADER_WORDS) as *mut u8;
            if let Some(e) = run_request::<Request>(p, out.wrapping_add(i * result_bytes)) {
                panics.push((i as u32, e));
            }
        }
    }
}

/// The vtable entry `complete_uniform` of `(Request, Completion)`: runs the completions of
/// `n >= 1` records of that type at `src` in order with the outcomes from `outcomes`, counting
/// each in `progress` right before it runs.
///
/// # Safety
/// `n >= 1` in-flight records of type `(Request, Completion)` start at `src`, their
/// completions live and owned by the caller (consumed here).
pub(crate) unsafe fn complete_uniform<Request, Completion: FnOnce(Outcome)>(
    src: *const u64,
    n: usize,
    outcomes: &mut Outcomes,
    progress: &Cell<usize>,
) {
    // SAFETY: n >= 1 records start at `src` (caller promise).
    let (words, result_bytes) =
        (record_words::<Request, Completion>(), unsafe { result_bytes_of(src) });
    for i in 0..n {
        progress.set(i + 1);
        let o = outcomes.next(i, result_bytes);
        // SAFETY: caller promise; record i's completion is live and consumed here once
        // (record invariant 2).
        unsafe {
            run_completion::<Request, Completion>(src.add(i * words + HEADER_WORDS) as *mut u8, o)
        };
    }
}

/// The vtable entry `run_in_place_uniform` of `(Request, Completion)`: runs `n` staged
/// records of that type at `src` in place (request, then completion), prefetching the targets
/// of those ahead, counting each in `progress` right before it runs.
///
/// # Safety
/// `n` staged records of type `(Request, Completion)` start at `src`, both halves live and
/// owned by the caller (consumed here).
pub(crate) unsafe fn run_in_place_uniform<Request, Completion>(
    src: *const u64,
    n: usize,
    progress: &Cell<usize>,
) where
    Request: super::record::RequestHalf,
    Completion: FnOnce(Outcome),
{
    let words = record_words::<Request, Completion>();
    for i in 0..PREFETCH_AHEAD.min(n) {
        // SAFETY: caller promise (n staged records of this type at `src`).
        unsafe { prefetch_target(src, words, i, n) };
    }
    for i in 0..n {
        progress.set(i + 1);
        // SAFETY: as above; both halves of record i are live and consumed here once.
        unsafe {
            prefetch_target(src, words, i + PREFETCH_AHEAD, n);
            run_in_place::<Request, Completion>(src.add(i * words + HEADER_WORDS) as *mut u8);
        }
    }
}
