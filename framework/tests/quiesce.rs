//! Global quiescence detection: asynchronous fan-out chains finish exactly, for 1-4 workers.

use skein::{Runtime, Trust};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// The vertices of the running `fan_out_trees_finish_exactly` round. A closure sent to a
/// trustee captures nothing (its trustee may be on another rank), and a handle reaches
/// another rank only inside a serialized message (`skein::codec`, `docs/rack-mode.md` §5.2
/// item 6), so the delegated fan-out and the fibers spawned on other workers find the
/// handles here: the fake ranks of a loopback split share the process, and with one rank
/// this is just a shared table.
static VERTICES: Mutex<Option<Arc<Vec<Trust<u64>>>>> = Mutex::new(None);

fn vertices() -> Arc<Vec<Trust<u64>>> {
    VERTICES.lock().unwrap().clone().expect("the round's vertices are published")
}

/// A "relaxation tree": every visit of vertex v bumps its counter and, while depth remains,
/// fans out to two other vertices, from delegated context (inside the closure) and from
/// continuations alternately. Total visits = 2^(depth+1) - 1 per root.
fn fan_out(v: usize, depth: u32, from_closure: bool) {
    let vs = vertices();
    if from_closure {
        vs[v].apply_then(
            (v, depth),
            |c, (v, depth)| {
                *c += 1;
                if depth > 0 {
                    let n = vertices().len();
                    fan_out((v * 3 + 1) % n, depth - 1, false);
                    fan_out((v * 5 + 2) % n, depth - 1, false);
                }
            },
            |()| {},
        );
    } else {
        let n = vs.len();
        vs[v].apply_then(
            (),
            |c, ()| *c += 1,
            move |()| {
                if depth > 0 {
                    fan_out((v * 7 + 3) % n, depth - 1, true);
                    fan_out((v * 11 + 5) % n, depth - 1, true);
                }
            },
        );
    }
}

#[test]
fn fan_out_trees_finish_exactly() {
    for w in 1..=4usize {
        let rt = Runtime::builder().workers(w).build().unwrap();
        let total = rt
            .run(move || {
                let vs: Vec<Trust<u64>> =
                    (0..64).map(|i| skein::trustee(i % w).entrust_new(0u64, |x| x)).collect();
                *VERTICES.lock().unwrap() = Some(Arc::new(vs));
                let vs = vertices();
                let mut expect = 0u64;
                for round in 0..3u32 {
                    // Several roots issued from fibers on every worker.
                    let hs: Vec<_> = (0..w)
                        .map(|k| {
                            skein::spawn_on(k, (k, round), |(k, round)| {
                                fan_out(k, 9 + round, k % 2 == 0)
                            })
                        })
                        .collect();
                    hs.into_iter().for_each(|h| h.join());
                    skein::wait_quiescent();
                    expect += w as u64 * ((1u64 << (10 + round)) - 1);
                    let got: u64 = vs.iter().map(|t| t.apply((), |c, ()| *c)).sum();
                    assert_eq!(got, expect, "workers={w} round={round}");
                }
                *VERTICES.lock().unwrap() = None;
                expect
            })
            .unwrap();
        assert!(total > 0);
    }
}

#[test]
fn quiescence_waits_for_other_fibers_and_continuations() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.run(|| {
        // A fiber spawned on worker 1 captures nothing (it may be on another rank): it
        // finds the handle here (the fake ranks of a loopback split share the process).
        static COUNTER: Mutex<Option<Trust<u64>>> = Mutex::new(None);
        let t = skein::trustee(1).entrust_new(0u64, |x| x);
        *COUNTER.lock().unwrap() = Some(t.clone());
        let seen = Rc::new(Cell::new(0u64));
        // A detached fiber that keeps issuing for a while.
        drop(skein::spawn_on(1, (), |()| {
            let t2 = COUNTER.lock().unwrap().clone().unwrap();
            for _ in 0..1000 {
                t2.apply((), |c, ()| *c += 1);
            }
        }));
        for _ in 0..1000 {
            let s = seen.clone();
            t.apply_then((), |c, ()| *c += 1, move |()| s.set(s.get() + 1));
        }
        skein::wait_quiescent();
        assert_eq!(seen.get(), 1000);
        assert_eq!(t.apply((), |c, ()| *c), 2000);
        // Idempotent: nothing in flight.
        skein::wait_quiescent();
        *COUNTER.lock().unwrap() = None;
    })
    .unwrap();
}

