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
use crate::graph500_mpi;
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
    /// Engines to compare, in order (default: seq, rayon, skein). `graph500-mpi` is the
    /// official Graph500 MPI reference (built by jobs/scripts/graph500-reference.sh from
    /// GRAPH500_SRC, or a cached clone); `skein-rack` is the Skein engine across `--ranks`
    /// MPI ranks (this skein under mpirun; a build with the `mpi` feature).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "ENGINE,...")]
    engines: Vec<EngineName>,
    /// MPI ranks of the MPI engines (`mpirun -np RANKS`).
    #[arg(long, default_value_t = 1, value_name = "RANKS",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    ranks: u32,
    /// Extra `mpirun` arguments for the MPI engines, split on whitespace, e.g.
    /// `--mpirun-args "--hostfile hosts --map-by node"` (default: the MPIRUN_ARGS variable).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    mpirun_args: Option<String>,
    /// Where to write the chart (default: beside the job's JSON report, `.png`, or
    /// `reports/compare-KERNEL.png`).
    #[arg(long, value_name = "FILE.png")]
    chart: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let job = job::load(&args.job, &args.set);
    // The first collective under mpirun: the job as each rank loaded it (or its error).
    crate::agree::agree(&digest(&job))?;
    let job = job?;
    crate::engines::check_ranks(job.engine)?;
    if job.kernel.rootless() {
        #[cfg(feature = "mpi")]
        if crate::dist_run::applies() {
            let (graph, description) = dist_graph(&job)?;
            return crate::kernels::run_job_distributed(&job, &graph, description);
        }
        return crate::kernels::run_job(&job, &load_graph(&job)?);
    }
    #[cfg(feature = "mpi")]
    if crate::dist_run::applies() {
        let (report, totals) = run_distributed(&job)?;
        return finish(&job, &report, Some(&totals));
    }
    let graph = load_graph(&job)?;
    let roots = job_roots(&job, &graph)?;
    let spec = EngineSpec::of_job(&job, job.engine);
    let (report, totals) = run_engine(&job, &graph, &roots, &spec, job.dump.as_deref())?;
    finish(&job, &report, totals.as_ref())
}

/// What this rank will run, for [`crate::agree::agree`]: every key of the job as loaded
/// (after `--set`), and the graph file's facts; or why the job did not load.
fn digest(job: &Result<Job, job::JobError>) -> Vec<crate::agree::Field> {
    use crate::agree::field;
    let mut fields = vec![field("command", "run")];
    let job = match job {
        Ok(job) => job,
        Err(e) => {
            fields.push(field("job", format!("does not load: {e}")));
            return fields;
        }
    };
    match serde_json::to_value(job) {
        Ok(serde_json::Value::Object(keys)) => {
            fields.extend(keys.iter().map(|(k, v)| field(&format!("job.{k}"), v)));
        }
        other => fields.push(field("job", format!("{other:?}"))),
    }
    if let JobGraph::File { path } = &job.graph {
        fields.extend(crate::agree::file_fields(path));
    }
    fields
}

/// Prints the report (rank 0 only under mpirun), writes the job's JSON report, and fails
/// when validation failed.
fn finish(
    job: &Job,
    report: &KernelReport,
    totals: Option<&crate::engines::SkeinTotals>,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    report.print(&mut out)?;
    if let Some(t) = totals {
        t.print(&mut out)?;
    }
    out.flush()?;
    if let Some(path) = &job.json {
        let mut json = report.to_json();
        json["job"] = serde_json::to_value(job)?;
        if let Some(t) = totals {
            json["trustees"] = t.to_json();
        }
        report::write_json_value(path, &json)?;
        if crate::output::writes() {
            eprintln!("report written to {}", path.display());
        }
    }
    report.ensure_valid()
}

/// The job across the ranks of an mpirun job, no rank holding the whole graph
/// (`crate::dist_run`): a Kronecker graph generated by shares, a graph file read by
/// shares.
#[cfg(feature = "mpi")]
fn run_distributed(job: &Job) -> anyhow::Result<(KernelReport, crate::engines::SkeinTotals)> {
    let (graph, description) = dist_graph(job)?;
    let (explicit, count): (&[u64], u64) = match &job.roots {
        Roots::Count(n) => (&[], *n),
        Roots::List(list) => (list, list.len() as u64),
    };
    let spec = EngineSpec::of_job(job, job.engine);
    crate::dist_run::run(&crate::dist_run::DistKernel {
        kernel: job.kernel,
        graph,
        description,
        explicit_roots: explicit,
        root_count: count,
        count_name: "roots",
        roots_context: Some(format!("{}: key `job.roots`", job.source.display())),
        validate: job.validate,
        dump: job.dump.as_deref(),
        spec: &spec,
        warmup: 0,
    })
}

