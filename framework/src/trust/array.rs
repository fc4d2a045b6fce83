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
//! 1. `parts[trustee]` holds a handle to `trustee`'s vector (clones of the `TrustArray` share
//!    it through the `Arc`; an array received from another worker or rank holds handles of
//!    its own, invariant 3), and `part_len` its length. In the array `new` or `new_then`
//!    built, a part of this rank has `base`, the address of its first value; a part built on
//!    its trustee of another rank (a split run, `docs/rack-mode.md` §5.4) is held through a
//!    proxy handle and has a null `base`: its values are reached only by element requests that
//!    name the part's export and the index (`RunElem`, a `KIND_ELEMENT` wire record,
//!    bounds-checked on the trustee). The vector is never resized or replaced (nothing
//!    outside this module can reach it, and this module never touches it after `new`), so
//!    `base` stays valid while the property lives. (A `Vec`, not a `Box<[T]>`: moving a `Box`
//!    asserts that nothing else points into it, which `base` does.)
//! 2. Values are only accessed by delegated code on their trustee, through requests issued
//!    with a live handle to their slice: the reference-counting argument of
//!    [`crate::runtime::free`] keeps the slice alive until they are served, and property
//!    invariant 2 keeps `&mut` to a value unique.
//! 3. An array received inside an `apply_with` argument or result (its `Serialize`) holds its
//!    parts' handles only, every `base` null: it reaches each value, those of its own rank
//!    included, by an element request on the part's handle, never by address. It is checked
//!    on receipt to have one part per worker of the run, part `t` on worker `t`; a length that
//!    does not match the parts makes element requests fail their bounds check on the
//!    trustee, never touch memory outside a part.

use super::OnProp;
use super::{
    arg_request, call_blocking, issue, take_uniform_wire, wire_word, Place, Trust, TrusteeRef,
};
use crate::channel::record::travel_check;
use crate::channel::record::{ArgCall, ArgRequest, RemoteHook};
use crate::channel::result::PlainSpace;
use crate::channel::result::ResultSpace;
use crate::channel::slot::PanicPayload;
use crate::runtime::context;
use crate::runtime::worker::Outcome;
use crate::wire::remote::{Element as RemoteElement, Of};
use crate::Plain;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::rc::Rc;
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

/// A [`TrustArray::new_then`] under way: its parts as they come, and the units still awaited
/// (one per part of another rank, one for this rank's parts).
struct Pending<T, G> {
    parts: Vec<Option<Part<T>>>,
    left: usize,
    /// `None` once a part has failed: the array is never made.
    then: Option<G>,
    len: usize,
}

impl<T: Send + 'static, G: FnOnce(TrustArray<T>) + 'static> Pending<T, G> {
    /// Gives back one unit (with the part it brings, if any); the last one makes the array
    /// and runs `then` with it, as a continuation.
    fn fill(st: &Rc<RefCell<Pending<T, G>>>, part: Option<(usize, Part<T>)>) {
        let mut p = st.borrow_mut();
        if let Some((t, part)) = part {
            p.parts[t] = Some(part);
        }
        p.left -= 1;
        if p.left > 0 {
            return;
        }
        let Some(then) = p.then.take() else { return };
        let parts: Option<Arc<[Part<T>]>> = std::mem::take(&mut p.parts).into_iter().collect();
        let len = p.len;
        drop(p);
        let parts = parts.expect("skein: TrustArray::new_then: a part is missing");
        let a = TrustArray::from_parts(parts, len);
        super::run_continuation(then, a, "TrustArray::new_then continuation");
    }
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

/// A `TrustArray` travels inside an `apply_with` argument or result (encoded by
/// [`crate::codec`] only, as a [`Trust`]): its length and one handle per part. The array
/// received reaches every value through its part's handle by index (invariant 3), so each
/// request takes the element path, this rank's parts included; the array that `new` made
/// keeps the direct path for the parts of its own rank. Receiving checks that the array has
/// one part per worker of the run, part `t` on worker `t`.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let a = skein::TrustArray::new(10, (), |(), i| i as u64);
/// let keeper = skein::trustee(1).entrust(skein::Latch::new(None::<skein::TrustArray<u64>>));
/// keeper.apply_with(a.clone(), |k, a| {
///     if let Some(k) = k.get_mut() {
///         *k = Some(a);
///     }
/// });
/// // A fiber on worker 1 uses the array it was handed (under MPI, on whatever rank).
/// let sum = keeper.launch((), |k, ()| {
///     let a = k.as_ref().unwrap();
///     (0..a.len()).map(|i| a.apply(i, (), |v, ()| *v)).sum::<u64>()
/// });
/// assert_eq!(sum, 45);
/// # }).unwrap();
/// ```
impl<T: Send + 'static> serde::Serialize for TrustArray<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let handles: Vec<&Trust<Vec<T>>> = self.parts.iter().map(|p| &p.slice).collect();
        serde::Serialize::serialize(&(self.len as u64, handles), s)
    }
}

