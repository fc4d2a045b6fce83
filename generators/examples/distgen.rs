//! Generation + construction of a Kronecker graph: one process (the existing path) or one
//! rank of an `mpirun` job (the distributed path), with time and peak RSS.
//!
//! ```text
//! cargo build --release -p skein-generators --features mpi --example distgen
//! target/release/examples/distgen single SCALE
//! mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
//!     target/release/examples/distgen ranks SCALE [ROUND_EDGES]
//! ```
//!
//! `single` generates the edge list and builds the [`Csr`]; `ranks` builds each rank's rows
//! with [`build_local_csr_mpi`] (ranks over contiguous blocks of 2 workers each, as a skein
//! job would use) and prints one line per rank (wall time per phase, the process's CPU time
//! split into user and system, peak RSS), then rank 0 the slowest rank's time. Generation
//! runs on rayon's pool: `mpirun -x RAYON_NUM_THREADS=1` makes a rank one thread (2 ranks
//! × 1 thread on a 2-core machine), against `single` with the default pool (2 threads).
//!
//! On a shared machine, compare alternating runs in one session; the system time is mostly
//! the kernel zeroing fresh pages (huge pages for the rows, as for the [`Csr`]).

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives, Root};
use skein_generators::distributed::{mpi::build_local_csr_mpi_with_stats, DEFAULT_ROUND_EDGES};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::{memory, Csr};

fn usage() -> ! {
    eprintln!("usage: distgen single SCALE | distgen ranks SCALE [ROUND_EDGES]");
    std::process::exit(2)
}

fn mib(b: Option<u64>) -> String {
    b.map_or("unknown".into(), |b| format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64))
}

/// CPU time of this process so far (user, system; all threads), in seconds.
fn cpu_s() -> (f64, f64) {
    // SAFETY: getrusage(2) fills the zeroed struct we own; it touches no other memory.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// CPU time since `c` (from [`cpu_s`]), as text.
fn cpu_since(c: (f64, f64)) -> String {
    let now = cpu_s();
    format!("cpu {:.3} s user + {:.3} s sys", now.0 - c.0, now.1 - c.1)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let scale: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or_else(|| usage());
    let p = match KroneckerParams::new(scale, 16, 2, 3) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("distgen: {e}");
            std::process::exit(2)
        }
    };
    match args[1].as_str() {
        "single" => {
            let (t, c) = (Instant::now(), cpu_s());
            let el = kronecker::generate(&p);
            let g = t.elapsed().as_secs_f64();
            let csr = Csr::from_edges(el);
            let s = t.elapsed().as_secs_f64();
            println!(
                "single SCALE {scale}: {s:.3} s (generate {g:.3}, CSR {:.3}), {}, {} arcs, \
                 peak RSS {}",
                s - g,
                cpu_since(c),
                csr.num_arcs(),
                mib(memory::peak_rss_bytes())
            );
        }
        "ranks" => {
            let round: u64 = match args.get(3) {
                None => DEFAULT_ROUND_EDGES,
                Some(s) => s.parse().unwrap_or_else(|_| usage()),
            };
            let Some((universe, _)) = mpi::initialize_with_threading(mpi::Threading::Multiple)
            else {
                eprintln!("distgen: MPI already initialised");
                std::process::exit(2)
            };
            let world = universe.world();
            let (rank, ranks) = (world.rank() as usize, world.size() as usize);
            let n = p.num_vertices();
            let parts = ranks * 2;
            let m = ((parts as u128) << 64) / n as u128;
            let first = |part: usize| -> u64 {
                // First v with owner(v) = (v·m) >> 64 >= part (binary search).
                let (mut lo, mut hi) = (0u64, n);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if ((mid as u128 * m) >> 64) as usize >= part {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                lo
            };
            let mut bounds: Vec<u64> = (0..ranks).map(|r| first(2 * r)).collect();
            bounds.push(n);
            world.barrier();
            let (t, c) = (Instant::now(), cpu_s());
            let (local, stats) = match build_local_csr_mpi_with_stats(&p, &bounds, round) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("distgen: rank {rank}: {e}");
                    std::process::exit(1)
                }
            };
            let s = t.elapsed().as_secs_f64();
            let cpu = cpu_since(c);
            world.barrier();
            let all = t.elapsed().as_secs_f64();
            println!(
                "rank {rank}/{ranks} SCALE {scale}: {s:.3} s (generate {:.3}, route {:.3}, \
                 exchange {:.3}, rows {:.3}; {} rounds), {cpu}, {} vertices, {} arcs, \
                 peak RSS {}",
                stats.generate_s,
                stats.route_s,
                stats.exchange_s,
                stats.rows_s,
                stats.rounds,
                local.range().end - local.range().start,
                local.num_arcs(),
                mib(memory::peak_rss_bytes())
            );
            let arcs = local.num_arcs();
            let mut total = 0u64;
            let root = world.process_at_rank(0);
            if rank == 0 {
                root.reduce_into_root(&arcs, &mut total, SystemOperation::sum());
                println!("ranks SCALE {scale}: {all:.3} s (all ranks done), {total} arcs in all");
            } else {
                root.reduce_into(&arcs, SystemOperation::sum());
            }
        }
        _ => usage(),
    }
}
