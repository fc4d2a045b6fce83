//! The ring protocol of the one-sided transports: a byte stream that one writer fills and one
//! reader drains, in memory the reader polls (`docs/rack-mode.md` §4, the seeds' rings).
//!
//! # Layout
//!
//! A ring is two counters and `cap` bytes of data (`cap` a power of two, a multiple of 8):
//! `tail`, the bytes ever written (only the writer stores it), and `head`, the bytes ever
//! read (only the reader stores it); each on a cache line of its own ([`Counters`]). Byte `i`
//! of the stream lives at `data[i % cap]`. Envelopes travel as *frames*: an 8-byte
//! little-endian length, the envelope's bytes, zeroes up to the next multiple of 8. Every
//! frame starts at a multiple of 8, so a frame's length word never straddles the end of the
//! data (`cap` is a multiple of 8).
//!
//! # Publication and credit (the protocol the loom models check)
//!
//! * **Writer**: reads `head` (Acquire); the free bytes are `cap - (tail - head)`; copies up
//!   to that many bytes of the stream at `tail % cap` (wrapping), then stores `tail + n`
//!   (Release). A frame may go in several pieces ([`Writer::push`] takes what fits and says
//!   how far it got): an envelope larger than the ring streams through it.
//! * **Reader**: reads `tail` (Acquire); copies the bytes between `head` and it out of the
//!   ring, then stores `head + n` (Release): the *credit* that lets the writer reuse them.
//!
//! The writer's Release store of `tail` orders its copy before it, and the reader's Acquire
//! load sees the copy complete: a reader never reads bytes being written. The reader's
//! Release store of `head` orders its reads before it, and the writer's Acquire load sees
//! them done: a writer never overwrites bytes not yet read. The counters are `u64`s that
//! only grow (by at most `cap` per step), so they never wrap in practice (2^64 bytes).
//!
//! # Whose memory
//!
//! The ring logic is written once, over [`RingMem`]: how bytes and counters reach the
//! ring's memory. The shared-memory backend (`transport::shm`) maps the receiver's rings in
//! every writer's address space and writes with plain stores; the RDMA verbs backend
//! (`transport::verbs`) writes the data and then `tail` with one-sided RDMA writes on one
//! queue pair, and reads the credit `head` from a copy the reader writes back the same way.
//!
//! # Faults
//!
//! The bytes come from another process. A frame whose length is above the reader's limit
//! (a torn or forged ring) is an error ([`ReadError`]): the transport ends the job, as a
//! forged MPI envelope's transport does. Envelopes read whole are validated by the runtime
//! like every other envelope.

use crate::sync::proto::AtomicU64;
use crate::sync::Ordering;

/// Bytes of a frame's length word.
pub(crate) const FRAME_HEADER: usize = 8;

/// A length rounded up to the next multiple of 8.
#[inline]
pub(crate) const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// The two counters of a ring, each on a cache line of its own (the writer stores one, the
/// reader the other).
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Counters {
    /// Bytes ever written; stored by the writer only (Release).
    pub(crate) tail: AtomicU64,
    _pad: [u64; 7],
    /// Bytes ever read; stored by the reader only (Release).
    pub(crate) head: AtomicU64,
    _pad2: [u64; 7],
}

impl Counters {
    /// Both counters at 0 (a new ring).
    #[cfg(test)]
    pub(crate) fn new() -> Counters {
        Counters { tail: AtomicU64::new(0), _pad: [0; 7], head: AtomicU64::new(0), _pad2: [0; 7] }
    }
}

/// Bytes of [`Counters`].
pub(crate) const COUNTERS_BYTES: usize = std::mem::size_of::<Counters>();

/// How the ring logic reaches one ring's memory: its counters and its `cap` data bytes.
///
/// # Safety
///
/// An implementation hands out the same counters and data to the one writer and the one
/// reader of the ring, and its copies touch exactly the data bytes `at..at + len` (`at + len
/// <= cap`), which the protocol gives to one side at a time (module docs).
pub(crate) unsafe trait RingMem {
    /// The ring's counters.
    fn counters(&self) -> &Counters;
    /// Data bytes (a power of two, a multiple of 8).
    fn cap(&self) -> usize;
    /// Copies `src` into data bytes `at..at + src.len()`.
    fn put(&self, at: usize, src: &[u8]);
    /// Copies data bytes `at..at + dst.len()` into `dst`.
    fn get(&self, at: usize, dst: &mut [u8]);
}