#[test]
fn quiesce_from_several_fibers_at_once() {
    let rt = Runtime::builder().workers(3).build().unwrap();
    rt.run(|| {
        // The fibers capture nothing (they may be on other ranks): they find the handle here.
        static COUNTER: Mutex<Option<Trust<u64>>> = Mutex::new(None);
        let t = skein::trustee(2).entrust_new(0u64, |x| x);
        *COUNTER.lock().unwrap() = Some(t.clone());
        let hs: Vec<_> = (0..6)
            .map(|i| {
                skein::spawn_on(i % 3, (), |()| {
                    let t = COUNTER.lock().unwrap().clone().unwrap();
                    for _ in 0..100 {
                        t.apply_then((), |c, ()| *c += 1, |()| {});
                    }
                    skein::wait_quiescent();
                    t.apply((), |c, ()| *c)
                })
            })
            .collect();
        for h in hs {
            // Every waiter saw at least its own 100 (all were issued before it waited).
            assert!(h.join() >= 100);
        }
        assert_eq!(t.apply((), |c, ()| *c), 600);
        *COUNTER.lock().unwrap() = None;
    })
    .unwrap();
}

#[test]
fn shutdown_with_requests_in_flight() {
    let hits = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let h2 = hits.clone();
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.run(move || {
        let t = skein::trustee(1).entrust_new(0u64, |x| x);
        for _ in 0..10_000 {
            let h = h2.clone();
            t.apply_then(
                (),
                |c, ()| *c += 1,
                move |()| {
                    h.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                },
            );
        }
        // Return at once: run must drain everything before stopping the workers.
    })
    .unwrap();
    assert_eq!(hits.load(std::sync::atomic::Ordering::Relaxed), 10_000);
}

/// `wait_quiescent_sum`: rounds of drivers on every worker, each sending to every other
/// worker a fiber that counts on its own worker with `quiescent_add`; every driver of a round
/// gets the same job-wide totals, exact (everything of its round, and of the rounds before,
/// is in them), for 1 to 4 workers (and for the fake ranks of the loopback suites). A
/// baseline summed from `quiescent_lanes` in a superstep equals the totals. The minimum
/// lanes likewise: one that each driver sets (higher each round), one that fibers on every
/// worker only lower; a run starts with none (`u64::MAX`).
#[test]
fn wait_quiescent_sum_gives_every_waiter_the_exact_totals() {
    for w in 1..=4usize {
        let rt = Runtime::builder().workers(w).build().unwrap();
        rt.run(move || {
            // No worker has set a minimum lane yet.
            assert_eq!(skein::wait_quiescent_totals().mins, [u64::MAX; skein::QUIESCENT_MINS]);
            let n = skein::num_workers();
            for round in 1..=3u64 {
                let drivers: Vec<_> = (0..n)
                    .map(|g| {
                        skein::spawn_on(g, (round, n as u64), |(round, n)| {
                            let me = skein::current_worker() as u64;
                            for to in 0..n {
                                // A detached fiber on worker `to`, which adds there and only
                                // ever lowers minimum lane 1 there.
                                drop(skein::spawn_on(to as usize, (round, me), |(round, me)| {
                                    skein::quiescent_add([1, round, me, 0]);
                                    let to = skein::current_worker() as u64;
                                    skein::quiescent_min(1, 1_000_000 - 100 * round - me - to);
                                }));
                            }
                            // Counted on the driver's own worker, before it waits; minimum
                            // lane 0 set there, higher each round. Half the drivers wait
                            // for the sums alone.
                            skein::quiescent_add([0, 0, 0, 1]);
                            skein::quiescent_set_min(0, 100 * round + me);
                            if me % 2 == 0 {
                                let t = skein::wait_quiescent_totals();
                                (t.sums, t.mins, 1u64)
                            } else {
                                (skein::wait_quiescent_sum(), [0; 2], 0)
                            }
                        })
                    })
                    .collect();
                let totals: Vec<_> = drivers.into_iter().map(|d| d.join()).collect();
                let n = n as u64;
                // Rounds 1..=round: n * n fibers each, adding the round and their sender.
                let want = [
                    round * n * n,
                    n * n * round * (round + 1) / 2,
                    round * n * (n * (n - 1) / 2),
                    round * n,
                ];
                let low = [100 * round, 1_000_000 - 100 * round - 2 * (n - 1)];
                for &(sums, mins, has_mins) in &totals {
                    assert_eq!(sums, want, "workers={w} round={round}");
                    if has_mins == 1 {
                        assert_eq!(mins, low, "workers={w} round={round}: minima");
                    }
                }
                // The lanes of every worker, summed now that nothing adds: the same totals;
                // and the lowest of their minimum lanes, the same minima.
                let mine: Vec<_> = (0..n as usize)
                    .map(|g| {
                        skein::spawn_on(g, (), |()| {
                            (skein::quiescent_lanes(), skein::quiescent_mins())
                        })
                    })
                    .map(|h| h.join())
                    .collect();
                let base =
                    mine.iter().fold([0u64; 4], |a, (l, _)| std::array::from_fn(|i| a[i] + l[i]));
                assert_eq!(base, want, "workers={w} round={round}: baseline");
                let least = mine
                    .iter()
                    .fold([u64::MAX; 2], |a, (_, m)| std::array::from_fn(|i| a[i].min(m[i])));
                assert_eq!(least, low, "workers={w} round={round}: the workers' own minima");
            }
        })
        .unwrap();
    }
}
