//! Lock-based counters: what `Trust<T>` is compared against in the fetch-add benchmark
//! (`skein bench fetch-add` and the framework's criterion bench). Each type is one
//! counter behind its own lock; threads increment counters chosen from K of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A counter behind a per-object lock.
pub trait LockedCounter: Send + Sync + Default + 'static {
    /// Takes the lock, adds one, releases it.
    fn incr(&self);
    /// The current value (taking the lock where there is one).
    fn get(&self) -> u64;
}

/// `std::sync::Mutex<u64>` (a poisoned lock is used anyway: the counter stays valid).
#[derive(Debug, Default)]
pub struct StdMutexCounter(std::sync::Mutex<u64>);

impl LockedCounter for StdMutexCounter {
    fn incr(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }
    fn get(&self) -> u64 {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `parking_lot::Mutex<u64>`.
#[derive(Debug, Default)]
pub struct ParkingLotCounter(parking_lot::Mutex<u64>);

impl LockedCounter for ParkingLotCounter {
    fn incr(&self) {
        *self.0.lock() += 1;
    }
    fn get(&self) -> u64 {
        *self.0.lock()
    }
}

/// A test-and-test-and-set spin lock; the counter inside is only touched while the lock
/// is held (relaxed accesses, ordered by the lock's Acquire/Release).
#[derive(Debug, Default)]
pub struct SpinCounter {
    locked: AtomicBool,
    value: AtomicU64,
}

impl LockedCounter for SpinCounter {
    fn incr(&self) {
        while self.locked.load(Ordering::Relaxed)
            || self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            std::hint::spin_loop();
        }
        self.value.store(self.value.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        self.locked.store(false, Ordering::Release);
    }
    fn get(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }
}

/// One value per cache line, so that distinct counters never share a line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Padded<L>(pub L);

impl<L: LockedCounter> LockedCounter for Padded<L> {
    fn incr(&self) {
        self.0.incr()
    }
    fn get(&self) -> u64 {
        self.0.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count<L: LockedCounter>() {
        let c = std::sync::Arc::new(L::default());
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || (0..10_000).for_each(|_| c.incr()))
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(c.get(), 30_000);
    }

    #[test]
    fn every_lock_counts_exactly() {
        count::<StdMutexCounter>();
        count::<ParkingLotCounter>();
        count::<SpinCounter>();
        count::<Padded<SpinCounter>>();
        assert_eq!(std::mem::align_of::<Padded<SpinCounter>>(), 64);
    }
}
