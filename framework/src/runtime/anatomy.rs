//! A round's anatomy: the worker loop's time split by what each stretch of a pass did
//! (`Builder::anatomy`, `SKEIN_ANATOMY=1`; reported in `WorkerStats::anatomy`).
//!
//! A [`Clock`] reads `Instant::now()` at the boundaries of a loop pass's phases (and once per
//! envelope a pass handles), never per request, and adds the time since the previous read to
//! the part that the stretch belonged to. Every stretch goes to exactly one part, so the parts
//! tile the loop from the worker's first pass to its last. Where workers share a thread
//! (`Builder::worker_threads`), the time between two passes of a worker (the other workers'
//! passes) goes to the part its previous pass ended in, as a park's time does: the worker
//! waited for its thread. Off, a mark is one predictable
//! branch on a field of the worker.

use crate::stats::LiveStats;
use crate::sync::bump;
use std::cell::Cell;
use std::time::Instant;

/// A part of [`crate::stats::Anatomy`]: its index in `LiveStats::anatomy` (0 is the pass
/// count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Serving = 1,
    Issuing = 2,
    Transport = 3,
    Detector = 4,
    WaitResponse = 5,
    WaitQuiescence = 6,
    Idle = 7,
}

/// One worker's clock (thread-owned).
#[derive(Debug)]
pub(crate) struct Clock {
    on: bool,
    last: Cell<Option<Instant>>,
}

impl Clock {
    pub(crate) fn new(on: bool) -> Clock {
        Clock { on, last: Cell::new(None) }
    }

    /// Whether timing is on.
    #[inline(always)]
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Ends the current stretch: its time goes to `part`. The first mark only starts the
    /// clock.
    #[inline(always)]
    pub(crate) fn mark(&self, st: &LiveStats, part: Part) {
        if self.on {
            self.mark_on(st, part);
        }
    }

    #[inline(never)]
    fn mark_on(&self, st: &LiveStats, part: Part) {
        let now = Instant::now();
        if let Some(last) = self.last.replace(Some(now)) {
            let ns = now.saturating_duration_since(last).as_nanos();
            bump(&st.anatomy[part as usize], u64::try_from(ns).unwrap_or(u64::MAX));
        }
    }

    /// Counts a timed loop pass.
    #[inline(always)]
    pub(crate) fn pass(&self, st: &LiveStats) {
        if self.on {
            bump(&st.anatomy[0], 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_tile_the_time_and_off_counts_nothing() {
        let st = LiveStats::new(1);
        let c = Clock::new(true);
        c.mark(&st, Part::Idle); // starts the clock
        c.pass(&st);
        std::thread::sleep(std::time::Duration::from_millis(1));
        c.mark(&st, Part::Serving);
        c.mark(&st, Part::Transport);
        let a = st.snapshot().anatomy;
        assert_eq!(a.passes, 1);
        assert_eq!(a.idle_ns, 0);
        assert!(a.serving_ns > 0);
        assert_eq!(a.total_ns(), a.serving_ns + a.transport_ns);
        let off = Clock::new(false);
        let st = LiveStats::new(1);
        off.mark(&st, Part::Idle);
        off.pass(&st);
        off.mark(&st, Part::Serving);
        assert_eq!(st.snapshot().anatomy, crate::stats::Anatomy::default());
    }
}
