//! `skein bench echo` and `skein bench ping`: request throughput and round-trip latency of
//! delegation, beside MPI baselines (issue 18; `docs/rack-mode.md` §7.2, benchmarks).
//!
//! * **echo** — every worker is both client and server. A property per worker counts the
//!   requests it served; each worker runs `--fibers` fibers that send `apply_then` requests
//!   carrying a payload of `--size` bytes to uniformly random workers (seeded), each fiber
//!   keeping up to `--window` requests in flight. The trustee answers with the payload itself
//!   (an echo); the client checks the echoed bytes and counts answered requests per second.
//! * **ping** — one fiber on worker 0 makes blocking `apply` round trips to worker 1's
//!   property with a payload of 8 B and 4 KiB (echoed back); median and mean round trip.
//!
//! With `--mpi` (feature `mpi`, under `mpirun -np R`, R ≥ 2) the same command runs MPI
//! baselines across the ranks, one thread per rank (`crate::mpi_baselines`): for echo an
//! aggregated echo in the style of the Graph500 reference's AML (32 KiB buffers per
//! destination) and an echo that sends every request as its own message; for ping an MPI
//! ping-pong between ranks 0 and 1. Rank 0 prints one table with all of them.
//!
//! Under `mpirun` the Skein side runs across the ranks (rack mode): every worker of every
//! rank is a client and a server, its rows labelled `skein (R ranks x W workers)`; outside
//! `mpirun` they are `skein (1 process, W workers)`.
//!
//! The request closures capture only their payload, a `[u8; N]` (which is `skein::Plain`):
//! the closure itself works on the property it is applied to, so it can travel as
//! `apply_then(payload, |c, p| ..., then)` once the argument-first API exists.

use crate::host::{write_json, Host, MAX_ITERS};
use crate::spread::Spread;
use crate::traffic::{dest, quota, read_stamp, stamp, EchoSetup};
use anyhow::{bail, Context};
use skein::codec::Raw;
use skein_generators::splitmix::SplitMix64;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Payload sizes the benchmarks are compiled for (a payload is a `[u8; N]`).
const SIZES: [usize; 10] = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Bytes of a request closure or a result the runtime stores inline in a record; above this
/// the runtime boxes it (`framework/src/channel/record.rs`, `INLINE_MAX`, and
/// `framework/src/trust/result.rs`).
const RECORD_INLINE_BYTES: usize = 256;

/// Requests a Skein client fiber issues between two looks at the clock.
const ISSUE_PER_PASS: usize = 64;

/// Most seconds a measurement may run per size.
const MAX_SECONDS: f64 = 3600.0;

