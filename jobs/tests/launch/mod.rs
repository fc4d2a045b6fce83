//! Launching the `skein` binary across MPI ranks, for the tests under `mpirun` (`mod launch;`
//! in each test file that uses it).

use std::process::{Command, Output};

/// `skein ARGS` on `ranks` ranks, with the launch line that works as root and on a 2-core
/// machine, outside any loopback split.
pub(crate) fn mpirun(ranks: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_skein"))
        .args(args)
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .output()
        .expect("mpirun runs (install Open MPI with scripts/install-mpi.sh)")
}
