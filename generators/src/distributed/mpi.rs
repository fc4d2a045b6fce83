//! [`Exchange`] over MPI (feature `mpi`): `MPI_Alltoall` of the counts, then
//! `MPI_Alltoallv` of the words, on `MPI_COMM_WORLD`; [`Exchange::start`] sends and
//! receives point to point without waiting (`MPI_Isend`, `MPI_Irecv` into room for
//! `max_from` words per rank, left unfaulted where nothing arrives), on a duplicate of
//! `MPI_COMM_WORLD` made at the first `start` (collective), and completes in
//! [`Started::received`] and [`Started::into_send_buffer`] (`MPI_Waitall`).
//!
//! MPI must already be initialised (by `skein::rack::init()` in a skein program, or by
//! the program itself); this module never initialises nor finalises it. Its communicator
//! handle is made and used on the calling thread.

use mpi::datatype::{Partition, PartitionMut};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives, Equivalence};

use super::{build_local_csr_with_stats, BuildStats, DistError, Exchange, LocalCsr, Started};
use crate::kronecker::KroneckerParams;

/// [`Exchange`] over `MPI_COMM_WORLD`.
pub struct MpiExchange {
    world: SimpleCommunicator,
    rank: usize,
    ranks: usize,
    /// The duplicate of the world for [`Exchange::start`] (made at its first call).
    p2p: Option<SimpleCommunicator>,
    /// Exchanges started so far (their tags).
    started: u64,
}

impl MpiExchange {
    /// The world communicator; an error when MPI is not initialised.
    pub fn world() -> Result<MpiExchange, DistError> {
        if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
            return Err(DistError::Exchange(
                "MPI is not initialised (call skein::rack::init() first, under mpirun)".into(),
            ));
        }
        let world = SimpleCommunicator::world();
        let rank = usize::try_from(world.rank()).expect("MPI ranks are non-negative");
        let ranks = usize::try_from(world.size()).expect("MPI sizes are positive");
        Ok(MpiExchange { world, rank, ranks, p2p: None, started: 0 })
    }
}

impl std::fmt::Debug for MpiExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiExchange").field("rank", &self.rank).field("ranks", &self.ranks).finish()
    }
}

impl Exchange for MpiExchange {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    /// MPI counts and displacements are `i32`.
    fn max_words(&self) -> u64 {
        i32::MAX as u64
    }

    fn exchange(
        &mut self,
        send: &[u64],
        counts: &[usize],
    ) -> Result<(Vec<u64>, Vec<usize>), DistError> {
        let r = self.ranks;
        let to_i32 = |c: usize| {
            i32::try_from(c)
                .map_err(|_| DistError::Exchange(format!("{c} words exceed MPI counts")))
        };
        if counts.len() != r || counts.iter().sum::<usize>() != send.len() {
            return Err(DistError::Exchange(format!(
                "{} words to send with counts {counts:?} for {r} ranks",
                send.len()
            )));
        }
        let send_counts: Vec<i32> = counts.iter().map(|&c| to_i32(c)).collect::<Result<_, _>>()?;
        to_i32(send.len())?;
        let mut recv_counts = vec![0i32; r];
        self.world.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let recv_total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        to_i32(recv_total)?;
        // Both totals fit in i32, so the displacements (partial sums) do too.
        let displs = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0i32, |at, &x| {
                    let d = *at;
                    *at += x;
                    Some(d)
                })
                .collect()
        };
        let send_displs = displs(&send_counts);
        let recv_displs = displs(&recv_counts);
        let mut recv = vec![0u64; recv_total];
        {
            let s = Partition::new(send, &send_counts[..], &send_displs[..]);
            let mut d = PartitionMut::new(&mut recv[..], &recv_counts[..], &recv_displs[..]);
            self.world.all_to_all_varcount_into(&s, &mut d);
        }
        Ok((recv, recv_counts.iter().map(|&c| c as usize).collect()))
    }

    fn start(
        &mut self,
        send: Vec<u64>,
        counts: &[usize],
        max_from: usize,
    ) -> Result<Box<dyn Started>, DistError> {
        self.start_p2p(send, counts, max_from)
    }
}

