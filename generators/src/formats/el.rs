//! Text edge lists: `.el` (`u v`) and `.wel` (`u v w`). The format is described in the
//! [module docs](super).

use std::io::{BufRead, BufReader, Read, Write};

use rayon::prelude::*;
use std::path::Path;

use super::text::{self, found, quote, syntax, EdgeSink, Lines, Tokens};
use super::{weight_ok, FormatError, Location, WriteOptions};
use crate::graph::EdgeList;
use crate::memory;

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
    read_text_blocks(reader, path, weighted, size_hint, BLOCK, &mut EdgeSink::whole())
}

/// [`read_text_sized`], its edges going to `sink` (kept whole, or handed out in chunks:
/// then the returned list holds none, only the vertex count and the weights' presence).
pub(crate) fn read_text_into<R: BufRead>(
    reader: R,
    path: &Path,
    weighted: bool,
    size_hint: Option<u64>,
    sink: &mut EdgeSink<'_>,
) -> Result<EdgeList, FormatError> {
    read_text_blocks(reader, path, weighted, size_hint, BLOCK, sink)
}

/// Bytes of text parsed by one rayon task.
const BLOCK: usize = 2 << 20;

/// What one line holds once the header is over.
struct EdgeLine {
    u: u64,
    v: u64,
    w: f32,
}

/// Parses the lines after the header: edges, blank lines and comments.
struct LineParser<'p> {
    path: &'p Path,
    weighted: bool,
    /// The `# vertices` count, if given.
    num_vertices: Option<u64>,
}

impl LineParser<'_> {
    fn columns(&self) -> &'static str {
        if self.weighted {
            "`u v w`"
        } else {
            "`u v`"
        }
    }

    /// The edge on line `ln`, or `None` for a blank or comment line.
    fn parse(&self, line: &[u8], ln: u64) -> Result<Option<EdgeLine>, FormatError> {
        let path = self.path;
        let mut toks = Tokens::new(line);
        let Some(first) = toks.next() else { return Ok(None) };
        if first[0] == b'#' {
            if let Some((key, _)) = directive(line, ln, path)? {
                return Err(syntax(
                    path,
                    ln,
                    format!(
                        "an edge line {} (`# {key}` belongs before the first edge)",
                        self.columns()
                    ),
                    quote(line),
                ));
            }
            return Ok(None);
        }
        let parse_id = |tok: Option<&[u8]>, which: &str| -> Result<u64, FormatError> {
            match tok.and_then(text::parse_u64) {
                Some(v) if v < u64::MAX => Ok(v),
                _ => Err(syntax(
                    path,
                    ln,
                    format!("{which} vertex id of an edge {} (an integer from 0)", self.columns()),
                    found(tok),
                )),
            }
        };
        let u = parse_id(Some(first), "the first")?;
        let v = parse_id(toks.next(), "the second")?;
        if let Some(n) = self.num_vertices {
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
        let mut w = 1.0;
        if self.weighted {
            let tok = toks.next();
            w = tok.and_then(text::parse_f32).ok_or_else(|| {
                syntax(path, ln, "a weight after the two vertex ids (a decimal number)", found(tok))
            })?;
            if !weight_ok(w) {
                return Err(FormatError::BadWeight {
                    path: path.to_owned(),
                    at: Location::Line(ln),
                    weight: w,
                });
            }
        }
        if let Some(extra) = toks.next() {
            let what = if self.weighted {
                "end of line after `u v w`"
            } else {
                "end of line after `u v` (weighted edges belong in a .wel file)"
            };
            return Err(syntax(path, ln, what, quote(extra)));
        }
        Ok(Some(EdgeLine { u, v, w }))
    }
}

/// The edges of one block of lines.
#[derive(Default)]
struct Parsed {
    src: Vec<u64>,
    dst: Vec<u64>,
    wts: Vec<f32>,
    max_id: Option<u64>,
}

impl Parsed {
    fn push(&mut self, e: EdgeLine, weighted: bool) {
        self.max_id = Some(self.max_id.map_or(e.u.max(e.v), |m| m.max(e.u).max(e.v)));
        self.src.push(e.u);
        self.dst.push(e.v);
        if weighted {
            self.wts.push(e.w);
        }
    }

    fn append(&mut self, mut other: Parsed) {
        self.src.append(&mut other.src);
        self.dst.append(&mut other.dst);
        self.wts.append(&mut other.wts);
        self.max_id = match (self.max_id, other.max_id) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Parses a block of whole lines, the first being line `first_line`; returns the edges
/// and the number of lines.
fn parse_block(
    p: &LineParser<'_>,
    block: &[u8],
    first_line: u64,
) -> Result<(Parsed, u64), FormatError> {
    let mut out = Parsed::default();
    let mut ln = first_line;
    let body = block.strip_suffix(b"\n").unwrap_or(block);
    if block.is_empty() {
        return Ok((out, 0));
    }
    for line in body.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(e) = p.parse(line, ln)? {
            out.push(e, p.weighted);
        }
        ln += 1;
    }
    Ok((out, ln - first_line))
}

/// How [`read_block`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockRead {
    /// A block of whole lines (the last may lack its `\n` at the end of the input).
    Lines,
    /// Nothing left.
    End,
    /// A line longer than [`text::MAX_LINE`] bytes: the buffer holds its start.
    Overlong,
}

