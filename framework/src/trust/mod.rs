//! `Trust<T>` and `TrusteeRef`: handles to properties, and the delegation calls (`apply`,
//! `apply_then`, `apply_with`, `launch`) that turn a closure into a request.
//!
//! A [`Trust`] is one word (the property's address, its trustee's index and its run's id,
//! packed). A call finds the calling worker, checks that the handle belongs to its run, and
//! queues a request with [`Worker::request`]: a request closure that applies the user's
//! closure to the property's value on the trustee and writes the result back ([`result`]),
//! and a completion that delivers it (waking the fiber blocked in `apply`, or running the
//! `apply_then` continuation). [`TrustArray`] does the same for values addressed by index.
//!
//! Cloning and dropping a handle only touch the property's reference count; the count, the
//! deferred free of the property and the proof that both are right live in
//! [`crate::runtime::free`]. The property's memory is [`crate::property`].

pub(crate) mod array;
pub(crate) mod latch;
pub(crate) mod result;

use crate::channel::slot::PanicPayload;
use crate::property::{self, Prop, PropHead, PropPtr};
use crate::runtime::worker::{Outcome, Worker};
use crate::runtime::{context, free};
use result::{read_result, write_result, ResultSpace, SendPtr};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;
use std::num::NonZero;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

pub use array::TrustArray;
pub use latch::{Latch, LatchGuard};

/// A worker in its trustee role; properties are entrusted to it.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let t = skein::trustee(1);
/// assert_eq!(t.worker(), 1);
/// let v = t.entrust(vec![1, 2, 3]);
/// assert_eq!(v.apply(|v| v.len()), 3);
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrusteeRef {
    trustee: usize,
}

/// The trustee role of the calling worker.
///
/// # Panics
/// Outside a runtime.
pub fn local_trustee() -> TrusteeRef {
    TrusteeRef { trustee: context::expect("local_trustee").index }
}

/// The trustee role of worker `worker`.
///
/// # Panics
/// Outside a runtime, or if `worker >= num_workers()`.
pub fn trustee(worker: usize) -> TrusteeRef {
    let n = context::expect("trustee").n;
    assert!(worker < n, "skein: trustee({worker}) but the runtime has {n} workers");
    TrusteeRef { trustee: worker }
}

impl TrusteeRef {
    /// The worker index.
    pub fn worker(&self) -> usize {
        self.trustee
    }

    /// Makes `value` a property of this trustee and returns the first handle to it.
    ///
    /// # Panics
    /// Outside a runtime.
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        let w = context::expect("entrust");
        assert!(self.trustee < w.n, "skein: TrusteeRef from another runtime");
        Trust::new(property::alloc(value, w.run_id, self.trustee), self.trustee, w.run_id)
    }
}

/// A handle to a property of type `T` owned by a trustee. Clone it freely; send it anywhere
/// (if `T: Send`). The property is dropped on its trustee after the last handle is gone.
///
/// `Trust<T>` is `Send` and `Sync` only if `T` is `Send`:
///
/// ```compile_fail
/// fn need_send<S: Send>(_: S) {}
/// fn f(t: skein::Trust<std::rc::Rc<u8>>) { need_send(t) }
/// ```
///
/// Delegated closures must be `Send + 'static` (no borrowed captures):
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let local = 5u64;
///     t.apply(|c| *c += local); // borrows `local`
///     let r = &local;
///     t.apply(move |c| *c += *r);
/// }
/// ```
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let rc = std::rc::Rc::new(1u64);
///     t.apply(move |c| *c += *rc); // Rc is not Send
/// }
/// ```
pub struct Trust<T> {
    /// One word, so that the handles of many properties take little cache: the property's
    /// address divided by 16 in the low [`TRUSTEE_SHIFT`] bits, then the trustee's index,
    /// then the run's id from [`RUN_SHIFT`] up. The pointer keeps the property's provenance.
    packed: NonNull<Prop<T>>,
    _t: PhantomData<T>,
}

/// Properties lie below 2^48 (user space on x86-64 and AArch64, checked when one is
/// entrusted) and are 16-aligned, so their address takes 44 bits.
const TRUSTEE_SHIFT: u32 = 44;
const ADDR_MASK: usize = (1 << TRUSTEE_SHIFT) - 1;
const RUN_SHIFT: u32 = 56;
// Every worker index (the builder allows at most 4096 workers) and every run id fit.
const _: () = assert!(4096 <= 1 << (RUN_SHIFT - TRUSTEE_SHIFT));
const _: () = assert!(crate::run_ids::MAX_RUN_ID < 1 << (usize::BITS - RUN_SHIFT));
const _: () = assert!(std::mem::align_of::<Prop<()>>() == 16);

