//! The record: one request stored by value in a word buffer, and its type erasure.
//!
//! A *request* is two closures: a **request closure** `(target, out) -> Option<PanicPayload>`,
//! which runs on the trustee and writes its result at `out`, and a **completion**
//! `(Outcome)`, which runs on the client afterwards. A request is one record, both closures
//! stored by value (no allocation) behind a one-word header:
//!
//! ```text
//! word 0: &'static VTable   (the code id: one constant per (request, completion) type pair)
//! word 1: target address    (the property the request works on; null: none)
//! word 2 ..: the request half's bytes (the argument, or a closure's captures), then the
//!            completion's, each rounded up to whole words
//! ```
//!
//! The request half comes in two kinds ([`RequestHalf`]):
//!
//! * **argument-first** (the remote-capable calls: `apply`, `apply_then`, `TrustArray`, ...;
//!   `docs/rack-mode.md` §2.4): the request half is **the argument itself**, an
//!   [`ArgRequest`] (`repr(C, packed)`), so bytes `8..8 + size_of::<A>()` after the target
//!   word are `A`'s own bytes in `A`'s own layout, read back unaligned. The code that runs
//!   it is named by the record's type alone ([`ArgCall`]: it reads `A`, recreates the
//!   zero-sized user closure and runs it), so those bytes and the target are all a remote
//!   trustee will need;
//! * **closure** (the `*_local` calls, `post`, the runtime's own requests): the request
//!   closure's captured bytes, in the closure's (unspecified) layout.
//!
//! A record of a request that captures only a property address and answers nothing is two
//! words: the code id and the address (an argument-first record with `A = ()` is the same). The [`VTable`] is how code that does not know the
//! closure types runs or drops them: its entries are monomorphized per type pair
//! ([`VTableOf`]). Closures that are larger than [`INLINE_MAX`] bytes or need more than 8-byte
//! alignment are boxed by the queue, and the record holds the box (one word).
//!
//! A remote-capable record type's [`VTable`] also names its [`RemoteHook`]: the
//! `RemoteVTable` a trustee of another rank runs it with, and the translations between the
//! record and its wire form (the transport seam, `crate::runtime::remote`).
//!
//! Where records live and move: [`super::queue`] (the client's queue, which writes them with
//! [`write()`]); [`super::batch`] runs the request halves of a batch copied into a slot, and the
//! loops over runs of records of one type.
//!
//! # Invariants (every unsafe function of `record`, `batch` and `queue` relies on them)
//!
//! 1. Every record in a queue's `buf[head..tail]` was written by [`write()`] (and possibly moved
//!    since, invariant 3) with the vtable of its closure types. The records in
//!    `buf[head..sent_end]` are *in flight*: their request closure was handed to a batch (the
//!    bytes here are dead), their completion is live. The records in `buf[sent_end..tail]` are
//!    *staged*: both halves are live. The records of a batch copied into a request slot have a
//!    live request closure and a dead completion.
//! 2. Each half of a record is consumed exactly once, by reading its closure out before any
//!    user code runs: the request closure by `run_request` (the trustee's copy, or in place by
//!    `run_in_place`) or `drop_request`, or, for a batch to another rank, by its
//!    [`RemoteHook::take_arg`] (the argument becomes wire bytes) or by moving its bytes into a
//!    loopback control record (`crate::runtime::remote`), whose serving worker runs it
//!    with `run_request`; the completion by `run_completion`, `run_in_place` or
//!    `drop_completion`. Consumed bytes are dead.
//! 3. Closure bytes are moved only by `memcpy` (buffer growth, compaction, appends, the copy
//!    into a batch or a loopback envelope), a valid move for every Rust value that is not
//!    pinned; closures never are.
//!    The copy into a batch duplicates the bytes; invariant 1 says which copy owns which half.
//! 4. A record's `words` (from its vtable) is its whole size, header included, so the next
//!    record starts `words` words after it. A consumed record's header and target words stay
//!    intact until the queue writes over them (a later push), so the records consumed by a run
//!    can still be walked to find where they end.

use super::batch::{complete_uniform, run_in_place_uniform, serve_uniform, Outcomes};
use super::slot::PanicPayload;
use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;
use std::ptr::NonNull;

