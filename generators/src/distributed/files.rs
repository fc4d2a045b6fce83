//! Graph files across ranks: [`EdgeSource`]s that read a graph file so that no rank holds
//! the whole graph, with the checks of the one-process readers ([`crate::formats`]) and
//! the same messages, failing on every rank alike.
//!
//! # `.skg` files: every rank reads its own byte ranges
//!
//! [`SkgSource::open`] (collective): every rank opens the file and checks its header and
//! length (a foreign, truncated or padded file gets the one-process reader's error); the
//! ranks then agree ([`agree`]), so a rank that cannot open the file makes every rank
//! fail with its message. Rank `r` hands out the edges `[r·M/R, (r+1)·M/R)` (as a
//! Kronecker rank does), reading each round's `src`, `dst` and `weights` slices with
//! positioned reads at their byte offsets (three reads of at most `8·B` bytes into one
//! reused buffer), and checks them as the one-process reader does: ids below `n`, weights
//! finite and non-negative.
//!
//! **The checksum.** A corrupted file must be refused, not used: rank 0 streams the whole
//! file through XXH64 on a thread of its own while the rounds run (reads of
//! [`CHECKSUM_BUFFER`] bytes into one buffer, nothing kept), and the verdict is agreed
//! after the rounds, before any rank returns its rows. Its cost: one more sequential read
//! of the file on rank 0 (from the page cache when the file was just read or written)
//! and a core hashing at several GB/s beside the rounds; nothing in memory but the
//! buffer. The order of refusals is the one-process reader's: a checksum mismatch (or an
//! I/O error) first, then the first edge with an id out of range, then the first bad
//! weight (all ids are checked before any weight there).
//!
//! Memory per rank: [`super::local_build_bytes`] (the rank's arcs and rows, the round's
//! edge buffers) plus the read buffer (`8·B` bytes) and, on rank 0, the checksum buffer.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use std::sync::mpsc::{sync_channel, Receiver};

use super::source::{agree, EdgeSource, Refusal};
use super::{rank_edges, DistError, Exchange};
use crate::formats::binary::{self, SkgLayout};
use crate::formats::text::EdgeSink;
use crate::formats::{self, weight_ok, Format, FormatError, Location};

/// Bytes of one read of the checksum thread (8 MiB).
pub const CHECKSUM_BUFFER: usize = 8 << 20;

/// Refusal keys: I/O errors and checksum mismatches first, then ids (`ID_KEY + k` for
/// edge `k`), then weights (`ID_KEY + m + k`).
const ID_KEY: u64 = 1;

/// The edges of a `.skg` file, each rank reading its own share (module docs).
#[derive(Debug)]
pub struct SkgSource {
    path: PathBuf,
    file: Arc<File>,
    layout: SkgLayout,
    buf: Vec<u8>,
    refusal: Option<Refusal>,
    /// Whether the refusal is an id's (later rounds cannot find an earlier one).
    final_refusal: bool,
    checksum: Option<JoinHandle<Result<(), FormatError>>>,
}

impl SkgSource {
    /// Opens the `.skg` file at `path` on every rank and checks its header and length
    /// (collective): the same error on every rank when any rank refuses it. Rank 0 starts
    /// the checksum (module docs).
    pub fn open<E: Exchange + ?Sized>(path: &Path, ex: &mut E) -> Result<SkgSource, DistError> {
        let opened = open_layout(path);
        agree(ex, opened.as_ref().err().map(|e| Refusal::from_error(0, e)))?;
        let (file, layout) = opened.map_err(|e| DistError::Input(e.to_string()))?;
        let file = Arc::new(file);
        let checksum = (ex.rank() == 0).then(|| {
            let (file, path) = (Arc::clone(&file), path.to_owned());
            std::thread::spawn(move || {
                binary::verify_checksum(&file, &path, &layout, CHECKSUM_BUFFER)
            })
        });
        Ok(SkgSource {
            path: path.to_owned(),
            file,
            layout,
            buf: Vec::new(),
            refusal: None,
            final_refusal: false,
            checksum,
        })
    }

