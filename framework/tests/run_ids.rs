//! Run ids are small and reused; they are held while a run's handles exist. In its own test
//! binary: the exhaustion test holds every id for a moment, which would fail runs of other
//! tests in the same process.

use skein::{Error, Runtime, Trust};
use std::panic::{catch_unwind, AssertUnwindSafe};

fn one_worker() -> Runtime {
    Runtime::builder().workers(1).build().unwrap()
}

#[test]
fn ids_are_held_while_handles_live_and_reused_after() {
    // A kept handle holds its run's id through hundreds of later runs (ids rotate), and every
    // one of those refuses it.
    let kept: Trust<u64> = one_worker().run_local(|| skein::trustee(0).entrust(7)).unwrap();
    for i in 0..300 {
        let h = kept.clone();
        let refused = one_worker()
            .run(move || {
                let own = skein::trustee(0).entrust(i as u64);
                assert_eq!(own.apply((), |x, ()| *x), i as u64);
                catch_unwind(AssertUnwindSafe(|| h.apply((), |x, ()| *x))).is_err()
            })
            .unwrap();
        assert!(refused, "run {i} accepted a handle of another run");
    }
    // Runs that end with live handles keep their ids until the handles go: at most 127 at a
    // time (one of them is `kept`'s).
    let mut held = vec![kept];
    let err = loop {
        match one_worker().run_local(|| skein::trustee(0).entrust(0u64)) {
            Ok(h) => held.push(h),
            Err(e) => break e,
        }
        assert!(held.len() <= 127, "more than 127 run ids held at once");
    };
    assert!(matches!(err, Error::TooManyRuns), "{err}");
    assert_eq!(held.len(), 127);
    assert!(err.to_string().contains("drop the handles"), "{err}");
    held.clear();
    // All ids are free again.
    let v: Vec<Trust<u64>> = (0..127)
        .map(|i| one_worker().run_local(move || skein::trustee(0).entrust(i)).unwrap())
        .collect();
    assert_eq!(v.len(), 127);
}
