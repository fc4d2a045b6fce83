//! A tiny input that declares a huge graph is refused before anything is allocated,
//! with `WHAT needs N GiB, only M GiB available`, in every format and in the CSR build;
//! 2^64 - 1 vertices too (no panic, no abort).
//!
//! Every test here runs with `SKEIN_MEMORY_LIMIT=1G`, so the outcome does not depend on
//! the machine (the variable is set once, before any check reads it, to the same value
//! for every test of this file).

use std::fs;
use std::path::Path;

use skein_generators::formats::{
    read_binary, read_edges, read_el, read_gr, read_mtx, read_wel, write_binary, FormatError,
};
use skein_generators::graph::CsrError;
use skein_generators::kronecker::KroneckerParams;
use skein_generators::memory::{self, MemoryError, MEMORY_LIMIT_ENV};
use skein_generators::{Csr, EdgeList};

fn limit_1g() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var(MEMORY_LIMIT_ENV, "1G"));
}

mod scratch;
use scratch::Scratch;

/// Asserts a memory error at `line` whose message is `PREFIX needs N GiB, only 1.0 GiB
/// available` (N at least `min_gib`).
fn assert_too_large(e: &FormatError, line: Option<u64>, prefix: &str, min_gib: u64) {
    let FormatError::Memory {
        line: l, error: MemoryError::TooLarge { need, available, .. }, ..
    } = e
    else {
        panic!("expected a memory error, got {e:?}");
    };
    assert_eq!(*l, line, "{e}");
    assert_eq!(*available, 1 << 30);
    assert!(*need >= u128::from(min_gib) << 30, "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with(prefix), "{msg}\ndoes not start with\n{prefix}");
    assert!(msg.ends_with(" GiB, only 1.0 GiB available"), "{msg}");
    assert!(msg.contains(" needs "), "{msg}");
}

#[test]
fn binary_header_declaring_a_huge_graph() {
    limit_1g();
    let dir = Scratch::new("skg");
    for n in [(1u64 << 32) + 1, u64::MAX] {
        let el = EdgeList { num_vertices: n, src: vec![0], dst: vec![n - 1], weights: None };
        let mut bytes = Vec::new();
        write_binary(&mut bytes, &el, Path::new("x")).unwrap();
        assert_eq!(bytes.len(), 88, "the issue's 88-byte file: valid checksum, 8-byte ids");
        let path = dir.path("huge.skg");
        fs::write(&path, &bytes).unwrap();
        let prefix = format!(
            "{}: a graph of {n} vertices and 1 edge (as the header declares)",
            path.display()
        );
        assert_too_large(&read_edges(&path).unwrap_err(), None, &prefix, 32);
        // The same from a stream (no file length to check the header against).
        let e = read_binary(&bytes[..], Path::new("s.skg")).unwrap_err();
        assert_too_large(&e, None, "s.skg: a graph of", 32);
    }
}

#[test]
fn edge_list_whose_largest_id_is_huge() {
    limit_1g();
    let dir = Scratch::new("el");
    // The 17-byte file.
    let path = dir.path("huge.el");
    fs::write(&path, "0 1\n1 4294967296\n").unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 17);
    let prefix = format!(
        "{}: building the CSR of a graph of 4294967297 vertices and 2 edges (edge list \
         aside, largest vertex id 4294967296)",
        path.display()
    );
    assert_too_large(&read_edges(&path).unwrap_err(), None, &prefix, 32);
    // The largest id an edge list accepts: 2^64 - 2, so 2^64 - 1 vertices.
    let e = read_wel(&b"0 18446744073709551614 1.5\n"[..], Path::new("w.wel")).unwrap_err();
    assert_too_large(&e, None, "w.wel: building the CSR of a graph of 18446744073709551615", 1);
}

#[test]
fn edge_list_directives_declaring_a_huge_graph() {
    limit_1g();
    let name = Path::new("d.el");
    let e = read_el(&b"# vertices 4294967297\n0 1\n"[..], name).unwrap_err();
    assert_too_large(&e, Some(1), "d.el:1: a graph of 4294967297 vertices", 32);
    let e = read_el(&b"# c\n# edges 2\n# vertices 18446744073709551615\n0 1\n1 2\n"[..], name)
        .unwrap_err();
    assert_too_large(
        &e,
        Some(3),
        "d.el:3: a graph of 18446744073709551615 vertices and 2 edges",
        1,
    );
    // A declared edge count alone: the edge list itself.
    let e = read_el(&b"# edges 100000000000\n0 1\n"[..], name).unwrap_err();
    assert_too_large(&e, Some(1), "d.el:1: an edge list of 100000000000 edges", 1000);
    // Under the limit nothing changes.
    let el = read_el(&b"# vertices 1000\n# edges 1\n0 999\n"[..], name).unwrap();
    assert_eq!((el.num_vertices, el.len()), (1000, 1));
}

