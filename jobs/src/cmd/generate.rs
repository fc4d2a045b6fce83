//! `skein generate`.

/// Arguments of `skein generate`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`skein generate` is not yet supported")
}
