//! Reference counting, drops on the trustee, panics, deadlock detection.

use skein::{Error, Runtime, Trust};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Counts drops and remembers the worker each drop ran on.
struct Probe {
    owner: usize,
    drops: Arc<AtomicU64>,
    wrong: Arc<AtomicU64>,
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Relaxed);
        if skein::current_worker() != self.owner {
            self.wrong.fetch_add(1, Relaxed);
        }
    }
}

#[test]
fn clone_move_drop_interleaving_frees_once_on_trustee() {
    let drops = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    let (d2, w2) = (drops.clone(), wrong.clone());
    let rounds = 500u64;
    Runtime::builder()
        .workers(3)
        .build()
        .unwrap()
        .run(move || {
            for i in 0..rounds {
                let owner = (i % 3) as usize;
                let t = skein::trustee(owner).entrust(Probe {
                    owner,
                    drops: d2.clone(),
                    wrong: w2.clone(),
                });
                // Clone on A (here, worker 0), move to B, use on both, drop on both in
                // varying orders, with requests possibly still in flight.
                let c = t.clone();
                let b = ((i + 1) % 3) as usize;
                let order = i % 4;
                let h = skein::spawn_local_on(b, move || {
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
            assert_eq!(d2.load(Relaxed), rounds);
        })
        .unwrap();
    assert_eq!(drops.load(Relaxed), rounds);
    assert_eq!(wrong.load(Relaxed), 0);
}

#[test]
fn last_handle_dropped_inside_own_closure() {
    let drops = Arc::new(AtomicU64::new(0));
    let wrong = Arc::new(AtomicU64::new(0));
    let (d2, w2) = (drops.clone(), wrong.clone());
    Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(move || {
            for owner in 0..2 {
                let t = skein::trustee(owner).entrust(Probe {
                    owner,
                    drops: d2.clone(),
                    wrong: w2.clone(),
                });
                let t2 = t.clone();
                drop(t);
                // The closure owns the last handle and drops it while using the property.
                t2.clone().apply_then_local(
                    move |p| {
                        drop(t2);
                        p.owner
                    },
                    |_| {},
                );
            }
        })
        .unwrap();
    assert_eq!(drops.load(Relaxed), 2);
    assert_eq!(wrong.load(Relaxed), 0);
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
    let t: Trust<D> = rt.run_local(|| skein::trustee(1).entrust(D)).unwrap();
    let t2 = t.clone();
    assert_eq!(DROPS.load(Relaxed), 0);
    drop(t);
    drop(t2);
    assert_eq!(DROPS.load(Relaxed), 1);
}

#[test]
fn handle_dropped_on_foreign_thread_during_run() {
    let drops = Arc::new(AtomicU64::new(0));
    let d2 = drops.clone();
    struct D(Arc<AtomicU64>);
    impl Drop for D {
        fn drop(&mut self) {
            assert_eq!(skein::current_worker(), 1);
            self.0.fetch_add(1, Relaxed);
        }
    }
    Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(move || {
            let t = skein::trustee(1).entrust(D(d2.clone()));
            let t2 = t.clone();
            std::thread::spawn(move || drop(t2)).join().unwrap();
            drop(t);
            // Keep the job alive until the trustee has seen the foreign free.
            while d2.load(Relaxed) == 0 {
                skein::yield_now();
            }
        })
        .unwrap();
    assert_eq!(drops.load(Relaxed), 1);
}

#[test]
fn panic_in_apply_resumes_in_caller() {
    let r = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(|| {
            let t = skein::trustee(1).entrust(1u64);
            let t2 = t.clone();
            let h = skein::spawn_local_on(0, move || {
                t2.apply((), |_, ()| -> u64 { panic!("boom in trustee") })
            });
            let msg = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.join()))
                .map(|_| String::new())
                .unwrap_err();
            let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
            // The trustee survives and keeps serving.
            (msg.to_string(), t.apply((), |x, ()| *x + 1))
        })
        .unwrap();
    assert_eq!(r, ("boom in trustee".to_string(), 2));
}

#[test]
fn panic_in_apply_then_fails_the_run() {
    let e = Runtime::builder()
        .workers(2)
        .build()
        .unwrap()
        .run(|| {
            let t = skein::trustee(1).entrust(0u64);
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
            drop(skein::spawn_local_on(1, || panic!("lost fiber")));
        })
        .unwrap_err();
    assert!(e.to_string().contains("lost fiber"), "{e}");
}

#[test]
fn deadlock_is_reported_not_hung() {
    let e = Runtime::builder()
        .workers(2)
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
                skein::trustee(3).entrust(0u64),
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
            let t4 = t2.clone();
            let inline = skein::spawn_local_on(1, move || t4.apply((), |x, ()| *x + 1));
            msgs.push(panic_text(catch_unwind(AssertUnwindSafe(|| inline.join())).unwrap_err()));
            msgs.push(panic_text(
                catch_unwind(AssertUnwindSafe(|| l.launch((), |x, ()| *x))).unwrap_err(),
            ));
            msgs.push(panic_text(
                catch_unwind(AssertUnwindSafe(|| far2.apply((), |x, ()| *x))).unwrap_err(),
            ));
            let own = skein::trustee(1).entrust(1u64);
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
            let t = skein::trustee(1).entrust(7u64);
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
