//! `skein convert`: rewrite a graph file in another format (atomically: see
//! [`crate::output`]), most usefully a text file as `.skg`, the layout every rank of an
//! `mpirun` reads its own byte range of (a text file is read by rank 0 and handed out).
//!
//! The edges keep their order, their vertex count and their weights (`.el` drops weights,
//! and says so; `.gr` takes whole-number weights only), so a kernel's roots and results on
//! the converted file are those of the input.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use skein_generators::formats::{self, WriteOptions};

use super::generate::{output_format, write_graph, FormatArg};
use crate::output::AtomicFile;
use crate::progress;

/// Arguments of `skein convert`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The graph to read (.skg, .el, .wel, .mtx, .gr, told by its content; `-` reads
    /// standard input).
    #[arg(value_name = "INPUT")]
    pub(crate) input: PathBuf,
    /// The file to write (it may be the input: it is replaced only once complete).
    #[arg(value_name = "OUTPUT")]
    pub(crate) output: PathBuf,
    /// Output format [default: from the output file's extension, else bin].
    #[arg(short, long, value_enum)]
    pub(crate) format: Option<FormatArg>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if formats::is_stdin(&args.output) {
        bail!("skein convert writes a file, not standard output: name the output file");
    }
    let format = output_format(&args.output, args.format)?;
    let input = &args.input;
    let size = formats::input_len(input)?;
    // Fail on an unwritable output before reading a large input.
    let out = AtomicFile::create(&args.output)?;

    let t = Instant::now();
    let bar = progress::phase_bytes("load", size.unwrap_or(0));
    let loaded = formats::read_edges_detected(input, &|b| bar.set(b));
    bar.finish();
    let (from, el) = loaded.with_context(|| format!("cannot convert {}", input.display()))?;
    let load_s = t.elapsed().as_secs_f64();
    eprintln!(
        "read {} ({from}): {} vertices, {} edges{} in {load_s:.2} s",
        input.display(),
        el.num_vertices,
        el.len(),
        if el.weights.is_some() { ", weighted" } else { "" }
    );
    if el.weights.is_some() && !format.stores_weights() {
        eprintln!(
            "note: {} (a .{} file) keeps no weights; the converted graph is unweighted (every \
             edge weighs 1)",
            args.output.display(),
            format.extension()
        );
    }
    let options = WriteOptions {
        comments: vec![format!(
            "converted by skein convert from {} ({from}), edges in the input's order",
            input.display()
        )],
        ..WriteOptions::default()
    };
    write_graph(out, &el, format, &options, &args.output)
}
