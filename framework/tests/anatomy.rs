//! A round's anatomy (`Builder::anatomy`) and the counters that are always on: envelopes,
//! bytes and requests per destination rank, requests per batch, the detector's steps and
//! all-reduces; and the aggregation of batches to another rank (`Builder::aggregate`), which
//! changes no result. Counts and sums only, never time thresholds.

use skein::{Runtime, Stats, WorkerStats};
use std::time::Instant;

/// Requests each worker of rank 0 sends to the property on the last worker (another rank).
const N: u64 = 3000;

/// Every worker of fake rank 0 adds 1 to a property on the last worker `N` times
/// (`apply_then`, no waiting), then `main` waits for quiescence and reads the sum. Returns
/// the sum, the run's statistics and the run's wall time in nanoseconds.
fn adds(workers: usize, ranks: usize, anatomy: bool, aggregate: bool) -> (u64, Stats, u64) {
    let rt = Runtime::builder()
        .workers(workers)
        .loopback_ranks(ranks)
        .anatomy(anatomy)
        .aggregate(aggregate)
        .build()
        .expect("runtime");
    let start = Instant::now();
    let sum = rt
        .run(move || {
            let far = skein::trustee(workers - 1).entrust_new(0u64, |x| x);
            let local = workers / ranks;
            let fibers: Vec<_> = (0..local)
                .map(|g| {
                    let far = far.clone();
                    skein::spawn_local_on(g, move || {
                        for _ in 0..N {
                            far.apply_then(1u64, |c, a| *c += a, |()| ());
                        }
                    })
                })
                .collect();
            for f in fibers {
                f.join();
            }
            skein::wait_quiescent();
            far.apply((), |c, ()| *c)
        })
        .expect("run");
    (sum, rt.stats(), start.elapsed().as_nanos() as u64)
}

/// The relations every split run's counters keep.
fn check_traffic(stats: &Stats, ranks: usize) {
    let t = stats.total();
    for w in &stats.workers {
        assert_eq!(w.to_ranks.len(), ranks, "{w:?}");
        let sum = |f: fn(&skein::RankTraffic) -> u64| w.to_ranks.iter().map(f).sum::<u64>();
        assert_eq!(sum(|r| r.envelopes), w.envelopes_sent);
        assert_eq!(sum(|r| r.segments), w.segments_sent);
        assert_eq!(sum(|r| r.bytes), w.envelope_bytes_sent);
        assert_eq!(sum(|r| r.requests), w.remote_requests_sent);
        assert_eq!(sum(|r| r.responses), w.responses_sent);
        assert_eq!(sum(|r| r.response_bytes), w.response_bytes_sent);
        // Each envelope carries at least one segment (a batch for one trustee, at most one
        // per trustee of its rank) of at least one request, in at least a header.
        assert!(w.segments_sent >= w.envelopes_sent);
        assert!(w.segments_sent <= w.envelopes_sent * (stats.workers.len() / ranks) as u64);
        assert!(w.remote_requests_sent >= w.segments_sent);
        assert!(w.envelope_bytes_sent >= 64 * w.envelopes_sent);
        assert!(w.all_reduces_completed <= w.all_reduces_posted);
        assert!(w.all_reduces_posted <= w.all_reduces_completed + 1);
    }
    // Every segment is answered by one response envelope (its trustee's), some were
    // forwarded by their landing worker, and every request sent to another rank is served
    // there.
    assert_eq!(t.segments_sent, t.responses_sent);
    assert!(t.segments_forwarded <= t.segments_sent);
    assert!(t.requests_served >= t.remote_requests_sent);
}

