//! `Trust<T>` and `TrusteeRef`: handles to properties, and the delegation calls that turn a
//! closure into a request.
//!
//! A [`Trust`] is one word (the property's address, its trustee's index and its run's id,
//! packed). A call finds the calling worker, checks that the handle belongs to its run, and
//! queues a request with [`Worker::request`]; its completion delivers the result (waking the
//! fiber blocked in `apply`, or running the `apply_then` continuation). [`TrustArray`] does
//! the same for values addressed by index.
//!
//! # The travel rule (`docs/rack-mode.md` §2)
//!
//! The *remote-capable* calls (`apply`, `apply_then`, `apply_with`, `apply_with_then`,
//! `launch`, `TrusteeRef::{entrust_new, entrust_new_then}`, `spawn_on`,
//! `TrustArray::{new, new_then, apply, apply_then}`)
//! take a closure that captures nothing and its data as an explicit argument: `F: Copy +
//! Send + 'static` (a captured `Box`, `Vec`, `String`, handle is an error already in `cargo
//! check`) plus `travel_check!`, an inline `const` assertion per instantiation that `F` is
//! zero-sized (a captured reference, integer or laundered pointer is an error of the build)
//! and that the [`Plain`] argument and result fit 256 bytes each. Their record's request half
//! is the argument itself ([`ArgRequest`]); its code ([`RunArg`]) reads the value from its
//! [`Place`] (a property, or an array element), recreates `F` and runs it, writing the `Plain`
//! result unaligned into a [`PlainSpace`]. `apply_with*` encode the argument and the result
//! with [`crate::wire::codec`], even in-process.
//!
//! The *local* calls (`apply_local`, `apply_then_local`, `TrusteeRef::entrust`, and
//! `spawn_local_on` and `spawn` in [`crate::runtime::spawn`]) keep capturing closures and
//! values built here, and refuse, at run time, an id of another rank (`crate::rank_of`; in a
//! loopback run, `crate::Builder::loopback_ranks`, another fake rank). Their records hold the
//! request closure.
//!
//! A remote-capable record's type names its `RemoteHook` (`VTable::remote`): the
//! `RemoteVTable` of `(T, A, U, F)` (`RemoteVTable::of`; `of_with` for `apply_with*`, whose
//! request half is a [`WithRequest`]), how its argument and target become wire bytes and how
//! its wire result becomes its result space. A request to a trustee of another rank travels
//! that way (`crate::runtime::remote`). `launch` on a trustee of another rank is a
//! `Launch` control record (`RemoteVTable::of_launch`, run in a fiber there).
//!
//! Cloning and dropping a handle only touch the property's reference count; the count, the
//! deferred free of the property and the proof that both are right live in
//! [`crate::runtime::free`]. The property's memory is [`crate::property`].
//!
//! # Handles of another rank's properties
//!
//! A handle whose property lives on another rank (made by a remote
//! [`TrusteeRef::entrust_new`] or [`TrusteeRef::entrust_new_then`], or received inside a
//! message) is a *proxy handle*: its word holds the address of a
//! [`Proxy`] of this rank and [`PROXY_BIT`] (`docs/rack-mode.md` §5.2 item 2; the proxy, and
//! what its last drop sends, are [`crate::runtime::proxy`]; the owner's side and the
//! argument are [`crate::runtime::export`]). Its clone and drop are the same count operations
//! on the proxy's header. Every call reads the target it queues with `Trust::issue_for`:
//! the property's address for a local handle (the bit sits next to the run's id, so the one
//! compare that checks the run also sends a proxy handle to a cold path), the export's wire
//! word for a proxy handle, marked [`RECORD_EXPORT`] in the queued record so
//! that the record's `RemoteHook::take_arg` writes it as is ([`wire_word`]); a local handle's
//! address becomes an address target there (loopback only, `crate::runtime::remote`). A
//! proxy's trustee is always on another rank, so its requests always leave through the
//! transport, never through a slot or the inline path.

pub(crate) mod array;
pub(crate) mod travel;

use crate::channel::record::{
    travel_check, ArgCall, ArgRequest, RemoteHook, RequestHalf, HEADER_WORDS,
};
use crate::channel::result::{
    write_plain, write_result, PlainSpace, ReadBack, ResultSpace, SendPtr,
};
use crate::channel::slot::PanicPayload;
use crate::property::{self, Prop, PropHead, PropPtr};
use crate::runtime::proxy::Proxy;
use crate::runtime::refusal::{blocking_across_ranks, not_local};
use crate::runtime::worker::{Outcome, Worker};
use crate::runtime::{context, export, free};
use crate::wire::remote::{Of, Property as RemoteProperty, Serialized as RemoteSerialized};
use crate::Plain;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;
use std::num::NonZero;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