/// Copies `src` into the ring at stream position `pos`, wrapping at the end of the data.
fn put_wrapping<M: RingMem + ?Sized>(mem: &M, pos: u64, src: &[u8]) {
    let cap = mem.cap();
    let at = (pos % cap as u64) as usize;
    let first = src.len().min(cap - at);
    mem.put(at, &src[..first]);
    if first < src.len() {
        mem.put(0, &src[first..]);
    }
}

/// Copies the ring's bytes at stream position `pos` into `dst`, wrapping.
fn get_wrapping<M: RingMem + ?Sized>(mem: &M, pos: u64, dst: &mut [u8]) {
    let cap = mem.cap();
    let at = (pos % cap as u64) as usize;
    let first = dst.len().min(cap - at);
    mem.get(at, &mut dst[..first]);
    if first < dst.len() {
        mem.get(0, &mut dst[first..]);
    }
}

/// The writer's side of one ring: its own copy of `tail`, the last `head` it read, and the
/// frame it is part-way through.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    tail: u64,
    head_seen: u64,
    /// Bytes of the current frame already in the ring (length word included); 0 between
    /// frames.
    done: usize,
}

const ZEROES: [u8; 8] = [0; 8];

impl Writer {
    /// Free bytes now, reading the reader's credit again when the last one seen leaves fewer
    /// than `want`.
    fn free<M: RingMem + ?Sized>(&mut self, mem: &M, want: usize) -> usize {
        let cap = mem.cap() as u64;
        // A reader's count behind the writer's by more than the ring, or ahead of it, is
        // impossible (a broken peer): no room, ever (the job ends by fate sharing).
        let free = |head: u64| cap.saturating_sub(self.tail.wrapping_sub(head));
        if free(self.head_seen) < want as u64 {
            self.head_seen = mem.counters().head.load(Ordering::Acquire);
        }
        free(self.head_seen) as usize
    }

    /// Writes as much of `msg`'s frame as fits and publishes it; true when the frame is
    /// complete (the next call starts a new one). Call again with the same `msg` until it
    /// returns true.
    pub(crate) fn push<M: RingMem + ?Sized>(&mut self, mem: &M, msg: &[u8]) -> bool {
        let frame = FRAME_HEADER + pad8(msg.len());
        let free = self.free(mem, frame - self.done);
        // Whole 8-byte words only, so that every frame starts at a multiple of 8.
        let n = free.min(frame - self.done) & !7;
        if n == 0 {
            return false;
        }
        let mut pos = self.tail;
        let mut left = n;
        let mut done = self.done;
        if done == 0 {
            put_wrapping(mem, pos, &(msg.len() as u64).to_le_bytes());
            pos += FRAME_HEADER as u64;
            done = FRAME_HEADER;
            left -= FRAME_HEADER;
        }
        let body_from = done - FRAME_HEADER;
        let body = left.min(msg.len().saturating_sub(body_from));
        if body > 0 {
            put_wrapping(mem, pos, &msg[body_from..body_from + body]);
            pos += body as u64;
            left -= body;
        }
        if left > 0 {
            // The frame's padding: fewer than 8 bytes, after the last body byte.
            put_wrapping(mem, pos, &ZEROES[..left]);
            pos += left as u64;
        }
        self.tail = pos;
        mem.counters().tail.store(pos, Ordering::Release);
        self.done = done + body + left;
        if self.done == frame {
            self.done = 0;
            true
        } else {
            false
        }
    }

    /// Bytes ever written (a writer that moved bytes has a larger count).
    #[inline]
    pub(crate) fn written(&self) -> u64 {
        self.tail
    }

    /// True when no frame is part-way through.
    pub(crate) fn between_frames(&self) -> bool {
        self.done == 0
    }
}

