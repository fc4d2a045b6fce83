//! petgraph interop: conversions both ways, and petgraph as an oracle on a Graph500 graph.

use petgraph::algo::dijkstra;
use petgraph::graph::NodeIndex;
use skein_generators::interop::{
    csr_from_petgraph, csr_to_petgraph, edge_list_from_petgraph, to_petgraph, InteropError,
    PetGraph,
};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::{Csr, EdgeList};

fn sample() -> EdgeList {
    EdgeList {
        num_vertices: 6,
        src: vec![0, 1, 1, 3, 3, 2, 4],
        dst: vec![1, 0, 1, 2, 2, 4, 0],
        weights: Some(vec![0.5, 0.25, 9.0, 1.0, 2.0, 0.125, 3.0]),
    }
}

/// Each vertex's arcs, sorted, so CSRs that differ only in arc order compare equal.
fn arcs(csr: &Csr) -> Vec<Vec<(u64, u32)>> {
    (0..csr.num_vertices())
        .map(|v| {
            let mut a: Vec<(u64, u32)> = csr.arcs(v).map(|(t, w)| (t, w.to_bits())).collect();
            a.sort_unstable();
            a
        })
        .collect()
}

#[test]
fn edge_list_round_trip_keeps_order_loops_and_repeats() {
    let el = sample();
    let g = to_petgraph(&el).unwrap();
    assert_eq!(g.node_count(), 6); // vertex 5 is isolated and kept
    assert_eq!(g.edge_count(), 7);
    let e = g.raw_edges();
    assert_eq!((e[2].source().index(), e[2].target().index(), e[2].weight), (1, 1, 9.0));
    assert_eq!(edge_list_from_petgraph(&g), el);

    let unweighted = EdgeList { weights: None, ..sample() };
    let back = edge_list_from_petgraph(&to_petgraph(&unweighted).unwrap());
    assert_eq!(back.weights, Some(vec![1.0; 7]));
    assert_eq!((back.src, back.dst), (unweighted.src, unweighted.dst));
}

#[test]
fn csr_from_petgraph_matches_our_construction() {
    let el = sample();
    let g = to_petgraph(&el).unwrap();
    let csr = csr_from_petgraph(&g);
    assert_eq!(csr, Csr::from_edge_list(&el));
    // Self-loop dropped, repeats kept: 6 non-loop edges, 12 arcs.
    assert_eq!(csr.num_arcs(), 12);
    assert_eq!(csr.degree(1), 2);
    assert_eq!(csr.degree(5), 0);
}

#[test]
fn csr_to_petgraph_and_back() {
    let el = kronecker::generate(&KroneckerParams::new(6, 8, 2, 3).unwrap());
    let csr = Csr::from_edge_list(&el);
    let g = csr_to_petgraph(&csr).unwrap();
    assert_eq!(g.node_count() as u64, csr.num_vertices());
    assert_eq!(2 * g.edge_count() as u64, csr.num_arcs());
    assert_eq!(arcs(&csr_from_petgraph(&g)), arcs(&csr));
}

#[test]
fn petgraph_dijkstra_reproduces_the_reference_distances() {
    // SCALE 8, root 0 (vertex 53): the Graph500 reference's binary32 distances.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/graph500/kron_s08_ef16_root0.txt"
    ))
    .expect("read the SCALE 8 root-0 vector");
    let el = kronecker::generate(&KroneckerParams::new(8, 16, 2, 3).unwrap());
    let g: PetGraph = to_petgraph(&el).unwrap();
    let dist = dijkstra(&g, NodeIndex::new(53), None, |e| *e.weight());
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let v: usize = f[0].parse().unwrap();
        let bits = u32::from_str_radix(f[2], 16).unwrap();
        match dist.get(&NodeIndex::new(v)) {
            Some(d) => assert_eq!(d.to_bits(), bits, "vertex {v}"),
            None => assert_eq!(bits, 0xbf80_0000, "vertex {v} should be reached"),
        }
        checked += 1;
    }
    assert_eq!(checked, 256);
}

#[test]
fn invalid_or_huge_graphs_are_errors() {
    let mut el = sample();
    el.dst[3] = 6;
    assert!(matches!(to_petgraph(&el), Err(InteropError::InvalidEdgeList(_))));
    let mut el = sample();
    el.weights.as_mut().unwrap().pop();
    assert!(matches!(to_petgraph(&el), Err(InteropError::InvalidEdgeList(_))));
    let huge = EdgeList { num_vertices: u64::from(u32::MAX), ..Default::default() };
    let e = to_petgraph(&huge).unwrap_err();
    assert!(matches!(e, InteropError::TooManyVertices { .. }));
    assert!(e.to_string().contains("32-bit node indices"), "{e}");
}
