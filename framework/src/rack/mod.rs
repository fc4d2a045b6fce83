//! Rack mode: one skein job over several processes (*ranks*) started by `mpirun`.
//!
//! What is here: the **bootstrap** (this file and `mpi.rs`: MPI with `MPI_THREAD_MULTIPLE`,
//! the same-binary check, the job token, fate sharing, [`rank`]/[`ranks`]) and the end of a
//! run over ranks (`outcome`). The **envelope transport** over MPI (per-worker duplicated
//! communicators, non-blocking sends with a window per destination rank, pre-posted
//! receives, a progress call that never blocks) is the MPI flavour of `crate::transport`
//! (`transport/mpi/`). The other pieces of rack mode are built and
//! tested on their own (the wire format in [`crate::wire`], quiescence over ranks in
//! `runtime::quiesce_ranks`, reference counting across ranks in `runtime::export` and
//! `runtime::proxy`); `crate::transport::mpi` makes the envelope transport the runtime's and
//! `outcome` ends a run with one outcome on every rank. [`crate::Runtime::run`] on more than
//! one rank is collective and runs one program over every rank's workers; what crosses ranks
//! so far is listed in `docs/rack-mode.md`, "Status".
//!
//! Public here: [`rank`] and [`ranks`] (re-exported at the crate root), [`init`] (the
//! bootstrap's verdict), [`job_token`], [`abort`], [`require_one_rank`], and fate sharing.
//!
//! # Launching
//!
//! Build with `--features mpi` (Open MPI and libclang: `scripts/install-mpi.sh` in the
//! repository) and start the same executable on every rank, for example:
//!
//! ```text
//! mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 target/release/skein ...
//! ```
//!
//! `--bind-to none` matters: by default Open MPI pins each rank to one core, and a rank's
//! workers then share it. (`--allow-run-as-root` is needed only as root, `--oversubscribe`
//! only with more ranks than cores.)
//!
//! # What the bootstrap does
//!
//! It runs once per process, on the first call of [`init`], [`rank`], [`ranks`],
//! [`job_token`], [`require_one_rank`] or [`crate::Builder::build`], and its outcome is kept for the life of the
//! process (a `OnceLock`):
//!
//! 1. **Am I under `mpirun`?** Only when the crate is built with the `mpi` feature and the
//!    launcher's variables are set (`OMPI_COMM_WORLD_SIZE` from Open MPI, `PMI_SIZE` or
//!    `PMIX_RANK` from other launchers). Otherwise the process is rank 0 of 1, MPI is never
//!    touched, and everything behaves as without rack mode.
//! 2. **MPI** is initialised with `MPI_THREAD_MULTIPLE` (any thread may call MPI); a library
//!    that grants less is an error. The rank and the number of ranks come from
//!    `MPI_COMM_WORLD`.
//! 3. **Same binary.** Every rank hashes the file of its own executable (`/proc/self/exe`:
//!    length and SipHash of the content) and the results are all-gathered, so *every* rank
//!    compares every rank's hash with rank 0's and fails with the same message naming the
//!    ranks that differ (or could not read their executable). A request carries code ids
//!    (offsets of tables in the binary), which mean the same thing only in the same build.
//! 4. **Job token.** Rank 0 draws 64 random bits from the OS (`/dev/urandom`) and broadcasts
//!    them. Every incoming batch is checked against this token, so that a message of another
//!    job (or of an earlier one on a reused port) is refused instead of executed
//!    (`tests/rack.rs`, `forged_token_is_refused_on_every_rank`).
//!    ("Job", not "run": a rack job is one `mpirun`, which may hold many
//!    [`crate::Runtime::run`]s.)
//!
//! The bootstrap is **collective**: on every rank, one of the calls above must come, or the
//! ranks that did call wait for the others (until `mpirun` ends the job because a rank exited).
//!
//! # Fate sharing
//!
//! A rack job lives or dies whole. With more than one rank:
//!
//! * A panic on a thread that is not a skein worker (typically `main` after `Runtime::run`
//!   returned an error that was unwrapped, or any panic that escapes) prints
//!   `skein: rank R: panicked at ...` and calls `MPI_Abort`, which ends every rank of the job
//!   at once with a non-zero status. Panics on workers are not escaping panics: the runtime
//!   catches them and `Runtime::run` returns [`Error::Panicked`], an ordinary error the
//!   program handles as it likes. A consequence: under `mpirun` with several ranks a panic
//!   outside the workers cannot be caught (with `catch_unwind` or by joining a
//!   `std::thread`); it ends the job. This is a panic hook, installed by the bootstrap: a
//!   program that sets its own hook afterwards must call the one it replaces
//!   (`std::panic::take_hook`), or it loses fate sharing for panics.
//! * A rank that dies without `MPI_Finalize` (killed with `kill -9`, `abort`) is noticed by
//!   `mpirun`, which kills the other ranks and reports the rank that died.
//! * [`abort`] ends the job on purpose, with a message naming the rank.
//!
//! # Invariants
//!
//! * MPI is initialised at most once per process, by the bootstrap (or by the program itself
//!   before it, in which case the program owns finalisation and the bootstrap only checks that
//!   `MPI_THREAD_MULTIPLE` was granted).
//! * rsmpi's `Universe` (whose `Drop` calls `MPI_Finalize`, which waits for every other rank)
//!   lives in a `static` and is never dropped by unwinding: statics are not dropped. It is
//!   finalised by an `atexit` handler, so a rank that returns from `main` or calls
//!   `std::process::exit` finalises, and the job ends cleanly once every rank has.
//! * rsmpi's communicators and requests are not `Send` under Open MPI: the bootstrap stores
//!   none (each of its MPI calls makes a fresh handle to `MPI_COMM_WORLD` on the calling
//!   thread and drops it there). The envelope transport (`transport`) keeps raw
//!   `mpi::ffi` handles in per-worker endpoints that move to their worker threads, which
//!   `MPI_THREAD_MULTIPLE` allows; its module docs give the rules.

