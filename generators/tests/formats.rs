//! Graph files: round trips of every format, and a clear error for each kind of bad input.

use std::fs;
use std::path::Path;

use skein_generators::formats::{
    self, binary_checksum, detect_format, read_binary, read_edges, read_el, read_gr, read_mtx,
    read_wel, write_binary, write_edges, write_edges_with, write_el, write_gr, write_mtx,
    write_wel, Format, FormatError, Location, MtxSymmetry, WriteOptions, BINARY_MAGIC,
};
use skein_generators::EdgeList;

mod scratch;
use scratch::Scratch;

/// Self-loops, repeats, both orientations, an isolated top vertex, awkward weights.
fn sample(weighted: bool) -> EdgeList {
    let src = vec![0, 1, 1, 3, 3, 2, 5, 0, 7];
    let dst = vec![1, 0, 1, 2, 2, 7, 5, 7, 0];
    let weights = weighted.then(|| {
        vec![
            0.1,
            1.0 / 3.0,
            0.0,
            f32::MIN_POSITIVE,
            1e-40, // subnormal
            f32::MAX,
            0.999_999_94,
            123_456.79,
            -0.0,
        ]
    });
    EdgeList { num_vertices: 9, src, dst, weights }
}

/// Pseudo-random edges (xorshift), deterministic.
fn random(n: u64, m: usize, weighted: bool, seed: u64) -> EdgeList {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut el = EdgeList { num_vertices: n, ..Default::default() };
    let mut w = Vec::new();
    for _ in 0..m {
        el.src.push(next() % n);
        el.dst.push(next() % n);
        w.push(f32::from_bits((next() % 0x3f80_0000) as u32));
    }
    el.weights = weighted.then_some(w);
    el
}

fn bits(el: &EdgeList) -> Option<Vec<u32>> {
    el.weights.as_ref().map(|w| w.iter().map(|x| x.to_bits()).collect())
}

/// Equality down to the weight bit patterns (so -0.0 and 0.0 differ).
fn assert_same(a: &EdgeList, b: &EdgeList) {
    assert_eq!(a.num_vertices, b.num_vertices);
    assert_eq!(a.src, b.src);
    assert_eq!(a.dst, b.dst);
    assert_eq!(bits(a), bits(b));
}

fn message(e: &FormatError) -> String {
    e.to_string()
}

/// These tests are about formats, not memory: a generous fixed memory limit keeps their
/// outcome independent of the machine where a graph declares a huge vertex count
/// (the readers allocate nothing per vertex; `tests/limits.rs` tests the limit).
fn generous_memory_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var(skein_generators::memory::MEMORY_LIMIT_ENV, "1024T"));
}

#[test]
fn format_names_and_extensions() {
    assert_eq!(Format::from_path(Path::new("a/b.skg")), Some(Format::Binary));
    assert_eq!(Format::from_path(Path::new("g.EL")), Some(Format::El));
    assert_eq!(Format::from_path(Path::new("g.wel")), Some(Format::Wel));
    assert_eq!(Format::from_path(Path::new("g.mtx")), Some(Format::Mtx));
    assert_eq!(Format::from_path(Path::new("road.GR")), Some(Format::Gr));
    assert_eq!("dimacs".parse::<Format>().unwrap(), Format::Gr);
    assert_eq!(Format::from_path(Path::new("g.txt")), None);
    assert_eq!(Format::from_path(Path::new("noext")), None);
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
        assert_eq!(Format::from_path(Path::new(&format!("x.{}", f.extension()))), Some(f));
    }
    let err = "csv".parse::<Format>().unwrap_err();
    assert!(err.to_string().contains("bin, el, wel, mtx, gr"), "{err}");
}

#[test]
fn every_format_round_trips_through_files() {
    let dir = Scratch::new("roundtrip");
    for weighted in [false, true] {
        let el = sample(weighted);
        for format in Format::ALL {
            let path = dir.path(&format!("g{weighted}.{}", format.extension()));
            if format == Format::Gr && weighted {
                // DIMACS weights are integers: the sample's are not.
                let e = write_edges(&path, &el, format).unwrap_err();
                assert!(matches!(e, FormatError::Unwritable { .. }), "{e:?}");
                assert!(
                    message(&e).contains(
                        "edge 0 has weight 0.1, but DIMACS .gr weights are whole numbers"
                    ),
                    "{e}"
                );
                continue;
            }
            write_edges(&path, &el, format).unwrap();
            assert_eq!(detect_format(&path).unwrap(), format);
            let back = read_edges(&path).unwrap();
            match (format, weighted) {
                (Format::El, true) => assert_same(&back, &EdgeList { weights: None, ..el.clone() }),
                (Format::Wel | Format::Gr, false) => assert_same(
                    &back,
                    &EdgeList { weights: Some(vec![1.0; el.len()]), ..el.clone() },
                ),
                _ => assert_same(&back, &el),
            }
        }
    }
}

