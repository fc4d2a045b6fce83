//! Bucket indices and bucket queues for delta-stepping, and the default-delta rule
//! ([`relative_delta`]), shared by the SSSP kernel of `skein-algorithms` and the rayon
//! engine of `skein-baselines` (neither depends on the other for them).
//!
//! # Bucket keys that cannot overflow
//!
//! Delta-stepping files a vertex whose tentative distance is `d` under bucket
//! `floor(d / delta)`. With binary32 distances and any positive delta (subnormals
//! included) that quotient ranges up to `f32::MAX / 2^-149`, about 2^277: no integer type
//! holds it, and a float-to-integer cast saturates, so that `bucket + 1` wraps.
//! [`BucketIndex::key`] instead computes `x = d * (1 / delta)` in binary64 (exact enough:
//! `1 / delta` and `x` are finite for every finite `d` and positive `delta`) and maps it
//! to a `u64` that never decreases as `d` grows:
//!
//! - `x < 2^63`: `floor(x)`, the bucket of the textbook algorithm;
//! - `x >= 2^63`: `2^63 + (bits(x) - bits(2^63))`. Such `x` are integers already, and
//!   the bit patterns of non-negative binary64 values order like the values, so keys keep
//!   increasing with `d` (each distinct `x` is its own bucket: Dijkstra's order). The
//!   largest key, for `x = +inf`, is below `2^63 + 2^62`: nothing overflows.
//!
//! # Storage bounded by the vertices in flight
//!
//! A [`BucketQueue`] holds `(key, vertex)` entries. Keys in a *window* of
//! [`BucketQueue::window`] consecutive keys starting at the *base* (a power of two, sized
//! from the largest weight so that, with the default delta, every key a relaxation can
//! produce falls inside it) live in a cyclic array of vectors indexed by `key mod window`,
//! with one occupancy bit per slot; keys beyond the window wait in an ordered map of
//! non-empty buckets only, and move into the window when the base reaches them. So memory
//! is the entries plus the window (never `largest distance / delta` vectors), and finding
//! the next non-empty bucket costs one bitmap scan of the window (`window / 64` words) or
//! one map lookup, whatever the number of empty buckets in between: a high-diameter
//! graph costs rounds in proportion to its distinct distances, not to `diameter / delta`.
//!
//! Entries are never removed when a vertex's distance drops (lazy deletion): the engines
//! recognise stale entries when they take them.
//!
//! # Unsafe code
//!
//! One block: [`BucketIndex::key`] converts a binary64 value it has just checked to be
//! in `[0, 2^63)` with `to_int_unchecked`. Invariant: the check dominates the conversion.

use std::collections::BTreeMap;

/// Keys at and above this are the bit-pattern keys of huge quotients (see the module docs).
pub const LINEAR_KEYS: u64 = 1 << 63;

/// `2^63` as binary64 (exact).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// The bucket key of distances for one bucket width: see the module docs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketIndex {
    /// `1 / width` in binary64: finite for every positive binary32 width.
    inv: f64,
}

impl BucketIndex {
    /// The keys of buckets `width` wide. `width` must be finite and > 0 (subnormals are
    /// fine); anything else is a caller bug (the engines check their options first).
    ///
    /// # Panics
    /// If `width` is not finite and positive.
    pub fn new(width: f32) -> BucketIndex {
        assert!(width.is_finite() && width > 0.0, "bucket width must be > 0, got {width}");
        BucketIndex { inv: 1.0 / f64::from(width) }
    }

    /// The keys of buckets `width / parts` wide (each `width` cut into `parts` bins),
    /// computed without rounding `width / parts` to binary32, so a subnormal `width` still
    /// gives positive bins.
    ///
    /// # Panics
    /// If `width` is not finite and positive, or `parts` is 0.
    pub fn subdivided(width: f32, parts: u32) -> BucketIndex {
        assert!(width.is_finite() && width > 0.0, "bucket width must be > 0, got {width}");
        assert!(parts > 0, "a bucket has at least one bin");
        BucketIndex { inv: f64::from(parts) / f64::from(width) }
    }

