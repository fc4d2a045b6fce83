//! The delegation calls on a [`Trust<T>`] (`apply`, `apply_then`, `apply_with`, the `*_local`
//! forms, `launch` on a `Latch`), the handle's `Serialize`/`Deserialize`, and their helpers.

use super::*;

impl<T: Send + 'static> Trust<T> {
    /// True when the property's trustee is on this rank (always, with one rank). Only the
    /// `*_local` calls and [`TrusteeRef::entrust`] need it to be.
    ///
    /// # Panics
    /// Outside a runtime.
    pub fn is_local(&self) -> bool {
        crate::runtime::rank_of(self.trustee_index()) == crate::runtime::rank()
    }

    /// Applies `f` to the property on its trustee with the argument `arg` and returns the
    /// result. Suspends only the calling fiber; when the trustee is the current worker (and no
    /// earlier local request is pending) `f` runs inline. A panic in `f` is resumed here.
    ///
    /// `f` may be sent to another rank, so it captures nothing: its data is `arg`, a
    /// [`Plain`] value (`()` for none), and its result is `Plain` too; for heap data use
    /// [`Trust::apply_with`], and for a capturing closure on a local property
    /// [`Trust::apply_local`]. Both sizes are at most 256 bytes.
    ///
    /// # Panics
    /// In delegated context (use [`Trust::apply_then`] or [`Trust::launch`]), outside a fiber,
    /// or if `f` panics.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(40u64);
    /// t.apply(2u64, |c, k| *c += k);
    /// assert_eq!(t.apply((), |c, ()| *c), 42);
    /// # }).unwrap();
    /// ```
    ///
    /// The closure captures nothing. Each of the following fails to compile, and its twin,
    /// which passes the same data as the argument, compiles and runs:
    ///
    /// A captured reference:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let k = 1u64;
    /// let r = &k;
    /// t.apply((), move |c, ()| *c += *r); // a reference: pass the value as the argument
    /// # }).unwrap();
    /// ```
    /// A pointer laundered through `usize`:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// static K: u64 = 1;
    /// let p = &K as *const u64 as usize;
    /// t.apply((), move |c, ()| *c += unsafe { *(p as *const u64) }); // an address
    /// # }).unwrap();
    /// ```
    /// A `Box`:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let b = Box::new(1u64);
    /// t.apply((), move |c, ()| *c += *b); // Box: pass the value as the argument
    /// # }).unwrap();
    /// ```
    /// A `Vec`:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let v = vec![1u64];
    /// t.apply((), move |c, ()| *c += v[0]); // Vec: use apply_with
    /// # }).unwrap();
    /// ```
    /// A `String`:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let s = String::from("x");
    /// t.apply((), move |c, ()| *c += s.len() as u64); // String: use apply_with
    /// # }).unwrap();
    /// ```
    /// A captured `u64` (on another rank it would be lost):
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let k = 1u64;
    /// t.apply((), move |c, ()| *c += k); // pass k as the argument
    /// # }).unwrap();
    /// ```
    /// A `Vec` argument (not `Plain`):
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// t.apply(vec![1u64], |c, v| *c += v[0]); // use apply_with
    /// # }).unwrap();
    /// ```
    /// The twins, with the data as the argument:
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let t = &skein::trustee(1).entrust(0u64);
    /// let k = 1u64;
    /// let r = &k;
    /// t.apply(*r, |c, r| *c += r); // the reference's value
    /// static K: u64 = 1;
    /// t.apply((), |c, ()| *c += K); // a static names the serving rank's copy
    /// let b = Box::new(1u64);
    /// t.apply(*b, |c, b| *c += b); // the box's value
    /// let v = vec![1u64];
    /// t.apply(v[0], |c, v0| *c += v0); // the element
    /// t.apply_with(v.clone(), |c, v: Vec<u64>| *c += v[0]); // or the vector, serialized
    /// let s = String::from("x");
    /// t.apply(s.len() as u64, |c, n| *c += n); // the length
    /// t.apply_with(s, |c, s: String| *c += s.len() as u64); // or the string, serialized
    /// t.apply(k, |c, k| *c += k); // the u64 as the argument
    /// assert_eq!(t.apply((), |c, ()| *c), 8);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn apply<A, U, F>(&self, arg: A, f: F) -> U
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        travel_check!(F = F, A = A, U = U);
        let (w, trustee, target) = self.issue_for("apply");
        w.check_may_block("apply");
        if trustee == w.index && w.local_queue_empty() {
            // We are the trustee, outside delegated code, and `f` (delegated, cannot block)
            // runs to completion before anything else here.
            // SAFETY: this is delegated code on the property's trustee.
            return w.delegated(|| f(unsafe { OnProp::<T>::value(target) }, arg));
        }
        let req = arg_request::<OnProp<T>, A, U, F>(arg, f);
        call_blocking::<PlainSpace<U>, _>(w, trustee, target, req)
    }

    /// Queues `f` with the argument `arg` for the trustee and returns at once; `then(result)`
    /// runs later on the calling worker. Requests from one fiber to one trustee are applied in
    /// order. Allowed in delegated context. A panic in `f` or `then` makes
    /// [`crate::Runtime::run`] fail. `f`, `arg` and the result travel as for [`Trust::apply`];
    /// `then` stays here and may capture anything.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    /// use std::sync::Arc;
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(0u32);
    /// let seen = Arc::new(AtomicU32::new(0));
    /// let s = seen.clone();
    /// t.apply_then(5u32, |c, k| { *c += k; *c }, move |v| s.store(v, Relaxed));
    /// skein::wait_quiescent();
    /// assert_eq!(seen.load(Relaxed), 5);
    /// # }).unwrap();
    /// ```
    ///
    /// A capture, and a non-`Plain` argument, do not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u32);
    /// let k = 5u32;
    /// t.apply_then((), move |c, ()| *c += k, |()| {}); // pass k as the argument
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = &skein::trustee(1).entrust(0u32);
    /// t.apply_then(String::from("x"), |c, s| *c += s.len() as u32, |()| {}); // not Plain
    /// # }).unwrap();
    /// ```
    /// Their twin:
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let t = skein::trustee(1).entrust(0u32);
    /// let k = 5u32;
    /// t.apply_then(k, |c, k| *c += k, |()| {});
    /// t.apply_then(String::from("x").len() as u32, |c, n| *c += n, |()| {});
    /// assert_eq!(t.apply((), |c, ()| *c), 6);
    /// # }).unwrap();
    /// ```
    #[inline]
    #[track_caller]
    pub fn apply_then<A, U, F, G>(&self, arg: A, f: F, then: G)
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
        G: FnOnce(U) + 'static,
    {
        travel_check!(F = F, A = A, U = U);
        let (w, trustee, target) = self.issue_for("apply_then");
        let req = arg_request::<OnProp<T>, A, U, F>(arg, f);
        // SAFETY: `trustee` comes from `issue_for`; `target` is this live handle's (`issue_for`).
        unsafe { issue::<PlainSpace<U>, _, _>(w, trustee, target, req, then) }
    }

    /// Like [`Trust::apply`], with an argument and a result that travel serialized through
    /// [`crate::codec`] (bincode): for heap data such as strings and vectors. Both are
    /// encoded and decoded even when the trustee is in this process, so a value that does not
    /// survive the trip fails here as it would across ranks.
    ///
    /// # Panics
    /// As [`Trust::apply`]; also if `v` or the result cannot be encoded or decoded.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(0usize);
    /// let n = t.apply_with((1, "xy".to_string()), |c, (k, s): (usize, String)| {
    ///     *c += k + s.len();
    ///     vec![*c; 2]
    /// });
    /// assert_eq!(n, [3, 3]);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn apply_with<V, U, F>(&self, v: V, f: F) -> U
    where
        V: Serialize + DeserializeOwned,
        U: Serialize + DeserializeOwned,
        F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
    {
        travel_check!(F = F);
        let bytes = encode_arg(&v);
        let (w, trustee, target) = self.issue_for("apply_with");
        check_arg_fits(w, trustee, &bytes, "apply_with");
        w.check_may_block("apply_with");
        if trustee == w.index && w.local_queue_empty() {
            // We are the trustee, outside delegated code, and `f` (delegated, cannot block)
            // runs to completion before anything else here.
            let r = w.delegated(|| serialized_call(target as *mut Prop<T>, &bytes, f));
            return decode_result(&r);
        }
        let req = WithRequest::<T, V, U, F>::new(bytes, f);
        decode_result(&call_blocking::<ResultSpace<Vec<u8>>, _>(w, trustee, target, req))
    }

    /// [`Trust::apply_with`] without waiting, as [`Trust::apply_then`] is to
    /// [`Trust::apply`]: `then(result)` runs later on the calling worker. Allowed in delegated
    /// context.
    ///
    /// # Panics
    /// If `v` cannot be encoded. A result that cannot be decoded, like a panic in `f` or
    /// `then`, makes [`crate::Runtime::run`] fail.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(Vec::<String>::new());
    /// t.apply_with_then("a".to_string(), |v, s: String| { v.push(s); v.len() }, |n| assert_eq!(n, 1));
    /// skein::wait_quiescent();
    /// assert_eq!(t.apply_local(|v| v.clone()), ["a"]);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn apply_with_then<V, U, F, G>(&self, v: V, f: F, then: G)
    where
        V: Serialize + DeserializeOwned,
        U: Serialize + DeserializeOwned,
        F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
        G: FnOnce(U) + 'static,
    {
        travel_check!(F = F);
        let bytes = encode_arg(&v);
        let (w, trustee, target) = self.issue_for("apply_with_then");
        check_arg_fits(w, trustee, &bytes, "apply_with_then");
        let req = WithRequest::<T, V, U, F>::new(bytes, f);
        let then = move |r: Vec<u8>| then(decode_result(&r));
        // SAFETY: `trustee` comes from `issue_for`; `target` is this live handle's (`issue_for`).
        unsafe { issue::<ResultSpace<Vec<u8>>, _, _>(w, trustee, target, req, then) }
    }

    /// Applies `f` to the property on its trustee and returns the result, like
    /// [`Trust::apply`], with a closure that may capture anything `Send + 'static` (and any
    /// `Send` result). Its closure cannot leave this process, so the property must be on this
    /// rank ([`Trust::is_local`]; always so with one rank).
    ///
    /// # Panics
    /// As [`Trust::apply`]; also if the trustee is on another rank.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(String::from("ab"));
    /// let tail = String::from("c");
    /// t.apply_local(move |s| s.push_str(&tail));
    /// assert_eq!(t.apply_local(|s| s.clone()), "abc");
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn apply_local<U, F>(&self, f: F) -> U
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
    {
        let (w, trustee, target) = self.issue_for("apply_local");
        if !is_local_in(w, trustee) {
            not_local(trustee, "apply_local", "apply");
        }
        w.check_may_block("apply_local");
        // SAFETY: `trustee` comes from `issue_for`; `target` is this live handle's (`issue_for`).
        unsafe { call_at(w, trustee, target, move |tg| on_trustee(SendPtr(tg as *mut Prop<T>), f)) }
    }

    /// Queues a capturing `f` for the local trustee, like [`Trust::apply_then`] with the
    /// closure of [`Trust::apply_local`].
    ///
    /// # Panics
    /// If the trustee is on another rank.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(1).entrust(Vec::new());
    /// let name = String::from("x");
    /// t.apply_then_local(move |v| { v.push(name); v.len() }, |n| assert_eq!(n, 1));
    /// # }).unwrap();
    /// ```
    #[inline]
    #[track_caller]
    pub fn apply_then_local<U, F, G>(&self, f: F, then: G)
    where
        F: FnOnce(&mut T) -> U + Send + 'static,
        U: Send + 'static,
        G: FnOnce(U) + 'static,
    {
        let (w, trustee, target) = self.issue_for("apply_then_local");
        if !is_local_in(w, trustee) {
            not_local(trustee, "apply_then_local", "apply_then");
        }
        let job = move |tg: *mut u8| on_trustee(SendPtr(tg as *mut Prop<T>), f);
        // SAFETY: `trustee` comes from `issue_for`; `target` is this live handle's (`issue_for`).
        unsafe { issue_then(w, trustee, target, job, then) }
    }
}