#[test]
fn random_graphs_round_trip_through_streams() {
    generous_memory_limit();
    let name = Path::new("stream");
    for (n, m, seed) in [(1u64, 5usize, 1u64), (1000, 3000, 2), (1 << 40, 500, 3)] {
        let el = random(n, m, true, seed);
        let mut buf = Vec::new();
        write_binary(&mut buf, &el, name).unwrap();
        assert_same(&read_binary(&buf[..], name).unwrap(), &el);

        let mut buf = Vec::new();
        write_wel(&mut buf, &el, &WriteOptions::default(), name).unwrap();
        assert_same(&read_wel(&buf[..], name).unwrap(), &el);

        let mut buf = Vec::new();
        write_mtx(&mut buf, &el, &WriteOptions::default(), name).unwrap();
        assert_same(&read_mtx(&buf[..], name).unwrap(), &el);

        let whole = EdgeList {
            weights: el.weights.as_ref().map(|w| w.iter().map(|x| (x * 1e6).floor()).collect()),
            ..el.clone()
        };
        let mut buf = Vec::new();
        write_gr(&mut buf, &whole, &WriteOptions::default(), name).unwrap();
        assert_same(&read_gr(&buf[..], name).unwrap(), &whole);

        let unweighted = EdgeList { weights: None, ..el };
        let mut buf = Vec::new();
        write_el(&mut buf, &unweighted, &WriteOptions::default(), name).unwrap();
        assert_same(&read_el(&buf[..], name).unwrap(), &unweighted);
    }
}

#[test]
fn binary_uses_narrow_ids_when_they_fit() {
    let name = Path::new("b");
    let small = random(1 << 32, 100, false, 9);
    let wide = random((1 << 32) + 1, 100, false, 9);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    write_binary(&mut a, &small, name).unwrap();
    write_binary(&mut b, &wide, name).unwrap();
    assert_eq!(a.len(), 64 + 100 * 8 + 8);
    assert_eq!(b.len(), 64 + 100 * 16 + 8);
    assert_eq!(&a[..8], &BINARY_MAGIC);
}

#[test]
fn empty_graphs_round_trip() {
    let dir = Scratch::new("empty");
    for el in [EdgeList::default(), EdgeList { num_vertices: 5, ..Default::default() }] {
        for format in Format::ALL {
            let path = dir.path(&format!("e.{}", format.extension()));
            write_edges(&path, &el, format).unwrap();
            let back = read_edges(&path).unwrap();
            assert_eq!(back.num_vertices, el.num_vertices, "{format}");
            assert!(back.is_empty());
        }
    }
}

#[test]
fn written_text_has_comments_only_at_the_top() {
    let el = sample(true);
    let opts = WriteOptions {
        comments: vec!["generated by a test".into(), "two\nlines".into()],
        ..Default::default()
    };
    let mut buf = Vec::new();
    write_wel(&mut buf, &el, &opts, Path::new("t")).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let first_edge = lines.iter().position(|l| !l.starts_with('#')).unwrap();
    assert!(lines[first_edge..].iter().all(|l| !l.starts_with('#')));
    assert_eq!(lines.len() - first_edge, el.len());
    assert!(text.contains("# generated by a test\n# two lines\n# vertices 9\n# edges 9\n"));
    assert_eq!(lines[first_edge], "0 1 0.1");
}

#[test]
fn text_without_header_counts_vertices_from_the_largest_id() {
    let el = read_el(&b"3 4\n\n  # a comment\n1\t2\r\n"[..], Path::new("x.el")).unwrap();
    assert_eq!(el.num_vertices, 5);
    assert_eq!((el.src, el.dst), (vec![3, 1], vec![4, 2]));
    assert!(el.weights.is_none());
    // An ordinary comment that merely starts with a directive word.
    let el = read_el(&b"# vertices are numbered from 0\n0 1\n"[..], Path::new("x.el")).unwrap();
    assert_eq!(el.num_vertices, 2);
}

#[test]
fn vertices_directive_keeps_isolated_vertices() {
    let el = read_wel(&b"# vertices 100\n#edges 1\n0 1 2.5\n"[..], Path::new("x.wel")).unwrap();
    assert_eq!(el.num_vertices, 100);
    assert_eq!(el.weights, Some(vec![2.5]));
}

