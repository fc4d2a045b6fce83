//! `skein bench fetch-add`: the seeds' fetch-and-add benchmark. W workers each perform N
//! increments on counters chosen from K objects (uniform or Zipf α=1), with skein's blocking
//! `apply` (several fibers per worker), `apply_then`, `TrustArray::apply_then`, and per-object
//! locks on plain threads (`std::sync::Mutex`, a test-and-test-and-set spin lock,
//! `parking_lot::Mutex`); under `mpirun`, across the ranks, beside MPI baselines with `--mpi`.

use anyhow::{bail, Context};
use skein_baselines::locks::{
    LockedCounter, Padded, ParkingLotCounter, SpinCounter, StdMutexCounter,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use crate::host::{write_json, Host};
use crate::spread::Spread;
use skein_generators::splitmix::SplitMix64;

/// Arguments of `skein bench fetch-add`.
#[derive(Debug, clap::Args)]
pub struct FetchAddArgs {
    /// Rack transport across the ranks of an `mpirun` (`auto`, `mpi`, `shm` or `verbs`, the
    /// last with feature `rdma`; default: `SKEIN_TRANSPORT`, else `auto`: shared-memory rings
    /// on one node).
    #[arg(long)]
    transport: Option<skein::RackTransport>,
    /// Worker threads (also the number of lock-benchmark threads).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Threads that run a process's skein workers: the workers share them, consecutive
    /// workers on one thread (at most one thread per worker; 0: as many as the cores when
    /// the workers outnumber them). Default: `SKEIN_WORKER_THREADS`, else the runtime's
    /// own choice (`skein::Builder::worker_threads`).
    #[arg(long, value_name = "T")]
    worker_threads: Option<usize>,
    /// Comma-separated object counts K.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,1024,1000000")]
    objects: Vec<usize>,
    /// Distribution of the chosen objects: uniform, zipf, or both.
    #[arg(long, default_value = "both")]
    dist: String,
    /// Increments per worker.
    #[arg(long, default_value_t = 2_000_000)]
    ops: usize,
    /// Fibers per worker for the blocking `apply` variant.
    #[arg(long, default_value_t = 32)]
    fibers: usize,
    /// Implementations to run (comma-separated subset of
    /// apply,apply_then,array,mutex,spin,parking_lot). `apply` and `apply_then` use one
    /// `Trust` per counter; `array` is `TrustArray::apply_then` on one array of K counters
    /// spread over the trustees (no handle per counter), as the locks are one array of K.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "apply,apply_then,array,mutex,spin,parking_lot"
    )]
    impls: Vec<String>,
    /// Pin workers to cores.
    #[arg(long)]
    pin: bool,
    /// Overflow bytes of each request/response slot (runtime default if not given).
    #[arg(long)]
    slot_size: Option<usize>,
    /// Measure every (K, implementation) this many times, interleaving the implementations,
    /// and report the median (damps interference on a shared machine).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Write the rows as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// After every skein measurement, print each worker's runtime statistics (requests
    /// served, mean batch, busy fraction) to standard error.
    #[arg(long)]
    stats: bool,
    /// Every implementation prefetches the object (skein handle or lock) it will use this
    /// many operations ahead (0: none). With many objects the loops mostly wait for memory;
    /// this shows how much of that waiting each can overlap.
    #[arg(long, default_value_t = 0)]
    prefetch: usize,
    /// Under mpirun, also run MPI baselines across the ranks (feature `mpi`): increments
    /// aggregated per owner rank (AML style) and one-sided `MPI_Accumulate`.
    #[arg(long)]
    mpi: bool,
    /// Bytes of an aggregation buffer of the aggregated MPI baseline.
    #[arg(long, default_value_t = 32 * 1024)]
    mpi_buffer: usize,
    /// Sends each rank of the aggregated MPI baseline keeps in flight per other rank.
    #[arg(long, default_value_t = 4)]
    mpi_buffers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dist {
    Uniform,
    Zipf,
}

