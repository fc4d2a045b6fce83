//! Criterion benchmarks of the delegation runtime (issue 3, "Speed").
//!
//! What the numbers are for:
//!
//! * `fiber/yield_now` — one `yield_now` (fiber → worker loop → fiber: two stack switches plus
//!   one scheduler pass). Half of it is the fiber switch cost.
//! * `apply/round_trip_remote` — one blocking `apply` from worker 0 to a trust on worker 1,
//!   issued back to back: the latency of a request/response through the slots.
//! * `apply/local` — a blocking `apply` on a trust owned by the calling worker (the local
//!   shortcut: no slot, no switch).
//! * `trustee/apply_then_one_remote` — throughput (elements/s = requests/s) of one trustee
//!   (worker 1) fed with `apply_then` by one client (worker 0): the rate a single trustee serves.
//! * `fetch_add/{apply_then,mutex,parking_lot,spin}/K` — two workers (threads) each perform a
//!   fixed number of increments on counters chosen uniformly from K objects; elements/s is
//!   increments per second. Delegation should beat the locks by a wide margin for small K
//!   (contention) and stay within 2× of them for large K.
//!
//! Every measurement uses `iter_custom`: the runtime starts, the inputs (trusts, index
//! sequences, locks) are built, and only then the clock runs for `iters` operations, so thread
//! start-up and input construction are never timed. On a shared 2-core machine compare ratios
//! taken in one run, not absolute values across runs. `skein bench fetch-add` is the full
//! version of the last group (more K, Zipf, blocking `apply`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use skein_baselines::locks::{
    LockedCounter, Padded, ParkingLotCounter, SpinCounter, StdMutexCounter,
};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn runtime(workers: usize) -> skein::Runtime {
    skein::Runtime::builder().workers(workers).build().expect("runtime")
}

fn fiber_switch(c: &mut Criterion) {
    let rt = runtime(1);
    let mut g = c.benchmark_group("fiber");
    g.throughput(Throughput::Elements(1));
    g.bench_function("yield_now", |b| {
        b.iter_custom(|iters| {
            rt.run(move || {
                let t0 = Instant::now();
                for _ in 0..iters {
                    skein::yield_now();
                }
                t0.elapsed()
            })
            .expect("run")
        })
    });
    g.finish();
}

fn apply_latency(c: &mut Criterion) {
    let rt = runtime(2);
    let mut g = c.benchmark_group("apply");
    g.throughput(Throughput::Elements(1));
    for (name, owner) in [("round_trip_remote", 1usize), ("local", 0)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.run(move || {
                    let t = skein::trustee(owner).entrust(0u64);
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        black_box(t.apply(|c| {
                            *c += 1;
                            *c
                        }));
                    }
                    t0.elapsed()
                })
                .expect("run")
            })
        });
    }
    g.finish();
}

fn single_trustee(c: &mut Criterion) {
    let rt = runtime(2);
    let mut g = c.benchmark_group("trustee");
    g.throughput(Throughput::Elements(1));
    g.bench_function("apply_then_one_remote", |b| {
        b.iter_custom(|iters| {
            let (d, total) = rt
                .run(move || {
                    let t = skein::trustee(1).entrust(0u64);
                    let t0 = Instant::now();
                    for _ in 0..iters {
                        t.apply_then(|c| *c += 1, |()| {});
                    }
                    skein::wait_quiescent();
                    let d = t0.elapsed();
                    (d, t.apply(|c| *c))
                })
                .expect("run");
            assert_eq!(total, iters);
            d
        })
    });
    g.finish();
}

// ----- fetch-add -------------------------------------------------------------------------

/// Workers (and lock threads) in the fetch-add group.
const FA_WORKERS: usize = 2;
/// Increments per worker per criterion iteration.
const FA_OPS: usize = 4096;

/// Per-worker uniform index sequences into K objects (SplitMix64, fixed seeds).
fn sequences(k: usize) -> Arc<Vec<Vec<u32>>> {
    let seqs = (0..FA_WORKERS)
        .map(|w| {
            let mut s = 0x5EED_u64 ^ ((w as u64 + 1) << 32);
            (0..FA_OPS)
                .map(|_| {
                    s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut z = s;
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    ((z ^ (z >> 31)) % k as u64) as u32
                })
                .collect()
        })
        .collect();
    Arc::new(seqs)
}

fn fa_apply_then(rt: &skein::Runtime, k: usize, seqs: &Arc<Vec<Vec<u32>>>, iters: u64) -> Duration {
    let seqs = seqs.clone();
    let (d, total) = rt
        .run(move || {
            let w = skein::num_workers();
            let trusts: Arc<Vec<skein::Trust<u64>>> =
                Arc::new((0..k).map(|i| skein::trustee(i % w).entrust(0u64)).collect());
            let t0 = Instant::now();
            let hs: Vec<_> = (0..w)
                .map(|me| {
                    let (trusts, seqs) = (trusts.clone(), seqs.clone());
                    skein::spawn_on(me, move || {
                        for _ in 0..iters {
                            for &i in &seqs[me] {
                                trusts[i as usize].apply_then(|c| *c += 1, |()| {});
                            }
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join());
            skein::wait_quiescent();
            let d = t0.elapsed();
            let total: u64 = trusts.iter().map(|t| t.apply(|c| *c)).sum();
            (d, total)
        })
        .expect("run");
    assert_eq!(total, iters * (FA_WORKERS * FA_OPS) as u64, "apply_then lost increments");
    d
}

fn fa_lock<L: LockedCounter>(k: usize, seqs: &Arc<Vec<Vec<u32>>>, iters: u64) -> Duration {
    let locks: Arc<Vec<Padded<L>>> = Arc::new((0..k).map(|_| Padded::default()).collect());
    let start = Arc::new(Barrier::new(FA_WORKERS + 1));
    let hs: Vec<_> = (0..FA_WORKERS)
        .map(|me| {
            let (locks, seqs, start) = (locks.clone(), seqs.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for _ in 0..iters {
                    for &i in &seqs[me] {
                        locks[i as usize].0.incr();
                    }
                }
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    hs.into_iter().for_each(|h| h.join().expect("lock thread"));
    let d = t0.elapsed();
    let total: u64 = locks.iter().map(|l| l.0.get()).sum();
    assert_eq!(total, iters * (FA_WORKERS * FA_OPS) as u64, "lock lost increments");
    d
}

fn fetch_add(c: &mut Criterion) {
    let rt = runtime(FA_WORKERS);
    let mut g = c.benchmark_group("fetch_add");
    g.throughput(Throughput::Elements((FA_WORKERS * FA_OPS) as u64));
    for k in [1usize, 16, 1024] {
        let seqs = sequences(k);
        g.bench_with_input(BenchmarkId::new("apply_then", k), &k, |b, &k| {
            b.iter_custom(|iters| fa_apply_then(&rt, k, &seqs, iters))
        });
        g.bench_with_input(BenchmarkId::new("mutex", k), &k, |b, &k| {
            b.iter_custom(|iters| fa_lock::<StdMutexCounter>(k, &seqs, iters))
        });
        g.bench_with_input(BenchmarkId::new("parking_lot", k), &k, |b, &k| {
            b.iter_custom(|iters| fa_lock::<ParkingLotCounter>(k, &seqs, iters))
        });
        g.bench_with_input(BenchmarkId::new("spin", k), &k, |b, &k| {
            b.iter_custom(|iters| fa_lock::<SpinCounter>(k, &seqs, iters))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = fiber_switch, apply_latency, single_trustee, fetch_add
}
criterion_main!(benches);
