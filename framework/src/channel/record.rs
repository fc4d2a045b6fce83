//! Type-erased `FnOnce` records packed into word buffers.
//!
//! A *record* is a closure stored by value (no allocation) behind a one-word header:
//!
//! ```text
//! word 0: &'static VTable — call (moves the closure out and runs it), drop (drops it unrun),
//!         words (record size), aux (free for the user: result bytes), targeted (below)
//! word 1: target address            (targeted records only)
//! word 1 or 2 ..: the closure's bytes, 8-byte aligned
//! ```
//!
//! The vtable is a constant of the closure type (one per monomorphization), so a record of a
//! closure that captures only a property address is two words: the code id and the address.
//! This is the wire format of a request batch in-process: the vtable address is the *code id*,
//! the target is the *property address*, the closure bytes are the captured environment. A
//! trustee that runs a batch reads the targets of the records ahead of the one it runs and
//! prefetches them ([`run_records`]), so the cache misses of a batch over many properties
//! overlap instead of following one another.
//!
//! Closures that are larger than [`INLINE_MAX`] bytes or need more than 8-byte alignment are
//! boxed, and the record holds the box (one word).
//!
//! # Invariants (the whole module's unsafe code relies on them)
//!
//! 1. Every record in `buf[head..tail]` was written by [`RecordQueue::push`] or
//!    [`RecordQueue::push_targeted`] (or moved there by [`RecordQueue::append`], or moved out
//!    to a batch by [`RecordQueue::move_prefix_to`]) and holds a live closure of the type its
//!    vtable was instantiated with.
//! 2. A record is consumed exactly once: either `call` (which `ptr::read`s the closure before
//!    running any user code) or `drop`. After consumption its bytes are dead.
//! 3. Closure bytes are moved only by `memcpy` (buffer growth, compaction, prefix moves), which
//!    is a valid move for every Rust value that is not pinned; closures are never pinned.
//! 4. A record's `words` (from its vtable) is its whole size, header included, so the next
//!    record starts `words` words after it. A consumed record's header word stays intact until
//!    the queue writes over it (a later push), so the records consumed by a run can still be
//!    walked to find where they end.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr;

/// Closures above this many bytes are boxed instead of stored inline.
pub(crate) const INLINE_MAX: usize = 256;
/// Header size in words.
pub(crate) const HEADER_WORDS: usize = 1;
/// How many records ahead of the one running [`run_records`] prefetches targets.
const PREFETCH_AHEAD: usize = 8;

/// The static description of one record type.
pub(crate) struct VTable<A, R> {
    call: unsafe fn(*mut u8, A) -> R,
    drop: unsafe fn(*mut u8),
    /// Record size in words, header included.
    words: u32,
    aux: u32,
    /// The first data word is a target address (a prefetch hint).
    targeted: bool,
}

/// A per-type constant stored in every record header of that type (`aux`).
pub(crate) trait Aux {
    /// The value.
    const AUX: u32;
}

/// `aux` = 0.
pub(crate) struct NoAux;

impl Aux for NoAux {
    const AUX: u32 = 0;
}

const fn words_of<F>() -> usize {
    size_of::<F>().div_ceil(8)
}

/// Holder of the vtable constants of closure type `F`.
struct Vt<F, A, R, X>(PhantomData<VtTypes<F, A, R, X>>);

/// The types a [`Vt`] is instantiated with (function types: no auto-trait or drop effects).
type VtTypes<F, A, R, X> = (fn(A) -> R, fn() -> F, fn() -> X);

impl<F: FnOnce(A) -> R, A: 'static, R: 'static, X: Aux> Vt<F, A, R, X> {
    const PLAIN: &'static VTable<A, R> = &VTable {
        call: call_plain::<F, A, R>,
        drop: drop_plain::<F>,
        words: (HEADER_WORDS + words_of::<F>()) as u32,
        aux: X::AUX,
        targeted: false,
    };
}

