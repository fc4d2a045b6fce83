//! `skein`: the command line of the Skein graph analytics framework.

use clap::{Parser, Subcommand};

mod chart;
mod cmd;
#[cfg(feature = "mpi")]
mod dist_run;
mod engines;
mod graph500_mpi;
mod graph_source;
mod job;
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
    /// Run a job file: build the graph, run the kernel, validate, report.
    Run(cmd::run::Args),
    /// Run a job file's kernel on every available engine and compare them.
    Compare(cmd::run::CompareArgs),
    /// Microbenchmarks of the delegation runtime.
    Bench(cmd::bench::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Under `mpirun` with more than one rank: the kernels (`sssp`, `bfs`, `run` with the
    // skein engine) and the benchmarks run across the ranks, rank 0 printing and writing;
    // the other commands would run once per rank, each on its own, and are refused (with one
    // rank, or without the `mpi` feature, this is a no-op).
    let every_rank = match &cli.command {
        Command::Bench(a) => a.runs_on_every_rank(),
        Command::Sssp(_) | Command::Bfs(_) | Command::Run(_) => true,
        _ => false,
    };
    let placement = if every_rank { skein::rack::init() } else { skein::rack::require_one_rank() };
    if let Err(e) = placement {
        eprintln!("error: {e}");
        return std::process::ExitCode::FAILURE;
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
        Command::Run(a) => cmd::run::run(a),
        Command::Compare(a) => cmd::run::compare(a),
        Command::Bench(a) => cmd::bench::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // An error only this rank met would leave it in MPI_Finalize (at exit) while the
            // others wait for it in a collective: end the job instead (no-op on one rank).
            skein::rack::exit_within(std::time::Duration::from_secs(10), 1);
            std::process::ExitCode::FAILURE
        }
    }
}