pub use crate::runtime::latch::{Latch, LatchGuard};
pub use array::TrustArray;

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
fn entrust_part<T: Send + 'static>(w: &Worker, trustee: usize, value: T) -> Trust<T> {
    if !is_local_in(w, trustee) && !w.run_state.is_loopback() {
        blocking_across_ranks(trustee, "TrustArray::new", "TrustArray::new_then");
    }
    Trust::new(property::alloc(value, w.run_id, trustee), trustee, w.run_id)
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
/// Closures sent to a trustee capture nothing ([`Trust::apply`] shows what is refused). Even
/// the local, capturing calls need `Send + 'static` closures (no borrowed captures):
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let local = 5u64;
///     let r = &local;
///     t.apply_local(move |c| *c += *r); // borrows `local`
/// }
/// ```
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let rc = std::rc::Rc::new(1u64);
///     t.apply_local(move |c| *c += *rc); // Rc is not Send
/// }
/// ```
pub struct Trust<T> {
    /// One word, so that the handles of many properties take little cache: the property's
    /// address divided by 16 in the low [`TRUSTEE_SHIFT`] bits, then the trustee's index,
    /// then [`PROXY_BIT`], then the run's id from [`RUN_SHIFT`] up. The pointer keeps the
    /// property's provenance. A *proxy handle* (the bit set) names a
    /// [`crate::runtime::proxy::Proxy`] on this rank instead, which stands for a property of
    /// another rank (`docs/rack-mode.md` §5.2 item 2): both start with the count's header, so
    /// clone and drop are the same atomic operations on either.
    packed: NonNull<Prop<T>>,
    _t: PhantomData<T>,
}

/// Properties lie below 2^48 (user space on x86-64 and AArch64, checked when one is
/// entrusted) and are 16-aligned, so their address takes 44 bits.
const TRUSTEE_SHIFT: u32 = 44;
const ADDR_MASK: usize = (1 << TRUSTEE_SHIFT) - 1;
const TRUSTEE_BITS: u32 = 12;
/// Set in the word of a proxy handle.
const PROXY_BIT: usize = 1 << 63;
const RUN_SHIFT: u32 = TRUSTEE_SHIFT + TRUSTEE_BITS;
/// The run id's bits above [`RUN_SHIFT`] (the bit above them is [`PROXY_BIT`]).
const RUN_MASK: usize = 0x7f;
const _: () = assert!(PROXY_BIT == (RUN_MASK + 1) << RUN_SHIFT);
/// [`PROXY_BIT`] as it stands in [`Trust::tag`].
const PROXY_TAG: u32 = (PROXY_BIT >> RUN_SHIFT) as u32;
// Every worker index (the builder allows at most 4096 workers) and every run id fit.
const _: () = assert!(4096 <= 1 << TRUSTEE_BITS);
const _: () = assert!(crate::run_ids::MAX_RUN_ID as usize <= RUN_MASK);
const _: () = assert!(std::mem::align_of::<Prop<()>>() == 16);
const _: () = assert!(std::mem::align_of::<Proxy>() == 16);
const _: () = assert!(std::mem::offset_of!(Proxy, head) == 0);
const _: () = assert!(std::mem::offset_of!(Prop<u128>, head) == 0);
const _: () = assert!(usize::BITS == 64, "skein packs a handle into a 64-bit word");

/// Marks, in a queued record's target (an in-process word, never on the wire), a target that
/// is already an export's wire word (a proxy handle's `(slot, gen)`) rather than an address:
/// [`wire_word`] passes it on as is. Export words leave this bit clear
/// ([`crate::runtime::export::MAX_GEN`]).
const RECORD_EXPORT: u64 = 1 << 62;

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
            if self.is_proxy() {
                // SAFETY: a proxy handle names a proxy made by `Proxy::receive_on`, whose last
                // count `drop_ref` has just given up; nothing uses it afterwards.
                return unsafe { free::proxy_dropped(self.prop().cast()) };
            }
            let (trustee, run) = (self.trustee_index(), self.run());
            free::release_last(PropPtr::of(self.prop(), trustee, run), run);
        }
    }
}

/// Takes one more count on the property (or proxy) named by the handle word `p` and returns
/// `p` for the new handle.
///
/// # Safety
/// `p` is the word of a handle whose count the caller holds (so its target is alive).
pub(crate) unsafe fn clone_raw(p: NonNull<()>) -> NonNull<()> {
    // SAFETY: caller promise; both a property and a proxy start with their `PropHead`.
    let head = unsafe { raw_addr(p).cast::<PropHead>().as_ref() };
    free::clone_ref(head);
    p
}

/// The proxy a proxy handle's word `p` names.
///
/// # Safety
/// `p` is the word of a live proxy handle.
pub(crate) unsafe fn proxy_of_raw(p: NonNull<()>) -> NonNull<Proxy> {
    raw_addr(p).cast()
}

/// The address in the handle word `p` (with its provenance).
fn raw_addr(p: NonNull<()>) -> NonNull<u8> {
    // SAFETY: a handle's address is non-null and 16-aligned (`Trust::new`, `from_proxy`).
    p.cast::<u8>().map_addr(|a| unsafe { NonZero::new_unchecked((a.get() & ADDR_MASK) << 4) })
}

impl<T> Trust<T> {
    /// The first handle of a property of run `run` entrusted to worker `trustee`.
    pub(crate) fn new(p: NonNull<Prop<T>>, trustee: usize, run: u32) -> Trust<T> {
        if (p.as_ptr() as usize) >> (TRUSTEE_SHIFT + 4) != 0 {
            // Not on Linux or macOS on x86-64 or AArch64 with their default address spaces.
            panic!("skein: a property at {p:p} is above the 48-bit address space skein supports");
        }
        let tag = trustee << TRUSTEE_SHIFT | (run as usize) << RUN_SHIFT;
        // SAFETY: run ids are at least 1, so the word is not zero.
        let packed = p.map_addr(|a| unsafe { NonZero::new_unchecked(a.get() >> 4 | tag) });
        Trust { packed, _t: PhantomData }
    }