impl<F: FnOnce(*mut u8, A) -> R, A: 'static, R: 'static, X: Aux> Vt<F, A, R, X> {
    const TARGETED: &'static VTable<A, R> = &VTable {
        call: call_targeted::<F, A, R>,
        drop: drop_targeted::<F>,
        words: (HEADER_WORDS + 1 + words_of::<F>()) as u32,
        aux: X::AUX,
        targeted: true,
    };
}

/// `F`'s plain vtable (the argument only names the type).
fn vt_plain<F: FnOnce(A) -> R, A: 'static, R: 'static, X: Aux>(_: &F) -> &'static VTable<A, R> {
    Vt::<F, A, R, X>::PLAIN
}

/// `F`'s targeted vtable (the argument only names the type).
fn vt_targeted<F: FnOnce(*mut u8, A) -> R, A: 'static, R: 'static, X: Aux>(
    _: &F,
) -> &'static VTable<A, R> {
    Vt::<F, A, R, X>::TARGETED
}

unsafe fn call_plain<F: FnOnce(A) -> R, A, R>(p: *mut u8, a: A) -> R {
    // SAFETY: the record was written by `push_raw` with F's plain vtable and the closure at
    // `p`, 8-aligned and F's align <= 8 (invariant 1); this is its one consumption (inv. 2).
    let f = unsafe { ptr::read(p as *const F) };
    f(a)
}

unsafe fn drop_plain<F>(p: *mut u8) {
    // SAFETY: as in `call_plain`; the record is consumed here instead.
    unsafe { ptr::drop_in_place(p as *mut F) }
}

unsafe fn call_targeted<F: FnOnce(*mut u8, A) -> R, A, R>(p: *mut u8, a: A) -> R {
    // SAFETY: written by `push_raw` with F's targeted vtable: the target word at `p`, the
    // closure after it (invariant 1); this is its one consumption (invariant 2).
    let (target, f) = unsafe { (ptr::read(p as *const *mut u8), ptr::read(p.add(8) as *const F)) };
    f(target, a)
}

unsafe fn drop_targeted<F>(p: *mut u8) {
    // SAFETY: as in `call_targeted`; the record is consumed here instead.
    unsafe { ptr::drop_in_place(p.add(8) as *mut F) }
}

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

/// Reads the header of the record at `at`.
///
/// # Safety
/// A live record starts at `at` (invariant 1).
#[inline(always)]
unsafe fn header<'a, A, R>(at: *const u64) -> &'a VTable<A, R> {
    // SAFETY: word 0 of a record is a `&'static VTable<A, R>` (invariant 1).
    unsafe { &*ptr::read(at as *const *const VTable<A, R>) }
}

/// A FIFO of type-erased `FnOnce(A) -> R` closures stored inline in one growable word buffer.
pub(crate) struct RecordQueue<A, R> {
    buf: Vec<MaybeUninit<u64>>,
    head: usize,
    tail: usize,
    len: usize,
    /// Sum of the live records' `aux`.
    aux: usize,
    /// `(words, aux)` of every live record when they are all alike (words 0: not known so).
    uniform: (u32, u32),
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
        RecordQueue {
            buf: Vec::new(),
            head: 0,
            tail: 0,
            len: 0,
            aux: 0,
            uniform: (0, 0),
            _marker: PhantomData,
        }
    }
}

impl<A: 'static, R: 'static> RecordQueue<A, R> {
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

    /// Appends `f`; its header's `aux` is `X::AUX`. Returns the new length.
    #[inline]
    pub(crate) fn push<X: Aux, F: FnOnce(A) -> R>(&mut self, f: F) -> usize {
        if size_of::<F>() <= INLINE_MAX && align_of::<F>() <= 8 {
            // SAFETY: the vtable is F's own; F fits inline.
            unsafe { self.push_raw(Vt::<F, A, R, X>::PLAIN, None, f) }
        } else {
            let b = Box::new(f);
            let g = move |a: A| (*b)(a);
            // SAFETY: the vtable is g's own; g (one box) fits inline.
            unsafe { self.push_raw(vt_plain::<_, A, R, X>(&g), None, g) }
        }
    }

