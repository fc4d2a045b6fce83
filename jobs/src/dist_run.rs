//! `skein run` / `skein sssp|bfs` with the skein engine under `mpirun` with more than one
//! rank, on a Kronecker graph or a graph file, without the whole graph on any rank
//! (issue 19).
//!
//! Every rank runs this, collectively, in the same order:
//!
//! 1. the rank's rows (`LocalCsr`) from `build_from_source` over `MpiExchange`, with the
//!    vertex ranges of [`rank_bounds`] (the partition of one process of `ranks × workers`
//!    workers); progress on rank 0; the report's generation (or reading) and
//!    construction times are the largest over the ranks. The edges ([`DistGraph`]): a
//!    Kronecker graph's, each rank generating its share (`KroneckerSource`); a graph
//!    file's (`open_file_source`, `skein_generators::distributed::files`): a `.skg` file
//!    read by every rank at its share's byte offsets while rank 0 verifies the checksum,
//!    a text file (`.el`, `.wel`, `.mtx`, `.gr`), a pipe or `-` read by rank 0 alone (a
//!    first pass checks every line and counts, a second hands the edges out in rounds).
//!    A bad file is the one-process reader's error, `cannot load the graph file F: ...`,
//!    on every rank;
//! 2. the roots: the job's explicit list (checked against `n`), or the Graph500 root
//!    sequence (the one-process roots: the generator's seeds for a Kronecker graph,
//!    `search_roots_distributed`; the file seeds of `LoadedGraph::roots` for a file,
//!    `search_roots_distributed_for`);
//! 3. the engine on the rank's rows ([`Engine::from_local`]: each rank copies the arcs of
//!    its own partitions only) and one collective search per root, each rank getting its
//!    slice of the result;
//! 4. validation of each result on the ranks' slices (`validate_*_distributed`, the same
//!    verdict on every rank), and the roots' `nedge` (TEPS edge counts) from
//!    `component_edge_counts`: the component's edges, as the one-process report counts
//!    them for a valid result;
//! 5. `--dump`: rank 0 writes its slice, then each other rank's in rank order, received
//!    in chunks of [`DUMP_CHUNK`] vertices (two words each); the file is the one-process
//!    dump, byte for byte.
//!
//! Rank 0 then prints and writes the report as in one process (`crate::report`).
//!
//! No rank holds the whole graph: each rank's peak memory right after step 1 is reported
//! (`rank_build_peak_rss_bytes`) beside its peak at the end (`rank_peak_rss_bytes`); the
//! formulas are in the module docs of `skein_generators::distributed` and `::files`.
//! Measured on a SCALE 20 `.skg` file (16.8 M edges) on 2 ranks of 1 worker
//! (`mpirun ... -np 2 skein sssp --engine skein -t 1 --roots 2 /tmp/k20.skg`): build peaks
//! 291 and 311 MiB, peaks at the end 367 and 398 MiB, against 735 MiB for the one process
//! of 2 workers (`skein sssp --engine skein -t 2 --roots 2 /tmp/k20.skg`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use skein_algorithms::{rank_bounds, Engine, LocalBfs, LocalSssp};
use skein_generators::distributed::collective::all_reduce;
use skein_generators::distributed::files::open_file_source;
use skein_generators::distributed::local_build_bytes;
use skein_generators::distributed::mpi::MpiExchange;
use skein_generators::distributed::roots::{
    component_edge_counts, search_roots_distributed, search_roots_distributed_for,
    DEFAULT_ROOT_BATCH,
};
use skein_generators::distributed::source::{build_from_source, KroneckerSource};
use skein_generators::distributed::validate::{
    validate_bfs_distributed, validate_sssp_distributed, DistValidationError,
};
use skein_generators::distributed::LocalCsr;
use skein_generators::distributed::{DistError, EdgeSource, Exchange, DEFAULT_ROUND_EDGES};
use skein_generators::kronecker::KroneckerParams;
use skein_generators::{NO_PARENT, UNREACHED_LEVEL};

use crate::engines::{self, EngineSpec, SkeinTotals};
use crate::graph_source::{GraphSpec, FILE_ROOT_SEEDS};
use crate::names::Kernel;
use crate::report::{self, EngineInfo, KernelReport, RunRecord, Validation};
use crate::{limits, output, progress};

