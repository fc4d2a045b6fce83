//! Text edge lists: `.el` (`u v`) and `.wel` (`u v w`). The format is described in the
//! [module docs](super).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use super::text::{self, found, quote, syntax, Lines, Tokens};
use super::{weight_ok, FormatError, Location, WriteOptions};
use crate::graph::EdgeList;

/// Reads an unweighted edge list (`u v` lines) from `reader`; `name` is the file name
/// errors report.
pub fn read_el(reader: impl Read, name: &Path) -> Result<EdgeList, FormatError> {
    read_text(BufReader::new(reader), name, false)
}

/// Reads a weighted edge list (`u v w` lines) from `reader`; `name` is the file name
/// errors report.
pub fn read_wel(reader: impl Read, name: &Path) -> Result<EdgeList, FormatError> {
    read_text(BufReader::new(reader), name, true)
}

/// Writes `el` as an unweighted edge list (weights, if any, are dropped).
pub fn write_el(
    writer: impl Write,
    el: &EdgeList,
    options: &WriteOptions,
    name: &Path,
) -> Result<(), FormatError> {
    super::check_edge_list(el, name)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, writer);
    write_text(&mut w, el, false, &options.comments, name, &|_| {})?;
    w.flush().map_err(|e| FormatError::io(name, "write", e))
}

/// Writes `el` as a weighted edge list (weight 1 on every edge of an unweighted graph).
pub fn write_wel(
    writer: impl Write,
    el: &EdgeList,
    options: &WriteOptions,
    name: &Path,
) -> Result<(), FormatError> {
    super::check_edge_list(el, name)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, writer);
    write_text(&mut w, el, true, &options.comments, name, &|_| {})?;
    w.flush().map_err(|e| FormatError::io(name, "write", e))
}

/// Most edges reserved up front on the word of a `# edges` directive alone.
const MAX_TRUSTED_RESERVE: u64 = 1 << 16;

/// The header directives of a text edge list.
#[derive(Default)]
struct Directives {
    /// `(value, line)` of `# vertices`.
    vertices: Option<(u64, u64)>,
    /// `(value, line)` of `# edges`.
    edges: Option<(u64, u64)>,
}

/// Interprets a comment line (`line` starts with `#` after blanks). Returns the
/// directive's name and value when it is one.
fn directive(
    line: &[u8],
    ln: u64,
    path: &Path,
) -> Result<Option<(&'static str, u64)>, FormatError> {
    let hash = line.iter().position(|&b| b == b'#').unwrap_or(0);
    let mut words = Tokens::new(&line[hash + 1..]);
    let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
        return Ok(None);
    };
    let key = match key {
        b"vertices" => "vertices",
        b"edges" => "edges",
        _ => return Ok(None),
    };
    match text::parse_u64(value) {
        Some(v) => Ok(Some((key, v))),
        None => Err(syntax(
            path,
            ln,
            format!("a count after `# {key}` (a non-negative integer)"),
            quote(value),
        )),
    }
}

/// Reads a text edge list; `weighted` selects `.wel`.
pub(crate) fn read_text<R: BufRead>(
    reader: R,
    path: &Path,
    weighted: bool,
) -> Result<EdgeList, FormatError> {
    read_text_sized(reader, path, weighted, None)
}

