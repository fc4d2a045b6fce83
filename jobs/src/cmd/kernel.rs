//! `skein sssp` and `skein bfs`: run a baseline engine from Graph500 roots and report
//! Graph500-style statistics.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use skein_baselines::{Engine, Options, Solver};

use crate::graph_source::{self, GraphSpec};
use crate::report::{self, EngineInfo, KernelOutput, Validation};

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
}

/// Arguments of `skein sssp` / `skein bfs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Engine to run.
    #[arg(long, value_enum, default_value_t = EngineArg::Rayon)]
    pub(crate) engine: EngineArg,
    /// Threads of the rayon engine (default: one per CPU).
    #[arg(long, short = 't', value_name = "T")]
    pub(crate) threads: Option<usize>,
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
    /// Delta-stepping bucket width (default: 0.003 times the largest weight).
    #[arg(long)]
    pub(crate) delta: Option<f32>,
    /// Direction-optimizing BFS: go bottom-up when frontier arcs > unexplored arcs / ALPHA.
    #[arg(long, default_value_t = skein_baselines::DEFAULT_ALPHA)]
    pub(crate) alpha: u64,
    /// Direction-optimizing BFS: back to top-down when the frontier < vertices / BETA.
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
    let csr = &graph.csr;
    skein_baselines::check_graph(csr).with_context(|| format!("graph {}", graph.description))?;
    let roots = choose_roots(&graph, &args.root, args.roots)?;
    let engine = match args.engine {
        EngineArg::Seq => Engine::Seq,
        EngineArg::Rayon => Engine::Rayon,
    };
    let options = Options {
        threads: args.threads.unwrap_or(0),
        delta: args.delta,
        alpha: args.alpha,
        beta: args.beta,
    };
    let solver = Solver::new(engine, csr, &options)?;
    let mut settings = serde_json::Map::new();
    if kernel == Kernel::Sssp {
        let max_weight = skein_baselines::check_weights(csr)
            .with_context(|| format!("graph {}", graph.description))?;
        if engine == Engine::Rayon {
            // Through the f32's shortest decimal form, so 0.02 prints as 0.02.
            let delta = options.delta_for(max_weight).to_string().parse::<f64>()?;
            settings.insert("delta".into(), delta.into());
        }
    } else if engine == Engine::Rayon {
        settings.insert("alpha".into(), options.alpha.into());
        settings.insert("beta".into(), options.beta.into());
    }
    let info = EngineInfo { name: engine.name().to_owned(), threads: solver.threads(), settings };
    let mut engine_fn = |root: u64| -> anyhow::Result<KernelOutput> {
        Ok(match kernel {
            Kernel::Sssp => KernelOutput::Sssp(solver.sssp(root)?),
            Kernel::Bfs => KernelOutput::Bfs(solver.bfs(root)?),
        })
    };
    for _ in 0..args.warmup {
        engine_fn(roots[0])?;
    }
    let mut dump = |out: &KernelOutput| -> anyhow::Result<()> {
        let Some(path) = &args.dump else { return Ok(()) };
        let context = || format!("cannot write the dump file {}", path.display());
        let file = std::fs::File::create(path).with_context(context)?;
        let mut w = BufWriter::new(file);
        out.dump(&mut w).with_context(context)?;
        w.flush().with_context(context)
    };
    let report = report::run_kernel(
        kernel,
        &graph,
        &roots,
        info,
        &mut engine_fn,
        !args.no_validate,
        &mut dump,
    )?;
    report.print(&mut std::io::stdout().lock())?;
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    if let Validation::Failed { root, message } = &report.validation {
        anyhow::bail!("validation failed for root {root}: {message}");
    }
    Ok(())
}
