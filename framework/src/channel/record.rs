//! Type-erased `FnOnce` records packed into word buffers.
//!
//! A *record* is a closure stored by value (no allocation) behind a small header:
//!
//! ```text
//! word 0: call  — `unsafe fn(*mut u8, A) -> R`: moves the closure out of the record and runs it
//! word 1: drop  — `unsafe fn(*mut u8)`: drops the closure without running it
//! word 2: words (u32, closure size in 8-byte words) | aux (u32, free for the user: result bytes)
//! word 3..: the closure's bytes, 8-byte aligned
//! ```
//!
//! Closures that are larger than [`INLINE_MAX`] bytes or need more than 8-byte alignment are
//! boxed, and the record holds the box (one word). This is the wire format of a request batch
//! in-process: the `call` word is the *code id* (a monomorphized trampoline), the closure bytes
//! are the captured environment (including the property address).
//!
//! # Invariants (the whole module's unsafe code relies on them)
//!
//! 1. Every record in `buf[head..tail]` was written by [`RecordQueue::push`] (or moved there
//!    by [`RecordQueue::move_prefix_to`]'s inverse) and holds a live closure of the type its
//!    `call`/`drop` pointers were instantiated with.
//! 2. A record is consumed exactly once: either `call` (which `ptr::read`s the closure before
//!    running any user code) or `drop`. After consumption its bytes are dead.
//! 3. Closure bytes are moved only by `memcpy` (buffer growth, compaction, prefix moves), which
//!    is a valid move for every Rust value that is not pinned; closures are never pinned.

use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;

/// Closures above this many bytes are boxed instead of stored inline.
pub(crate) const INLINE_MAX: usize = 256;
/// Header size in words.
pub(crate) const HEADER_WORDS: usize = 3;

/// A type-erased record header as stored in a buffer.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Header<A, R> {
    pub(crate) call: unsafe fn(*mut u8, A) -> R,
    pub(crate) drop: unsafe fn(*mut u8),
    pub(crate) words: u32,
    pub(crate) aux: u32,
}

const _: () = assert!(size_of::<Header<u64, u64>>() == HEADER_WORDS * 8);

/// A callable closure popped from a queue: call it at once (before touching the queue again).
pub(crate) struct Popped<A, R> {
    call: unsafe fn(*mut u8, A) -> R,
    data: *mut u8,
    pub(crate) aux: u32,
}

impl<A, R> Popped<A, R> {
    /// Runs the popped closure.
    ///
    /// # Safety
    /// No push, compaction or drop of the queue it came from may happen between the pop and
    /// this call (the closure's bytes still live in the queue's buffer until it reads them).
    pub(crate) unsafe fn run(self, arg: A) -> R {
        // SAFETY: by the caller's promise the record bytes are intact; by invariant (1) `call`
        // matches the stored closure type; by (2) this is the only consumption.
        unsafe { (self.call)(self.data, arg) }
    }
}

unsafe fn call_inline<F: FnOnce(A) -> R, A, R>(p: *mut u8, a: A) -> R {
    // SAFETY: the record was written by `push_inline::<F>`, 8-aligned and F's align <= 8.
    let f = unsafe { ptr::read(p as *const F) };
    f(a)
}

unsafe fn drop_inline<F>(p: *mut u8) {
    // SAFETY: as in `call_inline`; the record is consumed here instead.
    unsafe { ptr::drop_in_place(p as *mut F) }
}

fn words_of<F>() -> usize {
    size_of::<F>().div_ceil(8)
}

/// A FIFO of type-erased `FnOnce(A) -> R` closures stored inline in one growable word buffer.
pub(crate) struct RecordQueue<A, R> {
    buf: Vec<MaybeUninit<u64>>,
    head: usize,
    tail: usize,
    len: usize,
    _marker: PhantomData<fn(A) -> R>,
}

impl<A, R> std::fmt::Debug for RecordQueue<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordQueue")
            .field("len", &self.len)
            .field("words", &(self.tail - self.head))
            .finish()
    }
}

impl<A, R> Default for RecordQueue<A, R> {
    fn default() -> Self {
        RecordQueue { buf: Vec::new(), head: 0, tail: 0, len: 0, _marker: PhantomData }
    }
}

