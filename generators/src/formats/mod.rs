//! Graph files: text edge lists, Matrix Market, DIMACS shortest-path files, and Skein's
//! own binary format.
//!
//! Every format stores an [`EdgeList`] exactly: self-loops and repeated edges are kept,
//! in file order, and weights round-trip to the same binary32 value. Readers check what
//! they read (vertex ids within the vertex count, weights finite and non-negative,
//! counts matching) and refuse anything else with a [`FormatError`] that names the file
//! and, for text formats, the line (`file:line: expected ..., found ...`).
//!
//! | [`Format`] | extension | content |
//! | --- | --- | --- |
//! | [`Format::Binary`] | `.skg` | Skein binary graph: header, little-endian arrays, XXH64 trailer |
//! | [`Format::El`] | `.el` | text, one `u v` edge per line |
//! | [`Format::Wel`] | `.wel` | text, one `u v w` edge per line |
//! | [`Format::Mtx`] | `.mtx` | Matrix Market coordinate, `general` or `symmetric`, `pattern`, `real` or `integer` |
//! | [`Format::Gr`] | `.gr` | DIMACS shortest paths: `p sp N M`, then `a u v w` lines (1-based, integer weights) |
//!
//! # Inputs: files, pipes, standard input
//!
//! [`read_edges`], [`read_edges_detected`] and [`read_edges_as`] open their input once
//! and read it once, front to back, so a named pipe (FIFO), a character device or
//! standard input (the path `-`, [`STDIN_PATH`]; errors call it `<stdin>`) works like a
//! regular file. The format is told from a prefix read from the same stream and then
//! handed to the reader ahead of the rest; nothing is read twice. The rules:
//!
//! 1. The Skein binary magic at the start wins (a `.skg` file under any name).
//! 2. Otherwise the extension, when it is one of the table's.
//! 3. Otherwise the content: a `%%MatrixMarket` banner at the start is Matrix Market; a
//!    first non-blank line whose first word is `c` or `p` is DIMACS.
//! 4. Otherwise, only for inputs that are not regular files (pipes, standard input,
//!    which may have no name at all): a text edge list, after any `#` comment lines,
//!    whose first edge line decides the weights: two columns `u v` make a `.el`, three
//!    `u v w` a `.wel`. An input of only comments and blank lines is an empty `.el`.
//!    (At most 1 MiB is looked at.) A regular file without a known extension or a
//!    signature is refused ([`FormatError::UnknownFormat`]): name it.
//!
//! To force a format on a stream, use [`read_edges_as`] (`-` works there too).
//! [`detect_format`] answers without reading pipes (what is read from a pipe is gone):
//! their extension decides, and a pipe without one, or standard input, gets
//! [`FormatError::Undetectable`]; use [`read_edges_detected`] for those.
//!
//! # Memory
//!
//! Before allocating for a graph, every reader checks the size the file declares (the
//! binary header's counts, `# vertices` and `# edges` directives, the Matrix Market size
//! line, the DIMACS problem line) against the available memory with
//! [`memory::check_fits`](crate::memory::check_fits): the graph's edge list and the CSR
//! built from it ([`build::graph_bytes`](crate::build::graph_bytes)). A text edge
//! list without `# vertices` has as many vertices as its largest id + 1, known only at
//! its end: the CSR for that count is checked then, before the edge list is returned.
//! A graph that would not fit is refused with [`FormatError::Memory`] (`file[:line]:
//! a graph of N vertices and M edges needs X GiB, only Y GiB available`), never by an
//! aborted allocation. The environment variable `SKEIN_MEMORY_LIMIT` overrides what
//! counts as available (see [`memory`](crate::memory)).
//!
//! # Text edge lists (`.el`, `.wel`)
//!
//! One edge per line: two vertex ids (decimal, from 0), and for `.wel` a weight, separated
//! by spaces or tabs. Blank lines are skipped; a line whose first non-blank character is
//! `#` is a comment. Weights are written with Rust's shortest round-trip formatting, so
//! reading a written file gives back the very same binary32 values.
//!
//! Two comments in the leading comment block (before the first edge) are *directives*:
//!
//! ```text
//! # vertices 1048576
//! # edges 16777216
//! ```
//!
//! - `# vertices N`: the graph has `N` vertices (ids `0..N`); an id `>= N` is an error.
//!   Without it the vertex count is the largest id + 1, so isolated vertices above the
//!   largest id would be lost: the writers always emit it.
//! - `# edges M`: the file holds exactly `M` edge lines; fewer (a truncated file) or
//!   more is an error. The writers always emit it.
//!
//! A directive is a comment of exactly two words whose first word is `vertices` or
//! `edges`; its second word must then be a number. (`# vertices are numbered from 0` is
//! an ordinary comment.) A directive after the first edge, or twice, is an error.
//!
//! # Matrix Market (`.mtx`)
//!
//! The coordinate format of <https://math.nist.gov/MatrixMarket/formats.html>: the
//! banner `%%MatrixMarket matrix coordinate FIELD SYMMETRY` (FIELD `pattern`, `real` or
//! `integer`; SYMMETRY `general` or `symmetric`), `%` comments, the size line
//! `rows cols entries` (the matrix must be square: rows = vertices), then exactly
//! `entries` lines `i j [value]` with 1-based indices. Each stored entry is one
//! undirected edge `(i - 1, j - 1)`: a `symmetric` file stores each edge once (the
//! readers accept entries on either side of the diagonal), and a `general` file that
//! lists both `(i, j)` and `(j, i)` gives two edges. `pattern` files are unweighted;
//! `integer` values become `f32`, and one that `f32` cannot hold exactly (above 2^24, not a
//! multiple of its spacing) is an error, as in `.gr`: rounding would change path lengths
//! silently. The writer emits `general` (which
//! keeps each edge's orientation) unless [`WriteOptions::mtx_symmetry`] asks for
//! `symmetric` (then each entry is written with row >= column).
//!
//! # DIMACS shortest paths (`.gr`)
//!
//! The format of the 9th DIMACS Implementation Challenge: lines whose first word is `c`
//! are comments (anywhere; blank lines are skipped too); one problem line `p sp N M`
//! comes before the first arc and declares `N` vertices (ids `1..=N`) and `M` arcs;
//! then exactly `M` arc lines `a u v w`, with `u` and `v` in `1..=N` and an integer
//! weight `w >= 0`. Each arc is one undirected edge `(u - 1, v - 1)` of weight `w`, like
//! a line of a `.wel` file: the graph is undirected, so a file that lists both
//! directions of a road (as the DIMACS road networks do) gives that edge twice, which
//! changes no shortest path. Weights are stored as `f32` and must be exact there: every
//! integer up to 2^24, and above that only those `f32` holds (a multiple of its
//! spacing); any other weight is refused rather than rounded, since rounding would
//! change path lengths. Other DIMACS problem types (`p max`, ...) are refused as
//! unsupported. Every error names the file and the line. The writer emits a `c`
//! comment, the problem line and one arc per edge (weight 1 for an unweighted graph);
//! it refuses a weight that is not a whole number below 2^64 (a `.wel` keeps it), and
//! writes `-0.0` as `0`.
//!
//! # Skein binary (`.skg`)
//!
//! All integers little-endian. A 64-byte header:
//!
//! ```text
//! offset size field
//!      0    8 magic            89 53 4B 47 0D 0A 1A 0A  ("\x89SKG\r\n\x1a\n")
//!      8    4 version          1
//!     12    4 flags            bit 0: weighted; other bits 0
//!     16    4 id_bytes         4 or 8: width of each stored vertex id
//!     20    4 reserved         0
//!     24    8 num_vertices
//!     32    8 num_edges        m
//!     40   24 reserved         0
//! ```
//!
//! then the arrays `src[m]`, `dst[m]` (unsigned, `id_bytes` each; the writer uses 4 bytes
//! when every id fits), `weights[m]` (binary32 bit patterns, only when weighted), and an
//! 8-byte trailer: the XXH64 (seed 0) of every byte before it, header included. A file
//! whose magic differs (a foreign file), whose length disagrees with its header
//! (truncated or padded), or whose checksum disagrees (corrupted) is refused before any
//! edge is handed out.

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::graph::EdgeList;
use crate::memory::MemoryError;