/// Vertices per message of the dump gather (two words each: 1 Mi words).
pub(crate) const DUMP_CHUNK: usize = 1 << 19;

/// Ids each rank asks per round of the distributed validation and `nedge` count: a
/// round's buffers take `(32 + 16·R)·B` bytes (64 MiB on 2 ranks), against 12 MiB for the
/// library default of 2^18, for a quarter of the exchanges.
const VALIDATE_ROUND: usize = 1 << 20;

/// The graph of a run across the ranks.
#[derive(Debug, Clone)]
pub(crate) enum DistGraph {
    /// Generated: each rank its share of the edges.
    Kronecker(KroneckerParams),
    /// A graph file (or pipe, or `-`): a `.skg` file read by every rank at its own
    /// offsets, any other format read by rank 0 and handed out in rounds
    /// (`skein_generators::distributed::files`).
    File(PathBuf),
}

impl DistGraph {
    /// The graph of `spec` across the ranks, and its name in reports (as the one-process
    /// path names it).
    pub(crate) fn of_spec(spec: &GraphSpec) -> (DistGraph, String) {
        match spec {
            GraphSpec::Kronecker(params) => {
                (DistGraph::Kronecker(*params), format!("{spec} (Graph500 Kronecker)"))
            }
            GraphSpec::File(path) => (DistGraph::File(path.clone()), path.display().to_string()),
        }
    }
}

/// What to run across the ranks.
#[derive(Debug)]
pub(crate) struct DistKernel<'a> {
    pub(crate) kernel: Kernel,
    pub(crate) graph: DistGraph,
    /// The graph's name in reports (as the one-process path names it).
    pub(crate) description: String,
    /// Explicit roots, or empty for the first `root_count` of the Graph500 sequence.
    pub(crate) explicit_roots: &'a [u64],
    pub(crate) root_count: u64,
    /// How errors name the root count (`--roots`, `roots`).
    pub(crate) count_name: &'a str,
    /// What root errors are about (e.g. the job file's key), if anything.
    pub(crate) roots_context: Option<String>,
    pub(crate) validate: bool,
    pub(crate) dump: Option<&'a Path>,
    pub(crate) spec: &'a EngineSpec,
    /// Untimed searches from the first root before measuring.
    pub(crate) warmup: usize,
}

/// One root's result, this rank's slice.
enum LocalOut {
    Sssp(LocalSssp),
    Bfs(LocalBfs),
}

impl LocalOut {
    fn reached(&self) -> u64 {
        match self {
            LocalOut::Sssp(r) => r.dist.iter().filter(|d| d.is_finite()).count() as u64,
            LocalOut::Bfs(r) => r.level.iter().filter(|&&l| l != UNREACHED_LEVEL).count() as u64,
        }
    }
}

/// Whether the distributed path runs: under `mpirun` with more than one rank.
pub(crate) fn applies() -> bool {
    skein::ranks() > 1
}

/// This rank's rows of a graph built across the ranks ([`build_rows`]), and what the
/// reports say of their making.
pub(crate) struct Rows {
    pub(crate) g: Arc<LocalCsr>,
    /// Vertices and input edges of the graph.
    pub(crate) n: u64,
    pub(crate) m: u64,
    /// Arcs over every rank.
    pub(crate) arcs: u64,
    /// The ranks' vertex ranges ([`rank_bounds`]).
    pub(crate) bounds: Vec<u64>,
    /// The slowest rank's generation (or reading) and construction seconds.
    pub(crate) generation_seconds: f64,
    pub(crate) construction_seconds: f64,
    /// Each rank's peak memory right after building its rows.
    pub(crate) build_peaks: Vec<u64>,
}

