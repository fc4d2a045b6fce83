//! `TrustArray<T>`: many values spread over every trustee, addressed by index.
//!
//! A program that keeps one [`Trust`] per value (a counter per object, a distance per vertex)
//! reads a handle from memory before every request: with millions of values that is a cache
//! miss on the client, on top of the one on the trustee. A `TrustArray` holds one property per
//! trustee, a vector of the values that trustee owns (value `i` on trustee `i % n`, at
//! `i / n` in its slice), and finds the trustee and the value's address by arithmetic: a
//! request costs the client no memory access beyond the array's own small header.
//!
//! # Invariants
//!
//! 1. `parts[trustee]` holds the only handle to `trustee`'s vector (clones of the `TrustArray`
//!    share it through the `Arc`); `base` is the address of its first value, and `part_len`
//!    its length. The vector is never resized or replaced (nothing outside this module can
//!    reach it, and this module never touches it after `new`), so `base` stays valid while
//!    the property lives. (A `Vec`, not a `Box<[T]>`: moving a `Box` asserts that nothing
//!    else points into it, which `base` does.)
//! 2. Values are only accessed by delegated code on their trustee, through requests issued
//!    with a live handle to their slice: the reference-counting argument of
//!    [`crate::runtime::free`]
//!    keeps the slice alive until they are served, and property invariant 2 keeps `&mut` to a
//!    value unique.

use super::{arg_request, call_blocking, issue, travel_check, Place, Trust, TrusteeRef};
use crate::runtime::context;
use crate::trust::result::PlainSpace;
use crate::Plain;
use std::marker::PhantomData;
use std::sync::Arc;

/// `len` values of type `T` spread over all workers' trustees (value `i` on trustee
/// `i % num_workers()`), addressed by index. Like a `Vec<Trust<T>>` of `len` handles, with one
/// handle per trustee instead: no handle is loaded from memory per request, and the values
/// take no per-value header. Cloning is cheap (a shared pointer); the values are dropped on
/// their trustees once the last clone is gone and every request to them has been served.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let counts = skein::TrustArray::new(1000, (), |(), _| 0u64);
/// for i in 0..10_000 {
///     counts.apply_then(i * 7 % 1000, 1u64, |c, k| *c += k, |()| {});
/// }
/// skein::wait_quiescent();
/// assert_eq!(counts.apply(0, (), |c, ()| *c), 10);
/// assert_eq!(counts.trustee_of(3).worker(), 1);
/// # }).unwrap();
/// ```
pub struct TrustArray<T> {
    parts: Arc<[Part<T>]>,
    len: usize,
    /// `parts.len() - 1` when that is a power of two (index split by mask and shift), else 0.
    mask: usize,
    shift: u32,
}

struct Part<T> {
    slice: Trust<Vec<T>>,
    base: *mut T,
    part_len: usize,
}

// SAFETY: `base` is only dereferenced by delegated code on the slice's trustee (invariant 2);
// otherwise a part is a handle, which is Send and Sync when `T: Send`.
unsafe impl<T: Send> Send for Part<T> {}
// SAFETY: as above; `&Part` gives no access to the values.
unsafe impl<T: Send> Sync for Part<T> {}

impl<T> Clone for TrustArray<T> {
    fn clone(&self) -> Self {
        TrustArray { parts: self.parts.clone(), len: self.len, mask: self.mask, shift: self.shift }
    }
}

impl<T> std::fmt::Debug for TrustArray<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustArray")
            .field("len", &self.len)
            .field("trustees", &self.parts.len())
            .finish()
    }
}

