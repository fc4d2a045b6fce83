//! [`TrusteeRef`]: a trustee named by its worker, and what is made there (`entrust`,
//! `entrust_new`, `entrust_new_then`, the parts of a `TrustArray`).

use super::*;

/// A worker in its trustee role; properties are entrusted to it.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let t = skein::trustee(1);
/// assert_eq!(t.worker(), 1);
/// let v = t.entrust(vec![1, 2, 3]);
/// assert_eq!(v.apply((), |v, ()| v.len()), 3);
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrusteeRef {
    pub(super) trustee: usize,
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

    /// Makes `value` a property of this trustee and returns the first handle to it. The value
    /// is built here, so the trustee must be on this rank (always so with one rank); for a
    /// trustee that may be on another rank use [`TrusteeRef::entrust_new`].
    ///
    /// # Panics
    /// Outside a runtime, or if the trustee is on another rank.
    #[track_caller]
    pub fn entrust<T: Send + 'static>(&self, value: T) -> Trust<T> {
        let w = context::expect("entrust");
        assert!(self.trustee < w.n, "skein: TrusteeRef from another runtime");
        if !is_local_in(w, self.trustee) {
            not_local(self.trustee, "entrust", "entrust_new");
        }
        Trust::new(property::alloc(value, w.run_id, self.trustee), self.trustee, w.run_id)
    }

    /// Makes `f(arg)` a property of this trustee and returns the first handle to it: the
    /// remote-capable [`TrusteeRef::entrust`]. `f` and `arg` travel as for [`Trust::apply`].
    /// On this rank `f` runs here, on the calling worker, and the value is allocated for the
    /// trustee as with `entrust`. For a trustee of another rank (an MPI rank, or a fake rank
    /// of a loopback run, `Builder::loopback_ranks`) `f` runs on the trustee (a remote spawn;
    /// the calling fiber waits), which exports the property and answers the export: the
    /// handle is a proxy of this rank (`docs/rack-mode.md` §5), whose last drop here returns
    /// its weight, and whose property is dropped on its trustee after the last handle on every
    /// rank is gone, or at the end of the run.
    ///
    /// Delegated context cannot wait for another rank's answer: there, use
    /// [`TrusteeRef::entrust_new_then`]. Under MPI this call panics in delegated context
    /// towards another rank, naming it; in a loopback run `f` then runs here instead (the fake
    /// ranks share the process's memory; loopback only).
    ///
    /// # Panics
    /// Outside a runtime, if `f` panics, or in delegated context towards a trustee of another
    /// MPI rank.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let v = skein::trustee(1).entrust_new(3usize, |n| vec![7u8; n]);
    /// assert_eq!(v.apply((), |v, ()| v.len()), 3);
    /// # }).unwrap();
    /// ```
    ///
    /// A capture, and a non-`Plain` argument, do not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = skein::trustee(1);
    /// let n = 3usize;
    /// t.entrust_new((), move |()| vec![7u8; n]);
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = skein::trustee(1);
    /// t.entrust_new(String::from("abc"), |s| s.len());
    /// # }).unwrap();
    /// ```
    /// Their twin:
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let t = skein::trustee(1);
    /// let n = 3usize;
    /// t.entrust_new(n, |n| vec![7u8; n]);
    /// t.entrust_new(String::from("abc").len(), |n| n);
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn entrust_new<A, T, F>(&self, arg: A, f: F) -> Trust<T>
    where
        A: Plain,
        T: Send + 'static,
        F: FnOnce(A) -> T + Copy + Send + 'static,
    {
        travel_check!(F = F, A = A, U = ());
        let w = context::expect("entrust_new");
        assert!(self.trustee < w.n, "skein: TrusteeRef from another runtime");
        if !is_local_in(w, self.trustee) {
            // A trustee of another rank (or fake rank, `Builder::loopback_ranks`): from a
            // fiber, the value is built there, by a remote spawn (`Spawn`/`Joined` control
            // records), which answers its export.
            if w.may_block() {
                let ex = crate::runtime::spawn::entrust_remote(w, self.trustee, arg, f);
                return Trust::received(w, self.trustee, ex);
            }
            // Delegated context cannot wait for the answer. The fake ranks of a loopback
            // split share this process's memory, so the value is built here, for the trustee;
            // under MPI the non-blocking form answers through a continuation.
            if !w.run_state.is_loopback() {
                blocking_across_ranks(self.trustee, "entrust_new", "entrust_new_then");
            }
        }
        let value = f(arg);
        Trust::new(property::alloc(value, w.run_id, self.trustee), self.trustee, w.run_id)
    }

    /// The non-blocking [`TrusteeRef::entrust_new`]: makes `f(arg)` a property of this trustee
    /// and runs `then(handle)` on the calling worker afterwards, as an `apply_then`
    /// continuation. It may be called from delegated context (a closure on a trustee, a
    /// continuation) as well as from a fiber, towards a trustee of any rank.
    ///
    /// `f(arg)` runs on the trustee: on this rank as a request to it (the value is built there
    /// and the handle comes back), on another rank (a loopback fake rank, or another MPI rank)
    /// as a remote spawn that exports the property and answers the export, from which `then`
    /// gets a proxy handle (`docs/rack-mode.md` §5), as from `entrust_new` in a fiber. `f` and
    /// `arg` travel as for [`Trust::apply`]; `then` never travels and may capture anything.
    /// The property is dropped on its trustee once the last handle on every rank is gone (or
    /// at the end of the run); if `then` drops its handle, at once.
    ///
    /// A panic of `f` (on whatever rank) or of `then` is recorded and makes the run fail, as
    /// for [`Trust::apply_then`]; `then` then does not run.
    ///
    /// # Panics
    /// Outside a runtime.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let t = skein::trustee(0).entrust(0usize);
    /// // From delegated context: the trustee of `t` makes a vector on worker 1.
    /// t.apply_then((), |_, ()| (), |()| {
    ///     skein::trustee(1).entrust_new_then(3usize, |n| vec![7u8; n], |v| {
    ///         v.apply_then((), |v, ()| v.len(), |n| assert_eq!(n, 3));
    ///     });
    /// });
    /// skein::wait_quiescent();
    /// # }).unwrap();
    /// ```
    ///
    /// A capture, and a non-`Plain` argument, do not compile:
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = skein::trustee(1);
    /// let n = 3usize;
    /// t.entrust_new_then((), move |()| vec![7u8; n], |_v| ());
    /// # }).unwrap();
    /// ```
    /// ```compile_fail
    /// # skein::Runtime::builder().workers(2).build().unwrap().run(|| { let t = skein::trustee(1);
    /// t.entrust_new_then(String::from("abc"), |s| s.len(), |_v| ());
    /// # }).unwrap();
    /// ```
    /// Their twin (the continuation captures freely):
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| { let t = skein::trustee(1);
    /// let n = 3usize;
    /// let label = String::from("v");
    /// t.entrust_new_then(n, |n| vec![7u8; n], move |v| drop((v, label)));
    /// t.entrust_new_then(String::from("abc").len(), |n| n, |_v| ());
    /// # }).unwrap();
    /// ```
    #[track_caller]
    pub fn entrust_new_then<A, T, F, G>(&self, arg: A, f: F, then: G)
    where
        A: Plain,
        T: Send + 'static,
        F: FnOnce(A) -> T + Copy + Send + 'static,
        G: FnOnce(Trust<T>) + 'static,
    {
        travel_check!(F = F, A = A, U = ());
        let w = context::expect("entrust_new_then");
        let trustee = self.trustee;
        assert!(trustee < w.n, "skein: TrusteeRef from another runtime");
        if !is_local_in(w, trustee) {
            let done = move |r: Result<[u64; 3], &str>| -> Result<(), String> {
                let w = context::expect("entrust_new_then");
                match r {
                    Ok(ex) => {
                        let t = Trust::<T>::try_received(w, trustee, ex)?;
                        run_continuation(then, t, "entrust_new_then continuation");
                    }
                    Err(msg) => w
                        .run_state
                        .record_error(format!("entrust_new_then closure panicked: {msg}")),
                }
                Ok(())
            };
            return crate::runtime::spawn::entrust_remote_then(w, trustee, arg, f, done);
        }
        // On this rank: a request to the trustee, which builds the value there and answers the
        // first handle (`Trust<T>` is `Send`: `T: Send`).
        let job = move |_target: *mut u8| {
            let w = context::expect("entrust_new_then");
            Trust::new(property::alloc(f(arg), w.run_id, w.index), w.index, w.run_id)
        };
        let done = move |o: Outcome| match o.panic {
            // SAFETY: the trustee wrote the handle at o.resp as a `ResultSpace<Trust<T>>` (no
            // panic), slot rule 3; read once, here.
            None => run_continuation(
                then,
                unsafe { <ResultSpace<Trust<T>> as ReadBack>::read(o.resp) },
                "entrust_new_then continuation",
            ),
            Some(e) => {
                context::expect("entrust_new_then").record_panic(e, "entrust_new_then closure")
            }
        };
        // SAFETY: trustee < n (checked above); the request works on no target (null).
        unsafe {
            w.request::<ResultSpace<Trust<T>>, _, _>(
                trustee,
                std::ptr::null_mut(),
                closure_request(job),
                done,
            )
        };
    }
}

/// `TrustArray::new`'s part for `trustee`, built here: entrusted as with
/// [`TrusteeRef::entrust`] on this rank, and in a loopback run, from delegated context, also
/// on another fake rank (the process's memory is shared; from a fiber such a part is built on
/// its trustee, `runtime::spawn::build_part_remote`).
#[track_caller]
pub(super) fn entrust_part<T: Send + 'static>(w: &Worker, trustee: usize, value: T) -> Trust<T> {
    if !is_local_in(w, trustee) && !w.run_state.is_loopback() {
        blocking_across_ranks(trustee, "TrustArray::new", "TrustArray::new_then");
    }
    Trust::new(property::alloc(value, w.run_id, trustee), trustee, w.run_id)
}
