//! # Skein: delegation instead of locks
//!
//! Skein runs a program on a few *workers* (OS threads). Shared state is never locked: each
//! piece of it is a *property* entrusted to one worker, its *trustee*, and everyone else sends
//! the trustee a closure to apply. This crate is the single-machine runtime;
//! `docs/ARCHITECTURE.md` in the repository walks through its modules and protocols.
//!
//! ## Glossary
//!
//! | term | meaning |
//! | --- | --- |
//! | worker | an OS thread of the runtime; both a trustee and a client |
//! | fiber | a user-level thread with its own stack, scheduled cooperatively on one worker; blocking calls suspend the fiber, not the worker |
//! | trustee | a worker in its role of owner of properties, serving requests for them |
//! | property | a value owned by a trustee, reachable only through a [`Trust`] (or, for many values of one kind, a [`TrustArray`]) |
//! | delegated context | code a trustee runs on behalf of a client (an `apply*` closure) or an `apply_then` continuation: it must not block |
//! | slot | the per-(client, trustee) request/response buffers requests travel in, in batches; each pair has two *lanes* of them, so one batch is served while the next is filled |
//!
//! ## From `entrust` to many fibers
//!
//! 1. Build a runtime and run a main function; it runs as a fiber on worker 0:
//!
//! ```
//! let rt = skein::Runtime::builder().workers(2).build()?;
//! let answer = rt.run(|| 6 * 7)?;
//! assert_eq!(answer, 42);
//! # Ok::<(), skein::Error>(())
//! ```
//!
//! 2. Entrust a value to a trustee and delegate to it. A delegated closure captures nothing:
//!    its data is its argument, a [`Plain`] value (numbers, arrays, tuples; `()` for none),
//!    and so is its result, because the trustee may be in another process (rack mode).
//!    [`Trust::apply`] blocks the calling fiber until the result is back;
//!    [`Trust::apply_then`] returns at once and runs a continuation (which may capture
//!    anything) on the calling worker later; [`Trust::apply_with`] ships a serialized
//!    argument and result; the `*_local` calls take capturing closures to local trustees:
//!
//! ```
//! # let rt = skein::Runtime::builder().workers(2).build().unwrap();
//! rt.run(|| {
//!     let counter = skein::trustee(1).entrust(17);           // Trust<i32>, owned by worker 1
//!     counter.apply(1, |c, k| *c += k);                       // suspends this fiber only
//!     counter.apply_then((), |c, ()| *c, |v| assert_eq!(v, 18)); // continuation runs here, later
//!     counter.apply_with("xyz".to_string(), |c, s: String| *c += s.len() as i32);
//!     assert_eq!(counter.apply((), |c, ()| *c), 21);
//! }).unwrap();
//! ```
//!
//! 3. Spawn fibers; they block independently, and the worker keeps serving requests meanwhile:
//!
//! ```
//! # let rt = skein::Runtime::builder().workers(2).build().unwrap();
//! let total = rt.run(|| {
//!     let counter = skein::trustee(0).entrust(0u64);
//!     let hs: Vec<_> = (0..8)
//!         .map(|_| {
//!             let c = counter.clone();
//!             skein::spawn(move || for _ in 0..100 { c.apply((), |x, ()| *x += 1) })
//!         })
//!         .collect();
//!     hs.into_iter().for_each(|h| h.join());
//!     counter.apply((), |x, ()| *x)
//! }).unwrap();
//! assert_eq!(total, 800);
//! ```
//!
//! 4. Asynchronous algorithms fire `apply_then`s from continuations and delegated closures,
//!    and find their end with [`wait_quiescent`] (global quiescence detection, no timeouts):
//!
//! ```
//! # let rt = skein::Runtime::builder().workers(2).build().unwrap();
//! rt.run(|| {
//!     let cells: Vec<_> = (0..4).map(|i| skein::trustee(i % 2).entrust(0u32)).collect();
//!     let cells = std::sync::Arc::new(cells);
//!     fn visit(cells: std::sync::Arc<Vec<skein::Trust<u32>>>, i: usize, depth: u32) {
//!         let c2 = cells.clone();
//!         cells[i].apply_then(1, |v, k| *v += k, move |()| {
//!             if depth > 0 {
//!                 visit(c2.clone(), (i + 1) % 4, depth - 1);
//!                 visit(c2, (i + 3) % 4, depth - 1);
//!             }
//!         });
//!     }
//!     visit(cells.clone(), 0, 6);
//!     skein::wait_quiescent();
//!     let sum: u32 = cells.iter().map(|c| c.apply((), |v, ()| *v)).sum();
//!     assert_eq!(sum, 127);
//! }).unwrap();
//! ```
//!
//! 5. A closure that must block runs with [`Trust::launch`] on a `Trust<Latch<T>>`.
//!
//! 6. Many small values of one kind (a counter per object, a distance per vertex) belong in a
//!    [`TrustArray`], not in a `Vec<Trust<T>>`: one property per trustee holds that trustee's
//!    share (value `i` on trustee `i % n`), and a request finds its trustee and value by
//!    arithmetic. With millions of values this is several times faster, because a
//!    `Vec<Trust<T>>` makes every request first load its handle from memory:
//!
//! ```
//! # let rt = skein::Runtime::builder().workers(2).build().unwrap();
//! rt.run(|| {
//!     let hits = skein::TrustArray::new(1_000, (), |(), _| 0u32); // 500 values per trustee
//!     for i in 0..5_000 {
//!         hits.apply_then(i % 1_000, (), |h, ()| *h += 1, |()| {});
//!     }
//!     skein::wait_quiescent();
//!     assert_eq!(hits.apply(999, (), |h, ()| *h), 5);
//! }).unwrap();
//! ```
//!
//! ## Rules
//!
//! * Closures sent to trustees (`apply`, `apply_then`, `apply_with`, `launch`, `spawn_on`,
//!   `entrust_new`, `entrust_new_then`, `TrustArray`) capture nothing: their data is a
//!   [`Plain`] argument (or a serialized one, `apply_with`), their result is `Plain` (or
//!   serialized), at most 256 bytes each; a capture is a compile error. The same program then
//!   runs on one process or on a rack. `apply_local`, `apply_then_local`, `spawn_local_on`,
//!   `spawn` and `entrust` take any `Send + 'static` closure or value, for this rank only.
//! * Blocking calls (`apply`, `join`, `launch`, `wait_quiescent`, and towards another rank
//!   `entrust_new` and `TrustArray::new`) panic in delegated context, naming the fix
//!   (`apply_then`, `launch`, `entrust_new_then`, `TrustArray::new_then`).
//! * A panic in a delegated closure is resumed in the caller (`apply`) or makes
//!   [`Runtime::run`] return [`Error::Panicked`] (`apply_then`); nothing hangs.
//! * Properties are dropped exactly once, on their trustee, after the last handle is gone.
//!
//! ## Features
//!
//! * `mpi` — rack mode: one job over several processes (*ranks*) started by `mpirun`
//!   ([`rack`]: MPI start-up, the same-binary check, the job token, fate sharing,
//!   [`rank`]/[`ranks`]). [`Runtime::run`] runs over every rank's workers, and every
//!   remote-capable call above works towards any rank (`docs/rack-mode.md`, "Status", in the
//!   repository). Needs Open MPI and libclang (`scripts/install-mpi.sh` in the repository).
//!
//! Environment variables read: `SKEIN_LOOPBACK_RANKS` ([`Builder::default`]: split every
//! runtime into fake ranks, a testing aid), `SKEIN_WORKER_THREADS`
//! ([`Builder::worker_threads`]), the tuning switches [`Builder::default`] lists, and, with the `mpi` feature, the MPI launcher's
//! (`OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `PMIX_RANK`) to tell whether the process runs under
//! `mpirun`.

