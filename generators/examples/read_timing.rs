//! Times reading graph files, to compare builds of the readers.
//!
//! `cargo run --release -p skein-generators --example read_timing -- SCALE [REPEATS] [DIR]`
//!
//! Writes the Kronecker graph of SCALE (edgefactor 16) as `.skg`, `.el` and `.wel` into
//! DIR (default: the system temporary folder) unless the files are already there, then
//! reads each file REPEATS times with `read_edges` and prints the best and median wall
//! time per format.

use std::path::PathBuf;
use std::time::Instant;

use skein_generators::formats::{read_edges, write_edges, Format};
use skein_generators::kronecker::{self, KroneckerParams};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale: u32 = args.first().and_then(|s| s.parse().ok()).unwrap_or(18);
    let repeats: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = args.get(2).map_or_else(std::env::temp_dir, PathBuf::from);
    let p = KroneckerParams::new(scale, 16, 2, 3).expect("SCALE 1 to 40");
    let mut el = None;
    for format in [Format::Binary, Format::El, Format::Wel] {
        let path = dir.join(format!("read-timing-s{scale}.{}", format.extension()));
        if !path.exists() {
            let el = el.get_or_insert_with(|| kronecker::generate(&p));
            write_edges(&path, el, format).expect("cannot write the test file");
        }
        let mut times: Vec<f64> = (0..repeats)
            .map(|_| {
                let t = Instant::now();
                let g = read_edges(&path).expect("cannot read the test file");
                let s = t.elapsed().as_secs_f64();
                assert_eq!(g.len() as u64, p.num_edges());
                s
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{:>4}  best {:.3} s  median {:.3} s",
            format.name(),
            times[0],
            times[times.len() / 2]
        );
    }
}
