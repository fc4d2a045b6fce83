//! Batching of the updates one partition sends to another: up to [`BATCH`] updates for
//! one owner travel in one delegated request (a [`Batch`], the request's `Plain` argument), handed to
//! the kernel's `send` function when full and at the end of every processing step
//! ([`Outbox::flush`]). Shared by both kernels (SSSP scans, BFS visits).

/// Updates sent to one owner in one request.
pub(crate) const BATCH: usize = 8;

/// Up to [`BATCH`] updates for one owner, sent by value in one request (its `Plain`
/// argument, copied byte for byte, also to another rank).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(crate) struct Batch<T: Copy> {
    len: u32,
    items: [T; BATCH],
}

// SAFETY: repr(C) of a u32 and an array of Plain items: no address. Every bit pattern is a
// valid value of each field; a `len` above BATCH from corrupted bytes is clamped by
// `Batch::items` before any item is read.
unsafe impl<T: skein::Plain> skein::Plain for Batch<T> {}

impl<T: Copy + Default> Default for Batch<T> {
    fn default() -> Self {
        Batch { len: 0, items: [T::default(); BATCH] }
    }
}

impl<T: Copy> Batch<T> {
    /// Adds `item`; true when the batch is now full.
    #[inline]
    fn push(&mut self, item: T) -> bool {
        self.items[self.len as usize] = item;
        self.len += 1;
        self.len as usize == BATCH
    }

    /// The updates (at most [`BATCH`], whatever `len` says).
    pub(crate) fn items(&self) -> &[T] {
        &self.items[..(self.len as usize).min(BATCH)]
    }
}

/// One outgoing batch per partition, handed to `send` when full or flushed.
#[derive(Debug)]
pub(crate) struct Outbox<T: Copy> {
    batches: Vec<Batch<T>>,
    /// Requests sent this search.
    pub(crate) requests: u64,
}

impl<T: Copy + Default> Outbox<T> {
    /// Empty batches for `parts` owners.
    pub(crate) fn new(parts: usize) -> Self {
        Outbox { batches: vec![Batch::default(); parts], requests: 0 }
    }

    /// Adds `item` for `owner`, sending the batch when it is full.
    #[inline]
    pub(crate) fn push(&mut self, owner: usize, item: T, send: &mut impl FnMut(usize, Batch<T>)) {
        let b = &mut self.batches[owner];
        if b.push(item) {
            send(owner, *b);
            b.len = 0;
            self.requests += 1;
        }
    }

    /// Sends every non-empty batch.
    pub(crate) fn flush(&mut self, send: &mut impl FnMut(usize, Batch<T>)) {
        for (owner, b) in self.batches.iter_mut().enumerate() {
            if b.len > 0 {
                send(owner, *b);
                b.len = 0;
                self.requests += 1;
            }
        }
    }
}