    /// The first handle of the proxy `p` (made by `Proxy::receive_on` with local count 1) of
    /// a property of `owner` in run `run`.
    pub(crate) fn from_proxy(p: NonNull<Proxy>, owner: usize, run: u32) -> Trust<T> {
        if (p.as_ptr() as usize) >> (TRUSTEE_SHIFT + 4) != 0 {
            panic!("skein: a proxy at {p:p} is above the 48-bit address space skein supports");
        }
        let tag = owner << TRUSTEE_SHIFT | PROXY_BIT | (run as usize) << RUN_SHIFT;
        // SAFETY: run ids are at least 1, so the word is not zero.
        let packed =
            p.cast::<Prop<T>>().map_addr(|a| unsafe { NonZero::new_unchecked(a.get() >> 4 | tag) });
        Trust { packed, _t: PhantomData }
    }

    /// The handle of another rank's property answered by `owner` to a remote `entrust_new`:
    /// export `(slot, gen)` with `weight`, received here as a new proxy of this rank.
    #[track_caller]
    fn received(w: &Worker, owner: usize, ex: [u64; 3]) -> Trust<T> {
        Self::try_received(w, owner, ex).unwrap_or_else(|e| panic!("skein: entrust_new: {e}"))
    }

    /// [`Trust::received`], or why the answer cannot be a handle.
    fn try_received(
        w: &Worker,
        owner: usize,
        [slot, gen, weight]: [u64; 3],
    ) -> Result<Self, String> {
        let (Ok(slot), Some(gen)) =
            (u32::try_from(slot), u32::try_from(gen).ok().filter(|&g| g <= export::MAX_GEN))
        else {
            return Err(format!("trustee {owner} answered a bad export ({slot}, {gen})"));
        };
        let p = Proxy::receive_on(w.rank as u32, owner, slot, gen, weight, w.run_id, w.n)
            .map_err(|e| format!("trustee {owner} answered: {e}"))?;
        Ok(Trust::from_proxy(p, owner, w.run_id))
    }

    /// The handle's word (with its provenance); its count moves with it
    /// ([`Trust::from_raw`] takes it back).
    pub(crate) fn into_raw(self) -> NonNull<()> {
        let p = self.packed.cast();
        std::mem::forget(self);
        p
    }

    /// The handle whose word [`Trust::into_raw`] gave.
    ///
    /// # Safety
    /// `p` came from `into_raw` of a `Trust<T>` (this `T`), or is such a word with a count
    /// the caller holds; the count moves into the handle.
    pub(crate) unsafe fn from_raw(p: NonNull<()>) -> Trust<T> {
        Trust { packed: p.cast(), _t: PhantomData }
    }

    /// True for a proxy handle (the property is on another rank).
    #[inline(always)]
    pub(crate) fn is_proxy(&self) -> bool {
        self.packed.as_ptr() as usize & PROXY_BIT != 0
    }

    /// The proxy of a proxy handle.
    pub(crate) fn proxy(&self) -> &Proxy {
        debug_assert!(self.is_proxy());
        // SAFETY: a proxy handle's address is its proxy's (`from_proxy`), kept alive by the
        // count this handle holds (proxy invariant 1); its fields other than the count and
        // the weight never change (proxy invariant 3).
        unsafe { self.prop().cast::<Proxy>().as_ref() }
    }

    /// A proxy handle's target: on its own rank, its export's wire word marked
    /// [`RECORD_EXPORT`] (not an address: never dereferenced, only written to the wire).
    ///
    /// On another rank (possible only through the memory that the fake ranks of a loopback
    /// run share: a handle left in a static, say) the handle is used as the loopback handles
    /// are: through the property's address, found in the owner's export table (the proxy's
    /// weight keeps the slot live). Its requests are then counted by the in-process free of
    /// `runtime::free`, whose snapshot covers every worker of a loopback run (one process),
    /// not by the proxy's `Release` (which counts the proxy's rank only). Under MPI no other
    /// rank can reach a proxy, and such a use is refused.
    #[cold]
    #[inline(never)]
    #[track_caller]
    fn proxy_target(&self, w: &Worker) -> *mut u8 {
        let p = self.proxy();
        let (slot, gen) = p.target();
        if p.home() == w.rank {
            return export_record_target(p);
        }
        let shared = w.run_state.is_loopback().then(|| w.run_state.exports.get(p.owner()));
        let Some(Some(table)) = shared else {
            panic!(
                "skein: a handle of a property of worker {} received on rank {} used on rank {}: \
                 handles travel between ranks inside messages, not through memory",
                p.owner(),
                p.home(),
                w.rank
            );
        };
        match table.held(slot, gen) {
            Ok(prop) => prop.head_ptr().as_ptr().cast(),
            Err(e) => panic!("skein: a proxy handle names no live export: {e}"),
        }
    }

