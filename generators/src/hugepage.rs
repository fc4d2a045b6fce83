//! Large buffers backed by transparent huge pages where the kernel offers them.
//!
//! Random reads into a 1 GiB array run about twice as fast with 2 MiB pages as with
//! 4 KiB pages on our machines, and THP is in `madvise` mode there, so the
//! big graph arrays (edge lists, CSR offsets, targets, weights) ask for huge pages with
//! `madvise(MADV_HUGEPAGE)` before their pages are first touched. Elsewhere (non-Linux,
//! small buffers) the advice is skipped; it never changes a buffer's contents.
//!
//! Two kinds of buffer: [`zeroed_vec`] leaves zeroed pages untouched (large zeroed
//! allocations come straight from `mmap`), so they are faulted in by whoever writes
//! them first; [`filled_vec`] fills in parallel (rayon), spreading the page faults over
//! the threads.
//!
//! Public so that the engines can give their own large per-graph arrays (compact arc
//! copies) the same backing.
//!
//! The only `unsafe` here: one `madvise` call on memory the `Vec` owns, and marking the
//! filled elements of a `Vec` initialised.

use rayon::prelude::*;

/// Buffers smaller than this are not worth advising (a huge page is 2 MiB).
const MIN_ADVISE_BYTES: usize = 4 << 20;

/// Elements filled per rayon task.
const FILL_CHUNK: usize = 1 << 16;

/// A `Vec<T>` of `n` copies of `value`, advised for huge pages before it is filled (in
/// parallel, on rayon's current pool).
///
/// ```
/// let v = skein_generators::hugepage::filled_vec(3, 7u32);
/// assert_eq!(v, [7, 7, 7]);
/// ```
pub fn filled_vec<T: Copy + Send + Sync>(n: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    advise_huge(v.as_mut_ptr().cast(), n.saturating_mul(std::mem::size_of::<T>()));
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(FILL_CHUNK)
        .for_each(|c| c.iter_mut().for_each(|x| _ = x.write(value)));
    // SAFETY: the capacity is at least n and the loop above initialised all n elements
    // of the spare capacity (par_chunks_mut covers the whole slice).
    unsafe { v.set_len(n) };
    v
}

/// A zeroed `Vec<T>` of `n` elements, advised for huge pages, left untouched: large
/// zeroed allocations come straight from `mmap` (no memset), so the pages are faulted
/// in (as huge pages where possible) by the code that first writes them.
///
/// ```
/// let v: Vec<u64> = skein_generators::hugepage::zeroed_vec(4);
/// assert_eq!(v, [0; 4]);
/// ```
pub fn zeroed_vec<T: Zeroed>(n: usize) -> Vec<T> {
    let mut v = vec![T::ZERO; n];
    advise_huge(v.as_mut_ptr().cast(), n.saturating_mul(std::mem::size_of::<T>()));
    v
}

/// Element types whose all-zero value `vec!` allocates with `alloc_zeroed` (so
/// [`zeroed_vec`] never touches its pages).
pub trait Zeroed: Clone {
    /// The zero value.
    const ZERO: Self;
}

impl Zeroed for u64 {
    const ZERO: u64 = 0;
}

impl Zeroed for u32 {
    const ZERO: u32 = 0;
}

impl Zeroed for f32 {
    const ZERO: f32 = 0.0;
}

/// Asks the kernel to back `[ptr, ptr + bytes)` with transparent huge pages.
#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, bytes: usize) {
    if bytes < MIN_ADVISE_BYTES {
        return;
    }
    const PAGE: usize = 4096;
    let start = (ptr as usize).next_multiple_of(PAGE);
    let end = (ptr as usize + bytes) & !(PAGE - 1);
    if end <= start {
        return;
    }
    // SAFETY: [start, end) lies inside the allocation of `bytes` bytes at `ptr`, which
    // the caller owns, and is page-aligned as madvise requires. MADV_HUGEPAGE is only
    // advice: it does not change the mapping's contents or validity, and a failure
    // (e.g. THP disabled) is harmless, so the return value is ignored.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: *mut u8, _bytes: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_small_and_large() {
        assert!(filled_vec(0, 7u32).is_empty());
        let v = filled_vec(10, 7u32);
        assert_eq!(v, vec![7; 10]);
        let n = (MIN_ADVISE_BYTES / 8) * 2 + 3;
        let v = filled_vec(n, 0xabu64);
        assert_eq!(v.len(), n);
        assert!(v.iter().all(|&x| x == 0xab));
        let z: Vec<f32> = zeroed_vec(n);
        assert!(z.len() == n && z.iter().all(|&x| x == 0.0));
    }
}
