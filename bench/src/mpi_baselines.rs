//! MPI baselines of `skein bench echo --mpi`, `ping --mpi` and `fetch-add --mpi` (feature
//! `mpi`), written with rsmpi, one thread per rank; MPI is started by skein's rack bootstrap
//! (`skein::rack::init`), which also finalises it when the process exits.
//!
//! * [`aggregated_echo`] — requests packed per destination rank into buffers (32 KiB by
//!   default), as the Graph500 reference's AML library does: a buffer is sent with
//!   `MPI_Isend` when it is full, or flushed when the rank has nothing else to do; the server
//!   packs its replies per destination the same way. Requests to the own rank are answered in
//!   place (AML calls the handler directly).
//! * [`per_message_echo`] — every request and every reply is its own message.
//! * [`ping_pong`] — blocking send and receive between ranks 0 and 1.
//! * [`aggregated_fetch_add`] — `skein bench fetch-add --mpi`: increments packed per owner
//!   rank into buffers the same way, applied by the owner with no reply; beside it the MPI
//!   one-sided version in [`crate::mpi_rma`]. Both are checked by [`check_adds`].
//!
//! Every rank receives with `MPI_Improbe` + `MPI_Mrecv` on any source and tag. A run ends
//! without a global clock: a rank that has sent all its requests and got every reply sends
//! `DONE` to every other rank, and leaves once it has `DONE` from all of them (every request
//! it could still receive came before the sender's `DONE`, and every reply it owed was
//! received before the client's). Per-rank tallies are all-gathered and checked on every
//! rank alike (requests sent = answered, the echoed tags' sums agree), so every rank reaches
//! the same verdict and the job never hangs on one rank's error.
//!
//! # Invariants
//!
//! 1. A buffer handed to a non-blocking send ([`InFlight`]) is neither written, moved out of
//!    its heap block, nor freed until MPI reports the send complete: it leaves an `InFlight`
//!    only through [`InFlight::try_finish`] or [`InFlight::wait`] after completion, and an
//!    `InFlight` dropped before that leaks its buffer.
//! 2. No communicator or request outlives the function that made it (they are not `Send`),
//!    as in `skein::rack`.
//! 3. Every function here is collective: every rank calls them in the same order with the
//!    same arguments (they come from the same command line).

use crate::traffic::{dest, quota, read_stamp, stamp, EchoSetup};
use anyhow::bail;
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Tag;
use skein_generators::splitmix::SplitMix64;
use std::time::{Duration, Instant};

const TAG_REQ: Tag = 11;
const TAG_REP: Tag = 12;
const TAG_DONE: Tag = 13;
const TAG_ADD: Tag = 14;
const TAG_PING: Tag = 15;

/// Incoming messages handled per loop pass before the rank issues and flushes again.
const RECV_PER_PASS: usize = 64;
/// Requests issued per loop pass at most (then the rank receives again).
const ISSUE_PER_PASS: usize = 256;

/// A buffer handed to `MPI_Isend`, kept with its request until the send completes
/// (invariant 1).
struct InFlight {
    req: Option<Request<'static, [u8]>>,
    buf: Option<Vec<u8>>,
}

impl InFlight {
    /// Starts sending `buf` to `dest` with `tag`.
    fn send(world: &SimpleCommunicator, dest: usize, tag: Tag, buf: Vec<u8>) -> InFlight {
        // SAFETY: `view` is the heap block of `buf`, which moves into the returned `InFlight`
        // (moving a `Vec` does not move its heap block). Invariant 1: the block is not
        // written, reallocated or freed until MPI has completed the send, so the `'static`
        // borrow handed to MPI is never used after the block is gone.
        let view: &'static [u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr(), buf.len()) };
        let rank = mpi::Rank::try_from(dest).expect("rank numbers fit MPI's int");
        let req = world.process_at_rank(rank).immediate_send_with_tag(StaticScope, view, tag);
        InFlight { req: Some(req), buf: Some(buf) }
    }

    /// The buffer back if the send has completed, else `self` unchanged.
    fn try_finish(mut self) -> Result<Vec<u8>, InFlight> {
        match self.req.take().map(Request::test) {
            Some(Ok(_)) | None => Ok(self.buf.take().unwrap_or_default()),
            Some(Err(req)) => {
                self.req = Some(req);
                Err(self)
            }
        }
    }

