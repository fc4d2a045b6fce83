//! The request/response slots between a client worker and a trustee worker.
//!
//! Layout of a slot (one allocation, 128-byte aligned):
//!
//! ```text
//! 0    ┌──────────────────────────────┐  primary block (128 bytes)
//!      │ header: seq, words, count,   │  ← the line a trustee polls
//!      │ panics                       │
//! 64   ├──────────────────────────────┤
//!      │ first 64 bytes of records    │
//! 128  ├──────────────────────────────┤  overflow block (default 8192 or 1024 bytes)
//!      │ more records / results       │
//!      └──────────────────────────────┘
//! ```
//!
//! # Protocol (numbered rules; every `SAFETY:` comment in this module cites one)
//!
//! Each ordered pair (client `c`, trustee `t`) owns [`PIPELINE`] *lanes*; a lane is a request
//! slot `req` (written only by `c`) and a response slot `resp` (written only by `t`). Batches
//! are numbered 1, 2, 3, ... and batch `s` travels in lane `s % PIPELINE`, so while the trustee
//! serves one batch the client can already publish the next one (and run the completions of
//! the previous one). `c` remembers the last batch it published (`sent`) and the last response
//! it consumed (`acked`), `t` the last batch it answered (`served`). No read-modify-write
//! atomics.
//!
//! 1. **Idle**: the client owns lane `b`'s `req` (header fields and data) when the lane's last
//!    batch has been answered and consumed, i.e. `acked >= sent + 1 - PIPELINE` for the next
//!    batch `sent + 1` of that lane. It writes the batch, then Release-stores
//!    `req.seq = sent + 1`.
//! 2. **Request**: after `t` Acquire-loads `req.seq == served + 1` in lane
//!    `(served + 1) % PIPELINE`, `t` owns that `req`'s data (it reads and consumes the records)
//!    and the lane's `resp` header fields, data and panic list. It writes all results in request
//!    order, then Release-stores `resp.seq = served + 1`.
//! 3. **Response**: after `c` Acquire-loads `resp.seq == acked + 1` in lane
//!    `(acked + 1) % PIPELINE`, `c` owns that `resp`'s data and panic list (and, once it has
//!    consumed them, the lane's `req` again, rule 1).
//!
//! A lane's sequence numbers grow by `PIPELINE` from one use to the next, so neither side can
//! mistake the lane's previous batch for the one it waits for. Hence at any time each byte has
//! one owner, and the Release/Acquire pairs on `seq` order every write of the previous owner
//! before every access of the next one.

use crate::sync::proto::{AtomicU64, UnsafeCell};
use crate::sync::Ordering;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// A panic payload carried from a trustee back to its client.
pub(crate) type PanicPayload = Box<dyn std::any::Any + Send + 'static>;

/// Bytes of record data inside the primary block.
pub(crate) const PRIMARY_DATA: usize = 64;
/// Default overflow block size.
pub(crate) const DEFAULT_OVERFLOW: usize = 1024;
/// Default overflow block size for runtimes of at most 16 workers.
pub(crate) const DEFAULT_OVERFLOW_FEW_WORKERS: usize = 8192;
/// Batches that may be in flight at once between one client and one trustee (lanes per pair).
pub(crate) const PIPELINE: usize = 2;

#[repr(C)]
struct SlotHeader {
    seq: AtomicU64,
    words: UnsafeCell<u32>,
    count: UnsafeCell<u32>,
    panics: UnsafeCell<Vec<(u32, PanicPayload)>>,
}

#[cfg(not(all(test, fw_loom)))]
const _: () = assert!(std::mem::size_of::<SlotHeader>() <= 64);

/// Offset of the data area: 64 bytes (the header's cache line) in normal builds; loom's
/// instrumented atomics and cells are bigger, so under `fw_loom` the header may take more.
const HEADER_BYTES: usize = std::mem::size_of::<SlotHeader>().next_multiple_of(64);

/// One slot: header plus `data_bytes` of record/result space.
pub(crate) struct Slot {
    base: NonNull<u8>,
    data_bytes: usize,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("data_bytes", &self.data_bytes).finish()
    }
}

