//! Quick timing of one engine on a Kronecker graph, without the CLI:
//! `cargo run --release -p skein-baselines --example quick -- sssp rayon 2 20 16 [delta]`
//! (kernel, engine, threads, SCALE, roots, optional delta). Prints the median and minimum
//! time and the MTEPS of the median (Graph500 TEPS edge count); the first run is dropped.

use std::time::Instant;

use skein_baselines::{Engine, Options, Solver};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::teps_edge_count;
use skein_generators::Csr;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: quick sssp|bfs seq|rayon THREADS SCALE ROOTS [DELTA]";
    assert!(a.len() >= 5, "{usage}");
    let kernel = a[0].clone();
    let engine: Engine = a[1].parse().expect(usage);
    let threads: usize = a[2].parse().expect(usage);
    let scale: u32 = a[3].parse().expect(usage);
    let nroots: usize = a[4].parse().expect(usage);
    let delta: Option<f32> = a.get(5).map(|d| d.parse().expect(usage));
    let p = KroneckerParams::new(scale, 16, 2, 3).expect("SCALE");
    let t = Instant::now();
    let csr = Csr::from_edge_list(&kronecker::generate(&p));
    eprintln!("graph SCALE {scale}: {:.2} s", t.elapsed().as_secs_f64());
    let roots = kronecker::search_roots(&p, &csr, nroots);
    let options = Options { threads, delta, ..Options::default() };
    let solver = Solver::new(engine, &csr, &options).expect("solver");
    let mut times = Vec::new();
    let mut teps = Vec::new();
    for (i, &r) in [roots[0]].iter().chain(&roots).enumerate() {
        let t = Instant::now();
        let reached: Box<dyn Fn(u64) -> bool + Sync> = if kernel == "sssp" {
            let s = solver.sssp(r).expect("sssp");
            let secs = t.elapsed().as_secs_f64();
            times.push(secs);
            Box::new(move |v| s.dist[v as usize].is_finite())
        } else {
            let b = solver.bfs(r).expect("bfs");
            let secs = t.elapsed().as_secs_f64();
            times.push(secs);
            Box::new(move |v| b.level[v as usize] != u32::MAX)
        };
        let e = teps_edge_count(&csr, reached);
        teps.push(e as f64 / times[times.len() - 1]);
        if i == 0 {
            times.clear();
            teps.clear();
        }
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let hm = teps.len() as f64 / teps.iter().map(|t| 1.0 / t).sum::<f64>();
    println!(
        "{kernel} {engine} x{threads} SCALE {scale}: median {:.4} s min {:.4} s, harmonic mean {:.1} MTEPS",
        sorted[sorted.len() / 2],
        sorted[0],
        hm / 1e6
    );
}
