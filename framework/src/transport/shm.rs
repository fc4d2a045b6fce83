//! The shared-memory transport: ranks on one node write envelopes straight into each other's
//! rings ([`super::ring`]), with plain stores; no MPI call on the data path (feature `mpi`:
//! MPI starts the ranks and carries a run's set-up and end; the quiescence detector's
//! all-reduce goes over the rings' board, `super::board`).
//!
//! # Rings and where they live
//!
//! Every rank makes one memory file (`/dev/shm/skein-<token>-<run>-<rank>`, mode 0600) that
//! holds a ring for every (sending worker of any rank, receiving worker of this rank) pair:
//! ring `s · W + t` carries the envelopes of global worker `s` to local worker `t`, in the
//! receiver's memory, which the receiver polls. Every other rank maps the file too and writes
//! into its rings; once every rank has mapped every file, each rank unlinks its own, so that
//! nothing is left in `/dev/shm` after the job, however it ends. Pages are touched only by the
//! rings in use (a rank's own workers' rings are never used: they talk through slots).
//!
//! Setting up is collective, on the thread that runs `Runtime::run`: each step ends in an
//! all-gather of every rank's outcome, so that all ranks fail together, naming the rank and
//! the step, when one of them cannot go on (ranks on different nodes, no `/dev/shm`, too
//! little memory); the run then fails on every rank before any envelope moves.
//!
//! # Kept between runs
//!
//! A job runs many runs (a kernel runs one per search). A run that ended cleanly on every
//! rank (the outcome every rank agrees on: `main`'s value or a user panic, never an internal
//! error, a deadlock or an abort) leaves its rings to the next run of the same shape
//! ([`keep`]): every envelope was delivered (the run's close checked that no byte is left in
//! a ring or a backlog), every worker stopped, and every rank posted the same rounds on the
//! board (a run stops on a verdict all ranks reach in the same round, with no all-reduce
//! outstanding), so the next run's all-reduce starts from the board's count
//! (`runtime::quiesce_ranks::shm`). The next run takes them ([`agree_and_reuse`]) when every
//! rank kept rings of its shape (workers per rank, settings, nodes), which it says in the
//! all-gather that agrees on the settings anyway; a new set-up takes four more collectives,
//! a file made, mapped by every rank and unlinked, and fresh pages faulted in as the rings
//! fill. The mappings then live until a run of another shape replaces them, or the process
//! ends (the files are unlinked already).
//!
//! # Shape
//!
//! The transport is [`RingLink`] over the [`Shm`] medium (`transport::ring_link`, shared
//! with the RDMA verbs transport): one [`End`] per local worker, taken by that worker only;
//! publishing never fails (an envelope that does not fit waits in a per-destination backlog,
//! pushed on by `progress`; an envelope larger than the ring streams through it in pieces);
//! `progress` reads every source ring and queues the envelopes read whole for `poll`. The
//! runtime's credits bound the backlogs and the queue (at most `IN_FLIGHT` requests per
//! (client, remote trustee), each answered once). Over shared memory the bytes are in the
//! reader's memory once written: the medium only wakes the other side (next section).
//!
//! # Waking a worker of another rank
//!
//! Each region also holds one futex word per local worker ([`WakeWord`], `transport::wake`),
//! the worker's single wait point: a worker with nothing to do arms its word, looks at every
//! ring once more, and blocks on it (`runtime/idle.rs`, `Policy::Rings`). Every writer wakes
//! whom it made work for, after a `SeqCst` fence: a worker that published bytes into a ring
//! (`tail`) rings the reader's doorbell (before the fence: a word beside the reader's futex
//! word, which the reader's passes look at instead of every ring's `tail`,
//! `transport::wake`, "The doorbell") and wakes the ring's reader; a worker that read bytes
//! out of a ring (`head`: credit) wakes the ring's writer, which may wait for room; a rank
//! that posted a round on the board wakes every other rank's first worker
//! (`transport::board`). The threads of the rank wake the same words (`Sleepers`).
//!
//! Where a rank runs its workers on fewer threads than workers (`Builder::worker_threads`:
//! by default its cores divided among the node's ranks with the same affinity mask,
//! [`super::wake::node_threads`]), the workers of a thread wait on the word of its first
//! worker (`transport::wake::thread_group`): every rank says the threads it asked for, its
//! cores and its affinity mask in the set-up's all-gather, every rank computes every rank's
//! threads from them alike, and [`ShmWords`] maps a worker to its thread's word, for the
//! rings' writers (their `peer`) as for the rank's own threads.
//!
//! # Layout of a region
//!
//! The board's slot ([`BOARD_BYTES`]), then the `W` futex words of the rank's workers, each
//! with the worker's doorbell ([`WAKE_WORD_BYTES`] each), then the rings.
//!
//! # Invariants (the `unsafe` blocks rely on them)
//!
//! 1. A [`Region`] is a live `MAP_SHARED` mapping of `len` bytes until it is dropped, and it
//!    is dropped only after every worker stopped (the run's transport outlives its workers).
//! 2. Ring `i` of a region starts at `BOARD_BYTES + W · WAKE_WORD_BYTES + i · stride` and
//!    spans [`COUNTERS_BYTES`] of counters (aligned to 64: the mapping, the board, the words
//!    and `stride` are) and `cap` data bytes, inside the mapping; local worker `t`'s futex
//!    word is at `BOARD_BYTES + t · WAKE_WORD_BYTES` (zero-filled: awake).
//! 3. Each ring has one writer (the worker `s` of its pair, on the rank that mapped it to
//!    write) and one reader (the receiving worker `t`, on the owning rank): the [`End`] of
//!    a worker holds its writers and readers, and only that worker takes its [`End`].

