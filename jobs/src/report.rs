//! Graph500-style statistics and reports of a kernel run over many roots.
//!
//! [`run_kernel`] times one engine over a list of roots, validates every result with the
//! Graph500 rules of `skein-generators`, and returns a [`KernelReport`], which prints in
//! the Graph500 reference's output style ([`KernelReport::print`]) and serializes to JSON
//! ([`KernelReport::to_json`]). `skein sssp|bfs` and `skein run` share it; an engine is
//! just a closure `(root, previous output) -> KernelOutput` (an engine may write into the
//! previous root's vectors, so that a search faults no fresh pages for its result). Reports and result dumps ([`DUMP_HELP`] is the
//! dump format) are written atomically through [`crate::output`].
//!
//! Statistics follow the reference 3.0.1: order statistics of the sorted sample
//! (`(x[(n-1)/4] + x[n/4]) / 2` for the first quartile, and so on), standard deviation with
//! `n - 1`, and TEPS statistics computed on seconds per edge, so the harmonic mean TEPS is
//! `1 / mean(seconds / nedge)` and its standard deviation is Norris' (1940)
//! `stddev(s/e) / (mean(s/e)^2 * sqrt(n - 1))`.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use skein_generators::validate::{teps_edge_count, validate_bfs, validate_sssp};
use skein_generators::{BfsResult, SsspResult, UNREACHED_LEVEL};

use crate::graph_source::LoadedGraph;
use crate::names::Kernel;

/// The dump format, for `--help` (`--dump`, `report.dump`): what [`KernelOutput::dump`]
/// writes.
pub(crate) const DUMP_HELP: &str = "\
Write the first root's result to FILE, one line per vertex, in vertex order: `v value parent`.

  v       the vertex id (0, 1, ...).
  value   BFS: the level (hops from the root; the root is 0), or -1 when unreached.
          SSSP: the distance as exactly 8 lowercase hex digits, the bits of its IEEE-754
          binary32 value (e.g. 3f400000 is 0.75; 00000000 for the root), so it reads back
          without rounding; bf800000 (the bits of -1.0) when unreached.
  parent  the vertex's parent in the search tree (the root is its own parent), or -1 when
          unreached.

The file is written atomically: a temporary file beside it is renamed over FILE when done,
so FILE holds the old contents or the new ones, never a mix.";

/// What an engine returns for one root.
#[derive(Debug, Clone)]
pub(crate) enum KernelOutput {
    /// An SSSP result.
    Sssp(SsspResult),
    /// A BFS result.
    Bfs(BfsResult),
}

impl KernelOutput {
    fn reached(&self) -> u64 {
        match self {
            KernelOutput::Sssp(r) => r.reached(),
            KernelOutput::Bfs(r) => r.reached(),
        }
    }

    fn is_reached(&self, v: u64) -> bool {
        match self {
            KernelOutput::Sssp(r) => r.dist[v as usize].is_finite(),
            KernelOutput::Bfs(r) => r.level[v as usize] != UNREACHED_LEVEL,
        }
    }

    /// Writes the result one line per vertex: `v value parent`, where value is the BFS
    /// level (`-1` unreached) or the SSSP distance as the 8 hex digits of its binary32 bits
    /// (`bf800000`, i.e. -1.0, unreached); parent is `-1` when unreached.
    pub(crate) fn dump(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            KernelOutput::Sssp(r) => {
                for (v, (&d, &p)) in r.dist.iter().zip(&r.parent).enumerate() {
                    dump_sssp_line(out, v as u64, d, p)?;
                }
            }
            KernelOutput::Bfs(r) => {
                for (v, (&l, &p)) in r.level.iter().zip(&r.parent).enumerate() {
                    dump_bfs_line(out, v as u64, l, p)?;
                }
            }
        }
        Ok(())
    }
}

/// The parent field of a dump line: the parent, or `-1` when unreached.
fn parent_text(p: u64) -> String {
    if p == skein_generators::NO_PARENT {
        "-1".to_string()
    } else {
        p.to_string()
    }
}

/// One line of an SSSP dump ([`DUMP_HELP`]): vertex `v`, distance `d`, parent `p`.
pub(crate) fn dump_sssp_line(out: &mut dyn Write, v: u64, d: f32, p: u64) -> std::io::Result<()> {
    let bits = if d.is_finite() { d.to_bits() } else { (-1.0f32).to_bits() };
    writeln!(out, "{v} {bits:08x} {}", parent_text(p))
}

