//! Handles of properties of another rank (`docs/rack-mode.md` §5), through the public API, in
//! loopback splits of 2 and 3 fake ranks: a remote `entrust_new` answers an export
//! `(slot, gen, weight)` and the caller holds a proxy; every call kind goes through it as wire
//! bytes; clones and drops of the handle stay on its rank, and the last drop returns the
//! proxy's weight in a `Release` with the snapshot of the requests its rank had issued, so the
//! property is dropped exactly once, on its trustee, after every request.

use skein::{Latch, Runtime, Trust};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn runtime(workers: usize, ranks: usize) -> Runtime {
    let b = Runtime::builder().workers(workers);
    if ranks > 1 {
        b.loopback_ranks(ranks).build().expect("runtime")
    } else {
        b.build().expect("runtime")
    }
}

/// Yields until `done()` or 30 s have passed.
fn wait_for(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() && start.elapsed() < Duration::from_secs(30) {
        skein::yield_now();
    }
}

/// Every call kind through handles of properties built by `entrust_new` on the last worker
/// (another rank when split), from client workers `0..clients` (all on rank 0); returns what
/// they saw.
fn every_call_kind(workers: usize, ranks: usize, clients: usize) -> Vec<u64> {
    runtime(workers, ranks)
        .run(move || {
            let last = skein::num_workers() - 1;
            let t: Trust<(u64, u64)> = skein::trustee(last).entrust_new(5u64, |k| (k, k * 10));
            let l = skein::trustee(last).entrust_new(7u64, Latch::new);
            let hs: Vec<_> = (0..clients)
                .map(|g| {
                    let (t, l) = (t.clone(), l.clone());
                    skein::spawn_local_on(g, move || {
                        let g = g as u64;
                        let mut seen = Vec::new();
                        seen.push(t.apply(g, |v, g| {
                            v.0 += g;
                            v.1
                        }));
                        let got = std::rc::Rc::new(AtomicU64::new(0));
                        let got2 = got.clone();
                        t.apply_then(
                            g,
                            |v, g| v.1 / 10 + g * 3 - 4,
                            move |x| got2.store(x, SeqCst),
                        );
                        let s =
                            t.apply_with(format!("w{g}"), |v, s: String| format!("{s}:{}", v.1));
                        seen.push(s.len() as u64);
                        let t2 = t.clone();
                        t2.apply_with_then(
                            vec![g, 1],
                            |v, x: Vec<u64>| x.len() as u64 + v.1,
                            |n| {
                                assert_eq!(n, 52);
                            },
                        );
                        drop(t2);
                        seen.push(l.launch(g, |x, g| {
                            *x += g;
                            skein::current_worker() as u64
                        }));
                        wait_for(|| got.load(SeqCst) != 0);
                        seen.push(got.load(SeqCst));
                        seen
                    })
                })
                .collect();
            let mut all: Vec<u64> = hs.into_iter().flat_map(|h| h.join()).collect();
            skein::wait_quiescent();
            all.push(t.apply((), |v, ()| v.0));
            all.push(l.launch((), |x, ()| *x));
            all
        })
        .expect("run")
}

#[test]
fn remote_entrust_new_then_every_call_kind_matches_an_unsplit_run() {
    for (workers, ranks) in [(4, 2), (6, 3)] {
        let clients = workers / ranks;
        let got = every_call_kind(workers, ranks, clients);
        let last = workers as u64 - 1;
        let mut want = Vec::new();
        for g in 0..clients as u64 {
            want.extend([50, format!("w{g}:50").len() as u64, last, 1 + g * 3]);
        }
        let sum: u64 = (0..clients as u64).sum();
        want.extend([5 + sum, 7 + sum]);
        assert_eq!(got, want, "{workers} workers in {ranks} fake ranks");
        assert_eq!(got, every_call_kind(workers, 1, clients), "unsplit run of {workers} workers");
    }
}
static CASE2_DROPS: AtomicUsize = AtomicUsize::new(0);
static CASE2_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static CASE2_WHERE: AtomicU64 = AtomicU64::new(u64::MAX);