// SAFETY: the slot is shared between exactly two threads and every access to its non-atomic
// parts follows the ownership rules (1)-(3) at the top of this module.
unsafe impl Send for Slot {}
// SAFETY: as above.
unsafe impl Sync for Slot {}

impl Slot {
    fn layout(overflow: usize) -> Layout {
        Layout::from_size_align(HEADER_BYTES + PRIMARY_DATA + overflow.next_multiple_of(128), 128)
            .expect("slot layout")
    }

    /// Allocates a slot whose data area is `PRIMARY_DATA + overflow` bytes.
    pub(crate) fn new(overflow: usize) -> Slot {
        let layout = Self::layout(overflow);
        // SAFETY: the layout has non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let base = NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: fresh allocation, 128-aligned, big enough for the header; nobody else sees it.
        unsafe {
            std::ptr::write(
                base.as_ptr() as *mut SlotHeader,
                SlotHeader {
                    seq: AtomicU64::new(0),
                    words: UnsafeCell::new(0),
                    count: UnsafeCell::new(0),
                    panics: UnsafeCell::new(Vec::new()),
                },
            )
        };
        Slot { base, data_bytes: PRIMARY_DATA + overflow.next_multiple_of(128) }
    }

    fn header(&self) -> &SlotHeader {
        // SAFETY: written in `new`, lives until `drop`.
        unsafe { &*(self.base.as_ptr() as *const SlotHeader) }
    }

    /// Puts the slot back in the state [`Slot::new`] leaves it in, for the next run of a
    /// runtime that keeps its slots (`crate::runtime::run_state`): sequence 0, no batch, no
    /// panics (a list left by an aborted run is dropped here). The data area keeps its bytes:
    /// they are initialized (zeroed by `new`, written since), and rules (1)-(3) let nobody
    /// read a byte before its owner has written it again.
    pub(crate) fn reset(&mut self) {
        let h = self.header();
        h.seq.store(0, Ordering::Relaxed);
        // SAFETY: `&mut self`: no other thread uses the slot (its run has ended), so the
        // header fields are ours.
        h.words.with_mut(|p| unsafe { *p = 0 });
        // SAFETY: as above.
        h.count.with_mut(|p| unsafe { *p = 0 });
        // SAFETY: as above.
        drop(h.panics.with_mut(|p| std::mem::take(unsafe { &mut *p })));
    }

    /// Capacity of the data area in 8-byte words.
    pub(crate) fn data_words(&self) -> usize {
        self.data_bytes / 8
    }

    /// Capacity of the data area in bytes.
    pub(crate) fn data_bytes(&self) -> usize {
        self.data_bytes
    }

    /// Pointer to the data area (8-aligned). Access follows rules (1)-(3).
    pub(crate) fn data(&self) -> *mut u64 {
        // SAFETY: offset HEADER_BYTES is inside the allocation (primary block).
        unsafe { self.base.as_ptr().add(HEADER_BYTES) as *mut u64 }
    }

