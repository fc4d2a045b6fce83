//! [`MpiAllReduce`]: the all-reduce seam over MPI point-to-point messages (feature `mpi`).
//!
//! # Why not `MPI_Iallreduce`
//!
//! The detector keeps one all-reduce outstanding on every rank almost all the time: a rank
//! posts round `d + 1` as soon as round `d` completed there, and it completes only once every
//! other rank has posted too. An outstanding `MPI_Iallreduce` is an active request of Open
//! MPI's libnbc, which *every* progress call of the process then polls under libnbc's lock
//! (`ompi_coll_libnbc_progress`): with the worker loop's one `MPI_Test` per pass, that was 30%
//! of a waiting worker's pass in `skein bench ping` and 8% of a busy one in `skein bench
//! echo` (perf, 2 ranks). A posted `MPI_Irecv` costs a progress call nothing until its
//! message arrives. So each round here is an exchange: every rank posts a receive from every
//! other rank, sends its vector to every other rank, and sums what it received with its own
//! once all of them are complete: `2 (R − 1)` messages of `8 · len` bytes per rank and round
//! (eager), one message latency per round. For many ranks a tree would send fewer messages;
//! the racks this runs on have a few.
//!
//! The sums are the same on every rank: wrapping `u64` addition is associative and
//! commutative, so the order in which a rank adds the vectors does not matter. Round `i`'s
//! message from rank `s` is matched by round `i`'s receive from `s`: every message goes on the
//! detector's own communicator with one tag, a rank posts round `i + 1`'s receives only after
//! round `i`'s completed, and MPI does not let two messages of one sender on one
//! communicator overtake each other (so a round-`i + 1` message that arrives early waits in
//! MPI's unexpected queue for its receive).
//!
//! Transport condition T1 of the module docs holds: a round completes on a rank only once it
//! has received every other rank's vector of that round, sent after that rank's reads (its
//! `start`), and the completed receives order memory (MPI's message passing).
//!
//! # Invariants (every `unsafe` block below relies on them)
//!
//! 1. `comm` is a duplicate of `MPI_COMM_WORLD` made by [`MpiAllReduce::new`] and used by
//!    this value only: no other message can match ours, and it is freed at most once (in
//!    `drop`, and only when nothing is outstanding on it).
//! 2. `outstanding` is true exactly from `start` until the `test` that finds every request of
//!    the round complete. Meanwhile MPI owns `send` and `recv`: they are not read, written,
//!    resized or freed (dropped with a round outstanding, they are leaked, and the
//!    communicator with them), and `requests` holds the round's requests (completed ones set
//!    to `MPI_REQUEST_NULL` by MPI).
//! 3. The value is used by one thread at a time (`&mut self` on every call); moving it to
//!    another thread is allowed because the bootstrap requires `MPI_THREAD_MULTIPLE`
//!    (`crate::rack`), under which any thread may call MPI on any handle.

// `Runtime::run` over MPI ranks makes one per run (`runtime::run_ranks`).

use super::AllReduce;
use mpi::ffi;
use std::os::raw::c_int;

/// The tag of every message of the exchange (on the detector's own communicator).
const TAG: c_int = 0x51;

/// A sum all-reduce over `u64`s on a communicator of its own (a duplicate of
/// `MPI_COMM_WORLD`), non-blocking: an exchange of point-to-point messages (module docs).
pub(crate) struct MpiAllReduce {
    comm: ffi::MPI_Comm,
    rank: usize,
    ranks: usize,
    /// The round's receives (one per other rank), then its sends (as many).
    requests: Vec<ffi::MPI_Request>,
    /// This rank's vector of the round (sent to every other rank); its sums once complete.
    send: Vec<u64>,
    /// The other ranks' vectors, `len` each, in rank order without this rank.
    recv: Vec<u64>,
    outstanding: bool,
}

// SAFETY: the raw handles are plain values that any thread may pass to MPI under
// `MPI_THREAD_MULTIPLE` (invariant 3), and `&mut self` on every method keeps their use to one
// thread at a time; the buffers are owned `Vec`s.
unsafe impl Send for MpiAllReduce {}

