//! The owner side of `docs/rack-mode.md` §5 wired into a loopback split: every trustee's
//! export table lives in the run state, a `Release` control record from another fake rank is
//! held until the requests its snapshot counts have been served, then returns its weight
//! (the export count dropped, the property freed exactly once); a `Release` naming a stale
//! export refuses the envelope, naming the rank; exports still live at the end of a run are
//! dropped there. The exports are made by hand here, except in the last test, which forges a
//! proxy handle (the importer side, `tests/proxy.rs` through the public API).

use super::{wire_target, W0};
use crate::runtime::context;
use crate::sync::Ordering;
use crate::wire::envelope::{release_body, CONTROL_RELEASE};
use crate::Runtime;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A property value that records its drop.
struct Counted {
    n: u64,
    drops: &'static AtomicUsize,
    at_drop: &'static AtomicU64,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.at_drop.store(self.n, SeqCst);
        self.drops.fetch_add(1, SeqCst);
    }
}

fn runtime() -> Runtime {
    Runtime::builder().workers(4).loopback_ranks(2).build().expect("runtime")
}

/// Requests worker 2 (rank 1) sends before dropping its handle.
const N: u64 = 3000;

static HELD: Mutex<Option<crate::Trust<Counted>>> = Mutex::new(None);
static DROPS: AtomicUsize = AtomicUsize::new(0);
static AT_DROP: AtomicU64 = AtomicU64::new(u64::MAX);
static RELEASE_SENT: AtomicBool = AtomicBool::new(false);

/// Sends a `Release` of `weight` to export `(slot, gen)` of trustee 0 from the calling worker,
/// with the snapshot of what rank 1's workers (2 and 3) have issued to trustee 0.
fn send_release(slot: u64, gen: u64, weight: u64) {
    let w = context::expect("test");
    let issued: Vec<u64> =
        (2..4).map(|c| w.run_state.counters[c].issued[0].load(Ordering::Acquire)).collect();
    w.send_control::<CONTROL_RELEASE>(
        0,
        wire_target(slot as u32, gen as u32),
        release_body(weight, &issued),
    );
}

/// Hard case 2 of `docs/rack-mode.md` §5.3 without handle travel: worker 2 queues N requests
/// and drops its handle, the owner drops its own: the export count keeps the property alive
/// (still there at quiescence); worker 3 then sends the `Release`; the property is dropped
/// once, after the N requests, and only after the `Release`.
#[test]
fn release_returns_weight_after_the_snapshot_requests() {
    let r = runtime().run(|| {
        let w = context::expect("test");
        let t = crate::trustee(0).entrust_new(0u64, |n| Counted {
            n,
            drops: &DROPS,
            at_drop: &AT_DROP,
        });
        let ex = w.run_state.exports[0].export(t.prop_ptr()).expect("export");
        assert_eq!(ex.weight, W0);
        *HELD.lock().unwrap() = Some(t.clone());
        drop(t);
        // Worker 2 (rank 1) queues N requests and drops the handle without waiting.
        crate::spawn_on(2, N, |n| {
            let h = HELD.lock().unwrap().take().expect("handle");
            for _ in 0..n {
                h.apply_then((), |c: &mut Counted, ()| c.n += 1, |()| {});
            }
        })
        .join();
        crate::wait_quiescent();
        // Every local count is gone; the export count holds the property.
        let early = DROPS.load(SeqCst);
        RELEASE_SENT.store(true, SeqCst);
        crate::spawn_on(3, [u64::from(ex.slot), u64::from(ex.gen), ex.weight], |[s, g, wt]| {
            send_release(s, g, wt)
        })
        .join();
        let start = Instant::now();
        while DROPS.load(SeqCst) == 0 && start.elapsed() < Duration::from_secs(30) {
            crate::yield_now();
        }
        (early, DROPS.load(SeqCst), AT_DROP.load(SeqCst))
    });
    assert_eq!(r.expect("run"), (0, 1, N));
    assert_eq!(DROPS.load(SeqCst), 1, "dropped exactly once");
}

static FORGED_DROPS: AtomicUsize = AtomicUsize::new(0);
static FORGED_AT: AtomicU64 = AtomicU64::new(7);

/// A `Release` naming a stale generation refuses the envelope: the run fails, naming the
/// sending rank and the export. An aborted run may leak the property (its pending frees
/// wait for requests that were lost), never free it twice.
#[test]
fn forged_release_is_refused_naming_the_rank() {
    let r = runtime().run(|| {
        let w = context::expect("test");
        let t = crate::trustee(0).entrust_new(7u64, |n| Counted {
            n,
            drops: &FORGED_DROPS,
            at_drop: &FORGED_AT,
        });
        let ex = w.run_state.exports[0].export(t.prop_ptr()).expect("export");
        drop(t);
        let bad = [u64::from(ex.slot), u64::from(ex.gen) + 1, ex.weight];
        crate::spawn_on(3, bad, |[s, g, wt]| send_release(s, g, wt)).join();
        crate::wait_quiescent();
    });
    let e = r.expect_err("a forged release must fail the run").to_string();
    assert!(e.contains("bad batch from rank 1") && e.contains("generation"), "{e}");
    assert!(FORGED_DROPS.load(SeqCst) <= 1, "dropped at most once");
}

