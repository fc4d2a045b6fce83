//! `skein sssp` and `skein bfs`: run a baseline engine from Graph500 roots and report
//! Graph500-style statistics.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::engines::{EngineSpec, Runner};
use crate::graph_source::{self, GraphSpec};
use crate::job::EngineName;
use crate::report::{self, KernelOutput};

/// Which kernel to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    Sssp,
    Bfs,
}

/// Engines `skein sssp|bfs` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum EngineArg {
    /// One thread: Dijkstra / queue BFS (the COST reference).
    Seq,
    /// rayon threads: delta-stepping / direction-optimizing BFS.
    Rayon,
    /// Skein's delegation runtime: partitions entrusted to workers, `apply_then` between them.
    Skein,
}

/// Arguments of `skein sssp` / `skein bfs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Engine to run.
    #[arg(long, value_enum, default_value_t = EngineArg::Rayon)]
    pub(crate) engine: EngineArg,
    /// Threads of the rayon engine, or workers of the skein engine (default: one per CPU).
    #[arg(long, short = 't', visible_alias = "workers", value_name = "T")]
    pub(crate) threads: Option<usize>,
    /// Fibers per worker of the skein engine.
    #[arg(long, value_name = "F", default_value_t = 8)]
    pub(crate) fibers: usize,
    /// Pin the skein engine's workers to cores.
    #[arg(long)]
    pub(crate) pin: bool,
    /// Number of search roots: the first N of the Graph500 root sequence of the graph.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub(crate) roots: usize,
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
    #[arg(long, value_name = "FILE")]
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
    /// Direction-optimizing BFS (rayon, skein): back to top-down when the frontier <
    /// vertices / BETA.
    #[arg(long, default_value_t = skein_baselines::DEFAULT_BETA)]
    pub(crate) beta: u64,
    /// The graph: a file, or kron:SCALE[:EDGEFACTOR[:SEED1:SEED2]] (defaults 16, 2, 3).
    #[arg(value_name = "GRAPH")]
    pub(crate) graph: String,
}

/// The roots to run: `explicit` ones (checked), else the first `count` of the graph's
/// Graph500 root sequence.
pub(crate) fn choose_roots(
    graph: &graph_source::LoadedGraph,
    explicit: &[u64],
    count: usize,
) -> anyhow::Result<Vec<u64>> {
    let n = graph.csr.num_vertices();
    if !explicit.is_empty() {
        if let Some(&bad) = explicit.iter().find(|&&r| r >= n) {
            anyhow::bail!(
                "root {bad} is not a vertex of {} (it has {n} vertices: 0..{n})",
                graph.description
            );
        }
        return Ok(explicit.to_vec());
    }
    anyhow::ensure!(count > 0, "--roots must be at least 1");
    Ok(graph.roots(count))
}

pub(crate) fn run(kernel: Kernel, args: Args) -> anyhow::Result<()> {
    let spec: GraphSpec = args.graph.parse()?;
    let graph = graph_source::load(&spec)?;
    let roots = choose_roots(&graph, &args.root, args.roots)?;
    let engine = match args.engine {
        EngineArg::Seq => EngineName::Seq,
        EngineArg::Rayon => EngineName::Rayon,
        EngineArg::Skein => EngineName::Skein,
    };
    let mut spec = EngineSpec::new(engine, args.threads.unwrap_or(0));
    spec.fibers = args.fibers;
    spec.pin = args.pin;
    spec.delta = args.delta;
    spec.alpha = args.alpha;
    spec.beta = args.beta;
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
        &mut |root| runner.run(root),
        !args.no_validate,
        &mut |out| args.dump.as_deref().map_or(Ok(()), |path| write_dump(path, out)),
    )?;
    let mut out = std::io::stdout().lock();
    report.print(&mut out)?;
    if let Some(totals) = runner.skein_totals() {
        totals.print(&mut out)?;
    }
    out.flush()?;
    if let Some(path) = &args.json {
        let mut json = report.to_json();
        if let Some(totals) = runner.skein_totals() {
            json["trustees"] = totals.to_json();
        }
        report::write_json_value(path, &json)?;
    }
    report.ensure_valid()
}

/// Writes one result to `path`, one `v value parent` line per vertex.
pub(crate) fn write_dump(path: &Path, out: &KernelOutput) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    }
    let context = || format!("cannot write the dump file {}", path.display());
    let mut w = BufWriter::new(std::fs::File::create(path).with_context(context)?);
    out.dump(&mut w).with_context(context)?;
    w.flush().with_context(context)
}
