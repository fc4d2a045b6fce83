//! Requests as type-erased records packed into word buffers, and the queue a client keeps them
//! in until they are answered.
//!
//! A *request* is two closures: `Q(target, out) -> Option<PanicPayload>`, which runs on the
//! trustee and writes its result at `out`, and `D(Outcome)`, which runs on the client
//! afterwards. A request is one record, both closures stored by value (no allocation) behind
//! a one-word header:
//!
//! ```text
//! word 0: &'static VTable   (the code id: one constant per (Q, D) type pair)
//! word 1: target address    (the property the request works on; null: none)
//! word 2 ..: Q's bytes, then D's bytes, each rounded up to whole words
//! ```
//!
//! A record of a request that captures only a property address and answers nothing is two
//! words: the code id and the address. This is the in-process wire format of a batch: a client
//! copies a prefix of its queue into a request slot ([`RecordQueue::send_to`]) and the trustee
//! runs the copy's `Q` halves ([`serve_batch`]), skipping `D`'s bytes (the record size in the
//! vtable covers both). The client keeps its own copy of the records, whose `D` halves it runs
//! when the response comes back ([`RecordQueue::complete_front`]). A request to the worker's
//! own trustee role is never copied: [`RecordQueue::run_local`] runs `Q` and then `D` in place.
//! Either way a trustee reads the targets of the records ahead of the one it runs and
//! prefetches them, so the cache misses of a batch over many properties overlap.
//!
//! One queue per (client, trustee) pair, the client's own trustee role included: issuing a
//! request is the same few stores whichever worker the property belongs to.
//!
//! Closures that are larger than [`INLINE_MAX`] bytes or need more than 8-byte alignment are
//! boxed, and the record holds the box (one word).
//!
//! # Invariants (the whole module's unsafe code relies on them)
//!
//! 1. Every record in a queue's `buf[head..tail]` was written by [`RecordQueue::push`] (and
//!    possibly moved since, invariant 3) with the vtable of its closure types. The records in
//!    `buf[head..sent_end]` are *in flight*: their `Q` was handed to a batch (the bytes here are
//!    dead), their `D` is live. The records in `buf[sent_end..tail]` are *staged*: both halves
//!    are live.
//! 2. Each half of a record is consumed exactly once, by reading its closure out before any
//!    user code runs: `Q` by `call` (the trustee's copy, or in place by `local`) or `drop`;
//!    `D` by `done`, `local` or `drop_done`. Consumed bytes are dead.
//! 3. Closure bytes are moved only by `memcpy` (buffer growth, compaction, appends, the copy
//!    into a batch), a valid move for every Rust value that is not pinned; closures never are.
//!    The copy into a batch duplicates the bytes; invariant 1 says which copy owns which half.
//! 4. A record's `words` (from its vtable) is its whole size, header included, so the next
//!    record starts `words` words after it. A consumed record's header and target words stay
//!    intact until the queue writes over them (a later push), so the records consumed by a run
//!    can still be walked to find where they end.

use super::slot::PanicPayload;
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;

/// Closures above this many bytes are boxed instead of stored inline.
pub(crate) const INLINE_MAX: usize = 256;
/// Header size in words.
pub(crate) const HEADER_WORDS: usize = 1;
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
/// Result bytes a request may ask for (`aux`): a request to the local trustee writes its result
/// into a stack buffer of this size.
pub(crate) const MAX_AUX: usize = 256;

/// What a client learns about one request when its response comes back.
pub(crate) struct Outcome {
    /// The request's result bytes (unspecified if it panicked).
    pub(crate) resp: *const u8,
    /// The panic payload if the delegated closure panicked.
    pub(crate) panic: Option<PanicPayload>,
}

/// The static description of one record type `(Q, D)`. Every function takes the address of
/// the record's word 1 (its target word).
pub(crate) struct VTable {
    /// Moves `Q` out and runs it with the target and the result space.
    call: unsafe fn(*mut u8, *mut u8) -> Option<PanicPayload>,
    /// Drops `Q` unrun.
    drop: unsafe fn(*mut u8),
    /// Moves `D` out and runs it with the outcome.
    done: unsafe fn(*mut u8, Outcome),
    /// Drops `D` unrun.
    drop_done: unsafe fn(*mut u8),
    /// Runs `Q` with a result space of its own, then `D` with the outcome.
    local: unsafe fn(*mut u8),
    /// `call` over a run of records of this type (a uniform batch; see [`serve_batch`]).
    call_many: unsafe fn(*const u64, usize, *mut u8, &mut Vec<(u32, PanicPayload)>),
    /// `done` over a run of records of this type (see [`RecordQueue::complete_front`]).
    done_many: unsafe fn(*const u64, usize, &mut Outcomes, &Cell<usize>),
    /// `local` over a run of records of this type (see [`RecordQueue::run_local`]).
    local_many: unsafe fn(*const u64, usize, &Cell<usize>),
    /// Record size in words, header included.
    words: u32,
    /// Result bytes the request needs in the response (a multiple of 8, at most [`MAX_AUX`]).
    aux: u32,
}

