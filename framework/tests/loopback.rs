//! The loopback split (`Builder::loopback_ranks`): one process pretending to be several
//! ranks, requests between fake ranks travelling as bytes through the rack-mode wire format.
//! Results are checked against the same program run unsplit.

use skein::{Runtime, Trust, TrustArray};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;

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

/// The fiber bodies [`start_on`] can start, by index (a closure sent to a trustee captures
/// nothing: it gets the index as its argument).
const BODIES: [fn(); 2] = [every_kind_to_every_trustee, wait_then_count];

static WOKEN: AtomicUsize = AtomicUsize::new(0);

/// Waits for quiescence on its own worker (woken by a wake-up from worker 0's detector, a
/// loopback control record on another fake rank), then counts itself.
fn wait_then_count() {
    skein::wait_quiescent();
    WOKEN.fetch_add(1, SeqCst);
}

/// Starts `BODIES[body]` in a fiber on global worker `g`, detached: directly on this fake
/// rank, and on another one from a request to `on_g`, a property of `g` (`spawn_on` does not
/// cross ranks yet), whose closure starts the fiber on its own worker.
fn start_on(g: usize, on_g: &Trust<u64>, body: usize) {
    if skein::rank_of(g) == skein::rank() {
        drop(skein::spawn_local_on(g, BODIES[body]));
    } else {
        on_g.apply(body as u64, |_, b| {
            drop(skein::spawn_local_on(skein::current_worker(), BODIES[b as usize]));
        });
    }
}

#[test]
fn geometry_of_a_split_run() {
    assert!(Runtime::builder().workers(3).loopback_ranks(2).build().is_err());
    assert!(Runtime::builder().workers(3).loopback_ranks(0).build().is_err());
    let err = Runtime::builder().workers(5).loopback_ranks(2).build().unwrap_err();
    assert!(err.to_string().contains("loopback_ranks"), "{err}");
    let r = runtime(4, 2)
        .run(|| {
            let far = skein::trustee(3).entrust_new(0u64, |x| x);
            let near = skein::trustee(1).entrust_new(0u64, |x| x);
            let there = far.apply((), |_, ()| {
                let ids = (skein::rank(), skein::ranks(), skein::local_workers());
                (ids.0 as u64, ids.1 as u64, ids.2 as u64, skein::current_worker() as u64)
            });
            let here =
                (skein::rank(), skein::ranks(), skein::local_workers(), skein::num_workers());
            let ranks: Vec<usize> = (0..4).map(skein::rank_of).collect();
            (here, there, ranks, far.is_local(), near.is_local())
        })
        .unwrap();
    assert_eq!(r, ((0, 2, 2, 4), (1, 2, 2, 3), vec![0, 0, 1, 1], false, true));
    let r = runtime(3, 3)
        .run(|| {
            let far = skein::trustee(2).entrust_new(0u64, |x| x);
            let there =
                far.apply((), |_, ()| (skein::rank() as u64, skein::local_workers() as u64));
            (there, (0..3).map(skein::rank_of).collect::<Vec<_>>())
        })
        .unwrap();
    assert_eq!(r, ((2, 1), vec![0, 1, 2]));
}

struct Handles {
    counters: Vec<Trust<u64>>,
    arr: TrustArray<u64>,
}

static EVERY: Mutex<Option<Handles>> = Mutex::new(None);
static EVERY_DONE: AtomicUsize = AtomicUsize::new(0);

/// From the calling worker, every kind of request to every trustee.
fn every_kind_to_every_trustee() {
    let me = skein::current_worker() as u64;
    let (counters, arr) = {
        let h = EVERY.lock().unwrap();
        let h = h.as_ref().unwrap();
        (h.counters.clone(), h.arr.clone())
    };
    for (g, t) in counters.iter().enumerate() {
        let r = t.apply(me + 1, |c, k| {
            *c += k;
            k * 2
        });
        assert_eq!(r, (me + 1) * 2);
        t.apply_then(
            100 * (me + 1),
            |c, k| {
                *c += k;
                k
            },
            move |k| assert_eq!(k, 100 * (me + 1)),
        );
        let n = t.apply_with(vec![me; 3], |c, v: Vec<u64>| {
            *c += 1000 * v.iter().sum::<u64>();
            v.len()
        });
        assert_eq!(n, 3);
        let name = format!("w{me}");
        t.apply_with_then(
            name.clone(),
            |c, s: String| {
                *c += 10_000 * s.len() as u64;
                s
            },
            move |s: String| assert_eq!(s, name),
        );
        let old = arr.apply(g * 3, me + 1, |v, k| {
            *v += k;
            *v - k
        });
        assert!(old < 1 << 40);
        arr.apply_then(g * 3 + 1, me + 1, |v, k| *v += k * k, |()| {});
    }
    EVERY_DONE.fetch_add(1, SeqCst);
}

