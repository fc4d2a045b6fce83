//! The kernels without roots: `skein pagerank`, `skein cc`, and job files with `kernel =
//! "pagerank" | "cc"` (`skein run`). Each run is the whole kernel on the whole graph,
//! repeated; the report gives the time of each run (wall clock of the call, the same for
//! every engine; the skein engine's components write over the previous run's labels,
//! `Engine::components_into`, as a caller that repeats would, on parts balanced by
//! vertices, `CC_VERTEX_ARCS`, which its time follows), the page faults per run (in
//! one process), PageRank's iterations and time per iteration, the harmonic mean of the
//! arcs per second (the graph's arcs × iterations / time, whatever an engine skips), the
//! skein kernel's own seconds (a run's, less building the partitions and gathering the
//! result) and counters (its messages, rounds, the arcs it did read, and its own
//! counters: components hooked and not, pairs sent, contracted edges, labels sent), and
//! the validation:
//!
//! - PageRank against the sequential engine's ranks: every rank within
//!   [`PAGERANK_TOLERANCE`] of the reference's (the engines compute the same expression in
//!   the same order, so in practice they are equal bit for bit), the same number of
//!   iterations, and the ranks summing to 1 within 1e-6;
//! - components: every edge joins equal labels, and every label is the smallest vertex of its
//!   component (equal to a sequential union-find's).
//!
//! Under `mpirun` (a build with the `mpi` feature) the skein engine runs across the ranks,
//! each rank building only its own rows and validating its slice (`ranks`); rank 0 prints
//! and writes. `skein compare` runs them with the one-process engines (seq, rayon, skein)
//! and with `skein-rack` (this executable under `mpirun`, `crate::skein_rack`); it refuses
//! `graph500-mpi`, which has no such kernels.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use skein_algorithms::Engine as SkeinEngine;
use skein_baselines::{Engine as Baseline, Options, Solver};
use skein_generators::analytics::{self, PageRankParams};

use crate::engines::{self, EngineSpec};
use crate::graph_source::{self, GraphSpec, LoadedGraph};
use crate::job::Job;
use crate::names::{EngineName, Kernel};

#[cfg(feature = "mpi")]
mod ranks;

/// Largest difference allowed between a PageRank rank and the sequential engine's.
pub(crate) const PAGERANK_TOLERANCE: f64 = 1e-12;

/// Arguments of `skein pagerank` / `skein cc`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Engine to run.
    #[arg(long, value_enum, default_value_t = EngineName::Rayon)]
    engine: EngineName,
    /// Threads of the rayon engine, or workers of the skein engine (default: one per CPU).
    #[arg(long, short = 't', visible_alias = "workers", value_name = "T")]
    threads: Option<usize>,
    /// Fibers per worker of the skein engine.
    #[arg(long, value_name = "F", default_value_t = 8)]
    fibers: usize,
    /// Pin the skein engine's workers to cores.
    #[arg(long)]
    pin: bool,
    /// Threads that run a process's skein workers: the workers share them, consecutive
    /// workers on one thread (at most one thread per worker; 0: as many as the cores when
    /// the workers outnumber them, else one per worker). Default: `SKEIN_WORKER_THREADS`,
    /// else 0.
    #[arg(long, value_name = "T")]
    worker_threads: Option<usize>,
    /// Measured runs of the whole kernel.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// PageRank: at most this many iterations.
    #[arg(long, value_name = "N", default_value_t = PageRankParams::default().max_iterations,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    iterations: u32,
    /// PageRank: stop after the first iteration whose L1 change is below this.
    #[arg(long, value_name = "X", default_value_t = PageRankParams::default().tolerance)]
    tolerance: f64,
    /// Write a JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the result to FILE, one line per vertex: `v value` (PageRank: the rank as 16
    /// hex digits of its IEEE-754 binary64 bits; components: the label).
    #[arg(long, value_name = "FILE")]
    dump: Option<PathBuf>,
    /// Skip the validation.
    #[arg(long)]
    no_validate: bool,
    /// Print the runtime's round anatomy (skein engine), summed over the runs: the worker
    /// loop's time by part (serving, issuing, transport, detector, waiting for a response or
    /// for quiescence, idle), envelopes and bytes per destination rank, requests per batch,
    /// the detector's rounds. Every worker's lines up to 8 workers, min / median / max across
    /// the workers beyond (`--stats=workers`: every worker's, `--stats=summary`: the
    /// summary). Turns the loop timing on (`SKEIN_ANATOMY=1`); the JSON report has the
    /// counters either way (`skein_workers`).
    #[arg(long, value_enum, value_name = "DETAIL", num_args = 0..=1, require_equals = true,
          default_missing_value = "auto")]
    stats: Option<crate::anatomy::Detail>,
    /// The graph: a file, or kron:SCALE[:EDGEFACTOR[:SEED1:SEED2]] (defaults 16, 2, 3).
    #[arg(value_name = "GRAPH")]
    graph: String,
}

