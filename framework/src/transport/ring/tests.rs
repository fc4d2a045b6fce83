//! The ring protocol on memory of this process: frames of every size, wrap-around, full
//! rings, envelopes larger than the ring, and refused lengths.

use super::*;
use crate::sync::proto::UnsafeCell;

/// A ring in this process's heap: the counters and `cap` bytes, each byte its own cell (so
/// that the loom build checks every access against the protocol).
pub(crate) struct HeapRing {
    counters: Counters,
    data: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the data bytes are reached only through `RingMem`, whose protocol gives each byte to
// the writer or to the reader at a time (module docs); the counters are atomics.
unsafe impl Sync for HeapRing {}

impl HeapRing {
    pub(crate) fn new(cap: usize) -> HeapRing {
        HeapRing { counters: Counters::new(), data: (0..cap).map(|_| UnsafeCell::new(0)).collect() }
    }
}

// SAFETY: one counters value and one data array, shared by the writer and the reader of the
// test; the copies touch exactly the bytes named.
unsafe impl RingMem for HeapRing {
    fn counters(&self) -> &Counters {
        &self.counters
    }
    fn cap(&self) -> usize {
        self.data.len()
    }
    fn put(&self, at: usize, src: &[u8]) {
        for (i, &b) in src.iter().enumerate() {
            // SAFETY: the protocol gives these bytes to the writer alone (module docs).
            self.data[at + i].with_mut(|p| unsafe { *p = b });
        }
    }
    fn get(&self, at: usize, dst: &mut [u8]) {
        for (i, d) in dst.iter_mut().enumerate() {
            // SAFETY: the protocol gives these bytes to the reader alone (module docs).
            *d = self.data[at + i].with(|p| unsafe { *p });
        }
    }
}

/// An envelope of `len` bytes whose bytes name it (`seed`) and their place.
fn envelope(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_mul(31).wrapping_add(i as u8)).collect()
}

/// Sends `msgs` through a ring of `cap` bytes, the writer and the reader taking turns (each
/// turn as far as it can go), and returns what the reader got.
fn through(cap: usize, msgs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let ring = HeapRing::new(cap);
    let (mut w, mut r) = (Writer::default(), Reader::new(1 << 20));
    let mut got = Vec::new();
    let mut next = 0;
    let mut idle = 0;
    while got.len() < msgs.len() {
        let mut moved = false;
        while next < msgs.len() {
            let before = w.written();
            let whole = w.push(&ring, &msgs[next]);
            moved |= w.written() != before;
            if whole {
                next += 1;
            } else {
                break;
            }
        }
        while let Some(v) = r.pull(&ring, Vec::new).expect("a valid frame") {
            got.push(v);
            moved = true;
        }
        idle = if moved { 0 } else { idle + 1 };
        assert!(idle < 3, "no progress: {} of {} envelopes", got.len(), msgs.len());
    }
    got
}

#[test]
fn the_counters_fill_two_cache_lines() {
    // The shared-memory layout relies on it: ring data starts 128 bytes into a ring, and a
    // counter never shares its line with the other.
    assert_eq!(COUNTERS_BYTES, 128);
    assert_eq!(std::mem::align_of::<Counters>(), 64);
    let c = Counters::new();
    let (t, h) = (&c.tail as *const _ as usize, &c.head as *const _ as usize);
    assert_eq!(h - t, 64);
}

#[test]
fn frames_of_every_small_size_arrive_whole_and_in_order() {
    let msgs: Vec<_> = (0..70).map(|n| envelope(n as u8, n)).collect();
    assert_eq!(through(256, &msgs), msgs);
}

#[test]
fn frames_wrap_around_the_end_of_the_data() {
    // 24-byte frames in a 64-byte ring: every third one wraps.
    let msgs: Vec<_> = (0..50).map(|n| envelope(n, 13)).collect();
    assert_eq!(through(64, &msgs), msgs);
}

#[test]
fn envelopes_larger_than_the_ring_stream_through_it() {
    let msgs = vec![envelope(1, 1000), envelope(2, 5), envelope(3, 4093), envelope(4, 0)];
    assert_eq!(through(64, &msgs), msgs);
}

