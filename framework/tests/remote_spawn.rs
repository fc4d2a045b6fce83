//! `spawn_on` across the fake ranks of a loopback split (`Builder::loopback_ranks`): `Spawn`
//! and `Joined` control records (`docs/rack-mode.md` §4.4) carry the fiber's code id, its
//! argument and its result or panic.

use skein::Runtime;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

fn runtime(workers: usize, ranks: usize) -> Runtime {
    Runtime::builder().workers(workers).loopback_ranks(ranks).build().expect("runtime")
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "<non-string>".into()
    }
}

/// From a fiber on every worker, `spawn_on` every worker; each fiber answers with where it
/// ran and a function of its argument.
fn every_to_every(workers: usize, ranks: usize) {
    let n = workers;
    let got = runtime(workers, ranks)
        .run(move || {
            let outer: Vec<_> = (0..n)
                .map(|from| {
                    skein::spawn_on(from, n as u64, |n| {
                        let me = skein::current_worker() as u64;
                        let hs: Vec<_> = (0..n)
                            .map(|to| {
                                skein::spawn_on(to as usize, (me, to), |(me, to)| {
                                    (
                                        skein::current_worker() as u64,
                                        skein::rank() as u64,
                                        me * 1000 + to * 7,
                                    )
                                })
                            })
                            .collect();
                        let mut sum = 0u64;
                        for (to, h) in hs.into_iter().enumerate() {
                            let (g, r, v) = h.join();
                            assert_eq!(g, to as u64, "ran on the wrong worker");
                            assert_eq!(r, to as u64 / (n / skein::ranks() as u64), "wrong rank");
                            assert_eq!(v, me * 1000 + to as u64 * 7);
                            sum += v;
                        }
                        (me, sum)
                    })
                })
                .collect();
            outer.into_iter().map(|h| h.join()).collect::<Vec<_>>()
        })
        .unwrap();
    let n = n as u64;
    let want: Vec<(u64, u64)> =
        (0..n).map(|me| (me, (0..n).map(|to| me * 1000 + to * 7).sum())).collect();
    assert_eq!(got, want);
}

#[test]
fn spawn_on_every_worker_from_every_worker() {
    every_to_every(4, 2);
    every_to_every(6, 3);
    every_to_every(3, 3);
}

#[test]
fn a_remote_spawn_panic_is_resumed_in_join_naming_rank_and_worker() {
    let msg = runtime(4, 2)
        .run(|| {
            let h = skein::spawn_on(3, 7u32, |k| -> u64 {
                if k == 7 {
                    panic!("seven is refused");
                }
                1
            });
            let p = catch_unwind(AssertUnwindSafe(|| h.join())).expect_err("join did not panic");
            assert!(p.downcast_ref::<String>().is_some(), "not a String payload");
            // The worker goes on: a second spawn there works.
            assert_eq!(skein::spawn_on(3, 1u32, |k| k + 1).join(), 2);
            panic_text(&*p)
        })
        .unwrap();
    assert_eq!(msg, "rank 1 worker 3: seven is refused");
}

static DONE: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_dropped_join_handle_is_safe() {
    DONE.store(0, SeqCst);
    runtime(4, 2)
        .run(|| {
            for g in 0..4 {
                drop(skein::spawn_on(g, (), |()| {
                    DONE.fetch_add(1, SeqCst);
                    skein::current_worker() as u64
                }));
            }
            // One finished before its handle is dropped, too.
            let h = skein::spawn_on(2, (), |()| 5u8);
            while !h.is_finished() {
                skein::yield_now();
            }
            drop(h);
        })
        .unwrap();
    assert_eq!(DONE.load(SeqCst), 4);
    // A detached remote fiber's panic fails the run, as a local one does.
    let err = runtime(4, 2)
        .run(|| drop(skein::spawn_on(3, (), |()| -> u8 { panic!("detached and lost") })))
        .unwrap_err()
        .to_string();
    assert!(err.contains("rank 1 worker 3: detached and lost"), "{err}");
}

