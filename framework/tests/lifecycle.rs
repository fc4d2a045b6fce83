//! Reference counting, drops on the trustee, panics, deadlock detection.

use skein::{Error, Runtime, Trust};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// The drops of one test's probes, and how many ran on another worker than the owner.
struct Counts {
    drops: AtomicU64,
    wrong: AtomicU64,
}

impl Counts {
    const fn new() -> Counts {
        Counts { drops: AtomicU64::new(0), wrong: AtomicU64::new(0) }
    }
}

/// Counts drops and remembers the worker each drop ran on. Built by `entrust_new` on its
/// trustee (which may be on another rank), so its counts are a static of the test.
struct Probe {
    owner: usize,
    counts: &'static Counts,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.counts.drops.fetch_add(1, Relaxed);
        if skein::current_worker() != self.owner {
            self.counts.wrong.fetch_add(1, Relaxed);
        }
    }
}

/// Fibers spawned on other workers, and closures sent to other trustees, capture nothing (they
/// may run on another rank), and a handle reaches another rank only inside a serialized
/// message (`skein::codec`, `docs/rack-mode.md` §5.2 item 6): a test hands them handles
/// through a static of its own, which the fake ranks of a loopback split share (one process).
fn take<T>(board: &Mutex<Option<T>>) -> T {
    board.lock().unwrap().take().expect("a handle was put there first")
}

#[test]
fn clone_move_drop_interleaving_frees_once_on_trustee() {
    static COUNTS: Counts = Counts::new();
    static MOVED: Mutex<Option<Trust<Probe>>> = Mutex::new(None);
    let rounds = 500u64;
    Runtime::builder()
        .workers(3)
        .build()
        .unwrap()
        .run(move || {
            for i in 0..rounds {
                let owner = (i % 3) as usize;
                let t = skein::trustee(owner)
                    .entrust_new(owner, |owner| Probe { owner, counts: &COUNTS });
                // Clone on A (here, worker 0), move to B, use on both, drop on both in
                // varying orders, with requests possibly still in flight.
                *MOVED.lock().unwrap() = Some(t.clone());
                let b = ((i + 1) % 3) as usize;
                let order = i % 4;
                let h = skein::spawn_on(b, order, |order| {
                    let c = take(&MOVED);
                    c.apply_then((), |_, ()| (), |()| {});
                    if order == 0 {
                        skein::yield_now();
                    }
                    drop(c);
                });
                t.apply_then((), |_, ()| (), |()| {});
                if order < 2 {
                    drop(t);
                    h.join();
                } else {
                    h.join();
                    drop(t);
                }
            }
            skein::wait_quiescent();
            assert_eq!(COUNTS.drops.load(Relaxed), rounds);
        })
        .unwrap();
    assert_eq!(COUNTS.drops.load(Relaxed), rounds);
    assert_eq!(COUNTS.wrong.load(Relaxed), 0);
}

#[test]
fn last_handle_dropped_inside_own_closure() {
    static COUNTS: Counts = Counts::new();
    // Per owner, the last handle, which the closure takes and drops on the trustee.
    static LAST: [Mutex<Option<Trust<Probe>>>; 2] = [Mutex::new(None), Mutex::new(None)];
    Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(move || {
            for (owner, last) in LAST.iter().enumerate() {
                let t = skein::trustee(owner)
                    .entrust_new(owner, |owner| Probe { owner, counts: &COUNTS });
                let t2 = t.clone();
                drop(t);
                *last.lock().unwrap() = Some(t2.clone());
                // The closure owns the last handle and drops it while using the property.
                t2.apply_then(
                    owner,
                    |p, owner| {
                        drop(take(&LAST[owner]));
                        p.owner
                    },
                    |_| {},
                );
                drop(t2);
            }
        })
        .unwrap();
    assert_eq!(COUNTS.drops.load(Relaxed), 2);
    assert_eq!(COUNTS.wrong.load(Relaxed), 0);
}

#[test]
fn trust_outliving_the_run_is_dropped_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Relaxed);
        }
    }
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (t, split): (Trust<D>, bool) =
        rt.run_local(|| (skein::trustee(1).entrust_new((), |()| D), skein::ranks() > 1)).unwrap();
    let t2 = t.clone();
    // Split (`SKEIN_LOOPBACK_RANKS`), the handle is a proxy of another rank's property, which
    // is dropped with its export at the end of the run (`docs/rack-mode.md` §5.4).
    assert_eq!(DROPS.load(Relaxed), usize::from(split));
    drop(t);
    drop(t2);
    assert_eq!(DROPS.load(Relaxed), 1);
}

