//! Generator and CSR construction throughput (edges per second).
//!
//! `cargo bench -p skein-generators --bench kronecker`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

fn bench(c: &mut Criterion) {
    for scale in [16u32, 18] {
        let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
        let mut g = c.benchmark_group(format!("kronecker_scale{scale}"));
        g.sample_size(10);
        g.throughput(Throughput::Elements(p.num_edges()));
        g.bench_function("generate", |b| b.iter(|| kronecker::generate(&p)));
        let el = kronecker::generate(&p);
        g.bench_function("csr_build", |b| b.iter(|| Csr::from_edge_list(&el)));
        g.bench_function("generate_and_build", |b| {
            b.iter_batched(
                || (),
                |()| Csr::from_edges(kronecker::generate(&p)),
                BatchSize::PerIteration,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