    /// Waits for the send and returns the buffer.
    fn wait(mut self) -> Vec<u8> {
        if let Some(req) = self.req.take() {
            req.wait();
        }
        self.buf.take().unwrap_or_default()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.req.is_some() {
            // Still being sent: leak the buffer rather than free it under MPI (invariant 1).
            // (rsmpi's request then panics on its own drop: an incomplete request is a bug.)
            std::mem::forget(self.buf.take());
        }
    }
}

/// Sends in flight and the buffers they return.
struct Sends {
    pending: Vec<InFlight>,
    spare: Vec<InFlight>,
    pool: Vec<Vec<u8>>,
    capacity: usize,
    /// [`Sends::reap_some`] tests the sends when this many are pending.
    reap_at: usize,
}

/// Fewest pending sends [`Sends::reap_some`] tests at once.
const REAP_BATCH: usize = 32;

impl Sends {
    fn new(capacity: usize) -> Sends {
        Sends {
            pending: Vec::new(),
            spare: Vec::new(),
            pool: Vec::new(),
            capacity,
            reap_at: REAP_BATCH,
        }
    }

    /// Collects completed sends once enough are pending that testing each costs little per
    /// send (small sends complete at once, so most tests succeed), or when the pool is empty.
    fn reap_some(&mut self) {
        if self.pending.len() >= self.reap_at || (self.pool.is_empty() && !self.pending.is_empty())
        {
            self.reap();
            self.reap_at = (2 * self.pending.len()).max(REAP_BATCH);
        }
    }

    /// An empty buffer (from the pool when one is back).
    fn buffer(&mut self) -> Vec<u8> {
        self.pool.pop().unwrap_or_else(|| Vec::with_capacity(self.capacity))
    }

    fn send(&mut self, world: &SimpleCommunicator, dest: usize, tag: Tag, buf: Vec<u8>) {
        self.pending.push(InFlight::send(world, dest, tag, buf));
    }

    /// Collects the completed sends' buffers.
    fn reap(&mut self) {
        std::mem::swap(&mut self.pending, &mut self.spare);
        for f in self.spare.drain(..) {
            match f.try_finish() {
                Ok(mut b) => {
                    b.clear();
                    self.pool.push(b);
                }
                Err(f) => self.pending.push(f),
            }
        }
    }

    fn wait_all(&mut self) {
        for f in self.pending.drain(..) {
            let mut b = f.wait();
            b.clear();
            self.pool.push(b);
        }
    }
}

/// What the ranks of one echo measured together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EchoTotals {
    /// Requests answered, all ranks.
    pub(crate) answered: u64,
    /// The longest rank's time from the start barrier to its last reply.
    pub(crate) seconds: f64,
}

/// One rank's tally.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sent: u64,
    answered: u64,
    sent_sum: u64,
    answered_sum: u64,
    bad: u64,
    nanos: u64,
}

impl Tally {
    fn reply(&mut self, payload: &[u8]) {
        self.answered += 1;
        match read_stamp(payload) {
            Some(t) => self.answered_sum = self.answered_sum.wrapping_add(t),
            None => self.bad += 1,
        }
    }
}

/// The part of an echo every rank runs the same way: issuing, the stop condition and the
/// final check.
struct Client {
    me: usize,
    ranks: usize,
    rng: SplitMix64,
    setup: EchoSetup,
    deadline: Instant,
    t0: Instant,
    tally: Tally,
    outstanding: usize,
    payload: Vec<u8>,
}

impl Client {
    fn new(world: &SimpleCommunicator, setup: &EchoSetup) -> Client {
        let me = usize::try_from(world.rank()).unwrap_or(0);
        let ranks = usize::try_from(world.size()).unwrap_or(1);
        world.barrier();
        let t0 = Instant::now();
        Client {
            me,
            ranks,
            rng: SplitMix64::new(setup.seed, 1 << 32 | me as u64),
            setup: *setup,
            deadline: t0 + Duration::from_secs_f64(setup.seconds),
            t0,
            tally: Tally::default(),
            outstanding: 0,
            payload: vec![0u8; setup.size],
        }
    }