#[test]
fn counters_count_envelopes_per_rank_and_the_detector() {
    for aggregate in [false, true] {
        let (sum, stats, _) = adds(4, 2, false, aggregate);
        assert_eq!(sum, 2 * N, "aggregate {aggregate}");
        check_traffic(&stats, 2);
        let w = &stats.workers;
        // Rank 0's workers sent their requests to rank 1 only, none to their own rank.
        for (g, wg) in w.iter().enumerate().take(2) {
            assert_eq!(wg.to_ranks[0].envelopes, 0);
            assert!(wg.to_ranks[1].requests >= N, "worker {g}: {:?}", wg.to_ranks);
            assert!(wg.mean_envelope() >= 1.0);
        }
        // Rank 1's trustee answered them (its responses go to rank 0).
        assert!(w[3].to_ranks[0].responses > 0);
        // The detector runs on the first worker of each rank, and found the run quiescent at
        // least when it stopped it.
        for first in [0, 2] {
            assert!(w[first].detector_steps > 0, "{:?}", w[first]);
            assert!(w[first].all_reduces_completed > 0);
            assert!(w[first].quiescent_verdicts >= 1);
        }
        for other in [1, 3] {
            assert_eq!(w[other].detector_steps, 0);
            assert_eq!(w[other].all_reduces_posted, 0);
        }
        // Timing was off: no part has time.
        assert_eq!(stats.total().anatomy, skein::Anatomy::default());
    }
}

#[test]
fn anatomy_parts_tile_each_workers_loop() {
    let (sum, stats, wall) = adds(4, 2, true, true);
    assert_eq!(sum, 2 * N);
    check_traffic(&stats, 2);
    for (g, w) in stats.workers.iter().enumerate() {
        let a = &w.anatomy;
        let parts = a.parts();
        assert_eq!(parts.len(), 7);
        assert_eq!(parts.iter().map(|(_, ns)| ns).sum::<u64>(), a.total_ns());
        // Every pass of the loop was timed, and the loop ran within the run.
        assert_eq!(a.passes, w.useful_polls + w.idle_polls, "worker {g}: {a:?}");
        assert!(a.total_ns() > 0 && a.total_ns() <= wall, "worker {g}: {a:?}, wall {wall}");
        // Every worker served or issued something, and polled the transport.
        assert!(a.serving_ns > 0 && a.issuing_ns > 0 && a.transport_ns > 0, "worker {g}: {a:?}");
    }
    // The first worker of each rank ran the detector.
    assert!(stats.workers[0].anatomy.detector_ns > 0 && stats.workers[2].anatomy.detector_ns > 0);
}

#[test]
fn one_process_counts_no_envelopes_and_times_its_parts() {
    let (sum, stats, wall) = adds(2, 1, true, true);
    assert_eq!(sum, 2 * N);
    let t: WorkerStats = stats.total();
    assert_eq!((t.envelopes_sent, t.responses_sent, t.remote_requests_sent), (0, 0, 0));
    assert!(stats.workers.iter().all(|w| w.to_ranks.is_empty()));
    let w0 = &stats.workers[0];
    assert!(w0.detector_steps > 0 && w0.quiescent_verdicts >= 1);
    assert_eq!(w0.all_reduces_posted, 0);
    for w in &stats.workers {
        assert_eq!(w.anatomy.passes, w.useful_polls + w.idle_polls);
        assert!(w.anatomy.total_ns() > 0 && w.anatomy.total_ns() <= wall);
        assert_eq!(w.anatomy.transport_ns, 0);
    }
}

/// `main` sends `K` requests to a property of the other fake rank, one per loop pass (it
/// yields after each), then reads the sum. Returns the sum and worker 0's statistics.
fn trickle(aggregate: bool) -> (u64, WorkerStats) {
    const K: u64 = 320;
    let rt = Runtime::builder()
        .workers(2)
        .loopback_ranks(2)
        .aggregate(aggregate)
        .build()
        .expect("runtime");
    let sum = rt
        .run(|| {
            let far = skein::trustee(1).entrust_new(0u64, |x| x);
            for _ in 0..K {
                far.apply_then(1u64, |c, a| *c += a, |()| ());
                skein::yield_now();
            }
            skein::wait_quiescent();
            far.apply((), |c, ()| *c)
        })
        .expect("run");
    assert_eq!(sum, K);
    (sum, rt.stats().workers[0].clone())
}