/// Reads about `target` bytes of whole lines into `buf` (cleared first).
fn read_block<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    target: usize,
    path: &Path,
) -> Result<BlockRead, FormatError> {
    let rd = |e| FormatError::io(path, "read", e);
    buf.clear();
    r.by_ref().take(target as u64).read_to_end(buf).map_err(rd)?;
    if buf.is_empty() {
        return Ok(BlockRead::End);
    }
    if buf.last() != Some(&b'\n') {
        let before = buf.len();
        r.by_ref().take(text::MAX_LINE as u64).read_until(b'\n', buf).map_err(rd)?;
        if buf.last() != Some(&b'\n') && buf.len() - before == text::MAX_LINE {
            return Ok(BlockRead::Overlong);
        }
    }
    Ok(BlockRead::Lines)
}

/// [`read_text_sized`] with `block` bytes of text per parallel task: the header
/// (leading comments) is read line by line, the rest in parallel blocks.
fn read_text_blocks<R: BufRead>(
    reader: R,
    path: &Path,
    weighted: bool,
    size_hint: Option<u64>,
    block: usize,
    sink: &mut EdgeSink<'_>,
) -> Result<EdgeList, FormatError> {
    let mut lines = Lines::new(reader, path);
    let mut dirs = Directives::default();
    let mut all = Parsed::default();

    // The header: comments and directives up to the first edge line.
    let mut first_edge = None;
    while let Some((ln, line)) = lines.next_line()? {
        let mut toks = Tokens::new(line);
        let Some(first) = toks.next() else { continue };
        if first[0] != b'#' {
            first_edge = Some((ln, line.to_vec()));
            break;
        }
        let Some((key, value)) = directive(line, ln, path)? else { continue };
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
    }
    if sink.chunked_out() {
        // The whole graph is never held: the memory checks are the caller's.
    } else if let Some((n, vline)) = dirs.vertices {
        // Before any edge is stored: the declared counts (edges unknown count as none).
        let m = dirs.edges.map(|d| d.0);
        super::check_declared_graph(path, vline, n, m, weighted)?;
    } else if let Some((m, eline)) = dirs.edges {
        memory::check_fits(memory::edge_list_bytes(m, weighted), || {
            format!("an edge list of {}", memory::count(m, "edge", "edges"))
        })
        .map_err(|error| FormatError::Memory {
            path: path.to_owned(),
            line: Some(eline),
            error,
        })?;
    }
    if let Some((m, _)) = dirs.edges {
        let by_size = size_hint.map_or(MAX_TRUSTED_RESERVE, |s| s / 4);
        let reserve = sink.reserve_cap(m.min(by_size.max(MAX_TRUSTED_RESERVE)) as usize);
        all.src.reserve_exact(reserve);
        all.dst.reserve_exact(reserve);
        if weighted {
            all.wts.reserve_exact(reserve);
        }
    }
    let parser = LineParser { path, weighted, num_vertices: dirs.vertices.map(|d| d.0) };

    // The body, in batches of blocks parsed in parallel and appended in order.
    let mut next_line = lines.line() + 1;
    if let Some((ln, line)) = first_edge {
        if let Some(e) = parser.parse(&line, ln)? {
            all.push(e, weighted);
        }
        let mut reader = lines.into_inner();
        let per_batch = 2 * rayon::current_num_threads().max(1);
        let mut bufs: Vec<Vec<u8>> = Vec::new();
        let mut end = BlockRead::Lines;
        while end == BlockRead::Lines {
            let mut filled = 0;
            while filled < per_batch {
                if bufs.len() <= filled {
                    bufs.push(Vec::with_capacity(block + 256));
                }
                end = read_block(&mut reader, &mut bufs[filled], block, path)?;
                if end != BlockRead::Lines {
                    break;
                }
                filled += 1;
            }
            // A block's first line number is known only once the blocks before it are
            // counted: blocks are parsed from "line 1" and errors shifted into place.
            let results: Vec<Result<(Parsed, u64), FormatError>> =
                bufs[..filled].par_iter().map(|b| parse_block(&parser, b, 1)).collect();
            for r in results {
                match r {
                    Ok((parsed, count)) => {
                        all.append(parsed);
                        next_line += count;
                        sink.offer(&mut all.src, &mut all.dst, &mut all.wts, weighted, false)?;
                    }
                    Err(e) => return Err(shift_line(e, next_line - 1)),
                }
            }
            if end == BlockRead::Overlong {
                let line = next_line + bufs[filled].iter().filter(|&&b| b == b'\n').count() as u64;
                return Err(syntax(
                    path,
                    line,
                    format!("a line of at most {} bytes", text::MAX_LINE),
                    "a longer line (is this a text file?)",
                ));
            }
        }
    }

    let n_edges = sink.count(all.src.len());
    sink.offer(&mut all.src, &mut all.dst, &mut all.wts, weighted, true)?;
    if let Some((m, dline)) = dirs.edges {
        if m != n_edges {
            return Err(syntax(
                path,
                next_line,
                format!("{m} edges (as `# edges` on line {dline} says)"),
                format!("end of file after {n_edges} edges (is the file truncated?)"),
            ));
        }
    }
    let num_vertices = match dirs.vertices {
        Some((n, _)) => n,
        None => all.max_id.map_or(0, |m| m + 1),
    };
    // The edges are in memory; the CSR built from them must fit beside them. (Ids are
    // below u64::MAX, so `max_id + 1` cannot overflow.) Not when they were handed out.
    let whole = !sink.chunked_out();
    let need = if whole { crate::Csr::build_bytes(num_vertices, n_edges) } else { 0 };
    memory::check_fits(need, || {
        let largest = match (dirs.vertices, all.max_id) {
            (None, Some(id)) => format!(", largest vertex id {id}"),
            _ => String::new(),
        };
        format!(
            "building the CSR of {} (edge list aside{largest})",
            memory::describe_graph(num_vertices, Some(n_edges))
        )
    })
    .map_err(|error| FormatError::Memory { path: path.to_owned(), line: None, error })?;
    let weights = weighted.then(|| {
        all.wts.shrink_to_fit();
        all.wts
    });
    all.src.shrink_to_fit();
    all.dst.shrink_to_fit();
    Ok(EdgeList { num_vertices, src: all.src, dst: all.dst, weights })
}

