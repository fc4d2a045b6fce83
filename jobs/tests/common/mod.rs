//! Helpers shared by the command-line tests (`mod common;` in each test file that uses them).

use std::process::Command;

/// A command for the `skein` binary whose child gets `signal`'s default action: skein leaves
/// an ignored signal ignored, and a test run started in the background of a script (or under
/// nohup) inherits SIGINT or SIGHUP ignored, which would make an interrupt test wait for the
/// child to finish instead.
#[cfg(unix)]
pub(crate) fn skein_with_default_signal(signal: libc::c_int) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
    // SAFETY: between fork and exec the closure calls only `signal`, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            libc::signal(signal, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}