impl Dist {
    fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Zipf => "zipf",
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct Row {
    objects: usize,
    dist: &'static str,
    #[serde(rename = "impl")]
    imp: String,
    /// The median repetition's Mops/s.
    mops: f64,
    /// The slowest and fastest repetitions' Mops/s.
    mops_min: f64,
    mops_max: f64,
}

impl Row {
    fn new(objects: usize, dist: Dist, imp: &str, samples: &[f64]) -> Row {
        let s = Spread::of(samples).unwrap_or(Spread { min: 0.0, median: 0.0, max: 0.0, count: 0 });
        Row {
            objects,
            dist: dist.name(),
            imp: imp.to_string(),
            mops: s.median,
            mops_min: s.min,
            mops_max: s.max,
        }
    }
}

/// The width a ratio column takes: `1.23x (1.10-1.31)` with a spread, `1.23x` without.
fn ratio_width(repeat: usize) -> usize {
    if repeat > 1 {
        18
    } else {
        5
    }
}

const IMPLS: [&str; 6] = ["apply", "apply_then", "array", "mutex", "spin", "parking_lot"];

/// Bytes per object a fetch-add measurement may hold at once, generously: a `Trust`
/// handle and its entrusted counter (a cache line when padded), or a lock and its counter
/// (the same), and a Zipf CDF entry.
const BYTES_PER_OBJECT: u128 = 256;

/// Checks every count of `skein bench fetch-add` against the host's limits and memory.
fn check_fetch_add(a: &FetchAddArgs, host: &dyn Host) -> anyhow::Result<()> {
    let check_count = |v, max, why: &str| host.check_count(v, max, why);
    let slot_range = host.slot_size_range();
    let flag = |name: &'static str| move |e: String| anyhow::anyhow!("--{name}: {e}");
    check_count(a.workers, host.max_workers(), "the runtime's limit").map_err(flag("workers"))?;
    check_count(a.fibers, host.max_fibers() - 1, "fiber stacks are allocated up front")
        .map_err(flag("fibers"))?;
    check_count(a.repeat, host.max_repeat(), "more add nothing to a median but run time")
        .map_err(flag("repeat"))?;
    check_count(a.ops, usize::MAX, "").map_err(flag("ops"))?;
    check_count(a.mpi_buffers, 1 << 16, "aggregation buffers per destination")
        .map_err(flag("mpi-buffers"))?;
    if !(4..=1 << 26).contains(&a.mpi_buffer) {
        bail!(
            "--mpi-buffer: {} bytes must hold at least one 4-byte counter index and be at most \
             67108864",
            a.mpi_buffer
        );
    }
    if a.prefetch > a.ops {
        bail!(
            "--prefetch: {} is more than --ops {} (there is nothing that far ahead)",
            a.prefetch,
            a.ops
        );
    }
    if let Some(k) = a.objects.iter().find(|&&k| k == 0 || k > u32::MAX as usize) {
        bail!("--objects: every K must be in 1..=4294967295, got {k}");
    }
    let slot = a.slot_size.unwrap_or(*slot_range.start());
    if a.slot_size.is_some() && !slot_range.contains(&slot) {
        bail!(
            "--slot-size: {slot} is outside {}..={} bytes (the runtime's range)",
            slot_range.start(),
            slot_range.end()
        );
    }
    // The runtime: its message slots and a stack per fiber (one more per worker than
    // asked for: the measurement's own driver).
    host.check_engine(a.workers, a.fibers + 1, slot).map_err(anyhow::Error::msg)?;
    // The largest K's objects next to the per-worker operation sequences (4 bytes each).
    let k = a.objects.iter().copied().max().unwrap_or(1) as u128;
    let seqs = a.workers as u128 * a.ops as u128 * 4;
    host.check_memory(
        k * BYTES_PER_OBJECT + seqs,
        &format!("{k} objects and {} workers x {} operations (4 bytes each)", a.workers, a.ops),
    )
    .map_err(anyhow::Error::msg)?;
    Ok(())
}

pub(crate) fn fetch_add(a: FetchAddArgs, host: &dyn Host) -> anyhow::Result<()> {
    check_fetch_add(&a, host)?;
    for i in &a.impls {
        if !IMPLS.contains(&i.as_str()) {
            bail!("--impls: unknown implementation `{i}` (expected one of {})", IMPLS.join(","));
        }
    }
    let dists = match a.dist.as_str() {
        "uniform" => vec![Dist::Uniform],
        "zipf" => vec![Dist::Zipf],
        "both" => vec![Dist::Uniform, Dist::Zipf],
        d => bail!("--dist: expected uniform, zipf or both, got `{d}`"),
    };
    let mut b = crate::echo::builder(a.transport, a.workers, a.worker_threads)?
        .fibers_per_worker(a.fibers + 1);
    if let Some(s) = a.slot_size {
        b = b.slot_size(s);
    }
    if a.mpi {
        crate::echo::check_mpi("the MPI fetch-add baselines run")?;
    }
    let rt = b.pin(a.pin).build().context("building the skein runtime")?;
    if skein::ranks() > 1 {
        return fetch_add_ranks(&a, &rt, &dists, host);
    }
    let pf = a.prefetch;
    let mut rows = Vec::new();
    println!(
        "fetch-add: {} workers x {} increments, {} fibers/worker for `apply` (Mops/s{})",
        a.workers,
        a.ops,
        a.fibers,
        if a.repeat > 1 { format!(", median of {}", a.repeat) } else { String::new() }
    );
    print!("{:>8} {:>8}", "dist", "K");
    for i in &a.impls {
        print!(" {i:>11}");
    }
    let ratios: Vec<&str> =
        ["apply_then", "array"].into_iter().filter(|r| a.impls.iter().any(|i| i == r)).collect();
    for r in &ratios {
        print!("  {r}/best-lock");
    }
    println!();
    for &dist in &dists {
        for &k in &a.objects {
            let seqs = Arc::new(make_sequences(a.workers, a.ops, k, dist));
            print!("{:>8} {:>8}", dist.name(), k);
            let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(a.repeat); a.impls.len()];
            for _ in 0..a.repeat {
                for (j, imp) in a.impls.iter().enumerate() {
                    samples[j].push(match imp.as_str() {
                        "apply" if k <= PAD_UP_TO => {
                            bench_apply::<Padded<u64>>(&rt, k, &seqs, a.fibers, pf)?
                        }
                        "apply" => bench_apply::<u64>(&rt, k, &seqs, a.fibers, pf)?,
                        "apply_then" if k <= PAD_UP_TO => {
                            bench_apply_then::<Padded<u64>>(&rt, k, &seqs, pf)?
                        }
                        "apply_then" => bench_apply_then::<u64>(&rt, k, &seqs, pf)?,
                        "array" if k <= PAD_UP_TO => bench_array::<Padded<u64>>(&rt, k, &seqs)?,
                        "array" => bench_array::<u64>(&rt, k, &seqs)?,
                        "mutex" => bench_lock::<StdMutexCounter>(k, &seqs, a.pin, pf),
                        "spin" => bench_lock::<SpinCounter>(k, &seqs, a.pin, pf),
                        "parking_lot" => bench_lock::<ParkingLotCounter>(k, &seqs, a.pin, pf),
                        _ => unreachable!("validated above"),
                    });
                    if a.stats && (imp.starts_with("apply") || imp == "array") {
                        print_stats(&format!("{imp} K={k}"), &rt.stats());
                    }
                }
            }
            for (imp, xs) in a.impls.iter().zip(&samples) {
                let row = Row::new(k, dist, imp, xs);
                print!(" {:>11.2}", row.mops);
                rows.push(row);
            }
            // The best lock of each repetition, against which that repetition's Skein forms
            // are compared.
            let locks: Vec<&Vec<f64>> = a
                .impls
                .iter()
                .zip(&samples)
                .filter(|(i, _)| ["mutex", "spin", "parking_lot"].contains(&i.as_str()))
                .map(|(_, xs)| xs)
                .collect();
            let best_lock: Vec<f64> =
                (0..a.repeat).map(|r| locks.iter().fold(0.0f64, |m, xs| m.max(xs[r]))).collect();
            for r in &ratios {
                let w = (r.len() + 11).max(ratio_width(a.repeat));
                let j = a.impls.iter().position(|i| i == r).expect("ratios name chosen impls");
                match Spread::of_ratios(&samples[j], &best_lock) {
                    Some(sp) => print!("  {:>w$}", sp.ratio_text()),
                    None => print!("  {:>w$}", "-"),
                }
            }
            println!();
        }
    }
    if let Some(path) = &a.json {
        write_json(host, path, &rows)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// fetch-add under `mpirun` (rack mode): `apply_then` (a `Trust` per counter) or `array` (one
/// `TrustArray`) on K counters spread over every worker of every rank (counter `i` on global
/// worker `i mod R·W`), every worker a client with its own sequence, as in one process with
/// R·W workers. The locks do not span processes, and the blocking `apply` form is measured
/// in one process; with `--mpi` the MPI baselines run beside them, one thread per rank with
/// the sequence of the worker of the same number, `--ops` increments per rank (counter `i`
/// on rank `i mod R`: with one worker per rank the same counters, sequences and placement).
/// Rank 0 prints.
fn fetch_add_ranks(
    a: &FetchAddArgs,
    rt: &skein::Runtime,
    dists: &[Dist],
    host: &dyn Host,
) -> anyhow::Result<()> {
    if let Some(i) = a.impls.iter().find(|i| !RANK_IMPLS.contains(&i.as_str())) {
        bail!(
            "--impls {i}: under mpirun only apply_then and array run across the ranks (the \
             locks and the blocking form are measured in one process); pass --impls \
             apply_then,array"
        );
    }
    let rank0 = skein::rank() == 0;
    let (ranks, workers) = (skein::ranks(), a.workers * skein::ranks());
    // The Skein forms asked for, in their usual order; the MPI baselines after them.
    let mut imps: Vec<String> = RANK_IMPLS
        .iter()
        .filter(|i| a.impls.iter().any(|x| x == *i))
        .map(|i| i.to_string())
        .collect();
    let skein_forms = imps.len();
    if a.mpi {
        imps.push("mpi aggregated".into());
        imps.push("mpi rma".into());
    }
    if rank0 {
        println!(
            "fetch-add across {ranks} ranks x {} workers: {} increments per worker (Mops/s{})",
            a.workers,
            a.ops,
            if a.repeat > 1 { format!(", median of {}", a.repeat) } else { String::new() }
        );
        if a.mpi {
            println!(
                "mpi aggregated: one thread per rank, {} increments per rank, counter indices \
                 packed per owner rank into {} KiB buffers (up to {} sends in flight per other \
                 rank), applied by the owner with no reply; own counters in place",
                a.ops,
                a.mpi_buffer / 1024,
                a.mpi_buffers
            );
            println!(
                "mpi rma: one thread per rank, {} increments per rank, each an MPI_Accumulate \
                 (MPI_SUM) into the owner's window, MPI_Win_flush_all every {}",
                a.ops,
                rma_flush_every()
            );
        }
        print!("{:>8} {:>8}", "dist", "K");
        for i in &imps {
            print!(" {i:>14}");
        }
        for (si, mi) in ratio_pairs(&imps, skein_forms) {
            print!("  {}/{}", imps[si], &imps[mi][4..]);
        }
        println!();
    }
    let mut rows = Vec::new();
    for &dist in dists {
        for &k in &a.objects {
            let mut xs: Vec<Vec<f64>> = vec![Vec::with_capacity(a.repeat); imps.len()];
            for _ in 0..a.repeat {
                for (x, imp) in xs.iter_mut().zip(&imps[..skein_forms]) {
                    let pad = k <= PAD_UP_TO;
                    x.push(match imp.as_str() {
                        "apply_then" if pad => {
                            bench_apply_then_ranks::<Padded<u64>>(rt, k, a.ops, dist, workers)?
                        }
                        "apply_then" => bench_apply_then_ranks::<u64>(rt, k, a.ops, dist, workers)?,
                        _ if pad => bench_array_ranks::<Padded<u64>>(rt, k, a.ops, dist, workers)?,
                        _ => bench_array_ranks::<u64>(rt, k, a.ops, dist, workers)?,
                    });
                }
                if a.mpi {
                    let (agg, rma) = mpi_fetch_add(a, k, dist, ranks)?;
                    xs[skein_forms].push(agg);
                    xs[skein_forms + 1].push(rma);
                }
            }
            let found: Vec<Row> =
                imps.iter().zip(&xs).map(|(imp, x)| Row::new(k, dist, imp, x)).collect();
            if rank0 {
                print!("{:>8} {:>8}", dist.name(), k);
                for row in &found {
                    print!(" {:>14.2}", row.mops);
                }
                for (si, mi) in ratio_pairs(&imps, skein_forms) {
                    let w = (imps[si].len() + imps[mi].len() - 3).max(ratio_width(a.repeat));
                    match Spread::of_ratios(&xs[si], &xs[mi]) {
                        Some(sp) => print!("  {:>w$}", sp.ratio_text()),
                        None => print!("  {:>w$}", "-"),
                    }
                }
                println!();
            }
            rows.extend(found);
        }
    }
    if let (true, Some(path)) = (rank0, &a.json) {
        write_json(host, path, &rows)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// The Skein forms under `mpirun`, in table order.
const RANK_IMPLS: [&str; 2] = ["apply_then", "array"];

/// The (Skein form, MPI baseline) index pairs of the ratio columns: `imps[..skein_forms]` are
/// Skein's, the rest `mpi ...`.
fn ratio_pairs(imps: &[String], skein_forms: usize) -> Vec<(usize, usize)> {
    (0..skein_forms).flat_map(|s| (skein_forms..imps.len()).map(move |m| (s, m))).collect()
}

/// One measurement of `array` under `mpirun`: `main` (rank 0) makes one `TrustArray` of K
/// counters over every worker of every rank, hands it to every worker inside `apply_with` (a
/// latch each), and starts each worker's client with `launch`; each client increments
/// through the array it received (element requests by index: no handle per counter).
fn bench_array_ranks<C: Counter>(
    rt: &skein::Runtime,
    k: usize,
    ops: usize,
    dist: Dist,
    workers: usize,
) -> anyhow::Result<f64> {
    type Keeper<C> = skein::Latch<Option<skein::TrustArray<C>>>;
    let zipf = u8::from(dist == Dist::Zipf);
    let (nanos, total) = rt.run(move || {
        let w = skein::num_workers();
        let counters = skein::TrustArray::new(k, (), |(), _| C::default());
        let keepers: Vec<skein::Trust<Keeper<C>>> = (0..w)
            .map(|g| skein::trustee(g).entrust_new((), |()| skein::Latch::new(None)))
            .collect();
        for kp in &keepers {
            kp.apply_with(counters.clone(), |l, a| {
                if let Some(l) = l.get_mut() {
                    *l = Some(a);
                }
            });
        }
        // One local fiber per worker waits for that worker's client (`launch` blocks).
        let clients: Vec<_> = keepers
            .into_iter()
            .enumerate()
            .map(|(g, kp)| {
                skein::spawn(move || {
                    kp.launch((g, ops, zipf), |a, (me, ops, zipf)| {
                        let Some(a) = a.take() else { return 0 };
                        timed_client(me, ops, a.len(), zipf, |i| {
                            a.apply_then(i, (), |c, ()| c.incr(), |()| {});
                        })
                    })
                })
            })
            .collect();
        let nanos = clients.into_iter().map(|h| h.join()).max().unwrap_or(0);
        let sum = std::rc::Rc::new(std::cell::Cell::new(0u64));
        for i in 0..k {
            let s = sum.clone();
            counters.apply_then(i, (), |c, ()| c.get(), move |v| s.set(s.get() + v));
        }
        skein::wait_quiescent();
        (nanos, sum.get())
    })?;
    rate_across_ranks("array", total, workers * ops, nanos)
}

/// One measurement of each MPI fetch-add baseline on this rank's sequence: (aggregated, rma)
/// in Mops/s, all ranks together.
#[cfg(feature = "mpi")]
fn mpi_fetch_add(
    a: &FetchAddArgs,
    k: usize,
    dist: Dist,
    ranks: usize,
) -> anyhow::Result<(f64, f64)> {
    let cdf = zipf_cdf(k, dist);
    let seq = sequence_of(skein::rank(), a.ops, k, dist, &cdf);
    let mops = |t: crate::mpi_baselines::AddTotals| t.ops as f64 / t.seconds.max(1e-9) / 1e6;
    let inflight = a.mpi_buffers * (ranks - 1).max(1);
    let agg = crate::mpi_baselines::aggregated_fetch_add(&seq, k, a.mpi_buffer, inflight)?;
    let rma = crate::mpi_rma::rma_fetch_add(&seq, k)?;
    Ok((mops(agg), mops(rma)))
}

#[cfg(not(feature = "mpi"))]
fn mpi_fetch_add(_: &FetchAddArgs, _: usize, _: Dist, _: usize) -> anyhow::Result<(f64, f64)> {
    unreachable!("check_mpi refuses --mpi without the feature")
}

#[cfg(feature = "mpi")]
fn rma_flush_every() -> usize {
    crate::mpi_rma::FLUSH_EVERY
}

#[cfg(not(feature = "mpi"))]
fn rma_flush_every() -> usize {
    unreachable!("check_mpi refuses --mpi without the feature")
}

/// Counter handles handed over per `apply_with` by [`bench_apply_then_ranks`].
const HANDLES_PER_MESSAGE: usize = 1 << 16;

/// One measurement of [`fetch_add_ranks`]: `main` (rank 0) makes the counters with
/// `entrust_new`, hands every worker the list of handles (they travel inside `apply_with`,
/// [`HANDLES_PER_MESSAGE`] at a time)
/// in a [`skein::Latch`] entrusted to it, and starts each worker's client with `launch`.
fn bench_apply_then_ranks<C: Counter>(
    rt: &skein::Runtime,
    k: usize,
    ops: usize,
    dist: Dist,
    workers: usize,
) -> anyhow::Result<f64> {
    type Ctx<C> = skein::Latch<Vec<skein::Trust<C>>>;
    let zipf = u8::from(dist == Dist::Zipf);
    let (nanos, total) = rt.run(move || {
        let w = skein::num_workers();
        let counters: Vec<skein::Trust<C>> =
            (0..k).map(|i| skein::trustee(i % w).entrust_new((), |()| C::default())).collect();
        let ctx: Arc<Vec<skein::Trust<Ctx<C>>>> = Arc::new(
            (0..w)
                .map(|g| skein::trustee(g).entrust_new((), |()| skein::Latch::new(Vec::new())))
                .collect(),
        );
        // In chunks: a serialized argument carries at most 16 MiB, and each handle takes
        // 40 bytes of it (a million counters in one `apply_with` would not fit).
        for c in ctx.iter() {
            for chunk in counters.chunks(HANDLES_PER_MESSAGE) {
                c.apply_with(chunk.to_vec(), |l, v: Vec<skein::Trust<C>>| {
                    if let Some(mine) = l.get_mut() {
                        mine.extend(v);
                    }
                });
            }
        }
        // One local fiber per worker waits for that worker's client (`launch` blocks).
        let clients: Vec<_> = (0..w)
            .map(|g| {
                let ctx = ctx.clone();
                skein::spawn(move || {
                    ctx[g].launch((g, ops, zipf), |counters, (me, ops, zipf)| {
                        timed_client(me, ops, counters.len(), zipf, |i| {
                            counters[i].apply_then((), |c, ()| c.incr(), |()| {});
                        })
                    })
                })
            })
            .collect();
        let nanos = clients.into_iter().map(|h| h.join()).max().unwrap_or(0);
        let total: u64 = counters.iter().map(|c| c.apply((), |c, ()| c.get())).sum();
        (nanos, total)
    })?;
    rate_across_ranks("apply_then", total, workers * ops, nanos)
}

/// One client of a fetch-add across ranks, on global worker `me`: `ops` increments of the
/// counters its sequence names (`incr(counter)`), then quiescence; the nanoseconds it took.
fn timed_client(me: usize, ops: usize, k: usize, zipf: u8, mut incr: impl FnMut(usize)) -> u64 {
    let dist = if zipf == 1 { Dist::Zipf } else { Dist::Uniform };
    let cdf = zipf_cdf(k, dist);
    let seq = sequence_of(me, ops, k, dist, &cdf);
    let t0 = Instant::now();
    for &i in &seq {
        incr(i as usize);
    }
    skein::wait_quiescent();
    t0.elapsed().as_nanos() as u64
}

/// The Mops/s of a fetch-add across ranks that took `nanos` (its slowest client), once its
/// counters' `total` is checked against the `expect` increments issued.
fn rate_across_ranks(what: &str, total: u64, expect: usize, nanos: u64) -> anyhow::Result<f64> {
    if total != expect as u64 {
        bail!("{what} across ranks: counters sum to {total}, expected {expect}");
    }
    Ok(expect as f64 / (nanos as f64 / 1e9) / 1e6)
}

/// Prints one line per worker of a run's statistics to standard error.
fn print_stats(what: &str, st: &skein::Stats) {
    for (w, s) in st.workers.iter().enumerate() {
        eprintln!(
            "  [{what}] worker {w}: served {} in {} batches (mean {:.1}), sent {} in {} \
             batches, local {}, fibers run {}, busy {:.1}% of {} loop passes",
            s.requests_served,
            s.batches_served,
            s.mean_batch(),
            s.requests_sent,
            s.batches_sent,
            s.local_requests,
            s.fibers_run,
            100.0 * s.busy_fraction(),
            s.useful_polls + s.idle_polls
        );
    }
}

/// Per-worker object index sequences (generated before timing).
fn make_sequences(workers: usize, ops: usize, k: usize, dist: Dist) -> Vec<Vec<u32>> {
    let cdf = zipf_cdf(k, dist);
    (0..workers).map(|w| sequence_of(w, ops, k, dist, &cdf)).collect()
}

/// The Zipf distribution's cumulative weights over `k` objects (empty for uniform).
fn zipf_cdf(k: usize, dist: Dist) -> Vec<f64> {
    if dist == Dist::Zipf {
        let mut acc = 0.0;
        let mut c: Vec<f64> = (1..=k)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect();
        let total = acc;
        c.iter_mut().for_each(|x| *x /= total);
        c
    } else {
        Vec::new()
    }
}

/// Worker `w`'s object index sequence (`cdf`: the Zipf distribution's, empty for uniform).
fn sequence_of(w: usize, ops: usize, k: usize, dist: Dist, cdf: &[f64]) -> Vec<u32> {
    let mut rng =
        SplitMix64::from_state(0x5EED ^ (w as u64 + 1).wrapping_mul(0x1234_5678_9ABC_DEF1));
    (0..ops)
        .map(|_| match dist {
            Dist::Uniform => rng.below(k as u64) as u32,
            Dist::Zipf => {
                let u = rng.unit();
                cdf.partition_point(|&c| c < u).min(k - 1) as u32
            }
        })
        .collect()
}

/// Object counts up to which every counter (and every lock) gets a cache line of its own, as
/// in [`bench_lock`]: with few objects, counters of different workers would otherwise share
/// lines.
const PAD_UP_TO: usize = 1024;

/// A counter entrusted to a trustee: bare, or alone in its cache line.
trait Counter: Default + Send + 'static {
    fn incr(&mut self);
    fn get(&self) -> u64;
}

impl Counter for u64 {
    #[inline]
    fn incr(&mut self) {
        *self += 1;
    }
    fn get(&self) -> u64 {
        *self
    }
}

impl Counter for Padded<u64> {
    #[inline]
    fn incr(&mut self) {
        self.0 += 1;
    }
    fn get(&self) -> u64 {
        self.0
    }
}

/// Runs `$op` with `$i = seq[j]` for `j = first, first + step, ...`; when `ahead > 0`, first
/// runs `$pf` with `$n = seq[j + ahead * step]` (a prefetch). A macro, so that every
/// implementation's operation is written into its loop (twice: without and with prefetching)
/// and inlined there; called through a shared function it was kept out of line, a call per
/// operation.
macro_rules! each_op {
    ($seq:expr, ($first:expr, $step:expr), $ahead:expr, |$n:ident| $pf:expr, |$i:ident| $op:expr $(,)?) => {{
        let (seq, first, step, ahead): (&[u32], usize, usize, usize) =
            ($seq, $first, $step, $ahead);
        if ahead == 0 {
            for &$i in seq.iter().skip(first).step_by(step) {
                let $i = $i as usize;
                $op;
            }
        } else {
            for (k, &$i) in seq.iter().skip(first).step_by(step).enumerate() {
                if let Some(&next) = seq.get(first + (k + ahead) * step) {
                    let $n = next as usize;
                    $pf;
                }
                let $i = $i as usize;
                $op;
            }
        }
    }};
}

fn bench_apply_then<C: Counter>(
    rt: &skein::Runtime,
    k: usize,
    seqs: &Arc<Vec<Vec<u32>>>,
    pf: usize,
) -> anyhow::Result<f64> {
    let seqs = seqs.clone();
    let expect: u64 = seqs.iter().map(|s| s.len() as u64).sum();
    let (secs, total) = rt.run(move || {
        let w = skein::num_workers();
        let trusts: Arc<Vec<skein::Trust<C>>> =
            Arc::new((0..k).map(|i| skein::trustee(i % w).entrust(C::default())).collect());
        let t0 = Instant::now();
        let hs: Vec<_> = (0..w)
            .map(|me| {
                let trusts = trusts.clone();
                let seqs = seqs.clone();
                skein::spawn_local_on(me, move || {
                    each_op!(&seqs[me], (0, 1), pf, |n| skein::prefetch(&trusts[n]), |i| {
                        trusts[i].apply_then((), |c, ()| c.incr(), |()| {})
                    });
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join());
        skein::wait_quiescent();
        let secs = t0.elapsed().as_secs_f64();
        let total: u64 = sum_counts(&trusts);
        (secs, total)
    })?;
    if total != expect {
        bail!("apply_then: counters sum to {total}, expected {expect}");
    }
    Ok(expect as f64 / secs / 1e6)
}

/// `apply_then` on one [`skein::TrustArray`] of `k` counters (the loop of
/// [`bench_apply_then`] without prefetching: there is no per-counter handle to prefetch).
fn bench_array<C: Counter>(
    rt: &skein::Runtime,
    k: usize,
    seqs: &Arc<Vec<Vec<u32>>>,
) -> anyhow::Result<f64> {
    let seqs = seqs.clone();
    let expect: u64 = seqs.iter().map(|s| s.len() as u64).sum();
    let (secs, total) = rt.run(move || {
        let w = skein::num_workers();
        let counters = skein::TrustArray::new(k, (), |(), _| C::default());
        let t0 = Instant::now();
        let hs: Vec<_> = (0..w)
            .map(|me| {
                let counters = counters.clone();
                let seqs = seqs.clone();
                skein::spawn_local_on(me, move || {
                    for &i in seqs[me].iter() {
                        counters.apply_then(i as usize, (), |c, ()| c.incr(), |()| {});
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join());
        skein::wait_quiescent();
        let secs = t0.elapsed().as_secs_f64();
        let sum = Arc::new(AtomicU64::new(0));
        for i in 0..k {
            let s = sum.clone();
            counters.apply_then(
                i,
                (),
                |c, ()| c.get(),
                move |v| _ = s.fetch_add(v, Ordering::Relaxed),
            );
        }
        skein::wait_quiescent();
        (secs, sum.load(Ordering::Relaxed))
    })?;
    if total != expect {
        bail!("array: counters sum to {total}, expected {expect}");
    }
    Ok(expect as f64 / secs / 1e6)
}

fn sum_counts<C: Counter>(trusts: &Arc<Vec<skein::Trust<C>>>) -> u64 {
    let sum = Arc::new(AtomicU64::new(0));
    for t in trusts.iter() {
        let s = sum.clone();
        t.apply_then(
            (),
            |c, ()| c.get(),
            move |v| {
                s.fetch_add(v, Ordering::Relaxed);
            },
        );
    }
    skein::wait_quiescent();
    sum.load(Ordering::Relaxed)
}

fn bench_apply<C: Counter>(
    rt: &skein::Runtime,
    k: usize,
    seqs: &Arc<Vec<Vec<u32>>>,
    fibers: usize,
    pf: usize,
) -> anyhow::Result<f64> {
    let seqs = seqs.clone();
    let expect: u64 = seqs.iter().map(|s| s.len() as u64).sum();
    let (secs, total) = rt.run(move || {
        let w = skein::num_workers();
        let trusts: Arc<Vec<skein::Trust<C>>> =
            Arc::new((0..k).map(|i| skein::trustee(i % w).entrust(C::default())).collect());
        let t0 = Instant::now();
        let mut hs = Vec::new();
        for me in 0..w {
            for f in 0..fibers {
                let trusts = trusts.clone();
                let seqs = seqs.clone();
                hs.push(skein::spawn_local_on(me, move || {
                    // Fiber f takes every fibers-th operation of its worker's sequence.
                    each_op!(&seqs[me], (f, fibers), pf, |n| skein::prefetch(&trusts[n]), |i| {
                        trusts[i].apply((), |c, ()| c.incr())
                    });
                }));
            }
        }
        hs.into_iter().for_each(|h| h.join());
        let secs = t0.elapsed().as_secs_f64();
        (secs, sum_counts(&trusts))
    })?;
    if total != expect {
        bail!("apply: counters sum to {total}, expected {expect}");
    }
    Ok(expect as f64 / secs / 1e6)
}

fn bench_lock<L: LockedCounter>(k: usize, seqs: &Arc<Vec<Vec<u32>>>, pin: bool, pf: usize) -> f64 {
    if k <= PAD_UP_TO {
        run_lock_threads::<Padded<L>>(k, seqs, pin, pf)
    } else {
        run_lock_threads::<L>(k, seqs, pin, pf)
    }
}

/// One thread per sequence increments `k` counters of type `C`, each prefetching the lock
/// `ahead` operations ahead (0: none); returns Mops/s.
fn run_lock_threads<C: LockedCounter>(
    k: usize,
    seqs: &Arc<Vec<Vec<u32>>>,
    pin: bool,
    ahead: usize,
) -> f64 {
    let locks: Arc<Vec<C>> = Arc::new((0..k).map(|_| C::default()).collect());
    let w = seqs.len();
    let barrier = Arc::new(Barrier::new(w + 1));
    let hs: Vec<_> = (0..w)
        .map(|me| {
            let (seqs, locks, barrier) = (seqs.clone(), locks.clone(), barrier.clone());
            std::thread::spawn(move || {
                if pin {
                    skein::pin_current_thread(me);
                }
                barrier.wait();
                each_op!(&seqs[me], (0, 1), ahead, |n| skein::prefetch(&locks[n]), |i| {
                    locks[i].incr()
                });
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    for h in hs {
        h.join().expect("lock benchmark thread panicked");
    }
    let secs = t0.elapsed().as_secs_f64();
    let expect: u64 = seqs.iter().map(|s| s.len() as u64).sum();
    let total: u64 = locks.iter().map(LockedCounter::get).sum();
    assert_eq!(total, expect, "lock benchmark lost increments");
    expect as f64 / secs / 1e6
}
