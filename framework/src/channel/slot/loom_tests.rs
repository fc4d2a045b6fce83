use super::*;
use loom::sync::Arc;

const BATCHES: u64 = 2;

/// The trustee: serves `BATCHES` batches; each result word is twice the request word, and
/// batch 2 reports a panic of its record 1.
fn trustee(pair: &Lane, order: Ordering) {
    let mut served = 0;
    while served < BATCHES {
        let s = pair.req.seq();
        if s == served {
            loom::thread::yield_now();
            continue;
        }
        assert_eq!(s, served + 1, "a request seq was skipped");
        // SAFETY: rule 2 — Acquire-loaded a new seq: req data and resp are ours.
        unsafe {
            let (w, n) = pair.req.batch();
            assert_eq!((w as u64, n as u64), (s + 1, s), "batch header torn");
            for i in 0..w as usize {
                *pair.resp.data().add(i) = *pair.req.data().add(i) * 2;
            }
            if s == 2 {
                pair.resp.put_panics(vec![(1, Box::new("boom"))]);
            }
            pair.resp.publish_ordered(s, w, n, order);
        }
        served = s;
    }
}

/// The client: publishes `BATCHES` batches one after the other and checks each response.
fn client(pair: &Lane, order: Ordering) {
    for s in 1..=BATCHES {
        let w = s as usize + 1;
        // SAFETY: rule 1 — idle (the previous response was observed), the slot is ours.
        unsafe {
            for i in 0..w {
                *pair.req.data().add(i) = 10 * s + i as u64;
            }
            pair.req.publish_ordered(s, w as u32, s as u32, order);
        }
        while pair.resp.seq() != s {
            loom::thread::yield_now();
        }
        // SAFETY: rule 3 — Acquire-loaded resp.seq == s: the response is ours.
        unsafe {
            assert_eq!(pair.resp.batch().1 as u64, s);
            for i in 0..w {
                assert_eq!(*pair.resp.data().add(i), 2 * (10 * s + i as u64));
            }
            let p = pair.resp.take_panics();
            assert_eq!(p.len(), usize::from(s == 2));
        }
    }
}

fn model(order: Ordering) {
    loom::model(move || {
        let pair = Arc::new(Lane::new(512));
        let p2 = pair.clone();
        let t = loom::thread::spawn(move || trustee(&p2, order));
        client(&pair, order);
        t.join().unwrap();
    });
}

/// Two lanes, three batches, up to two in flight: the trustee serves them in order while
/// the client fills the other lane, and consumes each response before reusing its lane.
#[test]
fn loom_lanes_pipelined() {
    const N: u64 = 3;
    loom::model(|| {
        let pair = Arc::new(SlotPair::new(512));
        let p2 = pair.clone();
        let t = loom::thread::spawn(move || {
            let mut served = 0;
            while served < N {
                let seq = served + 1;
                let lane = p2.lane(seq);
                if lane.req.seq() != seq {
                    loom::thread::yield_now();
                    continue;
                }
                // SAFETY: rule 2 — Acquire-loaded the next batch in its lane.
                unsafe {
                    let (w, n) = lane.req.batch();
                    *lane.resp.data() = *lane.req.data() + 1;
                    lane.resp.publish(seq, w, n);
                }
                served = seq;
            }
        });
        let (mut sent, mut acked) = (0u64, 0u64);
        while acked < N {
            if sent < N && sent - acked < PIPELINE as u64 {
                let seq = sent + 1;
                let lane = pair.lane(seq);
                // SAFETY: rule 1 — this lane's previous batch (seq - PIPELINE) was consumed.
                unsafe {
                    *lane.req.data() = 10 * seq;
                    lane.req.publish(seq, 1, seq as u32);
                }
                sent = seq;
                continue;
            }
            let seq = acked + 1;
            let lane = pair.lane(seq);
            if lane.resp.seq() != seq {
                loom::thread::yield_now();
                continue;
            }
            // SAFETY: rule 3 — Acquire-loaded the response of batch seq.
            unsafe {
                assert_eq!(lane.resp.batch(), (1, seq as u32));
                assert_eq!(*lane.resp.data(), 10 * seq + 1);
            }
            acked = seq;
        }
        t.join().unwrap();
    });
}

/// Release/Acquire publication: every interleaving round-trips every batch intact.
#[test]
fn loom_slot_round_trip() {
    model(Ordering::Release);
}

/// A Relaxed publication must be caught (a causality violation on the header cells):
/// shows that the model is able to fail.
#[test]
#[should_panic(expected = "Causality violation")]
fn loom_slot_relaxed_publish_is_a_race() {
    model(Ordering::Relaxed);
}