#[test]
fn matrix_market_variants() {
    let name = Path::new("m.mtx");
    let text = b"%%MatrixMarket matrix coordinate integer symmetric\n% comment\n\n4 4 3\n2 1 7\n3 3 0\n1 4 2\n";
    let el = read_mtx(&text[..], name).unwrap();
    assert_eq!(el.num_vertices, 4);
    assert_eq!((el.src, el.dst), (vec![1, 2, 0], vec![0, 2, 3]));
    assert_eq!(el.weights, Some(vec![7.0, 0.0, 2.0]));

    let text = b"%%matrixmarket MATRIX Coordinate pattern general\n3 3 2\n1 2\n3 1\n";
    let el = read_mtx(&text[..], name).unwrap();
    assert_eq!((el.num_vertices, el.src, el.dst, el.weights), (3, vec![0, 2], vec![1, 0], None));

    // The symmetric writer puts every entry on or below the diagonal.
    let el = sample(true);
    let opts = WriteOptions { mtx_symmetry: MtxSymmetry::Symmetric, ..Default::default() };
    let mut buf = Vec::new();
    write_mtx(&mut buf, &el, &opts, name).unwrap();
    let text = String::from_utf8(buf.clone()).unwrap();
    assert!(text.starts_with("%%MatrixMarket matrix coordinate real symmetric\n"));
    let back = read_mtx(&buf[..], name).unwrap();
    for k in 0..el.len() {
        assert!(back.src[k] >= back.dst[k]);
        assert_eq!(
            (back.src[k].max(back.dst[k]), back.src[k].min(back.dst[k])),
            (el.src[k].max(el.dst[k]), el.src[k].min(el.dst[k]))
        );
    }
    assert_eq!(bits(&back), bits(&el));
}

#[test]
fn write_with_progress_reports_every_edge() {
    let dir = Scratch::new("progress");
    let mut el = random(1 << 10, (1 << 20) + 12_345, true, 5);
    el.weights.as_mut().unwrap().iter_mut().for_each(|w| *w = w.floor());
    for format in Format::ALL {
        let path = dir.path(&format!("p.{}", format.extension()));
        let last = std::cell::Cell::new(0u64);
        write_edges_with(&path, &el, format, &WriteOptions::default(), &|d| {
            assert!(d >= last.get());
            last.set(d);
        })
        .unwrap();
        assert_eq!(last.get(), el.len() as u64, "{format}");
    }
}

// ---------------------------------------------------------------- bad input: text

/// Reads `text` as `.el` (or `.wel` when `weighted`) and returns the error message.
fn text_error(text: &str, weighted: bool) -> (FormatError, String) {
    let name = Path::new(if weighted { "bad.wel" } else { "bad.el" });
    let r = if weighted { read_wel(text.as_bytes(), name) } else { read_el(text.as_bytes(), name) };
    let e = r.expect_err(text);
    let m = message(&e);
    (e, m)
}

#[test]
fn malformed_text_lines_name_file_and_line() {
    let cases: &[(&str, bool, &str)] = &[
        ("0 1\n0\n", false, "bad.el:2: expected the second vertex id"),
        ("0 1\n-1 2\n", false, "bad.el:2: expected the first vertex id"),
        ("0 x\n", false, "bad.el:1: expected the second vertex id of an edge `u v` (an integer from 0), found `x`"),
        ("0 1 0.5\n", false, "bad.el:1: expected end of line after `u v` (weighted edges belong in a .wel file), found `0.5`"),
        ("0 1\n", true, "bad.wel:1: expected a weight after the two vertex ids (a decimal number), found end of line"),
        ("0 1 abc\n", true, "bad.wel:1: expected a weight"),
        ("0 1 1 1\n", true, "bad.wel:1: expected end of line after `u v w`, found `1`"),
        ("99999999999999999999 1\n", false, "bad.el:1: expected the first vertex id"),
        ("18446744073709551615 1\n", false, "bad.el:1: expected the first vertex id"),
        ("# vertices x\n", false, "bad.el:1: expected a count after `# vertices`"),
        ("0 1\n# edges 1\n", false, "bad.el:2: expected an edge line `u v` (`# edges` belongs before the first edge)"),
        ("# vertices 3\n# vertices 3\n", false, "bad.el:2: expected a single `# vertices` line (the first is on line 1)"),
        ("# edges 3\n0 1\n1 2\n", false, "bad.el:4: expected 3 edges (as `# edges` on line 1 says), found end of file after 2 edges"),
        ("\u{1}\u{2}\n", false, "bad.el:1: expected the first vertex id"),
    ];
    for (text, weighted, want) in cases {
        let (e, m) = text_error(text, *weighted);
        assert!(matches!(e, FormatError::Syntax { .. }), "{text:?}: {e:?}");
        assert!(m.starts_with(want), "{text:?}:\n got  {m}\n want {want}");
    }
}

