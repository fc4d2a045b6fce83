use super::super::{Detector, RankCounters};
use super::*;
use crate::runtime::run_state::WorkerCounters;
use crate::sync::proto;
use std::time::{Duration, Instant};

const RANK_SIDE: &str = "runtime::quiesce_ranks::mpi::tests::rank_side";
const MARK: &str = "SKEIN_QUIESCE_RANKS_MPI_RANK_SIDE";
const RANKS: usize = 3;

fn wait(a: &mut MpiAllReduce) -> Vec<u64> {
    let start = Instant::now();
    loop {
        if let Some(s) = a.test() {
            return s.to_vec();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "all-reduce never completed");
        std::thread::yield_now();
    }
}

#[test]
#[ignore = "rank side of mpi_all_reduce_on_three_ranks; runs under mpirun only"]
fn rank_side() {
    if std::env::var_os(MARK).is_none() {
        eprintln!("not under the mpirun of mpi_all_reduce_on_three_ranks: nothing to do");
        return;
    }
    crate::rack::init().expect("rack bootstrap");
    let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
    assert_eq!(ranks, RANKS);
    let mut a = MpiAllReduce::new().expect("MPI is up");
    assert_eq!(a.test(), None, "nothing outstanding");
    let r = rank as u64;
    for i in 0..200u64 {
        a.start(&[i, r, 1, u64::MAX]);
        assert_eq!(wait(&mut a), vec![3 * i, 3, 3, u64::MAX - 2], "round {i}");
    }

    // The detector over MPI: each rank's one worker creates and finishes a few tasks
    // while the rounds go on, each rank at its own pace. The rule of activity holds: a
    // root task, created before the first round, creates the others and finishes last.
    // Every rank must stop on the same detection with every task counted.
    let counters = [WorkerCounters::new(RANKS)];
    let mut det = Detector::new(a);
    let tasks = 5 + r;
    proto::bump(&counters[0].created, 1); // the root
    let (mut created, mut polls) = (1, 0u64);
    let start = Instant::now();
    let verdict = loop {
        assert!(start.elapsed() < Duration::from_secs(20), "no positive verdict");
        polls += 1;
        let finished = counters.finished();
        if polls % (2 + r) == 0 && created < tasks {
            proto::bump(&counters[0].created, 1); // by the root, still running
            created += 1;
        } else if finished + 1 < created || (created == tasks && finished < created) {
            // A child finishes; the root once every child has been created and finished.
            proto::bump(&counters[0].finished, 1);
        }
        if let Some(v) = det.poll(&counters[..]) {
            if v.quiescent {
                break v;
            }
        }
        std::thread::yield_now();
    };
    assert_eq!(verdict.created, 15 + 3, "every task of every rank counted");
    assert_eq!(verdict.finished, verdict.created);
    // Same detection everywhere: Σd = 3·d and Σd² = 3·d² only if every d is equal.
    let mut a = MpiAllReduce::new().expect("MPI is up");
    let d = verdict.detection;
    a.start(&[d, d * d]);
    assert_eq!(wait(&mut a), vec![3 * d, 3 * d * d], "ranks stopped on different detections");
    println!("quiesce-ranks-mpi: rank {rank} ok, detection {d}");
}

#[test]
fn mpi_all_reduce_on_three_ranks() {
    let out =
        crate::rack::relaunch::mpirun_self(RANKS, RANK_SIDE, (MARK, "1"), Duration::from_secs(60))
            .unwrap_or_else(|report| panic!("mpirun failed or hung: {report}"));
    for rank in 0..RANKS {
        assert!(
            out.contains(&format!("quiesce-ranks-mpi: rank {rank} ok")),
            "rank {rank} did not report: {out}"
        );
    }
}
