use super::*;
use std::sync::Arc;

/// The client keeps up to `PIPELINE` batches in flight; the trustee serves them lane by
/// lane in order. Every batch comes back intact, in order, with its panic list (every 1000th
/// batch reports one), and no lane is reused before its response was consumed.
#[test]
fn pipelined_lanes_in_order() {
    let pair = Arc::new(SlotPair::new(DEFAULT_OVERFLOW));
    let batches: u64 = if cfg!(miri) { 40 } else { 5_000 };
    let p2 = pair.clone();
    let trustee = std::thread::spawn(move || {
        let mut served = 0;
        while served < batches {
            let seq = served + 1;
            let lane = p2.lane(seq);
            if lane.req.seq() != seq {
                std::thread::yield_now();
                continue;
            }
            // SAFETY: rule 2 — Acquire-loaded the next batch in its lane.
            unsafe {
                let (w, n) = lane.req.batch();
                for i in 0..w as usize {
                    *lane.resp.data().add(i) = *lane.req.data().add(i) + 1;
                }
                if seq % 1000 == 0 {
                    lane.resp.put_panics(vec![(0, Box::new("x"))]);
                }
                lane.resp.publish(seq, w, n);
            }
            served = seq;
        }
    });
    let (mut sent, mut acked) = (0u64, 0u64);
    while acked < batches {
        if sent < batches && sent - acked < PIPELINE as u64 {
            let seq = sent + 1;
            let lane = pair.lane(seq);
            let w = (seq % 50) as usize + 1;
            // SAFETY: rule 1 — batch seq - PIPELINE of this lane was consumed.
            unsafe {
                for i in 0..w {
                    *lane.req.data().add(i) = seq * 1000 + i as u64;
                }
                lane.req.publish(seq, w as u32, seq as u32);
            }
            sent = seq;
            continue;
        }
        let seq = acked + 1;
        let lane = pair.lane(seq);
        if lane.resp.seq() != seq {
            std::thread::yield_now();
            continue;
        }
        // SAFETY: rule 3 — Acquire-loaded the response of batch seq.
        unsafe {
            let (w, n) = lane.resp.batch();
            assert_eq!((w as u64, n as u64), (seq % 50 + 1, seq));
            for i in 0..w as usize {
                assert_eq!(*lane.resp.data().add(i), seq * 1000 + i as u64 + 1);
            }
            assert_eq!(lane.resp.take_panics().len(), usize::from(seq % 1000 == 0));
        }
        acked = seq;
    }
    trustee.join().unwrap();
}
