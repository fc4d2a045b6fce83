//! The `graph500-mpi` engine of `skein compare`: the official Graph500 MPI reference 3.0.1
//! (`graph500_reference_bfs_sssp`), built and run under `mpirun` by
//! `jobs/scripts/graph500-reference.sh` (embedded in the binary, run with `bash`), its
//! standard output parsed into a [`RefReport`] in the shape of Skein's JSON reports.
//!
//! The reference has its own generator, seeds (2, 3) and 64 search roots; it only makes
//! sense for a job whose graph is the same Kronecker graph and whose roots are those 64
//! ([`check_job`]). That the inputs really are the same is checked, not assumed:
//! [`skein_nedge_stats`] computes the reference's `nedge` statistics (the TEPS edge count
//! of every root's component) on Skein's own graph and roots, and [`check_nedge`] fails,
//! naming both figures, when they differ from what the reference printed.
//!
//! The reference prints summary statistics only (no per-root figures on its standard
//! output), so a [`RefReport`] has no `runs`; what it does not print (Skein's CSR edge
//! count, per-root times) is absent from its JSON, never invented.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::process::{Command, Stdio};

use anyhow::Context;
use skein_generators::validate::teps_edge_count;

use crate::graph_source::LoadedGraph;
use crate::job::{Job, JobGraph, Roots};
use crate::names::{EngineName, Kernel};
use crate::report::{Stats, TepsStats};

/// The script that builds and runs the reference (see its header for its environment).
pub(crate) const SCRIPT: &str = include_str!("../scripts/graph500-reference.sh");

/// The reference's commit (graph500/graph500, branch `newreference`, tag 3.0.1).
pub(crate) const COMMIT: &str = "f89d643ce4aaae9a823d310c6ab2dd10e3d2982c";

/// The reference's fixed generator seeds (`main.c`: `seed1 = 2, seed2 = 3`).
pub(crate) const SEEDS: [u64; 2] = [2, 3];

/// The reference's number of search roots.
pub(crate) const ROOTS: u64 = 64;

/// How to launch the reference.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// MPI ranks (`mpirun -np`).
    pub(crate) ranks: usize,
    /// Extra `mpirun` arguments, split on whitespace by the script (`MPIRUN_ARGS`).
    pub(crate) mpirun_args: Option<String>,
}

/// Refuses a job the reference cannot run on the same inputs: a graph file, other seeds,
/// or roots other than the reference's 64. Cheap: callers check before loading a graph.
pub(crate) fn check_job(job: &Job) -> anyhow::Result<()> {
    let engine = EngineName::Graph500Mpi;
    let file = job.source.display();
    match &job.graph {
        JobGraph::File { path } => anyhow::bail!(
            "{file}: the {engine} engine generates its own Graph500 Kronecker graph and \
             cannot read the graph file {}; use a `generator = \"kronecker\"` job",
            path.display()
        ),
        JobGraph::Kronecker { seeds, .. } if *seeds != SEEDS => anyhow::bail!(
            "{file}: key `graph.seeds`: the {engine} engine always uses the Graph500 seeds \
             [2, 3], the job has {seeds:?}"
        ),
        JobGraph::Kronecker { .. } => {}
    }
    match &job.roots {
        Roots::Count(ROOTS) => Ok(()),
        Roots::Count(n) => anyhow::bail!(
            "{file}: key `job.roots`: the {engine} engine runs the reference's {ROOTS} Graph500 \
             roots, the job asks for {n}; set `roots = {ROOTS}` (e.g. `--set job.roots={ROOTS}`)"
        ),
        Roots::List(_) => anyhow::bail!(
            "{file}: key `job.roots`: the {engine} engine runs the reference's {ROOTS} Graph500 \
             roots and cannot take a list of roots; set `roots = {ROOTS}`"
        ),
    }
}

/// Refuses a rank count the reference cannot run: it is compiled with
/// `SIZE_MUST_BE_A_POWER_OF_TWO` (its `common.h`) and aborts on any other count.
pub(crate) fn check_launch(launch: &Launch) -> anyhow::Result<()> {
    anyhow::ensure!(
        launch.ranks.is_power_of_two(),
        "--ranks {}: the {} engine needs a power of two (1, 2, 4, 8, ...): the Graph500 \
         reference is built for power-of-two rank counts only",
        launch.ranks,
        EngineName::Graph500Mpi
    );
    Ok(())
}

