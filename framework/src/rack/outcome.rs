//! The end of a run over MPI ranks (`docs/rack-mode.md` §1.2 item 6): every rank reports
//! what happened on it to rank 0, rank 0 decides the run's one outcome and every rank
//! returns it. This file holds the reports, the decision (a pure function, tested without
//! MPI) and, behind the `mpi` feature, the exchange (`MPI_Gatherv` to rank 0, then
//! `MPI_Bcast` of the decision as bytes).

use crate::error::Error;
use crate::stats::WorkerStats;
use serde::{Deserialize, Serialize};

/// What one rank knows at the end of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct RankReport {
    /// The errors recorded on this rank's workers, in order (panics of user code with nobody
    /// to resume them, refused envelopes, ...).
    pub(crate) errors: Vec<String>,
    /// The deadlock the detector found (the same on every rank), if any.
    pub(crate) deadlock: Option<(u64, bool)>,
    /// Failures of the runtime itself on this rank (a worker thread that could not start,
    /// a transport that did not close cleanly).
    pub(crate) internal: Vec<String>,
    /// Whether the run was stopped on this rank by a refused message (`RunState::aborted`).
    pub(crate) aborted: bool,
    /// On the rank that ran `main`: its result encoded with `wire::codec`, or why there is
    /// none (its panic message, an encoding error). `None` elsewhere.
    pub(crate) main: Option<Result<Vec<u8>, MainFailure>>,
    /// The statistics of this rank's workers, in order of their global ids.
    pub(crate) stats: Vec<WorkerStats>,
}

/// Why `main` gave no value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) enum MainFailure {
    /// It panicked, with this message.
    Panicked(String),
    /// Its value could not be encoded.
    Encode(String),
    /// It never ran to its end.
    Missing,
}

/// The run's outcome, decided by rank 0 and the same on every rank.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) enum Outcome {
    /// `main`'s value, encoded.
    Ok(Vec<u8>),
    /// [`Error::Panicked`].
    Panicked { first: String, count: usize },
    /// [`Error::Refused`].
    Refused { first: String, count: usize },
    /// [`Error::Deadlock`].
    Deadlock { blocked: u64, main_finished: bool },
    /// [`Error::Internal`], naming the rank.
    Internal(String),
}

impl Outcome {
    /// Whether the run ended as runs end when the runtime works: `main`'s value, or user
    /// panics or refusals (caught, the run went on to quiescence). A run that ended so left
    /// every transport empty, on every rank (each rank's close reports leftovers as an
    /// internal error); the shared-memory rings may serve the next run (`transport::shm`).
    #[cfg(feature = "mpi")]
    pub(crate) fn leaves_transport_clean(&self) -> bool {
        matches!(self, Outcome::Ok(_) | Outcome::Panicked { .. } | Outcome::Refused { .. })
    }

    /// `main`'s encoded value, or the error this outcome is.
    pub(crate) fn into_result(self) -> Result<Vec<u8>, Error> {
        match self {
            Outcome::Ok(b) => Ok(b),
            Outcome::Panicked { first, count } => Err(Error::Panicked { first, count }),
            Outcome::Refused { first, count } => Err(Error::Refused { first, count }),
            Outcome::Deadlock { blocked, main_finished } => {
                Err(Error::Deadlock { blocked, main_finished })
            }
            Outcome::Internal(m) => Err(Error::Internal(m)),
        }
    }
}