/// A value that records its drop: how many requests it had seen, and on which worker.
struct Counted(u64);

impl Drop for Counted {
    fn drop(&mut self) {
        CASE2_AT.store(self.0, SeqCst);
        CASE2_WHERE.store(skein::current_worker() as u64, SeqCst);
        CASE2_DROPS.fetch_add(1, SeqCst);
    }
}

/// `docs/rack-mode.md` §5.3 hard case 2: worker 1 queues 10^4 `apply_then` to a property of
/// another rank (from a continuation: nothing throttles it, they all wait in its queue) and
/// drops its handle, then worker 0 drops the last handle of the rank: its `Release` reaches
/// the owner before most of the requests; the property's drop runs exactly once, on its
/// trustee, after all of them were served. Fails if the `Release` is sent without its
/// snapshot (checked by breaking `free::proxy_dropped` once): the owner recycles the export
/// early, and the requests still on their way are refused as stale.
#[test]
fn hard_case_2_the_last_drop_does_not_overtake_the_requests() {
    const N: u64 = 10_000;
    static QUEUED: AtomicUsize = AtomicUsize::new(0);
    for (workers, ranks) in [(4, 2), (6, 3)] {
        CASE2_DROPS.store(0, SeqCst);
        CASE2_AT.store(u64::MAX, SeqCst);
        QUEUED.store(0, SeqCst);
        let trustee = workers - 1;
        let early = runtime(workers, ranks)
            .run(move || {
                let t = skein::trustee(trustee).entrust_new(0u64, Counted);
                let t1 = t.clone();
                let near = skein::trustee(1).entrust(());
                drop(skein::spawn_local_on(1, move || {
                    near.apply_then(
                        (),
                        |_, ()| (),
                        move |()| {
                            for _ in 0..N {
                                t1.apply_then((), |c, ()| c.0 += 1, |()| {});
                            }
                            drop(t1);
                            QUEUED.store(1, SeqCst);
                        },
                    );
                }));
                wait_for(|| QUEUED.load(SeqCst) == 1);
                drop(t);
                let early = CASE2_DROPS.load(SeqCst);
                wait_for(|| CASE2_DROPS.load(SeqCst) == 1);
                early
            })
            .expect("run");
        assert_eq!(early, 0, "dropped before the last handle went");
        assert_eq!(CASE2_DROPS.load(SeqCst), 1, "dropped exactly once");
        assert_eq!(CASE2_AT.load(SeqCst), N, "dropped after every request was served");
        assert_eq!(CASE2_WHERE.load(SeqCst), trustee as u64, "dropped on its trustee");
    }
}

static STORM_DROPS: AtomicUsize = AtomicUsize::new(0);
static STORM_AT: AtomicU64 = AtomicU64::new(0);

struct Stormed(u64);

impl Drop for Stormed {
    fn drop(&mut self) {
        STORM_AT.store(self.0, SeqCst);
        STORM_DROPS.fetch_add(1, SeqCst);
    }
}

/// Clones and drops of one proxy's handles on two workers of its rank, with requests between
/// them: the count is `free.rs`'s, so the proxy outlives every handle and the property is
/// dropped once, after every request.
#[test]
fn clone_and_drop_storm_on_two_workers_of_one_rank() {
    const ROUNDS: u64 = 3000;
    STORM_DROPS.store(0, SeqCst);
    let r = runtime(4, 2)
        .run(|| {
            let t = skein::trustee(3).entrust_new(0u64, Stormed);
            let hs: Vec<_> = (0..2)
                .map(|g| {
                    let t = t.clone();
                    skein::spawn_local_on(g, move || {
                        let mut held = Vec::new();
                        for i in 0..ROUNDS {
                            held.push(t.clone());
                            if i % 3 == 0 {
                                let h = held.swap_remove((i as usize * 7) % held.len());
                                h.apply_then((), |s, ()| s.0 += 1, |()| {});
                            }
                            if held.len() > 8 {
                                held.drain(..4);
                            }
                            if i % 64 == 0 {
                                skein::yield_now();
                            }
                        }
                        drop(held);
                    })
                })
                .collect();
            for h in hs {
                h.join();
            }
            skein::wait_quiescent();
            let mid = STORM_DROPS.load(SeqCst);
            let seen = t.apply((), |s, ()| s.0);
            drop(t);
            wait_for(|| STORM_DROPS.load(SeqCst) == 1);
            (mid, seen)
        })
        .expect("run");
    let per = ROUNDS.div_ceil(3);
    assert_eq!(r, (0, 2 * per));
    assert_eq!(STORM_DROPS.load(SeqCst), 1);
    assert_eq!(STORM_AT.load(SeqCst), 2 * per);
}