/// Arguments of `skein bench echo`.
#[derive(Debug, clap::Args)]
pub(crate) struct EchoArgs {
    /// Rack transport across the ranks of an `mpirun` (`auto`, `mpi`, `shm` or `verbs`, the
    /// last with feature `rdma`; default: `SKEIN_TRANSPORT`, else `auto`: shared-memory rings
    /// on one node).
    #[arg(long)]
    transport: Option<skein::RackTransport>,
    /// Worker threads of the Skein side (every one is client and server).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Threads that run a process's skein workers: the workers share them, consecutive
    /// workers on one thread (at most one thread per worker; 0: as many as the cores when
    /// the workers outnumber them). Default: `SKEIN_WORKER_THREADS`, else the runtime's
    /// own choice (`skein::Builder::worker_threads`).
    #[arg(long, value_name = "T")]
    worker_threads: Option<usize>,
    /// Client fibers per worker.
    #[arg(long, default_value_t = 4)]
    fibers: usize,
    /// Requests each fiber keeps in flight at most.
    #[arg(long, default_value_t = 256)]
    window: usize,
    /// Comma-separated payload sizes in bytes (each one of 8, 16, 32, ..., 4096).
    #[arg(long, value_delimiter = ',', default_value = "8,32,64,256,1024,4096")]
    sizes: Vec<usize>,
    /// Seconds of sending per size and implementation (ignored with --requests).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Requests per worker (Skein) and per rank (MPI) instead of a time limit.
    #[arg(long)]
    requests: Option<u64>,
    /// Destinations: `all` (uniform over every worker/rank, the sender included) or
    /// `remote` (uniform over the others).
    #[arg(long, default_value = "all")]
    dest: String,
    /// Seed of the destination generators.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Pin workers to cores.
    #[arg(long)]
    pin: bool,
    /// Also run the MPI baselines across the ranks of this `mpirun` (feature `mpi`).
    #[arg(long)]
    mpi: bool,
    /// Measure everything this many times, the implementations interleaved, and report the
    /// median row of each (damps interference on a shared machine).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Bytes of an aggregation buffer of the AML-style MPI echo.
    #[arg(long, default_value_t = 32 * 1024)]
    mpi_buffer: usize,
    /// Full aggregation buffers of requests each rank keeps in flight per destination rank
    /// (AML-style MPI echo).
    #[arg(long, default_value_t = 4)]
    mpi_buffers: usize,
    /// Requests each rank keeps in flight (MPI echo with one message per request; 32 was
    /// the best of 8, 32 and 128 on 2 ranks of a 2-core machine).
    #[arg(long, default_value_t = 32)]
    mpi_window: usize,
    /// Write the rows as JSON to this file (rank 0).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// Arguments of `skein bench ping`.
#[derive(Debug, clap::Args)]
pub(crate) struct PingArgs {
    /// Rack transport across the ranks of an `mpirun` (`auto`, `mpi`, `shm` or `verbs`, the
    /// last with feature `rdma`; default: `SKEIN_TRANSPORT`, else `auto`: shared-memory rings
    /// on one node).
    #[arg(long)]
    transport: Option<skein::RackTransport>,
    /// Round trips per size (after as many warm-up round trips, up to 10000).
    #[arg(long, default_value_t = 100_000)]
    iters: usize,
    /// Comma-separated payload sizes in bytes (each one of 8, 16, 32, ..., 4096).
    #[arg(long, value_delimiter = ',', default_value = "8,4096")]
    sizes: Vec<usize>,
    /// Pin workers to cores.
    #[arg(long)]
    pin: bool,
    /// Also run an MPI ping-pong between ranks 0 and 1 of this `mpirun` (feature `mpi`).
    #[arg(long)]
    mpi: bool,
    /// Measure everything this many times, the implementations interleaved, and report the
    /// median row of each (by median round trip).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Write the rows as JSON to this file (rank 0).
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// One echo measurement.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct EchoRow {
    #[serde(rename = "impl")]
    pub(crate) imp: String,
    pub(crate) size: usize,
    pub(crate) answered: u64,
    pub(crate) seconds: f64,
    pub(crate) requests_per_sec: f64,
    /// Payload bytes per second in each direction (answered × size / seconds), in MB/s.
    pub(crate) mb_per_sec: f64,
    /// Skein across ranks: requests per request envelope to another rank, over every worker
    /// of the run (the aggregation the batches got).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) requests_per_envelope: Option<f64>,
}

impl EchoRow {
    pub(crate) fn new(imp: String, size: usize, answered: u64, seconds: f64) -> EchoRow {
        let rate = answered as f64 / seconds.max(1e-9);
        EchoRow {
            imp,
            size,
            answered,
            seconds,
            requests_per_sec: rate,
            mb_per_sec: rate * size as f64 / 1e6,
            requests_per_envelope: None,
        }
    }
}

/// One round-trip measurement.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct PingRow {
    #[serde(rename = "impl")]
    pub(crate) imp: String,
    pub(crate) size: usize,
    pub(crate) iters: usize,
    pub(crate) median_us: f64,
    pub(crate) mean_us: f64,
}

impl PingRow {
    /// The row of `iters` round trips timed one by one (`each_ns`) and `total_ns` in all.
    pub(crate) fn from_samples(
        imp: String,
        size: usize,
        mut each_ns: Vec<u64>,
        total_ns: f64,
    ) -> PingRow {
        let iters = each_ns.len();
        each_ns.sort_unstable();
        let median = each_ns.get(iters / 2).copied().unwrap_or(0) as f64;
        PingRow {
            imp,
            size,
            iters,
            median_us: median / 1e3,
            mean_us: total_ns / iters.max(1) as f64 / 1e3,
        }
    }
}

/// Runs `$f::<N>($args...)` for the payload size `$n` (one of [`SIZES`]).
macro_rules! with_size {
    ($n:expr, $f:ident($($args:expr),*)) => {
        match $n {
            8 => $f::<8>($($args),*),
            16 => $f::<16>($($args),*),
            32 => $f::<32>($($args),*),
            64 => $f::<64>($($args),*),
            128 => $f::<128>($($args),*),
            256 => $f::<256>($($args),*),
            512 => $f::<512>($($args),*),
            1024 => $f::<1024>($($args),*),
            2048 => $f::<2048>($($args),*),
            4096 => $f::<4096>($($args),*),
            n => bail!("payload size {n} is not one of {SIZES:?}"),
        }
    };
}

fn check_sizes(sizes: &[usize]) -> anyhow::Result<()> {
    if sizes.is_empty() {
        bail!("--sizes: give at least one size");
    }
    if let Some(s) = sizes.iter().find(|s| !SIZES.contains(s)) {
        bail!(
            "--sizes: {s} is not a supported payload size (expected each of {})",
            SIZES.map(|s| s.to_string()).join(",")
        );
    }
    Ok(())
}

/// Whether a header was printed: once per process, not once per repetition.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
static ECHO_HEADER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
static PING_HEADER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True the first time it is called with `flag`.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn first_time(flag: &std::sync::atomic::AtomicBool) -> bool {
    !flag.swap(true, std::sync::atomic::Ordering::Relaxed)
}

