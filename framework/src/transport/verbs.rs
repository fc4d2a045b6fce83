//! The RDMA verbs transport (feature `rdma`): ranks on different nodes write envelopes
//! straight into each other's rings ([`super::ring`]) with one-sided RDMA writes over
//! reliable connected queue pairs; credits come back the same way. The ring logic and the
//! transport around it are the shared-memory transport's (`transport::ring` and
//! `transport::ring_link`'s [`RingLink`], the same code its tests, loom models and multi-rank
//! suites run); only the [`Medium`] differs: how bytes reach the remote ring ([`RingMem`]
//! for the mirror, [`Verbs::published`] and [`Verbs::consumed`] for the writes).
//!
//! **Status: built, linted and unit-tested without a device; never run on RDMA hardware**
//! (`docs/rack-mode.md` §4.6). On a machine without an RDMA device (`ibv_get_device_list`
//! returns NULL with ENOSYS, or no device) set-up fails on every rank, naming the rank, the
//! verbs call and the errno.
//!
//! # Resources
//!
//! Per rank: the first device with an active port ([`Device`]), a protection domain, one
//! memory region of the layout of `super::verbs_conn` (inbound rings, outbound mirrors),
//! registered once; per local worker `w`: a completion queue, and one RC queue pair per
//! other rank `r`, connected to rank `r`'s queue pair of its worker `w` (the seeds' one queue
//! pair per thread per machine). Connection data (`verbs_conn::RankConn`: QP numbers,
//! LID/GID, MTU, region address, length and rkey, first PSN) is all-gathered over MPI.
//!
//! # Data path
//!
//! * **Write** (worker `g` to worker `d` on rank `r`): [`OutRing::put`] copies the bytes
//!   into `g`'s outbound mirror of the ring (registered memory) and notes the range; after
//!   [`Writer::push`](super::ring::Writer::push) published a new `tail`, [`Verbs::published`] posts one RDMA write per range
//!   (mirror to the same offset of the remote ring), then an 8-byte inline RDMA write of the
//!   new `tail` into the remote ring's counters, all on queue pair `(g, r)`. An RC queue pair
//!   executes its writes in order, and the tail goes last: a reader that sees the tail finds
//!   the bytes before it placed (the in-order placement of writes on one queue pair that the
//!   seeds and FaRM-style rings rely on; untested here, see the status above).
//! * **Read**: the reader polls the `tail` in its own memory ([`InRing`], plain memory the
//!   NIC writes); after [`Reader::pull`](super::ring::Reader::pull) advanced `head`, [`Verbs::consumed`] posts an inline RDMA
//!   write of the new `head` into the writer's mirror counters (the credit).
//! * The mirror's bytes `at..at + n` are rewritten only after the credit says the reader read
//!   them, which it did after the write placed them: a write's source is never overwritten
//!   while the write may still read it. The tail and head words are inline (copied at post
//!   time).
//! * Completions: one write in [`SIGNAL_EVERY`] is signalled; its completion retires it and
//!   every earlier write of its queue pair (in-order completion). A failed completion ends
//!   the job naming the rank, the call and the status.
//!
//! # Invariants (the `unsafe` blocks rely on them)
//!
//! 1. Every verbs object (context, PD, MR, CQs, QPs) and the mapped region live in one
//!    [`Resources`], destroyed (QPs, CQs, MR, PD, context, then the mapping) only when the
//!    last handle drops, after every worker stopped and [`VerbsLink::close`] retired every
//!    write and passed a barrier of all ranks (no peer writes into this rank's memory any
//!    more).
//! 2. The region spans `Layout::len` bytes, page-aligned (64-aligned counters), and every
//!    ring pointer handed out lies inside it (`verbs_conn::Layout`).
//! 3. A worker's [`End`] (its [`Verbs`] medium: CQ and queue pairs; its rings' writers and
//!    readers) is used by that worker only (`transport::ring_link`); each ring has one writer
//!    and one reader, as in shm.

use super::ring::{Counters, RingMem};
use super::ring_link::{End, Medium, RingLink};
use super::verbs_conn::{Layout, Links, RankConn};
use super::wake::WakeWords;
use super::IdlePolicy;
use rdma_sys as ib;
use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Work requests a queue pair's send queue holds.
const SQ_DEPTH: u32 = 512;
/// One work request in this many is signalled (its completion retires the ones before it).
const SIGNAL_EVERY: u32 = 64;
/// How long a worker waits for room in a send queue (a peer that stopped acknowledging)
/// before ending the job.
const SQ_WAIT: Duration = Duration::from_secs(10);
/// The GID index used (0: the port's default GID).
const GID_INDEX: u8 = 0;

/// The name and text of errno `e` ("ENOSYS: Function not implemented").
pub(crate) fn errno_text(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EAGAIN => "EAGAIN",
        _ => "errno",
    };
    let text = std::io::Error::from_raw_os_error(e).to_string();
    // The OS's text without std's " (os error N)" (the number is said already).
    let text = text.strip_suffix(&format!(" (os error {e})")).unwrap_or(&text);
    format!("{name} {e}: {text}")
}