impl<T: Send + 'static> TrustArray<T> {
    /// Creates `len` values, value `i` being `init(arg, i)`, spread over all workers' trustees.
    /// `init` and `arg` follow the travel rule of [`Trust::apply`] (a capture-free closure, a
    /// [`Plain`] argument), so that the parts can be built by their trustees once those may
    /// be on other ranks. On one rank the values are built here, on the calling worker, and
    /// each trustee's part is entrusted to it (its memory is shared by the process).
    ///
    /// # Panics
    /// Outside a runtime, or if `init` panics.
    ///
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| {
    /// let base = 10usize;
    /// skein::TrustArray::new(5, (), move |(), i| i + base); // pass base as the argument
    /// # }).unwrap();
    /// ```
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let base = 10usize;
    /// let a = skein::TrustArray::new(5, base, |base, i| i + base);
    /// assert_eq!(a.apply(4, (), |v, ()| *v), 14);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn new<A, F>(len: usize, arg: A, init: F) -> TrustArray<T>
    where
        A: Plain,
        F: Fn(A, usize) -> T + Copy + Send + 'static,
    {
        travel_check!(F = F, A = A, U = ());
        let w = context::expect("TrustArray::new");
        let n = w.n;
        let mut slices: Vec<Vec<T>> = (0..n)
            .map(|trustee| Vec::with_capacity(len / n + usize::from(trustee < len % n)))
            .collect();
        for i in 0..len {
            slices[i % n].push(init(arg, i));
        }
        let parts: Arc<[Part<T>]> = slices
            .into_iter()
            .enumerate()
            .map(|(trustee, v)| {
                let mut v = v;
                let (base, part_len) = (v.as_mut_ptr(), v.len());
                // The vector moves into the property; its values stay where they are.
                Part { slice: super::entrust_part(w, trustee, v), base, part_len }
            })
            .collect();
        let (mask, shift) = if n.is_power_of_two() { (n - 1, n.trailing_zeros()) } else { (0, 0) };
        TrustArray { parts, len, mask, shift }
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the array holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The trustee that owns value `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn trustee_of(&self, i: usize) -> TrusteeRef {
        self.locate(i).0.slice.trustee()
    }

    /// Value `i`'s part and address.
    #[inline(always)]
    #[track_caller]
    fn locate(&self, i: usize) -> (&Part<T>, *mut u8) {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
        let (trustee, j) = if self.mask != 0 || self.parts.len() == 1 {
            (i & self.mask, i >> self.shift)
        } else {
            (i % self.parts.len(), i / self.parts.len())
        };
        let part = &self.parts[trustee];
        debug_assert!(j < part.part_len);
        // Only computes the address (invariant 1: inside the slice, since j < part_len).
        (part, part.base.wrapping_add(j) as *mut u8)
    }

    /// Applies `f` to value `i` on its trustee with the argument `arg` and returns the result,
    /// as [`Trust::apply`] (the same travel rule).
    ///
    /// # Panics
    /// As [`Trust::apply`]; also if `i >= self.len()`.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let a = skein::TrustArray::new(5, (), |(), i| i * 10);
    /// assert_eq!(a.apply(4, 1usize, |v, k| { *v += k; *v }), 41);
    /// # }).unwrap();
    /// ```
    ///
    /// A capture, and a non-`Plain` argument, do not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let a = &skein::TrustArray::new(5, (), |(), i| i * 10);
    /// let k = 1usize;
    /// a.apply(4, (), move |v, ()| *v + k);
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let a = &skein::TrustArray::new(5, (), |(), i| i * 10);
    /// a.apply(4, vec![1usize], |v, k| *v + k[0]);
    /// # }).unwrap();
    /// ```
    /// Their twin:
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let a = skein::TrustArray::new(5, (), |(), i| i * 10);
    /// let k = 1usize;
    /// assert_eq!(a.apply(4, k, |v, k| *v + k), 41);
    /// assert_eq!(a.apply(4, vec![1usize][0], |v, k0| *v + k0), 41);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn apply<A, U, F>(&self, i: usize, arg: A, f: F) -> U
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        travel_check!(F = F, A = A, U = U);
        let (part, target) = self.locate(i);
        let (w, trustee) = part.slice.worker_for("TrustArray::apply");
        w.check_may_block("TrustArray::apply");
        if trustee == w.index && w.local_queue_empty() {
            // We are the trustee, outside delegated code, and `f` (delegated, cannot block)
            // runs to completion before anything else here.
            // SAFETY: delegated code on value `i`'s trustee (invariant 2).
            return w.delegated(|| f(unsafe { OnElem::<T>::value(target) }, arg));
        }
        let req = arg_request::<OnElem<T>, A, U, F>(arg, f);
        call_blocking::<PlainSpace<U>, _>(w, trustee, target, req)
    }

    /// Queues `f` with the argument `arg` for value `i`'s trustee and returns at once;
    /// `then(result)` runs later on the calling worker, as [`Trust::apply_then`] (the same
    /// travel rule). Requests from one fiber to one value are applied in order.
    ///
    /// # Panics
    /// As [`Trust::apply_then`]; also if `i >= self.len()`.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let a = skein::TrustArray::new(4, (), |(), _| 0u32);
    /// a.apply_then(3, 2u32, |v, k| { *v += k; *v }, |v| assert_eq!(v, 2));
    /// # }).unwrap();
    /// ```
    #[inline]
    #[track_caller]
    pub fn apply_then<A, U, F, G>(&self, i: usize, arg: A, f: F, then: G)
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
        G: FnOnce(U) + 'static,
    {
        travel_check!(F = F, A = A, U = U);
        let (part, target) = self.locate(i);
        let (w, trustee) = part.slice.worker_for("TrustArray::apply_then");
        let req = arg_request::<OnElem<T>, A, U, F>(arg, f);
        // SAFETY: `trustee` comes from `worker_for`; `target` is value `i`, kept alive by the
        // part's handle (invariant 2).
        unsafe { issue::<PlainSpace<U>, _, _>(w, trustee, target, req, then) }
    }
}

/// The value at the target word of a request to one value of a part (invariant 2).
pub(crate) struct OnElem<T>(PhantomData<fn() -> T>);

impl<T> Place for OnElem<T> {
    type Value = T;
    #[inline(always)]
    unsafe fn value<'a>(target: *mut u8) -> &'a mut T {
        // SAFETY: caller promise: `target` is a value's address from `locate`, and this runs
        // as delegated code on the value's trustee (invariant 2: alive and unaliased).
        unsafe { &mut *(target as *mut T) }
    }
    #[inline(always)]
    unsafe fn value_addr(target: *mut u8) -> *mut T {
        target as *mut T
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn out_of_bounds(i: usize, len: usize) -> ! {
    panic!("skein: TrustArray index {i} out of bounds (len {len})")
}
