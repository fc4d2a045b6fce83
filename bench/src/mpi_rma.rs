//! The one-sided MPI baseline of `skein bench fetch-add --mpi` (feature `mpi`): the counters
//! live in an MPI window (`MPI_Win_allocate`, one `u64` per counter a rank holds, placed as
//! [`crate::mpi_baselines::owner`] says) and every increment is an `MPI_Accumulate` with
//! `MPI_SUM` on the owner's counter, in one passive-target epoch (`MPI_Win_lock_all`), with
//! `MPI_Win_flush_all` every [`FLUSH_EVERY`] increments (so at most that many are
//! outstanding) and once at the end. This is how an MPI program increments remote counters
//! without their owner taking part; the aggregated baseline beside it is how AML-style code
//! does it with messages.
//!
//! rsmpi 0.8 has no window API, so this module calls MPI's C functions through `mpi::ffi`.
//!
//! # Invariants
//!
//! 1. A [`Window`] is made, used and freed by every rank together, in the same order (every
//!    function here is collective, as in [`crate::mpi_baselines`]); it lives inside one
//!    function call and is never shared with another thread.
//! 2. While a `Window` lives its passive-target epoch is open (`lock_all` in `new`,
//!    `unlock_all` in `drop`, before `MPI_Win_free`), so `MPI_Accumulate` and the flushes are
//!    always inside an epoch.
//! 3. The window memory (`base`, `len` counters) belongs to MPI from `MPI_Win_allocate` to
//!    `MPI_Win_free`. This rank writes it directly only before any rank can target it (the
//!    zeroing in `new`, made visible by `MPI_Win_sync` before the barrier that lets other ranks
//!    start), and reads it only in [`Window::settled`], after every rank has flushed its
//!    operations and passed a barrier, and after `MPI_Win_sync`.
//! 4. The origin buffer of every accumulate is [`ONE`], a `static` that is never written,
//!    so it stays valid and unchanged until the operation completes at a flush.

use crate::mpi_baselines::{check_adds, held, issued_sum, owner, AddTotals};
use anyhow::bail;
use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::os::raw::{c_int, c_void};
use std::time::Instant;

/// Increments issued between two `MPI_Win_flush_all` calls.
pub(crate) const FLUSH_EVERY: usize = 1024;

/// The origin value of every accumulate (invariant 4).
static ONE: u64 = 1;

/// An MPI error code as an error naming the call.
fn ok(rc: c_int, call: &str) -> anyhow::Result<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        bail!("mpi rma fetch-add: {call} failed with MPI error code {rc}")
    }
}

/// A window of `len` `u64` counters on this rank, in an open passive-target epoch.
struct Window {
    win: ffi::MPI_Win,
    base: *mut u64,
    len: usize,
}

impl Window {
    /// Collective: allocates and zeroes this rank's `len` counters, opens the epoch, and
    /// returns once every rank's counters are zeroed.
    fn new(world: &SimpleCommunicator, len: usize) -> anyhow::Result<Window> {
        let mut base: *mut u64 = std::ptr::null_mut();
        let mut win = ffi::MPI_Win(std::ptr::null_mut());
        let bytes = ffi::MPI_Aint::try_from(len.max(1) * 8)?;
        // SAFETY: MPI is initialised (the bootstrap) and not finalised; `base` and `win` are
        // valid places for the results; every rank calls this together (invariant 1).
        let rc = unsafe {
            ffi::MPI_Win_allocate(
                bytes,
                8,
                ffi::RSMPI_INFO_NULL,
                ffi::RSMPI_COMM_WORLD,
                (&mut base as *mut *mut u64).cast::<c_void>(),
                &mut win,
            )
        };
        ok(rc, "MPI_Win_allocate")?;
        // SAFETY: MPI_Win_allocate gave `len.max(1)` counters of 8 bytes at `base`, aligned
        // for the disp unit; no rank targets them before the barrier below (invariant 3).
        unsafe { std::ptr::write_bytes(base, 0, len) };
        let w = Window { win, base, len };
        // SAFETY: `win` is the live window just made (invariant 2: the epoch opens here).
        ok(unsafe { ffi::MPI_Win_lock_all(0, w.win) }, "MPI_Win_lock_all")?;
        // SAFETY: as above, inside the epoch; makes the zeroing visible to RMA.
        ok(unsafe { ffi::MPI_Win_sync(w.win) }, "MPI_Win_sync")?;
        world.barrier();
        Ok(w)
    }

    /// Adds 1 to counter `disp` of rank `rank` (completed by the next flush).
    #[inline]
    fn add(&self, rank: usize, disp: usize) -> anyhow::Result<()> {
        // SAFETY: the window is live and in its epoch (invariant 2); `ONE` outlives the
        // operation (invariant 4); `disp` is below the owner's counter count (`owner`), the
        // displacement being in counters (disp unit 8).
        let rc = unsafe {
            ffi::MPI_Accumulate(
                (&ONE as *const u64).cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                rank as c_int,
                disp as ffi::MPI_Aint,
                1,
                ffi::RSMPI_UINT64_T,
                ffi::RSMPI_SUM,
                self.win,
            )
        };
        ok(rc, "MPI_Accumulate")
    }

    /// Completes this rank's outstanding accumulates at their targets.
    fn flush(&self) -> anyhow::Result<()> {
        // SAFETY: the window is live and in its epoch (invariant 2).
        ok(unsafe { ffi::MPI_Win_flush_all(self.win) }, "MPI_Win_flush_all")
    }

    /// Collective: once every rank has flushed, this rank's counters.
    fn settled(&self, world: &SimpleCommunicator) -> anyhow::Result<Vec<u64>> {
        self.flush()?;
        world.barrier();
        // SAFETY: the window is live and in its epoch; after every rank's flush and the
        // barrier no operation on it is outstanding, and the sync makes them visible here.
        ok(unsafe { ffi::MPI_Win_sync(self.win) }, "MPI_Win_sync")?;
        // SAFETY: `len` counters at `base` (MPI_Win_allocate), no RMA on them any more
        // (invariant 3); copied out before the window is freed.
        Ok(unsafe { std::slice::from_raw_parts(self.base, self.len) }.to_vec())
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: the window is live and its epoch open (invariant 2); every rank drops its
        // window at the same point (invariant 1). Errors abort under MPI's default handler.
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}

/// The one-sided fetch-and-add: this rank applies the increments of `seq` (counter numbers
/// in `0..k`) with `MPI_Accumulate` (module docs), its own counters included.
pub(crate) fn rma_fetch_add(seq: &[u32], k: usize) -> anyhow::Result<AddTotals> {
    const WHAT: &str = "mpi rma fetch-add";
    let world = SimpleCommunicator::world();
    let me = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let check = issued_sum(seq);
    let w = Window::new(&world, held(k, ranks, me))?;
    let t0 = Instant::now();
    for chunk in seq.chunks(FLUSH_EVERY) {
        for &i in chunk {
            let (d, l) = owner(i, ranks);
            w.add(d, l)?;
        }
        w.flush()?;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let counters = w.settled(&world)?;
    drop(w);
    check_adds(&world, WHAT, seq.len() as u64, check, &counters, seconds)
}
