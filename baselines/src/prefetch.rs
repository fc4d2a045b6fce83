//! The prefetch hint: asks the CPU to load a cache line that will be read soon, where a
//! kernel knows an address a few steps before it reads it (the rayon SSSP, [`crate::delta`]).
//! This crate shares nothing with the framework, which has its own.
//!
//! # Unsafe code
//!
//! One block, the prefetch instruction itself. Invariant: none is needed; a prefetch never
//! faults and has no architectural effect, whatever the address.

/// Hints the CPU to load the cache line holding `r` (nothing where there is no such
/// instruction).
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, part of every x86_64 target; a prefetch never
    // faults and changes nothing but timing, for any address (here a valid reference).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            r as *const T as *const i8,
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefetching_changes_nothing() {
        let v = vec![7u32; 1000];
        for x in &v {
            super::prefetch(x);
        }
        assert!(v.iter().all(|&x| x == 7));
    }
}