/// The compile-time half of the travel rule (`docs/rack-mode.md` §2.2), in the body of every
/// remote-capable entry point: the closure `F` captures nothing, and the argument `A` and the
/// result `U` fit a record inline. Evaluated per instantiation, so a violation is an error of
/// the build (not of `cargo check`) that prints the message below.
macro_rules! travel_check {
    (F = $f:ty) => {
        const {
            assert!(
                std::mem::size_of::<$f>() == 0,
                "skein: a closure sent to a trustee must capture nothing: pass its data as the \
                 argument (a skein::Plain value) or serialize it with apply_with"
            )
        }
    };
    (F = $f:ty, A = $a:ty, U = $u:ty) => {
        $crate::channel::record::travel_check!(F = $f);
        const {
            assert!(
                std::mem::size_of::<$a>() <= $crate::channel::record::INLINE_MAX,
                "skein: a Plain argument takes at most 256 bytes: pass bigger data serialized \
                 with apply_with"
            );
            assert!(
                std::mem::size_of::<$u>() <= $crate::channel::record::MAX_RESULT_BYTES,
                "skein: a Plain result takes at most 256 bytes: return bigger data serialized \
                 with apply_with"
            );
        }
    };
}
pub(crate) use travel_check;

/// Closures above this many bytes are boxed instead of stored inline.
pub(crate) const INLINE_MAX: usize = 256;
/// Header size in words.
pub(crate) const HEADER_WORDS: usize = 1;
/// The most result bytes a request may ask for: a request to the local trustee writes its
/// result into a stack buffer of this size.
pub(crate) const MAX_RESULT_BYTES: usize = 256;

/// What a client learns about one request when its response comes back.
pub(crate) struct Outcome {
    /// The request's result bytes (unspecified if it panicked).
    pub(crate) resp: *const u8,
    /// The panic payload if the delegated closure panicked.
    pub(crate) panic: Option<PanicPayload>,
}

/// The static description of one record type `(Request, Completion)`. Every per-record entry
/// takes the address of the record's word 1 (its target word).
pub(crate) struct VTable {
    /// Moves the request closure out and runs it with the target and the result space.
    pub(crate) run_request: unsafe fn(*mut u8, *mut u8) -> Option<PanicPayload>,
    /// Drops the request closure unrun.
    pub(crate) drop_request: unsafe fn(*mut u8),
    /// Moves the completion out and runs it with the outcome.
    pub(crate) run_completion: unsafe fn(*mut u8, Outcome),
    /// Drops the completion unrun.
    pub(crate) drop_completion: unsafe fn(*mut u8),
    /// Runs the request closure with a result space of its own, then the completion with the
    /// outcome.
    pub(crate) run_in_place: unsafe fn(*mut u8),
    /// `run_request` over a run of records of this type ([`super::batch::serve_uniform`]).
    pub(crate) serve_uniform: unsafe fn(*const u64, usize, *mut u8, &mut Vec<(u32, PanicPayload)>),
    /// `run_completion` over a run of records of this type
    /// ([`super::batch::complete_uniform`]).
    pub(crate) complete_uniform: unsafe fn(*const u64, usize, &mut Outcomes, &Cell<usize>),
    /// `run_in_place` over a run of records of this type
    /// ([`super::batch::run_in_place_uniform`]).
    pub(crate) run_in_place_uniform: unsafe fn(*const u64, usize, &Cell<usize>),
    /// Record size in words, header included.
    pub(crate) words: u32,
    /// Result bytes the request needs in the response (a multiple of 8, at most
    /// [`MAX_RESULT_BYTES`]).
    pub(crate) result_bytes: u32,
    /// How the record travels to a trustee of another rank ([`RemoteHook`]); `None` for
    /// closure records (the `*_local` calls and the runtime's internal `post`s), which never
    /// leave their rank (the loopback transport carries the runtime's own as loopback control
    /// records, `crate::runtime::remote`).
    pub(crate) remote: Option<&'static RemoteHook>,
}

/// [`RemoteHook::take_uniform`]: `(records, stride in words, count, envelope)`.
pub(crate) type TakeUniform =
    unsafe fn(src: *const u64, stride: usize, n: usize, out: &mut Vec<u8>);

