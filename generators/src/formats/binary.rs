//! The Skein binary graph format (`.skg`). Layout in the [module docs](super).
//!
//! Reading and writing move the arrays in large chunks (8 MiB) through one buffer,
//! converting to and from little-endian and feeding the XXH64 checksum on the way, so
//! the cost is close to that of copying the bytes.

use std::io::{self, Read, Write};
use std::path::Path;

use rayon::prelude::*;

use super::xxh64::Xxh64;
use super::{weight_ok, FormatError, Location, IO_BUFFER};
use crate::graph::EdgeList;
use crate::{hugepage, memory};

/// The first 8 bytes of every Skein binary graph file.
pub const MAGIC: [u8; 8] = *b"\x89SKG\r\n\x1a\n";
/// The version this build writes and reads.
pub const VERSION: u32 = 1;
/// Header bytes.
const HEADER: usize = 64;
/// Trailer bytes (the checksum).
const TRAILER: u64 = 8;
/// Flag bit: the file holds weights.
const FLAG_WEIGHTED: u32 = 1;

/// Elements decoded per rayon task.
const DECODE_CHUNK: usize = 1 << 16;

/// What an array of the file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Vertex ids stored in 4 bytes.
    Ids4,
    /// Vertex ids stored in 8 bytes.
    Ids8,
    /// binary32 weights.
    Weights,
}

impl Kind {
    fn width(self) -> usize {
        match self {
            Kind::Ids8 => 8,
            Kind::Ids4 | Kind::Weights => 4,
        }
    }
}

/// An array being read, decoded from little-endian bytes.
enum Array {
    Ids(Vec<u64>),
    Weights(Vec<f32>),
}

impl Array {
    /// An array with `len` zeroed elements allocated up front (huge pages, no memset).
    fn new(kind: Kind, len: usize) -> Array {
        match kind {
            Kind::Ids4 | Kind::Ids8 => Array::Ids(hugepage::zeroed_vec(len)),
            Kind::Weights => Array::Weights(hugepage::zeroed_vec(len)),
        }
    }

    fn ensure_len(&mut self, len: usize) {
        match self {
            Array::Ids(v) if v.len() < len => v.resize(len, 0),
            Array::Weights(v) if v.len() < len => v.resize(len, 0.0),
            _ => {}
        }
    }

    /// Decodes `bytes` (whole elements of `kind`) into elements `pos..`, in parallel.
    fn decode(&mut self, kind: Kind, pos: usize, bytes: &[u8]) {
        let n = bytes.len() / kind.width();
        match (self, kind) {
            (Array::Ids(v), Kind::Ids4) => decode_par::<_, 4>(&mut v[pos..pos + n], bytes, |c| {
                u64::from(u32::from_le_bytes(c))
            }),
            (Array::Ids(v), _) => {
                decode_par::<_, 8>(&mut v[pos..pos + n], bytes, u64::from_le_bytes)
            }
            (Array::Weights(v), _) => {
                decode_par::<_, 4>(&mut v[pos..pos + n], bytes, f32::from_le_bytes)
            }
        }
    }
}

/// `out[i] = f(bytes[W * i .. W * (i + 1)])`, in parallel blocks. The element width is
/// a constant so that the inner loop compiles to plain (vectorized) loads.
fn decode_par<T: Send, const W: usize>(
    out: &mut [T],
    bytes: &[u8],
    f: impl Fn([u8; W]) -> T + Sync,
) {
    out.par_chunks_mut(DECODE_CHUNK).zip(bytes.par_chunks(W * DECODE_CHUNK)).for_each(|(o, b)| {
        for (x, c) in o.iter_mut().zip(b.chunks_exact(W)) {
            let mut a = [0u8; W];
            a.copy_from_slice(c);
            *x = f(a);
        }
    });
}

/// What the header says.
#[derive(Debug, Clone, Copy)]
struct Header {
    weighted: bool,
    id_bytes: u64,
    num_vertices: u64,
    num_edges: u64,
}

impl Header {
    /// Total file length the header implies, or `None` on overflow.
    fn file_len(&self) -> Option<u64> {
        let per_edge = 2 * self.id_bytes + if self.weighted { 4 } else { 0 };
        self.num_edges.checked_mul(per_edge)?.checked_add(HEADER as u64 + TRAILER)
    }

    fn encode(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        let flags = if self.weighted { FLAG_WEIGHTED } else { 0 };
        h[12..16].copy_from_slice(&flags.to_le_bytes());
        h[16..20].copy_from_slice(&(self.id_bytes as u32).to_le_bytes());
        h[24..32].copy_from_slice(&self.num_vertices.to_le_bytes());
        h[32..40].copy_from_slice(&self.num_edges.to_le_bytes());
        h
    }