#![warn(missing_docs)]
#![doc(test(attr(deny(warnings))))]

mod channel;
mod error;
mod fiber;
#[cfg(feature = "testing")]
mod forge;
mod plain;
mod property;
pub mod rack;
mod run_ids;
mod runtime;
mod stats;
mod sync;
mod transport;
mod trust;
pub mod wire;

/// Values that carry handles, as bytes: the wire codec ([`wire::codec`]) with the
/// [`Trust`]s inside a value moved in a trailer, weight and all (`apply_with` arguments and
/// results travel this way). Encode and decode on a worker of the handles' run. Bulk numbers
/// (a bitmap's words, `f64` bits kept as `u64`) travel faster as a [`codec::Raw`]: one byte
/// string, where the codec writes the integers of a `Vec` as varints and a `Vec<u8>` byte
/// by byte.
///
/// ```
/// let bytes = skein::codec::encode(&(7u32, "seven".to_string())).unwrap();
/// let back: (u32, String) = skein::codec::decode(&bytes).unwrap();
/// assert_eq!(back, (7, "seven".to_string()));
/// ```
pub mod codec {
    pub use crate::trust::travel::{decode, encode};
    pub use crate::wire::codec::CodecError;
    pub use crate::wire::raw::{Raw, RawNumber};
}

