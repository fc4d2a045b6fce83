//! The bootstrap over MPI (feature `mpi`): initialisation, the same-binary check, the job
//! token, the panic hook and finalisation at exit. See the parent module for the steps and
//! the invariants; this file keeps to them:
//!
//! * `UNIVERSE` is the only place rsmpi's `Universe` lives; only [`finalize_at_exit`] takes
//!   it out (and drops it, which calls `MPI_Finalize`).
//! * No communicator outlives the function that made it (they are not `Send`).

use super::exe_hash::{self, Fingerprint};
use super::{is_worker_thread, Placement, RANK};
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;
use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// rsmpi's `Universe`, kept in a static so that it is never dropped by unwinding: `None`
/// before initialisation, after finalisation, or when the program initialised MPI itself.
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

/// Environment variables set by MPI launchers for the processes they start: Open MPI's
/// `mpirun`, PMI (MPICH's Hydra) and PMIx.
const LAUNCHER_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"];

/// Whether this process was started by an MPI launcher.
fn under_launcher() -> bool {
    LAUNCHER_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

pub(super) fn bootstrap() -> Placement {
    if !under_launcher() && !mpi::is_initialized() {
        return Placement { rank: 0, ranks: 1, token: None, failure: None };
    }
    if mpi::is_finalized() {
        // MPI cannot be initialised twice; the program finalised it before skein started.
        return Placement {
            rank: 0,
            ranks: 1,
            token: None,
            failure: Some(
                "MPI was already finalised by the program before skein's bootstrap".into(),
            ),
        };
    }
    let threading = match mpi::initialize_with_threading(Threading::Multiple) {
        Some((universe, provided)) => {
            *UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()) = Some(universe);
            // SAFETY: `finalize_at_exit` is a plain `extern "C" fn()` with no captured state;
            // atexit only stores the pointer and calls it once, at exit.
            if unsafe { libc::atexit(finalize_at_exit) } != 0 {
                eprintln!(
                    "skein: cannot register MPI finalisation at exit; ranks may not end cleanly"
                );
            }
            provided
        }
        // The program initialised MPI itself and owns its finalisation.
        None => mpi::environment::threading_support(),
    };
    let world = SimpleCommunicator::world();
    let rank = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    RANK.store(rank, Ordering::Relaxed);
    if ranks > 1 {
        install_panic_hook();
    }
    let mut placement = Placement { rank, ranks, token: None, failure: None };
    if threading != Threading::Multiple {
        // Every rank runs the same library, so every rank fails here alike, without a
        // collective call.
        placement.failure = Some(format!(
            "the MPI library granted thread level {threading:?}; skein needs MPI_THREAD_MULTIPLE \
             (use an MPI built with thread support, e.g. Debian's Open MPI)"
        ));
        return placement;
    }
    let own = exe_hash::own_executable();
    placement.failure = same_binary(&world, rank, &own);
    match share_token(&world, rank) {
        Ok(token) => placement.token = Some(token),
        Err(e) => {
            let e = format!("rank 0 could not draw the job token: {e}");
            placement.failure = Some(match placement.failure {
                Some(f) => format!("{f}; {e}"),
                None => e,
            });
        }
    }
    placement
}

/// All-gathers every rank's fingerprint (status, length, hash) and compares each with rank
/// 0's, so that every rank reaches the same verdict. Returns the failure message, if any.
fn same_binary(
    world: &SimpleCommunicator,
    rank: usize,
    own: &Result<Fingerprint, String>,
) -> Option<String> {
    let mine: [u64; 3] = match own {
        Ok(f) => [0, f.len, f.hash],
        Err(_) => [1, 0, 0],
    };
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let mut all = vec![0u64; 3 * ranks];
    world.all_gather_into(&mine[..], &mut all[..]);
    let verdict = compare_fingerprints(&all);
    let mut message = verdict?;
    if let Err(e) = own {
        message.push_str(&format!("; rank {rank}: {e}"));
    }
    Some(message)
}

/// The verdict on all-gathered fingerprints: `[status, len, hash]` per rank in rank order,
/// status 0 when the rank could read its executable. `None` when every rank runs rank 0's.
fn compare_fingerprints(all: &[u64]) -> Option<String> {
    let per_rank: Vec<&[u64]> = all.chunks_exact(3).collect();
    let unreadable: Vec<usize> = (0..per_rank.len()).filter(|&r| per_rank[r][0] != 0).collect();
    let reference = per_rank[0];
    let differing: Vec<usize> = if reference[0] != 0 {
        Vec::new()
    } else {
        (1..per_rank.len())
            .filter(|&r| per_rank[r][0] == 0 && per_rank[r][1..] != reference[1..])
            .collect()
    };
    let list = |rs: &[usize]| rs.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !differing.is_empty() {
        let details: Vec<String> = differing
            .iter()
            .map(|&r| format!("rank {r}: {} bytes, hash {:016x}", per_rank[r][1], per_rank[r][2]))
            .collect();
        parts.push(format!(
            "rank(s) {} run a different executable than rank 0 (rank 0: {} bytes, hash {:016x}; \
             {}); every rank must run the same build of the program",
            list(&differing),
            reference[1],
            reference[2],
            details.join("; ")
        ));
    }
    if !unreadable.is_empty() {
        parts.push(format!(
            "rank(s) {} could not read their own executable to compare it with rank 0's",
            list(&unreadable)
        ));
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join("; "))
    }
}

