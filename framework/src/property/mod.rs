//! A property's memory: its header (the reference count), its allocation, and the type-erased
//! free.
//!
//! This module owns the bytes of a property, not the rules of when they may be freed: those
//! (the reference count's protocol, and the deferral of the free until every request to the
//! property has been served) live in [`crate::runtime::free`], with their proof.
//!
//! # Invariants
//!
//! 1. A property is a `Prop<T>` made by [`alloc`]: a header of one atomic count, then the
//!    value (16 bytes for a `u64`), 16-aligned. It lives in a slot of its trustee's slab when
//!    it is small ([`slab::class_of`]), else in a leaked `Box` (the choice depends on `T`
//!    alone). It counts towards its run's id ([`crate::run_ids`]) from `alloc` until the free
//!    is done. It is freed exactly once, by [`free_prop`], after its reference count reached
//!    zero (see [`crate::runtime::free`]), through the [`PropPtr`] that the last handle made
//!    with [`PropPtr::of`], which knows `T` and so carries `free_typed::<T>`.
//! 2. `&mut T` to a property's value is only created on its trustee's worker thread (or after
//!    the runtime stopped), by delegated code that runs to completion without switching fibers,
//!    so two such references never coexist.

pub(crate) mod slab;

use crate::run_ids;
use crate::sync::proto::AtomicUsize;
use crate::sync::UnsafeCell;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

/// Header common to every property: 8 bytes, so that a `u64` property takes 16.
#[repr(C)]
pub(crate) struct PropHead {
    /// Handles in existence. Only [`crate::runtime::free::clone_ref`] and
    /// [`crate::runtime::free::drop_ref`] touch it (the protocol and its proof are there).
    pub(crate) refs: AtomicUsize,
}

impl PropHead {
    /// The header of a property with one handle.
    pub(crate) fn new() -> PropHead {
        PropHead { refs: AtomicUsize::new(1) }
    }
}

/// A property: header + value. 16-aligned, so that a handle can keep the address in 44 bits
/// (see [`crate::Trust`]).
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
    /// The trustee it was entrusted to (whose slab pool takes the slot back; below 4096, the
    /// handle's limit).
    trustee: u16,
    /// The offset of the value from the header (`offset_of!(Prop<T>, value)`), so that a
    /// remote request found through an export slot reaches the value without knowing `T`.
    value_off: u16,
    /// Its run's id.
    run: u32,
    /// `std::any::type_name` of the value's type, which the owner of an export compares with
    /// the type a remote record was made for (`crate::wire::remote::RemoteVTable`).
    type_name: fn() -> &'static str,
}

impl PropPtr {
    /// The pointer to a `Prop<T>` made by [`alloc`] for trustee `trustee` in run `run`.
    pub(crate) fn of<T>(p: NonNull<Prop<T>>, trustee: usize, run: u32) -> PropPtr {
        let value_off = const {
            let off = std::mem::offset_of!(Prop<T>, value);
            assert!(off <= u16::MAX as usize, "skein: a property's value is aligned above 2^15");
            off as u16
        };
        debug_assert!(trustee <= u16::MAX as usize);
        PropPtr {
            ptr: p.cast(),
            free: free_typed::<T>,
            trustee: trustee as u16,
            value_off,
            run,
            type_name: std::any::type_name::<T>,
        }
    }

    /// The address of the property's value (the target of a request to it). Computes an
    /// address, reads nothing.
    pub(crate) fn value_addr(&self) -> *mut u8 {
        self.ptr.as_ptr().cast::<u8>().wrapping_add(self.value_off as usize)
    }

    /// The name of the value's type (`std::any::type_name`).
    pub(crate) fn type_name(&self) -> &'static str {
        (self.type_name)()
    }

    /// The trustee the property was entrusted to.
    pub(crate) fn trustee(&self) -> usize {
        self.trustee as usize
    }

    /// The property's address (its header), e.g. for an export slot
    /// ([`crate::runtime::export`]), which holds a count on it.
    pub(crate) fn head_ptr(&self) -> NonNull<PropHead> {
        self.ptr
    }

    /// Its run's id.
    pub(crate) fn run(&self) -> u32 {
        self.run
    }
}

/// The slab class of `Prop<T>`, if it is slab-allocated.
const fn class<T>() -> Option<usize> {
    slab::class_of(size_of::<Prop<T>>(), align_of::<Prop<T>>())
}

// SAFETY: the pointer is only dereferenced under invariants 1 and 2 (on the trustee, or to
// touch the atomic count); the value type is `Send` (required by `entrust`).
unsafe impl Send for PropPtr {}

/// Drops the value of the `Prop<T>` at `p` and gives its memory back (the slab slot of
/// trustee `trustee`'s pool, or the `Box`).
///
/// # Safety
/// Invariant 1: `p` points to a live `Prop<T>` made by [`alloc`] for trustee `trustee`, its
/// count is zero and nothing can reach it any more, and this is its only free. The caller runs
/// on the trustee's worker or after the runtime stopped (invariant 2: the value's drop is the
/// last access to it).
unsafe fn free_typed<T>(p: NonNull<PropHead>, trustee: usize) {
    let p = p.cast::<Prop<T>>();
    match class::<T>() {
        Some(c) => {
            // SAFETY: caller promise — `p` is a live `Prop<T>` in a slot of class `c` from the
            // pool of `trustee`, and this is its only free. If the value's drop unwinds, the
            // slot is leaked, never reused.
            unsafe {
                ptr::drop_in_place(p.as_ptr());
                slab::free(p.cast(), c, trustee);
            }
        }
        // SAFETY: caller promise — `p` came from `Box::leak` and this is the only free.
        None => drop(unsafe { Box::from_raw(p.as_ptr()) }),
    }
}

/// Allocates a property of run `run` (which is running), entrusted to worker `trustee`, with
/// count 1.
pub(crate) fn alloc<T: Send + 'static>(value: T, run: u32, trustee: usize) -> NonNull<Prop<T>> {
    let prop = Prop { head: PropHead::new(), value: UnsafeCell::new(value) };
    run_ids::prop_created(run);
    match class::<T>() {
        Some(c) => {
            let p = slab::alloc(c, trustee).cast::<Prop<T>>();
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
/// Invariant 1: the count is zero and no request that names the property is still unserved
/// (the conditions of [`crate::runtime::free`]); the caller runs on the trustee's worker or
/// after the runtime stopped.
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
    unsafe { (p.free)(p.ptr, p.trustee as usize) }
}
