//! An indexed 4-ary min-heap of vertices keyed by binary32 distance, with decrease-key.
//!
//! Each entry is one `u64`: the distance's bit pattern in the high 32 bits, the vertex in
//! the low 32. For non-negative floats the bit patterns order like the values, so one
//! integer comparison orders entries by (distance, vertex): deterministic ties, no float
//! compare, and half the memory of a `(f32, u64)` pair. `pos[v]` is the index of `v` in the
//! heap (`ABSENT` when not in it), which makes decrease-key O(log n) and keeps the heap at
//! most `n` entries (a lazy-deletion heap grows with every improvement instead).

const ARITY: usize = 4;
const ABSENT: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct IndexedHeap {
    entries: Vec<u64>,
    pos: Vec<u32>,
}

#[inline]
fn entry(key: u32, v: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(v)
}

#[inline]
fn vertex(e: u64) -> u32 {
    e as u32
}

impl IndexedHeap {
    /// An empty heap for vertices `0..n`.
    pub(crate) fn new(n: usize) -> IndexedHeap {
        IndexedHeap { entries: Vec::new(), pos: vec![ABSENT; n] }
    }

    /// Inserts `v` with `key`, or lowers its key (`key` must not be larger than its key).
    #[inline]
    pub(crate) fn push_or_decrease(&mut self, v: u32, key: u32) {
        let p = self.pos[v as usize];
        let i = if p == ABSENT {
            self.entries.push(entry(key, v));
            self.entries.len() - 1
        } else {
            debug_assert!(key <= (self.entries[p as usize] >> 32) as u32);
            self.entries[p as usize] = entry(key, v);
            p as usize
        };
        self.sift_up(i);
    }

    /// Removes the entry with the smallest key: `(vertex, key)`.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<(u32, u32)> {
        let top = *self.entries.first()?;
        let last = self.entries.pop().expect("heap is not empty");
        self.pos[vertex(top) as usize] = ABSENT;
        if !self.entries.is_empty() {
            self.entries[0] = last;
            self.sift_down(0);
        }
        Some((vertex(top), (top >> 32) as u32))
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let e = self.entries[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pe = self.entries[parent];
            if pe <= e {
                break;
            }
            self.entries[i] = pe;
            self.pos[vertex(pe) as usize] = i as u32;
            i = parent;
        }
        self.entries[i] = e;
        self.pos[vertex(e) as usize] = i as u32;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let e = self.entries[i];
        let len = self.entries.len();
        loop {
            let first = i * ARITY + 1;
            if first >= len {
                break;
            }
            let end = (first + ARITY).min(len);
            let mut best = first;
            let mut best_e = self.entries[first];
            for c in first + 1..end {
                let ce = self.entries[c];
                if ce < best_e {
                    best = c;
                    best_e = ce;
                }
            }
            if best_e >= e {
                break;
            }
            self.entries[i] = best_e;
            self.pos[vertex(best_e) as usize] = i as u32;
            i = best;
        }
        self.entries[i] = e;
        self.pos[vertex(e) as usize] = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_key_order_with_decrease_key() {
        let mut h = IndexedHeap::new(100);
        // Keys from a small LCG, then lower some of them.
        let mut x: u32 = 12345;
        let mut keys = vec![u32::MAX; 100];
        for v in 0..100u32 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            keys[v as usize] = x >> 8;
            h.push_or_decrease(v, keys[v as usize]);
        }
        for v in (0..100u32).step_by(3) {
            keys[v as usize] /= 2;
            h.push_or_decrease(v, keys[v as usize]);
        }
        let mut expected: Vec<(u32, u32)> = (0..100).map(|v| (keys[v as usize], v)).collect();
        expected.sort_unstable();
        let mut got = Vec::new();
        while let Some((v, k)) = h.pop() {
            got.push((k, v));
        }
        assert_eq!(got, expected);
        // Reusable after draining.
        h.push_or_decrease(7, 3);
        assert_eq!(h.pop(), Some((7, 3)));
        assert_eq!(h.pop(), None);
    }
}
