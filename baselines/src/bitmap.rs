//! A bitmap of vertices shared by threads (the BFS frontier).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub(crate) struct Bitmap {
    words: Vec<AtomicU64>,
}

impl Bitmap {
    pub(crate) fn new(bits: usize) -> Bitmap {
        Bitmap { words: (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect() }
    }

    pub(crate) fn words(&self) -> usize {
        self.words.len()
    }

    #[inline]
    pub(crate) fn get(&self, bit: usize) -> bool {
        self.words[bit / 64].load(Ordering::Relaxed) & (1 << (bit % 64)) != 0
    }

    /// Sets one bit; several threads may set bits of the same word.
    #[inline]
    pub(crate) fn set_atomic(&self, bit: usize) {
        self.words[bit / 64].fetch_or(1 << (bit % 64), Ordering::Relaxed);
    }

    /// Clears one bit; several threads may clear bits of the same word.
    #[inline]
    pub(crate) fn clear_atomic(&self, bit: usize) {
        self.words[bit / 64].fetch_and(!(1 << (bit % 64)), Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn word(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }

    /// Stores a whole word (the caller is its only writer in this phase).
    #[inline]
    pub(crate) fn store_word(&self, i: usize, w: u64) {
        self.words[i].store(w, Ordering::Relaxed);
    }

    /// Clears words `range` (callers split the words between threads).
    pub(crate) fn clear_words(&self, range: std::ops::Range<usize>) {
        for w in &self.words[range] {
            w.store(0, Ordering::Relaxed);
        }
    }
}
