//! Where the edges of a distributed construction come from: an [`EdgeSource`] hands each
//! rank the edges of its share, round by round, and [`super::build_local_csr_from`] routes,
//! exchanges and sorts them into rows the same way whatever the source.
//!
//! Rows are identical to the one-process [`crate::Csr`] rows of the same input when the
//! shares follow the input's order: rank `r`'s share precedes rank `r + 1`'s, and each
//! share is handed out in input order (the module docs of [`super`] explain why). The
//! sources here:
//!
//! - [`KroneckerSource`]: the edges `[r·M/R, (r+1)·M/R)` of a Kronecker graph, generated;
//! - the graph files of [`super::files`]: a `.skg` file's edges read by every rank from
//!   its own byte ranges, or a text file read by rank 0 alone (the other ranks' shares are
//!   empty).
//!
//! # Failures
//!
//! A source that finds its input bad (a corrupt file, a bad line) must not leave the
//! exchanges while the other ranks still wait in them. It therefore hands out no more
//! edges (the remaining rounds run empty) and keeps a [`Refusal`]; after the rounds,
//! [`build_from_source`] runs [`agree`]: every rank learns the refusal that comes first in
//! the input (the lowest key: the one the one-process reader reports), and every rank
//! returns it as the same [`DistError::Input`].

use std::ops::Range;

use super::collective::{all_reduce, exchange};
use super::{build_local_csr_from, rank_edges, BuildStats, DistError, Exchange, LocalCsr};
use crate::kronecker::{self, KroneckerParams};

/// The edges of a distributed construction (see the [module docs](self)).
pub trait EdgeSource {
    /// Vertex count of the graph (the same on every rank).
    fn num_vertices(&self) -> u64;

    /// Edge count of the whole input (the same on every rank).
    fn num_edges(&self) -> u64;

    /// The edges rank `rank` of `ranks` hands out, as indices into the input's edges;
    /// every rank computes every rank's share alike, rank `r`'s before rank `r + 1`'s.
    fn share(&self, rank: usize, ranks: usize) -> Range<u64>;

    /// Writes the edges `lo .. lo + src.len()` (inside this rank's share, asked in
    /// increasing order) into `src`, `dst` and `w` (weight 1 for unweighted inputs), and
    /// returns how many it wrote: all of them, or 0 once the source has failed (its
    /// [`Refusal`] is then kept for [`EdgeSource::refusal`]).
    fn fill(&mut self, lo: u64, src: &mut [u64], dst: &mut [u64], w: &mut [f32]) -> usize;

    /// Why this rank's part of the input was refused, if it was; called once, after the
    /// last round (a source may finish checks of its own here, e.g. a checksum).
    fn refusal(&mut self) -> Option<Refusal> {
        None
    }
}

/// A rank's reason to refuse the input: `key` orders the refusals of all ranks (the
/// lowest wins; the one-process reader would report that one first), `message` is the
/// error every rank will report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Order among the refusals of all ranks (`u64::MAX` is reserved).
    pub key: u64,
    /// The message, e.g. `g.skg: edge 12: vertex 99 is out of range: ...`.
    pub message: String,
}

impl Refusal {
    /// A refusal from an error, its whole chain of sources in the message (`a: b: c`).
    pub fn from_error(key: u64, e: &dyn std::error::Error) -> Refusal {
        let mut message = e.to_string();
        let mut src = e.source();
        while let Some(s) = src {
            message.push_str(": ");
            message.push_str(&s.to_string());
            src = s.source();
        }
        Refusal { key: key.min(u64::MAX - 1), message }
    }
}

/// The edges of a Kronecker graph: rank `r` generates `[r·M/R, (r+1)·M/R)`
/// ([`rank_edges`], [`kronecker::generate_range_into`]).
#[derive(Debug, Clone, Copy)]
pub struct KroneckerSource(pub KroneckerParams);

impl EdgeSource for KroneckerSource {
    fn num_vertices(&self) -> u64 {
        self.0.num_vertices()
    }

    fn num_edges(&self) -> u64 {
        self.0.num_edges()
    }

    fn share(&self, rank: usize, ranks: usize) -> Range<u64> {
        rank_edges(self.0.num_edges(), rank, ranks)
    }

    fn fill(&mut self, lo: u64, src: &mut [u64], dst: &mut [u64], w: &mut [f32]) -> usize {
        kronecker::generate_range_into(&self.0, lo, src, dst, w);
        src.len()
    }
}

/// Rounds every rank runs: the largest share over `round_edges`, rounded up.
pub fn source_rounds<S: EdgeSource + ?Sized>(source: &S, ranks: usize, round_edges: u64) -> u64 {
    let most = (0..ranks).map(|r| source.share(r, ranks)).map(|s| s.end - s.start).max();
    most.unwrap_or(0).div_ceil(round_edges.max(1))
}