pub(crate) mod binary;
mod el;
mod gr;
mod input;
mod mtx;
pub(crate) mod text;
mod xxh64;

pub use binary::{
    binary_checksum, read_binary, write_binary, MAGIC as BINARY_MAGIC, VERSION as BINARY_VERSION,
};
pub use el::{read_el, read_wel, write_el, write_wel};
pub use gr::{read_gr, write_gr};
pub use input::{is_stdin, STDIN_PATH};
pub use mtx::{read_mtx, write_mtx};

/// A graph file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Skein binary graph (`.skg`).
    Binary,
    /// Unweighted text edge list (`.el`): `u v` per line.
    El,
    /// Weighted text edge list (`.wel`): `u v w` per line.
    Wel,
    /// Matrix Market coordinate (`.mtx`).
    Mtx,
    /// DIMACS shortest paths (`.gr`): `p sp N M`, then `a u v w` per edge.
    Gr,
}

impl Format {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [Format; 5] = [Format::Binary, Format::El, Format::Wel, Format::Mtx, Format::Gr];

    /// The format named by `path`'s extension (`.skg`, `.el`, `.wel`, `.mtx`, `.gr`;
    /// ASCII case ignored), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "skg" => Some(Format::Binary),
            "el" => Some(Format::El),
            "wel" => Some(Format::Wel),
            "mtx" => Some(Format::Mtx),
            "gr" => Some(Format::Gr),
            _ => None,
        }
    }

    /// The file extension of this format, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Binary => "skg",
            Format::El => "el",
            Format::Wel => "wel",
            Format::Mtx => "mtx",
            Format::Gr => "gr",
        }
    }

    /// The short name the CLI uses (`bin`, `el`, `wel`, `mtx`, `gr`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Binary => "bin",
            _ => self.extension(),
        }
    }

    /// Whether files of this format can carry weights.
    pub fn stores_weights(self) -> bool {
        !matches!(self, Format::El)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Binary => "Skein binary (.skg)",
            Format::El => "edge list (.el)",
            Format::Wel => "weighted edge list (.wel)",
            Format::Mtx => "Matrix Market (.mtx)",
            Format::Gr => "DIMACS shortest paths (.gr)",
        })
    }
}

