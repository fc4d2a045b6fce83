//! `skein sssp` and `skein bfs`: run one engine (seq, rayon or skein) from Graph500 roots
//! and report Graph500-style statistics.

use std::io::Write;
use std::path::PathBuf;

use crate::engines::{EngineSpec, Runner};
use crate::graph_source::{self, GraphSpec};
use crate::limits;
use crate::names::{EngineName, Kernel};
use crate::report;

/// Arguments of `skein sssp` / `skein bfs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Engine to run.
    #[arg(long, value_enum, default_value_t = EngineName::Rayon)]
    pub(crate) engine: EngineName,
    /// Threads of the rayon engine, or workers of the skein engine (default: one per CPU).
    #[arg(long, short = 't', visible_alias = "workers", value_name = "T",
          value_parser = at_least_one::<usize>)]
    pub(crate) threads: Option<usize>,
    /// Fibers per worker of the skein engine.
    #[arg(long, value_name = "F", default_value_t = 8)]
    pub(crate) fibers: usize,
    /// Pin the skein engine's workers to cores.
    #[arg(long)]
    pub(crate) pin: bool,
    /// Threads that run a process's skein workers: the workers share them, consecutive
    /// workers on one thread (at most one thread per worker; 0: as many as the cores when
    /// the workers outnumber them, else one per worker). Default: `SKEIN_WORKER_THREADS`,
    /// else 0.
    #[arg(long, value_name = "T")]
    pub(crate) worker_threads: Option<usize>,
    /// Number of search roots: the first N of the Graph500 root sequence of the graph.
    #[arg(long, value_name = "N", default_value_t = crate::limits::DEFAULT_ROOTS,
          conflicts_with = "root")]
    pub(crate) roots: u64,
    /// Explicit search roots instead of the Graph500 sequence (repeatable).
    #[arg(long = "root", value_name = "V")]
    pub(crate) root: Vec<u64>,
    /// Untimed runs from the first root before measuring (warms caches and page tables).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) warmup: usize,
    /// Write a JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Write the first root's result to FILE, one line per vertex: `v value parent`.
    #[arg(long, value_name = "FILE", long_help = report::DUMP_HELP)]
    pub(crate) dump: Option<PathBuf>,
    /// Skip Graph500 validation of the results.
    #[arg(long)]
    pub(crate) no_validate: bool,
    /// Delta-stepping bucket width (default: the largest weight times 0.0007 for rayon,
    /// 0.002 for skein).
    #[arg(long)]
    pub(crate) delta: Option<f32>,
    /// Direction-optimizing BFS (rayon, skein): go bottom-up when frontier arcs >
    /// unexplored arcs / ALPHA (0: never).
    #[arg(long, default_value_t = skein_baselines::DEFAULT_ALPHA)]
    pub(crate) alpha: u64,
    /// Direction-optimizing BFS (rayon, skein): back to top-down when the frontier stops
    /// growing and has at most vertices / BETA vertices.
    #[arg(long, default_value_t = skein_baselines::DEFAULT_BETA,
          value_parser = at_least_one::<u64>)]
    pub(crate) beta: u64,
    /// Print the runtime's round anatomy (skein engines): the worker loop's time by part
    /// (serving, issuing, transport, detector, waiting for a response or for quiescence,
    /// idle), envelopes and bytes per destination rank, requests per batch, the detector's
    /// rounds. Every worker's lines up to 8 workers, min / median / max across the workers
    /// beyond (`--stats=workers`: every worker's, `--stats=summary`: the summary). Turns the
    /// loop timing on (`SKEIN_ANATOMY=1`); the JSON report has the counters either way.
    #[arg(long, value_enum, value_name = "DETAIL", num_args = 0..=1, require_equals = true,
          default_missing_value = "auto")]
    pub(crate) stats: Option<crate::anatomy::Detail>,
    /// The graph: a file, or kron:SCALE[:EDGEFACTOR[:SEED1:SEED2]] (defaults 16, 2, 3).
    #[arg(value_name = "GRAPH")]
    pub(crate) graph: String,
}