/// [`build_local_csr_from`], then [`agree`] on the source's [`EdgeSource::refusal`]:
/// this rank's rows, or the same error on every rank (collective).
pub fn build_from_source<S: EdgeSource + ?Sized, E: Exchange + ?Sized>(
    source: &mut S,
    bounds: &[u64],
    round_edges: u64,
    ex: &mut E,
    progress: &dyn Fn(u64),
) -> Result<(LocalCsr, BuildStats), DistError> {
    let built = build_local_csr_from(source, bounds, round_edges, ex, progress)?;
    agree(ex, source.refusal())?;
    Ok(built)
}

/// Agrees on the ranks' refusals (collective): `Ok` on every rank when no rank refuses;
/// otherwise every rank returns [`DistError::Input`] with the message of the refusal of
/// lowest key (the lowest rank's among equal keys). Two all-reduces of one word when all
/// is well; a third exchange moves the message.
pub fn agree<E: Exchange + ?Sized>(ex: &mut E, mine: Option<Refusal>) -> Result<(), DistError> {
    let key = mine.as_ref().map_or(u64::MAX, |r| r.key.min(u64::MAX - 1));
    let least = all_reduce(ex, &[key], u64::min)?[0];
    if least == u64::MAX {
        return Ok(());
    }
    let me = if key == least { ex.rank() as u64 } else { u64::MAX };
    let who = all_reduce(ex, &[me], u64::min)?[0] as usize;
    let bytes = mine.filter(|_| who == ex.rank()).map(|r| r.message.into_bytes());
    let message = broadcast_bytes(ex, who, bytes.as_deref().unwrap_or_default())?;
    Err(DistError::Input(String::from_utf8_lossy(&message).into_owned()))
}

/// `words` of rank `root` on every rank (collective; what other ranks pass is ignored).
pub fn broadcast_words<E: Exchange + ?Sized>(
    ex: &mut E,
    root: usize,
    words: &[u64],
) -> Result<Vec<u64>, DistError> {
    let ranks = ex.ranks();
    let mine = if ex.rank() == root { words } else { &[] };
    let send: Vec<u64> = (0..ranks).flat_map(|_| mine.iter().copied()).collect();
    let (recv, from) = exchange(ex, &send, &vec![mine.len(); ranks])?;
    let start: usize = from[..root].iter().sum();
    if from.iter().enumerate().any(|(s, &c)| s != root && c != 0) {
        return Err(DistError::Exchange(format!("broadcast from rank {root}: counts {from:?}")));
    }
    Ok(recv[start..start + from[root]].to_vec())
}

/// `bytes` of rank `root` on every rank (collective; [`broadcast_words`] of the length
/// and the bytes packed eight to a word).
pub fn broadcast_bytes<E: Exchange + ?Sized>(
    ex: &mut E,
    root: usize,
    bytes: &[u8],
) -> Result<Vec<u8>, DistError> {
    let mut words = vec![bytes.len() as u64];
    words.extend(bytes.chunks(8).map(|c| {
        let mut a = [0u8; 8];
        a[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(a)
    }));
    let got = broadcast_words(ex, root, &words)?;
    let len = got.first().copied().unwrap_or(0) as usize;
    let mut out: Vec<u8> = got.iter().skip(1).flat_map(|w| w.to_le_bytes()).collect();
    if out.len() < len {
        return Err(DistError::Exchange(format!("broadcast of {len} bytes: {} came", out.len())));
    }
    out.truncate(len);
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::distributed::MemExchange;

    /// Runs `f` on every rank of a simulated job of `ranks` ranks.
    pub(crate) fn on_ranks<T: Send>(
        ranks: usize,
        f: impl Fn(&mut MemExchange) -> T + Sync,
    ) -> Vec<T> {
        std::thread::scope(|s| {
            let handles: Vec<_> = MemExchange::group(ranks)
                .into_iter()
                .map(|mut ex| {
                    let f = &f;
                    s.spawn(move || f(&mut ex))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// The lowest key wins on every rank, whichever rank holds it; no refusal: Ok.
    #[test]
    fn agree_takes_the_lowest_key_on_every_rank() {
        let got = on_ranks(3, |ex| {
            let mine = match ex.rank() {
                0 => Some(Refusal { key: 9, message: "late".into() }),
                1 => None,
                _ => Some(Refusal { key: 4, message: "early: ünïcode ok".into() }),
            };
            agree(ex, mine).unwrap_err().to_string()
        });
        assert_eq!(got, vec!["early: ünïcode ok"; 3]);
        assert!(on_ranks(3, |ex| agree(ex, None)).iter().all(Result::is_ok));
        let words = on_ranks(3, |ex| broadcast_words(ex, 1, &[ex.rank() as u64 + 7, 5]).unwrap());
        assert_eq!(words, vec![vec![8, 5]; 3]);
    }
}
