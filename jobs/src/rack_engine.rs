//! The Skein engine on a graph spread over the ranks of an `mpirun` job: each rank gives
//! the rows of its own vertices ([`LocalCsr`]) and gets back the slice of each search's
//! result for those vertices. Every use of that engine API goes through this module.
//!
//! **Interim: gathers the whole graph; replaced by `Engine::from_local`.** For now
//! [`build`] all-gathers every rank's rows into one [`Csr`] on every rank (in bounded
//! rounds of [`GATHER_ROUND_WORDS`] words per rank), builds `Engine::new` on it, and
//! [`RackEngine::sssp_local`] / [`RackEngine::bfs_local`] run the whole-graph search and
//! keep this rank's range. The shapes (`rank_bounds`, `build`, `sssp_local`, `bfs_local`,
//! [`LocalSssp`], [`LocalBfs`]) are those of the engine API that replaces it, so that the
//! callers (`crate::dist_run`) do not change when the bodies are swapped.
//!
//! Every function here is collective: every rank calls it, in the same order, with the
//! same arguments (its own rows).

use std::sync::Arc;

use anyhow::Context;
use skein_algorithms::{Engine, EngineOptions, Partitioning, SearchStats};
use skein_generators::distributed::mpi::MpiExchange;
use skein_generators::distributed::{Exchange, LocalCsr};
use skein_generators::Csr;

/// Words one rank sends each other rank per round of the interim gather.
const GATHER_ROUND_WORDS: usize = 1 << 20;

/// This rank's part of an SSSP result: the vertices `first..first + dist.len()`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalSssp {
    pub(crate) root: u64,
    pub(crate) first: u64,
    pub(crate) dist: Vec<f32>,
    pub(crate) parent: Vec<u64>,
}

/// This rank's part of a BFS result: the vertices `first..first + level.len()`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocalBfs {
    pub(crate) root: u64,
    pub(crate) first: u64,
    pub(crate) level: Vec<u32>,
    pub(crate) parent: Vec<u64>,
}

/// The vertex ranges of the ranks: rank `r` owns `bounds[r]..bounds[r + 1]`, the union
/// of the parts `r·W..(r+1)·W` of `Partitioning::new(n, R·W)` (so a job of `R` ranks of
/// `W` workers partitions the vertices as one process of `R·W` workers does).
pub(crate) fn rank_bounds(num_vertices: u64, ranks: usize, workers: usize) -> Vec<u64> {
    let p = Partitioning::new(num_vertices, ranks * workers);
    let mut b: Vec<u64> = (0..ranks).map(|r| p.range(r * workers).start).collect();
    b.push(num_vertices);
    b
}

/// The engine of this rank (see the module docs).
pub(crate) struct RackEngine {
    engine: Engine,
    first: u64,
    len: usize,
}

impl std::fmt::Debug for RackEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RackEngine").field("first", &self.first).field("len", &self.len).finish()
    }
}

/// Builds the engine on the ranks' rows (collective; `graph.range()` is this rank's
/// `rank_bounds(..)[r]..[r + 1]`).
pub(crate) fn build(graph: Arc<LocalCsr>, opts: EngineOptions) -> anyhow::Result<RackEngine> {
    let range = graph.range();
    let mut ex = MpiExchange::world()?;
    let whole = gather_rows(&graph, &mut ex)?;
    drop(graph);
    let engine = Engine::new(Arc::new(whole), opts)?;
    Ok(RackEngine { engine, first: range.start, len: (range.end - range.start) as usize })
}

impl RackEngine {
    /// SSSP from `root`: this rank's slice of the result (collective).
    pub(crate) fn sssp_local(&self, root: u64) -> anyhow::Result<(LocalSssp, SearchStats)> {
        let (r, stats) = self.engine.sssp(root)?;
        let s = self.first as usize..self.first as usize + self.len;
        let local = LocalSssp {
            root,
            first: self.first,
            dist: r.dist[s.clone()].to_vec(),
            parent: r.parent[s].to_vec(),
        };
        Ok((local, stats))
    }