#[test]
fn handle_dropped_on_foreign_thread_during_run() {
    static DROPS: AtomicU64 = AtomicU64::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            assert_eq!(skein::current_worker(), 1);
            DROPS.fetch_add(1, Relaxed);
        }
    }
    Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(move || {
            let t = skein::trustee(1).entrust_new((), |()| D);
            let t2 = t.clone();
            std::thread::spawn(move || drop(t2)).join().unwrap();
            drop(t);
            // Keep the job alive until the trustee has seen the foreign free.
            while DROPS.load(Relaxed) == 0 {
                skein::yield_now();
            }
        })
        .unwrap();
    assert_eq!(DROPS.load(Relaxed), 1);
}

#[test]
fn panic_in_apply_resumes_in_caller() {
    let r = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(|| {
            let t = skein::trustee(1).entrust_new(1u64, |x| x);
            let t2 = t.clone();
            let h = skein::spawn_local_on(0, move || {
                t2.apply((), |_, ()| -> u64 { panic!("boom in trustee") })
            });
            let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.join()))
                .map(|_| String::new())
                .unwrap_err();
            // The payload itself from a trustee of this rank; from one of another (fake) rank
            // the message, naming where it arose (`String`).
            let want = if t.is_local() {
                assert!(msg.is::<&str>());
                "boom in trustee"
            } else {
                assert!(msg.is::<String>());
                "rank 1 worker 1: boom in trustee"
            };
            assert_eq!(panic_text(msg), want);
            // The trustee survives and keeps serving.
            t.apply((), |x, ()| *x + 1)
        })
        .unwrap();
    assert_eq!(r, 2);
}