/// How a remote-capable record becomes wire bytes and its wire result becomes the result its
/// completion reads (`docs/rack-mode.md` §2.4, §3.1): the record's `RemoteVTable` and two
/// translations (with, for `Plain` records, a batch form of the first and a flag for the
/// second). The client keeps its own record (the completion) as with slots.
///
/// The in-process result space of a record ([`VTable::result_bytes`]) and its wire result
/// (`RemoteVTable::result_bytes`) are the same bytes for a `Plain` result (`PlainSpace<U>`:
/// `size_of::<U>()` rounded to 8, in record order); a serialized result (`apply_with`) is a
/// length-prefixed blob on the wire and a `Vec<u8>` in the result space: `put_result`
/// translates.
pub(crate) struct RemoteHook {
    /// The table a trustee of another rank runs the record with (`RemoteVTable`, opaque here:
    /// the wire layer reads it back, `RemoteHook::vt` in `wire/remote.rs`).
    pub(crate) code: WireCode,
    /// Appends the record's wire argument to the buffer and consumes its request half
    /// (record invariant 2: it is gone from here, its bytes travel); returns the wire target
    /// word (in a loopback run: the address of the value the request works on).
    ///
    /// Safety: as [`run_request`] (a live request half owned by the caller, at the target
    /// word `p`).
    pub(crate) take_arg: unsafe fn(p: *mut u8, arg: &mut Vec<u8>) -> u64,
    /// Writes the in-process result read back from the wire result `wire` (exactly
    /// `vt.result_bytes` bytes, or the serialized bytes without their prefix) into the
    /// record's result space `out` ([`VTable::result_bytes`] bytes, 8-aligned).
    ///
    /// Safety: `out` is valid for writes of the record type's result bytes; the written value
    /// is read once by the completion (which owns it from then on).
    pub(crate) put_result: unsafe fn(wire: &[u8], out: *mut u8),
    /// `take_arg` for a whole uniform batch in one call, when the record type has one:
    /// appends to `out`, for each of the `n` records at `src` (one every `stride` words, each
    /// starting with its header), its target word (little-endian) and then its argument, the
    /// bytes `take_arg` would give record by record, and consumes their request halves.
    ///
    /// Safety: `n` live records of this type start at `src`, `stride` words apart, their
    /// request halves owned by the caller (as `take_arg`'s, record by record).
    pub(crate) take_uniform: Option<TakeUniform>,
    /// The wire result is the in-process result space byte for byte (a `Plain` result,
    /// `put_result` a copy): the completions of a uniform batch may read their results from
    /// the response envelope itself.
    pub(crate) wire_result: bool,
}

/// The wire-level table of a remote-capable record type, opaque to the channel, which knows no
/// wire format (`docs/ARCHITECTURE.md`, "Layers": the wire layer sits above this one). The
/// wire layer makes it of its table (`RemoteVTable::code`) and reads it back as that type
/// (`RemoteHook::vt`), both in `wire/remote.rs`: the only caller of [`WireCode::erase`] and
/// of [`WireCode::get`], so every `WireCode` is a `&'static RemoteVTable`.
#[derive(Clone, Copy)]
pub(crate) struct WireCode(NonNull<()>);

// SAFETY: a `WireCode` is a `&'static` to a `Sync` table ([`WireCode::erase`]), only read.
unsafe impl Send for WireCode {}
// SAFETY: as above.
unsafe impl Sync for WireCode {}

impl WireCode {
    /// The code of `table`, its type erased.
    pub(crate) const fn erase<T: Sync>(table: &'static T) -> WireCode {
        // SAFETY: a reference is never null.
        WireCode(unsafe { NonNull::new_unchecked(table as *const T as *mut ()) })
    }

    /// The table this code was made of.
    ///
    /// # Safety
    /// `T` is the type of the table given to [`WireCode::erase`].
    #[inline(always)]
    pub(crate) const unsafe fn get<T>(self) -> &'static T {
        // SAFETY: caller promise: the pointer is a `&'static T`'s.
        unsafe { &*self.0.as_ptr().cast::<T>() }
    }
}

