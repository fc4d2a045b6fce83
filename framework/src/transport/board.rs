//! The ranks' board: where each rank posts a small vector per round for every other rank to
//! read, in memory all ranks reach (the shared-memory transport's regions). It carries the
//! quiescence detector's all-reduce over the rings (`runtime::quiesce_ranks::shm`).
//!
//! # Protocol
//!
//! Rank `r` has a count `posted[r]` (stored by `r` only) and two places for vectors. To post
//! round `i`, `r` writes its vector into place `i % 2`, then stores `posted[r] = i + 1`
//! (Release). A reader of round `i` loads `posted[r]` (Acquire); once it is past `i`, the
//! vector in place `i % 2` is round `i`'s and complete.
//!
//! Two places suffice when, as in the all-reduce, a rank posts round `i + 1` only after it
//! has read round `i` of every rank: a rank overwrites place `i % 2` (posting round `i + 2`)
//! only after it read round `i + 1` of every rank, and each rank posted `i + 1` only after it
//! had read every vector of round `i`. The loom model `loom_board_all_reduce` runs the
//! all-reduce on it (`runtime/quiesce_ranks/shm`).
//!
//! # Waking a rank that waits for a round
//!
//! A rank's first worker (which runs the detector) may block while its round is incomplete
//! (`transport::wake`), and so may a rank whose part of a round is not posted yet (its other
//! workers work, or it holds its post back while a task of its rank is open:
//! `runtime/quiesce_ranks.rs`). After posting round `i`, a rank
//! therefore does its Release store of `posted`, a `SeqCst` fence, then
//! [`BoardMem::wake_rank`] (which loads that rank's first worker's futex word and wakes it if
//! armed) for every other rank that has not posted round `i`, and, if every rank has posted
//! it now (this post completed it), for every other rank. The waiting worker armed its word
//! and read the counts again before blocking: the store-buffering argument of
//! `transport::wake`.
//!
//! Why a rank that posted round `i` is woken only by the post that completes it: it waits
//! for nothing but the round's completion. Take the posts of round `i` with their fences in
//! the `SeqCst` order: the last fence's loads see every rank's post, so that poster finds the
//! round complete and wakes every rank; a rank that armed after that fence reads every post
//! in its re-check and does not block. Earlier posters may find the round incomplete and
//! leave the ranks that posted alone: a wake-up then would only have run a rank's detector on
//! an incomplete round, one context switch each. Loom models
//! `loom_wake_board_post_wakes_a_waiting_rank` (two ranks, the real board),
//! `loom_wake_board_three_ranks` (three ranks, one round: a middle poster leaves the first
//! alone), `loom_wake_board_started_round_wakes_a_responder` (a rank that posts only once
//! another started the round) and `loom_wake_board_post_without_fence_loses_a_wakeup` (the
//! broken variant).

use crate::sync::proto::{fence, AtomicU64};
use crate::sync::Ordering;

/// Most `u64`s a rank posts per round.
pub(crate) const BOARD_VALUES: usize = 16;

/// How the board reaches its memory: every rank's count and two places.
///
/// # Safety
///
/// The same counts and places for every rank's handle; `put` and `get` touch exactly the
/// place named, which the protocol gives to one writer (its rank) and, once published, to
/// readers only (module docs).
pub(crate) unsafe trait BoardMem {
    /// Ranks on the board.
    fn ranks(&self) -> usize;
    /// Rank `r`'s count of posted rounds.
    fn posted(&self, r: usize) -> &AtomicU64;
    /// Writes `values` (at most [`BOARD_VALUES`]) into place `place` (0 or 1) of rank `r`.
    fn put(&self, r: usize, place: usize, values: &[u64]);
    /// Reads `out.len()` values (at most [`BOARD_VALUES`]) of place `place` of rank `r`.
    fn get(&self, r: usize, place: usize, out: &mut [u64]);
    /// After the caller's post and `SeqCst` fence: wakes rank `r`'s first worker if it is
    /// armed to block (module docs).
    fn wake_rank(&self, r: usize);
}

/// One rank's handle of a board.
#[derive(Debug)]
pub(crate) struct Board<M> {
    mem: M,
    rank: usize,
}

impl<M: BoardMem> Board<M> {
    /// Rank `rank`'s handle of the board in `mem`.
    pub(crate) fn new(mem: M, rank: usize) -> Board<M> {
        Board { mem, rank }
    }

    /// Ranks on the board.
    pub(crate) fn ranks(&self) -> usize {
        self.mem.ranks()
    }