/// What to run, from the command line or a job file.
#[derive(Debug)]
struct Setup {
    kernel: Kernel,
    spec: EngineSpec,
    repeat: u32,
    params: PageRankParams,
    validate: bool,
    json: Option<PathBuf>,
    dump: Option<PathBuf>,
    /// Print the runtime's anatomy, this much of it (`--stats`).
    stats: Option<crate::anatomy::Detail>,
}

/// `skein pagerank` / `skein cc`.
pub(crate) fn run_cli(kernel: Kernel, args: Args) -> anyhow::Result<()> {
    use crate::agree::field;
    crate::agree::agree(&[field("command", kernel), field("arguments", format!("{args:?}"))])?;
    if args.stats.is_some() {
        crate::anatomy::enable();
    }
    let mut spec = EngineSpec::new(args.engine, args.threads.unwrap_or(0));
    spec.fibers = args.fibers;
    spec.pin = args.pin;
    spec.worker_threads = args.worker_threads;
    let setup = Setup {
        kernel,
        spec,
        repeat: args.repeat,
        params: PageRankParams {
            tolerance: args.tolerance,
            max_iterations: args.iterations,
            ..PageRankParams::default()
        },
        validate: !args.no_validate,
        json: args.json,
        dump: args.dump,
        stats: args.stats,
    };
    let spec = args.graph.parse::<GraphSpec>()?;
    #[cfg(feature = "mpi")]
    if crate::dist_run::applies() {
        let (graph, description) = crate::dist_run::DistGraph::of_spec(&spec);
        return ranks::execute(&setup, &graph, description, None);
    }
    execute(&setup, &graph_source::load(&spec)?, None)
}

/// Runs job `job` (whose kernel is PageRank or components) across the ranks of an mpirun
/// job, no rank holding the whole graph (`ranks`).
#[cfg(feature = "mpi")]
pub(crate) fn run_job_distributed(
    job: &Job,
    graph: &crate::dist_run::DistGraph,
    description: String,
) -> anyhow::Result<()> {
    let setup = job_setup(job, job.engine);
    ranks::execute(&setup, graph, description, Some(serde_json::to_value(job)?))
}

/// Runs job `job` (whose kernel is PageRank or components) on `graph`.
pub(crate) fn run_job(job: &Job, graph: &LoadedGraph) -> anyhow::Result<()> {
    execute(&job_setup(job, job.engine), graph, Some(serde_json::to_value(job)?))
}

/// One run's result.
enum Output {
    Ranks(analytics::PageRankResult),
    Labels(analytics::ComponentsResult),
}

/// The engine, ready.
enum Ready<'g> {
    Baseline(Solver<'g>),
    Skein(SkeinEngine),
}