    #[inline(always)]
    /// The property this handle names, as the runtime's type-erased pointer (the export
    /// table takes its export count through it). Not for a proxy handle.
    pub(crate) fn prop_ptr(&self) -> PropPtr {
        debug_assert!(!self.is_proxy());
        PropPtr::of(self.prop(), self.trustee_index(), self.run())
    }

    fn prop(&self) -> NonNull<Prop<T>> {
        // SAFETY: the unpacked address is the non-null address `new` was given (16-aligned,
        // so the shift restores it).
        self.packed.map_addr(|a| unsafe { NonZero::new_unchecked((a.get() & ADDR_MASK) << 4) })
    }

    #[inline(always)]
    fn trustee_index(&self) -> usize {
        (self.packed.as_ptr() as usize >> TRUSTEE_SHIFT) & ((1 << TRUSTEE_BITS) - 1)
    }

    #[inline(always)]
    fn run(&self) -> u32 {
        self.tag() & RUN_MASK as u32
    }

    /// The run's id and, above it, [`PROXY_BIT`]: equal to the calling worker's run id exactly
    /// for a handle of its run that is not a proxy's (the one compare of the local path).
    #[inline(always)]
    fn tag(&self) -> u32 {
        (self.packed.as_ptr() as usize >> RUN_SHIFT) as u32
    }

    /// The worker to issue on and the trustee's index, for a handle of the calling worker's
    /// run that is not a proxy's; `None` otherwise (the caller's cold path).
    #[inline(always)]
    fn local_worker(&self) -> Option<(&'static Worker, usize)> {
        match context::current() {
            Some(w) if w.run_id == self.tag() => Some((w, self.trustee_index())),
            _ => None,
        }
    }

    fn head(&self) -> &PropHead {
        // SAFETY: we hold a count, so the property (or, for a proxy handle, the proxy) is alive
        // (property invariant 1, proxy invariant 1); both start with their `PropHead`
        // (`repr(C)`), so the cast reaches it without claiming a `Prop<T>` over a proxy; the
        // header is never mutated except through its atomic.
        unsafe { self.prop().cast::<PropHead>().as_ref() }
    }

    /// The worker to issue on, the trustee's index and the target to queue with: the
    /// property's address, or for a proxy handle [`Trust::proxy_target`]. Run ids tell the
    /// runs of all existing handles apart ([`crate::run_ids`]), so a handle of another run is
    /// refused here, before anything is queued. The index is below the worker's `n`: the
    /// handle is of this run, and every handle of a run names one of its workers (`entrust`
    /// goes through a [`TrusteeRef`], whose index is checked against the run's worker count).
    /// One compare on the local path: [`PROXY_BIT`]
    /// sits above the run's id, so a local handle of this run matches the worker's run id
    /// exactly (`Trust::tag`). A proxy handle of this run used on its proxy's own rank (every
    /// request to another rank under MPI) is answered by the second compare, inline (an
    /// out-of-line call for it cost 2 to 6% of the 2-rank echo); anything else (a proxy in a
    /// loopback run, a handle of another run) takes the cold path, which tells them apart.
    #[inline]
    #[track_caller]
    fn issue_for(&self, what: &'static str) -> (&'static Worker, usize, *mut u8) {
        match context::current() {
            Some(w) if w.run_id == self.tag() => {
                (w, self.trustee_index(), self.prop().as_ptr() as *mut u8)
            }
            Some(w) if w.run_id | PROXY_TAG == self.tag() && self.proxy().home() == w.rank => {
                (w, self.trustee_index(), export_record_target(self.proxy()))
            }
            w => self.issue_slow(what, w),
        }
    }

    /// [`Trust::issue_for`] for a proxy handle that `issue_for` did not answer inline, or a
    /// refusal. A proxy used on its own rank is answered here too (the same answer as
    /// `issue_for`'s); the rest ([`Trust::proxy_target`]'s loopback case, a refusal) is out
    /// of line.
    #[inline(never)]
    #[track_caller]
    fn issue_slow(
        &self,
        what: &'static str,
        w: Option<&'static Worker>,
    ) -> (&'static Worker, usize, *mut u8) {
        match w {
            Some(w) if w.run_id == self.run() => {
                let p = self.proxy();
                let target =
                    if p.home() == w.rank { export_record_target(p) } else { self.proxy_target(w) };
                (w, self.trustee_index(), target)
            }
            w => wrong_context(what, w.is_some()),
        }
    }

    /// The trustee that owns the property.
    pub fn trustee(&self) -> TrusteeRef {
        TrusteeRef { trustee: self.trustee_index() }
    }
}

