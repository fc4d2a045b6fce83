//! The verbs transport's connection data and memory layout: what each rank tells the others
//! at start (over MPI, all-gathered) so that its queue pairs can be connected and its rings
//! written, and where every ring lies in a rank's registered memory. Plain data and
//! arithmetic, with no verbs call: built without the `rdma` feature too, for its tests.
//!
//! # Layout of a rank's registered memory
//!
//! One region per rank, registered once (one rkey), of `2 · W · A` slots of `stride =
//! COUNTERS_BYTES + ring_bytes` bytes each (`W` workers per rank, `A = ranks · W` workers in
//! all):
//!
//! * slot `s · W + t` (`s < A`, `t < W`): the *inbound* ring from global worker `s` to local
//!   worker `t`: its counters (`tail` written by `s` with RDMA writes; `head` the reader's
//!   own) and its data, written by `s` with RDMA writes;
//! * slot `A · W + w · A + d`: the *outbound* mirror of local worker `w`'s ring to global
//!   worker `d`: counters (`tail` the writer's own; `head` the credit, written back by `d`'s
//!   rank with RDMA writes) and a copy of the data, the registered source of the writes.
//!
//! Slots of a rank's own workers stay unused (they talk through slots in memory), and so do
//! those of the ranks it does not link to over verbs ([`Links`]: in a run that mixes the
//! transports, the ranks of its own node, reached over the shared-memory rings).
//!
//! # Connection data
//!
//! [`RankConn`], encoded as `u64` words ([`RankConn::encode`]) of one length for every rank
//! (the ranks agreed on their shape before): a magic word, the rank, ranks, workers, ring
//! size, the port's LID, GID, path MTU, the region's address, length and rkey, the first
//! packet sequence number, then the number of queue pair `(w, r)` (local worker `w` to rank
//! `r`) for every `w < W`, `r < ranks`, 0 where the two ranks are not linked ([`Links`]). [`RankConn::decode`] refuses words that do not
//! describe a rank of this job's shape (wrong magic, rank, shape or ring size, a region
//! shorter than the layout, numbers out of the verbs' ranges): a mismatch between ranks ends
//! the run on every rank with the rank named, before any queue pair is connected.

use super::ring::COUNTERS_BYTES;

/// The first word of a rank's connection data ("SKEINVRB").
const MAGIC: u64 = u64::from_le_bytes(*b"SKEINVRB");
/// Words before the queue pair numbers.
const HEADER_WORDS: usize = 12;
/// Queue pair numbers and packet sequence numbers are 24-bit.
const MAX_24: u32 = (1 << 24) - 1;

/// Which pairs of ranks are linked over verbs: ranks on different nodes (a node key per rank;
/// [`Links::all`] gives each rank a node of its own, so that every pair is linked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Links {
    nodes: Vec<u64>,
}

impl Links {
    /// Every pair of distinct ranks among `ranks`.
    pub(crate) fn all(ranks: usize) -> Links {
        Links { nodes: (0..ranks as u64).collect() }
    }

    /// The pairs of ranks on different nodes (`nodes[r]`: rank `r`'s node key).
    pub(crate) fn between_nodes(nodes: &[u64]) -> Links {
        Links { nodes: nodes.to_vec() }
    }

    /// Ranks described.
    pub(crate) fn ranks(&self) -> usize {
        self.nodes.len()
    }

    /// Whether ranks `a` and `b` talk over verbs (never a rank with itself).
    pub(crate) fn linked(&self, a: usize, b: usize) -> bool {
        self.nodes[a] != self.nodes[b]
    }
}

/// The layout of every rank's registered memory (module docs); the same on every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Ranks of the job.
    pub(crate) ranks: usize,
    /// Workers per rank.
    pub(crate) workers: usize,
    /// Data bytes of one ring (a power of two, a multiple of 8).
    pub(crate) ring_bytes: usize,
}

impl Layout {
    /// Bytes of one slot: counters, then data.
    pub(crate) fn stride(&self) -> usize {
        COUNTERS_BYTES + self.ring_bytes
    }

    /// Workers in all.
    pub(crate) fn all_workers(&self) -> usize {
        self.ranks * self.workers
    }

    /// Bytes of a rank's region, `None` if it overflows.
    pub(crate) fn len(&self) -> Option<usize> {
        self.ranks
            .checked_mul(self.workers)?
            .checked_mul(self.workers)?
            .checked_mul(2)?
            .checked_mul(self.stride())
    }