/// A counter on every trustee `g` (value `g`), with handles that every fake rank may use: made
/// in delegated context, where `entrust_new` builds in this process's memory (loopback only).
/// A fiber's `entrust_new` on another rank answers a proxy handle instead, which stays on its
/// rank (`tests/proxy.rs`); handles cross ranks only inside messages.
fn shared_counters(n: usize) -> Vec<Trust<u64>> {
    let out: Rc<std::cell::RefCell<Option<Vec<Trust<u64>>>>> = Rc::default();
    let o = out.clone();
    let here = skein::local_trustee().entrust(());
    here.apply_then(
        (),
        |_, ()| (),
        move |()| {
            let v = (0..n).map(|g| skein::trustee(g).entrust_new(g as u64, |x| x)).collect();
            *o.borrow_mut() = Some(v);
        },
    );
    skein::wait_quiescent();
    let v = out.borrow_mut().take();
    v.expect("built in the continuation")
}

/// Every kind of request, from every worker, to every trustee; returns the final values.
fn every_to_every(workers: usize, ranks: usize) -> (Vec<u64>, Vec<u64>) {
    EVERY_DONE.store(0, SeqCst);
    runtime(workers, ranks)
        .run(|| {
            let n = skein::num_workers();
            let counters = shared_counters(n);
            let arr = TrustArray::new(n * 3, 5u64, |k, i| i as u64 * k);
            *EVERY.lock().unwrap() = Some(Handles { counters: counters.clone(), arr: arr.clone() });
            for (g, t) in counters.iter().enumerate() {
                start_on(g, t, 0);
            }
            skein::wait_quiescent();
            assert_eq!(EVERY_DONE.load(SeqCst), n);
            drop(EVERY.lock().unwrap().take());
            let vals = counters.iter().map(|t| t.apply((), |c, ()| *c)).collect();
            let arr_vals = (0..n * 3).map(|i| arr.apply(i, (), |v, ()| *v)).collect();
            (vals, arr_vals)
        })
        .unwrap()
}

#[test]
fn every_call_from_every_worker_to_every_trustee() {
    // One test at a time uses EVERY.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap();
    let unsplit = every_to_every(4, 1);
    assert_eq!(every_to_every(4, 2), unsplit);
    assert_eq!(every_to_every(4, 4), unsplit);
    let unsplit = every_to_every(3, 1);
    assert_eq!(every_to_every(3, 3), unsplit);
}

#[test]
fn apply_then_keeps_per_pair_order_across_fake_ranks() {
    const N: u64 = 100_000;
    let last = runtime(4, 2)
        .run(|| {
            let t = skein::trustee(3).entrust_new(0u64, |x| x);
            let next = Rc::new(Cell::new(1u64));
            for i in 1..=N {
                let next = next.clone();
                t.apply_then(
                    i,
                    |c, i| {
                        let prev = *c;
                        *c = i;
                        (prev, i)
                    },
                    move |(prev, i)| {
                        assert_eq!(prev + 1, i, "served out of order");
                        assert_eq!(next.get(), i, "completed out of order");
                        next.set(i + 1);
                    },
                );
            }
            skein::wait_quiescent();
            assert_eq!(next.get(), N + 1);
            t.apply((), |c, ()| *c)
        })
        .unwrap();
    assert_eq!(last, N);
}