    /// Appends `f` with a target address: the record runs as `f(target, arg)`, and a batch
    /// run by [`run_records`] prefetches `target` a few records ahead. Returns the new length.
    #[inline]
    pub(crate) fn push_targeted<X: Aux, F: FnOnce(*mut u8, A) -> R>(
        &mut self,
        target: *mut u8,
        f: F,
    ) -> usize {
        if size_of::<F>() <= INLINE_MAX && align_of::<F>() <= 8 {
            // SAFETY: the vtable is F's own, targeted; F fits inline.
            unsafe { self.push_raw(Vt::<F, A, R, X>::TARGETED, Some(target), f) }
        } else {
            let b = Box::new(f);
            let g = move |t: *mut u8, a: A| (*b)(t, a);
            // SAFETY: the vtable is g's own, targeted; g (one box) fits inline.
            unsafe { self.push_raw(vt_targeted::<_, A, R, X>(&g), Some(target), g) }
        }
    }

    /// Writes one record.
    ///
    /// # Safety
    /// `vt` is `F`'s vtable (`TARGETED` exactly when `target` is given) and `F` fits inline.
    #[inline(always)]
    unsafe fn push_raw<F>(
        &mut self,
        vt: &'static VTable<A, R>,
        target: Option<*mut u8>,
        f: F,
    ) -> usize {
        debug_assert!(align_of::<F>() <= 8 && size_of::<F>() <= INLINE_MAX);
        let words = vt.words as usize;
        self.reserve_words(words);
        let at = self.buf[self.tail..].as_mut_ptr() as *mut u64;
        // SAFETY: `reserve_words` made room for the whole record at `tail`; the buffer is
        // 8-aligned and F needs at most 8. This writes a record as invariant (1) describes.
        unsafe {
            ptr::write(at as *mut *const VTable<A, R>, vt);
            let mut data = at.add(HEADER_WORDS);
            if let Some(t) = target {
                ptr::write(data as *mut *mut u8, t);
                data = data.add(1);
            }
            ptr::write(data as *mut F, f);
        }
        if self.len == 0 {
            self.uniform = (vt.words, vt.aux);
        } else if self.uniform != (vt.words, vt.aux) {
            self.uniform = (0, 0);
        }
        self.tail += words;
        self.len += 1;
        self.aux += vt.aux as usize;
        self.len
    }

    /// Marks the queue empty (its records were consumed or moved elsewhere).
    #[inline]
    fn clear_consumed(&mut self) {
        self.head = 0;
        self.tail = 0;
        self.len = 0;
        self.aux = 0;
        self.uniform = (0, 0);
    }

