//! Matrix Market coordinate files (`.mtx`). The accepted subset is described in the
//! [module docs](super).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use super::text::{self, found, quote, syntax, EdgeSink, Lines, Tokens};
use super::{weight_ok, FormatError, Location, MtxSymmetry, WriteOptions};
use crate::graph::EdgeList;

/// Most entries reserved up front on the word of the size line alone.
const MAX_TRUSTED_RESERVE: u64 = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Pattern,
    Real,
    Integer,
}

/// Reads a Matrix Market coordinate file from `reader`; `name` is the file name errors
/// report.
pub fn read_mtx(reader: impl Read, name: &Path) -> Result<EdgeList, FormatError> {
    read_stream(BufReader::new(reader), name, None, &mut EdgeSink::whole())
}

/// Writes `el` as a Matrix Market coordinate file: `pattern` when unweighted, `real`
/// when weighted; symmetry from `options`.
pub fn write_mtx(
    writer: impl Write,
    el: &EdgeList,
    options: &WriteOptions,
    name: &Path,
) -> Result<(), FormatError> {
    super::check_edge_list(el, name)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, writer);
    write_stream(&mut w, el, options, name, &|_| {})?;
    w.flush().map_err(|e| FormatError::io(name, "write", e))
}

fn unsupported(path: &Path, line: u64, what: String) -> FormatError {
    FormatError::Unsupported { path: path.to_owned(), line: Some(line), what }
}

/// Parses the banner line; returns the field and whether the matrix is symmetric.
fn banner(line: &[u8], ln: u64, path: &Path) -> Result<(Field, bool), FormatError> {
    const SHAPE: &str = "`%%MatrixMarket matrix coordinate FIELD SYMMETRY`";
    let mut t = Tokens::new(line);
    let head = t.next();
    if !head.is_some_and(|h| h.eq_ignore_ascii_case(b"%%MatrixMarket")) {
        return Err(syntax(path, ln, format!("the Matrix Market banner {SHAPE}"), found(head)));
    }
    let words: Vec<&[u8]> = t.by_ref().take(4).collect();
    if words.len() < 4 {
        return Err(syntax(
            path,
            ln,
            format!("four words after `%%MatrixMarket`: {SHAPE}"),
            format!("{} word(s)", words.len()),
        ));
    }
    if let Some(extra) = t.next() {
        return Err(syntax(path, ln, format!("end of the banner {SHAPE}"), quote(extra)));
    }
    let lower: Vec<String> =
        words.iter().map(|w| String::from_utf8_lossy(w).to_ascii_lowercase()).collect();
    if lower[0] != "matrix" {
        return Err(syntax(path, ln, "object `matrix`", quote(words[0])));
    }
    match lower[1].as_str() {
        "coordinate" => {}
        "array" => {
            return Err(unsupported(
                path,
                ln,
                "the dense `array` format (only `coordinate` describes a graph)".into(),
            ))
        }
        _ => return Err(syntax(path, ln, "format `coordinate`", quote(words[1]))),
    }
    let field = match lower[2].as_str() {
        "pattern" => Field::Pattern,
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "complex" => return Err(unsupported(path, ln, "the `complex` field".into())),
        _ => return Err(syntax(path, ln, "field `pattern`, `real` or `integer`", quote(words[2]))),
    };
    let symmetric = match lower[3].as_str() {
        "general" => false,
        "symmetric" => true,
        "skew-symmetric" | "hermitian" => {
            return Err(unsupported(
                path,
                ln,
                format!("symmetry `{}` (a graph is `general` or `symmetric`)", lower[3]),
            ))
        }
        _ => return Err(syntax(path, ln, "symmetry `general` or `symmetric`", quote(words[3]))),
    };
    Ok((field, symmetric))
}

