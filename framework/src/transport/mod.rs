//! The seam between the worker loop and the ways envelopes move between ranks: the
//! [`Transport`] trait, and one file per flavour (crossbeam-channel's `flavors/` in that
//! literal sense):
//!
//! * [`loopback`]: in-process inboxes, for a run split into fake ranks in one process
//!   (`Builder::loopback_ranks`, `SKEIN_LOOPBACK_RANKS`);
//! * `mpi` (feature `mpi`): the MPI envelope transport of `crate::rack` behind the trait
//!   (`Runtime::run` under `mpirun`);
//! * `shm` (feature `mpi`): rings in shared memory, written with plain stores (ranks on one
//!   node; the ring protocol of `ring`);
//! * `verbs` (feature `rdma`): the same rings in RDMA-registered memory, written with
//!   one-sided RDMA writes (ranks on different nodes; built and unit-tested, never run on
//!   RDMA hardware: `docs/rack-mode.md` §4.6), and its connection data (`verbs_conn`, also
//!   built without the feature for its tests).
//!
//! The transport moves whole envelopes and knows nothing of their content; the runtime
//! (`crate::runtime::remote`) writes, validates and answers them. Layering
//! (`docs/ARCHITECTURE.md`): this module sits above `wire` and `rack`, below `runtime`.

#[cfg(any(test, feature = "mpi"))]
pub(crate) mod board;
pub(crate) mod loopback;
#[cfg(feature = "mpi")]
pub(crate) mod mixed;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
#[cfg(feature = "mpi")]
mod owned;
#[cfg(any(test, feature = "mpi"))]
pub(crate) mod ring;
#[cfg(feature = "mpi")]
pub(crate) mod ring_link;
#[cfg(feature = "mpi")]
pub(crate) mod shm;
#[cfg(feature = "rdma")]
pub(crate) mod verbs;
#[cfg(any(test, feature = "rdma"))]
pub(crate) mod verbs_conn;
pub(crate) mod wake;

use crate::channel::record::VTable;

/// Which transport a run over MPI ranks moves its envelopes with ([`crate::Builder::rack_transport`],
/// or `SKEIN_TRANSPORT=auto|mpi|shm|verbs` in the environment). Every rank must choose the
/// same; the one a run used is [`crate::rack_transport_used`].
///
/// ```
/// let t: skein::RackTransport = "shm".parse().unwrap();
/// assert_eq!(t, skein::RackTransport::Shm);
/// assert_eq!("verbs".parse::<skein::RackTransport>(), Ok(skein::RackTransport::Verbs));
/// let e = "tcp".parse::<skein::RackTransport>().unwrap_err();
/// assert!(e.contains("expected auto, mpi, shm or verbs"), "{e}");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RackTransport {
    /// Rings in shared memory when every rank runs on one node and every rank could set them
    /// up; across nodes, the rings within each node that holds several ranks, and between
    /// nodes RDMA verbs when every rank has an active RDMA port (feature `rdma`), else MPI
    /// messages (the default).
    #[default]
    Auto,
    /// Two-sided MPI messages (any placement of the ranks).
    Mpi,
    /// Rings in shared memory, written with plain stores (every rank on one node; an error
    /// otherwise).
    Shm,
    /// Rings in RDMA-registered memory, written with one-sided RDMA writes over reliable
    /// connected queue pairs (feature `rdma`; every rank needs an active RDMA port, and the
    /// run fails on every rank otherwise). Never run on RDMA hardware yet
    /// (`docs/rack-mode.md` §4.6).
    Verbs,
}

impl RackTransport {
    /// The name `SKEIN_TRANSPORT` and the command line use (`auto`, `mpi`, `shm`, `verbs`).
    pub fn name(self) -> &'static str {
        match self {
            RackTransport::Auto => "auto",
            RackTransport::Mpi => "mpi",
            RackTransport::Shm => "shm",
            RackTransport::Verbs => "verbs",
        }
    }

    /// The code ranks compare (`crate::rack::agree_shape`).
    #[cfg(feature = "mpi")]
    pub(crate) fn code(self) -> u64 {
        match self {
            RackTransport::Mpi => 1,
            RackTransport::Shm => 2,
            RackTransport::Auto => 3,
            RackTransport::Verbs => 4,
        }
    }

    /// The name of the transport of `code`.
    #[cfg(feature = "mpi")]
    pub(crate) fn name_of(code: u64) -> &'static str {
        match code {
            1 => "mpi",
            2 => "shm",
            3 => "auto",
            4 => "verbs",
            _ => "an unknown transport",
        }
    }
}

impl std::fmt::Display for RackTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RackTransport {
    type Err = String;

    fn from_str(s: &str) -> Result<RackTransport, String> {
        match s.trim() {
            "auto" => Ok(RackTransport::Auto),
            "mpi" => Ok(RackTransport::Mpi),
            "shm" => Ok(RackTransport::Shm),
            "verbs" | "rdma" => Ok(RackTransport::Verbs),
            other => {
                Err(format!("unknown rack transport {other:?}: expected auto, mpi, shm or verbs"))
            }
        }
    }
}

/// The most words of in-process records one batch to another rank takes from a client's
/// queue (the size of a worker's scratch buffer, `crate::runtime::remote`): the limit of
/// [`Transport::batch_limits`].
pub(crate) const BATCH_WORDS: usize = 4096;
/// The most in-process result bytes of one batch to another rank.
pub(crate) const BATCH_RESULT_BYTES: usize = 64 << 10;

