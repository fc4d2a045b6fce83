use skein_algorithms::{Engine, EngineOptions};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::teps_edge_count;
use skein_generators::Csr;
use std::sync::Arc;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let scale: u32 = a[1].parse().unwrap();
    let workers: usize = a[2].parse().unwrap();
    let delta: f32 = a.get(3).map_or(0.05, |s| s.parse().unwrap());
    let chunk: usize = a.get(4).map_or(256, |s| s.parse().unwrap());
    let slot_bytes: usize = a.get(5).map_or(65536, |s| s.parse().unwrap());
    let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
    let t = std::time::Instant::now();
    let g = Arc::new(Csr::from_edges(kronecker::generate(&p)));
    eprintln!("build {:.2}s", t.elapsed().as_secs_f64());
    let roots = kronecker::search_roots(&p, &g, 8);
    let e = Engine::new(
        g.clone(),
        EngineOptions { workers, delta, chunk, slot_bytes, ..Default::default() },
    )
    .unwrap();
    for &r in &roots[..2] {
        let (res, st) = e.sssp(r).unwrap();
        let m = teps_edge_count(&g, |v| res.dist[v as usize].is_finite());
        let (b, bs) = e.bfs(r).unwrap();
        println!("root {r}: sssp {:.3}s {:.1} MTEPS rounds {} msgs {} arcs {:.2}m | bfs {:.3}s {:.1} MTEPS rounds {} msgs {} reached {}", st.seconds, m as f64/st.seconds/1e6, st.rounds, st.messages, st.arcs as f64 / m as f64 / 2.0, bs.seconds, m as f64/bs.seconds/1e6, bs.rounds, bs.messages, b.reached());
    }
}
