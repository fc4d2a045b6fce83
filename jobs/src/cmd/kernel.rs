//! `skein sssp` and `skein bfs`.

/// Which kernel to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    Sssp,
    Bfs,
}

/// Arguments of `skein sssp` / `skein bfs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(kernel: Kernel, _args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`skein {kernel:?}` is not yet supported")
}
