//! Atomics and locks shared between threads, and the switch that puts the model-checked ones
//! under loom.
//!
//! Memory shared between workers is touched through the types re-exported here. Thread-owned
//! state (`Cell`, `RefCell`, the fiber thread-locals) imports `std` directly; so does the slab
//! allocator, whose pools are plain `std` mutexes that no model covers.
//!
//! [`proto`] holds the primitives of the protocols that loom models check: the slot protocol
//! ([`crate::channel::slot`]), the reference count and the foreign-thread free hand-off
//! ([`crate::runtime::free`]), and the counters of quiescence detection
//! ([`crate::runtime::quiesce`]). In the crate's own unit-test build under
//! `RUSTFLAGS="--cfg fw_loom"` (loom is a dev-dependency, so only `cfg(test)` of this crate sees
//! it) they are loom's, and the `loom_*` tests run the real protocol code under loom.
//! Integration tests and doctests link the normal `std` build. The other primitives stay `std`
//! in both builds: the rest of the runtime switches stacks and keeps thread-locals, which loom
//! cannot model, and it never runs under loom (a loom build runs only the `loom_*` tests).
//!
//! The loom run (bounded: about two minutes from a cold release build on two cores, about a
//! second of model checking once built):
//!
//! ```text
//! RUSTFLAGS="--cfg fw_loom" LOOM_MAX_PREEMPTIONS=3 CARGO_TARGET_DIR=target/loom \
//!     cargo test -p skein --release --lib loom_
//! ```

pub(crate) use std::cell::UnsafeCell;
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
pub(crate) use std::sync::{Arc, Mutex};

/// Model-checked primitives: `std` normally, loom in unit tests under `--cfg fw_loom`.
pub(crate) mod proto {
    #[cfg(all(test, fw_loom))]
    pub(crate) use loom::{
        cell::UnsafeCell,
        sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize},
        sync::{Condvar, Mutex},
    };
    #[cfg(not(all(test, fw_loom)))]
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
    #[cfg(not(all(test, fw_loom)))]
    pub(crate) use std::sync::Mutex;

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

    /// [`super::bump`] for a model-checked counter.
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, by: u64) {
        c.store(c.load(super::Ordering::Relaxed).wrapping_add(by), super::Ordering::Release);
    }

    /// Stores a new value into a model-checked counter that only the calling thread writes.
    #[inline]
    pub(crate) fn set(c: &AtomicU64, v: u64) {
        c.store(v, super::Ordering::Release);
    }
}

/// Increments a counter that only the calling thread writes: a plain load and a Release store,
/// no read-modify-write (the hot path of a request has no read-modify-write atomics; see
/// `docs/ARCHITECTURE.md`).
#[inline]
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Release);
}
