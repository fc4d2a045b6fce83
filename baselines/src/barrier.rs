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
//!
//! A participant that panics never arrives, so the barrier can be *poisoned*
//! ([`SpinBarrier::poison`], done by a [`PoisonOnPanic`] guard while the panic unwinds):
//! every waiter, present or future, then returns [`Poisoned`] instead of spinning forever,
//! and the threads leave their loop so that the panic reaches the caller.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Spins this many times before starting to yield.
const SPINS_BEFORE_YIELD: u32 = 1 << 8;

#[derive(Debug)]
pub(crate) struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    poisoned: AtomicBool,
}

/// A participant of the barrier panicked: the phase will never complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Poisoned;

/// Poisons the barrier when dropped during a panic (hold one in each participant).
#[derive(Debug)]
pub(crate) struct PoisonOnPanic<'a>(pub(crate) &'a SpinBarrier);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison();
        }
    }
}

impl SpinBarrier {
    pub(crate) fn new(threads: usize) -> SpinBarrier {
        assert!(threads > 0);
        SpinBarrier {
            threads,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Marks the barrier broken: every `wait` returns [`Poisoned`] from now on.
    pub(crate) fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// Blocks until all `threads` threads have called `wait` in this generation, or until
    /// the barrier is poisoned ([`Poisoned`]: a participant panicked).
    pub(crate) fn wait(&self) -> Result<(), Poisoned> {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            // Nobody arrives for the next generation before seeing it start, so this
            // reset cannot race with an arrival.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return self.check();
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                return Err(Poisoned);
            }
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        self.check()
    }

    fn check(&self) -> Result<(), Poisoned> {
        if self.poisoned.load(Ordering::Acquire) {
            Err(Poisoned)
        } else {
            Ok(())
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
                        barrier.wait().unwrap();
                        // Every thread incremented exactly once per round so far.
                        assert_eq!(counter.load(Ordering::Relaxed), (round + 1) * 3);
                        barrier.wait().unwrap();
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_participant_releases_the_waiters() {
        // On its own thread, so that a hang (waiters spinning forever) fails the test.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let barrier = SpinBarrier::new(3);
            let outcomes: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..3)
                    .map(|t| {
                        let barrier = &barrier;
                        s.spawn(move || {
                            let _guard = PoisonOnPanic(barrier);
                            for round in 0..10 {
                                if t == 1 && round == 4 {
                                    panic!("injected");
                                }
                                barrier.wait()?;
                            }
                            Ok::<(), Poisoned>(())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().ok()).collect()
            });
            done.send(outcomes).unwrap();
        });
        let outcomes = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the waiters hung after a participant panicked");
        assert_eq!(outcomes, [Some(Err(Poisoned)), None, Some(Err(Poisoned))]);
    }
}
