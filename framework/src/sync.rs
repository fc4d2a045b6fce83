//! The one place that imports atomics and interior-mutability primitives, so that a model
//! checker (loom, `--cfg fw_loom`) could be swapped in later.

pub(crate) use std::cell::UnsafeCell;
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};

/// Increments a counter that only the calling thread writes: a plain load and a Release store,
/// no read-modify-write (the hot-path rule of DESIGN §3.2).
#[inline]
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Release);
}

/// Stores a new value into a counter that only the calling thread writes.
#[inline]
pub(crate) fn set(c: &AtomicU64, v: u64) {
    c.store(v, Ordering::Release);
}
