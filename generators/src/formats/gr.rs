//! DIMACS shortest-path files (`.gr`), the format of the 9th DIMACS Implementation
//! Challenge. The accepted subset is described in the [module docs](super).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use super::text::{self, found, quote, syntax, EdgeSink, Lines, Tokens};
use super::{FormatError, Location, WriteOptions};
use crate::graph::EdgeList;
use crate::memory;

/// Most arcs reserved up front on the word of the problem line alone.
const MAX_TRUSTED_RESERVE: u64 = 1 << 16;

/// `2^64` as a binary32 (exact): the first weight too large for a `u64`.
const TWO_POW_64: f32 = 18_446_744_073_709_551_616.0;

/// Reads a DIMACS shortest-path file from `reader`; `name` is the file name errors
/// report.
pub fn read_gr(reader: impl Read, name: &Path) -> Result<EdgeList, FormatError> {
    read_stream(BufReader::new(reader), name, None, &mut EdgeSink::whole())
}

/// Writes `el` as a DIMACS shortest-path file: one arc `a u v w` per edge (ids from
/// 1), weight 1 on every edge of an unweighted graph. DIMACS weights are integers: a
/// weighted graph with a weight that is not a whole number below 2^64 is refused
/// ([`FormatError::Unwritable`]).
pub fn write_gr(
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

/// What an arc line's weight token holds, as a binary32 that equals it exactly.
fn parse_weight(tok: Option<&[u8]>, ln: u64, path: &Path) -> Result<f32, FormatError> {
    let Some(t) = tok else {
        return Err(syntax(
            path,
            ln,
            "a weight after the two vertices of an arc `a u v w`",
            "end of line",
        ));
    };
    let (negative, digits) = match t.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let Some(value) = text::parse_u64(digits) else {
        return Err(syntax(
            path,
            ln,
            "an integer weight (DIMACS weights are whole numbers; a .wel file holds \
             fractional weights)",
            quote(t),
        ));
    };
    let w = value as f32;
    if negative && value != 0 {
        return Err(FormatError::BadWeight {
            path: path.to_owned(),
            at: Location::Line(ln),
            weight: -w,
        });
    }
    // Rounding to binary32 would change shortest paths silently: refuse it.
    if w >= TWO_POW_64 || w as u64 != value {
        return Err(syntax(
            path,
            ln,
            "a weight that an f32 holds exactly (every integer up to 2^24 = 16777216; \
             above that only multiples of the f32 spacing)",
            quote(t),
        ));
    }
    Ok(w)
}

/// Reads a DIMACS file; `size_hint` (bytes) bounds what the problem line may reserve.
///
/// Its edges go to `sink` (kept whole, or handed out in chunks: then the returned list
/// holds none, only the vertex count).
pub(crate) fn read_stream<R: BufRead>(
    reader: R,
    path: &Path,
    size_hint: Option<u64>,
    sink: &mut EdgeSink<'_>,
) -> Result<EdgeList, FormatError> {
    const ARC: &str = "an arc `a u v w`";
    let mut lines = Lines::new(reader, path);
    // (vertices, arcs, line) of the problem line.
    let mut problem: Option<(u64, u64, u64)> = None;
    let mut src: Vec<u64> = Vec::new();
    let mut dst: Vec<u64> = Vec::new();
    let mut wts: Vec<f32> = Vec::new();

    while let Some((ln, line)) = lines.next_line()? {
        let mut t = Tokens::new(line);
        let Some(first) = t.next() else { continue };
        match first {
            b"p" => {
                if let Some((_, _, pln)) = problem {
                    return Err(syntax(
                        path,
                        ln,
                        format!("a single problem line (the first is on line {pln})"),
                        "a second `p` line",
                    ));
                }
                const SHAPE: &str = "the problem line `p sp VERTICES ARCS`";
                match t.next() {
                    Some(b"sp") => {}
                    Some(kind) if kind.iter().all(u8::is_ascii_alphabetic) => {
                        return Err(FormatError::Unsupported {
                            path: path.to_owned(),
                            line: Some(ln),
                            what: format!(
                                "the DIMACS problem {} (only `sp`, shortest paths, describes \
                                 a weighted graph)",
                                quote(kind)
                            ),
                        })
                    }
                    other => return Err(syntax(path, ln, SHAPE, found(other))),
                }
                let num = |tok: Option<&[u8]>| {
                    tok.and_then(text::parse_u64).ok_or_else(|| {
                        syntax(path, ln, format!("{SHAPE} (two integers)"), found(tok))
                    })
                };
                let n = num(t.next())?;
                let m = num(t.next())?;
                if let Some(extra) = t.next() {
                    return Err(syntax(path, ln, format!("end of {SHAPE}"), quote(extra)));
                }
                if !sink.chunked_out() {
                    super::check_declared_graph(path, ln, n, Some(m), true)?;
                }
                let by_size = size_hint.map_or(MAX_TRUSTED_RESERVE, |s| s / 8);
                let reserve = sink.reserve_cap(m.min(by_size.max(MAX_TRUSTED_RESERVE)) as usize);
                src.reserve_exact(reserve);
                dst.reserve_exact(reserve);
                wts.reserve_exact(reserve);
                problem = Some((n, m, ln));
            }
            b"a" => {
                let Some((n, m, pln)) = problem else {
                    return Err(syntax(
                        path,
                        ln,
                        "the problem line `p sp VERTICES ARCS` before the first arc",
                        quote(line),
                    ));
                };
                if sink.count(src.len()) == m {
                    return Err(syntax(
                        path,
                        ln,
                        format!(
                            "end of file (the problem line, line {pln}, announces {})",
                            memory::count(m, "arc", "arcs")
                        ),
                        format!("another arc {}", quote(line)),
                    ));
                }
                let id = |tok: Option<&[u8]>, which: &str| -> Result<u64, FormatError> {
                    match tok.and_then(text::parse_u64) {
                        Some(i) if (1..=n).contains(&i) => Ok(i - 1),
                        Some(_) => Err(syntax(
                            path,
                            ln,
                            format!(
                                "the {which} vertex of {ARC} in 1..={n} (the problem line, \
                                 line {pln}, declares {})",
                                memory::count(n, "vertex", "vertices")
                            ),
                            found(tok),
                        )),
                        None => Err(syntax(
                            path,
                            ln,
                            format!("the {which} vertex of {ARC} (an integer in 1..={n})"),
                            found(tok),
                        )),
                    }
                };
                let u = id(t.next(), "tail")?;
                let v = id(t.next(), "head")?;
                let w = parse_weight(t.next(), ln, path)?;
                if let Some(extra) = t.next() {
                    return Err(syntax(path, ln, format!("end of {ARC}"), quote(extra)));
                }
                src.push(u);
                dst.push(v);
                wts.push(w);
                sink.offer(&mut src, &mut dst, &mut wts, true, false)?;
            }
            _ if first[0] == b'c' => {}
            _ => {
                return Err(syntax(
                    path,
                    ln,
                    "a comment `c ...`, the problem line `p sp VERTICES ARCS` or an arc \
                     `a u v w`",
                    quote(line),
                ))
            }
        }
    }
    let Some((n, m, pln)) = problem else {
        return Err(syntax(
            path,
            lines.line() + 1,
            "the problem line `p sp VERTICES ARCS`",
            "end of file",
        ));
    };
    if sink.count(src.len()) < m {
        return Err(syntax(
            path,
            lines.line() + 1,
            format!("{} (as the problem line, line {pln}, says)", memory::count(m, "arc", "arcs")),
            format!(
                "end of file after {} (is the file truncated?)",
                memory::count(sink.count(src.len()), "arc", "arcs")
            ),
        ));
    }
    sink.offer(&mut src, &mut dst, &mut wts, true, true)?;
    Ok(EdgeList { num_vertices: n, src, dst, weights: Some(wts) })
}

/// Writes the comments, the problem line and the arcs.
pub(crate) fn write_stream<W: Write>(
    w: &mut W,
    el: &EdgeList,
    options: &WriteOptions,
    path: &Path,
    progress: &dyn Fn(u64),
) -> Result<(), FormatError> {
    if let Some(ws) = &el.weights {
        if let Some(k) = super::first_bad(ws, |&x| x.fract() != 0.0 || x >= TWO_POW_64) {
            return Err(FormatError::Unwritable {
                path: path.to_owned(),
                reason: format!(
                    "edge {k} has weight {}, but DIMACS .gr weights are whole numbers below \
                     2^64 (a .wel or .skg file keeps any weight)",
                    ws[k]
                ),
            });
        }
    }
    let mut head = String::from(
        "c skein graph: `a u v w` is one undirected edge {u, v} of weight w, vertices from 1\n",
    );
    for c in &options.comments {
        head.push_str("c ");
        head.push_str(&text::comment_line(c));
        head.push('\n');
    }
    head.push_str(&format!("p sp {} {}\n", el.num_vertices, el.len()));
    super::write_all(w, head.as_bytes(), path)?;

    let (src, dst) = (&el.src, &el.dst);
    let weights = el.weights.as_deref();
    text::write_lines_parallel(w, 0..el.len(), path, progress, |k, buf| {
        buf.extend_from_slice(b"a ");
        text::push_u64(buf, src[k] + 1);
        buf.push(b' ');
        text::push_u64(buf, dst[k] + 1);
        buf.push(b' ');
        // Checked above: a whole number in 0..2^64 (-0.0 is written as 0).
        text::push_u64(buf, weights.map_or(1, |ws| ws[k] as u64));
        buf.push(b'\n');
    })
}
