//! Property allocation, results in response slots, and raw pointers that cross workers.
//!
//! # Invariants
//!
//! 1. A property is a `Prop<T>` made by [`alloc`]: a header of one atomic count, then the
//!    value (16 bytes for a `u64`), 16-aligned. It lives in a slot of its trustee's slab when
//!    it is small ([`super::slab::class_of`]), else in a leaked `Box` (the choice depends on
//!    `T` alone). It counts towards its run's id ([`crate::runtime::run_ids`]) from `alloc`
//!    until the free is done. It is freed exactly once, by
//!    [`free_prop`], after its reference count reached zero (see the argument in
//!    [`crate::trust`]), through the [`PropPtr`] that the last handle made with
//!    [`PropPtr::of`], which knows `T` and so carries `free_typed::<T>`.
//! 2. `&mut T` to a property's value is only created on its trustee's worker thread (or after
//!    the runtime stopped), by delegated code that runs to completion without switching fibers,
//!    so two such references never coexist.
//! 3. A result written by [`write_result::<U>`] is read exactly once by [`read_result::<U>`]
//!    with the same `U`, at the same offset, after the slot protocol handed the bytes over.

use super::slab;
use crate::runtime::run_ids;
use crate::sync::{AtomicUsize, UnsafeCell};
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

/// Header common to every property: 8 bytes, so that a `u64` property takes 16.
#[repr(C)]
pub(crate) struct PropHead {
    /// Handles in existence (see the counting argument in [`crate::trust`]).
    pub(crate) refs: AtomicUsize,
}

/// A property: header + value. 16-aligned, so that a handle can keep the address in 44 bits
/// (see [`crate::trust`]).
#[repr(C, align(16))]
pub(crate) struct Prop<T> {
    pub(crate) head: PropHead,
    pub(crate) value: UnsafeCell<T>,
}

/// Type-erased pointer to a property whose count reached zero, with the function that frees
/// it; movable between workers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PropPtr {
    ptr: NonNull<PropHead>,
    free: unsafe fn(NonNull<PropHead>, usize),
    /// The trustee it was entrusted to (whose slab pool takes the slot back).
    home: u32,
    /// Its run's id.
    run: u32,
}

impl PropPtr {
    /// The pointer to a `Prop<T>` made by [`alloc`] for trustee `home` in run `run`.
    pub(crate) fn of<T>(p: NonNull<Prop<T>>, home: usize, run: u32) -> PropPtr {
        PropPtr { ptr: p.cast(), free: free_typed::<T>, home: home as u32, run }
    }
}

/// The slab class of `Prop<T>`, if it is slab-allocated.
const fn class<T>() -> Option<usize> {
    slab::class_of(size_of::<Prop<T>>(), align_of::<Prop<T>>())
}

// SAFETY: the pointer is only dereferenced under invariants 1 and 2 (on the trustee, or to
// touch the atomic count); the value type is `Send` (required by `entrust`).
unsafe impl Send for PropPtr {}

unsafe fn free_typed<T>(p: NonNull<PropHead>, home: usize) {
    let p = p.cast::<Prop<T>>();
    match class::<T>() {
        Some(c) => {
            // SAFETY: invariant 1 — `p` is a live `Prop<T>` in a slot of class `c` from the
            // pool of `home` (its trustee), and this is its only free. If the value's drop
            // unwinds, the slot is leaked, never reused.
            unsafe {
                ptr::drop_in_place(p.as_ptr());
                slab::free(p.cast(), c, home);
            }
        }
        // SAFETY: invariant 1 — `p` came from `Box::leak` and this is the only free.
        None => drop(unsafe { Box::from_raw(p.as_ptr()) }),
    }
}

/// Allocates a property of run `run` (which is running), entrusted to worker `home`, with
/// count 1.
pub(crate) fn alloc<T: Send + 'static>(value: T, run: u32, home: usize) -> NonNull<Prop<T>> {
    let prop = Prop { head: PropHead { refs: AtomicUsize::new(1) }, value: UnsafeCell::new(value) };
    run_ids::prop_created(run);
    match class::<T>() {
        Some(c) => {
            let p = slab::alloc(c, home).cast::<Prop<T>>();
            // SAFETY: a fresh slot of a class that holds `Prop<T>` with its alignment.
            unsafe { p.as_ptr().write(prop) };
            p
        }
        None => NonNull::from(Box::leak(Box::new(prop))),
    }
}

/// Frees a property.
///
/// # Safety
/// Invariant 1: the count is zero and no request that names the property is still unserved;
/// the caller runs on the trustee's worker or after the runtime stopped.
pub(crate) unsafe fn free_prop(p: PropPtr) {
    // The run's id is given back also if the value's drop unwinds: the property is gone then
    // too (its slot leaked), and nothing can name it.
    struct Freed(u32);
    impl Drop for Freed {
        fn drop(&mut self) {
            run_ids::prop_freed(self.0);
        }
    }
    let _freed = Freed(p.run);
    // SAFETY: forwarded caller promise; `free` is the property's own (invariant 1).
    unsafe { (p.free)(p.ptr, p.home as usize) }
}

/// A `*mut T` that may be captured by a `Send` closure.
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}

// SAFETY: it is only dereferenced on the trustee that owns the pointee (invariant 2), and the
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
/// rule 2).
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

/// Reads a result back (invariant 3).
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