// SAFETY: the value is only touched on its trustee (property invariant 2) and moves there by value
// inside `entrust`; so a handle may live on any thread when `T: Send`.
unsafe impl<T: Send> Send for Trust<T> {}
// SAFETY: all `&self` methods only queue closures (which need `Send`) or touch the atomic count.
unsafe impl<T: Send> Sync for Trust<T> {}

impl<T> std::fmt::Debug for Trust<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("trustee", &self.trustee_index())
            .field("prop", &self.prop())
            .finish()
    }
}

impl<T> Clone for Trust<T> {
    fn clone(&self) -> Self {
        free::clone_ref(self.head());
        Trust { packed: self.packed, _t: PhantomData }
    }
}

impl<T> Drop for Trust<T> {
    fn drop(&mut self) {
        if free::drop_ref(self.head()) {
            let (trustee, run) = (self.trustee_index(), self.run());
            free::release_last(PropPtr::of(self.prop(), trustee, run), run);
        }
    }
}

impl<T> Trust<T> {
    /// The first handle of a property of run `run` entrusted to worker `trustee`.
    fn new(p: NonNull<Prop<T>>, trustee: usize, run: u32) -> Trust<T> {
        if (p.as_ptr() as usize) >> (TRUSTEE_SHIFT + 4) != 0 {
            // Not on Linux or macOS on x86-64 or AArch64 with their default address spaces.
            panic!("skein: a property at {p:p} is above the 48-bit address space skein supports");
        }
        let tag = trustee << TRUSTEE_SHIFT | (run as usize) << RUN_SHIFT;
        // SAFETY: run ids are at least 1, so the word is not zero.
        let packed = p.map_addr(|a| unsafe { NonZero::new_unchecked(a.get() >> 4 | tag) });
        Trust { packed, _t: PhantomData }
    }

    #[inline(always)]
    fn prop(&self) -> NonNull<Prop<T>> {
        // SAFETY: the unpacked address is the non-null address `new` was given (16-aligned,
        // so the shift restores it).
        self.packed.map_addr(|a| unsafe { NonZero::new_unchecked((a.get() & ADDR_MASK) << 4) })
    }

    #[inline(always)]
    fn trustee_index(&self) -> usize {
        (self.packed.as_ptr() as usize >> TRUSTEE_SHIFT) & ((1 << (RUN_SHIFT - TRUSTEE_SHIFT)) - 1)
    }

    #[inline(always)]
    fn run(&self) -> u32 {
        (self.packed.as_ptr() as usize >> RUN_SHIFT) as u32
    }

    fn head(&self) -> &PropHead {
        // SAFETY: we hold a count, so the property is alive (property invariant 1); the header
        // is never mutated except through its atomic.
        unsafe { &self.prop().as_ref().head }
    }

    /// The worker to issue on, and the trustee's index. Run ids tell the runs of all existing
    /// handles apart ([`crate::run_ids`]), so a handle of another run is refused here,
    /// before anything is queued. The index is below the worker's `n`: the handle is of this
    /// run, and every handle of a run names one of its workers (`entrust` goes through a
    /// [`TrusteeRef`], whose index is checked against the run's worker count).
    #[inline]
    #[track_caller]
    fn worker_for(&self, what: &'static str) -> (&'static Worker, usize) {
        match context::current() {
            Some(w) if w.run_id == self.run() => (w, self.trustee_index()),
            w => wrong_context(what, w.is_some()),
        }
    }

    /// The trustee that owns the property.
    pub fn trustee(&self) -> TrusteeRef {
        TrusteeRef { trustee: self.trustee_index() }
    }
}

/// The panic of a delegation call made outside a runtime, or on a handle of another run (out
/// of line: the calls' fast path stays short).
#[cold]
#[inline(never)]
#[track_caller]
fn wrong_context(what: &str, in_runtime: bool) -> ! {
    if in_runtime {
        panic!("skein: `{what}` on a Trust created by another run of a runtime");
    }
    context::outside(what)
}

/// Moves `job` to `trustee` and suspends the calling fiber until its result is back; it runs
/// there as `job(target)` (`target`: the property's value, prefetched by the trustee).
fn call_blocking<U, J>(w: &Worker, trustee: usize, target: *mut u8, job: J) -> U
where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
{
    let fid = w.current_fiber().expect("fiber");
    let mut res: Option<std::thread::Result<U>> = None;
    let dest = SendPtr(&mut res as *mut Option<std::thread::Result<U>>);
    let deliver = move |r: std::thread::Result<U>| {
        // SAFETY: `res` lives on the suspended fiber's stack until it resumes, which happens
        // only after this runs (make_ready below), on the same worker.
        unsafe { *dest.get_mut() = Some(r) };
        context::expect("apply").make_ready(fid);
    };
    // SAFETY: `out` is this request's result space, sized for a `U`.
    let req = move |tg, out| unsafe { answer(out, catch_unwind(AssertUnwindSafe(|| job(tg)))) };
    let done = move |o: Outcome| {
        deliver(match o.panic {
            // SAFETY: the trustee wrote a U at o.resp (no panic), slot rule 3.
            None => Ok(unsafe { read_result::<U>(o.resp) }),
            Some(p) => Err(p),
        })
    };
    assert!(trustee < w.n, "skein: trustee {trustee} of {} workers", w.n);
    // SAFETY: trustee < n, checked above.
    unsafe { w.request::<ResultSpace<U>, _, _>(trustee, target, req, done) };
    crate::fiber::suspend();
    match res.take().expect("skein: fiber resumed without a result") {
        Ok(u) => u,
        Err(p) => resume_unwind(p),
    }
}

