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
    /// Stamp the passes that worked ([`Clock::worked`]): timing on, or round ends asked for
    /// alone (`Builder::round_ends`), which costs one clock read per such pass where the
    /// anatomy reads the clock at every phase of every pass.
    stamp: bool,
    last: Cell<Option<Instant>>,
}

impl Clock {
    /// A clock that times the loop's phases when `on`, and stamps its passes that worked
    /// when `on` or `round_ends`.
    pub(crate) fn new(on: bool, round_ends: bool) -> Clock {
        Clock { on, stamp: on || round_ends, last: Cell::new(None) }
    }

    /// Whether passes that worked are stamped, and round ends counted.
    #[inline(always)]
    pub(crate) fn stamps(&self) -> bool {
        self.stamp
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

    /// Stamps the end of a loop pass that did the job's work, not only frees or releases
    /// (`LiveStats::last_work_ns`: where a round's end begins, `WorkerStats::round_ends`),
    /// when [`Clock::stamps`].
    #[inline(always)]
    pub(crate) fn worked(&self, st: &LiveStats) {
        if self.stamp {
            st.last_work_ns.store(mono_ns(), std::sync::atomic::Ordering::Relaxed);
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

/// Nanoseconds of the machine's monotonic clock (`CLOCK_MONOTONIC`: the same clock for every
/// process of a machine, so ranks of one node can compare their readings); 0 where it is
/// not available.
pub(crate) fn mono_ns() -> u64 {
    #[cfg(unix)]
    {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// Nanoseconds of clock `id` (`clock_gettime`); 0 where the call fails.
#[cfg(unix)]
pub(crate) fn clock_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: `ts` is a plain struct on our stack; clock_gettime only writes it, and on
    // failure it stays zeroed, which reads as 0.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(id, &mut ts);
        ts
    };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_tile_the_time_and_off_counts_nothing() {
        let st = LiveStats::new(1, false);
        let c = Clock::new(true, false);
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
        let off = Clock::new(false, false);
        let st = LiveStats::new(1, false);
        off.mark(&st, Part::Idle);
        off.pass(&st);
        off.mark(&st, Part::Serving);
        assert_eq!(st.snapshot().anatomy, crate::stats::Anatomy::default());
        assert_eq!(st.last_work_ns.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn a_pass_that_worked_is_stamped_on_the_machine_clock_when_timed() {
        let st = LiveStats::new(1, false);
        let c = Clock::new(true, false);
        c.mark(&st, Part::Serving);
        assert_eq!(st.last_work_ns.load(std::sync::atomic::Ordering::Relaxed), 0);
        let before = mono_ns();
        c.worked(&st);
        let stamp = st.last_work_ns.load(std::sync::atomic::Ordering::Relaxed);
        if cfg!(unix) {
            assert!(stamp >= before && stamp <= mono_ns() && before > 0, "{before} {stamp}");
        }
        let st = LiveStats::new(1, false);
        Clock::new(false, false).worked(&st);
        assert_eq!(st.last_work_ns.load(std::sync::atomic::Ordering::Relaxed), 0);
        // Round ends alone: stamped, not timed.
        let (st, c) = (LiveStats::new(1, false), Clock::new(false, true));
        c.mark(&st, Part::Idle);
        c.mark(&st, Part::Serving);
        c.worked(&st);
        assert!(c.stamps() && !c.on());
        assert_eq!(st.snapshot().anatomy, crate::stats::Anatomy::default());
        if cfg!(unix) {
            assert!(st.last_work_ns.load(std::sync::atomic::Ordering::Relaxed) > 0);
        }
    }
}