/// The reference's standard output, as `key: value` pairs (keys with single spaces, e.g.
/// `bfs min_time`; the `!` before the harmonic means dropped).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefOutput {
    values: BTreeMap<String, String>,
}

impl RefOutput {
    /// Parses the reference's standard output. Lines that are not `key: value` are ignored;
    /// a run that failed validation (the reference then prints no results) is an error
    /// quoting its validation messages.
    pub(crate) fn parse(text: &str) -> anyhow::Result<RefOutput> {
        if text.contains("No results printed for invalid run.") {
            let errors: Vec<&str> =
                text.lines().filter(|l| l.contains("Validation Error")).take(5).collect();
            anyhow::bail!(
                "the Graph500 reference failed its own validation{}",
                if errors.is_empty() { String::new() } else { format!(": {}", errors.join("; ")) }
            );
        }
        let mut values = BTreeMap::new();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else { continue };
            let key = key.split_whitespace().collect::<Vec<_>>().join(" ");
            let value = value.trim().trim_start_matches('!').trim();
            if key.is_empty() || value.is_empty() || value.contains(char::is_whitespace) {
                continue;
            }
            values.insert(key, value.to_owned());
        }
        anyhow::ensure!(
            values.contains_key("SCALE"),
            "the Graph500 reference's output has no `SCALE:` line (not the output of \
             graph500_reference_bfs_sssp?)"
        );
        Ok(RefOutput { values })
    }

    /// The number after `key:`, if the line is there.
    pub(crate) fn get(&self, key: &str) -> anyhow::Result<Option<f64>> {
        self.values
            .get(key)
            .map(|v| {
                v.parse::<f64>().map_err(|_| {
                    anyhow::anyhow!("the Graph500 reference printed `{key}: {v}`, not a number")
                })
            })
            .transpose()
    }

    /// The number after `key:`, which must be there.
    pub(crate) fn need(&self, key: &str) -> anyhow::Result<f64> {
        self.get(key)?
            .ok_or_else(|| anyhow::anyhow!("the Graph500 reference's output has no `{key}:` line"))
    }

    /// A whole number after `key:`, which must be there.
    fn need_uint(&self, key: &str) -> anyhow::Result<u64> {
        let v = self.need(key)?;
        anyhow::ensure!(
            v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(53),
            "the Graph500 reference printed `{key}: {v}`, not a whole number"
        );
        Ok(v as u64)
    }

    /// The seven statistics `{prefix}min_{what}` .. `{prefix}stddev_{what}`.
    fn stats(&self, prefix: &str, what: &str) -> anyhow::Result<Stats> {
        let g = |s: &str| self.need(&format!("{prefix}{s}_{what}"));
        Ok(Stats {
            min: g("min")?,
            firstquartile: g("firstquartile")?,
            median: g("median")?,
            thirdquartile: g("thirdquartile")?,
            max: g("max")?,
            mean: g("mean")?,
            stddev: g("stddev")?,
        })
    }
}

/// One run of the reference, as Skein reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefReport {
    pub(crate) kernel: Kernel,
    pub(crate) scale: u32,
    pub(crate) edgefactor: u32,
    /// Search roots (`NBFS`).
    pub(crate) roots: u64,
    /// MPI ranks (`num_mpi_processes`).
    pub(crate) ranks: usize,
    pub(crate) generation_seconds: Option<f64>,
    pub(crate) construction_seconds: Option<f64>,
    /// Kernel time statistics.
    pub(crate) time: Stats,
    pub(crate) teps: TepsStats,
    /// TEPS edge count statistics over the roots.
    pub(crate) nedge: Stats,
    /// Validation time statistics (None when the reference skipped validation).
    pub(crate) validate_time: Option<Stats>,
}