impl VTable {
    /// `(words, result bytes)` summed over `n` records of this type.
    pub(crate) fn totals(&self, n: usize) -> (usize, usize) {
        (n * self.words as usize, n * self.result_bytes as usize)
    }
}

/// The result space a request type needs, as a type-level constant (it is stored in the
/// vtable, so a record does not spend a word on it).
pub(crate) trait ResultSize {
    /// Bytes of result space (a multiple of 8, at most [`MAX_RESULT_BYTES`]).
    const BYTES: u32;
}

/// No result space (fire-and-forget requests).
pub(crate) struct NoResult;

impl ResultSize for NoResult {
    const BYTES: u32 = 0;
}

/// The request half of a record: what a trustee runs with the record's target and its result
/// space. Either a closure (the `*_local` calls, `post`, the runtime's own requests), or an
/// [`ArgRequest`]: the argument of a remote-capable call, whose code is its type.
pub(crate) trait RequestHalf {
    /// How a record of this request half travels to another rank; `None`: it never does.
    const REMOTE: Option<&'static RemoteHook> = None;

    /// Runs the request on its trustee with `target` (the record's target word) and `out`
    /// (its result space); returns the panic payload if the user's closure panicked.
    ///
    /// # Safety
    /// As [`run_request`]: once per request, as delegated code on the trustee that owns
    /// `target`, with `out` valid for writes of the request's result bytes.
    unsafe fn call(self, target: *mut u8, out: *mut u8) -> Option<PanicPayload>;
}

impl<R: FnOnce(*mut u8, *mut u8) -> Option<PanicPayload>> RequestHalf for R {
    #[inline(always)]
    unsafe fn call(self, target: *mut u8, out: *mut u8) -> Option<PanicPayload> {
        self(target, out)
    }
}

/// How a remote-capable request runs: the code of an [`ArgRequest`], given by its type alone
/// (the user's closure is zero-sized and captures nothing, `docs/rack-mode.md` §2).
///
/// # Safety
/// Implementors are zero-sized markers built only where a value of the user's closure type
/// existed (so recreating that zero-sized, `Copy` closure is a copy of it, not a forgery).
pub(crate) unsafe trait ArgCall<A> {
    /// The [`RemoteHook`] of records run by this code (see [`RequestHalf::REMOTE`]).
    const REMOTE: Option<&'static RemoteHook> = None;

    /// Runs the user's closure on the value at `target` with `arg`, writing its result at
    /// `out`; returns the panic payload if it panicked.
    ///
    /// # Safety
    /// As [`run_request`]: called once per request, as delegated code on the trustee that
    /// owns `target`, with `out` valid for the request's result bytes.
    unsafe fn run(target: *mut u8, arg: A, out: *mut u8) -> Option<PanicPayload>;
}

/// The request half of a remote-capable record: **the argument itself**. `repr(C, packed)`
/// with one field (the marker is zero-sized), so the bytes a record holds after its target
/// word are exactly `A`'s own bytes in `A`'s own layout, at any alignment (a `u128` is fine at
/// the record's 8-byte alignment): moving it in and out is a byte copy, read back unaligned.
/// This is what will travel between ranks (`docs/rack-mode.md` §3.1).
#[repr(C, packed)]
pub(crate) struct ArgRequest<A, K> {
    arg: A,
    _code: PhantomData<fn() -> K>,
}

impl<A: crate::Plain, K: ArgCall<A>> ArgRequest<A, K> {
    /// The request half for `arg`, run by `K`.
    #[inline(always)]
    pub(crate) fn new(arg: A) -> Self {
        ArgRequest { arg, _code: PhantomData }
    }
}

impl<A: crate::Plain, K: ArgCall<A>> RequestHalf for ArgRequest<A, K> {
    const REMOTE: Option<&'static RemoteHook> = K::REMOTE;

    #[inline(always)]
    unsafe fn call(self, target: *mut u8, out: *mut u8) -> Option<PanicPayload> {
        // A by-value read of a packed field: an unaligned copy of the argument's bytes.
        let arg = self.arg;
        // SAFETY: forwarded caller promise.
        unsafe { K::run(target, arg, out) }
    }
}

