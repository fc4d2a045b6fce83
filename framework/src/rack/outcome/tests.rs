use super::*;

fn ok(v: u8) -> RankReport {
    RankReport { main: Some(Ok(vec![v])), ..RankReport::default() }
}

#[test]
fn the_value_of_main_wins_when_nothing_failed() {
    assert_eq!(decide(&[ok(7), RankReport::default()]), Outcome::Ok(vec![7]));
}

#[test]
fn panics_are_counted_over_ranks_in_rank_order() {
    let r1 = RankReport {
        errors: vec!["fiber panicked: b".into(), "fiber panicked: c".into()],
        ..RankReport::default()
    };
    let mut r0 = ok(1);
    r0.errors = vec!["fiber panicked: a".into()];
    assert_eq!(
        decide(&[r0.clone(), r1.clone()]),
        Outcome::Panicked { first: "fiber panicked: a".into(), count: 3 }
    );
    r0.errors.clear();
    assert_eq!(
        decide(&[r0, r1]),
        Outcome::Panicked { first: "rank 1: fiber panicked: b".into(), count: 2 }
    );
    let main_panic =
        RankReport { main: Some(Err(MainFailure::Panicked("boom".into()))), ..Default::default() };
    assert_eq!(
        decide(&[main_panic]),
        Outcome::Panicked { first: "main fiber panicked: boom".into(), count: 1 }
    );
}

#[test]
fn a_refusal_on_any_rank_is_reported_as_one_not_as_panics() {
    let r1 = RankReport {
        errors: vec!["rank 1 worker 2: bad batch from rank 0: bad token".into()],
        aborted: true,
        ..RankReport::default()
    };
    let first = "rank 1: rank 1 worker 2: bad batch from rank 0: bad token".to_string();
    assert_eq!(decide(&[ok(1), r1]), Outcome::Refused { first: first.clone(), count: 1 });
    let e = Outcome::Refused { first, count: 1 }.into_result().unwrap_err().to_string();
    assert!(e.starts_with("skein run stopped by a refused message (1 error recorded)"), "{e}");
    assert!(!e.contains("panic"), "{e}");
}

#[test]
fn internal_failures_come_first_then_deadlocks() {
    let r1 = RankReport {
        internal: vec!["cannot start worker 3".into()],
        errors: vec!["x".into()],
        ..RankReport::default()
    };
    assert_eq!(decide(&[ok(1), r1]), Outcome::Internal("rank 1: cannot start worker 3".into()));
    let dl = RankReport { deadlock: Some((2, false)), ..RankReport::default() };
    assert_eq!(
        decide(&[RankReport::default(), dl]),
        Outcome::Deadlock { blocked: 2, main_finished: false }
    );
    assert!(matches!(decide(&[RankReport::default()]), Outcome::Internal(_)));
}

#[test]
fn outcomes_become_the_errors_of_one_process() {
    assert_eq!(Outcome::Ok(vec![3]).into_result().unwrap(), vec![3]);
    assert!(matches!(
        Outcome::Panicked { first: "p".into(), count: 2 }.into_result(),
        Err(Error::Panicked { count: 2, .. })
    ));
    assert!(matches!(
        Outcome::Deadlock { blocked: 1, main_finished: false }.into_result(),
        Err(Error::Deadlock { blocked: 1, main_finished: false })
    ));
    assert!(matches!(Outcome::Internal("i".into()).into_result(), Err(Error::Internal(_))));
}

#[test]
fn outcomes_travel_as_bytes() {
    for o in [
        Outcome::Ok(vec![1, 2, 3]),
        Outcome::Panicked { first: "p".into(), count: 2 },
        Outcome::Deadlock { blocked: 1, main_finished: true },
        Outcome::Internal("i".into()),
    ] {
        let b = crate::wire::codec::encode(&o).unwrap();
        assert_eq!(crate::wire::codec::decode::<Outcome>(&b).unwrap(), o);
    }
}

#[test]
fn job_stats_are_every_ranks_workers_in_rank_order() {
    let st = |n: u64| WorkerStats { requests_served: n, ..WorkerStats::default() };
    let reports = [
        RankReport { stats: vec![st(1), st(2)], ..RankReport::default() },
        // A report that did not decode carries no statistics: zeros stand in.
        RankReport::default(),
        RankReport { stats: vec![st(5), st(6)], ..RankReport::default() },
    ];
    let all = job_stats(&reports, 2);
    let served: Vec<u64> = all.iter().map(|s| s.requests_served).collect();
    assert_eq!(served, [1, 2, 0, 0, 5, 6]);
    let d = Decision { outcome: Outcome::Ok(vec![9]), stats: all };
    let b = crate::wire::codec::encode(&d).unwrap();
    assert_eq!(crate::wire::codec::decode::<Decision>(&b).unwrap(), d);
}
