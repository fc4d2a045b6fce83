//! Shared pieces of the text formats: a line reader with line numbers and a length
//! limit, token parsing, error construction and fast number formatting.

use std::io::{self, BufRead, Write};
use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;

use super::FormatError;

/// Longest line accepted (a guard against reading a huge binary file as text).
pub(crate) const MAX_LINE: usize = 1 << 20;

/// Reads lines (without `\n` or `\r\n`), counting them from 1.
pub(crate) struct Lines<'p, R> {
    reader: R,
    buf: Vec<u8>,
    line: u64,
    path: &'p Path,
}

impl<'p, R: BufRead> Lines<'p, R> {
    pub(crate) fn new(reader: R, path: &'p Path) -> Self {
        Lines { reader, buf: Vec::with_capacity(256), line: 0, path }
    }

    /// Number of the line last returned (0 before the first).
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// The underlying reader, positioned after the last line returned.
    pub(crate) fn into_inner(self) -> R {
        self.reader
    }

    /// The next line and its number, or `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Result<Option<(u64, &[u8])>, FormatError> {
        self.buf.clear();
        let mut any = false;
        loop {
            let avail = match self.reader.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FormatError::io(self.path, "read", e)),
            };
            if avail.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            if let Some(i) = avail.iter().position(|&b| b == b'\n') {
                self.buf.extend_from_slice(&avail[..i]);
                self.reader.consume(i + 1);
                break;
            }
            let n = avail.len();
            self.buf.extend_from_slice(avail);
            self.reader.consume(n);
            if self.buf.len() > MAX_LINE {
                return Err(FormatError::Syntax {
                    path: self.path.to_owned(),
                    line: self.line + 1,
                    expected: format!("a line of at most {MAX_LINE} bytes"),
                    found: "a longer line (is this a text file?)".to_owned(),
                });
            }
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some((self.line, &self.buf)))
    }
}

pub(crate) fn syntax(
    path: &Path,
    line: u64,
    expected: impl Into<String>,
    found: impl Into<String>,
) -> FormatError {
    FormatError::Syntax {
        path: path.to_owned(),
        line,
        expected: expected.into(),
        found: found.into(),
    }
}

/// Whitespace between tokens: space, tab (and stray `\r`, form feed, vertical tab).
#[inline]
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

/// Splits a line into whitespace-separated tokens.
pub(crate) struct Tokens<'a> {
    rest: &'a [u8],
}

impl<'a> Tokens<'a> {
    pub(crate) fn new(line: &'a [u8]) -> Self {
        Tokens { rest: line }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| !is_space(b))?;
        let rest = &self.rest[start..];
        let end = rest.iter().position(|&b| is_space(b)).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }
}

/// A token quoted for an error message (lossy UTF-8, shortened to 40 characters).
pub(crate) fn quote(token: &[u8]) -> String {
    let s = String::from_utf8_lossy(token);
    let mut out = String::from("`");
    let mut chars = s.chars();
    out.extend(chars.by_ref().take(40));
    if chars.next().is_some() {
        out.push('…');
    }
    out.push('`');
    out
}

/// Describes an optional token for an error message.
pub(crate) fn found(token: Option<&[u8]>) -> String {
    token.map_or_else(|| "end of line".to_owned(), quote)
}

