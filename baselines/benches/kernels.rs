//! Criterion benchmarks of the baseline kernels on a Graph500 Kronecker graph.
//!
//! SCALE 16, edgefactor 16 by default; `SKEIN_BENCH_SCALE=20 cargo bench -p
//! skein-baselines` for a larger graph. Each iteration runs one search, cycling over the
//! first 8 Graph500 roots. For whole-run figures (64 roots, TEPS, validation) use
//! `skein sssp|bfs`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use skein_baselines::{Engine, Options, Solver};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

fn scale() -> u32 {
    std::env::var("SKEIN_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(16)
}

fn kernels(c: &mut Criterion) {
    let p = KroneckerParams::new(scale(), 16, 2, 3).expect("valid SCALE");
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    let roots = kronecker::search_roots(&p, &csr, 8);
    let configs = [(Engine::Seq, 1), (Engine::Rayon, 1), (Engine::Rayon, 2)];
    let mut group = c.benchmark_group(format!("kron{}", p.scale));
    group.sample_size(10);
    // Throughput in undirected edges per search (an upper bound of the TEPS edge count).
    group.throughput(Throughput::Elements(csr.num_arcs() / 2));
    for (engine, threads) in configs {
        let solver = Solver::new(engine, &csr, &Options::with_threads(threads)).expect("valid");
        let id = format!("{engine}x{threads}");
        let mut i = 0;
        group.bench_function(BenchmarkId::new("sssp", &id), |b| {
            b.iter(|| {
                i = (i + 1) % roots.len();
                solver.sssp(roots[i]).expect("sssp")
            })
        });
        group.bench_function(BenchmarkId::new("bfs", &id), |b| {
            b.iter(|| {
                i = (i + 1) % roots.len();
                solver.bfs(roots[i]).expect("bfs")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, kernels);
criterion_main!(benches);
