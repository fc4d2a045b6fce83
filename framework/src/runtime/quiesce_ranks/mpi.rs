//! [`MpiAllReduce`]: the all-reduce seam over `MPI_Iallreduce` (feature `mpi`).
//!
//! rsmpi's safe non-blocking collectives return a request that borrows a scope and is not
//! `Send`, which a poll-style call made from a worker's idle loop, round after round, cannot
//! hold. So this type keeps raw handles and calls `mpi::ffi` directly.
//!
//! # Invariants (every `unsafe` block below relies on them)
//!
//! 1. `comm` is a duplicate of `MPI_COMM_WORLD` made by [`MpiAllReduce::new`] and used by
//!    this value only: no other collective can match ours, and it is freed at most once (in
//!    `drop`, and only when no all-reduce is outstanding on it).
//! 2. `outstanding` is true exactly from a successful `MPI_Iallreduce` until the `MPI_Test`
//!    that reports it complete. Meanwhile MPI owns `send` and `recv`: they are not read,
//!    written, resized or freed (dropped with an all-reduce outstanding, they are leaked,
//!    since a collective request cannot be cancelled), and `request` is the request MPI gave.
//! 3. The value is used by one thread at a time (`&mut self` on every call); moving it to
//!    another thread is allowed because the bootstrap requires `MPI_THREAD_MULTIPLE`
//!    (`crate::rack`), under which any thread may call MPI on any handle.

// `Runtime::run` over MPI ranks makes one per run (`runtime::run_ranks`).

use super::AllReduce;
use mpi::ffi;
use std::os::raw::c_int;

/// A sum all-reduce over `u64`s on a communicator of its own (a duplicate of
/// `MPI_COMM_WORLD`), non-blocking: `MPI_Iallreduce` to start, `MPI_Test` to poll.
pub(crate) struct MpiAllReduce {
    comm: ffi::MPI_Comm,
    request: ffi::MPI_Request,
    send: Vec<u64>,
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
        // valid place for MPI to write the new handle.
        let comm = unsafe {
            let mut comm = ffi::RSMPI_COMM_NULL;
            check(ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm), "MPI_Comm_dup");
            comm
        };
        // SAFETY: a constant of rsmpi's shim, read after initialisation.
        let request = unsafe { ffi::RSMPI_REQUEST_NULL };
        Ok(MpiAllReduce { comm, request, send: Vec::new(), recv: Vec::new(), outstanding: false })
    }
}

impl AllReduce for MpiAllReduce {
    fn start(&mut self, values: &[u64]) {
        assert!(!self.outstanding, "an all-reduce is still outstanding");
        let count = c_int::try_from(values.len()).expect("all-reduce of more than i32::MAX values");
        // Not outstanding: the buffers are ours (invariant 2).
        self.send.clear();
        self.send.extend_from_slice(values);
        self.recv.clear();
        self.recv.resize(values.len(), 0);
        // SAFETY: `send` and `recv` hold `count` u64s each and stay untouched until MPI_Test
        // reports completion (invariant 2); `comm` is our live duplicate (invariant 1);
        // `RSMPI_UINT64_T` and `RSMPI_SUM` are rsmpi's constants for MPI_UINT64_T and
        // MPI_SUM, which sums unsigned values modulo 2^64; MPI writes the request handle.
        let rc = unsafe {
            ffi::MPI_Iallreduce(
                self.send.as_ptr().cast(),
                self.recv.as_mut_ptr().cast(),
                count,
                ffi::RSMPI_UINT64_T,
                ffi::RSMPI_SUM,
                self.comm,
                &mut self.request,
            )
        };
        check(rc, "MPI_Iallreduce");
        self.outstanding = true;
    }