/// The target a request through proxy `p` queues with on the proxy's own rank: its export's
/// wire word marked [`RECORD_EXPORT`] (not an address: never dereferenced, only written to
/// the wire).
#[inline(always)]
fn export_record_target(p: &Proxy) -> *mut u8 {
    let (slot, gen) = p.target();
    std::ptr::without_provenance_mut((export::wire_target(slot, gen) | RECORD_EXPORT) as usize)
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

/// True when global worker `g` is on the rank of worker `w` (`docs/rack-mode.md` §1.1; in a
/// loopback run, its fake rank).
#[inline(always)]
fn is_local_in(w: &Worker, g: usize) -> bool {
    w.is_local(g)
}

/// The request half of a capturing (`*_local`) call: runs `job(target)` and answers with its
/// result in a [`ResultSpace`].
#[inline(always)]
fn closure_request<U, J>(job: J) -> impl FnOnce(*mut u8, *mut u8) -> Option<PanicPayload> + Send
where
    J: FnOnce(*mut u8) -> U + Send + 'static,
    U: Send + 'static,
{
    // SAFETY: `out` is this request's result space, sized for a `U` (`ResultSpace<U>`).
    move |tg, out| unsafe { answer(out, catch_unwind(AssertUnwindSafe(|| job(tg)))) }
}

/// Moves the request `req` to `trustee` and suspends the calling fiber until its result is
/// back; the completion reads the result as `S` says.
fn call_blocking<S, R>(w: &Worker, trustee: usize, target: *mut u8, req: R) -> S::Out
where
    S: ReadBack,
    R: RequestHalf + Send,
{
    let fid = w.current_fiber().expect("fiber");
    let mut res: Option<std::thread::Result<S::Out>> = None;
    let dest = SendPtr(&mut res as *mut Option<std::thread::Result<S::Out>>);
    let done = move |o: Outcome| {
        let r = match o.panic {
            // SAFETY: the trustee wrote the result at o.resp as `S` (no panic), slot rule 3.
            None => Ok(unsafe { S::read(o.resp) }),
            Some(p) => Err(p),
        };
        // SAFETY: `res` lives on the suspended fiber's stack until it resumes, which happens
        // only after this runs (make_ready below), on the same worker.
        unsafe { *dest.get_mut() = Some(r) };
        context::expect("apply").make_ready(fid);
    };
    assert!(trustee < w.n, "skein: trustee {trustee} of {} workers", w.n);
    // SAFETY: trustee < n, checked above.
    unsafe { w.request::<S, _, _>(trustee, target, req, done) };
    crate::fiber::suspend();
    match res.take().expect("skein: fiber resumed without a result") {
        Ok(u) => u,
        Err(p) => resume_unwind(p),
    }
}

/// Queues the request `req` for `trustee`; `then(result)` runs on this worker afterwards (a
/// panic of either is recorded and makes the run fail). Suspends the calling fiber, outside
/// delegated code, when the staging limit towards `trustee` is reached.
///
/// # Safety
/// `trustee < w.n`, and `target` is the address `req` works on, kept alive by the caller's
/// handle (the reference-counting argument of [`crate::runtime::free`] covers the request).
#[inline(always)]
unsafe fn issue<S, R, G>(w: &Worker, trustee: usize, target: *mut u8, req: R, then: G)
where
    S: ReadBack,
    R: RequestHalf + Send,
    G: FnOnce(S::Out) + 'static,
{
    let done = move |o: Outcome| match o.panic {
        // SAFETY: the trustee wrote the result at o.resp as `S` (no panic), slot rule 3.
        None => run_then(then, unsafe { S::read(o.resp) }),
        Some(e) => context::expect("apply_then").record_panic(e, "apply_then closure"),
    };
    // SAFETY: trustee < w.n (caller promise).
    let over = unsafe { w.request::<S, _, _>(trustee, target, req, done) };
    if over && !w.in_delegated() && w.current_fiber().is_some() {
        w.throttle(trustee);
    }
}

/// Where a remote-capable request finds its value: the target word names a property
/// ([`OnProp`]) or one value of a [`TrustArray`] part ([`array`]'s `OnElem`).
pub(crate) trait Place {
    /// The value's type.
    type Value;
    /// The value at `target`.
    ///
    /// # Safety
    /// `target` is the target word of a request of this place, and the caller runs as
    /// delegated code on the value's trustee (property invariant 2: no other reference).
    unsafe fn value<'a>(target: *mut u8) -> &'a mut Self::Value;

    /// The address of the value at `target`, as the target word of a wire record for a
    /// handle shared through memory in a loopback run (`crate::runtime::remote`, "Loopback
    /// only"; a proxy handle's records carry its export instead). Computes an address, reads
    /// no value.
    ///
    /// # Safety
    /// `target` is the target word of a live request of this place (its property is alive).
    unsafe fn value_addr(target: *mut u8) -> *mut Self::Value;
}

/// The value of the property at the target word.
pub(crate) struct OnProp<T>(PhantomData<fn() -> T>);

impl<T> Place for OnProp<T> {
    type Value = T;
    #[inline(always)]
    unsafe fn value<'a>(target: *mut u8) -> &'a mut T {
        // SAFETY: caller promise; the property is alive: its handle held a count when the
        // request was issued, and a property is freed only after every request issued before
        // its last handle went away has been served ([`crate::runtime::free`]).
        unsafe { &mut *(*(target as *mut Prop<T>)).value.get() }
    }
    #[inline(always)]
    unsafe fn value_addr(target: *mut u8) -> *mut T {
        // SAFETY: caller promise: a live property; `get` only computes the value's address.
        unsafe { (*(target as *mut Prop<T>)).value.get() }
    }
}

/// The code of a remote-capable request (`docs/rack-mode.md` §2.4, `run_arg`): reads the
/// value from the place `P`, recreates the zero-sized closure `F`, runs it with the argument
/// and writes its `Plain` result unaligned. Built only by the entry points below, each of
/// which held a value of `F` (record's [`ArgCall`] safety contract).
pub(crate) struct RunArg<P, U, F>(PhantomData<RunArgTypes<P, U, F>>);

/// The types a [`RunArg`] names (function types: no auto-trait or drop effects).
type RunArgTypes<P, U, F> = (fn() -> P, fn() -> U, fn() -> F);

// SAFETY: `RunArg` is zero-sized and only named by entry points that were handed an `F` (and
// checked that it is zero-sized, `travel_check!`).
unsafe impl<P, A, U, F> ArgCall<A> for RunArg<P, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    const REMOTE: Option<&'static RemoteHook> = Some(HookOf::<P, A, U, F>::HOOK);

    #[inline(always)]
    unsafe fn run(target: *mut u8, arg: A, out: *mut u8) -> Option<PanicPayload> {
        travel_check!(F = F);
        // SAFETY: `F` is zero-sized (`travel_check!` in every entry point that names this
        // type), so reading one through a dangling, non-null, aligned pointer reads no bytes;
        // it is `Copy` and a value of it existed (the entry point's `f`), so this is a copy of
        // that value, not a forgery.
        let f: F = unsafe { NonNull::<F>::dangling().as_ptr().read() };
        // SAFETY: caller promise (delegated code on the value's trustee).
        let value = unsafe { P::value(target) };
        if size_of::<U>() <= INNER_WRITE_MAX {
            // A small result is written inside the closure: returned through `catch_unwind`
            // it is copied through the union of closure and result in pieces whose reads wait
            // for the stores before them (store-forwarding stalls: the 32-byte echo ran at
            // half speed). A big one is copied whole either way, and faster this way round.
            let run = move || {
                let u = f(value, arg);
                // SAFETY: caller promise: `out` holds `PlainSpace::<U>::BYTES` bytes.
                unsafe { write_plain(out, u) }
            };
            return catch_unwind(AssertUnwindSafe(run)).err();
        }
        match catch_unwind(AssertUnwindSafe(move || f(value, arg))) {
            Ok(u) => {
                // SAFETY: caller promise: `out` holds `PlainSpace::<U>::BYTES` bytes.
                unsafe { write_plain(out, u) };
                None
            }
            Err(p) => Some(p),
        }
    }
}