    /// Moves the longest prefix of records whose total size is at most `max_words` words and
    /// whose summed `aux` is at most `max_aux` into `dst` (always at least one record if the
    /// queue is non-empty and the first one fits). Returns `(words, count)`.
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
    ) -> (usize, usize) {
        let (mut w, mut n, mut aux) = (0usize, 0usize, 0usize);
        let base = self.buf[self.head..].as_ptr() as *const u64;
        if self.tail - self.head <= max_words && self.aux <= max_aux {
            // Everything fits: no need to walk the records.
            (w, n, aux) = (self.tail - self.head, self.len, self.aux);
        } else if self.uniform.0 > 0 {
            // All records alike: the prefix that fits is a division away.
            let (rw, ra) = (self.uniform.0 as usize, self.uniform.1 as usize);
            n = self.len.min(max_words / rw);
            if let Some(by_aux) = max_aux.checked_div(ra) {
                n = n.min(by_aux);
            }
            (w, aux) = (n * rw, n * ra);
        }
        while n < self.len {
            // SAFETY: n < len, so a record starts at head + w (invariants 1 and 4).
            let h = unsafe { header::<A, R>(base.add(w)) };
            let rw = h.words as usize;
            if w + rw > max_words || aux + h.aux as usize > max_aux {
                break;
            }
            w += rw;
            aux += h.aux as usize;
            n += 1;
        }
        // SAFETY: the caller promised `dst` holds `max_words >= w` words; source and
        // destination are distinct buffers. The bytes move (invariant 3) and are dead here now.
        unsafe { ptr::copy_nonoverlapping(base, dst, w) };
        self.head += w;
        self.len -= n;
        self.aux -= aux;
        if self.len == 0 {
            self.clear_consumed();
        }
        (w, n)
    }

    /// Moves all of `other`'s records to the back of this queue, in order (`other` keeps its
    /// buffer, empty).
    pub(crate) fn append(&mut self, other: &mut RecordQueue<A, R>) {
        if other.len == 0 {
            return;
        }
        let w = other.tail - other.head;
        self.reserve_words(w);
        // SAFETY: this queue has room for `w` words at its tail; the buffers are distinct (two
        // `&mut`). The records move (invariant 3): live here, dead in `other`.
        unsafe {
            ptr::copy_nonoverlapping(
                other.buf[other.head..].as_ptr() as *const u64,
                self.buf[self.tail..].as_mut_ptr() as *mut u64,
                w,
            )
        };
        self.uniform = if self.len == 0 {
            other.uniform
        } else if self.uniform == other.uniform {
            self.uniform
        } else {
            (0, 0)
        };
        self.tail += w;
        self.len += other.len;
        self.aux += other.aux;
        other.clear_consumed();
    }

    /// Runs the first `n` queued records in order (as [`run_records`] does; `n` at most
    /// [`RecordQueue::len`]) and removes them. Nothing can be pushed meanwhile (`&mut self`); if
    /// a record's code unwinds, the records after it stay queued (and are dropped with the
    /// queue), the ones before it and itself are consumed: none is consumed twice.
    pub(crate) fn run_front<const PREFETCH: bool>(
        &mut self,
        n: usize,
        arg: impl FnMut(usize, u32) -> A,
        each: impl FnMut(usize, R),
    ) {
        assert!(n <= self.len, "skein: run_front({n}) on {} records", self.len);
        let start = self.buf[self.head..].as_ptr() as *const u64;
        let progress = Cell::new(0);
        let mut g = Consume { q: self, start, progress: &progress, total: None };
        // SAFETY: `n` live records start at `start` (invariant 1); the buffer cannot change
        // while `&mut self` is held; the guard removes exactly the records called (counted in
        // `progress` right before each call), so each is consumed once even if one unwinds.
        g.total =
            Some(unsafe { run_records_with::<A, R, PREFETCH>(start, n, arg, each, &progress) });
    }
}

/// Removes the records [`RecordQueue::run_front`] consumed from the queue when it ends or
/// unwinds.
struct Consume<'q, A: 'static, R: 'static> {
    q: &'q mut RecordQueue<A, R>,
    start: *const u64,
    /// Records consumed so far.
    progress: &'q Cell<usize>,
    /// `(words, aux)` of all of them, known when the run ended normally.
    total: Option<(usize, usize)>,
}

impl<A: 'static, R: 'static> Drop for Consume<'_, A, R> {
    fn drop(&mut self) {
        let n = self.progress.get();
        let (w, aux) = self.total.unwrap_or_else(|| {
            let (mut w, mut aux) = (0, 0);
            for _ in 0..n {
                // SAFETY: the first `n` records at `start` were live when the run began
                // (invariant 1); headers stay readable after consumption (invariant 4).
                let h = unsafe { header::<A, R>(self.start.add(w)) };
                w += h.words as usize;
                aux += h.aux as usize;
            }
            (w, aux)
        });
        let q = &mut *self.q;
        q.head += w;
        q.len -= n;
        q.aux -= aux;
        if q.len == 0 {
            q.clear_consumed();
        }
    }
}