    /// The key of distance `d` (>= 0): `floor(d / width)` while that is below
    /// [`LINEAR_KEYS`], then increasing with `d` as the module docs say. Never decreases
    /// as `d` grows. (A negative or NaN `d`, never a distance, gets some key >=
    /// [`LINEAR_KEYS`].)
    #[inline]
    pub fn key(&self, d: f32) -> u64 {
        let x = f64::from(d) * self.inv;
        if (0.0..TWO_POW_63).contains(&x) {
            // SAFETY: the test above makes `x` not NaN, not infinite and
            // `-0.0 <= x < 2^63`, so its truncation (the floor; 0 for -0.0) is in the
            // range of `i64`, as `to_int_unchecked` requires. (One conversion instruction,
            // where a checked cast adds a saturation fix-up to every key.)
            let floor: i64 = unsafe { x.to_int_unchecked() };
            floor as u64
        } else {
            huge_key(x)
        }
    }

    /// How many keys apart two distances `span` apart can be, at most (plus one for the
    /// rounding of the floor), saturated.
    pub fn reach(&self, span: f32) -> u64 {
        let keys = (f64::from(span) * self.inv).ceil() + 1.0;
        if keys < TWO_POW_63 {
            keys as u64
        } else {
            u64::MAX
        }
    }
}

#[cold]
fn huge_key(x: f64) -> u64 {
    LINEAR_KEYS.saturating_add(x.to_bits().saturating_sub(TWO_POW_63.to_bits()))
}

/// Smallest window of a [`BucketQueue`].
const MIN_WINDOW: usize = 64;
/// Largest window: 2^15 slots are 768 KiB of empty vectors per queue, the most worth
/// allocating per search; farther keys go to the ordered map.
const MAX_WINDOW: usize = 1 << 15;

/// Entries `(key, vertex)` filed by key: see the module docs.
#[derive(Debug)]
pub struct BucketQueue {
    /// Every key in the queue is `>= base`; keys `base..base + window` are in `slots`.
    base: u64,
    /// `slots[k & mask]` holds the entries of key `k` for `k` in the window.
    slots: Box<[Vec<u32>]>,
    /// Bit `i` set: `slots[i]` is not empty.
    occupied: Box<[u64]>,
    mask: u64,
    /// Keys `>= base + window`, non-empty buckets only.
    far: BTreeMap<u64, Vec<u32>>,
}

impl BucketQueue {
    /// An empty queue whose window (a power of two between 64 and 2^15) holds at least
    /// `reach` keys, with base 0.
    pub fn new(reach: u64) -> BucketQueue {
        let window = BucketQueue::window_for(reach);
        BucketQueue {
            base: 0,
            slots: (0..window).map(|_| Vec::new()).collect(),
            occupied: vec![0; window / 64].into_boxed_slice(),
            mask: window as u64 - 1,
            far: BTreeMap::new(),
        }
    }

    /// The window of [`BucketQueue::new`]`(reach)`.
    pub fn window_for(reach: u64) -> usize {
        usize::try_from(reach)
            .unwrap_or(MAX_WINDOW)
            .clamp(MIN_WINDOW, MAX_WINDOW)
            .next_power_of_two()
    }

    /// Keys the window holds.
    pub fn window(&self) -> usize {
        self.slots.len()
    }

    /// The smallest key the queue may hold.
    pub fn base(&self) -> u64 {
        self.base
    }

    #[inline]
    fn in_window(&self, key: u64) -> bool {
        key.wrapping_sub(self.base) <= self.mask
    }