#[test]
fn aggregation_holds_a_busy_workers_requests_for_fuller_envelopes() {
    // Every pass of worker 0 runs `main` (it yields): the worker never goes idle while it
    // sends, so its requests leave every 16 passes, about 16 to an envelope; not aggregated,
    // each pass sends what it has (as many envelopes as the credits allow).
    let (_, on) = trickle(true);
    assert!(on.remote_requests_sent >= 320, "{on:?}");
    assert!(on.envelopes_aged > 0, "{on:?}");
    assert!(on.envelopes_sent <= 320 / 8 + 4, "{} envelopes: {on:?}", on.envelopes_sent);
    assert!(on.mean_envelope() >= 8.0, "{on:?}");
    let (_, off) = trickle(false);
    assert!(off.remote_requests_sent >= 320);
    assert_eq!(off.envelopes_aged, 0);
}

/// A fiber on every worker makes a property on every worker of the other ranks and sends
/// it `K` numbered requests (`apply_then`, no waiting), which keep the next number expected
/// and count the ones that ran out of order. Returns the run's statistics after checking
/// that every pair's requests ran exactly once, in the order issued.
fn all_to_all(ranks: usize, per_rank: usize, aggregate: bool, batches: u32) -> Stats {
    const K: u32 = 400;
    let n = ranks * per_rank;
    let rt = Runtime::builder()
        .workers(n)
        .loopback_ranks(ranks)
        .aggregate(aggregate)
        .envelope_batches(batches)
        .build()
        .expect("runtime");
    let ends = rt
        .run(move || {
            let fibers: Vec<_> = (0..n)
                .map(|c| {
                    skein::spawn_on(c, (c, n, per_rank), |(c, n, per_rank)| {
                        let props: Vec<_> = (0..n)
                            .filter(|g| g / per_rank != c / per_rank)
                            .map(|g| skein::trustee(g).entrust_new((0u32, 0u32), |x| x))
                            .collect();
                        for k in 0..K {
                            for p in &props {
                                p.apply_then(
                                    k,
                                    |(next, bad), k| match next {
                                        x if *x == k => *x += 1,
                                        _ => *bad += 1,
                                    },
                                    |()| (),
                                );
                            }
                        }
                        let ends: Vec<(u32, u32)> =
                            props.iter().map(|p| p.apply((), |s, ()| *s)).collect();
                        let sum: u64 = ends.iter().map(|e| e.0 as u64).sum();
                        (sum, ends.iter().map(|e| e.1).sum::<u32>())
                    })
                })
                .collect();
            fibers.into_iter().map(|f| f.join()).collect::<Vec<(u64, u32)>>()
        })
        .expect("run");
    for (c, &(sum, bad)) in ends.iter().enumerate() {
        assert_eq!(bad, 0, "client {c}: requests out of order");
        assert_eq!(sum, K as u64 * (n - per_rank) as u64, "client {c}");
    }
    rt.stats()
}

#[test]
fn one_envelope_carries_the_segments_of_every_trustee_of_a_rank() {
    for (ranks, per_rank) in [(2, 2), (2, 4), (3, 2)] {
        for (aggregate, batches) in [(true, 4), (true, 1), (false, 4)] {
            let stats = all_to_all(ranks, per_rank, aggregate, batches);
            check_traffic(&stats, ranks);
            let t = stats.total();
            // Several trustees per envelope, and the landing workers forwarded the segments
            // of the others.
            assert!(t.segments_sent > t.envelopes_sent, "{ranks}x{per_rank}: {t:?}");
            assert!(t.segments_forwarded > 0, "{ranks}x{per_rank}: {t:?}");
            assert!(t.segments_per_envelope() > 1.0);
            assert!(t.requests_per_remote_batch() >= 1.0);
            // Each worker's envelopes went to the other ranks only.
            for (g, w) in stats.workers.iter().enumerate() {
                assert_eq!(w.to_ranks[g / per_rank].envelopes, 0, "worker {g}");
                let k = 400 * per_rank as u64 * (ranks as u64 - 1);
                assert!(w.remote_requests_sent >= k, "worker {g}: {w:?}");
            }
        }
    }
}