/// True when a closure of type `F` is stored inline in a record (else the queue boxes it).
pub(crate) const fn fits_inline<F>() -> bool {
    size_of::<F>() <= INLINE_MAX && align_of::<F>() <= 8
}

const fn words_of<F>() -> usize {
    size_of::<F>().div_ceil(8)
}

/// Holder of the vtable constant of the closure pair `(Request, Completion)` with
/// `Space::BYTES` of result space.
pub(crate) struct VTableOf<Request, Completion, Space>(
    PhantomData<VTableTypes<Request, Completion, Space>>,
);

/// The types a [`VTableOf`] is instantiated with (function types: no auto-trait or drop
/// effects).
type VTableTypes<Request, Completion, Space> = (fn() -> Request, fn() -> Completion, fn() -> Space);

impl<Request, Completion, Space> VTableOf<Request, Completion, Space>
where
    Request: RequestHalf,
    Completion: FnOnce(Outcome),
    Space: ResultSize,
{
    pub(crate) const VTABLE: &'static VTable = &{
        assert!(
            Space::BYTES as usize <= MAX_RESULT_BYTES && Space::BYTES % 8 == 0,
            "skein: result space too big"
        );
        VTable {
            run_request: run_request::<Request>,
            drop_request: drop_request::<Request>,
            run_completion: run_completion::<Request, Completion>,
            drop_completion: drop_completion::<Request, Completion>,
            run_in_place: run_in_place::<Request, Completion>,
            serve_uniform: serve_uniform::<Request, Completion>,
            complete_uniform: complete_uniform::<Request, Completion>,
            run_in_place_uniform: run_in_place_uniform::<Request, Completion>,
            words: record_words::<Request, Completion>() as u32,
            result_bytes: Space::BYTES,
            remote: Request::REMOTE,
        }
    };
}

/// The vtable of the pair `(Request, Completion)` (the arguments only name the types).
pub(crate) fn vtable_of<Request, Completion, Space>(_: &Request, _: &Completion) -> &'static VTable
where
    Request: RequestHalf,
    Completion: FnOnce(Outcome),
    Space: ResultSize,
{
    VTableOf::<Request, Completion, Space>::VTABLE
}

/// Where the completion starts, in bytes from the target word.
const fn completion_offset<Request>() -> usize {
    8 + 8 * words_of::<Request>()
}

/// Size in words of a `(Request, Completion)` record.
pub(crate) const fn record_words<Request, Completion>() -> usize {
    HEADER_WORDS + 1 + words_of::<Request>() + words_of::<Completion>()
}

/// Writes one record at `at`: header, target, then both closures (invariant 1).
///
/// # Safety
/// `vt` is `(Request, Completion)`'s vtable, both closures fit inline ([`fits_inline`]), and
/// `at` is 8-aligned and valid for writes of `vt.words` words that hold no live record.
#[inline(always)]
pub(crate) unsafe fn write<Request, Completion>(
    at: *mut u64,
    vt: &'static VTable,
    target: *mut u8,
    request: Request,
    completion: Completion,
) {
    debug_assert!(fits_inline::<Request>() && fits_inline::<Completion>());
    debug_assert_eq!(vt.words as usize, record_words::<Request, Completion>());
    // SAFETY: caller promise: room for the whole record at `at`, 8-aligned, and both closure
    // types need at most 8-byte alignment. This writes a record as invariant 1 describes.
    unsafe {
        ptr::write(at as *mut *const VTable, vt);
        let p = at.add(HEADER_WORDS) as *mut u8;
        ptr::write(p as *mut *mut u8, target);
        ptr::write(p.add(8) as *mut Request, request);
        ptr::write(p.add(completion_offset::<Request>()) as *mut Completion, completion);
    }
}

/// Reads the header of the record at `at`.
///
/// # Safety
/// A record starts at `at` (invariants 1 and 4: consumed records keep their header).
#[inline(always)]
pub(crate) unsafe fn header<'a>(at: *const u64) -> &'a VTable {
    // SAFETY: word 0 of a record is a `&'static VTable` (invariant 1).
    unsafe { &*ptr::read(at as *const *const VTable) }
}

