//! Weakly connected components on the public building blocks ([`crate::parts`],
//! [`crate::outbox`]): min-label propagation in supersteps. Every vertex starts with its own
//! id as label; in a round every vertex whose label dropped in the previous round offers its
//! label to its neighbours, locally in place and to other partitions through an
//! [`Outbox`] of `(local index, label)` updates (15 to a request); a round ends at
//! quiescence, and the kernel when no label dropped anywhere. Each component ends labelled by
//! its smallest vertex, for any workers and ranks (the result is a fixed point, not an order).
//!
//! A vertex sends its label to a remote neighbour only when it is smaller than the last label
//! this partition sent to that vertex (a per-partition cache over the tag space, 8 bytes per
//! tag), so a hub does not send the same label again and again.

use std::sync::Arc;
use std::time::Instant;

use skein::Trust;

use crate::adjacency::NO_TAG;
use crate::graph::GraphView;
use crate::outbox::Outbox;
use crate::parts::{self, Collect, KernelStats, Part};

/// One partition's labels and work lists.
#[derive(Debug)]
pub(crate) struct CcPart {
    view: Arc<GraphView>,
    part: usize,
    label: Vec<u64>,
    /// Vertices whose label dropped in the previous round (this round's work).
    active: Vec<u32>,
    /// Vertices whose label dropped in this round.
    next: Vec<u32>,
    queued: Vec<u8>,
    /// The smallest label sent to each remote tag so far (`u64::MAX`: none).
    sent: Vec<u64>,
    peers: Arc<Vec<Trust<CcPart>>>,
    outbox: Outbox<(u32, u64)>,
    arcs: u64,
}

impl CcPart {
    fn new(view: Arc<GraphView>, part: usize) -> CcPart {
        let np = view.parts.parts();
        let range = view.parts.range(part);
        let len = view.parts.len(part);
        let sent = if np > 1 { vec![u64::MAX; view.tags.space(np)] } else { Vec::new() };
        CcPart {
            label: range.collect(),
            active: (0..len).collect(),
            next: Vec::new(),
            queued: vec![0; len as usize],
            sent,
            peers: Arc::new(Vec::new()),
            outbox: Outbox::new(np),
            arcs: 0,
            view,
            part,
        }
    }

    /// Offers `label` to local vertex `l`: a smaller one wins and is passed on next round.
    #[inline]
    fn offer(&mut self, l: u32, label: u64) {
        if label < self.label[l as usize] {
            self.label[l as usize] = label;
            if self.queued[l as usize] == 0 {
                self.queued[l as usize] = 1;
                self.next.push(l);
            }
        }
    }

    /// Propagates the labels of the active vertices `range` (indices into the work list).
    fn propagate(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for i in range {
            let u = self.active[i as usize];
            let label = self.label[u as usize];
            let (own, other) = arcs.split(u);
            self.arcs += (own.len() + other.len()) as u64;
            for &t in own {
                self.offer(tags.local(t), label);
            }
            for &t in other {
                debug_assert_ne!(t, NO_TAG);
                if label < self.sent[t as usize] {
                    self.sent[t as usize] = label;
                    let item = (tags.local(t), label);
                    self.outbox.send(tags.part(t), item, &peers, |p: &mut CcPart, items| {
                        for &(l, label) in items {
                            p.offer(l, label);
                        }
                    });
                }
            }
        }
        self.outbox.flush_to(&peers, |p: &mut CcPart, items| {
            for &(l, label) in items {
                p.offer(l, label);
            }
        });
    }

    /// Makes the vertices whose label dropped the next round's work; returns how many.
    fn advance(&mut self) -> u64 {
        std::mem::swap(&mut self.active, &mut self.next);
        self.next.clear();
        for &l in &self.active {
            self.queued[l as usize] = 0;
        }
        self.active.len() as u64
    }
}

impl Part for CcPart {
    type Value = u64;

    fn index(&self) -> usize {
        self.part
    }

    fn set_peers(&mut self, peers: Arc<Vec<Trust<Self>>>) {
        self.peers = peers;
    }

    fn write(&self, from: usize, values: &mut [u64], _parents: &mut [u64]) {
        values.copy_from_slice(&self.label[from..from + values.len()]);
    }

    fn counters(&self) -> (u64, u64) {
        (self.outbox.requests, self.arcs)
    }
}

/// Connected components of graph `graph`, run by the main fiber, `chunk` vertices per step:
/// the labels by global id (empty with [`Collect::Slices`]).
pub(crate) fn run(
    graph: u64,
    view: Arc<GraphView>,
    chunk: usize,
    how: Collect,
) -> (Vec<u64>, KernelStats) {
    let all = parts::entrust(graph, CcPart::new);
    let id = parts::connect(&all);
    let start = Instant::now();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let active = parts::superstep((id, chunk as u64), |(id, chunk)| {
            let me = parts::me::<CcPart>(id);
            let len = me.apply((), |s, ()| s.active.len());
            parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.propagate(r));
            skein::wait_quiescent();
            me.apply((), |s, ()| s.advance())
        });
        if active.iter().sum::<u64>() == 0 {
            break;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let g = parts::collect(graph, id, &all, &view.parts, how);
    parts::disconnect(id, &all);
    (g.values, KernelStats { seconds, rounds, messages: g.messages, arcs: g.arcs })
}