    /// Whether the file stores weights.
    pub fn weighted(&self) -> bool {
        self.layout.weighted
    }

    fn refuse(&mut self, key: u64, e: &FormatError) {
        if self.refusal.as_ref().is_none_or(|r| key < r.key) {
            self.refusal = Some(Refusal::from_error(key, e));
        }
    }

    /// Reads `count` elements of `width` bytes at byte `at` into the buffer.
    fn read(&mut self, at: u64, count: usize, width: usize) -> Result<&[u8], FormatError> {
        use std::os::unix::fs::FileExt;
        let n = count * width;
        if self.buf.len() < n {
            self.buf.resize(n, 0);
        }
        self.file
            .read_exact_at(&mut self.buf[..n], at)
            .map_err(|e| FormatError::io(&self.path, "read", e))?;
        Ok(&self.buf[..n])
    }

    /// Reads the ids of edges `lo..lo + out.len()` of the array starting at edge offset
    /// `at` (`src_at(lo)` or `dst_at(lo)`).
    fn read_ids(&mut self, at: u64, out: &mut [u64]) -> Result<(), FormatError> {
        let wide = self.layout.id_bytes == 8;
        let bytes = self.read(at, out.len(), if wide { 8 } else { 4 })?;
        if wide {
            for (x, c) in out.iter_mut().zip(bytes.chunks_exact(8)) {
                *x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            }
        } else {
            for (x, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                *x = u64::from(u32::from_le_bytes(c.try_into().expect("4 bytes")));
            }
        }
        Ok(())
    }

    /// Reads and checks one round; `Err` for an I/O error.
    fn try_fill(
        &mut self,
        lo: u64,
        src: &mut [u64],
        dst: &mut [u64],
        w: &mut [f32],
    ) -> Result<bool, FormatError> {
        let l = self.layout;
        self.read_ids(l.src_at(lo), src)?;
        self.read_ids(l.dst_at(lo), dst)?;
        let n = l.num_vertices;
        if let Some(i) = (0..src.len()).find(|&i| src[i] >= n || dst[i] >= n) {
            let vertex = if src[i] >= n { src[i] } else { dst[i] };
            let e = FormatError::VertexOutOfRange {
                path: self.path.clone(),
                at: Location::Edge(lo + i as u64),
                vertex,
                num_vertices: n,
            };
            self.refuse(ID_KEY + lo + i as u64, &e);
            self.final_refusal = true;
            return Ok(false);
        }
        if self.refusal.is_some() {
            // A weight was refused already: only an id can still come first.
            return Ok(false);
        }
        if l.weighted {
            let bytes = self.read(l.weight_at(lo), w.len(), 4)?;
            for (x, c) in w.iter_mut().zip(bytes.chunks_exact(4)) {
                *x = f32::from_le_bytes(c.try_into().expect("4 bytes"));
            }
            if let Some(i) = w.iter().position(|&x| !weight_ok(x)) {
                let e = FormatError::BadWeight {
                    path: self.path.clone(),
                    at: Location::Edge(lo + i as u64),
                    weight: w[i],
                };
                self.refuse(ID_KEY + l.num_edges + lo + i as u64, &e);
                return Ok(false);
            }
        } else {
            w.fill(1.0);
        }
        Ok(true)
    }
}

/// Opens `path` and reads its layout (a regular file: the ranks read it by offset).
fn open_layout(path: &Path) -> Result<(File, SkgLayout), FormatError> {
    let file = File::open(path).map_err(|e| FormatError::io(path, "open", e))?;
    let meta = file.metadata().map_err(|e| FormatError::io(path, "open", e))?;
    if !meta.is_file() {
        return Err(FormatError::Unsupported {
            path: path.to_owned(),
            line: None,
            what: "reading a Skein binary graph from a pipe or device across ranks (the \
                   ranks read a regular file by offset; copy it to a file)"
                .to_owned(),
        });
    }
    let layout = binary::read_layout(&file, path)?;
    Ok((file, layout))
}