    /// Whether this rank still sends requests.
    fn issuing(&self) -> bool {
        match self.setup.requests {
            Some(r) => self.tally.sent < r,
            None => Instant::now() < self.deadline,
        }
    }

    /// The next request: its destination, with its payload in `self.payload`; a request to
    /// the own rank is answered at once (and `None` returned).
    fn next(&mut self) -> Option<usize> {
        let d = dest(&mut self.rng, self.ranks, self.me, self.setup.remote_only);
        let tag = (self.me as u64) << 40 | self.tally.sent;
        stamp(&mut self.payload, tag);
        self.tally.sent += 1;
        self.tally.sent_sum = self.tally.sent_sum.wrapping_add(tag);
        if d == self.me {
            let p = std::mem::take(&mut self.payload);
            self.tally.reply(&p);
            self.payload = p;
            return None;
        }
        self.outstanding += 1;
        Some(d)
    }

    fn reply(&mut self, payload: &[u8]) {
        self.outstanding -= 1;
        self.tally.reply(payload);
    }

    /// All-gathers the tallies, checks them (every rank alike) and sums them.
    fn finish(mut self, world: &SimpleCommunicator, what: &str) -> anyhow::Result<EchoTotals> {
        self.tally.nanos = self.t0.elapsed().as_nanos() as u64;
        let t = self.tally;
        let mine = [t.sent, t.answered, t.sent_sum, t.answered_sum, t.bad, t.nanos];
        let mut all = vec![0u64; 6 * self.ranks];
        world.all_gather_into(&mine[..], &mut all[..]);
        let mut totals = EchoTotals { answered: 0, seconds: 0.0 };
        for (r, x) in all.chunks_exact(6).enumerate() {
            if x[0] != x[1] || x[2] != x[3] || x[4] != 0 {
                bail!(
                    "{what} ({} bytes): rank {r} sent {} requests, got {} answers ({} with \
                     wrong bytes), tag sums {} vs {}",
                    self.setup.size,
                    x[0],
                    x[1],
                    x[4],
                    x[2],
                    x[3]
                );
            }
            totals.answered += x[1];
            totals.seconds = totals.seconds.max(x[5] as f64 / 1e9);
        }
        Ok(totals)
    }
}

/// Receives one message if there is one: `(tag, source, length)` with its bytes in `buf`.
fn receive(
    world: &SimpleCommunicator,
    buf: &mut [u8],
) -> anyhow::Result<Option<(Tag, usize, usize)>> {
    let Some((msg, status)) = world.any_process().immediate_matched_probe() else {
        return Ok(None);
    };
    let len = usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(usize::MAX);
    let src = usize::try_from(status.source_rank()).unwrap_or(0);
    if len > buf.len() {
        bail!("rank {src} sent a message of {len} bytes, more than the {} expected", buf.len());
    }
    msg.matched_receive_into(&mut buf[..len]);
    Ok(Some((status.tag(), src, len)))
}

