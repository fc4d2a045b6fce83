//! The engines a kernel can run on, behind one runner: the sequential and rayon
//! baselines, and Skein's delegation engine. `skein sssp|bfs`, `skein run` and
//! `skein compare` all build their engine here, so an engine runs the same way whatever
//! command asked for it.

use std::sync::Arc;

use anyhow::Context;
use skein_algorithms::parts::RoundSpread;
use skein_algorithms::{Engine as SkeinEngine, EngineOptions};
use skein_baselines::{Engine as Baseline, Options, Solver};

use crate::graph_source::LoadedGraph;
use crate::limits;
use crate::names::{EngineName, Kernel};
use crate::report::{EngineInfo, KernelOutput};
use skein_generators::{BfsResult, SsspResult};

/// How to set an engine up (what a job file's `[runtime]` or the CLI flags say).
#[derive(Debug, Clone)]
pub(crate) struct EngineSpec {
    pub(crate) engine: EngineName,
    /// rayon threads or Skein workers (0: one per CPU).
    pub(crate) threads: usize,
    /// Skein fibers per worker.
    pub(crate) fibers: usize,
    /// Pin Skein workers to cores.
    pub(crate) pin: bool,
    /// SSSP bucket width (None: the engine's default).
    pub(crate) delta: Option<f32>,
    /// Direction-optimizing BFS heuristics of the rayon engine.
    pub(crate) alpha: u64,
    pub(crate) beta: u64,
    /// How Skein's ranks move requests under mpirun (None: `SKEIN_TRANSPORT`, else auto).
    pub(crate) transport: Option<skein::RackTransport>,
    /// Threads that run a process's Skein workers (None: `SKEIN_WORKER_THREADS`, else 0: as
    /// many as the cores when the workers outnumber them; `skein::Builder::worker_threads`).
    pub(crate) worker_threads: Option<usize>,
}

/// Under `mpirun` with more than one rank only the skein engine runs across the ranks (the
/// others are one-process programs, which every rank would run on its own).
pub(crate) fn check_ranks(engine: EngineName) -> anyhow::Result<()> {
    let ranks = skein::ranks();
    if ranks > 1 && engine != EngineName::Skein {
        anyhow::bail!(
            "engine {engine}: under mpirun with {ranks} ranks only the skein engine runs across \
             the ranks; run {engine} in one process"
        );
    }
    Ok(())
}

impl EngineSpec {
    pub(crate) fn new(engine: EngineName, threads: usize) -> EngineSpec {
        EngineSpec {
            engine,
            threads,
            fibers: 8,
            pin: false,
            delta: None,
            alpha: skein_baselines::DEFAULT_ALPHA,
            beta: skein_baselines::DEFAULT_BETA,
            transport: None,
            worker_threads: None,
        }
    }

    /// Refuses worker threads for another engine than skein, and more threads than the
    /// `workers` it runs.
    pub(crate) fn check_worker_threads(&self, workers: usize) -> anyhow::Result<()> {
        let Some(t) = self.worker_threads else { return Ok(()) };
        if self.engine != EngineName::Skein {
            anyhow::bail!(
                "{} engine: --worker-threads is a setting of the skein engine only",
                self.engine
            );
        }
        if t > workers {
            anyhow::bail!(
                "--worker-threads: {t} threads for {workers} workers: at most one thread per \
                 worker (0: as many as the cores when the workers outnumber them)"
            );
        }
        Ok(())
    }

    /// How job `job` runs `engine`: its `[runtime]` section. The worker threads are the skein
    /// engine's alone (a job compared across engines runs the others without them).
    pub(crate) fn of_job(job: &crate::job::Job, engine: EngineName) -> EngineSpec {
        let mut spec = EngineSpec::new(engine, job.workers);
        spec.fibers = job.fibers;
        spec.pin = job.pin;
        spec.transport = job.transport;
        if engine == EngineName::Skein {
            spec.worker_threads = job.worker_threads;
        }
        spec
    }

