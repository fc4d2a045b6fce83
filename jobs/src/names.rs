//! The kernels and engines the CLI knows, by name: one type each, shared by the command
//! line (clap), job files (serde) and reports. A leaf module: it depends on no other
//! module of the crate, so every module can use it without import cycles.

use std::fmt;

/// Which kernel to run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kernel {
    /// Single-source shortest paths.
    Sssp,
    /// Breadth-first search.
    Bfs,
    /// PageRank (no roots; `crate::kernels`).
    Pagerank,
    /// Weakly connected components (no roots; `crate::kernels`).
    Cc,
}

impl Kernel {
    /// The kernel's name in job files and reports (`sssp`, `bfs`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kernel::Sssp => "sssp",
            Kernel::Bfs => "bfs",
            Kernel::Pagerank => "pagerank",
            Kernel::Cc => "cc",
        }
    }

    /// True for the kernels without roots (PageRank, components), which `crate::kernels`
    /// runs instead of the search path.
    pub(crate) fn rootless(self) -> bool {
        matches!(self, Kernel::Pagerank | Kernel::Cc)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which engine runs a kernel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EngineName {
    /// One thread: Dijkstra / queue BFS (the COST reference).
    Seq,
    /// rayon threads: delta-stepping / direction-optimizing BFS.
    Rayon,
    /// Skein's delegation runtime: partitions entrusted to workers, `apply_then` between them.
    Skein,
    /// Skein's delegation runtime across MPI ranks (`mpirun -np R`, `skein compare` only:
    /// a build with the `mpi` feature).
    #[serde(rename = "skein-rack")]
    #[value(name = "skein-rack")]
    SkeinRack,
    /// The official Graph500 MPI reference 3.0.1 under `mpirun` (`skein compare` only).
    #[serde(rename = "graph500-mpi")]
    #[value(name = "graph500-mpi")]
    Graph500Mpi,
}

impl EngineName {
    /// The engines `skein compare` runs when none are named, in order.
    pub(crate) const DEFAULT_COMPARE: [EngineName; 3] =
        [EngineName::Seq, EngineName::Rayon, EngineName::Skein];

    /// The engine's name on the command line, in job files and in reports.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EngineName::Skein => "skein",
            EngineName::Rayon => "rayon",
            EngineName::Seq => "seq",
            EngineName::SkeinRack => "skein-rack",
            EngineName::Graph500Mpi => "graph500-mpi",
        }
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// The command line, job files and reports spell every name the same way.
    #[test]
    fn one_spelling_everywhere() {
        for e in EngineName::value_variants() {
            let cli = e.to_possible_value().unwrap();
            assert_eq!(cli.get_name(), e.as_str());
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
            assert_eq!(e.to_string(), e.as_str());
        }
        assert_eq!(&EngineName::value_variants()[..3], &EngineName::DEFAULT_COMPARE);
        assert_eq!(EngineName::Graph500Mpi.as_str(), "graph500-mpi");
        assert_eq!(EngineName::SkeinRack.as_str(), "skein-rack");
        for k in Kernel::value_variants() {
            assert_eq!(k.to_possible_value().unwrap().get_name(), k.as_str());
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
