//! A reusable barrier for the threads of one `rayon::ThreadPool::broadcast`.
//!
//! Delta-stepping runs hundreds of rounds per search, each ending in a barrier, so a wait
//! must cost microseconds: threads spin first, then yield the CPU (so that a machine with
//! more threads than cores still makes progress), and never sleep in the kernel.
//!
//! Memory ordering: an arriving thread's `fetch_add` (AcqRel) on `arrived` joins the release
//! sequence that the last arriver acquires; the last arriver then Release-bumps
//! `generation`, which the waiters Acquire. So everything any thread wrote before `wait`
//! is visible to every thread after it.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Spins this many times before starting to yield.
const SPINS_BEFORE_YIELD: u32 = 1 << 8;

#[derive(Debug)]
pub(crate) struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub(crate) fn new(threads: usize) -> SpinBarrier {
        assert!(threads > 0);
        SpinBarrier { threads, arrived: AtomicUsize::new(0), generation: AtomicUsize::new(0) }
    }

    /// Blocks until all `threads` threads have called `wait` in this generation.
    pub(crate) fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            // Nobody arrives for the next generation before seeing it start, so this
            // reset cannot race with an arrival.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn phases_do_not_overlap() {
        let threads = 3;
        let barrier = SpinBarrier::new(threads);
        let counter = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    for round in 0..200u64 {
                        counter.fetch_add(1, Ordering::Relaxed);
                        barrier.wait();
                        // Every thread incremented exactly once per round so far.
                        assert_eq!(counter.load(Ordering::Relaxed), (round + 1) * 3);
                        barrier.wait();
                    }
                });
            }
        });
    }
}