pub use error::{Error, Result};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use forge::{forge_envelope, Forgery};

/// The shared-memory rings this process has set up so far (a run over ranks that reuses the
/// rings its predecessor kept sets up none); 0 without the `mpi` feature. A test hook.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn rack_ring_setups() -> u64 {
    #[cfg(feature = "mpi")]
    {
        transport::shm::setups()
    }
    #[cfg(not(feature = "mpi"))]
    0
}
pub use plain::Plain;
pub use runtime::stall::{request_stall_dump, stall_dumps};
pub use runtime::{
    current_worker, in_delegated_context, local_workers, num_workers, pin_current_thread,
    quiescent_add, quiescent_lanes, quiescent_min, quiescent_mins, quiescent_set_min, rank_of,
    spawn, spawn_local_on, spawn_on, stats, wait_quiescent, wait_quiescent_sum,
    wait_quiescent_totals, yield_now, Builder, JoinHandle, QuiescentTotals, Runtime,
    QUIESCENT_LANES, QUIESCENT_MINS,
};
pub use runtime::{rack_transport_used, rack_transports, rank, ranks};
pub use stats::{Anatomy, RankTraffic, RoundEnds, RunTimes, Stats, WorkerStats, ROUND_END_BUCKETS};
pub use transport::RackTransport;
pub use trust::{local_trustee, trustee, Latch, LatchGuard, Trust, TrustArray, TrusteeRef};

/// Hints the CPU that the cache line holding `*r` will be read soon; it has no other effect
/// (and none at all where there is no such instruction).
///
/// A loop that delegates to many properties picked at random, such as
/// `for &i in picks { trusts[i].apply_then(..) }`, spends most of its time waiting for the
/// handles `trusts[i]` to come from memory: prefetching the handle a few iterations ahead
/// overlaps those waits (trustees already prefetch the properties themselves). A
/// [`TrustArray`] avoids the handle loads altogether.
///
/// ```
/// let v: Vec<u64> = (0..1000).collect();
/// let mut sum = 0;
/// for i in 0..v.len() {
///     if let Some(next) = v.get(i + 8) {
///         skein::prefetch(next);
///     }
///     sum += v[i];
/// }
/// assert_eq!(sum, 499_500);
/// ```
#[inline(always)]
pub fn prefetch<T: ?Sized>(r: &T) {
    channel::prefetch::prefetch(r as *const T as *const u8);
}

/// The README's Rust examples, compiled and run as doc tests so that they keep working.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