/// A count of 1 or more (`--threads`, `--beta`).
fn at_least_one<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr<Err = std::num::ParseIntError> + PartialEq + From<u8>,
{
    match s.parse::<T>() {
        Ok(n) if n == T::from(0) => {
            Err("must be at least 1 (leave the option out for its default)".into())
        }
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// What this rank will run, for [`crate::agree::agree`]: every argument, and the graph
/// file's facts.
fn digest(kernel: Kernel, args: &Args) -> Vec<crate::agree::Field> {
    use crate::agree::field;
    let mut fields = vec![
        field("command", kernel),
        field("--engine", format!("{:?}", args.engine)),
        field("--threads", format!("{:?}", args.threads)),
        field("--fibers", args.fibers),
        field("--pin", args.pin),
        field("--worker-threads", format!("{:?}", args.worker_threads)),
        field("--roots", args.roots),
        field("--root", format!("{:?}", args.root)),
        field("--warmup", args.warmup),
        field("--json", format!("{:?}", args.json)),
        field("--dump", format!("{:?}", args.dump)),
        field("--no-validate", args.no_validate),
        field("--delta", format!("{:?}", args.delta)),
        field("--alpha", args.alpha),
        field("--beta", args.beta),
        field("--stats", format!("{:?}", args.stats)),
        field("graph", &args.graph),
    ];
    if let Ok(GraphSpec::File(path)) = args.graph.parse::<GraphSpec>() {
        fields.extend(crate::agree::file_fields(&path));
    }
    fields
}

pub(crate) fn run(kernel: Kernel, args: Args) -> anyhow::Result<()> {
    // The first collective under mpirun: before anything can fail on one rank only.
    crate::agree::agree(&digest(kernel, &args))?;
    if args.stats.is_some() {
        crate::anatomy::enable();
    }
    limits::check_count(args.warmup.max(1), limits::MAX_REPEAT, "more only add run time")
        .map_err(|e| anyhow::anyhow!("--warmup: {e}"))?;
    crate::engines::check_ranks(args.engine)?;
    let mut spec = EngineSpec::new(args.engine, args.threads.unwrap_or(0));
    spec.fibers = args.fibers;
    spec.pin = args.pin;
    spec.worker_threads = args.worker_threads;
    spec.delta = args.delta;
    spec.alpha = args.alpha;
    spec.beta = args.beta;
    spec.check()?;
    let graph_spec: GraphSpec = args.graph.parse()?;
    #[cfg(feature = "mpi")]
    if crate::dist_run::applies() {
        let (graph, description) = crate::dist_run::DistGraph::of_spec(&graph_spec);
        let (report, totals) = crate::dist_run::run(&crate::dist_run::DistKernel {
            kernel,
            graph,
            description,
            explicit_roots: &args.root,
            root_count: args.roots,
            count_name: "--roots",
            roots_context: None,
            validate: !args.no_validate,
            dump: args.dump.as_deref(),
            spec: &spec,
            warmup: args.warmup,
        })?;
        return finish(&args, &report, Some(&totals));
    }
    let graph = graph_source::load(&graph_spec)?;
    let roots = graph.choose_roots(&args.root, args.roots, "--roots")?;
    let mut runner = Runner::new(&spec, kernel, &graph)?;
    for _ in 0..args.warmup {
        runner.run(roots[0])?;
    }
    let info = runner.info();
    let report = report::run_kernel(
        kernel,
        &graph,
        &roots,
        info,
        &mut |root, spare| runner.run_reusing(root, spare),
        !args.no_validate,
        &mut |out| args.dump.as_deref().map_or(Ok(()), |path| report::write_dump(path, out)),
    )?;
    runner.measure_peaks()?;
    finish(&args, &report, runner.skein_totals())
}

/// Prints the report (rank 0 only under mpirun), writes `--json`, and fails when
/// validation failed.
fn finish(
    args: &Args,
    report: &report::KernelReport,
    totals: Option<&crate::engines::SkeinTotals>,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    report.print(&mut out)?;
    if let Some(totals) = totals {
        totals.print(&mut out)?;
        if let Some(detail) = args.stats {
            crate::anatomy::print(
                &totals.runtime,
                totals.searches,
                "search(es)",
                detail,
                &mut out,
            )?;
        }
    }
    out.flush()?;
    if let Some(path) = &args.json {
        let mut json = report.to_json();
        if let Some(totals) = totals {
            json["trustees"] = totals.to_json();
        }
        report::write_json_value(path, &json)?;
    }
    report.ensure_valid()
}