/// The error of [`Format::from_str`](std::str::FromStr::from_str).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown graph format `{0}` (expected one of: bin, el, wel, mtx, gr)")]
pub struct UnknownFormatName(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownFormatName;

    /// Parses `bin` (also `skg`, `binary`), `el`, `wel`, `mtx` or `gr` (also `dimacs`).
    fn from_str(s: &str) -> Result<Format, UnknownFormatName> {
        match s.to_ascii_lowercase().as_str() {
            "bin" | "skg" | "binary" => Ok(Format::Binary),
            "el" => Ok(Format::El),
            "wel" => Ok(Format::Wel),
            "mtx" => Ok(Format::Mtx),
            "gr" | "dimacs" => Ok(Format::Gr),
            _ => Err(UnknownFormatName(s.to_owned())),
        }
    }
}

/// Where in a file an error was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A line of a text file (from 1).
    Line(u64),
    /// An edge of a binary file (from 0).
    Edge(u64),
}

impl fmt::Display for Location {
    /// `:LINE` (so that `file{location}` reads `file:12`) or `: edge K`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(l) => write!(f, ":{l}"),
            Location::Edge(k) => write!(f, ": edge {k}"),
        }
    }
}

/// Why a graph file could not be read or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The operating system refused an operation (open, read, create, write). The
    /// message leaves the OS error to [`source`](std::error::Error::source), so print
    /// the chain (anyhow's `{:#}`) to see it.
    #[error("{}: cannot {action}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was attempted: `open`, `read`, `create`, `write`.
        action: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A text line does not have the expected shape.
    #[error("{}:{line}: expected {expected}, found {found}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: u64,
        /// What the reader expected there.
        expected: String,
        /// What it found (shortened when long).
        found: String,
    },
    /// A vertex id is not below the vertex count.
    #[error(
        "{}{at}: vertex {vertex} is out of range: the graph has {num_vertices} vertices \
         (ids 0..{num_vertices})",
        path.display()
    )]
    VertexOutOfRange {
        /// The file.
        path: PathBuf,
        /// Line or edge.
        at: Location,
        /// The offending id.
        vertex: u64,
        /// The declared vertex count.
        num_vertices: u64,
    },
    /// A weight is negative, NaN or infinite.
    #[error("{}{at}: weight {weight} is not allowed: weights must be finite and non-negative", path.display())]
    BadWeight {
        /// The file.
        path: PathBuf,
        /// Line or edge.
        at: Location,
        /// The offending weight.
        weight: f32,
    },
    /// A binary file does not start with the Skein magic: it is some other kind of file.
    #[error(
        "{}: not a Skein binary graph: expected the magic bytes {}, found {}",
        path.display(), hex(&binary::MAGIC), hex(found)
    )]
    NotSkein {
        /// The file.
        path: PathBuf,
        /// The bytes found where the magic belongs (fewer than 8 if the file is shorter).
        found: Vec<u8>,
    },
    /// A binary file of a version this build cannot read.
    #[error(
        "{}: Skein binary version {found} is not supported (this build reads version {})",
        path.display(), binary::VERSION
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version in the header.
        found: u32,
    },
    /// A binary header field has an impossible value.
    #[error("{}: invalid Skein binary header: {reason}", path.display())]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// Which field, and what it holds.
        reason: String,
    },
    /// The file ends before its header says it should.
    #[error("{}: truncated: the header announces {expected} bytes, the file has {found}", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes expected in all.
        expected: u64,
        /// Bytes found.
        found: u64,
    },
    /// There are bytes after the end the header announces.
    #[error("{}: {extra} unexpected byte(s) after the end of the graph ({expected} bytes)", path.display())]
    TrailingData {
        /// The file.
        path: PathBuf,
        /// Bytes expected in all.
        expected: u64,
        /// At least this many extra bytes.
        extra: u64,
    },
    /// The stored checksum disagrees with the content: the file is corrupt.
    #[error(
        "{}: checksum mismatch: stored {stored:016x}, computed {computed:016x} (the file is corrupt)",
        path.display()
    )]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Checksum in the file.
        stored: u64,
        /// Checksum of the content.
        computed: u64,
    },
    /// The format of a file could not be determined.
    #[error(
        "{}: cannot tell the graph format: name the file .skg, .el, .wel, .mtx or .gr",
        path.display()
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The format of a pipe or of standard input could not be determined.
    #[error("{}: cannot tell the graph format: {reason}", path.display())]
    Undetectable {
        /// The input (`<stdin>` for standard input).
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The graph the file declares (or holds) would not fit in the available memory;
    /// nothing was allocated for it.
    #[error("{}{}: {error}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Memory {
        /// The file.
        path: PathBuf,
        /// The line that declares the size, for text formats.
        line: Option<u64>,
        /// What needs how much, and how much is available.
        error: MemoryError,
    },
    /// A valid file that uses a feature this reader does not support.
    #[error("{}{}: {what} is not supported", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The line, for text formats.
        line: Option<u64>,
        /// The feature.
        what: String,
    },
    /// The graph cannot be written in the requested form.
    #[error("{}: cannot write this graph: {reason}", path.display())]
    Unwritable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl FormatError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FormatError::Io { path, .. }
            | FormatError::Syntax { path, .. }
            | FormatError::VertexOutOfRange { path, .. }
            | FormatError::BadWeight { path, .. }
            | FormatError::NotSkein { path, .. }
            | FormatError::UnsupportedVersion { path, .. }
            | FormatError::BadHeader { path, .. }
            | FormatError::Truncated { path, .. }
            | FormatError::TrailingData { path, .. }
            | FormatError::Checksum { path, .. }
            | FormatError::UnknownFormat { path }
            | FormatError::Undetectable { path, .. }
            | FormatError::Memory { path, .. }
            | FormatError::Unsupported { path, .. }
            | FormatError::Unwritable { path, .. } => path,
        }
    }

    pub(crate) fn io(path: &Path, action: &'static str, source: io::Error) -> FormatError {
        FormatError::Io { path: path.to_owned(), action, source }
    }
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "nothing (empty file)".to_owned();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
}