/// A handle travels inside an `apply_with` argument or result (`docs/rack-mode.md` §5.2 item
/// 6), encoded by [`crate::codec`] only, on a worker of its run: the weight or count it
/// needs moves with the message (`trust/travel.rs`). Any other serializer, and a handle outside its
/// run, get an error: "a Trust cannot leave its run".
impl<T: Send + 'static> Serialize for Trust<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = travel::list(self).map_err(serde::ser::Error::custom)?;
        s.serialize_u32(i)
    }
}

/// The receiving side of [`Trust`]'s `Serialize` (through [`crate::codec`] only).
impl<'de, T: Send + 'static> serde::Deserialize<'de> for Trust<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let i = <u32 as serde::Deserialize>::deserialize(d)?;
        travel::take(i).map_err(serde::de::Error::custom)
    }
}

/// `apply_with`'s argument as bytes.
#[track_caller]
pub(super) fn encode_arg<V: Serialize>(v: &V) -> Vec<u8> {
    travel::encode(v).unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"))
}

/// Refuses, at the call site, a serialized argument that cannot travel to `trustee`: one
/// message to another rank (or fake rank) carries at most `MAX_SERIALIZED_BYTES` of it.
/// Refused later, the record would fail the whole job from inside the worker loop.
#[track_caller]
pub(super) fn check_arg_fits(w: &Worker, trustee: usize, bytes: &[u8], what: &str) {
    let max = crate::wire::remote::MAX_SERIALIZED_BYTES;
    if bytes.len() > max && !is_local_in(w, trustee) {
        panic!(
            "skein: `{what}` argument of {} bytes to worker {trustee} (rank {}): one message \
             to another rank carries at most {max} bytes; split the data over several calls",
            bytes.len(),
            crate::runtime::rank_of(trustee)
        );
    }
}

