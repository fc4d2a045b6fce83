//! The error type of the baselines.

use skein_generators::VertexId;

/// Results of this crate.
pub type Result<T, E = BaselineError> = std::result::Result<T, E>;

/// Why a baseline refused to run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    /// The graph has no vertex.
    #[error("the graph is empty (no vertices)")]
    EmptyGraph,
    /// The graph has vertices but no edge (self-loops are dropped by the CSR).
    #[error("the graph has {vertices} vertices but no edges (self-loops do not count)")]
    NoEdges {
        /// Vertex count.
        vertices: u64,
    },
    /// The baselines index vertices with `u32`.
    #[error("the graph has {vertices} vertices; the baselines support fewer than 2^32 - 1")]
    TooManyVertices {
        /// Vertex count.
        vertices: u64,
    },
    /// A search root is not a vertex of the graph.
    #[error(
        "root {root} is not a vertex of the graph (it has {vertices} vertices: 0..{vertices})"
    )]
    RootOutOfRange {
        /// The root asked for.
        root: VertexId,
        /// Vertex count.
        vertices: u64,
    },
    /// SSSP needs non-negative, finite weights.
    #[error("arc {source_vertex} -> {target} has weight {weight}: SSSP needs finite weights >= 0")]
    BadWeight {
        /// Source of the arc.
        source_vertex: VertexId,
        /// Target of the arc.
        target: VertexId,
        /// Its weight.
        weight: f32,
    },
    /// A tuning option is out of range.
    #[error("bad option {name} = {value}: {expected}")]
    BadOption {
        /// The option's name.
        name: &'static str,
        /// The value given, printed.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// An engine name that is not `seq` or `rayon`.
    #[error("unknown engine `{0}` (expected `seq` or `rayon`)")]
    UnknownEngine(String),
    /// A thread of the engine panicked during a search (a bug): the search was abandoned
    /// once every thread had stopped.
    #[error("the {engine} engine panicked during the search: {message}")]
    Panicked {
        /// The engine's name.
        engine: &'static str,
        /// The panic's message.
        message: String,
    },
    /// The rayon thread pool could not start.
    #[error("could not start the rayon thread pool: {0}")]
    ThreadPool(String),
}
