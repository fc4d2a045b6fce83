//! How a result gets from a trustee back to its client, and the raw pointer that delegated
//! closures capture.
//!
//! A request's result is written into its result space (in the response slot, or on the local
//! trustee's stack) by [`write_result`] and read back by the completion with [`read_result`];
//! a result too big for the space travels boxed.
//!
//! # Invariants
//!
//! 1. A result written by [`write_result::<U>`] is read exactly once by [`read_result::<U>`]
//!    with the same `U`, at the same offset, after the slot protocol handed the bytes over
//!    ([`crate::channel::slot`], rule 3).
//! 2. A [`SendPtr`] is only dereferenced on the worker that owns its pointee (the property's
//!    trustee, or the fiber whose stack slot it names), with no other reference to the pointee
//!    alive meanwhile (property invariant 2, [`crate::property`]).

use std::mem::{align_of, size_of};
use std::ptr;

/// A `*mut T` that may be captured by a `Send` closure.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

// SAFETY: it is only dereferenced on the worker that owns the pointee (invariant 2), and the
// pointee is `Send`-bounded wherever a `SendPtr` is built (`Trust<T: Send>`, fiber stack slots
// of `Send` results).
unsafe impl<T: Send> Send for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointee as `&mut`.
    ///
    /// # Safety
    /// Invariant 2: called on the owning worker, with no other live reference to the pointee.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub(crate) unsafe fn get_mut<'a>(self) -> &'a mut T {
        // SAFETY: forwarded caller promise.
        unsafe { &mut *self.0 }
    }
}

/// Results above this size (or with alignment above 8) travel boxed: the most result space a
/// request may ask for.
const RESULT_INLINE_MAX: usize = crate::channel::record::MAX_RESULT_BYTES;

#[inline]
const fn result_inline<U>() -> bool {
    size_of::<U>() <= RESULT_INLINE_MAX && align_of::<U>() <= 8
}

/// Bytes a result of type `U` takes in a response slot (a multiple of 8).
#[inline]
pub(crate) const fn result_bytes<U>() -> u32 {
    if result_inline::<U>() {
        size_of::<U>().next_multiple_of(8) as u32
    } else {
        8
    }
}

/// The response space of a request whose result is a `U`, as a record's result bytes.
pub(crate) struct ResultSpace<U>(std::marker::PhantomData<U>);

impl<U> crate::channel::record::ResultSize for ResultSpace<U> {
    const BYTES: u32 = result_bytes::<U>();
}

/// Writes a result into a response slot.
///
/// # Safety
/// `out` is 8-aligned, valid for `result_bytes::<U>()` bytes and owned by the caller (slot
/// rule 2, [`crate::channel::slot`]).
#[inline]
pub(crate) unsafe fn write_result<U>(out: *mut u8, u: U) {
    if result_inline::<U>() {
        // SAFETY: caller promise; U's alignment is at most 8.
        unsafe { ptr::write(out as *mut U, u) }
    } else {
        // SAFETY: caller promise; a Box is one 8-aligned word.
        unsafe { ptr::write(out as *mut Box<U>, Box::new(u)) }
    }
}

/// Reads a result back (invariant 1).
///
/// # Safety
/// `p` holds a result written by `write_result::<U>` not read before, owned by the caller.
#[inline]
pub(crate) unsafe fn read_result<U>(p: *const u8) -> U {
    if result_inline::<U>() {
        // SAFETY: caller promise.
        unsafe { ptr::read(p as *const U) }
    } else {
        // SAFETY: caller promise.
        *unsafe { ptr::read(p as *const Box<U>) }
    }
}

/// How a client reads a request's result back from its result space.
pub(crate) trait ReadBack: crate::channel::record::ResultSize {
    /// The result's type.
    type Out;
    /// Reads the result (invariant 1).
    ///
    /// # Safety
    /// `p` holds a result of this space written by the matching writer and not read before,
    /// owned by the caller.
    unsafe fn read(p: *const u8) -> Self::Out;
}

impl<U> ReadBack for ResultSpace<U> {
    type Out = U;
    #[inline(always)]
    unsafe fn read(p: *const u8) -> U {
        // SAFETY: forwarded caller promise (written by `write_result::<U>`).
        unsafe { read_result::<U>(p) }
    }
}

/// The response space of a remote-capable request, whose result is a [`crate::Plain`] `U` of
/// at most [`crate::channel::record::MAX_RESULT_BYTES`] bytes (`travel_check!`): its own bytes,
/// rounded up to 8, never boxed, written and read unaligned (so a `u128` needs no more than
/// the space's 8-byte alignment). These bytes are what a remote response will carry.
pub(crate) struct PlainSpace<U>(std::marker::PhantomData<U>);

impl<U> crate::channel::record::ResultSize for PlainSpace<U> {
    const BYTES: u32 = size_of::<U>().next_multiple_of(8) as u32;
}

impl<U: crate::Plain> ReadBack for PlainSpace<U> {
    type Out = U;
    #[inline(always)]
    unsafe fn read(p: *const u8) -> U {
        // SAFETY: caller promise: `write_plain::<U>` wrote a U there.
        unsafe { ptr::read_unaligned(p as *const U) }
    }
}

/// Writes a `Plain` result into a [`PlainSpace`].
///
/// # Safety
/// `out` is valid for writes of `PlainSpace::<U>::BYTES` bytes and owned by the caller (slot
/// rule 2, [`crate::channel::slot`]).
#[inline(always)]
pub(crate) unsafe fn write_plain<U: crate::Plain>(out: *mut u8, u: U) {
    // SAFETY: caller promise; unaligned, so any alignment of U is fine.
    unsafe { ptr::write_unaligned(out as *mut U, u) }
}
