//! A value that only one thread uses at a time, checked by a flag: a transport's per-worker
//! state, taken by the worker it belongs to on every call (never contended). A taken flag
//! instead of a mutex: one atomic swap and a plain store per call, where a mutex's lock and
//! unlock are two read-modify-writes, on every loop pass. A second thread that finds the flag
//! taken ends the job instead of waiting (it would be a bug of the runtime).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// A value used by one thread at a time, checked by a flag (module docs): `with` gives
/// exclusive access for the length of a call, or ends the job if the flag is taken.
#[derive(Debug)]
pub(crate) struct Owned<T> {
    taken: AtomicBool,
    cell: UnsafeCell<T>,
}

// SAFETY: the value is only reached through `with`, which hands out one `&mut` at a time (the
// flag), so sharing an `Owned` between threads moves the value between them at most: `T: Send`
// suffices.
unsafe impl<T: Send> Sync for Owned<T> {}

impl<T> Owned<T> {
    pub(crate) fn new(value: T) -> Owned<T> {
        Owned { taken: AtomicBool::new(false), cell: UnsafeCell::new(value) }
    }

    /// Runs `f` on the value, alone: ends the job if another call holds it (another thread,
    /// or `f` calling back in), which the runtime never does.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        if self.taken.swap(true, Ordering::Acquire) {
            crate::rack::abort(1, "the rack link of a worker was used by two callers at once");
        }
        /// Clears the flag when `f` returns or unwinds (Release: the next taker's Acquire
        /// swap sees this call's writes).
        struct Give<'a>(&'a AtomicBool);
        impl Drop for Give<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _give = Give(&self.taken);
        // SAFETY: the swap above found the flag clear and set it, so no other `with` is in
        // its `f` until `_give` clears it; this `&mut` is the only reference to the value
        // meanwhile, and it does not outlive `f`.
        f(unsafe { &mut *self.cell.get() })
    }
}
