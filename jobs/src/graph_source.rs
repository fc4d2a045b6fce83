//! Where a kernel's graph comes from: a Graph500 Kronecker specification or a file.
//!
//! `GRAPH` on the command line is `kron:SCALE[:EDGEFACTOR[:SEED1:SEED2]]` (Graph500
//! defaults: edgefactor 16, seeds 2 and 3) or the path of a graph file in any format
//! `skein-generators` reads. [`load`] produces the CSR and times its phases: generation
//! (or reading) and construction (CSR build, the Graph500 "construction_time"). A
//! Kronecker graph is checked against available memory before anything is allocated.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::{formats, Csr};

use crate::{limits, progress};

/// Seeds of the Graph500 root sequence for graphs read from files.
pub(crate) const FILE_ROOT_SEEDS: (u64, u64) = (2, 3);

/// A graph to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GraphSpec {
    /// A Graph500 Kronecker graph.
    Kronecker(KroneckerParams),
    /// A graph file (format from its extension or contents).
    File(PathBuf),
}

impl FromStr for GraphSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<GraphSpec> {
        let Some(rest) = s.strip_prefix("kron:") else {
            anyhow::ensure!(!s.is_empty(), "empty graph: expected a file or kron:SCALE");
            return Ok(GraphSpec::File(PathBuf::from(s)));
        };
        const FORM: &str = "expected kron:SCALE[:EDGEFACTOR[:SEED1:SEED2]]";
        let parts: Vec<&str> = rest.split(':').collect();
        let num = |i: usize, what: &str| -> anyhow::Result<u64> {
            parts[i].parse::<u64>().map_err(|_| {
                anyhow::anyhow!(
                    "graph `{s}`: {what} `{}` is not a non-negative integer ({FORM})",
                    parts[i]
                )
            })
        };
        let small = |i: usize, what: &str| -> anyhow::Result<u32> {
            u32::try_from(num(i, what)?)
                .map_err(|_| anyhow::anyhow!("graph `{s}`: {what} `{}` is too large", parts[i]))
        };
        let d = KroneckerParams::default();
        let p = match parts.len() {
            1 => KroneckerParams { scale: small(0, "SCALE")?, ..d },
            2 => KroneckerParams {
                scale: small(0, "SCALE")?,
                edgefactor: small(1, "EDGEFACTOR")?,
                ..d
            },
            4 => KroneckerParams {
                scale: small(0, "SCALE")?,
                edgefactor: small(1, "EDGEFACTOR")?,
                seed1: num(2, "SEED1")?,
                seed2: num(3, "SEED2")?,
            },
            n => anyhow::bail!("graph `{s}`: {n} fields after `kron:` ({FORM}; seeds go in pairs)"),
        };
        p.check().with_context(|| format!("graph `{s}`"))?;
        Ok(GraphSpec::Kronecker(p))
    }
}

impl fmt::Display for GraphSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphSpec::Kronecker(p) => {
                write!(f, "kron:{}:{}:{}:{}", p.scale, p.edgefactor, p.seed1, p.seed2)
            }
            GraphSpec::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// A built graph and how it was made.
#[derive(Debug)]
pub(crate) struct LoadedGraph {
    pub(crate) spec: GraphSpec,
    /// Shared, so that engines which keep the graph (Skein's trustees) need no copy.
    pub(crate) csr: Arc<Csr>,
    /// Edges of the generated or read edge list (self-loops and repeats included).
    pub(crate) input_edges: u64,
    /// Seconds to generate (or read) the edge list.
    pub(crate) generation_seconds: f64,
    /// Seconds to build the CSR from the edge list.
    pub(crate) construction_seconds: f64,
    /// One line for reports, e.g. `kron:20:16:2:3 (Graph500 Kronecker)`.
    pub(crate) description: String,
}

impl LoadedGraph {
    /// The first `count` roots of the Graph500 root sequence for this graph: the
    /// generator's seeds for a Kronecker graph, seeds 2 and 3 for a file.
    pub(crate) fn roots(&self, count: usize) -> Vec<u64> {
        match &self.spec {
            GraphSpec::Kronecker(p) => kronecker::search_roots(p, &self.csr, count),
            GraphSpec::File(_) => kronecker::search_roots_for(
                self.csr.num_vertices(),
                |v| self.csr.degree(v),
                FILE_ROOT_SEEDS.0,
                FILE_ROOT_SEEDS.1,
                count,
            ),
        }
    }

