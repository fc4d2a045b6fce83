//! Job files: what `skein run JOB.toml` reads, and the checks that turn one into a [`Job`].
//!
//! The format is [`JOB_HELP`] (also printed by `skein run --help`). Unknown keys, wrong
//! types (anywhere in an array too: `seeds = [7, 8, "x"]`), arrays of the wrong length
//! (`seeds` takes exactly two) and impossible values are errors that name the file, the
//! key and the line. Counts are bounded by [`crate::limits`], the same limits as the
//! command line's; a Kronecker graph must fit in available memory. `--set
//! section.key=value` overrides a key before checking, as if the file said so; an error
//! about an overridden key names the `--set` instead of a line. Job files larger than
//! [`MAX_JOB_FILE_BYTES`] are refused unread.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::names::{EngineName, Kernel};

use crate::limits;
use skein_generators::kronecker::{KroneckerParams, ParamError};

/// The job file format, for `skein run --help`.
pub(crate) const JOB_HELP: &str = "\
A job file is TOML with four sections; only [graph] is required:

  [graph]
  generator = \"kronecker\"   # or: file = \"graphs/web.wel\" (relative to the job file)
  scale = 20                # kronecker only: 1 to 40, memory permitting
  edgefactor = 16           # 1 to 1024 (Graph500 default 16)
  seeds = [2, 3]            # exactly two (Graph500 default)
  [job]
  kernel = \"sssp\"           # sssp | bfs | pagerank | cc (pagerank and cc take no roots)
  iterations = 20           # pagerank: at most this many iterations (1 to 100000)
  tolerance = 1e-4          # pagerank: stop when an iteration's L1 change is below this
  roots = 64                # first N Graph500 roots (at most one per vertex), or a list
                            # of vertex ids such as [1, 5, 9]
  engine = \"skein\"          # skein | rayon | seq
  validate = true
  [runtime]
  workers = 2               # skein workers or rayon threads (1 to 4096, memory permitting)
  fibers = 8                # fibers per skein worker (bounded by memory and vm.max_map_count)
  pin = false               # pin workers to cores
  worker_threads = 2        # optional: threads that run a process's skein workers, which
                            # share them (1 to workers; 0 or absent: SKEIN_WORKER_THREADS,
                            # else as many as the cores when the workers outnumber them)
  ranks = 2                 # optional: the mpirun rank count this job expects (rack mode;
                            # workers is then per rank); a different count is an error.
                            # Under mpirun the graph is split: each rank keeps only its own
                            # vertices' rows. A Kronecker graph: each rank generates a share
                            # of the edges. A .skg file: each rank reads a share by offset
                            # (rank 0 also checks the checksum). A text file, pipe or `-`:
                            # rank 0 reads it (twice: check, then hand out in rounds).
  transport = \"auto\"        # under mpirun: how ranks move requests: auto | shm | mpi |
                            # verbs (SKEIN_TRANSPORT's choices; auto: shared-memory rings
                            # on one node, RDMA verbs across nodes with a device and the
                            # `rdma` feature, else MPI). The one used is in the report.
  [report]
  json = \"reports/sssp-s20.json\"
  dump = \"reports/sssp-s20.dump\"   # the first root's result, one line per vertex

The dump has one line per vertex, in vertex order: `v value parent`. value is the BFS level
(-1 unreached) or the SSSP distance as 8 hex digits of its IEEE-754 binary32 bits (bf800000,
the bits of -1.0, unreached); parent is -1 when unreached, and the root is its own parent.
Reports and dumps are written atomically (a temporary file renamed over the path).";

/// Largest job file read (a job is a few lines of TOML; this keeps `skein run /dev/zero`
/// from reading forever).
pub(crate) const MAX_JOB_FILE_BYTES: u64 = 1 << 20;

/// The graph a job runs on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum JobGraph {
    /// The Graph500 Kronecker generator.
    Kronecker { scale: u32, edgefactor: u32, seeds: [u64; 2] },
    /// A graph file (`.el`, `.wel`, `.mtx`, `.skg`), relative paths taken from the job file's folder.
    File { path: PathBuf },
}

/// Search roots: the first N of the Graph500 root sequence, or an explicit list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum Roots {
    Count(u64),
    List(Vec<u64>),
}

