//! The board's all-reduce on threads playing ranks: many rounds, the same sums everywhere.

use super::*;
use crate::transport::board::heap::HeapBoard;
use std::sync::Arc;

#[test]
fn every_rank_gets_the_same_sums_round_after_round() {
    let ranks = 3;
    let mem = Arc::new(HeapBoard::new(ranks));
    let handles: Vec<_> = (0..ranks)
        .map(|r| {
            let mem = mem.clone();
            std::thread::spawn(move || {
                let mut ar = ShmAllReduce::new(Board::new(mem, r));
                let mut got = Vec::new();
                for round in 0..200u64 {
                    ar.start(&[round, r as u64 + 1, round * (r as u64 + 1)]);
                    let sums = loop {
                        if let Some(s) = ar.test() {
                            break s.to_vec();
                        }
                        std::thread::yield_now();
                    };
                    got.push(sums);
                }
                got
            })
        })
        .collect();
    let all: Vec<Vec<Vec<u64>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (round, sums) in all[0].iter().enumerate() {
        let d = round as u64;
        assert_eq!(sums, &vec![3 * d, 1 + 2 + 3, d * 6], "round {round}");
    }
    assert!(all.iter().all(|g| g == &all[0]), "every rank the same sums");
}

#[test]
fn nothing_completes_before_every_rank_posted() {
    let mem = Arc::new(HeapBoard::new(2));
    let mut a = ShmAllReduce::new(Board::new(mem.clone(), 0));
    let mut b = ShmAllReduce::new(Board::new(mem, 1));
    a.start(&[5]);
    assert!(a.test().is_none(), "rank 1 has not posted");
    b.start(&[7]);
    assert_eq!(b.test(), Some(&[12][..]));
    assert_eq!(a.test(), Some(&[12][..]));
    assert!(a.test().is_none(), "nothing outstanding");
}