#[test]
fn a_full_ring_takes_nothing_until_the_reader_gives_credit() {
    let ring = HeapRing::new(32);
    let (mut w, mut r) = (Writer::default(), Reader::new(1 << 20));
    let a = envelope(7, 24);
    assert!(w.push(&ring, &a), "32 bytes: the length word and 24 bytes");
    let b = envelope(8, 8);
    assert!(!w.push(&ring, &b), "no room");
    assert!(w.between_frames(), "nothing of b was written");
    assert_eq!(r.pull(&ring, Vec::new).unwrap(), Some(a));
    assert!(w.push(&ring, &b));
    assert_eq!(r.pull(&ring, Vec::new).unwrap(), Some(b));
    assert_eq!(r.pull(&ring, Vec::new).unwrap(), None);
}

#[test]
fn a_length_above_the_limit_is_refused_not_allocated() {
    let ring = HeapRing::new(64);
    ring.put(0, &(u64::MAX - 3).to_le_bytes());
    ring.counters.tail.store(8, Ordering::Release);
    let mut r = Reader::new(1 << 30);
    let e = r.pull(&ring, Vec::new).unwrap_err();
    assert_eq!(e, ReadError::TooLong { len: u64::MAX - 3, max: 1 << 30 });
    assert!(e.to_string().contains("above the 1073741824-byte envelope limit"), "{e}");
}

#[test]
fn random_sizes_and_turns_keep_every_byte() {
    let mut rng = skein_splitmix(7);
    let msgs: Vec<_> = (0..300).map(|i| envelope(i as u8, (rng() % 300) as usize)).collect();
    for cap in [64, 128, 1024] {
        assert_eq!(through(cap, &msgs), msgs, "cap {cap}");
    }
}

/// A small deterministic generator (splitmix64) for the random test.
fn skein_splitmix(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[test]
fn torn_or_forged_rings_are_refused_or_read_never_a_panic() {
    // Random bytes and random counters, as a dead or hostile writer might leave them: the
    // reader either reads envelopes within its limit or refuses the frame; it never panics,
    // never reads past the published bytes and never hands out an envelope above the limit.
    let mut rng = skein_splitmix(11);
    for case in 0..2000 {
        let ring = HeapRing::new(64);
        let mut bytes = [0u8; 64];
        bytes.iter_mut().for_each(|b| *b = rng() as u8);
        if case % 2 == 0 {
            // A plausible length word at the front.
            bytes[..8].copy_from_slice(&(rng() % 200).to_le_bytes());
        }
        ring.put(0, &bytes);
        let tail = match case % 3 {
            0 => rng(),
            _ => (rng() % 9) * 8,
        };
        ring.counters.tail.store(tail, Ordering::Release);
        let mut r = Reader::new(100);
        for _ in 0..4 {
            match r.pull(&ring, Vec::new) {
                Ok(Some(v)) => assert!(v.len() <= 100, "case {case}: {} bytes", v.len()),
                Ok(None) => {}
                Err(ReadError::TooLong { len, max }) => {
                    assert!(len > 100 && max == 100, "case {case}");
                    break;
                }
                Err(ReadError::BadTail { tail: t, .. }) => {
                    assert!(t > 64 || t % 8 != 0, "case {case}: tail {t} refused");
                    break;
                }
            }
            assert!(r.head <= tail, "case {case}: read past the published bytes");
        }
    }
}

#[test]
fn a_frame_read_in_pieces_is_mid_frame_between_them() {
    let ring = HeapRing::new(32);
    let (mut w, mut r) = (Writer::default(), Reader::new(1 << 20));
    let big = envelope(5, 40);
    assert!(!w.push(&ring, &big), "48 bytes of frame in a 32-byte ring");
    assert!(!r.mid_frame());
    assert_eq!(r.pull(&ring, Vec::new).unwrap(), None);
    assert!(r.mid_frame(), "the first 24 bytes read");
    assert!(w.push(&ring, &big));
    assert_eq!(r.pull(&ring, Vec::new).unwrap(), Some(big));
    assert!(!r.mid_frame());
}