impl<'de> Deserialize<'de> for Roots {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Roots, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Roots;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of roots or a list of vertex ids such as [1, 5, 9]")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Roots, E> {
                Ok(Roots::Count(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Roots, E> {
                u64::try_from(v).map(Roots::Count).map_err(|_| {
                    E::invalid_value(serde::de::Unexpected::Signed(v), &"at least 1 root")
                })
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Roots, A::Error> {
                let mut list = Vec::new();
                // Every element must be a vertex id: a wrong type is an error, not dropped.
                while let Some(v) = seq.next_element::<u64>()? {
                    list.push(v);
                }
                Ok(Roots::List(list))
            }
        }
        d.deserialize_any(V)
    }
}

/// A checked job, every default filled in.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Job {
    /// Where the job came from (for messages and the report).
    pub(crate) source: PathBuf,
    pub(crate) graph: JobGraph,
    pub(crate) kernel: Kernel,
    pub(crate) roots: Roots,
    pub(crate) engine: EngineName,
    pub(crate) validate: bool,
    pub(crate) workers: usize,
    pub(crate) fibers: usize,
    pub(crate) pin: bool,
    /// How ranks move requests under mpirun (`[runtime] transport`; `None`: the runtime's
    /// default, `SKEIN_TRANSPORT` or auto).
    #[serde(serialize_with = "transport_name")]
    pub(crate) transport: Option<skein::RackTransport>,
    /// Threads that run a process's skein workers (`[runtime] worker_threads`; `None`: the
    /// runtime's default, `SKEIN_WORKER_THREADS` or as many as the cores when the workers
    /// outnumber them).
    pub(crate) worker_threads: Option<usize>,
    pub(crate) json: Option<PathBuf>,
    pub(crate) dump: Option<PathBuf>,
    /// PageRank: at most this many iterations.
    pub(crate) iterations: u32,
    /// PageRank: stop when an iteration's L1 change is below this.
    pub(crate) tolerance: f64,
}

