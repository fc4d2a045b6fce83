//! Stackful fibers on `corosensei`, and the pool that recycles their stacks.
//!
//! This is the only module that switches stacks. It knows nothing about trustees or slots: the
//! runtime resumes a [`Fiber`] and the fiber body calls [`suspend`] to give control back.
//!
//! # Invariants
//!
//! 1. [`Fiber::resume`] is only called on the thread that created the fiber (fibers are not
//!    `Send`), and never from inside another fiber (the worker loop runs on the thread stack).
//! 2. While a fiber runs, the thread-local `CURRENT` holds the address of its `Yielder`,
//!    which lives on the fiber's own stack as long as the fiber has not finished; outside a fiber
//!    it is null. [`suspend`] reads it.
//! 3. A fiber that has not finished is never dropped while suspended inside user code that the
//!    runtime still expects to resume: the runtime either runs it to completion or leaks it
//!    (deadlocked fibers at shutdown), so no forced unwinding ever runs user destructors on a
//!    foreign path.
//!
//! Fiber switching uses inline assembly, which Miri cannot run: under Miri only the tests that
//! never resume a fiber can pass (`scripts/miri.sh` runs the unsafe modules' ones, e.g. those
//! of `channel`). Nothing is gated on `cfg(miri)`; one slot test only runs fewer rounds there.

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::cell::Cell;

type Co = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    static CURRENT: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
}

/// A suspended or not-yet-started fiber.
pub(crate) struct Fiber {
    co: Co,
    yielder: *const Yielder<(), ()>,
}

impl std::fmt::Debug for Fiber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fiber").field("started", &self.co.started()).finish()
    }
}

impl Fiber {
    /// Creates a fiber that will run `body` on `stack` when first resumed.
    pub(crate) fn new(stack: DefaultStack, body: impl FnOnce() + 'static) -> Fiber {
        let co = Co::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
            CURRENT.with(|c| c.set(y as *const _));
            body();
        });
        Fiber { co, yielder: std::ptr::null() }
    }

    /// Runs the fiber until it suspends (`false`) or finishes (`true`).
    pub(crate) fn resume(&mut self) -> bool {
        CURRENT.with(|c| c.set(self.yielder));
        let r = self.co.resume(());
        let y = CURRENT.with(|c| c.replace(std::ptr::null()));
        match r {
            CoroutineResult::Yield(()) => {
                self.yielder = y;
                false
            }
            CoroutineResult::Return(()) => true,
        }
    }

    /// Returns the stack of a finished fiber for reuse.
    pub(crate) fn into_stack(self) -> DefaultStack {
        self.co.into_stack()
    }
}

/// True when called from inside a fiber.
pub(crate) fn in_fiber() -> bool {
    CURRENT.with(|c| !c.get().is_null())
}

/// Suspends the running fiber; returns when the runtime resumes it.
///
/// # Panics
/// When called outside a fiber.
pub(crate) fn suspend() {
    let y = CURRENT.with(|c| c.get());
    assert!(
        !y.is_null(),
        "skein: blocking call outside a fiber (call it from inside Runtime::run)"
    );
    // SAFETY: invariant 2 — a non-null CURRENT is the running fiber's live Yielder, and we are
    // on that fiber's stack (the worker loop resets CURRENT to null after every resume).
    unsafe { (*y).suspend(()) };
    // `resume` cleared CURRENT when we switched out; restore it for this fiber.
    CURRENT.with(|c| c.set(y));
}

/// A per-worker pool of fiber stacks (stacks are reused, never freed while the worker lives).
pub(crate) struct StackPool {
    stacks: Vec<DefaultStack>,
    size: usize,
}

impl std::fmt::Debug for StackPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackPool")
            .field("free", &self.stacks.len())
            .field("size", &self.size)
            .finish()
    }
}

impl StackPool {
    /// A pool of stacks of `size` bytes, `prefill` of them allocated now.
    pub(crate) fn new(size: usize, prefill: usize) -> std::io::Result<StackPool> {
        let mut stacks = Vec::with_capacity(prefill);
        for _ in 0..prefill {
            stacks.push(DefaultStack::new(size)?);
        }
        Ok(StackPool { stacks, size })
    }

    /// A pool of stacks of `size` bytes holding none.
    pub(crate) fn empty(size: usize) -> StackPool {
        StackPool { stacks: Vec::new(), size }
    }

    /// The size of the pool's stacks.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Takes a stack from the pool or allocates one.
    pub(crate) fn take(&mut self) -> DefaultStack {
        match self.stacks.pop() {
            Some(s) => s,
            None => DefaultStack::new(self.size)
                .unwrap_or_else(|e| panic!("skein: cannot allocate a fiber stack: {e}")),
        }
    }

    /// Returns a stack to the pool.
    pub(crate) fn put(&mut self, s: DefaultStack) {
        self.stacks.push(s);
    }
}

#[cfg(test)]
mod tests;