/// Parses a decimal `u64` (digits only).
#[inline]
pub(crate) fn parse_u64(t: &[u8]) -> Option<u64> {
    if t.is_empty() || t.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in t {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Parses a decimal floating-point number (Rust syntax: `1`, `0.5`, `1e-3`, `inf`, `NaN`).
#[inline]
pub(crate) fn parse_f32(t: &[u8]) -> Option<f32> {
    std::str::from_utf8(t).ok()?.parse().ok()
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Appends `w` with the shortest decimal that reads back as the same binary32.
#[inline]
pub(crate) fn push_f32(out: &mut Vec<u8>, w: f32) {
    // Writing into a Vec cannot fail.
    let _ = write!(out, "{w}");
}

/// Writes the edges of `range` as text lines in parallel batches: `line(k, buf)`
/// appends edge `k`'s line to `buf`. Lines come out in edge order.
pub(crate) fn write_lines_parallel<W, F>(
    w: &mut W,
    range: Range<usize>,
    path: &Path,
    progress: &dyn Fn(u64),
    line: F,
) -> Result<(), FormatError>
where
    W: Write,
    F: Fn(usize, &mut Vec<u8>) + Sync,
{
    const BATCH: usize = 1 << 20;
    const PIECE: usize = 1 << 14;
    let mut start = range.start;
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    while start < range.end {
        let end = range.end.min(start + BATCH);
        let n_pieces = (end - start).div_ceil(PIECE);
        pieces.resize_with(n_pieces, Vec::new);
        pieces.par_iter_mut().enumerate().for_each(|(i, buf)| {
            buf.clear();
            let a = start + i * PIECE;
            let b = end.min(a + PIECE);
            for k in a..b {
                line(k, buf);
            }
        });
        for buf in &pieces[..n_pieces] {
            super::write_all(w, buf, path)?;
        }
        progress((end - range.start) as u64);
        start = end;
    }
    Ok(())
}

/// Cleans a user comment for a one-line text comment.
pub(crate) fn comment_line(c: &str) -> String {
    c.replace(['\n', '\r'], " ")
}

/// Hands out edges in chunks: `(src, dst, weights)` (weights `None` for an unweighted
/// file).
pub(crate) type ChunkFn<'a> =
    dyn FnMut(&[u64], &[u64], Option<&[f32]>) -> Result<(), FormatError> + 'a;

/// Where a text reader puts the edges it parses: kept whole in its arrays (the
/// one-process readers, [`EdgeSink::whole`]), or handed out in chunks of about `chunk`
/// edges as they come ([`EdgeSink::chunked`], `crate::distributed::files`), the reader
/// then holding at most a chunk (plus one parallel batch for `.el`). The readers make the
/// same checks either way; only their memory checks of the whole graph are left out when
/// chunked (the whole graph is never held).
pub(crate) struct EdgeSink<'a> {
    chunk: usize,
    handed: u64,
    out: Option<&'a mut ChunkFn<'a>>,
}

impl<'a> EdgeSink<'a> {
    /// Keep every edge.
    pub(crate) fn whole() -> EdgeSink<'static> {
        EdgeSink { chunk: usize::MAX, handed: 0, out: None }
    }

    /// Hand out chunks of about `chunk` edges to `out`.
    pub(crate) fn chunked(chunk: usize, out: &'a mut ChunkFn<'a>) -> EdgeSink<'a> {
        EdgeSink { chunk: chunk.max(1), handed: 0, out: Some(out) }
    }

    /// Whether edges are handed out (the whole graph is never held).
    pub(crate) fn chunked_out(&self) -> bool {
        self.out.is_some()
    }

    /// At most this many edges reserved up front.
    pub(crate) fn reserve_cap(&self, want: usize) -> usize {
        want.min(self.chunk)
    }

    /// Edges read so far: handed out, and the `held` ones still in the reader's arrays.
    pub(crate) fn count(&self, held: usize) -> u64 {
        self.handed + held as u64
    }

    /// Hands out the edges held (and clears the arrays) when there are a chunk of them,
    /// or when `last`; nothing when keeping every edge.
    pub(crate) fn offer(
        &mut self,
        src: &mut Vec<u64>,
        dst: &mut Vec<u64>,
        wts: &mut Vec<f32>,
        weighted: bool,
        last: bool,
    ) -> Result<(), FormatError> {
        let Some(out) = self.out.as_mut() else { return Ok(()) };
        if src.is_empty() || (src.len() < self.chunk && !last) {
            return Ok(());
        }
        out(src, dst, weighted.then_some(&wts[..]))?;
        self.handed += src.len() as u64;
        src.clear();
        dst.clear();
        wts.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_parsing() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"+1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
    }

    #[test]
    fn u64_formatting() {
        for v in [0, 1, 9, 10, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }

    #[test]
    fn tokens() {
        let t: Vec<&[u8]> = Tokens::new(b"  1\t 22  3 ").collect();
        assert_eq!(t, vec![&b"1"[..], b"22", b"3"]);
        assert_eq!(Tokens::new(b"   ").next(), None);
    }

    #[test]
    fn lines_strip_cr_and_count() {
        let data = b"a\r\nb\n\nc";
        let mut l = Lines::new(&data[..], Path::new("x"));
        let mut got = Vec::new();
        while let Some((n, line)) = l.next_line().unwrap() {
            got.push((n, line.to_vec()));
        }
        assert_eq!(
            got,
            vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"".to_vec()), (4, b"c".to_vec())]
        );
    }
}