/// `apply_with`'s result from bytes.
#[track_caller]
pub(super) fn decode_result<U: DeserializeOwned>(bytes: &[u8]) -> U {
    travel::decode(bytes).unwrap_or_else(|e| panic!("skein: apply_with result: {e}"))
}

/// `apply_with`'s request on the trustee: decodes the argument, runs `f` on the value of the
/// property `p`, encodes the result.
pub(super) fn serialized_call<T, V, U, F>(p: *mut Prop<T>, bytes: &[u8], f: F) -> Vec<u8>
where
    V: DeserializeOwned,
    U: Serialize,
    F: FnOnce(&mut T, V) -> U,
{
    let v: V = travel::decode(bytes).unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"));
    let u = on_trustee(SendPtr(p), |t| f(t, v));
    travel::encode(&u).unwrap_or_else(|e| panic!("skein: apply_with result: {e}"))
}

/// Runs `job(target)` on `trustee` and returns its result: inline when `trustee` is this worker
/// and no earlier local request is queued, else as a request that suspends the calling fiber.
/// The caller has checked that it may block.
///
/// # Safety
/// `trustee < w.n`, and `target` is the address `job` works on, kept alive by the caller's handle
/// (the reference-counting argument of [`crate::runtime::free`] covers the request).
#[inline]
pub(super) unsafe fn call_at<U, J>(w: &Worker, trustee: usize, target: *mut u8, job: J) -> U
where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
{
    if trustee == w.index && w.local_queue_empty() {
        // We are the trustee, outside delegated code, and `job` (delegated, cannot block)
        // runs to completion before anything else here.
        return w.delegated(|| job(target));
    }
    call_blocking::<ResultSpace<U>, _>(w, trustee, target, closure_request(job))
}

