//! Collective building blocks over an [`Exchange`], used by the distributed validation and
//! root choice ([`super::validate`], [`super::roots`]).
//!
//! Every function here is **collective**: every rank of the job calls it, with the same
//! round size, the same number of times and in the same order, or the job deadlocks. Each
//! one stops with the same [`DistError`] on every rank when the ranks' inputs disagree
//! (they all see the same exchanged words and decide alike).
//!
//! - [`Layout::gather`]: every rank learns every rank's vertex range (one exchange of 3
//!   words per pair of ranks).
//! - [`all_reduce`]: a small vector combined over the ranks (one exchange; `R·len` words
//!   received).
//! - [`fetch`]: the values of up to `B` vertices, anywhere, asked from their owners (one
//!   request exchange, one reply exchange, each sending at most `B` words per rank).
//! - [`all_gather_u32`], [`all_gather_u64`]: every rank's 32- or 64-bit values in vertex
//!   order (`4·n` or `8·n` bytes on every rank), in rounds of at most `B` words per pair of
//!   ranks.
//! - [`reach`], [`reach_from`]: the vertices reachable from a seed (or several) through a rank-local adjacency (the rows
//!   of a [`LocalCsr`], or a tree's child lists), in rounds where each rank sends at most
//!   `B` vertex ids (one exchange per round, its flags folded into the data).

use super::{check_bounds, owner_rank, DistError, Exchange, LocalCsr};

/// Runs one exchange and checks what came back: a count per rank adding up to the words.
pub(crate) fn exchange<E: Exchange + ?Sized>(
    ex: &mut E,
    send: &[u64],
    counts: &[usize],
) -> Result<(Vec<u64>, Vec<usize>), DistError> {
    let (recv, from) = ex.exchange(send, counts)?;
    if from.len() != ex.ranks() || from.iter().sum::<usize>() != recv.len() {
        return Err(DistError::Exchange(format!(
            "{} words received with counts {from:?} from {} ranks",
            recv.len(),
            ex.ranks()
        )));
    }
    Ok((recv, from))
}

/// The round size `round` clamped so that one round's exchange stays within what `ex`
/// moves at once: every rank may send a round of ids (plus a flag) to the same rank, which
/// receives `R · (round + 1)` words. At least 1.
pub fn clamp_round<E: Exchange + ?Sized>(round: usize, ex: &E) -> usize {
    let ranks = ex.ranks().max(1) as u64;
    let most = (ex.max_words() / ranks).saturating_sub(1).max(1);
    round.clamp(1, usize::try_from(most).unwrap_or(usize::MAX))
}

/// The vertex ranges of all ranks: rank `r` owns `[bounds[r], bounds[r + 1])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    bounds: Vec<u64>,
    rank: usize,
}

impl Layout {
    /// Learns every rank's range from each rank's rows (collective, one exchange). An error
    /// on every rank when the ranges do not tile `0..n` in rank order or the ranks disagree
    /// on `n`.
    pub fn gather<E: Exchange + ?Sized>(g: &LocalCsr, ex: &mut E) -> Result<Layout, DistError> {
        let (rank, ranks) = (ex.rank(), ex.ranks());
        let r = g.range();
        let mine = [g.num_vertices(), r.start, r.end];
        let send: Vec<u64> = (0..ranks).flat_map(|_| mine).collect();
        let (recv, from) = exchange(ex, &send, &vec![3; ranks])?;
        if from.iter().any(|&c| c != 3) {
            return Err(DistError::Exchange(format!("vertex ranges: counts {from:?}")));
        }
        let n = recv[0];
        let mut bounds: Vec<u64> = recv.chunks_exact(3).map(|c| c[1]).collect();
        bounds.push(recv[3 * ranks - 1]);
        let tiles = recv
            .chunks_exact(3)
            .enumerate()
            .all(|(s, c)| c[0] == n && c[1] == bounds[s] && c[2] == bounds[s + 1] && c[1] <= c[2]);
        if !tiles {
            let ranges: Vec<String> = recv
                .chunks_exact(3)
                .enumerate()
                .map(|(s, c)| format!("rank {s}: {}..{} of {}", c[1], c[2], c[0]))
                .collect();
            return Err(DistError::Exchange(format!(
                "the ranks' rows do not tile the vertices in rank order: {}",
                ranges.join(", ")
            )));
        }
        check_bounds(&bounds, ranks, n)?;
        Ok(Layout { bounds, rank })
    }

