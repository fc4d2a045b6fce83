use super::*;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[test]
fn a_wake_before_the_block_is_not_lost() {
    let w = WakeWord::default();
    w.arm();
    // The waker comes between the re-check and the block: it takes the ARMED, and the block
    // returns at once (the kernel sees the word changed), woken.
    assert!(w.wake());
    assert_eq!(w.block(Duration::from_secs(30)), Blocked::Woken);
    assert!(!w.is_armed());
    // A worker that is not armed is not woken (nothing to do).
    assert!(!w.wake());
}

#[test]
fn a_block_nobody_wakes_ends_at_its_limit_not_woken() {
    let w = WakeWord::default();
    w.arm();
    assert_eq!(w.block(Duration::from_millis(1)), Blocked::NotWoken);
    assert!(!w.is_armed(), "the block leaves the word awake");
}

#[test]
fn a_blocked_worker_is_woken_by_a_publication() {
    let w = Arc::new(WakeWord::default());
    let work = Arc::new(AtomicBool::new(false));
    let (w2, work2) = (w.clone(), work.clone());
    let sleeper = std::thread::spawn(move || {
        let mut blocks = 0;
        loop {
            w2.arm();
            if work2.load(Ordering::Acquire) {
                w2.disarm();
                return blocks;
            }
            // A long limit: only the wake-up can end this wait in time.
            assert_eq!(w2.block(Duration::from_secs(60)), Blocked::Woken);
            blocks += 1;
        }
    });
    // Give the sleeper time to block (not needed for correctness: either order works).
    std::thread::sleep(Duration::from_millis(20));
    work.store(true, Ordering::Release);
    w.wake();
    let blocks = sleeper.join().unwrap();
    assert!(blocks <= 1);
}

