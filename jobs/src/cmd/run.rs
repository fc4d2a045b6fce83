//! `skein run JOB.toml` and `skein compare JOB.toml`.
//!
//! `run` builds the job's graph, runs its kernel with its engine from every root,
//! validates, prints Graph500-style statistics and writes the JSON report the job names.
//! `compare` runs the same kernel on the same graph and roots with every engine and
//! prints one table, plus a PNG chart of harmonic-mean TEPS per engine.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use skein_generators::kronecker::KroneckerParams;

use crate::engines::{EngineSpec, Runner};
use crate::graph_source::{self, GraphSpec, LoadedGraph};
use crate::job::{self, Job, JobGraph, Roots};
use crate::names::EngineName;
use crate::report::{self, KernelReport};

/// Arguments of `skein run`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = job::JOB_HELP)]
pub(crate) struct Args {
    /// The job file (TOML): graph, kernel, roots, engine, runtime, report.
    #[arg(value_name = "JOB.toml")]
    job: PathBuf,
    /// Override a key of the job file, e.g. `--set graph.scale=18 --set job.engine=rayon`.
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    set: Vec<String>,
}

/// Arguments of `skein compare`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = job::JOB_HELP)]
pub(crate) struct CompareArgs {
    /// The job file (TOML); its engine is ignored, every engine runs.
    #[arg(value_name = "JOB.toml")]
    job: PathBuf,
    /// Override a key of the job file, e.g. `--set graph.scale=18`.
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    set: Vec<String>,
    /// Engines to compare, in order (default: seq, rayon, skein).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "ENGINE,...")]
    engines: Vec<EngineName>,
    /// Where to write the chart (default: beside the job's JSON report, `.png`, or
    /// `reports/compare-KERNEL.png`).
    #[arg(long, value_name = "FILE.png")]
    chart: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let job = job::load(&args.job, &args.set)?;
    let graph = load_graph(&job)?;
    let roots = job_roots(&job, &graph)?;
    let spec = engine_spec(&job, job.engine);
    let (report, totals) = run_engine(&job, &graph, &roots, &spec, job.dump.as_deref())?;
    let mut out = std::io::stdout().lock();
    report.print(&mut out)?;
    if let Some(t) = &totals {
        t.print(&mut out)?;
    }
    out.flush()?;
    if let Some(path) = &job.json {
        let mut json = report.to_json();
        json["job"] = serde_json::to_value(&job)?;
        if let Some(t) = &totals {
            json["trustees"] = t.to_json();
        }
        report::write_json_value(path, &json)?;
        eprintln!("report written to {}", path.display());
    }
    report.ensure_valid()
}