/// Receives up to [`RECV_PER_PASS`] messages: a `DONE` is counted in `done_from`, any other
/// is handed to `on(tag, source, bytes)`. Returns how many arrived.
fn receive_pass(
    world: &SimpleCommunicator,
    recv: &mut [u8],
    done_from: &mut usize,
    mut on: impl FnMut(Tag, usize, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let mut got = 0;
    while got < RECV_PER_PASS {
        let Some((tag, src, len)) = receive(world, recv)? else { break };
        got += 1;
        if tag == TAG_DONE {
            *done_from += 1;
        } else {
            on(tag, src, &recv[..len])?;
        }
    }
    Ok(got)
}

/// Sends `DONE` (8 bytes) to every other rank.
fn send_done(world: &SimpleCommunicator, sends: &mut Sends, me: usize, ranks: usize) {
    for r in (0..ranks).filter(|&r| r != me) {
        let mut b = sends.buffer();
        b.extend_from_slice(&0u64.to_le_bytes());
        sends.send(world, r, TAG_DONE, b);
    }
}

/// The AML-style aggregated echo: requests and replies packed per destination rank into
/// buffers of `buffer` bytes; at most `inflight` requests of a rank outstanding.
pub(crate) fn aggregated_echo(
    setup: &EchoSetup,
    buffer: usize,
    inflight: usize,
) -> anyhow::Result<EchoTotals> {
    let world = SimpleCommunicator::world();
    let size = setup.size;
    // The bytes of whole requests a buffer holds.
    let full = buffer / size * size;
    let mut sends = Sends::new(full);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let mut reqs: Vec<Vec<u8>> = (0..ranks).map(|_| Vec::with_capacity(full)).collect();
    let mut reps: Vec<Vec<u8>> = (0..ranks).map(|_| Vec::with_capacity(full)).collect();
    let mut recv = vec![0u8; full.max(8)];
    let mut c = Client::new(&world, setup);
    let (me, mut done_from, mut done_sent) = (c.me, 0usize, false);
    loop {
        // Serve and take replies.
        let got = receive_pass(&world, &mut recv, &mut done_from, |tag, src, bytes| {
            match tag {
                TAG_REQ => {
                    for p in bytes.chunks_exact(size) {
                        reps[src].extend_from_slice(p);
                        if reps[src].len() + size > full {
                            let b = std::mem::replace(&mut reps[src], sends.buffer());
                            sends.send(&world, src, TAG_REP, b);
                        }
                    }
                }
                TAG_REP => bytes.chunks_exact(size).for_each(|p| c.reply(p)),
                t => bail!("aggregated echo: unexpected message tag {t} from rank {src}"),
            }
            Ok(())
        })?;
        // Issue.
        let issuing = c.issuing();
        if issuing {
            for _ in
                0..quota(c.setup.requests, c.tally.sent, c.outstanding, inflight, ISSUE_PER_PASS)
            {
                if let Some(d) = c.next() {
                    reqs[d].extend_from_slice(&c.payload);
                    if reqs[d].len() + size > full {
                        let b = std::mem::replace(&mut reqs[d], sends.buffer());
                        sends.send(&world, d, TAG_REQ, b);
                    }
                }
            }
        }
        // Flush partial buffers when idle: nothing came in, and nothing more can be issued.
        if got == 0 {
            for d in 0..ranks {
                if !reps[d].is_empty() {
                    let b = std::mem::replace(&mut reps[d], sends.buffer());
                    sends.send(&world, d, TAG_REP, b);
                }
                if (!issuing || c.outstanding >= inflight) && !reqs[d].is_empty() {
                    let b = std::mem::replace(&mut reqs[d], sends.buffer());
                    sends.send(&world, d, TAG_REQ, b);
                }
            }
        }
        if got == 0 {
            sends.reap();
        } else {
            sends.reap_some();
        }
        if !issuing && c.outstanding == 0 && !done_sent {
            send_done(&world, &mut sends, me, ranks);
            done_sent = true;
        }
        if done_sent && done_from == ranks - 1 {
            break;
        }
    }
    sends.wait_all();
    c.finish(&world, "mpi aggregated echo")
}

/// The echo with one message per request and per reply; at most `window` requests of a rank
/// outstanding.
pub(crate) fn per_message_echo(setup: &EchoSetup, window: usize) -> anyhow::Result<EchoTotals> {
    let world = SimpleCommunicator::world();
    let size = setup.size;
    let mut sends = Sends::new(size);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let mut recv = vec![0u8; size.max(8)];
    let mut c = Client::new(&world, setup);
    let (me, mut done_from, mut done_sent) = (c.me, 0usize, false);
    loop {
        let got = receive_pass(&world, &mut recv, &mut done_from, |tag, src, bytes| {
            match tag {
                TAG_REQ => {
                    let mut b = sends.buffer();
                    b.extend_from_slice(bytes);
                    sends.send(&world, src, TAG_REP, b);
                }
                TAG_REP => c.reply(bytes),
                t => bail!("per-message echo: unexpected message tag {t} from rank {src}"),
            }
            Ok(())
        })?;
        let issuing = c.issuing();
        if issuing {
            for _ in 0..quota(c.setup.requests, c.tally.sent, c.outstanding, window, ISSUE_PER_PASS)
            {
                if let Some(d) = c.next() {
                    let mut b = sends.buffer();
                    b.extend_from_slice(&c.payload);
                    sends.send(&world, d, TAG_REQ, b);
                }
            }
        }
        if got == 0 {
            sends.reap();
        } else {
            sends.reap_some();
        }
        if !issuing && c.outstanding == 0 && !done_sent {
            send_done(&world, &mut sends, me, ranks);
            done_sent = true;
        }
        if done_sent && done_from == ranks - 1 {
            break;
        }
    }
    sends.wait_all();
    c.finish(&world, "mpi per-message echo")
}

/// What the ranks of one fetch-add baseline measured together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AddTotals {
    /// Increments applied, all ranks.
    pub(crate) ops: u64,
    /// The longest rank's time from the start barrier to its counters being final.
    pub(crate) seconds: f64,
}

