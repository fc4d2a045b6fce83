use super::*;
use crate::sync::proto::{self, AtomicUsize, UnsafeCell};
use loom::sync::Arc;

/// The trustee of the modelled property.
const TRUSTEE: usize = 0;

/// A property as far as the count is concerned: the real header, and a value whose
/// accesses loom tracks (reads through handles, the final write of the free).
struct Property {
    head: PropHead,
    value: UnsafeCell<u64>,
    /// Frees done (must end at exactly 1).
    frees: AtomicUsize,
}

/// One holder of a handle on worker `me`: issues a request (the `issued` bump of
/// `Worker::request`), uses the property through the handle, and drops the handle; the
/// last one does what the trustee does for it (snapshot, then the free once served).
fn holder(prop: &Property, counters: &[WorkerCounters], me: usize, correct: bool, snap: bool) {
    proto::bump(&counters[me].issued[TRUSTEE], 1);
    // SAFETY: a read, checked by loom against the free's write.
    prop.value.with(|v| assert_eq!(unsafe { *v }, 7, "a handle saw a freed property"));
    let last = if correct {
        drop_ref(&prop.head)
    } else {
        drop_ref_ordered(&prop.head, Ordering::Relaxed, false)
    };
    if last {
        let targets = snapshot_issued(counters, TRUSTEE);
        assert!(
            !snap || targets.iter().all(|&t| t == 1),
            "the free's snapshot misses a request issued before a drop: {targets:?}"
        );
        // The free: drops the value (a write that must come after every handle's use).
        // SAFETY: checked by loom.
        prop.value.with_mut(|v| unsafe { *v = 0 });
        prop.frees.fetch_add(1, Ordering::Relaxed);
    }
}

/// `correct`: the real `drop_ref` (else Relaxed without the fence); `snap`: check the
/// free's snapshot of the `issued` counters.
fn refcount_model(correct: bool, snap: bool) {
    loom::model(move || {
        let counters: Arc<Vec<WorkerCounters>> =
            Arc::new((0..2).map(|_| WorkerCounters::new(2)).collect());
        let prop = Arc::new(Property {
            head: PropHead::new(),
            value: UnsafeCell::new(7),
            frees: AtomicUsize::new(0),
        });
        // Worker 0 clones its handle and moves the clone to worker 1.
        clone_ref(&prop.head);
        let (p1, c1) = (prop.clone(), counters.clone());
        let other = loom::thread::spawn(move || holder(&p1, &c1, 1, correct, snap));
        holder(&prop, &counters, 0, correct, snap);
        other.join().unwrap();
        assert_eq!(prop.frees.load(Ordering::Relaxed), 1, "freed other than once");
    });
}

/// Clone, move to another worker, drop on both, racing for the free: in every
/// interleaving exactly one drop frees, after both handles' uses, with a snapshot that
/// covers both requests.
#[test]
fn loom_refcount_clone_move_drop() {
    refcount_model(true, true);
}

/// A Relaxed decrement without the Acquire fence must be caught: the free's snapshot can
/// miss the other handle's request. Shows that the model is able to fail.
#[test]
#[should_panic(expected = "snapshot misses a request")]
fn loom_refcount_relaxed_drop_misses_a_request() {
    refcount_model(false, true);
}

/// The same broken decrement, snapshot check off: the free races with the other handle's
/// use of the property.
#[test]
#[should_panic(expected = "Causality violation")]
fn loom_refcount_relaxed_drop_is_a_race() {
    refcount_model(false, false);
}

/// A stand-in for a property handed over by a foreign thread.
struct Freed {
    value: Arc<Property>,
}

impl Freed {
    /// The free: a write to the value (checked by loom against the foreign thread's use).
    fn free(self) {
        // SAFETY: checked by loom.
        self.value.value.with_mut(|v| unsafe { *v = 0 });
        self.value.frees.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`ForeignFrees::hand_off`] split into two critical sections (check, then push): wrong,
/// a close between the two loses the free.
fn hand_off_split(ff: &ForeignFrees<Freed>, trustee: usize, p: Freed) -> Option<Freed> {
    let running = ff.list.lock().unwrap().running;
    if !running {
        return Some(p);
    }
    ff.list.lock().unwrap().frees.push((trustee, p));
    ff.pending.store(true, Ordering::Release);
    None
}

/// Returns, per way the free was done (by the trustee, by the run's close, in place by
/// the foreign thread), how many explored executions took it.
fn foreign_model(correct: bool) -> [usize; 3] {
    use std::sync::atomic::AtomicUsize as Count;
    let ways = std::sync::Arc::new([Count::new(0), Count::new(0), Count::new(0)]);
    let seen = ways.clone();
    loom::model(move || {
        let ff: Arc<ForeignFrees<Freed>> = Arc::new(ForeignFrees::new());
        let prop = Arc::new(Property {
            head: PropHead::new(),
            value: UnsafeCell::new(7),
            frees: AtomicUsize::new(0),
        });
        // The foreign thread: uses the property, drops the last handle, hands the free
        // over (or frees in place once the run is closed), as `release_last`.
        let (ff1, p1) = (ff.clone(), prop.clone());
        let foreign = loom::thread::spawn(move || {
            // SAFETY: a read, checked by loom against the free's write.
            p1.value.with(|v| assert_eq!(unsafe { *v }, 7, "used after free"));
            assert!(drop_ref(&p1.head));
            let freed = Freed { value: p1 };
            let back = if correct {
                ff1.hand_off(TRUSTEE, freed)
            } else {
                hand_off_split(&ff1, TRUSTEE, freed)
            };
            if let Some(p) = back {
                p.free();
                2
            } else {
                usize::MAX
            }
        });
        // The trustee's loop: takes its frees when idle, then once more at shutdown
        // (`take_foreign` in `Worker::run_loop`).
        let ff2 = ff.clone();
        let trustee = loom::thread::spawn(move || {
            let mut took = false;
            for _ in 0..2 {
                for p in ff2.take_for(TRUSTEE) {
                    p.free();
                    took = true;
                }
            }
            took
        });
        // `Runtime::run`: joins the workers, then closes the hand-off (`free_leftovers`).
        let mut way = usize::MAX;
        if trustee.join().unwrap() {
            way = 0;
        }
        for p in ff.close() {
            p.free();
            way = 1;
        }
        way = way.min(foreign.join().unwrap());
        assert_eq!(prop.frees.load(Ordering::Relaxed), 1, "freed other than once");
        seen[way].fetch_add(1, Ordering::Relaxed);
    });
    ways.each_ref().map(|c| c.load(Ordering::Relaxed))
}

/// A free handed over by a foreign thread while the trustee runs, shuts down and the run
/// closes: freed exactly once, after the foreign thread's use, in every interleaving.
#[test]
fn loom_foreign_free_hand_off() {
    let ways = foreign_model(true);
    // Every way of freeing happens in some interleaving (the checks are not vacuous).
    assert!(ways.iter().all(|&n| n > 0), "ways taken: {ways:?}");
}

/// Checking `running` and pushing in two critical sections loses the free when the run
/// closes in between: loom must find it.
#[test]
#[should_panic(expected = "freed other than once")]
fn loom_foreign_split_hand_off_loses_the_free() {
    foreign_model(false);
}
