//! Workers that share threads (`Builder::worker_threads`, `runtime/worker/looping.rs`): the
//! same results as a thread per worker, the threads counted, and the runtime's waits
//! (responses, joins, quiescence, deadlock) working when the worker waited for runs on the
//! waiting worker's own thread.

use skein::{Builder, Error, Runtime};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A runtime unsplit whatever `SKEIN_LOOPBACK_RANKS` says (CI also runs this suite as fake
/// ranks, which keep a thread per worker; ranks over the rings, which share threads too,
/// are run by `tests/rack.rs` under `SKEIN_WORKER_THREADS=1` in CI).
fn builder() -> Builder {
    Runtime::builder().loopback_ranks(1)
}

/// The name of the thread that runs each worker (a fiber spawned there reads it).
fn thread_of_each_worker(rt: &Runtime) -> Vec<String> {
    rt.run(|| {
        let fibers: Vec<_> = (0..skein::num_workers())
            .map(|w| {
                skein::spawn_on(w, w, |w| {
                    let name = std::thread::current().name().unwrap_or("").to_string();
                    let mut bytes = [0u8; 32];
                    let n = name.len().min(32);
                    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
                    (bytes, u8::from(skein::current_worker() == w))
                })
            })
            .collect();
        fibers
            .into_iter()
            .map(|f| {
                let (bytes, here) = f.join();
                assert_eq!(here, 1, "a fiber spawned on a worker ran elsewhere");
                String::from_utf8_lossy(&bytes).trim_end_matches('\0').to_string()
            })
            .collect()
    })
    .unwrap()
}

#[test]
fn workers_share_the_threads_asked_for() {
    for (workers, threads) in [(8, 1), (8, 3), (5, 2), (4, 4), (3, 8)] {
        let rt = builder().workers(workers).worker_threads(threads).build().unwrap();
        let names = thread_of_each_worker(&rt);
        let distinct: BTreeSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), threads.min(workers), "{workers} workers: {names:?}");
        // The stats count the same threads: each thread's first worker counts its workers.
        let st = rt.stats();
        assert_eq!(st.threads(), threads.min(workers), "{workers} workers: {st:?}");
        let counted: Vec<u64> = st.workers.iter().map(|w| w.thread_workers).collect();
        assert_eq!(counted.iter().sum::<u64>(), workers as u64, "{counted:?}");
        for (i, name) in names.iter().enumerate() {
            let first = i == 0 || names[i - 1] != *name;
            assert_eq!(counted[i] > 0, first, "worker {i}: {counted:?} {names:?}");
        }
        // Consecutive workers share a thread, named after them.
        if threads < workers {
            assert!(names[0].starts_with("skein-workers-0-"), "{names:?}");
            assert_eq!(names[0], names[1], "{names:?}");
        } else {
            assert_eq!(names[0], "skein-worker-0");
        }
    }
}

#[test]
fn by_default_workers_share_threads_only_beyond_the_cores() {
    if std::env::var_os("SKEIN_WORKER_THREADS").is_some() {
        return; // the environment decides
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for workers in [cores, 2 * cores + 1] {
        let rt = builder().workers(workers).build().unwrap();
        let distinct: BTreeSet<_> = thread_of_each_worker(&rt).into_iter().collect();
        assert_eq!(distinct.len(), workers.min(cores), "{workers} workers on {cores} cores");
    }
}

#[test]
fn shared_threads_give_exact_counts_and_wait_for_each_other() {
    // Every worker sends to every other, through blocking `apply` and through `apply_then`,
    // and waits in quiescence; with 1, 2 and 3 threads for 6 workers, and a thread each.
    for threads in [1, 2, 3, 6] {
        let rt = builder().workers(6).worker_threads(threads).build().unwrap();
        for _ in 0..3 {
            let (total, echoed) = rt
                .run(|| {
                    let n = skein::num_workers();
                    let counters: Vec<_> =
                        (0..n).map(|w| skein::trustee(w).entrust_new(0u64, |x| x)).collect();
                    let counters = std::sync::Arc::new(counters);
                    let mut joins = Vec::new();
                    for w in 0..n {
                        let cs = counters.clone();
                        joins.push(skein::spawn_local_on(w, move || {
                            let mut echoed = 0u64;
                            for k in 0..200 {
                                let t = &cs[(w + 1 + k) % cs.len()];
                                if k % 2 == 0 {
                                    echoed += t.apply(1u64, |c, d| {
                                        *c += d;
                                        d
                                    });
                                } else {
                                    t.apply_then(1u64, |c, d| *c += d, |()| {});
                                }
                            }
                            echoed
                        }));
                    }
                    skein::wait_quiescent();
                    let echoed: u64 = joins.into_iter().map(|j| j.join()).sum();
                    let total = counters.iter().map(|t| t.apply((), |c, ()| *c)).sum::<u64>();
                    (total, echoed)
                })
                .unwrap();
            assert_eq!(total, 6 * 200, "{threads} threads");
            assert_eq!(echoed, 6 * 100, "{threads} threads");
        }
    }
}

#[test]
fn a_held_thread_leaves_the_other_threads_running() {
    // Worker 3 (on the second of two threads) holds its thread in a closure until worker 0
    // (on the first) has had 50 answers from worker 1 (the first thread too): it can only
    // see them if the first thread goes on while the second is held. (It gives up after
    // 10 s, far beyond the milliseconds the answers take, so that a regression fails
    // instead of hanging.)
    static ANSWERED: AtomicU32 = AtomicU32::new(0);
    ANSWERED.store(0, Ordering::SeqCst);
    let rt = builder().workers(4).worker_threads(2).build().unwrap();
    let got = rt
        .run(|| {
            let held = skein::trustee(3).entrust_new(0u32, |x| x);
            let near = skein::trustee(1).entrust_new(0u32, |x| x);
            let side = skein::spawn_local_on(0, move || {
                for _ in 0..50 {
                    near.apply(1u32, |c, d| *c += d);
                    ANSWERED.fetch_add(1, Ordering::SeqCst);
                }
                near.apply((), |c, ()| *c)
            });
            let seen = held.apply((), |_, ()| {
                let start = Instant::now();
                while ANSWERED.load(Ordering::SeqCst) < 50 && start.elapsed().as_secs() < 10 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                ANSWERED.load(Ordering::SeqCst)
            });
            (seen, side.join())
        })
        .unwrap();
    assert_eq!(got, (50, 50), "the first thread stood still while the second was held");
}

#[test]
fn a_deadlock_is_reported_with_shared_threads() {
    // Main locks a latch it holds already, after work on every worker: quiescence with a
    // parked fiber, detected by worker 0 on the thread it shares.
    let rt = builder().workers(4).worker_threads(1).build().unwrap();
    let r = rt.run(|| {
        let t = skein::trustee(3).entrust_new(0u32, |x| x);
        t.apply_then(1u32, |c, d| *c += d, |()| {});
        let latch = skein::Latch::new(());
        let _g = latch.lock();
        let _g2 = latch.lock(); // waits for itself
    });
    assert!(matches!(r, Err(Error::Deadlock { main_finished: false, .. })), "{r:?}");
    // The runtime serves the next run.
    assert_eq!(rt.run(|| 6 * 7).unwrap(), 42);
}