/// One line of a BFS dump ([`DUMP_HELP`]): vertex `v`, level `l`, parent `p`.
pub(crate) fn dump_bfs_line(out: &mut dyn Write, v: u64, l: u32, p: u64) -> std::io::Result<()> {
    let level = if l == UNREACHED_LEVEL { -1 } else { i64::from(l) };
    writeln!(out, "{v} {level} {}", parent_text(p))
}

/// Order statistics, mean and standard deviation of a sample (Graph500 rules).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Stats {
    pub(crate) min: f64,
    pub(crate) firstquartile: f64,
    pub(crate) median: f64,
    pub(crate) thirdquartile: f64,
    pub(crate) max: f64,
    pub(crate) mean: f64,
    /// Sample standard deviation (`n - 1`); 0 for a single value.
    pub(crate) stddev: f64,
}

impl Stats {
    /// Statistics of `x` (must not be empty).
    pub(crate) fn of(x: &[f64]) -> Stats {
        assert!(!x.is_empty(), "statistics of an empty sample");
        let n = x.len();
        let mut s = x.to_vec();
        s.sort_by(f64::total_cmp);
        let mean = x.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Stats {
            min: s[0],
            firstquartile: (s[(n - 1) / 4] + s[n / 4]) * 0.5,
            median: (s[(n - 1) / 2] + s[n / 2]) * 0.5,
            thirdquartile: (s[n - 1 - (n - 1) / 4] + s[n - 1 - n / 4]) * 0.5,
            max: s[n - 1],
            mean,
            stddev,
        }
    }
}

/// TEPS statistics, from seconds per edge as the reference computes them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct TepsStats {
    pub(crate) min: f64,
    pub(crate) firstquartile: f64,
    pub(crate) median: f64,
    pub(crate) thirdquartile: f64,
    pub(crate) max: f64,
    pub(crate) harmonic_mean: f64,
    pub(crate) harmonic_stddev: f64,
}

impl TepsStats {
    /// From per-run `seconds` and TEPS edge counts `nedge`. A run with `nedge` 0 (a root
    /// given by hand whose component has no edge) traversed nothing: it is left out, and
    /// when every run is such a run every figure is 0.
    pub(crate) fn of(seconds: &[f64], nedge: &[u64]) -> TepsStats {
        let spe: Vec<f64> = seconds
            .iter()
            .zip(nedge)
            .filter(|&(_, &e)| e > 0)
            .map(|(&s, &e)| s / e as f64)
            .collect();
        if spe.is_empty() {
            let zero = 0.0;
            return TepsStats {
                min: zero,
                firstquartile: zero,
                median: zero,
                thirdquartile: zero,
                max: zero,
                harmonic_mean: zero,
                harmonic_stddev: zero,
            };
        }
        let s = Stats::of(&spe);
        let n = spe.len();
        let harmonic_stddev =
            if n > 1 { s.stddev / (s.mean * s.mean * ((n - 1) as f64).sqrt()) } else { 0.0 };
        TepsStats {
            min: 1.0 / s.max,
            firstquartile: 1.0 / s.thirdquartile,
            median: 1.0 / s.median,
            thirdquartile: 1.0 / s.firstquartile,
            max: 1.0 / s.min,
            harmonic_mean: 1.0 / s.mean,
            harmonic_stddev,
        }
    }
}

/// One root's run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunRecord {
    pub(crate) root: u64,
    /// Kernel time (the engine call only).
    pub(crate) seconds: f64,
    /// The Graph500 TEPS edge count of the root's component.
    pub(crate) nedge: u64,
    /// `nedge / seconds`.
    pub(crate) teps: f64,
    /// Vertices reached, the root included.
    pub(crate) reached: u64,
    /// Validation time (`None` when not validated).
    pub(crate) validate_seconds: Option<f64>,
    /// Page faults (minor and major) of this process during the engine call, `None` where
    /// not measured. Fresh memory a search touches shows here.
    pub(crate) page_faults: Option<u64>,
}

/// Page faults (minor and major) of this process so far, `None` where the system does not
/// say.
pub(crate) fn page_faults() -> Option<u64> {
    // SAFETY: `getrusage` writes a `rusage` into the zeroed one we own; both fields read
    // are plain integers.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut u) == 0).then_some(u)
    }?;
    Some((usage.ru_minflt as u64).saturating_add(usage.ru_majflt as u64))
}

