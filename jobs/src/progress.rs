//! Progress bars for long phases ("generate", "build CSR", "load", "write").
//!
//! A bar is drawn on stderr only when stderr is a terminal (and `TERM` is not `dumb`);
//! otherwise it is hidden and costs next to nothing, so piped or redirected output
//! stays clean. `SKEIN_PROGRESS=0` hides bars on a terminal too.
//!
//! ```ignore
//! let p = progress::phase("generate", num_edges);
//! generate_with_progress(&params, &|done| p.set(done));
//! p.finish();
//! ```

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress display of one phase. Cheap to update from any thread.
#[derive(Debug)]
pub(crate) struct Progress {
    bar: ProgressBar,
}

/// Whether bars should be drawn: stderr is a terminal and the user did not opt out.
pub(crate) fn enabled() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("SKEIN_PROGRESS").is_none_or(|v| v != "0")
}

fn draw_target() -> ProgressDrawTarget {
    // Under mpirun only rank 0 (the rank that writes) draws.
    if enabled() && crate::output::writes() {
        ProgressDrawTarget::stderr_with_hz(10)
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar for a phase of `total` units (edges, bytes: see [`phase_bytes`]).
pub(crate) fn phase(name: &str, total: u64) -> Progress {
    let bar = ProgressBar::with_draw_target(Some(total), draw_target());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {percent:>3}% {human_pos}/{human_len} {per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    Progress { bar }
}

/// A bar for a phase measured in bytes.
pub(crate) fn phase_bytes(name: &str, total: u64) -> Progress {
    let bar = ProgressBar::with_draw_target(Some(total), draw_target());
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {percent:>3}% {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(name.to_owned());
    Progress { bar }
}

/// A spinner for a phase of unknown length (an external program's run): the time elapsed
/// and the last thing it said ([`Progress::say`]).
pub(crate) fn spinner(name: &str) -> Progress {
    let bar = ProgressBar::with_draw_target(None, draw_target());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} {spinner} {elapsed_precise} {wide_msg}")
            .expect("valid template"),
    );
    bar.set_prefix(name.to_owned());
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Progress { bar }
}

impl Progress {
    /// Prints `line` on standard error, above the bar when it is drawn.
    pub(crate) fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            crate::output::eline(line);
        } else {
            self.bar.println(line);
        }
    }

    /// Shows `line` beside a [`spinner`].
    pub(crate) fn say(&self, line: &str) {
        self.bar.set_message(line.trim().to_owned());
    }

    /// Advances by `delta` units.
    pub(crate) fn inc(&self, delta: u64) {
        self.bar.inc(delta);
    }

    /// Sets the units done so far (never moves backwards, so callbacks from several
    /// threads reporting cumulative counts out of order are fine).
    pub(crate) fn set(&self, done: u64) {
        if done > self.bar.position() {
            self.bar.set_position(done);
        }
    }

    /// Whether the bar is drawn.
    #[cfg(test)]
    fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// Ends the phase and erases the bar (the caller prints its own summary line).
    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // A phase left by an error must not leave a half-drawn bar behind.
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `cargo test`, stderr is captured or piped: bars must be hidden.
    #[test]
    fn hidden_when_stderr_is_not_a_terminal() {
        if std::io::stderr().is_terminal() {
            return; // run by hand on a terminal: nothing to check
        }
        let p = phase("test", 10);
        assert!(p.is_hidden());
        p.inc(3);
        p.set(2); // never backwards
        assert_eq!(p.bar.position(), 3);
        p.set(10);
        p.finish();
        assert!(phase_bytes("y", 5).is_hidden());
    }
}
