//! `skein run` and `skein compare`.

/// Arguments of `skein run`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

/// Arguments of `skein compare`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`skein run` is not yet supported")
}

pub(crate) fn compare(_args: CompareArgs) -> anyhow::Result<()> {
    anyhow::bail!("`skein compare` is not yet supported")
}
