//! Fibers as user code sees them: [`spawn`], [`spawn_on`], [`spawn_local_on`] and the
//! [`JoinHandle`] that joins or detaches them.
//!
//! [`spawn_on`] is remote-capable (a capture-free closure and a [`Plain`] argument and
//! result, `docs/rack-mode.md` §2); [`spawn`] and [`spawn_local_on`] take any `Send` closure
//! and stay on this rank.
//!
//! A fiber's result (or panic) goes into a `JoinCell` shared by the fiber and its handle; a
//! fiber waiting in [`JoinHandle::join`] parks (it stops being an active task for quiescence
//! detection) and is woken on its own worker when the result arrives. A detached fiber's panic
//! is recorded as the run's error.

use super::context;
use super::refusal::{no_transport, not_local};
use super::run_state::RunState;
use super::worker::Worker;
use crate::channel::record::travel_check;
use crate::error::panic_message;
use crate::sync::{Arc, Mutex};
use crate::wire::code_id::code_id;
use crate::wire::envelope::{CONTROL_LAUNCH, CONTROL_SPAWN};
use crate::wire::remote::{push_plain, read_plain, RemoteVTable};
use crate::Plain;
use std::panic::{catch_unwind, AssertUnwindSafe};

struct JoinState<R> {
    result: Option<std::thread::Result<R>>,
    waiter: Option<(usize, u32)>,
    detached: bool,
}

struct JoinCell<R> {
    st: Mutex<JoinState<R>>,
    run_state: Arc<RunState>,
}

impl<R> JoinCell<R> {
    fn complete(&self, r: std::thread::Result<R>) {
        let waiter = {
            let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
            if st.detached {
                if let Err(p) = r {
                    self.run_state.record_error(format!("fiber panicked: {}", panic_message(&*p)));
                }
            } else {
                st.result = Some(r);
            }
            st.waiter.take()
        };
        if let Some((worker, id)) = waiter {
            let me = context::expect("join");
            if worker == me.index {
                me.wake_parked(id);
            } else {
                me.post(worker, move || context::expect("join").wake_parked(id));
            }
        }
    }
}

/// Handle of a fiber started with [`spawn`] or [`spawn_on`].
///
/// Dropping it detaches the fiber; a panic of a detached fiber makes [`crate::Runtime::run`] fail.
pub struct JoinHandle<R> {
    cell: Arc<JoinCell<R>>,
    /// The worker the fiber runs on (a stall dump names it, `super::stall`).
    worker: usize,
}

impl<R> std::fmt::Debug for JoinHandle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle").finish_non_exhaustive()
    }
}

impl<R> JoinHandle<R> {
    /// Waits (suspending only this fiber) for the fiber to finish and returns its value;
    /// resumes its panic if it panicked.
    ///
    /// # Panics
    /// In delegated context (use `apply_then` or `launch`), or outside a fiber.
    ///
    /// ```
    /// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
    /// # rt.run(|| {
    /// let h = skein::spawn_on(1, (), |()| skein::current_worker() * 10);
    /// assert_eq!(h.join(), 10);
    /// # }).unwrap();
    /// ```
    pub fn join(self) -> R {
        let w = context::expect("join");
        w.check_may_block("join");
        let r = {
            let mut st = self.cell.st.lock().unwrap_or_else(|e| e.into_inner());
            match st.result.take() {
                Some(r) => Some(r),
                None => {
                    st.waiter = Some((w.index, w.current_fiber().expect("fiber")));
                    None
                }
            }
        };
        let r = match r {
            Some(r) => r,
            None => {
                w.note_wait(super::stall::Wait::Join { worker: self.worker });
                w.park();
                let mut st = self.cell.st.lock().unwrap_or_else(|e| e.into_inner());
                st.result.take().expect("skein: woken join without a result")
            }
        };
        match r {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// True once the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.cell.st.lock().unwrap_or_else(|e| e.into_inner()).result.is_some()
    }
}

impl<R> Drop for JoinHandle<R> {
    fn drop(&mut self) {
        let mut st = self.cell.st.lock().unwrap_or_else(|e| e.into_inner());
        st.detached = true;
        if let Some(Err(p)) = st.result.take() {
            self.cell.run_state.record_error(format!("fiber panicked: {}", panic_message(&*p)));
        }
    }
}

/// Starts a fiber running `f` on some worker of this rank (round-robin over the local
/// workers) and returns its handle. `f` may capture anything: it never leaves this process.
///
/// May be called from fibers and from delegated context.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let hs: Vec<_> = (0..4).map(|i| skein::spawn(move || i * i)).collect();
/// let sum: i32 = hs.into_iter().map(|h| h.join()).sum();
/// assert_eq!(sum, 14);
/// # }).unwrap();
/// ```
pub fn spawn<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let w = context::expect("spawn");
    spawn_fiber(w, w.next_spawn_target(), f)
}