/// Outcome of Graph500 validation over all roots.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Validation {
    /// Every result passed.
    Passed,
    /// Not run (`--no-validate`).
    Skipped,
    /// The first failure.
    Failed { root: u64, message: String },
}

impl Validation {
    /// `passed`, `skipped` or `FAILED for root R: why`.
    pub(crate) fn text(&self) -> String {
        match self {
            Validation::Passed => "passed".into(),
            Validation::Skipped => "skipped".into(),
            Validation::Failed { root, message } => format!("FAILED for root {root}: {message}"),
        }
    }
}

/// The engine that ran, as reports name it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct EngineInfo {
    /// `seq`, `rayon`, ...
    pub(crate) name: String,
    /// Threads it used.
    pub(crate) threads: usize,
    /// Engine-specific settings (delta, alpha, beta, ...), shown in reports.
    pub(crate) settings: serde_json::Map<String, serde_json::Value>,
}

/// Everything one kernel run over many roots yields.
#[derive(Debug, Clone)]
pub(crate) struct KernelReport {
    pub(crate) kernel: Kernel,
    pub(crate) engine: EngineInfo,
    pub(crate) graph_description: String,
    pub(crate) vertices: u64,
    /// Undirected non-self-loop edges in the CSR (repeats counted).
    pub(crate) edges: u64,
    /// Edges of the input edge list (self-loops and repeats included).
    pub(crate) input_edges: u64,
    /// Kronecker parameters when the graph was generated.
    pub(crate) scale_edgefactor: Option<(u32, u32)>,
    pub(crate) generation_seconds: f64,
    pub(crate) construction_seconds: f64,
    pub(crate) runs: Vec<RunRecord>,
    pub(crate) validation: Validation,
}

/// Runs `engine` from every root, times each call, validates each result (unless
/// `validate` is false) and hands the first root's output to `first` (for `--dump`).
/// `engine_fn(root, spare)` gets the previous root's output back (`None` for the first),
/// whose vectors it may reuse.
///
/// An engine error (bad input) stops the run with that error. A validation failure does
/// not: it is recorded in the report, and the caller decides (the CLI exits non-zero).
pub(crate) fn run_kernel(
    kernel: Kernel,
    graph: &LoadedGraph,
    roots: &[u64],
    engine: EngineInfo,
    engine_fn: &mut dyn FnMut(u64, Option<KernelOutput>) -> anyhow::Result<KernelOutput>,
    validate: bool,
    first: &mut dyn FnMut(&KernelOutput) -> anyhow::Result<()>,
) -> anyhow::Result<KernelReport> {
    anyhow::ensure!(!roots.is_empty(), "no search roots to run");
    let csr = &graph.csr;
    let mut runs = Vec::with_capacity(roots.len());
    let mut validation = if validate { Validation::Passed } else { Validation::Skipped };
    let bar = crate::progress::phase(&format!("{} roots", kernel.as_str()), roots.len() as u64);
    let mut spare = None;
    for (i, &root) in roots.iter().enumerate() {
        let faults = page_faults();
        let start = Instant::now();
        let out = engine_fn(root, spare.take())
            .with_context(|| format!("{} from root {root}", kernel.as_str()))?;
        let seconds = start.elapsed().as_secs_f64();
        let page_faults = faults.zip(page_faults()).map(|(a, b)| b.saturating_sub(a));
        let (nedge, validate_seconds) = if validate {
            let start = Instant::now();
            let checked = match &out {
                KernelOutput::Sssp(r) => validate_sssp(csr, r),
                KernelOutput::Bfs(r) => validate_bfs(csr, r),
            };
            let t = start.elapsed().as_secs_f64();
            match checked {
                Ok(stats) => (stats.teps_edges, Some(t)),
                Err(e) => {
                    if validation == Validation::Passed {
                        validation = Validation::Failed { root, message: e.to_string() };
                    }
                    (teps_edge_count(csr, |v| out.is_reached(v)), Some(t))
                }
            }
        } else {
            (teps_edge_count(csr, |v| out.is_reached(v)), None)
        };
        if i == 0 {
            first(&out)?;
        }
        runs.push(RunRecord {
            root,
            seconds,
            nedge,
            teps: nedge as f64 / seconds,
            reached: out.reached(),
            validate_seconds,
            page_faults,
        });
        spare = Some(out);
        bar.inc(1);
    }
    bar.finish();
    Ok(KernelReport {
        kernel,
        engine,
        graph_description: graph.description.clone(),
        vertices: csr.num_vertices(),
        edges: csr.num_arcs() / 2,
        input_edges: graph.input_edges,
        scale_edgefactor: graph.scale_edgefactor(),
        generation_seconds: graph.generation_seconds,
        construction_seconds: graph.construction_seconds,
        runs,
        validation,
    })
}

