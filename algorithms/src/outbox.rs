//! Batching of the small updates one partition sends to others: an [`Outbox`] keeps one
//! [`Packet`] per destination partition; [`Outbox::push`] adds an update and sends the
//! packet when it is full, [`Outbox::flush`] sends every non-empty packet (call it at the
//! end of every processing step). A packet is one delegated request: its `Plain` argument
//! (copied byte for byte, also to another rank), of a fixed size of `WORDS` 8-byte words,
//! holding as many updates as fit ([`Packet::CAPACITY`]) whatever their type. So a kernel
//! pushes any number of updates of any `Plain` type of at most `8 × WORDS` bytes and never
//! packs them by hand under the runtime's 256-byte limit on a `Plain` argument.
//!
//! The default of 31 words (248 bytes; 256 with the length) is the largest packet a
//! `Plain` argument takes. The SSSP and BFS kernels use smaller packets of 8 updates
//! (`crate::sssp`, `crate::bfs`), measured at SCALE 20 when they were written.
//!
//! ```
//! use skein_algorithms::outbox::Outbox;
//!
//! // Updates (local vertex, contribution) for 2 partitions: 15 fit one packet.
//! let mut out: Outbox<(u32, f64)> = Outbox::new(2);
//! let mut sent = Vec::new();
//! for v in 0..40u32 {
//!     out.push(1, (v, 0.5), &mut |owner, packet| sent.push((owner, packet.items().len())));
//! }
//! out.flush(&mut |owner, packet| sent.push((owner, packet.items().len())));
//! assert_eq!(sent, [(1, 15), (1, 15), (1, 10)]);
//! assert_eq!(out.requests, 3);
//! ```
//!
//! Inside a kernel the packets go to the partitions' handles with [`Outbox::send`]
//! (an `apply_then` whose closure applies the items on the receiver).

use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};

use skein::{Plain, Trust};

/// Words of a packet by default: the largest `Plain` argument (256 bytes) less the length.
pub const DEFAULT_WORDS: usize = 31;

/// Up to [`Packet::CAPACITY`] updates of type `T` for one partition, sent by value in one
/// request (its `Plain` argument).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Packet<T: Plain, const WORDS: usize = DEFAULT_WORDS> {
    len: u32,
    zero: u32,
    words: [MaybeUninit<u64>; WORDS],
    item: PhantomData<T>,
}

// SAFETY: repr(C) of two u32 and words that hold `Plain` items (no address): the packet has
// no address either. Every bit pattern is a valid packet: `len` above the capacity (corrupted
// bytes) is clamped by `Packet::items`, and the items below `len` are `Plain`, valid for every
// bit pattern. The words past `len` (and an item's padding) may be uninitialised; they are
// moved by byte copies only (`skein::Plain`'s invariants) and never read as values.
unsafe impl<T: Plain, const WORDS: usize> Plain for Packet<T, WORDS> {}

impl<T: Plain, const WORDS: usize> std::fmt::Debug for Packet<T, WORDS> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packet").field("len", &self.items().len()).finish()
    }
}

impl<T: Plain, const WORDS: usize> Default for Packet<T, WORDS> {
    fn default() -> Self {
        Packet::new()
    }
}

impl<T: Plain, const WORDS: usize> Packet<T, WORDS> {
    /// Updates a packet holds: as many `T` as fit in `8 × WORDS` bytes. A compile-time error
    /// for a zero-sized `T`, a `T` larger than the packet or aligned above 8 bytes.
    pub const CAPACITY: usize = {
        assert!(size_of::<T>() > 0, "a packet's item must not be zero-sized");
        assert!(align_of::<T>() <= 8, "a packet's item must be aligned to 8 bytes or less");
        assert!(size_of::<T>() <= 8 * WORDS, "the item is larger than the packet: more WORDS");
        8 * WORDS / size_of::<T>()
    };

    /// An empty packet.
    pub fn new() -> Self {
        let _ = Self::CAPACITY;
        Packet { len: 0, zero: 0, words: [MaybeUninit::uninit(); WORDS], item: PhantomData }
    }

