//! Distributed validation, roots and `nedge` on real ranks (feature `mpi`; `harness = false`).
//!
//! Run without `mpirun`, this binary is the *harness*: it re-launches itself under
//! `mpirun -np 2` and `-np 3` with `--distvalidate-case NAME` (MPI can be initialised only
//! once per process), as `distgen_mpi.rs` does. Each rank builds its rows of a SCALE 10
//! graph over MPI, then checks that the distributed root choice, per-root `nedge`, and the
//! validation of the reference's root-0 BFS and SSSP results (and of corrupted copies)
//! give what the single-process code gives on the whole graph, which each rank also builds
//! on its own. The harness checks every launch's exit status within a deadline and that
//! every rank reported agreement.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use skein_generators::distributed::mpi::{build_local_csr_mpi, MpiExchange};
use skein_generators::distributed::roots::{component_edge_counts, search_roots_distributed};
use skein_generators::distributed::validate::{
    validate_bfs_distributed, validate_sssp_distributed, DistValidationError,
};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{teps_edge_count, validate_bfs, validate_sssp};
use skein_generators::{Csr, NO_PARENT};

/// The launch line that works as root and on a 2-core machine.
const MPIRUN_FLAGS: [&str; 4] = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

/// How long a launch may take before the harness kills it and fails the case.
const HARD_LIMIT: Duration = Duration::from_secs(60);

/// Workers per rank assumed by the boundaries (rank r holds parts r·W .. (r+1)·W).
const WORKERS: usize = 2;

/// Round size of the validation: small, so that it takes many rounds.
const ROUND: usize = 300;

fn params() -> KroneckerParams {
    KroneckerParams::new(10, 16, 2, 3).unwrap()
}

/// The rank boundaries of `ranks` ranks of [`WORKERS`] workers (the partition's owner
/// function restated, as in `distgen_mpi.rs`).
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
    if let Some(i) = args.iter().position(|a| a == "--distvalidate-case") {
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
    let rank = world.rank() as usize;
    if case != "checks" {
        eprintln!("unknown case {case}");
        return 2;
    }
    match checks(rank) {
        Ok(line) => {
            println!("AGREE rank={rank} {line}");
            0
        }
        Err(e) => {
            println!("DISAGREE rank={rank}: {e}");
            1
        }
    }
}

fn checks(rank: usize) -> Result<String, String> {
    let p = params();
    let n = p.num_vertices();
    let mut ex = MpiExchange::world().map_err(|e| e.to_string())?;
    let ranks =
        mpi::traits::Communicator::size(&mpi::topology::SimpleCommunicator::world()) as usize;
    let b = bounds(n, ranks);
    let local = build_local_csr_mpi(&p, &b, 1000).map_err(|e| e.to_string())?;
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let (lo, hi) = (b[rank] as usize, b[rank + 1] as usize);

    let roots = search_roots_distributed(&p, &local, 64, &mut ex).map_err(|e| e.to_string())?;
    let want = kronecker::search_roots(&p, &csr, 64);
    if roots != want {
        return Err(format!("roots {roots:?}, single-process {want:?}"));
    }
    let nedge = component_edge_counts(&local, &roots, ROUND, &mut ex).map_err(|e| e.to_string())?;
    let comp = component(&csr, roots[0]);
    let want0 = teps_edge_count(&csr, |v| comp[v as usize]);
    if nedge.len() != 64 || nedge[0] != want0 {
        return Err(format!("nedge {nedge:?}, single-process root 0: {want0}"));
    }

    let (bfs, sssp) = common::root0(10, roots[0]);
    let got = validate_bfs_distributed(
        &local,
        bfs.root,
        &bfs.level[lo..hi],
        &bfs.parent[lo..hi],
        ROUND,
        &mut ex,
    );
    let want = validate_bfs(&csr, &bfs).map_err(DistValidationError::Invalid);
    if got != want {
        return Err(format!("BFS: {got:?}, single-process {want:?}"));
    }
    let stats = got.map_err(|e| e.to_string())?;
    if stats.teps_edges != want0 {
        return Err(format!("BFS teps edges {}, nedge {want0}", stats.teps_edges));
    }
    let got = validate_sssp_distributed(
        &local,
        sssp.root,
        &sssp.dist[lo..hi],
        &sssp.parent[lo..hi],
        ROUND,
        &mut ex,
    );
    let want = validate_sssp(&csr, &sssp).map_err(DistValidationError::Invalid);
    if got != want {
        return Err(format!("SSSP: {got:?}, single-process {want:?}"));
    }
    // Corrupted copies: a vertex of the last rank unreached, another's parent moved.
    let v = (b[ranks - 1]..n).find(|&v| sssp.dist[v as usize].is_finite() && v != sssp.root);
    let v = v.ok_or("no reached vertex on the last rank")? as usize;
    let mut bad = sssp.clone();
    bad.dist[v] = f32::INFINITY;
    bad.parent[v] = NO_PARENT;
    let mut bad2 = bfs.clone();
    bad2.parent[v] = (bfs.parent[v] + 1) % n;
    let got = validate_sssp_distributed(
        &local,
        bad.root,
        &bad.dist[lo..hi],
        &bad.parent[lo..hi],
        ROUND,
        &mut ex,
    );
    let want = validate_sssp(&csr, &bad).map_err(DistValidationError::Invalid);
    if got != want || got.is_ok() {
        return Err(format!("corrupted SSSP: {got:?}, single-process {want:?}"));
    }
    let got = validate_bfs_distributed(
        &local,
        bad2.root,
        &bad2.level[lo..hi],
        &bad2.parent[lo..hi],
        ROUND,
        &mut ex,
    );
    let want = validate_bfs(&csr, &bad2).map_err(DistValidationError::Invalid);
    if got != want || got.is_ok() {
        return Err(format!("corrupted BFS: {got:?}, single-process {want:?}"));
    }
    Ok(format!("teps_edges={} reached={} nedge0={want0}", stats.teps_edges, stats.reached))
}

fn component(g: &Csr, root: u64) -> Vec<bool> {
    let mut seen = vec![false; g.num_vertices() as usize];
    let mut stack = vec![root];
    seen[root as usize] = true;
    while let Some(v) = stack.pop() {
        for &u in g.neighbors(v) {
            if !seen[u as usize] {
                seen[u as usize] = true;
                stack.push(u);
            }
        }
    }
    seen
}

// ---------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------

type Case = (&'static str, fn() -> Result<(), String>);

fn harness(args: &[String]) {
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: [Case; 2] = [
        ("validation_roots_and_nedge_on_2_ranks", || checks_case(2)),
        ("validation_roots_and_nedge_on_3_ranks", || checks_case(3)),
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

/// Runs `mpirun -np ranks THIS --distvalidate-case case`; its stdout, or why it failed.
fn launch(ranks: usize, case: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new("mpirun");
    cmd.args(MPIRUN_FLAGS).arg("-np").arg(ranks.to_string()).arg(&exe);
    cmd.arg("--distvalidate-case").arg(case);
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

fn checks_case(ranks: usize) -> Result<(), String> {
    let out = launch(ranks, "checks")?;
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("AGREE ")).collect();
    if lines.len() != ranks {
        return Err(format!("{} AGREE lines for {ranks} ranks:\n{out}", lines.len()));
    }
    // Every rank saw the same statistics.
    let stats: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once(' ').unwrap().1)
        .map(|l| l.split_once(' ').unwrap().1)
        .collect();
    if stats.iter().any(|s| s != &stats[0]) {
        return Err(format!("ranks disagree:\n{out}"));
    }
    Ok(())
}