/// A per-type constant stored in every record header of that type (`aux`).
pub(crate) trait Aux {
    /// The value.
    const AUX: u32;
}

/// `aux` = 0.
pub(crate) struct NoAux;

impl VTable {
    /// `(words, aux)` summed over `n` records of this type.
    fn totals(&self, n: usize) -> (usize, usize) {
        (n * self.words as usize, n * self.aux as usize)
    }
}

impl Aux for NoAux {
    const AUX: u32 = 0;
}

const fn words_of<F>() -> usize {
    size_of::<F>().div_ceil(8)
}

/// Holder of the vtable constant of the closure pair `(Q, D)` with result space `X::AUX`.
struct Vt<Q, D, X>(PhantomData<VtTypes<Q, D, X>>);

/// The types a [`Vt`] is instantiated with (function types: no auto-trait or drop effects).
type VtTypes<Q, D, X> = (fn() -> Q, fn() -> D, fn() -> X);

impl<Q, D, X> Vt<Q, D, X>
where
    Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>,
    D: FnOnce(Outcome),
    X: Aux,
{
    const VT: &'static VTable = &{
        assert!(X::AUX as usize <= MAX_AUX && X::AUX % 8 == 0, "skein: result space too big");
        VTable {
            call: call_q::<Q>,
            drop: drop_q::<Q>,
            done: call_d::<Q, D>,
            drop_done: drop_d::<Q, D>,
            local: call_local::<Q, D>,
            call_many: call_many::<Q, D>,
            done_many: done_many::<Q, D>,
            local_many: local_many::<Q, D>,
            words: record_words::<Q, D>() as u32,
            aux: X::AUX,
        }
    };
}

/// `(Q, D)`'s vtable (the arguments only name the types).
fn vt_of<Q, D, X>(_: &Q, _: &D) -> &'static VTable
where
    Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>,
    D: FnOnce(Outcome),
    X: Aux,
{
    Vt::<Q, D, X>::VT
}

/// Where `D` starts, in bytes from the target word.
const fn d_offset<Q>() -> usize {
    8 + 8 * words_of::<Q>()
}

#[inline(always)]
unsafe fn call_q<Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>>(
    p: *mut u8,
    out: *mut u8,
) -> Option<PanicPayload> {
    // SAFETY: written by `push` with (Q, D)'s vtable: the target word at `p`, Q after it
    // (invariant 1); this is Q's one consumption (invariant 2).
    let (target, q) = unsafe { (ptr::read(p as *const *mut u8), ptr::read(p.add(8) as *const Q)) };
    q(target, out)
}

unsafe fn drop_q<Q>(p: *mut u8) {
    // SAFETY: as in `call_q`; Q is consumed here instead.
    unsafe { ptr::drop_in_place(p.add(8) as *mut Q) }
}

#[inline(always)]
unsafe fn call_d<Q, D: FnOnce(Outcome)>(p: *mut u8, o: Outcome) {
    // SAFETY: D follows Q in the record (invariant 1); this is D's one consumption (inv. 2).
    let d = unsafe { ptr::read(p.add(d_offset::<Q>()) as *const D) };
    d(o)
}

unsafe fn drop_d<Q, D>(p: *mut u8) {
    // SAFETY: as in `call_d`; D is consumed here instead.
    unsafe { ptr::drop_in_place(p.add(d_offset::<Q>()) as *mut D) }
}

#[inline(always)]
unsafe fn call_local<Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>, D: FnOnce(Outcome)>(
    p: *mut u8,
) {
    // SAFETY: a staged record: both halves live (invariant 1), both consumed here (inv. 2),
    // each read out before any user code runs.
    let (target, q, d) = unsafe {
        (
            ptr::read(p as *const *mut u8),
            ptr::read(p.add(8) as *const Q),
            ptr::read(p.add(d_offset::<Q>()) as *const D),
        )
    };
    // The result space: `aux` <= MAX_AUX bytes (checked in the vtable constant), 8-aligned.
    let mut space = MaybeUninit::<[u64; MAX_AUX / 8]>::uninit();
    let out = space.as_mut_ptr() as *mut u8;
    let panic = q(target, out);
    d(Outcome { resp: out, panic })
}

/// Size in words of a `(Q, D)` record.
const fn record_words<Q, D>() -> usize {
    HEADER_WORDS + 1 + words_of::<Q>() + words_of::<D>()
}

/// Prefetches the target of record `i` of a run of `n` records of `words` words at `src`.
///
/// # Safety
/// `n` records of `words` words each start at `src`.
#[inline(always)]
unsafe fn prefetch_target(src: *const u64, words: usize, i: usize, n: usize) {
    if i < n {
        // SAFETY: record i exists; its target word follows its header (invariant 1).
        let t = unsafe { ptr::read(src.add(i * words + HEADER_WORDS) as *const *const u8) };
        if !t.is_null() {
            prefetch(t);
        }
    }
}

// The `_many` functions run a *uniform* run of records (all of one type `(Q, D)`) with the
// closures' code inlined into one loop: no header read and no indirect call per record.