// ---- the file's shape -------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    graph: Option<Spanned<GraphSection>>,
    job: Option<JobSection>,
    runtime: Option<RuntimeSection>,
    report: Option<ReportSection>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphSection {
    generator: Option<Spanned<String>>,
    file: Option<Spanned<PathBuf>>,
    scale: Option<Spanned<u32>>,
    edgefactor: Option<Spanned<u32>>,
    /// A list, so that a wrong length is an error instead of extra seeds being dropped.
    seeds: Option<Spanned<Vec<u64>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSection {
    kernel: Option<Kernel>,
    roots: Option<Spanned<Roots>>,
    engine: Option<EngineName>,
    validate: Option<bool>,
    iterations: Option<Spanned<u32>>,
    tolerance: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeSection {
    workers: Option<Spanned<usize>>,
    fibers: Option<Spanned<usize>>,
    pin: Option<bool>,
    ranks: Option<Spanned<usize>>,
    transport: Option<Spanned<String>>,
    worker_threads: Option<Spanned<usize>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportSection {
    json: Option<Spanned<PathBuf>>,
    dump: Option<Spanned<PathBuf>>,
}

// ---- errors ----------------------------------------------------------------------

/// A job file the runner refuses, with where and why.
#[derive(Debug)]
pub(crate) struct JobError {
    file: PathBuf,
    /// `line N` or `--set key` or nothing (the file as a whole).
    place: Option<String>,
    key: Option<String>,
    message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(place) = &self.place {
            write!(f, ":{place}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for JobError {}

/// Error-building context: the text (for line numbers) and which keys came from `--set`.
struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
    overridden: BTreeSet<String>,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() + 1
    }

    /// An error about `key`, whose value sits at `span` in the (possibly overridden) text.
    fn at(&self, key: &str, span: std::ops::Range<usize>, message: impl Into<String>) -> JobError {
        let place = if self.overridden.contains(key) {
            format!("--set {key}")
        } else {
            format!("line {}", self.line_of(span.start))
        };
        JobError {
            file: self.file.to_path_buf(),
            place: Some(place),
            key: Some(key.to_string()),
            message: message.into(),
        }
    }

    fn whole(&self, key: Option<&str>, message: impl Into<String>) -> JobError {
        JobError {
            file: self.file.to_path_buf(),
            place: None,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

// ---- loading ---------------------------------------------------------------------

/// Reads, overrides and checks a job file.
pub(crate) fn load(path: &Path, sets: &[String]) -> Result<Job, JobError> {
    let text = read_text(path).map_err(|message| JobError {
        file: path.to_path_buf(),
        place: None,
        key: None,
        message,
    })?;
    parse(path, &text, sets)
}

/// The text of a job file, at most [`MAX_JOB_FILE_BYTES`] of UTF-8.
fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let cannot = |e: std::io::Error| format!("cannot read the job file: {e}");
    let file = std::fs::File::open(path).map_err(cannot)?;
    if file.metadata().map_err(cannot)?.is_dir() {
        return Err("cannot read the job file: it is a folder".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_JOB_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_JOB_FILE_BYTES {
        return Err(format!(
            "the job file is larger than {} KiB; a job file is a few lines of TOML",
            MAX_JOB_FILE_BYTES / 1024
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "the job file is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Checks job text; `path` names it in errors and anchors relative graph/report paths.
pub(crate) fn parse(path: &Path, text: &str, sets: &[String]) -> Result<Job, JobError> {
    let (text, overridden) = apply_sets(path, text, sets)?;
    let ctx = Ctx { file: path, text: &text, overridden };
    let raw: JobFile = toml::from_str(&text).map_err(|e| {
        let (place, key) = match e.span() {
            Some(span) => {
                let key = key_at(&text, span.start);
                let place = match &key {
                    Some(k) if ctx.overridden.contains(k) => format!("--set {k}"),
                    _ => format!("line {}", ctx.line_of(span.start)),
                };
                (Some(place), key)
            }
            None => (None, None),
        };
        JobError { file: path.to_path_buf(), place, key, message: e.message().to_string() }
    })?;
    check(&ctx, raw)
}

/// Applies `--set section.key=value` overrides to the document text.
fn apply_sets(
    path: &Path,
    text: &str,
    sets: &[String],
) -> Result<(String, BTreeSet<String>), JobError> {
    let mut overridden = BTreeSet::new();
    if sets.is_empty() {
        return Ok((text.to_string(), overridden));
    }
    let bad =
        |message: String| JobError { file: path.to_path_buf(), place: None, key: None, message };
    let mut doc: toml_edit::DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| bad(format!("not valid TOML: {e}")))?;
    for set in sets {
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| bad(format!("--set {set}: expected section.key=value")))?;
        let key = key.trim();
        let (section, name) = key
            .split_once('.')
            .filter(|(s, n)| !s.is_empty() && !n.is_empty() && !n.contains('.'))
            .ok_or_else(|| bad(format!("--set {set}: expected section.key=value")))?;
        // A bare word that is not TOML (e.g. `engine=rayon`) is taken as a string.
        let value: toml_edit::Value = value
            .trim()
            .parse()
            .unwrap_or_else(|_| toml_edit::Value::from(value.trim().to_string()));
        let table = doc
            .entry(section)
            .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
            .as_table_mut()
            .ok_or_else(|| bad(format!("--set {set}: `{section}` is not a table")))?;
        table[name] = toml_edit::Item::Value(value);
        overridden.insert(key.to_string());
    }
    Ok((doc.to_string(), overridden))
}

/// The dotted key whose value starts at `offset`, found from the text (best effort).
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[line_start..];
    let line = line.split('\n').next().unwrap_or("");
    let name = line.split('=').next()?.trim();
    if name.starts_with('[') {
        return Some(name.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    }
    if name.is_empty() || !line.contains('=') {
        return None;
    }
    let section = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .map(|l| l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
    Some(match section {
        Some(s) => format!("{s}.{name}"),
        None => name.to_string(),
    })
}

fn check(ctx: &Ctx<'_>, raw: JobFile) -> Result<Job, JobError> {
    let graph = raw.graph.ok_or_else(|| {
        ctx.whole(
            Some("graph"),
            "missing [graph] section: say `generator = \"kronecker\"` with `scale = N`, \
             or `file = \"PATH\"`",
        )
    })?;
    let graph_span = graph.span();
    let graph = graph.into_inner();
    let base = ctx.file.parent().unwrap_or(Path::new(""));
    let graph = match (graph.generator, graph.file) {
        (Some(g), Some(_)) => {
            return Err(ctx.at(
                "graph.generator",
                g.span(),
                "give either `generator` or `file`, not both",
            ))
        }
        (None, None) => {
            return Err(ctx.at(
                "graph",
                graph_span,
                "the graph needs `generator = \"kronecker\"` or `file = \"PATH\"`",
            ))
        }
        (None, Some(file)) => {
            for (key, given) in [
                ("graph.scale", graph.scale.as_ref().map(Spanned::span)),
                ("graph.edgefactor", graph.edgefactor.as_ref().map(Spanned::span)),
                ("graph.seeds", graph.seeds.as_ref().map(Spanned::span)),
            ] {
                if let Some(span) = given {
                    return Err(ctx.at(key, span, "only a generated graph takes this key"));
                }
            }
            let span = file.span();
            let path = file.into_inner();
            if path.as_os_str().is_empty() {
                return Err(ctx.at("graph.file", span, "the graph file path is empty"));
            }
            JobGraph::File {
                path: if path.is_absolute() { path } else { normalize(&base.join(path)) },
            }
        }
        (Some(generator), None) => {
            if generator.get_ref() != "kronecker" {
                return Err(ctx.at(
                    "graph.generator",
                    generator.span(),
                    format!("unknown generator `{}`, expected `kronecker`", generator.get_ref()),
                ));
            }
            let scale = graph.scale.ok_or_else(|| {
                ctx.at("graph.scale", generator.span(), "a kronecker graph needs `scale`")
            })?;
            let (scale_span, scale) = (scale.span(), scale.into_inner());
            let (edgefactor_span, edgefactor) = match graph.edgefactor {
                Some(e) => (e.span(), e.into_inner()),
                None => (scale_span.clone(), 16),
            };
            let seeds = match graph.seeds {
                None => [2, 3],
                Some(s) => {
                    let span = s.span();
                    let list = s.into_inner();
                    <[u64; 2]>::try_from(list.as_slice()).map_err(|_| {
                        ctx.at(
                            "graph.seeds",
                            span,
                            format!("expected two seeds such as [2, 3], found {}", list.len()),
                        )
                    })?
                }
            };
            match KroneckerParams::new(scale, edgefactor, seeds[0], seeds[1]) {
                Ok(_) => {}
                Err(e @ ParamError::Scale(_)) => {
                    return Err(ctx.at("graph.scale", scale_span, e.to_string()))
                }
                Err(e) => return Err(ctx.at("graph.edgefactor", edgefactor_span, e.to_string())),
            }
            limits::check_kronecker_run(scale, edgefactor)
                .map_err(|e| ctx.at("graph.scale", scale_span, e))?;
            JobGraph::Kronecker { scale, edgefactor, seeds }
        }
    };
    // Vertices known before the graph is built (Kronecker), for early checks of roots.
    let vertices = match &graph {
        JobGraph::Kronecker { scale, .. } => Some(1u64 << scale),
        JobGraph::File { .. } => None,
    };

    let job = raw.job.unwrap_or(JobSection {
        kernel: None,
        roots: None,
        engine: None,
        validate: None,
        iterations: None,
        tolerance: None,
    });
    let defaults = skein_generators::analytics::PageRankParams::default();
    let iterations = match job.iterations {
        None => defaults.max_iterations,
        Some(i) => {
            let span = i.span();
            let i = i.into_inner();
            if !(1..=100_000).contains(&i) {
                return Err(ctx.at("job.iterations", span, "must be 1 to 100000"));
            }
            i
        }
    };
    let tolerance = match job.tolerance {
        None => defaults.tolerance,
        Some(t) => {
            let span = t.span();
            let t = t.into_inner();
            if !(t >= 0.0 && t.is_finite()) {
                return Err(ctx.at("job.tolerance", span, "must be a finite number >= 0"));
            }
            t
        }
    };
    let roots = match job.roots {
        None => Roots::Count(limits::DEFAULT_ROOTS),
        Some(r) => {
            let span = r.span();
            match r.into_inner() {
                Roots::Count(n) => {
                    limits::check_roots(n, vertices.unwrap_or(u64::MAX))
                        .map_err(|e| ctx.at("job.roots", span, e))?;
                    Roots::Count(n)
                }
                Roots::List(l) if l.is_empty() => {
                    return Err(ctx.at("job.roots", span, "the root list is empty"))
                }
                Roots::List(l) => {
                    if let Some(n) = vertices {
                        if let Some(bad) = l.iter().find(|&&r| r >= n) {
                            return Err(ctx.at(
                                "job.roots",
                                span,
                                format!(
                                    "root {bad} is not a vertex of the graph (it has {n} \
                                     vertices: 0..{n})"
                                ),
                            ));
                        }
                    }
                    Roots::List(l)
                }
            }
        }
    };
    let engine = job.engine.unwrap_or(EngineName::Skein);
    let runtime = raw.runtime.unwrap_or(RuntimeSection {
        workers: None,
        fibers: None,
        pin: None,
        ranks: None,
        transport: None,
        worker_threads: None,
    });
    if let Some(r) = &runtime.ranks {
        let (want, have) = (*r.get_ref(), skein::ranks());
        if want == 0 {
            return Err(ctx.at("runtime.ranks", r.span(), "expected 1 or more ranks"));
        }
        if want != have {
            return Err(ctx.at(
                "runtime.ranks",
                r.span(),
                format!(
                    "this job expects {want} rank(s) but runs on {have}: launch it with \
                     `mpirun --allow-run-as-root --oversubscribe --bind-to none -np {want} skein \
                     run ...` (a build with --features mpi), or remove the key"
                ),
            ));
        }
        if want > 1 && engine != EngineName::Skein {
            return Err(ctx.at(
                "runtime.ranks",
                r.span(),
                format!("only the skein engine runs across ranks, not {engine}"),
            ));
        }
    }
    let transport = match &runtime.transport {
        None => None,
        Some(t) => Some(
            t.get_ref()
                .parse::<skein::RackTransport>()
                .map_err(|e| ctx.at("runtime.transport", t.span(), e))?,
        ),
    };
    let (workers, workers_span) =
        runtime.workers.map_or((2, None), |w| (*w.get_ref(), Some(w.span())));
    let (fibers, fibers_span) =
        runtime.fibers.map_or((8, None), |f| (*f.get_ref(), Some(f.span())));
    let slot = skein_algorithms::EngineOptions::default().slot_bytes;
    limits::check_engine(engine == EngineName::Skein, workers, fibers, slot).map_err(|e| {
        // Blame the key the message is about, else the one the file gave (both
        // together exceed the machine when it is workers x fibers or memory).
        let workers = ("runtime.workers", workers_span.clone());
        let fibers = ("runtime.fibers", fibers_span.clone());
        let (key, span) = if e.starts_with("fibers") {
            fibers
        } else if e.starts_with("workers") || e.starts_with("threads") {
            workers
        } else if workers_span.is_none() && fibers_span.is_some() {
            fibers
        } else {
            workers
        };
        match span {
            Some(span) => ctx.at(key, span, e),
            None => ctx.whole(Some(key), e),
        }
    })?;
    let worker_threads = match &runtime.worker_threads {
        None => None,
        Some(t) if *t.get_ref() == 0 => None,
        Some(t) if *t.get_ref() > workers => {
            return Err(ctx.at(
                "runtime.worker_threads",
                t.span(),
                format!(
                    "{} threads for {workers} workers: at most one thread per worker (0 or \
                     no key: as many as the cores when the workers outnumber them)",
                    t.get_ref()
                ),
            ))
        }
        Some(t) => Some(*t.get_ref()),
    };
    let report = raw.report.unwrap_or(ReportSection { json: None, dump: None });
    let out_path = |key: &str, p: Option<Spanned<PathBuf>>| -> Result<Option<PathBuf>, JobError> {
        let Some(p) = p else { return Ok(None) };
        let span = p.span();
        let p = p.into_inner();
        if p.as_os_str().is_empty() {
            return Err(ctx.at(key, span, "the path is empty"));
        }
        Ok(Some(if p.is_absolute() { p } else { normalize(&base.join(p)) }))
    };
    let json = out_path("report.json", report.json)?;
    let dump = out_path("report.dump", report.dump)?;
    Ok(Job {
        source: ctx.file.to_path_buf(),
        graph,
        kernel: job.kernel.unwrap_or(Kernel::Sssp),
        roots,
        engine,
        validate: job.validate.unwrap_or(true),
        workers,
        fibers,
        pin: runtime.pin.unwrap_or(false),
        transport,
        worker_threads,
        json,
        dump,
        iterations,
        tolerance,
    })
}

/// A job's transport as its name (`null`: the default), for the report's copy of the job.
fn transport_name<S: serde::Serializer>(
    t: &Option<skein::RackTransport>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(t.name()),
        None => s.serialize_none(),
    }
}

/// `a/b/../c` → `a/c`, lexically (so messages show the path a user would write).
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    /// The template of `skein run --help` is a job file that loads, every key in its section.
    #[test]
    fn the_help_template_is_a_valid_job() {
        let template: String = super::JOB_HELP
            .lines()
            .skip_while(|l| !l.starts_with("  [graph]"))
            .take_while(|l| !l.is_empty())
            .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
            .collect();
        let dir = std::path::Path::new("/jobs");
        let job = super::parse(&dir.join("t.toml"), &template, &["runtime.ranks=1".into()])
            .unwrap_or_else(|e| panic!("{e}\n{template}"));
        assert_eq!(job.json.as_deref(), Some(dir.join("reports/sssp-s20.json").as_path()));
        assert!(job.dump.is_some());
    }

    use super::*;

    fn parse_str(text: &str, sets: &[&str]) -> Result<Job, String> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        parse(Path::new("jobs/test.toml"), text, &sets).map_err(|e| e.to_string())
    }

    const FULL: &str = r#"
[graph]
generator = "kronecker"
scale = 10
edgefactor = 8
seeds = [5, 7]
[job]
kernel = "bfs"
roots = [1, 5, 9]
engine = "rayon"
validate = false
[runtime]
workers = 3
fibers = 4
[report]
json = "out/r.json"
"#;

    #[test]
    fn full_job_parses() {
        let job = parse_str(FULL, &[]).unwrap();
        assert_eq!(job.graph, JobGraph::Kronecker { scale: 10, edgefactor: 8, seeds: [5, 7] });
        assert_eq!(job.kernel, Kernel::Bfs);
        assert_eq!(job.roots, Roots::List(vec![1, 5, 9]));
        assert_eq!(job.engine, EngineName::Rayon);
        assert!(!job.validate);
        assert_eq!((job.workers, job.fibers), (3, 4));
        assert_eq!(job.json, Some(PathBuf::from("jobs/out/r.json")));
        let job = parse_str(&FULL.replace("out/r.json", "../reports/r.json"), &[]).unwrap();
        assert_eq!(job.json, Some(PathBuf::from("reports/r.json")));
    }

    #[test]
    fn defaults_fill_in() {
        let job = parse_str("[graph]\ngenerator = \"kronecker\"\nscale = 8\n", &[]).unwrap();
        assert_eq!(job.graph, JobGraph::Kronecker { scale: 8, edgefactor: 16, seeds: [2, 3] });
        assert_eq!(job.kernel, Kernel::Sssp);
        assert_eq!(job.roots, Roots::Count(64));
        assert_eq!(job.engine, EngineName::Skein);
        assert!(job.validate);
        assert_eq!((job.workers, job.fibers), (2, 8));
    }

    #[test]
    fn ranks_must_match_the_launch() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[runtime]\n";
        // Not under mpirun: this process is 1 rank.
        let job = parse_str(&format!("{base}ranks = 1\n"), &[]).unwrap();
        assert_eq!(job.workers, 2);
        let e = parse_str(&format!("{base}ranks = 2\n"), &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 5"), "{e}");
        assert!(
            e.contains("runtime.ranks") && e.contains("expects 2 rank(s) but runs on 1"),
            "{e}"
        );
        assert!(e.contains("mpirun") && e.contains("-np 2"), "{e}");
        let e = parse_str(&format!("{base}ranks = 0\n"), &[]).unwrap_err();
        assert!(e.contains("expected 1 or more ranks"), "{e}");
    }

    #[test]
    fn file_graph_is_relative_to_the_job() {
        let job = parse_str("[graph]\nfile = \"g.wel\"\n", &[]).unwrap();
        assert_eq!(job.graph, JobGraph::File { path: PathBuf::from("jobs/g.wel") });
    }

    #[test]
    fn unknown_key_names_file_key_and_line() {
        let e = parse_str("[graph]\ngenerator = \"kronecker\"\nscale = 8\nscael = 9\n", &[])
            .unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 4"), "{e}");
        assert!(e.contains("scael"), "{e}");
    }

    #[test]
    fn wrong_type_names_line() {
        let e =
            parse_str("[graph]\ngenerator = \"kronecker\"\nscale = \"big\"\n", &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 3"), "{e}");
        assert!(e.contains("graph.scale"), "{e}");
    }

    /// `[runtime] worker_threads`: 1 to `workers` threads for the skein engine's workers; 0
    /// or no key is the runtime's default; more threads than workers are refused, naming the
    /// file, the line and the key.
    #[test]
    fn the_worker_threads_key_is_parsed_and_checked() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[runtime]\nworkers = 4\n";
        assert_eq!(parse_str(base, &[]).unwrap().worker_threads, None);
        assert_eq!(
            parse_str(&format!("{base}worker_threads = 0\n"), &[]).unwrap().worker_threads,
            None
        );
        for t in [1, 2, 4] {
            let job = parse_str(&format!("{base}worker_threads = {t}\n"), &[]).unwrap();
            assert_eq!(job.worker_threads, Some(t));
            assert_eq!(serde_json::to_value(&job).unwrap()["worker_threads"], t);
            // The skein engine runs with them; the others without (a job compared across
            // engines).
            let skein = crate::engines::EngineSpec::of_job(&job, EngineName::Skein);
            assert_eq!(skein.worker_threads, Some(t));
            assert_eq!(skein.check().unwrap(), 4);
            let rayon = crate::engines::EngineSpec::of_job(&job, EngineName::Rayon);
            assert_eq!(rayon.worker_threads, None);
        }
        let e = parse_str(&format!("{base}worker_threads = 5\n"), &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 6: key `runtime.worker_threads`"), "{e}");
        assert!(e.contains("5 threads for 4 workers: at most one thread per worker"), "{e}");
        let e = parse_str(&format!("{base}worker_threads = -1\n"), &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 6"), "{e}");
    }

    /// `[runtime] transport` takes SKEIN_TRANSPORT's choices; anything else is refused
    /// naming the file, the line and the key.
    #[test]
    fn the_transport_key_is_parsed_and_checked() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[runtime]\n";
        assert_eq!(parse_str(base, &[]).unwrap().transport, None);
        for (name, t) in [
            ("auto", skein::RackTransport::Auto),
            ("mpi", skein::RackTransport::Mpi),
            ("shm", skein::RackTransport::Shm),
            ("verbs", skein::RackTransport::Verbs),
        ] {
            let job = parse_str(&format!("{base}transport = \"{name}\"\n"), &[]).unwrap();
            assert_eq!(job.transport, Some(t));
            // The report's copy of the job names it.
            assert_eq!(serde_json::to_value(&job).unwrap()["transport"], name);
        }
        let e = parse_str(&format!("{base}transport = \"tcp\"\n"), &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 5: key `runtime.transport`"), "{e}");
        assert!(e.contains("expected auto, mpi, shm or verbs"), "{e}");
        let e = parse_str(&format!("{base}transport = 3\n"), &[]).unwrap_err();
        assert!(e.starts_with("jobs/test.toml:line 5"), "{e}");
        let e = parse_str(base, &["runtime.transport=\"x\""]).unwrap_err();
        assert!(e.contains("--set runtime.transport"), "{e}");
        assert_eq!(
            parse_str(base, &["runtime.transport=\"shm\""]).unwrap().transport,
            Some(skein::RackTransport::Shm)
        );
    }

    #[test]
    fn unknown_engine_lists_the_choices() {
        let e = parse_str(
            "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[job]\nengine = \"gpu\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.contains("line 5") && e.contains("skein"), "{e}");
    }

    #[test]
    fn missing_graph_is_an_error() {
        let e = parse_str("[job]\nkernel = \"bfs\"\n", &[]).unwrap_err();
        assert!(e.contains("missing [graph]"), "{e}");
        let e = parse_str("[graph]\nscale = 8\n", &[]).unwrap_err();
        assert!(e.contains("generator") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn impossible_values_are_refused_with_the_line() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n";
        let e = parse_str(&format!("{base}[runtime]\nworkers = 0\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("runtime.workers"), "{e}");
        let e = parse_str(&format!("{base}[job]\nroots = 0\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("job.roots"), "{e}");
        let e = parse_str("[graph]\ngenerator = \"kronecker\"\nscale = 41\n", &[]).unwrap_err();
        assert!(e.contains("line 3") && e.contains("1 to 40"), "{e}");
    }

    #[test]
    fn too_large_for_memory_is_refused_with_numbers() {
        let e = parse_str("[graph]\ngenerator = \"kronecker\"\nscale = 36\n", &[]).unwrap_err();
        assert!(e.contains("GiB") && e.contains("available"), "{e}");
    }

    #[test]
    fn sets_override_and_are_named_in_errors() {
        let job =
            parse_str(FULL, &["graph.scale=12", "job.engine=seq", "runtime.pin=true"]).unwrap();
        assert_eq!(job.graph, JobGraph::Kronecker { scale: 12, edgefactor: 8, seeds: [5, 7] });
        assert_eq!(job.engine, EngineName::Seq);
        assert!(job.pin);
        let e = parse_str(FULL, &["runtime.workers=0"]).unwrap_err();
        assert!(e.contains("--set runtime.workers"), "{e}");
        let e = parse_str(FULL, &["nonsense"]).unwrap_err();
        assert!(e.contains("section.key=value"), "{e}");
    }

    #[test]
    fn arrays_and_types_are_checked_whole() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n";
        for (seeds, want) in [
            ("[7, 8, 9, 10, 11]", "expected two seeds such as [2, 3], found 5"),
            ("[7]", "found 1"),
            ("[]", "found 0"),
            ("[7, 8, \"x\"]", "invalid type"),
            ("[7, -8]", "invalid value"),
            ("7", "invalid type"),
        ] {
            let e = parse_str(&format!("{base}seeds = {seeds}\n"), &[]).unwrap_err();
            assert!(e.contains("line 4") && e.contains("graph.seeds") && e.contains(want), "{e}");
        }
        for (roots, want) in [
            ("[1, \"x\"]", "invalid type"),
            ("[1, 2.5]", "invalid type"),
            ("-1", "invalid value"),
            ("1.5", "a number of roots or a list of vertex ids"),
            ("\"all\"", "a number of roots or a list of vertex ids"),
            ("[]", "the root list is empty"),
            ("[3, 256]", "root 256 is not a vertex of the graph (it has 256 vertices"),
            ("257", "257 roots, but the graph has only 256 vertices"),
        ] {
            let e = parse_str(&format!("{base}[job]\nroots = {roots}\n"), &[]).unwrap_err();
            assert!(e.contains("line 5") && e.contains("job.roots") && e.contains(want), "{e}");
        }
        let job = parse_str(&format!("{base}[job]\nroots = [255, 0]\n"), &[]).unwrap();
        assert_eq!(job.roots, Roots::List(vec![255, 0]));
        for (key, value, want) in [
            ("edgefactor", "0", "edgefactor 0 is out of range"),
            ("edgefactor", "2000", "edgefactor 2000 is out of range"),
            ("edgefactor", "-1", "invalid value"),
            ("scale", "4294967296", "invalid value"),
        ] {
            let text = format!("[graph]\ngenerator = \"kronecker\"\nscale = 8\n{key} = {value}\n");
            let text = if key == "scale" { text.replace("scale = 8\n", "") } else { text };
            let e = parse_str(&text, &[]).unwrap_err();
            assert!(e.contains(&format!("graph.{key}")) && e.contains(want), "{e}");
        }
        let e = parse_str(&format!("{base}[report]\njson = \"\"\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("report.json") && e.contains("empty"), "{e}");
        let e = parse_str(&format!("{base}[report]\ndump = 3\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("report.dump"), "{e}");
        let e = parse_str(base, &["graph.seeds=[1,2,3]"]).unwrap_err();
        assert!(e.contains("--set graph.seeds") && e.contains("found 3"), "{e}");
    }

    #[test]
    fn runtime_counts_are_bounded_by_the_machine() {
        let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[runtime]\n";
        // 2000 workers: 16 x 10^6 message slots of 32 KiB (500 GiB), more than any machine
        // here has (1000, the case of the issue, needs 125 GiB).
        let e = parse_str(&format!("{base}workers = 2000\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("runtime.workers"), "{e}");
        assert!(e.contains("GiB") && e.contains("available"), "{e}");
        let e = parse_str(&format!("{base}workers = 5000\n"), &[]).unwrap_err();
        assert!(e.contains("runtime.workers") && e.contains("more than 4096"), "{e}");
        let e = parse_str(&format!("{base}fibers = 2000000\n"), &[]).unwrap_err();
        assert!(e.contains("line 5") && e.contains("runtime.fibers"), "{e}");
        // Past the mapping limit (vm.max_map_count) or memory, whichever is lower here.
        let e = parse_str(&format!("{base}fibers = 1000000\n"), &[]).unwrap_err();
        assert!(e.contains("runtime.fibers") && e.contains("2 workers with 1000000 fibers"), "{e}");
        let e = parse_str(&format!("{base}fibers = 0\n"), &[]).unwrap_err();
        assert!(e.contains("runtime.fibers") && e.contains("at least 1"), "{e}");
        // A rayon job has no fibers; its threads are bounded the same way.
        let job = parse_str(&format!("{base}fibers = 1000000\n"), &["job.engine=rayon"]);
        assert!(job.is_ok(), "{job:?}");
        let e = parse_str(&format!("{base}workers = 5000\n"), &["job.engine=rayon"]).unwrap_err();
        assert!(e.contains("threads: 5000 is more than 4096"), "{e}");
    }

    #[test]
    fn job_files_are_read_with_a_size_limit() {
        let dir = std::env::temp_dir().join(format!("skein-job-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.toml");
        let mut text = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n".to_string();
        text.push_str(&"# padding\n".repeat(120_000));
        std::fs::write(&big, &text).unwrap();
        let e = load(&big, &[]).unwrap_err().to_string();
        assert!(e.contains("larger than 1024 KiB"), "{e}");
        if Path::new("/dev/zero").exists() {
            let e = load(Path::new("/dev/zero"), &[]).unwrap_err().to_string();
            assert!(e.contains("/dev/zero") && e.contains("larger than"), "{e}");
        }
        let e = load(&dir, &[]).unwrap_err().to_string();
        assert!(e.contains("it is a folder"), "{e}");
        let bin = dir.join("bin.toml");
        std::fs::write(&bin, b"[graph]\nfile = \"\xff\"\n").unwrap();
        let e = load(&bin, &[]).unwrap_err().to_string();
        assert!(e.contains("not UTF-8") && e.contains("offset 16"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn both_generator_and_file_is_an_error() {
        let e =
            parse_str("[graph]\ngenerator = \"kronecker\"\nfile = \"x.el\"\n", &[]).unwrap_err();
        assert!(e.contains("not both"), "{e}");
    }
}