    /// Checks the thread and fiber counts against [`limits::check_engine`] (the same
    /// limits as a job file's `[runtime]`); returns the thread count (0 resolved to one
    /// per CPU). Cheap: callers check before loading a graph.
    pub(crate) fn check(&self) -> anyhow::Result<usize> {
        match self.engine {
            EngineName::SkeinRack => anyhow::bail!(
                "engine skein-rack runs only under `skein compare` (it launches this skein \
                 under mpirun): e.g. `skein compare JOB.toml --engines skein,skein-rack --ranks \
                 2`; to run a job across ranks yourself, launch it with `mpirun -np 2 skein run \
                 JOB.toml` (engine skein)"
            ),
            EngineName::Graph500Mpi => anyhow::bail!(
                "engine graph500-mpi runs only under `skein compare` (it runs the Graph500 \
                 reference's own generator and roots): e.g. `skein compare JOB.toml --engines \
                 seq,graph500-mpi --ranks 2`"
            ),
            EngineName::Seq | EngineName::Rayon | EngineName::Skein => {}
        }
        let threads = if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        };
        let skein = self.engine == EngineName::Skein;
        self.check_worker_threads(threads)?;
        limits::check_engine(skein, threads, self.fibers, EngineOptions::default().slot_bytes)
            .map_err(|e| anyhow::anyhow!("{} engine: {e}", self.engine))?;
        Ok(threads)
    }
}

/// Workers (and ranks) up to which the kernels' report prints a line per worker ("skein
/// worker i:") and per rank (its peak memory); beyond, one line of min / median / max.
const WORKER_LINES_UP_TO: usize = 16;

/// What the Skein engine did besides its results, summed over roots.
#[derive(Debug, Clone, Default)]
pub(crate) struct SkeinTotals {
    /// Searches added.
    pub(crate) searches: u64,
    pub(crate) rounds: u64,
    pub(crate) messages: u64,
    pub(crate) arcs: u64,
    /// How the arcs spread over the partitions per round, summed over roots (SSSP).
    pub(crate) spread: Option<RoundSpread>,
    /// The runtime's per-worker counters, summed over roots.
    pub(crate) runtime: skein::Stats,
    /// Each rank's peak resident memory (bytes), when measured ([`Runner::measure_peaks`]).
    pub(crate) rank_peaks: Vec<u64>,
    /// Each rank's peak resident memory right after building its rows, when the graph was
    /// split over the ranks (`crate::dist_run`; empty otherwise).
    pub(crate) rank_build_peaks: Vec<u64>,
}

impl SkeinTotals {
    pub(crate) fn add(&mut self, s: &skein_algorithms::SearchStats) {
        self.searches += 1;
        self.rounds += s.rounds;
        self.messages += s.messages;
        self.arcs += s.arcs;
        if let Some(spread) = &s.round_spread {
            self.spread.get_or_insert_with(RoundSpread::default).accumulate(spread);
        }
        if let Some(rt) = &s.runtime {
            self.runtime.accumulate(rt);
        }
    }