    /// Files `vertex` under `key` (`key >= base`).
    #[inline]
    pub fn push(&mut self, key: u64, vertex: u32) {
        debug_assert!(key >= self.base, "key {key} below the base {}", self.base);
        if self.in_window(key) {
            let s = (key & self.mask) as usize;
            self.slots[s].push(vertex);
            self.occupied[s / 64] |= 1 << (s % 64);
        } else {
            self.push_far(key, vertex);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_far(&mut self, key: u64, vertex: u32) {
        self.far.entry(key).or_default().push(vertex);
    }

    /// True when no entry is filed.
    pub fn is_empty(&self) -> bool {
        self.far.is_empty() && self.occupied.iter().all(|&w| w == 0)
    }

    /// The smallest key `>= from` with an entry (`from >= base`).
    pub fn first_from(&self, from: u64) -> Option<u64> {
        debug_assert!(from >= self.base);
        if self.in_window(from) {
            // Slots `from..base + window`, in key order: from `from`'s slot to the end of
            // the array, then from the start up to the base's slot.
            let window = self.slots.len();
            let start = (from & self.mask) as usize;
            let stop = start + (self.mask - (from - self.base)) as usize + 1; // exclusive, unwrapped
            if let Some(s) = self.first_occupied(start, stop.min(window)) {
                return Some(from + (s - start) as u64);
            }
            if stop > window {
                if let Some(s) = self.first_occupied(0, stop - window) {
                    return Some(from + (window - start + s) as u64);
                }
            }
        }
        self.far.range(from..).next().map(|(&k, _)| k)
    }

    /// The first occupied slot in `start..stop`.
    fn first_occupied(&self, start: usize, stop: usize) -> Option<usize> {
        let mut i = start;
        while i < stop {
            let w = self.occupied[i / 64] >> (i % 64);
            if w != 0 {
                let s = i + w.trailing_zeros() as usize;
                return (s < stop).then_some(s);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The smallest key with an entry.
    pub fn first(&self) -> Option<u64> {
        self.first_from(self.base)
    }

    /// Moves the base up to `base`: no entry may have a key below it. Keys that enter
    /// the window move there from the ordered map.
    pub fn advance(&mut self, base: u64) {
        debug_assert!(base >= self.base);
        debug_assert!(self.first().is_none_or(|k| k >= base), "entries below the new base");
        self.base = base;
        while let Some((&key, _)) = self.far.first_key_value() {
            if !self.in_window(key) {
                break;
            }
            let mut entries = self.far.remove(&key).unwrap_or_default();
            self.put(key, &mut entries);
        }
    }

    /// Adds `entries` (a whole bucket, moved without copying when the key's slot is
    /// empty) under `key` (`key >= base`). Leaves `entries` empty, holding a spare
    /// allocation when there is one.
    pub fn put(&mut self, key: u64, entries: &mut Vec<u32>) {
        debug_assert!(key >= self.base);
        if entries.is_empty() {
            return;
        }
        if self.in_window(key) {
            let s = (key & self.mask) as usize;
            let slot = &mut self.slots[s];
            if slot.is_empty() {
                std::mem::swap(slot, entries);
            } else {
                slot.append(entries);
            }
            self.occupied[s / 64] |= 1 << (s % 64);
        } else {
            let slot = self.far.entry(key).or_default();
            if slot.is_empty() {
                std::mem::swap(slot, entries);
            } else {
                slot.append(entries);
            }
        }
    }

    /// Swaps the entries of `key` with `out` (whose previous content, normally an empty
    /// vector kept for its allocation, becomes the key's: pass an empty one).
    pub fn swap_out(&mut self, key: u64, out: &mut Vec<u32>) {
        debug_assert!(out.is_empty());
        if self.in_window(key) {
            let s = (key & self.mask) as usize;
            std::mem::swap(&mut self.slots[s], out);
            self.occupied[s / 64] &= !(1 << (s % 64));
        } else if let Some(entries) = self.far.remove(&key) {
            *out = entries;
        }
    }

    /// Number of entries under `key`.
    #[inline]
    pub fn len_of(&self, key: u64) -> usize {
        if self.in_window(key) {
            self.slots[(key & self.mask) as usize].len()
        } else {
            self.far.get(&key).map_or(0, Vec::len)
        }
    }

    /// Removes and returns the last entry filed under `key` (`key >= base`).
    #[inline]
    pub fn pop(&mut self, key: u64) -> Option<u32> {
        debug_assert!(key >= self.base);
        if !self.in_window(key) {
            return self.pop_far(key);
        }
        let s = (key & self.mask) as usize;
        let slot = &mut self.slots[s];
        let v = slot.pop();
        if slot.is_empty() {
            self.occupied[s / 64] &= !(1 << (s % 64));
        }
        v
    }

    #[cold]
    fn pop_far(&mut self, key: u64) -> Option<u32> {
        let entries = self.far.get_mut(&key)?;
        let v = entries.pop();
        if entries.is_empty() {
            self.far.remove(&key);
        }
        v
    }

    /// The entry that pops from `key` would return after `back` others (0: the last entry
    /// filed under `key`), taking the keys after it in order once it is empty, up to `end`
    /// (exclusive; `key + 1` for `key` alone). `None` past the window (or where it wraps
    /// around its array) or when the keys hold fewer entries. For looking ahead
    /// (prefetching what the next pops will touch), past the end of a short bin too.
    #[inline]
    pub fn peek_ahead(&self, key: u64, end: u64, mut back: usize) -> Option<u32> {
        if !self.in_window(key) {
            return None;
        }
        let mut s = (key & self.mask) as usize;
        let keys = end.saturating_sub(key).min(self.slots.len() as u64) as usize;
        let stop = self.slots.len().min(s + keys);
        loop {
            let slot = &self.slots[s];
            if let Some(i) = slot.len().checked_sub(back + 1) {
                return Some(slot[i]);
            }
            back -= slot.len();
            s = self.first_occupied(s + 1, stop)?;
        }
    }

    /// The last entry filed under `key` (`key >= base`), without removing it.
    #[inline]
    pub fn last(&self, key: u64) -> Option<u32> {
        debug_assert!(key >= self.base);
        if self.in_window(key) {
            self.slots[(key & self.mask) as usize].last().copied()
        } else {
            self.far.get(&key).and_then(|e| e.last().copied())
        }
    }

    /// Empties the queue and sets the base to 0, keeping the window's allocations.
    pub fn clear(&mut self) {
        for (w, word) in self.occupied.iter_mut().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                self.slots[w * 64 + bits.trailing_zeros() as usize].clear();
                bits &= bits - 1;
            }
            *word = 0;
        }
        self.far.clear();
        self.base = 0;
    }
}

/// The default-delta rule every engine shares: the bucket width is `relative` times the
/// graph's largest weight, so that the number of buckets and the span of keys one
/// relaxation can reach (`1 / relative + 1` buckets, what the bucket queues' windows are
/// sized for: see the module docs) do not depend on the scale of the weights. Integer weights
/// (road networks) and Graph500 weights in `[0, 1)` get the same number of buckets per
/// largest weight.
///
/// Always finite and > 0 for a finite `relative > 0`: the smallest positive binary32
/// value when the product underflows, and `relative` itself when `max_weight` is 0 (all
/// weights zero), negative, infinite or NaN (no meaningful scale).
pub fn relative_delta(relative: f32, max_weight: f32) -> f32 {
    if max_weight > 0.0 && max_weight.is_finite() {
        (relative * max_weight).clamp(f32::from_bits(1), f32::MAX)
    } else {
        relative
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_decrease_and_never_overflow() {
        let widths = [f32::from_bits(1), f32::MIN_POSITIVE, 1e-30, 1e-9, 0.0007, 1.0, 1e30];
        let mut ds: Vec<f32> = vec![0.0, -0.0, f32::from_bits(1), 1e-40, 1e-30, 1e-9, 0.5];
        ds.extend([1.0, 7.0, 1e5, 1e9, 1e20, 1e38, f32::MAX, f32::INFINITY]);
        ds.sort_by(f32::total_cmp);
        for &w in &widths {
            let b = BucketIndex::new(w);
            let keys: Vec<u64> = ds.iter().map(|&d| b.key(d)).collect();
            assert!(keys.windows(2).all(|p| p[0] <= p[1]), "width {w}: {keys:?}");
            assert!(*keys.last().unwrap() < LINEAR_KEYS + (1 << 62));
        }
        // Every positive float, width 2^-149: strictly increasing in the huge range.
        let b = BucketIndex::new(f32::from_bits(1));
        let mut last = 0;
        for bits in (0..f32::MAX.to_bits()).step_by(999_983) {
            let k = b.key(f32::from_bits(bits));
            assert!(k >= last);
            last = k;
        }
        assert_eq!(BucketIndex::new(0.5).key(3.9), 7);
        // Never distances, but no undefined behaviour either.
        for d in [-1.0, -1e30, f32::NEG_INFINITY, f32::NAN] {
            assert!(BucketIndex::new(1e-30).key(d) >= LINEAR_KEYS);
        }
        assert_eq!(BucketIndex::new(1.0).key(100_000.0), 100_000);
        assert_eq!(BucketIndex::subdivided(0.5, 16).key(3.9), 124);
        assert_eq!(BucketIndex::subdivided(f32::from_bits(1), 16).key(f32::from_bits(3)), 48);
    }

    #[test]
    fn queue_orders_keys_inside_and_beyond_the_window() {
        let mut q = BucketQueue::new(10);
        assert_eq!(q.window(), 64);
        for (k, v) in [(5, 1), (1000, 2), (63, 3), (64, 4), (5, 5), (u64::MAX - 1, 6)] {
            q.push(k, v);
        }
        assert_eq!(q.first(), Some(5));
        assert_eq!(q.first_from(6), Some(63));
        assert_eq!(q.first_from(64), Some(64));
        assert_eq!(q.len_of(5), 2);
        assert_eq!(
            (q.peek_ahead(5, 6, 0), q.peek_ahead(5, 6, 1), q.peek_ahead(5, 6, 2)),
            (Some(5), Some(1), None)
        );
        // Across keys: 5 holds [1, 5], 63 holds [3].
        assert_eq!(q.peek_ahead(5, 64, 1), Some(1));
        assert_eq!(q.peek_ahead(5, 64, 2), Some(3));
        assert_eq!(q.peek_ahead(5, 63, 2), None, "63 is past the end");
        assert_eq!(q.peek_ahead(6, 64, 0), Some(3));
        assert_eq!(q.peek_ahead(5, 64, 3), None);
        assert_eq!(q.peek_ahead(1000, 2000, 0), None, "beyond the window");
        assert_eq!(q.pop(5), Some(5));
        assert_eq!(q.pop(5), Some(1));
        assert_eq!(q.pop(5), None);
        let mut out = Vec::new();
        q.swap_out(63, &mut out);
        assert_eq!(out, [3]);
        q.advance(64);
        assert_eq!(q.first(), Some(64));
        assert_eq!(q.pop(64), Some(4));
        assert_eq!(q.first(), Some(1000));
        q.advance(1000);
        assert_eq!(q.pop(1000), Some(2));
        // Push into a wrapped window: keys 1000..1064 use slots 40..63, 0..39.
        q.push(1063, 7);
        q.push(1001, 8);
        assert_eq!(q.first(), Some(1001));
        assert_eq!(q.first_from(1002), Some(1063));
        q.put(1063, &mut vec![9, 10]);
        assert_eq!(q.len_of(1063), 3);
        q.swap_out(1001, &mut Vec::new());
        q.swap_out(1063, &mut Vec::new());
        assert_eq!(q.first(), Some(u64::MAX - 1));
        assert_eq!(q.last(u64::MAX - 1), Some(6));
        q.push(u64::MAX - 1, 12);
        assert_eq!(q.pop(u64::MAX - 1), Some(12));
        assert_eq!(q.pop(u64::MAX - 2), None);
        q.advance(u64::MAX - 1);
        assert_eq!(q.pop(u64::MAX - 1), Some(6));
        assert!(q.is_empty());
        q.push(u64::MAX, 11);
        q.clear();
        assert!(q.is_empty() && q.base() == 0);
    }

    #[test]
    fn queue_matches_a_sorted_list() {
        // Pseudo-random pushes and pops against a sorted reference.
        let mut q = BucketQueue::new(100);
        let mut reference: Vec<(u64, u32)> = Vec::new();
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..5000u32 {
            let base = q.base();
            let key = base + next() % if i % 7 == 0 { 100_000 } else { 300 };
            q.push(key, i);
            reference.push((key, i));
            if next() % 3 == 0 {
                let min = reference.iter().map(|e| e.0).min().unwrap();
                assert_eq!(q.first(), Some(min));
                q.advance(min);
                let mut got = Vec::new();
                q.swap_out(min, &mut got);
                let mut want: Vec<u32> =
                    reference.iter().filter(|e| e.0 == min).map(|e| e.1).collect();
                reference.retain(|e| e.0 != min);
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want);
            }
        }
        assert_eq!(q.is_empty(), reference.is_empty());
    }
}