/// A frame a reader cannot accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReadError {
    /// The length word is above the limit.
    #[error("a frame claims {len} bytes, above the {max}-byte envelope limit")]
    TooLong {
        /// The claimed length.
        len: u64,
        /// The reader's limit.
        max: usize,
    },
    /// The writer's count is impossible: behind the reader's, more than the ring ahead of
    /// it, or not at a multiple of 8.
    #[error("the writer's count {tail} is impossible with the reader at {head} in a ring of {cap} bytes")]
    BadTail {
        /// The writer's count read.
        tail: u64,
        /// The reader's count.
        head: u64,
        /// The ring's data bytes.
        cap: usize,
    },
}

/// The reader's side of one ring: its own copy of `head`, the last `tail` it read, and the
/// envelope it is part-way through.
#[derive(Debug)]
pub(crate) struct Reader {
    head: u64,
    tail_seen: u64,
    /// The envelope being assembled and its length; `None` between frames.
    partial: Option<(Vec<u8>, usize)>,
    max: usize,
}

impl Reader {
    /// A reader that refuses frames above `max` bytes.
    pub(crate) fn new(max: usize) -> Reader {
        Reader { head: 0, tail_seen: 0, partial: None, max }
    }

    /// Bytes ever read (a reader that gave credit back has a larger count).
    // The shared-memory transport (feature `mpi`) and the loom models read it.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    #[inline]
    pub(crate) fn consumed(&self) -> u64 {
        self.head
    }

    /// True while an envelope is part-way read (its first bytes came, not all).
    pub(crate) fn mid_frame(&self) -> bool {
        self.partial.is_some()
    }

    /// True when the writer published bytes not yet read (one Acquire load).
    #[inline]
    pub(crate) fn has_bytes<M: RingMem + ?Sized>(&mut self, mem: &M) -> bool {
        if self.tail_seen == self.head {
            self.tail_seen = mem.counters().tail.load(Ordering::Acquire);
        }
        self.tail_seen != self.head
    }

    /// Reads what the writer published; the next whole envelope, if one is complete now.
    /// `buffer` supplies the vector an envelope is read into (a pooled one, cleared).
    pub(crate) fn pull<M: RingMem + ?Sized>(
        &mut self,
        mem: &M,
        buffer: impl FnOnce() -> Vec<u8>,
    ) -> Result<Option<Vec<u8>>, ReadError> {
        if !self.has_bytes(mem) {
            return Ok(None);
        }
        let (tail, head, cap) = (self.tail_seen, self.head, mem.cap());
        if tail < head || tail - head > cap as u64 || tail % 8 != 0 {
            return Err(ReadError::BadTail { tail, head, cap });
        }
        let mut avail = (tail - head) as usize;
        let start = self.head;
        if self.partial.is_none() {
            // A frame starts here; its length word was published whole with its first piece.
            let mut len = [0u8; FRAME_HEADER];
            get_wrapping(mem, self.head, &mut len);
            let len = u64::from_le_bytes(len);
            if len > self.max as u64 {
                return Err(ReadError::TooLong { len, max: self.max });
            }
            self.head += FRAME_HEADER as u64;
            avail -= FRAME_HEADER;
            let mut v = buffer();
            v.clear();
            // Grown as the bytes arrive: a claimed length reserves at most 1 MiB up front.
            v.reserve((len as usize).min(1 << 20));
            self.partial = Some((v, len as usize));
        }
        let Some((v, len)) = self.partial.as_mut() else { unreachable!("set above") };
        // While a frame is incomplete, its bytes read so far are a multiple of 8 (every
        // piece the writer publishes is), so what is left of the frame is too.
        let (len, have) = (*len, v.len());
        let frame_left = pad8(len) - have;
        let n = avail.min(frame_left);
        let body = n.min(len - have);
        if body > 0 {
            v.resize(have + body, 0);
            get_wrapping(mem, self.head, &mut v[have..]);
        }
        // Padding after the last body byte is skipped, never copied.
        self.head += n as u64;
        if self.head != start {
            mem.counters().head.store(self.head, Ordering::Release);
        }
        if n == frame_left {
            return Ok(self.partial.take().map(|(v, _)| v));
        }
        Ok(None)
    }
}

#[cfg(all(test, fw_loom))]
mod loom_tests;
#[cfg(test)]
pub(crate) mod tests;