static END_DROPS: AtomicUsize = AtomicUsize::new(0);

struct AtEnd;

impl Drop for AtEnd {
    fn drop(&mut self) {
        END_DROPS.fetch_add(1, SeqCst);
    }
}

static KEPT: Mutex<Option<Trust<AtEnd>>> = Mutex::new(None);

/// A proxy handle still held when the run ends: the owner drops its export at the end of the
/// run (the property is dropped once, there); the handle keeps its run's id, so a call on it
/// in a later run is refused; dropping it afterwards frees only the proxy.
#[test]
fn a_proxy_held_past_the_end_of_the_run() {
    END_DROPS.store(0, SeqCst);
    runtime(4, 2)
        .run(|| {
            let t = skein::trustee(2).entrust_new((), |()| AtEnd);
            *KEPT.lock().unwrap() = Some(t.clone());
            t.apply((), |_, ()| ());
        })
        .expect("run");
    assert_eq!(END_DROPS.load(SeqCst), 1, "the export was dropped at the end of the run");
    let kept = KEPT.lock().unwrap().take().expect("kept");
    let refused = runtime(4, 2)
        .run(move || catch_unwind(AssertUnwindSafe(|| kept.apply((), |_, ()| ()))).is_err())
        .expect("run");
    assert!(refused, "a handle of an ended run was accepted");
    assert_eq!(END_DROPS.load(SeqCst), 1, "dropped once");
}

/// A proxy handle dropped from a continuation (delegated context) sends its `Release` too.
#[test]
fn a_proxy_dropped_in_a_continuation() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct D;
    impl Drop for D {
        fn drop(&mut self) {
            DROPS.fetch_add(1, SeqCst);
        }
    }
    let r = runtime(6, 3)
        .run(|| {
            let t = skein::trustee(4).entrust_new((), |()| D);
            let near = skein::trustee(1).entrust(0u8);
            near.apply_then((), |_, ()| (), move |()| drop(t));
            wait_for(|| DROPS.load(SeqCst) == 1);
            DROPS.load(SeqCst)
        })
        .expect("run");
    assert_eq!(r, 1);
}

static SHARED_DROPS: AtomicUsize = AtomicUsize::new(0);
static SHARED_AT: AtomicU64 = AtomicU64::new(0);

struct Shared(u64);

impl Drop for Shared {
    fn drop(&mut self) {
        SHARED_AT.store(self.0, SeqCst);
        SHARED_DROPS.fetch_add(1, SeqCst);
    }
}

/// A proxy handle that reaches another fake rank through memory (a static; ranks share none,
/// so only a loopback run can do this) works there as the loopback handles do, through the
/// property's address; the last drop on the owner's rank still returns the proxy's weight,
/// and the property is dropped once, after every request.
#[test]
fn a_proxy_handle_shared_through_memory_off_its_rank() {
    static H: Mutex<Option<Trust<Shared>>> = Mutex::new(None);
    SHARED_DROPS.store(0, SeqCst);
    let r = runtime(6, 3)
        .run(|| {
            let t = skein::trustee(5).entrust_new(0u64, Shared);
            *H.lock().unwrap() = Some(t.clone());
            t.apply_then((), |s, ()| s.0 += 1, |()| {});
            drop(t);
            // Rank 1 (a third rank), then rank 2 (the owner's), which drops the last handle.
            for g in [2, 4] {
                skein::spawn_on(g, (), |()| {
                    let h = H.lock().unwrap().clone().expect("handle");
                    h.apply_then((), |s, ()| s.0 += 10, |()| {});
                    let mut l = None;
                    if skein::current_worker() == 4 {
                        l = H.lock().unwrap().take();
                    }
                    h.apply((), |s, ()| s.0 + 100);
                    drop((h, l));
                })
                .join();
            }
            wait_for(|| SHARED_DROPS.load(SeqCst) == 1);
            SHARED_DROPS.load(SeqCst)
        })
        .expect("run");
    assert_eq!(r, 1);
    assert_eq!(SHARED_AT.load(SeqCst), 21);
}

