use super::*;

/// Splitmix64: the tests' seeded source of choices.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn threads_all_reduce_sums_in_one_thread_with_ranks_at_different_rounds() {
    let mut g = ThreadsAllReduce::group(3);
    let mut rng = Rng(7);
    let mut done = [0u64; 3];
    let mut pending = [false; 3];
    let rounds = 200;
    while done.iter().any(|&d| d < rounds) {
        let r = rng.below(3);
        if done[r] == rounds {
            continue;
        }
        if !pending[r] {
            // Round i: rank r gives [i, r, 1].
            g[r].start(&[done[r], r as u64, 1]);
            pending[r] = true;
        } else if let Some(s) = g[r].test() {
            assert_eq!(s, &[3 * done[r], 3, 3][..], "rank {r}, round {}", done[r]);
            pending[r] = false;
            done[r] += 1;
        }
    }
    // Every round was collected by every rank: nothing is left in the table.
    g[0].with_state(|st| {
        assert!(st.rounds.is_empty());
        assert_eq!(st.base, rounds);
    });
}

#[test]
fn threads_all_reduce_waits_for_every_rank_and_never_blocks() {
    let mut g = ThreadsAllReduce::group(2);
    assert_eq!(g[0].test(), None, "nothing outstanding");
    g[0].start(&[5]);
    for _ in 0..3 {
        assert_eq!(g[0].test(), None, "rank 1 has not contributed");
    }
    g[1].start(&[u64::MAX]);
    assert_eq!(g[0].test(), Some(&[4u64][..]), "wrapping sum");
    assert_eq!(g[0].test(), None, "collected");
    assert_eq!(g[1].test(), Some(&[4u64][..]));
}

#[test]
fn threads_all_reduce_across_threads() {
    let handles: Vec<_> = ThreadsAllReduce::group(4)
        .into_iter()
        .map(|mut h| {
            std::thread::spawn(move || {
                for i in 0..300u64 {
                    h.start(&[i * (h.rank() as u64 + 1), 1]);
                    let s = loop {
                        if let Some(s) = h.test() {
                            break s.to_vec();
                        }
                        std::thread::yield_now();
                    };
                    assert_eq!(s, vec![i * 10, 4]);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// What the worker loop will hand the detector: a run's counters and its `main_done`.
#[test]
fn run_state_counters_are_summed_over_the_rank() {
    use crate::runtime::run_state::Config;
    use crate::sync::proto;
    let cfg = Config {
        workers: 3,
        fibers_per_worker: 1,
        pin: false,
        stack_size: 64 * 1024,
        worker_stack_size: 64 * 1024,
        slot_overflow: crate::channel::slot::DEFAULT_OVERFLOW,
        loopback_ranks: 1,
        loopback_corrupt: None,
        rack_transport: crate::transport::RackTransport::Auto,
        anatomy: false,
        round_ends: false,
        aggregate: true,
        envelope_batches: 4,
        rack_batch_bytes: 4032,
        crowded_waits: crate::runtime::idle::Crowded::Off,
        stall_secs: 0,
        worker_threads: 0,
    };
    let rs =
        RunState::start(cfg, crate::runtime::run_state::Split::InProcess, None).expect("a run id");
    let c = &rs.counters;
    proto::bump(&c[0].created, 2);
    proto::bump(&c[1].issued[2], 3);
    proto::bump(&c[2].issued[0], 4);
    proto::bump(&c[1].finished, 5);
    proto::bump(&c[2].finished, 1);
    proto::set(&c[2].parked, 2);
    proto::set(&c[0].quiesce_waiters, 1);
    proto::set(&c[0].parked, 1);
    assert_eq!((rs.created(), rs.finished()), (9, 6));
    let g = Gauges { parked: 3, quiesce_waiters: 1, main_done: false, ..Gauges::default() };
    assert_eq!(rs.gauges(), g);
    rs.main_done.store(true, Ordering::Release);
    assert_eq!(rs.gauges(), Gauges { main_done: true, ..g });
}

/// The actions every rank takes on a verdict.
#[test]
fn verdict_actions() {
    let g = Gauges { main_done: true, ..Gauges::default() };
    let v = Verdict {
        detection: 4,
        quiescent: true,
        finished: 7,
        created: 7,
        gauges: g,
        last_work_ns: 0,
    };
    assert_eq!(v.action(), Action::Stop { deadlock: None });
    assert_eq!(Verdict { quiescent: false, ..v }.action(), Action::Continue);
    let waiters = Gauges { quiesce_waiters: 2, parked: 2, ..g };
    assert_eq!(Verdict { gauges: waiters, ..v }.action(), Action::WakeWaiters);
    let parked = Gauges { parked: 1, ..g };
    assert_eq!(
        Verdict { gauges: parked, ..v }.action(),
        Action::Stop { deadlock: Some((1, true)) }
    );
    let no_main = Gauges { main_done: false, ..g };
    assert_eq!(
        Verdict { gauges: no_main, ..v }.action(),
        Action::Stop { deadlock: Some((0, false)) }
    );
}

#[test]
fn threads_all_reduce_never_completes_a_round_a_rank_left() {
    // A rank leaves only once the process is stopping (its loop ended): the round stays
    // incomplete, and the caller stops on the shutdown flag instead of waiting for it.
    let mut g = ThreadsAllReduce::group(2);
    g.pop();
    g[0].start(&[1]);
    assert!(g[0].test().is_none());
    assert!(g[0].test().is_none(), "still not complete on a second look");
}

#[test]
#[should_panic(expected = "all-reduce 0 with 2 values, another rank gave 1")]
fn threads_all_reduce_refuses_mismatched_lengths() {
    let mut g = ThreadsAllReduce::group(2);
    g[0].start(&[1]);
    g[1].start(&[1, 2]);
}

/// The detector's vector folds by sum below `MAXIMA` and by maximum from there on (the
/// complemented minimum lanes), with 0 the identity of both.
#[test]
fn fold_sums_then_maximizes() {
    let mut acc = vec![0u64; LEN];
    let mut a = vec![1u64; LEN];
    let mut b = vec![u64::MAX; LEN];
    for (i, (a, b)) in a.iter_mut().zip(&mut b).enumerate().skip(MAXIMA) {
        *a = !(5 + i as u64);
        *b = !(7 + i as u64);
    }
    fold(&mut acc, &a);
    fold(&mut acc, &b);
    for (i, &v) in acc.iter().enumerate() {
        let want = if i < MAXIMA { 0 } else { !(5 + i as u64) };
        assert_eq!(v, want, "word {i}");
    }
}
