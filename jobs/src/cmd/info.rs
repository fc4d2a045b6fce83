//! `skein info`.

/// Arguments of `skein info`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`skein info` is not yet supported")
}