    /// The layout of `bounds` seen from `rank` (checked by [`check_bounds`]).
    pub fn from_bounds(bounds: &[u64], rank: usize) -> Result<Layout, DistError> {
        let ranks = bounds.len().saturating_sub(1);
        check_bounds(bounds, ranks, bounds.last().copied().unwrap_or(0))?;
        if rank >= ranks {
            return Err(DistError::Exchange(format!("rank {rank} of {ranks}")));
        }
        Ok(Layout { bounds: bounds.to_vec(), rank })
    }

    /// The boundaries, `R + 1` entries from 0 to `n`.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Vertex count of the graph.
    pub fn num_vertices(&self) -> u64 {
        self.bounds[self.bounds.len() - 1]
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.bounds.len() - 1
    }

    /// First vertex of this rank.
    pub fn first(&self) -> u64 {
        self.bounds[self.rank]
    }

    /// Number of vertices of this rank.
    pub fn local_len(&self) -> usize {
        (self.bounds[self.rank + 1] - self.bounds[self.rank]) as usize
    }

    /// The rank owning vertex `v < n`.
    #[inline]
    pub fn owner(&self, v: u64) -> usize {
        owner_rank(&self.bounds, v)
    }

    /// The local index of `v` when this rank owns it.
    #[inline]
    pub fn local(&self, v: u64) -> Option<usize> {
        let (a, b) = (self.bounds[self.rank], self.bounds[self.rank + 1]);
        (a <= v && v < b).then(|| (v - a) as usize)
    }
}

/// `local` combined over all ranks with `op` (collective, one exchange; every rank passes
/// a vector of the same length and gets the same answer).
pub fn all_reduce<E: Exchange + ?Sized>(
    ex: &mut E,
    local: &[u64],
    op: impl Fn(u64, u64) -> u64,
) -> Result<Vec<u64>, DistError> {
    let ranks = ex.ranks();
    let send: Vec<u64> = (0..ranks).flat_map(|_| local.iter().copied()).collect();
    let (recv, from) = exchange(ex, &send, &vec![local.len(); ranks])?;
    if from.iter().any(|&c| c != local.len()) {
        return Err(DistError::Exchange(format!(
            "all-reduce of {} words: counts {from:?}",
            local.len()
        )));
    }
    let mut out = recv[..local.len()].to_vec();
    for chunk in recv.chunks_exact(local.len().max(1)).skip(1) {
        for (o, &x) in out.iter_mut().zip(chunk) {
            *o = op(*o, x);
        }
    }
    Ok(out)
}

/// The values of the vertices `ids` (global, any rank's; at most the round size `B` of the
/// caller), in order: `answer(i)` evaluated by each id's owner on its local index `i`
/// (collective: a request exchange, then a reply exchange; this rank's own ids are answered
/// without being sent). An id out of `0..n` is a caller bug reported as an error.
pub fn fetch<E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    ids: &[u64],
    answer: impl Fn(usize) -> u64,
) -> Result<Vec<u64>, DistError> {
    let (rank, ranks) = (layout.rank(), layout.ranks());
    let n = layout.num_vertices();
    if let Some(&v) = ids.iter().find(|&&v| v >= n) {
        return Err(DistError::Exchange(format!("asked for vertex {v} of a graph of {n}")));
    }
    let mut out = vec![0u64; ids.len()];
    let mut counts = vec![0usize; ranks];
    for &v in ids {
        counts[layout.owner(v)] += 1;
    }
    counts[rank] = 0;
    let mut pos = Vec::with_capacity(ranks);
    let mut at = 0;
    for c in &counts {
        pos.push(at);
        at += c;
    }
    // Where each asked id sits in the send buffer (usize::MAX: answered here).
    let mut slot = vec![usize::MAX; ids.len()];
    let mut send = vec![0u64; at];
    for (k, &v) in ids.iter().enumerate() {
        let o = layout.owner(v);
        if o == rank {
            out[k] = answer((v - layout.first()) as usize);
        } else {
            slot[k] = pos[o];
            send[pos[o]] = v;
            pos[o] += 1;
        }
    }
    let (asked, from) = exchange(ex, &send, &counts)?;
    let mut reply = Vec::with_capacity(asked.len());
    for &v in &asked {
        let i = layout.local(v).ok_or_else(|| {
            DistError::Exchange(format!("rank {rank} was asked for vertex {v}, not its own"))
        })?;
        reply.push(answer(i));
    }
    let (answers, back) = exchange(ex, &reply, &from)?;
    if back != counts {
        return Err(DistError::Exchange(format!("asked {counts:?}, answered {back:?}")));
    }
    for (k, &s) in slot.iter().enumerate() {
        if s != usize::MAX {
            out[k] = answers[s];
        }
    }
    Ok(out)
}

