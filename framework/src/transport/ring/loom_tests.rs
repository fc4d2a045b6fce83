//! Loom models of the ring protocol: a writer and a reader on two threads, with wrap-around
//! and a full ring; loom checks every data byte's accesses against the counters' ordering.

use super::tests::HeapRing;
use super::*;
use loom::sync::Arc;

/// The writer pushes `msgs` (spinning with `yield_now` while the ring is full), the reader
/// pulls until it has them all; the reader must get them whole and in order.
fn model(cap: usize, msgs: &'static [&'static [u8]]) {
    loom::model(move || {
        let ring = Arc::new(HeapRing::new(cap));
        let wr = ring.clone();
        let writer = loom::thread::spawn(move || {
            let mut w = Writer::default();
            for m in msgs {
                while !w.push(&*wr, m) {
                    loom::thread::yield_now();
                }
            }
        });
        let mut r = Reader::new(64);
        let mut got = Vec::new();
        while got.len() < msgs.len() {
            match r.pull(&*ring, Vec::new).expect("a valid frame") {
                Some(v) => got.push(v),
                None => loom::thread::yield_now(),
            }
        }
        writer.join().unwrap();
        let want: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec()).collect();
        assert_eq!(got, want);
    });
}

#[test]
fn loom_ring_publication_and_credit() {
    // Two 16-byte frames in a 16-byte ring: the second waits for the first's credit.
    model(16, &[&[1, 2, 3], &[4, 5, 6, 7, 8, 9, 10, 11]]);
}

#[test]
fn loom_ring_wrap_around_and_streaming() {
    // A 24-byte frame through a 16-byte ring (streamed in pieces), then one that wraps.
    model(16, &[&[1; 12], &[2, 3]]);
}

#[test]
#[should_panic]
fn loom_ring_relaxed_publication_is_a_race() {
    // The same ring memory with the writer's Release store of `tail` made Relaxed (a frame
    // written by hand): loom finds the reader's copy racing with the writer's bytes, so the
    // models above would catch a publication without Release.
    loom::model(|| {
        let ring = Arc::new(HeapRing::new(16));
        let wr = ring.clone();
        let writer = loom::thread::spawn(move || {
            wr.put(0, &3u64.to_le_bytes());
            wr.put(8, &[1, 2, 3, 0, 0, 0, 0, 0]);
            wr.counters().tail.store(16, Ordering::Relaxed);
        });
        let mut r = Reader::new(64);
        loop {
            if let Some(v) = r.pull(&*ring, Vec::new).expect("a valid frame") {
                assert_eq!(v, [1, 2, 3]);
                break;
            }
            loom::thread::yield_now();
        }
        writer.join().unwrap();
    });
}
