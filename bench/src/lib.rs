//! Skein's benchmark suite, run by `skein bench` (the `skein-jobs` command line):
//!
//! * `fetch-add` ([`fetch_add`]) — the seeds' fetch-and-add benchmark: W workers each perform
//!   N increments on counters chosen from K objects (uniform or Zipf α=1), with skein's
//!   blocking `apply` (several fibers per worker), `apply_then`, `TrustArray::apply_then`, and
//!   per-object locks on plain threads; under `mpirun`, across the ranks, beside the MPI
//!   baselines with `--mpi`.
//! * `micro` ([`micro`]) — fiber switch cost, one `apply` round trip between two workers, and
//!   requests a single trustee serves per second.
//! * `echo` and `ping` ([`echo`]) — request throughput and round trips, beside MPI baselines
//!   with `--mpi` (`mpi_baselines`, `mpi_rma`: feature `mpi`).
//! * `rounds` (`rounds`) — what an empty round costs across the job's ranks (a superstep
//!   ended by quiescence, and quiescence alone), with the counters that explain it.
//!
//! The crate measures; the program that runs it decides what it accepts and how files are
//! written, through [`Host`]: `skein bench` refuses the same counts, with the same reasons,
//! as every other `skein` command. [`spread`] turns repetitions into min / median / max, and
//! every ratio a benchmark prints comes with the spread of the repetitions it came from.
//!
//! Timings on shared machines are noisy: compare ratios measured in one run, and use
//! `--repeat N` (implementations interleaved, median reported, spread beside it) on a busy
//! machine. `--slot-size` overrides the runtime's slot overflow size (batching experiments).

pub mod echo;
pub mod fetch_add;
mod host;
pub mod micro;
#[cfg(feature = "mpi")]
mod mpi_baselines;
#[cfg(feature = "mpi")]
mod mpi_rma;
mod rounds;
pub mod spread;
mod traffic;

pub use host::Host;

/// Arguments of `skein bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(Debug, clap::Subcommand)]
enum BenchCmd {
    /// Fetch-and-add on K shared counters: delegation versus locks.
    FetchAdd(fetch_add::FetchAddArgs),
    /// Fiber switch, apply round trip, single-trustee throughput.
    Micro(micro::MicroArgs),
    /// Echo: every worker sends requests to random workers and answers theirs (requests/s);
    /// with --mpi, beside MPI echoes across the ranks of an mpirun.
    Echo(echo::EchoArgs),
    /// Ping: one blocking round trip at a time (µs); with --mpi, beside an MPI ping-pong.
    Ping(echo::PingArgs),
    /// Rounds: what an empty round costs across the ranks of an mpirun (µs per round: a
    /// superstep ended by quiescence, and quiescence alone), with its counters.
    Rounds(rounds::RoundsArgs),
}

impl Args {
    /// Whether this benchmark runs on every rank of an `mpirun` (echo, ping, rounds and
    /// fetch-add: they run across the ranks, and only rank 0 prints).
    pub fn runs_on_every_rank(&self) -> bool {
        matches!(
            self.cmd,
            BenchCmd::Echo(_) | BenchCmd::Ping(_) | BenchCmd::Rounds(_) | BenchCmd::FetchAdd(_)
        )
    }
}

/// Runs the benchmark `args` names, with `host`'s limits and file writing.
pub fn run(args: Args, host: &dyn Host) -> anyhow::Result<()> {
    match args.cmd {
        BenchCmd::FetchAdd(a) => fetch_add::fetch_add(a, host),
        BenchCmd::Micro(a) => micro::micro(a, host),
        BenchCmd::Echo(a) => echo::echo(a, host),
        BenchCmd::Ping(a) => echo::ping(a, host),
        BenchCmd::Rounds(a) => rounds::rounds(a, host),
    }
}
