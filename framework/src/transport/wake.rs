//! Waking a worker that blocks in another process: one futex word per worker, in memory that
//! every rank of the node maps (the shared-memory transport's regions, `transport::shm`).
//!
//! # Why
//!
//! A worker that waits must give its core away when cores are scarce (`runtime/idle.rs`). In
//! one process it parks and the thread that makes work for it unparks it. Across ranks the
//! work comes from another process (an envelope in a ring, a credit returned, a vector posted
//! on the board): no thread of this process knows of it. A futex on a word in a `MAP_SHARED`
//! mapping is a wait point that another process can wake (`FUTEX_WAIT`/`FUTEX_WAKE` without
//! `FUTEX_PRIVATE_FLAG`: the kernel keys a shared futex by the page and offset, not by the
//! address space). Local wakers (threads of the same rank: `Sleepers::wake`) wake the same
//! word, so it is a worker's single wait point.
//!
//! # The protocol (no lost wake-up; the store-buffering argument of `Sleepers`)
//!
//! A [`WakeWord`] is [`AWAKE`] or [`ARMED`].
//!
//! * **Sleeper** (the worker that owns the word): [`WakeWord::arm`] stores `ARMED`, then a
//!   `SeqCst` fence; it then runs one more *whole* pass of its loop (which reads every ring,
//!   the board and its slots). Only if that pass found nothing does it call
//!   [`WakeWord::block`]: `FUTEX_WAIT(word, ARMED)`, which the kernel refuses at once when the
//!   word is no longer `ARMED` (compared under the futex bucket's lock). It then swaps the word
//!   back to `AWAKE` (Acquire): if a waker had already done so, it was woken.
//! * **Waker** (any thread of any rank that made work for the worker visible with a Release
//!   store: a ring's `tail` published, a ring's `head` (credit) returned, a board round posted,
//!   a slot published): a `SeqCst` fence, then [`WakeWord::wake_after_fence`] loads the word;
//!   if `ARMED`, swaps it to `AWAKE` and, if its swap took the `ARMED`, `FUTEX_WAKE`s it.
//!
//! Either the sleeper's re-check pass sees the waker's store (and does not block), or the
//! waker's load sees `ARMED` (both fences are `SeqCst`: they cannot both miss). In the second
//! case the waker swaps the word to `AWAKE` before `FUTEX_WAKE`: a sleeper that reaches
//! `FUTEX_WAIT` only afterwards finds the word changed and returns at once; one that waits
//! already is woken. So a wake-up is never lost, and the sleeper's Acquire swap, reading the
//! waker's value, orders the waker's publication before the sleeper's next pass (the waker's
//! fence is a release fence before its swap). Several wakers: one swap takes the `ARMED`,
//! the others see `AWAKE` and do nothing (the sleeper looks at everything anyway).
//!
//! # The doorbell
//!
//! A worker reads every ring another rank's worker writes to it: with `R` ranks of `W` workers
//! that is `(R − 1) · W` rings, each `tail` on a cache line of its own, and an idle pass would
//! load them all. So every writer, after its Release store of a ring's `tail` (and before its
//! `SeqCst` fence and the wake-up), also rings the reader's *doorbell*, a word beside the
//! reader's own futex word ([`WakeWord::ring_bell`]: an `AcqRel` swap to 1), and a pass reads the
//! rings only when the bell rang ([`WakeWord::answer_bell`]: a load, and when it is 1, an
//! Acquire swap to 0, then every ring until each is empty). Nothing is stranded:
//!
//! * A publication after the reader's swap rings again, and the next pass reads it.
//! * A publication before the swap: the swap reads the value of the last ring, whose
//!   `AcqRel` swap read the ring before it, and so on: every earlier writer's `tail` happens
//!   before the reader's Acquire swap, and the reads that follow see it.
//! * The sleeper's re-check pass (after `arm` and its fence) loads the bell: a writer's ring
//!   precedes the writer's fence, so either that load sees it, or the writer's load of the
//!   futex word (after its fence) sees `ARMED` and wakes the sleeper: the same store-buffering
//!   argument as for the `tail` itself. (A value later than the ring in the bell's order is
//!   the sleeper's own earlier swap, which then read the ring and was followed by a read of
//!   every ring.)
//!
//! A thread whose workers share a futex word (`thread_group`) still has a bell per worker: each
//! worker's pass answers its own.
//!
//! `FUTEX_WAIT` has a timeout ([`BLOCK_LIMIT`]) only as a safety net: it is never needed for
//! progress. [`WakeWord::block`] says whether anybody woke the worker; the worker loop counts
//! waits that ended without a wake-up and whose next pass found work
//! (`WorkerStats::park_timeouts_useful`: a lost wake-up, 0 in every test).
//!
//! # Checked
//!
//! `loom_tests`: the real [`WakeWord`] (its futex modelled by a lock and a condition
//! variable, compared under the lock as the kernel does) between a ring's writer and its
//! reader, both of which may block (the reader for bytes, the writer for credit), and between
//! two ranks of the board's all-reduce; loom reports a sleeper nobody wakes as a deadlock.
//! Without the waker's fence it finds one. The readers there read their ring only when the
//! doorbell rang, as the transport does; a bell rung after the fence loses a wake-up
//! (`loom_wake_bell_rung_after_the_fence_loses_a_wakeup`). Not modelled: several writers
//! to one reader. A model of two writers, each with a ring to one reader that re-arms,
//! deadlocks under loom 0.7 with the bell and without it (the protocol before the bell):
//! in its trace a writer's load of the futex word, after the writer's `SeqCst` fence, reads
//! a value older than the reader's `arm` before the reader's fence that came first, which
//! the fence rules forbid. It is not kept, and not explained further than that; the
//! argument above covers several writers.