    /// The `trustees` object of a JSON report.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let workers = crate::anatomy::workers_json(&self.runtime);
        let mut json = serde_json::json!({
            "rounds": self.rounds,
            "messages": self.messages,
            "arcs_relaxed": self.arcs,
            "workers": workers,
            "rank_peak_rss_bytes": self.rank_peaks,
            "run": crate::anatomy::run_json(&self.runtime.run),
        });
        if !self.rank_build_peaks.is_empty() {
            json["rank_build_peak_rss_bytes"] = self.rank_build_peaks.clone().into();
        }
        if let Some(s) = &self.spread {
            json["round_spread"] = serde_json::json!({
                "partitions": s.partitions,
                "rounds_with_work": s.rounds,
                "busiest_arcs": s.busiest_arcs,
                "mean_max_over_mean": s.mean_max_over_mean(),
                "critical_over_even": s.critical_over_even(self.arcs),
            });
        }
        json
    }

    /// Lines for the printed report.
    pub(crate) fn print(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        writeln!(out, "{:<32}{}", "skein rounds:", self.rounds)?;
        writeln!(out, "{:<32}{}", "skein messages:", self.messages)?;
        writeln!(out, "{:<32}{}", "skein arcs relaxed:", self.arcs)?;
        if self.searches > 0 {
            let per = |x: u64| x as f64 / self.searches as f64;
            writeln!(out, "{:<32}{:.1}", "skein rounds per search:", per(self.rounds))?;
            writeln!(out, "{:<32}{:.0}", "skein arcs per search:", per(self.arcs))?;
            let run = &self.runtime.run;
            if run.runs > 0 {
                // This rank's (rank 0's) time around the workers: across ranks, the run's
                // collectives (`skein::RunTimes`).
                let ms = |ns: u64| ns as f64 / run.runs as f64 / 1e6;
                writeln!(
                    out,
                    "{:<32}set-up {:.3} ms, workers {:.3} ms, close {:.3} ms (this rank's clock)",
                    "skein run per search:",
                    ms(run.setup_ns),
                    ms(run.workers_ns),
                    ms(run.close_ns)
                )?;
            }
            if let Some(s) = &self.spread {
                writeln!(
                    out,
                    "{:<32}{:.2} (busiest partition's arcs / mean, mean over rounds)",
                    "skein round spread:",
                    s.mean_max_over_mean()
                )?;
                writeln!(
                    out,
                    "{:<32}{:.0} ({:.2}x an even split's)",
                    "skein busiest arcs per search:",
                    per(s.busiest_arcs),
                    s.critical_over_even(self.arcs)
                )?;
            }
        }
        for (peaks, what) in
            [(&self.rank_peaks, "peak memory"), (&self.rank_build_peaks, "build peak")]
        {
            let mib = |b: u64| b as f64 / 1048576.0;
            if peaks.len() > WORKER_LINES_UP_TO {
                // One line for many ranks, naming the largest.
                let (top, _) = peaks.iter().enumerate().max_by_key(|(_, b)| **b).unwrap_or((0, &0));
                writeln!(
                    out,
                    "{:<32}{} MiB (min / median / max; the largest on rank {top})",
                    format!("skein ranks' {what} ({}):", peaks.len()),
                    crate::anatomy::spread(peaks.iter().map(|&b| mib(b)).collect(), |x| {
                        format!("{x:.1}")
                    })
                )?;
                continue;
            }
            for (r, &b) in peaks.iter().enumerate() {
                writeln!(out, "{:<32}{:.1} MiB", format!("skein rank {r} {what}:"), mib(b))?;
            }
        }
        let workers = &self.runtime.workers;
        if workers.len() > WORKER_LINES_UP_TO {
            // A line per worker would not be read at 16 ranks of 16 workers.
            let over = |f: &dyn Fn(&skein::WorkerStats) -> f64| {
                workers.iter().map(f).collect::<Vec<f64>>()
            };
            use crate::anatomy::spread;
            writeln!(
                out,
                "{:<32}busy {} % of loop passes, served {} requests in {} batches (mean {}) \
                 (min / median / max)",
                format!("skein workers ({}):", workers.len()),
                spread(over(&|w| 100.0 * w.busy_fraction()), |x| format!("{x:.1}")),
                spread(over(&|w| w.requests_served as f64), |x| format!("{x:.0}")),
                spread(over(&|w| w.batches_served as f64), |x| format!("{x:.0}")),
                spread(over(&|w| w.mean_batch()), |x| format!("{x:.1}"))
            )?;
            return Ok(());
        }
        for (i, w) in workers.iter().enumerate() {
            writeln!(
                out,
                "{:<32}busy {:.1}% of loop passes, served {} requests in {} batches (mean {:.1})",
                format!("skein worker {i}:"),
                100.0 * w.busy_fraction(),
                w.requests_served,
                w.batches_served,
                w.mean_batch()
            )?;
        }
        Ok(())
    }
}

/// The Skein engine's options for `spec`, with `threads` workers (per rank under mpirun).
pub(crate) fn skein_options(spec: &EngineSpec, threads: usize) -> EngineOptions {
    EngineOptions {
        workers: threads,
        fibers: spec.fibers,
        pin: spec.pin,
        delta: spec.delta,
        alpha: spec.alpha,
        beta: spec.beta,
        rack_transport: spec.transport,
        worker_threads: spec.worker_threads,
        ..EngineOptions::default()
    }
}

