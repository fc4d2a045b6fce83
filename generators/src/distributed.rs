//! Kronecker graphs across ranks: each rank generates its share of the edges and ends with
//! the rows of its own vertices ([`LocalCsr`]); no rank ever holds the whole graph. Graph
//! files the same way: see [Edge sources](#edge-sources).
//!
//! # Vertex ranges and the partition
//!
//! Rank `r` of `R` owns the contiguous vertex range `[bounds[r], bounds[r + 1])`; `bounds`
//! has `R + 1` entries, starts at 0, never decreases and ends at `2^SCALE` (a rank may own
//! no vertex). The caller passes it, the same on every rank.
//!
//! **Invariant tying the ranks to the partition.** A job of `R` ranks with `W` workers
//! each partitions the vertices exactly as one process of `R·W` workers does:
//! `Partitioning::new(n, R·W)` (contiguous blocks, `skein_algorithms::partition`), rank `r`
//! holding parts `r·W .. (r+1)·W`. The caller therefore computes
//!
//! ```text
//! bounds[r] = partitioning.range(r * W).start   for r in 0..R
//! bounds[R] = n
//! ```
//!
//! so that `owner_rank(v) = partitioning.owner(v) / W`, and results never depend on how the
//! trustees are split over processes. This crate does not depend on the partition code; it
//! only needs the boundaries, and finds a vertex's rank by comparing it with them (a
//! branch-free count for up to 17 ranks, a binary search beyond).
//!
//! # Edges and rounds
//!
//! With `M = edgefactor · 2^SCALE` edges, rank `r` generates the edges
//! `[r·M/R, (r+1)·M/R)` ([`rank_edges`]; [`crate::kronecker::generate_range`], bit-identical to
//! the same edges of the whole list) in rounds of at most `B` edges (`round_edges`, default
//! [`DEFAULT_ROUND_EDGES`]). Every rank runs the same number of rounds,
//! `ceil(ceil(M/R) / B)` (a rank whose share is done takes part with nothing to send). In a
//! round, each non-self-loop edge `{u, v}` of weight `w` becomes the arcs `u -> v` and
//! `v -> u` (as [`crate::build`] does; self-loops are dropped, repeated edges kept), each
//! sent to the rank owning its source. An arc travels as one packed `u64` (the target in
//! the low `bits(n - 1)` bits, the source's local index above: [`DistError::ArcTooWide`]
//! when both do not fit, i.e. beyond SCALE 32 on few ranks) and its weight's 32 bits: the
//! block for one rank holds its `k` packed arcs, then their weights two to a word
//! (`k + ceil(k/2)` words, 12 bytes an arc). Routing takes two passes over the round's
//! edges: one finds both endpoints' ranks and counts the arcs for each rank, the other
//! writes every arc into its rank's block of one buffer, this rank's own block (last)
//! included, so the loop has no branch on the destination (unpredictable with few ranks);
//! the own block is then copied out of the reused buffer. One collective
//! [`Exchange::start`] per round moves the other blocks, and the rank collects them
//! ([`Started::received`]) only after starting the next round's: round `t`'s words travel
//! while round `t + 1` is generated and routed, and a rank may run up to a round ahead of
//! a slower one instead of waiting for it every round. Under MPI (the `mpi` submodule,
//! feature `mpi`) that is one `MPI_Isend` per other rank and one `MPI_Irecv` into room for
//! the largest possible block (`2B` arcs; pages that receive nothing are never touched),
//! with no all-to-all of the counts; the send buffer of round `t` is reused for round
//! `t + 2`, once its words have left. [`MemExchange`] exchanges when the round starts. A
//! rank's arcs for its own vertices never go through the exchange.
//!
//! Each rank sorts its own block and the blocks it receives, as they come, into 64
//! **buckets of consecutive local vertices** (`local source >>
//! shift`, a power of two of vertices each), one pass per block: a bucket holds its arcs'
//! packed words and their weights' bits (12 bytes an arc, as on the wire), block after
//! block, and the sender of each block; a received buffer is freed once sorted (the next
//! round's receive reuses its pages). After the last round, each rank builds its rows
//! bucket by bucket: the degrees of the bucket's vertices (a small range of the counters,
//! in cache), then, once every bucket is counted, the offsets, and a counting sort of each
//! bucket's arcs into its rows (one contiguous range of the row arrays), visiting the
//! blocks **sender by sender, and within a sender round by round**. Sender `s`'s edges
//! precede sender `s + 1`'s in edge-index order, and its rounds go up in edge index, so
//! each row's arcs come out in edge-index order: every row is *identical* (not only the
//! same multiset) to the single-process [`Csr`] row, whatever `R` and `B`. Each bucket is
//! freed as soon as its rows are written, so the rows of the next buckets can be faulted
//! in on the pages it gave back instead of fresh memory (see [Time](#time)): a bucket's
//! arrays are kept at least 33 MiB of address space from 2^20 arcs per rank (4.1 GiB
//! of address space for the 128 arrays), above glibc's largest threshold for mapping an
//! allocation on its own, since a heap chunk's pages would stay with the heap when it is
//! freed. Below 2^20 arcs per rank the buckets come from the heap, and the rows phase may
//! hold up to `24·A` (under 24 MiB).
//!
//! # Edge sources
//!
//! The rounds above take their edges from an [`EdgeSource`] ([`build_local_csr_from`];
//! [`build_local_csr`] uses [`source::KroneckerSource`]): each rank's share is a range of
//! the input's edge indices, rank `r`'s before rank `r + 1`'s, handed out in input order,
//! so the argument above gives rows identical to the one-process [`Csr`] of the same input.
//! Rounds run `ceil(largest share / B)` times on every rank. [`files`] has the graph
//! files: [`files::SkgSource`] (every rank reads `[r·M/R, (r+1)·M/R)` of a `.skg` file by
//! offset) and [`files::TextSource`] (rank 0 reads a text file, pipe or standard input and
//! hands out every edge; the other ranks' shares are empty), both refusing a bad file on
//! every rank with the one-process reader's message ([`source::build_from_source`] agrees
//! on it after the rounds). Memory per rank for a file: the formula below, plus the read
//! buffer (`8·B` bytes, `.skg`) and on rank 0 the checksum buffer (8 MiB, `.skg`) or the
//! text reader's chunks (at most four of [`files::TEXT_CHUNK`] edges, 20 MiB, and one
//! batch of text blocks being parsed).
//!
//! # Memory per rank
//!
//! With `A` the arcs of the rank's vertices (about `2M/R` minus self-loops on balanced
//! ranges), `A_j` those of its largest bucket (about `A/64` on scrambled vertex ids, as
//! the Kronecker generator's), `n_r` its vertices, `B` the round size and `K` the buckets
//! (64 at most), a rank holds at its peak ([`local_build_bytes`]) the larger of
//!
//! ```text
//! during the rounds:  12·A     arcs kept in the buckets (a packed word and the weight's
//!                              bits each: its own and those received)
//!                   + 92·B     the round buffers, reused: the generated edges (20 B
//!                              each), both endpoints' ranks (8 B), two send buffers
//!                              (one round's words leaving while the next round is
//!                              routed; at most 2 arcs of at most 16 B per edge each)
//!                   + 48·B     the words received in the two exchanges in flight, until
//!                              sorted into the buckets (about 24·B·(R−1)/R bytes a round
//!                              on balanced ranges; at most 24·B·(R−1))
//! building the rows:  12·A     arcs kept, shrinking by a bucket at a time
//!                   + 12·A_j   the rows of the bucket being written (targets u64 and
//!                              weights f32; those of the buckets before take the pages
//!                              the freed buckets gave back)
//!                   + 12·n_r   offsets and the scatter cursors (the cursors, like the
//!                              degree counters before them, take 4 bytes when the values
//!                              fit)
//! ```
//!
//! plus the process's fixed costs (code, MPI). The round buffers are freed before the rows
//! are allocated. Nothing is proportional to the whole graph's size. Besides the pages
//! written, the receives reserve address space: each exchange in flight (two at most)
//! posts, for each other rank, room for the most words one rank may send another in a
//! round (`3·B` words: `(R−1)·24·B` bytes, 24 MiB on 2 ranks, 1.5 GiB at `R` = 64 with
//! `B` = 2^20), and the buckets keep up to twice their arcs' room (Vec growth). At SCALE 22
//! on 2 ranks (`A` = 68.6 M arcs, `n_r` = 2 M) the formula gives 925 MiB during the rounds
//! (the peak), 821 MiB while building the rows; `VmHWM` measured 853-888 MiB on a rank
//! (0.30× the 2916-2920 MiB of the single-process generation and [`Csr`] build). Before
//! the buckets, the rank held all its kept arcs and all its rows at once (`24·A`,
//! 1607-1611 MiB, 0.55×). At SCALE 20 (`A` = 16-17.6 M) `VmHWM` measured 285-304 MiB;
//! at SCALE 24 on 2 ranks (`A` = 268.5 M, `n_r` = 8 M) the formula gives 3213 MiB
//! (rounds) and 3264 MiB (rows), and `VmHWM` measured 3247-3258 MiB, against 6248 MiB
//! before.
//!
//! The buckets and the rows are left in small (4 KiB) pages, where the [`Csr`] asks for
//! huge ones: on the virtual machines below, free memory in blocks of 2 MiB and more is
//! handed back to the host after a few seconds (free page reporting), while smaller free
//! blocks stay backed; a huge-page fault needs a whole free 2 MiB block, often one the
//! host must back again (2-3 s per GiB), and the small pages a freed bucket gives back
//! serve the small-page faults of the rows but not huge-page ones. With huge pages for
//! the buckets, a rank's system time in the construction was 1.6-2.5 s against 0.9-1.0 s
//! with small ones (three alternated runs each), and with huge pages for the rows 2.0-3.0
//! s against 1.0-1.2 s, the rest of a `skein sssp` run no slower.
//!
//! # Time
//!
//! Per rank, at SCALE 22 on 2 ranks of a 2-core machine shared with other jobs
//! (`examples/distgen.rs`, two runs alternated with the one-process build): generation
//! 1.24-1.26 s, routing 0.47-0.50 s, exchange 0.25-0.29 s, rows 0.99-1.02 s (2.97-3.03 s
//! in all; 1.92-1.99 s of user CPU and 0.92-0.99 s of system time per rank), while one
//! process generating the whole graph and building its [`Csr`] with 2 threads took
//! 5.30-5.88 s (4.40-4.47 s user, 6.05-7.06 s system). In alternated `skein sssp kron:22`
//! pairs (generation plus construction as the report counts them; load 3 to 5 from other
//! jobs), 2 ranks took 2.99-3.44 s (median 3.17) and one process 3.64-5.96 s (median
//! 4.06), 2 ranks faster in all 11 pairs; the ranks before the buckets took 3.82-4.29 s
//! in 7 of them.
//!
//! What separates the two is mostly page faults. On the virtual machines these figures
//! come from, memory freed to the host (free page reporting, about 2 s after the guest
//! frees it, in blocks of 2 MiB and more) costs 2-3 s per GiB when first touched again
//! (the host backs it), against about 0.1 s when the guest hands out pages freed just
//! before: one process touches its edge list (20 bytes an edge) and its [`Csr`] (24
//! bytes an edge), about 2.9 GiB over 2 threads, in huge pages; a rank its buckets (12
//! bytes an arc, about 0.8 GiB) and the round buffers, its rows reusing the pages of the
//! buckets freed before them. With huge pages for the buckets, a profile of a rank had
//! the kernel's page clearing under the bucket sort at 0.6-2 s and under the rows at
//! 0.05 s (0.3 s with 16 buckets, 1.3 s when the buckets' arrays came from the heap,
//! whose freed chunks stay with the process); with kept arcs and rows both whole, as
//! before the buckets, a rank faulted 1.6 GiB. The rest of a rank's CPU (one profile):
//! generation about 1.25 s (as one process's per thread), sorting into buckets 0.29 s,
//! the owner pass and the rows' counting sort 0.33 s, the degree counts 0.08 s, routing
//! 0.13 s. The exchange phase is mostly the receiving rank's copy out of the sender's
//! buffer and the faults of the receive room (Open MPI's single-copy path), and waiting
//! for the other rank: letting a rank run two rounds ahead instead of one, or giving the
//! receive room 33 MiB so that it never comes from the heap, did not change it. Before
//! the exchange overlapped the next round (a blocking all-to-all per round), a rank spent
//! about 0.35 s of CPU spinning in Open MPI's progress loop while waiting for the other.
//! Smaller rounds keep the round's buffers in cache but pay more synchronisation (2^16
//! edges, blocking: 512 rounds, 2 s more user CPU per rank in MPI waits): 2^20 stays the
//! default. Compare runs alternated in one session: the system time of identical runs
//! varies several-fold with what the host has backed.
//!
//! # Validation, roots and `nedge` on the ranks' rows
//!
//! The submodules work on the [`LocalCsr`] of every rank, collectively over an
//! [`Exchange`] ([`MemExchange`] in one process, `mpi::MpiExchange` under `mpirun`), and
//! give every rank the same answer as the single-process code on the whole graph:
//!
//! - [`roots`]: the Graph500 search roots ([`roots::search_roots_distributed`]) and the
//!   per-root component edge counts behind the reference's `nedge` statistics
//!   ([`roots::component_edge_counts`]);
//! - [`validate`]: Graph500 validation of a BFS or SSSP result held as one slice per rank
//!   ([`validate::validate_bfs_distributed`], [`validate::validate_sssp_distributed`]);
//!   its module docs say what `skein run` calls;
//! - [`collective`]: the building blocks (vertex layout, all-reduce, fetching values from
//!   owners, reachability in bounded rounds).
//!
//! A distributed run therefore does, on every rank: `build_local_csr` (or
//! `mpi::build_local_csr_mpi`); `search_roots_distributed(&p, &g, 64, &mut ex)`; the
//! searches; for each root `validate_*_distributed(&g, root, &values, &parent,
//! DEFAULT_VALIDATE_ROUND, &mut ex)`, whose `teps_edges` is the TEPS edge count; and once
//! `component_edge_counts(&g, &roots, DEFAULT_VALIDATE_ROUND, &mut ex)` for the `nedge`
//! statistics the comparison with the Graph500 reference checks.
//!
//! # Unsafe code
//!
//! Prefetch hints (`_mm_prefetch` on addresses taken from references), which never fault
//! nor change memory, and setting the length of a bucket's arrays over the elements just
//! written into their spare capacity; every index written is bounds-checked.

