use super::tests::Rng;
use super::*;
use crate::sync::proto;
use std::sync::atomic::{AtomicI64, AtomicU64 as StdU64, Ordering as O};
use std::sync::mpsc;

enum Msg {
    /// From (rank, worker) to the trustee worker of the receiving rank.
    Request {
        from: (usize, usize),
        trustee: usize,
    },
    Response {
        client: usize,
    },
}

const W: usize = 2;

fn rank(
    r: usize,
    ranks: usize,
    seed: u64,
    a: ThreadsAllReduce,
    inbox: mpsc::Receiver<Msg>,
    out: Vec<mpsc::Sender<Msg>>,
    (live, budget): (&AtomicI64, &StdU64),
) -> (Vec<Verdict>, u64) {
    let mut rng = Rng(seed);
    let counters: Vec<WorkerCounters> = (0..W).map(|_| WorkerCounters::new(ranks * W)).collect();
    // Running fibers per local worker: steps left.
    let mut fibers: Vec<Vec<u32>> = vec![Vec::new(); W];
    let create = |w: usize, fibers: &mut Vec<Vec<u32>>, steps: u32| {
        live.fetch_add(1, O::SeqCst);
        proto::bump(&counters[w].created, 1);
        fibers[w].push(steps);
    };
    let finish = |w: usize| {
        proto::bump(&counters[w].finished, 1);
        live.fetch_sub(1, O::SeqCst);
    };
    let take = || budget.fetch_update(O::SeqCst, O::SeqCst, |b| b.checked_sub(1)).is_ok();
    if r == 0 {
        create(0, &mut fibers, 8); // main
    }
    let mut det = Detector::new(a);
    let mut verdicts = Vec::new();
    let mut created_by_me = u64::from(r == 0);
    loop {
        // Worker steps.
        for _ in 0..rng.below(4) {
            let w = rng.below(W);
            if let Some(i) = (!fibers[w].is_empty()).then(|| rng.below(fibers[w].len())) {
                if fibers[w][i] > 0 && take() {
                    fibers[w][i] -= 1;
                    let (tr, tw) = (rng.below(ranks), rng.below(W));
                    live.fetch_add(1, O::SeqCst);
                    proto::bump(&counters[w].issued[tr * W + tw], 1);
                    created_by_me += 1;
                    out[tr].send(Msg::Request { from: (r, w), trustee: tw }).unwrap();
                } else {
                    fibers[w].swap_remove(i);
                    finish(w);
                }
            }
        }
        while let Ok(m) = inbox.try_recv() {
            match m {
                Msg::Request { from, trustee } => {
                    if take() {
                        // The closure spawns a fiber on the trustee, before the response.
                        create(trustee, &mut fibers, rng.below(3) as u32);
                        created_by_me += 1;
                    }
                    out[from.0].send(Msg::Response { client: from.1 }).unwrap();
                }
                Msg::Response { client } => finish(client),
            }
        }
        if let Some(v) = det.poll(&counters[..]) {
            verdicts.push(v);
            if v.quiescent {
                assert_eq!(
                    live.load(O::SeqCst),
                    0,
                    "rank {r}: positive verdict {v:?} with tasks alive"
                );
                return (verdicts, created_by_me);
            }
        }
        std::thread::yield_now();
    }
}

#[test]
fn ranks_as_threads_agree_and_count_every_task() {
    for seed in 0..20u64 {
        let ranks = 2 + (seed % 3) as usize;
        let live = AtomicI64::new(0);
        let budget = StdU64::new(300);
        let (senders, inboxes): (Vec<_>, Vec<_>) = (0..ranks).map(|_| mpsc::channel()).unzip();
        let results: Vec<(Vec<Verdict>, u64)> = std::thread::scope(|s| {
            let hs: Vec<_> = ThreadsAllReduce::group(ranks)
                .into_iter()
                .zip(inboxes)
                .enumerate()
                .map(|(r, (a, inbox))| {
                    let out = senders.clone();
                    let (live, budget) = (&live, &budget);
                    s.spawn(move || {
                        rank(r, ranks, seed * 31 + r as u64, a, inbox, out, (live, budget))
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total: u64 = results.iter().map(|(_, c)| c).sum();
        for (r, (v, _)) in results.iter().enumerate() {
            assert_eq!(v, &results[0].0, "seed {seed}: rank {r} disagrees with rank 0");
            assert_eq!(v.last().unwrap().created, total, "seed {seed}: tasks not all counted");
        }
        assert!(total > 1, "seed {seed}: no work happened");
    }
}
