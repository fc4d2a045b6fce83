use super::sim::{run, Setup};

fn setups(early: bool) -> impl Iterator<Item = Setup> {
    (0..600u64).map(move |seed| Setup {
        seed,
        ranks: 2 + (seed % 3) as usize,
        workers: 1 + (seed / 3 % 3) as usize,
        early,
        park_forever: false,
        wake_all: false,
        hold: false,
    })
}

/// (a) no positive verdict while a task is unfinished, (b) a positive verdict within two
/// detections of the job going quiet, (c) every rank the same verdicts in the same
/// rounds: 2-4 ranks of 1-3 workers, 600 seeded schedules.
#[test]
fn pipelined_detector_is_safe_prompt_and_agreed() {
    let (mut wakes, mut tasks) = (0, 0);
    for s in setups(false) {
        let o = run(&s).unwrap_or_else(|e| {
            panic!("seed {} ({} ranks x {} workers): {e}", s.seed, s.ranks, s.workers)
        });
        assert_eq!(o.deadlock, None, "seed {}", s.seed);
        assert!(o.detections >= 1);
        wakes += o.wakes;
        tasks += o.tasks;
    }
    // The schedules did exercise wake-ups and real work.
    assert!(wakes > 600, "{wakes} wake-ups");
    assert!(tasks > 600 * 30, "{tasks} tasks");
}

/// Posts held back while the rank has a task open (`Post::UnlessWasted`, the worker loop's
/// choice over the rings) change none of (a), (b), (c): a held post would have taken part
/// only in negative detections, so the job's quiescence is still found within two detections
/// of it going quiet.
#[test]
fn holding_posts_that_would_be_wasted_keeps_the_detector_safe_prompt_and_agreed() {
    let mut held = 0;
    for s in setups(false).map(|s| Setup { hold: true, ..s }) {
        let o = run(&s).unwrap_or_else(|e| {
            panic!("seed {} ({} ranks x {} workers): {e}", s.seed, s.ranks, s.workers)
        });
        assert_eq!(o.deadlock, None, "seed {}", s.seed);
        held += o.held;
    }
    // The schedules did hold posts back.
    assert!(held > 600, "{held} posts held");
}

/// Reading wave 2 before the all-reduce completes must be caught by the same checks.
#[test]
fn wave2_before_the_all_reduce_is_caught() {
    let failures = setups(true).filter(|s| run(s).is_err()).count();
    assert!(failures > 0, "the broken detector passed every schedule");
}

/// A rank that wakes every waiter it finds when it acts on a verdict (not only those its
/// post counted) must be caught: a rank that acted first starts work that parks a new
/// waiter on a rank that has not acted yet, which then ends that waiter's wait early.
#[test]
fn waking_waiters_the_verdict_did_not_count_is_caught() {
    let failures = setups(false)
        .map(|s| Setup { wake_all: true, ..s })
        .filter(|s| run(s).is_err_and(|e| e.contains("was woken by it")))
        .count();
    assert!(failures > 0, "waking every waiter passed every schedule");
}

/// A fiber parked for good: every rank stops with the same deadlock report.
#[test]
fn deadlock_is_reported_by_every_rank() {
    let mut reported = 0;
    for seed in 0..200 {
        let s = Setup {
            seed,
            ranks: 3,
            workers: 2,
            early: false,
            park_forever: true,
            wake_all: false,
            hold: true,
        };
        let o = run(&s).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        if let Some(d) = o.deadlock {
            assert_eq!(d, (1, true), "seed {seed}");
            reported += 1;
        }
    }
    // Not every schedule reaches the park (the work may end first).
    assert!(reported > 20, "{reported} deadlocks");
}
