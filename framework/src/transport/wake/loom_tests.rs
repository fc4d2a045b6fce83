//! Loom models of the wake-up protocol across processes (module docs), on the real
//! [`WakeWord`], the real ring ([`crate::transport::ring`]) and the real board
//! ([`crate::transport::board`]). A sleeper that blocks and is never woken leaves its thread
//! blocked for good, which loom reports as a deadlock: the models pass only if no wake-up is
//! ever lost, without the safety net's timeout (which the model does not have).

use super::*;
use crate::transport::board::heap::HeapBoard;
use crate::transport::board::Board;
use crate::transport::ring::tests::HeapRing;
use crate::transport::ring::{Reader, Writer};
use loom::sync::Arc;

/// A ring of 16 bytes between a writer and a reader on two threads; each blocks on its own
/// word when it has nothing to do: the reader for bytes, the writer for credit (the second
/// frame fits only once the first was read). After a publication (`tail`) the writer rings the
/// reader's doorbell and wakes the reader; after a credit (`head`) the reader wakes the
/// writer, each after a `SeqCst` fence, as `transport::shm` does; the reader reads its ring
/// only when the bell rang (the broken variants are `one_shot` below).
fn ring_model() {
    loom::model(move || {
        let ring = Arc::new(HeapRing::new(16));
        // [0]: the reader's word, [1]: the writer's.
        let words = Arc::new([WakeWord::default(), WakeWord::default()]);
        let wake = |w: &WakeWord| {
            w.wake();
        };
        let (wr, ww) = (ring.clone(), words.clone());
        let writer = loom::thread::spawn(move || {
            let mut w = Writer::default();
            for m in [&[1u8, 2, 3][..], &[4, 5, 6, 7, 8]] {
                loop {
                    let before = w.written();
                    let done = w.push(&*wr, m);
                    if w.written() != before {
                        ww[0].ring_bell();
                        wake(&ww[0]);
                    }
                    if done {
                        break;
                    }
                    // No room: announce, look again, block.
                    ww[1].arm();
                    let before = w.written();
                    let done = w.push(&*wr, m);
                    if w.written() != before || done {
                        ww[1].disarm();
                        if w.written() != before {
                            ww[0].ring_bell();
                            wake(&ww[0]);
                        }
                        if done {
                            break;
                        }
                        continue;
                    }
                    ww[1].block(BLOCK_LIMIT);
                }
            }
        });
        let mut r = Reader::new(64);
        let mut got = Vec::new();
        let pull = |r: &mut Reader, got: &mut Vec<Vec<u8>>| {
            if !words[0].answer_bell() {
                return false;
            }
            let before = r.consumed();
            while let Some(v) = r.pull(&*ring, Vec::new).expect("a valid frame") {
                got.push(v);
            }
            if r.consumed() != before {
                wake(&words[1]);
                true
            } else {
                false
            }
        };
        while got.len() < 2 {
            if pull(&mut r, &mut got) {
                continue;
            }
            words[0].arm();
            if pull(&mut r, &mut got) {
                words[0].disarm();
                continue;
            }
            words[0].block(BLOCK_LIMIT);
        }
        writer.join().unwrap();
        assert_eq!(got, [vec![1, 2, 3], vec![4, 5, 6, 7, 8]]);
    });
}

#[test]
fn loom_wake_ring_no_lost_wakeup() {
    ring_model();
}

/// How the writer of [`one_shot`] announces its publication.
#[derive(Clone, Copy)]
enum Announce {
    /// As `transport::shm`: the bell, a `SeqCst` fence, the wake-up.
    Right,
    /// No fence between the publication and the wake-up.
    NoFence,
    /// The bell rung after the fence and the wake-up.
    BellLate,
}