/// `call` failed with the calling thread's errno.
fn last_errno(call: &str) -> String {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    format!("{call}: {}", errno_text(e))
}

/// An opened device and the active port chosen on it.
#[derive(Debug)]
struct Device {
    ctx: *mut ib::ibv_context,
    name: String,
    port: u8,
    lid: u16,
    gid: [u8; 16],
    /// The port's active MTU (the verbs enum value).
    mtu: u32,
}

impl Device {
    /// The first device with an active port, opened; an error naming the verbs call and the
    /// errno when there is none.
    fn open_first_active() -> Result<Device, String> {
        let mut n: libc::c_int = 0;
        // SAFETY: `n` is a writable int; the list returned is freed below.
        let list = unsafe { ib::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(format!("ibv_get_device_list: no RDMA device ({})", errno_text(e)));
        }
        /// Frees the device list however this function returns.
        struct List(*mut *mut ib::ibv_device);
        impl Drop for List {
            fn drop(&mut self) {
                // SAFETY: the list `ibv_get_device_list` returned, freed once; opened
                // contexts stay valid after it is freed.
                unsafe { ib::ibv_free_device_list(self.0) }
            }
        }
        let list = List(list);
        if n <= 0 {
            return Err("ibv_get_device_list: no RDMA device (the list is empty)".into());
        }
        let mut why = Vec::new();
        for i in 0..n as usize {
            // SAFETY: `list` holds `n` device pointers.
            let dev = unsafe { *list.0.add(i) };
            // SAFETY: `dev` is a device of the list; the name is a NUL-terminated string it
            // owns, copied out at once.
            let name = unsafe { CStr::from_ptr(ib::ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: `dev` is a device of the live list.
            let ctx = unsafe { ib::ibv_open_device(dev) };
            if ctx.is_null() {
                why.push(format!("{name}: {}", last_errno("ibv_open_device")));
                continue;
            }
            match Device::active_port(ctx, &name) {
                Ok((port, lid, gid, mtu)) => return Ok(Device { ctx, name, port, lid, gid, mtu }),
                Err(e) => {
                    why.push(e);
                    // SAFETY: `ctx` was opened above and is closed once.
                    unsafe { ib::ibv_close_device(ctx) };
                }
            }
        }
        Err(format!("no active RDMA port: {}", why.join("; ")))
    }

    /// The first active port of `ctx`: its number, LID, GID and active MTU.
    fn active_port(
        ctx: *mut ib::ibv_context,
        name: &str,
    ) -> Result<(u8, u16, [u8; 16], u32), String> {
        // SAFETY: a zeroed device attribute (plain integers) that the call fills; `ctx` is
        // an open context.
        let ports = unsafe {
            let mut attr: ib::ibv_device_attr = std::mem::zeroed();
            let rc = ib::ibv_query_device(ctx, &mut attr);
            if rc != 0 {
                return Err(format!("{name}: ibv_query_device: {}", errno_text(rc)));
            }
            attr.phys_port_cnt
        };
        let mut states = Vec::new();
        for port in 1..=ports {
            // SAFETY: a zeroed port attribute (plain integers) that the call fills.
            let attr = unsafe {
                let mut attr: ib::ibv_port_attr = std::mem::zeroed();
                let rc = ib::___ibv_query_port(ctx, port, &mut attr);
                if rc != 0 {
                    return Err(format!("{name} port {port}: ibv_query_port: {}", errno_text(rc)));
                }
                attr
            };
            if attr.state != ib::ibv_port_state::IBV_PORT_ACTIVE {
                states.push(format!("port {port} state {}", attr.state));
                continue;
            }
            // SAFETY: a GID union of 16 bytes that the call fills.
            let gid = unsafe {
                let mut gid: ib::ibv_gid = std::mem::zeroed();
                let rc = ib::ibv_query_gid(ctx, port, i32::from(GID_INDEX), &mut gid);
                if rc != 0 {
                    return Err(format!("{name} port {port}: ibv_query_gid: {}", last_errno("")));
                }
                gid.raw
            };
            return Ok((port, attr.lid, gid, attr.active_mtu));
        }
        Err(format!("{name}: no active port ({})", states.join(", ")))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the context this value opened, closed once (invariant 1: after every
        // object made from it).
        unsafe { ib::ibv_close_device(self.ctx) };
    }
}

/// Whether every rank finds an active RDMA port (collective: an all-gather of every rank's
/// answer). `auto` across nodes tries verbs only then.
pub(crate) fn every_rank_has_a_port() -> bool {
    let mine = Device::open_first_active().is_ok();
    crate::rack::agree_ok(if mine { Ok(()) } else { Err(String::new()) }).is_ok()
}

/// Every verbs object of the rank and its registered region (invariant 1).
#[derive(Debug)]
pub(crate) struct Resources {
    dev: Device,
    pd: *mut ib::ibv_pd,
    base: *mut u8,
    len: usize,
    mr: *mut ib::ibv_mr,
    /// One per local worker.
    cqs: Vec<*mut ib::ibv_cq>,
    /// Queue pair `(w, r)` at `w · ranks + r` (null for this rank).
    qps: Vec<*mut ib::ibv_qp>,
}

// SAFETY: the verbs objects are thread-safe handles (libibverbs' objects may be used from any
// thread); each queue pair and CQ is used by one worker at a time (invariant 3), and the
// region is reached through the ring protocol only.
unsafe impl Send for Resources {}
// SAFETY: as above.
unsafe impl Sync for Resources {}

impl Drop for Resources {
    fn drop(&mut self) {
        // SAFETY: every object below was made by this rank's set-up and is destroyed once, in
        // the reverse order of creation (invariant 1); null entries were never made.
        unsafe {
            for &qp in &self.qps {
                if !qp.is_null() {
                    ib::ibv_destroy_qp(qp);
                }
            }
            for &cq in &self.cqs {
                ib::ibv_destroy_cq(cq);
            }
            if !self.mr.is_null() {
                ib::ibv_dereg_mr(self.mr);
            }
            if !self.pd.is_null() {
                ib::ibv_dealloc_pd(self.pd);
            }
            if !self.base.is_null() {
                libc::munmap(self.base.cast(), self.len);
            }
        }
        // `self.dev` closes the context after this.
    }
}

impl Resources {
    /// The device, a protection domain and the registered region of `len` bytes.
    fn new(len: usize) -> Result<Resources, String> {
        let dev = Device::open_first_active()?;
        let mut res = Resources {
            dev,
            pd: std::ptr::null_mut(),
            base: std::ptr::null_mut(),
            len,
            mr: std::ptr::null_mut(),
            cqs: Vec::new(),
            qps: Vec::new(),
        };
        // SAFETY: an open context.
        res.pd = unsafe { ib::ibv_alloc_pd(res.dev.ctx) };
        if res.pd.is_null() {
            return Err(last_errno("ibv_alloc_pd"));
        }
        // SAFETY: a fresh private anonymous mapping (zero-filled, page-aligned).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!("mmap of the {len}-byte ring region: {}", last_errno("mmap")));
        }
        res.base = base.cast();
        let access = ib::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE;
        // SAFETY: `pd` is live; `base..base + len` is this value's mapping, registered
        // until `Drop` deregisters it before unmapping.
        res.mr = unsafe { ib::ibv_reg_mr(res.pd, base, len, access.0 as libc::c_int) };
        if res.mr.is_null() {
            return Err(last_errno("ibv_reg_mr"));
        }
        Ok(res)
    }

    /// A completion queue for `entries` completions.
    fn add_cq(&mut self, entries: i32) -> Result<(), String> {
        // SAFETY: an open context; no completion channel, no context pointer.
        let cq = unsafe {
            ib::ibv_create_cq(self.dev.ctx, entries, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if cq.is_null() {
            return Err(last_errno("ibv_create_cq"));
        }
        self.cqs.push(cq);
        Ok(())
    }

    /// An RC queue pair on `cq`, moved to INIT on the chosen port (remote writes allowed).
    fn add_qp(&mut self, cq: *mut ib::ibv_cq) -> Result<(), String> {
        // SAFETY: a zeroed init attribute (integers and null pointers) filled in below; `pd`
        // and `cq` are live.
        let qp = unsafe {
            let mut init: ib::ibv_qp_init_attr = std::mem::zeroed();
            init.send_cq = cq;
            init.recv_cq = cq;
            init.qp_type = ib::ibv_qp_type::IBV_QPT_RC;
            init.sq_sig_all = 0;
            init.cap.max_send_wr = SQ_DEPTH;
            init.cap.max_recv_wr = 1;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = 64;
            ib::ibv_create_qp(self.pd, &mut init)
        };
        if qp.is_null() {
            return Err(last_errno("ibv_create_qp"));
        }
        self.qps.push(qp);
        // SAFETY: a zeroed QP attribute with the INIT fields set; `qp` is live.
        let rc = unsafe {
            let mut a: ib::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ib::ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = self.dev.port;
            a.qp_access_flags = ib::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
            let mask = ib::ibv_qp_attr_mask::IBV_QP_STATE
                | ib::ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
                | ib::ibv_qp_attr_mask::IBV_QP_PORT
                | ib::ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
            ib::ibv_modify_qp(qp, &mut a, mask.0 as libc::c_int)
        };
        if rc != 0 {
            return Err(format!("ibv_modify_qp to INIT: {}", errno_text(rc)));
        }
        Ok(())
    }

    /// Moves `qp` to RTR then RTS, connected to queue pair `dest_qpn` of `peer`, with this
    /// rank's first PSN `psn`.
    fn connect(
        &self,
        qp: *mut ib::ibv_qp,
        peer: &RankConn,
        dest_qpn: u32,
        psn: u32,
    ) -> Result<(), String> {
        // SAFETY: a zeroed QP attribute with the RTR fields set; `qp` is live, in INIT.
        let rc = unsafe {
            let mut a: ib::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ib::ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = self.dev.mtu.min(peer.mtu);
            a.dest_qp_num = dest_qpn;
            a.rq_psn = peer.psn;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            a.ah_attr.dlid = peer.lid;
            a.ah_attr.sl = 0;
            a.ah_attr.src_path_bits = 0;
            a.ah_attr.port_num = self.dev.port;
            if peer.lid == 0 {
                // RoCE: routed by the GID.
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid.raw = peer.gid;
                a.ah_attr.grh.sgid_index = GID_INDEX;
                a.ah_attr.grh.hop_limit = 1;
            }
            let mask = ib::ibv_qp_attr_mask::IBV_QP_STATE
                | ib::ibv_qp_attr_mask::IBV_QP_AV
                | ib::ibv_qp_attr_mask::IBV_QP_PATH_MTU
                | ib::ibv_qp_attr_mask::IBV_QP_DEST_QPN
                | ib::ibv_qp_attr_mask::IBV_QP_RQ_PSN
                | ib::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
                | ib::ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
            ib::ibv_modify_qp(qp, &mut a, mask.0 as libc::c_int)
        };
        if rc != 0 {
            return Err(format!("ibv_modify_qp to RTR (rank {}): {}", peer.rank, errno_text(rc)));
        }
        // SAFETY: as above, the RTS fields; `qp` is in RTR.
        let rc = unsafe {
            let mut a: ib::ibv_qp_attr = std::mem::zeroed();
            a.qp_state = ib::ibv_qp_state::IBV_QPS_RTS;
            a.timeout = 14;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.sq_psn = psn;
            a.max_rd_atomic = 1;
            let mask = ib::ibv_qp_attr_mask::IBV_QP_STATE
                | ib::ibv_qp_attr_mask::IBV_QP_TIMEOUT
                | ib::ibv_qp_attr_mask::IBV_QP_RETRY_CNT
                | ib::ibv_qp_attr_mask::IBV_QP_RNR_RETRY
                | ib::ibv_qp_attr_mask::IBV_QP_SQ_PSN
                | ib::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
            ib::ibv_modify_qp(qp, &mut a, mask.0 as libc::c_int)
        };
        if rc != 0 {
            return Err(format!("ibv_modify_qp to RTS (rank {}): {}", peer.rank, errno_text(rc)));
        }
        Ok(())
    }

    /// The local key of the region.
    fn lkey(&self) -> u32 {
        // SAFETY: `mr` is live (invariant 1).
        unsafe { (*self.mr).lkey }
    }

    /// The remote key of the region.
    fn rkey(&self) -> u32 {
        // SAFETY: `mr` is live (invariant 1).
        unsafe { (*self.mr).rkey }
    }
}

/// The number of queue pair `q` (0 for a null one: this rank's own place).
fn qp_num(q: *mut ib::ibv_qp) -> u32 {
    if q.is_null() {
        return 0;
    }
    // SAFETY: a non-null entry of `Resources::qps` is a live queue pair (invariant 1).
    unsafe { (*q).qp_num }
}

/// Where a remote ring is: its counters' and data's addresses in the peer's region.
#[derive(Debug, Clone, Copy)]
struct Remote {
    /// Address of the ring's slot (its counters) in the peer's region.
    slot: u64,
    rkey: u32,
}

/// The writer's view of a ring in another rank's memory (invariant 2): the local mirror's
/// counters (`head` is the credit the reader writes back) and data; `put` copies into the
/// mirror and notes the range for [`Verbs::published`] to write.
#[derive(Debug)]
pub(crate) struct OutRing {
    counters: *const Counters,
    data: *mut u8,
    cap: usize,
    /// Ranges of the mirror written since the last post, in order.
    pending: RefCell<Vec<(usize, usize)>>,
    remote: Remote,
}

// SAFETY: `counters` and `data` point into the live region (invariants 1 and 2), the mirror of
// one ring whose one writer is this value's worker (invariant 3); copies touch `at..at + len
// <= cap`.
unsafe impl RingMem for OutRing {
    fn counters(&self) -> &Counters {
        // SAFETY: invariant 2: 64-aligned counters (atomics only) inside the live region,
        // zero-filled at start.
        unsafe { &*self.counters }
    }
    fn cap(&self) -> usize {
        self.cap
    }
    fn put(&self, at: usize, src: &[u8]) {
        debug_assert!(at + src.len() <= self.cap);
        // SAFETY: inside the mirror's data (the trait's contract); the protocol gives these
        // bytes to the writer alone, and no write still reads them (module docs).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(at), src.len()) };
        self.pending.borrow_mut().push((at, src.len()));
    }
    fn get(&self, at: usize, dst: &mut [u8]) {
        debug_assert!(at + dst.len() <= self.cap);
        // SAFETY: inside the mirror's data, which only this worker writes.
        unsafe { std::ptr::copy_nonoverlapping(self.data.add(at), dst.as_mut_ptr(), dst.len()) }
    }
}

// SAFETY: see `RingMem for OutRing`; the value moves with its worker's `End`.
unsafe impl Send for OutRing {}

/// The reader's view of a ring in this rank's memory, which the writer's NIC fills
/// (invariant 2).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InRing {
    counters: *const Counters,
    data: *mut u8,
    cap: usize,
    /// The writer's mirror counters, where the credit goes.
    credit: Remote,
}

// SAFETY: as `OutRing`, for the ring's one reader.
unsafe impl RingMem for InRing {
    fn counters(&self) -> &Counters {
        // SAFETY: invariant 2, as `OutRing`.
        unsafe { &*self.counters }
    }
    fn cap(&self) -> usize {
        self.cap
    }
    fn put(&self, at: usize, src: &[u8]) {
        debug_assert!(at + src.len() <= self.cap);
        // SAFETY: inside the ring's data; never called by a reader (the writer is remote).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(at), src.len()) }
    }
    fn get(&self, at: usize, dst: &mut [u8]) {
        debug_assert!(at + dst.len() <= self.cap);
        // SAFETY: inside the ring's data; the protocol gives these bytes to the reader now
        // (the writer's tail, placed after them, said so).
        unsafe { std::ptr::copy_nonoverlapping(self.data.add(at), dst.as_mut_ptr(), dst.len()) }
    }
}

// SAFETY: see `RingMem for InRing`.
unsafe impl Send for InRing {}

/// A queue pair of a worker and its count of writes not yet retired.
#[derive(Debug)]
struct Qp {
    qp: *mut ib::ibv_qp,
    /// Writes posted and not yet retired by a signalled completion.
    outstanding: u32,
    /// Writes posted since the last signalled one.
    since_signal: u32,
}

// SAFETY: the queue pair is used by its worker only (invariant 3).
unsafe impl Send for Qp {}

/// The verbs medium of a worker's [`End`]: its completion queue and its queue pairs.
#[derive(Debug)]
pub(crate) struct Verbs {
    /// This worker's global id.
    me: usize,
    cq: *mut ib::ibv_cq,
    lkey: u32,
    /// Per rank: the queue pair to it (None for this rank).
    qps: Vec<Option<Qp>>,
    /// Workers per rank.
    workers: usize,
}

// SAFETY: the CQ and queue pairs are used by this worker only (invariant 3).
unsafe impl Send for Verbs {}

impl Medium for Verbs {
    type Out = OutRing;
    type In = InRing;
    type Shared = Arc<Resources>;
    const NAME: &'static str = "RDMA";

    /// An RDMA write wakes nobody: waiting is the networks' (timed).
    fn idle_policy(_: &Arc<Resources>) -> IdlePolicy {
        IdlePolicy::Network
    }

    fn wake_words(_: &Arc<Resources>) -> Option<Arc<dyn WakeWords>> {
        None
    }

    /// Writes the ranges the ring noted, then its new tail, into the remote ring (all on
    /// the queue pair to its rank: placed in order).
    fn published(&mut self, to: usize, ring: &OutRing, tail: u64) -> Result<(), String> {
        let r = to / self.workers;
        let ranges = std::mem::take(&mut *ring.pending.borrow_mut());
        let (data, remote) = (ring.data as u64, ring.remote);
        for (at, len) in ranges {
            let dst = remote.slot + (super::ring::COUNTERS_BYTES + at) as u64;
            self.post_write(r, Write::from_mirror(data + at as u64, len, dst, remote.rkey))?;
        }
        let word = tail.to_le_bytes();
        self.post_write(r, Write::word(&word, remote.slot + Layout::TAIL as u64, remote.rkey))
    }

    /// Writes the new head into the writer's mirror counters (the credit).
    fn consumed(&mut self, from: usize, ring: &InRing, head: u64) -> Result<(), String> {
        let word = head.to_le_bytes();
        let at = ring.credit.slot + Layout::HEAD as u64;
        self.post_write(from / self.workers, Write::word(&word, at, ring.credit.rkey))
    }

    fn progress(&mut self) -> Result<(), String> {
        self.poll_cq()
    }

    fn describe(&self) -> String {
        let in_flight: u32 = self.qps.iter().flatten().map(|q| q.outstanding).sum();
        format!("{in_flight} RDMA writes not yet retired")
    }
}

impl Verbs {
    /// Retires completed writes; an error names the rank and the status of a failed one.
    fn poll_cq(&mut self) -> Result<(), String> {
        // SAFETY: a zeroed array of plain work completions that the call fills.
        let mut wcs: [ib::ibv_wc; 16] = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: `cq` is this worker's live CQ (invariants 1 and 3); `wcs` holds 16.
            let n = unsafe { ib::ibv_poll_cq(self.cq, wcs.len() as i32, wcs.as_mut_ptr()) };
            if n < 0 {
                return Err(format!("worker {}: ibv_poll_cq: {}", self.me, errno_text(-n)));
            }
            for wc in &wcs[..n as usize] {
                let (r, covered) = ((wc.wr_id & 0xffff_ffff) as usize, (wc.wr_id >> 32) as u32);
                if wc.status != ib::ibv_wc_status::IBV_WC_SUCCESS {
                    // SAFETY: the status string is a static NUL-terminated string.
                    let what = unsafe { CStr::from_ptr(ib::ibv_wc_status_str(wc.status)) };
                    return Err(format!(
                        "worker {}: ibv_poll_cq: an RDMA write to rank {r} failed: {} (status \
                         {}, vendor error {:#x})",
                        self.me,
                        what.to_string_lossy(),
                        wc.status,
                        wc.vendor_err
                    ));
                }
                if let Some(Some(q)) = self.qps.get_mut(r) {
                    q.outstanding = q.outstanding.saturating_sub(covered);
                }
            }
            if (n as usize) < wcs.len() {
                return Ok(());
            }
        }
    }

    /// Posts one RDMA write to rank `r` ([`Write`]). Waits for room in the send queue.
    fn post_write(&mut self, r: usize, w: Write) -> Result<(), String> {
        let Write { local, len, inline, remote, rkey, signal } = w;
        let start = Instant::now();
        while self.qps[r].as_ref().is_some_and(|q| q.outstanding + 1 >= SQ_DEPTH) {
            self.poll_cq()?;
            if start.elapsed() > SQ_WAIT {
                return Err(format!(
                    "worker {}: the send queue to rank {r} stayed full for {SQ_WAIT:?} (rank {r} \
                     acknowledges no RDMA write)",
                    self.me
                ));
            }
            std::hint::spin_loop();
        }
        let lkey = self.lkey;
        let q = self.qps[r].as_mut().ok_or_else(|| format!("no queue pair to rank {r}"))?;
        q.since_signal += 1;
        // At most SQ_DEPTH / SIGNAL_EVERY signalled writes per queue pair are in flight (the
        // completion queue's size counts on it), and a full queue always holds one.
        let signal = signal || q.since_signal >= SIGNAL_EVERY;
        let mut flags = 0u32;
        if signal {
            flags |= ib::ibv_send_flags::IBV_SEND_SIGNALED.0;
        }
        if inline {
            flags |= ib::ibv_send_flags::IBV_SEND_INLINE.0;
        }
        let mut sge = ib::ibv_sge { addr: local, length: len as u32, lkey };
        // SAFETY: a zeroed work request (integers, null pointers, unions of integers) with
        // the fields of an RDMA write set; `sge` outlives the call; an inline payload is
        // copied by the call, a registered one (the mirror) is stable until retired (module
        // docs); `qp` is live and connected.
        let rc = unsafe {
            let mut wr: ib::ibv_send_wr = std::mem::zeroed();
            wr.wr_id = r as u64 | if signal { u64::from(q.since_signal) << 32 } else { 0 };
            wr.sg_list = &mut sge;
            // A zero-length write carries no bytes (`close`'s signalled marker).
            wr.num_sge = i32::from(len > 0);
            wr.opcode = ib::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            wr.send_flags = flags;
            wr.wr.rdma = ib::rdma_t { remote_addr: remote, rkey };
            let mut bad: *mut ib::ibv_send_wr = std::ptr::null_mut();
            ib::ibv_post_send(q.qp, &mut wr, &mut bad)
        };
        if rc != 0 {
            return Err(format!(
                "worker {}: ibv_post_send of an RDMA write to rank {r}: {}",
                self.me,
                errno_text(rc)
            ));
        }
        q.outstanding += 1;
        if signal {
            q.since_signal = 0;
        }
        Ok(())
    }
}

/// One RDMA write to post.
#[derive(Debug, Clone, Copy)]
struct Write {
    /// The local source address (registered memory, or any memory when `inline`).
    local: u64,
    len: usize,
    /// Copied into the work request at post time (the source may go at once after).
    inline: bool,
    /// The remote destination address and its region's key.
    remote: u64,
    rkey: u32,
    /// Signalled whatever the count (its completion retires every earlier write).
    signal: bool,
}

impl Write {
    /// `len` bytes of the registered mirror at `local` to `remote`.
    fn from_mirror(local: u64, len: usize, remote: u64, rkey: u32) -> Write {
        Write { local, len, inline: false, remote, rkey, signal: false }
    }

    /// An 8-byte counter, inline, to `remote`.
    fn word(word: &[u8; 8], remote: u64, rkey: u32) -> Write {
        Write { local: word.as_ptr() as u64, len: 8, inline: true, remote, rkey, signal: false }
    }
}

/// The runtime's transport over RDMA verbs (module docs).
pub(crate) type VerbsLink = RingLink<Verbs>;

/// Every rank's outcome of set-up step `step`, agreed (`crate::rack::agree_ok`).
fn agree<T>(step: &str, mine: Result<T, String>) -> Result<T, String> {
    crate::rack::agree_ok(mine).map_err(|e| format!("RDMA verbs transport, {step}: {e}"))
}

impl RingLink<Verbs> {
    /// Sets the transport up for `workers` workers per rank between the ranks `links` links
    /// (every pair, or the pairs on different nodes of a run that mixes it with the rings
    /// within each node: `transport::mixed`); collective: every rank calls it, on the thread
    /// that runs the run; each step agreed, module docs.
    pub(crate) fn open(
        workers: usize,
        token: u64,
        config: super::shm::Config,
        links: &Links,
    ) -> Result<VerbsLink, String> {
        use mpi::traits::*;
        let world = mpi::topology::SimpleCommunicator::world();
        let rank = usize::try_from(world.rank()).unwrap_or(0);
        let ranks = usize::try_from(world.size()).unwrap_or(1);
        if links.ranks() != ranks {
            return agree(
                "checking the ranks",
                Err(format!("{} ranks linked, in a job of {ranks}", links.ranks())),
            );
        }
        let layout =
            Layout { ranks, workers, ring_bytes: config.ring_bytes(ranks * workers * workers) };
        let len = layout.len().ok_or("the rings' size overflows")?;
        let mut res = agree("finding an RDMA device", Resources::new(len))?;
        let made = (|| {
            for _ in 0..workers {
                let entries = (ranks * (SQ_DEPTH / SIGNAL_EVERY + 2) as usize) as i32;
                res.add_cq(entries)?;
            }
            for w in 0..workers {
                for r in 0..ranks {
                    if links.linked(rank, r) {
                        res.add_qp(res.cqs[w])?;
                    } else {
                        res.qps.push(std::ptr::null_mut());
                    }
                }
            }
            Ok(())
        })();
        agree("creating the queue pairs", made)?;
        // A random first PSN per rank (24 bits), as the verbs examples do.
        let psn = (crate::rack::job_token().unwrap_or(0) ^ (rank as u64).wrapping_mul(0x9e37_79b9))
            as u32
            & 0xff_ffff;
        let mine = RankConn {
            rank,
            layout,
            lid: res.dev.lid,
            gid: res.dev.gid,
            mtu: res.dev.mtu,
            addr: res.base as u64,
            len: len as u64,
            rkey: res.rkey(),
            psn,
            qpns: res.qps.iter().map(|&q| qp_num(q)).collect(),
        };
        let words = mine.encode();
        let mut all = vec![0u64; words.len() * ranks];
        world.all_gather_into(&words[..], &mut all[..]);
        let conns: Result<Vec<RankConn>, String> = all
            .chunks_exact(words.len())
            .enumerate()
            .map(|(r, w)| RankConn::decode(r, w, &layout, links).map_err(|e| e.to_string()))
            .collect();
        let conns = agree("exchanging the connection data", conns)?;
        let connected = (|| {
            for w in 0..workers {
                for (r, peer) in conns.iter().enumerate() {
                    if links.linked(rank, r) {
                        res.connect(res.qps[w * ranks + r], peer, peer.qpn(w, rank), psn)
                            .map_err(|e| format!("worker {w}: {e}"))?;
                    }
                }
            }
            Ok(())
        })();
        agree("connecting the queue pairs", connected)?;
        let res = Arc::new(res);
        let base = res.base;
        let at = |off: usize| base.wrapping_add(off);
        let all_workers = layout.all_workers();
        let lo = rank * workers;
        let ends = (0..workers)
            .map(|w| {
                let g = lo + w;
                let out = (0..all_workers)
                    .map(|d| {
                        let r = d / workers;
                        links.linked(rank, r).then(|| {
                            let off = layout.outbound(w, d);
                            OutRing {
                                counters: at(off).cast(),
                                data: at(off + layout.data()),
                                cap: layout.ring_bytes,
                                pending: RefCell::new(Vec::new()),
                                remote: Remote {
                                    slot: conns[r].addr + layout.inbound(g, d % workers) as u64,
                                    rkey: conns[r].rkey,
                                },
                            }
                        })
                    })
                    .collect();
                let inbound = (0..all_workers)
                    .filter(|s| links.linked(s / workers, rank))
                    .map(|s| {
                        let off = layout.inbound(s, w);
                        let rs = s / workers;
                        let ring = InRing {
                            counters: at(off).cast(),
                            data: at(off + layout.data()),
                            cap: layout.ring_bytes,
                            credit: Remote {
                                slot: conns[rs].addr + layout.outbound(s % workers, g) as u64,
                                rkey: conns[rs].rkey,
                            },
                        };
                        (s, ring)
                    })
                    .collect();
                let qps = (0..ranks)
                    .map(|r| {
                        let qp = res.qps[w * ranks + r];
                        links.linked(rank, r).then_some(Qp { qp, outstanding: 0, since_signal: 0 })
                    })
                    .collect();
                let verbs = Verbs { me: g, cq: res.cqs[w], lkey: res.lkey(), qps, workers };
                End::new(verbs, out, inbound, config.max_envelope_bytes, workers)
            })
            .collect();
        world.barrier();
        if rank == 0 {
            eprintln!(
                "skein: RDMA verbs: rank 0 uses device {} port {} (LID {}, MTU code {})",
                res.dev.name, res.dev.port, res.dev.lid, res.dev.mtu
            );
        }
        Ok(RingLink::new(token, lo, ends, res, config.batch_bytes))
    }

    /// Retires every write of this rank (bounded by `limit`), then waits for every rank to
    /// have done so (collective: after it, no rank writes into another's memory, and the
    /// queue pairs and region may go; invariant 1). An error names the worker and the rank.
    pub(crate) fn close(&self, limit: Duration) -> Result<(), String> {
        use mpi::traits::*;
        let start = Instant::now();
        let mut mine = Ok(());
        for g in self.workers() {
            let r = self.with(g, |e| {
                // Unsignalled writes are retired only by a signalled one after them: a
                // signalled zero-length write behind the last of each queue pair.
                // It names a real place of the peer's region (the first ring this worker
                // writes there), though a zero-length write touches none.
                for r in 0..e.medium.qps.len() {
                    let Some(q) = &e.medium.qps[r] else { continue };
                    let Some(ring) = e.out_ring(r * e.medium.workers) else { continue };
                    if q.since_signal > 0 {
                        let Remote { slot, rkey } = ring.remote;
                        let marker = Write { signal: true, ..Write::from_mirror(0, 0, slot, rkey) };
                        e.medium.post_write(r, marker)?;
                    }
                }
                while e.medium.qps.iter().flatten().any(|q| q.outstanding > 0) {
                    e.medium.poll_cq()?;
                    if start.elapsed() > limit {
                        return Err(format!(
                            "worker {}: writes still in flight after {limit:?}",
                            e.medium.me
                        ));
                    }
                    std::thread::yield_now();
                }
                Ok(())
            });
            if r.is_err() {
                mine = r;
                break;
            }
        }
        mpi::topology::SimpleCommunicator::world().barrier();
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::super::ring::{Reader, Writer};
    use super::*;

    /// 64-aligned zeroed memory for one ring's slot (counters, then `cap` data bytes).
    struct Slot {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    }

    impl Slot {
        fn new(cap: usize) -> Slot {
            let layout =
                std::alloc::Layout::from_size_align(super::super::ring::COUNTERS_BYTES + cap, 64)
                    .unwrap();
            // SAFETY: a non-zero size; freed in `Drop` with the same layout.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            Slot { ptr, layout }
        }
    }

    impl Drop for Slot {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) }
        }
    }

