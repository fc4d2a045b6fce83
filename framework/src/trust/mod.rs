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
//! with [`crate::codec`], even in-process.
//!
//! The *local* calls (`apply_local`, `apply_then_local`, `TrusteeRef::entrust`, and
//! `spawn_local_on` and `spawn` in [`crate::runtime::spawn`](mod@crate::runtime::spawn)) keep capturing closures and
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
mod calls;
mod handle;
mod hooks;
pub(crate) mod travel;
mod trustee;

use calls::*;
pub use handle::Trust;
pub(crate) use handle::*;
pub(crate) use hooks::*;
pub(crate) use trustee::*;
pub use trustee::{local_trustee, trustee, TrusteeRef};

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
    w.note_wait(crate::runtime::stall::Wait::Response { trustee });
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
        w.note_wait(crate::runtime::stall::Wait::Throttled { trustee });
        w.throttle(trustee);
    }
}
