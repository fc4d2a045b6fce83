//! Measures the delegation engine's SSSP and BFS over a grid of options, to choose
//! defaults (bucket width `delta`, driver `chunk`, slot size) by measurement.
//!
//! ```sh
//! cargo run --release -p skein-algorithms --example sweep -- \
//!     --scale 18 --workers 2 --delta 0.003,0.01 --chunk 16,64 --roots 4
//! ```
//!
//! `--share 16,32` varies `EngineOptions::round_share`, `--bfs 0` leaves BFS out.
//!
//! For every combination it prints, per kernel, the median time over the roots, the
//! harmonic-mean MTEPS (Graph500 edge count), the rounds, the messages between
//! partitions, SSSP's arcs relaxed per search and its work inflation (arcs relaxed / arcs
//! of the component), and how SSSP's arcs spread over the partitions per round
//! (`skein_algorithms::parts::RoundSpread`: the mean of the busiest partition's arcs over
//! the mean partition's, and the rounds' critical path over an even split). The counts do
//! not depend on machine noise (though the arcs depend on how the workers interleave);
//! times do, so compare times only within one run.

use std::sync::Arc;

use skein_algorithms::parts::RoundSpread;
use skein_algorithms::{Engine, EngineOptions};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::validate::teps_edge_count;
use skein_generators::Csr;

fn list<T: std::str::FromStr>(flag: &str, v: &str) -> Result<Vec<T>, String> {
    v.split(',')
        .map(|x| x.trim().parse().map_err(|_| format!("{flag}: `{x}` is not a valid value")))
        .collect()
}

struct Grid {
    scale: u32,
    workers: Vec<usize>,
    delta: Vec<f32>,
    chunk: Vec<usize>,
    slot: Vec<usize>,
    share: Vec<u64>,
    roots: usize,
    bfs: bool,
}

fn parse() -> Result<Grid, String> {
    let d = EngineOptions::default();
    let mut g = Grid {
        scale: 16,
        workers: vec![d.workers],
        delta: vec![d.delta.unwrap_or(skein_algorithms::DEFAULT_DELTA)],
        chunk: vec![d.chunk],
        slot: vec![d.slot_bytes],
        share: vec![d.round_share],
        roots: 4,
        bfs: true,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else { return Err(format!("{} needs a value", pair[0])) };
        match flag.as_str() {
            "--scale" => g.scale = value.parse().map_err(|_| format!("--scale: `{value}`"))?,
            "--workers" => g.workers = list(flag, value)?,
            "--delta" => g.delta = list(flag, value)?,
            "--chunk" => g.chunk = list(flag, value)?,
            "--slot" => g.slot = list(flag, value)?,
            "--share" => g.share = list(flag, value)?,
            "--roots" => g.roots = value.parse().map_err(|_| format!("--roots: `{value}`"))?,
            "--bfs" => g.bfs = value != "0",
            other => {
                return Err(format!(
                    "unknown flag {other} (--scale --workers --delta --chunk --slot --share \
                     --roots --bfs 0|1)"
                ))
            }
        }
    }
    Ok(g)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let g = parse()?;
    let params = KroneckerParams::new(g.scale, 16, 2, 3)?;
    let graph = Arc::new(Csr::from_edges(kronecker::generate(&params)));
    let roots = kronecker::search_roots(&params, &graph, g.roots);
    println!("SCALE {}, roots {:?}", g.scale, roots);
    let mut grid = Vec::new();
    for &workers in &g.workers {
        for &delta in &g.delta {
            for &chunk in &g.chunk {
                for &slot_bytes in &g.slot {
                    for &round_share in &g.share {
                        grid.push(EngineOptions {
                            workers,
                            delta: Some(delta),
                            chunk,
                            slot_bytes,
                            round_share,
                            ..EngineOptions::default()
                        });
                    }
                }
            }
        }
    }
    for opts in grid {
        let label = format!(
            "workers {} delta {} chunk {} slot {} share {}",
            opts.workers,
            opts.delta.unwrap_or_default(),
            opts.chunk,
            opts.slot_bytes,
            opts.round_share
        );
        // The partitions' arcs (those into a partition are relaxed there): the spread
        // no schedule can beat.
        let parts = skein_algorithms::Partitioning::new(graph.num_vertices(), opts.workers);
        let offsets = graph.offsets();
        let part_arcs: Vec<u64> = (0..opts.workers)
            .map(|p| {
                let r = parts.range(p);
                offsets[r.end as usize] - offsets[r.start as usize]
            })
            .collect();
        let mut static_spread = RoundSpread::default();
        static_spread.add_round(&part_arcs);
        let label = format!("{label} (arcs max/mean {:.3})", static_spread.mean_max_over_mean());
        let engine = Engine::new(Arc::clone(&graph), opts)?;
        let (mut st, mut bt) = (Vec::new(), Vec::new());
        let (mut s_inv, mut b_inv) = (0.0, 0.0);
        let (mut rounds, mut msgs, mut arcs, mut total_arcs) = (0, 0, 0, 0);
        let mut spread = RoundSpread::default();
        for &root in &roots {
            let (r, s) = engine.sssp(root)?;
            let m = teps_edge_count(&graph, |v| r.dist[v as usize].is_finite());
            st.push(s.seconds);
            s_inv += s.seconds / m as f64;
            rounds += s.rounds;
            msgs += s.messages;
            arcs += s.arcs;
            total_arcs += 2 * m;
            spread.accumulate(&s.round_spread.unwrap_or_default());
            if g.bfs {
                let (_, b) = engine.bfs(root)?;
                bt.push(b.seconds);
                b_inv += b.seconds / m as f64;
            }
        }
        st.sort_by(f64::total_cmp);
        let n = roots.len() as f64;
        print!(
            "{label}: sssp median {:.4} s {:.1} MTEPS rounds {:.1} msgs {} arcs {} \
             inflation {:.3} spread {:.2} critical {:.2}",
            st[st.len() / 2],
            n / s_inv / 1e6,
            rounds as f64 / n,
            msgs / roots.len() as u64,
            arcs / roots.len() as u64,
            arcs as f64 / total_arcs as f64,
            spread.mean_max_over_mean(),
            spread.critical_over_even(arcs),
        );
        if g.bfs {
            bt.sort_by(f64::total_cmp);
            print!(" | bfs median {:.4} s {:.1} MTEPS", bt[bt.len() / 2], n / b_inv / 1e6);
        }
        println!();
    }
    Ok(())
}