    /// Acquire-loads the sequence number.
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        self.header().seq.load(Ordering::Acquire)
    }

    /// Release-publishes a batch: the owner has written the data and header fields.
    ///
    /// # Safety
    /// The caller must currently own this slot's non-atomic parts (rule 1 for a request slot,
    /// rule 2 for a response slot); ownership passes to the other side.
    #[inline]
    pub(crate) unsafe fn publish(&self, seq: u64, words: u32, count: u32) {
        // SAFETY: forwarded contract.
        unsafe { self.publish_ordered(seq, words, count, Ordering::Release) }
    }

    /// [`Slot::publish`] with a chosen store ordering: only `Release` is correct; the loom
    /// tests pass `Relaxed` to show the model catches the race.
    ///
    /// # Safety
    /// As [`Slot::publish`].
    #[inline(always)]
    unsafe fn publish_ordered(&self, seq: u64, words: u32, count: u32, order: Ordering) {
        let h = self.header();
        // SAFETY: the caller owns the header fields (rules 1/2).
        h.words.with_mut(|p| unsafe { *p = words });
        // SAFETY: as above.
        h.count.with_mut(|p| unsafe { *p = count });
        h.seq.store(seq, order);
    }

    /// Reads `(words, count)` of a published batch.
    ///
    /// # Safety
    /// The caller must own the slot's contents (after Acquire-loading `seq`: rule 2 or 3).
    #[inline]
    pub(crate) unsafe fn batch(&self) -> (u32, u32) {
        let h = self.header();
        // SAFETY: owned by the caller per the function contract.
        let words = h.words.with(|p| unsafe { *p });
        // SAFETY: as above.
        let count = h.count.with(|p| unsafe { *p });
        (words, count)
    }

    /// Stores the panic list of a response slot (the trustee, before publishing).
    ///
    /// # Safety
    /// The caller must own the response slot's contents (rule 2).
    #[inline]
    pub(crate) unsafe fn put_panics(&self, list: Vec<(u32, PanicPayload)>) {
        // SAFETY: exclusive by the function contract.
        self.header().panics.with_mut(|p| unsafe { *p = list });
    }

    /// Takes the panic list of a response slot (the client, after observing the response).
    ///
    /// # Safety
    /// The caller must own the response slot's contents (rule 3; or rule 2 for the trustee).
    #[inline]
    pub(crate) unsafe fn take_panics(&self) -> Vec<(u32, PanicPayload)> {
        // SAFETY: exclusive by the function contract.
        self.header().panics.with_mut(|p| std::mem::take(unsafe { &mut *p }))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no other thread uses the slot any more; header written in `new`.
        unsafe {
            std::ptr::drop_in_place(self.base.as_ptr() as *mut SlotHeader);
            dealloc(self.base.as_ptr(), Self::layout(self.data_bytes - PRIMARY_DATA));
        }
    }
}

/// The request and response slots of one lane.
#[derive(Debug)]
pub(crate) struct Lane {
    /// Written by the client.
    pub(crate) req: Slot,
    /// Written by the trustee.
    pub(crate) resp: Slot,
}

impl Lane {
    pub(crate) fn new(overflow: usize) -> Lane {
        Lane { req: Slot::new(overflow), resp: Slot::new(overflow) }
    }
}

/// The lanes of one (client, trustee) pair.
#[derive(Debug)]
pub(crate) struct SlotPair {
    lanes: [Lane; PIPELINE],
}

impl SlotPair {
    pub(crate) fn new(overflow: usize) -> SlotPair {
        SlotPair { lanes: std::array::from_fn(|_| Lane::new(overflow)) }
    }

    /// Back to the state [`SlotPair::new`] leaves it in ([`Slot::reset`]).
    pub(crate) fn reset(&mut self) {
        for lane in &mut self.lanes {
            lane.req.reset();
            lane.resp.reset();
        }
    }

    /// True when the pair's slots were made with `overflow` bytes of overflow block (those a
    /// runtime with that setting would make).
    pub(crate) fn fits(&self, overflow: usize) -> bool {
        let bytes = PRIMARY_DATA + overflow.next_multiple_of(128);
        self.lanes.iter().all(|l| l.req.data_bytes == bytes && l.resp.data_bytes == bytes)
    }

    /// The lane that carries batch `seq`.
    #[inline]
    pub(crate) fn lane(&self, seq: u64) -> &Lane {
        &self.lanes[(seq % PIPELINE as u64) as usize]
    }
}

#[cfg(all(test, not(fw_loom)))]
mod pipeline_tests;

/// Model checking of the protocol with loom: `RUSTFLAGS="--cfg fw_loom"
/// LOOM_MAX_PREEMPTIONS=3 cargo test -p skein --release --lib loom_`. One loom thread plays the
/// client, one the trustee; the slot code is the real one (its atomics and header cells are
/// loom's under `fw_loom`, see `crate::sync::proto`), so loom checks that every access to the
/// header fields and the panic list is ordered after the previous owner's writes.
#[cfg(all(test, fw_loom))]
mod loom_tests;