/// The median row of each (implementation, size) over repetitions, by `key` (rows of one
/// repetition in order; every repetition has the same rows).
fn median_rows<R: Clone>(reps: &[Vec<R>], key: impl Fn(&R) -> f64) -> Vec<R> {
    let Some(first) = reps.first() else { return Vec::new() };
    (0..first.len())
        .map(|i| {
            let mut xs: Vec<&R> = reps.iter().filter_map(|rows| rows.get(i)).collect();
            xs.sort_by(|a, b| key(a).total_cmp(&key(b)));
            xs[xs.len() / 2].clone()
        })
        .collect()
}

pub(crate) fn check_repeat(repeat: usize, host: &dyn Host) -> anyhow::Result<()> {
    host.check_count(repeat, host.max_repeat(), "more add nothing to a median but run time")
        .map_err(|e| anyhow::anyhow!("--repeat: {e}"))
}

/// The spread, over the repetitions, of the ratio `ratio` picks from each repetition's rows
/// (`None` for a repetition that lacks either row).
fn rep_ratio<R>(reps: &[Vec<R>], ratio: impl Fn(&[R]) -> Option<(f64, f64)>) -> Option<Spread> {
    let (num, den): (Vec<f64>, Vec<f64>) = reps.iter().filter_map(|rows| ratio(rows)).unzip();
    Spread::of_ratios(&num, &den)
}

/// `--mpi` needs the `mpi` feature and at least 2 ranks; `Ok(ranks)` when it may run.
pub(crate) fn check_mpi(what: &str) -> anyhow::Result<usize> {
    if !cfg!(feature = "mpi") {
        bail!(
            "--mpi: this skein was built without the `mpi` feature; rebuild with \
             `cargo build --release -p skein-jobs --features mpi` and run it under mpirun"
        );
    }
    skein::rack::init().context("--mpi: the MPI bootstrap failed")?;
    let ranks = skein::ranks();
    if ranks < 2 {
        bail!(
            "--mpi needs at least 2 ranks ({what} across the ranks of an mpirun), but this \
             process is rank 0 of 1 (run it under `mpirun -np 2 ...`)"
        );
    }
    Ok(ranks)
}

fn check_echo(a: &EchoArgs, host: &dyn Host) -> anyhow::Result<()> {
    let check_count = |v, max, why: &str| host.check_count(v, max, why);
    let flag = |name: &'static str| move |e: String| anyhow::anyhow!("--{name}: {e}");
    check_sizes(&a.sizes)?;
    check_repeat(a.repeat, host)?;
    check_count(a.fibers, host.max_fibers() - 1, "fiber stacks are allocated up front")
        .map_err(flag("fibers"))?;
    check_count(a.window, 1 << 24, "the in-flight requests of one fiber")
        .map_err(flag("window"))?;
    check_count(a.mpi_window, 1 << 24, "the in-flight requests of one rank")
        .map_err(flag("mpi-window"))?;
    check_count(a.mpi_buffers, 1 << 16, "aggregation buffers per destination")
        .map_err(flag("mpi-buffers"))?;
    let largest = a.sizes.iter().copied().max().unwrap_or(8);
    if a.mpi_buffer < largest || a.mpi_buffer > 1 << 26 {
        bail!(
            "--mpi-buffer: {} bytes must hold at least one request of the largest size ({largest} \
             bytes) and be at most 67108864",
            a.mpi_buffer
        );
    }
    if !(a.seconds > 0.0 && a.seconds <= MAX_SECONDS) {
        bail!("--seconds: {} is outside (0, {MAX_SECONDS}]", a.seconds);
    }
    if let Some(r) = a.requests {
        check_count(usize::try_from(r).unwrap_or(usize::MAX), 1 << 40, "it would run for days")
            .map_err(flag("requests"))?;
    }
    let remote_only = match a.dest.as_str() {
        "all" => false,
        "remote" => true,
        d => bail!("--dest: expected `all` or `remote`, got `{d}`"),
    };
    // The workers of every rank count (`skein::ranks()` is 1 outside mpirun): under
    // `mpirun -np 2` one worker per rank sends to the other rank's.
    if remote_only && a.workers * skein::ranks() < 2 {
        bail!(
            "--dest remote: needs at least 2 workers in all (a worker sends to the others), \
             got {} worker(s) on {} rank(s)",
            a.workers,
            skein::ranks()
        );
    }
    // The runtime: message slots and a stack per fiber (one more per worker: the driver).
    host.check_engine(a.workers, a.fibers + 1, *host.slot_size_range().start())
        .map_err(anyhow::Error::msg)?;
    Ok(())
}

fn dest_name(remote_only: bool) -> &'static str {
    if remote_only {
        "uniformly random other workers"
    } else {
        "uniformly random workers (the sender included)"
    }
}