/// Results up to this many bytes are written by [`RunArg`]'s closure itself, bigger ones after
/// it returned (measured with `skein bench echo` at 8 to 256 bytes).
const INNER_WRITE_MAX: usize = 128;

/// The holder of the [`RemoteHook`] of [`RunArg`]`<P, U, F>` with argument `A`: the
/// `RemoteVTable::of` table of `(P::Value, A, U, F)` (an array element travels as the value it
/// names, `KIND_PROPERTY` on the element's address, in a loopback run; step 6 turns it into
/// `of_element` with the part's export and the index), the argument's own bytes, and the
/// `Plain` result's bytes, which are the same on the wire and in the result space.
pub(crate) struct HookOf<P, A, U, F>(PhantomData<CodeTypes<P, A, U, F>>);

/// The types a [`HookOf`] or [`WithRequest`] names (a function type: no auto-trait or drop
/// effects).
type CodeTypes<P, A, U, F> = fn() -> (P, A, U, F);

impl<P, A, U, F> HookOf<P, A, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    const HOOK: &'static RemoteHook = &RemoteHook {
        code: Of::<P::Value, A, U, F, RemoteProperty>::VT.code(),
        take_arg: take_plain_arg::<P, A>,
        put_result: put_plain_result::<U>,
        take_uniform: Some(take_plain_uniform::<P, A>),
        wire_result: true,
    };
}

/// [`RemoteHook::take_arg`] of an argument-first record: its argument's bytes.
///
/// # Safety
/// `p` is the target word of an `ArgRequest<A, _>` record of place `P` whose request half is
/// live and owned by the caller; it is consumed (a `Plain` value: a byte copy, nothing to drop).
unsafe fn take_plain_arg<P: Place, A: Plain>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise: the target word at `p`, the `repr(C, packed)` argument right
    // after it (record invariant 1), read unaligned.
    let (target, a) = unsafe {
        (std::ptr::read(p as *const *mut u8), std::ptr::read_unaligned(p.add(8) as *const A))
    };
    crate::wire::remote::push_plain(arg, a);
    // SAFETY: caller promise: the request is live, so its property is.
    unsafe { wire_word::<P>(target) }
}

/// [`RemoteHook::take_uniform`] of an argument-first record: [`take_plain_arg`] for `n`
/// records at once, written straight into `out` (one reservation, no per-record call or
/// length update).
///
/// # Safety
/// As [`RemoteHook::take_uniform`]: `n` live records of this type at `src`, `stride` words
/// apart, each a header, the target word and the `repr(C, packed)` argument.
unsafe fn take_plain_uniform<P: Place, A: Plain>(
    src: *const u64,
    stride: usize,
    n: usize,
    out: &mut Vec<u8>,
) {
    // SAFETY: caller promise; the record's argument is the `A` itself, written after the
    // target word (`RemoteVTable::of`'s layout).
    unsafe { take_uniform_wire::<P, A, A, 0>(src, stride, n, out, |a| (0, a)) }
}