    /// BFS from `root`: this rank's slice of the result (collective).
    pub(crate) fn bfs_local(&self, root: u64) -> anyhow::Result<(LocalBfs, SearchStats)> {
        let (r, stats) = self.engine.bfs(root)?;
        let s = self.first as usize..self.first as usize + self.len;
        let local = LocalBfs {
            root,
            first: self.first,
            level: r.level[s.clone()].to_vec(),
            parent: r.parent[s].to_vec(),
        };
        Ok((local, stats))
    }

    /// The SSSP bucket width searches use.
    pub(crate) fn delta(&self) -> f32 {
        self.engine.delta()
    }

    /// Makes the SSSP arc copies before any search is timed.
    pub(crate) fn prepare_sssp(&self) {
        self.engine.prepare_sssp();
    }

    /// Makes the BFS arc copies before any search is timed.
    pub(crate) fn prepare_bfs(&self) {
        self.engine.prepare_bfs();
    }

    /// Each rank's peak resident memory (bytes), in rank order (collective).
    pub(crate) fn peak_rss_per_rank(&self) -> anyhow::Result<Vec<u64>> {
        Ok(self.engine.peak_rss_per_rank()?)
    }
}

/// Every rank's rows, all-gathered into the whole graph (interim). Each rank's stream is
/// its degrees, its targets, then its weights' bits (a word each), sent to every other
/// rank in rounds of at most [`GATHER_ROUND_WORDS`] words.
fn gather_rows(g: &LocalCsr, ex: &mut dyn Exchange) -> anyhow::Result<Csr> {
    let (rank, ranks) = (ex.rank(), ex.ranks());
    let offsets = g.offsets();
    let mine: Vec<u64> = offsets
        .windows(2)
        .map(|w| w[1] - w[0])
        .chain(g.targets().iter().copied())
        .chain(g.weights().iter().map(|w| u64::from(w.to_bits())))
        .collect();
    // Every rank's stream length and vertex count.
    let mut streams: Vec<Vec<u64>> = vec![Vec::new(); ranks];
    let (lens, _) =
        ex.exchange(&[mine.len() as u64, offsets.len() as u64 - 1].repeat(ranks), &vec![2; ranks])?;
    let rounds = (0..ranks).map(|r| (lens[2 * r] as usize).div_ceil(GATHER_ROUND_WORDS)).max();
    for t in 0..rounds.unwrap_or(0) {
        let chunk = &mine[(t * GATHER_ROUND_WORDS).min(mine.len())
            ..((t + 1) * GATHER_ROUND_WORDS).min(mine.len())];
        let counts: Vec<usize> =
            (0..ranks).map(|d| if d == rank { 0 } else { chunk.len() }).collect();
        let send = chunk.repeat(ranks - 1);
        let (recv, from) = ex.exchange(&send, &counts)?;
        let mut at = 0;
        for (s, &c) in from.iter().enumerate() {
            streams[s].extend_from_slice(&recv[at..at + c]);
            at += c;
        }
    }
    streams[rank] = mine;
    let n = g.num_vertices();
    let mut offsets = Vec::with_capacity(n as usize + 1);
    offsets.push(0u64);
    let (mut targets, mut weights) = (Vec::new(), Vec::new());
    for (s, stream) in streams.iter().enumerate() {
        let (len, nr) = (lens[2 * s] as usize, lens[2 * s + 1] as usize);
        anyhow::ensure!(
            stream.len() == len && len >= nr && (len - nr) % 2 == 0,
            "gathering the graph: rank {s} sent {} words, announced {len}",
            stream.len()
        );
        let arcs = (len - nr) / 2;
        for &d in &stream[..nr] {
            offsets.push(offsets.last().copied().unwrap_or(0) + d);
        }
        targets.extend_from_slice(&stream[nr..nr + arcs]);
        weights.extend(stream[nr + arcs..].iter().map(|&w| f32::from_bits(w as u32)));
    }
    drop(streams);
    Csr::from_parts(n, offsets, targets, Some(weights)).context("gathering the graph's rows")
}