/// [`read_text`] with the input's size in bytes, when known, to size the arrays.
pub(crate) fn read_text_sized<R: BufRead>(
    reader: R,
    path: &Path,
    weighted: bool,
    size_hint: Option<u64>,
) -> Result<EdgeList, FormatError> {
    let columns = if weighted { "`u v w`" } else { "`u v`" };
    let mut lines = Lines::new(reader, path);
    let mut dirs = Directives::default();
    let mut src: Vec<u64> = Vec::new();
    let mut dst: Vec<u64> = Vec::new();
    let mut wts: Vec<f32> = Vec::new();
    let mut max_id: Option<u64> = None;
    let mut in_header = true;

    while let Some((ln, line)) = lines.next_line()? {
        let mut toks = Tokens::new(line);
        let Some(first) = toks.next() else { continue };
        if first[0] == b'#' {
            if let Some((key, value)) = directive(line, ln, path)? {
                if !in_header {
                    return Err(syntax(
                        path,
                        ln,
                        format!("an edge line {columns} (`# {key}` belongs before the first edge)"),
                        quote(line),
                    ));
                }
                let slot = if key == "vertices" { &mut dirs.vertices } else { &mut dirs.edges };
                if let Some((_, first_line)) = *slot {
                    return Err(syntax(
                        path,
                        ln,
                        format!("a single `# {key}` line (the first is on line {first_line})"),
                        format!("a second `# {key}`"),
                    ));
                }
                *slot = Some((value, ln));
                if key == "edges" {
                    let by_size = size_hint.map_or(MAX_TRUSTED_RESERVE, |s| s / 4);
                    let reserve = value.min(by_size.max(MAX_TRUSTED_RESERVE)) as usize;
                    src.reserve_exact(reserve);
                    dst.reserve_exact(reserve);
                    if weighted {
                        wts.reserve_exact(reserve);
                    }
                }
            }
            continue;
        }
        in_header = false;

        let parse_id = |tok: Option<&[u8]>, which: &str| -> Result<u64, FormatError> {
            match tok.and_then(text::parse_u64) {
                Some(v) if v < u64::MAX => Ok(v),
                _ => Err(syntax(
                    path,
                    ln,
                    format!("{which} vertex id of an edge {columns} (an integer from 0)"),
                    found(tok),
                )),
            }
        };
        let u = parse_id(Some(first), "the first")?;
        let v = parse_id(toks.next(), "the second")?;
        if let Some((n, _)) = dirs.vertices {
            for x in [u, v] {
                if x >= n {
                    return Err(FormatError::VertexOutOfRange {
                        path: path.to_owned(),
                        at: Location::Line(ln),
                        vertex: x,
                        num_vertices: n,
                    });
                }
            }
        }
        if weighted {
            let tok = toks.next();
            let w = tok.and_then(text::parse_f32).ok_or_else(|| {
                syntax(path, ln, "a weight after the two vertex ids (a decimal number)", found(tok))
            })?;
            if !weight_ok(w) {
                return Err(FormatError::BadWeight {
                    path: path.to_owned(),
                    at: Location::Line(ln),
                    weight: w,
                });
            }
            wts.push(w);
        }
        if let Some(extra) = toks.next() {
            let what = if weighted {
                "end of line after `u v w`"
            } else {
                "end of line after `u v` (weighted edges belong in a .wel file)"
            };
            return Err(syntax(path, ln, what, quote(extra)));
        }
        max_id = Some(max_id.map_or(u.max(v), |m: u64| m.max(u).max(v)));
        src.push(u);
        dst.push(v);
    }

    if let Some((m, dline)) = dirs.edges {
        if m != src.len() as u64 {
            return Err(syntax(
                path,
                lines.line() + 1,
                format!("{m} edges (as `# edges` on line {dline} says)"),
                format!("end of file after {} edges (is the file truncated?)", src.len()),
            ));
        }
    }
    let num_vertices = match dirs.vertices {
        Some((n, _)) => n,
        None => max_id.map_or(0, |m| m + 1),
    };
    src.shrink_to_fit();
    dst.shrink_to_fit();
    let weights = weighted.then(|| {
        wts.shrink_to_fit();
        wts
    });
    Ok(EdgeList { num_vertices, src, dst, weights })
}

/// Writes the header comments and every edge line.
pub(crate) fn write_text<W: Write>(
    w: &mut W,
    el: &EdgeList,
    weighted: bool,
    comments: &[String],
    path: &Path,
    progress: &dyn Fn(u64),
) -> Result<(), FormatError> {
    let mut head = String::new();
    if weighted {
        head.push_str("# skein weighted edge list: one `u v w` edge per line, vertex ids from 0\n");
    } else {
        head.push_str("# skein edge list: one `u v` edge per line, vertex ids from 0\n");
    }
    for c in comments {
        head.push_str("# ");
        head.push_str(&text::comment_line(c));
        head.push('\n');
    }
    head.push_str(&format!("# vertices {}\n# edges {}\n", el.num_vertices, el.len()));
    super::write_all(w, head.as_bytes(), path)?;

    let (src, dst) = (&el.src, &el.dst);
    let weights = el.weights.as_deref();
    text::write_lines_parallel(w, 0..el.len(), path, progress, |k, buf| {
        text::push_u64(buf, src[k]);
        buf.push(b' ');
        text::push_u64(buf, dst[k]);
        if weighted {
            buf.push(b' ');
            text::push_f32(buf, weights.map_or(1.0, |ws| ws[k]));
        }
        buf.push(b'\n');
    })
}