use std::ops::Range;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Instant;

use crate::graph::{Csr, VertexId};
use crate::kronecker::{self, KroneckerParams};
use crate::memory::{self, MemoryError};

pub mod analytics;
pub mod collective;
pub mod files;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod roots;
pub mod source;
pub mod validate;

pub use source::EdgeSource;

/// Default round size `B`: 2^20 edges, so the round buffers take at most 92 MiB.
pub const DEFAULT_ROUND_EDGES: u64 = 1 << 20;

/// Most words (`u64`) an arc takes on the wire: a block of `k` arcs takes `k + ceil(k / 2)`
/// words (the packed arcs, then the weights two to a word), at most 2 per arc.
const WORDS_PER_ARC: usize = 2;

/// Why a distributed construction refused its arguments or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DistError {
    /// The Kronecker parameters are out of range.
    #[error(transparent)]
    Params(#[from] kronecker::ParamError),
    /// The rank boundaries are not `R + 1` non-decreasing entries from 0 to `n`.
    #[error("rank boundaries {bounds:?}: {why} (expected {ranks} + 1 entries from 0 to {num_vertices}, never decreasing)")]
    Bounds {
        /// The boundaries given.
        bounds: Vec<u64>,
        /// Number of ranks.
        ranks: usize,
        /// Vertex count of the graph.
        num_vertices: u64,
        /// What is wrong.
        why: &'static str,
    },
    /// A rank would own 2^32 vertices or more (local indices travel as `u32`).
    #[error(
        "rank {rank} would own {vertices} vertices; at most 2^32 - 1 per rank: use more ranks"
    )]
    RankTooLarge {
        /// The rank.
        rank: usize,
        /// Its vertex count.
        vertices: u64,
    },
    /// The round size is 0, or one round could exceed what the exchange moves at once.
    #[error(
        "round size of {round_edges} edges is not supported with {ranks} ranks: it must be at \
         least 1 and at most {max} (a round's exchange is limited to {max_words} words)"
    )]
    RoundSize {
        /// The round size asked for.
        round_edges: u64,
        /// Number of ranks.
        ranks: usize,
        /// Largest supported round size.
        max: u64,
        /// Largest exchange, in `u64` words.
        max_words: u64,
    },
    /// The exchange failed (MPI not initialised, a simulated rank gone, ...).
    #[error("exchange between ranks failed: {0}")]
    Exchange(String),
    /// An arc's target and local source do not fit in one `u64` together.
    #[error(
        "the graph's vertex ids take {target_bits} bits and a rank's local indices \
         {source_bits}: together more than 64, use more ranks"
    )]
    ArcTooWide {
        /// Bits of the largest vertex id.
        target_bits: u32,
        /// Bits of the largest local index.
        source_bits: u32,
    },
    /// The rank's rows would not fit in the available memory.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The input (a graph file) was refused: the same message on every rank
    /// ([`source::agree`]), e.g. `g.skg: checksum mismatch: ...`.
    #[error("{0}")]
    Input(String),
}

