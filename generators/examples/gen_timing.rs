//! Times Kronecker generation and CSR construction at one SCALE.
//!
//! `cargo run --release -p skein-generators --example gen_timing -- 20 [repeats]`

use std::time::Instant;

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

use skein_generators::checksum::fnv1a64_edges;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

fn main() {
    let mut args = std::env::args().skip(1);
    let scale: u32 = args.next().map_or(20, |s| s.parse().expect("SCALE"));
    let repeats: u32 = args.next().map_or(3, |s| s.parse().expect("repeats"));
    let gen_only = args.next().is_some_and(|s| s == "gen");
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
        if gen_only {
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
    }
}
