//! Loom model of the all-reduce over the ranks' board: two ranks, three rounds (so each
//! rank's two places are both reused), the same sums on both.

use super::*;
use crate::transport::board::heap::HeapBoard;
use std::sync::Arc;

#[test]
fn loom_board_all_reduce() {
    loom::model(|| {
        let mem = Arc::new(HeapBoard::new(2));
        let other = mem.clone();
        let run = |mem: Arc<HeapBoard>, r: usize| {
            let mut ar = ShmAllReduce::new(Board::new(mem, r));
            let mut got = Vec::new();
            for round in 0..3u64 {
                ar.start(&[round + 10 * r as u64]);
                loop {
                    if let Some(s) = ar.test() {
                        got.push(s[0]);
                        break;
                    }
                    loom::thread::yield_now();
                }
            }
            got
        };
        let t = loom::thread::spawn(move || run(other, 1));
        let mine = run(mem, 0);
        let theirs = t.join().unwrap();
        assert_eq!(mine, vec![10, 12, 14]);
        assert_eq!(theirs, mine);
    });
}