/// A collective all-to-all between the ranks of a job.
///
/// Every rank must call [`Exchange::exchange`] the same number of times, in the same order.
pub trait Exchange {
    /// This rank, `0..ranks()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn ranks(&self) -> usize;
    /// Most words one rank may receive in one exchange (`usize::MAX` when unbounded).
    fn max_words(&self) -> u64 {
        u64::MAX
    }
    /// Sends `counts[d]` words of `send` to rank `d` (rank 0's first, then rank 1's, ...)
    /// and returns the words received, rank 0's first, with their count from each rank.
    fn exchange(
        &mut self,
        send: &[u64],
        counts: &[usize],
    ) -> Result<(Vec<u64>, Vec<usize>), DistError>;

    /// Starts the exchange of `send` (as [`Exchange::exchange`]) and returns at once where
    /// an implementation can: the words arrive while the caller works on, and
    /// [`Started::received`] collects them. `max_from` bounds the words any one rank sends
    /// this one in this exchange. Collective like `exchange`: every rank starts the same
    /// exchanges in the same order, and may start the next before collecting this one.
    ///
    /// The default runs [`Exchange::exchange`] now.
    fn start(
        &mut self,
        send: Vec<u64>,
        counts: &[usize],
        max_from: usize,
    ) -> Result<Box<dyn Started>, DistError> {
        let _ = max_from;
        let got = self.exchange(&send, counts)?;
        Ok(Box::new(Finished { got: Some(got), send }))
    }
}

/// An exchange begun with [`Exchange::start`].
pub trait Started {
    /// Waits for the words sent to this rank and returns them as [`Exchange::exchange`]
    /// does (an error when called twice).
    fn received(&mut self) -> Result<(Vec<u64>, Vec<usize>), DistError>;
    /// Waits until this rank's words have left and returns the send buffer, for reuse.
    fn into_send_buffer(self: Box<Self>) -> Result<Vec<u64>, DistError>;
}

/// An exchange that was done when it started (the default [`Exchange::start`]).
struct Finished {
    got: Option<(Vec<u64>, Vec<usize>)>,
    send: Vec<u64>,
}

impl Started for Finished {
    fn received(&mut self) -> Result<(Vec<u64>, Vec<usize>), DistError> {
        self.got.take().ok_or_else(|| DistError::Exchange("exchange collected twice".into()))
    }

    fn into_send_buffer(self: Box<Self>) -> Result<Vec<u64>, DistError> {
        Ok(self.send)
    }
}

/// The rows of the vertices `[first, last)` of a graph of `num_vertices` vertices, with
/// global target ids and weights: the rank-local part of a [`Csr`], with the same arcs in
/// the same order (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalCsr {
    num_vertices: u64,
    first: u64,
    /// `offsets[i]..offsets[i + 1]` are the arcs of vertex `first + i`.
    offsets: Vec<u64>,
    targets: Vec<VertexId>,
    weights: Vec<f32>,
}

impl LocalCsr {
    /// The rows `range` of `csr` (copied): what a rank owning `range` holds.
    ///
    /// # Panics
    /// If `range` is not inside `0..csr.num_vertices()`.
    pub fn from_csr(csr: &Csr, range: Range<u64>) -> LocalCsr {
        assert!(range.start <= range.end && range.end <= csr.num_vertices(), "bad range");
        let o = csr.offsets();
        let (a, b) = (o[range.start as usize] as usize, o[range.end as usize] as usize);
        LocalCsr {
            num_vertices: csr.num_vertices(),
            first: range.start,
            offsets: o[range.start as usize..=range.end as usize]
                .iter()
                .map(|x| x - a as u64)
                .collect(),
            targets: csr.targets()[a..b].to_vec(),
            weights: csr.weights()[a..b].to_vec(),
        }
    }

    /// Vertex count of the whole graph.
    pub fn num_vertices(&self) -> u64 {
        self.num_vertices
    }

    /// The global ids of the vertices held here.
    pub fn range(&self) -> Range<u64> {
        self.first..self.first + (self.offsets.len() as u64 - 1)
    }

    /// Number of arcs held (of the vertices in [`LocalCsr::range`]).
    pub fn num_arcs(&self) -> u64 {
        self.targets.len() as u64
    }

