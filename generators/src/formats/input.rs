//! Opening a graph input once: a regular file, a pipe (FIFO), a character device, or
//! standard input (`-`). The format is told from a prefix read from the same stream,
//! which is then handed to the reader ahead of the rest, so nothing is read twice and
//! nothing is lost (a pipe cannot be rewound or reopened). The rules are in the
//! [module docs](super).

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};

use super::text::Tokens;
use super::{binary, Format, FormatError};

/// The path that names standard input.
pub const STDIN_PATH: &str = "-";

/// How errors about standard input name it.
const STDIN_NAME: &str = "<stdin>";

/// Most bytes read ahead to tell a text format from its content.
const SNIFF_LIMIT: usize = 1 << 20;

/// Whether `path` names standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN_PATH
}

/// The name errors about `path` report: the path, or `<stdin>` for `-`.
pub(crate) fn display_name(path: &Path) -> PathBuf {
    if is_stdin(path) {
        PathBuf::from(STDIN_NAME)
    } else {
        path.to_owned()
    }
}

/// Where the bytes come from.
#[derive(Debug)]
pub(crate) enum Source {
    File(File),
    Stdin(io::StdinLock<'static>),
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File(f) => f.read(buf),
            Source::Stdin(s) => s.read(buf),
        }
    }
}

/// An opened input and the bytes already read from it.
#[derive(Debug)]
pub(crate) struct Input {
    /// The name errors report.
    pub(crate) name: PathBuf,
    /// The path as given (for the extension).
    path: PathBuf,
    source: Source,
    /// The length of a regular file (its header can then be checked against it);
    /// `None` for pipes, devices and standard input.
    pub(crate) len: Option<u64>,
    /// Bytes read ahead, handed to the reader first.
    prefix: Vec<u8>,
    /// The source has reported its end.
    eof: bool,
}

impl Input {
    /// Opens `path` (`-`: standard input).
    pub(crate) fn open(path: &Path) -> Result<Input, FormatError> {
        let name = display_name(path);
        let (source, len) = if is_stdin(path) {
            (Source::Stdin(io::stdin().lock()), None)
        } else {
            let file = File::open(path).map_err(|e| FormatError::io(&name, "open", e))?;
            let meta = file.metadata().map_err(|e| FormatError::io(&name, "read", e))?;
            let len = meta.is_file().then_some(meta.len());
            (Source::File(file), len)
        };
        Ok(Input { name, path: path.to_owned(), source, len, prefix: Vec::new(), eof: false })
    }

    /// Reads ahead until at least `want` bytes are buffered or the input ends.
    fn fill_to(&mut self, want: usize) -> Result<(), FormatError> {
        let mut chunk = [0u8; 8192];
        while self.prefix.len() < want && !self.eof {
            let room = (want - self.prefix.len()).min(chunk.len());
            match self.source.read(&mut chunk[..room]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.prefix.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FormatError::io(&self.name, "read", e)),
            }
        }
        Ok(())
    }

    /// The format of this input: the Skein magic wins; then the extension; then the
    /// content (a Matrix Market banner, a DIMACS line, and for an input that is not a
    /// regular file, a text edge list whose first edge line has two or three columns).
    pub(crate) fn detect(&mut self) -> Result<Format, FormatError> {
        self.fill_to(binary::MAGIC.len().max(MTX_BANNER.len()))?;
        if self.prefix.starts_with(&binary::MAGIC) {
            return Ok(Format::Binary);
        }
        if let Some(f) = Format::from_path(&self.path) {
            return Ok(f);
        }
        if self.prefix.len() >= MTX_BANNER.len()
            && self.prefix[..MTX_BANNER.len()].eq_ignore_ascii_case(MTX_BANNER)
        {
            return Ok(Format::Mtx);
        }
        let stream = self.len.is_none();
        let mut scanned = 0; // bytes of whole lines already looked at
        loop {
            let rest = &self.prefix[scanned..];
            if let Some(end) = rest.iter().position(|&b| b == b'\n') {
                if let Some(f) = line_format(&rest[..end], stream) {
                    return f.ok_or_else(|| self.unknown(stream, NOT_A_GRAPH));
                }
                scanned += end + 1;
                continue;
            }
            if self.eof || self.prefix.len() >= SNIFF_LIMIT {
                // The last line looked at, unterminated, decides if anything does.
                return match line_format(rest, stream) {
                    Some(f) => f.ok_or_else(|| self.unknown(stream, NOT_A_GRAPH)),
                    // Only blank lines and `#` comments: an edge list without edges.
                    None if self.eof && stream => Ok(Format::El),
                    None if self.eof => Err(self.unknown(stream, NOT_A_GRAPH)),
                    None => Err(self.unknown(
                        stream,
                        "its first MiB holds only comments, no edge line (name the format)",
                    )),
                };
            }
            let want = (self.prefix.len() + 64 * 1024).min(SNIFF_LIMIT);
            self.fill_to(want)?;
        }
    }

    fn unknown(&self, stream: bool, reason: &str) -> FormatError {
        if stream {
            FormatError::Undetectable { path: self.name.clone(), reason: reason.to_owned() }
        } else {
            FormatError::UnknownFormat { path: self.name.clone() }
        }
    }

    /// The input as one reader: the bytes read ahead, then the rest of the stream.
    pub(crate) fn into_reader(self) -> io::Chain<Cursor<Vec<u8>>, Source> {
        Cursor::new(self.prefix).chain(self.source)
    }
}

/// Why a stream's content names no format.
const NOT_A_GRAPH: &str = "its content is not a Skein binary graph, a Matrix Market file, a \
                           DIMACS .gr file nor a text edge list `u v` or `u v w`";

/// The Matrix Market banner's first word.
const MTX_BANNER: &[u8] = b"%%MatrixMarket";

/// What one line says about the format: `None` when it says nothing (blank, or a `#`
/// comment), `Some(None)` when it rules every format out, `Some(Some(format))` when it
/// decides. Edge lists are told by their columns only for streams (`stream`); a regular
/// file needs an extension.
fn line_format(line: &[u8], stream: bool) -> Option<Option<Format>> {
    let mut t = Tokens::new(line);
    let first = t.next()?;
    if first == b"c" || first == b"p" {
        return Some(Some(Format::Gr));
    }
    if first[0] == b'#' {
        return if stream { None } else { Some(None) };
    }
    if stream && first.iter().all(u8::is_ascii_digit) {
        // The first edge line: three columns make a weighted list.
        let columns = 1 + t.count();
        return Some(Some(if columns >= 3 { Format::Wel } else { Format::El }));
    }
    Some(None)
}