/// Marks in `seen` (one flag per local vertex) every vertex reachable from `seed` through
/// the rank-local adjacency `offsets`/`targets` (rows of this rank's vertices, global
/// target ids), the vertices already marked included as reached (collective; only
/// `seed`'s owner passes `Some(seed)`, by its global id). Each round, each rank walks its
/// pending rows until it has `round` ids for other ranks, then one exchange sends them with
/// one flag word per destination (pending work or ids sent); the walk ends after a round
/// where every flag was 0. An id is sent to its owner once at most (a bitmap of `n / 8`
/// bytes remembers which were sent; the arcs to a popular far vertex would otherwise send
/// it once per arc). Returns the number of rounds.
pub fn reach<E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    offsets: &[u64],
    targets: &[u64],
    seed: Option<u64>,
    seen: &mut [bool],
    round: usize,
) -> Result<u64, DistError> {
    let rank = layout.rank();
    let seeds = match seed {
        Some(s) => vec![layout.local(s).ok_or_else(|| {
            DistError::Exchange(format!("rank {rank} was given seed {s}, not its own"))
        })?],
        None => Vec::new(),
    };
    reach_from(ex, layout, offsets, targets, &seeds, seen, round)
}

/// [`reach`] from any number of seeds: `seeds` are local indices of this rank's own
/// vertices (each rank passes its own; any may pass none).
pub fn reach_from<E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    offsets: &[u64],
    targets: &[u64],
    seeds: &[usize],
    seen: &mut [bool],
    round: usize,
) -> Result<u64, DistError> {
    let (rank, ranks) = (layout.rank(), layout.ranks());
    let round = round.max(1);
    let mut stack: Vec<usize> = Vec::new();
    for &i in seeds {
        if i >= seen.len() {
            return Err(DistError::Exchange(format!(
                "rank {rank} was given seed index {i} of its {} vertices",
                seen.len()
            )));
        }
        if !seen[i] {
            seen[i] = true;
            stack.push(i);
        }
    }
    // The other ranks' vertices sent so far, one bit per vertex of the graph.
    let n = layout.num_vertices();
    let words = usize::try_from(n.div_ceil(64))
        .map_err(|_| DistError::Exchange("too many vertices for reach".into()))?;
    let mut asked = vec![0u64; words];
    // The row being walked: (arc position, row end).
    let mut row: Option<(usize, usize)> = None;
    let mut buckets: Vec<Vec<u64>> = vec![Vec::new(); ranks];
    let mut rounds = 0u64;
    loop {
        let mut sent = 0usize;
        'walk: while sent < round {
            let (mut k, end) = match row.take() {
                Some(r) => r,
                None => match stack.pop() {
                    Some(i) => (offsets[i] as usize, offsets[i + 1] as usize),
                    None => break 'walk,
                },
            };
            while k < end {
                let t = targets[k];
                k += 1;
                match layout.local(t) {
                    Some(j) => {
                        if !seen[j] {
                            seen[j] = true;
                            stack.push(j);
                        }
                    }
                    // Each other rank's vertex is sent at most once: its owner marks it
                    // the first time, later arcs to it would change nothing.
                    // (An id out of range is sent on: its receiver reports it.)
                    None if t < n && asked[t as usize / 64] >> (t % 64) & 1 == 1 => {}
                    None => {
                        if t < n {
                            asked[t as usize / 64] |= 1 << (t % 64);
                        }
                        buckets[layout.owner(t)].push(t);
                        sent += 1;
                        if sent == round {
                            if k < end {
                                row = Some((k, end));
                            }
                            break 'walk;
                        }
                    }
                }
            }
        }
        let busy = u64::from(row.is_some() || !stack.is_empty() || sent > 0);
        let mut send = Vec::with_capacity(sent + ranks);
        let mut counts = Vec::with_capacity(ranks);
        for b in buckets.iter_mut() {
            send.push(busy);
            send.append(b);
            counts.push(send.len() - counts.iter().sum::<usize>());
        }
        let (recv, from) = exchange(ex, &send, &counts)?;
        rounds += 1;
        let mut any = false;
        let mut at = 0;
        for (s, &c) in from.iter().enumerate() {
            if c == 0 {
                return Err(DistError::Exchange(format!("reach: no flag from rank {s}")));
            }
            any |= recv[at] != 0;
            for &t in &recv[at + 1..at + c] {
                let j = layout.local(t).ok_or_else(|| {
                    DistError::Exchange(format!("rank {rank} was sent vertex {t}, not its own"))
                })?;
                if !seen[j] {
                    seen[j] = true;
                    stack.push(j);
                }
            }
            at += c;
        }
        if !any {
            return Ok(rounds);
        }
    }
}