    /// Offset of the inbound ring from global worker `from` to local worker `to_local`.
    pub(crate) fn inbound(&self, from: usize, to_local: usize) -> usize {
        debug_assert!(from < self.all_workers() && to_local < self.workers);
        (from * self.workers + to_local) * self.stride()
    }

    /// Offset of local worker `from_local`'s outbound mirror of its ring to global worker
    /// `to`.
    pub(crate) fn outbound(&self, from_local: usize, to: usize) -> usize {
        debug_assert!(from_local < self.workers && to < self.all_workers());
        (self.all_workers() * self.workers + from_local * self.all_workers() + to) * self.stride()
    }

    /// Offset of the `tail` counter in a slot.
    pub(crate) const TAIL: usize = 0;
    /// Offset of the `head` counter in a slot.
    pub(crate) const HEAD: usize = 64;

    /// Offset of the data in a slot.
    pub(crate) fn data(&self) -> usize {
        COUNTERS_BYTES
    }
}

/// What one rank tells the others (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankConn {
    /// The rank.
    pub(crate) rank: usize,
    /// The layout it uses.
    pub(crate) layout: Layout,
    /// Its port's local identifier (InfiniBand; 0 on RoCE, where the GID routes).
    pub(crate) lid: u16,
    /// Its port's GID (index 0).
    pub(crate) gid: [u8; 16],
    /// Its port's active MTU (the verbs enum: 1 = 256 bytes ... 5 = 4096).
    pub(crate) mtu: u32,
    /// Its registered region's address.
    pub(crate) addr: u64,
    /// Its registered region's length.
    pub(crate) len: u64,
    /// Its registered region's remote key.
    pub(crate) rkey: u32,
    /// The first packet sequence number of its queue pairs (24 bits).
    pub(crate) psn: u32,
    /// Queue pair `(w, r)`'s number at index `w · ranks + r` (0 for its own rank).
    pub(crate) qpns: Vec<u32>,
}

/// Connection data that does not describe a rank of the job (module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rank {rank}'s RDMA connection data is refused: {why}")]
pub(crate) struct ConnError {
    /// The rank whose data it is (its place in the all-gather).
    pub(crate) rank: usize,
    /// What is wrong.
    pub(crate) why: String,
}

impl RankConn {
    /// Words of the encoding for `layout`.
    pub(crate) fn words(layout: &Layout) -> usize {
        HEADER_WORDS + layout.workers * layout.ranks
    }

    /// The number of this rank's queue pair from local worker `w` to rank `r`.
    pub(crate) fn qpn(&self, w: usize, r: usize) -> u32 {
        self.qpns[w * self.layout.ranks + r]
    }

    /// The encoding (module docs), [`RankConn::words`] long.
    pub(crate) fn encode(&self) -> Vec<u64> {
        let gid = |i: usize| u64::from_le_bytes(self.gid[i * 8..i * 8 + 8].try_into().expect("8"));
        let mut v = vec![
            MAGIC,
            self.rank as u64,
            self.layout.ranks as u64,
            self.layout.workers as u64,
            self.layout.ring_bytes as u64,
            u64::from(self.lid),
            gid(0),
            gid(1),
            u64::from(self.mtu),
            self.addr,
            self.len,
            (u64::from(self.rkey) << 32) | u64::from(self.psn),
        ];
        debug_assert_eq!(v.len(), HEADER_WORDS);
        v.extend(self.qpns.iter().map(|&q| u64::from(q)));
        v
    }