    /// Degree of the global vertex `v` (in [`LocalCsr::range`]).
    #[inline]
    pub fn degree(&self, v: VertexId) -> u64 {
        let (a, b) = self.span(v);
        (b - a) as u64
    }

    /// Targets of the arcs of the global vertex `v` (in [`LocalCsr::range`]).
    #[inline]
    pub fn neighbors(&self, v: VertexId) -> &[VertexId] {
        let (a, b) = self.span(v);
        &self.targets[a..b]
    }

    /// Weights of the arcs of `v`, parallel to [`LocalCsr::neighbors`].
    #[inline]
    pub fn neighbor_weights(&self, v: VertexId) -> &[f32] {
        let (a, b) = self.span(v);
        &self.weights[a..b]
    }

    /// `(target, weight)` of every arc of `v`.
    pub fn arcs(&self, v: VertexId) -> impl Iterator<Item = (VertexId, f32)> + '_ {
        self.neighbors(v).iter().copied().zip(self.neighbor_weights(v).iter().copied())
    }

    /// Local offsets (`range().len() + 1` entries, from 0).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// All targets, row after row.
    pub fn targets(&self) -> &[VertexId] {
        &self.targets
    }

    /// All weights, parallel to [`LocalCsr::targets`].
    pub fn weights(&self) -> &[f32] {
        &self.weights
    }

    /// Bytes held by the arrays.
    pub fn heap_bytes(&self) -> u64 {
        (self.offsets.len() * 8 + self.targets.len() * 8 + self.weights.len() * 4) as u64
    }

    /// An order-independent checksum of the arcs held: the wrapping sum over arcs of a mix
    /// of (source, target, weight bits). The sums of the ranks' checksums equals
    /// [`csr_checksum`] of the single-process CSR.
    pub fn checksum(&self) -> u64 {
        let mut sum = 0u64;
        for (i, w) in self.offsets.windows(2).enumerate() {
            let src = self.first + i as u64;
            for k in w[0] as usize..w[1] as usize {
                sum = sum.wrapping_add(arc_hash(src, self.targets[k], self.weights[k]));
            }
        }
        sum
    }

    fn span(&self, v: VertexId) -> (usize, usize) {
        let i = (v - self.first) as usize;
        (self.offsets[i] as usize, self.offsets[i + 1] as usize)
    }
}

/// The checksum of [`LocalCsr::checksum`] over all rows of `csr`.
pub fn csr_checksum(csr: &Csr) -> u64 {
    let mut sum = 0u64;
    for v in 0..csr.num_vertices() {
        for (t, w) in csr.arcs(v) {
            sum = sum.wrapping_add(arc_hash(v, t, w));
        }
    }
    sum
}

/// A mix of one arc (splitmix64 finaliser over the three fields).
fn arc_hash(src: u64, dst: u64, w: f32) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    mix(mix(mix(src) ^ dst) ^ u64::from(w.to_bits()))
}

/// The edges rank `rank` of `ranks` generates: `[rank·M/R, (rank+1)·M/R)`.
pub fn rank_edges(num_edges: u64, rank: usize, ranks: usize) -> Range<u64> {
    let at = |r: usize| (u128::from(num_edges) * r as u128 / ranks as u128) as u64;
    at(rank)..at(rank + 1)
}

/// Number of rounds of `round_edges` edges every rank runs (the largest share, rounded up).
pub fn rounds(num_edges: u64, ranks: usize, round_edges: u64) -> u64 {
    num_edges.div_ceil(ranks as u64).div_ceil(round_edges.max(1))
}

/// Peak bytes a rank holds while building its rows (module docs): `local_arcs` arcs,
/// `local_vertices` vertices, rounds of `round_edges` edges; the process's fixed costs
/// aside. The largest bucket is taken as twice an even share of the arcs.
pub fn local_build_bytes(local_vertices: u64, local_arcs: u64, round_edges: u64) -> u128 {
    let (a, n, b) = (u128::from(local_arcs), u128::from(local_vertices), u128::from(round_edges));
    let k = KEPT_BUCKETS as u128;
    let rounds = 12 * a + 140 * b;
    let rows = 12 * a + 24 * a.div_ceil(k) + 12 * n + 8;
    rounds.max(rows)
}

/// Checks the boundaries for `ranks` ranks over `num_vertices` vertices.
pub fn check_bounds(bounds: &[u64], ranks: usize, num_vertices: u64) -> Result<(), DistError> {
    let err = |why| DistError::Bounds { bounds: bounds.to_vec(), ranks, num_vertices, why };
    if ranks == 0 {
        return Err(err("no ranks"));
    }
    if bounds.len() != ranks + 1 {
        return Err(err("wrong number of entries"));
    }
    if bounds[0] != 0 || bounds[ranks] != num_vertices {
        return Err(err("must start at 0 and end at the vertex count"));
    }
    if bounds.windows(2).any(|w| w[0] > w[1]) {
        return Err(err("decreasing entries"));
    }
    if let Some(r) = (0..ranks).find(|&r| bounds[r + 1] - bounds[r] > u64::from(u32::MAX)) {
        return Err(DistError::RankTooLarge { rank: r, vertices: bounds[r + 1] - bounds[r] });
    }
    Ok(())
}

/// The rank owning `v` under `bounds` (checked by [`check_bounds`], `v < n`).
#[inline]
fn owner_rank(bounds: &[u64], v: u64) -> usize {
    let inner = &bounds[1..bounds.len() - 1];
    if inner.len() <= 16 {
        // Branch-free for few ranks (the comparisons with random ids are unpredictable).
        inner.iter().map(|&b| usize::from(b <= v)).sum()
    } else {
        bounds.partition_point(|&b| b <= v) - 1
    }
}

/// Builds this rank's rows of the Kronecker graph `p` (module docs): collective over `ex`;
/// every rank passes the same `p`, `bounds` and `round_edges`, so every rank refuses the
/// same bad arguments before any exchange.
pub fn build_local_csr<E: Exchange + ?Sized>(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
    ex: &mut E,
) -> Result<LocalCsr, DistError> {
    build_local_csr_with_stats(p, bounds, round_edges, ex).map(|(l, _)| l)
}

/// Where a rank's construction spent its time (seconds, wall clock of this rank).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BuildStats {
    /// Rounds run.
    pub rounds: u64,
    /// Generating the rank's edges.
    pub generate_s: f64,
    /// Routing arcs into the send buffers, and counting the degrees of the rank's own arcs.
    pub route_s: f64,
    /// In the exchanges (waiting for the slowest rank included).
    pub exchange_s: f64,
    /// Counting the degrees of the arcs received, and building the rows after the rounds.
    pub rows_s: f64,
}

/// [`build_local_csr`], also returning where the time went.
pub fn build_local_csr_with_stats<E: Exchange + ?Sized>(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
    ex: &mut E,
) -> Result<(LocalCsr, BuildStats), DistError> {
    build_local_csr_with_progress(p, bounds, round_edges, ex, &|_| {})
}

/// [`build_local_csr_with_stats`], calling `progress(done)` after each round with the
/// number of this rank's edges generated so far (out of [`rank_edges`]'s share), e.g. for
/// a progress bar on rank 0.
pub fn build_local_csr_with_progress<E: Exchange + ?Sized>(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
    ex: &mut E,
    progress: &dyn Fn(u64),
) -> Result<(LocalCsr, BuildStats), DistError> {
    p.check()?;
    build_local_csr_from(&mut source::KroneckerSource(*p), bounds, round_edges, ex, progress)
}