/// Step 1 of the module docs (collective): this rank's rows of `graph` over `threads`
/// workers per rank, with progress on rank 0 and a line per rank; `check(n)` runs once the
/// vertex count is known, before anything is built (the same verdict on every rank).
pub(crate) fn build_rows(
    graph: &DistGraph,
    description: &str,
    threads: usize,
    check: impl FnOnce(u64) -> anyhow::Result<()>,
    ex: &mut MpiExchange,
) -> anyhow::Result<Rows> {
    let (rank, ranks) = (ex.rank(), ex.ranks());
    // The edges: generated, or read from the file (its header checked, or a text file's
    // first pass done, the same verdict on every rank).
    let opening = Instant::now();
    let mut source: Box<dyn EdgeSource + Send> = match graph {
        DistGraph::Kronecker(p) => {
            p.check().with_context(|| format!("graph {description}"))?;
            Box::new(KroneckerSource(*p))
        }
        DistGraph::File(path) => open_file_source(path, ex).with_context(|| file_context(path))?,
    };
    // A text file's first pass (rank 0) counts as reading time.
    let open_s = opening.elapsed().as_secs_f64();
    let (n, m) = (source.num_vertices(), source.num_edges());
    // Checked before anything is built, the same on every rank.
    check(n)?;
    check_rank_fits(graph, n, m, rank, ranks, threads, ex)?;
    let bounds = rank_bounds(n, ranks, threads);

    let share = source.share(rank, ranks);
    let phase = match graph {
        DistGraph::Kronecker(_) => "generate+build",
        DistGraph::File(_) => "read+build",
    };
    let bar = progress::phase(phase, if rank == 0 { share.end - share.start } else { 0 });
    let on_round = |done: u64| {
        if rank == 0 {
            bar.set(done);
        }
    };
    let built = build_from_source(&mut *source, &bounds, DEFAULT_ROUND_EDGES, ex, &on_round);
    drop(source);
    let (g, mut stats) = match (graph, built) {
        (_, Ok(b)) => b,
        (DistGraph::File(path), Err(e @ DistError::Input(_))) => {
            return Err(e).with_context(|| file_context(path))
        }
        (_, Err(e)) => {
            return Err(e).with_context(|| {
                format!("cannot build the graph {description} across {ranks} ranks")
            })
        }
    };
    bar.finish();
    stats.generate_s += open_s;
    let construction = stats.route_s + stats.exchange_s + stats.rows_s;
    let slowest = all_reduce(ex, &[stats.generate_s.to_bits(), construction.to_bits()], u64::max)?;
    let (generation_seconds, construction_seconds) =
        (f64::from_bits(slowest[0]), f64::from_bits(slowest[1]));
    let arcs = all_reduce(ex, &[g.num_arcs()], u64::wrapping_add)?[0];
    // Each rank's peak memory so far: the graph's construction (before the engine).
    let mut peak = vec![0u64; ranks];
    peak[rank] = skein_generators::memory::peak_rss_bytes().unwrap_or(0);
    let build_peaks = all_reduce(ex, &peak, u64::wrapping_add)?;
    let g = Arc::new(g);
    if rank == 0 {
        output::eline(format_args!(
            "graph {description}: {n} vertices, {} edges across {ranks} ranks; generated/read in \
             {generation_seconds:.3} s, rows built in {construction_seconds:.3} s (slowest rank)",
            arcs / 2,
        ));
    }
    output::eline_as_is(format_args!(
        "  rank {rank}: {} vertices, {} arcs, {} rounds: generate {:.3} s, route {:.3} s, \
         exchange {:.3} s, rows {:.3} s, peak {:.1} MiB",
        g.range().end - g.range().start,
        g.num_arcs(),
        stats.rounds,
        stats.generate_s,
        stats.route_s,
        stats.exchange_s,
        stats.rows_s,
        build_peaks[rank] as f64 / 1048576.0,
    ));
    Ok(Rows { g, n, m, arcs, bounds, generation_seconds, construction_seconds, build_peaks })
}

