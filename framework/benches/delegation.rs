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
//!
//! `skein bench micro` (the `skein` CLI, crate `skein-jobs`) takes one quick reading of
//! `yield_now`, the remote round trip and the single trustee for reports; these are the
//! statistical versions, for comparing two builds. The fetch-add workload (delegation against
//! locks, uniform and Zipf picks over K objects) is not here: it lives in
//! `skein bench fetch-add`, which has the locks, the distributions and the reports.
//!
//! Every measurement uses `iter_custom`: the runtime starts, the inputs are built, and only
//! then the clock runs for `iters` operations, so thread start-up and input construction are
//! never timed. On a shared 2-core machine compare ratios taken in one run, not absolute
//! values across runs.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
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
                        black_box(t.apply((), |c, ()| {
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
                        t.apply_then((), |c, ()| *c += 1, |()| {});
                    }
                    skein::wait_quiescent();
                    let d = t0.elapsed();
                    (d, t.apply((), |c, ()| *c))
                })
                .expect("run");
            assert_eq!(total, iters);
            d
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = fiber_switch, apply_latency, single_trustee
}
criterion_main!(benches);