use crate::sync::proto::{fence, AtomicU32};
use crate::sync::Ordering;
use std::time::Duration;

/// The word's value while its worker runs.
pub(crate) const AWAKE: u32 = 0;
/// The word's value once its worker announced that it may block.
pub(crate) const ARMED: u32 = 1;

/// The longest a worker blocks without a wake-up: a safety net, never needed for progress
/// (module docs).
pub(crate) const BLOCK_LIMIT: Duration = Duration::from_millis(50);

/// One worker's futex word, alone on its cache line (every waker of every rank reads it),
/// and the worker's doorbell beside it (module docs, "The doorbell").
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct WakeWord {
    word: AtomicU32,
    /// 1 once a writer published into one of this worker's rings since the worker last
    /// answered ([`WakeWord::ring_bell`], [`WakeWord::answer_bell`]); the worker's own slot,
    /// whichever word its thread waits on.
    bell: AtomicU32,
    /// Under loom: the kernel's wait queue of this futex.
    #[cfg(all(test, fw_loom))]
    kernel: (crate::sync::proto::Mutex<()>, crate::sync::proto::Condvar),
}

/// Bytes of a [`WakeWord`] in shared memory (a multiple of 64).
#[cfg(feature = "mpi")]
pub(crate) const WAKE_WORD_BYTES: usize = std::mem::size_of::<WakeWord>();

impl Default for WakeWord {
    fn default() -> Self {
        WakeWord {
            word: AtomicU32::new(AWAKE),
            bell: AtomicU32::new(0),
            #[cfg(all(test, fw_loom))]
            kernel: Default::default(),
        }
    }
}

/// How a [`WakeWord::block`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// A waker took the `ARMED` (before the wait, or during it).
    Woken,
    /// Nobody woke the worker: the safety net's timeout, or a spurious return.
    NotWoken,
}

