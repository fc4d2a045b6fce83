//! `skein generate`: write a Graph500 Kronecker graph to a file (atomically: see
//! [`crate::output`]).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use skein_generators::formats::{self, Format, WriteOptions};
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::EdgeList;

use crate::output::AtomicFile;
use crate::{limits, progress};

/// Output formats of `skein generate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum FormatArg {
    /// Skein binary graph (.skg): fast to load, checksummed.
    Bin,
    /// Text edge list, `u v` per line (weights dropped).
    El,
    /// Weighted text edge list, `u v w` per line.
    Wel,
    /// Matrix Market coordinate, real general.
    Mtx,
    /// DIMACS shortest-path `.gr` (whole-number weights only; `skein convert`).
    Gr,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Bin => Format::Binary,
            FormatArg::El => Format::El,
            FormatArg::Wel => Format::Wel,
            FormatArg::Mtx => Format::Mtx,
            FormatArg::Gr => Format::Gr,
        }
    }
}

/// Arguments of `skein generate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// log2 of the vertex count (1 to 40; memory permitting).
    #[arg(short, long)]
    pub(crate) scale: u32,
    /// Edges per vertex (1 to 1024).
    #[arg(short, long, default_value_t = 16)]
    pub(crate) edgefactor: u32,
    /// The two Graph500 user seeds, `A,B`.
    #[arg(long, value_name = "A,B", default_value = "2,3", value_parser = parse_seeds)]
    pub(crate) seed: (u64, u64),
    /// Output format [default: from the output file's extension, else bin].
    #[arg(short, long, value_enum)]
    pub(crate) format: Option<FormatArg>,
    /// The file to write.
    #[arg(short, long, value_name = "FILE")]
    pub(crate) output: PathBuf,
}

fn parse_seeds(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("expected two unsigned integers `A,B` (e.g. 2,3), found `{s}`");
    let (a, b) = s.split_once(',').ok_or_else(bad)?;
    let a = a.trim().parse().map_err(|_| bad())?;
    let b = b.trim().parse().map_err(|_| bad())?;
    Ok((a, b))
}