static TRAVEL_DROPS: AtomicUsize = AtomicUsize::new(0);
static TRAVEL_AT: AtomicU64 = AtomicU64::new(0);
static TRAVEL_WHERE: AtomicU64 = AtomicU64::new(u64::MAX);

struct Travelled(u64);

impl Drop for Travelled {
    fn drop(&mut self) {
        TRAVEL_AT.store(self.0, SeqCst);
        TRAVEL_WHERE.store(skein::current_worker() as u64, SeqCst);
        TRAVEL_DROPS.fetch_add(1, SeqCst);
    }
}

type Mailbox = Latch<Option<Trust<Travelled>>>;

/// `docs/rack-mode.md` §5.3 hard case 1 on 3 fake ranks: rank 0 holds a handle of a property
/// of rank 2, sends it to rank 1 inside an `apply_with` argument and drops its own at once
/// (with its requests still on their way); rank 1 then uses the handle it received and drops
/// it. The property is dropped once, on its trustee, after every request of both ranks. The
/// same handle also goes to the owner's rank (a local handle there) and comes back inside a
/// result.
#[test]
fn hard_case_1_a_handle_sent_to_a_third_rank_while_the_original_is_dropped() {
    const N: u64 = 2000;
    TRAVEL_DROPS.store(0, SeqCst);
    let r = runtime(6, 3)
        .run(|| {
            let t = skein::trustee(5).entrust_new(0u64, Travelled);
            let at_c: Trust<Mailbox> = skein::trustee(3).entrust_new((), |()| Latch::new(None));
            let at_o: Trust<Mailbox> = skein::trustee(4).entrust_new((), |()| Latch::new(None));
            for _ in 0..N {
                t.apply_then((), |c, ()| c.0 += 1, |()| {});
            }
            at_c.apply_with(t.clone(), |l, h: Trust<Travelled>| *l.get_mut().unwrap() = Some(h));
            at_o.apply_with(t.clone(), |l, h: Trust<Travelled>| *l.get_mut().unwrap() = Some(h));
            drop(t);
            // Rank 1 uses its handle, and sends a clone back inside a result.
            let back = at_c.apply_with((), |l, ()| l.get_mut().unwrap().clone());
            let back = back.expect("a handle");
            let seen = at_c.launch(N, |slot, n| {
                let h = slot.take().expect("handle");
                for _ in 0..n {
                    h.apply_then((), |c, ()| c.0 += 10, |()| {});
                }
                let v = h.apply((), |c, ()| c.0);
                drop(h);
                v
            });
            // The owner's rank: a local handle there.
            let local = at_o.launch((), |slot, ()| {
                let h = slot.take().expect("handle");
                let v = (
                    h.is_local(),
                    h.apply(100u64, |c, k| {
                        c.0 += k;
                        c.0
                    }),
                );
                drop(h);
                u64::from(v.0) * 1_000_000_000 + v.1
            });
            let mid = TRAVEL_DROPS.load(SeqCst);
            let last = back.apply((), |c, ()| c.0);
            drop(back);
            wait_for(|| TRAVEL_DROPS.load(SeqCst) == 1);
            (seen >= 10 * N, local >= 1_000_000_000, mid, last)
        })
        .expect("run");
    assert_eq!(r, (true, true, 0, 11 * N + 100));
    assert_eq!(TRAVEL_DROPS.load(SeqCst), 1, "dropped exactly once");
    assert_eq!(TRAVEL_AT.load(SeqCst), 11 * N + 100, "after every request");
    assert_eq!(TRAVEL_WHERE.load(SeqCst), 5, "on its trustee");
}

