//! PageRank and components across the ranks of an mpirun job (feature `mpi`, more than one
//! rank), without the whole graph on any rank, as `crate::dist_run` runs SSSP and BFS:
//!
//! 1. each rank builds the rows of its own vertices (`dist_run::build_rows`: a Kronecker
//!    graph's share generated, or a graph file's read), and the skein engine copies only
//!    its own partitions' arcs ([`Engine::from_local`]);
//! 2. each run's result stays on the ranks, each holding its slice
//!    ([`Engine::pagerank_local`], [`Engine::components_local`]);
//! 3. the last run is validated on the slices
//!    (`skein_generators::distributed::analytics`): PageRank against a bulk-synchronous
//!    reference over the same rows, bit for bit the sequential engine's; components by the
//!    rules that make each label the smallest vertex of its component. The same verdict on
//!    every rank;
//! 4. `--dump`: rank 0 writes its slice, then each other rank's, received in chunks
//!    (`dist_run::write_dump`); the file is the one-process dump, byte for byte.
//!
//! Memory per rank: its rows and partitions' arcs, plus `8·n` bytes for PageRank's
//! contributions (the kernel's and, while validating, the reference's) or for the gathered
//! labels of the components check (asked from the owners in rounds beyond
//! `DEFAULT_GATHER_BYTES`).

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use skein_algorithms::Engine as SkeinEngine;
use skein_generators::distributed::analytics::{
    validate_components_distributed, validate_pagerank_distributed, DistAnalyticsError,
    LocalPageRank,
};
use skein_generators::distributed::mpi::MpiExchange;
use skein_generators::distributed::validate::DEFAULT_GATHER_BYTES;
use skein_generators::distributed::Exchange;

use super::{hmean, Measured, Setup, SkeinCounts, PAGERANK_TOLERANCE};
use crate::dist_run::{self, DistGraph, DumpSlice};
use crate::engines;
use crate::names::{EngineName, Kernel};

/// Ids per round of the components check and values per round of the gathers.
const ROUND: usize = 1 << 20;

/// One run's slice of the result.
enum Slice {
    Ranks(LocalPageRank),
    Labels(Vec<u64>),
}

impl DumpSlice for Slice {
    fn width(&self) -> usize {
        1
    }
    fn words(&self, lo: usize, hi: usize) -> Vec<u64> {
        match self {
            Slice::Ranks(r) => r.rank[lo..hi].iter().map(|x| x.to_bits()).collect(),
            Slice::Labels(l) => l[lo..hi].to_vec(),
        }
    }
    fn line(&self, w: &mut dyn Write, v: u64, words: &[u64]) -> std::io::Result<()> {
        match self {
            Slice::Ranks(_) => writeln!(w, "{v} {:016x}", words[0]),
            Slice::Labels(_) => writeln!(w, "{v} {}", words[0]),
        }
    }
}

/// Runs `setup` across the ranks on `graph` (collective); rank 0 prints and writes.
pub(super) fn execute(
    setup: &Setup,
    graph: &DistGraph,
    description: String,
    job: Option<serde_json::Value>,
) -> anyhow::Result<()> {
    let (kernel, engine) = (setup.kernel, setup.spec.engine);
    engines::check_ranks(engine)?;
    anyhow::ensure!(
        engine == EngineName::Skein,
        "engine {engine}: under mpirun only the skein engine runs {kernel} across the ranks"
    );
    anyhow::ensure!(
        setup.params.tolerance >= 0.0 && setup.params.tolerance.is_finite(),
        "--tolerance must be a finite number >= 0"
    );
    for path in [&setup.json, &setup.dump].into_iter().flatten() {
        crate::output::check_writable(path)?;
    }
    let threads = setup.spec.check()?;
    let mut ex = MpiExchange::world()?;
    let rows = dist_run::build_rows(graph, &description, threads, |_| Ok(()), &mut ex)?;
    let g = Arc::clone(&rows.g);
    // As the one-process path refuses them (`skein_baselines::check_graph`), on every rank.
    anyhow::ensure!(rows.n > 0, "graph {description}: the graph has no vertices");
    anyhow::ensure!(
        rows.arcs > 0,
        "graph {description}: the graph has no edges ({} vertices)",
        rows.n
    );
    let e = SkeinEngine::from_local(Arc::clone(&g), engines::skein_options(&setup.spec, threads))?;
    e.prepare_bfs();
    let mut seconds = Vec::new();
    let (mut skein, mut last) = (SkeinCounts::default(), None);
    for _ in 0..setup.repeat {
        let start = Instant::now();
        let (slice, stats) = match kernel {
            Kernel::Pagerank => {
                let (r, stats) = e.pagerank_local(setup.params)?;
                (Slice::Ranks(r), stats)
            }
            _ => {
                let (r, stats) = e.components_local()?;
                (Slice::Labels(r.label), stats)
            }
        };
        seconds.push(start.elapsed().as_secs_f64());
        skein.add(stats);
        last = Some(slice);
    }
    drop(e);
    let slice = last.expect("at least one run");
    // Every rank's times, the slowest rank's per run (they end together, up to the last
    // message).
    let seconds = slowest(&mut ex, &seconds)?;
    let (iterations, l1) = match &slice {
        Slice::Ranks(r) => (r.iterations, Some(r.l1)),
        Slice::Labels(_) => (1, None),
    };
    let validation = if setup.validate {
        let checked = match &slice {
            Slice::Ranks(r) => validate_pagerank_distributed(
                &g,
                &r.rank,
                r.iterations,
                &setup.params,
                PAGERANK_TOLERANCE,
                ROUND,
                &mut ex,
            ),
            Slice::Labels(l) => {
                validate_components_distributed(&g, l, ROUND, DEFAULT_GATHER_BYTES, &mut ex)
            }
        };
        Some(match checked {
            Ok(()) => Ok(()),
            Err(DistAnalyticsError::Invalid(e)) => Err(anyhow::Error::new(e)),
            Err(DistAnalyticsError::Dist(e)) => {
                let ranks = ex.ranks();
                return Err(anyhow::Error::new(e)
                    .context(format!("validating {kernel} across {ranks} ranks")));
            }
        })
    } else {
        None
    };
    if let Some(path) = &setup.dump {
        dist_run::write_dump(path, &slice, &rows.bounds, dist_run::DUMP_CHUNK, &mut ex)?;
    }
    let m = Measured {
        kernel,
        engine,
        threads,
        times: crate::report::Stats::of(&seconds),
        hmean_rate: hmean(&seconds, rows.arcs, iterations),
        seconds,
        page_faults: Vec::new(),
        iterations,
        skein,
        graph: description,
        vertices: rows.n,
        arcs: rows.arcs,
        l1,
        out: None,
        validation,
    };
    super::finish(setup, m, job)
}

/// The largest of every rank's `seconds[i]`, for each `i` (collective).
fn slowest(ex: &mut MpiExchange, seconds: &[f64]) -> anyhow::Result<Vec<f64>> {
    let bits: Vec<u64> = seconds.iter().map(|s| s.to_bits()).collect();
    // Non-negative floats order as their bits.
    let most = skein_generators::distributed::collective::all_reduce(ex, &bits, u64::max)?;
    Ok(most.into_iter().map(f64::from_bits).collect())
}
