//! Weakly connected components on the public building blocks ([`crate::parts`],
//! [`crate::outbox`]): a union-find within each partition, then min-label propagation between
//! partitions in supersteps.
//!
//! 1. **Local** (one superstep, no messages): each partition joins the ends of its own
//!    arcs (those within the partition) in a union-find over its local indices whose roots are
//!    the smallest index of their set, so a local component's root is its smallest vertex and
//!    its first label. The vertices with arcs to other partitions (the *boundary*) are grouped
//!    by root.
//! 2. **Rounds**: the boundary vertices of every local component whose label dropped (all, in
//!    the first round) offer the label to their remote neighbours, through an [`Outbox`] of
//!    `(local index, label)` updates (15 to a request); an offer lowers the label of the
//!    receiver's local component. A round ends at quiescence, the kernel when no label dropped
//!    anywhere. A vertex is sent a label only when it is smaller than the last label this
//!    partition sent to it (a cache over the tag space, 8 bytes per tag).
//!
//! Each component ends labelled by its smallest vertex, for any workers and ranks (the result
//! is a fixed point, not an order). On one partition the kernel is a union-find, one pass.

use std::sync::Arc;
use std::time::Instant;

use skein::Trust;

use crate::graph::GraphView;
use crate::outbox::Outbox;
use crate::parts::{self, Collect, KernelStats, Part};

/// One partition's union-find, labels and work lists.
#[derive(Debug)]
pub(crate) struct CcPart {
    view: Arc<GraphView>,
    part: usize,
    /// The union-find over local indices (a root is the smallest index of its set).
    parent: Vec<u32>,
    /// The label of each local component, at its root.
    label: Vec<u64>,
    /// The boundary vertices grouped by root: `boundary[start[r]..start[r + 1]]`.
    start: Vec<u32>,
    boundary: Vec<u32>,
    /// The boundary vertices that offer their label this round.
    work: Vec<u32>,
    /// Roots whose label dropped this round, and a flag per root.
    changed: Vec<u32>,
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
        let first = view.parts.range(part).start;
        let len = view.parts.len(part);
        let sent = if np > 1 { vec![u64::MAX; view.tags.space(np)] } else { Vec::new() };
        CcPart {
            parent: (0..len).collect(),
            label: (first..first + u64::from(len)).collect(),
            start: Vec::new(),
            boundary: Vec::new(),
            work: Vec::new(),
            changed: Vec::new(),
            queued: vec![0; len as usize],
            sent,
            peers: Arc::new(Vec::new()),
            outbox: Outbox::new(np),
            arcs: 0,
            view,
            part,
        }
    }

    /// The root of local vertex `x` (halving the path).
    #[inline]
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let p = self.parent[x as usize];
            self.parent[x as usize] = self.parent[p as usize];
            x = self.parent[x as usize];
        }
        x
    }

    /// The root of `x` without changing the forest.
    fn root(&self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            x = self.parent[x as usize];
        }
        x
    }

    /// Joins the own arcs of local vertices `range`.
    fn join(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for u in range {
            let own = arcs.split(u).0;
            self.arcs += own.len() as u64;
            for &t in own {
                let (a, b) = (self.find(u), self.find(tags.local(t)));
                if a != b {
                    self.parent[a.max(b) as usize] = a.min(b);
                }
            }
        }
    }

    /// After [`CcPart::join`] of every vertex: groups the boundary by root and makes all of
    /// it the first round's work.
    fn group(&mut self) {
        let view = Arc::clone(&self.view);
        let arcs = view.out_arcs(self.part);
        let len = self.parent.len();
        let on_boundary: Vec<u32> =
            (0..len as u32).filter(|&u| !arcs.split(u).1.is_empty()).collect();
        let roots: Vec<u32> = on_boundary.iter().map(|&u| self.find(u)).collect();
        let mut start = vec![0u32; len + 1];
        roots.iter().for_each(|&r| start[r as usize + 1] += 1);
        for i in 0..len {
            start[i + 1] += start[i];
        }
        let mut at = start.clone();
        let mut boundary = vec![0u32; on_boundary.len()];
        for (&u, &r) in on_boundary.iter().zip(&roots) {
            boundary[at[r as usize] as usize] = u;
            at[r as usize] += 1;
        }
        self.work = boundary.clone();
        (self.start, self.boundary) = (start, boundary);
    }

    /// Offers `label` to local vertex `l`: a smaller one becomes its component's label.
    #[inline]
    fn offer(&mut self, l: u32, label: u64) {
        let r = self.find(l);
        if label < self.label[r as usize] {
            self.label[r as usize] = label;
            if self.queued[r as usize] == 0 {
                self.queued[r as usize] = 1;
                self.changed.push(r);
            }
        }
    }

    /// Sends the labels of the work list's vertices `range` to their remote neighbours.
    fn propagate(&mut self, range: std::ops::Range<u32>) {
        let view = Arc::clone(&self.view);
        let peers = Arc::clone(&self.peers);
        let (arcs, tags) = (view.out_arcs(self.part), view.tags);
        for i in range {
            let u = self.work[i as usize];
            let r = self.find(u);
            let label = self.label[r as usize];
            let other = arcs.split(u).1;
            self.arcs += other.len() as u64;
            for &t in other {
                if label < self.sent[t as usize] {
                    self.sent[t as usize] = label;
                    let item = (tags.local(t), label);
                    self.outbox.send(tags.part(t), item, &peers, receive);
                }
            }
        }
        self.outbox.flush_to(&peers, receive);
    }

    /// Makes the boundary of the components whose label dropped the next round's work;
    /// returns how many vertices that is.
    fn advance(&mut self) -> u64 {
        self.work.clear();
        for r in std::mem::take(&mut self.changed) {
            self.queued[r as usize] = 0;
            let (a, b) = (self.start[r as usize] as usize, self.start[r as usize + 1] as usize);
            self.work.extend_from_slice(&self.boundary[a..b]);
        }
        self.work.len() as u64
    }
}

/// Runs on the receiving partition's trustee: a packet of offers.
fn receive(p: &mut CcPart, items: &[(u32, u64)]) {
    for &(l, label) in items {
        p.offer(l, label);
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
        for (i, v) in values.iter_mut().enumerate() {
            *v = self.label[self.root((from + i) as u32) as usize];
        }
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
    parts::superstep((id, chunk as u64), |(id, chunk)| {
        let me = parts::me::<CcPart>(id);
        let len = me.apply((), |s, ()| s.parent.len());
        parts::chunks(&me, len, chunk as usize, (), |s, (), r| s.join(r));
        me.apply((), |s, ()| s.group());
    });
    let mut rounds = 0;
    loop {
        rounds += 1;
        let active = parts::superstep((id, chunk as u64), |(id, chunk)| {
            let me = parts::me::<CcPart>(id);
            let len = me.apply((), |s, ()| s.work.len());
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