/// Whether weights are acceptable in a graph file: finite and not below zero.
#[inline]
pub(crate) fn weight_ok(w: f32) -> bool {
    w.is_finite() && w >= 0.0
}

/// Options for the writers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Comment lines written at the top of text files (without the leading `#` or `%`;
    /// line breaks inside are replaced by spaces). The binary format ignores them.
    pub comments: Vec<String>,
    /// The symmetry a Matrix Market file declares.
    pub mtx_symmetry: MtxSymmetry,
}

/// The symmetry of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MtxSymmetry {
    /// Every entry is one edge, in its stored orientation.
    #[default]
    General,
    /// Every entry is one undirected edge, written with row >= column.
    Symmetric,
}

/// Checks that a graph of `n` vertices and `m` edges (unknown: counted as none), declared
/// at `line` of the text file `path`, fits in memory before its reader allocates anything.
pub(crate) fn check_declared_graph(
    path: &Path,
    line: u64,
    n: u64,
    m: Option<u64>,
    weighted: bool,
) -> Result<(), FormatError> {
    crate::memory::check_fits(crate::build::graph_bytes(n, m.unwrap_or(0), weighted), || {
        crate::memory::describe_graph(n, m)
    })
    .map_err(|error| FormatError::Memory { path: path.to_owned(), line: Some(line), error })
}