    /// Rank `rank`'s data from `words`, checked against `layout` (this rank's) and `links`
    /// (a queue pair number exactly towards the ranks `rank` is linked to).
    pub(crate) fn decode(
        rank: usize,
        words: &[u64],
        layout: &Layout,
        links: &Links,
    ) -> Result<RankConn, ConnError> {
        let bad = |why: String| ConnError { rank, why };
        if words.len() != RankConn::words(layout) {
            return Err(bad(format!(
                "{} words, expected {}",
                words.len(),
                RankConn::words(layout)
            )));
        }
        if words[0] != MAGIC {
            return Err(bad(format!("magic word {:#018x}, not skein's", words[0])));
        }
        if words[1] != rank as u64 {
            return Err(bad(format!("it says it is rank {}", words[1])));
        }
        let theirs = (words[2], words[3], words[4]);
        let ours = (layout.ranks as u64, layout.workers as u64, layout.ring_bytes as u64);
        if theirs != ours {
            return Err(bad(format!(
                "{} ranks of {} workers with {}-byte rings, where this rank has {} ranks of {} \
                 workers with {}-byte rings (every rank must use the same ring size: \
                 SKEIN_SHM_RING_BYTES)",
                theirs.0, theirs.1, theirs.2, ours.0, ours.1, ours.2
            )));
        }
        let lid =
            u16::try_from(words[5]).map_err(|_| bad(format!("LID {} above 16 bits", words[5])))?;
        let mut gid = [0u8; 16];
        gid[..8].copy_from_slice(&words[6].to_le_bytes());
        gid[8..].copy_from_slice(&words[7].to_le_bytes());
        if lid == 0 && gid == [0; 16] {
            return Err(bad("neither a LID nor a GID to reach it by".into()));
        }
        let mtu = match words[8] {
            m @ 1..=5 => m as u32,
            m => return Err(bad(format!("path MTU code {m}, expected 1 (256 B) to 5 (4096 B)"))),
        };
        let (addr, len) = (words[9], words[10]);
        let need = layout.len().ok_or_else(|| bad("the layout's size overflows".into()))?;
        if len != need as u64 {
            return Err(bad(format!("a region of {len} bytes, where the layout needs {need}")));
        }
        if addr == 0 || addr.checked_add(len).is_none() {
            return Err(bad(format!("a region at {addr:#x} of {len} bytes")));
        }
        let (rkey, psn) = ((words[11] >> 32) as u32, words[11] as u32);
        if psn > MAX_24 {
            return Err(bad(format!("packet sequence number {psn:#x} above 24 bits")));
        }
        let mut qpns = Vec::with_capacity(words.len() - HEADER_WORDS);
        for (i, &q) in words[HEADER_WORDS..].iter().enumerate() {
            let (w, r) = (i / layout.ranks, i % layout.ranks);
            let linked = links.linked(rank, r);
            let ok = if linked { (1..=u64::from(MAX_24)).contains(&q) } else { q == 0 };
            if !ok {
                return Err(bad(format!(
                    "queue pair number {q:#x} for its worker {w} to rank {r} (expected 24 bits, \
                     nonzero, to a rank on another node, and 0 for itself and the ranks of its \
                     node)"
                )));
            }
            qpns.push(q as u32);
        }
        Ok(RankConn { rank, layout: *layout, lid, gid, mtu, addr, len, rkey, psn, qpns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout { ranks: 3, workers: 2, ring_bytes: 4096 }
    }

    fn conn(rank: usize) -> RankConn {
        let l = layout();
        RankConn {
            rank,
            layout: l,
            lid: 7,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            mtu: 5,
            addr: 0x7f00_0000_0000,
            len: l.len().unwrap() as u64,
            rkey: 0xdead_beef,
            psn: 0x12_3456,
            qpns: (0..l.workers * l.ranks)
                .map(|i| if i % l.ranks == rank { 0 } else { 100 + i as u32 })
                .collect(),
        }
    }

    #[test]
    fn connection_data_round_trips() {
        for r in 0..3 {
            let c = conn(r);
            let words = c.encode();
            assert_eq!(words.len(), RankConn::words(&layout()));
            let back = RankConn::decode(r, &words, &layout(), &Links::all(3)).unwrap();
            assert_eq!(back, c);
            assert_eq!(back.qpn(1, (r + 1) % 3), 100 + (3 + (r + 1) % 3) as u32);
        }
    }

    /// Every field out of its range, or not matching this rank's shape, is refused, and the
    /// error names the rank.
    #[test]
    fn bad_connection_data_is_refused_naming_the_rank() {
        let l = layout();
        let good = conn(1).encode();
        type Spoil = Box<dyn Fn(&mut Vec<u64>)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (Box::new(|w| w[0] ^= 1), "magic"),
            (Box::new(|w| w[1] = 2), "it says it is rank 2"),
            (Box::new(|w| w[3] = 4), "4 workers"),
            (Box::new(|w| w[4] = 8192), "8192-byte rings"),
            (Box::new(|w| w[5] = 1 << 16), "LID"),
            (Box::new(|w| (w[5], w[6], w[7]) = (0, 0, 0)), "neither a LID nor a GID"),
            (Box::new(|w| w[8] = 6), "path MTU"),
            (Box::new(|w| w[9] = 0), "a region at 0x0"),
            (Box::new(|w| w[10] -= 8), "where the layout needs"),
            (Box::new(|w| w[11] |= 1 << 24), "24 bits"),
            (Box::new(|w| w[HEADER_WORDS] = 1 << 24), "queue pair number"),
            (Box::new(|w| w[HEADER_WORDS] = 0), "queue pair number"),
            (
                Box::new(|w| w[HEADER_WORDS + 1] = 5),
                "queue pair number 0x5 for its worker 0 to rank 1",
            ),
            (Box::new(|w| w.truncate(HEADER_WORDS + 1)), "words, expected"),
        ];
        for (spoil, says) in cases {
            let mut w = good.clone();
            spoil(&mut w);
            let e = RankConn::decode(1, &w, &l, &Links::all(3)).unwrap_err();
            assert_eq!(e.rank, 1);
            let text = e.to_string();
            assert!(text.starts_with("rank 1's RDMA connection data is refused"), "{text}");
            assert!(text.contains(says), "{says:?} not in {text:?}");
        }
        // Data decoded as another rank's (its place in the all-gather) is refused too.
        assert!(RankConn::decode(0, &good, &l, &Links::all(3))
            .unwrap_err()
            .to_string()
            .contains("rank 1"));
    }

    /// Linked only across nodes: a rank sends no queue pair number to the ranks of its node,
    /// and one sent there (or one missing towards another node) is refused.
    #[test]
    fn queue_pairs_only_towards_other_nodes() {
        let l = layout();
        // Ranks 0 and 1 share a node; rank 2 is alone on another.
        let links = Links::between_nodes(&[5, 5, 9]);
        assert!(!links.linked(0, 1) && !links.linked(1, 1) && links.linked(1, 2));
        assert_eq!(links.ranks(), 3);
        let mut c = conn(1);
        c.qpns = (0..l.workers * l.ranks)
            .map(|i| if i % l.ranks == 2 { 100 + i as u32 } else { 0 })
            .collect();
        let words = c.encode();
        assert_eq!(RankConn::decode(1, &words, &l, &links).unwrap(), c);
        // Every pair linked: the zeros towards rank 0 are refused.
        let e = RankConn::decode(1, &words, &l, &Links::all(3)).unwrap_err().to_string();
        assert!(e.contains("queue pair number 0x0 for its worker 0 to rank 0"), "{e}");
        // A number towards rank 0, on rank 1's own node, is refused.
        let mut bad = words.clone();
        bad[HEADER_WORDS] = 77;
        let e = RankConn::decode(1, &bad, &l, &links).unwrap_err().to_string();
        assert!(e.contains("queue pair number 0x4d for its worker 0 to rank 0"), "{e}");
    }

    /// The slots tile the region: every inbound ring and outbound mirror has its own
    /// `stride` bytes, 64-aligned (the counters' alignment), inside `len`.
    #[test]
    fn layout_slots_tile_the_region() {
        let l = layout();
        let len = l.len().unwrap();
        let mut starts: Vec<usize> = Vec::new();
        for s in 0..l.all_workers() {
            for t in 0..l.workers {
                starts.push(l.inbound(s, t));
                starts.push(l.outbound(t, s));
            }
        }
        starts.sort_unstable();
        assert_eq!(starts.len(), 2 * l.all_workers() * l.workers);
        for (i, &s) in starts.iter().enumerate() {
            assert_eq!(s, i * l.stride(), "slot {i}");
            assert_eq!(s % 64, 0);
        }
        assert_eq!(starts.last().unwrap() + l.stride(), len);
        // A slot's data follows its counters and fills the rest of it.
        assert_eq!(l.stride() - l.data(), l.ring_bytes);
        assert_eq!(l.data() % 64, 0);
        assert_eq!(Layout::HEAD, std::mem::offset_of!(super::super::ring::Counters, head));
        assert_eq!(Layout::TAIL, std::mem::offset_of!(super::super::ring::Counters, tail));
        assert!(Layout { ranks: usize::MAX / 2, workers: 4, ring_bytes: 1 << 20 }.len().is_none());
    }
}