/// The rank that holds counter `i` of a fetch-add baseline and its index there: counters are
/// dealt round-robin over the ranks, as Skein's are over its workers (one worker per rank
/// gives the same placement).
#[inline]
pub(crate) fn owner(i: u32, ranks: usize) -> (usize, usize) {
    (i as usize % ranks, i as usize / ranks)
}

/// How many of `k` counters rank `me` of `ranks` holds (see [`owner`]).
pub(crate) fn held(k: usize, ranks: usize, me: usize) -> usize {
    (k + ranks - 1 - me) / ranks
}

/// The weight of counter `i` in the check sum of [`check_adds`] (odd, spread over 64 bits).
#[inline]
fn weight(i: u64) -> u64 {
    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

/// The check sum of a rank's sequence: its counters' weights, one per increment.
pub(crate) fn issued_sum(seq: &[u32]) -> u64 {
    seq.iter().fold(0u64, |s, &i| s.wrapping_add(weight(u64::from(i))))
}

/// All-gathers each rank's `(increments issued, their check sum, seconds)` with what its
/// counters hold (`counters[l]` is counter `l · ranks + me`) and checks, on every rank alike,
/// that every increment was applied once to the counter it named: the counters' total is the
/// increments issued, and their weighted total is the issued check sums' total (a lost,
/// doubled or misplaced increment changes it).
pub(crate) fn check_adds(
    world: &SimpleCommunicator,
    what: &str,
    issued: u64,
    issued_check: u64,
    counters: &[u64],
    seconds: f64,
) -> anyhow::Result<AddTotals> {
    let me = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let (mut held_sum, mut held_check) = (0u64, 0u64);
    for (l, &c) in counters.iter().enumerate() {
        held_sum = held_sum.wrapping_add(c);
        held_check = held_check.wrapping_add(c.wrapping_mul(weight((l * ranks + me) as u64)));
    }
    let mine = [issued, issued_check, held_sum, held_check, seconds.to_bits()];
    let mut all = vec![0u64; 5 * ranks];
    world.all_gather_into(&mine[..], &mut all[..]);
    let mut t = [0u64; 4];
    let mut secs = 0f64;
    for x in all.chunks_exact(5) {
        for (acc, v) in t.iter_mut().zip(x) {
            *acc = acc.wrapping_add(*v);
        }
        secs = secs.max(f64::from_bits(x[4]));
    }
    if t[0] != t[2] || t[1] != t[3] {
        bail!(
            "{what}: {} increments issued, the counters hold {} (check sums {} vs {})",
            t[0],
            t[2],
            t[1],
            t[3]
        );
    }
    Ok(AddTotals { ops: t[0], seconds: secs })
}

/// The AML-style fetch-and-add: this rank applies the increments of `seq` (counter numbers
/// in `0..k`, placed by [`owner`]); one to a counter of its own rank is applied in place,
/// the others are packed per destination rank as 4-byte counter indices into buffers of
/// `buffer` bytes (sent with `MPI_Isend` when full, the partial ones once the sequence is
/// issued) and applied by the owner on receipt, with no reply. A rank issues while fewer than
/// `inflight` sends are pending. It ends with `DONE` as the echoes do (module docs).
pub(crate) fn aggregated_fetch_add(
    seq: &[u32],
    k: usize,
    buffer: usize,
    inflight: usize,
) -> anyhow::Result<AddTotals> {
    const WHAT: &str = "mpi aggregated fetch-add";
    let world = SimpleCommunicator::world();
    let me = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let full = (buffer / 4 * 4).max(4);
    let mine = held(k, ranks, me);
    let mut counters = vec![0u64; mine];
    let mut sends = Sends::new(full);
    let mut bufs: Vec<Vec<u8>> = (0..ranks).map(|_| Vec::with_capacity(full)).collect();
    let mut recv = vec![0u8; full.max(8)];
    let check = issued_sum(seq);
    world.barrier();
    let t0 = Instant::now();
    let (mut next, mut done_from, mut done_sent) = (0usize, 0usize, false);
    loop {
        let got = receive_pass(&world, &mut recv, &mut done_from, |tag, src, bytes| {
            if tag != TAG_ADD {
                bail!("{WHAT}: unexpected message tag {tag} from rank {src}");
            }
            for c in bytes.chunks_exact(4) {
                let l = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
                let Some(x) = counters.get_mut(l) else {
                    bail!("{WHAT}: rank {src} sent counter index {l}, rank {me} holds {mine}");
                };
                *x += 1;
            }
            Ok(())
        })?;
        if next < seq.len() && sends.pending.len() < inflight {
            let end = (next + ISSUE_PER_PASS).min(seq.len());
            for &i in &seq[next..end] {
                let (d, l) = owner(i, ranks);
                if d == me {
                    counters[l] += 1;
                    continue;
                }
                let b = &mut bufs[d];
                b.extend_from_slice(&(l as u32).to_le_bytes());
                if b.len() + 4 > full {
                    let b = std::mem::replace(b, sends.buffer());
                    sends.send(&world, d, TAG_ADD, b);
                }
            }
            next = end;
        }
        if next == seq.len() && !done_sent {
            for (d, b) in bufs.iter_mut().enumerate() {
                if !b.is_empty() {
                    let b = std::mem::replace(b, sends.buffer());
                    sends.send(&world, d, TAG_ADD, b);
                }
            }
            send_done(&world, &mut sends, me, ranks);
            done_sent = true;
        }
        if got == 0 {
            sends.reap();
        } else {
            sends.reap_some();
        }
        if done_sent && done_from == ranks - 1 {
            break;
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    sends.wait_all();
    check_adds(&world, WHAT, seq.len() as u64, check, &counters, seconds)
}

/// Ping-pong of `size` bytes between ranks 0 and 1: `warmup` untimed round trips, then
/// `iters` timed one by one. Rank 0 gets `(each ns, total ns)`; the other ranks `None`.
pub(crate) fn ping_pong(
    size: usize,
    iters: usize,
    warmup: usize,
) -> anyhow::Result<Option<(Vec<u64>, f64)>> {
    let world = SimpleCommunicator::world();
    let me = world.rank();
    let mut buf = vec![0u8; size];
    world.barrier();
    let mut out = None;
    let mut bad = 0u64;
    if me == 0 {
        let peer = world.process_at_rank(1);
        let mut round_trip = |i: usize, buf: &mut Vec<u8>| {
            stamp(buf, i as u64);
            peer.send_with_tag(&buf[..], TAG_PING);
            peer.receive_into_with_tag(&mut buf[..], TAG_PING);
            if read_stamp(buf) != Some(i as u64) {
                bad += 1;
            }
        };
        for i in 0..warmup {
            round_trip(i, &mut buf);
        }
        let mut each = Vec::with_capacity(iters);
        let t0 = Instant::now();
        let mut last = t0;
        for i in 0..iters {
            round_trip(i, &mut buf);
            let now = Instant::now();
            each.push((now - last).as_nanos() as u64);
            last = now;
        }
        out = Some((each, t0.elapsed().as_nanos() as f64));
    } else if me == 1 {
        let peer = world.process_at_rank(0);
        for _ in 0..warmup + iters {
            peer.receive_into_with_tag(&mut buf[..], TAG_PING);
            peer.send_with_tag(&buf[..], TAG_PING);
        }
    }
    // Rank 0's verdict reaches every rank, so all fail alike.
    let mut verdict = [bad];
    world.process_at_rank(0).broadcast_into(&mut verdict[..]);
    if verdict[0] > 0 {
        bail!("mpi ping-pong ({size} bytes): {} replies did not echo the payload", verdict[0]);
    }
    Ok(out)
}
