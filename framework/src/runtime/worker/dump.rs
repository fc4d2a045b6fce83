//! A worker's section of a stall dump (`super::super::stall`): its fibers and what each waits
//! on, its requests staged and in flight per trustee (per remote rank), its transport queues.
//! Written by the worker's own thread, between two loop passes, where its state lives.

use super::Worker;
use crate::channel::batch::untag_count;
use crate::channel::slot::PIPELINE;
use crate::runtime::stall::{write_stderr, Wait};
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

/// Fibers listed one by one in a section; the others are counted by what they wait on.
const LISTED: usize = 24;

/// A worker's dump state: the last wait each fiber recorded (by fiber id), and the last dump
/// request answered.
#[derive(Debug, Default)]
pub(crate) struct WorkerDump {
    waits: RefCell<Vec<Wait>>,
    seen: Cell<u64>,
}

impl Worker {
    /// Records why the current fiber is about to suspend (no-op outside a fiber).
    #[inline]
    pub(crate) fn note_wait(&self, w: Wait) {
        if let Some(id) = self.current.get() {
            let mut v = self.dump.waits.borrow_mut();
            let i = id as usize;
            if v.len() <= i {
                v.resize(i + 1, Wait::Nothing);
            }
            v[i] = w;
        }
    }

    /// Once per loop pass: writes this worker's section if a dump was asked for since the last
    /// one it answered.
    #[inline(always)]
    pub(super) fn check_dump(&self) {
        let e = self.run_state.stall.epoch.0.load(Ordering::Relaxed);
        if e != self.dump.seen.get() {
            self.dump.seen.set(e);
            self.write_dump();
        }
    }

    #[cold]
    #[inline(never)]
    fn write_dump(&self) {
        let s = self.dump_section();
        write_stderr(&s);
        self.run_state.stall.section_written();
    }

    /// The section's text.
    fn dump_section(&self) -> String {
        let mut s = String::new();
        let ready: std::collections::HashSet<u32> = self.ready.borrow().iter().copied().collect();
        let fibers = self.fibers.borrow();
        let waits = self.dump.waits.borrow();
        let live: Vec<u32> =
            (0..fibers.len() as u32).filter(|&i| fibers[i as usize].is_some()).collect();
        let _ = writeln!(
            s,
            "skein dump [rank {} worker {}]: {} fibers ({} ready), {} in wait_quiescent",
            self.rank,
            self.index,
            live.len(),
            ready.len(),
            self.quiesce_waiters.borrow().len()
        );
        let mut others: std::collections::BTreeMap<String, usize> = Default::default();
        for (k, &id) in live.iter().enumerate() {
            let mut what = String::new();
            if ready.contains(&id) {
                what.push_str("ready to run");
            } else {
                waits
                    .get(id as usize)
                    .copied()
                    .unwrap_or_default()
                    .describe(self.local_n, &mut what);
            }
            if k < LISTED {
                let _ = writeln!(s, "  fiber {id}: {what}");
            } else {
                *others.entry(what).or_default() += 1;
            }
        }
        for (what, n) in others {
            let _ = writeln!(s, "  {n} more fibers: {what}");
        }
        // Requests, per local trustee and per remote rank.
        let mut per_rank: std::collections::BTreeMap<usize, (usize, usize, usize)> =
            Default::default();
        for (t, cs) in self.clients.iter().enumerate() {
            let staged = cs.out(|q| q.staged());
            if self.is_remote(t) {
                let (batches, records) = self.remote.as_ref().map_or((0, 0), |r| r.in_flight_of(t));
                if staged + batches > 0 {
                    let e = per_rank.entry(t / self.local_n).or_default();
                    e.0 += staged;
                    e.1 += batches;
                    e.2 += records;
                    let _ = writeln!(
                        s,
                        "  to trustee {t} (rank {}): {staged} requests staged, {batches} \
                         batches ({records} requests) in flight",
                        t / self.local_n
                    );
                }
                continue;
            }
            let (sent, acked) = (cs.sent.get(), cs.acked.get());
            if staged == 0 && sent == acked {
                continue;
            }
            let mut lanes = String::new();
            for seq in acked + 1..=sent {
                let (n, _) = untag_count(cs.in_lane[(seq % PIPELINE as u64) as usize].get());
                let _ =
                    write!(lanes, " lane {}: batch {seq} of {n} requests;", seq % PIPELINE as u64);
            }
            let who = if t == self.index {
                "itself (local queue)".to_string()
            } else {
                format!("trustee {t}")
            };
            let _ = writeln!(
                s,
                "  to {who}: {staged} requests staged, {} batches in flight{}",
                sent - acked,
                if lanes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", lanes.trim_end_matches(';').trim())
                }
            );
        }
        for (r, (staged, batches, records)) in per_rank {
            let _ = writeln!(
                s,
                "  to rank {r} in all: {staged} requests staged, {batches} batches ({records} \
                 requests) in flight"
            );
        }
        if let Some(d) = &self.detector {
            let _ = match d.borrow_mut().outstanding() {
                None => writeln!(s, "  this rank's quiescence detector: no round outstanding"),
                Some((round, None)) => {
                    writeln!(s, "  this rank's quiescence detector: round {round} outstanding")
                }
                Some((round, Some(ranks))) if ranks.is_empty() => writeln!(
                    s,
                    "  this rank's quiescence detector: round {round} outstanding, every \
                     rank's part arrived"
                ),
                Some((round, Some(ranks))) => writeln!(
                    s,
                    "  this rank's quiescence detector: round {round} outstanding, waiting for \
                     the part of rank(s) {ranks:?}"
                ),
            };
        }
        if let Some(t) = self.run_state.transport.as_deref() {
            let d = t.describe(self.index);
            if !d.is_empty() {
                let _ = writeln!(s, "  transport: {d}");
            }
        }
        s
    }
}