/// [`build_local_csr_with_progress`] for the edges of any [`EdgeSource`] (a Kronecker
/// range, a range of a graph file): rank `r` routes the edges of `source.share(r, R)`,
/// in rounds of at most `round_edges`. Collective. A source that fails mid-way hands out
/// no more edges and keeps its error for [`EdgeSource::refusal`], which the caller agrees on
/// collectively afterwards ([`source::build_from_source`] does both), so that no rank
/// leaves the exchanges early.
pub fn build_local_csr_from<S: EdgeSource + ?Sized, E: Exchange + ?Sized>(
    source: &mut S,
    bounds: &[u64],
    round_edges: u64,
    ex: &mut E,
    progress: &dyn Fn(u64),
) -> Result<(LocalCsr, BuildStats), DistError> {
    let mut stats = BuildStats::default();
    let mut clock = Instant::now();
    let mut lap = |acc: &mut f64| {
        let now = Instant::now();
        *acc += (now - clock).as_secs_f64();
        clock = now;
    };
    let (rank, ranks) = (ex.rank(), ex.ranks());
    let n = source.num_vertices();
    check_bounds(bounds, ranks, n)?;
    // A round sends at most 2 arcs per edge to any rank: each rank receives at most
    // ranks · 2B arcs of WORDS_PER_ARC words.
    let per_edge = (ranks * 2 * WORDS_PER_ARC) as u64;
    let max = ex.max_words() / per_edge;
    if round_edges == 0 || round_edges > max {
        return Err(DistError::RoundSize { round_edges, ranks, max, max_words: ex.max_words() });
    }

    let first = bounds[rank];
    let local_n = (bounds[rank + 1] - first) as usize;
    let pack = ArcPacking::new(bounds)?;
    let share = source.share(rank, ranks);
    // The arcs of this rank's vertices, its own and those received, in buckets of
    // consecutive vertices (module docs).
    let mut kept = Kept::new(local_n, 2 * (share.end - share.start));
    let mut arcs_to = vec![0usize; ranks];
    let mut counts = vec![0usize; ranks];
    let mut pos = vec![0usize; ranks];
    let mut wpos = vec![0usize; ranks];
    // Buffers reused from round to round: the generated edges, both endpoints' ranks, the
    // words for the other ranks.
    let b = round_edges.min(share.end - share.start) as usize;
    let (mut gsrc, mut gdst, mut gw) = (vec![0u64; b], vec![0u64; b], vec![0f32; b]);
    let mut owners: Vec<(u32, u32)> = vec![(0, 0); b];
    // Send buffers: at most two exist, one round's words leaving while the next round's
    // are routed (module docs).
    let mut free: Vec<Vec<u64>> = Vec::new();
    let mut in_flight: Option<Box<dyn Started>> = None;
    let mut leaving: Option<Box<dyn Started>> = None;
    let shape = (rank, ranks, local_n);
    // Most words one rank sends another in a round: a block of 2 arcs per edge of a round
    // of the largest share (a text file's edges are all rank 0's).
    let most = (0..ranks).map(|r| source.share(r, ranks)).map(|s| s.end - s.start).max();
    let max_from = block_words(2 * round_edges.min(most.unwrap_or(0)) as usize);
    for t in 0..source::source_rounds(source, ranks, round_edges) {
        let lo = share.start.saturating_add(t * round_edges).min(share.end);
        let len = (lo.saturating_add(round_edges).min(share.end) - lo) as usize;
        lap(&mut stats.rows_s);
        let got = source.fill(lo, &mut gsrc[..len], &mut gdst[..len], &mut gw[..len]).min(len);
        let (src, dst, w) = (&mut gsrc[..got], &mut gdst[..got], &mut gw[..got]);
        lap(&mut stats.generate_s);
        // A free send buffer: round t - 2's, once its words have left.
        if let Some(old) = leaving.take() {
            free.push(old.into_send_buffer()?);
        }
        lap(&mut stats.exchange_s);
        arcs_to.iter_mut().for_each(|c| *c = 0);
        for ((&u, &v), o) in src.iter().zip(dst.iter()).zip(owners.iter_mut()) {
            if u != v {
                let (ou, ov) = (owner_rank(bounds, u), owner_rank(bounds, v));
                arcs_to[ou] += 1;
                arcs_to[ov] += 1;
                *o = (ou as u32, ov as u32);
            }
        }
        // The other ranks' blocks, by rank, then this rank's own (never sent): each block
        // holds its `k` packed arcs, then their weights two to a word.
        let own = arcs_to[rank];
        let mut at = 0;
        for d in (0..ranks).filter(|&d| d != rank).chain([rank]) {
            pos[d] = at;
            wpos[d] = 2 * (at + arcs_to[d]);
            counts[d] = if d == rank { 0 } else { block_words(arcs_to[d]) };
            at += block_words(arcs_to[d]);
        }
        let mut send = free.pop().unwrap_or_default();
        send.clear();
        send.resize(at, 0);
        route(&pack, bounds, src, dst, w, &owners, &mut pos, &mut wpos, &mut send);
        // This rank's block, from the end of the send buffer into the buckets.
        let own_at = at - block_words(own);
        kept.add(rank, &send[own_at..], own, &pack);
        send.truncate(own_at);
        lap(&mut stats.route_s);
        // Round t's words leave while round t - 1's are collected, and arrive while round
        // t + 1 is generated and routed.
        let started = ex.start(send, &counts, max_from)?;
        lap(&mut stats.exchange_s);
        if let Some(mut prev) = in_flight.replace(started) {
            let got = prev.received()?;
            lap(&mut stats.exchange_s);
            collect(got, &mut kept, t - 1, shape, &pack)?;
            leaving = Some(prev);
        }
        stats.rounds += 1;
        progress(lo + len as u64 - share.start);
    }
    if let Some(mut last) = in_flight.take() {
        let t = stats.rounds - 1;
        lap(&mut stats.rows_s);
        let got = last.received()?;
        lap(&mut stats.exchange_s);
        collect(got, &mut kept, t, shape, &pack)?;
        lap(&mut stats.rows_s);
        last.into_send_buffer()?;
    }
    if let Some(old) = leaving.take() {
        old.into_send_buffer()?;
    }
    lap(&mut stats.exchange_s);
    drop((gsrc, gdst, gw, owners, free));

    // The degrees, bucket by bucket (the counts a bucket increments are those of its own
    // vertices: a small range of the array, in cache), then the offsets and the counting
    // sort: sender-major, then rounds (module docs: the rows come out in edge-index
    // order). Counters of 4 bytes when no count can reach 2^32.
    let mut degree = if kept.largest() <= u32::MAX as usize {
        Counts::Narrow(vec![0u32; local_n + 1])
    } else {
        Counts::Wide(vec![0u64; local_n + 1])
    };
    for bucket in &kept.buckets {
        degree.count(&pack, &bucket.words);
    }
    let mut offsets = vec![0u64; local_n + 1];
    let mut total = 0u64;
    for (i, o) in offsets.iter_mut().enumerate() {
        total += degree.get(i);
        *o = total;
    }
    drop(degree);
    let arcs = total as usize;
    // The rows' pages are faulted bucket by bucket, as the buckets before are freed.
    memory::check_fits(12 * kept.largest() as u128 + 8 * local_n as u128, || {
        format!("the rows of rank {rank} ({local_n} vertices, {total} arcs)")
    })?;
    // Small pages, as the buckets' (module docs), so that they reuse theirs.
    let mut targets: Vec<u64> = vec![0; arcs];
    let mut weights: Vec<f32> = vec![0.0; arcs];
    // Scatter cursors of 4 bytes when every position fits.
    let mut cursor = if total <= u64::from(u32::MAX) {
        Counts::Narrow(offsets[..local_n].iter().map(|&o| o as u32).collect())
    } else {
        Counts::Wide(offsets[..local_n].to_vec())
    };
    // Bucket after bucket (its rows are one contiguous range of the arrays), each freed
    // as soon as written, so that the next bucket's rows reuse its pages.
    for bucket in kept.buckets {
        for s in 0..ranks {
            for (_, seg) in bucket.segs.iter().filter(|x| x.0 == s) {
                let (words, wts) = (&bucket.words[seg.clone()], &bucket.weights[seg.clone()]);
                cursor.scatter(&pack, words, |i| wts[i], &mut targets, &mut weights);
            }
        }
    }
    lap(&mut stats.rows_s);
    Ok((LocalCsr { num_vertices: n, first, offsets, targets, weights }, stats))
}