/// Reads a Matrix Market file; `size_hint` (bytes) bounds what the size line may reserve.
///
/// Its edges go to `sink` (kept whole, or handed out in chunks: then the returned list
/// holds none, only the vertex count and whether the file is weighted).
pub(crate) fn read_stream<R: BufRead>(
    reader: R,
    path: &Path,
    size_hint: Option<u64>,
    sink: &mut EdgeSink<'_>,
) -> Result<EdgeList, FormatError> {
    let mut lines = Lines::new(reader, path);
    let Some((ln, line)) = lines.next_line()? else {
        return Err(syntax(path, 1, "the Matrix Market banner", "an empty file"));
    };
    let (field, _symmetric) = banner(line, ln, path)?;

    // Comments, then the size line.
    let (n, nnz, size_ln) = loop {
        let Some((ln, line)) = lines.next_line()? else {
            return Err(syntax(
                path,
                lines.line() + 1,
                "the size line `rows columns entries`",
                "end of file",
            ));
        };
        let mut t = Tokens::new(line);
        let Some(first) = t.next() else { continue };
        if first[0] == b'%' {
            continue;
        }
        let what = "the size line `rows columns entries` (three integers)";
        let num = |tok: Option<&[u8]>| {
            tok.and_then(text::parse_u64).ok_or_else(|| syntax(path, ln, what, found(tok)))
        };
        let rows = num(Some(first))?;
        let cols = num(t.next())?;
        let nnz = num(t.next())?;
        if let Some(extra) = t.next() {
            return Err(syntax(path, ln, format!("end of {what}"), quote(extra)));
        }
        if rows != cols {
            return Err(syntax(
                path,
                ln,
                "a square matrix (rows = columns = vertices)",
                format!("{rows} rows and {cols} columns"),
            ));
        }
        break (rows, nnz, ln);
    };
    let weighted = field != Field::Pattern;
    if !sink.chunked_out() {
        super::check_declared_graph(path, size_ln, n, Some(nnz), weighted)?;
    }

    let by_size = size_hint.map_or(MAX_TRUSTED_RESERVE, |s| s / 4);
    let reserve = sink.reserve_cap(nnz.min(by_size.max(MAX_TRUSTED_RESERVE)) as usize);
    let mut src: Vec<u64> = Vec::with_capacity(reserve);
    let mut dst: Vec<u64> = Vec::with_capacity(reserve);
    let mut wts: Vec<f32> = Vec::with_capacity(if field == Field::Pattern { 0 } else { reserve });
    let columns = if field == Field::Pattern { "`i j`" } else { "`i j value`" };

    while let Some((ln, line)) = lines.next_line()? {
        let mut t = Tokens::new(line);
        let Some(first) = t.next() else { continue };
        if first[0] == b'%' {
            continue;
        }
        if sink.count(src.len()) == nnz {
            return Err(syntax(
                path,
                ln,
                format!("end of file (the size line, line {size_ln}, announces {nnz} entries)"),
                format!("another entry {}", quote(line)),
            ));
        }
        let index = |tok: Option<&[u8]>, which: &str| -> Result<u64, FormatError> {
            match tok.and_then(text::parse_u64) {
                Some(i) if (1..=n).contains(&i) => Ok(i - 1),
                Some(i) if i > n => Err(FormatError::VertexOutOfRange {
                    path: path.to_owned(),
                    at: Location::Line(ln),
                    vertex: i - 1,
                    num_vertices: n,
                }),
                _ => Err(syntax(
                    path,
                    ln,
                    format!("the {which} index of an entry {columns} (an integer in 1..={n})"),
                    found(tok),
                )),
            }
        };
        let i = index(Some(first), "row")?;
        let j = index(t.next(), "column")?;
        let bad_weight = |weight: f32| FormatError::BadWeight {
            path: path.to_owned(),
            at: Location::Line(ln),
            weight,
        };
        match field {
            Field::Pattern => {}
            Field::Real => {
                let tok = t.next();
                let w = tok.and_then(text::parse_f32).ok_or_else(|| {
                    syntax(path, ln, "a real value after the two indices", found(tok))
                })?;
                if !weight_ok(w) {
                    return Err(bad_weight(w));
                }
                wts.push(w);
            }
            Field::Integer => {
                let tok = t.next();
                let signed = tok.and_then(|s| std::str::from_utf8(s).ok()?.parse::<i64>().ok());
                let w = signed.ok_or_else(|| {
                    syntax(path, ln, "an integer value after the two indices", found(tok))
                })?;
                if w < 0 {
                    return Err(bad_weight(w as f32));
                }
                // Rounding to binary32 would change path lengths silently: refuse it.
                if i128::from(w) != w as f32 as i128 {
                    return Err(syntax(
                        path,
                        ln,
                        "an integer value that an f32 holds exactly (every integer up to \
                         2^24 = 16777216; above that only multiples of the f32 spacing)",
                        found(tok),
                    ));
                }
                wts.push(w as f32);
            }
        }
        if let Some(extra) = t.next() {
            return Err(syntax(path, ln, format!("end of the entry {columns}"), quote(extra)));
        }
        src.push(i);
        dst.push(j);
        sink.offer(&mut src, &mut dst, &mut wts, weighted, false)?;
    }
    if sink.count(src.len()) < nnz {
        return Err(syntax(
            path,
            lines.line() + 1,
            format!("{nnz} entries (as the size line, line {size_ln}, says)"),
            format!("end of file after {} entries (is the file truncated?)", sink.count(src.len())),
        ));
    }
    sink.offer(&mut src, &mut dst, &mut wts, weighted, true)?;
    let weights = (field != Field::Pattern).then_some(wts);
    Ok(EdgeList { num_vertices: n, src, dst, weights })
}

/// Writes the banner, comments, size line and entries.
pub(crate) fn write_stream<W: Write>(
    w: &mut W,
    el: &EdgeList,
    options: &WriteOptions,
    path: &Path,
    progress: &dyn Fn(u64),
) -> Result<(), FormatError> {
    let weighted = el.weights.is_some();
    let symmetric = options.mtx_symmetry == MtxSymmetry::Symmetric;
    let mut head = format!(
        "%%MatrixMarket matrix coordinate {} {}\n",
        if weighted { "real" } else { "pattern" },
        if symmetric { "symmetric" } else { "general" }
    );
    head.push_str("% skein graph: vertices are rows/columns (1-based), each entry is an edge\n");
    for c in &options.comments {
        head.push_str("% ");
        head.push_str(&text::comment_line(c));
        head.push('\n');
    }
    head.push_str(&format!("{} {} {}\n", el.num_vertices, el.num_vertices, el.len()));
    super::write_all(w, head.as_bytes(), path)?;

    let (src, dst) = (&el.src, &el.dst);
    let weights = el.weights.as_deref();
    text::write_lines_parallel(w, 0..el.len(), path, progress, |k, buf| {
        let (mut i, mut j) = (src[k], dst[k]);
        if symmetric && i < j {
            std::mem::swap(&mut i, &mut j);
        }
        text::push_u64(buf, i + 1);
        buf.push(b' ');
        text::push_u64(buf, j + 1);
        if let Some(ws) = weights {
            buf.push(b' ');
            text::push_f32(buf, ws[k]);
        }
        buf.push(b'\n');
    })
}
