//! Launching the `skein` binary across MPI ranks, for the tests under `mpirun` (`mod launch;`
//! in each test file that uses it).

use std::process::{Command, Output};

/// `skein ARGS` on `ranks` ranks, with the launch line that works as root and on a 2-core
/// machine, outside any loopback split.
pub(crate) fn mpirun(ranks: usize, args: &[&str]) -> Output {
    mpirun_env(ranks, args, &[])
}

/// [`mpirun`] with `vars` set in every rank's environment.
#[allow(dead_code)] // not every test file that includes this module uses it
pub(crate) fn mpirun_env(ranks: usize, args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_skein"))
        .args(args)
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .envs(vars.iter().copied())
        .output()
        .expect("mpirun runs (install Open MPI with scripts/install-mpi.sh)")
}
