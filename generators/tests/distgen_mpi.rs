//! Distributed construction on real ranks (feature `mpi`; `harness = false`).
//!
//! `cargo test -p skein-generators --features mpi` runs this binary without `mpirun`: it is
//! then the *harness*, and re-launches itself under `mpirun -np 2` and `-np 3` (MPI can be
//! initialised only once per process) with `--distgen-case NAME`, where each copy builds its
//! rows of a SCALE 10 graph and checks them against the single-process CSR it builds on its
//! own. The harness checks every launch's exit status within a deadline and that the ranks'
//! checksums add up to the single-process CSR's. Arguments that are not flags filter the
//! cases by name, as with libtest.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use skein_generators::distributed::{self, mpi::build_local_csr_mpi, LocalCsr};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

/// The launch line that works as root and on a 2-core machine.
const MPIRUN_FLAGS: [&str; 4] = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

/// How long a launch may take before the harness kills it and fails the case.
const HARD_LIMIT: Duration = Duration::from_secs(60);

/// Workers per rank assumed by the boundaries (rank r holds parts r·W .. (r+1)·W).
const WORKERS: usize = 2;

fn params() -> KroneckerParams {
    KroneckerParams::new(10, 16, 2, 3).unwrap()
}

/// The rank boundaries a job of `ranks` ranks of [`WORKERS`] workers uses: the first vertex
/// of every `WORKERS`-th block of the partition of `n` vertices into `ranks · WORKERS`
/// contiguous blocks, owner `(v · m) >> 64` with `m = floor(2^64 · parts / n)` (the
/// partition's owner function, restated here: this crate does not depend on it).
fn bounds(n: u64, ranks: usize) -> Vec<u64> {
    let parts = ranks * WORKERS;
    let m = ((parts as u128) << 64) / n as u128;
    let owner = |v: u64| ((v as u128 * m) >> 64) as usize;
    let mut b: Vec<u64> =
        (0..ranks).map(|r| (0..n).find(|&v| owner(v) >= r * WORKERS).unwrap_or(n)).collect();
    b.push(n);
    b
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--distgen-case") {
        let case = args.get(i + 1).cloned().unwrap_or_default();
        std::process::exit(rank_side(&case));
    }
    harness(&args[1..]);
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
    let b = bounds(p.num_vertices(), ranks);
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
        other => {
            eprintln!("unknown case {other}");
            2
        }
    }
}

// ---------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------

type Case = (&'static str, fn() -> Result<(), String>);

fn harness(args: &[String]) {
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: [Case; 3] = [
        ("rows_on_2_ranks_equal_the_single_process_csr", || rows_case(2)),
        ("rows_on_3_ranks_equal_the_single_process_csr", || rows_case(3)),
        ("round_size_0_is_refused_on_every_rank", bad_round_case),
    ];
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let start = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let mut failures = Vec::new();
    for (name, case) in &selected {
        let t = Instant::now();
        match case() {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(e) => {
                println!("test {name} ... FAILED");
                failures.push((name, e));
            }
        }
    }
    for (name, e) in &failures {
        println!("\n---- {name} ----\n{e}");
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failures.len(),
        failures.len(),
        cases.len() - selected.len(),
        start.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        std::process::exit(101);
    }
}

/// Runs `mpirun -np ranks THIS --distgen-case case`; its stdout, or why it failed.
fn launch(ranks: usize, case: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new("mpirun");
    cmd.args(MPIRUN_FLAGS).arg("-np").arg(ranks.to_string()).arg(&exe);
    cmd.arg("--distgen-case").arg(case);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group, so a launch that outlives the deadline is killed whole.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start mpirun: {e}"))?;
    let pgid = child.id() as i32;
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let start = Instant::now();
    let mut status = None;
    while start.elapsed() < HARD_LIMIT {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for mpirun: {e}"))? {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        // SAFETY: kill(2) with a negative pid signals the process group of the mpirun we
        // started (its own group, made above); it touches no memory of ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    let report = format!("status {status:?}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}");
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(_) => Err(format!("mpirun failed\n{report}")),
        None => Err(format!("mpirun still running after {HARD_LIMIT:?}; killed\n{report}")),
    }
}

fn rows_case(ranks: usize) -> Result<(), String> {
    let out = launch(ranks, "rows")?;
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

fn bad_round_case() -> Result<(), String> {
    let out = launch(2, "bad-round")?;
    let refused: Vec<&str> = out.lines().filter(|l| l.starts_with("REFUSED ")).collect();
    if refused.len() != 2 || !refused.iter().all(|l| l.contains("round size of 0 edges")) {
        return Err(format!("expected both ranks to refuse round size 0:\n{out}"));
    }
    Ok(())
}
