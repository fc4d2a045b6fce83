//! A run that mixes transports (feature `mpi`): the shared-memory rings between the ranks of
//! each node (`transport::shm`), a network transport between nodes ([`Far`]: MPI messages,
//! `transport::mpi`, or, with the `rdma` feature where every rank has an active RDMA port,
//! the verbs rings, `transport::verbs`). `auto` takes it when the ranks span several nodes
//! and some node holds more than one of them (`docs/rack-mode.md` §4.6).
//!
//! Each envelope goes by its destination's rank: to a rank of this node over the rings, to
//! any other over the network. A worker polls both and makes progress on both on every pass.
//! Waiting is the networks' ([`IdlePolicy::Network`]: an arrival from another node wakes
//! nobody), and the detector's all-reduce goes over MPI, since the board of the rings spans
//! one node only.

use super::mpi::MpiLink;
use super::shm::ShmLink;
use super::{Arrived, IdlePolicy, Transport};
use crate::channel::record::VTable;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The transport between nodes of a mixed run.
pub(crate) trait Far: Transport {
    /// Its name, as the mixed transport describes itself.
    const NAME: &'static str;

    /// Whether worker `me`'s pool should take a released buffer of `capacity` bytes; the
    /// others go to the rings' pool ([`Mixed`]'s `release`).
    fn keeps(&self, me: usize, capacity: usize) -> bool;
}

impl Far for MpiLink {
    const NAME: &'static str = "MPI";

    /// MPI's pool keeps buffers of its own size (its receives and claims take them from
    /// there); an envelope read from a ring comes in a buffer of the rings' size, which it
    /// would drop.
    fn keeps(&self, me: usize, capacity: usize) -> bool {
        MpiLink::keeps(self, me, capacity)
    }
}

#[cfg(feature = "rdma")]
impl Far for super::verbs::VerbsLink {
    const NAME: &'static str = "RDMA verbs";

    /// Both pools hold ring buffers of any size: the verbs pool takes one while it is less
    /// than half full, the rings' pool the rest.
    fn keeps(&self, me: usize, _capacity: usize) -> bool {
        self.pooled(me) < super::ring_link::POOL / 2
    }
}

/// The rings to the ranks of this node, `F` to the others (module docs).
#[derive(Debug)]
pub(crate) struct Mixed<F> {
    rings: Arc<ShmLink>,
    far: Arc<F>,
    /// Per rank: whether it shares this rank's node (reached over the rings).
    near: Vec<bool>,
    workers: usize,
}

impl<F: Far> Mixed<F> {
    /// The mix of `rings` (set up between the ranks with `near[r]`) and `far` (set up to the
    /// others at least).
    pub(crate) fn new(rings: Arc<ShmLink>, far: Arc<F>, near: Vec<bool>, workers: usize) -> Self {
        Mixed { rings, far, near, workers }
    }

    /// The transport to global worker `to`.
    #[inline]
    fn to(&self, to: usize) -> &dyn Transport {
        if self.near[to / self.workers] {
            &*self.rings
        } else {
            &*self.far
        }
    }
}

impl<F: Far> Transport for Mixed<F> {
    fn token(&self) -> u64 {
        self.far.token()
    }

    fn claim(&self, from: usize, to: usize) -> Option<Vec<u8>> {
        self.to(to).claim(from, to)
    }

    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        self.to(to).publish(from, to, msg)
    }

    /// The rings first: their envelopes are ready without a call into MPI.
    fn poll(&self, me: usize) -> Option<Arrived> {
        self.rings.poll(me).or_else(|| self.far.poll(me))
    }

    /// Into the network's pool when it keeps buffers of this capacity ([`Far::keeps`]), else
    /// into the rings' pool.
    fn release(&self, me: usize, msg: Vec<u8>) {
        if self.far.keeps(me, msg.capacity()) {
            self.far.release(me, msg)
        } else {
            self.rings.release(me, msg)
        }
    }

    fn progress(&self, me: usize) -> bool {
        let rings = self.rings.progress(me);
        self.far.progress(me) || rings
    }

    fn busy(&self, me: usize) -> bool {
        self.rings.busy(me) || self.far.busy(me)
    }

    fn drain(&self, me: usize, limit: Duration) -> bool {
        let start = Instant::now();
        self.rings.drain(me, limit) && self.far.drain(me, limit.saturating_sub(start.elapsed()))
    }

    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy::Network
    }

    fn describe(&self, me: usize) -> String {
        format!("{}; {}: {}", self.rings.describe(me), F::NAME, self.far.describe(me))
    }

    fn batch_limits(&self, uniform: Option<&'static VTable>) -> (usize, usize) {
        // The two agree (the rings take MPI's batches, `ring_link`; the verbs rings are the
        // rings).
        self.far.batch_limits(uniform)
    }
}
