//! Times reading graph files, to compare builds of the readers.
//!
//! `cargo run --release -p skein-generators --example read_timing -- SCALE [REPEATS] [DIR] [FORMATS]`
//!
//! Writes the Kronecker graph of SCALE (edgefactor 16) as `.skg`, `.el` and `.wel` into
//! DIR (default: the system temporary folder) unless the files are already there (only
//! the FORMATS named, comma-separated, e.g. `bin,el`, when given), then
//! reads each file REPEATS times with `read_edges` and prints the best and median wall
//! time per format, and the median process CPU time (user + system, all threads: less
//! disturbed by other load than wall time on a shared machine).

use std::path::PathBuf;
use std::time::Instant;

use skein_generators::formats::{read_edges, write_edges, Format};
use skein_generators::kronecker::{self, KroneckerParams};

/// Process CPU time (user + system) in seconds.
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale: u32 = args.first().and_then(|s| s.parse().ok()).unwrap_or(18);
    let repeats: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = args.get(2).map_or_else(std::env::temp_dir, PathBuf::from);
    let only: Option<Vec<Format>> = args.get(3).map(|s| {
        s.split(',').map(|f| f.parse().expect("a format name: bin, el, wel, mtx, gr")).collect()
    });
    let p = KroneckerParams::new(scale, 16, 2, 3).expect("SCALE 1 to 40");
    let mut el = None;
    for format in [Format::Binary, Format::El, Format::Wel] {
        if only.as_ref().is_some_and(|o| !o.contains(&format)) {
            continue;
        }
        let path = dir.join(format!("read-timing-s{scale}.{}", format.extension()));
        if !path.exists() {
            let el = el.get_or_insert_with(|| kronecker::generate(&p));
            write_edges(&path, el, format).expect("cannot write the test file");
        }
        let (mut times, mut cpu): (Vec<f64>, Vec<f64>) = (0..repeats)
            .map(|_| {
                let (t, c) = (Instant::now(), cpu_seconds());
                let g = read_edges(&path).expect("cannot read the test file");
                let s = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
                assert_eq!(g.len() as u64, p.num_edges());
                s
            })
            .unzip();
        times.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!(
            "{:>4}  best {:.3} s  median {:.3} s  cpu median {:.3} s",
            format.name(),
            times[0],
            times[times.len() / 2],
            cpu[cpu.len() / 2]
        );
    }
}