/// Queues `job(target)` for `trustee`; `then(result)` runs on this worker afterwards, as
/// [`issue`] with a capturing request closure.
///
/// # Safety
/// As [`issue`].
#[inline(always)]
pub(super) unsafe fn issue_then<U, J, G>(
    w: &Worker,
    trustee: usize,
    target: *mut u8,
    job: J,
    then: G,
) where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
    G: FnOnce(U) + 'static,
{
    // SAFETY: caller promise.
    unsafe { issue::<ResultSpace<U>, _, _>(w, trustee, target, closure_request(job), then) }
}

/// Applies `f` to the value of the property `p`. Only ever called as delegated code on the
/// property's trustee (a served request, a local-queue record, or `apply`'s inline call).
#[inline(always)]
pub(super) fn on_trustee<T, U>(p: SendPtr<Prop<T>>, f: impl FnOnce(&mut T) -> U) -> U {
    // SAFETY: only called as delegated code on the property's trustee (property invariant 2:
    // no other reference to the value meanwhile); the property is alive (`OnProp::value`).
    f(unsafe { OnProp::<T>::value(p.0 as *mut u8) })
}

/// A delegated closure's outcome as a request answers it: the result written into the
/// request's result space, or the panic handed back.
///
/// # Safety
/// `out` is the request's result space (in the response slot, slot rule 2, or on the local
/// trustee's stack), sized by `result_bytes::<U>()`.
#[inline(always)]
pub(super) unsafe fn answer<U>(out: *mut u8, r: std::thread::Result<U>) -> Option<PanicPayload> {
    match r {
        Ok(u) => {
            // SAFETY: caller promise.
            unsafe { write_result(out, u) };
            None
        }
        Err(p) => Some(p),
    }
}

