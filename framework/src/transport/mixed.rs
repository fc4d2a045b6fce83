//! A run that mixes transports (feature `mpi`): the shared-memory rings between the ranks of
//! each node (`transport::shm`), MPI messages between nodes (`transport::mpi`). `auto` takes
//! it when the ranks span several nodes and some node holds more than one of them
//! (`docs/rack-mode.md` §4.6).
//!
//! Each envelope goes by its destination's rank: to a rank of this node over the rings, to
//! any other over MPI. A worker polls both and makes progress on both on every pass. Waiting
//! is the networks' ([`IdlePolicy::Network`]: an MPI arrival wakes nobody), and the detector's
//! all-reduce goes over MPI, since the board of the rings spans one node only.

use super::mpi::MpiLink;
use super::shm::ShmLink;
use super::{Arrived, IdlePolicy, Transport};
use crate::channel::record::VTable;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The rings to the ranks of this node, MPI to the others (module docs).
#[derive(Debug)]
pub(crate) struct Mixed {
    rings: Arc<ShmLink>,
    mpi: Arc<MpiLink>,
    /// Per rank: whether it shares this rank's node (reached over the rings).
    near: Vec<bool>,
    workers: usize,
}

impl Mixed {
    /// The mix of `rings` (set up between the ranks with `near[r]`) and `mpi` (to every rank).
    pub(crate) fn new(
        rings: Arc<ShmLink>,
        mpi: Arc<MpiLink>,
        near: Vec<bool>,
        workers: usize,
    ) -> Mixed {
        Mixed { rings, mpi, near, workers }
    }

    /// The transport to global worker `to`.
    #[inline]
    fn to(&self, to: usize) -> &dyn Transport {
        if self.near[to / self.workers] {
            &*self.rings
        } else {
            &*self.mpi
        }
    }
}

impl Transport for Mixed {
    fn token(&self) -> u64 {
        self.mpi.token()
    }

    fn claim(&self, from: usize, to: usize) -> Option<Vec<u8>> {
        self.to(to).claim(from, to)
    }

    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        self.to(to).publish(from, to, msg)
    }

    /// The rings first: their envelopes are ready without a call into MPI.
    fn poll(&self, me: usize) -> Option<Arrived> {
        self.rings.poll(me).or_else(|| self.mpi.poll(me))
    }

    /// Into MPI's pool when it keeps buffers of this capacity (its receives and claims take
    /// them from there), else into the rings' pool: an envelope read from a ring comes in a
    /// buffer of the rings' size, which MPI's pool would drop and the next claim for a ring
    /// would allocate anew.
    fn release(&self, me: usize, msg: Vec<u8>) {
        if self.mpi.keeps(me, msg.capacity()) {
            self.mpi.release(me, msg)
        } else {
            self.rings.release(me, msg)
        }
    }

    fn progress(&self, me: usize) -> bool {
        let rings = self.rings.progress(me);
        self.mpi.progress(me) || rings
    }

    fn busy(&self, me: usize) -> bool {
        self.rings.busy(me) || self.mpi.busy(me)
    }

    fn drain(&self, me: usize, limit: Duration) -> bool {
        let start = Instant::now();
        self.rings.drain(me, limit) && self.mpi.drain(me, limit.saturating_sub(start.elapsed()))
    }

    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy::Network
    }

    fn describe(&self, me: usize) -> String {
        format!("{}; MPI: {}", self.rings.describe(me), self.mpi.describe(me))
    }

    fn batch_limits(&self, uniform: Option<&'static VTable>) -> (usize, usize) {
        // The two agree (the rings take MPI's batches, `ring_link`).
        self.mpi.batch_limits(uniform)
    }
}
