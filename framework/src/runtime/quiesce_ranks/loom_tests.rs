use super::*;
use crate::sync::proto::{self, AtomicU64};
use loom::sync::Arc as LoomArc;

const TASKS: u64 = 3;
const ROUNDS: u64 = 3;

/// The detector of one rank, polled from its worker's idle loop.
struct Rank {
    det: Detector<ThreadsAllReduce>,
    counters: LoomArc<Vec<WorkerCounters>>,
    verdicts: Vec<Verdict>,
    stopped: bool,
    /// How every step may post (`Post::UnlessWasted`: as the worker loop over the rings).
    post: Post,
}

impl Rank {
    fn new(
        a: ThreadsAllReduce,
        counters: LoomArc<Vec<WorkerCounters>>,
        early: bool,
        post: Post,
    ) -> Rank {
        let det = Detector::new(a);
        let det = if early { det.with_wave2_before_all_reduce() } else { det };
        Rank { det, counters, verdicts: Vec::new(), stopped: false, post }
    }

    fn done(&self) -> bool {
        self.stopped || self.det.round() >= ROUNDS
    }

    /// One idle pass: a detector step (if still detecting), then let the other run.
    fn idle(&mut self) {
        if !self.done() {
            if let Some(v) = self.det.step(&self.counters[..], self.post) {
                self.verdicts.push(v);
                // No waiters in this job: a positive verdict stops the rank.
                self.stopped = v.quiescent;
            }
        }
        loom::thread::yield_now();
    }

    fn finish(mut self) -> Vec<Verdict> {
        while !self.done() {
            self.idle();
        }
        self.verdicts
    }
}

/// Returns how many explored executions ended with a positive verdict.
fn model(early: bool, post: Post) -> usize {
    let positive = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = positive.clone();
    loom::model(move || {
        // Global worker ids: 0 on rank 0, 1 on rank 1 (`issued` is indexed by them).
        let c0: LoomArc<Vec<WorkerCounters>> = LoomArc::new(vec![WorkerCounters::new(2)]);
        let c1: LoomArc<Vec<WorkerCounters>> = LoomArc::new(vec![WorkerCounters::new(2)]);
        let req = LoomArc::new(AtomicU64::new(0));
        let resp = LoomArc::new(AtomicU64::new(0));
        let mut group = ThreadsAllReduce::group(2);
        let a1 = group.pop().expect("rank 1");
        let a0 = group.pop().expect("rank 0");
        proto::bump(&c0[0].created, 1); // `Runtime::run` creates main

        let (req1, resp1) = (req.clone(), resp.clone());
        let rank1 = loom::thread::spawn(move || {
            let mut r = Rank::new(a1, c1.clone(), early, post);
            while req1.load(Ordering::Acquire) == 0 {
                r.idle();
            }
            proto::bump(&c1[0].created, 1); // the delegated closure spawns a fiber
            resp1.store(1, Ordering::Release); // the response is sent
            proto::bump(&c1[0].finished, 1); // the fiber runs to its end
            r.finish()
        });

        let mut r = Rank::new(a0, c0.clone(), early, post);
        proto::bump(&c0[0].issued[1], 1); // main queues the request
        req.store(1, Ordering::Release); // the envelope is sent
        proto::bump(&c0[0].finished, 1); // main returns
        while resp.load(Ordering::Acquire) == 0 {
            r.idle();
        }
        proto::bump(&c0[0].finished, 1); // the completion has run
        let v0 = r.finish();
        let v1 = rank1.join().unwrap();

        assert_eq!(v0, v1, "the ranks disagree");
        for v in v0.iter().filter(|v| v.quiescent) {
            assert_eq!(
                v.created, TASKS,
                "quiescence declared while the job was still running: {v:?}"
            );
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    positive.load(std::sync::atomic::Ordering::Relaxed)
}

/// The pipelined waves: every positive verdict is true, and the ranks agree.
#[test]
fn loom_ranks_pipelined_waves() {
    // Some executions detect the end (the check above is not vacuous).
    assert!(model(false, Post::Yes) > 0, "no execution detected quiescence");
}

/// The same with every post that would be wasted held back (a rank with a task open: rank 0
/// while it awaits its response, rank 1 while its fiber runs): still only true verdicts, the
/// ranks agree, and the end is still detected.
#[test]
fn loom_ranks_pipelined_waves_holding_wasted_posts() {
    assert!(model(false, Post::UnlessWasted) > 0, "no execution detected quiescence");
}

/// Wave 2 read before the all-reduce completes (each rank's own two waves, then summed)
/// must be caught declaring quiescence while the request is on its way.
#[test]
#[should_panic(expected = "quiescence declared while the job was still running")]
fn loom_ranks_wave2_before_all_reduce_is_wrong() {
    model(true, Post::Yes);
}