/// Adds `base` to the line number of an error found in a block parsed from line 1.
fn shift_line(e: FormatError, base: u64) -> FormatError {
    match e {
        FormatError::Syntax { path, line, expected, found } => {
            FormatError::Syntax { path, line: line + base, expected, found }
        }
        FormatError::VertexOutOfRange { path, at: Location::Line(l), vertex, num_vertices } => {
            FormatError::VertexOutOfRange {
                path,
                at: Location::Line(l + base),
                vertex,
                num_vertices,
            }
        }
        FormatError::BadWeight { path, at: Location::Line(l), weight } => {
            FormatError::BadWeight { path, at: Location::Line(l + base), weight }
        }
        other => other,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `t` read whole, in blocks of `block` bytes, as the file `name`.
    fn in_blocks(
        t: &str,
        name: &str,
        weighted: bool,
        block: usize,
    ) -> Result<EdgeList, FormatError> {
        read_text_blocks(
            t.as_bytes(),
            Path::new(name),
            weighted,
            None,
            block,
            &mut EdgeSink::whole(),
        )
    }

    fn text_of(lines: usize) -> String {
        let mut t = String::from("# vertices 1000\n");
        for i in 0..lines {
            match i % 7 {
                3 => t.push('\n'),
                5 => t.push_str("# a comment\r\n"),
                _ => t.push_str(&format!("{} {} {}.5\n", i % 1000, (i * 7) % 1000, i % 10)),
            }
        }
        t
    }

    #[test]
    fn block_boundaries_do_not_matter() {
        let t = text_of(5000);
        let whole = in_blocks(&t, "b.wel", true, 1 << 30).unwrap();
        assert_eq!(whole.len(), (0..5000).filter(|i| i % 7 != 3 && i % 7 != 5).count());
        for block in [1, 7, 64, 1000] {
            let b = in_blocks(&t, "b.wel", true, block).unwrap();
            assert_eq!(b, whole, "block {block}");
        }
    }

    #[test]
    fn errors_in_late_blocks_have_absolute_lines() {
        let mut t = text_of(3000);
        t.push_str("1 2 -3\n");
        let bad_line = t.lines().count() as u64;
        for block in [16, 100, 1 << 30] {
            let e = in_blocks(&t, "b.wel", true, block).unwrap_err();
            assert!(
                matches!(e, FormatError::BadWeight { at: Location::Line(l), .. } if l == bad_line),
                "block {block}: {e:?}"
            );
        }
        // The first error in file order wins, whichever block finishes first.
        let mut t = text_of(3000);
        t.insert_str(t.find("\n5 35").unwrap() + 1, "5 x\n");
        let first_bad = t.lines().position(|l| l == "5 x").unwrap() as u64 + 1;
        t.push_str("1 2 -3\n");
        for block in [16, 100, 1 << 30] {
            let e = in_blocks(&t, "b.wel", true, block).unwrap_err();
            assert!(
                matches!(e, FormatError::Syntax { line, .. } if line == first_bad),
                "block {block}: {e:?}"
            );
        }
    }

    #[test]
    fn overlong_line_after_the_header() {
        let mut t = String::from("0 1\n1 2\n");
        t.push_str(&"9".repeat(text::MAX_LINE + 10));
        for block in [4, 1 << 30] {
            let e = in_blocks(&t, "o.el", false, block).unwrap_err();
            assert!(matches!(e, FormatError::Syntax { line: 3, .. }), "{e:?}");
        }
    }
}
