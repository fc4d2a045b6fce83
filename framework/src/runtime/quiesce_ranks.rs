//! Quiescence detection across ranks (rack mode): the pipelined detector that worker 0 of
//! every rank runs from its idle loop, one non-blocking sum all-reduce per round, and the
//! all-reduce seam it runs on ([`AllReduce`]: [`ThreadsAllReduce`] for fake ranks in one
//! process, `MpiAllReduce` over `MPI_Iallreduce` with the `mpi` feature).
//!
//! Not wired into the worker loop yet (see "How the worker loop calls it" below).

#![cfg_attr(not(test), allow(dead_code))]

#[cfg(feature = "mpi")]
pub(crate) mod mpi;

use crate::sync::proto::Mutex;
use crate::sync::Arc;
use std::collections::VecDeque;

// ----- the all-reduce seam -------------------------------------------------------------------

/// A non-blocking sum all-reduce over `u64` vectors, one outstanding at a time, among the
/// ranks of one group (one handle per rank).
///
/// Collective: every rank starts its `i`-th all-reduce with a vector of the same length, and
/// the `i`-th result is the element-wise wrapping sum of every rank's `i`-th vector. The
/// result is complete on a rank only after every rank has started its `i`-th all-reduce
/// (transport condition T1 of the module docs), and what each rank did before `start`
/// happens before what any rank does after `test` returned the result.
pub(crate) trait AllReduce {
    /// Starts the next all-reduce with this rank's `values`. Panics if one is outstanding
    /// (a bug in the caller: the detector never does it).
    fn start(&mut self, values: &[u64]);
    /// Never blocks: the sums once the outstanding all-reduce has completed on this rank (and
    /// then it is no longer outstanding), `None` while it has not, or when none is outstanding.
    fn test(&mut self) -> Option<&[u64]>;
}

impl<T: AllReduce + ?Sized> AllReduce for Box<T> {
    fn start(&mut self, values: &[u64]) {
        (**self).start(values)
    }

    fn test(&mut self) -> Option<&[u64]> {
        (**self).test()
    }
}

/// The all-reduce among threads of one process that play ranks ("fake ranks": the tests, and
/// the single-process loopback split of rack mode). Each handle is one rank; the exchange is
/// a mutex-protected table of rounds, so the lock gives the happens-before of T1.
pub(crate) struct ThreadsAllReduce {
    rank: usize,
    group: Arc<Group>,
    /// Index of this rank's outstanding all-reduce, or of its next one.
    round: u64,
    outstanding: bool,
    result: Vec<u64>,
}

struct Group {
    ranks: usize,
    state: Mutex<GroupState>,
}

/// Rounds `base..base + rounds.len()`: started by at least one rank and not yet collected by
/// every rank. At most two are live (a rank starts round `i + 1` only after round `i` is
/// complete, i.e. after every rank started round `i`).
struct GroupState {
    base: u64,
    rounds: VecDeque<Round>,
    /// Per rank, once its handle is dropped: the first round it never contributes to.
    left: Vec<Option<u64>>,
}

struct Round {
    sums: Vec<u64>,
    contributed: usize,
    collected: usize,
}

impl std::fmt::Debug for ThreadsAllReduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadsAllReduce")
            .field("rank", &self.rank)
            .field("ranks", &self.group.ranks)
            .field("round", &self.round)
            .field("outstanding", &self.outstanding)
            .finish()
    }
}

impl ThreadsAllReduce {
    /// One handle per rank of a new group of `ranks` ranks, in rank order.
    pub(crate) fn group(ranks: usize) -> Vec<ThreadsAllReduce> {
        assert!(ranks > 0, "an all-reduce group needs at least one rank");
        let group = Arc::new(Group {
            ranks,
            state: Mutex::new(GroupState {
                base: 0,
                rounds: VecDeque::new(),
                left: vec![None; ranks],
            }),
        });
        (0..ranks)
            .map(|rank| ThreadsAllReduce {
                rank,
                group: group.clone(),
                round: 0,
                outstanding: false,
                result: Vec::new(),
            })
            .collect()
    }