impl EdgeSource for SkgSource {
    fn num_vertices(&self) -> u64 {
        self.layout.num_vertices
    }

    fn num_edges(&self) -> u64 {
        self.layout.num_edges
    }

    fn share(&self, rank: usize, ranks: usize) -> Range<u64> {
        rank_edges(self.layout.num_edges, rank, ranks)
    }

    fn fill(&mut self, lo: u64, src: &mut [u64], dst: &mut [u64], w: &mut [f32]) -> usize {
        if self.final_refusal {
            return 0;
        }
        match self.try_fill(lo, src, dst, w) {
            Ok(true) => src.len(),
            Ok(false) => 0,
            Err(e) => {
                self.refuse(0, &e);
                self.final_refusal = true;
                0
            }
        }
    }

    fn refusal(&mut self) -> Option<Refusal> {
        if let Some(h) = self.checksum.take() {
            let verdict = h.join().unwrap_or_else(|_| {
                Err(FormatError::io(
                    &self.path,
                    "read",
                    std::io::Error::other("the checksum thread panicked"),
                ))
            });
            if let Err(e) = verdict {
                self.refuse(0, &e);
            }
        }
        self.refusal.clone()
    }
}

/// Edges per chunk a text reader hands to the rounds (5 MiB of edges).
pub const TEXT_CHUNK: usize = 1 << 18;

/// Opens the graph at `path` across the ranks (collective): a `.skg` file as an
/// [`SkgSource`], any other format as a [`TextSource`] (module docs). Rank 0 tells the
/// format (as [`crate::formats::read_edges_detected`] does); the same error on every rank
/// when the input is refused.
pub fn open_file_source<E: Exchange + ?Sized>(
    path: &Path,
    ex: &mut E,
) -> Result<Box<dyn EdgeSource + Send>, DistError> {
    // Rank 0: the format of a regular file; `None` for a pipe or standard input (told by
    // the reader from what it reads).
    let probe = if ex.rank() == 0 {
        formats::input_len(path).and_then(|len| match len {
            Some(_) => formats::detect_format(path).map(Some),
            None => Ok(None),
        })
    } else {
        Ok(None)
    };
    agree(ex, probe.as_ref().err().map(|e| Refusal::from_error(0, e)))?;
    let format = probe.map_err(|e| DistError::Input(e.to_string()))?;
    let binary = u64::from(format == Some(Format::Binary));
    if super::source::broadcast_words(ex, 0, &[binary])?.first() == Some(&1) {
        Ok(Box::new(SkgSource::open(path, ex)?))
    } else {
        Ok(Box::new(TextSource::open(path, format, ex)?))
    }
}

/// A chunk of edges from the reader thread.
struct Chunk {
    src: Vec<u64>,
    dst: Vec<u64>,
    w: Option<Vec<f32>>,
}

/// A text graph file, a pipe or standard input, read by rank 0 alone (module docs):
/// rank 0 hands out every edge in input order, the other ranks none.
#[derive(Debug)]
pub struct TextSource {
    path: PathBuf,
    num_vertices: u64,
    num_edges: u64,
    weighted: bool,
    /// Rank 0: the chunks of the reader thread, the one being handed out and how far.
    rx: Option<Receiver<Chunk>>,
    pending: Option<(Chunk, usize)>,
    reader: Option<JoinHandle<Result<(), FormatError>>>,
    refusal: Option<Refusal>,
    /// Rank 0: the copy of a pipe's bytes, removed when the source is dropped.
    copy: Option<TempCopy>,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chunk({} edges)", self.src.len())
    }
}

/// A temporary file, removed on drop.
#[derive(Debug)]
struct TempCopy(PathBuf);