    fn decode(h: &[u8; HEADER], path: &Path) -> Result<Header, FormatError> {
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(a)
        };
        if h[0..8] != MAGIC {
            return Err(FormatError::NotSkein { path: path.to_owned(), found: h[0..8].to_vec() });
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(FormatError::UnsupportedVersion { path: path.to_owned(), found: version });
        }
        let bad = |reason: String| FormatError::BadHeader { path: path.to_owned(), reason };
        let flags = u32_at(12);
        if flags & !FLAG_WEIGHTED != 0 {
            return Err(bad(format!(
                "unknown flag bits {flags:#x} (only bit 0, weighted, is defined)"
            )));
        }
        let id_bytes = u32_at(16);
        if id_bytes != 4 && id_bytes != 8 {
            return Err(bad(format!("id width {id_bytes} bytes (expected 4 or 8)")));
        }
        if u32_at(20) != 0 || h[40..64].iter().any(|&b| b != 0) {
            return Err(bad("reserved bytes are not zero".to_owned()));
        }
        let header = Header {
            weighted: flags & FLAG_WEIGHTED != 0,
            id_bytes: u64::from(id_bytes),
            num_vertices: u64_at(24),
            num_edges: u64_at(32),
        };
        if id_bytes == 4 && header.num_vertices > 1 << 32 {
            return Err(bad(format!(
                "{} vertices cannot be stored as 4-byte ids",
                header.num_vertices
            )));
        }
        if header.file_len().is_none() {
            return Err(bad(format!("edge count {} is impossibly large", header.num_edges)));
        }
        Ok(header)
    }
}

/// The checksum a Skein binary file stores in its trailer, of `data`: every byte of the
/// file before the trailer (XXH64 with seed 0). For tools that build or repair files,
/// and for fuzzing past the checksum.
pub fn binary_checksum(data: &[u8]) -> u64 {
    let mut h = Xxh64::new(0);
    h.update(data);
    h.finish()
}

/// Reads a Skein binary graph from `reader`; `name` is the file name errors report.
///
/// The whole input is checked (checksum, ids, weights, nothing after the trailer) before
/// the edge list is returned.
pub fn read_binary(reader: impl Read, name: &Path) -> Result<EdgeList, FormatError> {
    read_stream(reader, name, None, &|_| {})
}

/// Writes `el` as a Skein binary graph (4-byte ids when every id fits).
pub fn write_binary(writer: impl Write, el: &EdgeList, name: &Path) -> Result<(), FormatError> {
    super::check_edge_list(el, name)?;
    let mut writer = writer;
    write_stream(&mut writer, el, name, &|_| {})?;
    writer.flush().map_err(|e| FormatError::io(name, "write", e))
}

/// Fills `buf` from `r`; returns how many bytes were read (less than `buf.len()` only
/// at the end of the input).
fn read_full(r: &mut impl Read, buf: &mut [u8], path: &Path) -> Result<usize, FormatError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FormatError::io(path, "read", e)),
        }
    }
    Ok(got)
}

/// Checks the first `got` bytes of a file (`head`, zeros after them) and, when known, its
/// length against what its header announces: a foreign file, a truncated or padded one,
/// a bad header are refused.
fn check_head(
    head: &[u8; HEADER],
    got: usize,
    file_len: Option<u64>,
    path: &Path,
) -> Result<Header, FormatError> {
    if got < 8 || head[..8] != MAGIC {
        return Err(FormatError::NotSkein {
            path: path.to_owned(),
            found: head[..got.min(8)].to_vec(),
        });
    }
    if got < HEADER {
        return Err(FormatError::Truncated {
            path: path.to_owned(),
            expected: HEADER as u64 + TRAILER,
            found: got as u64,
        });
    }
    let header = Header::decode(head, path)?;
    let expected = header.file_len().expect("checked by decode");
    if let Some(len) = file_len {
        if len < expected {
            return Err(FormatError::Truncated { path: path.to_owned(), expected, found: len });
        }
        if len > expected {
            return Err(FormatError::TrailingData {
                path: path.to_owned(),
                expected,
                extra: len - expected,
            });
        }
    }
    Ok(header)
}