    /// This handle's rank in its group.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// Runs `f` on the table of rounds, under the group's lock. A panic while holding it
    /// (only the length assert in `start`) leaves the table consistent: it comes before the
    /// first write.
    fn with_state<R>(&self, f: impl FnOnce(&mut GroupState) -> R) -> R {
        f(&mut self.group.state.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl AllReduce for ThreadsAllReduce {
    fn start(&mut self, values: &[u64]) {
        assert!(
            !self.outstanding,
            "rank {}: all-reduce {} is still outstanding",
            self.rank, self.round
        );
        let (rank, round) = (self.rank, self.round);
        self.with_state(|st| {
            // round >= base: base passes a round only once every rank has collected it.
            let i = usize::try_from(round - st.base).expect("live rounds fit in usize");
            if i == st.rounds.len() {
                let sums = vec![0; values.len()];
                st.rounds.push_back(Round { sums, contributed: 0, collected: 0 });
            }
            let r = &mut st.rounds[i];
            assert_eq!(
                r.sums.len(),
                values.len(),
                "rank {rank}: all-reduce {round} with {} values, another rank gave {}",
                values.len(),
                r.sums.len()
            );
            for (s, v) in r.sums.iter_mut().zip(values) {
                *s = s.wrapping_add(*v);
            }
            r.contributed += 1;
        });
        self.outstanding = true;
    }

    fn test(&mut self) -> Option<&[u64]> {
        if !self.outstanding {
            return None;
        }
        let (ranks, round) = (self.group.ranks, self.round);
        let mut result = std::mem::take(&mut self.result);
        let outcome = self.with_state(|st| {
            let i = usize::try_from(round - st.base).expect("live rounds fit in usize");
            if st.rounds[i].contributed < ranks {
                // A rank that left before contributing: fail instead of waiting forever.
                return Err(st.left.iter().position(|l| l.is_some_and(|at| at <= round)));
            }
            let r = &mut st.rounds[i];
            result.clear();
            result.extend_from_slice(&r.sums);
            r.collected += 1;
            while st.rounds.front().is_some_and(|r| r.collected == ranks) {
                st.rounds.pop_front();
                st.base += 1;
            }
            Ok(())
        });
        self.result = result;
        match outcome {
            Ok(()) => {}
            Err(None) => return None,
            Err(Some(gone)) => panic!(
                "rank {}: all-reduce {round} can never complete: rank {gone} left the group \
                 before contributing to it",
                self.rank
            ),
        }
        self.outstanding = false;
        self.round += 1;
        Some(&self.result)
    }
}

impl Drop for ThreadsAllReduce {
    fn drop(&mut self) {
        let first_missing = self.round + u64::from(self.outstanding);
        let rank = self.rank;
        self.with_state(|st| st.left[rank] = Some(first_missing));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splitmix64: the tests' seeded source of choices.
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform-ish in `0..n` (`n > 0`).
        pub(super) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    #[test]
    fn threads_all_reduce_sums_in_one_thread_with_ranks_at_different_rounds() {
        let mut g = ThreadsAllReduce::group(3);
        let mut rng = Rng(7);
        let mut done = [0u64; 3];
        let mut pending = [false; 3];
        let rounds = 200;
        while done.iter().any(|&d| d < rounds) {
            let r = rng.below(3);
            if done[r] == rounds {
                continue;
            }
            if !pending[r] {
                // Round i: rank r gives [i, r, 1].
                g[r].start(&[done[r], r as u64, 1]);
                pending[r] = true;
            } else if let Some(s) = g[r].test() {
                assert_eq!(s, &[3 * done[r], 3, 3][..], "rank {r}, round {}", done[r]);
                pending[r] = false;
                done[r] += 1;
            }
        }
        // Every round was collected by every rank: nothing is left in the table.
        g[0].with_state(|st| {
            assert!(st.rounds.is_empty());
            assert_eq!(st.base, rounds);
        });
    }

    #[test]
    fn threads_all_reduce_waits_for_every_rank_and_never_blocks() {
        let mut g = ThreadsAllReduce::group(2);
        assert_eq!(g[0].test(), None, "nothing outstanding");
        g[0].start(&[5]);
        for _ in 0..3 {
            assert_eq!(g[0].test(), None, "rank 1 has not contributed");
        }
        g[1].start(&[u64::MAX]);
        assert_eq!(g[0].test(), Some(&[4u64][..]), "wrapping sum");
        assert_eq!(g[0].test(), None, "collected");
        assert_eq!(g[1].test(), Some(&[4u64][..]));
    }

    #[test]
    fn threads_all_reduce_across_threads() {
        let handles: Vec<_> = ThreadsAllReduce::group(4)
            .into_iter()
            .map(|mut h| {
                std::thread::spawn(move || {
                    for i in 0..300u64 {
                        h.start(&[i * (h.rank() as u64 + 1), 1]);
                        let s = loop {
                            if let Some(s) = h.test() {
                                break s.to_vec();
                            }
                            std::thread::yield_now();
                        };
                        assert_eq!(s, vec![i * 10, 4]);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    #[test]
    #[should_panic(expected = "rank 1 left the group before contributing to it")]
    fn threads_all_reduce_reports_a_rank_that_left() {
        let mut g = ThreadsAllReduce::group(2);
        g.pop();
        g[0].start(&[1]);
        let _ = g[0].test();
    }

    #[test]
    #[should_panic(expected = "all-reduce 0 with 2 values, another rank gave 1")]
    fn threads_all_reduce_refuses_mismatched_lengths() {
        let mut g = ThreadsAllReduce::group(2);
        g[0].start(&[1]);
        g[1].start(&[1, 2]);
    }
}