unsafe fn call_many<Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>, D>(
    src: *const u64,
    n: usize,
    out: *mut u8,
    panics: &mut Vec<(u32, PanicPayload)>,
) {
    // SAFETY: the callers run at least one record, so one starts at `src`.
    let (words, aux) = (record_words::<Q, D>(), unsafe { aux_of(src) });
    for i in 0..PREFETCH_AHEAD.min(n) {
        // SAFETY: caller promise of `serve_batch` (n records of this type at `src`).
        unsafe { prefetch_target(src, words, i, n) };
    }
    for i in 0..n {
        // SAFETY: as above; record i's Q is live and consumed here once (invariant 2), with
        // its own result space.
        unsafe {
            prefetch_target(src, words, i + PREFETCH_AHEAD, n);
            let p = src.add(i * words + HEADER_WORDS) as *mut u8;
            if let Some(e) = call_q::<Q>(p, out.wrapping_add(i * aux)) {
                panics.push((i as u32, e));
            }
        }
    }
}

unsafe fn done_many<Q, D: FnOnce(Outcome)>(
    src: *const u64,
    n: usize,
    outcomes: &mut Outcomes,
    progress: &Cell<usize>,
) {
    // SAFETY: the callers run at least one record, so one starts at `src`.
    let (words, aux) = (record_words::<Q, D>(), unsafe { aux_of(src) });
    for i in 0..n {
        progress.set(i + 1);
        let o = outcomes.next(i, aux);
        // SAFETY: caller promise of `complete_front` (n in-flight records of this type at
        // `src`); record i's D is live and consumed here once (invariant 2).
        unsafe { call_d::<Q, D>(src.add(i * words + HEADER_WORDS) as *mut u8, o) };
    }
}

unsafe fn local_many<Q, D>(src: *const u64, n: usize, progress: &Cell<usize>)
where
    Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>,
    D: FnOnce(Outcome),
{
    let words = record_words::<Q, D>();
    for i in 0..PREFETCH_AHEAD.min(n) {
        // SAFETY: caller promise of `run_local` (n staged records of this type at `src`).
        unsafe { prefetch_target(src, words, i, n) };
    }
    for i in 0..n {
        progress.set(i + 1);
        // SAFETY: as above; both halves of record i are live and consumed here once.
        unsafe {
            prefetch_target(src, words, i + PREFETCH_AHEAD, n);
            call_local::<Q, D>(src.add(i * words + HEADER_WORDS) as *mut u8);
        }
    }
}

/// The `aux` of the record at `src`.
///
/// # Safety
/// A record starts at `src`.
#[inline(always)]
unsafe fn aux_of(src: *const u64) -> usize {
    // SAFETY: caller promise.
    unsafe { header(src) }.aux as usize
}

/// Hands out the outcomes of a served batch's requests in order: their results lie one after
/// the other from `resp`; the panics (sorted by index) replace the results of those requests.
pub(crate) struct Outcomes {
    resp: *const u8,
    panics: std::iter::Peekable<std::vec::IntoIter<(u32, PanicPayload)>>,
}

impl Outcomes {
    fn new(resp: *const u8, panics: Vec<(u32, PanicPayload)>) -> Outcomes {
        Outcomes { resp, panics: panics.into_iter().peekable() }
    }

    /// The outcome of request `i`, whose result takes `aux` bytes.
    #[inline(always)]
    fn next(&mut self, i: usize, aux: usize) -> Outcome {
        let panic = match self.panics.peek() {
            Some((j, _)) if *j as usize == i => self.panics.next().map(|x| x.1),
            _ => None,
        };
        let o = Outcome { resp: self.resp, panic };
        self.resp = self.resp.wrapping_add(aux);
        o
    }
}

/// Hints the CPU to load the cache line at `p` (no effect where there is no such instruction).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Reads the header of the record at `at`.
///
/// # Safety
/// A record starts at `at` (invariants 1 and 4: consumed records keep their header).
#[inline(always)]
unsafe fn header<'a>(at: *const u64) -> &'a VTable {
    // SAFETY: word 0 of a record is a `&'static VTable` (invariant 1).
    unsafe { &*ptr::read(at as *const *const VTable) }
}