impl RefReport {
    /// The `kernel`'s figures of a parsed output.
    pub(crate) fn from_output(
        out: &RefOutput,
        kernel: Kernel,
        validated: bool,
    ) -> anyhow::Result<RefReport> {
        let k = kernel.as_str();
        let scale = u32::try_from(out.need_uint("SCALE")?).context("SCALE out of range")?;
        let edgefactor =
            u32::try_from(out.need_uint("edgefactor")?).context("edgefactor out of range")?;
        let ranks = usize::try_from(out.need_uint("num_mpi_processes")?)
            .context("num_mpi_processes out of range")?;
        let prefix = format!("{k} ");
        let t = |s: &str| out.need(&format!("{prefix}{s}_TEPS"));
        let teps = TepsStats {
            min: t("min")?,
            firstquartile: t("firstquartile")?,
            median: t("median")?,
            thirdquartile: t("thirdquartile")?,
            max: t("max")?,
            harmonic_mean: t("harmonic_mean")?,
            harmonic_stddev: t("harmonic_stddev")?,
        };
        let validate_time = if validated { Some(out.stats(&prefix, "validate")?) } else { None };
        Ok(RefReport {
            kernel,
            scale,
            edgefactor,
            roots: out.need_uint("NBFS")?,
            ranks,
            generation_seconds: out.get("graph_generation")?,
            construction_seconds: out.get("construction_time")?,
            time: out.stats(&prefix, "time")?,
            teps,
            nedge: out.stats("", "nedge")?,
            validate_time,
        })
    }

    /// `passed` or `skipped` (a failed validation is an error of [`RefOutput::parse`]).
    pub(crate) fn validation_text(&self) -> &'static str {
        if self.validate_time.is_some() {
            "passed"
        } else {
            "skipped"
        }
    }

    /// The JSON report, in the shape of [`crate::report::KernelReport::to_json`]; what the
    /// reference does not print is absent.
    pub(crate) fn to_json(&self, launch: &Launch) -> serde_json::Value {
        let mut settings = serde_json::Map::new();
        settings.insert("ranks".into(), self.ranks.into());
        settings.insert("reference_commit".into(), COMMIT.into());
        if let Some(args) = &launch.mpirun_args {
            settings.insert("mpirun_args".into(), args.clone().into());
        }
        let mut json = serde_json::json!({
            "kernel": self.kernel.as_str(),
            "engine": EngineName::Graph500Mpi.as_str(),
            "threads": self.ranks,
            "ranks": self.ranks,
            "settings": settings,
            "graph": {
                "description": format!(
                    "kron:{}:{}:2:3 (Graph500 reference generator)", self.scale, self.edgefactor
                ),
                "vertices": 1u64 << self.scale,
                "input_edges": u64::from(self.edgefactor) << self.scale,
                "scale": self.scale,
                "edgefactor": self.edgefactor,
            },
            "roots": self.roots,
            "validated": self.validate_time.is_some(),
            "validation": self.validation_text(),
            "harmonic_mean_teps": self.teps.harmonic_mean,
            "time": self.time,
            "teps": self.teps,
            "nedge": self.nedge,
        });
        if let Some(g) = self.generation_seconds {
            json["generation_seconds"] = g.into();
        }
        if let Some(c) = self.construction_seconds {
            json["construction_seconds"] = c.into();
        }
        if let Some(v) = &self.validate_time {
            json["validate_time"] = serde_json::to_value(v).unwrap_or_default();
        }
        json
    }
}

/// Builds (on first use) and runs the reference for `kernel` on the Kronecker graph of
/// `scale` and `edgefactor`, and parses its output. SSSP runs skip the reference's BFS
/// (its `SKIP_BFS`); `validate == false` sets its `SKIP_VALIDATION`.
/// Builds the reference (or finds its cached build) with the script's `build`, so that
/// `compare` knows it can run before any engine runs. The script's notes and errors (no
/// source tree, no network, no MPI compiler, the end of a failed build's log) go to
/// standard error as they come.
pub(crate) fn build() -> anyhow::Result<()> {
    let status = Command::new("bash")
        .arg("-c")
        .arg(SCRIPT)
        .arg("graph500-reference.sh")
        .arg("build")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .context("cannot start bash to build the Graph500 reference")?;
    anyhow::ensure!(
        status.success(),
        "the {} engine cannot run: building the Graph500 reference failed ({status}; its \
         messages are above)",
        EngineName::Graph500Mpi,
    );
    Ok(())
}

