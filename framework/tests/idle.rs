//! The idle policy: a worker with nothing due backs off to sleeping instead of burning a core.
//!
//! No timed assertion: the bound below is two orders of magnitude above what a sleeping worker
//! does in the same time, and far below what a spinning or yielding one does.

use skein::Runtime;

#[test]
fn idle_worker_sleeps_instead_of_spinning() {
    let rt = Runtime::builder().workers(2).worker_threads(2).build().unwrap();
    rt.run(|| {
        // Worker 1 has nothing to do: no fibers, no requests for it, none of its own in flight.
        // Block worker 0's thread (not just the fiber) for a while.
        let t = skein::trustee(1).entrust_new(0u32, |x| x);
        t.apply((), |c, ()| *c += 1);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(t.apply((), |c, ()| *c), 1);
    })
    .unwrap();
    let idle = rt.stats().workers[1].idle_polls;
    // Spinning/yielding for 300 ms would be millions of polls; sleeping (25-400 µs per poll
    // after about 2,100 spins and yields) is a few thousand.
    assert!(idle < 200_000, "worker 1 polled {idle} times while idle: it did not sleep");
}

#[test]
fn a_worker_waiting_for_a_response_parks_until_it_arrives() {
    // Worker 0's main fiber waits 300 ms for worker 1's answer. Yielding all that time would
    // be hundreds of thousands of polls that take the core from whoever has work (with more
    // workers than cores, the very worker that would answer); a parked worker polls a few
    // thousand times, then blocks until the response's publication wakes it. (One process:
    // across ranks, fake or real, a worker waits in short timed steps instead.)
    let rt = Runtime::builder().workers(2).worker_threads(2).loopback_ranks(1).build().unwrap();
    let got = rt.run(|| {
        let t = skein::trustee(1).entrust_new(0u32, |x| x);
        t.apply((), |c, ()| {
            std::thread::sleep(std::time::Duration::from_millis(300));
            *c += 1;
            *c
        })
    });
    assert_eq!(got.unwrap(), 1);
    let w0 = &rt.stats().workers[0];
    assert!(w0.parks >= 1, "worker 0 never parked while its response was due: {w0:?}");
    assert!(w0.idle_polls < 100_000, "worker 0 polled {} times while waiting", w0.idle_polls);
}

#[test]
fn many_more_workers_than_cores_finish_with_exact_counts() {
    // 16 workers (on a 2-core machine: 8 per core), every one sending to every other through
    // fibers that wait for their answers: every request is served exactly once and the run
    // ends, however the waiting workers park and wake.
    let rt = Runtime::builder().workers(16).build().unwrap();
    let (total, senders) = rt
        .run(|| {
            let n = skein::num_workers();
            let counters: Vec<_> =
                (0..n).map(|w| skein::trustee(w).entrust_new(0u64, |x| x)).collect();
            let counters = std::sync::Arc::new(counters);
            // The fibers run on this rank's workers (all 16 in one process; a split run's
            // fake ranks reach the other ranks' counters over the loopback transport).
            let first = skein::current_worker();
            let senders = skein::local_workers();
            for w in first..first + senders {
                let cs = counters.clone();
                skein::spawn_local_on(w, move || {
                    for k in 0..200 {
                        let t = &cs[(w + 1 + k) % cs.len()];
                        t.apply(1u64, |c, d| *c += d);
                    }
                });
            }
            skein::wait_quiescent();
            (counters.iter().map(|t| t.apply((), |c, ()| *c)).sum::<u64>(), senders as u64)
        })
        .unwrap();
    assert_eq!(total, senders * 200);
}