impl<A, R> RecordQueue<A, R> {
    /// Number of records queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn reserve_words(&mut self, need: usize) {
        if self.tail + need > self.buf.len() {
            self.grow(need);
        }
    }

    /// Makes room for `need` more words at `tail` (compacting or reallocating).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, need: usize) {
        let live = self.tail - self.head;
        if self.head > 0 && live + need <= self.buf.len() && self.head >= live {
            // Compact: move the live records to the front (a memcpy move, invariant 3).
            self.buf.copy_within(self.head..self.tail, 0);
        } else {
            let mut nb: Vec<MaybeUninit<u64>> = Vec::new();
            let cap = (live + need).max(self.buf.len() * 2).max(64);
            nb.resize(cap, MaybeUninit::uninit());
            nb[..live].copy_from_slice(&self.buf[self.head..self.tail]);
            self.buf = nb;
        }
        self.head = 0;
        self.tail = live;
    }

    /// Appends `f`, with `aux` stored in its header.
    pub(crate) fn push<F: FnOnce(A) -> R>(&mut self, f: F, aux: u32) {
        if size_of::<F>() <= INLINE_MAX && align_of::<F>() <= 8 {
            self.push_inline(f, aux);
        } else {
            let b = Box::new(f);
            self.push_inline(move |a| (*b)(a), aux);
        }
    }

    fn push_inline<F: FnOnce(A) -> R>(&mut self, f: F, aux: u32) {
        debug_assert!(align_of::<F>() <= 8 && size_of::<F>() <= INLINE_MAX);
        let words = words_of::<F>();
        self.reserve_words(HEADER_WORDS + words);
        let h = Header::<A, R> {
            call: call_inline::<F, A, R>,
            drop: drop_inline::<F>,
            words: words as u32,
            aux,
        };
        let at = self.buf[self.tail..].as_mut_ptr();
        // SAFETY: `reserve_words` made room for header + closure words at `tail`; the buffer is
        // 8-aligned and F needs at most 8. This writes a record as invariant (1) describes.
        unsafe {
            ptr::write(at as *mut Header<A, R>, h);
            ptr::write(at.add(HEADER_WORDS) as *mut F, f);
        }
        self.tail += HEADER_WORDS + words;
        self.len += 1;
    }

    /// Removes the front record; the caller must [`Popped::run`] it before touching the queue.
    pub(crate) fn pop(&mut self) -> Option<Popped<A, R>> {
        if self.len == 0 {
            return None;
        }
        let at = self.buf[self.head..].as_mut_ptr();
        // SAFETY: len > 0, so a record header written by `push_inline` is at `head` (inv. 1).
        let h = unsafe { ptr::read(at as *const Header<A, R>) };
        self.head += HEADER_WORDS + h.words as usize;
        self.len -= 1;
        if self.len == 0 {
            // Reset lazily: the popped bytes stay intact until the next push (Popped::run's rule).
            self.head = 0;
            self.tail = 0;
        }
        // SAFETY: the closure bytes follow the header inside the buffer.
        Some(Popped { call: h.call, data: unsafe { at.add(HEADER_WORDS) } as *mut u8, aux: h.aux })
    }

    /// Moves the longest prefix of records whose total size is at most `max_words` words and
    /// whose summed `aux` is at most `max_aux` into `dst` (always at least one record if the
    /// queue is non-empty and the first one fits). Returns `(words, count, aux_sum)`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `max_words` words and 8-aligned. Ownership of the moved
    /// closures passes to `dst`: each must later be consumed exactly once with
    /// [`run_records`] (or leaked).
    pub(crate) unsafe fn move_prefix_to(
        &mut self,
        dst: *mut u64,
        max_words: usize,
        max_aux: usize,
    ) -> (usize, usize, usize) {
        let (mut w, mut n, mut aux) = (0usize, 0usize, 0usize);
        while n < self.len {
            let at = self.buf[self.head + w..].as_ptr();
            // SAFETY: n < len, so a record header starts at head + w (invariant 1).
            let h = unsafe { ptr::read(at as *const Header<A, R>) };
            let rw = HEADER_WORDS + h.words as usize;
            if w + rw > max_words || aux + h.aux as usize > max_aux {
                break;
            }
            w += rw;
            aux += h.aux as usize;
            n += 1;
        }
        // SAFETY: the caller promised `dst` holds `max_words >= w` words; source and
        // destination are distinct buffers. The bytes move (invariant 3) and are dead here now.
        unsafe { ptr::copy_nonoverlapping(self.buf[self.head..].as_ptr() as *const u64, dst, w) };
        self.head += w;
        self.len -= n;
        if self.len == 0 {
            self.head = 0;
            self.tail = 0;
        }
        (w, n, aux)
    }
}