/// The receiving side of [`TrustArray`]'s `Serialize`.
impl<'de, T: Send + 'static> serde::Deserialize<'de> for TrustArray<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (len, slices): (u64, Vec<Trust<Vec<T>>>) = serde::Deserialize::deserialize(d)?;
        TrustArray::received(len, slices).map_err(serde::de::Error::custom)
    }
}

impl<T: Send + 'static> TrustArray<T> {
    /// Creates `len` values, value `i` being `init(arg, i)`, spread over all workers' trustees.
    /// `init` and `arg` follow the travel rule of [`Trust::apply`] (a capture-free closure, a
    /// [`Plain`] argument), so that the parts can be built by their trustees once those may
    /// be on other ranks. On this rank the values are built here, on the calling worker, and
    /// each trustee's part is entrusted to it (its memory is shared by the process). In a
    /// run over ranks (MPI, or a loopback split, `Builder::loopback_ranks`), called from a
    /// fiber, each part of a trustee of another rank is built there (all of them at once, a
    /// remote spawn each; the calling fiber waits) and exported, and the array holds a proxy
    /// of it (`docs/rack-mode.md` §5.4). Delegated context cannot wait for those parts: there,
    /// use [`TrustArray::new_then`]. Under MPI this call panics in delegated context when a
    /// part is on another rank, naming it; in a loopback run those parts are then built here,
    /// in the memory the fake ranks share (loopback only).
    ///
    /// # Panics
    /// Outside a runtime, if `init` panics, or in delegated context when some worker is on
    /// another MPI rank.
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
        let part_len = |trustee: usize| len / n + usize::from(trustee < len % n);
        // In a split run, from a fiber, the parts of trustees of other ranks are built there,
        // all at once (remote spawns, `runtime::spawn::build_part_remote`), and exported.
        let remote =
            |t: usize| w.run_state.is_split() && w.may_block() && !super::is_local_in(w, t);
        let mut building: Vec<_> = (0..n)
            .map(|t| {
                remote(t).then(|| crate::runtime::spawn::build_part_remote(w, t, len, arg, init))
            })
            .collect();
        let mut slices: Vec<Vec<T>> = (0..n)
            .map(|t| Vec::with_capacity(if building[t].is_some() { 0 } else { part_len(t) }))
            .collect();
        for i in 0..len {
            if building[i % n].is_none() {
                slices[i % n].push(init(arg, i));
            }
        }
        let parts: Arc<[Part<T>]> = slices
            .into_iter()
            .enumerate()
            .map(|(trustee, v)| match building[trustee].take() {
                Some(h) => Part {
                    slice: Trust::received(w, trustee, h.join()),
                    base: std::ptr::null_mut(),
                    part_len: part_len(trustee),
                },
                None => {
                    let mut v = v;
                    let (base, part_len) = (v.as_mut_ptr(), v.len());
                    // The vector moves into the property; its values stay where they are.
                    Part { slice: super::entrust_part(w, trustee, v), base, part_len }
                }
            })
            .collect();
        TrustArray::from_parts(parts, len)
    }

    /// The array decoded from `len` and its parts' handles (invariant 3); the handles are
    /// dropped (their counts given back) when they do not make an array of this run.
    fn received(len: u64, slices: Vec<Trust<Vec<T>>>) -> Result<TrustArray<T>, String> {
        let n = context::current()
            .map(|w| w.n)
            .ok_or("a TrustArray is received only on a worker of its run")?;
        if slices.len() != n {
            let k = slices.len();
            return Err(format!(
                "a TrustArray of {k} part{} received in a run of {n} workers (one part per \
                 worker expected)",
                if k == 1 { "" } else { "s" }
            ));
        }
        if let Some((t, s)) = slices.iter().enumerate().find(|(t, s)| s.trustee_index() != *t) {
            return Err(format!(
                "part {t} of a received TrustArray is on worker {}",
                s.trustee_index()
            ));
        }
        let len = usize::try_from(len).map_err(|_| format!("a TrustArray of {len} values"))?;
        let parts: Arc<[Part<T>]> = slices
            .into_iter()
            .enumerate()
            .map(|(t, slice)| Part {
                slice,
                base: std::ptr::null_mut(),
                part_len: len / n + usize::from(t < len % n),
            })
            .collect();
        Ok(TrustArray::from_parts(parts, len))
    }

    /// The array of `len` values over `parts` (one per worker, in order).
    fn from_parts(parts: Arc<[Part<T>]>, len: usize) -> TrustArray<T> {
        let n = parts.len();
        let (mask, shift) = if n.is_power_of_two() { (n - 1, n.trailing_zeros()) } else { (0, 0) };
        TrustArray { parts, len, mask, shift }
    }

    /// The non-blocking [`TrustArray::new`]: creates the same `len` values, value `i` being
    /// `init(arg, i)`, and runs `then(array)` on the calling worker once every part is built,
    /// as an `apply_then` continuation (never before `new_then` returns). It may be called
    /// from delegated context as well as from a fiber.
    ///
    /// The parts of this rank are built here, on the calling worker (as `new` does); each part
    /// of a trustee of another rank (a loopback fake rank, or another MPI rank) is built on
    /// its trustee by a remote spawn, exported, and held through a proxy, as by `new` from a
    /// fiber. A panic of `init` (on whatever rank) or of `then` is recorded and makes the run
    /// fail; `then` does not run if a part failed, and the parts already built are dropped.
    ///
    /// # Panics
    /// Outside a runtime, or if `init` panics on this rank.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(0u8);
    /// t.apply_then((), |_, ()| (), |()| {
    ///     skein::TrustArray::new_then(5, 10usize, |base, i| i + base, |a| {
    ///         a.apply_then(4, (), |v, ()| *v, |v| assert_eq!(v, 14));
    ///     });
    /// });
    /// skein::wait_quiescent();
    /// # }).unwrap();
    /// ```
    ///
    /// A capture does not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| {
    /// let base = 10usize;
    /// skein::TrustArray::new_then(5, (), move |(), i| i + base, |_a| ());
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| {
    /// skein::TrustArray::new_then(5, vec![10usize], |b, i| i + b[0], |_a| ());
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn new_then<A, F, G>(len: usize, arg: A, init: F, then: G)
    where
        A: Plain,
        F: Fn(A, usize) -> T + Copy + Send + 'static,
        G: FnOnce(TrustArray<T>) + 'static,
    {
        travel_check!(F = F, A = A, U = ());
        let w = context::expect("TrustArray::new_then");
        let n = w.n;
        let part_len = move |trustee: usize| len / n + usize::from(trustee < len % n);
        // One unit per part of another rank, and one for this rank's parts, given back by a
        // request to this worker itself, so that `then` always runs as a continuation.
        let remote = (0..n).filter(|&t| !super::is_local_in(w, t)).count();
        let state = Rc::new(RefCell::new(Pending {
            parts: (0..n).map(|_| None).collect(),
            left: remote + 1,
            then: Some(then),
            len,
        }));
        for t in 0..n {
            if super::is_local_in(w, t) {
                let mut v: Vec<T> = (t..len).step_by(n).map(|i| init(arg, i)).collect();
                let (base, part_len) = (v.as_mut_ptr(), v.len());
                // The vector moves into the property; its values stay where they are.
                let part = Part { slice: super::entrust_part(w, t, v), base, part_len };
                state.borrow_mut().parts[t] = Some(part);
                continue;
            }
            let st = state.clone();
            let done = move |r: Result<[u64; 3], &str>| -> Result<(), String> {
                let w = context::expect("TrustArray::new_then");
                match r {
                    Ok(ex) => {
                        let slice = Trust::try_received(w, t, ex)?;
                        let part =
                            Part { slice, base: std::ptr::null_mut(), part_len: part_len(t) };
                        Pending::fill(&st, Some((t, part)));
                    }
                    Err(msg) => {
                        w.run_state
                            .record_error(format!("TrustArray::new_then part panicked: {msg}"));
                        st.borrow_mut().then = None;
                        Pending::fill(&st, None);
                    }
                }
                Ok(())
            };
            crate::runtime::spawn::build_part_remote_then(w, t, len, arg, init, done);
        }
        let local = move |_o: Outcome| Pending::fill(&state, None);
        // SAFETY: the calling worker's own index is below `n`; the request works on no target.
        unsafe {
            w.request::<ResultSpace<()>, _, _>(
                w.index,
                std::ptr::null_mut(),
                super::closure_request(|_| ()),
                local,
            )
        };
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

    /// Value `i`'s part and address (for a part of another rank, whose `base` is null, the
    /// address means nothing: see [`TrustArray::locate_index`]).
    #[inline(always)]
    #[track_caller]
    fn locate(&self, i: usize) -> (&Part<T>, *mut u8) {
        let (part, j) = self.locate_index(i);
        // Only computes the address (invariant 1: inside the slice, since j < part_len).
        (part, part.base.wrapping_add(j) as *mut u8)
    }

    /// Value `i`'s part and its index there.
    #[inline(always)]
    #[track_caller]
    fn locate_index(&self, i: usize) -> (&Part<T>, usize) {
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
        (part, j)
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
        let (part, j) = self.locate_index(i);
        // A part of another rank is a proxy handle's (invariant 1), which, like a handle of
        // another run, fails the one compare of `local_worker`; a received array's parts have
        // no address (invariant 3).
        let Some((w, trustee)) = part.slice.local_worker().filter(|_| !part.base.is_null()) else {
            return part.apply_remote(j, arg, f);
        };
        // Only computes the address (invariant 1: inside the slice, since j < part_len).
        let target = part.base.wrapping_add(j) as *mut u8;
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
        let (part, j) = self.locate_index(i);
        let Some((w, trustee)) = part.slice.local_worker().filter(|_| !part.base.is_null()) else {
            return part.apply_then_remote(j, arg, f, then);
        };
        // Only computes the address (invariant 1: inside the slice, since j < part_len).
        let target = part.base.wrapping_add(j) as *mut u8;
        let req = arg_request::<OnElem<T>, A, U, F>(arg, f);
        // SAFETY: `trustee` comes from `local_worker`; `target` is value `i`, kept alive by the
        // part's handle (invariant 2).
        unsafe { issue::<PlainSpace<U>, _, _>(w, trustee, target, req, then) }
    }
}

impl<T: Send + 'static> Part<T> {
    /// [`TrustArray::apply`] on a part of another rank (invariant 1), or on any part of a
    /// received array (invariant 3): an element request on the part's handle. Also the
    /// refusal of a call outside the array's run (`issue_for`).
    #[inline(never)]
    #[track_caller]
    fn apply_remote<A, U, F>(&self, j: usize, arg: A, f: F) -> U
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        let (w, trustee, target) = self.slice.issue_for("TrustArray::apply");
        w.check_may_block("TrustArray::apply");
        let _witness = f;
        let req = ArgRequest::<_, RunElem<T, U, F>>::new((j as u64, arg));
        call_blocking::<PlainSpace<U>, _>(w, trustee, target, req)
    }

    /// [`TrustArray::apply_then`] on a part of another rank, or on any part of a received
    /// array: the common path of an array used from another rank, so not marked cold.
    #[inline(never)]
    #[track_caller]
    fn apply_then_remote<A, U, F, G>(&self, j: usize, arg: A, f: F, then: G)
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
        G: FnOnce(U) + 'static,
    {
        let (w, trustee, target) = self.slice.issue_for("TrustArray::apply_then");
        let _witness = f;
        let req = ArgRequest::<_, RunElem<T, U, F>>::new((j as u64, arg));
        // SAFETY: `trustee` comes from `issue_for`; `target` is the part's (its export's word,
        // or in a loopback run its address), kept alive by the part's handle.
        unsafe { issue::<PlainSpace<U>, _, _>(w, trustee, target, req, then) }
    }
}