/// One publication against one sleeper, without blocking (loom cannot unwind a model whose
/// threads are blocked for good, so the broken variants are written this way, as in
/// `runtime/idle.rs`): the reader arms and re-checks its bell and then its ring; if it found
/// nothing it would block, and then the writer's wake must have taken its `ARMED` (the word
/// is `AWAKE`: `FUTEX_WAIT` returns at once, or the `FUTEX_WAKE` that follows the swap ends
/// it).
fn one_shot(announce: Announce) {
    loom::model(move || {
        let ring = Arc::new(HeapRing::new(16));
        let word = Arc::new(WakeWord::default());
        let (r2, w2) = (ring.clone(), word.clone());
        let reader = loom::thread::spawn(move || {
            let mut r = Reader::new(64);
            w2.arm();
            w2.answer_bell() && r.pull(&*r2, Vec::new).expect("a valid frame").is_some()
        });
        let mut w = Writer::default();
        assert!(w.push(&*ring, &[1, 2, 3]));
        match announce {
            Announce::Right => {
                word.ring_bell();
                word.wake();
            }
            Announce::NoFence => {
                word.ring_bell();
                word.wake_after_fence();
            }
            Announce::BellLate => {
                word.wake();
                word.ring_bell();
            }
        }
        let saw = reader.join().unwrap();
        assert!(saw || !word.is_armed(), "lost wake-up: the reader blocks and nobody wakes it");
    });
}