impl<A, R> Drop for RecordQueue<A, R> {
    fn drop(&mut self) {
        while self.len > 0 {
            let at = self.buf[self.head..].as_mut_ptr() as *mut u64;
            // SAFETY: a live record starts at head (invariant 1); it is consumed by `drop`.
            unsafe {
                let h = header::<A, R>(at);
                self.head += h.words as usize;
                self.len -= 1;
                self.aux -= h.aux as usize;
                (h.drop)(at.add(HEADER_WORDS) as *mut u8);
            }
        }
    }
}

/// Runs `count` records stored contiguously at `src` (moved there by
/// [`RecordQueue::move_prefix_to`]), calling `arg(index, aux)` for each one's argument and
/// `each(index, result)` after it. With `PREFETCH`, the targets of the next
/// [`PREFETCH_AHEAD`] records are prefetched while one runs.
///
/// # Safety
/// `src` must hold exactly `count` live records written with the same `A`/`R`, not consumed
/// before; they are all consumed here. Nothing may write to them while this runs.
pub(crate) unsafe fn run_records<A, R, const PREFETCH: bool>(
    src: *const u64,
    count: usize,
    arg: impl FnMut(usize, u32) -> A,
    each: impl FnMut(usize, R),
) {
    // SAFETY: forwarded caller promise.
    unsafe { run_records_with::<A, R, PREFETCH>(src, count, arg, each, &Cell::new(0)) };
}

