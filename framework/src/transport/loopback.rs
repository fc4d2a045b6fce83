//! The loopback transport: per worker an in-process FIFO inbox, for a run split into fake
//! ranks in one process (`Builder::loopback_ranks`). Every envelope between fake ranks goes
//! through the real wire format and its validation.

use super::{Arrived, Transport};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering as StdOrdering};
use std::sync::Mutex;

/// One worker's inbox, and the buffers it released (reused by its next claims).
#[derive(Debug, Default)]
struct Inbox {
    /// Messages in `q`: read without the lock by an idle poll.
    pending: AtomicUsize,
    q: Mutex<VecDeque<Arrived>>,
    pool: Mutex<Vec<Vec<u8>>>,
}

/// Buffers a worker keeps for reuse.
const POOL: usize = 8;

/// The loopback transport: per worker an in-process FIFO inbox. Correctness first: a mutex
/// per message and a `Vec` per envelope.
#[derive(Debug)]
pub(crate) struct Loopback {
    inboxes: Box<[Inbox]>,
    /// Workers per fake rank.
    local_n: usize,
    token: u64,
    /// The test hook (`Builder::loopback_corrupt_first_envelope`, feature `testing`): a byte
    /// of the envelope header to flip in the first request envelope. Only header bytes, which
    /// `validate` checks before it reads a record, so a corrupted envelope is refused, never
    /// run.
    #[cfg(feature = "testing")]
    corrupt: Mutex<Option<usize>>,
}

impl Loopback {
    /// The transport of a run of `n` workers in `ranks` fake ranks.
    /// `corrupt`: the test hook's byte (always `None` without the feature `testing`).
    pub(crate) fn new(n: usize, ranks: usize, run_id: u32, corrupt: Option<usize>) -> Loopback {
        #[cfg(not(feature = "testing"))]
        let _ = corrupt;
        use std::hash::{BuildHasher, Hasher};
        // A token of this run: a random hasher's output (and the rack job's token if any).
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(run_id);
        let token = crate::rack::job_token().unwrap_or(0) ^ h.finish();
        Loopback {
            inboxes: (0..n).map(|_| Inbox::default()).collect(),
            local_n: n / ranks,
            token,
            #[cfg(feature = "testing")]
            corrupt: Mutex::new(corrupt.filter(|&at| at < crate::wire::envelope::HEADER_BYTES)),
        }
    }
}

#[cfg(feature = "testing")]
impl Loopback {
    /// The test hook: flips the chosen header byte of the first request envelope.
    fn corrupt_first(&self, mut msg: Vec<u8>) -> Vec<u8> {
        if msg.get(12) == Some(&crate::wire::envelope::KIND_REQUESTS) {
            let mut c = self.corrupt.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = c.take() {
                msg[at] ^= 0xff;
            }
        }
        msg
    }
}

impl Transport for Loopback {
    fn token(&self) -> u64 {
        self.token
    }

    fn claim(&self, from: usize, _to: usize) -> Option<Vec<u8>> {
        let mut pool = self.inboxes[from].pool.lock().unwrap_or_else(|e| e.into_inner());
        Some(pool.pop().unwrap_or_else(|| Vec::with_capacity(4096)))
    }

    fn publish(&self, from: usize, to: usize, msg: Vec<u8>) {
        #[cfg(feature = "testing")]
        let msg = self.corrupt_first(msg);
        let inbox = &self.inboxes[to];
        let mut q = inbox.q.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(Arrived { from_rank: from / self.local_n, bytes: msg });
        inbox.pending.fetch_add(1, StdOrdering::Release);
    }

    fn poll(&self, me: usize) -> Option<Arrived> {
        let inbox = &self.inboxes[me];
        if inbox.pending.load(StdOrdering::Acquire) == 0 {
            return None;
        }
        let mut q = inbox.q.lock().unwrap_or_else(|e| e.into_inner());
        let m = q.pop_front()?;
        inbox.pending.fetch_sub(1, StdOrdering::Release);
        Some(m)
    }

    fn release(&self, me: usize, msg: Vec<u8>) {
        let mut pool = self.inboxes[me].pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL {
            pool.push(msg);
        }
    }

    fn progress(&self, _me: usize) -> bool {
        false
    }

    fn describe(&self, me: usize) -> String {
        let n = self.inboxes[me].pending.load(StdOrdering::Acquire);
        format!("loopback inbox: {n} envelopes not yet taken (sends complete at once)")
    }
}
