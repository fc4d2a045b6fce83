//! Limits on every count the CLI accepts (workers, threads, fibers, roots, repetitions,
//! objects, operations, slot sizes) and the memory checks behind them: one definition
//! each, used by the command line and by job files alike, so both refuse the same values
//! with the same reason.
//!
//! The checks return `Err(message)`: a sentence that says what was asked, what the limit
//! is and why. Callers add where the value came from (`--fibers`, `runtime.fibers` at a
//! line of a job file).

use std::fmt::Display;

/// Most workers (skein) or threads (rayon) a run may ask for: the delegation runtime's
/// own limit (`skein::Builder::build`). Memory and the process's mapping limit usually
/// bound them lower: see [`check_engine`].
pub(crate) const MAX_WORKERS: usize = 4096;

/// Most fibers per worker. Each fiber has its own stack mapping, so the product with
/// the worker count is bounded lower still by [`check_engine`].
pub(crate) const MAX_FIBERS: usize = 1 << 20;

/// Most repetitions of anything timed (`--repeat`, `--warmup`): more add nothing to a
/// median but hours of run time.
pub(crate) const MAX_REPEAT: usize = 10_000;

/// Overflow bytes of a request/response slot: the runtime's accepted range
/// (`skein::Builder::slot_size`).
pub(crate) const SLOT_SIZE_RANGE: std::ops::RangeInclusive<usize> = 512..=1 << 24;

/// Bytes of a fiber's stack (the runtime's default, `skein::Builder::stack_size`).
const FIBER_STACK_BYTES: u128 = 256 * 1024;

/// Bytes of a slot besides its overflow block (header and primary block, rounded up).
const SLOT_BASE_BYTES: u128 = 256;

/// Memory mappings a thread or fiber stack takes (the stack and its guard page).
const MAPS_PER_STACK: u64 = 2;

/// Mappings left for everything else (the binary, libraries, the heap's arenas).
const MAPS_RESERVED: u64 = 2048;

/// `value` must lie in `1..=max`; `why` says where the upper limit comes from.
pub(crate) fn check_count(value: usize, max: usize, why: &str) -> Result<(), String> {
    if value == 0 {
        return Err("must be at least 1".into());
    }
    if value > max {
        return Err(format!("{value} is more than {max}, the most allowed ({why})"));
    }
    Ok(())
}

/// Checks that `need` bytes fit in the memory available now; `what` says what needs them.
pub(crate) fn check_memory(need: u128, what: impl Display) -> Result<(), String> {
    if let Some(avail) = available_memory() {
        if need > u128::from(avail) {
            return Err(format!(
                "{what} needs about {}, but only {} are available",
                gib(need),
                gib(u128::from(avail))
            ));
        }
    }
    Ok(())
}

/// `bytes` with one decimal in GiB (`12.5 GiB`), or MiB, KiB or bytes when under 0.1 GiB:
/// never `0.0 GiB`.
pub(crate) fn gib(bytes: u128) -> String {
    skein_generators::memory::Bytes(bytes).to_string()
}

/// Bytes of memory available now (None where unknown): `MemAvailable`, or the limit set
/// by `SKEIN_MEMORY_LIMIT`, lowered to what `ulimit -v` leaves (see
/// [`skein_generators::memory`]), so that the CLI's checks and the graph readers' agree.
pub(crate) fn available_memory() -> Option<u64> {
    skein_generators::memory::available_memory()
}

/// The process's limit of memory mappings (`vm.max_map_count`, Linux's default where
/// unknown).
fn max_map_count() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(65_530)
}

/// Bytes a Kronecker kernel run needs at its peak: the raw edge list (two `u64` ends and
/// an `f32` weight per edge) next to the symmetric CSR (two arcs per edge, `u64` target
/// and `f32` weight each) and the per-vertex arrays of the kernel. The engines' own arc
/// copies (8 bytes per arc, made after the edge list is gone) fit under the same peak.
pub(crate) fn kronecker_run_bytes(scale: u32, edgefactor: u32) -> u128 {
    let n = 1u128 << scale.min(100);
    let m = n * u128::from(edgefactor);
    m * 20 + 2 * m * 12 + n * 8 + n * 24
}

/// Checks that a kernel run on the Kronecker graph of `scale` and `edgefactor` fits in
/// memory (the one check of `skein sssp|bfs kron:...` and of job files).
pub(crate) fn check_kronecker_run(scale: u32, edgefactor: u32) -> Result<(), String> {
    check_memory(
        kronecker_run_bytes(scale, edgefactor),
        format_args!(
            "SCALE {scale} with edgefactor {edgefactor} (edge list + CSR + per-vertex state)"
        ),
    )
}

/// Bytes of the message slots of a delegation runtime: a request and a response slot in
/// each of the two lanes of every (client, trustee) pair.
pub(crate) fn runtime_slot_bytes(workers: usize, slot_overflow: usize) -> u128 {
    let w = workers as u128;
    4 * w * w * (slot_overflow as u128 + SLOT_BASE_BYTES)
}

