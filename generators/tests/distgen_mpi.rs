//! Distributed construction on real ranks (feature `mpi`; `harness = false`).
//!
//! `cargo test -p skein-generators --features mpi` runs this binary without `mpirun`: it is
//! then the *harness*, and re-launches itself under `mpirun -np 2` and `-np 3` (MPI can be
//! initialised only once per process) with `--distgen-case NAME`, where each copy builds its
//! rows of a SCALE 10 graph and checks them against the single-process CSR it builds on its
//! own. The harness checks every launch's exit status within a deadline and that the ranks'
//! checksums add up to the single-process CSR's. Arguments that are not flags filter the
//! cases by name, as with libtest.

mod common;
mod mpirun;

use skein_generators::distributed::{self, mpi::build_local_csr_mpi, LocalCsr};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

/// Workers per rank assumed by the boundaries (rank r holds parts r·W .. (r+1)·W).
const WORKERS: usize = 2;

fn params() -> KroneckerParams {
    KroneckerParams::new(10, 16, 2, 3).unwrap()
}

fn main() {
    mpirun::main(
        "--distgen-case",
        rank_side,
        &[
            ("rows_on_2_ranks_equal_the_single_process_csr", || rows_case(2)),
            ("rows_on_3_ranks_equal_the_single_process_csr", || rows_case(3)),
            ("round_size_0_is_refused_on_every_rank", bad_round_case),
            ("started_exchanges_deliver_what_exchange_does", start_case),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// The rank side.
// ---------------------------------------------------------------------------------------

fn rank_side(case: &str) -> i32 {
    use mpi::traits::Communicator;
    let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Multiple) else {
        eprintln!("MPI was already initialised");
        return 2;
    };
    let world = universe.world();
    let (rank, ranks) = (world.rank() as usize, world.size() as usize);
    let p = params();
    let b = common::bounds(p.num_vertices(), ranks, WORKERS);
    match case {
        "rows" => {
            // 1000-edge rounds: 6 to 9 rounds at SCALE 10, with uneven shares.
            let local = match build_local_csr_mpi(&p, &b, 1000) {
                Ok(l) => l,
                Err(e) => {
                    println!("ERROR rank={rank}: {e}");
                    return 1;
                }
            };
            let csr = Csr::from_edge_list(&kronecker::generate(&p));
            let want = LocalCsr::from_csr(&csr, b[rank]..b[rank + 1]);
            if local != want {
                let bad = local.range().find(|&v| {
                    local.range() != want.range()
                        || local.arcs(v).collect::<Vec<_>>() != want.arcs(v).collect::<Vec<_>>()
                });
                println!("MISMATCH rank={rank} first bad vertex {bad:?}");
                return 1;
            }
            println!(
                "ROWS rank={rank} ranks={ranks} vertices={:?} arcs={} checksum={}",
                local.range(),
                local.num_arcs(),
                local.checksum()
            );
            0
        }
        "bad-round" => match build_local_csr_mpi(&p, &b, 0) {
            Ok(_) => {
                println!("ACCEPTED rank={rank}");
                1
            }
            Err(e) => {
                println!("REFUSED rank={rank}: {e}");
                0
            }
        },
        "start" => match start_side(rank, ranks) {
            Ok(()) => {
                println!("START-OK rank={rank}");
                0
            }
            Err(e) => {
                println!("START-BAD rank={rank}: {e}");
                1
            }
        },
        other => {
            eprintln!("unknown case {other}");
            2
        }
    }
}

/// The words rank `me` sends rank `d` in exchange `round`: 0 to 3 of them, some blocks
/// empty, each naming its sender, receiver, round and place.
fn words_for(me: usize, d: usize, round: usize) -> Vec<u64> {
    let k = (me + 2 * d + round) % 4;
    (0..k).map(|i| (me * 1000 + d * 100 + round * 10 + i) as u64).collect()
}

/// Two exchanges started before either is collected deliver, in order, what
/// `exchange` delivers for the same words; the send buffers come back unchanged; a
/// second collection is an error.
fn start_side(me: usize, ranks: usize) -> Result<(), String> {
    use skein_generators::distributed::{mpi::MpiExchange, Exchange};
    let mut ex = MpiExchange::world().map_err(|e| e.to_string())?;
    let send = |round: usize| {
        let blocks: Vec<Vec<u64>> = (0..ranks).map(|d| words_for(me, d, round)).collect();
        (blocks.concat(), blocks.iter().map(Vec::len).collect::<Vec<_>>())
    };
    let (s0, c0) = send(0);
    let (s1, c1) = send(1);
    let mut first = ex.start(s0.clone(), &c0, 3).map_err(|e| e.to_string())?;
    let mut second = ex.start(s1.clone(), &c1, 3).map_err(|e| e.to_string())?;
    for (round, started) in [(0, &mut first), (1, &mut second)] {
        let got = started.received().map_err(|e| e.to_string())?;
        let want: Vec<Vec<u64>> = (0..ranks).map(|s| words_for(s, me, round)).collect();
        let want = (want.concat(), want.iter().map(Vec::len).collect::<Vec<_>>());
        if got != want {
            return Err(format!("round {round}: received {got:?}, expected {want:?}"));
        }
        if started.received().is_ok() {
            return Err(format!("round {round}: collected twice"));
        }
        let (s, c) = send(round);
        if ex.exchange(&s, &c).map_err(|e| e.to_string())? != want {
            return Err(format!("round {round}: exchange disagrees"));
        }
    }
    for (started, sent) in [(first, s0), (second, s1)] {
        if started.into_send_buffer().map_err(|e| e.to_string())? != sent {
            return Err("a send buffer came back changed".into());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------

fn rows_case(ranks: usize) -> Result<(), String> {
    let out = mpirun::launch(ranks, "--distgen-case", "rows")?;
    let p = params();
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("ROWS ")).collect();
    if lines.len() != ranks {
        return Err(format!("{} ROWS lines for {ranks} ranks:\n{out}", lines.len()));
    }
    let field = |l: &str, key: &str| -> Result<u64, String> {
        l.split_whitespace()
            .find_map(|f| f.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no {key} in {l:?}"))
    };
    let (mut arcs, mut sum) = (0u64, 0u64);
    for l in &lines {
        arcs += field(l, "arcs=")?;
        sum = sum.wrapping_add(field(l, "checksum=")?);
    }
    if arcs != csr.num_arcs() || sum != distributed::csr_checksum(&csr) {
        return Err(format!(
            "ranks hold {arcs} arcs, checksum {sum}; the CSR has {} arcs, checksum {}\n{out}",
            csr.num_arcs(),
            distributed::csr_checksum(&csr)
        ));
    }
    Ok(())
}

fn start_case() -> Result<(), String> {
    let out = mpirun::launch(3, "--distgen-case", "start")?;
    if out.lines().filter(|l| l.starts_with("START-OK ")).count() != 3 {
        return Err(format!("expected 3 ranks to pass:\n{out}"));
    }
    Ok(())
}

fn bad_round_case() -> Result<(), String> {
    let out = mpirun::launch(2, "--distgen-case", "bad-round")?;
    let refused: Vec<&str> = out.lines().filter(|l| l.starts_with("REFUSED ")).collect();
    if refused.len() != 2 || !refused.iter().all(|l| l.contains("round size of 0 edges")) {
        return Err(format!("expected both ranks to refuse round size 0:\n{out}"));
    }
    Ok(())
}