/// Starts a fiber running `f(arg)` on worker `worker` (a global id, which may be on another
/// rank). `f` captures nothing; its data is `arg` and its result a [`Plain`] value, as for
/// [`crate::Trust::apply`]. For a capturing closure on a worker of this rank use
/// [`spawn_local_on`].
///
/// # Panics
/// If `worker >= num_workers()` or outside a runtime. Spawning on a worker of another rank
/// works between the ranks of an `mpirun` job and between the fake ranks of a loopback run
/// (`Builder::loopback_ranks`): a `Spawn` control record, `docs/rack-mode.md` §4.4. A panic
/// of a fiber on another rank is resumed by [`JoinHandle::join`] as a `String` naming its
/// rank and worker.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let h = skein::spawn_on(1, 10usize, |k| skein::current_worker() * k);
/// assert_eq!(h.join(), 10);
/// # }).unwrap();
/// ```
///
/// A capture, and a non-`Plain` argument, do not compile:
/// ```compile_fail
/// # skein::Runtime::builder().workers(2).build().unwrap().run(|| {
/// let k = 10usize;
/// skein::spawn_on(1, (), move |()| skein::current_worker() * k);
/// # }).unwrap();
/// ```
/// ```compile_fail
/// # skein::Runtime::builder().workers(2).build().unwrap().run(|| {
/// skein::spawn_on(1, vec![10usize], |v| skein::current_worker() * v[0]);
/// # }).unwrap();
/// ```
/// Their twin:
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let k = 10usize;
/// assert_eq!(skein::spawn_on(1, k, |k| skein::current_worker() * k).join(), 10);
/// assert_eq!(skein::spawn_on(1, vec![10usize][0], |v0| skein::current_worker() * v0).join(), 10);
/// # }).unwrap();
/// ```
#[track_caller]
pub fn spawn_on<A, R, F>(worker: usize, arg: A, f: F) -> JoinHandle<R>
where
    A: Plain,
    R: Plain,
    F: FnOnce(A) -> R + Copy + Send + 'static,
{
    travel_check!(F = F, A = A, U = R);
    let w = context::expect("spawn_on");
    check_worker(w, worker, "spawn_on");
    if !w.is_local(worker) {
        if w.remote.is_none() {
            no_transport(worker, "spawn_on");
        }
        return spawn_remote(w, worker, arg, f);
    }
    spawn_fiber(w, worker, move || f(arg))
}

/// [`spawn_on`] for a worker of another rank: a `Spawn` control record carrying the
/// `RemoteVTable::of_spawn` code id of `F` and `arg`'s bytes; its `Joined` record completes
/// the handle's cell on this worker (`super::remote`, "Control records").
fn spawn_remote<A, R, F>(w: &Worker, worker: usize, arg: A, f: F) -> JoinHandle<R>
where
    A: Plain,
    R: Plain,
    F: FnOnce(A) -> R + Copy + Send + 'static,
{
    let (cell, join) = remote_join::<R>(w);
    send_spawn(w, worker, join, arg, f);
    JoinHandle { cell, worker }
}

