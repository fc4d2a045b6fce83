//! Slabs for small properties: a property of at most 64 bytes (header included; 16 for a
//! `u64`) gets a slot of its size class in blocks that belong to its trustee.
//!
//! Why not `Box`: malloc gives a 16-byte property a 32-byte chunk, and the properties of all
//! trustees interleave in the order they were entrusted, so two trustees write to the same
//! cache lines. Here the properties of one trustee are dense and its own: a million counters
//! take 16 MB instead of 32, spread over a trustee's own lines, and blocks of 2 MiB are
//! advised to the kernel as huge pages (Linux), so that random accesses over many properties
//! miss the TLB less.
//!
//! Blocks are never returned to the system: a freed slot goes back to a free list and is
//! reused by the next property of its class (like a malloc arena that keeps its memory). The
//! blocks of a pool grow from 64 KiB to 2 MiB, so a program with few properties commits little.
//!
//! # Invariants
//!
//! 1. A block is allocated once with the layout of its size and alignment (its size: a power
//!    of two, at least the largest class) and never freed; every slot in it is class-aligned.
//! 2. Each slot handed out by [`alloc`] is owned by its caller until it passes it to [`free`]
//!    with the same class, once; until then it is in no free list and no bump range.
//! 3. A free slot is in exactly one free list, and its first word holds the next free slot of
//!    that list (null: the end). Free lists and bump ranges are only touched under their pool's
//!    mutex.

use std::alloc::{handle_alloc_error, Layout};
use std::ptr::{self, NonNull};
use std::sync::Mutex;

/// Slot sizes; a property takes the smallest that holds it (and its alignment).
const CLASSES: [usize; 3] = [16, 32, 64];
/// Pools: a trustee uses pool `index % POOLS`.
const POOLS: usize = 64;
const FIRST_BLOCK: usize = 64 << 10;
/// The largest block, and the size of a huge page on x86-64 and AArch64 (4 KiB base pages).
const BIG_BLOCK: usize = 2 << 20;

/// The size class (index into [`CLASSES`]) of a property of this size and alignment, if it is
/// slab-allocated.
pub(crate) const fn class_of(size: usize, align: usize) -> Option<usize> {
    let mut c = 0;
    while c < CLASSES.len() {
        if size <= CLASSES[c] && align <= CLASSES[c] {
            return Some(c);
        }
        c += 1;
    }
    None
}

/// One size class of one pool.
struct Class {
    /// Head of the free list (invariant 3).
    free: *mut u8,
    /// The unused rest of the newest block: `[bump, end)`.
    bump: *mut u8,
    end: *mut u8,
    /// Size of the next block.
    next_block: usize,
}

struct Pool {
    classes: [Class; CLASSES.len()],
}

// SAFETY: the pointers are into blocks that are never freed (invariant 1); they are only
// followed under the pool's mutex (invariant 3), so the pool may move between threads.
unsafe impl Send for Pool {}

const EMPTY: Class = Class {
    free: ptr::null_mut(),
    bump: ptr::null_mut(),
    end: ptr::null_mut(),
    next_block: FIRST_BLOCK,
};

static POOL: [Mutex<Pool>; POOLS] = [const { Mutex::new(Pool { classes: [EMPTY; 3] }) }; POOLS];

fn pool(trustee: usize) -> std::sync::MutexGuard<'static, Pool> {
    // A panic never happens while the lock is held (nothing in here panics but allocation
    // failure, which aborts), so a poisoned lock still guards consistent lists.
    POOL[trustee % POOLS].lock().unwrap_or_else(|e| e.into_inner())
}

/// A slot of class `class` from the pool of trustee `trustee` (uninitialized).
pub(crate) fn alloc(class: usize, trustee: usize) -> NonNull<u8> {
    let size = CLASSES[class];
    let mut p = pool(trustee);
    let c = &mut p.classes[class];
    if !c.free.is_null() {
        let slot = c.free;
        // SAFETY: a free slot's first word is the next free one (invariant 3); the slot is
        // class-aligned, so the word is aligned.
        c.free = unsafe { ptr::read(slot as *const *mut u8) };
        // SAFETY: slots are never null.
        return unsafe { NonNull::new_unchecked(slot) };
    }
    if c.bump == c.end {
        let block = new_block(c.next_block);
        c.bump = block;
        // SAFETY: the block has `next_block` bytes.
        c.end = unsafe { block.add(c.next_block) };
        c.next_block = (c.next_block * 2).min(BIG_BLOCK);
    }
    let slot = c.bump;
    // SAFETY: block sizes are multiples of every class size, so `[bump, end)` holds whole slots.
    c.bump = unsafe { slot.add(size) };
    // SAFETY: inside a block, never null.
    unsafe { NonNull::new_unchecked(slot) }
}

/// Returns a slot to the pool of trustee `trustee`.
///
/// # Safety
/// `slot` came from [`alloc`] with this `class` and is not used afterwards (invariant 2).
pub(crate) unsafe fn free(slot: NonNull<u8>, class: usize, trustee: usize) {
    let mut p = pool(trustee);
    let c = &mut p.classes[class];
    // SAFETY: the slot is ours (caller promise) and at least one aligned word long.
    unsafe { ptr::write(slot.as_ptr() as *mut *mut u8, c.free) };
    c.free = slot.as_ptr();
}

fn new_block(size: usize) -> *mut u8 {
    let layout = Layout::from_size_align(size, size).expect("block layout");
    // SAFETY: the layout has a non-zero size.
    let b = unsafe { std::alloc::alloc(layout) };
    if b.is_null() {
        handle_alloc_error(layout);
    }
    #[cfg(target_os = "linux")]
    if size == BIG_BLOCK {
        // SAFETY: advice about a range we own; it cannot fail in a way that matters (on a
        // kernel without transparent huge pages the block just keeps its base pages).
        unsafe { libc::madvise(b as *mut libc::c_void, size, libc::MADV_HUGEPAGE) };
    }
    b
}

#[cfg(test)]
mod tests;
