//! The `skein-rack` engine of `skein compare`: the Skein kernel across `mpirun -np R`
//! ranks. `compare` runs this same executable under `mpirun` on the same job file
//! (`skein run JOB --set runtime.ranks=R ...`, which every rank runs and rank 0 reports,
//! `crate::cmd::run`), and reads back the JSON report rank 0 writes. The executable must be
//! built with the `mpi` feature. Each rank generates (Kronecker) or reads (a graph file)
//! and builds only its own rows, and the engine copies only its own partitions' arcs
//! (`crate::dist_run`).

use crate::graph500_mpi::Launch;
use crate::job::Job;
use crate::report::Stats;
use anyhow::{bail, Context};
use std::process::Command;

/// What the rack run reported.
pub(crate) struct RackRun {
    /// Workers per rank.
    pub(crate) workers: usize,
    pub(crate) time: Stats,
    pub(crate) hmean: f64,
    pub(crate) validation: String,
    pub(crate) valid: bool,
    pub(crate) json: serde_json::Value,
}

/// Refuses what cannot run before anything is built.
pub(crate) fn check(launch: &Launch) -> anyhow::Result<()> {
    if !cfg!(feature = "mpi") {
        bail!(
            "engine skein-rack: this skein is built without MPI; build it with \
             `cargo build --release -p skein-jobs --features mpi` (after scripts/install-mpi.sh)"
        );
    }
    if launch.ranks == 0 {
        bail!("engine skein-rack: --ranks must be 1 or more");
    }
    Ok(())
}

/// Runs the job's kernel with the Skein engine over `launch.ranks` ranks, the job's
/// workers divided among them (at least 1 each), `sets` (the `--set` overrides of
/// `compare`) passed on.
pub(crate) fn run(job: &Job, sets: &[String], launch: &Launch) -> anyhow::Result<RackRun> {
    let ranks = launch.ranks;
    let workers = (job.workers / ranks).max(1);
    let exe = std::env::current_exe().context("finding this executable to launch it")?;
    let report =
        std::env::temp_dir().join(format!("skein-rack-{}-{ranks}.json", std::process::id()));
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "--bind-to", "none"]);
    // SAFETY: geteuid only reads the process's credentials.
    if unsafe { libc::geteuid() } == 0 {
        cmd.arg("--allow-run-as-root");
    }
    if let Some(extra) = &launch.mpirun_args {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg("-np").arg(ranks.to_string()).arg(&exe).arg("run").arg(&job.source);
    for s in sets {
        cmd.arg("--set").arg(s);
    }
    cmd.arg("--set").arg(format!("runtime.ranks={ranks}"));
    cmd.arg("--set").arg(format!("runtime.workers={workers}"));
    cmd.arg("--set").arg(format!("report.json={}", report.display()));
    cmd.env_remove("SKEIN_LOOPBACK_RANKS");
    let out = cmd.output().context("running mpirun (install Open MPI: scripts/install-mpi.sh)")?;
    if !out.status.success() {
        bail!(
            "engine skein-rack: `mpirun -np {ranks} skein run {}` failed ({}): {}",
            job.source.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = std::fs::read_to_string(&report)
        .with_context(|| format!("reading the rack run's report {}", report.display()))?;
    let _ = std::fs::remove_file(&report);
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("parsing the rack run's report {}", report.display()))?;
    let t = &json["time"];
    let f = |k: &str| t[k].as_f64().with_context(|| format!("the rack report has no time.{k}"));
    let time = Stats {
        min: f("min")?,
        firstquartile: f("firstquartile")?,
        median: f("median")?,
        thirdquartile: f("thirdquartile")?,
        max: f("max")?,
        mean: f("mean")?,
        stddev: f("stddev")?,
    };
    // A search kernel's report has TEPS and a validation text; PageRank's and components'
    // (`crate::kernels`) arcs per second and whether the result validated.
    let hmean = json["harmonic_mean_teps"]
        .as_f64()
        .or_else(|| json["arcs_per_second_hmean"].as_f64())
        .context("the rack report has no TEPS")?;
    let validation = match (json["validation"].as_str(), &json["validated"]) {
        (Some(text), _) => text.to_string(),
        (None, serde_json::Value::Bool(true)) => "passed".to_string(),
        (None, serde_json::Value::Bool(false)) => "FAILED (see the rack run's output)".to_string(),
        (None, _) => "skipped".to_string(),
    };
    let valid = !validation.starts_with("FAILED");
    Ok(RackRun { workers, time, hmean, validation, valid, json })
}
