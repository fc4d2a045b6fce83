//! One module per subcommand; each exports `Args` and `run`.

pub(crate) mod bench;
pub(crate) mod convert;
pub(crate) mod generate;
pub(crate) mod info;
pub(crate) mod kernel;
pub(crate) mod run;