/// The format to write: `--format` if given (it must agree with a known extension),
/// else the extension, else binary.
pub(crate) fn output_format(path: &Path, arg: Option<FormatArg>) -> anyhow::Result<Format> {
    let by_ext = Format::from_path(path);
    match (arg.map(Format::from), by_ext) {
        (Some(f), Some(e)) if f != e => bail!(
            "--format {} contradicts the extension of {} (a .{} file); use a .{} name or drop --format",
            f.name(),
            path.display(),
            e.extension(),
            f.extension()
        ),
        (Some(f), _) => Ok(f),
        (None, Some(e)) => Ok(e),
        (None, None) => Ok(Format::Binary),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let (seed1, seed2) = args.seed;
    let params = KroneckerParams::new(args.scale, args.edgefactor, seed1, seed2)?;
    let format = output_format(&args.output, args.format)?;
    if format == Format::Gr {
        bail!(
            "{} is a DIMACS .gr file, whose weights are integers, but Graph500 weights are \
             real numbers in [0, 1); write .wel, .mtx or .skg instead",
            args.output.display()
        );
    }
    let m = params.num_edges();
    limits::check_memory(
        u128::from(params.edge_list_bytes()),
        format_args!(
            "the edge list of SCALE {} with edgefactor {} ({m} edges)",
            params.scale, params.edgefactor
        ),
    )
    .map_err(anyhow::Error::msg)?;
    // Fail on an unwritable output before spending time on generation. The graph goes to
    // a temporary file beside the output, renamed over it only once complete: an existing
    // file stays intact until then, and whatever happens before (an error, an interrupt)
    // leaves it as it was.
    let out = AtomicFile::create(&args.output)?;
    out.release_old_cache();

    let t = Instant::now();
    let bar = progress::phase("generate", m);
    let el = kronecker::generate_with_progress(&params, &|done| bar.set(done));
    bar.finish();
    let gen_s = t.elapsed().as_secs_f64();
    eprintln!(
        "generated SCALE {} edgefactor {} seeds {seed1},{seed2}: {} vertices, {m} edges in {gen_s:.2} s ({:.1} M edges/s)",
        params.scale,
        params.edgefactor,
        params.num_vertices(),
        m as f64 / gen_s / 1e6
    );

    let options = WriteOptions {
        comments: vec![
            format!(
                "Graph500 Kronecker graph by skein generate: SCALE {} edgefactor {} seeds {seed1},{seed2}",
                params.scale, params.edgefactor
            ),
            "edges in generator edge-index order, self-loops and repeats included".to_owned(),
        ],
        ..WriteOptions::default()
    };
    write_graph(out, &el, format, &options, &args.output)
}

/// Writes `el` in `format` through `out` (a temporary file beside `name`, renamed over it
/// once complete) with a progress bar, and says on stderr what was written. Errors name
/// `name`, the output the user gave, not the temporary file.
pub(crate) fn write_graph(
    mut out: AtomicFile,
    el: &EdgeList,
    format: Format,
    options: &WriteOptions,
    name: &Path,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let m = el.len() as u64;
    let bar = progress::phase_bytes("write", estimated_bytes(el.num_vertices, m, format));
    let written = {
        let counting = Counting { inner: out.file_mut(), done: 0, bar: &bar };
        match format {
            Format::Binary => {
                formats::write_binary(BufWriter::with_capacity(8 << 20, counting), el, name)
            }
            Format::El => formats::write_el(counting, el, options, name),
            Format::Wel => formats::write_wel(counting, el, options, name),
            Format::Mtx => formats::write_mtx(counting, el, options, name),
            Format::Gr => formats::write_gr(counting, el, options, name),
        }
    };
    bar.finish();
    // On error, dropping `out` removes the temporary file; the output is untouched.
    written.context("writing the graph failed")?;
    out.commit().context("writing the graph failed")?;
    let write_s = t.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(name).map(|md| md.len()).unwrap_or(0);
    eprintln!(
        "wrote {} ({}, {:.1} MiB) in {write_s:.2} s ({:.1} M edges/s)",
        name.display(),
        format.name(),
        bytes as f64 / f64::from(1u32 << 20),
        m as f64 / write_s.max(1e-9) / 1e6
    );
    Ok(())
}

/// About how many bytes a file of `m` edges among `n` vertices will have in `format` (for
/// the progress bar only).
fn estimated_bytes(n: u64, m: u64, format: Format) -> u64 {
    let id_digits = n.to_string().len() as u64;
    let per_edge = match format {
        // Two ids of 4 bytes (8 above 2^32 vertices) and an f32 weight.
        Format::Binary if n <= 1 << 32 => 12,
        Format::Binary => 20,
        Format::El => 2 * id_digits + 2,
        // A weight prints as up to 9 characters (`0.12345678`) and a space.
        Format::Wel | Format::Mtx | Format::Gr => 2 * id_digits + 12,
    };
    m.saturating_mul(per_edge)
}

/// A writer that reports the bytes it passed on to a progress bar.
struct Counting<'a, W> {
    inner: W,
    done: u64,
    bar: &'a progress::Progress,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.done += n as u64;
        self.bar.set(self.done);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds() {
        assert_eq!(parse_seeds("2,3"), Ok((2, 3)));
        assert_eq!(parse_seeds(" 7 , 18446744073709551615"), Ok((7, u64::MAX)));
        for bad in ["2", "2,", "a,b", "-1,2", "1,2,3"] {
            assert!(parse_seeds(bad).unwrap_err().contains("expected two unsigned integers"));
        }
    }

    #[test]
    fn format_choice() {
        let f = |p: &str, a| output_format(Path::new(p), a).map_err(|e| e.to_string());
        assert_eq!(f("g.wel", None), Ok(Format::Wel));
        assert_eq!(f("g", None), Ok(Format::Binary));
        assert_eq!(f("g.dat", Some(FormatArg::Mtx)), Ok(Format::Mtx));
        assert_eq!(f("g.skg", Some(FormatArg::Bin)), Ok(Format::Binary));
        assert!(f("g.el", Some(FormatArg::Wel)).unwrap_err().contains("contradicts"));
    }
}