static STARTED: AtomicUsize = AtomicUsize::new(0);
static FINISHED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn wait_quiescent_waits_for_remote_spawns_in_flight() {
    STARTED.store(0, SeqCst);
    FINISHED.store(0, SeqCst);
    let seen = runtime(6, 3)
        .run(|| {
            for g in 0..6 {
                for k in 0..4u32 {
                    drop(skein::spawn_on(g, k, |k| {
                        STARTED.fetch_add(1, SeqCst);
                        // Some work that crosses ranks again before finishing.
                        let far = (skein::current_worker() + 3) % skein::num_workers();
                        let v = skein::spawn_on(far, k, |k| k * 2).join();
                        for _ in 0..k {
                            skein::yield_now();
                        }
                        FINISHED.fetch_add(1, SeqCst);
                        v
                    }));
                }
            }
            skein::wait_quiescent();
            (STARTED.load(SeqCst), FINISHED.load(SeqCst))
        })
        .unwrap();
    assert_eq!(seen, (24, 24));
}

#[test]
fn nested_remote_spawns_go_back_and_forth() {
    // Depth-first ping-pong between the fake ranks: each level spawns the next on the other
    // rank and adds its answer.
    fn level(d: u32) -> u64 {
        let me = skein::current_worker();
        if d == 0 {
            return me as u64;
        }
        let next = (me + skein::local_workers()) % skein::num_workers();
        me as u64 + skein::spawn_on(next, d - 1, level).join() * 10
    }
    let r = runtime(4, 2).run(|| skein::spawn_on(2, 5u32, level).join()).unwrap();
    // Workers 2, 0, 2, 0, 2, 0 from the outside in.
    assert_eq!(r, 20202);
    let r = runtime(3, 3)
        .run(|| {
            fn around(d: u32) -> u64 {
                let me = skein::current_worker();
                if d == 0 {
                    return me as u64;
                }
                me as u64 + 10 * skein::spawn_on((me + 1) % 3, d - 1, around).join()
            }
            skein::spawn_on(1, 4u32, around).join()
        })
        .unwrap();
    // Workers 1, 2, 0, 1, 2.
    assert_eq!(r, 21021);
}

#[test]
fn launch_on_a_latch_of_another_fake_rank() {
    let r = runtime(4, 2)
        .run(|| {
            let l = skein::trustee(3).entrust_new((), |()| skein::Latch::new(0u64));
            // From every worker at once: the launches run one at a time on the latch, each
            // yielding while it holds it (a plain apply could not), so the count is exact.
            let hs: Vec<_> = (0..4)
                .map(|g| {
                    let l = l.clone();
                    skein::spawn_local_on(g % 2, move || {
                        (0..5u64)
                            .map(|k| {
                                l.launch(k, |x, k| {
                                    let before = *x;
                                    skein::yield_now();
                                    *x = before + k;
                                    (skein::current_worker() as u64, skein::rank() as u64)
                                })
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let places: Vec<_> = hs.into_iter().flat_map(|h| h.join()).collect();
            let total = l.launch((), |x, ()| *x);
            // A panic in a remote launch is resumed here, and unlocks the latch.
            let p = catch_unwind(AssertUnwindSafe(|| {
                l.launch(9u8, |_, k| -> u8 { panic!("launch {k} refused") })
            }))
            .expect_err("launch did not panic");
            (places, total, panic_text(&*p), l.launch((), |x, ()| *x + 1))
        })
        .unwrap();
    assert!(r.0.iter().all(|&p| p == (3, 1)), "{:?}", r.0);
    assert_eq!(r.1, 4 * (0..5).sum::<u64>());
    assert_eq!(r.2, "rank 1 worker 3: launch 9 refused");
    assert_eq!(r.3, r.1 + 1);
}

#[test]
fn entrust_new_builds_the_value_on_a_trustee_of_another_fake_rank() {
    let r = runtime(6, 3)
        .run(|| {
            let built: Vec<u64> = (0..6)
                .map(|g| {
                    let t = skein::trustee(g).entrust_new(g as u64 * 10, |k| {
                        (skein::current_worker() as u64, k, vec![k; 3])
                    });
                    let (at, k, v) = t.apply((), |(at, k, v), ()| (*at, *k, v.iter().sum::<u64>()));
                    assert_eq!((k, v), (g as u64 * 10, g as u64 * 30));
                    at
                })
                .collect();
            // A panic while building is resumed here, naming where it ran.
            let p = catch_unwind(AssertUnwindSafe(|| {
                skein::trustee(5).entrust_new((), |()| -> u8 { panic!("no value") })
            }))
            .expect_err("entrust_new did not panic");
            (built, panic_text(&*p))
        })
        .unwrap();
    // Workers 0 and 1 are on the calling fake rank: built there too.
    assert_eq!(r.0, vec![0, 0, 2, 3, 4, 5]);
    assert_eq!(r.1, "rank 2 worker 5: no value");
}
