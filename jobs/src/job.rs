//! Job files: what `skein run JOB.toml` reads.
//!
//! A job file is TOML with four sections; only `[graph]` is required:
//!
//! ```toml
//! [graph]
//! generator = "kronecker"   # or: file = "graphs/web.wel"
//! scale = 20                # kronecker only
//! edgefactor = 16           # Graph500 default
//! seeds = [2, 3]            # Graph500 default
//! [job]
//! kernel = "sssp"           # sssp | bfs
//! roots = 64                # first N Graph500 roots, or a list such as [1, 5, 9]
//! engine = "skein"          # skein | rayon | seq
//! validate = true
//! [runtime]
//! workers = 2               # trustee workers (skein) or threads (rayon)
//! fibers = 8                # fibers per worker (skein)
//! pin = false               # pin workers to cores
//! [report]
//! json = "reports/sssp-s20.json"
//! dump = "reports/sssp-s20.dump"   # first root's result, one line per vertex
//! ```
//!
//! Unknown keys, wrong types and impossible values are errors that name the file, the
//! key and the line. `--set section.key=value` overrides a key before checking, as if the
//! file said so; an error about an overridden key names the `--set` instead of a line.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

/// Largest Kronecker SCALE a job may ask for at all (the generator's own limit may be lower).
const MAX_SCALE: u32 = 40;

/// Which kernel a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum KernelName {
    Sssp,
    Bfs,
}

/// Which engine runs the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EngineName {
    Skein,
    Rayon,
    Seq,
}

impl EngineName {
    /// Every engine, in the order `skein compare` runs them.
    pub(crate) const ALL: [EngineName; 3] = [EngineName::Seq, EngineName::Rayon, EngineName::Skein];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EngineName::Skein => "skein",
            EngineName::Rayon => "rayon",
            EngineName::Seq => "seq",
        }
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for KernelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KernelName::Sssp => "sssp",
            KernelName::Bfs => "bfs",
        })
    }
}

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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum Roots {
    Count(u64),
    List(Vec<u64>),
}