impl KernelReport {
    fn seconds(&self) -> Vec<f64> {
        self.runs.iter().map(|r| r.seconds).collect()
    }

    /// Kernel time statistics.
    pub(crate) fn time_stats(&self) -> Stats {
        Stats::of(&self.seconds())
    }

    /// TEPS statistics.
    pub(crate) fn teps_stats(&self) -> TepsStats {
        let nedge: Vec<u64> = self.runs.iter().map(|r| r.nedge).collect();
        TepsStats::of(&self.seconds(), &nedge)
    }

    /// True when validation ran and every result passed.
    pub(crate) fn validated(&self) -> bool {
        self.validation == Validation::Passed
    }

    /// Prints the report in the Graph500 reference's output style.
    pub(crate) fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        let k = self.kernel.as_str();
        let line = |out: &mut dyn Write, key: &str, value: String| {
            writeln!(out, "{:<32}{value}", format!("{key}:"))
        };
        line(out, "graph", self.graph_description.clone())?;
        if let Some((scale, ef)) = self.scale_edgefactor {
            line(out, "SCALE", scale.to_string())?;
            line(out, "edgefactor", ef.to_string())?;
        }
        line(out, "vertices", self.vertices.to_string())?;
        line(out, "edges", format!("{} (input {})", self.edges, self.input_edges))?;
        line(out, "engine", self.engine.name.clone())?;
        line(out, "threads", self.engine.threads.to_string())?;
        for (key, value) in &self.engine.settings {
            line(out, key, value.to_string())?;
        }
        line(out, "NBFS", self.runs.len().to_string())?;
        line(out, "graph_generation", format!("{:.6}", self.generation_seconds))?;
        line(out, "construction_time", format!("{:.6}", self.construction_seconds))?;
        let t = self.time_stats();
        for (name, v) in [
            ("min_time", t.min),
            ("firstquartile_time", t.firstquartile),
            ("median_time", t.median),
            ("thirdquartile_time", t.thirdquartile),
            ("max_time", t.max),
            ("mean_time", t.mean),
            ("stddev_time", t.stddev),
        ] {
            line(out, &format!("{k:<4} {name}"), format!("{v:.6e}"))?;
        }
        let nedge: Vec<f64> = self.runs.iter().map(|r| r.nedge as f64).collect();
        let e = Stats::of(&nedge);
        for (name, v) in [
            ("min_nedge", e.min),
            ("firstquartile_nedge", e.firstquartile),
            ("median_nedge", e.median),
            ("thirdquartile_nedge", e.thirdquartile),
            ("max_nedge", e.max),
            ("mean_nedge", e.mean),
            ("stddev_nedge", e.stddev),
        ] {
            line(out, name, format!("{v}"))?;
        }
        let s = self.teps_stats();
        for (name, v) in [
            ("min_TEPS", s.min),
            ("firstquartile_TEPS", s.firstquartile),
            ("median_TEPS", s.median),
            ("thirdquartile_TEPS", s.thirdquartile),
            ("max_TEPS", s.max),
        ] {
            line(out, &format!("{k:<4} {name}"), format!("{v:.6e}"))?;
        }
        // The `!` is the reference's mark of its headline figure, said on the line itself.
        writeln!(
            out,
            "{:<29}!  {:.6e}   (!: the Graph500 headline figure)",
            format!("{k:<4} harmonic_mean_TEPS:"),
            s.harmonic_mean
        )?;
        line(out, &format!("{k:<4} harmonic_stddev_TEPS"), format!("{:.6e}", s.harmonic_stddev))?;
        line(out, &format!("{k:<4} harmonic_mean_MTEPS"), format!("{:.2}", s.harmonic_mean / 1e6))?;
        let vt: Vec<f64> = self.runs.iter().filter_map(|r| r.validate_seconds).collect();
        if !vt.is_empty() {
            let v = Stats::of(&vt);
            line(out, &format!("{k:<4} median_validate"), format!("{:.6e}", v.median))?;
        }
        let faults: Vec<f64> =
            self.runs.iter().filter_map(|r| r.page_faults).map(|f| f as f64).collect();
        if !faults.is_empty() {
            // The median leaves out the first searches, which map the arrays kept after.
            let f = Stats::of(&faults);
            line(out, "page faults per search", format!("{:.1} (median {:.0})", f.mean, f.median))?;
        }
        line(out, "validation", self.validation.text())?;
        Ok(())
    }

    /// The JSON report.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let teps = self.teps_stats();
        serde_json::json!({
            "kernel": self.kernel.as_str(),
            "engine": self.engine.name,
            "threads": self.engine.threads,
            "settings": self.engine.settings,
            "graph": {
                "description": self.graph_description,
                "vertices": self.vertices,
                "edges": self.edges,
                "input_edges": self.input_edges,
                "scale": self.scale_edgefactor.map(|s| s.0),
                "edgefactor": self.scale_edgefactor.map(|s| s.1),
            },
            "generation_seconds": self.generation_seconds,
            "construction_seconds": self.construction_seconds,
            "validated": self.validated(),
            "validation": self.validation.text(),
            "harmonic_mean_teps": teps.harmonic_mean,
            "time": self.time_stats(),
            "teps": teps,
            "runs": self.runs,
            // The rack transport the runs used (`null`: none, one process; "shm+mpi": the
            // rings within nodes, MPI between), and per rank as rank 0 reached it.
            "transport": transport_names(),
            "transport_per_rank": skein::rack_transports().iter().map(|t| t.name()).collect::<Vec<_>>(),
        })
    }

    /// An error when validation ran and failed (the CLI then exits non-zero).
    pub(crate) fn ensure_valid(&self) -> anyhow::Result<()> {
        // The last step of a run's report (printed, `--json` written): complete.
        crate::output::complete();
        if let Validation::Failed { root, message } = &self.validation {
            anyhow::bail!("{} validation failed for root {root}: {message}", self.engine.name);
        }
        Ok(())
    }
}