/// Reads and checks a binary graph. `file_len` is the input's length when known (a
/// regular file): the header is then checked against it before anything is allocated.
pub(crate) fn read_stream(
    mut r: impl Read,
    path: &Path,
    file_len: Option<u64>,
    progress: &dyn Fn(u64),
) -> Result<EdgeList, FormatError> {
    let mut head = [0u8; HEADER];
    let got = read_full(&mut r, &mut head, path)?;
    let header = check_head(&head, got, file_len, path)?;
    let expected = header.file_len().expect("checked by decode");
    let m = header.num_edges;
    let need = crate::build::graph_bytes(header.num_vertices, m, header.weighted);
    memory::check_fits(need, || {
        format!("{} (as the header declares)", memory::describe_graph(header.num_vertices, Some(m)))
    })
    .map_err(|error| FormatError::Memory { path: path.to_owned(), line: None, error })?;
    // With the file's length checked against the header, `m` is trusted: the arrays
    // are allocated whole (huge pages, no memset). A stream's arrays grow as bytes arrive.
    let trusted = file_len.is_some();

    let mut hasher = Xxh64::new(0);
    hasher.update(&head);
    let mut chunk = vec![0u8; IO_BUFFER];
    let mut done = HEADER as u64;

    // Reads `count` elements of `kind`.
    let mut read_array = |count: u64, kind: Kind| -> Result<Array, FormatError> {
        let width = kind.width();
        let mut out = Array::new(kind, if trusted { count as usize } else { 0 });
        let mut left = count * width as u64;
        let per_chunk = (IO_BUFFER / width) * width;
        let mut pos = 0usize; // elements stored so far
        while left > 0 {
            let want = left.min(per_chunk as u64) as usize;
            let got = read_full(&mut r, &mut chunk[..want], path)?;
            if got < want {
                return Err(FormatError::Truncated {
                    path: path.to_owned(),
                    expected,
                    found: done + got as u64,
                });
            }
            let bytes = &chunk[..want];
            let k = want / width;
            out.ensure_len(pos + k);
            rayon::join(|| hasher.update(bytes), || out.decode(kind, pos, bytes));
            pos += k;
            left -= want as u64;
            done += want as u64;
            progress(done);
        }
        Ok(out)
    };

    let id_kind = if header.id_bytes == 4 { Kind::Ids4 } else { Kind::Ids8 };
    let (Array::Ids(src), Array::Ids(dst)) = (read_array(m, id_kind)?, read_array(m, id_kind)?)
    else {
        unreachable!("id arrays hold ids")
    };
    let weights = match header.weighted {
        true => match read_array(m, Kind::Weights)? {
            Array::Weights(w) => Some(w),
            Array::Ids(_) => unreachable!("a weight array holds weights"),
        },
        false => None,
    };

    let mut trailer = [0u8; TRAILER as usize];
    let got = read_full(&mut r, &mut trailer, path)?;
    if got < trailer.len() {
        return Err(FormatError::Truncated {
            path: path.to_owned(),
            expected,
            found: done + got as u64,
        });
    }
    let mut one = [0u8; 1];
    if file_len.is_none() && read_full(&mut r, &mut one, path)? > 0 {
        return Err(FormatError::TrailingData { path: path.to_owned(), expected, extra: 1 });
    }
    let stored = u64::from_le_bytes(trailer);
    let computed = hasher.finish();
    if stored != computed {
        return Err(FormatError::Checksum { path: path.to_owned(), stored, computed });
    }

    let n = header.num_vertices;
    let bad_edge = super::first_bad_pair(&src, &dst, n);
    if let Some(k) = bad_edge {
        let (u, v) = (src[k], dst[k]);
        return Err(FormatError::VertexOutOfRange {
            path: path.to_owned(),
            at: Location::Edge(k as u64),
            vertex: if u >= n { u } else { v },
            num_vertices: n,
        });
    }
    if let Some(w) = &weights {
        if let Some(k) = super::first_bad(w, |&x| !weight_ok(x)) {
            return Err(FormatError::BadWeight {
                path: path.to_owned(),
                at: Location::Edge(k as u64),
                weight: w[k],
            });
        }
    }
    Ok(EdgeList { num_vertices: n, src, dst, weights })
}