/// Walks `count` records at `src`, calling `f(index, vtable, target word address)` on each
/// after counting it in `progress`. With `PREFETCH`, the targets of the next
/// [`PREFETCH_AHEAD`] records are prefetched while one runs. Returns the words and the summed
/// `aux` of the records.
///
/// # Safety
/// `count` records start at `src` (invariant 4), and `f` may consume each as it pleases.
#[inline(always)]
unsafe fn walk<const PREFETCH: bool>(
    src: *const u64,
    count: usize,
    progress: &Cell<usize>,
    mut f: impl FnMut(usize, &'static VTable, *mut u8),
) -> (usize, usize) {
    let mut aux = 0;
    let mut p = src as *mut u64;
    let mut ahead = src;
    let mut ahead_n = 0;
    for i in 0..count {
        let stop = if PREFETCH { count.min(i + PREFETCH_AHEAD + 1) } else { 0 };
        while ahead_n < stop {
            // SAFETY: ahead_n < count, so a record starts at `ahead`, its target word after
            // the header (invariants 1, 4).
            let (h, target) =
                unsafe { (header(ahead), ptr::read(ahead.add(HEADER_WORDS) as *const *const u8)) };
            if !target.is_null() {
                prefetch(target);
            }
            // SAFETY: the next record starts right after this one (or the batch ends).
            ahead = unsafe { ahead.add(h.words as usize) };
            ahead_n += 1;
        }
        // SAFETY: i < count: a record starts at `p`.
        let h = unsafe { header(p) };
        aux += h.aux as usize;
        progress.set(i + 1);
        // SAFETY: the record's word 1 is inside the record (every record has a target word).
        f(i, h, unsafe { p.add(HEADER_WORDS) } as *mut u8);
        // SAFETY: the next record starts right after this one (still inside the batch).
        p = unsafe { p.add(h.words as usize) };
    }
    // SAFETY: both point into (or one past) the same buffer.
    (unsafe { p.offset_from(src) } as usize, aux)
}

/// Runs the `Q` halves of the `count` records of a batch at `src` (copied there by
/// [`RecordQueue::send_to`]) in order, writing their results one after the other from `out`,
/// and returns the panics as `(index, payload)`. A `uniform` batch (all its records of one
/// type, as `send_to` reports) runs in that type's own loop.
///
/// # Safety
/// `src` must hold exactly `count` records whose `Q` halves are live and owned by the caller
/// (invariants 1 and 3), not consumed before, all of one type if `uniform`; they are all
/// consumed here. `out` must be valid for writes of the records' summed `aux` bytes and
/// 8-aligned. Nothing else may access either while this runs.
pub(crate) unsafe fn serve_batch(
    src: *const u64,
    count: usize,
    uniform: bool,
    out: *mut u8,
) -> Vec<(u32, PanicPayload)> {
    let mut panics = Vec::new();
    if uniform && count > 0 {
        // SAFETY: caller promise: `count` records of the type of the first one.
        unsafe { (header(src).call_many)(src, count, out, &mut panics) };
        return panics;
    }
    let mut o = out;
    // SAFETY: caller promise; each record's Q is consumed once, by `call`, with its result
    // space (the records' aux add up to what the caller provided).
    unsafe {
        walk::<true>(src, count, &Cell::new(0), |i, h, p| {
            let at = o;
            o = o.wrapping_add(h.aux as usize);
            if let Some(e) = (h.call)(p, at) {
                panics.push((i as u32, e));
            }
        })
    };
    panics
}

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
    /// Sum of the staged records' `aux`.
    staged_aux: usize,
    /// Bitwise OR and AND of the staged records' vtable addresses: the records are all alike
    /// iff the two are equal (two branch-free updates per push). [`NO_VT`] when nothing is
    /// staged; after a partial [`RecordQueue::send_to`] they still cover the sent records too,
    /// which can only turn a uniform rest into "not known to be uniform".
    vt_or: usize,
    vt_and: usize,
}

/// `(vt_or, vt_and)` of no records.
const NO_VT: (usize, usize) = (0, usize::MAX);