pub(super) fn run_then<U, G: FnOnce(U)>(then: G, u: U) {
    run_continuation(then, u, "apply_then continuation")
}

/// Runs the continuation `then(u)`; a panic is recorded as the run's error, as `what`.
pub(super) fn run_continuation<U, G: FnOnce(U)>(then: G, u: U, what: &str) {
    if let Err(e) = catch_unwind(AssertUnwindSafe(move || then(u))) {
        context::expect("apply_then").record_panic(e, what);
    }
}

impl<T: Send + 'static> Trust<Latch<T>> {
    /// Runs `f(value, arg)` in a new fiber on the trustee's worker, holding the latch, and
    /// returns its result. Unlike delegated closures, `f` may block (nested `apply`, `join`,
    /// ...); other `launch`es on the same property wait for the latch. `f`, `arg` and the
    /// result travel as for [`Trust::apply`]: handles `f` needs live in the latched value or
    /// in statics.
    ///
    /// On a trustee of another rank (an MPI rank, or a fake rank of a loopback run,
    /// `crate::Builder::loopback_ranks`) the call is a `Launch` control record, and a panic
    /// of `f` is resumed as a `String` naming that rank and worker.
    ///
    /// # Panics
    /// In delegated context or outside a fiber; resumes a panic of `f`.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let other = skein::trustee(0).entrust(10u32);
    /// let l = skein::trustee(1).entrust(skein::Latch::new((1u32, other)));
    /// let v = l.launch(5u32, |(x, other), k| { *x += other.apply((), |o, ()| *o) + k; *x });
    /// assert_eq!(v, 16);
    /// # }).unwrap();
    /// ```
    ///
    /// A capture, and a non-`Plain` argument, do not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let l = &skein::trustee(1).entrust(skein::Latch::new(0u32));
    /// let k = 5u32;
    /// l.launch((), move |x, ()| *x += k);
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let l = &skein::trustee(1).entrust(skein::Latch::new(0u32));
    /// l.launch(vec![5u32], |x, v| *x += v[0]);
    /// # }).unwrap();
    /// ```
    /// Their twin:
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let l = skein::trustee(1).entrust(skein::Latch::new(0u32));
    /// let k = 5u32;
    /// l.launch(k, |x, k| *x += k);
    /// l.launch(vec![5u32][0], |x, v0| *x += v0);
    /// assert_eq!(l.launch((), |x, ()| *x), 10);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn launch<A, U, F>(&self, arg: A, f: F) -> U
    where
        A: Plain,
        U: Plain,
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        travel_check!(F = F, A = A, U = U);
        let (w, trustee, target) = self.issue_for("launch");
        w.check_may_block("launch");
        if !is_local_in(w, trustee) {
            let word = if target as usize as u64 & RECORD_EXPORT != 0 {
                target as usize as u64 & !RECORD_EXPORT
            } else {
                // SAFETY: only computes the address of the latch inside the live property
                // (an address target is a `Prop<Latch<T>>`'s).
                let latch = unsafe { (*(target as *mut Prop<Latch<T>>)).value.get() };
                // A loopback run's handle shared through memory (`transport` module docs).
                latch as usize as u64 | export::ADDR_TARGET
            };
            // SAFETY: the wire target word of this live `Latch<T>` property of `trustee`;
            // `self` keeps the property (or its export's weight) alive until the handle is
            // joined, right here.
            let h = unsafe { crate::runtime::spawn::launch_remote(w, trustee, word, arg, f) };
            return h.join();
        }
        let me = self.clone();
        // A local trustee: `target` is the property's address (for a proxy handle used on its
        // owner's rank in a loopback run, the one its export names).
        let prop = SendPtr(target as *mut Prop<Latch<T>>);
        crate::runtime::spawn::spawn_fiber(w, trustee, move || {
            let prop = prop;
            // SAFETY: only computes the address of the value inside the live property.
            let latch: *const Latch<T> = unsafe { (*prop.0).value.get() };
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
            let r = f(value, arg);
            drop(_u);
            drop(me);
            r
        })
        .join()
    }
}