#[test]
fn a_remote_panic_names_rank_and_worker() {
    let msg = runtime(4, 2)
        .run(|| {
            let t = skein::trustee(3).entrust_new(0u64, |x| x);
            let p = catch_unwind(AssertUnwindSafe(|| {
                t.apply(7u64, |_, k| -> u64 { panic!("boom {k}") })
            }))
            .unwrap_err();
            // The trustee goes on serving.
            assert_eq!(t.apply(1u64, |c, k| *c + k), 1);
            panic_text(&*p)
        })
        .unwrap();
    assert_eq!(msg, "rank 1 worker 3: boom 7");
    let err = runtime(3, 3)
        .run(|| {
            let t = skein::trustee(2).entrust_new(0u64, |x| x);
            t.apply_then((), |_, ()| -> u8 { panic!("later") }, |_| {});
            skein::wait_quiescent();
        })
        .unwrap_err();
    assert!(err.to_string().contains("rank 2 worker 2: later"), "{err}");
}

static DROPS: AtomicUsize = AtomicUsize::new(0);
static DROPPED_AT: AtomicU64 = AtomicU64::new(0);

struct Counted(u64);

impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, SeqCst);
        DROPPED_AT.store(self.0, SeqCst);
    }
}

#[test]
fn a_property_is_dropped_after_requests_from_another_fake_rank() {
    const N: u64 = 20_000;
    runtime(4, 2)
        .run(|| {
            let t = skein::trustee(2).entrust_new(0u64, Counted);
            for _ in 0..N {
                t.apply_then((), |c, ()| c.0 += 1, |()| {});
            }
            // The last handle goes here, on fake rank 0, with requests still on their way: its
            // `Release` waits on the trustee until they have been served. (That return is
            // applied by the trustee's loop, not a task: quiescence may come just before it.)
            drop(t);
            skein::wait_quiescent();
            let start = std::time::Instant::now();
            while DROPS.load(SeqCst) == 0 && start.elapsed().as_secs() < 30 {
                skein::yield_now();
            }
            assert_eq!(DROPS.load(SeqCst), 1, "dropped exactly once");
            assert_eq!(DROPPED_AT.load(SeqCst), N, "dropped after every request");
        })
        .unwrap();
    assert_eq!(DROPS.load(SeqCst), 1);
}

#[test]
fn wait_quiescent_waits_for_requests_crossing_fake_ranks() {
    let (a, b, c) = runtime(3, 3)
        .run(|| {
            let a = skein::trustee(0).entrust_new(0u64, |x| x);
            let b = skein::trustee(1).entrust_new(0u64, |x| x);
            let c = skein::trustee(2).entrust_new(0u64, |x| x);
            // Fibers on the other fake ranks wait for quiescence too.
            start_on(1, &b, 1);
            start_on(2, &c, 1);
            for i in 0..500u64 {
                let (a, c) = (a.clone(), c.clone());
                // rank 0 -> rank 1, then its continuation -> rank 2, then -> rank 0.
                b.apply_then(
                    i,
                    |v, i| *v += i,
                    move |()| {
                        let a = a.clone();
                        c.apply_then(
                            1u64,
                            |v, k| *v += k,
                            move |()| a.apply_then(2u64, |v, k| *v += k, |()| {}),
                        );
                    },
                );
            }
            skein::wait_quiescent();
            // Woken with this fiber, they may not have run yet: wait until they have.
            while WOKEN.load(SeqCst) < 2 {
                skein::yield_now();
            }
            let get = |t: &Trust<u64>| t.apply((), |v, ()| *v);
            (get(&a), get(&b), get(&c))
        })
        .unwrap();
    assert_eq!((a, b, c), (1000, 500 * 499 / 2, 500));
}

#[test]
fn local_calls_to_another_fake_rank_are_refused() {
    let msgs = runtime(4, 2)
        .run(|| {
            let t = skein::trustee(3).entrust_new(1u64, |x| x);
            let mut msgs = Vec::new();
            let mut refused = |f: &mut dyn FnMut()| {
                let p = catch_unwind(AssertUnwindSafe(f)).expect_err("not refused");
                msgs.push(panic_text(&*p));
            };
            refused(&mut || {
                let _ = t.apply_local(|c| *c);
            });
            refused(&mut || t.apply_then_local(|c| *c, |_| {}));
            refused(&mut || drop(skein::trustee(2).entrust(5u64)));
            refused(&mut || drop(skein::spawn_local_on(3, || ())));
            // Its own fake rank is fine.
            assert_eq!(skein::trustee(1).entrust(5u64).apply_local(|c| *c), 5);
            msgs
        })
        .unwrap();
    assert_eq!(msgs.len(), 4);
    for m in &msgs {
        assert!(m.contains("which is on rank 1 (this is rank 0)"), "{m}");
    }
}

