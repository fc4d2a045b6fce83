//! `TrustArray`: values spread over the trustees, addressed by index.

use skein::{Runtime, TrustArray};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

fn rt(w: usize) -> Runtime {
    Runtime::builder().workers(w).fibers_per_worker(4).build().unwrap()
}

/// Every fiber of every worker sends increments (tagged with the fiber and its sequence
/// number) to every value; the counts are exact, each value sits on trustee `i % n`, and the
/// requests of one fiber to one value arrive in order. 1 to 4 workers: the index is split by
/// mask and shift for powers of two, by division otherwise.
#[test]
fn counts_placement_and_order_for_any_worker_count() {
    /// Each value: (its trustee as seen when a request runs, count, last seq per fiber).
    type Value = (usize, u64, Vec<u64>);
    // The fibers capture nothing (they may be on other ranks): they find the array here (the
    // fake ranks of a loopback split share the process). Handing it over inside `apply_with`
    // works as well, on any rank: `an_array_received_inside_apply_with_reaches_every_value`.
    static ARRAY: Mutex<Option<TrustArray<Value>>> = Mutex::new(None);
    const LEN: usize = 37;
    const ROUNDS: u64 = 50;
    for w in 1..=4usize {
        let (len, fibers, rounds) = (LEN, 3usize, ROUNDS);
        let (counts, placed) = rt(w)
            .run(move || {
                let a = TrustArray::new(len, w * fibers, |n, _| (usize::MAX, 0u64, vec![0u64; n]));
                assert_eq!((a.len(), a.is_empty()), (len, false));
                *ARRAY.lock().unwrap() = Some(a.clone());
                let hs: Vec<_> = (0..w * fibers)
                    .map(|f| {
                        skein::spawn_on(f % w, f, |f| {
                            let a = ARRAY.lock().unwrap().clone().unwrap();
                            for r in 1..=ROUNDS {
                                for i in 0..LEN {
                                    a.apply_then(
                                        i,
                                        (f, r),
                                        |(at, c, last), (f, r)| {
                                            assert_eq!(last[f] + 1, r, "order of fiber {f}");
                                            last[f] = r;
                                            *at = skein::local_trustee().worker();
                                            *c += 1;
                                        },
                                        |()| {},
                                    );
                                }
                            }
                        })
                    })
                    .collect();
                hs.into_iter().for_each(|h| h.join());
                *ARRAY.lock().unwrap() = None;
                skein::wait_quiescent();
                let counts: Vec<u64> = (0..len).map(|i| a.apply(i, (), |v, ()| v.1)).collect();
                let placed: Vec<(usize, usize)> = (0..len)
                    .map(|i| (a.apply(i, (), |v, ()| v.0), a.trustee_of(i).worker()))
                    .collect();
                (counts, placed)
            })
            .unwrap();
        assert!(counts.iter().all(|&c| c == rounds * (w * fibers) as u64), "{w} workers");
        for (i, (ran_on, owner)) in placed.into_iter().enumerate() {
            assert_eq!((ran_on, owner), (i % w, i % w), "value {i} with {w} workers");
        }
    }
}

/// Values start as `init(i)`; results come back through `apply` and `apply_then`, also from
/// delegated context (a continuation issuing to the array).
#[test]
fn init_results_and_nested_requests() {
    let got = rt(3)
        .run(|| {
            let a = TrustArray::new(10, 100u64, |k, i| i as u64 * k);
            assert_eq!(a.apply(7, (), |v, ()| *v), 700);
            let seen = Arc::new(AtomicU64::new(0));
            let (a2, s2) = (a.clone(), seen.clone());
            a.apply_then(
                1,
                1u64,
                |v, k| *v + k,
                move |x| {
                    // In a continuation (delegated context): issue again, to another value.
                    a2.apply_then(2, x, |v, x| *v + x, move |y| s2.store(y, Relaxed));
                },
            );
            skein::wait_quiescent();
            seen.load(Relaxed)
        })
        .unwrap();
    assert_eq!(got, 200 + 101);
}