/// Handles inside messages on one rank too (no export tables: the count travels), and the
/// refusals: a handle encoded outside its run, decoded as a handle of another type, or by
/// itself outside the codec's scope.
#[test]
fn handles_travel_in_messages_on_one_rank_and_refusals() {
    static KEEP: Mutex<Option<Trust<u64>>> = Mutex::new(None);
    for ranks in [1, 2] {
        let r = runtime(4, ranks)
            .run(|| {
                let a = skein::trustee(1).entrust(5u64);
                let holder = skein::trustee(3).entrust_new((), |()| Vec::<Trust<u64>>::new());
                holder.apply_with(vec![a.clone(), a.clone()], |v, hs: Vec<Trust<u64>>| {
                    v.extend(hs);
                    v.len()
                });
                let got: Vec<Trust<u64>> = holder.apply_with((), |v, ()| std::mem::take(v));
                let sum: u64 = got.iter().map(|h| h.apply(1u64, |x, k| *x + k)).sum();
                let bytes = skein::codec::encode(&a).expect("encode");
                let wrong = skein::codec::decode::<Trust<u32>>(&bytes).unwrap_err();
                let again = skein::codec::encode(&a).expect("encode");
                // A forged trailer entry (another slot) is refused; the real one decodes.
                let mut forged = again.clone();
                let at = forged.len() - 4 - 40 + 8;
                forged[at] ^= 1;
                let e = skein::codec::decode::<Trust<u64>>(&forged).unwrap_err();
                assert!(
                    e.to_string().contains("names no handle") || e.to_string().contains("seal"),
                    "{e}"
                );
                let ok: Trust<u64> = skein::codec::decode(&again).expect("decode");
                *KEEP.lock().unwrap() = Some(ok);
                (sum, wrong.to_string())
            })
            .expect("run");
        assert_eq!(r.0, 12);
        assert!(r.1.contains("another type"), "{}", r.1);
        let kept = KEEP.lock().unwrap().take().expect("kept");
        let e = skein::codec::encode(&kept).unwrap_err().to_string();
        assert!(e.contains("cannot leave its run"), "{e}");
    }
}

static CHAIN_DROPS: AtomicUsize = AtomicUsize::new(0);

struct Chained(u64);

impl Drop for Chained {
    fn drop(&mut self) {
        CHAIN_DROPS.fetch_add(1, SeqCst);
    }
}

type MailA = Latch<Option<Trust<Chained>>>;
type MailB = Latch<(Option<Trust<Chained>>, Option<Trust<MailA>>)>;

/// A handle forwarded back and forth between two ranks that do not own its property, 40
/// rounds (80 exports from proxies): each export halves the proxy's weight, so past about 30
/// hops the proxies run low and ask their owner for grants (`Grant`, control id 5), and an
/// export at weight 1 waits in its fiber for the answer. Every hop works, and the property
/// is dropped once at the end.
#[test]
fn a_handle_forwarded_many_times_gets_grants() {
    const ROUNDS: u64 = 40;
    CHAIN_DROPS.store(0, SeqCst);
    let r = runtime(6, 3)
        .run(|| {
            let mut h = skein::trustee(5).entrust_new(0u64, Chained);
            let mb_a: Trust<MailA> = skein::trustee(1).entrust_new((), |()| Latch::new(None));
            let mb_b: Trust<MailB> =
                skein::trustee(3).entrust_new((), |()| Latch::new((None, None)));
            mb_b.apply_with(mb_a.clone(), |l, a: Trust<MailA>| l.get_mut().unwrap().1 = Some(a));
            for _ in 0..ROUNDS {
                h.apply_then((), |c, ()| c.0 += 1, |()| {});
                mb_b.apply_with(h, |l, h: Trust<Chained>| l.get_mut().unwrap().0 = Some(h));
                mb_b.launch((), |l, ()| {
                    let h = l.0.take().expect("handle at B");
                    h.apply_then((), |c, ()| c.0 += 1000, |()| {});
                    let a = l.1.as_ref().expect("mailbox of A");
                    a.apply_with(h, |m, h: Trust<Chained>| *m.get_mut().unwrap() = Some(h));
                });
                h = mb_a.apply_local(|m| m.get_mut().unwrap().take()).expect("handle back at A");
            }
            // B's `+1000` requests come from another client than this read: only quiescence
            // orders them before it (requests are ordered per client and trustee only).
            skein::wait_quiescent();
            let v = h.apply((), |c, ()| c.0);
            drop((h, mb_b));
            wait_for(|| CHAIN_DROPS.load(SeqCst) == 1);
            v
        })
        .expect("run");
    assert_eq!(r, ROUNDS * 1001);
    assert_eq!(CHAIN_DROPS.load(SeqCst), 1);
}