/// Most buckets of kept arcs per rank (module docs): the rows' pages faulted before the
/// first bucket is freed are about `1/KEPT_BUCKETS` of them.
const KEPT_BUCKETS: usize = 64;

/// Least capacity of a bucket's arrays, in bytes: above the largest threshold from
/// which glibc's `malloc` maps an allocation on its own (32 MiB on 64-bit targets), so
/// that a bucket's pages go back to the system when it is dropped, for the rows to reuse
/// (a heap chunk's would stay in the heap). Only the pages written count: the rest of
/// the room is address space.
const KEPT_MIN_BYTES: usize = 33 << 20;

/// Arcs a rank expects from which its buckets' arrays take [`KEPT_MIN_BYTES`] each
/// (address space: 4.1 GiB for 64 buckets).
const KEPT_MAPPED_ARCS: u64 = 1 << 20;

/// The arcs a rank keeps until its rows are built: its own and those received, sorted as
/// they come into buckets of consecutive local sources (`source >> shift`), each holding
/// its arcs' packed words and weight bits, block after block, in arrival order.
struct Kept {
    shift: u32,
    /// Least capacity of a bucket's arrays, in bytes: [`KEPT_MIN_BYTES`] when the rank
    /// expects [`KEPT_MAPPED_ARCS`] arcs or more, else 0 (a small graph's buckets stay
    /// small, in the heap).
    least_bytes: usize,
    buckets: Vec<Bucket>,
}

/// One bucket of [`Kept`].
#[derive(Default)]
struct Bucket {
    /// Packed arcs.
    words: Vec<u64>,
    /// Their weights' bits.
    weights: Vec<u32>,
    /// `(sender, range of words)` of each block added, in arrival order: a sender's
    /// blocks come round after round.
    segs: Vec<(usize, Range<usize>)>,
}

impl Kept {
    /// Empty buckets for `local_n` local vertices: at most [`KEPT_BUCKETS`], of a power of
    /// two of vertices each; `expected_arcs` is about how many arcs will come (the
    /// rank's share of the edges, twice).
    fn new(local_n: usize, expected_arcs: u64) -> Kept {
        let bits = usize::BITS - local_n.saturating_sub(1).leading_zeros();
        let shift = bits.saturating_sub(KEPT_BUCKETS.trailing_zeros());
        let nb = if local_n == 0 { 0 } else { ((local_n - 1) >> shift) + 1 };
        let buckets = (0..nb).map(|_| Bucket::default()).collect();
        let least_bytes = if expected_arcs >= KEPT_MAPPED_ARCS { KEPT_MIN_BYTES } else { 0 };
        Kept { shift, least_bytes, buckets }
    }

    /// Arcs in the largest bucket.
    fn largest(&self) -> usize {
        self.buckets.iter().map(|b| b.words.len()).max().unwrap_or(0)
    }

    /// Adds the `k` arcs of `block` (packed arcs then weights, as on the wire; every
    /// source checked below the rank's vertex count) that `sender` routed (its blocks in
    /// the order of its rounds).
    fn add(&mut self, sender: usize, block: &[u64], k: usize, pack: &ArcPacking) {
        if k == 0 {
            return;
        }
        let (words, wts) = block.split_at(k);
        // Room for all `k` arcs in every bucket (address space: only what is written is
        // faulted in), so that one pass sorts them. Small pages, not huge ones (module
        // docs: faulted in faster here, and the rows reuse them).
        let least_bytes = self.least_bytes;
        for b in &mut self.buckets {
            let (cap_w, cap_t) = (b.words.capacity(), b.weights.capacity());
            // At least KEPT_MIN_BYTES each on a big graph: allocations that big are mapped
            // on their own (and grown by remapping), never carved from the heap, so
            // dropping the bucket returns its pages to the system at once (module docs).
            let least = |cap: usize, bytes: usize| if cap == 0 { k.max(bytes) } else { k };
            b.words.reserve(least(cap_w, least_bytes / 8));
            b.weights.reserve(least(cap_t, least_bytes / 4));
        }
        let shift = self.shift;
        let mut outs: Vec<_> = self
            .buckets
            .iter_mut()
            .map(|b| (b.words.spare_capacity_mut(), b.weights.spare_capacity_mut(), 0usize))
            .collect();
        for (i, &w) in words.iter().enumerate() {
            let (ow, ot, at) = &mut outs[(pack.source(w) >> shift) as usize];
            ow[*at].write(w);
            ot[*at].write((wts[i / 2] >> (32 * (i & 1))) as u32);
            *at += 1;
        }
        let written: Vec<usize> = outs.into_iter().map(|o| o.2).collect();
        for (b, c) in self.buckets.iter_mut().zip(written) {
            if c == 0 {
                continue;
            }
            let at = b.words.len();
            // SAFETY: the loop above initialised the first `c` elements of both spare
            // capacities (indices 0..c, each write bounds-checked against them).
            unsafe {
                b.words.set_len(at + c);
                b.weights.set_len(at + c);
            }
            b.segs.push((sender, at..at + c));
        }
    }
}

/// Adds round `t`'s words `(recv, from)` (as [`Exchange::exchange`] returns them) to
/// `kept`, checked (the counts add up, none from this rank `rank`, whole arcs, sources
/// below `local_n`); `recv` is freed.
fn collect(
    (recv, from): (Vec<u64>, Vec<usize>),
    kept: &mut Kept,
    t: u64,
    (rank, ranks, local_n): (usize, usize, usize),
    pack: &ArcPacking,
) -> Result<(), DistError> {
    if from.len() != ranks || from.iter().sum::<usize>() != recv.len() || from[rank] != 0 {
        return Err(DistError::Exchange(format!(
            "round {t}: {} words received, counts {from:?}",
            recv.len()
        )));
    }
    let mut at = 0;
    for (s, &c) in from.iter().enumerate() {
        let k = block_arcs(c).ok_or_else(|| {
            DistError::Exchange(format!("round {t}: a block of {c} words holds no whole arcs"))
        })?;
        let words = &recv[at..at + k];
        if let Some(&w) = words.iter().find(|&&w| pack.source(w) >= local_n as u64) {
            return Err(DistError::Exchange(format!(
                "round {t}: an arc for local vertex {}, but rank {rank} owns {local_n}",
                pack.source(w)
            )));
        }
        kept.add(s, &recv[at..at + c], k, pack);
        at += c;
    }
    Ok(())
}

