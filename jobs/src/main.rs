//! `skein`: the command line of the Skein graph analytics framework.

use clap::{Parser, Subcommand};

mod agree;
mod anatomy;
mod chart;
mod cmd;
#[cfg(feature = "mpi")]
mod dist_run;
mod engines;
mod graph500_mpi;
mod graph_source;
mod job;
mod kernels;
mod limits;
mod names;
mod output;
mod progress;
mod report;
mod skein_rack;

/// Skein: graph analytics on delegation.
#[derive(Debug, Parser)]
#[command(name = "skein", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate a Graph500 Kronecker graph and write it to a file.
    Generate(cmd::generate::Args),
    /// Rewrite a graph file in another format (e.g. text as .skg, which ranks read in parallel).
    Convert(cmd::convert::Args),
    /// Print facts about a graph file: vertices, edges, self-loops, degrees, checksum.
    Info(cmd::info::Args),
    /// Single-source shortest paths from Graph500 roots, with statistics.
    Sssp(cmd::kernel::Args),
    /// Breadth-first search from Graph500 roots, with statistics.
    Bfs(cmd::kernel::Args),
    /// PageRank (damping 0.85) over the whole graph, validated against the sequential engine.
    Pagerank(kernels::Args),
    /// Weakly connected components, each labelled by its smallest vertex, validated.
    Cc(kernels::Args),
    /// Run a job file: build the graph, run the kernel, validate, report.
    Run(cmd::run::Args),
    /// Run a job file's kernel on every available engine and compare them.
    Compare(cmd::run::CompareArgs),
    /// Microbenchmarks of the delegation runtime.
    Bench(cmd::bench::Args),
}

/// The CLI's stall limit (`SKEIN_STALL_SECS`, which the user's value overrides; 0 disables):
/// a run in which no task starts or finishes for this long prints a stall dump to stderr (what
/// every fiber waits on, on every rank; `kill -QUIT` asks for one at any time).
const STALL_SECS: &str = "60";

fn main() -> std::process::ExitCode {
    if std::env::var_os("SKEIN_STALL_SECS").is_none() {
        // Before any thread exists: nothing reads the environment concurrently.
        std::env::set_var("SKEIN_STALL_SECS", STALL_SECS);
    }
    let cli = Cli::parse();
    // Under `mpirun` with more than one rank: the kernels (`sssp`, `bfs`, `run` with the
    // skein engine) and the benchmarks run across the ranks, rank 0 printing and writing;
    // the other commands would run once per rank, each on its own, and are refused (with one
    // rank, or without the `mpi` feature, this is a no-op).
    let every_rank = match &cli.command {
        Command::Bench(a) => a.runs_on_every_rank(),
        Command::Sssp(_) | Command::Bfs(_) | Command::Run(_) => true,
        Command::Pagerank(_) | Command::Cc(_) => true,
        _ => false,
    };
    if let Err(e) = refuse_copies_under_a_launcher() {
        eprintln!("error: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let placement = if every_rank { skein::rack::init() } else { skein::rack::require_one_rank() };
    if let Err(e) = placement {
        eprintln!("error: {e}");
        return std::process::ExitCode::FAILURE;
    }
    // The benchmarks' first collective: the ranks agree on their arguments (the kernels
    // agree on their job in `cmd::kernel` and `cmd::run`).
    if let (true, Command::Bench(a)) = (every_rank, &cli.command) {
        let digest =
            [agree::field("command", "bench"), agree::field("arguments", format!("{a:?}"))];
        if let Err(e) = agree::agree(&digest) {
            output::eline(format_args!("error: {e:#}"));
            return std::process::ExitCode::FAILURE;
        }
    }
    if every_rank && skein::rank() > 0 && !matches!(&cli.command, Command::Bench(_)) {
        output::quiet_this_rank();
    }
    let result = match cli.command {
        Command::Generate(a) => cmd::generate::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Sssp(a) => cmd::kernel::run(names::Kernel::Sssp, a),
        Command::Bfs(a) => cmd::kernel::run(names::Kernel::Bfs, a),
        Command::Pagerank(a) => kernels::run_cli(names::Kernel::Pagerank, a),
        Command::Cc(a) => kernels::run_cli(names::Kernel::Cc, a),
        Command::Run(a) => cmd::run::run(a),
        Command::Compare(a) => cmd::run::compare(a),
        Command::Bench(a) => cmd::bench::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            output::eline(format_args!("error: {e:#}"));
            // An error only this rank met would leave it in MPI_Finalize (at exit) while the
            // others wait for it in a collective: end the job instead (no-op on one rank).
            skein::rack::exit_within(std::time::Duration::from_secs(10), 1);
            std::process::ExitCode::FAILURE
        }
    }
}

/// The environment variables by which MPI launchers tell a process its rank or the job's
/// size (Open MPI, PMIx, MPICH's Hydra and other PMI launchers).
#[cfg_attr(feature = "mpi", allow(dead_code))]
const LAUNCHER_VARS: [(&str, bool); 6] = [
    ("OMPI_COMM_WORLD_SIZE", true),
    ("PMI_SIZE", true),
    ("OMPI_COMM_WORLD_RANK", false),
    ("PMIX_RANK", false),
    ("PMI_RANK", false),
    ("MPI_LOCALNRANKS", true),
];

/// A build without the `mpi` feature cannot join an MPI job: started by `mpirun -np N`
/// with N above 1 it would run N independent copies of the command, all writing the same
/// files. Refused with the command that builds the MPI-enabled binary (a launcher's
/// variable that says more than one rank: a size above 1 or a rank above 0).
#[cfg(not(feature = "mpi"))]
fn refuse_copies_under_a_launcher() -> anyhow::Result<()> {
    refuse_copies(|k| std::env::var(k).ok())
}

/// With the `mpi` feature the rack bootstrap joins the job (`skein::rack::init`).
#[cfg(feature = "mpi")]
fn refuse_copies_under_a_launcher() -> anyhow::Result<()> {
    Ok(())
}

#[cfg_attr(feature = "mpi", allow(dead_code))]
fn refuse_copies(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
    for (name, is_size) in LAUNCHER_VARS {
        let Some(n) = var(name).and_then(|v| v.trim().parse::<u64>().ok()) else { continue };
        if (is_size && n > 1) || (!is_size && n > 0) {
            anyhow::bail!(
                "this skein was built without the `mpi` feature, but an MPI launcher started it \
                 as one of several ranks ({name}={n}): each rank would run its own copy of the \
                 command. Build the MPI-enabled binary with `cargo build --release -p \
                 skein-jobs --features mpi` (needs Open MPI, see scripts/install-mpi.sh), or run \
                 this one without mpirun"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::refuse_copies;

    #[test]
    fn several_ranks_of_a_launcher_are_refused_without_the_mpi_feature() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert!(refuse_copies(env(&[])).is_ok());
        assert!(refuse_copies(env(&[("OMPI_COMM_WORLD_SIZE", "1")])).is_ok());
        assert!(refuse_copies(env(&[("PMIX_RANK", "0")])).is_ok());
        let e = refuse_copies(env(&[("OMPI_COMM_WORLD_SIZE", "2")])).unwrap_err().to_string();
        assert!(e.contains("OMPI_COMM_WORLD_SIZE=2") && e.contains("--features mpi"), "{e}");
        assert!(refuse_copies(env(&[("PMI_RANK", "3")])).is_err());
    }
}