/// Runs `k` across the ranks (collective); every rank returns the same report, rank 0
/// prints and writes it.
pub(crate) fn run(k: &DistKernel<'_>) -> anyhow::Result<(KernelReport, SkeinTotals)> {
    let threads = k.spec.check()?;
    let mut ex = MpiExchange::world()?;
    let rank = ex.rank();
    // 1. This rank's rows.
    let check = |n: u64| {
        check_roots(k, n).map_err(|e| match &k.roots_context {
            Some(c) => e.context(c.clone()),
            None => e,
        })
    };
    let Rows { g, n, m, arcs, bounds, generation_seconds, construction_seconds, build_peaks } =
        build_rows(&k.graph, &k.description, threads, check, &mut ex)?;

    // 2. Roots, and their nedge.
    let roots = match (&k.graph, k.explicit_roots.is_empty()) {
        (_, false) => k.explicit_roots.to_vec(),
        (DistGraph::Kronecker(p), true) => {
            search_roots_distributed(p, &g, k.root_count as usize, &mut ex)?
        }
        // The one-process roots of a file graph: the file seeds (`LoadedGraph::roots`).
        (DistGraph::File(_), true) => {
            let (s1, s2) = FILE_ROOT_SEEDS;
            let count = k.root_count as usize;
            search_roots_distributed_for(&g, s1, s2, count, DEFAULT_ROOT_BATCH, &mut ex)?.0
        }
    };
    let nedge = component_edge_counts(&g, &roots, VALIDATE_ROUND, &mut ex)?;

    // 3. The engine.
    let opts = engines::skein_options(k.spec, threads);
    let mut settings = engines::skein_settings(k.kernel, &opts);
    let engine = Engine::from_local(Arc::clone(&g), opts)?;
    if k.kernel == Kernel::Sssp {
        settings.insert("delta".into(), engines::json_f32(engine.delta()));
    }
    match k.kernel {
        Kernel::Sssp => engine.prepare_sssp(),
        Kernel::Bfs => engine.prepare_bfs(),
        Kernel::Pagerank | Kernel::Cc => anyhow::bail!("kernel {} has no roots", k.kernel),
    }
    let info = EngineInfo { name: "skein".into(), threads, settings };
    let mut totals = SkeinTotals { rank_build_peaks: build_peaks, ..SkeinTotals::default() };
    anyhow::ensure!(!roots.is_empty(), "no search roots to run");
    for _ in 0..k.warmup {
        search(&engine, k.kernel, roots[0])?;
    }

    // 4. The searches, validated.
    let mut runs = Vec::with_capacity(roots.len());
    let mut validation = if k.validate { Validation::Passed } else { Validation::Skipped };
    let bar = progress::phase(
        &format!("{} roots", k.kernel.as_str()),
        if rank == 0 { roots.len() as u64 } else { 0 },
    );
    for (i, (&root, &edges)) in roots.iter().zip(&nedge).enumerate() {
        let start = Instant::now();
        let (out, s) = search(&engine, k.kernel, root)
            .with_context(|| format!("{} from root {root}", k.kernel.as_str()))?;
        let seconds = start.elapsed().as_secs_f64();
        totals.add(&s);
        let validate_seconds = if k.validate {
            let start = Instant::now();
            let checked = match &out {
                LocalOut::Sssp(r) => {
                    validate_sssp_distributed(&g, root, &r.dist, &r.parent, VALIDATE_ROUND, &mut ex)
                }
                LocalOut::Bfs(r) => {
                    validate_bfs_distributed(&g, root, &r.level, &r.parent, VALIDATE_ROUND, &mut ex)
                }
            };
            match checked {
                Ok(_) => {}
                Err(DistValidationError::Invalid(e)) => {
                    if validation == Validation::Passed {
                        validation = Validation::Failed { root, message: e.to_string() };
                    }
                }
                Err(DistValidationError::Dist(e)) => {
                    return Err(e).context(format!("validating the result of root {root}"))
                }
            }
            Some(start.elapsed().as_secs_f64())
        } else {
            None
        };
        if i == 0 {
            if let Some(path) = k.dump {
                write_dump(path, &out, &bounds, DUMP_CHUNK, &mut ex)?;
                if crate::output::writes() {
                    crate::report::dump_written(path);
                }
            }
        }
        let reached = all_reduce(&mut ex, &[out.reached()], u64::wrapping_add)?[0];
        runs.push(RunRecord {
            root,
            seconds,
            nedge: edges,
            teps: edges as f64 / seconds,
            reached,
            validate_seconds,
            page_faults: None,
        });
        if rank == 0 {
            bar.inc(1);
        }
    }
    bar.finish();
    totals.rank_peaks = engine.peak_rss_per_rank()?;
    let report = KernelReport {
        kernel: k.kernel,
        engine: info,
        graph_description: k.description.clone(),
        vertices: n,
        edges: arcs / 2,
        input_edges: m,
        scale_edgefactor: match &k.graph {
            DistGraph::Kronecker(p) => Some((p.scale, p.edgefactor)),
            DistGraph::File(_) => None,
        },
        generation_seconds,
        construction_seconds,
        runs,
        validation,
    };
    Ok((report, totals))
}