use super::board::{BoardMem, BOARD_VALUES};
use super::ring::{Counters, RingMem, COUNTERS_BYTES};
use super::ring_link::{End, Medium, RingLink};
use super::wake::{
    affinity_mask, node_threads, thread_group, union_cores, RankCores, WakeWord, WakeWords,
    AFFINITY_WORDS, WAKE_WORD_BYTES,
};
use super::IdlePolicy;
use std::ffi::CString;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

/// The largest default ring (data bytes): with few workers, every ring this size.
pub(crate) const DEFAULT_RING_BYTES: usize = 256 << 10;
/// The smallest default ring.
const MIN_DEFAULT_RING_BYTES: usize = 16 << 10;
/// The data bytes of one rank's rings together, by default: with many workers per rank the
/// default ring shrinks (down to [`MIN_DEFAULT_RING_BYTES`]) to keep to it, since every ring
/// in use ends up touched whole (shared memory counts against `/dev/shm` and the memory of
/// the node). 16 ranks of 1 worker: 16 rings of 256 KiB; 16 ranks of 16 workers: 4,096
/// rings of 16 KiB (64 MiB per rank).
const DEFAULT_RINGS_BYTES: usize = 64 << 20;
/// The accepted ring sizes (`SKEIN_SHM_RING_BYTES`, a power of two).
const RING_BYTES_RANGE: std::ops::RangeInclusive<usize> = (4 << 10)..=(64 << 20);

/// The settings of the shared-memory transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Config {
    /// Data bytes of one ring (a power of two in [`RING_BYTES_RANGE`]); `None`: the
    /// default for the job's shape ([`Config::ring_bytes`]).
    pub(crate) ring_bytes: Option<usize>,
    /// The largest envelope a reader accepts.
    pub(crate) max_envelope_bytes: usize,
    /// The most wire bytes of a uniform batch to another rank (`Builder::rack_batch_bytes`).
    pub(crate) batch_bytes: usize,
    /// The threads this rank asked to run its workers on (`Builder::worker_threads`; 0: the
    /// default, its cores divided among the node's ranks with its affinity mask, resolved at
    /// set-up from what every rank tells: [`super::wake::node_threads`]). Workers beyond the
    /// threads share them (`runtime/worker/looping.rs`), each group waiting on the futex word
    /// of its first worker ([`ShmWords`]).
    pub(crate) threads: usize,
    /// The cores this rank may use (the runtime's `idle::cores`: its affinity, a CPU quota
    /// honoured), told to the node's other ranks at set-up.
    pub(crate) cores: usize,
}

impl Config {
    /// The ring size `SKEIN_SHM_RING_BYTES` asks for, or the default; batches of at most
    /// `batch_bytes` on the wire.
    pub(crate) fn from_env(
        max_envelope_bytes: usize,
        batch_bytes: usize,
        threads: usize,
        cores: usize,
    ) -> Result<Config, String> {
        let ring_bytes = match std::env::var("SKEIN_SHM_RING_BYTES") {
            Err(_) => None,
            Ok(v) => match v.trim().parse::<usize>() {
                Ok(n) if n.is_power_of_two() && RING_BYTES_RANGE.contains(&n) => Some(n),
                _ => {
                    return Err(format!(
                        "SKEIN_SHM_RING_BYTES={v:?}: expected a power of two from {} to {} bytes",
                        RING_BYTES_RANGE.start(),
                        RING_BYTES_RANGE.end()
                    ))
                }
            },
        };
        Ok(Config { ring_bytes, max_envelope_bytes, batch_bytes, threads, cores })
    }

