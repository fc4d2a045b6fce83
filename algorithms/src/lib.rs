//! Graph kernels on Skein's delegation runtime (work in progress: see issue 5).

pub mod partition;
mod state;

pub use partition::Partitioning;