/// Requests staged towards one trustee from which [`RecordQueue::push`] says so: a fiber that
/// issues `apply_then` is then suspended until the loop has flushed a batch of them (bounds
/// memory; does not apply in delegated context).
pub(crate) const STAGING_YIELD: usize = 512;

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
            staged_aux: 0,
            vt_or: NO_VT.0,
            vt_and: NO_VT.1,
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
            // Compact: move the records to the front (a memcpy move, invariant 3).
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

    /// Stages the request `(q, d)` on `target`; `q` gets `X::AUX` bytes of result space.
    /// Returns true when [`STAGING_YIELD`] or more requests are staged.
    #[inline]
    pub(crate) fn push<X, Q, D>(&mut self, target: *mut u8, q: Q, d: D) -> bool
    where
        X: Aux,
        Q: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>,
        D: FnOnce(Outcome),
    {
        const fn fits<F>() -> bool {
            size_of::<F>() <= INLINE_MAX && align_of::<F>() <= 8
        }
        // A closure that does not fit is boxed, and the record holds the box (one word).
        match (fits::<Q>(), fits::<D>()) {
            // SAFETY: the vtable is (Q, D)'s own; both fit inline.
            (true, true) => unsafe { self.push_raw(Vt::<Q, D, X>::VT, target, q, d) },
            (false, true) => {
                let b = Box::new(q);
                let q = move |t: *mut u8, o: *mut u8| (*b)(t, o);
                // SAFETY: the vtable is that of the pair written; both fit inline.
                unsafe { self.push_raw(vt_of::<_, _, X>(&q, &d), target, q, d) }
            }
            (true, false) => {
                let b = Box::new(d);
                let d = move |o: Outcome| (*b)(o);
                // SAFETY: as above.
                unsafe { self.push_raw(vt_of::<_, _, X>(&q, &d), target, q, d) }
            }
            (false, false) => {
                let (bq, bd) = (Box::new(q), Box::new(d));
                let q = move |t: *mut u8, o: *mut u8| (*bq)(t, o);
                let d = move |o: Outcome| (*bd)(o);
                // SAFETY: as above.
                unsafe { self.push_raw(vt_of::<_, _, X>(&q, &d), target, q, d) }
            }
        }
    }

    /// Writes one record.
    ///
    /// # Safety
    /// `vt` is `(Q, D)`'s vtable and both fit inline.
    #[inline(always)]
    unsafe fn push_raw<Q, D>(&mut self, vt: &'static VTable, target: *mut u8, q: Q, d: D) -> bool {
        debug_assert!(align_of::<Q>() <= 8 && size_of::<Q>() <= INLINE_MAX);
        debug_assert!(align_of::<D>() <= 8 && size_of::<D>() <= INLINE_MAX);
        let words = vt.words as usize;
        self.reserve_words(words);
        // The queue's fields are read and updated before the record is written: the compiler
        // cannot tell the record's stores from the fields, and would read them all again.
        let (tail, staged) = (self.tail, self.staged + 1);
        self.tail = tail + words;
        self.staged = staged;
        self.staged_aux += vt.aux as usize;
        self.vt_or |= vt as *const VTable as usize;
        self.vt_and &= vt as *const VTable as usize;
        // SAFETY: `reserve_words` made room for the whole record at `tail`; the buffer is
        // 8-aligned and Q, D need at most 8. This writes a record as invariant (1) describes.
        unsafe {
            let at = (self.buf.as_mut_ptr() as *mut u64).add(tail);
            ptr::write(at as *mut *const VTable, vt);
            let p = at.add(HEADER_WORDS) as *mut u8;
            ptr::write(p as *mut *mut u8, target);
            ptr::write(p.add(8) as *mut Q, q);
            ptr::write(p.add(d_offset::<Q>()) as *mut D, d);
        }
        staged >= STAGING_YIELD
    }

    /// Copies the longest prefix of the staged requests whose total size is at most
    /// `max_words` words and whose summed `aux` is at most `max_aux` into `dst` (at least one
    /// record if one is staged and the first fits), and marks them in flight. Returns
    /// `(words, count, uniform)`: `uniform` when all of them are of one type.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `max_words` words and 8-aligned. The `Q` halves of the
    /// copied records pass to `dst`: each must later be consumed exactly once with
    /// [`serve_batch`] (or leaked); their `D` halves stay here (see
    /// [`RecordQueue::complete_front`]).
    pub(crate) unsafe fn send_to(
        &mut self,
        dst: *mut u64,
        max_words: usize,
        max_aux: usize,
    ) -> (usize, usize, bool) {
        let (mut w, mut n, mut aux) = (0usize, 0usize, 0usize);
        let uniform_vt = self.uniform();
        let uniform = !uniform_vt.is_null();
        let base = self.buf[self.sent_end..].as_ptr() as *const u64;
        if self.tail - self.sent_end <= max_words && self.staged_aux <= max_aux {
            // Everything fits: no need to walk the records.
            (w, n, aux) = (self.tail - self.sent_end, self.staged, self.staged_aux);
        } else if uniform {
            // All records alike: the prefix that fits is a division away.
            // SAFETY: a vtable constant (the address every staged record's push recorded).
            let u = unsafe { &*uniform_vt };
            let (rw, ra) = (u.words as usize, u.aux as usize);
            n = self.staged.min(max_words / rw);
            if let Some(by_aux) = max_aux.checked_div(ra) {
                n = n.min(by_aux);
            }
            (w, aux) = (n * rw, n * ra);
        }
        while n < self.staged {
            // SAFETY: n < staged, so a record starts at sent_end + w (invariants 1 and 4).
            let h = unsafe { header(base.add(w)) };
            let rw = h.words as usize;
            if w + rw > max_words || aux + h.aux as usize > max_aux {
                break;
            }
            w += rw;
            aux += h.aux as usize;
            n += 1;
        }
        // SAFETY: the caller promised `dst` holds `max_words >= w` words; source and
        // destination are distinct buffers. The Q halves now belong to `dst` (invariant 1:
        // these records are in flight from here on).
        unsafe { ptr::copy_nonoverlapping(base, dst, w) };
        self.sent_end += w;
        self.in_flight += n;
        self.staged -= n;
        self.staged_aux -= aux;
        if self.staged == 0 {
            (self.vt_or, self.vt_and) = NO_VT;
        }
        (w, n, uniform && n > 0)
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
        // `&mut`). The records move (invariant 3): live here, dead in `other`.
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
        self.tail += w;
        self.staged += other.staged;
        self.staged_aux += other.staged_aux;
        other.clear();
    }

    /// Marks the queue empty (its records were consumed or moved elsewhere).
    fn clear(&mut self) {
        (self.head, self.sent_end, self.tail) = (0, 0, 0);
        (self.in_flight, self.staged, self.staged_aux) = (0, 0, 0);
        (self.vt_or, self.vt_and) = NO_VT;
    }

    /// Runs the `D` halves of the first `n` requests in flight (`n` at most their number), in
    /// order, and removes them; `uniform` if they are all of one type (they were sent as one
    /// uniform batch). Their results lie one after the other from `resp`; `panics` (sorted by
    /// index, as [`serve_batch`] returns them) name the requests that panicked instead. Nothing
    /// can be pushed meanwhile (`&mut self`); if a completion unwinds, the ones after it stay in
    /// flight (and are dropped with the queue), the ones before it and itself are consumed:
    /// none twice.
    pub(crate) fn complete_front(
        &mut self,
        n: usize,
        uniform: bool,
        resp: *const u8,
        panics: Vec<(u32, PanicPayload)>,
    ) {
        assert!(n <= self.in_flight, "skein: complete_front({n}) of {}", self.in_flight);
        let mut outcomes = Outcomes::new(resp, panics);
        // SAFETY: the first `n` records are in flight, their D halves live (invariant 1), all
        // of one type if `uniform`; each is consumed once, by `done`.
        unsafe {
            self.consume_front(n, false, |start, progress| {
                if uniform {
                    let h = header(start);
                    (h.done_many)(start, n, &mut outcomes, progress);
                    h.totals(n)
                } else {
                    walk::<false>(start, n, progress, |i, h, p| {
                        (h.done)(p, outcomes.next(i, h.aux as usize))
                    })
                }
            })
        }
    }

    /// Runs the first `n` staged requests in place (`Q`, then `D` with its result), in order,
    /// prefetching the targets of those ahead, and removes them. Only for a queue with nothing
    /// in flight (the local trustee's). Unwinding as in [`RecordQueue::complete_front`].
    pub(crate) fn run_local(&mut self, n: usize) {
        assert!(
            n <= self.staged && self.in_flight == 0,
            "skein: run_local({n}) of {} staged, {} in flight",
            self.staged,
            self.in_flight
        );
        let uniform = !self.uniform().is_null();
        // SAFETY: the first `n` records are staged, both halves live (invariant 1), all of one
        // type if `uniform` is set (the field's meaning); each is consumed once, by `local`.
        unsafe {
            self.consume_front(n, true, |start, progress| {
                if uniform {
                    let h = header(start);
                    (h.local_many)(start, n, progress);
                    h.totals(n)
                } else {
                    walk::<true>(start, n, progress, |_, h, p| (h.local)(p))
                }
            })
        }
    }

    /// Runs the first `n` records (`staged` ones, or else in flight) with `run(start,
    /// progress)`, then removes exactly those `run` counted in `progress` — also if it unwinds
    /// — so none is consumed twice. `run` returns the records' summed `(words, aux)`.
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
        let mut g = Consume { q: self, start, progress: &progress, total: None, staged };
        // The buffer cannot change while `&mut self` is held (invariant 1 holds throughout).
        g.total = Some(run(start, &progress));
    }
}

