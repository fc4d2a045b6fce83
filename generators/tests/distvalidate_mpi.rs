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
mod mpirun;

use skein_generators::distributed::mpi::{build_local_csr_mpi, MpiExchange};
use skein_generators::distributed::roots::{component_edge_counts, search_roots_distributed};
use skein_generators::distributed::validate::{
    validate_bfs_distributed_with_budget, validate_sssp_distributed_with_budget,
    DistValidationError, DEFAULT_GATHER_BYTES,
};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{teps_edge_count, validate_bfs, validate_sssp};
use skein_generators::{Csr, NO_PARENT};

/// Workers per rank assumed by the boundaries (rank r holds parts r·W .. (r+1)·W).
const WORKERS: usize = 2;

/// Round size of the validation: small, so that it takes many rounds.
const ROUND: usize = 300;

fn params() -> KroneckerParams {
    KroneckerParams::new(10, 16, 2, 3).unwrap()
}

fn main() {
    mpirun::main(
        "--distvalidate-case",
        rank_side,
        &[
            ("validation_roots_and_nedge_on_2_ranks", || checks_case(2)),
            ("validation_roots_and_nedge_on_3_ranks", || checks_case(3)),
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
    let b = common::bounds(n, ranks, WORKERS);
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

    // The far ends' values asked from the owners (budget 0), then gathered.
    let mut last = None;
    for budget in [0, DEFAULT_GATHER_BYTES] {
        let (bfs, sssp) = common::root0(10, roots[0]);
        let got = validate_bfs_distributed_with_budget(
            &local,
            bfs.root,
            &bfs.level[lo..hi],
            &bfs.parent[lo..hi],
            ROUND,
            budget,
            &mut ex,
        );
        let want = validate_bfs(&csr, &bfs).map_err(DistValidationError::Invalid);
        if got != want {
            return Err(format!("budget {budget}: BFS: {got:?}, single-process {want:?}"));
        }
        let stats = got.map_err(|e| e.to_string())?;
        if stats.teps_edges != want0 {
            return Err(format!(
                "budget {budget}: BFS teps edges {}, nedge {want0}",
                stats.teps_edges
            ));
        }
        let got = validate_sssp_distributed_with_budget(
            &local,
            sssp.root,
            &sssp.dist[lo..hi],
            &sssp.parent[lo..hi],
            ROUND,
            budget,
            &mut ex,
        );
        let want = validate_sssp(&csr, &sssp).map_err(DistValidationError::Invalid);
        if got != want {
            return Err(format!("budget {budget}: SSSP: {got:?}, single-process {want:?}"));
        }
        // Corrupted copies: a vertex of the last rank unreached, another's parent moved.
        let v = (b[ranks - 1]..n).find(|&v| sssp.dist[v as usize].is_finite() && v != sssp.root);
        let v = v.ok_or("no reached vertex on the last rank")? as usize;
        let mut bad = sssp.clone();
        bad.dist[v] = f32::INFINITY;
        bad.parent[v] = NO_PARENT;
        let mut bad2 = bfs.clone();
        bad2.parent[v] = (bfs.parent[v] + 1) % n;
        let got = validate_sssp_distributed_with_budget(
            &local,
            bad.root,
            &bad.dist[lo..hi],
            &bad.parent[lo..hi],
            ROUND,
            budget,
            &mut ex,
        );
        let want = validate_sssp(&csr, &bad).map_err(DistValidationError::Invalid);
        if got != want || got.is_ok() {
            return Err(format!(
                "budget {budget}: corrupted SSSP: {got:?}, single-process {want:?}"
            ));
        }
        let got = validate_bfs_distributed_with_budget(
            &local,
            bad2.root,
            &bad2.level[lo..hi],
            &bad2.parent[lo..hi],
            ROUND,
            budget,
            &mut ex,
        );
        let want = validate_bfs(&csr, &bad2).map_err(DistValidationError::Invalid);
        if got != want || got.is_ok() {
            return Err(format!(
                "budget {budget}: corrupted BFS: {got:?}, single-process {want:?}"
            ));
        }
        last = Some(stats);
    }
    let stats = last.ok_or("no validation ran")?;
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

fn checks_case(ranks: usize) -> Result<(), String> {
    let out = mpirun::launch(ranks, "--distvalidate-case", "checks")?;
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