/// The records of a uniform batch as wire records, in one pass: per record its target word,
/// then (when `LEAD` is 8) the first half of `split(argument)`, then the second, `A`, and
/// zeros up to the next multiple of 8. `split` takes the record's argument of type `R` apart
/// (an element request's `(index, A)`; a property request's `A` itself, with `LEAD` 0).
///
/// # Safety
/// As [`RemoteHook::take_uniform`], with `R` the records' argument type and `P` their place.
#[inline(always)]
pub(super) unsafe fn take_uniform_wire<P: Place, R: Plain, A: Plain, const LEAD: usize>(
    src: *const u64,
    stride: usize,
    n: usize,
    out: &mut Vec<u8>,
    split: impl Fn(R) -> (u64, A),
) {
    const { assert!(LEAD == 0 || LEAD == 8) };
    let arg = std::mem::size_of::<A>();
    let rec = 8 + LEAD + arg.next_multiple_of(8);
    out.reserve(n * rec);
    let at = out.len();
    // SAFETY: `reserve` made room for `n · rec` bytes after `at`; record `i` (caller
    // promise) has its target word right after its header and its argument after that, read
    // unaligned (record invariant 1), its request half consumed by this one read (a `Plain`
    // argument has no drop); each wire record gets its 8 target bytes, the `LEAD` bytes, the
    // argument's bytes and zeros up to the next multiple of 8, so the `n · rec` bytes are all
    // written before `set_len` (padding bytes inside `A` are copied as bytes, as
    // `push_plain` does).
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        for i in 0..n {
            let p = src.add(i * stride + HEADER_WORDS) as *mut u8;
            let target = std::ptr::read(p as *const *mut u8);
            let (lead, a) = split(std::ptr::read_unaligned(p.add(8) as *const R));
            let d = dst.add(i * rec);
            std::ptr::write_unaligned(d as *mut [u8; 8], wire_word::<P>(target).to_le_bytes());
            if LEAD == 8 {
                std::ptr::write_unaligned(d.add(8) as *mut [u8; 8], lead.to_le_bytes());
            }
            std::ptr::write_bytes(d.add(8 + LEAD + arg), 0, rec - 8 - LEAD - arg);
            std::ptr::write_unaligned(d.add(8 + LEAD) as *mut A, a);
        }
        out.set_len(at + n * rec);
    }
}

/// The wire target word of a queued record's `target`: a proxy handle's export word as is
/// ([`RECORD_EXPORT`]), else the address of the value, marked
/// [`crate::runtime::export::ADDR_TARGET`] (a loopback run's handle shared through memory).
///
/// # Safety
/// `target` is the target of a live request of place `P`.
#[inline]
unsafe fn wire_word<P: Place>(target: *mut u8) -> u64 {
    let t = target as usize as u64;
    if t & RECORD_EXPORT != 0 {
        return t & !RECORD_EXPORT;
    }
    // SAFETY: caller promise: not an export word, so the address of the live request's place.
    unsafe { P::value_addr(target) as usize as u64 | export::ADDR_TARGET }
}

/// [`RemoteHook::put_result`] of a `Plain` result: the wire bytes are the result space's.
///
/// # Safety
/// `out` holds `PlainSpace::<U>::BYTES` bytes.
unsafe fn put_plain_result<U: Plain>(wire: &[u8], out: *mut u8) {
    let n = wire.len().min(std::mem::size_of::<U>().next_multiple_of(8));
    // SAFETY: caller promise on `out`; `wire` holds `n` bytes.
    unsafe { std::ptr::copy_nonoverlapping(wire.as_ptr(), out, n) };
}

/// The request half of `apply_with`/`apply_with_then`: the serialized argument. Its code is
/// its type: decode, run `F` on the property, encode the result into a `Vec<u8>` result
/// space ([`ResultSpace`]). On the wire it is a `RemoteVTable::of_with` record.
pub(crate) struct WithRequest<T, V, U, F> {
    bytes: Vec<u8>,
    _code: PhantomData<CodeTypes<T, V, U, F>>,
}

impl<T, V, U, F> WithRequest<T, V, U, F>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    /// The request half for the encoded argument `bytes`; `f` only names `F` (a witness
    /// that a value of it existed, as for [`arg_request`]).
    fn new(bytes: Vec<u8>, f: F) -> Self {
        let _witness = f;
        WithRequest { bytes, _code: PhantomData }
    }

    const HOOK: &'static RemoteHook = &RemoteHook {
        code: Of::<T, V, U, F, RemoteSerialized>::VT.code(),
        take_arg: take_with_arg::<T, V, U, F>,
        put_result: put_with_result,
        take_uniform: None,
        wire_result: false,
    };
}

impl<T, V, U, F> RequestHalf for WithRequest<T, V, U, F>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    const REMOTE: Option<&'static RemoteHook> = Some(Self::HOOK);

    #[inline]
    unsafe fn call(self, target: *mut u8, out: *mut u8) -> Option<PanicPayload> {
        travel_check!(F = F);
        // SAFETY: `F` is zero-sized (`travel_check!` in `apply_with*`, the only places that
        // make this type), `Copy`, and a value of it existed (`new`'s witness): as in
        // `RunArg::run`.
        let f: F = unsafe { NonNull::<F>::dangling().as_ptr().read() };
        let bytes = self.bytes;
        let r =
            catch_unwind(AssertUnwindSafe(|| serialized_call(target as *mut Prop<T>, &bytes, f)));
        // SAFETY: caller promise: `out` is this request's `ResultSpace<Vec<u8>>`.
        unsafe { answer(out, r) }
    }
}