#[test]
fn matrix_market_size_line_declaring_a_huge_graph() {
    limit_1g();
    let name = Path::new("m.mtx");
    for (n, m) in [(4294967297u64, 1u64), (u64::MAX, 1), (10, u64::MAX)] {
        let text =
            format!("%%MatrixMarket matrix coordinate pattern general\n% c\n{n} {n} {m}\n1 2\n");
        let e = read_mtx(text.as_bytes(), name).unwrap_err();
        let edges = if m == 1 { "1 edge".to_owned() } else { format!("{m} edges") };
        assert_too_large(&e, Some(3), &format!("m.mtx:3: a graph of {n} vertices and {edges}"), 1);
    }
}

#[test]
fn dimacs_problem_line_declaring_a_huge_graph() {
    limit_1g();
    let name = Path::new("g.gr");
    for n in [4294967297u64, u64::MAX] {
        let text = format!("c huge\np sp {n} 1\na 1 2 3\n");
        let e = read_gr(text.as_bytes(), name).unwrap_err();
        assert_too_large(&e, Some(2), &format!("g.gr:2: a graph of {n} vertices and 1 edge"), 32);
    }
}

#[test]
fn csr_build_of_a_huge_vertex_count() {
    limit_1g();
    for n in [(1u64 << 32) + 1, u64::MAX] {
        let el = EdgeList { num_vertices: n, src: vec![0, 1], dst: vec![1, n - 1], weights: None };
        let e = Csr::try_from_edge_list(&el).unwrap_err();
        assert!(matches!(e, CsrError::Memory(MemoryError::TooLarge { .. })), "{e:?}");
        assert!(
            e.to_string().starts_with(&format!(
                "building the CSR of a graph of {n} vertices and 2 edges (edge list aside) needs "
            )),
            "{e}"
        );
    }
    // A small graph still builds under the limit.
    let el = EdgeList { num_vertices: 3, src: vec![0, 1], dst: vec![1, 2], weights: None };
    assert_eq!(Csr::try_from_edge_list(&el).unwrap().num_arcs(), 4);
}

#[test]
fn kronecker_scale_beyond_the_limit() {
    limit_1g();
    assert_eq!(memory::available_memory(), Some(1 << 30));
    // SCALE 26: 2^30 edges, about 44 GiB with the CSR.
    let e = KroneckerParams::new(26, 16, 2, 3).unwrap().check_memory().unwrap_err();
    assert!(
        e.to_string().starts_with(
            "the Kronecker graph of SCALE 26 and edgefactor 16 (67108864 vertices and \
             1073741824 edges: edge list and CSR) needs "
        ),
        "{e}"
    );
    assert!(e.to_string().ends_with("GiB, only 1.0 GiB available"), "{e}");
    assert_eq!(KroneckerParams::new(10, 16, 2, 3).unwrap().check_memory(), Ok(()));
}

#[test]
fn petgraph_conversion_of_a_huge_vertex_count() {
    limit_1g();
    let n = u64::from(u32::MAX) - 1;
    let el = EdgeList { num_vertices: n, src: vec![0], dst: vec![n - 1], weights: None };
    let e = skein_generators::interop::to_petgraph(&el).unwrap_err();
    assert!(
        matches!(e, skein_generators::interop::InteropError::Memory(MemoryError::TooLarge { .. })),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with("a petgraph graph of 4294967294 vertices and 1 edge needs "),
        "{e}"
    );
}

/// Child side of [`a_malformed_limit_is_an_error`]: runs only when the parent sets
/// `SKEIN_TEST_BAD_LIMIT_CHILD` (with a malformed `SKEIN_MEMORY_LIMIT`).
#[test]
fn bad_limit_child() {
    if std::env::var_os("SKEIN_TEST_BAD_LIMIT_CHILD").is_none() {
        return;
    }
    let e = read_el(&b"0 1\n"[..], Path::new("b.el")).unwrap_err();
    println!("RESULT {e}");
    assert_eq!(memory::available_memory(), None);
    let e = memory::check_fits(1, || "one byte".to_owned()).unwrap_err();
    println!("RESULT {e}");
}

#[test]
fn a_malformed_limit_is_an_error() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "bad_limit_child", "--nocapture", "--test-threads=1"])
        .env("SKEIN_TEST_BAD_LIMIT_CHILD", "1")
        .env(MEMORY_LIMIT_ENV, "lots")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let results: Vec<&str> =
        text.lines().filter_map(|l| l.split_once("RESULT ").map(|(_, r)| r)).collect();
    let bad = "the environment variable SKEIN_MEMORY_LIMIT is `lots`: expected a byte count \
               such as 1073741824, 512M or 2G";
    assert_eq!(results, [format!("b.el: {bad}"), bad.to_owned()], "{text}");
    assert!(out.status.success(), "{text}");
}
