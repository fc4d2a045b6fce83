//! Times Kronecker generation, CSR construction and (optionally) validation at one SCALE.
//!
//! `cargo run --release -p skein-generators --example gen_timing -- SCALE [REPEATS] [gen|validate]`
//!
//! `gen` times generation only; `validate` also times Graph500 validation of a BFS and
//! an SSSP result (computed by plain sequential searches here).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use skein_generators::checksum::fnv1a64_edges;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::{validate_bfs, validate_sssp};
use skein_generators::{BfsResult, Csr, SsspResult, NO_PARENT, UNREACHED_LEVEL};

/// Process CPU time (user + system) in seconds: less disturbed by other load than wall
/// time on a shared machine.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct we pass; a zeroed rusage is a valid value.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn bfs(g: &Csr, root: u64) -> BfsResult {
    let n = g.num_vertices() as usize;
    let (mut level, mut parent) = (vec![UNREACHED_LEVEL; n], vec![NO_PARENT; n]);
    level[root as usize] = 0;
    parent[root as usize] = root;
    let mut q = VecDeque::from([root]);
    while let Some(v) = q.pop_front() {
        for &u in g.neighbors(v) {
            if level[u as usize] == UNREACHED_LEVEL {
                level[u as usize] = level[v as usize] + 1;
                parent[u as usize] = v;
                q.push_back(u);
            }
        }
    }
    BfsResult { root, level, parent }
}

fn dijkstra(g: &Csr, root: u64) -> SsspResult {
    let n = g.num_vertices() as usize;
    let (mut dist, mut parent) = (vec![f32::INFINITY; n], vec![NO_PARENT; n]);
    dist[root as usize] = 0.0;
    parent[root as usize] = root;
    let mut heap = BinaryHeap::from([Reverse((0u32, root))]);
    while let Some(Reverse((bits, v))) = heap.pop() {
        if bits != dist[v as usize].to_bits() {
            continue;
        }
        for (u, w) in g.arcs(v) {
            let d = dist[v as usize] + w;
            if d < dist[u as usize] {
                dist[u as usize] = d;
                parent[u as usize] = v;
                heap.push(Reverse((d.to_bits(), u)));
            }
        }
    }
    SsspResult { root, dist, parent }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: u32 = args.next().map_or(20, |s| s.parse().expect("SCALE"));
    let repeats: u32 = args.next().map_or(3, |s| s.parse().expect("repeats"));
    let mode = args.next().unwrap_or_default();
    let p = match KroneckerParams::new(scale, 16, 2, 3) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    println!("SCALE {scale}: {} edges, {} threads", p.num_edges(), rayon::current_num_threads());
    for _ in 0..repeats {
        let (t, c) = (Instant::now(), cpu_seconds());
        let el = kronecker::generate(&p);
        let (tg, cg) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        if mode == "gen" {
            println!("generate {tg:.3} s (cpu {cg:.3} s)");
            continue;
        }
        let (t, c) = (Instant::now(), cpu_seconds());
        let g = Csr::from_edge_list(&el);
        let (tb, cb) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
        println!(
            "generate {tg:.3} s ({:.1} M edges/s, cpu {cg:.3} s), build {tb:.3} s (cpu {cb:.3} s), \
             total {:.3} s, csr {} MiB",
            p.num_edges() as f64 / tg / 1e6,
            tg + tb,
            g.heap_bytes() >> 20
        );
        if scale <= 20 && repeats == 1 {
            println!("fnv1a64 {:016x}", fnv1a64_edges(&el));
        }
        if mode == "validate" {
            let root = kronecker::search_roots(&p, &g, 1)[0];
            let (b, s) = (bfs(&g, root), dijkstra(&g, root));
            let t = Instant::now();
            let vb = validate_bfs(&g, &b).expect("valid BFS");
            let t1 = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let vs = validate_sssp(&g, &s).expect("valid SSSP");
            let t2 = t.elapsed().as_secs_f64();
            println!("validate bfs {t1:.3} s ({vb:?}), sssp {t2:.3} s ({vs:?})");
        }
    }
}