/// How a worker with nothing due waits ([`Transport::idle_policy`]; the worker loop,
/// `runtime/worker.rs`, `Worker::run_loop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdlePolicy {
    /// Envelopes move through memory (loopback): spin while a response is due, then yield;
    /// with nothing due, spin, yield, then sleep in short steps (`runtime/idle.rs`,
    /// `Policy::Loopback`).
    Memory,
    /// A loop pass already waits in the transport's progress call (MPI): no spinning; after
    /// a long stretch of yields, 50 µs waits between polls, but none while the transport is
    /// busy (`runtime/idle.rs`, `Policy::Ranks`); and the worker's sends are drained at the
    /// end of the run.
    // Only the MPI transport (feature `mpi`) says so.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Network,
    /// Envelopes move through rings in memory shared by the ranks of one node, and every
    /// writer of a ring (of its bytes, of its credit, of the board) wakes the worker it made
    /// work for ([`Transport::wake_words`], `transport/wake.rs`): spin, yield, then block on
    /// the worker's futex word (`runtime/idle.rs`, `Policy::Rings`); the worker's sends are
    /// drained at the end of the run.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Rings,
}

/// An envelope that arrived: its bytes and the rank that sent it (the transport's knowledge,
/// as MPI's source, never read from the bytes).
#[derive(Debug)]
pub(crate) struct Arrived {
    /// The sending rank.
    pub(crate) from_rank: usize,
    /// The envelope.
    pub(crate) bytes: Vec<u8>,
}

/// Moves envelopes (whole messages) between workers of different ranks. Every method is
/// called by the worker it names, never blocks and never runs user code.
///
/// The shape fits both kinds of transport of `docs/rack-mode.md` §4: MPI (`claim`: a buffer
/// from the pool if a credit is left; `publish`: `MPI_Isend`; `poll`: an `MPI_Test` of the
/// oldest of a ring of pre-posted `MPI_Irecv`s; `release`: the buffer back to the pool;
/// `progress`: tests of the sends in flight) and RDMA
/// (`claim`: registered memory mirrored at the receiver; `publish`: a one-sided write of the
/// batch, then of its ready flag on the same queue pair; `poll`: the ready flags in local
/// registered memory; `release`: the credit back). Nothing needs a call on the receiver to
/// complete a message.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// The job token the envelopes carry.
    fn token(&self) -> u64;
    /// A buffer for a message from worker `from` to worker `to` (global ids), or `None`
    /// when no credit is left (the caller tries again later).
    fn claim(&self, from: usize, to: usize) -> Option<Vec<u8>>;
    /// Sends the filled buffer from `from` to `to`.
    fn publish(&self, from: usize, to: usize, msg: Vec<u8>);
    /// The next message that arrived for worker `me`, if any.
    fn poll(&self, me: usize) -> Option<Arrived>;
    /// Gives back a message `poll` handed out (its buffer, its credit).
    fn release(&self, me: usize, msg: Vec<u8>);
    /// Moves bytes (completes sends and receives); true if it did something.
    fn progress(&self, me: usize) -> bool;
    /// Whether worker `me` has messages under way in the transport (a send not complete, a
    /// receive not taken): it must not sleep then.
    fn busy(&self, _me: usize) -> bool {
        false
    }
    /// At the end of a run (every envelope received): completes worker `me`'s sends, for at
    /// most `limit`; false if some are still incomplete then (a peer that stopped receiving:
    /// an aborted run).
    fn drain(&self, _me: usize, _limit: std::time::Duration) -> bool {
        true
    }
    /// How a worker waits when nothing is due.
    fn idle_policy(&self) -> IdlePolicy {
        IdlePolicy::Memory
    }
    /// With [`IdlePolicy::Rings`]: the futex words of the workers, every worker's single wait
    /// point (the transport's writers wake them, and so do the threads of the rank:
    /// `runtime/idle.rs`, `Sleepers`).
    fn wake_words(&self) -> Option<std::sync::Arc<dyn wake::WakeWords>> {
        None
    }
    /// Worker `me`'s pending sends and receives in words, for a stall dump (empty: nothing
    /// to say).
    fn describe(&self, _me: usize) -> String {
        String::new()
    }
    /// The limits of one batch to another rank (most words of in-process records, at most
    /// [`BATCH_WORDS`]; most in-process result bytes, at most [`BATCH_RESULT_BYTES`]) for a
    /// queue whose staged records are all of `uniform`'s type, if known.
    fn batch_limits(&self, _uniform: Option<&'static VTable>) -> (usize, usize) {
        (BATCH_WORDS, BATCH_RESULT_BYTES)
    }
}

/// A shared transport (the run keeps one handle to close it after the workers stopped).
impl<T: Transport + ?Sized> Transport for std::sync::Arc<T> {
    fn token(&self) -> u64 {
        (**self).token()
    }
    fn claim(&self, from: usize, to: usize) -> Option<Vec<u8>> {
        (**self).claim(from, to)
    }
    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        (**self).publish(from, to, msg)
    }
    fn poll(&self, me: usize) -> Option<Arrived> {
        (**self).poll(me)
    }
    fn release(&self, me: usize, msg: Vec<u8>) {
        (**self).release(me, msg)
    }
    fn progress(&self, me: usize) -> bool {
        (**self).progress(me)
    }
    fn busy(&self, me: usize) -> bool {
        (**self).busy(me)
    }
    fn drain(&self, me: usize, limit: std::time::Duration) -> bool {
        (**self).drain(me, limit)
    }
    fn idle_policy(&self) -> IdlePolicy {
        (**self).idle_policy()
    }
    fn wake_words(&self) -> Option<std::sync::Arc<dyn wake::WakeWords>> {
        (**self).wake_words()
    }
    fn describe(&self, me: usize) -> String {
        (**self).describe(me)
    }
    fn batch_limits(&self, uniform: Option<&'static VTable>) -> (usize, usize) {
        (**self).batch_limits(uniform)
    }
}