    /// This handle's rank.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// Posts this rank's vector of round `round` (rounds 0, 1, 2, ..., each once; the
    /// caller keeps to the protocol's order, module docs).
    pub(crate) fn post(&self, round: u64, values: &[u64]) {
        assert!(values.len() <= BOARD_VALUES, "a board vector of {} values", values.len());
        self.mem.put(self.rank, (round % 2) as usize, values);
        self.mem.posted(self.rank).store(round + 1, Ordering::Release);
        fence(Ordering::SeqCst);
        // Wake the ranks that have not posted the round (their part is awaited now), and,
        // once this post completed it, every other rank (module docs). A rank that posted it
        // and waits for the rest is not woken by a post that leaves it incomplete.
        let complete = (0..self.mem.ranks()).all(|r| r == self.rank || self.has_posted(r, round));
        for r in (0..self.mem.ranks()).filter(|&r| r != self.rank) {
            if complete || !self.has_posted(r, round) {
                self.mem.wake_rank(r);
            }
        }
    }

    /// The rounds this rank has posted on the board so far: a run that reuses the board of
    /// an earlier run (`transport::shm`, "Kept between runs") starts its all-reduces there.
    pub(crate) fn posted_rounds(&self) -> u64 {
        self.mem.posted(self.rank).load(Ordering::Acquire)
    }

    /// Whether rank `r` has posted round `round`.
    pub(crate) fn has_posted(&self, r: usize, round: u64) -> bool {
        self.mem.posted(r).load(Ordering::Acquire) > round
    }

    /// Rank `r`'s vector of round `round` into `out`, if `r` has posted it.
    pub(crate) fn read(&self, r: usize, round: u64, out: &mut [u64]) -> bool {
        if self.mem.posted(r).load(Ordering::Acquire) <= round {
            return false;
        }
        self.mem.get(r, (round % 2) as usize, out);
        true
    }
}

/// A board in this process's heap, for the tests and the loom model: each value its own
/// cell, so that loom checks every access against the counts' ordering.
#[cfg(test)]
pub(crate) mod heap {
    use super::*;
    use crate::sync::proto::UnsafeCell;
    use crate::transport::wake::WakeWord;

    /// The board's memory (share it with `Arc`).
    #[derive(Debug)]
    pub(crate) struct HeapBoard {
        posted: Vec<AtomicU64>,
        places: Vec<UnsafeCell<u64>>,
        /// Each rank's first worker's futex word.
        words: Vec<WakeWord>,
    }

    // SAFETY: the places are reached only through `BoardMem`, whose protocol gives each one
    // to one writer, or to readers only, at a time (module docs); the counts are atomics.
    unsafe impl Sync for HeapBoard {}

    impl HeapBoard {
        pub(crate) fn new(ranks: usize) -> HeapBoard {
            HeapBoard {
                posted: (0..ranks).map(|_| AtomicU64::new(0)).collect(),
                places: (0..ranks * 2 * BOARD_VALUES).map(|_| UnsafeCell::new(0)).collect(),
                words: (0..ranks).map(|_| WakeWord::default()).collect(),
            }
        }

        /// Rank `r`'s first worker's futex word.
        pub(crate) fn word(&self, r: usize) -> &WakeWord {
            &self.words[r]
        }

        fn at(r: usize, place: usize, i: usize) -> usize {
            (r * 2 + place) * BOARD_VALUES + i
        }
    }

    // SAFETY: one memory for every handle (shared through `Arc`); the copies touch only the
    // place named.
    unsafe impl BoardMem for std::sync::Arc<HeapBoard> {
        fn ranks(&self) -> usize {
            self.posted.len()
        }
        fn posted(&self, r: usize) -> &AtomicU64 {
            &self.posted[r]
        }
        fn put(&self, r: usize, place: usize, values: &[u64]) {
            for (i, &v) in values.iter().enumerate() {
                // SAFETY: the protocol gives this place to its rank alone now.
                self.places[HeapBoard::at(r, place, i)].with_mut(|p| unsafe { *p = v });
            }
        }
        fn get(&self, r: usize, place: usize, out: &mut [u64]) {
            for (i, o) in out.iter_mut().enumerate() {
                // SAFETY: the protocol gives this place to readers only now.
                *o = self.places[HeapBoard::at(r, place, i)].with(|p| unsafe { *p });
            }
        }
        fn wake_rank(&self, r: usize) {
            self.words[r].wake_after_fence();
        }
    }
}
