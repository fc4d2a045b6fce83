//! The ring link over a medium in this process's heap: envelopes of every size, in order,
//! through full rings and wrap-around, with every published byte and every credit handed to
//! the medium; a forged ring refused by name. The shared-memory medium runs the same code in
//! the multi-rank suites (`tests/rack.rs`).

use super::super::ring::{Counters, COUNTERS_BYTES};
use super::*;
use std::sync::atomic::Ordering;

/// 64-aligned zeroed memory for one ring (counters, then `cap` data bytes).
struct Slot {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Slot {
    fn new(cap: usize) -> Slot {
        let layout = std::alloc::Layout::from_size_align(COUNTERS_BYTES + cap, 64).unwrap();
        // SAFETY: a non-zero size; freed in `Drop` with the same layout.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Slot { ptr, layout }
    }

    fn ring(&self, cap: usize) -> HeapRing {
        HeapRing { ptr: self.ptr, cap }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// A ring in a [`Slot`] that outlives it (the test keeps the slots to its end).
#[derive(Debug, Clone, Copy)]
struct HeapRing {
    ptr: *mut u8,
    cap: usize,
}

// SAFETY: the slot is live for the test; each ring has one writer end and one reader end,
// driven from one thread; copies stay inside `cap` (the trait's contract).
unsafe impl RingMem for HeapRing {
    fn counters(&self) -> &Counters {
        // SAFETY: 64-aligned zeroed counters (atomics) at the slot's front.
        unsafe { &*self.ptr.cast::<Counters>() }
    }
    fn cap(&self) -> usize {
        self.cap
    }
    fn put(&self, at: usize, src: &[u8]) {
        assert!(at + src.len() <= self.cap);
        // SAFETY: inside the slot's data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.ptr.add(COUNTERS_BYTES + at),
                src.len(),
            )
        }
    }
    fn get(&self, at: usize, dst: &mut [u8]) {
        assert!(at + dst.len() <= self.cap);
        // SAFETY: inside the slot's data.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.add(COUNTERS_BYTES + at),
                dst.as_mut_ptr(),
                dst.len(),
            )
        }
    }
}

// SAFETY: see `RingMem for HeapRing`.
unsafe impl Send for HeapRing {}

/// A medium that records what the link hands it.
#[derive(Debug, Default)]
struct Recording {
    /// (destination, tail) per publication.
    published: Vec<(usize, u64)>,
    /// (source, head) per credit.
    consumed: Vec<(usize, u64)>,
    progressed: usize,
}

impl Medium for Recording {
    type Out = HeapRing;
    type In = HeapRing;
    type Shared = ();
    const NAME: &'static str = "test";
    fn idle_policy(_: &()) -> IdlePolicy {
        IdlePolicy::Network
    }
    fn wake_words(_: &()) -> Option<Arc<dyn WakeWords>> {
        None
    }
    fn published(&mut self, to: usize, ring: &HeapRing, tail: u64) -> Result<(), String> {
        assert_eq!(ring.counters().tail.load(Ordering::Acquire), tail, "tail stored first");
        self.published.push((to, tail));
        Ok(())
    }
    fn consumed(&mut self, from: usize, ring: &HeapRing, head: u64) -> Result<(), String> {
        assert_eq!(ring.counters().head.load(Ordering::Acquire), head, "head stored first");
        self.consumed.push((from, head));
        Ok(())
    }
    fn progress(&mut self) -> Result<(), String> {
        self.progressed += 1;
        Ok(())
    }
}

/// Two ranks of one worker each: global worker 0 on rank 0, worker 1 on rank 1, one ring each
/// way.
fn pair(cap: usize, slots: &[Slot; 2]) -> (RingLink<Recording>, RingLink<Recording>) {
    let (a_to_b, b_to_a) = (slots[0].ring(cap), slots[1].ring(cap));
    let a = End::new(Recording::default(), vec![None, Some(a_to_b)], vec![(1, b_to_a)], 1 << 20, 1);
    let b = End::new(Recording::default(), vec![Some(b_to_a), None], vec![(0, a_to_b)], 1 << 20, 1);
    (RingLink::new(7, 0, vec![a], (), 4032), RingLink::new(7, 1, vec![b], (), 4032))
}