    fn test(&mut self) -> Option<&[u64]> {
        if !self.outstanding {
            return None;
        }
        let mut flag: c_int = 0;
        // SAFETY: `request` is the live request of the outstanding all-reduce (invariant 2);
        // MPI_Test never blocks, sets it to MPI_REQUEST_NULL on completion, and the status
        // is ignored (rsmpi's constant for MPI_STATUS_IGNORE).
        let rc = unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        check(rc, "MPI_Test");
        if flag == 0 {
            return None;
        }
        self.outstanding = false;
        Some(&self.recv)
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
mod tests {
    use super::super::{Detector, RankCounters};
    use super::*;
    use crate::runtime::run_state::WorkerCounters;
    use crate::sync::proto;
    use std::time::{Duration, Instant};

    const RANK_SIDE: &str = "runtime::quiesce_ranks::mpi::tests::rank_side";
    const MARK: &str = "SKEIN_QUIESCE_RANKS_MPI_RANK_SIDE";
    const RANKS: usize = 3;

    fn wait(a: &mut MpiAllReduce) -> Vec<u64> {
        let start = Instant::now();
        loop {
            if let Some(s) = a.test() {
                return s.to_vec();
            }
            assert!(start.elapsed() < Duration::from_secs(20), "all-reduce never completed");
            std::thread::yield_now();
        }
    }

    #[test]
    #[ignore = "rank side of mpi_all_reduce_on_three_ranks; runs under mpirun only"]
    fn rank_side() {
        if std::env::var_os(MARK).is_none() {
            eprintln!("not under the mpirun of mpi_all_reduce_on_three_ranks: nothing to do");
            return;
        }
        crate::rack::init().expect("rack bootstrap");
        let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
        assert_eq!(ranks, RANKS);
        let mut a = MpiAllReduce::new().expect("MPI is up");
        assert_eq!(a.test(), None, "nothing outstanding");
        let r = rank as u64;
        for i in 0..200u64 {
            a.start(&[i, r, 1, u64::MAX]);
            assert_eq!(wait(&mut a), vec![3 * i, 3, 3, u64::MAX - 2], "round {i}");
        }

        // The detector over MPI: each rank's one worker creates and finishes a few tasks
        // while the rounds go on, each rank at its own pace. The rule of activity holds: a
        // root task, created before the first round, creates the others and finishes last.
        // Every rank must stop on the same detection with every task counted.
        let counters = [WorkerCounters::new(RANKS)];
        let mut det = Detector::new(a);
        let tasks = 5 + r;
        proto::bump(&counters[0].created, 1); // the root
        let (mut created, mut polls) = (1, 0u64);
        let start = Instant::now();
        let verdict = loop {
            assert!(start.elapsed() < Duration::from_secs(20), "no positive verdict");
            polls += 1;
            let finished = counters.finished();
            if polls % (2 + r) == 0 && created < tasks {
                proto::bump(&counters[0].created, 1); // by the root, still running
                created += 1;
            } else if finished + 1 < created || (created == tasks && finished < created) {
                // A child finishes; the root once every child has been created and finished.
                proto::bump(&counters[0].finished, 1);
            }
            if let Some(v) = det.poll(&counters[..]) {
                if v.quiescent {
                    break v;
                }
            }
            std::thread::yield_now();
        };
        assert_eq!(verdict.created, 15 + 3, "every task of every rank counted");
        assert_eq!(verdict.finished, verdict.created);
        // Same detection everywhere: Σd = 3·d and Σd² = 3·d² only if every d is equal.
        let mut a = MpiAllReduce::new().expect("MPI is up");
        let d = verdict.detection;
        a.start(&[d, d * d]);
        assert_eq!(wait(&mut a), vec![3 * d, 3 * d * d], "ranks stopped on different detections");
        println!("quiesce-ranks-mpi: rank {rank} ok, detection {d}");
    }

    #[test]
    fn mpi_all_reduce_on_three_ranks() {
        let out = crate::rack::relaunch::mpirun_self(
            RANKS,
            RANK_SIDE,
            (MARK, "1"),
            Duration::from_secs(60),
        )
        .unwrap_or_else(|report| panic!("mpirun failed or hung: {report}"));
        for rank in 0..RANKS {
            assert!(
                out.contains(&format!("quiesce-ranks-mpi: rank {rank} ok")),
                "rank {rank} did not report: {out}"
            );
        }
    }
}
