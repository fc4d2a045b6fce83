//! The thread-local pointer from a worker thread to its [`Worker`].
//!
//! # Invariant
//! `WORKER` is non-null exactly while the worker thread runs its loop (or, on a thread that
//! workers share, one pass of a worker's loop: `super::worker::looping::run_shared`) inside
//! [`enter`]'s guard; the `Worker` it points to is owned by that thread's stack frame and
//! outlives the guard. All code that can observe the pointer (fibers, delegated closures,
//! continuations) runs on that thread, inside that worker's loop or pass, so the reference
//! handed out is valid for as long as it is used. References are never stored anywhere that
//! outlives the loop. (A fiber always resumes inside the pass of the worker it belongs to,
//! so it never observes another worker of its thread.)

use super::worker::Worker;
use std::cell::Cell;

thread_local! {
    static WORKER: Cell<*const Worker> = const { Cell::new(std::ptr::null()) };
}

/// The worker running on this thread, if any.
#[inline]
pub(crate) fn current() -> Option<&'static Worker> {
    let p = WORKER.with(|w| w.get());
    // SAFETY: see the module invariant: non-null means the Worker is alive for every use made
    // by code running on this thread.
    unsafe { p.as_ref() }
}

/// The worker running on this thread; panics with a helpful message outside a runtime.
#[inline]
#[track_caller]
pub(crate) fn expect(what: &str) -> &'static Worker {
    match current() {
        Some(w) => w,
        None => outside(what),
    }
}

/// The panic of `what` called outside a runtime (out of line: callers' fast paths stay short).
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn outside(what: &str) -> ! {
    panic!("skein: `{what}` called outside a skein runtime (use it inside Runtime::run)")
}

/// Clears the pointer when dropped.
#[derive(Debug)]
pub(crate) struct Entered(());

impl Drop for Entered {
    fn drop(&mut self) {
        WORKER.with(|w| w.set(std::ptr::null()));
    }
}

/// Registers `w` as this thread's worker until the guard drops.
pub(crate) fn enter(w: &Worker) -> Entered {
    WORKER.with(|c| c.set(w as *const Worker));
    Entered(())
}