impl<T: Send + 'static> Trust<T> {
    /// Applies `f` to the property on its trustee and returns the result. Suspends only the
    /// calling fiber; when the trustee is the current worker (and no earlier local request is
    /// pending) `f` runs inline. A panic in `f` is resumed here.
    ///
    /// # Panics
    /// In delegated context (use [`Trust::apply_then`] or [`Trust::launch`]), outside a fiber,
    /// or if `f` panics.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(String::from("ab"));
    /// t.apply(|s| s.push('c'));
    /// assert_eq!(t.apply(|s| s.clone()), "abc");
    /// # }).unwrap();
    /// ```
    pub fn apply<U, F>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
    {
        let (w, trustee) = self.worker_for("apply");
        w.check_may_block("apply");
        let target = self.prop().as_ptr() as *mut u8;
        // SAFETY: `trustee` comes from `worker_for`; `target` is the property of this live handle.
        unsafe { call_at(w, trustee, target, move |tg| on_trustee(SendPtr(tg as *mut Prop<T>), f)) }
    }

    /// Queues `f` for the trustee and returns at once; `then(result)` runs later on the
    /// calling worker. Requests from one fiber to one trustee are applied in order. Allowed in
    /// delegated context. A panic in `f` or `then` makes [`crate::Runtime::run`] fail.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    /// use std::sync::Arc;
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(0u32);
    /// let seen = Arc::new(AtomicU32::new(0));
    /// let s = seen.clone();
    /// t.apply_then(|c| { *c += 5; *c }, move |v| s.store(v, Relaxed));
    /// skein::wait_quiescent();
    /// assert_eq!(seen.load(Relaxed), 5);
    /// # }).unwrap();
    /// ```
    pub fn apply_then<U, F, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
        G: FnOnce(U) + 'static,
    {
        let (w, trustee) = self.worker_for("apply_then");
        let target = self.prop().as_ptr() as *mut u8;
        let job = move |tg: *mut u8| on_trustee(SendPtr(tg as *mut Prop<T>), f);
        // SAFETY: `trustee` comes from `worker_for`; `target` is the property of this live handle.
        unsafe { issue_then(w, trustee, target, job, then) }
    }

    /// Like [`Trust::apply`], with an argument that travels serialized through
    /// [`crate::wire::codec`] (bincode): for heap data such as strings and vectors.
    ///
    /// # Panics
    /// As [`Trust::apply`]; also if `v` cannot be encoded or decoded.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(0usize);
    /// let n = t.apply_with(|c, (k, s): (usize, String)| { *c += k + s.len(); *c }, (1, "xy".into()));
    /// assert_eq!(n, 3);
    /// # }).unwrap();
    /// ```
    pub fn apply_with<V, U, F>(&self, f: F, v: V) -> U
    where
        V: Serialize + DeserializeOwned,
        F: FnOnce(&mut T, V) -> U + Send + 'static,
        U: Send + 'static,
    {
        let bytes = crate::wire::codec::encode(&v)
            .unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"));
        self.apply(move |t| {
            let v: V = crate::wire::codec::decode(&bytes)
                .unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"));
            f(t, v)
        })
    }
}

/// Runs `job(target)` on `trustee` and returns its result: inline when `trustee` is this worker
/// and no earlier local request is queued, else as a request that suspends the calling fiber.
/// The caller has checked that it may block.
///
/// # Safety
/// `trustee < w.n`, and `target` is the address `job` works on, kept alive by the caller's handle
/// (the reference-counting argument of [`crate::runtime::free`] covers the request).
#[inline]
unsafe fn call_at<U, J>(w: &Worker, trustee: usize, target: *mut u8, job: J) -> U
where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
{
    if trustee == w.index && w.local_queue_empty() {
        // We are the trustee, outside delegated code, and `job` (delegated, cannot block)
        // runs to completion before anything else here.
        return w.delegated(|| job(target));
    }
    call_blocking(w, trustee, target, job)
}