/// Writes a JSON report to `path` (atomically, creating its folder).
pub(crate) fn write_json_value(path: &Path, json: &serde_json::Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(json)? + "\n";
    crate::output::write_file(path, "the JSON report", |w| w.write_all(text.as_bytes()))
}

/// Writes one result to `path` (atomically, creating its folder) in the dump format of
/// [`KernelOutput::dump`].
pub(crate) fn write_dump(path: &Path, out: &KernelOutput) -> anyhow::Result<()> {
    crate::output::write_file(path, "the dump file", |w| out.dump(w))?;
    dump_written(path);
    Ok(())
}

/// The first root's dump is at `path`: until the report is complete ([`KernelReport::
/// ensure_valid`], the last step), an interrupt says so (`output::incomplete`).
pub(crate) fn dump_written(path: &Path) {
    crate::output::incomplete(&format!(
        "skein: interrupted after the first root's dump was written to {}, before the run's \
         report was complete: that dump has no report beside it",
        path.display()
    ));
}

/// The transports the last run over ranks used, joined by `+` in order of first use from
/// rank 0 (`shm+mpi` for the rings within nodes and MPI between); `None` without one.
fn transport_names() -> Option<String> {
    let mut names: Vec<&str> = Vec::new();
    for t in skein::rack_transports() {
        if !names.contains(&t.name()) {
            names.push(t.name());
        }
    }
    (!names.is_empty()).then(|| names.join("+"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_follow_the_reference_rules() {
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.min, s.max, s.mean), (1.0, 4.0, 2.5));
        assert_eq!(s.median, 2.5);
        // (x[0] + x[1]) / 2 and (x[3 - 0] + x[3 - 1]) / 2 on the sorted sample.
        assert_eq!((s.firstquartile, s.thirdquartile), (1.5, 3.5));
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let one = Stats::of(&[7.0]);
        assert_eq!((one.median, one.stddev), (7.0, 0.0));
    }

    #[test]
    fn harmonic_mean_teps() {
        // 100 edges in 1 s and in 0.5 s: 100 and 200 TEPS; harmonic mean 133.3.
        let t = TepsStats::of(&[1.0, 0.5], &[100, 100]);
        assert!((t.harmonic_mean - 400.0 / 3.0).abs() < 1e-9);
        assert!((t.min - 100.0).abs() < 1e-9 && (t.max - 200.0).abs() < 1e-9);
        // A run that traversed no edge is no rate at all: left out, or 0 when it is alone.
        assert_eq!(TepsStats::of(&[1.0, 0.5, 0.1], &[100, 100, 0]), t);
        let none = TepsStats::of(&[0.1], &[0]);
        assert_eq!((none.harmonic_mean, none.max, none.min), (0.0, 0.0, 0.0));
    }
}
