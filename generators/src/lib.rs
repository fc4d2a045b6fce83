//! Graphs for Skein.
//!
//! This crate produces, stores, loads and checks graphs. It has no dependency on the
//! delegation runtime, so every engine (Skein, the rayon and MPI baselines, petgraph)
//! shares its graph types and its Graph500 validation.
//!
//! - [`graph`]: the edge list ([`EdgeList`]) and compressed sparse row adjacency ([`Csr`]).
//! - [`result`]: the common result types of BFS and SSSP kernels ([`BfsResult`], [`SsspResult`]).

pub mod graph;
pub mod result;

pub use graph::{Csr, EdgeList, VertexId};
pub use result::{BfsResult, SsspResult, NO_PARENT, UNREACHED_LEVEL};
