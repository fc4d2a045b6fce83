//! What a benchmark takes from the program that runs it ([`Host`]), the counts every
//! benchmark bounds, and the JSON files they write.

use std::path::Path;

/// Most iterations of `micro` and `ping` (micro's throughput test runs 20 times as many
/// requests; beyond this they run for hours).
pub(crate) const MAX_ITERS: usize = 100_000_000;

/// What a benchmark takes from the program that runs it: the limits on counts and memory
/// that program applies to every command, and how it writes a result file. `skein bench`
/// passes the command line's own (`jobs/src/limits.rs`, `jobs/src/output.rs`).
pub trait Host {
    /// Most workers a runtime may have.
    fn max_workers(&self) -> usize;
    /// Most fibers per worker.
    fn max_fibers(&self) -> usize;
    /// Most repetitions of anything timed.
    fn max_repeat(&self) -> usize;
    /// The runtime's accepted range of slot overflow bytes.
    fn slot_size_range(&self) -> std::ops::RangeInclusive<usize>;
    /// `value` must lie in `1..=max`; `why` says where the upper limit comes from. The
    /// error is a sentence the caller prefixes with the flag's name.
    fn check_count(&self, value: usize, max: usize, why: &str) -> Result<(), String>;
    /// `need` bytes, for `what`, must fit in the memory available now.
    fn check_memory(&self, need: u128, what: &str) -> Result<(), String>;
    /// A runtime of `workers` workers with `fibers` fiber stacks each and slots of
    /// `slot_size` overflow bytes must fit in memory and the process's mapping limit.
    fn check_engine(&self, workers: usize, fibers: usize, slot_size: usize) -> Result<(), String>;
    /// Writes `contents` to `path` whole (a reader sees the old file or the new one); `what`
    /// names the file in errors.
    fn write_file(&self, path: &Path, what: &str, contents: &str) -> anyhow::Result<()>;
}

/// Writes `value` as pretty JSON to `path` through `host` (every benchmark's `--json`).
pub(crate) fn write_json(
    host: &dyn Host,
    path: &Path,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let s = serde_json::to_string_pretty(value)?;
    host.write_file(path, "the JSON file", &s)
}