#[test]
fn loom_wake_one_publication_one_sleeper() {
    one_shot(Announce::Right);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_wake_ring_waker_without_fence_loses_a_wakeup() {
    one_shot(Announce::NoFence);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_wake_bell_rung_after_the_fence_loses_a_wakeup() {
    one_shot(Announce::BellLate);
}

/// The board's all-reduce (`runtime/quiesce_ranks/shm.rs`) on two ranks for two rounds; a
/// rank whose round is incomplete blocks on its detector's word, and the other rank's post
/// wakes it (`Board::post`: Release store, fence, wake every other rank's first worker).
#[test]
fn loom_wake_board_post_wakes_a_waiting_rank() {
    use crate::runtime::quiesce_ranks::shm::ShmAllReduce;
    use crate::runtime::quiesce_ranks::AllReduce;
    // The board's memory is shared with `std`'s `Arc` (its `BoardMem` is implemented there).
    use std::sync::Arc;
    loom::model(|| {
        let mem = Arc::new(HeapBoard::new(2));
        let run = |mem: Arc<HeapBoard>, r: usize| {
            let mut ar = ShmAllReduce::new(Board::new(mem.clone(), r));
            let mut got = Vec::new();
            for round in 0..2u64 {
                ar.start(&[round + 10 * r as u64]);
                loop {
                    if let Some(s) = ar.test() {
                        got.push(s[0]);
                        break;
                    }
                    mem.word(r).arm();
                    if let Some(s) = ar.test() {
                        mem.word(r).disarm();
                        got.push(s[0]);
                        break;
                    }
                    mem.word(r).block(BLOCK_LIMIT);
                }
            }
            got
        };
        let other = mem.clone();
        let t = loom::thread::spawn(move || run(other, 1));
        let mine = run(mem, 0);
        assert_eq!(t.join().unwrap(), mine);
        assert_eq!(mine, vec![10, 12]);
    });
}

/// The board's all-reduce on three ranks for one round, the real board: each rank posts,
/// then blocks until the round completes. Only the post that completes the round wakes
/// (`Board::post`): the first poster's wait must be ended by the last one, never by the
/// middle one, whose post wakes nobody.
#[test]
fn loom_wake_board_three_ranks() {
    use crate::runtime::quiesce_ranks::shm::ShmAllReduce;
    use crate::runtime::quiesce_ranks::AllReduce;
    use std::sync::Arc;
    loom::model(|| {
        let mem = Arc::new(HeapBoard::new(3));
        let run = |mem: Arc<HeapBoard>, r: usize| {
            let mut ar = ShmAllReduce::new(Board::new(mem.clone(), r));
            ar.start(&[1 << r]);
            loop {
                mem.word(r).arm();
                if let Some(s) = ar.test() {
                    mem.word(r).disarm();
                    return s[0];
                }
                mem.word(r).block(BLOCK_LIMIT);
            }
        };
        let ts: Vec<_> = (1..3)
            .map(|r| {
                let m = mem.clone();
                loom::thread::spawn(move || run(m, r))
            })
            .collect();
        assert_eq!(run(mem, 0), 7);
        for t in ts {
            assert_eq!(t.join().unwrap(), 7);
        }
    });
}

/// The broken variant of the board's rule (only the post that completes the round wakes):
/// a poster that tests completion without the fence after its post. Written step by step,
/// without blocking (as `one_shot`): rank 0 posted round 0, arms and re-checks rank 1's
/// count; rank 1 posts, then (fence or not) reads rank 0's count and, the round complete,
/// wakes rank 0. If rank 0's re-check missed rank 1's post it blocks, so rank 1 must then
/// have seen the round complete and taken rank 0's `ARMED`.
fn board_one_shot(fence_after_post: bool) {
    use crate::sync::proto::AtomicU64;
    loom::model(move || {
        let posted = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let word = Arc::new(WakeWord::default());
        let (p2, w2) = (posted.clone(), word.clone());
        let rank0 = loom::thread::spawn(move || {
            p2[0].store(1, Ordering::Release);
            crate::sync::proto::fence(Ordering::SeqCst);
            w2.arm();
            p2[1].load(Ordering::Acquire) > 0
        });
        posted[1].store(1, Ordering::Release);
        if fence_after_post {
            crate::sync::proto::fence(Ordering::SeqCst);
        }
        if posted[0].load(Ordering::Acquire) > 0 {
            word.wake_after_fence();
        }
        let saw = rank0.join().unwrap();
        assert!(saw || !word.is_armed(), "lost wake-up: rank 0 blocks and nobody wakes it");
    });
}

#[test]
fn loom_wake_board_completing_post_wakes() {
    board_one_shot(true);
}

#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_wake_board_post_without_fence_loses_a_wakeup() {
    board_one_shot(false);
}

/// `Board::post` wakes every rank that has not posted the round: rank 0 arms, looks whether
/// rank 1 posted the round, and blocks if not; rank 1's post must wake it. Then both wait for
/// the round as usual. (A rank may block without its part of a round posted: while another
/// worker of its rank works, or while it holds its post back with a task open,
/// `runtime/quiesce_ranks.rs`.)
#[test]
fn loom_wake_board_started_round_wakes_a_responder() {
    use crate::runtime::quiesce_ranks::shm::ShmAllReduce;
    use crate::runtime::quiesce_ranks::AllReduce;
    use std::sync::Arc;
    loom::model(|| {
        let mem = Arc::new(HeapBoard::new(2));
        let wait = |mem: &Arc<HeapBoard>, ar: &mut ShmAllReduce<Arc<HeapBoard>>, r: usize| loop {
            mem.word(r).arm();
            if let Some(s) = ar.test() {
                mem.word(r).disarm();
                return s[0];
            }
            mem.word(r).block(BLOCK_LIMIT);
        };
        let other = mem.clone();
        let t = loom::thread::spawn(move || {
            let mut ar = ShmAllReduce::new(Board::new(other.clone(), 1));
            ar.start(&[2]);
            wait(&other, &mut ar, 1)
        });
        let mut ar = ShmAllReduce::new(Board::new(mem.clone(), 0));
        let view = Board::new(mem.clone(), 0);
        loop {
            mem.word(0).arm();
            if view.has_posted(1, 0) {
                mem.word(0).disarm();
                break;
            }
            mem.word(0).block(BLOCK_LIMIT);
        }
        ar.start(&[1]);
        assert_eq!(wait(&mem, &mut ar, 0), 3);
        assert_eq!(t.join().unwrap(), 3);
    });
}