    /// The data bytes of each of `rings` rings per rank: the setting, or the default for that
    /// many ([`DEFAULT_RINGS_BYTES`] shared out, a power of two from
    /// [`MIN_DEFAULT_RING_BYTES`] to [`DEFAULT_RING_BYTES`]).
    pub(crate) fn ring_bytes(&self, rings: usize) -> usize {
        self.ring_bytes.unwrap_or_else(|| {
            let share = DEFAULT_RINGS_BYTES / rings.max(1);
            // The largest power of two not above the share, within the defaults' range.
            let p = if share == 0 { 1 } else { 1 << share.ilog2() };
            p.clamp(MIN_DEFAULT_RING_BYTES, DEFAULT_RING_BYTES)
        })
    }
}

/// A mapping of a memory file (invariant 1).
#[derive(Debug)]
struct Region {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is shared memory reached only through the ring protocol's atomics and
// the copies it hands to one side at a time (invariant 3); the pointer itself may move
// between threads.
unsafe impl Send for Region {}
// SAFETY: as above: `&Region` only gives out ring views whose use the protocol orders.
unsafe impl Sync for Region {}

impl Region {
    /// Creates the memory file `path` (it must not exist), sized `len`, and maps it.
    fn create(path: &CString, len: usize) -> Result<Region, String> {
        // SAFETY: `path` is a NUL-terminated string; the flags and mode are plain integers.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(os_error("create", path));
        }
        // SAFETY: `fd` is the descriptor just opened.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            let e = os_error("size", path);
            // SAFETY: `fd` is open, and `path` names the file this call created.
            unsafe {
                libc::close(fd);
                libc::unlink(path.as_ptr());
            }
            return Err(e);
        }
        let r = Region::map_fd(fd, len, path);
        if r.is_err() {
            // SAFETY: `path` names the file this call created.
            unsafe { libc::unlink(path.as_ptr()) };
        }
        r
    }

    /// Maps the existing memory file `path`, which must be `len` bytes long.
    fn open(path: &CString, len: usize) -> Result<Region, String> {
        // SAFETY: `path` is a NUL-terminated string.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(os_error("open", path));
        }
        // A shorter file would fault when its rings are touched past its end.
        // SAFETY: `st` is a zeroed stat (a valid bit pattern) that fstat only writes; `fd` is
        // open.
        let size = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            (libc::fstat(fd, &mut st) == 0).then_some(st.st_size)
        };
        if size.and_then(|s| usize::try_from(s).ok()) != Some(len) {
            // SAFETY: `fd` is open and closed once.
            unsafe { libc::close(fd) };
            return Err(format!(
                "the shared-memory file {} is {size:?} bytes, not the {len} its rings need",
                path.to_string_lossy()
            ));
        }
        Region::map_fd(fd, len, path)
    }

    /// Maps `len` bytes of the open file `fd` (shared, read-write) and closes `fd`.
    fn map_fd(fd: libc::c_int, len: usize, path: &CString) -> Result<Region, String> {
        // SAFETY: a fresh shared mapping of an open descriptor; the kernel picks the address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        let e = (base == libc::MAP_FAILED).then(|| os_error("map", path));
        // SAFETY: `fd` is open; the mapping (if any) stays valid after it is closed.
        unsafe { libc::close(fd) };
        match e {
            Some(e) => Err(e),
            None => Ok(Region { base: base.cast(), len }),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `base..base + len` is the mapping this value made, unmapped once (invariant
        // 1: no worker uses it any more).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// `what` failed on `path`, with the OS's reason.
fn os_error(what: &str, path: &CString) -> String {
    format!(
        "cannot {what} the shared-memory file {}: {}",
        path.to_string_lossy(),
        std::io::Error::last_os_error()
    )
}

/// One ring of a region (invariant 2), and the futex word of the worker at its other end
/// (the reader for a ring this worker writes, the writer for one it reads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShmRing {
    counters: *const Counters,
    data: *mut u8,
    cap: usize,
    peer: Peer,
    /// The reader's own slot, whose doorbell a writer rings (`transport::wake`).
    reader: Peer,
}

// SAFETY: `counters` and `data` point into a live mapping (invariants 1 and 2), shared by the
// ring's one writer and one reader (invariant 3); the copies touch `at..at + len < cap`.
unsafe impl RingMem for ShmRing {
    #[inline]
    fn counters(&self) -> &Counters {
        // SAFETY: invariant 2: a `Counters` (atomics only) at a 64-aligned place of a live
        // mapping, initialised by the kernel's zero fill (two zero counters).
        unsafe { &*self.counters }
    }
    #[inline]
    fn cap(&self) -> usize {
        self.cap
    }
    #[inline]
    fn put(&self, at: usize, src: &[u8]) {
        debug_assert!(at + src.len() <= self.cap);
        // SAFETY: inside the ring's data (the trait's contract); the protocol gives these
        // bytes to the writer alone, so nothing reads or writes them meanwhile.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.data.add(at), src.len()) }
    }
    #[inline]
    fn get(&self, at: usize, dst: &mut [u8]) {
        debug_assert!(at + dst.len() <= self.cap);
        // SAFETY: as `put`, for the reader.
        unsafe { std::ptr::copy_nonoverlapping(self.data.add(at), dst.as_mut_ptr(), dst.len()) }
    }
}

// SAFETY: see `RingMem for ShmRing`: the pointers are into shared memory that the protocol
// hands to one side at a time.
unsafe impl Send for ShmRing {}

/// Another worker's futex word (invariant 2: inside a live mapping).
#[derive(Debug, Clone, Copy)]
struct Peer(*const WakeWord);

// SAFETY: a pointer to an atomic word in shared memory that outlives the workers (invariant
// 1); only atomic operations reach it.
unsafe impl Send for Peer {}

impl Peer {
    /// The word (invariant 2).
    #[inline]
    fn word(&self) -> &WakeWord {
        // SAFETY: invariant 2: a `WakeWord` (atomics) at a 64-aligned place of a live mapping,
        // which outlives every `Peer` (invariant 1).
        unsafe { &*self.0 }
    }

    /// Wakes the worker if it is armed (after the caller's `SeqCst` fence).
    #[inline]
    fn wake_after_fence(self) {
        self.word().wake_after_fence();
    }
}

/// The shared-memory medium of a worker's [`End`]: the bytes are in the reader's memory as
/// soon as they are written; each side wakes the other after publishing, and a writer rings
/// the reader's doorbell (module docs).
#[derive(Debug)]
pub(crate) struct Shm {
    /// This worker's own slot: its doorbell. Nothing is read before it rang: a region starts
    /// zero-filled (not rung, every ring empty), every publication rings, and kept rings are
    /// kept with their ends and bells, empty (module docs, "Kept between runs").
    bell: Peer,
}

impl Medium for Shm {
    type Out = ShmRing;
    type In = ShmRing;
    type Shared = ShmWords;
    const NAME: &'static str = "shared-memory";

    fn idle_policy(_: &ShmWords) -> IdlePolicy {
        IdlePolicy::Rings
    }

    fn wake_words(words: &ShmWords) -> Option<Arc<dyn WakeWords>> {
        Some(Arc::new(words.clone()))
    }

    /// After the Release store of `tail`: rings the reader's doorbell, a `SeqCst` fence, then
    /// wakes the reader if armed.
    fn published(&mut self, _to: usize, ring: &ShmRing, _tail: u64) -> Result<(), String> {
        ring.reader.word().ring_bell();
        fence(Ordering::SeqCst);
        ring.peer.wake_after_fence();
        Ok(())
    }

    /// This worker's doorbell rang since it last answered.
    #[inline]
    fn news(&mut self) -> bool {
        self.bell.word().answer_bell()
    }

    /// After the Release store of `head` (credit): the writer may wait for room.
    fn consumed(&mut self, _from: usize, ring: &ShmRing, _head: u64) -> Result<(), String> {
        fence(Ordering::SeqCst);
        ring.peer.wake_after_fence();
        Ok(())
    }
}

/// A rank's place on the board (`super::board`), at the front of its region: its count of
/// posted rounds (stored by that rank only), then its two vectors.
#[repr(C, align(64))]
struct BoardSlot {
    posted: AtomicU64,
    _pad: [u64; 7],
    values: [[u64; BOARD_VALUES]; 2],
}

/// Bytes of the board at the front of a region (a multiple of 64: the rings after it stay
/// aligned).
const BOARD_BYTES: usize = std::mem::size_of::<BoardSlot>();

/// The board's memory: the slot at the front of every rank's region (invariant 1 keeps
/// them mapped while this value lives), and the ranks' futex words.
#[derive(Debug)]
pub(crate) struct ShmBoard {
    words: ShmWords,
}

impl ShmBoard {
    fn slot(&self, r: usize) -> *mut BoardSlot {
        let reg = self.words.regions[r].as_ref();
        reg.expect("the board runs only when every rank shares this node").base.cast()
    }
}

/// The workers' futex words (invariant 2) of every rank on this node, by global worker id;
/// keeps the regions mapped while it lives (by rank: `None` for ranks of other nodes).
#[derive(Debug, Clone)]
pub(crate) struct ShmWords {
    regions: Arc<Vec<Option<Region>>>,
    workers: usize,
    /// Every rank's thread count (agreed at set-up; 0 for a rank on another node).
    threads: Arc<Vec<usize>>,
    /// Per global worker, the local index of the word it waits on: its thread's first
    /// worker's ([`thread_group`]), computed once at set-up (wakers look it up per wake).
    word_of: Arc<Vec<usize>>,
    /// The CPUs in the union of the affinity masks of this node's ranks (agreed at set-up;
    /// 0 when no rank could tell).
    node_cores: usize,
}

impl ShmWords {
    /// Global worker `g`'s word (the first of its thread's workers'), if `g` is on a rank of
    /// this node.
    fn at(&self, g: usize) -> Option<&WakeWord> {
        self.slot(g / self.workers, self.word_of[g])
    }

    /// The slot of local worker `local` of rank `rank` (its futex word and its doorbell), if
    /// that rank is on this node.
    fn slot(&self, rank: usize, local: usize) -> Option<&WakeWord> {
        let reg = self.regions.get(rank)?.as_ref()?;
        let at = BOARD_BYTES + local * WAKE_WORD_BYTES;
        debug_assert!(at + WAKE_WORD_BYTES <= reg.len);
        // SAFETY: invariant 2: a `WakeWord` (atomics, zero-filled: awake, not rung) at a
        // 64-aligned place of a live mapping, alive as long as `self` (the `Arc`).
        Some(unsafe { &*reg.base.add(at).cast::<WakeWord>() })
    }

    /// Global worker `g`'s word (a rank of this node), as a pointer for an [`End`].
    fn peer(&self, g: usize) -> Peer {
        Peer(self.at(g).expect("a worker of a rank on this node"))
    }

    /// Global worker `g`'s own slot (a rank of this node), whatever word its thread waits
    /// on: its doorbell.
    fn own(&self, g: usize) -> Peer {
        Peer(
            self.slot(g / self.workers, g % self.workers).expect("a worker of a rank on this node"),
        )
    }
}

impl WakeWords for ShmWords {
    fn word(&self, g: usize) -> Option<&WakeWord> {
        self.at(g)
    }
    fn threads_of(&self, rank: usize) -> usize {
        self.threads.get(rank).copied().unwrap_or(0)
    }
    fn node_cores(&self) -> usize {
        self.node_cores
    }
}

// SAFETY: every rank's handle reaches the same slots (the same files, mapped); `put` and
// `get` touch only the vector named, inside the slot, which the board's protocol gives to one
// side at a time.
unsafe impl BoardMem for ShmBoard {
    fn ranks(&self) -> usize {
        self.words.regions.len()
    }
    fn posted(&self, r: usize) -> &AtomicU64 {
        // SAFETY: an atomic at the 64-aligned front of a live mapping (zero-filled: 0 rounds
        // posted), alive as long as `self` (the `Arc`).
        unsafe { &(*self.slot(r)).posted }
    }
    fn put(&self, r: usize, place: usize, values: &[u64]) {
        let n = values.len().min(BOARD_VALUES);
        // SAFETY: inside rank `r`'s slot; the protocol gives this place to rank `r` alone now.
        unsafe {
            let at = std::ptr::addr_of_mut!((*self.slot(r)).values[place]).cast::<u64>();
            std::ptr::copy_nonoverlapping(values.as_ptr(), at, n);
        }
    }
    fn get(&self, r: usize, place: usize, out: &mut [u64]) {
        let n = out.len().min(BOARD_VALUES);
        // SAFETY: inside rank `r`'s slot; the protocol gives this place to readers only now.
        unsafe {
            let at = std::ptr::addr_of!((*self.slot(r)).values[place]).cast::<u64>();
            std::ptr::copy_nonoverlapping(at, out.as_mut_ptr(), n);
        }
    }
    fn wake_rank(&self, r: usize) {
        // The detector runs on each rank's first worker.
        if let Some(word) = self.words.at(r * self.words.workers) {
            word.wake_after_fence();
        }
    }
}

/// This rank's handle of the ranks' board over shared memory.
pub(crate) type Board = super::board::Board<ShmBoard>;

/// The runtime's transport over shared memory (module docs).
pub(crate) type ShmLink = RingLink<Shm>;

/// The memory file of rank `rank` for run `job_run` of the job of `token`.
fn path_of(token: u64, job_run: u32, rank: usize) -> CString {
    CString::new(format!("/dev/shm/skein-{token:016x}-{job_run}-{rank}"))
        .expect("no NUL in a formatted path")
}

/// This node's name, hashed (ranks compare it to tell whether they share a node).
fn node_hash() -> u64 {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it or
    // truncates (the hash covers the bytes up to the first NUL either way).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name =
        if rc == 0 { &buf[..buf.iter().position(|&b| b == 0).unwrap_or(buf.len())] } else { &[] };
    fnv1a(0xcbf2_9ce4_8422_2325, name)
}

/// FNV-1a of `bytes` from `h`: stable across processes (unlike std's randomly keyed hasher).
fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// `SKEIN_RANKS_PER_NODE`: at most this many consecutive ranks of one host count as one node
/// (`None`: a node is a host). It only splits hosts, never joins them: set on one machine,
/// it makes a run mix transports as across machines (tests, and measuring the mix).
pub(crate) fn ranks_per_node() -> Result<Option<usize>, String> {
    std::env::var("SKEIN_RANKS_PER_NODE").ok().map(|v| parse_ranks_per_node(&v)).transpose()
}

/// A value of `SKEIN_RANKS_PER_NODE`: a whole number, 1 or more.
fn parse_ranks_per_node(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(k) if k >= 1 => Ok(k),
        _ => {
            Err(format!("SKEIN_RANKS_PER_NODE={v:?}: expected a whole number of ranks, 1 or more"))
        }
    }
}

/// Every rank's node, as a key equal for ranks that share one (collective: the host names,
/// hashed, split by [`ranks_per_node`], all-gathered; the setting's errors agreed). Asked
/// once per process: a rank's node does not change while the job runs, so later runs take
/// the first answer (every rank keeps the same, so every rank asks at the same call).
pub(crate) fn node_keys() -> Result<Vec<u64>, String> {
    static KEYS: std::sync::OnceLock<Result<Vec<u64>, String>> = std::sync::OnceLock::new();
    KEYS.get_or_init(ask_node_keys).clone()
}

/// [`node_keys`], asked of every rank.
fn ask_node_keys() -> Result<Vec<u64>, String> {
    use mpi::traits::*;
    let world = mpi::topology::SimpleCommunicator::world();
    let rank = usize::try_from(world.rank()).unwrap_or(0);
    let ranks = usize::try_from(world.size()).unwrap_or(1);
    let split = crate::rack::agree_ok(ranks_per_node())?;
    let host = node_hash();
    let mine = [split.map_or(host, |k| fnv1a(host, &((rank / k) as u64).to_le_bytes()))];
    let mut keys = vec![0u64; ranks];
    world.all_gather_into(&mine[..], &mut keys[..]);
    Ok(keys)
}

/// The ranks of each node, in order of their first rank (`keys` of [`node_keys`]):
/// `"[0, 1], [2, 3]"`.
pub(crate) fn describe_nodes(keys: &[u64]) -> String {
    let mut groups: Vec<(u64, Vec<usize>)> = Vec::new();
    for (r, &k) in keys.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, ranks)) => ranks.push(r),
            None => groups.push((k, vec![r])),
        }
    }
    let list = |ranks: &[usize]| ranks.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
    groups.iter().map(|(_, ranks)| format!("[{}]", list(ranks))).collect::<Vec<_>>().join(", ")
}