/// Writes header, arrays and checksum (the edge list must have passed
/// [`check_edge_list`](super::check_edge_list)).
pub(crate) fn write_stream<W: Write>(
    w: &mut W,
    el: &EdgeList,
    path: &Path,
    progress: &dyn Fn(u64),
) -> Result<(), FormatError> {
    let header = Header {
        weighted: el.weights.is_some(),
        id_bytes: if el.num_vertices <= 1 << 32 { 4 } else { 8 },
        num_vertices: el.num_vertices,
        num_edges: el.len() as u64,
    };
    let head = header.encode();
    let mut hasher = Xxh64::new(0);
    hasher.update(&head);
    super::write_all(w, &head, path)?;

    let mut buf: Vec<u8> = Vec::with_capacity(IO_BUFFER);
    let total = 2 * el.len() as u64 + if header.weighted { el.len() as u64 } else { 0 };
    let mut done = 0u64;
    let mut emit = |buf: &mut Vec<u8>, items: u64| -> Result<(), FormatError> {
        hasher.update(buf);
        super::write_all(w, buf, path)?;
        buf.clear();
        done += items;
        progress((u128::from(done) * el.len() as u128 / u128::from(total.max(1))) as u64);
        Ok(())
    };
    for ids in [&el.src, &el.dst] {
        for part in ids.chunks(IO_BUFFER / header.id_bytes as usize) {
            if header.id_bytes == 4 {
                buf.resize(part.len() * 4, 0);
                for (c, &v) in buf.chunks_exact_mut(4).zip(part) {
                    c.copy_from_slice(&(v as u32).to_le_bytes());
                }
            } else {
                buf.resize(part.len() * 8, 0);
                for (c, &v) in buf.chunks_exact_mut(8).zip(part) {
                    c.copy_from_slice(&v.to_le_bytes());
                }
            }
            emit(&mut buf, part.len() as u64)?;
        }
    }
    if let Some(ws) = &el.weights {
        for part in ws.chunks(IO_BUFFER / 4) {
            buf.resize(part.len() * 4, 0);
            for (c, &x) in buf.chunks_exact_mut(4).zip(part) {
                c.copy_from_slice(&x.to_le_bytes());
            }
            emit(&mut buf, part.len() as u64)?;
        }
    }
    let sum = hasher.finish();
    super::write_all(w, &sum.to_le_bytes(), path)
}

/// Where the arrays of a `.skg` file lie, from its header checked against the file's
/// length: what the ranks of a distributed construction need to read their edges by byte
/// offset (`crate::distributed::files`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SkgLayout {
    /// The file holds weights.
    pub(crate) weighted: bool,
    /// Bytes per stored vertex id (4 or 8).
    pub(crate) id_bytes: u64,
    /// Vertex count.
    pub(crate) num_vertices: u64,
    /// Edge count `m`.
    pub(crate) num_edges: u64,
    /// The file's length.
    pub(crate) file_len: u64,
}

impl SkgLayout {
    /// Byte offset of `src[k]`.
    pub(crate) fn src_at(&self, k: u64) -> u64 {
        HEADER as u64 + k * self.id_bytes
    }

    /// Byte offset of `dst[k]`.
    pub(crate) fn dst_at(&self, k: u64) -> u64 {
        self.src_at(self.num_edges + k)
    }

    /// Byte offset of `weights[k]` (weighted files).
    pub(crate) fn weight_at(&self, k: u64) -> u64 {
        self.src_at(2 * self.num_edges) + 4 * k
    }
}

/// Reads and checks the header of the regular file `file` (named `path` in errors) and
/// its length, with the errors [`read_stream`] gives for the same file (foreign file,
/// truncated, padded, bad header); the checksum is [`verify_checksum`]'s.
pub(crate) fn read_layout(file: &std::fs::File, path: &Path) -> Result<SkgLayout, FormatError> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata().map_err(|e| FormatError::io(path, "read", e))?.len();
    let mut head = [0u8; HEADER];
    let got = (len.min(HEADER as u64)) as usize;
    file.read_exact_at(&mut head[..got], 0).map_err(|e| FormatError::io(path, "read", e))?;
    let header = check_head(&head, got, Some(len), path)?;
    Ok(SkgLayout {
        weighted: header.weighted,
        id_bytes: header.id_bytes,
        num_vertices: header.num_vertices,
        num_edges: header.num_edges,
        file_len: len,
    })
}

/// Streams the file of `layout` through XXH64 in reads of `buffer` bytes (one buffer,
/// nothing else kept) and compares the result with its trailer:
/// [`FormatError::Checksum`] when they differ.
pub(crate) fn verify_checksum(
    file: &std::fs::File,
    path: &Path,
    layout: &SkgLayout,
    buffer: usize,
) -> Result<(), FormatError> {
    use std::os::unix::fs::FileExt;
    let body = layout.file_len - TRAILER;
    let mut buf = vec![0u8; buffer.max(1)];
    let mut hasher = Xxh64::new(0);
    let mut at = 0u64;
    let rd = |e| FormatError::io(path, "read", e);
    while at < body {
        let n = (body - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at).map_err(rd)?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    let mut trailer = [0u8; TRAILER as usize];
    file.read_exact_at(&mut trailer, body).map_err(rd)?;
    let (stored, computed) = (u64::from_le_bytes(trailer), hasher.finish());
    if stored != computed {
        return Err(FormatError::Checksum { path: path.to_owned(), stored, computed });
    }
    Ok(())
}