/// Every rank's 32-bit values, in vertex order: `out[v] = value(i)` evaluated by the owner
/// of `v` on its local index `i` (collective). In rounds where each rank sends each other
/// rank the next `round` words of its values, two to a word (`(R - 1)·round` words sent,
/// at most `R·round` received, per rank and round), `ceil(max_r n_r / (2·round))` rounds.
/// Holds the `4·n` bytes of the answer and one round's buffers: the caller decides
/// whether `4·n` bytes are affordable. An error on every rank when a rank sends a block of
/// the wrong size.
pub fn all_gather_u32<E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    value: impl Fn(usize) -> u32,
    round: usize,
) -> Result<Vec<u32>, DistError> {
    all_gather(ex, layout, value, round, 2)
}

/// [`all_gather_u32`] for 64-bit values, one to a word (`8·n` bytes on every rank,
/// `ceil(max_r n_r / round)` rounds).
pub fn all_gather_u64<E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    value: impl Fn(usize) -> u64,
    round: usize,
) -> Result<Vec<u64>, DistError> {
    all_gather(ex, layout, value, round, 1)
}

/// A value [`all_gather`] packs `64 / bits` to a word.
trait Packed: Copy + Default {
    fn word(self) -> u64;
    fn of(word: u64) -> Self;
}

impl Packed for u32 {
    fn word(self) -> u64 {
        u64::from(self)
    }
    fn of(word: u64) -> u32 {
        word as u32
    }
}

impl Packed for u64 {
    fn word(self) -> u64 {
        self
    }
    fn of(word: u64) -> u64 {
        word
    }
}

/// [`all_gather_u32`] and [`all_gather_u64`]: `pack` values to a word (2 or 1).
fn all_gather<T: Packed, E: Exchange + ?Sized>(
    ex: &mut E,
    layout: &Layout,
    value: impl Fn(usize) -> T,
    round: usize,
    pack: usize,
) -> Result<Vec<T>, DistError> {
    let (rank, ranks) = (layout.rank(), layout.ranks());
    let bounds = layout.bounds();
    let n = usize::try_from(layout.num_vertices())
        .map_err(|_| DistError::Exchange("too many vertices to gather".into()))?;
    let per = pack * round.max(1); // values per sender and round
    let shift = 64 / pack;
    let len = |s: usize| (bounds[s + 1] - bounds[s]) as usize;
    let plan = (0..ranks).map(len).max().unwrap_or(0).div_ceil(per);
    let mut out = vec![T::default(); n];
    let first = layout.first() as usize;
    for i in 0..len(rank) {
        out[first + i] = value(i);
    }
    // Values of sender `s` in round `t`.
    let span = |s: usize, t: usize| (t * per).min(len(s))..((t + 1) * per).min(len(s));
    let mut send = Vec::new();
    let mut counts = vec![0usize; ranks];
    for t in 0..plan {
        let mine = span(rank, t);
        let words = mine.len().div_ceil(pack);
        send.clear();
        for (d, c) in counts.iter_mut().enumerate() {
            *c = if d == rank { 0 } else { words };
            if d != rank {
                let block = &out[first + mine.start..first + mine.end];
                send.extend(block.chunks(pack).map(|p| {
                    // `k < pack`, so `k · shift < 64`.
                    p.iter().enumerate().fold(0u64, |w, (k, &x)| w | x.word() << (k * shift))
                }));
            }
        }
        let (recv, from) = exchange(ex, &send, &counts)?;
        let mut at = 0;
        for (s, &c) in from.iter().enumerate() {
            let theirs = if s == rank { 0..0 } else { span(s, t) };
            if c != theirs.len().div_ceil(pack) {
                return Err(DistError::Exchange(format!(
                    "gathering values, round {t}: {c} words from rank {s}, expected {}",
                    theirs.len().div_ceil(pack)
                )));
            }
            let base = bounds[s] as usize + theirs.start;
            for (k, slot) in out[base..base + theirs.len()].iter_mut().enumerate() {
                *slot = T::of(recv[at + k / pack] >> (shift * (k % pack)));
            }
            at += c;
        }
    }
    Ok(out)
}