/// Tags of started exchanges cycle below this (MPI guarantees tags up to 32767); messages
/// between two ranks on one communicator and tag arrive in order anyway.
const TAG_CYCLE: u64 = 1 << 14;

impl MpiExchange {
    fn start_p2p(
        &mut self,
        send: Vec<u64>,
        counts: &[usize],
        max_from: usize,
    ) -> Result<Box<dyn Started>, DistError> {
        let (r, me) = (self.ranks, self.rank);
        if counts.len() != r || counts.iter().sum::<usize>() != send.len() {
            return Err(DistError::Exchange(format!(
                "{} words to send with counts {counts:?} for {r} ranks",
                send.len()
            )));
        }
        let to_i32 = |c: usize| {
            i32::try_from(c)
                .map_err(|_| DistError::Exchange(format!("{c} words exceed MPI counts")))
        };
        to_i32(max_from)?;
        if let Some(c) = counts.iter().find(|&&c| c > max_from) {
            return Err(DistError::Exchange(format!(
                "{c} words for one rank, more than the {max_from} it expects"
            )));
        }
        let world = &self.world;
        let comm = self.p2p.get_or_insert_with(|| world.duplicate()).as_raw();
        let tag = (self.started % TAG_CYCLE) as i32;
        self.started += 1;
        // Room for max_from words from each other rank, zeroed pages that are faulted in
        // only where words arrive.
        let peers: Vec<usize> = (0..r).filter(|&s| s != me).collect();
        let mut ex = Box::new(P2p {
            requests: Vec::with_capacity(2 * peers.len()),
            recv: vec![0u64; peers.len() * max_from],
            own: Vec::new(),
            send,
            peers,
            max_from,
            rank: me,
            ranks: r,
            received: false,
        });
        // This rank's words to itself never go through MPI.
        let own_at: usize = counts[..me].iter().sum();
        ex.own = ex.send[own_at..own_at + counts[me]].to_vec();
        let datatype = u64::equivalent_datatype().as_raw();
        for (i, &s) in ex.peers.clone().iter().enumerate() {
            let buf = ex.recv[i * max_from..].as_mut_ptr();
            let mut req = null_request();
            // SAFETY: `buf` has room for max_from words (the slice starts at i·max_from of
            // peers·max_from); `ex.recv` is neither moved out nor dropped before this
            // request completes (`P2p::wait_recvs`, or `Drop`), and a Vec's heap buffer
            // stays put while the Box moves. `comm` is the live duplicate held by self.
            check(unsafe {
                ffi::MPI_Irecv(buf.cast(), max_from as i32, datatype, s as i32, tag, comm, &mut req)
            })?;
            ex.requests.push(req);
        }
        let mut at = 0;
        for (d, &c) in counts.iter().enumerate() {
            if d != me {
                let buf = ex.send[at..].as_ptr();
                let mut req = null_request();
                // SAFETY: `buf` points at `c` words of `ex.send` (the counts add up to its
                // length, checked above), which stays in place, unchanged, until this
                // request completes (`P2p::into_send_buffer`, or `Drop`).
                check(unsafe {
                    ffi::MPI_Isend(buf.cast(), c as i32, datatype, d as i32, tag, comm, &mut req)
                })?;
                ex.requests.push(req);
            }
            at += c;
        }
        Ok(ex)
    }
}

/// The requests of one started exchange: the receives (one per other rank, in rank
/// order), then the sends; and the buffers they use, owned until they complete.
struct P2p {
    requests: Vec<ffi::MPI_Request>,
    /// Room for `max_from` words from each of `peers`, one after the other.
    recv: Vec<u64>,
    /// The words this rank sends itself.
    own: Vec<u64>,
    send: Vec<u64>,
    peers: Vec<usize>,
    max_from: usize,
    rank: usize,
    ranks: usize,
    received: bool,
}