/// The job's roots against the graph's `n` vertices (as the one-process path checks them).
fn check_roots(k: &DistKernel<'_>, n: u64) -> anyhow::Result<()> {
    if let Some(&bad) = k.explicit_roots.iter().find(|&&r| r >= n) {
        anyhow::bail!(
            "root {bad} is not a vertex of {} (it has {n} vertices: 0..{n})",
            k.description
        );
    }
    if k.explicit_roots.is_empty() {
        limits::check_roots(k.root_count, n)
            .map_err(|e| anyhow::anyhow!("{}: {e}", k.count_name))?;
    }
    Ok(())
}

/// Refuses, on every rank alike, a graph whose partition or rows would not fit: a worker
/// owning 2^32 vertices or more (local indices are 32-bit), or a rank's rows (during and
/// after the rounds, `local_build_bytes` with an eighth of slack for uneven shares) above
/// the memory available to it. Collective: the ranks agree before any of them starts
/// building, so a refusal on one rank cannot leave the others waiting.
///
/// A file's edges are not spread like a Kronecker graph's: its rank shares are checked
/// with the same eighth of slack, which a skewed file may exceed (the rows' own
/// allocation is checked again when the rounds are over).
#[allow(clippy::too_many_arguments)]
fn check_rank_fits(
    graph: &DistGraph,
    n: u64,
    m: u64,
    rank: usize,
    ranks: usize,
    workers: usize,
    ex: &mut dyn Exchange,
) -> anyhow::Result<()> {
    let parts = ranks as u64 * workers as u64;
    let (what, name) = match graph {
        DistGraph::Kronecker(p) => (
            format!("SCALE {} with edgefactor {}", p.scale, p.edgefactor),
            format!("kron:{}:{}", p.scale, p.edgefactor),
        ),
        DistGraph::File(path) => {
            (format!("{n} vertices and {m} edges"), path.display().to_string())
        }
    };
    let mine = if n.div_ceil(parts) + 2 > u64::from(u32::MAX) {
        let of = match graph {
            DistGraph::Kronecker(p) => format!("SCALE {}", p.scale),
            DistGraph::File(_) => format!("{n} vertices"),
        };
        Err(format!(
            "{of} over {ranks} ranks of {workers} workers: a worker would own {} vertices, \
             more than 2^32 - 1; use more ranks or workers",
            n.div_ceil(parts)
        ))
    } else {
        let arcs = (2 * u128::from(m)).div_ceil(ranks as u128);
        let arcs = u64::try_from(arcs + arcs / 8).unwrap_or(u64::MAX);
        let need = local_build_bytes(n.div_ceil(ranks as u64), arcs, DEFAULT_ROUND_EDGES);
        limits::check_memory(need, format_args!("rank {rank}'s rows of {what} over {ranks} ranks"))
    };
    let failed = all_reduce(ex, &[u64::from(mine.is_err())], u64::max)?[0] == 1;
    match mine {
        Err(e) => anyhow::bail!("graph {name}: {e}"),
        Ok(()) if failed => {
            anyhow::bail!("another rank cannot hold its share of the graph (see its error)")
        }
        Ok(()) => Ok(()),
    }
}

/// How errors about the graph file `path` begin (as in one process).
fn file_context(path: &Path) -> String {
    format!("cannot load the graph file {}", path.display())
}

fn search(
    engine: &Engine,
    kernel: Kernel,
    root: u64,
) -> anyhow::Result<(LocalOut, skein_algorithms::SearchStats)> {
    Ok(match kernel {
        Kernel::Sssp => {
            let (r, s) = engine.sssp_local(root)?;
            (LocalOut::Sssp(r), s)
        }
        Kernel::Bfs => {
            let (r, s) = engine.bfs_local(root)?;
            (LocalOut::Bfs(r), s)
        }
        Kernel::Pagerank | Kernel::Cc => anyhow::bail!("kernel {kernel} has no roots"),
    })
}

/// A rank's slice of a result, as the dump gather moves it: `width` words per vertex.
pub(crate) trait DumpSlice {
    /// Words per vertex.
    fn width(&self) -> usize;
    /// The words of the slice's vertices `lo..hi` (local indices).
    fn words(&self, lo: usize, hi: usize) -> Vec<u64>;
    /// Writes vertex `v`'s dump line from its words.
    fn line(&self, w: &mut dyn Write, v: u64, words: &[u64]) -> std::io::Result<()>;
}