/// Size of the read and write buffers of the file-level functions.
pub(crate) const IO_BUFFER: usize = 8 << 20;

/// Determines the format of the file at `path`: the Skein magic wins; otherwise the
/// extension; otherwise the content (a Matrix Market banner, or a first line that is a
/// DIMACS `c` comment or `p` problem line).
///
/// A regular file is opened and its first bytes read. A pipe or device is not opened
/// (what is read from a pipe is gone): its extension decides, and without one the
/// answer is [`FormatError::Undetectable`]; so is standard input (`-`), which has no
/// name. [`read_edges_detected`] reads such inputs, telling the format from what it
/// reads.
pub fn detect_format(path: &Path) -> Result<Format, FormatError> {
    let name = input::display_name(path);
    let once = |what: &str| FormatError::Undetectable {
        path: name.clone(),
        reason: format!(
            "{what} can be read only once, so its format is told while it is read \
             (read_edges_detected), or named by an extension (.skg, .el, .wel, .mtx, .gr)"
        ),
    };
    if is_stdin(path) {
        return Err(once("standard input"));
    }
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(path, "open", e))?;
    if !meta.is_file() && !meta.is_dir() {
        return Format::from_path(path).ok_or_else(|| once("a pipe or device"));
    }
    input::Input::open(path)?.detect()
}

/// Reads the graph at `path` (`-`: standard input), its format told by
/// [`read_edges_detected`].
pub fn read_edges(path: &Path) -> Result<EdgeList, FormatError> {
    read_edges_detected(path, &|_| {}).map(|(_, el)| el)
}

/// Reads the graph at `path` (a file, a pipe, a device, or `-` for standard input),
/// opening it once and reading it once; returns its format (told as by
/// [`detect_format`], from a prefix of the same stream, and for a pipe or standard
/// input also from the content: see the [module docs](self)) and its edges. `progress`
/// is called with the number of bytes consumed so far from time to time.
pub fn read_edges_detected(
    path: &Path,
    progress: &dyn Fn(u64),
) -> Result<(Format, EdgeList), FormatError> {
    let mut input = input::Input::open(path)?;
    let format = input.detect()?;
    Ok((format, read_input(input, format, progress)?))
}

/// Reads the graph at `path` (a file, a pipe, a device, or `-` for standard input) as
/// `format`, calling `progress` with the number of bytes consumed so far from time to
/// time (for progress bars).
pub fn read_edges_as(
    path: &Path,
    format: Format,
    progress: &dyn Fn(u64),
) -> Result<EdgeList, FormatError> {
    read_input(input::Input::open(path)?, format, progress)
}

