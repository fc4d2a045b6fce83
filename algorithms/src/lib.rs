//! Graph kernels on Skein's delegation runtime.
//!
//! - [`Partitioning`]: which trustee owns which vertex (contiguous blocks of global ids).
//! - [`Engine`]: SSSP (bucketed delta-stepping, asynchronous within a bucket) and BFS
//!   (level-synchronous) where every partition is a property entrusted to one worker,
//!   and remote updates are delegated with `apply_then`. The same code runs in one
//!   process and over the ranks of an `mpirun` job (feature `mpi`; see [`engine`],
//!   "Across ranks").
//!
//! Modules, one concern each: `engine` (the runtime, options, errors, entry points),
//! `sssp` and `bfs` (each kernel's partition state and round loop), `graph` (the graph
//! view every partition reads), `adjacency` (each partition's arc copy), `outbox` (the
//! batching of updates between partitions), `output` (gathering results), `registry`
//! (rank-local data a trustee reaches by id: graphs, partition handles, results kept on
//! rank 0), [`partition`] (the vertex-to-owner mapping).

mod adjacency;
mod bfs;
pub mod engine;
mod graph;
mod outbox;
mod output;
pub mod partition;
mod parts;
mod registry;
mod sssp;

pub use engine::{
    default_delta, Engine, EngineError, EngineOptions, LocalBfs, LocalSssp, SearchStats,
    DEFAULT_DELTA, DEFAULT_RELATIVE_DELTA, DEFAULT_ROUND_SHARE,
};
pub use partition::{rank_bounds, Partitioning};