/// The settings reports show for the Skein engine (the bucket width is added once the
/// engine has chosen it: [`json_f32`] of its delta).
pub(crate) fn skein_settings(
    kernel: Kernel,
    opts: &EngineOptions,
) -> serde_json::Map<String, serde_json::Value> {
    let mut settings = serde_json::Map::new();
    settings.insert("fibers".into(), opts.fibers.into());
    settings.insert("pin".into(), opts.pin.into());
    if kernel == Kernel::Bfs {
        settings.insert("alpha".into(), opts.alpha.into());
        settings.insert("beta".into(), opts.beta.into());
    }
    settings.insert("slot_bytes".into(), opts.slot_bytes.into());
    // As asked (`--worker-threads`, `[runtime] worker_threads`); absent: the runtime's
    // default (`SKEIN_WORKER_THREADS`, else as many as the cores when the workers outnumber
    // them).
    if let Some(t) = opts.worker_threads {
        settings.insert("worker_threads".into(), t.into());
    }
    settings
}

/// An `f32` as the JSON number it prints as (0.05, not 0.05000000074505806).
pub(crate) fn json_f32(x: f32) -> serde_json::Value {
    format!("{x}").parse::<f64>().map_or(serde_json::Value::Null, Into::into)
}

enum Inner<'g> {
    Baseline(Solver<'g>),
    Skein(Box<SkeinEngine>, SkeinTotals),
}

/// A ready engine for one graph and kernel.
pub(crate) struct Runner<'g> {
    kernel: Kernel,
    info: EngineInfo,
    inner: Inner<'g>,
}

impl std::fmt::Debug for Runner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("kernel", &self.kernel).field("info", &self.info).finish()
    }
}

impl<'g> Runner<'g> {
    /// Sets `spec`'s engine up for `kernel` on `graph`, refusing graphs it cannot run
    /// (no vertices, negative weights for SSSP) with a clear error.
    pub(crate) fn new(
        spec: &EngineSpec,
        kernel: Kernel,
        graph: &'g LoadedGraph,
    ) -> anyhow::Result<Self> {
        let csr = &graph.csr;
        skein_baselines::check_graph(csr)
            .with_context(|| format!("graph {}", graph.description))?;
        let max_weight = if kernel == Kernel::Sssp {
            skein_baselines::check_weights(csr)
                .with_context(|| format!("graph {}", graph.description))?
        } else {
            1.0
        };
        let threads = spec.check()?;
        let mut settings = serde_json::Map::new();
        let inner = match spec.engine {
            EngineName::Seq | EngineName::Rayon => {
                let engine =
                    if spec.engine == EngineName::Seq { Baseline::Seq } else { Baseline::Rayon };
                let options =
                    Options { threads, delta: spec.delta, alpha: spec.alpha, beta: spec.beta };
                if engine == Baseline::Rayon {
                    match kernel {
                        Kernel::Sssp => {
                            let delta = options.delta_for(max_weight);
                            settings.insert("delta".into(), json_f32(delta));
                        }
                        Kernel::Bfs => {
                            settings.insert("alpha".into(), spec.alpha.into());
                            settings.insert("beta".into(), spec.beta.into());
                        }
                        Kernel::Pagerank | Kernel::Cc => {}
                    }
                }
                let solver = Solver::new(engine, csr, &options)?;
                // Layout copies happen here, before any search is timed.
                match kernel {
                    Kernel::Sssp => {
                        solver.prepare_sssp()?;
                    }
                    Kernel::Bfs | Kernel::Pagerank | Kernel::Cc => solver.prepare_bfs(),
                }
                Inner::Baseline(solver)
            }
            EngineName::Skein => {
                let opts = skein_options(spec, threads);
                settings = skein_settings(kernel, &opts);
                let engine = SkeinEngine::new(Arc::clone(csr), opts)?;
                if kernel == Kernel::Sssp {
                    // The width the engine chose (the option, or its default for the graph).
                    settings.insert("delta".into(), json_f32(engine.delta()));
                }
                // As for the baselines: the arc copy is made before any search is timed.
                match kernel {
                    Kernel::Sssp => engine.prepare_sssp(),
                    Kernel::Bfs | Kernel::Pagerank | Kernel::Cc => engine.prepare_bfs(),
                }
                Inner::Skein(Box::new(engine), SkeinTotals::default())
            }
            // Refused by `spec.check()` above, with the reason.
            EngineName::SkeinRack | EngineName::Graph500Mpi => {
                anyhow::bail!("engine {} cannot run here", spec.engine)
            }
        };
        let threads = match &inner {
            Inner::Baseline(s) => s.threads(),
            Inner::Skein(..) => threads,
        };
        let info = EngineInfo { name: spec.engine.as_str().to_owned(), threads, settings };
        Ok(Runner { kernel, info, inner })
    }

