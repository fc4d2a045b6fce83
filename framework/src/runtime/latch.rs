//! `Latch<T>`: a mutex for fibers of one worker, with no atomics.
//!
//! # Invariants
//! 1. The value lives in its own heap allocation (`value`), so an `&mut Latch<T>` (which a
//!    trustee may hand to an `apply` closure) never covers the bytes of the `&mut T` a fiber
//!    holds while it has the latch locked.
//! 2. `locked`/`waiters` are touched only by code on the one worker that owns the latch (the
//!    type is `!Sync`, and fibers never migrate), and never while another access is running: the
//!    worker runs one piece of code at a time.
//! 3. While locked, the value allocation is never freed: dropping a locked latch leaks it.

use crate::runtime::context;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// A mutex for fibers of one worker: [`Latch::lock`] suspends the calling fiber (not the
/// worker) while another fiber of the same worker holds it. No atomics.
///
/// Entrusted as a property (`Trust<Latch<T>>`) it lets [`crate::Trust::launch`] run blocking
/// closures on the trustee one at a time.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(1).build().unwrap();
/// # rt.run(|| {
/// let l = std::rc::Rc::new(skein::Latch::new(0));
/// {
///     let mut g = l.lock();
///     *g += 1;
/// }
/// assert_eq!(*l.lock(), 1);
/// # }).unwrap();
/// ```
pub struct Latch<T> {
    locked: Cell<bool>,
    waiters: RefCell<VecDeque<u32>>,
    value: NonNull<T>,
    _own: PhantomData<T>,
}

// SAFETY: a latch owns its value (like a Box); moving it to another thread moves the value, and
// it can only be moved while unlocked with no waiters (guards borrow it, invariant 3 covers
// `mem::replace` through `&mut`).
unsafe impl<T: Send> Send for Latch<T> {}

impl<T: std::fmt::Debug> std::fmt::Debug for Latch<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latch").field("locked", &self.locked.get()).finish_non_exhaustive()
    }
}

impl<T> Latch<T> {
    /// A new, unlocked latch.
    pub fn new(value: T) -> Latch<T> {
        Latch {
            locked: Cell::new(false),
            waiters: RefCell::new(VecDeque::new()),
            value: NonNull::from(Box::leak(Box::new(value))),
            _own: PhantomData,
        }
    }

    /// True while a fiber holds the latch.
    pub fn is_locked(&self) -> bool {
        self.locked.get()
    }

    /// The value, unless a fiber holds the latch.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.locked.get() {
            None
        } else {
            // SAFETY: unlocked, and `&mut self` excludes every other access (invariants 1, 2).
            Some(unsafe { self.value.as_mut() })
        }
    }

    /// Locks without waiting.
    pub fn try_lock(&self) -> Option<LatchGuard<'_, T>> {
        if self.locked.get() {
            None
        } else {
            self.locked.set(true);
            Some(LatchGuard { latch: self })
        }
    }

    /// Locks, suspending the calling fiber while another fiber of this worker holds the latch.
    ///
    /// # Panics
    /// If the latch is held and the caller cannot block (delegated context, outside a fiber).
    pub fn lock(&self) -> LatchGuard<'_, T> {
        // SAFETY: `self` is a live latch on this worker.
        unsafe { Self::lock_raw(self) };
        LatchGuard { latch: self }
    }

    /// Locks the latch at `l` (parking the current fiber while it is held).
    ///
    /// # Safety
    /// `l` points to a live latch owned by the current worker, which stays alive (or is leaked
    /// as a whole property) until the matching [`Latch::unlock_raw`].
    pub(crate) unsafe fn lock_raw(l: *const Latch<T>) {
        // SAFETY: caller promise; short-lived shared reference (invariant 2).
        let latch = unsafe { &*l };
        if !latch.locked.get() {
            latch.locked.set(true);
            return;
        }
        let w = context::expect("Latch::lock");
        w.check_may_block("Latch::lock");
        latch.waiters.borrow_mut().push_back(w.current_fiber().expect("fiber"));
        w.note_wait(crate::runtime::stall::Wait::Latch { addr: l as usize });
        w.park();
        // Woken by `unlock_raw`, which handed the lock over to us (still locked).
    }

    /// Unlocks, handing the latch to the first waiter.
    ///
    /// # Safety
    /// `l` points to a live latch on this worker that the caller locked.
    pub(crate) unsafe fn unlock_raw(l: *const Latch<T>) {
        // SAFETY: caller promise (invariant 2).
        let latch = unsafe { &*l };
        let next = latch.waiters.borrow_mut().pop_front();
        match next {
            Some(id) => context::expect("Latch::unlock").wake_parked(id),
            None => latch.locked.set(false),
        }
    }

    /// Raw pointer to the value (stable for the latch's life, invariant 1).
    pub(crate) fn value_ptr(&self) -> *mut T {
        self.value.as_ptr()
    }

    /// Consumes the latch and returns the value.
    pub fn into_inner(self) -> T {
        assert!(!self.locked.get(), "skein: Latch::into_inner on a locked latch");
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: unlocked, the allocation came from Box::leak in `new`; `me` is never dropped.
        let v = unsafe { *Box::from_raw(me.value.as_ptr()) };
        // SAFETY: move the remaining owned field out once; `me` is never dropped.
        drop(unsafe { std::ptr::read(&me.waiters) });
        v
    }
}

impl<T> Drop for Latch<T> {
    fn drop(&mut self) {
        if !self.locked.get() {
            // SAFETY: unlocked, so no fiber holds a reference into the value (invariant 3);
            // the allocation came from Box::leak in `new`.
            drop(unsafe { Box::from_raw(self.value.as_ptr()) });
        }
    }
}

/// Exclusive access to a latched value; unlocks on drop.
pub struct LatchGuard<'a, T> {
    latch: &'a Latch<T>,
}

impl<T> std::fmt::Debug for LatchGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatchGuard").finish_non_exhaustive()
    }
}

impl<T> std::ops::Deref for LatchGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock, so no other reference to the value exists (invariant 1).
        unsafe { &*self.latch.value.as_ptr() }
    }
}

impl<T> std::ops::DerefMut for LatchGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only guard access.
        unsafe { &mut *self.latch.value.as_ptr() }
    }
}

impl<T> Drop for LatchGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: we locked this live latch.
        unsafe { Latch::unlock_raw(self.latch) };
    }
}

// SAFETY: `lock_raw` gives the fiber that returns from it the latch until its `unlock_raw`
// (latch invariants 1 to 3), and the value stays where `value_ptr` says for the latch's life.
unsafe impl<T> crate::wire::remote::LaunchLock for Latch<T> {
    type Value = T;
    unsafe fn lock_raw(l: *const Self) {
        // SAFETY: forwarded caller promise.
        unsafe { Latch::lock_raw(l) }
    }
    unsafe fn unlock_raw(l: *const Self) {
        // SAFETY: forwarded caller promise.
        unsafe { Latch::unlock_raw(l) }
    }
    unsafe fn value_ptr(l: *const Self) -> *mut T {
        // SAFETY: caller promise: a live latch.
        unsafe { &*l }.value_ptr()
    }
}
