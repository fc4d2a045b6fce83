//! End-to-end tests of delegation: apply, apply_then, apply_with, launch, large values,
//! ordering, many trusts, stress.

use skein::{Latch, Runtime, Trust};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Fibers spawned on other workers, and closures sent to other trustees, capture nothing
/// (they may run on another rank), and a handle reaches another rank only inside a serialized
/// message (`skein::codec`, `docs/rack-mode.md` §5.2 item 6): a test publishes the handles
/// they need in a static of its own, which the fake ranks of a loopback split share (one
/// process).
fn take<T: Clone>(board: &Mutex<Option<T>>) -> T {
    board.lock().unwrap().clone().expect("handles published before use")
}

fn rt(w: usize) -> Runtime {
    Runtime::builder().workers(w).fibers_per_worker(4).build().unwrap()
}

#[test]
fn design_example() {
    let r = rt(2)
        .run(|| {
            let ct = skein::local_trustee().entrust(17);
            let ct2 = ct.clone();
            let h = skein::spawn(move || ct2.apply((), |c, ()| *c += 1));
            ct.apply((), |c, ()| *c += 1);
            h.join();
            ct.apply_then((), |c, ()| *c, |v| assert_eq!(v, 19));
            ct.apply_with((1, "x".to_string()), |c, (k, s): (u32, String)| {
                *c += k as i32 + s.len() as i32
            });
            ct.apply((), |c, ()| *c)
        })
        .unwrap();
    assert_eq!(r, 21);
}

