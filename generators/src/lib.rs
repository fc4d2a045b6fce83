//! Graphs for Skein.
//!
//! This crate produces, stores, loads and checks graphs. It has no dependency on the
//! delegation runtime, so every engine (Skein, the rayon and MPI baselines, petgraph)
//! shares its graph types and its Graph500 validation.
//!
//! - [`graph`]: the edge list ([`EdgeList`]) and compressed sparse row adjacency ([`Csr`]).
//! - [`result`]: the common result types of BFS and SSSP kernels ([`BfsResult`], [`SsspResult`]).
//! - [`kronecker`]: the Graph500 Kronecker generator, bit-compatible with the reference 3.0.1.
//! - [`build`]: parallel CSR construction.
//! - [`distributed`]: each rank's share of a Kronecker graph: its edges, its rows
//!   ([`distributed::LocalCsr`]), over MPI with the `mpi` feature; Graph500 validation,
//!   search roots and `nedge` on those rows, without gathering the graph.
//! - [`analytics`]: PageRank's update and the validation of PageRank and components.
//! - [`validate`]: Graph500 validation of BFS and SSSP results.
//! - [`formats`]: graph files (`.el`, `.wel`, `.mtx`, DIMACS `.gr`, Skein binary), from
//!   files, pipes or standard input.
//! - [`memory`]: will it fit? checks made before a graph's arrays are allocated.
//! - [`interop`]: conversion to and from `petgraph`.

pub mod analytics;
pub mod build;
pub mod checksum;
pub mod distributed;
pub mod formats;
pub mod graph;
pub mod hugepage;
pub mod interop;
pub mod kronecker;
pub mod memory;
mod prng;
pub mod result;
pub mod splitmix;
pub mod validate;

pub use graph::{Csr, EdgeList, VertexId};
pub use result::{BfsResult, SsspResult, NO_PARENT, UNREACHED_LEVEL};