impl DumpSlice for LocalOut {
    fn width(&self) -> usize {
        2
    }
    fn words(&self, lo: usize, hi: usize) -> Vec<u64> {
        match self {
            LocalOut::Sssp(r) => {
                (lo..hi).flat_map(|i| [u64::from(r.dist[i].to_bits()), r.parent[i]]).collect()
            }
            LocalOut::Bfs(r) => {
                (lo..hi).flat_map(|i| [u64::from(r.level[i]), r.parent[i]]).collect()
            }
        }
    }
    fn line(&self, w: &mut dyn Write, v: u64, pair: &[u64]) -> std::io::Result<()> {
        match self {
            LocalOut::Sssp(_) => {
                report::dump_sssp_line(w, v, f32::from_bits(pair[0] as u32), pair[1])
            }
            LocalOut::Bfs(_) => report::dump_bfs_line(w, v, pair[0] as u32, pair[1]),
        }
    }
}

/// Writes the dump of `out` (every rank's slice) to `path` on rank 0 (collective): rank
/// 0's own lines, then each other rank's, received in chunks of `chunk` vertices
/// ([`DUMP_CHUNK`]).
/// Every rank takes part in every exchange whatever happens to the file, and every rank
/// returns an error when rank 0 could not write it, so nothing hangs.
pub(crate) fn write_dump(
    path: &Path,
    out: &dyn DumpSlice,
    bounds: &[u64],
    chunk: usize,
    ex: &mut dyn Exchange,
) -> anyhow::Result<()> {
    let (rank, ranks) = (ex.rank(), ex.ranks());
    let what = || format!("cannot write the dump file {}", path.display());
    // Rank 0 opens the file; everyone learns whether it could.
    let mut file = None;
    let mut open_error = None;
    if rank == 0 {
        match output::create_parent(path).and_then(|()| output::AtomicFile::create(path)) {
            Ok(f) => file = Some(f),
            Err(e) => open_error = Some(e),
        }
    }
    let opened = all_reduce(ex, &[u64::from(open_error.is_none())], u64::min)?[0] == 1;
    if !opened {
        return Err(match open_error {
            Some(e) => e.context(what()),
            None => anyhow::anyhow!("rank 0 could not write the dump file {}", path.display()),
        });
    }
    let mut write_error: Option<std::io::Error> = None;
    let width = out.width();
    {
        let mut w = file.as_mut().map(|f| std::io::BufWriter::with_capacity(1 << 20, f.file_mut()));
        let mut emit = |first: u64, words: &[u64]| {
            let Some(w) = w.as_mut() else { return };
            if write_error.is_some() {
                return;
            }
            for (i, one) in words.chunks_exact(width).enumerate() {
                if let Err(e) = out.line(w, first + i as u64, one) {
                    write_error = Some(e);
                    return;
                }
            }
        };
        let words = |lo: usize, hi: usize| out.words(lo, hi);
        let mine = (bounds[rank + 1] - bounds[rank]) as usize;
        if rank == 0 {
            for lo in (0..mine).step_by(chunk) {
                emit(lo as u64, &words(lo, (lo + chunk).min(mine)));
            }
        }
        for s in 1..ranks {
            let len = (bounds[s + 1] - bounds[s]) as usize;
            for lo in (0..len).step_by(chunk) {
                let hi = (lo + chunk).min(len);
                let send = if rank == s { words(lo, hi) } else { Vec::new() };
                let mut counts = vec![0usize; ranks];
                counts[0] = send.len();
                let (recv, from) = ex.exchange(&send, &counts)?;
                if rank == 0 {
                    anyhow::ensure!(
                        from[s] == width * (hi - lo) && recv.len() == from[s],
                        "the dump gather: rank {s} sent {} words for {} vertices",
                        from[s],
                        hi - lo
                    );
                    emit(bounds[s] + lo as u64, &recv);
                }
            }
        }
        if let (Some(w), None) = (w.as_mut(), &write_error) {
            if let Err(e) = w.flush() {
                write_error = Some(e);
            }
        }
    }
    if let Some(e) = write_error {
        return Err(e).with_context(what);
    }
    match file {
        Some(f) => f.commit().with_context(what),
        None => Ok(()),
    }
}