/// An array handed to every worker inside `apply_with` (a latch each) reaches every value
/// through the handles it received: element requests, through proxies for the parts of other
/// fake ranks in a loopback split (6 workers: split in 2 and 3 fake ranks by CI). Every value
/// is raised once by each worker's fiber, and dropped exactly once, on its trustee, after the
/// last copy is gone.
#[test]
fn an_array_received_inside_apply_with_reaches_every_value() {
    static DROPPED: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());
    struct V(u64, u64);
    impl Drop for V {
        fn drop(&mut self) {
            DROPPED.lock().unwrap().push((self.0, skein::local_trustee().worker()));
        }
    }
    type Keeper = skein::Latch<Option<TrustArray<V>>>;
    const LEN: u64 = 23;
    for w in [1usize, 2, 6] {
        DROPPED.lock().unwrap().clear();
        let (sum, seen) = rt(w)
            .run(move || {
                let n = skein::num_workers();
                let a = TrustArray::new(LEN as usize, 10u64, |b, i| V(i as u64, b + i as u64));
                let keepers: Vec<skein::Trust<Keeper>> = (0..n)
                    .map(|g| skein::trustee(g).entrust_new((), |()| skein::Latch::new(None)))
                    .collect();
                let mut seen = Vec::new();
                for k in &keepers {
                    k.apply_with(a.clone(), |k, a| {
                        if let Some(k) = k.get_mut() {
                            *k = Some(a);
                        }
                    });
                    seen.push(k.launch((), |k, ()| {
                        let a = k.take().expect("the array arrived");
                        for i in 0..a.len() {
                            a.apply_then(i, 1u64, |v, d| v.1 += d, |()| ());
                        }
                        (0..a.len()).map(|i| a.apply(i, (), |v, ()| v.1)).sum::<u64>()
                    }));
                }
                let sum: u64 = (0..LEN as usize).map(|i| a.apply(i, (), |v, ()| v.1)).sum();
                (sum, seen)
            })
            .unwrap();
        let base: u64 = (0..LEN).map(|i| 10 + i).sum();
        assert_eq!(sum, base + LEN * w as u64, "{w} workers");
        // Each fiber saw its own increments after those of the fibers before it.
        assert_eq!(seen, (1..=w as u64).map(|k| base + LEN * k).collect::<Vec<_>>());
        let mut got = DROPPED.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, (0..LEN).map(|i| (i, i as usize % w)).collect::<Vec<_>>(), "{w} workers");
    }
}

/// Each value is dropped exactly once, on its own trustee, after the last clone is gone.
#[test]
fn values_dropped_once_on_their_trustee() {
    // `init` captures nothing, so the log is a static (only this test uses it).
    static LOG: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
    struct D(usize);
    impl Drop for D {
        fn drop(&mut self) {
            let w = skein::local_trustee().worker();
            LOG.lock().unwrap().push((self.0, w));
        }
    }
    rt(3)
        .run(move || {
            let a = TrustArray::new(20, (), |(), i| D(i));
            let b = a.clone();
            a.apply_then(5, (), |d, ()| d.0, |x| assert_eq!(x, 5));
            drop(a);
            skein::wait_quiescent();
            assert!(LOG.lock().unwrap().is_empty(), "a clone is still alive");
            // The fiber on worker 1 captures nothing (it may be on another rank): it takes the
            // last clone from a static and drops it there.
            static LAST: Mutex<Option<TrustArray<D>>> = Mutex::new(None);
            *LAST.lock().unwrap() = Some(b);
            let h = skein::spawn_on(1, (), |()| drop(LAST.lock().unwrap().take()));
            h.join();
        })
        .unwrap();
    let mut got = LOG.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, (0..20).map(|i| (i, i % 3)).collect::<Vec<_>>());
}

#[test]
fn out_of_bounds_and_panics_are_reported() {
    let r = rt(2).run(|| {
        let a = TrustArray::new(3, (), |(), _| 0u8);
        a.apply(3, (), |v, ()| *v)
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("TrustArray index 3 out of bounds (len 3)"), "{e}");

    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let r = rt(2).run(move || {
        let a = TrustArray::new(4, (), |(), _| 0u32);
        a.apply_then(1, (), |_, ()| panic!("value closure fails"), |()| {});
        skein::wait_quiescent();
        // The trustee survived: later requests are still served.
        r2.store(a.apply(1, (), |v, ()| *v as usize + 1), Relaxed);
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("value closure fails"), "{e}");
    assert_eq!(ran.load(Relaxed), 1);

    let r = rt(2).run(|| {
        let a = TrustArray::new(4, (), |(), _| 0u32);
        a.apply(2, (), |_, ()| -> u32 { panic!("blocking closure fails") })
    });
    assert!(r.unwrap_err().to_string().contains("blocking closure fails"));
}

#[test]
fn empty_array_and_outside_a_runtime() {
    rt(2)
        .run(|| {
            let a: TrustArray<u64> = TrustArray::new(0, (), |(), _| unreachable!());
            assert!(a.is_empty());
        })
        .unwrap();
    let e = std::panic::catch_unwind(|| TrustArray::new(1, (), |(), _| 0u8)).unwrap_err();
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("TrustArray::new"), "{msg}");
}
