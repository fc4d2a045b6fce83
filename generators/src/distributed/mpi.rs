//! [`Exchange`] over MPI (feature `mpi`): `MPI_Alltoall` of the counts, then
//! `MPI_Alltoallv` of the words, on `MPI_COMM_WORLD`.
//!
//! MPI must already be initialised (by `skein::rack::init()` in a skein program, or by
//! the program itself); this module never initialises nor finalises it. Its communicator
//! handle is made and used on the calling thread.

use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{build_local_csr_with_stats, BuildStats, DistError, Exchange, LocalCsr};
use crate::kronecker::KroneckerParams;

/// [`Exchange`] over `MPI_COMM_WORLD`.
pub struct MpiExchange {
    world: SimpleCommunicator,
    rank: usize,
    ranks: usize,
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
        Ok(MpiExchange { world, rank, ranks })
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