/// The target word of the record at `at`.
///
/// # Safety
/// A record starts at `at` (invariants 1 and 4: consumed records keep their target word).
#[inline(always)]
pub(crate) unsafe fn target(at: *const u64) -> *const u8 {
    // SAFETY: word 1 of a record is its target (invariant 1).
    unsafe { ptr::read(at.add(HEADER_WORDS) as *const *const u8) }
}

/// Moves the request closure out of the record whose target word is at `p` and runs it with
/// the target and the result space `out`.
///
/// # Safety
/// `p` is the target word of a record of type `(Request, _)` whose request closure is live
/// (invariant 1) and owned by the caller; it is consumed here (invariant 2). `out` is valid
/// for writes of the type's result bytes, 8-aligned, and owned by the caller.
#[inline(always)]
pub(crate) unsafe fn run_request<Request: RequestHalf>(
    p: *mut u8,
    out: *mut u8,
) -> Option<PanicPayload> {
    // SAFETY: caller promise: the target word at `p`, the request closure after it
    // (invariant 1); this is the closure's one consumption (invariant 2), read out before it
    // runs.
    let (target, request) =
        unsafe { (ptr::read(p as *const *mut u8), ptr::read(p.add(8) as *const Request)) };
    // SAFETY: forwarded caller promise (`out`, and this runs on the trustee as delegated code).
    unsafe { request.call(target, out) }
}

/// Drops the request closure of the record whose target word is at `p`, unrun.
///
/// # Safety
/// As [`run_request`] (without `out`): the request closure is live, owned by the caller, and
/// consumed here.
pub(crate) unsafe fn drop_request<Request>(p: *mut u8) {
    // SAFETY: caller promise; this is the closure's one consumption (invariant 2).
    unsafe { ptr::drop_in_place(p.add(8) as *mut Request) }
}

/// Moves the completion out of the record whose target word is at `p` and runs it with the
/// outcome `o`.
///
/// # Safety
/// `p` is the target word of a record of type `(Request, Completion)` whose completion is live
/// (invariant 1) and owned by the caller; it is consumed here (invariant 2).
#[inline(always)]
pub(crate) unsafe fn run_completion<Request, Completion: FnOnce(Outcome)>(p: *mut u8, o: Outcome) {
    // SAFETY: caller promise: the completion follows the request closure (invariant 1); this
    // is its one consumption (invariant 2), read out before it runs.
    let completion =
        unsafe { ptr::read(p.add(completion_offset::<Request>()) as *const Completion) };
    completion(o)
}

/// Drops the completion of the record whose target word is at `p`, unrun.
///
/// # Safety
/// As [`run_completion`]: the completion is live, owned by the caller, and consumed here.
pub(crate) unsafe fn drop_completion<Request, Completion>(p: *mut u8) {
    // SAFETY: caller promise; this is the completion's one consumption (invariant 2).
    unsafe { ptr::drop_in_place(p.add(completion_offset::<Request>()) as *mut Completion) }
}

/// Runs a staged record in place: the request closure with a result space on this stack, then
/// the completion with the outcome (the local trustee's path: no copy, no slot).
///
/// # Safety
/// `p` is the target word of a staged record of type `(Request, Completion)`: both halves live
/// (invariant 1) and owned by the caller; both are consumed here (invariant 2).
#[inline(always)]
pub(crate) unsafe fn run_in_place<Request, Completion>(p: *mut u8)
where
    Request: RequestHalf,
    Completion: FnOnce(Outcome),
{
    // SAFETY: caller promise: both halves live, each read out (consumed, invariant 2) before
    // any user code runs.
    let (target, request, completion) = unsafe {
        (
            ptr::read(p as *const *mut u8),
            ptr::read(p.add(8) as *const Request),
            ptr::read(p.add(completion_offset::<Request>()) as *const Completion),
        )
    };
    // The result space: at most MAX_RESULT_BYTES (checked in the vtable constant), 8-aligned.
    let mut space = MaybeUninit::<[u64; MAX_RESULT_BYTES / 8]>::uninit();
    let out = space.as_mut_ptr() as *mut u8;
    // SAFETY: caller promise: this is the staged record's one run, on its trustee.
    let panic = unsafe { request.call(target, out) };
    completion(Outcome { resp: out, panic })
}

#[cfg(test)]
mod tests;