    /// The writer's and reader's `RingMem`s of this module, joined by a stand-in for the
    /// NIC that does what the posted writes do (the noted ranges of the mirror to the same
    /// offsets of the remote ring, then its tail; the reader's head back into the mirror):
    /// every envelope arrives whole and in order, through wrap-around, full rings and
    /// envelopes larger than the ring.
    #[test]
    fn the_rings_over_mirrors_deliver_every_envelope_in_order() {
        let cap = 256;
        let (mirror, remote) = (Slot::new(cap), Slot::new(cap));
        let data = super::super::ring::COUNTERS_BYTES;
        let nowhere = Remote { slot: 0, rkey: 0 };
        let out = OutRing {
            counters: mirror.ptr.cast(),
            data: mirror.ptr.wrapping_add(data),
            cap,
            pending: RefCell::new(Vec::new()),
            remote: nowhere,
        };
        let inr = InRing {
            counters: remote.ptr.cast(),
            data: remote.ptr.wrapping_add(data),
            cap,
            credit: nowhere,
        };
        let (mut w, mut r) = (Writer::default(), Reader::new(1 << 20));
        let sizes = [0usize, 1, 7, 8, 9, 100, 247, 248, 249, 255, 256, 300, 1000, 5, 64];
        let msgs: Vec<Vec<u8>> = (0..200)
            .map(|i| {
                let n = sizes[i % sizes.len()];
                (0..n).map(|j| (i * 31 + j * 7) as u8).collect()
            })
            .collect();
        let (mut sent, mut got) = (0, Vec::new());
        let mut steps = 0;
        while got.len() < msgs.len() {
            steps += 1;
            assert!(steps < 100_000, "no progress: sent {sent}, got {}", got.len());
            if sent < msgs.len() && w.push(&out, &msgs[sent]) {
                sent += 1;
            }
            // The NIC: the noted ranges, then the tail.
            for (at, len) in out.pending.borrow_mut().drain(..) {
                let mut bytes = vec![0u8; len];
                out.get(at, &mut bytes);
                inr.put(at, &bytes);
            }
            inr.counters().tail.store(w.written(), crate::sync::Ordering::Release);
            while let Some(m) = r.pull(&inr, Vec::new).unwrap() {
                got.push(m);
            }
            // The credit back.
            let head = inr.counters().head.load(crate::sync::Ordering::Acquire);
            out.counters().head.store(head, crate::sync::Ordering::Release);
        }
        assert_eq!(got, msgs);
    }

    #[test]
    fn errno_text_names_the_errno() {
        let t = errno_text(libc::ENOSYS);
        assert!(t.starts_with("ENOSYS 38: "), "{t}");
        assert!(!t.contains("os error"), "{t}");
        assert!(errno_text(12345).starts_with("errno 12345: "));
    }

    /// On a machine without an RDMA device the discovery fails with the verbs call and
    /// errno named; with one, it finds an active port (these machines have none).
    #[test]
    fn discovery_names_the_call_and_the_errno() {
        match Device::open_first_active() {
            Err(e) => assert!(
                e.starts_with("ibv_get_device_list: no RDMA device (")
                    || e.starts_with("no active RDMA port: "),
                "{e}"
            ),
            Ok(d) => assert!(d.port >= 1, "{d:?}"),
        }
    }
}