pub(crate) fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let job = job::load(&args.job, &args.set)?;
    let engines: Vec<EngineName> =
        if args.engines.is_empty() { EngineName::ALL.to_vec() } else { args.engines.clone() };
    // Every engine's limits, before the graph is built.
    for &engine in &engines {
        engine_spec(&job, engine)
            .check()
            .with_context(|| format!("{}: [runtime]", job.source.display()))?;
    }
    let graph = load_graph(&job)?;
    let roots = job_roots(&job, &graph)?;
    let mut rows = Vec::new();
    for &engine in &engines {
        eprintln!("running {} on {} with {engine} ...", job.kernel, graph.description);
        let spec = engine_spec(&job, engine);
        let (report, totals) = run_engine(&job, &graph, &roots, &spec, None)?;
        rows.push((report, totals));
    }
    let seq_teps = rows
        .iter()
        .find(|(r, _)| r.engine.name == "seq")
        .map(|(r, _)| r.teps_stats().harmonic_mean);
    let mut out = std::io::stdout().lock();
    writeln!(out, "{} on {}, {} roots", job.kernel, graph.description, roots.len())?;
    writeln!(out, "construction_time: {:.3} s", graph.construction_seconds)?;
    writeln!(
        out,
        "{:<8} {:>7} {:>12} {:>12} {:>14} {:>10}  validation",
        "engine", "threads", "median s", "min s", "hmean MTEPS", "vs seq"
    )?;
    for (r, _) in &rows {
        let t = r.time_stats();
        let teps = r.teps_stats().harmonic_mean;
        let ratio = seq_teps.map_or("-".to_string(), |s| format!("{:.2}x", teps / s));
        writeln!(
            out,
            "{:<8} {:>7} {:>12.6} {:>12.6} {:>14.2} {:>10}  {}",
            r.engine.name,
            r.engine.threads,
            t.median,
            t.min,
            teps / 1e6,
            ratio,
            r.validation.text()
        )?;
    }
    out.flush()?;
    let chart = args.chart.clone().unwrap_or_else(|| match &job.json {
        Some(p) => p.with_extension("compare.png"),
        None => PathBuf::from(format!("reports/compare-{}.png", job.kernel)),
    });
    let bars: Vec<(String, f64)> = rows
        .iter()
        .map(|(r, _)| {
            (format!("{} ({}t)", r.engine.name, r.engine.threads), r.teps_stats().harmonic_mean)
        })
        .collect();
    let title = format!("{} on {}: harmonic-mean TEPS", job.kernel, graph.description);
    crate::chart::teps_bars(&chart, &title, &bars)?;
    eprintln!("chart written to {}", chart.display());
    if let Some(path) = &job.json {
        let path = path.with_extension("compare.json");
        let reports: Vec<serde_json::Value> = rows
            .iter()
            .map(|(r, t)| {
                let mut j = r.to_json();
                if let Some(t) = t {
                    j["trustees"] = t.to_json();
                }
                j
            })
            .collect();
        let json = serde_json::json!({ "job": job, "engines": reports });
        report::write_json_value(&path, &json)?;
        eprintln!("report written to {}", path.display());
    }
    for (r, _) in &rows {
        r.ensure_valid()?;
    }
    Ok(())
}

fn engine_spec(job: &Job, engine: EngineName) -> EngineSpec {
    let mut spec = EngineSpec::new(engine, job.workers);
    spec.fibers = job.fibers;
    spec.pin = job.pin;
    spec
}

fn load_graph(job: &Job) -> anyhow::Result<LoadedGraph> {
    let spec = match &job.graph {
        JobGraph::Kronecker { scale, edgefactor, seeds } => GraphSpec::Kronecker(
            KroneckerParams::new(*scale, *edgefactor, seeds[0], seeds[1])
                .with_context(|| format!("{}: [graph]", job.source.display()))?,
        ),
        JobGraph::File { path } => GraphSpec::File(path.clone()),
    };
    let graph = graph_source::load(&spec)?;
    eprintln!(
        "graph {}: {} vertices, {} edges; generated/read in {:.3} s, CSR built in {:.3} s",
        graph.description,
        graph.csr.num_vertices(),
        graph.csr.num_arcs() / 2,
        graph.generation_seconds,
        graph.construction_seconds
    );
    Ok(graph)
}

fn job_roots(job: &Job, graph: &LoadedGraph) -> anyhow::Result<Vec<u64>> {
    match &job.roots {
        Roots::Count(n) => graph.choose_roots(&[], *n, "roots"),
        Roots::List(list) => graph.choose_roots(list, list.len() as u64, "roots"),
    }
    .with_context(|| format!("{}: key `job.roots`", job.source.display()))
}

fn run_engine(
    job: &Job,
    graph: &LoadedGraph,
    roots: &[u64],
    spec: &EngineSpec,
    dump: Option<&Path>,
) -> anyhow::Result<(KernelReport, Option<crate::engines::SkeinTotals>)> {
    let kernel = job.kernel;
    let mut runner = Runner::new(spec, kernel, graph)?;
    let info = runner.info();
    let report = report::run_kernel(
        kernel,
        graph,
        roots,
        info,
        &mut |root| runner.run(root),
        job.validate,
        &mut |out| dump.map_or(Ok(()), |path| report::write_dump(path, out)),
    )?;
    let totals = runner.skein_totals().cloned();
    Ok((report, totals))
}
