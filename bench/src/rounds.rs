//! `skein bench rounds`: what a round costs when it carries no work. Bucketed SSSP and BFS
//! run one round per bucket or level; across ranks each round ends with quiescence detected
//! by the ranks' all-reduces, so a round's fixed cost is paid hundreds of times per search.
//!
//! Two shapes of empty round, on every worker of every rank of the job:
//!
//! * **superstep**: `main` starts a fiber on every worker, each waits in
//!   `skein::wait_quiescent`, and `main` joins them (the kernels' round: a spawn to every
//!   worker, quiescence, a join);
//! * **quiescence**: one fiber per worker calls `skein::wait_quiescent` once per round (the
//!   round's end alone: every rank learns that the previous round is over).
//!
//! Reported per round: microseconds, and the counters that explain them, summed over the
//! job's workers: detector all-reduces (per rank), parks, `sched_yield`s and context
//! switches.

use crate::host::{write_json, Host};
use anyhow::Context;
use std::time::Instant;

/// Most rounds per measurement.
const MAX_ROUNDS: usize = 10_000_000;

/// Arguments of `skein bench rounds`.
#[derive(Debug, clap::Args)]
pub(crate) struct RoundsArgs {
    /// Rack transport across the ranks of an `mpirun` (`auto`, `mpi`, `shm` or `verbs`, the
    /// last with feature `rdma`; default: `SKEIN_TRANSPORT`, else `auto`: shared-memory rings
    /// on one node).
    #[arg(long)]
    transport: Option<skein::RackTransport>,
    /// Workers per rank (per process).
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Threads that run a process's skein workers: the workers share them, consecutive
    /// workers on one thread (at most one thread per worker; 0: as many as the cores when
    /// the workers outnumber them). Default: `SKEIN_WORKER_THREADS`, else the runtime's
    /// own choice (`skein::Builder::worker_threads`).
    #[arg(long, value_name = "T")]
    worker_threads: Option<usize>,
    /// Rounds per measurement.
    #[arg(long, default_value_t = 2000)]
    rounds: usize,
    /// Measure each shape this many times, interleaved, and report the median.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Also time each round's end across ranks, from the job's last work to each rank's
    /// verdict (`skein::Builder::round_ends`: a clock read per loop pass that worked;
    /// `SKEIN_ROUND_ENDS=1` and `SKEIN_ANATOMY=1` turn it on too).
    #[arg(long)]
    round_ends: bool,
    /// Write the rows as JSON to this file (rank 0).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// One shape's measurement: the median repetition (by time per round).
#[derive(Debug, Clone, serde::Serialize)]
struct RoundsRow {
    shape: &'static str,
    ranks: usize,
    workers_per_rank: usize,
    /// The worker threads of the job, over its ranks (`--worker-threads`, or the runtime's
    /// default: workers share threads beyond a rank's share of the cores).
    threads: usize,
    rounds: usize,
    us_per_round: f64,
    /// Fastest and slowest repetition, µs per round.
    us_min: f64,
    us_max: f64,
    /// Per round, summed over the job's workers (all-reduces: per rank).
    all_reduces: f64,
    parks: f64,
    yields: f64,
    switches: f64,
    /// The median round end over every rank's counts, µs (timed runs across ranks only).
    #[serde(skip_serializing_if = "Option::is_none")]
    round_end_us: Option<f64>,
}

/// `skein bench rounds`.
pub(crate) fn rounds(a: RoundsArgs, host: &dyn Host) -> anyhow::Result<()> {
    host.check_count(a.workers, host.max_workers(), "the runtime's limit")
        .map_err(|e| anyhow::anyhow!("--workers: {e}"))?;
    host.check_count(a.rounds, MAX_ROUNDS, "it would run for hours")
        .map_err(|e| anyhow::anyhow!("--rounds: {e}"))?;
    crate::echo::check_repeat(a.repeat, host)?;
    // A worker runs one fiber of a round at a time, and worker 0 `main` beside it.
    host.check_engine(a.workers, 2, *host.slot_size_range().start()).map_err(anyhow::Error::msg)?;
    let mut b = crate::echo::builder(a.transport, a.workers, a.worker_threads)?;
    if a.round_ends {
        b = b.round_ends(true);
    }
    let rt = b.build().context("building the skein runtime")?;
    let (ranks, n) = (skein::ranks(), a.rounds as u64);
    let rank0 = skein::rank() == 0;
    if rank0 {
        println!(
            "rounds: empty rounds on {ranks} rank(s) x {} worker(s); {} rounds per \
             measurement, median of {} interleaved repetitions",
            a.workers, a.rounds, a.repeat
        );
        println!(
            "superstep: main starts a fiber on every worker, each waits for quiescence, main \
             joins them; quiescence: a fiber on every worker waits for quiescence once per round"
        );
    }
    let shapes: [(&'static str, Shape); 2] =
        [("superstep", superstep_rounds), ("quiescence", quiescence_rounds)];
    let mut samples: Vec<Vec<(f64, skein::WorkerStats)>> = vec![Vec::new(); shapes.len()];
    for _ in 0..a.repeat {
        for (i, (_, f)) in shapes.iter().enumerate() {
            let f = *f;
            let us = rt.run(move || f(n))?;
            samples[i].push((us, rt.stats().total()));
        }
    }
    // Every run of the runtime has the same threads.
    let threads = rt.stats().threads();
    let rows: Vec<RoundsRow> = shapes
        .iter()
        .zip(samples)
        .map(|(&(shape, _), mut s)| {
            s.sort_by(|x, y| x.0.total_cmp(&y.0));
            let (us, t) = &s[s.len() / 2];
            let per = |x: u64| x as f64 / a.rounds as f64;
            RoundsRow {
                shape,
                ranks,
                workers_per_rank: a.workers,
                threads,
                rounds: a.rounds,
                us_per_round: *us,
                us_min: s[0].0,
                us_max: s[s.len() - 1].0,
                all_reduces: per(t.all_reduces_completed) / ranks as f64,
                parks: per(t.parks),
                yields: per(t.yields),
                switches: per(t.switches_voluntary + t.switches_involuntary),
                round_end_us: t.round_ends.median_ns().map(|ns| ns as f64 / 1e3),
            }
        })
        .collect();
    if !rank0 {
        return Ok(());
    }
    println!("{} worker(s) on {threads} thread(s) in all", ranks * a.workers);
    println!(
        "{:<11} {:>12} {:>18} {:>12} {:>8} {:>8} {:>9} {:>12}",
        "shape", "µs/round", "(min-max)", "all-reduces", "parks", "yields", "switches", "end µs"
    );
    for r in &rows {
        println!(
            "{:<11} {:>12.1} {:>18} {:>12.2} {:>8.1} {:>8.1} {:>9.1} {:>12}",
            r.shape,
            r.us_per_round,
            format!("({:.1}-{:.1})", r.us_min, r.us_max),
            r.all_reduces,
            r.parks,
            r.yields,
            r.switches,
            r.round_end_us.map_or("-".to_string(), |us| format!("{us:.1}"))
        );
    }
    if let Some(path) = &a.json {
        write_json(host, path, &rows)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// A shape of empty round: `n` rounds of it, run as `main`; µs per round.
type Shape = fn(u64) -> f64;

/// `n` rounds of a spawn to every worker, quiescence, and a join; µs per round.
fn superstep_rounds(n: u64) -> f64 {
    let t0 = Instant::now();
    for _ in 0..n {
        let fibers: Vec<_> = (0..skein::num_workers())
            .map(|g| skein::spawn_on(g, (), |()| skein::wait_quiescent()))
            .collect();
        for f in fibers {
            f.join();
        }
    }
    t0.elapsed().as_secs_f64() * 1e6 / n as f64
}

/// One fiber per worker waiting for quiescence `n` times; µs per round.
fn quiescence_rounds(n: u64) -> f64 {
    let t0 = Instant::now();
    let fibers: Vec<_> = (0..skein::num_workers())
        .map(|g| {
            skein::spawn_on(g, n, |n| {
                for _ in 0..n {
                    skein::wait_quiescent();
                }
            })
        })
        .collect();
    for f in fibers {
        f.join();
    }
    t0.elapsed().as_secs_f64() * 1e6 / n as f64
}
