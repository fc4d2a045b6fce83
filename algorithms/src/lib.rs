//! Graph kernels on Skein's delegation runtime.
//!
//! - [`Partitioning`]: which trustee owns which vertex (contiguous blocks of global ids).
//! - [`Engine`]: SSSP (bucketed delta-stepping, asynchronous within a bucket) and BFS
//!   (level-synchronous) where every partition is a property entrusted to one worker,
//!   and remote updates are delegated with `apply_then`. The same code runs in one
//!   process and over the ranks of an `mpirun` job (feature `mpi`; see [`engine`],
//!   "Across ranks").
//!
//! - [`Engine::pagerank`] and [`Engine::components`]: PageRank and weakly connected
//!   components, built on the same public blocks a kernel of your own uses.
//!
//! **Write your own kernel** on the public blocks (`docs/writing-kernels.md`,
//! `examples/pagerank.rs`): [`graph::GraphView`] (the partitioned graph every trustee of every
//! rank reads), [`parts`] (partitions on every worker, handles for fibers on any rank,
//! supersteps and driver fibers that work in chunks), [`outbox`] (many small updates per
//! request) and [`registry`] (rank-local data reached by id), run on an
//! [`Engine`]'s runtime ([`Engine::run`], [`Engine::graph_id`]).
//!
//! Modules, one concern each: `engine` (the runtime, options, errors, entry points),
//! `sssp`, `bfs`, `pagerank` and `cc` (each kernel's partition state and round loop), `parts`
//! (the generic steps over a kernel's partitions), `graph` (the graph
//! view every partition reads), `adjacency` (each partition's arc copy), `outbox` (the
//! batching of updates between partitions), `output` (gathering results), `registry`
//! (rank-local data a trustee reaches by id: graphs, partition handles, results kept on
//! rank 0), [`partition`] (the vertex-to-owner mapping).

pub mod adjacency;
mod bfs;
mod cc;
pub mod engine;
pub mod graph;
pub mod outbox;
mod output;
mod pagerank;
pub mod partition;
pub mod parts;
pub mod registry;
mod sssp;

pub use engine::{
    default_delta, Engine, EngineError, EngineOptions, LocalBfs, LocalComponents, LocalSssp,
    SearchStats, CC_VERTEX_ARCS, DEFAULT_DELTA, DEFAULT_RELATIVE_DELTA, DEFAULT_ROUND_SHARE,
};
pub use partition::{rank_bounds, Partitioning};
pub use skein_generators::distributed::analytics::LocalPageRank;
