//! The refusals of the delegation calls that name a worker of another rank where they cannot
//! (`docs/rack-mode.md` §1.3 item 9): panics with a message that names the call to use
//! instead. Used by the handles (`crate::trust`) and by the spawns (`super::spawn`).

/// The refusal of a local-only call (`entrust`, `apply_local`, `spawn_local_on`, ...) on an id
/// of another rank (`docs/rack-mode.md` §1.3 item 9).
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn not_local(g: usize, what: &str, instead: &str) -> ! {
    panic!(
        "skein: `{what}` on worker {g}, which is on rank {} (this is rank {}): `{what}` is \
         local only; use `{instead}`",
        crate::runtime::rank_of(g),
        crate::runtime::rank()
    )
}

/// The refusal of a remote-capable call towards another rank in a run without a transport.
/// Not reachable: only a split run (MPI or loopback) has workers of other ranks, and every
/// split run has its transport; kept as a clear error rather than an index out of range.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn no_transport(g: usize, what: &str) -> ! {
    panic!(
        "skein: `{what}` on worker {g} of rank {} (this is rank {}): this run has no transport \
         to other ranks (a skein bug)",
        crate::runtime::rank_of(g),
        crate::runtime::rank()
    )
}

/// The refusal of a blocking call made in delegated context towards a trustee of another MPI
/// rank (delegated code cannot wait for the answer): names the non-blocking form to use.
#[cold]
#[inline(never)]
#[track_caller]
pub(crate) fn blocking_across_ranks(g: usize, what: &str, instead: &str) -> ! {
    panic!(
        "skein: `{what}` on worker {g} of rank {} (this is rank {}) from delegated context (a \
         closure on a trustee or a continuation): it would wait for the answer of another \
         rank; use `{instead}`, or call `{what}` from a fiber (`spawn_on`, `launch`)",
        crate::runtime::rank_of(g),
        crate::runtime::rank()
    )
}