/// Checks an engine's thread and fiber counts: each in range, their stacks within the
/// process's mapping limit, and (for skein) the runtime's message slots of
/// `slot_overflow` bytes within available memory. `fibers` is ignored unless `skein`.
pub(crate) fn check_engine(
    skein: bool,
    workers: usize,
    fibers: usize,
    slot_overflow: usize,
) -> Result<(), String> {
    let who = if skein { "workers" } else { "threads" };
    check_count(workers, MAX_WORKERS, "the runtime's limit").map_err(|e| format!("{who}: {e}"))?;
    if !skein {
        return check_stacks(workers as u64, 0);
    }
    check_count(fibers, MAX_FIBERS, "fiber stacks are allocated up front")
        .map_err(|e| format!("fibers: {e}"))?;
    if !SLOT_SIZE_RANGE.contains(&slot_overflow) {
        return Err(format!(
            "slot size {slot_overflow} is outside {}..={} bytes (the runtime's range)",
            SLOT_SIZE_RANGE.start(),
            SLOT_SIZE_RANGE.end()
        ));
    }
    check_stacks(workers as u64, (workers as u64).saturating_mul(fibers as u64))?;
    let stacks = (workers as u128) * (fibers as u128) * FIBER_STACK_BYTES;
    check_memory(
        runtime_slot_bytes(workers, slot_overflow) + stacks,
        format_args!(
            "{workers} workers with {fibers} fibers each (4 x workers^2 message slots of \
             {} KiB, and a {} KiB stack per fiber)",
            slot_overflow.div_ceil(1024),
            FIBER_STACK_BYTES / 1024
        ),
    )
}

/// Checks that `threads` thread stacks and `fibers` fiber stacks fit in the mapping limit.
fn check_stacks(threads: u64, fibers: u64) -> Result<(), String> {
    let limit = max_map_count();
    let need = threads.saturating_add(fibers).saturating_mul(MAPS_PER_STACK);
    if need.saturating_add(MAPS_RESERVED) > limit {
        let what = if fibers > 0 {
            format!("{threads} workers with {} fibers each", fibers / threads.max(1))
        } else {
            format!("{threads} threads")
        };
        return Err(format!(
            "{what} need {need} memory mappings for their stacks, but this system allows \
             {limit} per process (vm.max_map_count); use fewer"
        ));
    }
    Ok(())
}

/// The default number of search roots (Graph500's 64).
pub(crate) const DEFAULT_ROOTS: u64 = 64;

/// Checks a number of search roots against the graph's vertex count: at most one search
/// per vertex, or [`DEFAULT_ROOTS`] on a smaller graph (its root sequence then repeats
/// roots, as Graph500's does).
pub(crate) fn check_roots(count: u64, vertices: u64) -> Result<(), String> {
    if count == 0 {
        return Err("must be at least 1".into());
    }
    let max = vertices.max(DEFAULT_ROOTS);
    if count > max {
        return Err(format!(
            "{count} roots, but the graph has only {vertices} vertices (at most {max}: one \
             search per vertex, or {DEFAULT_ROOTS})"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert!(check_count(1, 4, "x").is_ok() && check_count(4, 4, "x").is_ok());
        assert_eq!(check_count(0, 4, "x").unwrap_err(), "must be at least 1");
        assert!(check_count(5, 4, "the reason").unwrap_err().contains("the reason"));
        assert!(check_roots(3, 3).is_ok() && check_roots(64, 3).is_ok());
        assert!(check_roots(65, 3).unwrap_err().contains("only 3 vertices"));
        assert!(check_roots(1000, 1000).is_ok());
        assert!(check_roots(1001, 1000).unwrap_err().contains("at most 1000"));
        assert!(check_roots(0, 3).is_err());
    }

    #[test]
    fn engines_are_bounded_by_memory_and_mappings() {
        assert!(check_engine(true, 2, 8, 32 << 10).is_ok());
        assert!(check_engine(false, 16, 0, 0).is_ok());
        // 2000 workers: 16 x 10^6 slots of 32 KiB (500 GiB), far more than any test machine has.
        let e = check_engine(true, 2000, 8, 32 << 10).unwrap_err();
        assert!(e.contains("GiB") && e.contains("available"), "{e}");
        // Past the mapping limit or memory, whichever is lower here: the same words.
        let e = check_engine(true, 2, 1_000_000, 512).unwrap_err();
        assert!(e.starts_with("2 workers with 1000000 fibers each"), "{e}");
        let e = check_engine(true, 5000, 8, 512).unwrap_err();
        assert!(e.starts_with("workers: 5000 is more than 4096"), "{e}");
        let e = check_engine(false, 0, 0, 0).unwrap_err();
        assert!(e.starts_with("threads: must be at least 1"), "{e}");
        let e = check_engine(true, 2, 0, 512).unwrap_err();
        assert!(e.starts_with("fibers: must be at least 1"), "{e}");
        assert!(check_engine(true, 2, 8, 100).unwrap_err().contains("slot size"));
    }

    #[test]
    fn small_figures_are_never_zero_gib() {
        assert_eq!(gib(5 << 30), "5.0 GiB");
        assert_eq!(gib(3 << 20), "3.0 MiB");
        assert_eq!(gib(1536), "1.5 KiB");
    }

    #[test]
    fn kronecker_memory() {
        assert!(check_kronecker_run(10, 16).is_ok());
        let e = check_kronecker_run(40, 16).unwrap_err();
        assert!(e.contains("SCALE 40") && e.contains("GiB") && e.contains("available"), "{e}");
        assert_eq!(kronecker_run_bytes(1, 1), 2 * 20 + 4 * 12 + 2 * 32);
    }
}
