//! The one place that imports atomics and interior-mutability primitives.
//!
//! [`proto`] holds the primitives of the slot protocol (DESIGN §3.2, [`crate::channel::slot`]).
//! In the crate's own unit-test build under `RUSTFLAGS="--cfg fw_loom"` (loom is a
//! dev-dependency, so only `cfg(test)` of this crate sees it) they are loom's, and the `loom_*`
//! tests in `channel::slot` model-check the real slot code (one loom thread plays the client,
//! one the trustee). Integration tests and doctests link the normal `std` build. Everything else stays `std` in both builds: the rest of the runtime switches
//! stacks and keeps thread-locals, which loom cannot model, and it never runs under loom.

pub(crate) use std::cell::UnsafeCell;
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex};

/// Slot-protocol primitives: `std` normally, loom in unit tests under `--cfg fw_loom`.
pub(crate) mod proto {
    #[cfg(all(test, fw_loom))]
    pub(crate) use loom::{cell::UnsafeCell, sync::atomic::AtomicU64};
    #[cfg(not(all(test, fw_loom)))]
    pub(crate) use std::sync::atomic::AtomicU64;

    /// `std::cell::UnsafeCell` with loom's closure API (`with`, `with_mut`), so that the same
    /// code compiles against both.
    #[cfg(not(all(test, fw_loom)))]
    #[derive(Debug, Default)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(all(test, fw_loom)))]
    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(v: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }

        /// Runs `f` with a shared pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with an exclusive pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

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
