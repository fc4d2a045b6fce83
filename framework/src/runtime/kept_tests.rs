//! The slot pairs a runtime keeps from one run to the next (`Runtime::keep_pairs`,
//! `RunState::into_pairs`, `SlotPair::reset`). The runtimes stay unsplit
//! (`loopback_ranks(1)`, whatever `SKEIN_LOOPBACK_RANKS` says: the fibers below capture
//! handles), except the split one's test.

use crate::{Runtime, Trust};
use std::sync::Arc;

/// One blocking request from every worker to every property (one batch per pair and run, so
/// each pair's lane 1 ends the run at sequence 1: a slot kept without its reset would
/// show the next run's trustee a stale batch 1), and the properties' sum.
fn one_request_per_pair(rt: &Runtime) -> u64 {
    rt.run(|| {
        let n = crate::num_workers();
        let props: Arc<Vec<Trust<u64>>> =
            Arc::new((0..n).map(|g| crate::trustee(g).entrust(0u64)).collect());
        let hs: Vec<_> = (0..n)
            .map(|g| {
                let p = props.clone();
                crate::spawn_local_on(g, move || {
                    for t in p.iter() {
                        t.apply((), |c, ()| *c += 1);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join();
        }
        props.iter().map(|t| t.apply((), |c, ()| *c)).sum()
    })
    .expect("the run")
}

/// The address of the first slot pair's lane-1 request data kept by `rt`.
fn kept_at(rt: &Runtime) -> usize {
    let kept = rt.kept_pairs.lock().unwrap();
    kept.as_ref().expect("the run's slots were kept")[1].lane(1).req.data() as usize
}

#[test]
fn the_next_run_takes_the_slots_the_last_one_left_and_starts_them_afresh() {
    let rt = Runtime::builder().workers(4).loopback_ranks(1).build().unwrap();
    assert!(rt.kept_pairs.lock().unwrap().is_none());
    assert_eq!(one_request_per_pair(&rt), 16);
    let first = kept_at(&rt);
    for run in 1..6 {
        assert_eq!(one_request_per_pair(&rt), 16, "run {run}");
        assert_eq!(kept_at(&rt), first, "run {run} made slots of its own");
    }
}

#[test]
fn slots_kept_from_a_failed_run_serve_the_next_one() {
    let rt = Runtime::builder().workers(3).loopback_ranks(1).build().unwrap();
    assert_eq!(one_request_per_pair(&rt), 9);
    let failed = rt.run(|| {
        let t = crate::trustee(1).entrust(0u64);
        t.apply((), |c, ()| -> u64 {
            if *c == 0 {
                panic!("on purpose");
            }
            *c
        })
    });
    assert!(matches!(failed, Err(crate::Error::Panicked { .. })), "{failed:?}");
    assert_eq!(one_request_per_pair(&rt), 9);
}

#[test]
fn slots_of_another_size_are_not_taken() {
    let rt = Runtime::builder().workers(2).loopback_ranks(1).build().unwrap();
    assert_eq!(one_request_per_pair(&rt), 4);
    let other = Runtime::builder().workers(2).loopback_ranks(1).slot_size(4096).build().unwrap();
    let kept = rt.kept_pairs.lock().unwrap().take();
    assert!(kept.as_ref().is_some_and(|k| !k[0].fits(other.cfg.slot_overflow)));
    *other.kept_pairs.lock().unwrap() = kept;
    assert_eq!(one_request_per_pair(&other), 4);
    let mine = other.kept_pairs.lock().unwrap();
    assert!(mine.as_ref().is_some_and(|k| k[0].fits(other.cfg.slot_overflow)));
}

#[test]
fn a_run_split_into_fake_ranks_keeps_its_slots_too() {
    let rt = Runtime::builder().workers(4).loopback_ranks(2).build().unwrap();
    // From the main fiber to a property on every worker: worker 1 through the slots, 2 and 3
    // (the other fake rank) through the loopback transport.
    let run = || {
        rt.run(|| {
            let props: Vec<Trust<u64>> = (0..crate::num_workers())
                .map(|g| crate::trustee(g).entrust_new(1u64, |v| v))
                .collect();
            props.iter().map(|t| t.apply((), |c, ()| *c)).sum::<u64>()
        })
        .expect("the run")
    };
    assert_eq!(run(), 4);
    let first = kept_at(&rt);
    for _ in 0..3 {
        assert_eq!(run(), 4);
        assert_eq!(kept_at(&rt), first);
    }
}