impl WakeWord {
    /// The sleeper's first step: announces that the worker may block. The caller must then
    /// look at every source of work once more and block only if it found nothing.
    #[inline]
    pub(crate) fn arm(&self) {
        self.word.store(ARMED, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Withdraws [`WakeWord::arm`] (the re-check found work).
    #[inline]
    pub(crate) fn disarm(&self) {
        self.word.store(AWAKE, Ordering::Relaxed);
    }

    /// Whether the worker announced that it may block (read after a `SeqCst` fence of the
    /// caller's for the store-buffering argument).
    #[inline]
    pub(crate) fn is_armed(&self) -> bool {
        self.word.load(Ordering::Relaxed) == ARMED
    }

    /// Blocks the armed worker (after its idle re-check) until a waker takes the `ARMED`, at
    /// most `limit`; leaves the word `AWAKE`.
    pub(crate) fn block(&self, limit: Duration) -> Blocked {
        futex_wait(self, limit);
        // Acquire: a waker's swap, read here, brings its publication with it.
        if self.word.swap(AWAKE, Ordering::Acquire) == ARMED {
            Blocked::NotWoken
        } else {
            Blocked::Woken
        }
    }

    /// The waker's side, after its publication and a `SeqCst` fence: wakes the worker if it
    /// is armed. True if this call woke it.
    #[inline]
    pub(crate) fn wake_after_fence(&self) -> bool {
        if self.word.load(Ordering::Relaxed) == ARMED
            && self.word.swap(AWAKE, Ordering::Relaxed) == ARMED
        {
            futex_wake(self);
            return true;
        }
        false
    }

    /// The writer's side of the doorbell: after its Release store of a ring's `tail`, and
    /// before the `SeqCst` fence that precedes [`WakeWord::wake_after_fence`] (module docs,
    /// "The doorbell"). An `AcqRel` swap: it reads the previous writer's ring, so the reader's
    /// Acquire swap, whichever writer's value it reads, brings every earlier writer's `tail`
    /// with it, by a chain of synchronisations (without leaning on release sequences).
    #[inline]
    // The shared-memory transport (feature `mpi`) and the loom models use it.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn ring_bell(&self) {
        self.bell.swap(1, Ordering::AcqRel);
    }

    /// The reader's side of the doorbell: true if a writer rang since the last call that
    /// returned true; the caller must then read every one of its rings until each is empty
    /// (or part-way through an envelope whose rest a later publication brings, ringing
    /// again). False: no ring got a byte since (module docs).
    #[inline]
    // The shared-memory transport (feature `mpi`) and the loom models use it.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn answer_bell(&self) -> bool {
        self.bell.load(Ordering::Relaxed) != 0 && {
            // Acquire: the writers' `tail`s, stored before their rings of this value.
            self.bell.swap(0, Ordering::Acquire);
            true
        }
    }

    /// [`WakeWord::wake_after_fence`] with its fence.
    #[inline]
    // The transport fences once for several words; the tests wake one.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn wake(&self) -> bool {
        fence(Ordering::SeqCst);
        self.wake_after_fence()
    }
}

/// `FUTEX_WAIT` on `w`'s word while it is `ARMED`, at most `limit` (not private: the word may
/// be in memory shared between processes).
#[cfg(not(all(test, fw_loom)))]
fn futex_wait(w: &WakeWord, limit: Duration) {
    let ts = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: limit.subsec_nanos() as libc::c_long,
    };
    // SAFETY: the address is a live, aligned u32 (the word, in this process's heap or in a
    // mapping that outlives the workers); the timeout is a valid timespec on the stack. The
    // kernel only reads both. Any outcome (woken, EAGAIN: the word changed, ETIMEDOUT, EINTR)
    // is fine: the caller looks at the word and at its work afterwards.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.word.as_ptr(),
            libc::FUTEX_WAIT,
            ARMED,
            &ts as *const libc::timespec,
        );
    }
}

/// `FUTEX_WAKE` of one waiter of `w`'s word.
#[cfg(not(all(test, fw_loom)))]
fn futex_wake(w: &WakeWord) {
    // SAFETY: the address is a live, aligned u32; FUTEX_WAKE only looks it up in the kernel's
    // futex table.
    unsafe {
        libc::syscall(libc::SYS_futex, w.word.as_ptr(), libc::FUTEX_WAKE, 1);
    }
}

/// The futex under loom: the kernel compares the word under its bucket's lock and queues the
/// waiter atomically with that comparison; a wake takes the same lock. The timeout is not
/// modelled: progress must never need it.
#[cfg(all(test, fw_loom))]
fn futex_wait(w: &WakeWord, _limit: Duration) {
    let (lock, cv) = &w.kernel;
    let g = lock.lock().unwrap();
    if w.word.load(Ordering::Relaxed) == ARMED {
        drop(cv.wait(g).unwrap());
    }
}

#[cfg(all(test, fw_loom))]
fn futex_wake(w: &WakeWord) {
    let (lock, cv) = &w.kernel;
    let _g = lock.lock().unwrap();
    cv.notify_all();
}