/// One engine's runs of the kernel, measured (and validated, when the setup asks).
pub(crate) struct Measured {
    kernel: Kernel,
    pub(crate) engine: EngineName,
    pub(crate) threads: usize,
    seconds: Vec<f64>,
    pub(crate) times: crate::report::Stats,
    /// Page faults of this process during each run (empty where not measured: across
    /// ranks, or where the system does not say).
    page_faults: Vec<u64>,
    /// PageRank's iterations (1 for components).
    iterations: u32,
    /// Harmonic mean over the runs of the arcs read per second (arcs × iterations / time).
    pub(crate) hmean_rate: f64,
    /// The skein kernel's counters (empty for the baselines).
    skein: SkeinCounts,
    /// The graph's name, vertices and arcs.
    graph: String,
    vertices: u64,
    arcs: u64,
    /// PageRank's last L1 change.
    l1: Option<f64>,
    /// The last run's result (one process; across ranks it stays on the ranks).
    out: Option<Output>,
    validation: Option<anyhow::Result<()>>,
}

impl Measured {
    /// `passed`, `skipped` or `FAILED: why`.
    pub(crate) fn validation_text(&self) -> String {
        match &self.validation {
            None => "skipped".to_string(),
            Some(Ok(())) => "passed".to_string(),
            Some(Err(e)) => format!("FAILED: {e}"),
        }
    }

    /// The validation's error, if it failed (taken: read [`Measured::validation_text`]
    /// first).
    pub(crate) fn take_failure(&mut self) -> Option<anyhow::Error> {
        match self.validation.take() {
            Some(Err(e)) => Some(e.context(format!("{} validation", self.engine))),
            _ => None,
        }
    }

    /// The JSON report of these runs.
    pub(crate) fn to_json(&self, params: &PageRankParams) -> serde_json::Value {
        let mut json = serde_json::json!({
            "kernel": self.kernel.as_str(),
            "graph": self.graph,
            "vertices": self.vertices,
            "arcs": self.arcs,
            "engine": self.engine.as_str(),
            "threads": self.threads,
            "seconds": self.seconds,
            "time": self.times,
            "page_faults": self.page_faults,
            "iterations": self.iterations,
            "arcs_per_second_hmean": self.hmean_rate,
            "validated": self.validation.as_ref().map(|v| v.is_ok()),
        });
        if let Some(l1) = self.l1 {
            json["l1"] = l1.into();
            json["damping"] = params.damping.into();
            json["tolerance"] = params.tolerance.into();
            json["max_iterations"] = params.max_iterations.into();
        }
        let k = &self.skein;
        if !k.kernel_seconds.is_empty() {
            json["skein_kernel_seconds"] = k.kernel_seconds.clone().into();
            json["skein_messages"] = k.messages.into();
            json["skein_rounds"] = k.rounds.into();
            json["skein_arcs_read"] = k.arcs_read.into();
            for (name, n) in &k.counters {
                json[format!("skein_{}", name.replace(' ', "_"))] = (*n).into();
            }
            json["skein_workers"] = crate::anatomy::workers_json(&k.runtime).into();
            json["skein_run"] = crate::anatomy::run_json(&k.runtime.run);
        }
        json
    }