#[test]
fn a_corrupted_envelope_is_refused_naming_the_rank() {
    for (at, what) in
        [(0, "job token"), (9, "job run"), (37, "header says"), (33, "segment 1"), (50, "reserved")]
    {
        let rt = Runtime::builder()
            .workers(4)
            .loopback_ranks(2)
            .loopback_corrupt_first_envelope(at)
            .build()
            .unwrap();
        let err = rt
            .run(|| {
                let t = skein::trustee(2).entrust_new(1u64, |x| x);
                t.apply(1u64, |c, k| *c + k)
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("rank 1 worker 2: bad batch from rank 0"), "{err}");
        assert!(err.contains(what), "byte {at}: {err}");
    }
}

/// A run stopped by a refused envelope gives its run id back (its blocked fibers are leaked,
/// with the run's state they hold): more refused runs in one process than there are run ids
/// (127), then a normal run works. Each is reported as a refusal naming the sending rank.
#[test]
fn refused_runs_give_their_run_ids_back() {
    for i in 0..200 {
        let rt = Runtime::builder()
            .workers(2)
            .loopback_ranks(2)
            .loopback_corrupt_first_envelope(0)
            .build()
            .unwrap();
        let err = rt
            .run(|| {
                let t = skein::trustee(1).entrust_new(1u64, |x| x);
                t.apply(1u64, |c, k| *c + k)
            })
            .unwrap_err();
        assert!(matches!(err, skein::Error::Refused { .. }), "run {i}: {err:?}");
        let err = err.to_string();
        assert!(err.contains("refused message") && err.contains("bad batch from rank 0"), "{err}");
        assert!(!err.contains("panic"), "{err}");
    }
    let v =
        runtime(2, 2).run(|| skein::trustee(1).entrust_new(40u64, |x| x).apply(2, |c, k| *c + k));
    assert_eq!(v.unwrap(), 42);
}

/// Forged envelopes (the `forge_envelope` test hook: the real encoder, then one thing
/// broken) sent from worker 0 of fake rank 0 to worker 2 of fake rank 1 are refused there,
/// naming the sending rank and what is wrong, and the run fails; nothing runs. The same
/// forgeries travel over MPI in `tests/rack.rs`.
#[test]
fn forged_envelopes_are_refused_naming_the_rank() {
    use skein::Forgery;
    for (how, what) in [
        (Forgery::Token, "is not this job's"),
        (Forgery::JobRun, "job run "),
        (Forgery::CodeId, "is outside the executable's RELRO range"),
        (Forgery::RecordSize, "1 record(s) in 32 bytes (expected 24)"),
        (Forgery::Count, "1000000 record(s) in 24 bytes"),
        (Forgery::StaleTarget, "export slot"),
    ] {
        let err = runtime(4, 2)
            .run(move || {
                skein::forge_envelope(2, how);
                // Blocks until the refusal stops the run.
                skein::trustee(2).entrust_new(1u64, |x| x).apply(1u64, |c, k| *c + k)
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("rank 1 worker 2: bad batch from rank 0"), "{how:?}: {err}");
        assert!(err.contains(what), "{how:?}: {err}");
    }
}

/// Throughput of `apply_then` from worker 0 to the last trustee, 2 workers split 2 × 1 and 4
/// workers split 2 × 2 (through the loopback transport), each against the same run unsplit
/// (slots). A measurement, not a test (no assertion on time):
/// `cargo test --release -p skein --test loopback -- --ignored --nocapture`.
#[test]
#[ignore]
fn loopback_echo_throughput() {
    const N: u64 = 1_000_000;
    for workers in [2, 4] {
        for round in 0..5 {
            for ranks in [1, 2] {
                let secs = runtime(workers, ranks)
                    .run(|| {
                        let t = skein::trustee(skein::num_workers() - 1).entrust_new(0u64, |x| x);
                        let t0 = std::time::Instant::now();
                        for _ in 0..N {
                            t.apply_then((), |c, ()| *c += 1, |()| {});
                        }
                        skein::wait_quiescent();
                        let s = t0.elapsed().as_secs_f64();
                        assert_eq!(t.apply((), |c, ()| *c), N);
                        s
                    })
                    .unwrap();
                println!(
                    "workers {workers} round {round} ranks {ranks}: {N} apply_then in {secs:.3} s, \
                     {:.2} Mops/s",
                    N as f64 / secs / 1e6
                );
            }
        }
    }
}

/// Arguments and results of every size and alignment `Plain` allows, and a serialized one
/// of 1 MiB, cross fake ranks byte for byte.
#[test]
fn arguments_and_results_of_any_size_cross_fake_ranks() {
    let r = runtime(2, 2)
        .run(|| {
            let t = skein::trustee(1).entrust_new(1u64, |x| x);
            let a = t.apply(7u8, |c, k| (*c as u8).wrapping_add(k));
            let b = t.apply((3u16, 4u8, 5u32), |c, (x, y, z)| (z, *c as u16 + x, y));
            let c = t.apply([1u8, 2, 3], |c, v| [v[2], v[1], v[0], *c as u8, 9]);
            let d = t.apply(u128::MAX - 5, |c, k| k.wrapping_add(*c as u128));
            let big: [u64; 32] = std::array::from_fn(|i| i as u64 * 3);
            let e = t.apply(big, |c, v| {
                let mut out = [0u64; 32];
                for (o, x) in out.iter_mut().zip(v) {
                    *o = x + *c;
                }
                out
            });
            t.apply((), |_, ()| ());
            let blob: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
            let g = t.apply_with(blob.clone(), |c, v: Vec<u8>| {
                v.iter().map(|&x| x as u64).sum::<u64>() + *c
            });
            let h = t.apply_with((), move |_, ()| vec![5u16; 70_000]);
            (a, b, c, d, e.iter().sum::<u64>(), g, h.len(), blob.len())
        })
        .unwrap();
    let want_g: u64 = (0..1u64 << 20).map(|i| i % 251).sum::<u64>() + 1;
    let want_e: u64 = (0..32u64).map(|i| i * 3 + 1).sum();
    assert_eq!(r, (8, (5, 4, 4), [3, 2, 1, 1, 9], u128::MAX - 4, want_e, want_g, 70_000, 1 << 20));
}

/// A serialized argument over the 16 MiB a message to another rank carries is refused at the
/// call site (a panic the caller can catch, naming the limit), not in the worker loop where
/// it would fail the whole job; to a trustee of the caller's own rank it is fine.
#[test]
fn an_apply_with_argument_too_long_for_a_message_is_refused_at_the_call() {
    let (msgs, sum) = runtime(2, 2)
        .run(|| {
            let far = skein::trustee(1).entrust_new(0u64, |x| x);
            let near = skein::trustee(0).entrust_new(0u64, |x| x);
            let blob = vec![1u8; (1 << 24) + 1];
            let mut msgs = Vec::new();
            let mut refused = |f: &mut dyn FnMut()| {
                let p = catch_unwind(AssertUnwindSafe(f)).expect_err("not refused");
                msgs.push(panic_text(&*p));
            };
            refused(&mut || {
                far.apply_with(blob.clone(), |c, v: Vec<u8>| *c += v.len() as u64);
            });
            refused(&mut || {
                far.apply_with_then(blob.clone(), |c, v: Vec<u8>| *c += v.len() as u64, |()| {});
            });
            near.apply_with(blob.clone(), |c, v: Vec<u8>| *c += v.len() as u64);
            // The refused calls sent nothing.
            (msgs, far.apply((), |c, ()| *c) + near.apply((), |c, ()| *c))
        })
        .unwrap();
    assert_eq!(sum, (1 << 24) + 1);
    assert_eq!(msgs.len(), 2);
    for m in &msgs {
        assert!(m.contains("to worker 1 (rank 1)") && m.contains("at most 16777216 bytes"), "{m}");
    }
}