#[test]
fn with_more_workers_than_cores_idle_workers_block_at_once() {
    // Twice as many workers as this process may use cores: a waiting worker neither spins nor
    // yields (it would take the core from the worker it waits for), it blocks and is woken.
    // The results stay exact; the counters say how the workers waited.
    if std::env::var_os("SKEIN_OVERSUBSCRIBED").is_some() {
        return; // the environment decides instead of the builder
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = 2 * cores;
    // Unsplit (`spawn_local_on` is local only; CI also runs this suite as fake ranks), and a
    // thread per worker (shared threads would not outnumber the cores).
    let rt = Runtime::builder()
        .workers(n)
        .worker_threads(n)
        .loopback_ranks(1)
        .crowded_waits(true)
        .build()
        .unwrap();
    let total = rt
        .run(|| {
            let n = skein::num_workers();
            let counters: Vec<_> =
                (0..n).map(|w| skein::trustee(w).entrust_new(0u64, |x| x)).collect();
            let counters = std::sync::Arc::new(counters);
            for w in 0..n {
                let cs = counters.clone();
                skein::spawn_local_on(w, move || {
                    for k in 0..100 {
                        cs[(w + 1 + k) % cs.len()].apply(1u64, |c, d| *c += d);
                    }
                });
            }
            skein::wait_quiescent();
            counters.iter().map(|t| t.apply((), |c, ()| *c)).sum::<u64>()
        })
        .unwrap();
    assert_eq!(total, n as u64 * 100);
    let s = rt.stats();
    let yields: u64 = s.workers.iter().map(|w| w.yields).sum();
    let parks: u64 = s.workers.iter().map(|w| w.parks).sum();
    assert_eq!(yields, 0, "a worker yielded with {n} workers on {cores} cores");
    assert!(parks > 0, "no worker blocked with {n} workers on {cores} cores");
    if cfg!(target_os = "linux") {
        let switches: u64 = s.workers.iter().map(|w| w.switches_voluntary).sum();
        assert!(switches > 0, "{parks} parks, yet no voluntary context switch counted");
    }
}

/// How many times worker 0 of a run of `rt` yielded, in a run where it waited 100 ms for a
/// response.
fn worker_0_yields_waiting_for_a_slow_response(rt: Runtime) -> u64 {
    rt.run(|| {
        let t = skein::trustee(1).entrust_new(0u32, |x| x);
        t.apply((), |c, ()| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            *c += 1;
        });
    })
    .unwrap();
    let w0 = &rt.stats().workers[0];
    assert!(w0.parks > 0 || w0.yields > 0, "worker 0 neither yielded nor parked: {w0:?}");
    w0.yields
}

#[test]
fn with_fewer_workers_than_cores_a_waiting_worker_still_spins_first() {
    // One worker per core at most: even with crowded waits asked for, the usual policy (spin,
    // yield, then park) is kept; a worker waiting 100 ms for a response yields before it
    // parks.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 || std::env::var_os("SKEIN_OVERSUBSCRIBED").is_some() {
        return;
    }
    let rt = Runtime::builder().workers(2).worker_threads(2).crowded_waits(true).build().unwrap();
    // (How many times depends on the adaptive budget: on a loaded machine earlier waits
    // shrink it, and the 100 ms wait yields fewer than its full 256 times.)
    assert!(worker_0_yields_waiting_for_a_slow_response(rt) > 0, "worker 0 never yielded");
}

#[test]
fn by_default_crowded_workers_still_spin_and_yield_first() {
    // Crowded waits are opt-in (`Builder::crowded_waits`): with twice as many workers as
    // cores and the default settings, a worker waiting for a response yields before it
    // parks, as with fewer workers than cores ...
    if std::env::var_os("SKEIN_OVERSUBSCRIBED").is_some() {
        return; // the environment decides instead of the default
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Unsplit: a split run's fake ranks never park (CI also runs this suite as fake ranks).
    // A thread per worker: shared threads would not outnumber the cores.
    let n = 2 * cores;
    let rt = Runtime::builder().workers(n).worker_threads(n).loopback_ranks(1).build().unwrap();
    // ... but briefly: with more workers than cores a wait spins 64 passes at most and
    // yields 8 times at most before it parks (`Spin::oversubscribed`), where one worker per
    // core yields 256 times. Worker 0 waits a handful of times in this run.
    let yields = worker_0_yields_waiting_for_a_slow_response(rt);
    assert!(yields > 0, "worker 0 never yielded");
    assert!(yields < 64, "worker 0 yielded {yields} times with more workers than cores");
}

/// A worker that computes for a while has that time on a core counted
/// (`WorkerStats::on_core_ns`, the thread's CPU-time clock) on Linux; the counters are there
/// (0) elsewhere.
#[test]
fn a_worker_that_computes_has_its_time_on_a_core_counted() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let x = rt
        .run(|| {
            let t = skein::trustee(1).entrust_new(1u64, |x| x);
            t.apply((), |x, ()| {
                for i in 0..20_000_000u64 {
                    *x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
                *x
            })
        })
        .unwrap();
    std::hint::black_box(x);
    let s = rt.stats();
    // Summed: where workers share a thread, its times are counted on its first worker.
    let on_core: u64 = s.workers.iter().map(|w| w.on_core_ns).sum();
    if cfg!(target_os = "linux") {
        assert!(on_core > 0, "20 M multiplications, no time on a core: {s:?}");
    } else {
        assert!(s.workers.iter().all(|w| w.on_core_ns == 0 && w.runnable_ns == 0));
    }
}