/// Writes the arcs of one round into the blocks of `out` (module docs): for each
/// non-self-loop edge `k`, the arcs `src[k] -> dst[k]` and `dst[k] -> src[k]` with the
/// weight bits of `w[k]`, to the blocks of the ranks `owners[k]` owning their sources.
/// `pos[r]` is the next word of rank `r`'s block, `wpos[r]` its next weight's half-word
/// (both advance); `out` is zeroed where the weights go. One pass, without a branch on
/// the destination (a rank's own arcs are a block like the others').
#[allow(clippy::too_many_arguments)]
fn route(
    pack: &ArcPacking,
    bounds: &[u64],
    src: &[u64],
    dst: &[u64],
    w: &[f32],
    owners: &[(u32, u32)],
    pos: &mut [usize],
    wpos: &mut [usize],
    out: &mut [u64],
) {
    for (((&u, &v), &wt), &(ou, ov)) in src.iter().zip(dst).zip(w).zip(owners) {
        if u == v {
            continue;
        }
        let wbits = u64::from(wt.to_bits());
        for (s, d, r) in [(u, v, ou as usize), (v, u, ov as usize)] {
            out[pos[r]] = pack.pack(d, s - bounds[r]);
            pos[r] += 1;
            let h = wpos[r];
            wpos[r] += 1;
            out[h / 2] |= wbits << (32 * (h & 1));
        }
    }
}

/// Words of a block of `k` arcs on the wire: the packed arcs, then the weights two to a word.
fn block_words(k: usize) -> usize {
    k + k.div_ceil(2)
}

/// The number of arcs in a block of `c` words (`None` when no count of arcs gives `c`).
fn block_arcs(c: usize) -> Option<usize> {
    let k = 2 * c / 3;
    (block_words(k) == c).then_some(k)
}

/// How an arc's target (global id) and source (its index on the source's rank) share
/// one `u64`: the target in the low `shift` bits, the local source
/// above (module docs).
#[derive(Debug, Clone, Copy)]
struct ArcPacking {
    shift: u32,
    mask: u64,
}

impl ArcPacking {
    /// The packing for `bounds` (checked): targets need `bits(n - 1)` bits, local sources
    /// `bits(max vertices of a rank - 1)`; an error when both do not fit in 64.
    fn new(bounds: &[u64]) -> Result<ArcPacking, DistError> {
        let bits = |x: u64| 64 - x.leading_zeros();
        let n = bounds[bounds.len() - 1];
        let widest = bounds.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let (tbits, sbits) = (bits(n.saturating_sub(1)), bits(widest.saturating_sub(1)));
        if tbits + sbits > 64 {
            return Err(DistError::ArcTooWide { target_bits: tbits, source_bits: sbits });
        }
        let mask = if tbits == 64 { u64::MAX } else { (1u64 << tbits) - 1 };
        Ok(ArcPacking { shift: tbits, mask })
    }

    #[inline(always)]
    fn pack(&self, target: u64, local_source: u64) -> u64 {
        target | local_source.checked_shl(self.shift).unwrap_or(0)
    }

    #[inline(always)]
    fn source(&self, word: u64) -> u64 {
        word.checked_shr(self.shift).unwrap_or(0)
    }

    #[inline(always)]
    fn target(&self, word: u64) -> u64 {
        word & self.mask
    }
}

/// Per-vertex counters or cursors, 4 bytes each when the values are known to fit (the
/// arrays are accessed at random: smaller ones miss the cache less).
enum Counts {
    Narrow(Vec<u32>),
    Wide(Vec<u64>),
}

/// A counter or cursor type of [`Counts`].
trait Counter: Copy {
    fn get(self) -> u64;
    fn bump(&mut self);
}

impl Counter for u32 {
    #[inline(always)]
    fn get(self) -> u64 {
        u64::from(self)
    }
    #[inline(always)]
    fn bump(&mut self) {
        *self += 1;
    }
}

impl Counter for u64 {
    #[inline(always)]
    fn get(self) -> u64 {
        self
    }
    #[inline(always)]
    fn bump(&mut self) {
        *self += 1;
    }
}

impl Counts {
    fn get(&self, i: usize) -> u64 {
        match self {
            Counts::Narrow(c) => u64::from(c[i]),
            Counts::Wide(c) => c[i],
        }
    }

    /// Counts the arcs `words` at their sources: `self[source + 1] += 1`.
    fn count(&mut self, pack: &ArcPacking, words: &[u64]) {
        match self {
            Counts::Narrow(c) => count_sources(pack, words, c),
            Counts::Wide(c) => count_sources(pack, words, c),
        }
    }

    /// [`scatter`] with these cursors.
    fn scatter(
        &mut self,
        pack: &ArcPacking,
        words: &[u64],
        weight: impl Fn(usize) -> u32,
        targets: &mut [u64],
        weights: &mut [f32],
    ) {
        match self {
            Counts::Narrow(c) => scatter(pack, words, weight, c, targets, weights),
            Counts::Wide(c) => scatter(pack, words, weight, c, targets, weights),
        }
    }
}

/// Adds the arcs `words` (packed by `pack`, sources checked below `degree.len() - 1`) to
/// their sources' counts `degree[source + 1]`, prefetching the counts of the arcs
/// [`PREFETCH_AHEAD`] places ahead (the increments are random: the prefetch keeps many
/// cache misses in flight). The counts cannot overflow (the caller's choice of type).
fn count_sources<C: Counter>(pack: &ArcPacking, words: &[u64], degree: &mut [C]) {
    let n = words.len();
    for i in 0..n {
        if i + PREFETCH_AHEAD < n {
            prefetch(degree, pack.source(words[i + PREFETCH_AHEAD]) as usize + 1);
        }
        degree[pack.source(words[i]) as usize + 1].bump();
    }
}

/// Arcs ahead of the one written whose cursor is prefetched (the next stage, the row
/// position, is prefetched at half that distance).
const PREFETCH_AHEAD: usize = 16;

/// Writes the arcs `words` (packed by `pack`; the weight bits of the `i`-th are
/// `weight(i)`) at their sources' cursors, in order. Every local source is below
/// `cursor.len()` (checked as the words were received or routed) and the cursors stay
/// inside the rows (the degrees counted exactly these arcs).
fn scatter<C: Counter>(
    pack: &ArcPacking,
    words: &[u64],
    weight: impl Fn(usize) -> u32,
    cursor: &mut [C],
    targets: &mut [u64],
    weights: &mut [f32],
) {
    let n = words.len();
    let src = |i: usize| pack.source(words[i]) as usize;
    for i in 0..n {
        if i + 2 * PREFETCH_AHEAD < n {
            prefetch(cursor, src(i + 2 * PREFETCH_AHEAD));
        }
        if i + PREFETCH_AHEAD < n {
            let at = cursor[src(i + PREFETCH_AHEAD)].get() as usize;
            prefetch(targets, at);
            prefetch(weights, at);
        }
        let local = src(i);
        let at = cursor[local].get() as usize;
        cursor[local].bump();
        targets[at] = pack.target(words[i]);
        weights[at] = f32::from_bits(weight(i));
    }
}