static ELEM_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A `TrustArray` value that records where it was built and counts its drops.
struct Elem {
    i: u64,
    built_on: u64,
    hits: u64,
}

impl Drop for Elem {
    fn drop(&mut self) {
        ELEM_DROPS.fetch_add(1, SeqCst);
    }
}

/// `TrustArray::new` from a fiber of a split run builds each part on its trustee (parts of
/// other ranks exported, held through proxies), and `apply`/`apply_then` from every worker
/// of the calling rank reach every value through element requests; the results equal an
/// unsplit run's, and every value is dropped once, on its trustee, at the end.
#[test]
fn trust_array_parts_are_built_on_their_trustees() {
    const LEN: usize = 301;
    let run = |ranks: usize| {
        ELEM_DROPS.store(0, SeqCst);
        let r = runtime(6, ranks)
            .run(|| {
                let a = skein::TrustArray::new(LEN, 7u64, |k, i| Elem {
                    i: i as u64 * k,
                    built_on: skein::current_worker() as u64,
                    hits: 0,
                });
                let hs: Vec<_> = (0..2)
                    .map(|g| {
                        let a = a.clone();
                        skein::spawn_local_on(g, move || {
                            for i in 0..LEN {
                                a.apply_then(i, 1u64, |e, k| e.hits += k, |()| {});
                            }
                            (0..LEN).map(|i| a.apply(i, (), |e, ()| e.i)).sum::<u64>()
                        })
                    })
                    .collect();
                let sums: Vec<u64> = hs.into_iter().map(|h| h.join()).collect();
                skein::wait_quiescent();
                let hits: u64 = (0..LEN).map(|i| a.apply(i, (), |e, ()| e.hits)).sum();
                let built: Vec<u64> =
                    (0..LEN).map(|i| a.apply(i, (), |e, ()| e.built_on)).collect();
                let out_of_range = catch_unwind(AssertUnwindSafe(|| a.apply(LEN, (), |e, ()| e.i)));
                (sums, hits, built, out_of_range.is_err())
            })
            .expect("run");
        (r, ELEM_DROPS.load(SeqCst))
    };
    let ((sums, hits, built, refused), drops) = run(3);
    let want: u64 = (0..LEN as u64).map(|i| i * 7).sum();
    assert_eq!(sums, [want, want]);
    assert_eq!(hits, 2 * LEN as u64);
    assert!(refused, "an index out of bounds was accepted");
    assert_eq!(drops, LEN, "every value dropped once");
    // Split: values of other ranks were built by their trustees; on rank 0, by the caller.
    for (i, &w) in built.iter().enumerate() {
        let t = (i % 6) as u64;
        let want = if t < 2 { 0 } else { t };
        assert_eq!(w, want, "value {i} built on worker {w}");
    }
    let ((sums1, hits1, _, _), drops1) = run(1);
    assert_eq!((sums1, hits1, drops1), (vec![want, want], 2 * LEN as u64, LEN));
}