impl<A, R> Drop for RecordQueue<A, R> {
    fn drop(&mut self) {
        while self.len > 0 {
            let at = self.buf[self.head..].as_mut_ptr();
            // SAFETY: a live record starts at head (invariant 1); it is consumed by `drop`.
            unsafe {
                let h = ptr::read(at as *const Header<A, R>);
                self.head += HEADER_WORDS + h.words as usize;
                self.len -= 1;
                (h.drop)(at.add(HEADER_WORDS) as *mut u8);
            }
        }
    }
}

/// Runs `count` records stored contiguously at `src` (moved there by
/// [`RecordQueue::move_prefix_to`]), calling `each(index, aux, result)` after each.
///
/// # Safety
/// `src` must hold exactly `count` live records written by `move_prefix_to` with the same
/// `A`/`R`, not consumed before; they are all consumed here.
pub(crate) unsafe fn run_records<A, R>(
    src: *const u64,
    count: usize,
    mut arg: impl FnMut(u32) -> A,
    mut each: impl FnMut(usize, R),
) {
    let mut p = src as *mut u64;
    for i in 0..count {
        // SAFETY: per the caller's promise a live record starts at `p`.
        let h = unsafe { ptr::read(p as *const Header<A, R>) };
        let a = arg(h.aux);
        // SAFETY: consuming the record once with its matching `call` (invariants 1, 2).
        let r = unsafe { (h.call)(p.add(HEADER_WORDS) as *mut u8, a) };
        each(i, r);
        // SAFETY: the next record starts right after this one (still inside the batch).
        p = unsafe { p.add(HEADER_WORDS + h.words as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn fifo_order_and_growth() {
        let out = Rc::new(RefCell::new(Vec::new()));
        let mut q: RecordQueue<u32, ()> = RecordQueue::default();
        for i in 0..1000u32 {
            let o = out.clone();
            let big = [i as u64; 40]; // 320 bytes: boxed
            if i % 3 == 0 {
                q.push(move |a| o.borrow_mut().push(a + big[0] as u32), i);
            } else {
                q.push(move |a| o.borrow_mut().push(a + i), i);
            }
            if i % 7 == 0 {
                let p = q.pop().unwrap();
                // SAFETY: run right after the pop.
                unsafe { p.run(0) };
            }
        }
        while let Some(p) = q.pop() {
            // SAFETY: run right after the pop.
            unsafe { p.run(0) };
        }
        assert_eq!(*out.borrow(), (0..1000).collect::<Vec<u32>>());
    }

    #[test]
    fn drop_unrun_records() {
        let rc = Rc::new(());
        {
            let mut q: RecordQueue<(), ()> = RecordQueue::default();
            for _ in 0..10 {
                let r = rc.clone();
                q.push(move |()| drop(r), 0);
            }
            assert_eq!(Rc::strong_count(&rc), 11);
        }
        assert_eq!(Rc::strong_count(&rc), 1);
    }

    #[test]
    fn prefix_move_and_run() {
        let mut q: RecordQueue<u32, u64> = RecordQueue::default();
        for i in 0..50u64 {
            q.push(move |a| i * 10 + a as u64, 8);
        }
        let mut dst = vec![0u64; 64];
        // SAFETY: dst holds 64 words.
        let (w, n, aux) = unsafe { q.move_prefix_to(dst.as_mut_ptr(), 64, 10_000) };
        assert!(n > 0 && w <= 64 && aux == 8 * n);
        let mut got = Vec::new();
        // SAFETY: exactly n records were moved into dst.
        unsafe { run_records(dst.as_ptr(), n, |_| 1u32, |_, r: u64| got.push(r)) };
        assert_eq!(got, (0..n as u64).map(|i| i * 10 + 1).collect::<Vec<_>>());
        assert_eq!(q.len(), 50 - n);
    }
}
