//! Run ids: small numbers, because every handle carries its run's id in the top bits of its
//! one word ([`crate::Trust`]), where a delegation call compares it with the calling worker's.
//!
//! # Invariant
//!
//! An id is *held* from the start of its run until the run has ended **and** the last
//! property that run entrusted has been freed. [`acquire`] only hands out an id that is not
//! held. So while any handle exists, no other run has its run's id: comparing ids tells the
//! runs of all existing handles apart exactly, although ids are reused.
//!
//! Properties are only created inside their run ([`prop_created`] while the run holds the id),
//! so an id's property count never rises from zero while the id is free.

use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering};

/// The largest run id; at most this many runs can be running or have live properties at once.
/// Seven bits: a handle's word keeps the bit below them for proxies ([`crate::Trust`]).
pub(crate) const MAX_RUN_ID: u32 = 127;

struct Slot {
    running: AtomicBool,
    props: AtomicU64,
}

static SLOTS: [Slot; MAX_RUN_ID as usize + 1] =
    [const { Slot { running: AtomicBool::new(false), props: AtomicU64::new(0) } };
        MAX_RUN_ID as usize + 1];

/// Serializes [`acquire`]; the id after the last one handed out (ids rotate, so a fresh run
/// rarely gets the id that was just given back).
static NEXT: Mutex<u32> = Mutex::new(1);

/// A free id for a new run, now held by it; `None` if all are held.
pub(crate) fn acquire() -> Option<u32> {
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    for k in 0..MAX_RUN_ID {
        let id = (*next - 1 + k) % MAX_RUN_ID + 1;
        let s = &SLOTS[id as usize];
        // Acquire: the frees that took `props` to zero are done with their properties.
        if !s.running.load(Ordering::Acquire) && s.props.load(Ordering::Acquire) == 0 {
            s.running.store(true, Ordering::Relaxed);
            *next = id % MAX_RUN_ID + 1;
            return Some(id);
        }
    }
    None
}

/// The run with id `id` has ended (its workers are gone). Called once per run at its end
/// (`RunState::end`), also when fibers that never finished are leaked with the run's state:
/// they never resume, so the properties they hold are the only thing that still counts.
pub(crate) fn run_ended(id: u32) {
    SLOTS[id as usize].running.store(false, Ordering::Release);
}

/// Run `id` (which holds it) entrusted a property.
pub(crate) fn prop_created(id: u32) {
    SLOTS[id as usize].props.fetch_add(1, Ordering::Relaxed);
}

/// A property of run `id` has been freed (after the last use of its memory).
pub(crate) fn prop_freed(id: u32) {
    SLOTS[id as usize].props.fetch_sub(1, Ordering::Release);
}
