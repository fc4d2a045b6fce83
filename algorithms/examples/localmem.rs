//! Per-rank peak memory (and speed) of the engine on rank-local rows, against one process
//! holding the whole graph (feature `mpi`).
//!
//! ```sh
//! cargo build --release -p skein-algorithms --features mpi --example localmem
//! # each rank builds only its rows (skein_generators::distributed), Engine::from_local:
//! mpirun -np 2 --bind-to none target/release/examples/localmem --scale 22
//! # one process, the whole graph (Csr) and Engine::new, the same searches:
//! target/release/examples/localmem --scale 22 --whole --workers 2
//! ```
//!
//! Options: `--scale S` (default 20), `--workers W` per rank (default 1), `--roots R`
//! (default 4), `--whole`. Each run builds the graph (edge factor 16, the Graph500
//! seeds), then runs SSSP and BFS from the Graph500 roots, keeping each rank's slice of
//! the results (`sssp_local` / `bfs_local`), and prints on rank 0 one line per kernel
//! (harmonic-mean MTEPS over the roots, Graph500 edge count) and each rank's peak resident
//! memory (`VmHWM`) and arc-copy bytes.
//!
//! Measured on the 2-core development machine (shared, so the speeds are noisy; memory
//! is not), 2 ranks × 1 worker against one process of 2 workers, 2 roots: peak RSS per
//! rank 0.47 GiB vs 0.85 GiB at SCALE 20 (0.55×), 1.76 GiB vs 3.35 GiB at SCALE 22
//! (0.53×); at SCALE 22 a rank holds 68.6 M arcs and 0.84 GiB of arc copies and in-arcs
//! (the one process 1.62 GiB). Measured again on 2026-11-27, after the rank-local rows'
//! construction moved to per-round buckets: 0.43 and 0.46 GiB vs 0.85 GiB at SCALE 20,
//! 1.76 and 1.68 GiB vs 3.35 GiB at SCALE 22, the same arc counts and copies: this
//! program's peak is reached during the searches (the rows, plus 0.84 GiB of arc copies and
//! in-arcs per rank at SCALE 22), above the construction's own peak, so the smaller
//! construction peak does not change it.

use std::sync::Arc;
use std::time::Instant;

use skein_algorithms::{rank_bounds, Engine, EngineOptions};
use skein_generators::distributed::mpi::{build_local_csr_mpi, MpiExchange};
use skein_generators::distributed::roots::search_roots_distributed;
use skein_generators::distributed::{LocalCsr, DEFAULT_ROUND_EDGES};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

struct Args {
    scale: u32,
    workers: usize,
    roots: usize,
    whole: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args { scale: 20, workers: 1, roots: 4, whole: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--whole" {
            a.whole = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |_| format!("{flag}: `{value}` is not a valid number");
        match flag.as_str() {
            "--scale" => a.scale = value.parse().map_err(bad)?,
            "--workers" => a.workers = value.parse().map_err(bad)?,
            "--roots" => a.roots = value.parse().map_err(bad)?,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(a)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse()?;
    // The rack bootstrap (collective under mpirun) initialises MPI.
    let (rank, ranks) = (skein::rank(), skein::ranks());
    let p = KroneckerParams::new(a.scale, 16, 2, 3)?;
    let opts = EngineOptions { workers: a.workers, ..EngineOptions::default() };
    let t = Instant::now();
    let (engine, roots, arcs) = if a.whole {
        if ranks > 1 {
            return Err("--whole runs in one process, without mpirun".into());
        }
        let g = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
        let roots = kronecker::search_roots(&p, &g, a.roots);
        let arcs = g.num_arcs();
        (Engine::new(g, opts)?, roots, arcs)
    } else {
        let n = 1u64 << a.scale;
        let bounds = rank_bounds(n, ranks, a.workers);
        let rows: LocalCsr = build_local_csr_mpi(&p, &bounds, DEFAULT_ROUND_EDGES)?;
        let roots = search_roots_distributed(&p, &rows, a.roots, &mut MpiExchange::world()?)?;
        let arcs = rows.num_arcs();
        (Engine::from_local(Arc::new(rows), opts)?, roots, arcs)
    };
    let build = t.elapsed().as_secs_f64();
    let t = Instant::now();
    engine.prepare_sssp();
    let copy_sssp = t.elapsed().as_secs_f64();
    let t = Instant::now();
    engine.prepare_bfs();
    let copy_bfs = t.elapsed().as_secs_f64();
    let edges = (16u64 << a.scale) as f64;
    let (mut sssp, mut bfs) = (Vec::new(), Vec::new());
    for &root in &roots {
        let (r, s) = engine.sssp_local(root)?;
        assert_eq!(r.dist.len() as u64, engine.local_range().end - engine.local_range().start);
        sssp.push(s.seconds);
        let (_, s) = engine.bfs_local(root)?;
        bfs.push(s.seconds);
    }
    let hmean = |t: &[f64]| t.len() as f64 / t.iter().map(|s| s / edges * 1e6).sum::<f64>();
    let peaks = engine.peak_rss_per_rank()?;
    let bytes = engine.graph_bytes();
    if rank == 0 {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let how = if a.whole { "one process, whole graph" } else { "rank-local rows" };
        println!(
            "SCALE {} {ranks} rank(s) x {} worker(s), {how}: build {build:.2} s, arc copies \
             {copy_sssp:.2} s (SSSP, with in-arcs) + {copy_bfs:.2} s (BFS)",
            a.scale, a.workers
        );
        println!("sssp {:.1} MTEPS (hmean, {} roots)", hmean(&sssp), roots.len());
        println!("bfs  {:.1} MTEPS (hmean)", hmean(&bfs));
        let list: Vec<String> = peaks.iter().map(|&b| format!("{:.2}", gib(b))).collect();
        println!("peak RSS per rank (GiB): {}", list.join(" "));
        println!("rank 0: {arcs} arcs held, arc copies and in-arcs {:.2} GiB", gib(bytes));
    }
    Ok(())
}
