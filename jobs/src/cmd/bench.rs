//! `skein bench`.

/// Arguments of `skein bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`skein bench` is not yet supported")
}