/// Queues `job(target)` for `trustee`; `then(result)` runs on this worker afterwards (a panic
/// of either is recorded and makes the run fail). Suspends the calling fiber, outside
/// delegated code, when the staging limit towards `trustee` is reached.
///
/// # Safety
/// `trustee < w.n`, and `target` is the address `job` works on, kept alive by the caller's handle
/// (the reference-counting argument of [`crate::runtime::free`] covers the request).
#[inline(always)]
unsafe fn issue_then<U, J, G>(w: &Worker, trustee: usize, target: *mut u8, job: J, then: G)
where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
    G: FnOnce(U) + 'static,
{
    // SAFETY: `out` is this request's result space, sized for a `U`.
    let req =
        move |tg: *mut u8, out| unsafe { answer(out, catch_unwind(AssertUnwindSafe(|| job(tg)))) };
    let done = move |o: Outcome| match o.panic {
        // SAFETY: the trustee wrote a U at o.resp (no panic), slot rule 3.
        None => run_then(then, unsafe { read_result::<U>(o.resp) }),
        Some(e) => context::expect("apply_then").record_panic(e, "apply_then closure"),
    };
    // SAFETY: trustee < w.n (caller promise).
    let over = unsafe { w.request::<ResultSpace<U>, _, _>(trustee, target, req, done) };
    if over && !w.in_delegated() && w.current_fiber().is_some() {
        w.throttle(trustee);
    }
}

/// Applies `f` to the value of the property `p`. Only ever called as delegated code on the
/// property's trustee (a served request, a local-queue record, or `apply`'s inline call).
#[inline(always)]
fn on_trustee<T, U>(p: SendPtr<Prop<T>>, f: impl FnOnce(&mut T) -> U) -> U {
    // SAFETY: the property is alive: its handle held a count when the request was issued, and
    // a property is freed only after every request issued before its last handle went away
    // has been served ([`crate::runtime::free`]). Property invariant 2: this runs on the trustee as delegated
    // code that cannot switch fibers, so no other reference to the value exists meanwhile.
    f(unsafe { &mut *(*p.0).value.get() })
}

/// A delegated closure's outcome as a request answers it: the result written into the
/// request's result space, or the panic handed back.
///
/// # Safety
/// `out` is the request's result space (in the response slot, slot rule 2, or on the local
/// trustee's stack), sized by `result_bytes::<U>()`.
#[inline(always)]
unsafe fn answer<U>(out: *mut u8, r: std::thread::Result<U>) -> Option<PanicPayload> {
    match r {
        Ok(u) => {
            // SAFETY: caller promise.
            unsafe { write_result(out, u) };
            None
        }
        Err(p) => Some(p),
    }
}

fn run_then<U, G: FnOnce(U)>(then: G, u: U) {
    if let Err(e) = catch_unwind(AssertUnwindSafe(move || then(u))) {
        context::expect("apply_then").record_panic(e, "apply_then continuation");
    }
}

impl<T: Send + 'static> Trust<Latch<T>> {
    /// Runs `f` in a new fiber on the trustee's worker, holding the latch, and returns its
    /// result. Unlike delegated closures, `f` may block (nested `apply`, `join`, ...); other
    /// `launch`es on the same property wait for the latch.
    ///
    /// # Panics
    /// In delegated context or outside a fiber; resumes a panic of `f`.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let other = skein::trustee(0).entrust(10u32);
    /// let l = skein::trustee(1).entrust(skein::Latch::new(1u32));
    /// let v = l.launch(move |x| { *x += other.apply(|o| *o); *x });
    /// assert_eq!(v, 11);
    /// # }).unwrap();
    /// ```
    pub fn launch<U, F>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
    {
        let (w, trustee) = self.worker_for("launch");
        w.check_may_block("launch");
        let me = self.clone();
        crate::runtime::spawn_on(trustee, move || {
            // SAFETY: only computes the address of the value inside the live property.
            let latch: *const Latch<T> = unsafe { me.prop().as_ref() }.value.get();
            // SAFETY: this fiber runs on the trustee; `me` keeps the property (and so the latch)
            // alive until after the unlock; latch invariant 1 keeps the value apart from any
            // `&mut Latch` that delegated closures may create meanwhile.
            unsafe { Latch::lock_raw(latch) };
            struct Unlock<T>(*const Latch<T>);
            impl<T> Drop for Unlock<T> {
                fn drop(&mut self) {
                    // SAFETY: we locked it above and the property is still alive (`me`).
                    unsafe { Latch::unlock_raw(self.0) };
                }
            }
            let _u = Unlock(latch);
            // SAFETY: we hold the latch (latch invariants 1, 3): the only reference to the value.
            let value = unsafe { &mut *(*latch).value_ptr() };
            let r = f(value);
            drop(_u);
            drop(me);
            r
        })
        .join()
    }
}