/// The code of an element request on a part of another rank: the argument is `(index, A)`,
/// the target the part (a `Prop<Vec<T>>` in this process, reached through a loopback run's
/// shared memory; across ranks the record travels as `RemoteVTable::of_element`, whose `run`
/// checks the index). Named only by `Part::apply_remote`/`apply_then_remote`, which held an
/// `F`.
struct RunElem<T, U, F>(PhantomData<ElemTypes<T, U, F>>);

/// The types a [`RunElem`] names (a function type: no auto-trait or drop effects).
type ElemTypes<T, U, F> = fn() -> (T, U, F);

// SAFETY: zero-sized, named only by the entry points above, which were handed an `F` (checked
// zero-sized by `travel_check!` in `TrustArray::apply*`).
unsafe impl<T, A, U, F> ArgCall<(u64, A)> for RunElem<T, U, F>
where
    A: Plain,
    U: Plain,
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    const REMOTE: Option<&'static RemoteHook> = Some(&RemoteHook {
        code: Of::<T, A, U, F, RemoteElement>::VT.code(),
        take_arg: take_elem_arg::<T, A>,
        put_result: super::put_plain_result::<U>,
        take_uniform: Some(take_elem_uniform::<T, A>),
        wire_result: true,
    });

    unsafe fn run(target: *mut u8, (j, arg): (u64, A), out: *mut u8) -> Option<PanicPayload> {
        travel_check!(F = F);
        // SAFETY: as `RunArg::run`: `F` is zero-sized, `Copy`, and a value of it existed.
        let f: F = unsafe { NonNull::<F>::dangling().as_ptr().read() };
        // SAFETY: caller promise: `target` is the part's `Prop<Vec<T>>`, alive, and this runs as
        // delegated code on its trustee.
        let part = unsafe { OnProp::<Vec<T>>::value(target) };
        let r = catch_unwind(AssertUnwindSafe(move || {
            let len = part.len();
            let v = usize::try_from(j).ok().and_then(|j| part.get_mut(j));
            let v = v.unwrap_or_else(|| panic!("skein: element index {j} out of a part of {len}"));
            f(v, arg)
        }));
        match r {
            Ok(u) => {
                // SAFETY: caller promise: `out` holds `PlainSpace::<U>::BYTES` bytes.
                unsafe { crate::channel::result::write_plain(out, u) };
                None
            }
            Err(p) => Some(p),
        }
    }
}