/// `NO_PARENT` is `u64::MAX`: it travels as itself in a parent word.
const _: () = assert!(NO_PARENT == u64::MAX);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::KernelOutput;
    use skein_generators::distributed::MemExchange;
    use skein_generators::{BfsResult, SsspResult};

    /// The chunked gather writes the one-process dump, byte for byte, with several chunks
    /// per rank, a rank that owns nothing, and unreached vertices; other ranks write nothing.
    #[test]
    fn the_dump_gather_writes_the_one_process_dump() {
        let dir = std::env::temp_dir().join(format!("skein-dist-dump-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bounds = [0u64, 7, 7, 20];
        let n = 20usize;
        let dist: Vec<f32> =
            (0..n).map(|v| if v % 5 == 3 { f32::INFINITY } else { v as f32 * 0.25 }).collect();
        let level: Vec<u32> =
            (0..n).map(|v| if v % 5 == 3 { UNREACHED_LEVEL } else { v as u32 / 3 }).collect();
        let parent: Vec<u64> =
            (0..n).map(|v| if v % 5 == 3 { NO_PARENT } else { (v as u64 * 7) % 20 }).collect();
        for kernel in [Kernel::Sssp, Kernel::Bfs] {
            let whole = match kernel {
                Kernel::Sssp => KernelOutput::Sssp(SsspResult {
                    root: 0,
                    dist: dist.clone(),
                    parent: parent.clone(),
                }),
                Kernel::Bfs | Kernel::Pagerank | Kernel::Cc => KernelOutput::Bfs(BfsResult {
                    root: 0,
                    level: level.clone(),
                    parent: parent.clone(),
                }),
            };
            let want = dir.join(format!("{}-one", kernel.as_str()));
            report::write_dump(&want, &whole).unwrap();
            let got = dir.join(format!("{}-ranks", kernel.as_str()));
            std::thread::scope(|s| {
                let handles: Vec<_> = MemExchange::group(3)
                    .into_iter()
                    .map(|mut ex| {
                        let (got, dist, level, parent) = (&got, &dist, &level, &parent);
                        s.spawn(move || {
                            let r = ex.rank();
                            let range = bounds[r] as usize..bounds[r + 1] as usize;
                            let first = bounds[r];
                            let parent = parent[range.clone()].to_vec();
                            let out = match kernel {
                                Kernel::Sssp => LocalOut::Sssp(LocalSssp {
                                    root: 0,
                                    first,
                                    dist: dist[range].to_vec(),
                                    parent,
                                }),
                                _ => LocalOut::Bfs(LocalBfs {
                                    root: 0,
                                    first,
                                    level: level[range].to_vec(),
                                    parent,
                                }),
                            };
                            write_dump(got, &out, &bounds, 3, &mut ex)
                        })
                    })
                    .collect();
                for h in handles {
                    h.join().unwrap().unwrap();
                }
            });
            assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&want).unwrap());
        }
        // Rank 0 cannot open the file: every rank returns an error.
        let bad = std::path::Path::new("/dev/null/x");
        std::thread::scope(|s| {
            let handles: Vec<_> = MemExchange::group(2)
                .into_iter()
                .map(|mut ex| {
                    s.spawn(move || {
                        let out = LocalOut::Bfs(LocalBfs {
                            root: 0,
                            first: 0,
                            level: vec![0],
                            parent: vec![0],
                        });
                        write_dump(bad, &out, &[0, 1, 1], 3, &mut ex)
                    })
                })
                .collect();
            for (r, h) in handles.into_iter().enumerate() {
                let e = h.join().unwrap().unwrap_err();
                let text = format!("{e:#}");
                assert!(text.contains("/dev/null/x"), "rank {r}: {text}");
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rank_bounds_are_the_partition_of_every_workers() {
        for (n, ranks, workers) in [(1000u64, 3usize, 2usize), (5, 3, 2), (1 << 20, 2, 1)] {
            let b = rank_bounds(n, ranks, workers);
            let p = skein_algorithms::Partitioning::new(n, ranks * workers);
            assert_eq!(b.len(), ranks + 1);
            for r in 0..ranks {
                assert_eq!(b[r], p.range(r * workers).start);
                assert_eq!(b[r + 1], p.range((r + 1) * workers - 1).end);
            }
        }
    }
}