/// Hints that `slice[i]` will be accessed soon (nothing when `i` is out of bounds).
#[inline(always)]
fn prefetch<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = slice.get(i) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint: it never faults nor changes memory, and the
        // address comes from a reference into the slice.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}

/// An in-memory [`Exchange`] between threads of one process: the simulation of several
/// ranks used by tests and by [`simulate`]. Make the group with [`MemExchange::group`] and
/// give each member to its own thread.
#[derive(Debug)]
pub struct MemExchange {
    rank: usize,
    shared: Arc<MemShared>,
}

#[derive(Debug)]
struct MemShared {
    ranks: usize,
    barrier: Barrier,
    /// `slots[src * ranks + dst]`: the words `src` sends `dst` in the current exchange.
    slots: Mutex<Vec<Vec<u64>>>,
}

impl MemExchange {
    /// One member per rank, `ranks >= 1`.
    pub fn group(ranks: usize) -> Vec<MemExchange> {
        let shared = Arc::new(MemShared {
            ranks,
            barrier: Barrier::new(ranks),
            slots: Mutex::new(vec![Vec::new(); ranks * ranks]),
        });
        (0..ranks).map(|rank| MemExchange { rank, shared: Arc::clone(&shared) }).collect()
    }
}

impl Exchange for MemExchange {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.shared.ranks
    }

    fn exchange(
        &mut self,
        send: &[u64],
        counts: &[usize],
    ) -> Result<(Vec<u64>, Vec<usize>), DistError> {
        let r = self.shared.ranks;
        if counts.len() != r || counts.iter().sum::<usize>() != send.len() {
            return Err(DistError::Exchange(format!(
                "{} words to send with counts {counts:?} for {r} ranks",
                send.len()
            )));
        }
        let lock =
            || self.shared.slots.lock().map_err(|_| DistError::Exchange("a rank panicked".into()));
        {
            let mut slots = lock()?;
            let mut at = 0;
            for (d, &c) in counts.iter().enumerate() {
                slots[self.rank * r + d] = send[at..at + c].to_vec();
                at += c;
            }
        }
        self.shared.barrier.wait();
        let (mut recv, mut from) = (Vec::new(), Vec::with_capacity(r));
        {
            let mut slots = lock()?;
            // Exactly the words received (kept by the construction: no spare capacity).
            recv.reserve_exact((0..r).map(|s| slots[s * r + self.rank].len()).sum());
            for s in 0..r {
                let words = std::mem::take(&mut slots[s * r + self.rank]);
                from.push(words.len());
                recv.extend_from_slice(&words);
            }
        }
        // Nobody writes the next exchange's slots before every rank has read this one's.
        self.shared.barrier.wait();
        Ok((recv, from))
    }
}

/// Builds the rows of every rank of a simulated job of `bounds.len() - 1` ranks in this
/// process (one thread per rank, [`MemExchange`]): the same code as a real job's ranks.
pub fn simulate(
    p: &KroneckerParams,
    bounds: &[u64],
    round_edges: u64,
) -> Result<Vec<LocalCsr>, DistError> {
    let ranks = bounds.len().saturating_sub(1);
    check_bounds(bounds, ranks, p.num_vertices())?;
    std::thread::scope(|s| {
        let handles: Vec<_> = MemExchange::group(ranks)
            .into_iter()
            .map(|mut ex| s.spawn(move || build_local_csr(p, bounds, round_edges, &mut ex)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().map_err(|_| DistError::Exchange("a simulated rank panicked".into()))?
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The progress hook sees each rank's share grow round by round up to its whole share,
    /// and the rows are those of the hook-less build.
    #[test]
    fn progress_counts_each_ranks_edges_up_to_its_share() {
        let p = KroneckerParams::new(7, 4, 2, 3).unwrap();
        let bounds = [0, 50, 128];
        let plain = simulate(&p, &bounds, 100).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = MemExchange::group(2)
                .into_iter()
                .map(|mut ex| {
                    let p = &p;
                    s.spawn(move || {
                        let seen = Mutex::new(Vec::new());
                        let (g, _) =
                            build_local_csr_with_progress(p, &bounds, 100, &mut ex, &|d| {
                                seen.lock().unwrap().push(d)
                            })
                            .unwrap();
                        (g, seen.into_inner().unwrap())
                    })
                })
                .collect();
            for (r, h) in handles.into_iter().enumerate() {
                let (g, seen) = h.join().unwrap();
                assert_eq!(g, plain[r]);
                let share = rank_edges(p.num_edges(), r, 2);
                let want = share.end - share.start;
                assert_eq!(seen.len() as u64, rounds(p.num_edges(), 2, 100));
                assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
                assert_eq!(seen.last(), Some(&want), "{seen:?}");
                assert_eq!(seen[0], 100.min(want));
            }
        });
    }

    /// Both counter widths count and scatter alike (the wide ones serve graphs of 2^31
    /// edges or more, too big for a test), and blocks' word counts invert.
    #[test]
    fn narrow_and_wide_counters_agree() {
        let pack = ArcPacking::new(&[0, 5, 1 << 20]).unwrap();
        let arcs: Vec<(u64, u64, u32)> =
            (0..40u64).map(|i| ((i * 7919) % (1 << 20), (i * 13) % 5, i as u32)).collect();
        let words: Vec<u64> = arcs.iter().map(|&(t, s, _)| pack.pack(t, s)).collect();
        let run = |mut degree: Counts, cursor: fn(&[u64]) -> Counts| {
            degree.count(&pack, &words);
            let mut offsets = vec![0u64; 6];
            let mut total = 0;
            for (i, o) in offsets.iter_mut().enumerate() {
                total += degree.get(i);
                *o = total;
            }
            let mut c = cursor(&offsets[..5]);
            let (mut t, mut w) = (vec![0u64; total as usize], vec![0f32; total as usize]);
            c.scatter(&pack, &words, |i| arcs[i].2, &mut t, &mut w);
            (offsets, t, w.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
        };
        let narrow = run(Counts::Narrow(vec![0; 6]), |o| {
            Counts::Narrow(o.iter().map(|&x| x as u32).collect())
        });
        let wide = run(Counts::Wide(vec![0; 6]), |o| Counts::Wide(o.to_vec()));
        assert_eq!(narrow, wide);
        assert_eq!(narrow.0, [0, 8, 16, 24, 32, 40]);
        // Row 1 (source 1, i·13 = 1 mod 5): the arcs i = 2, 7, 12, ... in order.
        let row1: Vec<u64> = (0..8).map(|k| ((2 + 5 * k) * 7919) % (1 << 20)).collect();
        assert_eq!(narrow.1[8..16], row1[..]);
        for k in 0..100 {
            assert_eq!(block_arcs(block_words(k)), Some(k));
        }
        assert_eq!(block_arcs(4), None);
    }
}