/// [`RemoteHook::take_arg`] of a [`RunElem`] record: the index (8 bytes), then the argument's
/// bytes (`RemoteVTable::of_element`'s layout); the target word is the part's.
///
/// # Safety
/// `p` is the target word of a live `ArgRequest<(u64, A), RunElem<..>>` record owned by the
/// caller (a `Plain` argument: a byte copy, nothing to drop).
unsafe fn take_elem_arg<T, A: Plain>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise: the target word at `p`, the `repr(C, packed)` argument right
    // after it (record invariant 1), read unaligned.
    let (target, (j, a)) = unsafe {
        (std::ptr::read(p as *const *mut u8), std::ptr::read_unaligned(p.add(8) as *const (u64, A)))
    };
    arg.extend_from_slice(&j.to_le_bytes());
    crate::wire::remote::push_plain(arg, a);
    // SAFETY: caller promise: the request is live, so its part is.
    unsafe { wire_word::<OnProp<Vec<T>>>(target) }
}

/// [`RemoteHook::take_uniform`] of [`RunElem`] records: [`take_elem_arg`] for `n` records at
/// once, written straight into `out` (one reservation, no per-record call or length update).
///
/// # Safety
/// As [`RemoteHook::take_uniform`]: `n` live `ArgRequest<(u64, A), RunElem<T, ..>>` records
/// at `src`, `stride` words apart, each a header, the target word and the `repr(C, packed)`
/// argument, owned by the caller (`Plain` arguments: byte copies, nothing to drop).
unsafe fn take_elem_uniform<T, A: Plain>(
    src: *const u64,
    stride: usize,
    n: usize,
    out: &mut Vec<u8>,
) {
    // SAFETY: caller promise; the record's argument is `(index, A)`, written as the index
    // then `A` (`RemoteVTable::of_element`'s layout, as `take_elem_arg` writes it).
    unsafe {
        take_uniform_wire::<OnProp<Vec<T>>, (u64, A), A, 8>(src, stride, n, out, |(j, a)| (j, a))
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

#[cfg(test)]
mod tests;