/// Rank 0 draws the token and broadcasts it with a status word (so that a failure to draw
/// it reaches every rank instead of leaving them waiting).
fn share_token(world: &SimpleCommunicator, rank: usize) -> Result<u64, String> {
    let mut msg = [0u64; 2];
    let mut error = None;
    if rank == 0 {
        match random_u64() {
            Ok(t) => msg = [0, t],
            Err(e) => {
                msg = [1, 0];
                error = Some(e);
            }
        }
    }
    world.process_at_rank(0).broadcast_into(&mut msg[..]);
    match (msg[0], error) {
        (0, _) => Ok(msg[1]),
        (_, Some(e)) => Err(e),
        (_, None) => Err("see rank 0's message".into()),
    }
}

/// 64 random bits from the operating system.
fn random_u64() -> Result<u64, String> {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    Ok(u64::from_ne_bytes(b))
}

/// With more than one rank: a panic outside skein's workers ends the whole job (parent
/// module, fate sharing). The previous hook (the default message, backtraces) runs first.
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        if is_worker_thread() {
            // The runtime catches it and `Runtime::run` reports it as an error.
            return;
        }
        let rank = RANK.load(Ordering::Relaxed);
        let at = info.location().map(|l| format!(" at {l}")).unwrap_or_default();
        let what = crate::error::panic_message(info.payload());
        let thread = std::thread::current().name().unwrap_or("<unnamed>").to_string();
        eprintln!(
            "skein: rank {rank}: thread '{thread}' panicked{at}: {what}; ending every rank of \
             the rack job (MPI_Abort)"
        );
        abort_job(101);
    }));
}

/// `MPI_Abort` on the world communicator if MPI is up, else a plain exit. Standard output is
/// flushed first: `MPI_Abort` ends the process without Rust's clean-up.
pub(super) fn abort_job(code: i32) -> ! {
    let _ = std::io::Write::flush(&mut std::io::stdout());
    if mpi::is_initialized() && !mpi::is_finalized() {
        SimpleCommunicator::world().abort(code)
    }
    std::process::exit(code)
}

/// Called by `exit` (after `main` returns, or from `std::process::exit`): finalises MPI by
/// dropping the `Universe`. `MPI_Finalize` returns once every rank has called it.
extern "C" fn finalize_at_exit() {
    let universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(universe);
}

/// All-gathers whether `mine` failed (collective): `mine` itself on the ranks where every rank
/// succeeded or where this rank failed; where only others failed, an error naming the first
/// of them. So every rank fails when one does, and no rank goes on into a collective the
/// others will not reach.
pub(super) fn agree_ok<T>(mine: Result<T, String>) -> Result<T, String> {
    let world = SimpleCommunicator::world();
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let flag = [u8::from(mine.is_err())];
    let mut all = vec![0u8; ranks];
    world.all_gather_into(&flag[..], &mut all[..]);
    match (mine, all.iter().position(|&f| f != 0)) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(r)) => Err(format!("rank {r} failed (its own error says why)")),
        (Ok(v), None) => Ok(v),
    }
}

/// The most workers of a run over all ranks: a handle's trustee field has 12 bits
/// (`trust/mod.rs`).
const MAX_GLOBAL_WORKERS: u64 = 4096;

/// All-gathers every rank's worker count, loopback setting and transport (a code, named by
/// `transport_names`) at the start of a run over ranks, so that every rank takes the same
/// decision (collective; on the thread that calls `Runtime::run`). Errors, the same on every
/// rank, when a rank asks for a loopback split, when the ranks' worker counts or transports
/// differ, or when there are more than 4096 workers in all.
pub(super) fn agree_shape(
    workers: usize,
    loopback: usize,
    transport: u64,
    transport_names: fn(u64) -> &'static str,
) -> Result<(), String> {
    let world = SimpleCommunicator::world();
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let mine = [workers as u64, loopback as u64, transport];
    let mut all = vec![0u64; 3 * ranks];
    world.all_gather_into(&mine[..], &mut all[..]);
    let per_rank: Vec<u64> = all.chunks_exact(3).map(|c| c[0]).collect();
    let kinds: Vec<u64> = all.chunks_exact(3).map(|c| c[2]).collect();
    if let Some(r) = kinds.iter().position(|&k| k != kinds[0]) {
        return Err(format!(
            "every rank must use the same transport (SKEIN_TRANSPORT): rank 0 uses {}, rank {r} \
             uses {}",
            transport_names(kinds[0]),
            transport_names(kinds[r])
        ));
    }
    if let Some(r) = all.chunks_exact(3).position(|c| c[1] > 1) {
        return Err(format!(
            "rank {r} asks for a loopback split (Builder::loopback_ranks or SKEIN_LOOPBACK_RANKS), \
             which cannot run under mpirun with more than one rank"
        ));
    }
    if per_rank.iter().any(|&w| w != per_rank[0]) {
        return Err(format!(
            "every rank must run the same number of workers; workers per rank: {per_rank:?}"
        ));
    }
    let total = per_rank[0].saturating_mul(ranks as u64);
    if total > MAX_GLOBAL_WORKERS {
        return Err(format!(
            "{ranks} ranks of {} workers make {total} workers; at most {MAX_GLOBAL_WORKERS}",
            per_rank[0]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