/// The futex words of a run's workers, reachable by global worker id (the words of every rank
/// where the memory is shared, `transport::shm`).
pub(crate) trait WakeWords: Send + Sync + std::fmt::Debug {
    /// Global worker `g`'s word, if this process reaches it. Workers that share a thread
    /// share the word of the first of them ([`thread_group`]).
    fn word(&self, g: usize) -> Option<&WakeWord>;
    /// The threads that run rank `rank`'s workers (0 for a rank this process does not reach).
    fn threads_of(&self, rank: usize) -> usize;
    /// The cores the ranks whose words these are may run on together: the union of their
    /// CPU affinity masks ([`affinity_mask`], agreed at set-up); 0 when unknown.
    fn node_cores(&self) -> usize;
}

/// Words of a CPU affinity mask ([`affinity_mask`]): the 1,024 CPUs of glibc's `cpu_set_t`.
pub(crate) const AFFINITY_WORDS: usize = 16;

/// The CPUs the calling thread may run on (`sched_getaffinity`), bit `c` of the mask for CPU
/// `c`; all zeros where that is not known (another OS, a failed call).
pub(crate) fn affinity_mask() -> [u64; AFFINITY_WORDS] {
    let mut mask = [0u64; AFFINITY_WORDS];
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `set` is a plain bit set on our stack, zero-initialised; sched_getaffinity
        // writes at most `size_of::<cpu_set_t>()` bytes of it (on failure it is left empty),
        // and CPU_ISSET reads a bit below CPU_SETSIZE.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                for c in 0..(AFFINITY_WORDS * 64).min(libc::CPU_SETSIZE as usize) {
                    if libc::CPU_ISSET(c, &set) {
                        mask[c / 64] |= 1 << (c % 64);
                    }
                }
            }
        }
    }
    mask
}

/// The CPUs in the union of `masks` ([`affinity_mask`]s).
pub(crate) fn union_cores<'a>(masks: impl IntoIterator<Item = &'a [u64]>) -> usize {
    let mut union = [0u64; AFFINITY_WORDS];
    for m in masks {
        for (u, w) in union.iter_mut().zip(m) {
            *u |= w;
        }
    }
    union.iter().map(|w| w.count_ones() as usize).sum()
}

/// What a rank of a node said of itself at the rings' set-up (`transport::shm`), from which
/// every rank computes every rank's threads alike ([`node_threads`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankCores<'a> {
    /// Its `worker_threads` setting (0: the default).
    pub(crate) asked: usize,
    /// Its cores (`runtime::idle::cores`: a CPU quota honoured).
    pub(crate) cores: usize,
    /// Its affinity mask ([`affinity_mask`]; all zero: unknown).
    pub(crate) mask: &'a [u64],
}

/// The threads each rank of a node runs its `workers` workers on over the rings: what it
/// asked for, else its cores divided among the node's ranks that have the same affinity mask
/// (at least 1, at most one per worker). Ranks that nobody bound (`mpirun --bind-to none`)
/// share the machine's cores, and ranks in a container limited to some CPUs share those;
/// ranks bound to a core each keep theirs, and ranks bound several to a socket share its
/// cores. A rank whose mask is unknown keeps its cores.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn node_threads(ranks: &[RankCores<'_>], workers: usize) -> Vec<usize> {
    let known = |m: &[u64]| m.iter().any(|&w| w != 0);
    ranks
        .iter()
        .map(|r| {
            let t = if r.asked > 0 {
                r.asked
            } else if known(r.mask) {
                let peers = ranks.iter().filter(|q| q.mask == r.mask).count();
                r.cores / peers.max(1)
            } else {
                r.cores
            };
            t.clamp(1, workers.max(1))
        })
        .collect()
}

/// The workers (local indices of a rank of `workers`) that share a thread with worker `i`,
/// when the rank runs them on `threads` threads: thread `t` runs `t·W/T .. (t+1)·W/T`
/// (`runtime/worker/looping.rs`). Every waker of every rank computes the same groups from the
/// same counts (`transport::shm` agrees on them).
pub(crate) fn thread_group(i: usize, workers: usize, threads: usize) -> std::ops::Range<usize> {
    let t = threads.clamp(1, workers.max(1));
    // The thread of `i`: the last `k` with `k·W/T <= i`.
    let k = ((i + 1) * t).div_ceil(workers.max(1)).saturating_sub(1);
    k * workers / t..(k + 1) * workers / t
}

#[cfg(all(test, fw_loom))]
mod loom_tests;
#[cfg(test)]
mod tests;