impl Drop for TempCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl TextSource {
    /// Reads the text graph at `path` on rank 0 (collective; `format` as rank 0 told it,
    /// `None` for a pipe or standard input): a first pass checks every line as the
    /// one-process reader does and counts the vertices and edges (a pipe's bytes are
    /// copied to a temporary file on the way), the ranks agree on the verdict and learn
    /// the counts, and rank 0 starts a second pass on a thread of its own that hands the
    /// edges to the rounds in chunks of [`TEXT_CHUNK`].
    pub fn open<E: Exchange + ?Sized>(
        path: &Path,
        format: Option<Format>,
        ex: &mut E,
    ) -> Result<TextSource, DistError> {
        TextSource::open_chunked(path, format, TEXT_CHUNK, ex)
    }

    /// [`TextSource::open`] with chunks of `chunk` edges.
    fn open_chunked<E: Exchange + ?Sized>(
        path: &Path,
        format: Option<Format>,
        chunk: usize,
        ex: &mut E,
    ) -> Result<TextSource, DistError> {
        let mut counts = None;
        let mut copy = None;
        let mut failed = None;
        if ex.rank() == 0 {
            match first_pass(path, format) {
                Ok((format, n, m, weighted, c)) => {
                    counts = Some((format, n, m, weighted));
                    copy = c;
                }
                Err(e) => failed = Some(Refusal::from_error(0, &e)),
            }
        }
        agree(ex, failed)?;
        let words = counts.map_or([0; 3], |(_, n, m, w)| [n, m, u64::from(w)]);
        let got = super::source::broadcast_words(ex, 0, &words)?;
        let &[num_vertices, num_edges, weighted] = &got[..] else {
            return Err(DistError::Exchange(format!("graph counts: {got:?}")));
        };
        let mut source = TextSource {
            path: path.to_owned(),
            num_vertices,
            num_edges,
            weighted: weighted != 0,
            rx: None,
            pending: None,
            reader: None,
            refusal: None,
            copy,
        };
        if let Some((format, ..)) = counts {
            let input = source.copy.as_ref().map_or_else(|| path.to_owned(), |c| c.0.clone());
            let name = path.to_owned();
            let (tx, rx) = sync_channel::<Chunk>(2);
            source.rx = Some(rx);
            source.reader = Some(std::thread::spawn(move || {
                let mut send = |s: &[u64], d: &[u64], w: Option<&[f32]>| {
                    let chunk =
                        Chunk { src: s.to_vec(), dst: d.to_vec(), w: w.map(<[f32]>::to_vec) };
                    tx.send(chunk).map_err(|_| {
                        FormatError::io(&name, "read", std::io::Error::other("the build stopped"))
                    })
                };
                let mut sink = EdgeSink::chunked(chunk, &mut send);
                formats::read_into(&input, Some(format), &|_| {}, &mut sink, None).map(|_| ())
            }));
        }
        Ok(source)
    }

    /// Whether the file stores weights.
    pub fn weighted(&self) -> bool {
        self.weighted
    }

    /// The next chunk's edges into `src..`, from `at`; `None` when the reader is done.
    fn next_chunk(&mut self) -> Option<(Chunk, usize)> {
        self.rx.as_ref()?.recv().ok().map(|c| (c, 0))
    }