#[test]
fn text_vertex_beyond_declared_count() {
    let (e, m) = text_error("# vertices 4\n0 1\n2 4\n", false);
    assert!(matches!(
        e,
        FormatError::VertexOutOfRange { at: Location::Line(3), vertex: 4, num_vertices: 4, .. }
    ));
    assert_eq!(m, "bad.el:3: vertex 4 is out of range: the graph has 4 vertices (ids 0..4)");
}

#[test]
fn text_bad_weights() {
    for (w, shown) in
        [("-0.5", "-0.5"), ("NaN", "NaN"), ("inf", "inf"), ("-inf", "-inf"), ("1e39", "inf")]
    {
        let (e, m) = text_error(&format!("0 1 1\n1 2 {w}\n"), true);
        assert!(matches!(e, FormatError::BadWeight { at: Location::Line(2), .. }), "{w}: {e:?}");
        assert_eq!(
            m,
            format!(
                "bad.wel:2: weight {shown} is not allowed: weights must be finite and non-negative"
            )
        );
    }
}

#[test]
fn overlong_line_is_refused() {
    let text = "1".repeat(3 << 20);
    let (e, m) = text_error(&text, false);
    assert!(matches!(e, FormatError::Syntax { line: 1, .. }));
    assert!(m.contains("a line of at most"), "{m}");
}