static THEN_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A property that records where it was built and counts its drops in [`THEN_DROPS`].
struct Built {
    v: u64,
    built_on: u64,
}

impl Drop for Built {
    fn drop(&mut self) {
        THEN_DROPS.fetch_add(1, SeqCst);
    }
}

/// `entrust_new_then` from delegated context (a continuation on worker 0) towards every
/// worker: each value is built on its trustee, the continuation runs on the caller's worker
/// with a handle that works (a proxy for another rank's property), and each property is
/// dropped exactly once. The same on one process and on 2 and 3 fake ranks.
#[test]
fn entrust_new_then_from_delegated_context_builds_on_every_trustee() {
    let run = |ranks: usize| {
        THEN_DROPS.store(0, SeqCst);
        let r = runtime(6, ranks)
            .run(|| {
                let n = skein::num_workers();
                let held = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
                let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
                let hub = skein::trustee(1).entrust(0u8);
                let (held2, seen2) = (held.clone(), seen.clone());
                hub.apply_then(
                    (),
                    |_, ()| (),
                    move |()| {
                        assert!(skein::in_delegated_context());
                        for g in 0..n {
                            let (held, seen) = (held2.clone(), seen2.clone());
                            let f = |k: u64| Built {
                                v: k * 10,
                                built_on: skein::current_worker() as u64,
                            };
                            skein::trustee(g).entrust_new_then(g as u64, f, move |t| {
                                let here = skein::current_worker() as u64;
                                t.apply_then(
                                    (),
                                    |b, ()| {
                                        b.v += 1;
                                        (b.v, b.built_on)
                                    },
                                    move |(v, on)| seen.borrow_mut().push((v, on, here)),
                                );
                                held.borrow_mut().push(t);
                            });
                        }
                    },
                );
                wait_for(|| seen.borrow().len() == n);
                skein::wait_quiescent();
                let mut seen = seen.borrow().clone();
                seen.sort_unstable();
                // Each handle still works from the fiber; then all are dropped.
                let sum: u64 =
                    held.borrow().iter().map(|t| t.apply((), |b: &mut Built, ()| b.v)).sum();
                held.borrow_mut().clear();
                (seen, sum)
            })
            .expect("run");
        (r, THEN_DROPS.load(SeqCst))
    };
    for ranks in [1, 2, 3] {
        let ((seen, sum), drops) = run(ranks);
        let want: Vec<(u64, u64, u64)> = (0..6).map(|g| (g * 10 + 1, g, 0)).collect();
        assert_eq!(seen, want, "{ranks} rank(s): built on each trustee, continued on worker 0");
        assert_eq!(sum, (0..6).map(|g| g * 10 + 1).sum::<u64>(), "{ranks} rank(s)");
        assert_eq!(drops, 6, "{ranks} rank(s): every property dropped once");
    }
}

/// A panic of `f` (on its trustee, of any rank) or of the continuation fails the run, naming
/// what panicked; the continuation of a failed build does not run.
#[test]
fn entrust_new_then_panics_fail_the_run() {
    for ranks in [1, 2] {
        let ran = std::sync::Arc::new(AtomicUsize::new(0));
        let ran2 = ran.clone();
        let e = runtime(4, ranks)
            .run(move || {
                skein::trustee(3).entrust_new_then(
                    (),
                    |()| -> u64 { panic!("deliberate build panic") },
                    move |_t| {
                        ran2.fetch_add(1, SeqCst);
                    },
                );
                skein::wait_quiescent();
            })
            .expect_err("a panic of f fails the run")
            .to_string();
        assert!(e.contains("entrust_new_then closure panicked"), "{ranks}: {e}");
        assert!(e.contains("deliberate build panic"), "{ranks}: {e}");
        if ranks == 2 {
            assert!(e.contains("rank 1 worker 3"), "{ranks}: {e}");
        }
        assert_eq!(ran.load(SeqCst), 0, "{ranks}: the continuation of a failed build ran");
        let e = runtime(4, ranks)
            .run(|| {
                skein::trustee(3).entrust_new_then(1u64, |k| k, |_t| panic!("deliberate then"));
                skein::wait_quiescent();
            })
            .expect_err("a panic of the continuation fails the run")
            .to_string();
        assert!(e.contains("entrust_new_then continuation panicked"), "{ranks}: {e}");
        assert!(e.contains("deliberate then"), "{ranks}: {e}");
    }
}