/// The first rank on another node than rank 0 (`keys` of [`node_keys`]), if any.
pub(crate) fn other_node(keys: &[u64]) -> Option<usize> {
    keys.iter().position(|&n| n != keys[0])
}

/// The rings a clean run left for the next ([`keep`], module docs "Kept between runs"), with
/// their shape.
struct Kept {
    workers: usize,
    config: Config,
    nodes: Vec<u64>,
    link: Arc<ShmLink>,
}

static KEPT: std::sync::Mutex<Option<Kept>> = std::sync::Mutex::new(None);

/// Set-ups of rings in this process ([`ShmLink::open`] calls that made them).
static SETUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The rings this process has set up so far (a run that reuses kept rings sets up none).
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) fn setups() -> u64 {
    SETUPS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Keeps `link`, the rings of a run that ended cleanly on every rank (module docs), for the
/// next run of the same shape. Every rank of the run calls it, or none.
pub(crate) fn keep(workers: usize, config: Config, nodes: &[u64], link: Arc<ShmLink>) {
    let kept = Kept { workers, config, nodes: nodes.to_vec(), link };
    *KEPT.lock().unwrap_or_else(|e| e.into_inner()) = Some(kept);
}

/// The settings of this run's rings, agreed, and the rings the last run kept if every rank
/// kept rings of this shape (collective, one all-gather: a rank whose settings are wrong
/// fails every rank, naming itself; a rank that kept none, or rings of another shape, makes
/// every rank drop what it kept and set up anew).
pub(crate) fn agree_and_reuse(
    workers: usize,
    config: Result<Config, String>,
    nodes: &[u64],
) -> Result<(Config, Option<Arc<ShmLink>>), String> {
    use mpi::traits::*;
    let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner()).take();
    let kept = match (&config, kept) {
        (Ok(c), Some(k)) if k.workers == workers && k.config == *c && k.nodes == nodes => {
            Some(k.link)
        }
        _ => None,
    };
    // 2: this rank's settings are wrong; 1: it kept no rings for this run; 0: it did.
    let mine = [if config.is_err() { 2u8 } else { u8::from(kept.is_none()) }];
    let world = mpi::topology::SimpleCommunicator::world();
    let mut all = vec![0u8; usize::try_from(world.size()).unwrap_or(1)];
    world.all_gather_into(&mine[..], &mut all[..]);
    let config = match (config, all.iter().position(|&f| f == 2)) {
        (Err(e), _) => return Err(e),
        (Ok(_), Some(r)) => return Err(format!("rank {r} failed (its own error says why)")),
        (Ok(c), None) => c,
    };
    Ok((config, kept.filter(|_| all.iter().all(|&f| f == 0))))
}