    /// The report (rank 0 prints it; the other ranks of an mpirun job print nothing).
    fn print(&self, o: &mut dyn Write) -> std::io::Result<()> {
        let times = &self.times;
        writeln!(o, "{:<32}{}", "kernel:", self.kernel)?;
        writeln!(o, "{:<32}{}", "graph:", self.graph)?;
        writeln!(o, "{:<32}{} vertices, {} arcs", "size:", self.vertices, self.arcs)?;
        writeln!(o, "{:<32}{} ({} threads)", "engine:", self.engine, self.threads)?;
        writeln!(o, "{:<32}{}", "runs:", self.seconds.len())?;
        writeln!(
            o,
            "{:<32}min {:.4}, mean {:.4}, max {:.4}",
            "seconds per run:", times.min, times.mean, times.max
        )?;
        if !self.page_faults.is_empty() {
            let f: Vec<f64> = self.page_faults.iter().map(|&f| f as f64).collect();
            let f = crate::report::Stats::of(&f);
            writeln!(
                o,
                "{:<32}min {:.0}, mean {:.0}, max {:.0}",
                "page faults per run:", f.min, f.mean, f.max
            )?;
        }
        if let Some(l1) = self.l1 {
            writeln!(o, "{:<32}{} (last L1 change {:.3e})", "iterations:", self.iterations, l1)?;
            writeln!(
                o,
                "{:<32}{:.5}",
                "mean seconds per iteration:",
                times.mean / f64::from(self.iterations)
            )?;
        }
        writeln!(o, "{:<32}{:.4e}", "arcs per second (hmean):", self.hmean_rate)?;
        let c = &self.skein;
        if !c.kernel_seconds.is_empty() {
            let k = crate::report::Stats::of(&c.kernel_seconds);
            // The kernel's own seconds: a run's seconds less the partitions' setup and the
            // gathering of the result.
            writeln!(o, "{:<32}min {:.4}, mean {:.4}", "skein kernel seconds:", k.min, k.mean)?;
            writeln!(o, "{:<32}{}", "skein messages per run:", c.messages)?;
            writeln!(o, "{:<32}{}", "skein rounds per run:", c.rounds)?;
            writeln!(o, "{:<32}{}", "skein arcs read per run:", c.arcs_read)?;
            for (name, n) in &c.counters {
                writeln!(o, "{:<32}{}", format!("skein {name} per run:"), n)?;
            }
        }
        writeln!(o, "{:<32}{}", "validation:", self.validation_text())?;
        o.flush()
    }
}

