//! The end of a run over MPI ranks (`docs/rack-mode.md` §1.2 item 6): every rank reports
//! what happened on it to rank 0, rank 0 decides the run's one outcome and every rank
//! returns it. This file holds the reports, the decision (a pure function, tested without
//! MPI) and, behind the `mpi` feature, the exchange (a gather of every report's head to
//! rank 0, then a broadcast of the decision as bytes; longer ones in a second gather or
//! broadcast).

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

/// Bytes each rank sends rank 0 in the first collective of [`exchange`]: its report's length
/// (8 bytes), then as much of the report as fits.
#[cfg(feature = "mpi")]
const HEAD_BYTES: usize = 4096;

/// Bytes of rank 0's first broadcast in [`exchange`]: what follows (8 bytes: [`DECIDED`],
/// [`DECIDED_LONG`] or [`SEND_REST`]), the decision's length (8 bytes), then as much of the
/// decision as fits.
#[cfg(feature = "mpi")]
const CAST_BYTES: usize = 16384;

/// The broadcast holds the whole decision.
#[cfg(feature = "mpi")]
const DECIDED: u64 = 1;
/// The broadcast holds the decision's first bytes; the rest follows in a second broadcast.
#[cfg(feature = "mpi")]
const DECIDED_LONG: u64 = 2;
/// A report did not fit its head: every rank sends the rest of its own (a second gather),
/// then rank 0 broadcasts again.
#[cfg(feature = "mpi")]
const SEND_REST: u64 = 3;

/// Sends this rank's report to rank 0, which decides; returns the decision (the outcome and
/// the job's statistics), the same on every rank. `workers` is the number of workers per rank.
/// **Collective** (every rank, on the thread that called `Runtime::run`).
///
/// Two collectives when the reports and the decision are short, as at the end of most runs
/// (a few hundred bytes of statistics per worker): a gather of a fixed head of every
/// report ([`HEAD_BYTES`]) and a broadcast of the decision ([`CAST_BYTES`]). Each collective
/// costs a hand-over through every rank, which on ranks that share cores is most of what a
/// run of a small search costs beside its rounds. A longer report (a long panic message,
/// a large value of `main`) takes a gather of the rests; a longer decision, a second
/// broadcast.
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
    Count::try_from(mine.len()).map_err(|_| "a rank report above 2 GiB")?;
    let fits = mine.len().min(HEAD_BYTES - 8);
    let mut head = vec![0u8; HEAD_BYTES];
    head[..8].copy_from_slice(&(mine.len() as u64).to_le_bytes());
    head[8..8 + fits].copy_from_slice(&mine[..fits]);
    let rest = &mine[fits..];
    let mut cast = vec![0u8; CAST_BYTES];
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    if world.rank() == 0 {
        let mut heads = vec![0u8; ranks * HEAD_BYTES];
        root.gather_into_root(&head[..], &mut heads[..]);
        let lens: Vec<usize> = heads.chunks(HEAD_BYTES).map(|h| word(h, 0) as usize).collect();
        let mut all: Vec<Vec<u8>> = heads
            .chunks(HEAD_BYTES)
            .zip(&lens)
            .map(|(h, &len)| h[8..8 + len.min(HEAD_BYTES - 8)].to_vec())
            .collect();
        if lens.iter().any(|&l| l > HEAD_BYTES - 8) {
            cast[..8].copy_from_slice(&SEND_REST.to_le_bytes());
            root.broadcast_into(&mut cast[..]);
            let counts: Vec<Count> = lens
                .iter()
                .map(|&l| Count::try_from(l.saturating_sub(HEAD_BYTES - 8)).unwrap_or(0))
                .collect();
            let displs: Vec<Count> = counts
                .iter()
                .scan(0 as Count, |at, &c| {
                    let d = *at;
                    *at += c;
                    Some(d)
                })
                .collect();
            let total: usize = counts.iter().map(|&c| c as usize).sum();
            let mut rests = vec![0u8; total];
            {
                let mut part = PartitionMut::new(&mut rests[..], &counts[..], &displs[..]);
                root.gather_varcount_into_root(rest, &mut part);
            }
            for ((r, &d), &c) in all.iter_mut().zip(&displs).zip(&counts) {
                r.extend_from_slice(&rests[d as usize..(d + c) as usize]);
            }
        }
        let reports: Vec<RankReport> = all
            .iter()
            .map(|bytes| {
                crate::wire::codec::decode::<RankReport>(bytes).unwrap_or_else(|e| RankReport {
                    internal: vec![format!("its end-of-run report does not decode: {e}")],
                    ..RankReport::default()
                })
            })
            .collect();
        let decision = Decision { outcome: decide(&reports), stats: job_stats(&reports, workers) };
        let decided = crate::wire::codec::encode(&decision).map_err(|e| e.to_string())?;
        let first = decided.len().min(CAST_BYTES - 16);
        let kind = if first == decided.len() { DECIDED } else { DECIDED_LONG };
        cast[..8].copy_from_slice(&kind.to_le_bytes());
        cast[8..16].copy_from_slice(&(decided.len() as u64).to_le_bytes());
        cast[16..16 + first].copy_from_slice(&decided[..first]);
        root.broadcast_into(&mut cast[..]);
        if kind == DECIDED_LONG {
            let mut more = decided[first..].to_vec();
            root.broadcast_into(&mut more[..]);
        }
        return Ok(decision);
    }
    root.gather_into(&head[..]);
    root.broadcast_into(&mut cast[..]);
    if word(&cast, 0) == SEND_REST {
        root.gather_varcount_into(rest);
        root.broadcast_into(&mut cast[..]);
    }
    let (kind, len) = (word(&cast, 0), word(&cast, 8) as usize);
    let first = len.min(CAST_BYTES - 16);
    let mut decided = cast[16..16 + first].to_vec();
    match kind {
        DECIDED => {}
        DECIDED_LONG => {
            let mut more = vec![0u8; len - first];
            root.broadcast_into(&mut more[..]);
            decided.extend_from_slice(&more);
        }
        k => return Err(format!("rank 0 broadcast an end-of-run message of kind {k}")),
    }
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