/// The job's graph across the ranks, described as the one-process path describes it.
#[cfg(feature = "mpi")]
fn dist_graph(job: &Job) -> anyhow::Result<(crate::dist_run::DistGraph, String)> {
    let spec = match &job.graph {
        JobGraph::Kronecker { scale, edgefactor, seeds } => GraphSpec::Kronecker(
            KroneckerParams::new(*scale, *edgefactor, seeds[0], seeds[1])
                .with_context(|| format!("{}: [graph]", job.source.display()))?,
        ),
        JobGraph::File { path } => GraphSpec::File(path.clone()),
    };
    Ok(crate::dist_run::DistGraph::of_spec(&spec))
}

pub(crate) fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let job = job::load(&args.job, &args.set)?;
    let rootless = job.kernel.rootless();
    let engines: Vec<EngineName> = if args.engines.is_empty() {
        EngineName::DEFAULT_COMPARE.to_vec()
    } else {
        args.engines.clone()
    };
    let launch = graph500_mpi::Launch {
        ranks: args.ranks as usize,
        mpirun_args: args.mpirun_args.clone().or_else(|| std::env::var("MPIRUN_ARGS").ok()),
    };
    // Every engine's limits and inputs, before the graph is built.
    if rootless {
        crate::kernels::check_compare(&job, &engines, &launch)?;
    }
    for &engine in engines.iter().filter(|_| !rootless) {
        match engine {
            EngineName::SkeinRack => crate::skein_rack::check(&launch)?,
            EngineName::Graph500Mpi => {
                graph500_mpi::check_job(&job)?;
                graph500_mpi::check_launch(&launch)?;
                graph500_mpi::build()?;
            }
            EngineName::Seq | EngineName::Rayon | EngineName::Skein => {
                EngineSpec::of_job(&job, engine)
                    .check()
                    .with_context(|| format!("{}: [runtime]", job.source.display()))?;
            }
        }
    }
    // Where the chart and the JSON report go, checked before anything runs.
    let chart = args.chart.clone().unwrap_or_else(|| match &job.json {
        Some(p) => p.with_extension("compare.png"),
        None => PathBuf::from(format!("reports/compare-{}.png", job.kernel)),
    });
    crate::chart::check_path(&chart)?;
    let compare_json = job.json.as_ref().map(|p| p.with_extension("compare.json"));
    if let Some(path) = &compare_json {
        crate::output::check_writable(path)
            .with_context(|| format!("{}: key `report.json`", job.source.display()))?;
    }
    let graph = load_graph(&job)?;
    // PageRank and components have no roots: each run is the whole kernel.
    let roots = if rootless { Vec::new() } else { job_roots(&job, &graph)? };
    let mut reference = crate::kernels::Reference::default();
    let mut rows = Vec::new();
    // Problems found after every engine ran (validation, the same-inputs check).
    let mut failures: Vec<anyhow::Error> = Vec::new();
    for &engine in &engines {
        eprintln!("running {} on {} with {engine} ...", job.kernel, graph.description);
        if rootless && engine != EngineName::SkeinRack {
            let (mut m, json) = crate::kernels::measure_job(&job, &graph, engine, &mut reference)?;
            let validation = m.validation_text();
            failures.extend(m.take_failure());
            rows.push(Row {
                name: engine.as_str().to_owned(),
                par: m.threads.to_string(),
                chart_label: format!("{engine} ({}t)", m.threads),
                time: m.times,
                hmean: m.hmean_rate,
                validation,
                json,
            });
            continue;
        }
        if engine == EngineName::Graph500Mpi {
            let JobGraph::Kronecker { scale, edgefactor, .. } = &job.graph else {
                anyhow::bail!("the graph500-mpi engine needs a Kronecker graph");
            };
            if launch.ranks > 1 {
                eprintln!("  (mpirun -np {}; the reference is built on first use)", launch.ranks);
            }
            let r = graph500_mpi::run(job.kernel, *scale, *edgefactor, job.validate, &launch)?;
            let skein_nedge = graph500_mpi::skein_nedge_stats(&graph, &roots);
            let check = graph500_mpi::check_nedge(&r.nedge, &skein_nedge);
            let validation = match &check {
                Ok(()) => format!("{}; same nedge as Skein", r.validation_text()),
                Err(_) => "SAME-INPUTS CHECK FAILED (nedge)".to_string(),
            };
            let mut json = r.to_json(&launch);
            json["same_inputs_check"] = match &check {
                Ok(()) => "passed".into(),
                Err(e) => format!("FAILED: {e}").into(),
            };
            if let Err(e) = check {
                failures.push(e);
            }
            rows.push(Row {
                name: engine.as_str().to_owned(),
                par: format!("{}r", r.ranks),
                chart_label: format!("{} ({}r)", engine, r.ranks),
                time: r.time,
                hmean: r.teps.harmonic_mean,
                validation,
                json,
            });
            continue;
        }
        if engine == EngineName::SkeinRack {
            eprintln!(
                "  (mpirun -np {}: this executable runs `skein run` on every rank)",
                launch.ranks
            );
            let mut r = crate::skein_rack::run(&job, &args.set, &launch)?;
            // The rack run's own report names its engine `skein`; in the comparison it is
            // the `skein-rack` row, beside a `skein` row of one process.
            r.json["engine"] = engine.as_str().into();
            r.json["ranks"] = launch.ranks.into();
            if !r.valid {
                failures.push(anyhow::anyhow!("skein-rack validation: {}", r.validation));
            }
            rows.push(Row {
                name: engine.as_str().to_owned(),
                par: format!("{}r", launch.ranks),
                chart_label: format!("{engine} ({}r x {}t)", launch.ranks, r.workers),
                time: r.time,
                hmean: r.hmean,
                validation: r.validation,
                json: r.json,
            });
            continue;
        }
        let spec = EngineSpec::of_job(&job, engine);
        let (report, totals) = run_engine(&job, &graph, &roots, &spec, None)?;
        if let Err(e) = report.ensure_valid() {
            failures.push(e);
        }
        let mut json = report.to_json();
        if let Some(t) = &totals {
            json["trustees"] = t.to_json();
        }
        rows.push(Row {
            name: report.engine.name.clone(),
            par: report.engine.threads.to_string(),
            chart_label: format!("{} ({}t)", report.engine.name, report.engine.threads),
            time: report.time_stats(),
            hmean: report.teps_stats().harmonic_mean,
            validation: report.validation.text(),
            json,
        });
    }
    let seq_teps = rows.iter().find(|r| r.name == "seq").map(|r| r.hmean);
    let mut out = std::io::stdout().lock();
    // TEPS for the rooted kernels; for the rootless ones the arcs read per second (every
    // arc once per PageRank iteration), the rate `skein pagerank` / `skein cc` report.
    let (rate, rate_long) = if rootless {
        ("hmean Marcs/s", "harmonic-mean M arcs/s")
    } else {
        ("hmean MTEPS", "harmonic-mean MTEPS")
    };
    if rootless {
        writeln!(out, "{} on {}, whole graph, 3 runs per engine", job.kernel, graph.description)?;
    } else {
        writeln!(out, "{} on {}, {} roots", job.kernel, graph.description, roots.len())?;
    }
    writeln!(out, "construction_time: {:.3} s", graph.construction_seconds)?;
    writeln!(
        out,
        "{:<12} {:>7} {:>12} {:>12} {:>14} {:>10}  validation",
        "engine", "threads", "median s", "min s", rate, "vs seq"
    )?;
    for r in &rows {
        let ratio = seq_teps.map_or("-".to_string(), |s| format!("{:.2}x", r.hmean / s));
        writeln!(
            out,
            "{:<12} {:>7} {:>12.6} {:>12.6} {:>14.2} {:>10}  {}",
            r.name,
            r.par,
            r.time.median,
            r.time.min,
            r.hmean / 1e6,
            ratio,
            r.validation
        )?;
    }
    if rows.iter().any(|r| r.name == EngineName::Graph500Mpi.as_str()) {
        writeln!(
            out,
            "(Nr: N MPI ranks of one thread; graph500-mpi times, TEPS and construction are the \
             reference's own)"
        )?;
    }
    if rows.iter().any(|r| r.name == EngineName::SkeinRack.as_str()) {
        writeln!(out, "(skein-rack: N ranks of the job's workers / N workers each)")?;
    }
    if job.kernel == crate::names::Kernel::Pagerank {
        writeln!(
            out,
            "(pagerank: at most {} iterations, tolerance {:e}; arcs/s counts every iteration's \
             arcs)",
            job.iterations, job.tolerance
        )?;
    }
    out.flush()?;
    let bars: Vec<(String, f64)> = rows.iter().map(|r| (r.chart_label.clone(), r.hmean)).collect();
    let title = if rootless {
        format!("{} on {}: harmonic-mean arcs per second", job.kernel, graph.description)
    } else {
        format!("{} on {}: harmonic-mean TEPS", job.kernel, graph.description)
    };
    crate::chart::rate_bars(&chart, &title, rate_long, &bars)?;
    eprintln!("chart written to {}", chart.display());
    if let Some(path) = compare_json {
        let reports: Vec<serde_json::Value> = rows.into_iter().map(|r| r.json).collect();
        let json = serde_json::json!({ "job": job, "engines": reports });
        report::write_json_value(&path, &json)?;
        eprintln!("report written to {}", path.display());
    }
    match failures.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One engine's line of the `compare` table, bar of the chart and entry of the JSON.
struct Row {
    name: String,
    /// Threads (`2`) or MPI ranks (`2r`).
    par: String,
    chart_label: String,
    time: report::Stats,
    hmean: f64,
    validation: String,
    json: serde_json::Value,
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
        &mut |root, spare| runner.run_reusing(root, spare),
        job.validate,
        &mut |out| dump.map_or(Ok(()), |path| report::write_dump(path, out)),
    )?;
    runner.measure_peaks()?;
    let totals = runner.skein_totals().cloned();
    Ok((report, totals))
}
