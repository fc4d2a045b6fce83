//! SSSP and BFS over the ranks of an `mpirun` job (or in one process), to compare
//! R ranks × W workers with one process of R·W workers on the same graph and roots.
//!
//! ```sh
//! cargo build --release -p skein-algorithms --features mpi --example ranks
//! mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
//!     target/release/examples/ranks 18 1 8      # 2 ranks x 1 worker
//! target/release/examples/ranks 18 2 8          # 1 process x 2 workers
//! ```
//!
//! Arguments: SCALE, workers per rank, roots, and optionally the SSSP bucket width. Every rank generates the same Kronecker graph
//! and builds the same engine (the searches are collective); rank 0 prints, per kernel, the
//! fastest and median kernel times over the roots and the harmonic-mean MTEPS (Graph500 edge count).

use std::sync::Arc;

use skein_algorithms::{Engine, EngineOptions};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::teps_edge_count;
use skein_generators::Csr;

fn arg(args: &[String], i: usize, name: &str, default: u64) -> Result<u64, String> {
    args.get(i).map_or(Ok(default), |v| {
        v.parse().map_err(|_| format!("{name} must be a number, got `{v}`"))
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale = arg(&args, 0, "SCALE", 16)? as u32;
    let workers = arg(&args, 1, "workers", 1)? as usize;
    let nroots = arg(&args, 2, "roots", 8)? as usize;
    let params = KroneckerParams::new(scale, 16, 2, 3)?;
    let graph = Arc::new(Csr::from_edges(kronecker::generate(&params)));
    let roots = kronecker::search_roots(&params, &graph, nroots);
    let delta = match args.get(3) {
        None => None,
        Some(d) => {
            Some(d.parse::<f32>().map_err(|_| format!("delta must be a number, got `{d}`"))?)
        }
    };
    let opts = EngineOptions { workers, delta, ..EngineOptions::default() };
    let engine = Engine::new(Arc::clone(&graph), opts)?;
    engine.prepare_sssp();
    engine.prepare_bfs();
    let (mut st, mut bt, mut s_inv, mut b_inv) = (Vec::new(), Vec::new(), 0.0, 0.0);
    for &root in &roots {
        let (r, s) = engine.sssp(root)?;
        let m = teps_edge_count(&graph, |v| r.dist[v as usize].is_finite()) as f64;
        let (_, b) = engine.bfs(root)?;
        st.push(s.seconds);
        bt.push(b.seconds);
        s_inv += s.seconds / m;
        b_inv += b.seconds / m;
    }
    st.sort_by(f64::total_cmp);
    bt.sort_by(f64::total_cmp);
    if skein::rank() == 0 {
        let n = roots.len() as f64;
        println!(
            "SCALE {scale}, {} ranks x {workers} workers, {} roots: sssp min {:.4} median {:.4} s \
             {:.1} MTEPS | bfs min {:.4} median {:.4} s {:.1} MTEPS",
            skein::ranks(),
            roots.len(),
            st[0],
            st[st.len() / 2],
            n / s_inv / 1e6,
            bt[0],
            bt[bt.len() / 2],
            n / b_inv / 1e6,
        );
        let ms = |v: &[f64]| v.iter().map(|t| format!("{:.1}", t * 1e3)).collect::<Vec<_>>();
        println!("  sssp ms {:?}\n  bfs ms {:?}", ms(&st), ms(&bt));
    }
    Ok(())
}