#[test]
fn envelopes_of_every_size_arrive_whole_and_in_order_both_ways() {
    let cap = 256;
    let slots = [Slot::new(cap), Slot::new(cap)];
    let (a, b) = pair(cap, &slots);
    let sizes = [0usize, 1, 7, 8, 9, 100, 247, 248, 249, 255, 256, 300, 1000, 5, 64];
    let msg = |i: usize| -> Vec<u8> {
        (0..sizes[i % sizes.len()]).map(|j| (i * 31 + j * 7) as u8).collect()
    };
    let n = 120;
    for i in 0..n {
        let mut m = a.claim(0, 1).expect("a buffer");
        m.extend_from_slice(&msg(i));
        a.publish(0, 1, m);
        b.publish(1, 0, msg(i + 1000));
    }
    assert!(a.busy(0) && b.busy(1), "envelopes wait for room");
    assert!(a.describe(0).starts_with("test rings: "), "{}", a.describe(0));
    let (mut at_b, mut at_a) = (Vec::new(), Vec::new());
    let mut passes = 0;
    while at_b.len() < n || at_a.len() < n {
        passes += 1;
        assert!(passes < 100_000, "no progress: {} and {} arrived", at_b.len(), at_a.len());
        a.progress(0);
        b.progress(1);
        while let Some(m) = b.poll(1) {
            assert_eq!(m.from_rank, 0);
            at_b.push(m.bytes.clone());
            b.release(1, m.bytes);
        }
        while let Some(m) = a.poll(0) {
            assert_eq!(m.from_rank, 1);
            at_a.push(m.bytes);
        }
    }
    assert_eq!(at_b, (0..n).map(msg).collect::<Vec<_>>());
    assert_eq!(at_a, (0..n).map(|i| msg(i + 1000)).collect::<Vec<_>>());
    assert!(a.drain(0, Duration::from_secs(1)) && b.drain(1, Duration::from_secs(1)));
    for (link, me, peer) in [(&a, 0, 1), (&b, 1, 0)] {
        let left = link.leftovers();
        assert_eq!((left.unsent, left.undelivered), (0, 0));
        link.with(me, |e| {
            let m = &e.medium;
            // Every byte written was handed over, tails rising to the writer's last.
            assert!(m.published.iter().all(|&(to, _)| to == peer));
            assert!(m.published.windows(2).all(|w| w[0].1 < w[1].1), "{:?}", m.published);
            assert_eq!(
                m.published.last().map(|p| p.1),
                Some(e.out[peer].as_ref().unwrap().1.written())
            );
            // And every byte read was credited back, heads rising to the reader's last.
            assert!(m.consumed.iter().all(|&(from, _)| from == peer));
            assert!(m.consumed.windows(2).all(|w| w[0].1 < w[1].1));
            assert_eq!(m.consumed.last().map(|c| c.1), Some(e.inbound[0].2.consumed()));
            assert!(m.progressed > 0);
        });
    }
}

#[test]
fn a_forged_ring_is_refused_naming_the_sender() {
    let cap = 256;
    let slots = [Slot::new(cap), Slot::new(cap)];
    let (_a, b) = pair(cap, &slots);
    // A frame header claiming 2 MiB (above the reader's 1 MiB limit), published.
    let ring = slots[0].ring(cap);
    ring.put(0, &(2u64 << 20).to_le_bytes());
    ring.counters().tail.store(8, Ordering::Release);
    let err = b.with(1, |e| e.read()).expect_err("refused");
    assert!(err.starts_with("the test ring from worker 0 (rank 0) is torn or forged: "), "{err}");
}