    /// The roots to run: `explicit` ones (checked to be vertices), else the first `count`
    /// of the graph's Graph500 root sequence (checked by [`limits::check_roots`]);
    /// `count_name` names the count in errors (`--roots`, `job.roots`).
    pub(crate) fn choose_roots(
        &self,
        explicit: &[u64],
        count: u64,
        count_name: &str,
    ) -> anyhow::Result<Vec<u64>> {
        let n = self.csr.num_vertices();
        if !explicit.is_empty() {
            if let Some(&bad) = explicit.iter().find(|&&r| r >= n) {
                anyhow::bail!(
                    "root {bad} is not a vertex of {} (it has {n} vertices: 0..{n})",
                    self.description
                );
            }
            return Ok(explicit.to_vec());
        }
        limits::check_roots(count, n).map_err(|e| anyhow::anyhow!("{count_name}: {e}"))?;
        Ok(self.roots(count as usize))
    }

    /// `(SCALE, edgefactor)` of a Kronecker graph.
    pub(crate) fn scale_edgefactor(&self) -> Option<(u32, u32)> {
        match &self.spec {
            GraphSpec::Kronecker(p) => Some((p.scale, p.edgefactor)),
            GraphSpec::File(_) => None,
        }
    }
}

/// Generates or reads the graph of `spec` and builds its CSR.
pub(crate) fn load(spec: &GraphSpec) -> anyhow::Result<LoadedGraph> {
    let start = Instant::now();
    let (edges, description) = match spec {
        GraphSpec::Kronecker(p) => {
            // Refuse before allocating anything (the generator would abort).
            limits::check_kronecker_run(p.scale, p.edgefactor)
                .map_err(|e| anyhow::anyhow!("graph {spec}: {e}"))?;
            let bar = progress::phase("generate", p.num_edges());
            let el = kronecker::generate_with_progress(p, &|done| bar.set(done));
            bar.finish();
            (el, format!("{spec} (Graph500 Kronecker)"))
        }
        GraphSpec::File(path) => {
            let context = || format!("cannot load the graph file {}", path.display());
            // A pipe or standard input (`-`) has no length until it ends.
            let size = formats::input_len(path).with_context(context)?;
            let bar = progress::phase_bytes("load", size.unwrap_or(0));
            let (_, el) =
                formats::read_edges_detected(path, &|done| bar.set(done)).with_context(context)?;
            bar.finish();
            (el, format!("{}", path.display()))
        }
    };
    let generation_seconds = start.elapsed().as_secs_f64();
    let input_edges = edges.len() as u64;
    let start = Instant::now();
    let bar = progress::phase("build CSR", 2 * input_edges);
    let csr = Csr::try_from_edge_list_with_progress(&edges, &|done| bar.set(done))
        .with_context(|| format!("cannot build the graph {spec}"))?;
    bar.finish();
    let construction_seconds = start.elapsed().as_secs_f64();
    drop(edges);
    Ok(LoadedGraph {
        spec: spec.clone(),
        csr: Arc::new(csr),
        input_edges,
        generation_seconds,
        construction_seconds,
        description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kronecker_specs() {
        let p = |s: &str| match s.parse::<GraphSpec>().unwrap() {
            GraphSpec::Kronecker(p) => (p.scale, p.edgefactor, p.seed1, p.seed2),
            GraphSpec::File(f) => panic!("{s} parsed as file {f:?}"),
        };
        assert_eq!(p("kron:10"), (10, 16, 2, 3));
        assert_eq!(p("kron:12:8"), (12, 8, 2, 3));
        assert_eq!(p("kron:12:8:5:7"), (12, 8, 5, 7));
        assert_eq!("g.el".parse::<GraphSpec>().unwrap(), GraphSpec::File("g.el".into()));
        for bad in ["kron:", "kron:x", "kron:10:16:2", "kron:10:16:2:3:4", "kron:0", "kron:-1"] {
            let e = bad.parse::<GraphSpec>().unwrap_err();
            assert!(format!("{e:#}").contains(bad), "{bad}: {e:#}");
        }
        assert_eq!(
            "kron:20".parse::<GraphSpec>().unwrap().to_string(),
            "kron:20:16:2:3".to_string()
        );
    }
}