/// Every rank's outcome of set-up step `step`, agreed (`crate::rack::agree_ok`).
fn agree<T>(step: &str, mine: Result<T, String>) -> Result<T, String> {
    crate::rack::agree_ok(mine).map_err(|e| format!("shared-memory transport, {step}: {e}"))
}

impl RingLink<Shm> {
    /// Sets the transport up for `workers` workers per rank between the ranks of each node
    /// (`nodes`: every rank's key, of [`node_keys`]): this rank's workers get rings to and
    /// from the workers of the ranks that share its node, and none to others (collective:
    /// every rank calls it, on the thread that runs the run; module docs).
    pub(crate) fn open(
        workers: usize,
        token: u64,
        job_run: u32,
        config: Config,
        nodes: &[u64],
    ) -> Result<ShmLink, String> {
        use mpi::traits::*;
        let world = mpi::topology::SimpleCommunicator::world();
        let rank = usize::try_from(world.rank()).unwrap_or(0);
        let ranks = usize::try_from(world.size()).unwrap_or(1);
        let all_workers = ranks * workers;
        let near = |r: usize| nodes[r] == nodes[rank];
        let ring_bytes = config.ring_bytes(all_workers * workers);
        // Every rank must lay its rings out alike (`SKEIN_SHM_RING_BYTES` is read per rank):
        // a rank mapping another's file with another length would fault past its end.
        // And every rank learns, of each rank of its node, the threads it asked for, its cores
        // and the CPUs it may run on, from which every rank computes alike the threads each
        // runs its workers on (`wake::node_threads`), whose groups share a futex word
        // (`ShmWords`); the union of the CPUs over the node is what the node's threads share
        // (`WakeWords::node_cores`).
        const EACH: usize = 3 + AFFINITY_WORDS;
        let mut mine = [0u64; EACH];
        mine[0] = ring_bytes as u64;
        mine[1] = config.threads as u64;
        mine[2] = config.cores as u64;
        mine[3..].copy_from_slice(&affinity_mask());
        let mut gathered = vec![0u64; EACH * ranks];
        world.all_gather_into(&mine[..], &mut gathered[..]);
        let sizes: Vec<u64> = gathered.iter().step_by(EACH).copied().collect();
        if let Some(r) = sizes.iter().position(|&b| b != sizes[0]) {
            return Err(format!(
                "every rank must use the same ring size (SKEIN_SHM_RING_BYTES): rank 0 uses {} \
                 bytes, rank {r} uses {}",
                sizes[0], sizes[r]
            ));
        }
        let here: Vec<usize> = (0..ranks).filter(|&r| near(r)).collect();
        let told: Vec<RankCores<'_>> = here
            .iter()
            .map(|&r| RankCores {
                asked: usize::try_from(gathered[EACH * r + 1]).unwrap_or(usize::MAX),
                cores: usize::try_from(gathered[EACH * r + 2]).unwrap_or(1),
                mask: &gathered[EACH * r + 3..EACH * (r + 1)],
            })
            .collect();
        let mut threads = vec![0; ranks];
        for (&r, t) in here.iter().zip(node_threads(&told, workers)) {
            threads[r] = t;
        }
        let node_cores = union_cores(told.iter().map(|t| t.mask));
        let stride = COUNTERS_BYTES + ring_bytes;
        let len = all_workers
            .checked_mul(workers)
            .and_then(|n| n.checked_mul(stride))
            .and_then(|n| n.checked_add(BOARD_BYTES + workers * WAKE_WORD_BYTES))
            .ok_or("the rings' size overflows")?;
        let own = Region::create(&path_of(token, job_run, rank), len);
        let created = own.is_ok();
        let own = agree("creating the rings", own).inspect_err(|_| {
            if created {
                // Made here, and the others failed: nobody will map it.
                // SAFETY: the path names the file this rank created.
                unsafe { libc::unlink(path_of(token, job_run, rank).as_ptr()) };
            }
        })?;
        let mut regions = Vec::with_capacity(ranks);
        let mut opened = Ok(());
        let mut own = Some(own);
        for r in 0..ranks {
            if r == rank {
                regions.push(own.take());
                continue;
            }
            if !near(r) {
                regions.push(None);
                continue;
            }
            match Region::open(&path_of(token, job_run, r), len) {
                Ok(reg) => regions.push(Some(reg)),
                Err(e) => {
                    opened = Err(e);
                    break;
                }
            }
        }
        let agreed = agree("mapping the other ranks' rings", opened);
        // Mapped everywhere (or failed everywhere): the names are no longer needed.
        // SAFETY: the path names the file this rank created.
        unsafe { libc::unlink(path_of(token, job_run, rank).as_ptr()) };
        agreed?;
        let ring = |reg: &Region, i: usize, peer: Peer, reader: Peer| {
            // SAFETY (in the closure's use below): invariant 2: ring `i < all_workers ·
            // workers` lies inside the mapping of `len` bytes.
            let at = BOARD_BYTES + workers * WAKE_WORD_BYTES + i * stride;
            debug_assert!(at + stride <= reg.len);
            ShmRing {
                counters: reg.base.wrapping_add(at).cast(),
                data: reg.base.wrapping_add(at + COUNTERS_BYTES),
                cap: ring_bytes,
                peer,
                reader,
            }
        };
        let word_of = (0..all_workers)
            .map(|g| thread_group(g % workers, workers, threads[g / workers].max(1)).start)
            .collect();
        let words = ShmWords {
            regions: Arc::new(regions),
            workers,
            threads: Arc::new(threads),
            word_of: Arc::new(word_of),
            node_cores,
        };
        let regions = &words.regions;
        let lo = rank * workers;
        let ends = (0..workers)
            .map(|t| {
                let g = lo + t;
                let out = (0..all_workers)
                    .map(|to| {
                        let r = to / workers;
                        let reg = regions[r].as_ref().filter(|_| r != rank)?;
                        Some(ring(reg, g * workers + to % workers, words.peer(to), words.own(to)))
                    })
                    .collect();
                let mine = regions[rank].as_ref().expect("this rank's own region");
                let inbound = (0..all_workers)
                    .filter(|s| s / workers != rank && near(s / workers))
                    .map(|s| (s, ring(mine, s * workers + t, words.peer(s), words.own(g))))
                    .collect();
                let shm = Shm { bell: words.own(g) };
                End::new(shm, out, inbound, config.max_envelope_bytes, workers)
            })
            .collect();
        world.barrier();
        SETUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(RingLink::new(token, lo, ends, words, config.batch_bytes))
    }

    /// This rank's handle of the ranks' board (one all-reduce at a time; module docs).
    pub(crate) fn board(&self) -> Board {
        let mine = self.workers();
        Board::new(ShmBoard { words: self.shared().clone() }, mine.start / mine.len())
    }
}

#[cfg(test)]
mod tests;