impl std::fmt::Debug for MpiAllReduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiAllReduce").field("outstanding", &self.outstanding).finish()
    }
}

/// Ends the job (`crate::rack::abort`) if an MPI call failed. With the default error handler
/// (`MPI_ERRORS_ARE_FATAL`, inherited by the duplicate) MPI aborts by itself first; this is
/// for a program that installed another handler.
fn check(rc: c_int, call: &str) {
    if rc != ffi::MPI_SUCCESS as c_int {
        crate::rack::abort(
            1,
            &format!("{call} failed (MPI error code {rc}) in quiescence detection"),
        );
    }
}

impl MpiAllReduce {
    /// Duplicates `MPI_COMM_WORLD` for the detector's all-reduces. **Collective**: every rank
    /// calls it, in the same order relative to its other collectives on `MPI_COMM_WORLD` (at
    /// the start of `Runtime::run`). Errors when MPI is not initialised (or already
    /// finalised): the rack bootstrap (`crate::rack::init`) must have run.
    pub(crate) fn new() -> Result<MpiAllReduce, String> {
        if !mpi::is_initialized() || mpi::is_finalized() {
            return Err("quiescence detection across ranks needs MPI initialised by the rack \
                        bootstrap (skein::rack::init), and not yet finalised"
                .into());
        }
        // SAFETY: MPI is initialised and not finalised (checked above); reading the extern
        // statics of rsmpi's shim is reading constants it set at load time; `comm` is a
        // valid place for MPI to write the new handle, `rank` and `size` for the numbers.
        let (comm, rank, size) = unsafe {
            let mut comm = ffi::RSMPI_COMM_NULL;
            check(ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm), "MPI_Comm_dup");
            let (mut rank, mut size): (c_int, c_int) = (0, 0);
            check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank");
            check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size");
            (comm, rank, size)
        };
        Ok(MpiAllReduce {
            comm,
            rank: usize::try_from(rank).unwrap_or(0),
            ranks: usize::try_from(size).unwrap_or(1).max(1),
            requests: Vec::new(),
            send: Vec::new(),
            recv: Vec::new(),
            outstanding: false,
        })
    }

    /// The other ranks, in order.
    fn others(&self) -> impl Iterator<Item = usize> {
        let me = self.rank;
        (0..self.ranks).filter(move |&r| r != me)
    }
}

impl AllReduce for MpiAllReduce {
    fn start(&mut self, values: &[u64]) {
        assert!(!self.outstanding, "an all-reduce is still outstanding");
        let len = values.len();
        let count = c_int::try_from(len).expect("all-reduce of more than i32::MAX values");
        // Not outstanding: the buffers are ours (invariant 2).
        self.send.clear();
        self.send.extend_from_slice(values);
        self.recv.clear();
        self.recv.resize(len * (self.ranks - 1), 0);
        self.requests.clear();
        // SAFETY: a constant of rsmpi's shim, read after initialisation.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        self.requests.resize(2 * (self.ranks - 1), null);
        let others: Vec<usize> = self.others().collect();
        let (recv, requests) = (self.recv.as_mut_ptr(), self.requests.as_mut_ptr());
        // Receives first, so that an early message of the other ranks finds one posted.
        for (k, &from) in others.iter().enumerate() {
            // SAFETY: `recv` holds `len` u64s for each of the `ranks − 1` other ranks, the
            // `k`-th block is this receive's, untouched until the round completes (invariant
            // 2); `requests` has a slot per receive and send (resized above, not resized
            // again until the round completes); `comm` is our live duplicate (invariant 1);
            // `from` is a rank of it; `RSMPI_UINT64_T` is rsmpi's constant for MPI_UINT64_T.
            let rc = unsafe {
                ffi::MPI_Irecv(
                    recv.add(k * len).cast(),
                    count,
                    ffi::RSMPI_UINT64_T,
                    from as c_int,
                    TAG,
                    self.comm,
                    requests.add(k),
                )
            };
            check(rc, "MPI_Irecv");
        }
        for (k, &to) in others.iter().enumerate() {
            // SAFETY: `send` holds `len` u64s, read by MPI and untouched by us until the
            // round completes (invariant 2); the request slot `ranks − 1 + k` is this send's;
            // `comm` and `to` as for the receives.
            let rc = unsafe {
                ffi::MPI_Isend(
                    self.send.as_ptr().cast(),
                    count,
                    ffi::RSMPI_UINT64_T,
                    to as c_int,
                    TAG,
                    self.comm,
                    requests.add(others.len() + k),
                )
            };
            check(rc, "MPI_Isend");
        }
        self.outstanding = true;
    }