/// The skein kernel's counters over the runs: every run's kernel time, the last run's counts,
/// the runtime's counters summed over the runs.
#[derive(Debug, Default)]
struct SkeinCounts {
    kernel_seconds: Vec<f64>,
    /// The runtime's per-worker counters (every rank's workers), summed over the runs.
    runtime: skein::Stats,
    messages: u64,
    rounds: u64,
    /// Arcs the kernel read, all partitions together.
    arcs_read: u64,
    /// The kernel's own counters, by name (components).
    counters: Vec<(&'static str, u64)>,
}

impl SkeinCounts {
    /// Adds a run's statistics.
    fn add(&mut self, stats: skein_algorithms::SearchStats) {
        self.kernel_seconds.push(stats.seconds);
        if let Some(rt) = &stats.runtime {
            self.runtime.accumulate(rt);
        }
        (self.messages, self.rounds, self.arcs_read) = (stats.messages, stats.rounds, stats.arcs);
        self.counters = stats.counters;
    }
}

/// The harmonic mean over `seconds` of `arcs · iterations` per second.
fn hmean(seconds: &[f64], arcs: u64, iterations: u32) -> f64 {
    let work = arcs as f64 * f64::from(iterations);
    seconds.len() as f64 / seconds.iter().map(|s| s / work).sum::<f64>()
}

/// The sequential engine's PageRank, computed once for every validation that needs it.
#[derive(Default)]
pub(crate) struct Reference(Option<analytics::PageRankResult>);

/// The setup of job `job` with engine `engine` (the job's own engine in `skein run`).
fn job_setup(job: &Job, engine: EngineName) -> Setup {
    Setup {
        kernel: job.kernel,
        spec: EngineSpec::of_job(job, engine),
        repeat: 3,
        params: PageRankParams {
            tolerance: job.tolerance,
            max_iterations: job.iterations,
            ..PageRankParams::default()
        },
        validate: job.validate,
        json: job.json.clone(),
        dump: job.dump.clone(),
        stats: None,
    }
}

/// Checks that `skein compare` can run job `job` (a PageRank or components job) with
/// `engines`, before the graph is built: the Graph500 reference has no such kernels, and
/// `skein-rack` needs a build with MPI.
pub(crate) fn check_compare(
    job: &Job,
    engines: &[EngineName],
    launch: &crate::graph500_mpi::Launch,
) -> anyhow::Result<()> {
    let kernel = job.kernel;
    for &engine in engines {
        match engine {
            EngineName::Graph500Mpi => anyhow::bail!(
                "{}: engine graph500-mpi cannot run {kernel}: the Graph500 reference has only \
                 BFS and SSSP kernels (no {}); compare {kernel} with --engines seq,rayon,skein",
                job.source.display(),
                if kernel == Kernel::Pagerank { "PageRank" } else { "connected components" }
            ),
            EngineName::SkeinRack => crate::skein_rack::check(launch)?,
            EngineName::Seq | EngineName::Rayon | EngineName::Skein => {
                if engine != EngineName::Seq {
                    job_setup(job, engine)
                        .spec
                        .check()
                        .map_err(|e| anyhow::anyhow!("{}: [runtime]: {e}", job.source.display()))?;
                }
            }
        }
    }
    Ok(())
}

/// Runs job `job`'s kernel on `graph` with `engine` for `skein compare` (no dump, no
/// report file), validating against `reference` when the job validates.
pub(crate) fn measure_job(
    job: &Job,
    graph: &LoadedGraph,
    engine: EngineName,
    reference: &mut Reference,
) -> anyhow::Result<(Measured, serde_json::Value)> {
    let mut setup = job_setup(job, engine);
    setup.json = None;
    setup.dump = None;
    let m = measure(&setup, graph, reference)?;
    let json = m.to_json(&setup.params);
    Ok((m, json))
}

/// Builds the engine, runs the kernel `setup.repeat` times and validates the last run.
fn measure(
    setup: &Setup,
    graph: &LoadedGraph,
    reference: &mut Reference,
) -> anyhow::Result<Measured> {
    let (kernel, engine) = (setup.kernel, setup.spec.engine);
    engines::check_ranks(engine)?;
    let threads = if engine == EngineName::Seq {
        // Refuses the skein engine's settings that make no sense here (its own check does).
        setup.spec.check_worker_threads(1)?;
        1
    } else {
        setup.spec.check()?
    };
    anyhow::ensure!(
        setup.params.tolerance >= 0.0 && setup.params.tolerance.is_finite(),
        "--tolerance must be a finite number >= 0"
    );
    let csr = &graph.csr;
    skein_baselines::check_graph(csr)?;
    let ready = match engine {
        EngineName::Seq | EngineName::Rayon => {
            let b = if engine == EngineName::Seq { Baseline::Seq } else { Baseline::Rayon };
            let s = Solver::new(b, csr, &Options::with_threads(threads))?;
            s.prepare_bfs();
            Ready::Baseline(s)
        }
        EngineName::Skein => {
            let mut opts = engines::skein_options(&setup.spec, threads);
            if kernel == Kernel::Cc {
                // Components' local step follows the vertices: parts balanced by vertices.
                opts.vertex_arcs = skein_algorithms::CC_VERTEX_ARCS;
            }
            let e = SkeinEngine::new(Arc::clone(csr), opts)?;
            e.prepare_bfs();
            Ready::Skein(e)
        }
        EngineName::SkeinRack | EngineName::Graph500Mpi => {
            anyhow::bail!("engine {engine} is not yet supported for {kernel}")
        }
    };
    let (mut seconds, mut faults) = (Vec::new(), Vec::new());
    let (mut skein, mut last) = (SkeinCounts::default(), None);
    for _ in 0..setup.repeat {
        let before = crate::report::page_faults();
        let start = Instant::now();
        let out = match (&ready, kernel) {
            (Ready::Baseline(s), Kernel::Pagerank) => Output::Ranks(s.pagerank(&setup.params)?),
            (Ready::Baseline(s), _) => Output::Labels(s.components()?),
            (Ready::Skein(e), Kernel::Pagerank) => {
                let (r, stats) = e.pagerank(setup.params)?;
                skein.add(stats);
                Output::Ranks(r)
            }
            (Ready::Skein(e), _) => {
                // The previous run's labels are written over (as a caller that repeats
                // would): no fresh pages for the result.
                let mut r = match last.take() {
                    Some(Output::Labels(r)) => r,
                    _ => analytics::ComponentsResult { label: Vec::new() },
                };
                skein.add(e.components_into(&mut r)?);
                Output::Labels(r)
            }
        };
        seconds.push(start.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (before, crate::report::page_faults()) {
            faults.push(b.saturating_sub(a));
        }
        last = Some(out);
    }
    drop(ready);
    let out = last.expect("at least one run");
    let (iterations, l1) = match &out {
        Output::Ranks(r) => (r.iterations, Some(r.l1)),
        Output::Labels(_) => (1, None),
    };
    let hmean_rate = hmean(&seconds, csr.num_arcs(), iterations);
    let validation =
        if setup.validate { Some(validate(setup, csr, &out, reference)) } else { None };
    Ok(Measured {
        kernel,
        engine,
        threads,
        times: crate::report::Stats::of(&seconds),
        seconds,
        page_faults: faults,
        iterations,
        hmean_rate,
        skein,
        graph: graph.description.clone(),
        vertices: csr.num_vertices(),
        arcs: csr.num_arcs(),
        l1,
        out: Some(out),
        validation,
    })
}

fn execute(
    setup: &Setup,
    graph: &LoadedGraph,
    job: Option<serde_json::Value>,
) -> anyhow::Result<()> {
    for path in [&setup.json, &setup.dump].into_iter().flatten() {
        crate::output::check_writable(path)?;
    }
    let m = measure(setup, graph, &mut Reference::default())?;
    if let (Some(path), Some(out)) = (&setup.dump, &m.out) {
        crate::output::write_file(path, "the dump file", |w| dump(w, out))?;
    }
    finish(setup, m, job)
}

/// Prints the report, writes `--json`, and fails when validation failed.
fn finish(setup: &Setup, m: Measured, job: Option<serde_json::Value>) -> anyhow::Result<()> {
    {
        let mut out = std::io::stdout().lock();
        m.print(&mut out)?;
        let runs = m.skein.kernel_seconds.len() as u64;
        if let Some(detail) = setup.stats.filter(|_| runs > 0) {
            crate::anatomy::print(&m.skein.runtime, runs, "run(s)", detail, &mut out)?;
        }
        out.flush()?;
    }
    if let Some(path) = &setup.json {
        let mut json = m.to_json(&setup.params);
        let from_job = job.is_some();
        if let Some(job) = job {
            json["job"] = job;
        }
        crate::report::write_json_value(path, &json)?;
        // As `skein run` says for the searches' reports (`cmd/run.rs`).
        if from_job && crate::output::writes() {
            eprintln!("report written to {}", path.display());
        }
    }
    match m.validation {
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Checks `out` (see the module docs).
fn validate(
    setup: &Setup,
    csr: &skein_generators::Csr,
    out: &Output,
    reference: &mut Reference,
) -> anyhow::Result<()> {
    match out {
        Output::Ranks(r) => {
            let want = match &mut reference.0 {
                Some(want) => want,
                slot => {
                    let seq = Solver::new(Baseline::Seq, csr, &Options::with_threads(1))?;
                    slot.insert(seq.pagerank(&setup.params)?)
                }
            };
            analytics::check_pagerank(&r.rank, &want.rank, PAGERANK_TOLERANCE)?;
            anyhow::ensure!(
                r.iterations == want.iterations,
                "{} iterations, the sequential engine ran {}",
                r.iterations,
                want.iterations
            );
        }
        Output::Labels(l) => analytics::check_components(csr, &l.label)?,
    }
    Ok(())
}

/// The dump: `v value` per vertex.
fn dump(w: &mut dyn Write, out: &Output) -> std::io::Result<()> {
    match out {
        Output::Ranks(r) => {
            for (v, x) in r.rank.iter().enumerate() {
                writeln!(w, "{v} {:016x}", x.to_bits())?;
            }
        }
        Output::Labels(l) => {
            for (v, x) in l.label.iter().enumerate() {
                writeln!(w, "{v} {x}")?;
            }
        }
    }
    Ok(())
}