/// Queues the `Spawn` control record of `f(arg)` for `worker` (another rank), answered by a
/// `Joined` record to join id `join` of this worker.
fn send_spawn<A, R, F>(w: &Worker, worker: usize, join: u64, arg: A, f: F)
where
    A: Plain,
    R: Plain,
    F: FnOnce(A) -> R + Copy + Send + 'static,
{
    let vt = RemoteVTable::of_spawn::<A, R, F>(&f);
    let mut body = Vec::with_capacity(8 + vt.arg_bytes as usize);
    body.extend_from_slice(&code_id(vt).to_le_bytes());
    push_plain(&mut body, arg);
    w.send_control::<CONTROL_SPAWN>(worker, join, body);
}

/// The body of a remote `entrust_new`, run by a fiber on the trustee: builds `f(arg)`,
/// allocates the property for its own worker, exports it in its export table (`super::export`:
/// the slot holds the property's one count once the builder's handle is dropped) and answers
/// the export: `[slot, generation, weight]`, plain bytes. Captures only `f`, zero-sized and
/// `Copy` (`travel_check!` in the callers): the closure is zero-sized too, and recreated on
/// the trustee from its code id.
fn build_and_export<A, T, F>(f: F) -> impl FnOnce(A) -> [u64; 3] + Copy + Send + 'static
where
    A: Plain,
    T: Send + 'static,
    F: FnOnce(A) -> T + Copy + Send + 'static,
{
    move |a: A| -> [u64; 3] {
        let w = context::expect("entrust_new");
        let value = f(a);
        let prop = crate::property::alloc(value, w.run_id, w.index);
        let prop = crate::property::PropPtr::of(prop, w.index, w.run_id);
        let table = w.run_state.exports.get(w.index).expect("skein: entrust_new: no export table");
        let ex = table.export(prop).unwrap_or_else(|e| panic!("skein: entrust_new: {e}"));
        // The export count now holds the property; the builder's count goes (as a handle's
        // drop: never the last count here, the export holds one).
        // SAFETY: the builder's count, taken by `alloc`, keeps the property alive until here.
        if super::free::drop_ref(unsafe { prop.head_ptr().as_ref() }) {
            super::free::release_last(prop, w.run_id);
        }
        [u64::from(ex.slot), u64::from(ex.gen), ex.weight]
    }
}

/// `TrusteeRef::entrust_new` on a trustee of another rank: a remote spawn of
/// [`build_and_export`] on `trustee`, whose answer the caller turns into a proxy
/// (`docs/rack-mode.md` §5.2). Nothing of the trustee's rank is reached through an address.
/// Waits in a `join`: the caller must be able to block. A panic of `f` (or a full export
/// table) is resumed here, naming the trustee's rank and worker.
pub(crate) fn entrust_remote<A, T, F>(w: &Worker, trustee: usize, arg: A, f: F) -> [u64; 3]
where
    A: Plain,
    T: Send + 'static,
    F: FnOnce(A) -> T + Copy + Send + 'static,
{
    spawn_remote(w, trustee, arg, build_and_export::<A, T, F>(f)).join()
}

/// `TrusteeRef::entrust_new_then` on a trustee of another rank: the remote spawn of
/// [`entrust_remote`], without waiting. Its `Joined` record is served on this worker (as
/// delegated code, `super::remote`, "Control records"), which calls `done` with the
/// export `[slot, generation, weight]`, or with the panic message of `f` on the trustee
/// (naming its rank and worker). `done` returns `Err` for an answer that cannot be a handle
/// (the record is then refused, naming the trustee's rank); a result of the wrong size is
/// refused before `done` runs. Quiescence: `done` runs while the `Joined` record is served,
/// so whatever it issues is created before that record counts as finished (step 4 of
/// `super::remote`'s counting argument).
pub(crate) fn entrust_remote_then<A, T, F>(
    w: &Worker,
    trustee: usize,
    arg: A,
    f: F,
    done: impl FnOnce(Result<[u64; 3], &str>) -> Result<(), String> + 'static,
) where
    A: Plain,
    T: Send + 'static,
    F: FnOnce(A) -> T + Copy + Send + 'static,
{
    export_remote_then(w, trustee, arg, build_and_export::<A, T, F>(f), done);
}