static END_DROPS: AtomicUsize = AtomicUsize::new(0);
static END_AT: AtomicU64 = AtomicU64::new(0);

/// An export never returned is dropped at the end of the run (`Owner::end_of_run`), once.
#[test]
fn live_exports_are_dropped_at_the_end_of_the_run() {
    let r = runtime().run(|| {
        let w = context::expect("test");
        let t = crate::trustee(0).entrust_new(5u64, |n| Counted {
            n,
            drops: &END_DROPS,
            at_drop: &END_AT,
        });
        w.run_state.exports[0].export(t.prop_ptr()).expect("export");
        drop(t);
        crate::wait_quiescent();
        END_DROPS.load(SeqCst)
    });
    assert_eq!(r.expect("run"), 0, "held by the export count during the run");
    assert_eq!(END_DROPS.load(SeqCst), 1);
    assert_eq!(END_AT.load(SeqCst), 5);
}

static HOLD_DROPS: AtomicUsize = AtomicUsize::new(0);
static HOLD_AT: AtomicU64 = AtomicU64::new(0);
static OTHER: Mutex<Option<crate::Trust<u64>>> = Mutex::new(None);

/// Sends a `Release` of `weight` to export `(slot, gen)` of trustee 0 whose snapshot counts
/// `ahead` more requests from worker 2 than it has issued yet.
fn send_release_ahead(slot: u64, gen: u64, weight: u64, ahead: u64) {
    let w = context::expect("test");
    let issued: Vec<u64> = (2..4)
        .map(|c| w.run_state.counters[c].issued[0].load(Ordering::Acquire))
        .enumerate()
        .map(|(i, n)| if i == 0 { n + ahead } else { n })
        .collect();
    w.send_control::<CONTROL_RELEASE>(
        0,
        wire_target(slot as u32, gen as u32),
        release_body(weight, &issued),
    );
}

/// The owner holds a `Release` until it has served as many requests from each client as the
/// snapshot counts: a `Release` counting N requests of worker 2 that are not issued yet
/// leaves the property alive through quiescence; once worker 2 has sent them (to another
/// property of the same trustee: the count is per pair), the return is applied.
#[test]
fn release_waits_for_the_requests_its_snapshot_counts() {
    const AHEAD: u64 = 5;
    let r = runtime().run(|| {
        let w = context::expect("test");
        let t = crate::trustee(0).entrust_new(1u64, |n| Counted {
            n,
            drops: &HOLD_DROPS,
            at_drop: &HOLD_AT,
        });
        *OTHER.lock().unwrap() = Some(crate::trustee(0).entrust_new(0u64, |n| n));
        let ex = w.run_state.exports[0].export(t.prop_ptr()).expect("export");
        drop(t);
        let arg = [u64::from(ex.slot), u64::from(ex.gen), ex.weight, AHEAD];
        crate::spawn_on(3, arg, |[s, g, wt, a]| send_release_ahead(s, g, wt, a)).join();
        crate::wait_quiescent();
        let held = HOLD_DROPS.load(SeqCst);
        crate::spawn_on(2, AHEAD, |n| {
            let o = OTHER.lock().unwrap().take().expect("handle");
            for _ in 0..n {
                o.apply((), |x: &mut u64, ()| *x += 1);
            }
        })
        .join();
        let start = Instant::now();
        while HOLD_DROPS.load(SeqCst) == 0 && start.elapsed() < Duration::from_secs(30) {
            crate::yield_now();
        }
        (held, HOLD_DROPS.load(SeqCst))
    });
    assert_eq!(r.expect("run"), (0, 1), "held through quiescence, then applied");
    assert_eq!(HOLD_DROPS.load(SeqCst), 1);
    assert_eq!(HOLD_AT.load(SeqCst), 1);
}

/// A request through a proxy handle whose `(slot, gen)` names no live export of its trustee (a
/// forged generation, a slot never made) refuses the envelope: the run fails, naming the
/// sending rank and the reason, and nothing runs on a wrong value.
#[test]
fn forged_proxy_targets_are_refused_naming_the_rank() {
    use crate::runtime::proxy::Proxy;
    for (bump_slot, bump_gen, what) in [(0, 1, "generation"), (1000, 0, "out of range")] {
        let r = runtime().run(move || {
            let w = context::expect("test");
            let t = crate::trustee(2).entrust_new(7u64, |n| n);
            assert!(t.is_proxy(), "a handle of another rank is a proxy");
            assert_eq!(t.apply((), |x: &mut u64, ()| *x), 7);
            let (owner, (slot, gen)) = (t.proxy().owner(), t.proxy().target());
            let p = Proxy::receive_on(
                w.rank as u32,
                owner,
                slot + bump_slot,
                gen + bump_gen,
                1,
                w.run_id,
                w.n,
            )
            .expect("proxy");
            let forged: crate::Trust<u64> = crate::Trust::from_proxy(p, owner, w.run_id);
            forged.apply_then((), |x: &mut u64, ()| *x += 1, |()| {});
            crate::wait_quiescent();
        });
        let e = r.expect_err("a forged target must fail the run").to_string();
        assert!(e.contains("bad batch from rank 0") && e.contains(what), "{e}");
    }
}