#[test]
fn malformed_matrix_market() {
    let name = Path::new("bad.mtx");
    let cases: &[(&str, &str)] = &[
        ("", "bad.mtx:1: expected the Matrix Market banner, found an empty file"),
        ("0 1\n", "bad.mtx:1: expected the Matrix Market banner `%%MatrixMarket matrix coordinate FIELD SYMMETRY`, found `0`"),
        ("%%MatrixMarket matrix coordinate real\n", "bad.mtx:1: expected four words after `%%MatrixMarket`"),
        ("%%MatrixMarket vector coordinate real general\n", "bad.mtx:1: expected object `matrix`, found `vector`"),
        ("%%MatrixMarket matrix coordinate real general extra\n", "bad.mtx:1: expected end of the banner"),
        ("%%MatrixMarket matrix coordinate float general\n", "bad.mtx:1: expected field `pattern`, `real` or `integer`, found `float`"),
        ("%%MatrixMarket matrix coordinate real upper\n", "bad.mtx:1: expected symmetry `general` or `symmetric`, found `upper`"),
        ("%%MatrixMarket matrix coordinate real general\n% only comments\n", "bad.mtx:3: expected the size line `rows columns entries`, found end of file"),
        ("%%MatrixMarket matrix coordinate real general\n3 3\n", "bad.mtx:2: expected the size line `rows columns entries` (three integers), found end of line"),
        ("%%MatrixMarket matrix coordinate real general\n3 4 1\n", "bad.mtx:2: expected a square matrix (rows = columns = vertices), found 3 rows and 4 columns"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 0.5\n", "bad.mtx:4: expected 2 entries (as the size line, line 2, says), found end of file after 1 entries"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 0.5\n2 3 1\n", "bad.mtx:4: expected end of file (the size line, line 2, announces 1 entries), found another entry `2 3 1`"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 1\n0 2 0.5\n", "bad.mtx:3: expected the row index of an entry `i j value` (an integer in 1..=3), found `0`"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2\n", "bad.mtx:3: expected a real value after the two indices, found end of line"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 3\n", "bad.mtx:3: expected end of the entry `i j`, found `3`"),
        ("%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 0.5\n", "bad.mtx:3: expected an integer value after the two indices, found `0.5`"),
        ("%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 16777217\n", "bad.mtx:3: expected an integer value that an f32 holds exactly (every integer up to 2^24 = 16777216; above that only multiples of the f32 spacing), found `16777217`"),
        ("%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 9223372036854775807\n", "bad.mtx:3: expected an integer value that an f32 holds exactly (every integer up to 2^24 = 16777216; above that only multiples of the f32 spacing), found `9223372036854775807`"),
    ];
    for (text, want) in cases {
        let e = read_mtx(text.as_bytes(), name).expect_err(text);
        assert!(matches!(e, FormatError::Syntax { .. }), "{text:?}: {e:?}");
        let m = message(&e);
        assert!(m.starts_with(want), "{text:?}:\n got  {m}\n want {want}");
    }
    for (text, want) in [
        ("%%MatrixMarket matrix array real general\n", "bad.mtx:1: the dense `array` format"),
        (
            "%%MatrixMarket matrix coordinate complex general\n",
            "bad.mtx:1: the `complex` field is not supported",
        ),
        ("%%MatrixMarket matrix coordinate real hermitian\n", "bad.mtx:1: symmetry `hermitian`"),
        (
            "%%MatrixMarket matrix coordinate real skew-symmetric\n",
            "bad.mtx:1: symmetry `skew-symmetric`",
        ),
    ] {
        let e = read_mtx(text.as_bytes(), name).expect_err(text);
        assert!(matches!(e, FormatError::Unsupported { .. }), "{e:?}");
        assert!(message(&e).starts_with(want), "{e}");
    }
}

#[test]
fn matrix_market_bad_index_and_weights() {
    let name = Path::new("bad.mtx");
    let e = read_mtx(&b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 4\n"[..], name)
        .unwrap_err();
    assert!(matches!(e, FormatError::VertexOutOfRange { at: Location::Line(3), vertex: 3, .. }));
    for (field, w) in [("real", "-1"), ("real", "nan"), ("real", "infinity"), ("integer", "-3")] {
        let text = format!("%%MatrixMarket matrix coordinate {field} general\n3 3 1\n1 2 {w}\n");
        let e = read_mtx(text.as_bytes(), name).unwrap_err();
        assert!(matches!(e, FormatError::BadWeight { at: Location::Line(3), .. }), "{w}: {e:?}");
        assert!(message(&e).starts_with("bad.mtx:3: weight "), "{e}");
    }
}

// ---------------------------------------------------------------- bad input: binary

fn binary_of(el: &EdgeList) -> Vec<u8> {
    let mut buf = Vec::new();
    write_binary(&mut buf, el, Path::new("g.skg")).unwrap();
    buf
}

#[test]
fn truncated_binary_is_refused_at_every_length() {
    let dir = Scratch::new("truncated");
    let bytes = binary_of(&sample(true));
    let path = dir.path("t.skg");
    for len in 0..bytes.len() {
        fs::write(&path, &bytes[..len]).unwrap();
        let e = read_edges(&path).expect_err("truncated file accepted");
        assert!(message(&e).starts_with(&path.display().to_string()), "{e}");
        assert!(
            matches!(e, FormatError::Truncated { .. } | FormatError::NotSkein { .. }),
            "length {len}: {e:?}"
        );
        // The stream reader (no file length known) agrees.
        let e = read_binary(&bytes[..len], &path).expect_err("truncated stream accepted");
        assert!(matches!(e, FormatError::Truncated { .. } | FormatError::NotSkein { .. }));
    }
    fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let m = message(&read_edges(&path).unwrap_err());
    assert!(
        m.ends_with(&format!(
            "truncated: the header announces {} bytes, the file has {}",
            bytes.len(),
            bytes.len() - 3
        )),
        "{m}"
    );
}

#[test]
fn trailing_bytes_are_refused() {
    let mut bytes = binary_of(&sample(false));
    bytes.push(0);
    let e = read_binary(&bytes[..], Path::new("x.skg")).unwrap_err();
    assert!(matches!(e, FormatError::TrailingData { .. }), "{e:?}");
    let dir = Scratch::new("trailing");
    let path = dir.path("x.skg");
    fs::write(&path, &bytes).unwrap();
    assert!(matches!(read_edges(&path).unwrap_err(), FormatError::TrailingData { extra: 1, .. }));
}

#[test]
fn every_corrupted_byte_is_detected() {
    let bytes = binary_of(&sample(true));
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = bytes.clone();
            bad[i] ^= flip;
            let e = read_binary(&bad[..], Path::new("c.skg"))
                .expect_err(&format!("flip {flip:#x} at byte {i} not detected"));
            if i >= 64 {
                assert!(matches!(e, FormatError::Checksum { .. }), "byte {i}: {e:?}");
                assert!(message(&e).contains("checksum mismatch"), "{e}");
            }
        }
    }
}

