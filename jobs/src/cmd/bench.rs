//! `skein bench`: the benchmark suite of crate `skein-bench`, run with the command line's own
//! limits on counts and memory ([`crate::limits`]) and its way of writing files
//! ([`crate::output`]), so that `skein bench` refuses what every other command refuses.

use std::path::Path;

/// Arguments of `skein bench` (defined by the benchmark crate).
pub(crate) type Args = skein_bench::Args;

/// Runs the benchmark `args` names.
pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    skein_bench::run(args, &Cli)
}

/// The command line as the benchmarks' host.
struct Cli;

impl skein_bench::Host for Cli {
    fn max_workers(&self) -> usize {
        crate::limits::MAX_WORKERS
    }
    fn max_fibers(&self) -> usize {
        crate::limits::MAX_FIBERS
    }
    fn max_repeat(&self) -> usize {
        crate::limits::MAX_REPEAT
    }
    fn slot_size_range(&self) -> std::ops::RangeInclusive<usize> {
        crate::limits::SLOT_SIZE_RANGE
    }
    fn check_count(&self, value: usize, max: usize, why: &str) -> Result<(), String> {
        crate::limits::check_count(value, max, why)
    }
    fn check_memory(&self, need: u128, what: &str) -> Result<(), String> {
        crate::limits::check_memory(need, what)
    }
    fn check_engine(&self, workers: usize, fibers: usize, slot_size: usize) -> Result<(), String> {
        crate::limits::check_engine(true, workers, fibers, slot_size)
    }
    fn write_file(&self, path: &Path, what: &str, contents: &str) -> anyhow::Result<()> {
        crate::output::write_file(path, what, |w| w.write_all(contents.as_bytes()))
    }
}