#[test]
fn panic_in_apply_then_fails_the_run() {
    let e = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(|| {
            let t = skein::trustee(1).entrust_new(0u64, |x| x);
            t.apply_then((), |_, ()| panic!("boom async"), |()| {});
            let l = skein::trustee(0).entrust(0u64);
            l.apply_then((), |_, ()| 1, |_| panic!("boom then"));
            t.apply((), |x, ()| *x) // the trustee still answers
        })
        .unwrap_err();
    match e {
        Error::Panicked { first, count } => {
            assert_eq!(count, 2);
            assert!(first.contains("boom"), "{first}");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn panic_in_main_and_detached_fiber() {
    let e = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run_local(|| panic!("main died"))
        .unwrap_err();
    assert!(e.to_string().contains("main died"));
    let e = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(|| {
            drop(skein::spawn_on::<_, (), _>(1, (), |()| panic!("lost fiber")));
        })
        .unwrap_err();
    assert!(e.to_string().contains("lost fiber"), "{e}");
}

#[test]
fn deadlock_is_reported_not_hung() {
    // 4 workers: worker 1, which the fiber joining itself needs to capture its handle's slot
    // (`spawn_local_on`), is on the caller's rank also in a loopback split into 2 ranks.
    let e = Runtime::builder()
        .workers(4)
        .build()
        .unwrap()
        .run(|| {
            let l = std::sync::Arc::new(Mutex::new(None::<skein::JoinHandle<()>>));
            let l2 = l.clone();
            // A fiber that joins itself (through a shared slot) can never finish.
            let h = skein::spawn_local_on(1, move || {
                skein::yield_now();
                let me = l2.lock().unwrap().take().unwrap();
                me.join();
            });
            *l.lock().unwrap() = Some(h);
        })
        .unwrap_err();
    assert!(matches!(e, Error::Deadlock { blocked: 1, main_finished: true }), "{e}");
}

#[test]
fn main_blocked_forever_is_a_deadlock() {
    let e = Runtime::builder()
        .workers(1)
        .build()
        .unwrap()
        .run(|| {
            let latch = skein::Latch::new(());
            let _g = latch.lock();
            let _g2 = latch.lock(); // waits for itself
        })
        .unwrap_err();
    assert!(matches!(e, Error::Deadlock { main_finished: false, .. }), "{e}");
}

/// The panic message of a `catch_unwind` result.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn handle_from_another_run_is_refused() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let rt = Runtime::builder().workers(2).build().unwrap();
    let (t, l, far) = Runtime::builder()
        .workers(4)
        .build()
        .unwrap()
        .run_local(|| {
            (
                skein::trustee(1).entrust(5u64),
                skein::trustee(0).entrust(skein::Latch::new(0u64)),
                skein::trustee(3).entrust_new(0u64, |x| x),
            )
        })
        .unwrap();
    let (t2, far2) = (t.clone(), far.clone());
    // `apply` (from another worker, and from the worker the handle names) and `launch` panic
    // in the caller before anything is queued; the run goes on and serves its own properties.
    let msgs = rt
        .run(move || {
            let mut msgs = Vec::new();
            let t3 = t2.clone();
            let remote = skein::spawn_local_on(0, move || t3.apply((), |x, ()| *x + 1));
            msgs.push(panic_text(catch_unwind(AssertUnwindSafe(|| remote.join())).unwrap_err()));
            // The fiber on worker 1 captures nothing (it may be on another rank): it takes the
            // handle from a static.
            static T4: Mutex<Option<Trust<u64>>> = Mutex::new(None);
            *T4.lock().unwrap() = Some(t2.clone());
            let inline = skein::spawn_on(1, (), |()| take(&T4).apply((), |x, ()| *x + 1));
            msgs.push(panic_text(catch_unwind(AssertUnwindSafe(|| inline.join())).unwrap_err()));
            msgs.push(panic_text(
                catch_unwind(AssertUnwindSafe(|| l.launch((), |x, ()| *x))).unwrap_err(),
            ));
            msgs.push(panic_text(
                catch_unwind(AssertUnwindSafe(|| far2.apply((), |x, ()| *x))).unwrap_err(),
            ));
            let own = skein::trustee(1).entrust_new(1u64, |x| x);
            msgs.push(format!("own {}", own.apply((), |x, ()| *x + 1)));
            msgs
        })
        .unwrap();
    assert_eq!(msgs.len(), 5);
    for m in &msgs[..4] {
        assert!(m.contains("created by another run"), "{m}");
    }
    assert_eq!(msgs[4], "own 2");
    // `apply_then` fails the run.
    let e = rt.run(move || t.apply_then((), |x, ()| *x += 1, |()| {})).unwrap_err();
    match e {
        Error::Panicked { first, count } => {
            assert_eq!(count, 1);
            assert!(first.contains("created by another run"), "{first}");
        }
        other => panic!("unexpected {other}"),
    }
    drop(far);
}

#[test]
fn handle_of_a_live_run_is_refused_by_another_live_run() {
    let (to_b, from_a) = std::sync::mpsc::channel::<Trust<u64>>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<String>();
    let b = std::thread::spawn(move || {
        let t = from_a.recv().unwrap();
        let e = Runtime::builder()
            .workers(2)
            .build()
            .unwrap()
            .run(move || t.apply((), |x, ()| *x += 1))
            .unwrap_err();
        done_tx.send(e.to_string()).unwrap();
    });
    let r = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(move || {
            let t = skein::trustee(1).entrust_new(7u64, |x| x);
            to_b.send(t.clone()).unwrap();
            // Run A stays alive (and keeps serving its property) until run B has given up.
            let msg = loop {
                match done_rx.try_recv() {
                    Ok(m) => break m,
                    Err(_) => {
                        t.apply((), |x, ()| *x += 1);
                        skein::yield_now();
                    }
                }
            };
            (msg, t.apply((), |x, ()| *x) >= 7)
        })
        .unwrap();
    b.join().unwrap();
    assert!(r.0.contains("created by another run"), "{}", r.0);
    assert!(r.1);
}

#[test]
fn handles_are_one_word() {
    use std::mem::size_of;
    assert_eq!(size_of::<Trust<u64>>(), size_of::<usize>());
    assert_eq!(size_of::<Option<Trust<[u8; 100]>>>(), size_of::<usize>());
}

#[test]
fn a_runtime_keeps_its_worker_threads_between_runs() {
    use std::cell::Cell;
    thread_local!(static RUNS: Cell<u64> = const { Cell::new(0) });
    // A thread per worker (workers sharing a thread would count its runs twice).
    let rt = Runtime::builder().workers(2).worker_threads(2).build().unwrap();
    // Every worker counts the runs its thread has served.
    let count = || {
        rt.run(|| {
            let fibers: Vec<_> = (0..skein::num_workers())
                .map(|g| {
                    skein::spawn_on(g, (), |()| {
                        RUNS.with(|r| {
                            r.set(r.get() + 1);
                            r.get()
                        })
                    })
                })
                .collect();
            fibers.into_iter().map(|f| f.join()).collect::<Vec<u64>>()
        })
        .unwrap()
    };
    let n = rt.workers();
    assert_eq!(count(), vec![1; n]);
    assert_eq!(count(), vec![2; n]);
    assert_eq!(count(), vec![3; n]);
}

#[test]
fn runs_of_one_runtime_from_two_threads_at_once() {
    let rt = std::sync::Arc::new(Runtime::builder().workers(2).build().unwrap());
    let threads: Vec<_> = (0..2u64)
        .map(|k| {
            let rt = rt.clone();
            std::thread::spawn(move || {
                (0..20u64)
                    .map(|i| {
                        rt.run(move || {
                            let t = skein::trustee(1).entrust_new(i, |x| x);
                            t.apply(k, |x, k| *x * 10 + k)
                        })
                        .unwrap()
                    })
                    .sum::<u64>()
            })
        })
        .collect();
    let sums: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    // Each thread's runs all ran, on the kept threads or on threads of their own.
    assert_eq!(sums, vec![1900, 1920]);
}
