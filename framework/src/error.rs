//! Public error type.

/// What can go wrong when building or running a [`crate::Runtime`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A builder setting is out of range.
    #[error("invalid skein runtime configuration: {0}")]
    Config(String),
    /// The operating system refused to start a worker thread or allocate fiber stacks.
    #[error("cannot start skein worker {worker}: {source}")]
    Spawn {
        /// The worker that failed to start.
        worker: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Every run id is held: 127 runs are running, or have ended while handles to their
    /// properties are still alive (a run's id is free again once its last property is gone).
    #[error(
        "too many skein runs at once: 127 are running or still have live properties; drop the \
         handles (Trust) of finished runs"
    )]
    TooManyRuns,
    /// User code panicked: the main fiber, another fiber nobody joined, a delegated closure
    /// of `apply_then`, or a continuation. The job ran to quiescence anyway.
    #[error("{count} {} during the skein job; first: {first}", plural(*.count as u64, "panic"))]
    Panicked {
        /// Message of the first panic recorded.
        first: String,
        /// Number of panics recorded.
        count: usize,
    },
    /// A message from another rank was refused (a forged or corrupted batch, a bad weight
    /// return), which stops the run on every rank before quiescence: its requests are lost.
    /// `first` names the rank that refused and the rank that sent it.
    #[error(
        "skein run stopped by a refused message ({count} {} recorded); first: {first}",
        plural(*.count as u64, "error")
    )]
    Refused {
        /// The first error recorded (the refusal, naming the sending rank).
        first: String,
        /// Number of errors recorded.
        count: usize,
    },
    /// No fiber could ever run again and no request was in flight, but fibers were still
    /// blocked (in `join`, a `Latch`, or `launch`), or the main fiber never finished.
    #[error(
        "skein deadlock: {blocked} {} blocked forever with no request in flight \
         (main fiber finished: {main_finished})",
        plural(*.blocked, "fiber")
    )]
    Deadlock {
        /// Fibers parked forever.
        blocked: u64,
        /// Whether the main fiber had returned.
        main_finished: bool,
    },
    /// Rack mode (several ranks under `mpirun`) cannot start on this rank; every rank of the
    /// job gets the same message (see [`crate::rack`]).
    #[error("skein rack mode, rank {rank}: {message}")]
    Rack {
        /// The rank reporting it.
        rank: usize,
        /// What is wrong (names the ranks at fault).
        message: String,
    },
    /// A program entry point that does not run its work over ranks
    /// ([`crate::rack::require_one_rank`]: a baseline engine, a file generator; or
    /// [`crate::Runtime::run`] built without the `mpi` feature) was started on more than one
    /// rank, where it would run one independent copy of the job per rank.
    #[error(
        "skein rank {rank} of {ranks}: this runs on one rank only (it does not work over MPI \
         ranks); run it without mpirun, or with mpirun -np 1"
    )]
    RackNotYetSupported {
        /// The rank reporting it.
        rank: usize,
        /// Number of ranks in the job.
        ranks: usize,
    },
    /// A worker thread itself failed (a bug in skein).
    #[error("skein worker thread failed: {0}")]
    Internal(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Best-effort text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// `word` for a count of 1, else `word` + "s" (the messages above).
fn plural(count: u64, word: &'static str) -> std::borrow::Cow<'static, str> {
    if count == 1 {
        word.into()
    } else {
        format!("{word}s").into()
    }
}

#[cfg(test)]
mod tests;