/// Removes the records a run consumed from the front of the queue when it ends or unwinds.
struct Consume<'q> {
    q: &'q mut RecordQueue,
    start: *const u64,
    /// Records consumed so far.
    progress: &'q Cell<usize>,
    /// `(words, aux)` of all of them, known when the run ended normally.
    total: Option<(usize, usize)>,
    /// The records were staged (else in flight).
    staged: bool,
}

impl Drop for Consume<'_> {
    fn drop(&mut self) {
        let n = self.progress.get();
        let (w, aux) = self.total.unwrap_or_else(|| {
            let (mut w, mut aux) = (0, 0);
            for _ in 0..n {
                // SAFETY: the first `n` records at `start` existed when the run began
                // (invariant 1); headers stay readable after consumption (invariant 4).
                let h = unsafe { header(self.start.add(w)) };
                w += h.words as usize;
                aux += h.aux as usize;
            }
            (w, aux)
        });
        let q = &mut *self.q;
        q.head += w;
        if self.staged {
            q.sent_end += w;
            q.staged -= n;
            q.staged_aux -= aux;
            if q.staged == 0 {
                (q.vt_or, q.vt_and) = NO_VT;
            }
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
            // SAFETY: a record starts at `at` (invariants 1, 4); in flight: only D is live,
            // staged: both (invariant 1); each live half is consumed here, once.
            unsafe {
                let h = header(base.add(at));
                let p = base.add(at + HEADER_WORDS) as *mut u8;
                if at >= self.sent_end {
                    (h.drop)(p);
                }
                (h.drop_done)(p);
                at += h.words as usize;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// 8 bytes of result space.
    struct Eight;
    impl Aux for Eight {
        const AUX: u32 = 8;
    }

    type Log = Rc<RefCell<Vec<u64>>>;

    /// A request that adds `i` to the target's `u64` and answers the new value; its completion
    /// logs `i * 1000 + answer` (or `u64::MAX` for a panic).
    fn add(q: &mut RecordQueue, target: *mut u64, i: u64, log: &Log) -> bool {
        let log = log.clone();
        q.push::<Eight, _, _>(
            target as *mut u8,
            move |t, out| {
                // SAFETY: `t` points to a live u64 nobody else touches during the run; `out`
                // has 8 bytes of result space.
                unsafe {
                    *(t as *mut u64) += i;
                    *(out as *mut u64) = *(t as *mut u64);
                }
                None
            },
            move |o: Outcome| {
                let v = match o.panic {
                    // SAFETY: the request wrote a u64 at `resp`.
                    None => i * 1000 + unsafe { *(o.resp as *const u64) },
                    Some(_) => u64::MAX,
                };
                log.borrow_mut().push(v)
            },
        )
    }

    /// Sends everything staged in `q` through batches of at most `max_words` words, serving
    /// each (as a trustee would) and completing it (as the client does).
    fn round_trips(q: &mut RecordQueue, max_words: usize) -> (usize, usize) {
        let (mut batches, mut uniform_batches) = (0, 0);
        let mut slot = vec![0u64; max_words];
        let mut resp = vec![0u64; max_words];
        while q.staged() > 0 {
            // SAFETY: `slot` holds max_words words; the batch is served right below.
            let (w, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), max_words, 8 * max_words) };
            assert!(n > 0 && w <= max_words);
            uniform_batches += uni as usize;
            // SAFETY: exactly `n` records were copied into `slot`; `resp` has room.
            let panics =
                unsafe { serve_batch(slot.as_ptr(), n, uni, resp.as_mut_ptr() as *mut u8) };
            q.complete_front(n, uni, resp.as_ptr() as *const u8, panics);
            batches += 1;
        }
        (batches, uniform_batches)
    }

    #[test]
    fn staging_limit_and_uniformity() {
        let mut q = RecordQueue::default();
        let mut cell = 0u64;
        let tg = &mut cell as *mut u64 as *mut u8;
        for i in 1..=600usize {
            let over = q.push::<NoAux, _, _>(tg, |_, _| None, |_| {});
            assert_eq!(over, i >= STAGING_YIELD, "push {i}");
        }
        assert_eq!(q.staged(), 600);
        assert!(!q.uniform().is_null(), "one record type");
        // A record of another type (it captures a word) makes the staged records mixed.
        let k = 7u64;
        q.push::<NoAux, _, _>(tg, move |_, _| (k == 0).then(|| unreachable!()), |_| {});
        q.push::<NoAux, _, _>(tg, |_, _| None, |_| {});
        assert_eq!(q.staged(), 602);
        assert!(q.uniform().is_null());
        q.run_local(602);
        assert!(q.is_empty() && !q.has_staged());
        // Empty again: the next records start a new uniform run.
        q.push::<NoAux, _, _>(tg, |_, _| None, |_| {});
        assert!(!q.uniform().is_null());
        q.run_local(1);
    }

    #[test]
    fn remote_round_trip_in_order() {
        let log: Log = Rc::default();
        let mut cells = vec![0u64; 10];
        let mut q = RecordQueue::default();
        for i in 0..100u64 {
            let t = &mut cells[(i % 10) as usize] as *mut u64;
            assert_eq!(add(&mut q, t, i, &log), i + 1 >= 512);
        }
        // 5-word records (header, target, i; i and the log), 20 per batch of 100 words: the
        // uniform fast path sizes the batches.
        assert_eq!(round_trips(&mut q, 100), (5, 5), "all batches uniform");
        assert!(q.is_empty());
        let mut expect_cells = [0u64; 10];
        let expect: Vec<u64> = (0..100u64)
            .map(|i| {
                expect_cells[(i % 10) as usize] += i;
                i * 1000 + expect_cells[(i % 10) as usize]
            })
            .collect();
        assert_eq!(*log.borrow(), expect);
        assert_eq!(cells, expect_cells);
    }

    #[test]
    fn mixed_and_boxed_records_walk() {
        let log: Log = Rc::default();
        let mut cell = 0u64;
        let mut q = RecordQueue::default();
        for i in 0..60u64 {
            match i % 3 {
                0 => {
                    add(&mut q, &mut cell, i, &log);
                }
                1 => {
                    // A request too big to store inline, with a small completion.
                    let big = [i; 40];
                    let l = log.clone();
                    q.push::<NoAux, _, _>(
                        std::ptr::null_mut(),
                        move |_, _| {
                            assert_eq!(big[39], i);
                            None
                        },
                        move |_| l.borrow_mut().push(i),
                    );
                }
                _ => {
                    // A small request with a big completion.
                    let big = [i; 40];
                    let l = log.clone();
                    q.push::<NoAux, _, _>(
                        std::ptr::null_mut(),
                        |_, _| None,
                        move |_| l.borrow_mut().push(big[0]),
                    );
                }
            }
        }
        // Mixed records: the batch prefixes are found by walking; 7 words hold at most 2.
        let (batches, uniform) = round_trips(&mut q, 7);
        assert!(batches >= 30 && uniform < batches);
        let got = log.borrow().clone();
        assert_eq!(got.len(), 60);
        for (k, v) in got.iter().enumerate() {
            if k % 3 != 0 {
                assert_eq!(*v, k as u64);
            }
        }
        assert_eq!(cell, (0..60).filter(|i| i % 3 == 0).sum::<u64>());
    }

    #[test]
    fn local_runs_both_halves_and_append_keeps_order() {
        let log: Log = Rc::default();
        let mut cell = 5u64;
        let mut q = RecordQueue::default();
        let mut newer = RecordQueue::default();
        for i in 1..=4u64 {
            add(&mut q, &mut cell, i, &log);
            add(&mut newer, &mut cell, 10 * i, &log);
        }
        q.run_local(2);
        assert_eq!(q.staged(), 2);
        q.append(&mut newer);
        assert!(newer.is_empty());
        assert_eq!(q.staged(), 6);
        q.run_local(6);
        assert!(q.is_empty());
        assert_eq!(*log.borrow(), vec![1006, 2008, 3011, 4015, 10025, 20045, 30075, 40115]);
    }

    #[test]
    fn a_panicking_request_is_reported_to_its_completion() {
        let log: Log = Rc::default();
        let mut cell = 0u64;
        let mut q = RecordQueue::default();
        add(&mut q, &mut cell, 1, &log);
        let l = log.clone();
        q.push::<NoAux, _, _>(
            std::ptr::null_mut(),
            |_, _| std::panic::catch_unwind(|| panic!("request fails")).err(),
            move |o| l.borrow_mut().push(if o.panic.is_some() { 7 } else { 0 }),
        );
        add(&mut q, &mut cell, 2, &log);
        round_trips(&mut q, 64);
        assert_eq!(*log.borrow(), vec![1001, 7, 2003]);
    }

    #[test]
    fn drop_consumes_what_each_side_owns() {
        let rc = Rc::new(());
        let mut slot = vec![0u64; 64];
        {
            let mut q = RecordQueue::default();
            for _ in 0..6 {
                let (a, b) = (rc.clone(), rc.clone());
                q.push::<NoAux, _, _>(
                    std::ptr::null_mut(),
                    move |_, _| {
                        drop(a);
                        None
                    },
                    move |_| drop(b),
                );
            }
            assert_eq!(Rc::strong_count(&rc), 13);
            // Two requests go in flight: their Q halves belong to the batch now.
            // SAFETY: `slot` holds 64 words; the batch is served below.
            let (w, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), 2 * 4, 0) };
            assert_eq!((w, n, uni), (8, 2, true));
            // SAFETY: exactly `n` records were copied into `slot`; they need no result space.
            let panics = unsafe { serve_batch(slot.as_ptr(), n, uni, std::ptr::null_mut()) };
            assert!(panics.is_empty());
            assert_eq!(Rc::strong_count(&rc), 11, "the batch consumed its two Q halves");
        }
        // Dropping the queue dropped the two in-flight D halves and four staged pairs.
        assert_eq!(Rc::strong_count(&rc), 1);
    }

    #[test]
    fn unwinding_completion_consumes_each_record_once() {
        // Both ways of running completions: the type's own loop and the record walk.
        for uniform in [true, false] {
            let rc = Rc::new(());
            let mut q = RecordQueue::default();
            for i in 0..6 {
                let r = rc.clone();
                q.push::<NoAux, _, _>(
                    std::ptr::null_mut(),
                    |_, _| None,
                    move |_| {
                        let _r = r;
                        assert_ne!(i, 2, "completion 2 fails");
                    },
                );
            }
            let mut slot = vec![0u64; 64];
            // SAFETY: `slot` holds 64 words; every record is sent and served.
            let (_, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), 64, 0) };
            assert!(uni);
            // SAFETY: exactly `n` records were copied; no result space needed.
            unsafe { serve_batch(slot.as_ptr(), n, uniform, std::ptr::null_mut()) };
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                q.complete_front(5, uniform, std::ptr::null(), Vec::new())
            }));
            assert!(caught.is_err());
            // completions 0..=2 consumed (2 unwound, dropping its capture); 3, 4, 5 queued
            assert_eq!((q.in_flight, Rc::strong_count(&rc)), (3, 4));
            drop(q);
            assert_eq!(Rc::strong_count(&rc), 1);
        }
    }

    #[test]
    fn mixed_local_requests_run_in_order() {
        let log: Log = Rc::default();
        let mut cell = 0u64;
        let mut q = RecordQueue::default();
        for i in 1..=6u64 {
            if i % 2 == 0 {
                add(&mut q, &mut cell, i, &log);
            } else {
                let l = log.clone();
                q.push::<NoAux, _, _>(
                    std::ptr::null_mut(),
                    |_, _| None,
                    move |_| l.borrow_mut().push(i),
                );
            }
        }
        assert!(q.uniform().is_null());
        q.run_local(6);
        assert_eq!(*log.borrow(), vec![1, 2002, 3, 4006, 5, 6012]);
    }

    #[test]
    fn small_requests_are_small() {
        let mut q = RecordQueue::default();
        q.push::<NoAux, _, _>(std::ptr::null_mut(), |_, _| None, |_| {});
        let x = 5u64;
        q.push::<NoAux, _, _>(
            std::ptr::null_mut(),
            move |_, _| {
                assert_eq!(x, 5);
                None
            },
            |_| {},
        );
        assert_eq!((q.tail - q.head, q.staged()), (2 + 3, 2));
        q.run_local(2);
        assert!(q.is_empty());
    }
}