/// The length in bytes of the regular file at `path`; `None` for pipes, devices and
/// standard input (`-`), whose length is unknown until they end (for progress bars).
pub fn input_len(path: &Path) -> Result<Option<u64>, FormatError> {
    if is_stdin(path) {
        return Ok(None);
    }
    let meta = std::fs::metadata(path).map_err(|e| FormatError::io(path, "open", e))?;
    Ok(meta.is_file().then_some(meta.len()))
}

/// Reads an opened input as `format`.
fn read_input(
    input: input::Input,
    format: Format,
    progress: &dyn Fn(u64),
) -> Result<EdgeList, FormatError> {
    read_input_into(input, format, progress, &mut text::EdgeSink::whole(), None)
}

/// Reads the graph at `path` (a file, a pipe, a device, or `-`) as `format` (`None`: told
/// as [`read_edges_detected`] tells it), its edges going to `sink` (a text format handed
/// out in chunks; a `.skg` input is always kept whole), and a copy of every byte read
/// written to `copy` when given (a pipe read twice). Returns the format and the list
/// (without the edges handed out).
pub(crate) fn read_into(
    path: &Path,
    format: Option<Format>,
    progress: &dyn Fn(u64),
    sink: &mut text::EdgeSink<'_>,
    copy: Option<&mut dyn Write>,
) -> Result<(Format, EdgeList), FormatError> {
    let mut input = input::Input::open(path)?;
    let format = match format {
        Some(f) => f,
        None => input.detect()?,
    };
    Ok((format, read_input_into(input, format, progress, sink, copy)?))
}

/// [`read_input`] with a sink for the edges of text formats and a copy of the bytes read.
fn read_input_into(
    input: input::Input,
    format: Format,
    progress: &dyn Fn(u64),
    sink: &mut text::EdgeSink<'_>,
    copy: Option<&mut dyn Write>,
) -> Result<EdgeList, FormatError> {
    let name = input.name.clone();
    let len = input.len;
    if format == Format::Binary && sink.chunked_out() {
        return Err(FormatError::Unsupported {
            path: name,
            line: None,
            what: "reading a Skein binary graph from a pipe or standard input across ranks \
                   (the ranks read a regular .skg file by offset: copy it to a file)"
                .to_owned(),
        });
    }
    let reader = Tee { inner: input.into_reader(), copy };
    if format == Format::Binary {
        return binary::read_stream(reader, &name, len, progress);
    }
    let reader = ProgressReader { inner: reader, done: 0, reported: 0, progress };
    let reader = BufReader::with_capacity(1 << 20, reader);
    match format {
        Format::El => el::read_text_into(reader, &name, false, len, sink),
        Format::Wel => el::read_text_into(reader, &name, true, len, sink),
        Format::Mtx => mtx::read_stream(reader, &name, len, sink),
        Format::Gr => gr::read_stream(reader, &name, len, sink),
        Format::Binary => unreachable!("handled above"),
    }
}

/// Writes `el` to `path` in `format` with default options.
pub fn write_edges(path: &Path, el: &EdgeList, format: Format) -> Result<(), FormatError> {
    write_edges_with(path, el, format, &WriteOptions::default(), &|_| {})
}

/// Writes `el` to `path` in `format`, calling `progress` with the number of edges
/// written so far from time to time.
///
/// An unweighted graph written as `.wel` gets weight 1 on every edge; a weighted graph
/// written as `.el` loses its weights. The file is created (or truncated) first; on
/// error it may be left incomplete, and readers will refuse it. The data is synced to
/// the device before returning (`fsync`), so that late I/O errors (a full or failing
/// disk) are reported here rather than lost.
pub fn write_edges_with(
    path: &Path,
    el: &EdgeList,
    format: Format,
    options: &WriteOptions,
    progress: &dyn Fn(u64),
) -> Result<(), FormatError> {
    check_edge_list(el, path)?;
    let file = File::create(path).map_err(|e| FormatError::io(path, "create", e))?;
    let mut w = BufWriter::with_capacity(IO_BUFFER, file);
    match format {
        Format::Binary => binary::write_stream(&mut w, el, path, progress)?,
        Format::El => el::write_text(&mut w, el, false, &options.comments, path, progress)?,
        Format::Wel => el::write_text(&mut w, el, true, &options.comments, path, progress)?,
        Format::Mtx => mtx::write_stream(&mut w, el, options, path, progress)?,
        Format::Gr => gr::write_stream(&mut w, el, options, path, progress)?,
    }
    let file = w.into_inner().map_err(|e| FormatError::io(path, "write", e.into_error()))?;
    file.sync_data().or_else(ignore_unsupported).map_err(|e| FormatError::io(path, "write", e))
}