#[test]
fn remote_and_local_apply_with_many_fibers() {
    for w in 1..=3 {
        static TS: Mutex<Option<Arc<Vec<Trust<u64>>>>> = Mutex::new(None);
        let total = rt(w)
            .run(move || {
                let ts: Vec<Trust<u64>> =
                    (0..w).map(|i| skein::trustee(i).entrust_new(0u64, |x| x)).collect();
                *TS.lock().unwrap() = Some(Arc::new(ts));
                let hs: Vec<_> = (0..4 * w)
                    .map(|f| {
                        skein::spawn_on(f % w, (), |()| {
                            let ts = take(&TS);
                            for i in 0..200 {
                                ts[i % ts.len()].apply((), |c, ()| *c += 1);
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join());
                let ts = TS.lock().unwrap().take().unwrap();
                ts.iter().map(|t| t.apply((), |c, ()| *c)).sum::<u64>()
            })
            .unwrap();
        assert_eq!(total, 4 * w as u64 * 200);
    }
}

/// Many fibers on every worker issue many apply_then to many trusts; every (fiber, trust) pair
/// checks that its requests were applied in issue order; final counts are exact.
#[test]
fn stress_apply_then_order_and_counts() {
    const FIBERS: usize = 8; // per worker
    const TRUSTS: usize = 16;
    const OPS: usize = if cfg!(debug_assertions) { 4_000 } else { 40_000 };
    // The trusts, and the count of completions run (continuations run on their client).
    type Trusts = Arc<Vec<Trust<Vec<u64>>>>;
    static TS: Mutex<Option<Trusts>> = Mutex::new(None);
    static DONE: AtomicU64 = AtomicU64::new(0);
    for w in [1usize, 2, 4] {
        DONE.store(0, Relaxed);
        let sums = rt(w)
            .run(move || {
                // Each trust records, per fiber, the last sequence number it saw.
                let ts: Vec<Trust<Vec<u64>>> = (0..TRUSTS)
                    .map(|i| skein::trustee(i % w).entrust_new(FIBERS * w, |n| vec![0u64; n]))
                    .collect();
                *TS.lock().unwrap() = Some(Arc::new(ts));
                let mut hs = Vec::new();
                for f in 0..FIBERS * w {
                    hs.push(skein::spawn_on(f % w, f, |f| {
                        let ts = take(&TS);
                        let mut seq = [0u64; TRUSTS];
                        for i in 0..OPS {
                            let k = (i * 7 + f) % TRUSTS;
                            seq[k] += 1;
                            ts[k].apply_then(
                                (f, seq[k]),
                                |v, (f, s)| {
                                    assert_eq!(v[f] + 1, s, "order violated");
                                    v[f] = s;
                                },
                                |()| {
                                    DONE.fetch_add(1, Relaxed);
                                },
                            );
                        }
                    }));
                }
                hs.into_iter().for_each(|h| h.join());
                skein::wait_quiescent();
                let ts = TS.lock().unwrap().take().unwrap();
                ts.iter().map(|t| t.apply((), |v, ()| v.iter().sum::<u64>())).sum::<u64>()
            })
            .unwrap();
        let expect = (FIBERS * w * OPS) as u64;
        assert_eq!(DONE.load(Relaxed), expect);
        assert_eq!(sums, expect, "workers={w}");
    }
}

/// Four workers, so that trustee 1 is another worker of the caller's rank also in a loopback
/// split into 2 ranks (`apply_local` and `apply_then_local` refuse a trustee of another rank).
#[test]
fn large_arguments_and_results() {
    rt(4)
        .run(|| {
            let t = skein::trustee(1).entrust_new(0u64, |x| x);
            // Captured environment far bigger than a slot (boxed record).
            let big = [3u64; 1000];
            let r = t.apply_local(move |c| {
                *c += big.iter().sum::<u64>();
                [*c; 600] // result bigger than a slot
            });
            assert!(r.iter().all(|&x| x == 3000));
            // Many medium results in one batch must still fit (batch sized by results).
            let mut hs = Vec::new();
            for i in 0..20u64 {
                let t = t.clone();
                hs.push(skein::spawn_local_on(0, move || t.apply(i, |_, i| [i; 30])));
            }
            for (i, h) in hs.into_iter().enumerate() {
                assert_eq!(h.join(), [i as u64; 30]);
            }
            // Heap arguments through the codec.
            let v: Vec<u32> = (0..10_000).collect();
            let s = t.apply_with(v, |_, v: Vec<u32>| v.iter().map(|&x| x as u64).sum::<u64>());
            assert_eq!(s, 49_995_000);
            // apply_then with a big result.
            let ok = Arc::new(AtomicU64::new(0));
            let ok2 = ok.clone();
            t.apply_then_local(
                |_| vec![7u8; 100_000],
                move |v| {
                    ok2.store(v.len() as u64, Relaxed);
                },
            );
            skein::wait_quiescent();
            assert_eq!(ok.load(Relaxed), 100_000);
        })
        .unwrap();
}

#[test]
fn many_trusts() {
    let n: usize = if cfg!(debug_assertions) { 100_000 } else { 1_000_000 };
    // Built by `entrust_new` on its trustee (which may be on another rank): the drop count is a
    // static (only this test uses it).
    static DROPS: AtomicU64 = AtomicU64::new(0);
    struct D(u32);
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Relaxed);
        }
    }
    let sum = rt(2)
        .run(move || {
            let ts: Vec<Trust<D>> =
                (0..n).map(|i| skein::trustee(i % 2).entrust_new(i as u32, D)).collect();
            let acc = std::rc::Rc::new(std::cell::Cell::new(0u64));
            for t in &ts {
                let a = acc.clone();
                t.apply_then((), |d, ()| d.0 as u64, move |v| a.set(a.get() + v));
            }
            skein::wait_quiescent();
            drop(ts);
            acc.get()
        })
        .unwrap();
    assert_eq!(sum, (n as u64 - 1) * n as u64 / 2);
    assert_eq!(DROPS.load(Relaxed), n as u64);
}

#[test]
fn nested_apply_then_in_delegated_context() {
    let hits = Arc::new(AtomicU64::new(0));
    let h2 = hits.clone();
    rt(2)
        .run(move || {
            let a = skein::trustee(0).entrust_new(0u64, |x| x);
            let b = skein::trustee(1).entrust_new(0u64, |x| x);
            for _ in 0..100 {
                let b2 = b.clone();
                let h = h2.clone();
                a.apply_then_local(
                    move |x| {
                        *x += 1;
                        assert!(skein::in_delegated_context());
                        // From delegated context: a request to another trustee...
                        let h = h.clone();
                        b2.apply_then(
                            (),
                            |y, ()| *y += 1,
                            move |()| {
                                h.fetch_add(1, Relaxed);
                            },
                        );
                        *x
                    },
                    |_| {},
                );
            }
            skein::wait_quiescent();
            assert_eq!(a.apply((), |x, ()| *x), 100);
            assert_eq!(b.apply((), |y, ()| *y), 100);
        })
        .unwrap();
    assert_eq!(hits.load(Relaxed), 100);
}

#[test]
fn apply_then_to_own_property_from_its_closure() {
    rt(1)
        .run(|| {
            let a = skein::local_trustee().entrust_new(0u64, |x| x);
            let a2 = a.clone();
            a.apply_then_local(
                move |x| {
                    *x += 1;
                    // Re-entrant request on the same property: queued, not run inline.
                    a2.apply_then((), |x, ()| *x *= 10, |()| {});
                },
                |()| {},
            );
            skein::wait_quiescent();
            assert_eq!(a.apply((), |x, ()| *x), 10);
        })
        .unwrap();
}

#[test]
fn launch_blocks_on_other_trustee() {
    rt(2)
        .run(|| {
            // The launched closure captures nothing (its trustee may be on another rank): it
            // finds the counter's handle here.
            static COUNTER: Mutex<Option<Trust<u64>>> = Mutex::new(None);
            let counter = skein::trustee(0).entrust_new(5u64, |x| x);
            *COUNTER.lock().unwrap() = Some(counter.clone());
            let l = skein::trustee(1).entrust_new((), |()| Latch::new(Vec::<u64>::new()));
            let mut hs = Vec::new();
            for i in 0..10u64 {
                let l = l.clone();
                hs.push(skein::spawn(move || {
                    l.launch(i, |v, i| {
                        assert_eq!(skein::current_worker(), 1);
                        let x = take(&COUNTER).apply(i, |c, i| {
                            *c += i;
                            *c
                        });
                        skein::yield_now();
                        v.push(x);
                        v.len()
                    })
                }));
            }
            let mut lens: Vec<usize> = hs.into_iter().map(|h| h.join()).collect();
            lens.sort();
            assert_eq!(lens, (1..=10).collect::<Vec<_>>());
            assert_eq!(counter.apply((), |c, ()| *c), 5 + 45);
            // A plain apply sees the latch unlocked afterwards.
            assert_eq!(l.apply((), |l, ()| l.get_mut().map_or(usize::MAX, |v| v.len())), 10);
            *COUNTER.lock().unwrap() = None;
        })
        .unwrap();
}

#[test]
fn blocking_in_delegated_context_panics_with_fix() {
    // The closure captures nothing (trustee 1 may be on another rank): it finds b here.
    static B: Mutex<Option<Trust<u64>>> = Mutex::new(None);
    let e = rt(2)
        .run(|| {
            let a = skein::trustee(1).entrust_new(0u64, |x| x);
            *B.lock().unwrap() = Some(skein::trustee(0).entrust_new(0u64, |x| x));
            a.apply((), |_, ()| take(&B).apply((), |y, ()| *y))
        })
        .unwrap_err();
    *B.lock().unwrap() = None;
    let msg = e.to_string();
    assert!(msg.contains("apply_then") && msg.contains("launch"), "{msg}");
}

#[test]
fn stats_count_requests() {
    let r = rt(2);
    r.run(|| {
        let t = skein::trustee(1).entrust_new(0u64, |x| x);
        for _ in 0..1000 {
            t.apply_then((), |c, ()| *c += 1, |()| {});
        }
        skein::wait_quiescent();
        let s = skein::stats();
        assert_eq!(s.workers.len(), 2);
        assert!(s.workers[1].requests_served >= 1000);
    })
    .unwrap();
    let s = r.stats();
    assert!(s.workers[1].requests_served >= 1000);
    assert!(s.workers[1].batches_served >= 1);
    assert!(s.workers[1].mean_batch() >= 1.0);
    assert!(s.workers[0].requests_sent >= 1000);
    assert!(s.total().fibers_run >= 1);
}

#[test]
fn runtime_can_run_twice() {
    let r = rt(2);
    for i in 0..3u64 {
        let v = r
            .run(move || skein::trustee(1).entrust_new(i, |x| x).apply((), |x, ()| *x * 2))
            .unwrap();
        assert_eq!(v, 2 * i);
    }
}