/// Rank 0's decision over every rank's report (in rank order), with the precedence of a run
/// in one process: a failure of the runtime first, then panics (`main`'s first, then every
/// rank's recorded errors in rank order, those of ranks above 0 prefixed with their rank),
/// then a deadlock, then `main`'s value. The errors of a run that a refused message stopped
/// (on any rank) are that refusal, not panics.
pub(crate) fn decide(reports: &[RankReport]) -> Outcome {
    for (r, rep) in reports.iter().enumerate() {
        if let Some(m) = rep.internal.first() {
            return Outcome::Internal(format!("rank {r}: {m}"));
        }
    }
    let mut errors = Vec::new();
    let main = reports.iter().find_map(|r| r.main.clone());
    if let Some(Err(MainFailure::Panicked(m))) = &main {
        errors.push(format!("main fiber panicked: {m}"));
    }
    for (r, rep) in reports.iter().enumerate() {
        for e in &rep.errors {
            errors.push(if r == 0 { e.clone() } else { format!("rank {r}: {e}") });
        }
    }
    if let Some(first) = errors.first() {
        let (first, count) = (first.clone(), errors.len());
        if reports.iter().any(|r| r.aborted) {
            return Outcome::Refused { first, count };
        }
        return Outcome::Panicked { first, count };
    }
    if let Some((blocked, main_finished)) = reports.iter().find_map(|r| r.deadlock) {
        return Outcome::Deadlock { blocked, main_finished };
    }
    match main {
        Some(Ok(bytes)) => Outcome::Ok(bytes),
        Some(Err(MainFailure::Encode(e))) => {
            Outcome::Internal(format!("rank 0: the value of main could not be encoded: {e}"))
        }
        _ => Outcome::Internal("main fiber produced no result".into()),
    }
}

/// The job's statistics: every rank's [`RankReport::stats`] in rank order, a rank with
/// another count than `workers` (a report that did not decode) padded or cut to `workers`
/// entries, so that entry `i` is global worker `i`.
pub(crate) fn job_stats(reports: &[RankReport], workers: usize) -> Vec<WorkerStats> {
    let mut all = Vec::with_capacity(reports.len() * workers);
    for rep in reports {
        let mut s = rep.stats.clone();
        s.resize(workers, WorkerStats::default());
        all.extend(s);
    }
    all
}

/// What rank 0 broadcasts at the end of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Decision {
    /// The run's outcome ([`decide`]).
    pub(crate) outcome: Outcome,
    /// Every worker's statistics, by global id ([`job_stats`]).
    pub(crate) stats: Vec<WorkerStats>,
}

/// Sends this rank's report to rank 0, which decides; returns the decision (the outcome and
/// the job's statistics), the same on every rank. `workers` is the number of workers per rank.
/// **Collective** (every rank, on the thread that called `Runtime::run`).
#[cfg(feature = "mpi")]
pub(crate) fn exchange(report: &RankReport, workers: usize) -> Result<Decision, String> {
    use mpi::datatype::PartitionMut;
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use mpi::Count;

    let world = SimpleCommunicator::world();
    let root = world.process_at_rank(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let mine = crate::wire::codec::encode(report).map_err(|e| e.to_string())?;
    let len = Count::try_from(mine.len()).map_err(|_| "a rank report above 2 GiB")?;
    let mut decided: Vec<u8> = Vec::new();
    if world.rank() == 0 {
        let mut lens = vec![0 as Count; ranks];
        root.gather_into_root(&len, &mut lens[..]);
        let displs: Vec<Count> = lens
            .iter()
            .scan(0 as Count, |at, &l| {
                let d = *at;
                *at += l;
                Some(d)
            })
            .collect();
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            root.gather_varcount_into_root(&mine[..], &mut part);
        }
        let mut reports = Vec::with_capacity(ranks);
        for (&d, &l) in displs.iter().zip(&lens) {
            let bytes = &all[d as usize..(d + l) as usize];
            match crate::wire::codec::decode::<RankReport>(bytes) {
                Ok(rep) => reports.push(rep),
                Err(e) => reports.push(RankReport {
                    internal: vec![format!("its end-of-run report does not decode: {e}")],
                    ..RankReport::default()
                }),
            }
        }
        let decision = Decision { outcome: decide(&reports), stats: job_stats(&reports, workers) };
        decided = crate::wire::codec::encode(&decision).map_err(|e| e.to_string())?;
    } else {
        root.gather_into(&len);
        root.gather_varcount_into(&mine[..]);
    }
    let mut n = decided.len() as u64;
    root.broadcast_into(&mut n);
    decided.resize(n as usize, 0);
    root.broadcast_into(&mut decided[..]);
    crate::wire::codec::decode::<Decision>(&decided).map_err(|e| e.to_string())
}

/// A counter of the runs of this process that span MPI ranks: every rank calls
/// `Runtime::run` in the same order (it is collective), so the n-th run has number n on
/// every rank. Envelopes carry it (`job_run`), so a batch of another run is refused.
#[cfg(feature = "mpi")]
pub(crate) fn next_job_run() -> u32 {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

#[cfg(test)]
mod tests;