/// `skein bench echo`.
pub(crate) fn echo(a: EchoArgs, host: &dyn Host) -> anyhow::Result<()> {
    check_echo(&a, host)?;
    let ranks = if a.mpi { check_mpi("the MPI echo baselines run")? } else { 1 };
    let remote_only = a.dest == "remote";
    let setup = |size| EchoSetup {
        size,
        seconds: a.seconds,
        requests: a.requests,
        remote_only,
        seed: a.seed,
    };
    let rank0 = skein::rank() == 0;
    if rank0 {
        let mut budget = match a.requests {
            Some(r) => format!("{r} requests per worker/rank"),
            None => format!("{} s", a.seconds),
        };
        if a.repeat > 1 {
            budget.push_str(&format!(", median of {} interleaved repetitions", a.repeat));
        }
        println!(
            "echo: each client sends requests of SIZE bytes to {}, the server answers with the \
             same bytes; {budget} per size",
            dest_name(remote_only),
        );
        println!(
            "skein: {} workers x {} fibers, up to {} requests in flight per fiber (apply_then)",
            a.workers, a.fibers, a.window
        );
        if a.sizes.iter().any(|&s| s > RECORD_INLINE_BYTES) {
            println!(
                "note: the runtime stores up to {RECORD_INLINE_BYTES} bytes of a request closure \
                 or a result inline in its record; above that (sizes {}) it boxes them, one \
                 allocation each way per request",
                a.sizes
                    .iter()
                    .filter(|&&s| s > RECORD_INLINE_BYTES)
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let mut reps = Vec::with_capacity(a.repeat);
    for _ in 0..a.repeat {
        let mut rows = skein_echo_rows(&a, remote_only)?;
        if a.mpi {
            rows.extend(mpi_echo_rows(&a, ranks, &setup)?);
        }
        reps.push(rows);
    }
    let rows = median_rows(&reps, |r: &EchoRow| r.requests_per_sec);
    if !rank0 {
        return Ok(());
    }
    print_echo_table(&rows, &reps, &a.sizes);
    if let Some(path) = &a.json {
        write_json(host, path, &rows)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[cfg(feature = "mpi")]
fn mpi_echo_rows(
    a: &EchoArgs,
    ranks: usize,
    setup: &dyn Fn(usize) -> EchoSetup,
) -> anyhow::Result<Vec<EchoRow>> {
    use crate::mpi_baselines as mb;
    if skein::rank() == 0 && first_time(&ECHO_HEADER) {
        println!(
            "mpi aggregated: one thread per rank, requests and replies packed per destination \
             rank into {} KiB buffers (non-blocking sends when full, partial buffers flushed \
             when the rank is idle), up to {} full buffers of requests in flight per \
             destination; requests to the own rank are answered in place, as AML does",
            a.mpi_buffer / 1024,
            a.mpi_buffers
        );
        println!(
            "mpi per-message: one thread per rank, every request and reply its own message \
             (MPI_Isend, MPI_Improbe + MPI_Mrecv), up to {} requests in flight per rank",
            a.mpi_window
        );
    }
    let mut rows = Vec::new();
    for &size in &a.sizes {
        let s = setup(size);
        let inflight = a.mpi_buffers * (a.mpi_buffer / size) * (ranks - 1).max(1);
        let t = mb::aggregated_echo(&s, a.mpi_buffer, inflight)?;
        rows.push(EchoRow::new(
            format!("mpi aggregated ({ranks} ranks, {} KiB)", a.mpi_buffer / 1024),
            size,
            t.answered,
            t.seconds,
        ));
        let t = mb::per_message_echo(&s, a.mpi_window)?;
        rows.push(EchoRow::new(
            format!("mpi per-message ({ranks} ranks)"),
            size,
            t.answered,
            t.seconds,
        ));
    }
    Ok(rows)
}

#[cfg(not(feature = "mpi"))]
fn mpi_echo_rows(
    _: &EchoArgs,
    _: usize,
    _: &dyn Fn(usize) -> EchoSetup,
) -> anyhow::Result<Vec<EchoRow>> {
    unreachable!("check_mpi refuses --mpi without the feature")
}

fn print_echo_table(rows: &[EchoRow], reps: &[Vec<EchoRow>], sizes: &[usize]) {
    let width = rows.iter().map(|r| r.imp.len()).max().unwrap_or(4).max(4);
    println!(
        "{:<width$} {:>6} {:>12} {:>8} {:>10} {:>10} {:>8}",
        "impl", "size", "answered", "secs", "M req/s", "MB/s", "req/env"
    );
    for r in rows {
        let per_env = r.requests_per_envelope.map_or("-".to_string(), |x| format!("{x:.1}"));
        println!(
            "{:<width$} {:>6} {:>12} {:>8.3} {:>10.3} {:>10.1} {:>8}",
            r.imp,
            r.size,
            r.answered,
            r.seconds,
            r.requests_per_sec / 1e6,
            r.mb_per_sec,
            per_env
        );
    }
    // Skein against each MPI baseline, per size: the median of the repetitions' ratios and
    // their range.
    for &size in sizes {
        let of = |rows: &[EchoRow], prefix: &str| {
            rows.iter()
                .find(|r| r.size == size && r.imp.starts_with(prefix))
                .map(|r| r.requests_per_sec)
        };
        for (label, prefix) in
            [("aggregated", "mpi aggregated"), ("per-message", "mpi per-message")]
        {
            let ratio = rep_ratio(reps, |rows| Some((of(rows, "skein")?, of(rows, prefix)?)));
            if let Some(r) = ratio {
                println!("size {size:>4}: skein / mpi {label}: {}", r.ratio_text());
            }
        }
    }
}

/// The Skein side of echo: one run over every rank of the job (or this process).
fn skein_echo_rows(a: &EchoArgs, remote_only: bool) -> anyhow::Result<Vec<EchoRow>> {
    let rt = builder(a.transport, a.workers, a.worker_threads)?
        .fibers_per_worker(a.fibers + 1)
        .pin(a.pin)
        .build()
        .context("building the skein runtime")?;
    let mut rows = Vec::new();
    for &size in &a.sizes {
        let s =
            EchoSetup { size, seconds: a.seconds, requests: a.requests, remote_only, seed: a.seed };
        let (answered, secs) = with_size!(size, skein_echo(&rt, s, a.fibers, a.window))?;
        // The counters of the run just made (every rank's workers), and its threads.
        let stats = rt.stats();
        let label = skein_label(rt.workers(), stats.threads() / skein::ranks().max(1), a.transport);
        let mut row = EchoRow::new(label, size, answered, secs);
        let t = stats.total();
        if t.envelopes_sent > 0 {
            row.requests_per_envelope =
                Some(t.remote_requests_sent as f64 / t.envelopes_sent as f64);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The Skein rows' label: `skein (1 process, W workers)` or `skein (R ranks x W workers)`;
/// where the workers of a process share `threads` threads (fewer than the workers; 0: not
/// known), `W workers on T threads`. Across ranks with `--transport`, the transport is named
/// too: `skein (R ranks x W workers, shm)`.
fn skein_label(workers: usize, threads: usize, transport: Option<skein::RackTransport>) -> String {
    let workers = match threads {
        1 if workers > 1 => format!("{workers} workers on 1 thread"),
        t if t > 1 && t < workers => format!("{workers} workers on {t} threads"),
        _ => format!("{workers} workers"),
    };
    match (skein::ranks(), transport) {
        (1, _) => format!("skein (1 process, {workers})"),
        (r, None) => format!("skein ({r} ranks x {workers})"),
        (r, Some(t)) => format!("skein ({r} ranks x {workers}, {t})"),
    }
}

/// `b` with `--transport`'s choice, if any (else the builder's: `SKEIN_TRANSPORT`, or auto).
pub(crate) fn transport(b: skein::Builder, t: Option<skein::RackTransport>) -> skein::Builder {
    match t {
        Some(t) => b.rack_transport(t),
        None => b,
    }
}

/// A runtime builder for `workers` workers with `--transport` and `--worker-threads` (at
/// most one thread per worker; absent: the builder's default, `SKEIN_WORKER_THREADS` or the
/// runtime's choice).
pub(crate) fn builder(
    t: Option<skein::RackTransport>,
    workers: usize,
    worker_threads: Option<usize>,
) -> anyhow::Result<skein::Builder> {
    let b = transport(skein::Runtime::builder(), t).workers(workers);
    match worker_threads {
        Some(t) if t > workers => anyhow::bail!(
            "--worker-threads: {t} threads for {workers} workers: at most one thread per worker \
             (0: as many as the cores when the workers outnumber them)"
        ),
        Some(t) => Ok(b.worker_threads(t)),
        None => Ok(b),
    }
}

/// How a payload of one size travels. Sizes a record holds inline (up to 256 bytes) go as the
/// request's `skein::Plain` argument to a closure that captures nothing: the travel rule's
/// form, which rack mode can send to another rank. Bigger payloads exceed the inline bound of
/// that form (the `apply_with` serialized form is for them across ranks, a
/// `skein::codec::Raw` byte string: a `Vec<u8>` would be encoded byte by byte); here they are
/// captured by an `*_local` closure, which the runtime boxes in the record (one allocation
/// each way), as the benchmark's note says.
trait Payload: Copy + 'static {
    /// Sends `p` to `t`'s trustee, which counts it and answers it; `then` gets the answer.
    fn echo_then(t: &skein::Trust<u64>, p: Self, then: impl FnOnce(Self) + 'static);
    /// One blocking round trip of `p` to `t`'s trustee.
    fn echo(t: &skein::Trust<u64>, p: Self) -> Self;
}

macro_rules! inline_payload {
    ($($n:literal),*) => { $(
        impl Payload for [u8; $n] {
            fn echo_then(t: &skein::Trust<u64>, p: Self, then: impl FnOnce(Self) + 'static) {
                t.apply_then(
                    p,
                    |c, p| {
                        *c += 1;
                        p
                    },
                    then,
                );
            }
            fn echo(t: &skein::Trust<u64>, p: Self) -> Self {
                t.apply(p, |c, p| {
                    *c += 1;
                    p
                })
            }
        }
    )* };
}
inline_payload!(8, 16, 32, 64, 128, 256);

macro_rules! boxed_payload {
    ($($n:literal),*) => { $(
        impl Payload for [u8; $n] {
            fn echo_then(t: &skein::Trust<u64>, p: Self, then: impl FnOnce(Self) + 'static) {
                if t.is_local() {
                    t.apply_then_local(
                        move |c| {
                            *c += 1;
                            p
                        },
                        then,
                    );
                } else {
                    // Another rank: the serialized form travels, as one byte string.
                    t.apply_with_then(
                        Raw(p.to_vec()),
                        |c, v: Raw<u8>| {
                            *c += 1;
                            v
                        },
                        move |v: Raw<u8>| then(v.0.try_into().unwrap_or([0; $n])),
                    );
                }
            }
            fn echo(t: &skein::Trust<u64>, p: Self) -> Self {
                if t.is_local() {
                    t.apply_local(move |c| {
                        *c += 1;
                        p
                    })
                } else {
                    let v: Raw<u8> = t.apply_with(Raw(p.to_vec()), |c, v: Raw<u8>| {
                        *c += 1;
                        v
                    });
                    v.0.try_into().unwrap_or([0; $n])
                }
            }
        }
    )* };
}
boxed_payload!(512, 1024, 2048, 4096);

/// One fiber's tally.
#[derive(Debug, Default, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Tally {
    sent: u64,
    answered: u64,
    sent_sum: u64,
    answered_sum: u64,
    bad: u64,
}

/// One echo measurement with payloads of `N` bytes: `(answered, seconds)`.
fn skein_echo<const N: usize>(
    rt: &skein::Runtime,
    s: EchoSetup,
    fibers: usize,
    window: usize,
) -> anyhow::Result<(u64, f64)>
where
    [u8; N]: Payload,
{
    // What every worker's driver needs, as a `Plain` tuple (it travels to other ranks):
    // seconds (bits), requests per worker (MAX: none), seed, fibers, window, remote_only.
    let arg = (
        s.seconds.to_bits(),
        s.requests.unwrap_or(u64::MAX),
        s.seed,
        fibers as u64,
        window as u64,
        u64::from(s.remote_only),
    );
    let per_worker: Vec<[u64; 7]> = rt.run(move || {
        let drivers: Vec<_> =
            (0..skein::num_workers()).map(|g| skein::spawn_on(g, arg, echo_driver::<N>)).collect();
        drivers.into_iter().map(|h| h.join()).collect()
    })?;
    let tallies: Vec<Tally> = per_worker
        .iter()
        .map(|x| Tally {
            sent: x[0],
            answered: x[1],
            sent_sum: x[2],
            answered_sum: x[3],
            bad: x[4],
        })
        .collect();
    let served: u64 = per_worker.iter().map(|x| x[5]).sum();
    // The drivers measure their own fibers; the slowest one is the run's time.
    let secs = per_worker.iter().map(|x| x[6]).max().unwrap_or(0) as f64 / 1e9;
    let mut t = Tally::default();
    for x in &tallies {
        t.sent += x.sent;
        t.answered += x.answered;
        t.sent_sum = t.sent_sum.wrapping_add(x.sent_sum);
        t.answered_sum = t.answered_sum.wrapping_add(x.answered_sum);
        t.bad += x.bad;
    }
    if t.bad > 0 || t.answered != t.sent || t.answered_sum != t.sent_sum || served != t.sent {
        bail!(
            "skein echo ({} bytes): {} requests sent, {} answered, {served} served, {} replies \
             with wrong bytes, tag sums {} vs {}",
            s.size,
            t.sent,
            t.answered,
            t.bad,
            t.sent_sum,
            t.answered_sum
        );
    }
    Ok((t.answered, secs))
}

/// Echo on one worker (started there by `spawn_on`, on any rank): makes a property on every
/// trustee for its fibers (each counts the requests it serves), runs the worker's client
/// fibers, and answers `[sent, answered, sent_sum, answered_sum, bad, served, nanoseconds]`,
/// `served` being what its properties' trustees counted.
fn echo_driver<const N: usize>(
    (seconds, requests, seed, fibers, window, remote_only): (u64, u64, u64, u64, u64, u64),
) -> [u64; 7]
where
    [u8; N]: Payload,
{
    let (me, fibers) = (skein::current_worker(), fibers as usize);
    let props: Arc<Vec<skein::Trust<u64>>> = Arc::new(
        (0..skein::num_workers()).map(|g| skein::trustee(g).entrust_new(0u64, |v| v)).collect(),
    );
    let s = EchoSetup {
        size: N,
        seconds: f64::from_bits(seconds),
        requests: (requests != u64::MAX).then_some(requests),
        remote_only: remote_only != 0,
        seed,
    };
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs_f64(s.seconds);
    let hs: Vec<_> = (0..fibers)
        .map(|f| {
            let props = props.clone();
            // This fiber's share of the worker's --requests.
            let budget =
                s.requests.map(|r| r / fibers as u64 + u64::from((f as u64) < r % fibers as u64));
            let stream = (me * fibers + f) as u64;
            skein::spawn_local_on(me, move || {
                echo_fiber::<N>(&props, me, stream, s, budget, deadline, window as usize)
            })
        })
        .collect();
    let mut t = Tally::default();
    for h in hs {
        let x = h.join();
        t.sent += x.sent;
        t.answered += x.answered;
        t.sent_sum = t.sent_sum.wrapping_add(x.sent_sum);
        t.answered_sum = t.answered_sum.wrapping_add(x.answered_sum);
        t.bad += x.bad;
    }
    let nanos = t0.elapsed().as_nanos() as u64;
    let served: u64 = props.iter().map(|p| p.apply((), |c, ()| *c)).sum();
    [t.sent, t.answered, t.sent_sum, t.answered_sum, t.bad, served, nanos]
}

/// A client fiber of echo: sends until the deadline or its budget, keeping at most `window`
/// requests in flight, then waits for its answers.
fn echo_fiber<const N: usize>(
    props: &[skein::Trust<u64>],
    me: usize,
    stream: u64,
    s: EchoSetup,
    budget: Option<u64>,
    deadline: Instant,
    window: usize,
) -> Tally
where
    [u8; N]: Payload,
{
    struct Shared {
        outstanding: Cell<usize>,
        answered: Cell<u64>,
        answered_sum: Cell<u64>,
        bad: Cell<u64>,
    }
    let shared = Rc::new(Shared {
        outstanding: Cell::new(0),
        answered: Cell::new(0),
        answered_sum: Cell::new(0),
        bad: Cell::new(0),
    });
    let n = props.len();
    let mut rng = SplitMix64::new(s.seed, stream);
    let (mut sent, mut sent_sum) = (0u64, 0u64);
    let tag_base = stream << 40;
    loop {
        if budget.map_or(Instant::now() >= deadline, |b| sent >= b) {
            break;
        }
        let q = quota(budget, sent, shared.outstanding.get(), window, ISSUE_PER_PASS);
        if q == 0 {
            skein::yield_now();
            continue;
        }
        for _ in 0..q {
            let d = dest(&mut rng, n, me, s.remote_only);
            let tag = tag_base | sent;
            let mut payload = [0u8; N];
            stamp(&mut payload, tag);
            shared.outstanding.set(shared.outstanding.get() + 1);
            let sh = shared.clone();
            // The payload is the request's argument: the echo answers with it.
            Payload::echo_then(&props[d], payload, move |reply: [u8; N]| {
                sh.outstanding.set(sh.outstanding.get() - 1);
                sh.answered.set(sh.answered.get() + 1);
                match read_stamp(&reply) {
                    Some(t) => sh.answered_sum.set(sh.answered_sum.get().wrapping_add(t)),
                    None => sh.bad.set(sh.bad.get() + 1),
                }
            });
            sent += 1;
            sent_sum = sent_sum.wrapping_add(tag);
        }
    }
    while shared.outstanding.get() > 0 {
        skein::yield_now();
    }
    Tally {
        sent,
        answered: shared.answered.get(),
        sent_sum,
        answered_sum: shared.answered_sum.get(),
        bad: shared.bad.get(),
    }
}

/// `skein bench ping`.
pub(crate) fn ping(a: PingArgs, host: &dyn Host) -> anyhow::Result<()> {
    check_sizes(&a.sizes)?;
    check_repeat(a.repeat, host)?;
    host.check_count(a.iters, MAX_ITERS, "it would run for hours")
        .map_err(|e| anyhow::anyhow!("--iters: {e}"))?;
    if a.mpi {
        check_mpi("the MPI ping-pong runs")?;
    }
    let rank0 = skein::rank() == 0;
    if rank0 {
        println!(
            "ping: blocking round trips with a payload of SIZE bytes echoed back; {} per size \
             after {} warm-up{}",
            a.iters,
            warmup(a.iters),
            if a.repeat > 1 {
                format!(", median of {} interleaved repetitions", a.repeat)
            } else {
                String::new()
            }
        );
        println!("skein: one fiber on worker 0, `apply` on a property of worker 1 (2 workers)");
    }
    let mut reps = Vec::with_capacity(a.repeat);
    for _ in 0..a.repeat {
        let mut rows = skein_ping_rows(&a)?;
        if a.mpi {
            rows.extend(mpi_ping_rows(&a)?);
        }
        reps.push(rows);
    }
    let rows = median_rows(&reps, |r: &PingRow| -r.median_us);
    if !rank0 {
        return Ok(());
    }
    let width = rows.iter().map(|r| r.imp.len()).max().unwrap_or(4).max(4);
    println!(
        "{:<width$} {:>6} {:>10} {:>12} {:>12}",
        "impl", "size", "iters", "median µs", "mean µs"
    );
    for r in &rows {
        println!(
            "{:<width$} {:>6} {:>10} {:>12.3} {:>12.3}",
            r.imp, r.size, r.iters, r.median_us, r.mean_us
        );
    }
    for &size in &a.sizes {
        let of = |rows: &[PingRow], p: &str| {
            rows.iter().find(|r| r.size == size && r.imp.starts_with(p)).map(|r| r.median_us)
        };
        if let Some(r) = rep_ratio(&reps, |rows| Some((of(rows, "skein")?, of(rows, "mpi")?))) {
            println!("size {size:>4}: skein / mpi round trip (median): {}", r.ratio_text());
        }
    }
    if let Some(path) = &a.json {
        write_json(host, path, &rows)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Warm-up round trips before `iters` timed ones.
pub(crate) fn warmup(iters: usize) -> usize {
    iters.min(10_000)
}

fn skein_ping_rows(a: &PingArgs) -> anyhow::Result<Vec<PingRow>> {
    // Client and server on two workers of one process; over ranks, one worker per rank (as
    // the MPI ping-pong has one thread per rank), the client on rank 0 and the server on 1.
    let workers = if skein::ranks() > 1 { 1 } else { 2 };
    let rt = transport(skein::Runtime::builder(), a.transport)
        .workers(workers)
        .pin(a.pin)
        .build()
        .context("building the skein runtime")?;
    let mut rows = Vec::new();
    for &size in &a.sizes {
        let (each, total) = with_size!(size, skein_ping(&rt, a.iters))?;
        rows.push(PingRow::from_samples(skein_label(workers, 0, a.transport), size, each, total));
    }
    Ok(rows)
}

#[cfg(feature = "mpi")]
fn mpi_ping_rows(a: &PingArgs) -> anyhow::Result<Vec<PingRow>> {
    if skein::rank() == 0 && first_time(&PING_HEADER) {
        println!("mpi: ping-pong between ranks 0 and 1 (MPI_Send + MPI_Recv each way)");
    }
    let mut rows = Vec::new();
    for &size in &a.sizes {
        if let Some((each, total)) =
            crate::mpi_baselines::ping_pong(size, a.iters, warmup(a.iters))?
        {
            rows.push(PingRow::from_samples(
                "mpi ping-pong (ranks 0, 1)".into(),
                size,
                each,
                total,
            ));
        }
    }
    Ok(rows)
}

#[cfg(not(feature = "mpi"))]
fn mpi_ping_rows(_: &PingArgs) -> anyhow::Result<Vec<PingRow>> {
    unreachable!("check_mpi refuses --mpi without the feature")
}

/// `iters` blocking round trips with `N`-byte payloads, each timed: `(each ns, total ns)`.
fn skein_ping<const N: usize>(rt: &skein::Runtime, iters: usize) -> anyhow::Result<(Vec<u64>, f64)>
where
    [u8; N]: Payload,
{
    let (each, total, bad) = rt.run(move || {
        // Worker 1 in one process; the first worker of rank 1 over ranks.
        let server = if skein::ranks() > 1 { skein::local_workers() } else { 1 };
        let t = skein::trustee(server).entrust_new(0u64, |v| v);
        let mut bad = 0u64;
        let mut round_trip = |i: usize| {
            let mut payload = [0u8; N];
            stamp(&mut payload, i as u64);
            // The payload is the request's argument.
            let reply = Payload::echo(&t, payload);
            if read_stamp(&reply) != Some(i as u64) {
                bad += 1;
            }
        };
        for i in 0..warmup(iters) {
            round_trip(i);
        }
        let mut each = Vec::with_capacity(iters);
        let t0 = Instant::now();
        let mut last = t0;
        for i in 0..iters {
            round_trip(i);
            let now = Instant::now();
            each.push((now - last).as_nanos() as u64);
            last = now;
        }
        let total = t0.elapsed().as_nanos() as f64;
        (each, total, bad)
    })?;
    if bad > 0 {
        bail!("skein ping ({N} bytes): {bad} replies did not echo the payload");
    }
    Ok((each, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_rows_pick_the_middle_repetition_per_row() {
        let row = |imp: &str, rate: f64| EchoRow::new(imp.into(), 8, rate as u64, 1.0);
        let reps = vec![
            vec![row("a", 5.0), row("b", 1.0)],
            vec![row("a", 1.0), row("b", 9.0)],
            vec![row("a", 3.0), row("b", 4.0)],
        ];
        let m = median_rows(&reps, |r| r.requests_per_sec);
        assert_eq!((m[0].imp.as_str(), m[0].answered), ("a", 3));
        assert_eq!((m[1].imp.as_str(), m[1].answered), ("b", 4));
        assert!(median_rows(&Vec::<Vec<EchoRow>>::new(), |r| r.seconds).is_empty());
    }

    #[test]
    fn ping_rows_take_the_median_sample_and_the_mean_of_the_total() {
        let r = PingRow::from_samples("x".into(), 8, vec![5000, 1000, 3000], 9000.0);
        assert_eq!(r.median_us, 3.0);
        assert_eq!(r.mean_us, 3.0);
        assert_eq!(r.iters, 3);
    }
}