#[test]
fn foreign_files_are_refused() {
    let dir = Scratch::new("foreign");
    let path = dir.path("foreign.skg");
    fs::write(&path, b"PK\x03\x04 this is a zip file, not a graph").unwrap();
    let e = read_edges(&path).unwrap_err();
    assert!(matches!(e, FormatError::NotSkein { .. }), "{e:?}");
    assert_eq!(
        message(&e),
        format!(
            "{}: not a Skein binary graph: expected the magic bytes 89 53 4b 47 0d 0a 1a 0a, found 50 4b 03 04 20 74 68 69",
            path.display()
        )
    );
    fs::write(&path, b"").unwrap();
    assert!(message(&read_edges(&path).unwrap_err()).ends_with("found nothing (empty file)"));

    // A binary file under a text name is recognized by its magic.
    let path = dir.path("actually-binary.el");
    fs::write(&path, binary_of(&sample(true))).unwrap();
    assert_eq!(detect_format(&path).unwrap(), Format::Binary);
    assert_same(&read_edges(&path).unwrap(), &sample(true));

    // No extension, no magic, no banner.
    let path = dir.path("mystery");
    fs::write(&path, "0 1\n").unwrap();
    let e = read_edges(&path).unwrap_err();
    assert!(matches!(e, FormatError::UnknownFormat { .. }));
    assert!(message(&e).contains("name the file .skg, .el, .wel, .mtx or .gr"));
    // ... but a Matrix Market banner is enough.
    let path = dir.path("matrix");
    fs::write(&path, "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n").unwrap();
    assert_eq!(read_edges(&path).unwrap().len(), 1);
}

/// Replaces the trailer of `bytes` by the checksum of the rest (a consistent file).
fn reseal(bytes: &mut [u8]) {
    let body = bytes.len() - 8;
    let sum = binary_checksum(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn binary_with_valid_checksum_but_bad_content_is_refused() {
    let name = Path::new("bad.skg");
    // Edge 5 is (2, 7): with 7 vertices, vertex 7 is out of range.
    let mut bytes = binary_of(&sample(true));
    bytes[24..32].copy_from_slice(&7u64.to_le_bytes());
    reseal(&mut bytes);
    let e = read_binary(&bytes[..], name).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::VertexOutOfRange { at: Location::Edge(5), vertex: 7, num_vertices: 7, .. }
        ),
        "{e:?}"
    );
    assert_eq!(
        message(&e),
        "bad.skg: edge 5: vertex 7 is out of range: the graph has 7 vertices (ids 0..7)"
    );
    // Weights follow the two id arrays (9 edges, 4-byte ids).
    for (bits, shown) in [
        (f32::NAN.to_bits(), "NaN"),
        ((-1.5f32).to_bits(), "-1.5"),
        (f32::INFINITY.to_bits(), "inf"),
    ] {
        let mut bytes = binary_of(&sample(true));
        let at = 64 + 2 * 9 * 4 + 3 * 4;
        bytes[at..at + 4].copy_from_slice(&bits.to_le_bytes());
        reseal(&mut bytes);
        let e = read_binary(&bytes[..], name).unwrap_err();
        assert!(matches!(e, FormatError::BadWeight { at: Location::Edge(3), .. }), "{e:?}");
        assert_eq!(
            message(&e),
            format!("bad.skg: edge 3: weight {shown} is not allowed: weights must be finite and non-negative")
        );
    }
    // Unknown flags and reserved bytes.
    let mut bytes = binary_of(&sample(false));
    bytes[12] = 0x3;
    reseal(&mut bytes);
    let e = read_binary(&bytes[..], name).unwrap_err();
    assert!(message(&e).contains("unknown flag bits 0x3"), "{e}");
    let mut bytes = binary_of(&sample(false));
    bytes[50] = 1;
    reseal(&mut bytes);
    let e = read_binary(&bytes[..], name).unwrap_err();
    assert!(message(&e).contains("reserved bytes are not zero"), "{e}");
    let mut bytes = binary_of(&sample(false));
    bytes[16] = 5;
    reseal(&mut bytes);
    let e = read_binary(&bytes[..], name).unwrap_err();
    assert!(message(&e).contains("id width 5 bytes (expected 4 or 8)"), "{e}");
}

#[test]
fn binary_of_a_newer_version_is_refused() {
    let mut bytes = binary_of(&sample(false));
    bytes[8] = 2;
    let e = read_binary(&bytes[..], Path::new("v.skg")).unwrap_err();
    assert!(matches!(e, FormatError::UnsupportedVersion { found: 2, .. }));
    assert_eq!(
        message(&e),
        "v.skg: Skein binary version 2 is not supported (this build reads version 1)"
    );
}

#[test]
fn absurd_header_counts_do_not_allocate() {
    generous_memory_limit();
    let mut bytes = binary_of(&sample(false));
    bytes[32..40].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
    let e = read_binary(&bytes[..], Path::new("h.skg")).unwrap_err();
    assert!(matches!(e, FormatError::BadHeader { .. }), "{e:?}");
    bytes[32..40].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = read_binary(&bytes[..], Path::new("h.skg")).unwrap_err();
    assert!(matches!(e, FormatError::Truncated { .. }), "{e:?}");
}

// ---------------------------------------------------------------- bad input: files