    /// The engine's description for reports.
    pub(crate) fn info(&self) -> EngineInfo {
        self.info.clone()
    }

    /// Runs the kernel from `root`.
    pub(crate) fn run(&mut self, root: u64) -> anyhow::Result<KernelOutput> {
        self.run_reusing(root, None)
    }

    /// [`Runner::run`] that may write into `spare`, an earlier output of this runner (BFS
    /// results, and the skein engine's SSSP results, are overwritten in place: no fresh pages per
    /// search).
    pub(crate) fn run_reusing(
        &mut self,
        root: u64,
        spare: Option<KernelOutput>,
    ) -> anyhow::Result<KernelOutput> {
        let (mut bfs_out, mut sssp_out) = match spare {
            Some(KernelOutput::Bfs(r)) => (r, None),
            Some(KernelOutput::Sssp(r)) => {
                (BfsResult { root, level: Vec::new(), parent: Vec::new() }, Some(r))
            }
            _ => (BfsResult { root, level: Vec::new(), parent: Vec::new() }, None),
        };
        Ok(match (&mut self.inner, self.kernel) {
            (Inner::Baseline(s), Kernel::Sssp) => KernelOutput::Sssp(s.sssp(root)?),
            (Inner::Baseline(s), Kernel::Bfs) => {
                s.bfs_into(root, &mut bfs_out)?;
                KernelOutput::Bfs(bfs_out)
            }
            (Inner::Skein(e, totals), Kernel::Sssp) => {
                let mut out = sssp_out.take().unwrap_or_else(|| SsspResult {
                    root,
                    dist: Vec::new(),
                    parent: Vec::new(),
                });
                let stats = e.sssp_into(root, &mut out)?;
                totals.add(&stats);
                KernelOutput::Sssp(out)
            }
            (Inner::Skein(e, totals), Kernel::Bfs) => {
                let stats = e.bfs_into(root, &mut bfs_out)?;
                totals.add(&stats);
                KernelOutput::Bfs(bfs_out)
            }
            // Run by `crate::kernels`, never through a search runner.
            (_, k @ (Kernel::Pagerank | Kernel::Cc)) => anyhow::bail!("kernel {k} has no roots"),
        })
    }

    /// Measures every rank's peak memory into the Skein engine's totals (nothing for the
    /// baselines). Collective under `mpirun`: every rank calls it, after the searches.
    pub(crate) fn measure_peaks(&mut self) -> anyhow::Result<()> {
        if let Inner::Skein(engine, totals) = &mut self.inner {
            totals.rank_peaks = engine.peak_rss_per_rank()?;
        }
        Ok(())
    }

    /// The Skein engine's totals (None for the baselines).
    pub(crate) fn skein_totals(&self) -> Option<&SkeinTotals> {
        match &self.inner {
            Inner::Skein(_, t) => Some(t),
            Inner::Baseline(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(t: &SkeinTotals) -> String {
        let mut out = Vec::new();
        t.print(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn many_ranks_and_workers_print_one_line_each_kind() {
        let mut t = SkeinTotals {
            rank_peaks: (1..=17u64).map(|r| r << 20).collect(),
            rank_build_peaks: vec![1 << 20; 17],
            ..SkeinTotals::default()
        };
        t.rank_build_peaks[5] = 3 << 20;
        t.runtime.workers = vec![skein::WorkerStats::default(); 17];
        let out = printed(&t);
        let peak = "skein ranks' peak memory (17):  1.0 / 9.0 / 17.0 MiB (min / median / max; \
                    the largest on rank 16)";
        assert!(out.contains(peak), "{out}");
        assert!(
            out.contains("(17):   1.0 / 1.0 / 3.0 MiB (min / median / max; the largest on rank 5)"),
            "{out}"
        );
        assert!(out.contains("skein workers (17):             busy "), "{out}");
        assert!(!out.contains("skein rank 0 ") && !out.contains("skein worker 0:"), "{out}");
        // Up to 16: a line each.
        t.rank_peaks.truncate(16);
        t.runtime.workers.truncate(16);
        let out = printed(&t);
        assert!(out.contains("skein rank 15 peak memory:      16.0 MiB"), "{out}");
        assert!(out.contains("skein worker 15:"), "{out}");
    }
}
