//! `skein info`: facts about a graph file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use skein_generators::checksum::EdgeSummary;
use skein_generators::formats;
use skein_generators::EdgeList;

use crate::progress;

/// Arguments of `skein info`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The graph file (.skg, .el, .wel, .mtx, .gr; `-` reads standard input).
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
}

/// Degree statistics of the undirected graph: each non-self-loop edge counts once for
/// each endpoint (the degrees of the CSR built from the edge list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Degrees {
    pub(crate) min: u64,
    /// The lower median (element `(n - 1) / 2` of the sorted degrees).
    pub(crate) median: u64,
    pub(crate) max: u64,
    /// Vertices with at least one non-self-loop edge.
    pub(crate) nonisolated: u64,
}

/// Degree statistics of `el` (its ids must be below `num_vertices`, as every reader
/// guarantees). Uses a dense count array when the vertex count is moderate, and
/// sorting the endpoints otherwise (a file may declare far more vertices than edges).
pub(crate) fn degrees(el: &EdgeList) -> Degrees {
    let n = el.num_vertices;
    if n == 0 {
        return Degrees { min: 0, median: 0, max: 0, nonisolated: 0 };
    }
    if n <= (4 * el.len() as u64).max(1 << 26) {
        degrees_dense(el)
    } else {
        degrees_sparse(el)
    }
}

/// The non-self-loop edges, in parallel.
fn pairs(el: &EdgeList) -> impl ParallelIterator<Item = (u64, u64)> + '_ {
    (0..el.len()).into_par_iter().with_min_len(1 << 14).filter_map(|k| {
        let (u, v) = (el.src[k], el.dst[k]);
        (u != v).then_some((u, v))
    })
}

/// [`degrees`] with one counter per vertex.
fn degrees_dense(el: &EdgeList) -> Degrees {
    let n = el.num_vertices;
    let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    pairs(el).for_each(|(u, v)| {
        counts[u as usize].fetch_add(1, Ordering::Relaxed);
        counts[v as usize].fetch_add(1, Ordering::Relaxed);
    });
    let mut d: Vec<u64> = counts.into_iter().map(AtomicU64::into_inner).collect();
    let nonisolated = d.par_iter().filter(|&&x| x > 0).count() as u64;
    let max = d.par_iter().copied().max().unwrap_or(0);
    let min = d.par_iter().copied().min().unwrap_or(0);
    let mid = (d.len() - 1) / 2;
    let (_, &mut median, _) = d.select_nth_unstable(mid);
    Degrees { min, median, max, nonisolated }
}

/// [`degrees`] by sorting the endpoints: memory proportional to the edges only.
fn degrees_sparse(el: &EdgeList) -> Degrees {
    let n = el.num_vertices;
    let mut ends: Vec<u64> = pairs(el).flat_map_iter(|(u, v)| [u, v]).collect();
    ends.par_sort_unstable();
    let mut runs: Vec<u64> = ends.chunk_by(|a, b| a == b).map(|c| c.len() as u64).collect();
    runs.par_sort_unstable();
    let nonisolated = runs.len() as u64;
    let isolated = n - nonisolated;
    let mid = (n - 1) / 2;
    let median = if mid < isolated { 0 } else { runs[(mid - isolated) as usize] };
    let min = if isolated > 0 { 0 } else { runs.first().copied().unwrap_or(0) };
    Degrees { min, median, max: runs.last().copied().unwrap_or(0), nonisolated }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let path = &args.file;
    let size = formats::input_len(path)?;

    let t = Instant::now();
    let bar = progress::phase_bytes("load", size.unwrap_or(0));
    let loaded = formats::read_edges_detected(path, &|b| bar.set(b));
    bar.finish();
    let (format, el) = loaded?;
    let load_s = t.elapsed().as_secs_f64();

    let summary = EdgeSummary::of(&el);
    let deg = degrees(&el);
    let weights = match &el.weights {
        Some(_) => "yes (binary32)",
        None => "no (every edge weighs 1; hashed as 1.0)",
    };
    println!("file          {}", path.display());
    println!("format        {format}");
    match size {
        Some(size) => println!("size          {size} bytes"),
        None => println!("size          unknown (a pipe or standard input)"),
    }
    println!("vertices      {}", el.num_vertices);
    println!("edges         {}", el.len());
    println!("weighted      {weights}");
    println!("self-loops    {}", summary.selfloops);
    println!("non-isolated  {}", deg.nonisolated);
    println!(
        "degree        min {} median {} max {} (each non-self-loop edge counts once per endpoint)",
        deg.min, deg.median, deg.max
    );
    println!("fnv1a64       {:016x}", summary.fnv1a64);
    eprintln!(
        "loaded in {load_s:.2} s ({:.1} M edges/s)",
        el.len() as f64 / load_s.max(1e-9) / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(n: u64, edges: &[(u64, u64)]) -> EdgeList {
        EdgeList {
            num_vertices: n,
            src: edges.iter().map(|e| e.0).collect(),
            dst: edges.iter().map(|e| e.1).collect(),
            weights: None,
        }
    }

    /// Degrees straight from the definition.
    fn naive(g: &EdgeList) -> Degrees {
        let mut d = vec![0u64; g.num_vertices as usize];
        for k in 0..g.len() {
            if g.src[k] != g.dst[k] {
                d[g.src[k] as usize] += 1;
                d[g.dst[k] as usize] += 1;
            }
        }
        let nonisolated = d.iter().filter(|&&x| x > 0).count() as u64;
        d.sort_unstable();
        Degrees { min: d[0], median: d[(d.len() - 1) / 2], max: *d.last().unwrap(), nonisolated }
    }

    #[test]
    fn dense_degrees() {
        // 0-1 twice, 1-2, a self-loop on 3, vertex 4 isolated.
        let g = el(5, &[(0, 1), (1, 0), (1, 2), (3, 3)]);
        assert_eq!(degrees(&g), Degrees { min: 0, median: 1, max: 3, nonisolated: 3 });
        assert_eq!(degrees(&g), naive(&g));
        assert_eq!(degrees(&el(0, &[])), Degrees { min: 0, median: 0, max: 0, nonisolated: 0 });
    }

    #[test]
    fn sparse_path_agrees_with_dense() {
        // Beyond the dense limit: many declared vertices, few edges.
        let n = (1u64 << 26) + 10;
        let g = el(n, &[(0, n - 1), (5, 6), (5, 7), (n - 1, n - 1)]);
        assert_eq!(degrees(&g), Degrees { min: 0, median: 0, max: 2, nonisolated: 5 });
        // A graph where every vertex has an edge, checked against the naive count.
        let mut edges = Vec::new();
        for i in 0..1000u64 {
            edges.push((i, (i * 7 + 1) % 1000));
            edges.push((i, (i * i) % 1000));
        }
        let g = el(1000, &edges);
        assert_eq!(degrees_dense(&g), naive(&g));
        assert_eq!(degrees_sparse(&g), naive(&g));
        let g = el(1500, &edges); // isolated vertices 1000.. take the lower half
        assert_eq!(degrees_dense(&g), naive(&g));
        assert_eq!(degrees_sparse(&g), naive(&g));
    }
}