/// [`RemoteHook::take_arg`] of a [`WithRequest`] record: the serialized argument.
///
/// # Safety
/// As [`take_plain_arg`], for a `WithRequest<T, V, U, F>` record (the request half is moved
/// out and dropped here).
unsafe fn take_with_arg<T, V, U, F>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise: target word, then the request half (record invariant 1); this
    // is its one consumption (invariant 2).
    let (target, req) = unsafe {
        (
            std::ptr::read(p as *const *mut u8),
            std::ptr::read(p.add(8) as *const WithRequest<T, V, U, F>),
        )
    };
    arg.extend_from_slice(&req.bytes);
    // SAFETY: caller promise: the request is live, so its property is.
    unsafe { wire_word::<OnProp<T>>(target) }
}

/// [`RemoteHook::put_result`] of a [`WithRequest`] record: the serialized result into the
/// `Vec<u8>` result space.
///
/// # Safety
/// `out` is a `ResultSpace<Vec<u8>>`, written once here and read once by the completion.
unsafe fn put_with_result(wire: &[u8], out: *mut u8) {
    // SAFETY: caller promise.
    unsafe { write_result::<Vec<u8>>(out, wire.to_vec()) }
}

/// The request half of a remote-capable call on the place `P`: the argument itself.
pub(crate) type ArgReq<P, A, U, F> = ArgRequest<A, RunArg<P, U, F>>;

/// The request half for `f(value, arg)`: the argument alone. `f` is zero-sized and only
/// taken as the witness that a value of `F` existed ([`RunArg`] recreates it on the trustee).
#[inline(always)]
pub(crate) fn arg_request<P, A, U, F>(arg: A, f: F) -> ArgReq<P, A, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    let _witness = f;
    ArgRequest::new(arg)
}

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
    /// [`crate::wire::codec`] (bincode): for heap data such as strings and vectors. Both are
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
/// 6), encoded by [`crate::wire::codec`] only, on a worker of its run: the weight or count it
/// needs moves with the message (`trust/travel.rs`). Any other serializer, and a handle outside its
/// run, get an error: "a Trust cannot leave its run".
impl<T: Send + 'static> Serialize for Trust<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = travel::list(self).map_err(serde::ser::Error::custom)?;
        s.serialize_u32(i)
    }
}

/// The receiving side of [`Trust`]'s `Serialize` (through [`crate::wire::codec`] only).
impl<'de, T: Send + 'static> serde::Deserialize<'de> for Trust<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let i = <u32 as serde::Deserialize>::deserialize(d)?;
        travel::take(i).map_err(serde::de::Error::custom)
    }
}

/// `apply_with`'s argument as bytes.
#[track_caller]
fn encode_arg<V: Serialize>(v: &V) -> Vec<u8> {
    crate::wire::codec::encode(v).unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"))
}

/// Refuses, at the call site, a serialized argument that cannot travel to `trustee`: one
/// message to another rank (or fake rank) carries at most `MAX_SERIALIZED_BYTES` of it.
/// Refused later, the record would fail the whole job from inside the worker loop.
#[track_caller]
fn check_arg_fits(w: &Worker, trustee: usize, bytes: &[u8], what: &str) {
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
fn decode_result<U: DeserializeOwned>(bytes: &[u8]) -> U {
    crate::wire::codec::decode(bytes).unwrap_or_else(|e| panic!("skein: apply_with result: {e}"))
}

/// `apply_with`'s request on the trustee: decodes the argument, runs `f` on the value of the
/// property `p`, encodes the result.
fn serialized_call<T, V, U, F>(p: *mut Prop<T>, bytes: &[u8], f: F) -> Vec<u8>
where
    V: DeserializeOwned,
    U: Serialize,
    F: FnOnce(&mut T, V) -> U,
{
    let v: V = crate::wire::codec::decode(bytes)
        .unwrap_or_else(|e| panic!("skein: apply_with argument: {e}"));
    let u = on_trustee(SendPtr(p), |t| f(t, v));
    crate::wire::codec::encode(&u).unwrap_or_else(|e| panic!("skein: apply_with result: {e}"))
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
    call_blocking::<ResultSpace<U>, _>(w, trustee, target, closure_request(job))
}

/// Queues `job(target)` for `trustee`; `then(result)` runs on this worker afterwards, as
/// [`issue`] with a capturing request closure.
///
/// # Safety
/// As [`issue`].
#[inline(always)]
unsafe fn issue_then<U, J, G>(w: &Worker, trustee: usize, target: *mut u8, job: J, then: G)
where
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
fn on_trustee<T, U>(p: SendPtr<Prop<T>>, f: impl FnOnce(&mut T) -> U) -> U {
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
    run_continuation(then, u, "apply_then continuation")
}

/// Runs the continuation `then(u)`; a panic is recorded as the run's error, as `what`.
fn run_continuation<U, G: FnOnce(U)>(then: G, u: U, what: &str) {
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