pub(crate) fn run(
    kernel: Kernel,
    scale: u32,
    edgefactor: u32,
    validate: bool,
    launch: &Launch,
) -> anyhow::Result<RefReport> {
    check_launch(launch)?;
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(SCRIPT)
        .arg("graph500-reference.sh")
        .arg("run")
        .arg(scale.to_string())
        .arg(edgefactor.to_string())
        .arg(launch.ranks.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(args) = &launch.mpirun_args {
        cmd.env("MPIRUN_ARGS", args);
    }
    if kernel == Kernel::Sssp {
        cmd.env("SKIP_BFS", "1");
    }
    if validate {
        cmd.env_remove("SKIP_VALIDATION");
    } else {
        cmd.env("SKIP_VALIDATION", "1");
    }
    let mut child = cmd.spawn().context("cannot start bash to run the Graph500 reference")?;
    // The run takes minutes at a large SCALE: a spinner (on a terminal) shows the time and
    // the last line the reference wrote, and the script's own notes (building, the mpirun
    // line) are printed as they come.
    let progress = std::sync::Arc::new(crate::progress::spinner("graph500-mpi"));
    // Read stderr on a thread so that neither pipe can fill up and block the reference.
    let stderr = child.stderr.take().context("no stderr pipe")?;
    let shown = std::sync::Arc::clone(&progress);
    let err_thread = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("graph500-reference: ") {
                shown.note(&line);
            } else if let Some(done) = root_done(&line) {
                // The roots as they finish (on a terminal above the spinner, else a line).
                shown.note(&done);
            }
            shown.say(&line);
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut stdout = String::new();
    for line in std::io::BufReader::new(child.stdout.take().context("no stdout pipe")?).lines() {
        let line = line.context("cannot read the Graph500 reference's output")?;
        progress.say(&line);
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let status = child.wait().context("waiting for the Graph500 reference")?;
    let stderr = err_thread.join().unwrap_or_default();
    progress.finish();
    if !status.success() {
        anyhow::bail!(
            "the graph500-mpi engine failed ({status}); last lines of its log:\n{}",
            tail(&stderr, 25)
        );
    }
    let report = RefOutput::parse(&stdout)
        .and_then(|out| RefReport::from_output(&out, kernel, validate))
        .with_context(|| format!("graph500-mpi; last lines of its log:\n{}", tail(&stderr, 10)))?;
    anyhow::ensure!(
        (report.scale, report.edgefactor) == (scale, edgefactor),
        "the Graph500 reference ran SCALE {} edgefactor {}, not the job's {scale} and {edgefactor}",
        report.scale,
        report.edgefactor
    );
    anyhow::ensure!(
        report.ranks == launch.ranks,
        "the Graph500 reference ran with {} MPI ranks, not the {} asked for (check the \
         hostfile and --mpirun-args)",
        report.ranks,
        launch.ranks
    );
    Ok(report)
}

/// The reference's line for a finished root (`Time for SSSP 3 is 0.012`, on rank 0's
/// stderr), as the progress line `graph500-mpi: SSSP root 4 done in 0.012 s`.
fn root_done(line: &str) -> Option<String> {
    let rest = line.trim().strip_prefix("Time for ")?;
    let (kernel, rest) = rest.split_once(' ')?;
    let (idx, secs) = rest.split_once(" is ")?;
    let idx: u64 = idx.trim().parse().ok()?;
    let secs: f64 = secs.trim().parse().ok()?;
    Some(format!("graph500-mpi: {kernel} root {} done in {secs} s", idx + 1))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The reference's `nedge` statistics for Skein's graph and roots: for every root, the
/// TEPS edge count of its component (input edges that are not self-loops with both ends
/// in the component, repeats counted: [`teps_edge_count`], what `skein run` reports per
/// root), and the Graph500 statistics of those counts.
pub(crate) fn skein_nedge_stats(graph: &LoadedGraph, roots: &[u64]) -> Stats {
    let csr = &graph.csr;
    let n = csr.num_vertices() as usize;
    // Component labels by BFS from each root's vertex (only the roots' components).
    const NONE: u32 = u32::MAX;
    let mut label = vec![NONE; n];
    let mut counts: HashMap<u32, u64> = HashMap::new();
    let mut next = 0u32;
    let mut queue = Vec::new();
    let nedge: Vec<f64> = roots
        .iter()
        .map(|&root| {
            if label[root as usize] == NONE {
                let id = next;
                next += 1;
                label[root as usize] = id;
                queue.clear();
                queue.push(root);
                while let Some(v) = queue.pop() {
                    for &w in csr.neighbors(v) {
                        if label[w as usize] == NONE {
                            label[w as usize] = id;
                            queue.push(w);
                        }
                    }
                }
                let count = teps_edge_count(csr, |v| label[v as usize] == id);
                counts.insert(id, count);
            }
            counts[&label[root as usize]] as f64
        })
        .collect();
    Stats::of(&nedge)
}

/// Fails, naming both figures, when the reference's `nedge` statistics differ from
/// Skein's for the same graph and roots: then the two did not run the same inputs.
/// The order statistics are whole or half numbers, compared exactly; the mean (printed
/// with 11 significant digits) to a relative 1e-10.
pub(crate) fn check_nedge(reference: &Stats, skein: &Stats) -> anyhow::Result<()> {
    let exact = [
        ("min_nedge", reference.min, skein.min),
        ("firstquartile_nedge", reference.firstquartile, skein.firstquartile),
        ("median_nedge", reference.median, skein.median),
        ("thirdquartile_nedge", reference.thirdquartile, skein.thirdquartile),
        ("max_nedge", reference.max, skein.max),
    ];
    for (name, r, s) in exact {
        anyhow::ensure!(
            r == s,
            "SAME INPUTS CHECK FAILED: the Graph500 reference's {name} is {r}, Skein's for the \
             same graph and roots is {s}: the two did not run the same graph and roots"
        );
    }
    let (r, s) = (reference.mean, skein.mean);
    anyhow::ensure!(
        (r - s).abs() <= 1e-10 * s.abs().max(1.0),
        "SAME INPUTS CHECK FAILED: the Graph500 reference's mean_nedge is {r}, Skein's for the \
         same graph and roots is {s}: the two did not run the same graph and roots"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S10: &str = include_str!("../tests/data/graph500-s10-ef16-np2.txt");

    #[test]
    fn finished_roots_are_shown_as_they_come() {
        assert_eq!(
            root_done("Time for SSSP 3 is 0.012500").as_deref(),
            Some("graph500-mpi: SSSP root 4 done in 0.0125 s")
        );
        assert_eq!(
            root_done("Time for BFS 0 is 1.5").as_deref(),
            Some("graph500-mpi: BFS root 1 done in 1.5 s")
        );
        for other in ["Running BFS 0", "TEPS for BFS 0 is 3e7", "Time for BFS x is 1", ""] {
            assert_eq!(root_done(other), None, "{other:?}");
        }
    }

    #[test]
    fn parses_a_real_run() {
        let out = RefOutput::parse(S10).unwrap();
        let sssp = RefReport::from_output(&out, Kernel::Sssp, true).unwrap();
        assert_eq!((sssp.scale, sssp.edgefactor, sssp.roots, sssp.ranks), (10, 16, 64, 2));
        assert_eq!(sssp.generation_seconds, Some(0.00415646));
        assert_eq!(sssp.construction_seconds, Some(0.000975074));
        assert_eq!(sssp.time.min, 0.000478659);
        assert_eq!(sssp.time.median, 0.000521508);
        assert_eq!(sssp.time.stddev, 0.00487);
        assert_eq!(sssp.teps.harmonic_mean, 6.74598e+06);
        assert_eq!(sssp.teps.min, 526863.0);
        assert_eq!(sssp.nedge.min, 16239.0);
        assert_eq!(sssp.nedge.stddev, 0.0);
        assert_eq!(sssp.validate_time.unwrap().median, 0.000398353);
        let bfs = RefReport::from_output(&out, Kernel::Bfs, true).unwrap();
        assert_eq!(bfs.teps.harmonic_mean, 3.14298e+07);
        assert_eq!(bfs.time.max, 0.00434706);
        assert_eq!(bfs.validate_time.unwrap().min, 0.000641333);
        assert_eq!(bfs.nedge, sssp.nedge);
    }

    #[test]
    fn json_has_what_the_reference_printed_and_nothing_else() {
        let out = RefOutput::parse(S10).unwrap();
        let r = RefReport::from_output(&out, Kernel::Sssp, false).unwrap();
        let launch = Launch { ranks: 2, mpirun_args: None };
        let j = r.to_json(&launch);
        assert_eq!(j["engine"], "graph500-mpi");
        assert_eq!(j["kernel"], "sssp");
        assert_eq!(j["ranks"], 2);
        assert_eq!(j["harmonic_mean_teps"], 6.74598e+06);
        assert_eq!(j["time"]["median"], 0.000521508);
        assert_eq!(j["nedge"]["max"], 16239.0);
        assert_eq!(j["graph"]["vertices"], 1024);
        assert_eq!(j["construction_seconds"], 0.000975074);
        assert_eq!(j["validation"], "skipped");
        // Not printed by the reference: absent, not zero.
        assert!(j.get("runs").is_none());
        assert!(j["graph"].get("edges").is_none());
        assert!(j.get("validate_time").is_none());
    }

    #[test]
    fn missing_or_bad_lines_are_clear_errors() {
        let cut = S10.replace("sssp median_time:", "sssp median_tim:");
        let out = RefOutput::parse(&cut).unwrap();
        let e = RefReport::from_output(&out, Kernel::Sssp, true).unwrap_err().to_string();
        assert!(e.contains("no `sssp median_time:` line"), "{e}");
        let bad = S10.replace("min_nedge:                      16239", "min_nedge: x");
        let out = RefOutput::parse(&bad).unwrap();
        let e = RefReport::from_output(&out, Kernel::Bfs, true).unwrap_err().to_string();
        assert!(e.contains("`min_nedge: x`, not a number"), "{e}");
        let e = RefOutput::parse("hello\n").unwrap_err().to_string();
        assert!(e.contains("no `SCALE:` line"), "{e}");
        let invalid = "Validation Error: wrong nedge_traversed 5 (correct number is 6)\n\
                       No results printed for invalid run.\n";
        let e = RefOutput::parse(invalid).unwrap_err().to_string();
        assert!(e.contains("failed its own validation") && e.contains("nedge_traversed"), "{e}");
    }

    fn stats(min: f64, max: f64) -> Stats {
        Stats::of(&[min, 100.0, 100.0, 100.0, max])
    }

    #[test]
    fn nedge_check_names_both_figures() {
        check_nedge(&stats(10.0, 200.0), &stats(10.0, 200.0)).unwrap();
        let e = check_nedge(&stats(10.0, 200.0), &stats(11.0, 200.0)).unwrap_err().to_string();
        assert!(e.contains("min_nedge is 10") && e.contains("is 11"), "{e}");
        let e = check_nedge(&stats(10.0, 200.0), &stats(10.0, 201.0)).unwrap_err().to_string();
        assert!(e.contains("max_nedge is 200") && e.contains("is 201"), "{e}");
    }

    /// Skein's own nedge figures for the reference's SCALE 10 graph and 64 roots equal
    /// those the reference printed (16 239 for every root: `testdata/graph500/README.md`).
    #[test]
    fn skein_nedge_matches_the_captured_reference_run() {
        let spec = crate::graph_source::GraphSpec::Kronecker(
            skein_generators::kronecker::KroneckerParams::new(10, 16, 2, 3).unwrap(),
        );
        let graph = crate::graph_source::load(&spec).unwrap();
        let roots = graph.roots(64);
        let skein = skein_nedge_stats(&graph, &roots);
        let out = RefOutput::parse(S10).unwrap();
        let reference = RefReport::from_output(&out, Kernel::Sssp, true).unwrap();
        check_nedge(&reference.nedge, &skein).unwrap();
        // A different graph (other seeds) is caught.
        let other = crate::graph_source::GraphSpec::Kronecker(
            skein_generators::kronecker::KroneckerParams::new(10, 16, 5, 7).unwrap(),
        );
        let other = crate::graph_source::load(&other).unwrap();
        let roots = other.roots(64);
        assert!(check_nedge(&reference.nedge, &skein_nedge_stats(&other, &roots)).is_err());
    }
}