    fn test(&mut self) -> Option<&[u64]> {
        if !self.outstanding {
            return None;
        }
        if !self.requests.is_empty() {
            let n = c_int::try_from(self.requests.len()).expect("fewer than 2^31 ranks");
            let mut flag: c_int = 0;
            // SAFETY: `requests` holds the round's requests, live or set to
            // MPI_REQUEST_NULL by an earlier test (invariant 2); MPI_Testall never blocks,
            // sets the completed ones to MPI_REQUEST_NULL, and the statuses are ignored
            // (rsmpi's constant for MPI_STATUSES_IGNORE).
            let rc = unsafe {
                ffi::MPI_Testall(
                    n,
                    self.requests.as_mut_ptr(),
                    &mut flag,
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            check(rc, "MPI_Testall");
            if flag == 0 {
                return None;
            }
        }
        self.outstanding = false;
        // Every request is complete: the buffers are ours again (invariant 2).
        let len = self.send.len();
        for block in self.recv.chunks_exact(len.max(1)) {
            super::fold(&mut self.send, block);
        }
        Some(&self.send)
    }

    fn waiting_for(&mut self) -> Option<Vec<usize>> {
        Some(self.missing())
    }
}

impl MpiAllReduce {
    /// The other ranks whose message of the outstanding round has not arrived: one
    /// `MPI_Test` of each receive still live (a completed one becomes `MPI_REQUEST_NULL`,
    /// which the next `MPI_Testall` counts as complete).
    fn missing(&mut self) -> Vec<usize> {
        if !self.outstanding {
            return Vec::new();
        }
        // SAFETY: a constant of rsmpi's shim, read after initialisation.
        let null = unsafe { ffi::RSMPI_REQUEST_NULL };
        let others: Vec<usize> = self.others().collect();
        let mut missing = Vec::new();
        for (k, &from) in others.iter().enumerate() {
            let Some(req) = self.requests.get_mut(k) else { break };
            if *req == null {
                continue;
            }
            let mut flag: c_int = 0;
            // SAFETY: `req` is the round's live receive from `from` (invariant 2); MPI_Test
            // never blocks, sets it to MPI_REQUEST_NULL once complete, and the status is
            // ignored (rsmpi's constant for MPI_STATUS_IGNORE).
            let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Test");
            if flag == 0 {
                missing.push(from);
            }
        }
        missing
    }
}

impl Drop for MpiAllReduce {
    fn drop(&mut self) {
        if self.outstanding {
            // MPI may still write `recv` (and read `send`): leak both, and the communicator
            // with them (invariant 2). Only reached when a run is torn down mid-round.
            std::mem::forget(std::mem::take(&mut self.send));
            std::mem::forget(std::mem::take(&mut self.recv));
            return;
        }
        if mpi::is_finalized() {
            return;
        }
        // SAFETY: `comm` is our duplicate, with nothing outstanding on it, freed only here
        // (invariant 1); MPI is not finalised (checked above).
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        check(rc, "MPI_Comm_free");
    }
}

/// The MPI all-reduce on three real ranks: the unit-test binary re-launches itself under
/// `mpirun -np 3`, running only the ignored rank-side test (marked by an environment
/// variable, so that `cargo test -- --ignored` outside `mpirun` skips it).
#[cfg(test)]
mod tests;