/// A proxy naming a *live* export of another type (here a `u64` property addressed as a
/// `u32`) refuses the envelope before the record runs: the owner compares the type the
/// record's table was made for with the type its export recorded.
#[test]
fn a_live_export_of_another_type_is_refused() {
    use crate::runtime::proxy::Proxy;
    let r = runtime().run(move || {
        let w = context::expect("test");
        let t = crate::trustee(2).entrust_new(7u64, |n| n);
        assert!(t.is_proxy(), "a handle of another rank is a proxy");
        let (owner, (slot, gen)) = (t.proxy().owner(), t.proxy().target());
        let p =
            Proxy::receive_on(w.rank as u32, owner, slot, gen, 1, w.run_id, w.n).expect("proxy");
        let forged: crate::Trust<u32> = crate::Trust::from_proxy(p, owner, w.run_id);
        forged.apply_then((), |x: &mut u32, ()| *x += 1, |()| {});
        crate::wait_quiescent();
        drop(t);
    });
    let e = r.expect_err("a target of another type must fail the run").to_string();
    assert!(
        e.contains("bad batch from rank 0") && e.contains("holds a u64, the record is for a u32"),
        "{e}"
    );
}

/// The serving trustee checks each record's target, in uniform segments too (run in one loop,
/// `RemoteVTable::run_uniform`), and remembers only the last `(target word, table)` whose type
/// check passed: batches whose records alternate between two exports, and between two
/// tables on one export, are served record by record in order; a record of another type
/// after records that passed on the same export is refused before it runs.
#[test]
fn batches_alternating_between_targets_and_tables_are_checked_per_record() {
    const K: u64 = 2000;
    let r = runtime().run(move || {
        let a = crate::trustee(2).entrust_new(0u64, |n| n);
        let b = crate::trustee(2).entrust_new(0u64, |n| n);
        assert!(a.is_proxy() && b.is_proxy());
        // One table, two targets: uniform segments whose target words alternate.
        for i in 0..K {
            let t = if i % 2 == 0 { &a } else { &b };
            t.apply_then(i, |x: &mut u64, i| *x += i, |()| {});
        }
        crate::wait_quiescent();
        // Two tables on the same two targets: mixed segments.
        for i in 0..K {
            let t = if i % 2 == 0 { &a } else { &b };
            t.apply_then(i, |x: &mut u64, i| *x += i, |()| {});
            t.apply_then(1u32, |x: &mut u64, one| *x += u64::from(one), |()| {});
        }
        crate::wait_quiescent();
        let even: u64 = 2 * (0..K).filter(|i| i % 2 == 0).sum::<u64>() + K / 2;
        let odd: u64 = 2 * (0..K).filter(|i| i % 2 == 1).sum::<u64>() + K / 2;
        assert_eq!(a.apply((), |x: &mut u64, ()| *x), even);
        assert_eq!(b.apply((), |x: &mut u64, ()| *x), odd);
    });
    r.expect("alternating targets and tables are served");

    use crate::runtime::proxy::Proxy;
    static RAN: AtomicUsize = AtomicUsize::new(0);
    // The forged record in the batch of the good ones (a mixed segment), or in a batch of
    // its own after them (a uniform segment, run in one loop).
    for own_batch in [false, true] {
        let r = runtime().run(move || {
            let w = context::expect("test");
            let t = crate::trustee(2).entrust_new(7u64, |n| n);
            let (owner, (slot, gen)) = (t.proxy().owner(), t.proxy().target());
            let p = Proxy::receive_on(w.rank as u32, owner, slot, gen, 1, w.run_id, w.n)
                .expect("proxy");
            let forged: crate::Trust<u32> = crate::Trust::from_proxy(p, owner, w.run_id);
            // Records of the u64 table pass the check (and are remembered); one of the u32
            // table on the same export must still be refused.
            for _ in 0..10 {
                t.apply_then((), |x: &mut u64, ()| *x += 1, |()| {});
            }
            if own_batch {
                assert_eq!(t.apply((), |x: &mut u64, ()| *x), 17);
            }
            for _ in 0..3 {
                forged.apply_then((), |_: &mut u32, ()| _ = RAN.fetch_add(1, SeqCst), |()| {});
            }
            crate::wait_quiescent();
            drop(t);
        });
        let e = r.expect_err("a target of another type must fail the run").to_string();
        assert!(e.contains("holds a u64, the record is for a u32"), "{own_batch}: {e}");
        assert_eq!(RAN.load(SeqCst), 0, "{own_batch}: the refused record ran");
    }
}
