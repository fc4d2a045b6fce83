//! The prefetch hint: asks the CPU to load a cache line that will be read soon.
//!
//! Used where misses can be overlapped: a trustee prefetches the targets of the records ahead
//! of the one it runs ([`super::batch`]) and the lines of a batch as it starts serving it, and
//! [`crate::prefetch`] offers it to programs that walk handles at random. A prefetch never
//! faults and changes nothing but timing, whatever the address.

/// Hints the CPU to load the cache line at `p` (no effect where there is no such instruction).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and has no architectural effect, for any address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