static PART_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A `TrustArray::new_then` value that records where it was built and counts its drops.
struct PartElem {
    i: u64,
    built_on: u64,
}

impl Drop for PartElem {
    fn drop(&mut self) {
        PART_DROPS.fetch_add(1, SeqCst);
    }
}

/// `TrustArray::new_then` from delegated context: the continuation runs on the calling worker
/// once every part is built (parts of other ranks on their trustees, parts of this rank by the
/// caller), never before `new_then` returns; every value is reachable and dropped once. The
/// same on one process and on 2 and 3 fake ranks; a panic of `init` on another rank fails the
/// run without running the continuation.
#[test]
fn trust_array_new_then_from_delegated_context() {
    const LEN: usize = 100;
    let run = |ranks: usize| {
        PART_DROPS.store(0, SeqCst);
        let r = runtime(6, ranks)
            .run(|| {
                let got = std::rc::Rc::new(std::cell::RefCell::new(None));
                let got2 = got.clone();
                let hub = skein::trustee(1).entrust(0u8);
                hub.apply_then(
                    (),
                    |_, ()| (),
                    move |()| {
                        let returned = std::rc::Rc::new(std::cell::Cell::new(false));
                        let r2 = returned.clone();
                        let f = |k: u64, i: usize| PartElem {
                            i: i as u64 * k,
                            built_on: skein::current_worker() as u64,
                        };
                        skein::TrustArray::new_then(LEN, 3u64, f, move |a| {
                            assert!(r2.get(), "the continuation ran inside new_then");
                            *got2.borrow_mut() = Some((a, skein::current_worker()));
                        });
                        returned.set(true);
                    },
                );
                wait_for(|| got.borrow().is_some());
                let (a, continued_on) = got.borrow_mut().take().expect("the array");
                let sum: u64 = (0..LEN).map(|i| a.apply(i, (), |e, ()| e.i)).sum();
                let built: Vec<u64> =
                    (0..LEN).map(|i| a.apply(i, (), |e, ()| e.built_on)).collect();
                (sum, built, continued_on, a.len(), skein::local_workers())
            })
            .expect("run");
        (r, PART_DROPS.load(SeqCst))
    };
    for ranks in [1, 2, 3] {
        // (`SKEIN_LOOPBACK_RANKS` may split the "one rank" run too.)
        let ((sum, built, continued_on, len, local), drops) = run(ranks);
        assert_eq!(sum, (0..LEN as u64).map(|i| i * 3).sum::<u64>(), "{ranks} rank(s)");
        assert_eq!((continued_on, len, drops), (0, LEN, LEN), "{ranks} rank(s)");
        for (i, &w) in built.iter().enumerate() {
            let t = (i % 6) as u64;
            let want = if (t as usize) < local { 0 } else { t };
            assert_eq!(w, want, "{ranks} rank(s): value {i} built on worker {w}");
        }
    }
    let ran = std::sync::Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let e = runtime(4, 2)
        .run(move || {
            skein::TrustArray::new_then(
                8,
                (),
                |(), i| -> u64 {
                    assert!(skein::current_worker() != 3, "deliberate init panic");
                    i as u64
                },
                move |_a| {
                    ran2.fetch_add(1, SeqCst);
                },
            );
            skein::wait_quiescent();
        })
        .expect_err("a panic of init fails the run")
        .to_string();
    assert!(e.contains("TrustArray::new_then part panicked"), "{e}");
    assert!(e.contains("rank 1 worker 3") && e.contains("deliberate init panic"), "{e}");
    assert_eq!(ran.load(SeqCst), 0, "the continuation of a failed array ran");
}
