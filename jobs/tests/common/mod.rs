//! Helpers shared by the command-line tests (`mod common;` in each test file that uses them).
// Each test binary uses some of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// `skein` with `args` and the extra environment `env`, progress bars off; waits for it.
pub(crate) fn skein_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skein"));
    c.args(args).env("SKEIN_PROGRESS", "0");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run skein")
}

/// `skein` with `args`, progress bars off; waits for it.
pub(crate) fn skein(args: &[&str]) -> Output {
    skein_env(args, &[])
}

/// Bytes of a child's output as text.
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts that `out` (of `what`) succeeded; returns its stdout.
pub(crate) fn check(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Runs `skein` (with `env`) expecting success; returns its stdout.
pub(crate) fn ok_env(args: &[&str], env: &[(&str, &str)]) -> String {
    check(&skein_env(args, env), &format!("skein {args:?}"))
}

/// Runs `skein` expecting success; returns its stdout.
pub(crate) fn ok(args: &[&str]) -> String {
    ok_env(args, &[])
}

/// Runs `skein` expecting a clean failure (an exit code, no panic); returns its stderr.
pub(crate) fn fails(args: &[&str]) -> String {
    let out = skein(args);
    assert!(!out.status.success(), "skein {args:?} should fail\n{}", text(&out.stdout));
    let e = text(&out.stderr);
    assert!(out.status.code().is_some(), "skein {args:?} was killed by a signal:\n{e}");
    assert!(!e.contains("panicked"), "skein {args:?} panicked:\n{e}");
    e
}

/// One test's scratch folder, `<tmp>/skein-<test binary>-<pid>-<name>`: created empty (a
/// stale one of the same name removed first) and removed with everything in it when dropped,
/// also while a failing test unwinds. `name` must be unique within the test binary, whose
/// tests run in parallel threads of one process.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let binary = env!("CARGO_CRATE_NAME").replace('_', "-");
        let dir =
            std::env::temp_dir().join(format!("skein-{binary}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The folder itself.
    pub(crate) fn dir(&self) -> &Path {
        &self.0
    }

    /// `file` in the folder.
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A path as `&str` (the tests' paths are UTF-8).
pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