/// A rank's worker (a thread here) blocks on its word until its ring has bytes; the writer's
/// publication (`tail`, then fence and wake, as `transport::shm` does) wakes it.
#[test]
fn a_blocked_reader_is_woken_by_a_publication_into_its_ring() {
    use crate::transport::ring::tests::HeapRing;
    use crate::transport::ring::{Reader, Writer};
    let ring = Arc::new(HeapRing::new(64));
    let word = Arc::new(WakeWord::default());
    let (r2, w2) = (ring.clone(), word.clone());
    let reader = std::thread::spawn(move || {
        let mut r = Reader::new(64);
        let mut woken = 0;
        loop {
            w2.arm();
            if let Some(v) = r.pull(&*r2, Vec::new).unwrap() {
                w2.disarm();
                return (v, woken);
            }
            if w2.block(Duration::from_secs(60)) == Blocked::Woken {
                woken += 1;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut w = Writer::default();
    assert!(w.push(&*ring, b"envelope"));
    word.wake();
    let (v, woken) = reader.join().unwrap();
    assert_eq!(v, b"envelope");
    assert!(woken <= 1);
}

/// A rank whose all-reduce round waits for another rank's post blocks on its first worker's
/// word; the other rank's `Board::post` wakes it.
#[test]
fn a_rank_blocked_on_its_round_is_woken_by_a_board_post() {
    use crate::runtime::quiesce_ranks::shm::ShmAllReduce;
    use crate::runtime::quiesce_ranks::AllReduce;
    use crate::transport::board::heap::HeapBoard;
    use crate::transport::board::Board;
    let mem = Arc::new(HeapBoard::new(2));
    let m0 = mem.clone();
    let waiting = std::thread::spawn(move || {
        let mut ar = ShmAllReduce::new(Board::new(m0.clone(), 0));
        ar.start(&[1]);
        let mut blocks = 0;
        loop {
            m0.word(0).arm();
            if let Some(s) = ar.test() {
                m0.word(0).disarm();
                return (s[0], blocks);
            }
            m0.word(0).block(Duration::from_secs(60));
            blocks += 1;
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut ar = ShmAllReduce::new(Board::new(mem.clone(), 1));
    ar.start(&[2]);
    let (sum, blocks) = waiting.join().unwrap();
    assert_eq!(sum, 3);
    assert!(blocks <= 1, "one post, one wake-up");
    assert_eq!(ar.test().map(|s| s[0]), Some(3));
}

#[test]
fn thread_groups_tile_the_workers_in_blocks() {
    for workers in 1..=17 {
        for threads in 1..=workers + 2 {
            let t = threads.min(workers);
            let mut starts = Vec::new();
            for i in 0..workers {
                let g = thread_group(i, workers, threads);
                assert!(g.contains(&i), "{i} of {workers} on {threads}: {g:?}");
                let k = starts.iter().position(|&s| s == g.start).unwrap_or_else(|| {
                    starts.push(g.start);
                    starts.len() - 1
                });
                // The k-th block is `k·W/T .. (k+1)·W/T`, as the runtime starts them.
                assert_eq!(g, k * workers / t..(k + 1) * workers / t);
            }
            assert_eq!(starts.len(), t, "{workers} workers on {threads} threads");
        }
    }
}

#[test]
fn the_node_cores_are_the_union_of_the_ranks_affinities() {
    // Ranks bound to cores 0 and 1 (Open MPI's default for two ranks): two cores together,
    // although each may run on one.
    let (a, b) = ([0b01u64, 0], [0b10u64, 0]);
    assert_eq!(union_cores([&a[..], &b[..]]), 2);
    // Unbound ranks on 4 CPUs: 4, not 8.
    let all = [0b1111u64];
    assert_eq!(union_cores([&all[..], &all[..]]), 4);
    // CPUs past the first word count; unknown masks (zeros) add nothing.
    let high = [0u64, 1 << 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 << 63];
    assert_eq!(union_cores([&high[..], &[0u64; AFFINITY_WORDS][..]]), 2);
    assert_eq!(union_cores(std::iter::empty()), 0);
    // This thread may run somewhere (where the OS tells).
    let mine = affinity_mask();
    if cfg!(target_os = "linux") {
        assert!(union_cores([&mine[..]]) >= 1, "{mine:?}");
    }
}

#[test]
fn a_rank_takes_its_share_of_the_cores_of_its_mask() {
    let all = [0b1111u64, 0];
    let (c0, c1, c2, c3) = ([0b0001u64, 0], [0b0010u64, 0], [0b0100u64, 0], [0b1000u64, 0]);
    let (s0, s1) = ([0b0011u64, 0], [0b1100u64, 0]);
    let none = [0u64, 0];
    fn r(asked: usize, cores: usize, mask: &[u64]) -> RankCores<'_> {
        RankCores { asked, cores, mask }
    }
    // Unbound (the same mask): the cores divided, at least one each, at most a worker each.
    assert_eq!(node_threads(&[r(0, 4, &all), r(0, 4, &all)], 8), [2, 2]);
    assert_eq!(node_threads(&[r(0, 4, &all); 3], 8), [1, 1, 1]);
    assert_eq!(node_threads(&[r(0, 4, &all); 8], 8), [1; 8]);
    assert_eq!(node_threads(&[r(0, 4, &all), r(0, 4, &all)], 1), [1, 1]);
    // A quota below the mask: the quota is what is divided.
    assert_eq!(node_threads(&[r(0, 2, &all), r(0, 2, &all)], 8), [1, 1]);
    // Bound to a core each: their own core; two to a socket each: the socket's cores shared.
    let bound = [r(0, 1, &c0), r(0, 1, &c1), r(0, 1, &c2), r(0, 1, &c3)];
    assert_eq!(node_threads(&bound, 4), [1, 1, 1, 1]);
    let sockets = [r(0, 2, &s0), r(0, 2, &s0), r(0, 2, &s1), r(0, 2, &s1)];
    assert_eq!(node_threads(&sockets, 4), [1, 1, 1, 1]);
    assert_eq!(node_threads(&[r(0, 2, &s0), r(0, 2, &s1)], 4), [2, 2]);
    // Alone on a mask, or the mask unknown: its own cores.
    assert_eq!(node_threads(&[r(0, 4, &all)], 8), [4]);
    assert_eq!(node_threads(&[r(0, 4, &none), r(0, 4, &none)], 8), [4, 4]);
    // Asked for: as asked, at most one per worker, whatever the others do.
    assert_eq!(node_threads(&[r(3, 4, &all), r(0, 4, &all)], 8), [3, 2]);
    assert_eq!(node_threads(&[r(9, 4, &all), r(0, 4, &all)], 2), [2, 2]);
}