/// `sync_data` fails on some special files (`/dev/null`, pipes); that is no write error.
fn ignore_unsupported(e: io::Error) -> io::Result<()> {
    match e.kind() {
        io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported => Ok(()),
        _ if e.raw_os_error() == Some(22) => Ok(()), // EINVAL
        _ => Err(e),
    }
}

/// Checks what every writer needs: parallel arrays, ids below the vertex count, and
/// weights that a reader will accept.
pub(crate) fn check_edge_list(el: &EdgeList, path: &Path) -> Result<(), FormatError> {
    let bad = |reason: String| FormatError::Unwritable { path: path.to_owned(), reason };
    if el.src.len() != el.dst.len() {
        return Err(bad(format!("{} sources but {} destinations", el.src.len(), el.dst.len())));
    }
    if let Some(w) = &el.weights {
        if w.len() != el.src.len() {
            return Err(bad(format!("{} weights for {} edges", w.len(), el.src.len())));
        }
        if let Some(k) = first_bad(w, |&x| !weight_ok(x)) {
            return Err(bad(format!(
                "edge {k} has weight {}; weights must be finite and non-negative",
                w[k]
            )));
        }
    }
    let n = el.num_vertices;
    if let Some(k) = first_bad_pair(&el.src, &el.dst, n) {
        return Err(bad(format!(
            "edge {k} ({}, {}) has an endpoint beyond the {n} vertices",
            el.src[k], el.dst[k]
        )));
    }
    Ok(())
}

/// Elements checked per rayon task by the validation scans.
const SCAN_CHUNK: usize = 1 << 16;

/// Index of the first element of `xs` for which `bad` holds (parallel scan).
pub(crate) fn first_bad<T: Sync>(xs: &[T], bad: impl Fn(&T) -> bool + Sync) -> Option<usize> {
    let block = xs.par_chunks(SCAN_CHUNK).position_first(|c| c.iter().any(&bad))?;
    let base = block * SCAN_CHUNK;
    xs[base..].iter().position(&bad).map(|i| base + i)
}

/// Index of the first edge with an endpoint `>= n` (parallel scan; a vectorized max
/// per block, then a search in the first bad block).
pub(crate) fn first_bad_pair(src: &[u64], dst: &[u64], n: u64) -> Option<usize> {
    let block = src
        .par_chunks(SCAN_CHUNK)
        .zip(dst.par_chunks(SCAN_CHUNK))
        .position_first(|(a, b)| a.iter().zip(b).fold(0, |m, (&u, &v)| m.max(u).max(v)) >= n)?;
    let base = block * SCAN_CHUNK;
    (base..src.len()).position(|k| src[k] >= n || dst[k] >= n).map(|i| base + i)
}

/// Copies what is read from `inner` to `copy`, when there is one.
struct Tee<'a, R> {
    inner: R,
    copy: Option<&'a mut dyn Write>,
}

impl<R: Read> Read for Tee<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(c) = self.copy.as_mut() {
            c.write_all(&buf[..n]).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot keep a copy of the input: {e}"))
            })?;
        }
        Ok(n)
    }
}

/// Counts bytes read and reports them to a progress callback every 4 MiB.
struct ProgressReader<'a, R> {
    inner: R,
    done: u64,
    reported: u64,
    progress: &'a dyn Fn(u64),
}

impl<R: Read> Read for ProgressReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if self.done - self.reported >= 4 << 20 || n == 0 {
            self.reported = self.done;
            (self.progress)(self.done);
        }
        Ok(n)
    }
}

/// Writes a whole buffer, mapping errors to [`FormatError::Io`].
pub(crate) fn write_all(w: &mut impl Write, buf: &[u8], path: &Path) -> Result<(), FormatError> {
    w.write_all(buf).map_err(|e| FormatError::io(path, "write", e))
}