/// `MPI_REQUEST_NULL`.
fn null_request() -> ffi::MPI_Request {
    // SAFETY: reads an immutable handle constant that mpi-sys exports from the MPI library.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// An MPI return code as a result.
fn check(code: i32) -> Result<(), DistError> {
    if code == ffi::MPI_SUCCESS as i32 {
        Ok(())
    } else {
        Err(DistError::Exchange(format!("MPI error code {code}")))
    }
}

impl P2p {
    /// Waits for `requests[range]`, returning their statuses.
    fn wait(&mut self, range: std::ops::Range<usize>) -> Result<Vec<ffi::MPI_Status>, DistError> {
        let reqs = &mut self.requests[range];
        // SAFETY: MPI_Status is a plain C struct of integers, valid when zeroed.
        let mut statuses: Vec<ffi::MPI_Status> =
            (0..reqs.len()).map(|_| unsafe { std::mem::zeroed() }).collect();
        // SAFETY: `reqs` and `statuses` hold reqs.len() entries each; completed requests
        // are set to MPI_REQUEST_NULL by MPI, so waiting again is harmless.
        check(unsafe {
            ffi::MPI_Waitall(reqs.len() as i32, reqs.as_mut_ptr(), statuses.as_mut_ptr())
        })?;
        Ok(statuses)
    }
}

impl Started for P2p {
    fn received(&mut self) -> Result<(Vec<u64>, Vec<usize>), DistError> {
        if self.received {
            return Err(DistError::Exchange("exchange collected twice".into()));
        }
        let statuses = self.wait(0..self.peers.len())?;
        self.received = true;
        let datatype = u64::equivalent_datatype().as_raw();
        let mut from = vec![0usize; self.ranks];
        for (i, st) in statuses.iter().enumerate() {
            let mut c = 0i32;
            // SAFETY: `st` is the status MPI_Waitall filled for a completed receive.
            check(unsafe { ffi::MPI_Get_count(st, datatype, &mut c) })?;
            from[self.peers[i]] = usize::try_from(c)
                .ok()
                .filter(|&c| c <= self.max_from)
                .ok_or_else(|| DistError::Exchange(format!("a message of {c} words")))?;
        }
        let me = self.rank;
        from[me] = self.own.len();
        let total: usize = from.iter().sum();
        let room = |i: usize| i * self.max_from..i * self.max_from + from[self.peers[i]];
        let recv = if self.own.is_empty() {
            // The senders' words one after the other, moved down in place (the rooms are
            // max_from apart, so no word is overwritten before it moves).
            let mut at = 0;
            for i in 0..self.peers.len() {
                let r = room(i);
                if r.start != at {
                    self.recv.copy_within(r.clone(), at);
                }
                at += r.len();
            }
            let mut recv = std::mem::take(&mut self.recv);
            recv.truncate(total);
            recv.shrink_to_fit();
            recv
        } else {
            let mut recv = Vec::with_capacity(total);
            let mut i = 0;
            for s in 0..self.ranks {
                if s == me {
                    recv.extend_from_slice(&self.own);
                } else {
                    recv.extend_from_slice(&self.recv[room(i)]);
                    i += 1;
                }
            }
            self.recv = Vec::new();
            recv
        };
        Ok((recv, from))
    }

    fn into_send_buffer(mut self: Box<Self>) -> Result<Vec<u64>, DistError> {
        let n = self.requests.len();
        self.wait(0..n)?;
        Ok(std::mem::take(&mut self.send))
    }
}

impl Drop for P2p {
    /// Never frees a buffer MPI may still use: waits for whatever is outstanding (only on
    /// an error path, where every rank stops the same way).
    fn drop(&mut self) {
        let n = self.requests.len();
        let _ = self.wait(0..n);
    }
}

/// [`super::build_local_csr`] over `MPI_COMM_WORLD` (collective: every rank calls it with the same
/// arguments; `bounds` has one entry per rank plus one, see the
/// [module docs](super)). MPI must be initialised already.
pub fn build_local_csr_mpi(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
) -> Result<LocalCsr, DistError> {
    build_local_csr_mpi_with_stats(p, bounds, round_edges).map(|(l, _)| l)
}

/// [`build_local_csr_mpi`], also returning where this rank's time went.
pub fn build_local_csr_mpi_with_stats(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
) -> Result<(LocalCsr, BuildStats), DistError> {
    let mut ex = MpiExchange::world()?;
    build_local_csr_with_stats(p, bounds, round_edges, &mut ex)
}