#[test]
fn unreadable_input_names_the_file() {
    let dir = Scratch::new("unreadable");
    let missing = dir.path("missing.el");
    let e = read_edges(&missing).unwrap_err();
    assert!(matches!(e, FormatError::Io { action: "open", .. }), "{e:?}");
    assert!(message(&e).starts_with(&format!("{}: cannot open", missing.display())), "{e}");
    // A directory opens but cannot be read.
    let sub = dir.path("adir.el");
    fs::create_dir(&sub).unwrap();
    let e = read_edges(&sub).unwrap_err();
    assert!(matches!(e, FormatError::Io { .. }), "{e:?}");
    assert_eq!(e.path(), sub);
}

#[test]
fn unwritable_output_names_the_file() {
    let dir = Scratch::new("unwritable");
    let el = sample(true);
    for format in Format::ALL {
        let path = dir.path("no/such/dir/g").with_extension(format.extension());
        let e = write_edges(&path, &el, format).unwrap_err();
        assert!(matches!(e, FormatError::Io { action: "create", .. }), "{e:?}");
        assert!(message(&e).starts_with(&format!("{}: cannot create", path.display())));
    }
    let e = write_edges(dir.dir(), &el, Format::Binary).unwrap_err();
    assert!(matches!(e, FormatError::Io { .. }), "{e:?}");
    // A full device.
    if Path::new("/dev/full").exists() {
        let e = write_edges(Path::new("/dev/full"), &el, Format::Wel).unwrap_err();
        assert!(matches!(e, FormatError::Io { action: "write", .. }), "{e:?}");
    }
}

#[test]
fn invalid_edge_lists_are_not_written() {
    let name = Path::new("w.wel");
    let mut el = sample(true);
    el.weights.as_mut().unwrap()[2] = f32::NAN;
    let e = write_wel(Vec::new(), &el, &WriteOptions::default(), name).unwrap_err();
    assert!(matches!(e, FormatError::Unwritable { .. }));
    assert!(message(&e).contains("edge 2 has weight NaN"), "{e}");
    let mut el = sample(false);
    el.num_vertices = 7;
    let e = write_binary(Vec::new(), &el, name).unwrap_err();
    assert!(
        message(&e).contains("edge 2 (3, 2)") || message(&e).contains("beyond the 7 vertices"),
        "{e}"
    );
    let mut el = sample(false);
    el.dst.pop();
    assert!(matches!(
        write_mtx(Vec::new(), &el, &WriteOptions::default(), name),
        Err(FormatError::Unwritable { .. })
    ));
}

#[test]
fn error_paths_survive_format_dispatch() {
    // The text readers report the real path when reading through read_edges.
    let dir = Scratch::new("dispatch");
    let path = dir.path("g.wel");
    fs::write(&path, "# vertices 3\n0 1 0.5\n1 2 -1\n").unwrap();
    let e = read_edges(&path).unwrap_err();
    assert_eq!(
        message(&e),
        format!(
            "{}:3: weight -1 is not allowed: weights must be finite and non-negative",
            path.display()
        )
    );
    let _ = formats::BINARY_VERSION;
}

// ---------------------------------------------------------------- DIMACS .gr

/// A road-network style file: comments anywhere, both directions of most roads.
const DIMACS: &str = "c 9th DIMACS Implementation Challenge: Shortest Paths
c a small graph
p sp 5 6

a 1 2 7
a 2 1 7
c a comment between arcs
a 2 3 0
a 3 5 16777216
a 5 5 2
a 4 1 1073741824
";

/// The same graph as a `.wel` (ids from 0).
const DIMACS_AS_WEL: &str = "# vertices 5
0 1 7
1 0 7
1 2 0
2 4 16777216
4 4 2
3 0 1073741824
";

#[test]
fn dimacs_reads_as_the_same_graph_as_wel() {
    let gr = read_gr(DIMACS.as_bytes(), Path::new("g.gr")).unwrap();
    let wel = read_wel(DIMACS_AS_WEL.as_bytes(), Path::new("g.wel")).unwrap();
    assert_same(&gr, &wel);
    assert_eq!(gr.num_vertices, 5);
    // Through a file, told by its extension, and by its content without one.
    let dir = Scratch::new("dimacs");
    for name in ["road.gr", "road"] {
        let path = dir.path(name);
        fs::write(&path, DIMACS).unwrap();
        assert_eq!(detect_format(&path).unwrap(), Format::Gr, "{name}");
        assert_same(&read_edges(&path).unwrap(), &wel);
    }
    // Written and read back (CRLF line ends are fine too).
    let mut out = Vec::new();
    write_gr(
        &mut out,
        &gr,
        &WriteOptions { comments: vec!["two\nlines".into()], ..Default::default() },
        Path::new("o.gr"),
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("\nc two lines\np sp 5 6\na 1 2 7\n"), "{text}");
    let crlf = text.replace('\n', "\r\n");
    assert_same(&read_gr(crlf.as_bytes(), Path::new("o.gr")).unwrap(), &gr);
    // An empty graph.
    let empty = read_gr(&b"p sp 0 0\n"[..], Path::new("e.gr")).unwrap();
    assert_eq!((empty.num_vertices, empty.len(), empty.weights), (0, 0, Some(vec![])));
}

