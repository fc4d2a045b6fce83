//! `skein bench micro`: the cost of a fiber switch, of one blocking `apply` round trip
//! between two workers, the requests a single trustee serves per second, and a run that does
//! nothing (on 1 and on 2 workers: what a run costs beyond its work, its workers' start and
//! end included).

use crate::host::{write_json, Host, MAX_ITERS};
use anyhow::Context;
use std::time::Instant;

/// Arguments of `skein bench micro`.
#[derive(Debug, clap::Args)]
pub struct MicroArgs {
    /// Iterations per measurement.
    #[arg(long, default_value_t = 200_000)]
    iters: usize,
    /// Pin workers to cores.
    #[arg(long)]
    pin: bool,
    /// Overflow bytes of each request/response slot (runtime default if not given).
    #[arg(long)]
    slot_size: Option<usize>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}
#[derive(Debug, serde::Serialize)]
struct Micro {
    fiber_yield_ns: f64,
    fiber_switch_ns: f64,
    apply_round_trip_ns: f64,
    trustee_serves_per_sec: f64,
    empty_run_1_worker_us: f64,
    empty_run_2_workers_us: f64,
}

/// Microseconds per run of `rt` that does nothing, over `runs` runs (after one to warm up).
fn empty_run_us(rt: &skein::Runtime, runs: usize) -> anyhow::Result<f64> {
    rt.run(|| ())?;
    let t0 = Instant::now();
    for _ in 0..runs {
        rt.run(|| ())?;
    }
    Ok(t0.elapsed().as_secs_f64() * 1e6 / runs as f64)
}

pub(crate) fn micro(a: MicroArgs, host: &dyn Host) -> anyhow::Result<()> {
    host.check_count(a.iters, MAX_ITERS, "it would run for hours")
        .map_err(|e| anyhow::anyhow!("--iters: {e}"))?;
    if let Some(slot) = a.slot_size {
        host.check_engine(2, 1, slot).map_err(|e| anyhow::anyhow!("--slot-size: {e}"))?;
    }
    let n = a.iters;
    // Fiber switch: one fiber yielding to the scheduler and back (two switches per yield).
    let rt1 = skein::Runtime::builder().workers(1).pin(a.pin).build()?;
    let yield_ns = rt1.run(move || {
        let t0 = Instant::now();
        for _ in 0..n {
            skein::yield_now();
        }
        t0.elapsed().as_nanos() as f64 / n as f64
    })?;
    let mut b = skein::Runtime::builder().workers(2).pin(a.pin);
    if let Some(s) = a.slot_size {
        b = b.slot_size(s);
    }
    let rt2 = b.build().context("building the skein runtime")?;
    // One blocking apply from worker 0 to worker 1, sequentially.
    let rtt_ns = rt2.run(move || {
        let t = skein::trustee(1).entrust(0u64);
        let t0 = Instant::now();
        for _ in 0..n {
            t.apply((), |c, ()| *c += 1);
        }
        t0.elapsed().as_nanos() as f64 / n as f64
    })?;
    // A single trustee (worker 1) fed by apply_then from worker 0.
    let m = n * 20;
    let rate = rt2.run(move || {
        let t = skein::trustee(1).entrust(0u64);
        let t0 = Instant::now();
        for _ in 0..m {
            t.apply_then((), |c, ()| *c += 1, |()| {});
        }
        skein::wait_quiescent();
        m as f64 / t0.elapsed().as_secs_f64()
    })?;
    // Runs that do nothing: a thousandth of the iterations, at least 20.
    let runs = (n / 1000).max(20);
    let empty_1 = empty_run_us(&rt1, runs)?;
    let empty_2 = empty_run_us(&rt2, runs)?;
    let r = Micro {
        empty_run_1_worker_us: empty_1,
        empty_run_2_workers_us: empty_2,
        fiber_yield_ns: yield_ns,
        fiber_switch_ns: yield_ns / 2.0,
        apply_round_trip_ns: rtt_ns,
        trustee_serves_per_sec: rate,
    };
    println!("fiber yield_now (fiber -> loop -> fiber): {:>8.1} ns", r.fiber_yield_ns);
    println!("fiber switch (half of the above):        {:>8.1} ns", r.fiber_switch_ns);
    println!("apply round trip, worker 0 -> 1:         {:>8.1} ns", r.apply_round_trip_ns);
    println!(
        "single trustee, apply_then from 1 worker: {:>7.2} M requests/s",
        r.trustee_serves_per_sec / 1e6
    );
    println!("empty run, 1 worker:                     {:>8.1} µs", r.empty_run_1_worker_us);
    println!("empty run, 2 workers:                    {:>8.1} µs", r.empty_run_2_workers_us);
    if let Some(path) = &a.json {
        write_json(host, path, &r)?;
    }
    Ok(())
}