/// A checked job, every default filled in.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Job {
    /// Where the job came from (for messages and the report).
    pub(crate) source: PathBuf,
    pub(crate) graph: JobGraph,
    pub(crate) kernel: KernelName,
    pub(crate) roots: Roots,
    pub(crate) engine: EngineName,
    pub(crate) validate: bool,
    pub(crate) workers: usize,
    pub(crate) fibers: usize,
    pub(crate) pin: bool,
    pub(crate) json: Option<PathBuf>,
    pub(crate) dump: Option<PathBuf>,
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
    seeds: Option<Spanned<[u64; 2]>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JobSection {
    kernel: Option<KernelName>,
    roots: Option<Spanned<Roots>>,
    engine: Option<EngineName>,
    validate: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeSection {
    workers: Option<Spanned<usize>>,
    fibers: Option<Spanned<usize>>,
    pin: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportSection {
    json: Option<PathBuf>,
    dump: Option<PathBuf>,
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
    let text = std::fs::read_to_string(path).map_err(|e| JobError {
        file: path.to_path_buf(),
        place: None,
        key: None,
        message: format!("cannot read the job file: {e}"),
    })?;
    parse(path, &text, sets)
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
            let path = file.into_inner();
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
            if !(1..=MAX_SCALE).contains(scale.get_ref()) {
                return Err(ctx.at(
                    "graph.scale",
                    scale.span(),
                    format!("scale {} is outside 1..={MAX_SCALE}", scale.get_ref()),
                ));
            }
            let edgefactor = graph.edgefactor.map_or(16, |e| e.into_inner());
            let seeds = graph.seeds.map_or([2, 3], |s| s.into_inner());
            let (scale_span, scale) = (scale.span(), scale.into_inner());
            check_memory(ctx, scale, edgefactor, scale_span)?;
            JobGraph::Kronecker { scale, edgefactor, seeds }
        }
    };

    let job =
        raw.job.unwrap_or(JobSection { kernel: None, roots: None, engine: None, validate: None });
    let roots = match job.roots {
        None => Roots::Count(64),
        Some(r) => {
            let span = r.span();
            match r.into_inner() {
                Roots::Count(0) => {
                    return Err(ctx.at("job.roots", span, "roots must be at least 1"))
                }
                Roots::List(l) if l.is_empty() => {
                    return Err(ctx.at("job.roots", span, "the root list is empty"))
                }
                r => r,
            }
        }
    };
    let runtime = raw.runtime.unwrap_or(RuntimeSection { workers: None, fibers: None, pin: None });
    let workers = positive(ctx, "runtime.workers", runtime.workers, 2, 4096)?;
    let fibers = positive(ctx, "runtime.fibers", runtime.fibers, 8, 1 << 20)?;
    let report = raw.report.unwrap_or(ReportSection { json: None, dump: None });
    let rel = |p: PathBuf| if p.is_absolute() { p } else { normalize(&base.join(p)) };
    Ok(Job {
        source: ctx.file.to_path_buf(),
        graph,
        kernel: job.kernel.unwrap_or(KernelName::Sssp),
        roots,
        engine: job.engine.unwrap_or(EngineName::Skein),
        validate: job.validate.unwrap_or(true),
        workers,
        fibers,
        pin: runtime.pin.unwrap_or(false),
        json: report.json.map(rel),
        dump: report.dump.map(rel),
    })
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

fn positive(
    ctx: &Ctx<'_>,
    key: &str,
    value: Option<Spanned<usize>>,
    default: usize,
    max: usize,
) -> Result<usize, JobError> {
    match value {
        None => Ok(default),
        Some(v) if (1..=max).contains(v.get_ref()) => Ok(v.into_inner()),
        Some(v) => Err(ctx.at(key, v.span(), format!("{} is outside 1..={max}", v.get_ref()))),
    }
}

/// Bytes a Kronecker job needs at its peak: the raw edge list (two `u64` ends and an
/// `f32` weight per edge) next to the symmetric CSR (two arcs per edge, `u64` target and
/// `f32` weight each) and the per-vertex arrays of the kernel. The engines' own arc copies
/// (8 bytes per arc, made after the edge list is gone) fit under the same peak.
pub(crate) fn estimate_bytes(scale: u32, edgefactor: u32) -> u128 {
    let n = 1u128 << scale;
    let m = n * edgefactor as u128;
    m * 20 + 2 * m * 12 + n * 8 + n * 24
}

fn check_memory(
    ctx: &Ctx<'_>,
    scale: u32,
    edgefactor: u32,
    span: std::ops::Range<usize>,
) -> Result<(), JobError> {
    let need = estimate_bytes(scale, edgefactor);
    if let Some(avail) = available_memory() {
        if need > avail as u128 {
            return Err(ctx.at(
                "graph.scale",
                span,
                format!(
                    "SCALE {scale} with edgefactor {edgefactor} needs about {:.1} GiB \
                     (edge list + CSR + per-vertex state), but this machine has {:.1} GiB \
                     available",
                    need as f64 / (1u64 << 30) as f64,
                    avail as f64 / (1u64 << 30) as f64
                ),
            ));
        }
    }
    Ok(())
}

/// `MemAvailable` from /proc/meminfo, in bytes (None where unknown).
pub(crate) fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
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
        assert_eq!(job.kernel, KernelName::Bfs);
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
        assert_eq!(job.kernel, KernelName::Sssp);
        assert_eq!(job.roots, Roots::Count(64));
        assert_eq!(job.engine, EngineName::Skein);
        assert!(job.validate);
        assert_eq!((job.workers, job.fibers), (2, 8));
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
        assert!(e.contains("line 3") && e.contains("1..=40"), "{e}");
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
    fn both_generator_and_file_is_an_error() {
        let e =
            parse_str("[graph]\ngenerator = \"kronecker\"\nfile = \"x.el\"\n", &[]).unwrap_err();
        assert!(e.contains("not both"), "{e}");
    }
}