    /// Adds `item`; true when the packet is now full.
    ///
    /// # Panics
    /// If the packet is full already.
    #[inline]
    pub fn push(&mut self, item: T) -> bool {
        let i = self.len as usize;
        assert!(i < Self::CAPACITY, "packet full");
        // SAFETY: `i < CAPACITY`, so the item's bytes `i·size..(i + 1)·size` lie inside
        // `words`; the words are 8-aligned and `align_of::<T>() <= 8` divides `size_of::<T>()`,
        // so the address is aligned for `T`.
        unsafe { (self.words.as_mut_ptr() as *mut T).add(i).write(item) };
        self.len += 1;
        self.len as usize == Self::CAPACITY
    }

    /// The updates (at most [`Packet::CAPACITY`], whatever the length field says).
    #[inline]
    pub fn items(&self) -> &[T] {
        let len = (self.len as usize).min(Self::CAPACITY);
        // SAFETY: the first `len` items were written by `push` (on this side, or on the sender
        // and copied byte for byte with the packet), aligned and inside `words` (see `push`);
        // `T: Plain` is valid for every bit pattern, so also for corrupted bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr() as *const T, len) }
    }

    /// True without updates.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One outgoing [`Packet`] per destination partition, handed to a `send` function when full
/// or flushed.
#[derive(Debug)]
pub struct Outbox<T: Plain, const WORDS: usize = DEFAULT_WORDS> {
    packets: Vec<Packet<T, WORDS>>,
    /// Requests (packets) sent so far.
    pub requests: u64,
}

impl<T: Plain, const WORDS: usize> Outbox<T, WORDS> {
    /// Empty packets for `parts` destinations.
    pub fn new(parts: usize) -> Self {
        Outbox { packets: vec![Packet::new(); parts], requests: 0 }
    }

    /// Adds `item` for `owner`, handing the packet to `send(owner, packet)` when it is full.
    #[inline]
    pub fn push(&mut self, owner: usize, item: T, send: &mut impl FnMut(usize, Packet<T, WORDS>)) {
        let p = &mut self.packets[owner];
        if p.push(item) {
            send(owner, *p);
            p.len = 0;
            self.requests += 1;
        }
    }

    /// Hands every non-empty packet to `send(owner, packet)`.
    pub fn flush(&mut self, send: &mut impl FnMut(usize, Packet<T, WORDS>)) {
        for (owner, p) in self.packets.iter_mut().enumerate() {
            if p.len > 0 {
                send(owner, *p);
                p.len = 0;
                self.requests += 1;
            }
        }
    }

    /// [`Outbox::push`] that sends a full packet to `peers[owner]` as a delegated request
    /// ([`send_packet`]): `apply(state, items)` runs on the owner's trustee.
    #[inline]
    pub fn send<P, F>(&mut self, owner: usize, item: T, peers: &[Trust<P>], apply: F)
    where
        P: Send + 'static,
        F: Fn(&mut P, &[T]) + Copy + Send + 'static,
    {
        self.push(owner, item, &mut |o, p| send_packet(&peers[o], p, apply));
    }

    /// [`Outbox::flush`] to the partitions' handles, as [`Outbox::send`].
    pub fn flush_to<P, F>(&mut self, peers: &[Trust<P>], apply: F)
    where
        P: Send + 'static,
        F: Fn(&mut P, &[T]) + Copy + Send + 'static,
    {
        self.flush(&mut |o, p| send_packet(&peers[o], p, apply));
    }
}

/// Sends `packet` to the property of `to` without waiting: `apply(state, items)` runs on its
/// trustee (`apply_then` with the packet as the `Plain` argument; `apply` must capture
/// nothing, as every delegated closure). Works from delegated code (a partition sending
/// from its own trustee) and from fibers, to any worker of any rank.
#[inline]
pub fn send_packet<P, T, const WORDS: usize, F>(to: &Trust<P>, packet: Packet<T, WORDS>, apply: F)
where
    P: Send + 'static,
    T: Plain,
    F: Fn(&mut P, &[T]) + Copy + Send + 'static,
{
    to.apply_then(packet, move |s, p: Packet<T, WORDS>| apply(s, p.items()), |()| ());
}