#[cfg(feature = "mpi")]
mod exe_hash;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(any(test, feature = "mpi"))]
pub(crate) mod outcome;
#[cfg(all(test, feature = "mpi"))]
pub(crate) mod relaunch;

use crate::error::{Error, Result};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// This process's rank as soon as the bootstrap knows it (0 before), for messages printed
/// while the bootstrap itself runs (a panic in it, [`abort`]).
static RANK: AtomicUsize = AtomicUsize::new(0);

/// Where this process stands in the rack job: the bootstrap's outcome.
#[derive(Debug)]
struct Placement {
    rank: usize,
    ranks: usize,
    /// The job token; `None` outside `mpirun` (no job to tell apart).
    token: Option<u64>,
    /// Why this rank must not take part in a job (same on every rank), if so.
    failure: Option<String>,
}

static PLACEMENT: OnceLock<Placement> = OnceLock::new();

fn placement() -> &'static Placement {
    PLACEMENT.get_or_init(bootstrap)
}

#[cfg(feature = "mpi")]
fn bootstrap() -> Placement {
    mpi::bootstrap()
}

#[cfg(not(feature = "mpi"))]
fn bootstrap() -> Placement {
    Placement { rank: 0, ranks: 1, token: None, failure: None }
}

/// Runs the rack bootstrap if it has not run yet (see the module docs) and returns its
/// outcome: `Ok` when this process may take part in the job, the same error on every call
/// otherwise (an executable that differs from rank 0's, `MPI_THREAD_MULTIPLE` not granted,
/// ...). [`crate::Builder::build`] calls it; a program calls it itself only to fail early.
///
/// Without the `mpi` feature, or outside `mpirun`, it does nothing and returns `Ok`.
///
/// ```
/// skein::rack::init()?;
/// assert_eq!((skein::rank(), skein::ranks()), (0, 1)); // not under mpirun
/// # Ok::<(), skein::Error>(())
/// ```
pub fn init() -> Result<()> {
    let p = placement();
    match &p.failure {
        None => Ok(()),
        Some(message) => Err(Error::Rack { rank: p.rank, message: message.clone() }),
    }
}

/// This process's rank in the rack job: `0..ranks()`. It is 0 without the `mpi` feature and
/// outside `mpirun`. The first call may run the bootstrap, which is collective (module docs).
///
/// ```
/// if skein::rank() == 0 {
///     println!("only rank 0 prints the report");
/// }
/// ```
pub fn rank() -> usize {
    placement().rank
}

/// Number of ranks (processes) in the rack job: 1 without the `mpi` feature and outside
/// `mpirun`. The first call may run the bootstrap, which is collective (module docs).
pub fn ranks() -> usize {
    placement().ranks
}