/// The remote spawn of `exporter(arg)` (a [`build_and_export`]) on `trustee`, without
/// waiting: `done` runs on this worker with its answer ([`entrust_remote_then`]).
fn export_remote_then<A, E>(
    w: &Worker,
    trustee: usize,
    arg: A,
    exporter: E,
    done: impl FnOnce(Result<[u64; 3], &str>) -> Result<(), String> + 'static,
) where
    A: Plain,
    E: FnOnce(A) -> [u64; 3] + Copy + Send + 'static,
{
    if w.remote.is_none() {
        no_transport(trustee, "entrust_new_then");
    }
    let join = w.register_join(Box::new(move |r: Result<&[u8], &str>| match r {
        Ok(bytes) => {
            check_result_size::<[u64; 3]>(bytes)?;
            done(Ok(read_plain::<[u64; 3]>(bytes)))
        }
        Err(msg) => done(Err(msg)),
    }));
    send_spawn(w, trustee, join, arg, exporter);
}

/// `TrustArray::new`'s part for `trustee` of another rank (`docs/rack-mode.md` §5.4): a remote
/// spawn whose fiber builds the values `i ≡ trustee (mod n)` below `len` with `init(arg, i)`
/// there, entrusts the vector to its own worker, exports it and answers the export, as
/// [`entrust_remote`]. Started without waiting: the caller joins the handles of all parts.
pub(crate) fn build_part_remote<A, T, F>(
    w: &Worker,
    trustee: usize,
    len: usize,
    arg: A,
    init: F,
) -> JoinHandle<[u64; 3]>
where
    A: Plain,
    T: Send + 'static,
    F: Fn(A, usize) -> T + Copy + Send + 'static,
{
    spawn_remote(w, trustee, (arg, len as u64), build_part::<A, T, F>(init))
}

/// `TrustArray::new_then`'s part for `trustee` of another rank: the remote spawn of
/// [`build_part_remote`], without waiting; `done` runs on this worker with its answer, as for
/// [`entrust_remote_then`].
pub(crate) fn build_part_remote_then<A, T, F>(
    w: &Worker,
    trustee: usize,
    len: usize,
    arg: A,
    init: F,
    done: impl FnOnce(Result<[u64; 3], &str>) -> Result<(), String> + 'static,
) where
    A: Plain,
    T: Send + 'static,
    F: Fn(A, usize) -> T + Copy + Send + 'static,
{
    export_remote_then(w, trustee, (arg, len as u64), build_part::<A, T, F>(init), done);
}

/// The value of a `TrustArray` part built on its trustee (a fiber there): the values
/// `i ≡ trustee (mod n)` below `len`, `init(arg, i)` each. Captures only `init`, zero-sized and
/// `Copy` (`travel_check!` in `TrustArray::new`), so the result of [`build_and_export`] of it
/// is zero-sized too.
fn build_part<A, T, F>(init: F) -> impl FnOnce((A, u64)) -> [u64; 3] + Copy + Send + 'static
where
    A: Plain,
    T: Send + 'static,
    F: Fn(A, usize) -> T + Copy + Send + 'static,
{
    build_and_export::<(A, u64), Vec<T>, _>(move |(a, len): (A, u64)| -> Vec<T> {
        let w = context::expect("TrustArray::new");
        (w.index..len as usize).step_by(w.n).map(|i| init(a, i)).collect()
    })
}