#[test]
fn malformed_dimacs_names_file_and_line() {
    let cases: &[(&str, &str)] = &[
        ("", "e.gr:1: expected the problem line `p sp VERTICES ARCS`, found end of file"),
        ("c only\n", "e.gr:2: expected the problem line `p sp VERTICES ARCS`, found end of file"),
        (
            "a 1 2 3\np sp 2 1\n",
            "e.gr:1: expected the problem line `p sp VERTICES ARCS` before the first arc, found `a 1 2 3`",
        ),
        (
            "p sp 2 1\np sp 2 1\na 1 2 3\n",
            "e.gr:2: expected a single problem line (the first is on line 1), found a second `p` line",
        ),
        ("p max 2 1\n", "e.gr:1: the DIMACS problem `max` (only `sp`, shortest paths, describes a weighted graph) is not supported"),
        ("p sp 2\n", "e.gr:1: expected the problem line `p sp VERTICES ARCS` (two integers), found end of line"),
        ("p sp -2 1\n", "e.gr:1: expected the problem line `p sp VERTICES ARCS` (two integers), found `-2`"),
        ("p sp 2 1 9\n", "e.gr:1: expected end of the problem line `p sp VERTICES ARCS`, found `9`"),
        ("p 2 1\n", "e.gr:1: expected the problem line `p sp VERTICES ARCS`, found `2`"),
        (
            "p sp 3 2\na 1 2 3\n",
            "e.gr:3: expected 2 arcs (as the problem line, line 1, says), found end of file after 1 arc (is the file truncated?)",
        ),
        (
            "p sp 3 1\na 1 2 3\na 2 3 4\n",
            "e.gr:3: expected end of file (the problem line, line 1, announces 1 arc), found another arc `a 2 3 4`",
        ),
        ("p sp 3 1\na 0 2 3\n", "e.gr:2: expected the tail vertex of an arc `a u v w` in 1..=3 (the problem line, line 1, declares 3 vertices), found `0`"),
        ("p sp 3 1\na 1 4 3\n", "e.gr:2: expected the head vertex of an arc `a u v w` in 1..=3 (the problem line, line 1, declares 3 vertices), found `4`"),
        ("p sp 3 1\na 1 x 3\n", "e.gr:2: expected the head vertex of an arc `a u v w` (an integer in 1..=3), found `x`"),
        ("p sp 3 1\na 1 2\n", "e.gr:2: expected a weight after the two vertices of an arc `a u v w`, found end of line"),
        ("p sp 3 1\na 1 2 1.5\n", "e.gr:2: expected an integer weight (DIMACS weights are whole numbers; a .wel file holds fractional weights), found `1.5`"),
        ("p sp 3 1\na 1 2 -4\n", "e.gr:2: weight -4 is not allowed: weights must be finite and non-negative"),
        ("p sp 3 1\na 1 2 16777217\n", "e.gr:2: expected a weight that an f32 holds exactly (every integer up to 2^24 = 16777216; above that only multiples of the f32 spacing), found `16777217`"),
        ("p sp 3 1\na 1 2 18446744073709551615\n", "e.gr:2: expected a weight that an f32 holds exactly (every integer up to 2^24 = 16777216; above that only multiples of the f32 spacing), found `18446744073709551615`"),
        ("p sp 3 1\na 1 2 3 4\n", "e.gr:2: expected end of an arc `a u v w`, found `4`"),
        ("p sp 3 1\nx 1 2 3\n", "e.gr:2: expected a comment `c ...`, the problem line `p sp VERTICES ARCS` or an arc `a u v w`, found `x 1 2 3`"),
    ];
    for (text, want) in cases {
        let e = read_gr(text.as_bytes(), Path::new("e.gr")).unwrap_err();
        assert_eq!(&message(&e), want, "input {text:?}");
    }
    // "-0" is zero; 2^24 and 2^40 are exact.
    let el = read_gr(
        &b"p sp 2 3\na 1 2 -0\na 1 2 16777216\na 2 1 1099511627776\n"[..],
        Path::new("e.gr"),
    )
    .unwrap();
    assert_eq!(el.weights.unwrap(), [0.0, 16_777_216.0, 1_099_511_627_776.0]);
}
