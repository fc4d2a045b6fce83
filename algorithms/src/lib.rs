//! Graph kernels on Skein's delegation runtime.
//!
//! - [`Partitioning`]: which trustee owns which vertex (contiguous blocks of global ids).
//! - [`Engine`]: SSSP (bucketed delta-stepping, asynchronous within a bucket) and BFS
//!   (level-synchronous) where every partition is a property entrusted to one worker,
//!   and remote updates are delegated with `apply_then`.

mod adjacency;
pub mod engine;
mod output;
pub mod partition;
mod state;

pub use engine::{Engine, EngineError, EngineOptions, SearchStats, DEFAULT_DELTA};
pub use partition::Partitioning;
