//! Fixtures shared by the tests of the kernels across (fake) ranks (`local.rs`, `ranks.rs`).

use std::sync::Arc;

use skein_algorithms::EngineOptions;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

/// (ranks, workers per rank) of issue 19.
pub(crate) const SPLITS: [(usize, usize); 5] = [(1, 2), (2, 1), (2, 2), (3, 1), (4, 1)];

/// The Graph500 Kronecker graph of `scale` (edgefactor 16, seeds 2 and 3) and its first 3
/// search roots.
pub(crate) fn graph(scale: u32) -> (Arc<Csr>, Vec<u64>) {
    let p = KroneckerParams::new(scale, 16, 2, 3).unwrap();
    let g = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
    let roots = kronecker::search_roots(&p, &g, 3);
    (g, roots)
}

/// Engine options of a loopback split of `ranks` fake ranks of `workers` workers each.
pub(crate) fn opts(ranks: usize, workers: usize) -> EngineOptions {
    EngineOptions {
        workers: ranks * workers,
        loopback_ranks: Some(ranks),
        chunk: 16,
        ..EngineOptions::default()
    }
}