/// [`run_records`], counting in `progress` the records consumed (right before each is
/// called). Returns the words and the summed `aux` of the `count` records.
///
/// # Safety
/// As [`run_records`].
#[inline(always)]
unsafe fn run_records_with<A, R, const PREFETCH: bool>(
    src: *const u64,
    count: usize,
    mut arg: impl FnMut(usize, u32) -> A,
    mut each: impl FnMut(usize, R),
    progress: &Cell<usize>,
) -> (usize, usize) {
    let mut aux = 0;
    let mut p = src as *mut u64;
    let mut ahead = src;
    let mut ahead_n = 0;
    for i in 0..count {
        let stop = if PREFETCH { count.min(i + PREFETCH_AHEAD + 1) } else { 0 };
        while ahead_n < stop {
            // SAFETY: ahead_n < count, so a live record starts at `ahead` (invariants 1, 4).
            let h = unsafe { header::<A, R>(ahead) };
            if h.targeted {
                // SAFETY: a targeted record's first data word is its target (invariant 1).
                prefetch(unsafe { ptr::read(ahead.add(HEADER_WORDS) as *const *const u8) });
            }
            // SAFETY: the next record starts right after this one (or the batch ends).
            ahead = unsafe { ahead.add(h.words as usize) };
            ahead_n += 1;
        }
        // SAFETY: per the caller's promise a live record starts at `p`.
        let h = unsafe { header::<A, R>(p) };
        let a = arg(i, h.aux);
        aux += h.aux as usize;
        progress.set(i + 1);
        // SAFETY: consuming the record once with its matching `call` (invariants 1, 2).
        let r = unsafe { (h.call)(p.add(HEADER_WORDS) as *mut u8, a) };
        each(i, r);
        // SAFETY: the next record starts right after this one (still inside the batch).
        p = unsafe { p.add(h.words as usize) };
    }
    // SAFETY: both point into (or one past) the same batch.
    (unsafe { p.offset_from(src) } as usize, aux)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    struct Eight;
    impl Aux for Eight {
        const AUX: u32 = 8;
    }

    #[test]
    fn fifo_order_and_growth() {
        let out = Rc::new(RefCell::new(Vec::new()));
        let mut q: RecordQueue<u32, ()> = RecordQueue::default();
        let mut target = 0u64;
        let tp = &mut target as *mut u64 as *mut u8;
        for i in 0..1000u32 {
            let o = out.clone();
            let big = [i as u64; 40]; // 320 bytes: boxed
            match i % 3 {
                0 => q.push::<NoAux, _>(move |a| o.borrow_mut().push(a + big[0] as u32)),
                1 => q.push_targeted::<NoAux, _>(tp, move |t, a| {
                    assert_eq!(t, tp);
                    o.borrow_mut().push(a + i)
                }),
                _ => q.push::<NoAux, _>(move |a| o.borrow_mut().push(a + i)),
            };
            if i % 7 == 0 {
                q.run_front::<false>(1, |_, _| 0, |_, ()| {});
            }
        }
        let n = q.len();
        q.run_front::<true>(n, |_, _| 0, |_, ()| {});
        assert!(q.is_empty());
        assert_eq!(*out.borrow(), (0..1000).collect::<Vec<u32>>());
    }

    #[test]
    fn drop_unrun_records() {
        let rc = Rc::new(());
        {
            let mut q: RecordQueue<(), ()> = RecordQueue::default();
            for i in 0..10 {
                let r = rc.clone();
                if i % 2 == 0 {
                    q.push::<NoAux, _>(move |()| drop(r));
                } else {
                    q.push_targeted::<NoAux, _>(std::ptr::null_mut(), move |_, ()| drop(r));
                }
            }
            assert_eq!(Rc::strong_count(&rc), 11);
        }
        assert_eq!(Rc::strong_count(&rc), 1);
    }

    #[test]
    fn small_records_are_small() {
        let mut q: RecordQueue<(), ()> = RecordQueue::default();
        let x = 5u64;
        q.push_targeted::<NoAux, _>(std::ptr::null_mut(), |_, ()| {});
        q.push::<NoAux, _>(|()| {});
        q.push::<NoAux, _>(move |()| assert_eq!(x, 5));
        assert_eq!((q.tail - q.head, q.len()), (2 + 1 + 2, 3));
        q.run_front::<true>(3, |_, _| (), |_, ()| {});
    }

    #[test]
    fn prefix_move_and_run() {
        let mut q: RecordQueue<u32, u64> = RecordQueue::default();
        let mut cells = vec![0u64; 50];
        for i in 0..50u64 {
            let t = &mut cells[i as usize] as *mut u64 as *mut u8;
            q.push_targeted::<Eight, _>(t, move |t, a| {
                // SAFETY: `t` points into `cells`, alive and unaliased during the run.
                unsafe { *(t as *mut u64) = i };
                i * 10 + a as u64
            });
        }
        let mut dst = vec![0u64; 64];
        // SAFETY: dst holds 64 words.
        let (w, n) = unsafe { q.move_prefix_to(dst.as_mut_ptr(), 64, 8 * 20) };
        assert_eq!((w, n), (3 * 20, 20), "aux bound: 20 records of aux 8");
        let mut got = Vec::new();
        // SAFETY: exactly n records were moved into dst.
        unsafe {
            run_records::<_, _, true>(
                dst.as_ptr(),
                n,
                |i, aux| i as u32 + aux,
                |_, r: u64| got.push(r),
            )
        };
        assert_eq!(got, (0..n as u64).map(|i| i * 11 + 8).collect::<Vec<_>>());
        assert_eq!(&cells[..n], &(0..n as u64).collect::<Vec<_>>()[..]);
        assert_eq!(q.len(), 50 - n);
    }

    #[test]
    fn run_front_and_append() {
        let out = Rc::new(RefCell::new(Vec::new()));
        let mut q: RecordQueue<usize, ()> = RecordQueue::default();
        let mut newer: RecordQueue<usize, ()> = RecordQueue::default();
        for i in 0..100usize {
            let o = out.clone();
            let pad = [i; 3];
            q.push::<Eight, _>(move |a| o.borrow_mut().push((pad[0], a)));
        }
        assert_eq!(q.aux, 800);
        for round in 0..4 {
            let n = 30.min(q.len());
            q.run_front::<false>(n, |i, aux| i + aux as usize, |_, ()| {});
            assert_eq!((q.len(), q.aux), (100 - 30 * round - n, 8 * q.len()));
        }
        assert!(q.is_empty());
        let got = out.borrow().clone();
        assert!(got.iter().enumerate().all(|(k, &(v, i))| v == k && i == k % 30 + 8));
        // append keeps order and leaves the source empty but usable
        for i in 0..5usize {
            let o = out.clone();
            q.push::<NoAux, _>(move |_| o.borrow_mut().push((1000 + i, 0)));
            let o = out.clone();
            newer.push::<Eight, _>(move |_| o.borrow_mut().push((2000 + i, 0)));
        }
        q.append(&mut newer);
        assert!(newer.is_empty() && newer.aux == 0);
        assert_eq!((q.len(), q.aux), (10, 40));
        q.run_front::<false>(10, |i, _| i, |_, ()| {});
        let tail: Vec<usize> = out.borrow()[100..].iter().map(|x| x.0).collect();
        assert_eq!(tail, vec![1000, 1001, 1002, 1003, 1004, 2000, 2001, 2002, 2003, 2004]);
    }

    #[test]
    fn prefix_of_mixed_records_is_walked() {
        let mut q: RecordQueue<u32, u64> = RecordQueue::default();
        for i in 0..30u64 {
            if i % 2 == 0 {
                q.push::<NoAux, _>(move |a| i + a as u64); // 2 words
            } else {
                let pad = [i, 0];
                q.push::<Eight, _>(move |a| pad[0] + pad[1] + a as u64); // 3 words
            }
        }
        let mut dst = vec![0u64; 64];
        // SAFETY: dst holds 64 words.
        let (w, n) = unsafe { q.move_prefix_to(dst.as_mut_ptr(), 11, 1000) };
        assert_eq!((w, n, q.len(), q.aux), (10, 4, 26, 8 * 13));
        let mut got = Vec::new();
        // SAFETY: exactly n records were moved into dst.
        unsafe {
            run_records::<_, _, false>(dst.as_ptr(), n, |_, _| 0u32, |_, r: u64| got.push(r))
        };
        assert_eq!(got, vec![0, 1, 2, 3]);
    }

    #[test]
    fn run_front_unwinding_consumes_each_record_once() {
        let rc = Rc::new(());
        let mut q: RecordQueue<(), ()> = RecordQueue::default();
        for i in 0..6 {
            let r = rc.clone();
            q.push::<NoAux, _>(move |()| {
                let _r = r;
                assert_ne!(i, 2, "record 2 fails");
            });
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.run_front::<false>(5, |_, _| (), |_, ()| {})
        }));
        assert!(caught.is_err());
        // records 0..=2 consumed (2 unwound, dropping its capture); 3, 4, 5 still queued
        assert_eq!((q.len(), Rc::strong_count(&rc)), (3, 4));
        drop(q);
        assert_eq!(Rc::strong_count(&rc), 1);
    }

    #[test]
    fn prefix_fast_path_moves_everything() {
        let mut q: RecordQueue<u32, u64> = RecordQueue::default();
        for i in 0..10u64 {
            q.push::<Eight, _>(move |a| i + a as u64);
        }
        let mut dst = vec![0u64; 64];
        // SAFETY: dst holds 64 words.
        let (w, n) = unsafe { q.move_prefix_to(dst.as_mut_ptr(), 64, 80) };
        assert_eq!((w, n, q.len(), q.aux), (20, 10, 0, 0));
        let mut got = Vec::new();
        // SAFETY: exactly n records were moved into dst.
        unsafe { run_records::<_, _, true>(dst.as_ptr(), n, |_, _| 1u32, |_, r: u64| got.push(r)) };
        assert_eq!(got, (1..=10).collect::<Vec<_>>());
    }
}