/// `Trust::launch` on a `Latch<T>` property whose trustee is on another rank: a `Launch`
/// control record carrying the `RemoteVTable::of_launch` code id of `F`, the property's
/// target word and `arg`'s bytes; answered by a `Joined` record as [`spawn_on`].
///
/// # Safety
/// `target` is the wire target word of a live `Latch<T>` property of `trustee` (an export, or
/// in a loopback run the latch's address marked `export::ADDR_TARGET`), kept alive by the
/// caller until the returned handle is joined.
pub(crate) unsafe fn launch_remote<T, A, U, F>(
    w: &Worker,
    trustee: usize,
    target: u64,
    arg: A,
    f: F,
) -> JoinHandle<U>
where
    A: Plain,
    U: Plain,
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    if w.remote.is_none() {
        no_transport(trustee, "launch");
    }
    let vt = RemoteVTable::of_launch::<super::latch::Latch<T>, A, U, F>(&f);
    let (cell, join) = remote_join::<U>(w);
    let mut body = Vec::with_capacity(16 + vt.arg_bytes as usize);
    body.extend_from_slice(&code_id(vt).to_le_bytes());
    body.extend_from_slice(&target.to_le_bytes());
    push_plain(&mut body, arg);
    w.send_control::<CONTROL_LAUNCH>(trustee, join, body);
    JoinHandle { cell, worker: trustee }
}

/// A join cell for a fiber on another rank and its join id: its `Joined` record completes the
/// cell with the result (checked to be `R`'s size) or the panic message.
fn remote_join<R: Plain>(w: &Worker) -> (Arc<JoinCell<R>>, u64) {
    let cell = Arc::new(JoinCell {
        st: Mutex::new(JoinState { result: None, waiter: None, detached: false }),
        run_state: w.run_state.clone(),
    });
    let c2 = cell.clone();
    let join = w.register_join(Box::new(move |r: Result<&[u8], &str>| {
        match r {
            Ok(bytes) => {
                check_result_size::<R>(bytes)?;
                c2.complete(Ok(read_plain::<R>(bytes)));
            }
            Err(msg) => c2.complete(Err(Box::new(msg.to_string()))),
        }
        Ok(())
    }));
    (cell, join)
}

/// Checks that a `Joined` record's result has the size of the spawn's result `R` (rounded
/// up to 8, as it travels).
fn check_result_size<R: Plain>(bytes: &[u8]) -> Result<(), String> {
    let want = std::mem::size_of::<R>().next_multiple_of(8);
    if bytes.len() != want {
        return Err(format!(
            "joined record with a {}-byte result, the spawn's result takes {want}",
            bytes.len()
        ));
    }
    Ok(())
}

/// Starts a fiber running `f` on worker `worker` of this rank; `f` may capture anything
/// `Send + 'static`.
///
/// # Panics
/// If `worker >= num_workers()`, if `worker` is on another rank (use [`spawn_on`]), or
/// outside a runtime.
///
/// ```
/// # let rt = skein::Runtime::builder().workers(2).build().unwrap();
/// # rt.run(|| {
/// let name = String::from("w");
/// let h = skein::spawn_local_on(1, move || format!("{name}{}", skein::current_worker()));
/// assert_eq!(h.join(), "w1");
/// # }).unwrap();
/// ```
#[track_caller]
pub fn spawn_local_on<F, R>(worker: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let w = context::expect("spawn_local_on");
    check_worker(w, worker, "spawn_local_on");
    if !w.is_local(worker) {
        not_local(worker, "spawn_local_on", "spawn_on");
    }
    spawn_fiber(w, worker, f)
}

#[track_caller]
fn check_worker(w: &Worker, worker: usize, what: &str) {
    assert!(worker < w.n, "skein: {what}({worker}) but the runtime has {} workers", w.n);
}

/// Starts a fiber running `f` on worker `worker` of this rank (`worker < w.n`, checked).
pub(crate) fn spawn_fiber<F, R>(w: &Worker, worker: usize, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    check_worker(w, worker, "spawn");
    let cell = Arc::new(JoinCell {
        st: Mutex::new(JoinState { result: None, waiter: None, detached: false }),
        run_state: w.run_state.clone(),
    });
    let c2 = cell.clone();
    let body = move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        c2.complete(r);
    };
    if worker == w.index {
        w.spawn_local(body);
    } else {
        w.post(worker, move || context::expect("spawn").spawn_local(body));
    }
    JoinHandle { cell, worker }
}