    /// Joins the reader thread (after draining what it still sends): its error, if any.
    fn join_reader(&mut self) -> Result<(), FormatError> {
        if let Some(rx) = self.rx.take() {
            while rx.recv().is_ok() {}
        }
        match self.reader.take() {
            Some(h) => h.join().unwrap_or_else(|_| {
                Err(FormatError::io(
                    &self.path,
                    "read",
                    std::io::Error::other("the reader thread panicked"),
                ))
            }),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: &FormatError) {
        if self.refusal.is_none() {
            self.refusal = Some(Refusal::from_error(0, e));
        }
    }
}

/// The first pass over a text input on rank 0: its format, vertex count, edge count,
/// whether it is weighted, and the copy of a pipe's bytes.
#[allow(clippy::type_complexity)]
fn first_pass(
    path: &Path,
    format: Option<Format>,
) -> Result<(Format, u64, u64, bool, Option<TempCopy>), FormatError> {
    let mut count = 0u64;
    let mut counted = |s: &[u64], _: &[u64], _: Option<&[f32]>| {
        count += s.len() as u64;
        Ok(())
    };
    let mut sink = EdgeSink::chunked(TEXT_CHUNK, &mut counted);
    let (format, el, copy) = if format.is_some() {
        let (f, el) = formats::read_into(path, format, &|_| {}, &mut sink, None)?;
        (f, el, None)
    } else {
        let name = std::env::temp_dir().join(format!(
            "skein-input-{}-{}.copy",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let copy = TempCopy(name);
        let file = File::create(&copy.0).map_err(|e| FormatError::io(&copy.0, "create", e))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let (f, el) = formats::read_into(path, None, &|_| {}, &mut sink, Some(&mut w))?;
        use std::io::Write;
        w.flush().map_err(|e| FormatError::io(&copy.0, "write", e))?;
        (f, el, Some(copy))
    };
    Ok((format, el.num_vertices, count, el.weights.is_some(), copy))
}

impl EdgeSource for TextSource {
    fn num_vertices(&self) -> u64 {
        self.num_vertices
    }

    fn num_edges(&self) -> u64 {
        self.num_edges
    }

    fn share(&self, rank: usize, _ranks: usize) -> Range<u64> {
        if rank == 0 {
            0..self.num_edges
        } else {
            self.num_edges..self.num_edges
        }
    }

    fn fill(&mut self, _lo: u64, src: &mut [u64], dst: &mut [u64], w: &mut [f32]) -> usize {
        if self.refusal.is_some() {
            return 0;
        }
        let mut done = 0;
        while done < src.len() {
            let (chunk, at) = match self.pending.take() {
                Some(p) => p,
                None => match self.next_chunk() {
                    Some(p) => p,
                    None => {
                        // The second pass ended early: its error, or a file that changed.
                        let e = self.join_reader().err().unwrap_or_else(|| {
                            FormatError::io(
                                &self.path,
                                "read",
                                std::io::Error::other(
                                    "the input changed while it was read (fewer edges than \
                                     the first reading found)",
                                ),
                            )
                        });
                        self.fail(&e);
                        return 0;
                    }
                },
            };
            let k = (chunk.src.len() - at).min(src.len() - done);
            src[done..done + k].copy_from_slice(&chunk.src[at..at + k]);
            dst[done..done + k].copy_from_slice(&chunk.dst[at..at + k]);
            match &chunk.w {
                Some(cw) => w[done..done + k].copy_from_slice(&cw[at..at + k]),
                None => w[done..done + k].fill(1.0),
            }
            done += k;
            if at + k < chunk.src.len() {
                self.pending = Some((chunk, at + k));
            }
        }
        done
    }

    fn refusal(&mut self) -> Option<Refusal> {
        if let Err(e) = self.join_reader() {
            self.fail(&e);
        }
        self.refusal.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::distributed::source::build_from_source;
    pub(crate) use crate::distributed::source::tests::on_ranks;
    use crate::distributed::{LocalCsr, MemExchange};
    use crate::formats::{self, Format};
    use crate::graph::{Csr, EdgeList};
    use crate::kronecker::{self, KroneckerParams};

    /// A file name of its own in the temporary directory.
    pub(crate) fn temp(name: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        std::env::temp_dir().join(format!("skein-dfiles-{}-{k}-{name}", std::process::id()))
    }

    /// A small graph with self-loops, repeats and weights.
    pub(crate) fn graph() -> EdgeList {
        let mut el = kronecker::generate(&KroneckerParams::new(7, 4, 5, 6).unwrap());
        el.num_vertices += 3; // isolated vertices at the end
        el
    }

    /// Uneven boundaries over `n` vertices for `ranks` ranks (the middle rank of three
    /// owns nothing).
    pub(crate) fn bounds(n: u64, ranks: usize) -> Vec<u64> {
        match ranks {
            1 => vec![0, n],
            2 => vec![0, n / 3, n],
            _ => vec![0, n / 2, n / 2, n],
        }
    }

    /// The rows of the one-process reader and [`Csr`] for the ranges of `bounds`.
    pub(crate) fn expected(path: &Path, bounds: &[u64]) -> Vec<LocalCsr> {
        let csr = Csr::from_edge_list(&formats::read_edges(path).unwrap());
        bounds.windows(2).map(|w| LocalCsr::from_csr(&csr, w[0]..w[1])).collect()
    }

    /// Every rank's rows from the source `open` makes on it (or its error), with the
    /// boundaries of [`bounds`] and rounds of `round` edges.
    pub(crate) fn build_on_ranks<S: EdgeSource>(
        ranks: usize,
        round: u64,
        open: impl Fn(&mut MemExchange) -> Result<S, DistError> + Sync,
    ) -> Vec<Result<LocalCsr, String>> {
        on_ranks(ranks, |ex| {
            let mut s = open(ex).map_err(|e| e.to_string())?;
            let b = bounds(s.num_vertices(), ranks);
            build_from_source(&mut s, &b, round, ex, &|_| {})
                .map(|(g, _)| g)
                .map_err(|e| e.to_string())
        })
    }

    fn build_skg(path: &Path, ranks: usize, round: u64) -> Vec<Result<LocalCsr, String>> {
        build_on_ranks(ranks, round, |ex| SkgSource::open(path, ex))
    }

    /// Rows identical to the one-process CSR's, for 1, 2 and 3 ranks and several round
    /// sizes, weighted and not.
    #[test]
    fn skg_rows_match_one_process() {
        let mut el = graph();
        for weighted in [true, false] {
            if !weighted {
                el.weights = None;
            }
            let path = temp("g.skg");
            formats::write_edges(&path, &el, Format::Binary).unwrap();
            for ranks in 1..=3 {
                let want = expected(&path, &bounds(el.num_vertices, ranks));
                for round in [1, 37, 1 << 20] {
                    let got: Vec<LocalCsr> =
                        build_skg(&path, ranks, round).into_iter().map(Result::unwrap).collect();
                    assert_eq!(got, want, "{ranks} ranks, rounds of {round}, {weighted}");
                }
            }
            std::fs::remove_file(&path).unwrap();
        }
    }

    /// A corrupted file (one byte changed, checksum wrong), a truncated one and a foreign
    /// one are refused on every rank with the one-process reader's message.
    #[test]
    fn bad_skg_refused_on_every_rank() {
        let el = graph();
        let path = temp("g.skg");
        formats::write_edges(&path, &el, Format::Binary).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        let mut corrupt = good.clone();
        corrupt[64 + 4 * el.len() + 9] ^= 0x10; // a dst id
        cases.push(("checksum mismatch", corrupt));
        // A weight made negative, checksum fixed: the reader's edge error.
        let mut neg = good.clone();
        let at = 64 + 8 * el.len() + 4 * 200 + 3;
        neg[at] |= 0x80;
        let body = neg.len() - 8;
        let sum = binary::binary_checksum(&neg[..body]).to_le_bytes();
        neg[body..].copy_from_slice(&sum);
        cases.push(("edge 200: weight", neg));
        cases.push(("truncated", good[..good.len() - 5].to_vec()));
        cases.push(("not a Skein binary graph", b"u v\n1 2\n".to_vec()));
        for (what, bytes) in cases {
            std::fs::write(&path, &bytes).unwrap();
            let one = formats::read_edges_as(&path, Format::Binary, &|_| {}).unwrap_err();
            assert!(one.to_string().contains(what), "{one}");
            for ranks in 1..=3 {
                for r in build_skg(&path, ranks, 50) {
                    assert_eq!(r.unwrap_err(), one.to_string(), "{what}, {ranks} ranks");
                }
            }
        }
        std::fs::remove_file(&path).unwrap();
    }
}

#[cfg(test)]
mod text_tests {
    use super::tests::{bounds, build_on_ranks, expected, graph, on_ranks, temp};
    use super::*;
    use crate::distributed::source::build_from_source;
    use crate::distributed::LocalCsr;

    fn build_text(
        path: &Path,
        format: Option<Format>,
        chunk: usize,
        ranks: usize,
        round: u64,
    ) -> Vec<Result<LocalCsr, String>> {
        build_on_ranks(ranks, round, |ex| TextSource::open_chunked(path, format, chunk, ex))
    }

    /// Rows identical to the one-process CSR's for every text format, 1, 2 and 3 ranks,
    /// chunks and rounds that do not line up.
    #[test]
    fn text_rows_match_one_process() {
        let mut el = graph();
        // Whole weights, so that `.gr` holds them.
        el.weights = el.weights.map(|w| w.iter().map(|x| (x * 100.0).floor()).collect());
        for format in [Format::El, Format::Wel, Format::Mtx, Format::Gr] {
            let path = temp(&format!("g.{}", format.extension()));
            formats::write_edges(&path, &el, format).unwrap();
            for ranks in 1..=3 {
                let want = expected(&path, &bounds(el.num_vertices, ranks));
                for (chunk, round) in [(5, 7), (TEXT_CHUNK, 1 << 20)] {
                    let got: Vec<LocalCsr> = build_text(&path, Some(format), chunk, ranks, round)
                        .into_iter()
                        .map(Result::unwrap)
                        .collect();
                    assert_eq!(got, want, "{format}, {ranks} ranks, {chunk}/{round}");
                }
            }
            std::fs::remove_file(&path).unwrap();
        }
    }

    /// A bad line is refused on every rank with the one-process message; so is a file
    /// that is not there; `open_file_source` tells a `.el` without directives (its vertex
    /// count is the largest id + 1) and reads it.
    #[test]
    fn text_errors_on_every_rank_and_detection() {
        let path = temp("bad.wel");
        std::fs::write(&path, "# c\n0 1 0.5\n2 3 -1\n4 5 1\n").unwrap();
        let one = formats::read_edges(&path).unwrap_err().to_string();
        assert!(one.contains(":3: weight -1"), "{one}");
        for ranks in 1..=3 {
            for r in build_text(&path, Some(Format::Wel), 1, ranks, 2) {
                assert_eq!(r.unwrap_err(), one);
            }
        }
        std::fs::remove_file(&path).unwrap();
        let missing = on_ranks(2, |ex| open_file_source(&path, ex).map(|_| ()).unwrap_err());
        assert!(missing.iter().all(|e| e.to_string().contains("cannot open")), "{missing:?}");
        assert_eq!(missing[0].to_string(), missing[1].to_string());

        let path = temp("small.el");
        std::fs::write(&path, "0 1\n1 2\n\n7 1\n2 2\n").unwrap();
        let got = on_ranks(2, |ex| {
            let mut s = open_file_source(&path, ex).unwrap();
            assert_eq!((s.num_vertices(), s.num_edges()), (8, 4));
            build_from_source(&mut *s, &[0, 2, 8], 3, ex, &|_| {}).unwrap().0
        });
        assert_eq!(got, expected(&path, &[0, 2, 8]));
        std::fs::remove_file(&path).unwrap();
    }

    /// A named pipe is read once, by rank 0 (its bytes kept in a temporary file for the
    /// second pass), and gives the file's rows; its format is told from its content.
    #[test]
    fn pipe_read_by_rank_zero() {
        let path = temp("g.wel");
        let el = graph();
        formats::write_edges(&path, &el, Format::Wel).unwrap();
        let fifo = temp("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("mkfifo is not available: test skipped");
            return;
        }
        let bytes = std::fs::read(&path).unwrap();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(&fifo, bytes).unwrap())
        };
        let want = expected(&path, &bounds(el.num_vertices, 3));
        let got: Vec<LocalCsr> = on_ranks(3, |ex| {
            let mut s = open_file_source(&fifo, ex).unwrap();
            let b = bounds(s.num_vertices(), 3);
            build_from_source(&mut *s, &b, 50, ex, &|_| {}).unwrap().0
        });
        writer.join().unwrap();
        assert_eq!(got, want);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&fifo).unwrap();
    }
}
