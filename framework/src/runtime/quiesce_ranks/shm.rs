//! [`ShmAllReduce`]: the all-reduce seam over the ranks' board (`transport::board`; with the
//! shared-memory transport, feature `mpi`, its memory is the front of every rank's region).
//! No MPI call: a rank posts its vector
//! of round `i` in its own region and publishes the round (Release); the round completes on
//! a rank once it has read every other rank's vector of round `i` (Acquire on their
//! published rounds), and the sums are the same everywhere (wrapping `u64` addition).
//!
//! Transport condition T1 of the module docs holds: a round completes on a rank only once
//! every other rank has posted it, after that rank's reads (its `start`), and the Acquire
//! load of the other rank's published round orders its reads before this rank's later ones.
//! The board's own argument (`transport/board.rs`) shows that two vectors per rank suffice.

use super::AllReduce;
use crate::transport::board::{Board, BoardMem, BOARD_VALUES};

/// A sum all-reduce over `u64`s on the ranks' board (module docs).
#[derive(Debug)]
pub(crate) struct ShmAllReduce<M> {
    board: Board<M>,
    /// The next round to post, or the outstanding one.
    round: u64,
    outstanding: bool,
    /// The sums of the outstanding round so far: this rank's vector, then each other rank's
    /// added as it is read.
    sums: Vec<u64>,
    /// Which other ranks' vectors of the outstanding round are in `sums`.
    read: Vec<bool>,
    scratch: Vec<u64>,
}

impl<M: BoardMem> ShmAllReduce<M> {
    /// This rank's all-reduce over `board`, from the next round this rank has to post (0 on
    /// a new board; on a board kept from an earlier run, the rounds every rank posted there:
    /// a run ends with no all-reduce outstanding, after the same rounds on every rank).
    pub(crate) fn new(board: Board<M>) -> ShmAllReduce<M> {
        let ranks = board.ranks();
        ShmAllReduce {
            round: board.posted_rounds(),
            board,
            outstanding: false,
            sums: Vec::new(),
            read: vec![false; ranks],
            scratch: Vec::new(),
        }
    }
}

impl<M: BoardMem + std::fmt::Debug> AllReduce for ShmAllReduce<M> {
    fn start(&mut self, values: &[u64]) {
        assert!(!self.outstanding, "an all-reduce is still outstanding");
        assert!(values.len() <= BOARD_VALUES, "an all-reduce of {} values", values.len());
        self.board.post(self.round, values);
        self.sums.clear();
        self.sums.extend_from_slice(values);
        self.read.iter_mut().for_each(|r| *r = false);
        self.read[self.board.rank()] = true;
        self.outstanding = true;
    }

    fn test(&mut self) -> Option<&[u64]> {
        if !self.outstanding {
            return None;
        }
        let len = self.sums.len();
        self.scratch.resize(len, 0);
        for r in 0..self.read.len() {
            if self.read[r] {
                continue;
            }
            if !self.board.read(r, self.round, &mut self.scratch) {
                return None;
            }
            super::fold(&mut self.sums, &self.scratch);
            self.read[r] = true;
        }
        self.outstanding = false;
        self.round += 1;
        Some(&self.sums)
    }

    fn waiting_for(&mut self) -> Option<Vec<usize>> {
        let round = self.round;
        Some(
            (0..self.read.len())
                .filter(|&r| !self.read[r] && !self.board.has_posted(r, round))
                .collect(),
        )
    }
}

#[cfg(all(test, fw_loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