/// The job token drawn by rank 0 at the bootstrap and shared with every rank: the same on
/// every rank of one `mpirun`, different (with overwhelming probability) between jobs.
/// `None` outside `mpirun`, without the `mpi` feature, or when the bootstrap failed (then
/// [`init`] says why).
pub fn job_token() -> Option<u64> {
    let p = placement();
    if p.failure.is_some() {
        None
    } else {
        p.token
    }
}

/// Ends the whole rack job now: prints `skein: rank R: <message>` on standard error and calls
/// `MPI_Abort` with `code`, which ends every rank with a non-zero status. Outside `mpirun` it
/// prints the same line and exits the process with `code` (`std::process::exit`).
///
/// For failures the program cannot recover from where other ranks might otherwise wait for
/// this one forever. It does not run the bootstrap: before it (or outside `mpirun`) the rank
/// printed is 0.
pub fn abort(code: i32, message: &str) -> ! {
    let rank = RANK.load(Ordering::Relaxed);
    eprintln!("skein: rank {rank}: {message}");
    #[cfg(feature = "mpi")]
    mpi::abort_job(code);
    #[cfg(not(feature = "mpi"))]
    std::process::exit(code)
}

/// For a program about to exit after an error that may be this rank's alone (a file it could
/// not write, a check only it failed): at exit `MPI_Finalize` waits for every other rank, and
/// they may be waiting for this one in a collective, forever. This starts a watchdog thread:
/// if the process is still alive `grace` from now, it prints `skein: rank R: ...` and ends the
/// process at once without finalising (`_exit`), which `mpirun` takes for a failed rank and
/// ends the job with a non-zero status. When every rank failed alike, they all finalise and
/// exit before the watchdog fires. A no-op on one rank and outside `mpirun`.
pub fn exit_within(grace: std::time::Duration, code: i32) {
    if ranks() <= 1 {
        return;
    }
    let rank = RANK.load(Ordering::Relaxed);
    std::thread::spawn(move || {
        std::thread::sleep(grace);
        eprintln!(
            "skein: rank {rank}: still not finished {grace:?} after an error (another rank may \
             be waiting for this one): ending the job"
        );
        // SAFETY: `_exit` ends the process without running exit handlers or destructors; it
        // touches no memory of ours.
        unsafe { libc::_exit(code) }
    });
}

/// `Ok` on one rank (and outside `mpirun`); on more,
/// [`Error::RackNotYetSupported`], for program entry points that do not run their work over
/// ranks (a baseline engine, a file generator). Runs
/// the bootstrap first and returns its error, if any.
///
/// Any program entry point that would otherwise do its work once per rank, each on its own,
/// calls it, so that a multi-rank launch is refused instead of running several independent
/// copies. ([`crate::Runtime::run`] does not: it runs over the ranks.)
///
/// ```
/// skein::rack::require_one_rank()?; // outside mpirun: one rank
/// # Ok::<(), skein::Error>(())
/// ```
pub fn require_one_rank() -> Result<()> {
    init()?;
    let p = placement();
    if p.ranks > 1 {
        return Err(Error::RackNotYetSupported { rank: p.rank, ranks: p.ranks });
    }
    Ok(())
}

/// The start of a run over ranks: every rank's worker count, loopback setting and transport
/// (a code; `names` says what each is called), all-gathered and checked alike on every rank
/// (collective; see `mpi::agree_shape`).
#[cfg(feature = "mpi")]
pub(crate) fn agree_shape(
    workers: usize,
    loopback: usize,
    transport: u64,
    names: fn(u64) -> &'static str,
) -> std::result::Result<(), String> {
    mpi::agree_shape(workers, loopback, transport, names)
}

/// Every rank's outcome of a step, agreed (collective; see `mpi::agree_ok`): every rank
/// fails when one does.
#[cfg(feature = "mpi")]
pub(crate) fn agree_ok<T>(mine: std::result::Result<T, String>) -> std::result::Result<T, String> {
    mpi::agree_ok(mine)
}

thread_local! {
    /// True on skein's worker threads: the runtime catches their panics and reports them as
    /// errors, so they are not escaping panics (module docs, fate sharing).
    static WORKER_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a skein worker for the rest of its life.
pub(crate) fn mark_worker_thread() {
    WORKER_THREAD.with(|w| w.set(true));
}

/// Whether the calling thread is a skein worker (see [`mark_worker_thread`]).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn is_worker_thread() -> bool {
    WORKER_THREAD.try_with(|w| w.get()).unwrap_or(false)
}

#[cfg(test)]
mod tests;
