//! The worker threads a [`super::Runtime`] keeps between its runs.
//!
//! A run used to start its workers' threads and join them at the end: per run and worker a
//! `clone`, a thread stack mapped and unmapped (with the TLB shootdowns of every unmap), a
//! signal stack, and the fibers' stacks mapped afresh, about 120 to 190 µs for an empty run
//! of 1 or 2 workers on the 2-core VM, and more with more workers, since the unmaps
//! serialise on the process's memory map (`docs/performance.md`, "What a run costs, and
//! batches sized for the rings"). Kernels run a run per search, so that was paid per
//! search.
//!
//! Now the first run of a runtime starts one thread per slot (a worker's, and the stall
//! watchdog's, `super::stall`) and each later run hands its slot's thread the run's work
//! ([`Lease::start`]); the thread runs the worker (`super::worker_thread`) exactly as a fresh
//! thread did, reports its result, keeps its fibers' stacks ([`Kept`]) and blocks on its
//! channel until the next run. Nothing of a run outlives it in the thread: the worker, its
//! context guard and its fibers are dropped before the result is sent, and the run's caller
//! waits for every result ([`Pending::wait`]) as it waited for every join.
//!
//! # Invariants
//!
//! 1. A slot's thread runs at most one job at a time, and a run never waits for another run's
//!    job: a run holds the whole pool ([`Lease`], a `Mutex::try_lock` guard) from before its
//!    first job to after its last result; a second run of the same runtime meanwhile (from
//!    another thread, or nested in a fiber of the first) gets no lease and starts threads of
//!    its own, as every run did before.
//! 2. A thread whose worker panicked (a bug in the runtime, not a user panic: those are
//!    caught inside the worker) reports the panic and ends; its slot starts a new thread at
//!    the next run. So a thread never serves a second run after unwinding out of one.
//! 3. Dropping the runtime closes every slot's channel and joins its thread: no thread of a
//!    runtime outlives it (but the one the drop runs on, if it is one of them).

use crate::error::{panic_message, Error, Result};
use crate::fiber::StackPool;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

/// What a thread keeps from one run to the next: its workers' fiber stacks (of one size: a
/// runtime's stack size never changes; one pool per worker the thread ran, several when
/// workers share it).
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub(crate) stacks: Vec<StackPool>,
}

/// A run's work for one thread, with the thread's kept state.
pub(crate) type Job = Box<dyn FnOnce(&mut Kept) -> Result<()> + Send>;

/// One slot: the channel to its thread and the thread.
#[derive(Debug)]
struct Slot {
    jobs: Sender<(Job, Sender<Result<()>>)>,
    thread: JoinHandle<()>,
}

/// The threads of a runtime's slots (module docs).
#[derive(Debug, Default)]
pub(crate) struct Pool {
    slots: Mutex<Vec<Option<Slot>>>,
}

/// A run's hold on the pool (invariant 1), or on nothing when another run holds it: jobs
/// then get threads of their own.
#[derive(Debug)]
pub(crate) struct Lease<'a> {
    slots: Option<MutexGuard<'a, Vec<Option<Slot>>>>,
}

/// A job started by [`Lease::start`], to wait for.
#[derive(Debug)]
pub(crate) enum Pending {
    /// On a slot's thread: its result comes on this channel.
    Pooled(Receiver<Result<()>>),
    /// On a thread of its own.
    Fresh(JoinHandle<Result<()>>),
}

impl Pending {
    /// Waits until the job has finished; its result, or its panic as an error.
    pub(crate) fn wait(self) -> Result<()> {
        match self {
            // The thread always sends before it drops its end; a closed channel would mean
            // it did not: say so rather than wait.
            Pending::Pooled(r) => r.recv().unwrap_or_else(|_| {
                Err(Error::Internal("a worker thread ended without a result".into()))
            }),
            Pending::Fresh(h) => {
                h.join().unwrap_or_else(|p| Err(Error::Internal(panic_message(&*p))))
            }
        }
    }
}

impl Pool {
    /// Takes the pool for one run, if no other run holds it (invariant 1).
    pub(crate) fn lease(&self) -> Lease<'_> {
        match self.slots.try_lock() {
            Ok(slots) => Lease { slots: Some(slots) },
            // A run that panicked while it held the pool (its threads reported or ended):
            // the slots are still sound (invariant 2).
            Err(TryLockError::Poisoned(e)) => Lease { slots: Some(e.into_inner()) },
            Err(TryLockError::WouldBlock) => Lease { slots: None },
        }
    }
}

impl Lease<'_> {
    /// Starts `job` on slot `slot`'s thread (started now, named `name`, if the slot has
    /// none or its thread ended), or on a thread of its own without the pool.
    pub(crate) fn start(
        &mut self,
        slot: usize,
        name: impl FnOnce() -> String,
        stack_size: usize,
        job: Job,
    ) -> std::io::Result<Pending> {
        let Some(slots) = self.slots.as_mut() else {
            let h = std::thread::Builder::new()
                .name(name())
                .stack_size(stack_size)
                .spawn(move || job(&mut Kept::default()))?;
            return Ok(Pending::Fresh(h));
        };
        if slots.len() <= slot {
            slots.resize_with(slot + 1, || None);
        }
        let (done, result) = channel();
        let mut job = (job, done);
        if let Some(s) = &slots[slot] {
            match s.jobs.send(job) {
                Ok(()) => return Ok(Pending::Pooled(result)),
                // The thread ended (invariant 2): a new one takes the job.
                Err(back) => job = back.0,
            }
        }
        if let Some(old) = slots[slot].take() {
            let _ = old.thread.join();
        }
        let s = spawn_slot(name(), stack_size)?;
        // The new thread holds the other end until it gets the job: the send cannot fail.
        let _ = s.jobs.send(job);
        slots[slot] = Some(s);
        Ok(Pending::Pooled(result))
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let slots = std::mem::take(self.slots.get_mut().unwrap_or_else(|e| e.into_inner()));
        let me = std::thread::current().id();
        for slot in slots.into_iter().flatten() {
            drop(slot.jobs);
            // A runtime dropped on one of its own threads (its last handle in a thread-local
            // of a worker) cannot wait for that thread: it ends when the drop returns.
            if slot.thread.thread().id() != me {
                let _ = slot.thread.join();
            }
        }
    }
}

/// A slot's thread: runs the jobs it receives until its channel closes, or until a job
/// panics (invariant 2).
fn spawn_slot(name: String, stack_size: usize) -> std::io::Result<Slot> {
    let (jobs, rx) = channel::<(Job, Sender<Result<()>>)>();
    let thread =
        std::thread::Builder::new().name(name).stack_size(stack_size).spawn(move || {
            let mut kept = Kept::default();
            while let Ok((job, done)) = rx.recv() {
                match catch_unwind(AssertUnwindSafe(|| job(&mut kept))) {
                    Ok(r) => {
                        let _ = done.send(r);
                    }
                    Err(p) => {
                        // Closed before the result goes: once the run has it, a job sent to
                        // this slot fails to send and gets a new thread (invariant 2), never
                        // waits in a channel nobody will read.
                        drop(rx);
                        let _ = done.send(Err(Error::Internal(panic_message(&*p))));
                        return;
                    }
                }
            }
        })?;
    Ok(Slot { jobs, thread })
}

#[cfg(all(test, not(fw_loom)))]
mod tests {
    use super::*;
    use std::thread::ThreadId;

    /// A job that sends its thread's id and how many jobs that thread ran before.
    fn probe(out: Sender<(ThreadId, usize)>) -> Job {
        Box::new(move |kept: &mut Kept| {
            // The kept stacks stand in for any kept state: count the jobs in their size.
            let runs = kept.stacks.pop().map_or(0, |s| s.size());
            kept.stacks.push(StackPool::empty(runs + 1));
            let _ = out.send((std::thread::current().id(), runs));
            Ok(())
        })
    }

    fn run(pool: &Pool, slots: usize) -> Vec<(ThreadId, usize)> {
        let (tx, rx) = channel();
        let mut lease = pool.lease();
        let pending: Vec<Pending> = (0..slots)
            .map(|i| lease.start(i, || format!("pool-test-{i}"), 64 << 10, probe(tx.clone())))
            .collect::<std::io::Result<_>>()
            .unwrap();
        for p in pending {
            p.wait().unwrap();
        }
        let mut got: Vec<_> = rx.try_iter().collect();
        got.sort_by_key(|&(_, runs)| runs);
        got
    }

    #[test]
    fn a_slot_keeps_its_thread_and_its_state_between_runs() {
        let pool = Pool::default();
        let first = run(&pool, 3);
        let second = run(&pool, 3);
        assert!(first.iter().all(|&(_, runs)| runs == 0), "{first:?}");
        assert!(second.iter().all(|&(_, runs)| runs == 1), "{second:?}");
        let ids = |v: &[(ThreadId, usize)]| {
            let mut ids: Vec<_> = v.iter().map(|&(id, _)| format!("{id:?}")).collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&first), ids(&second));
        assert!(!first.iter().any(|&(id, _)| id == std::thread::current().id()));
    }

    #[test]
    fn a_job_that_panics_ends_its_thread_and_the_slot_starts_another() {
        let pool = Pool::default();
        let first = run(&pool, 1);
        let mut lease = pool.lease();
        let boom: Job = Box::new(|_| panic!("boom"));
        let err = lease.start(0, || "pool-test".into(), 64 << 10, boom).unwrap().wait();
        assert!(matches!(err, Err(Error::Internal(m)) if m.contains("boom")));
        drop(lease);
        // A new thread, with nothing kept from the one that unwound.
        let after = run(&pool, 1);
        assert_eq!(after[0].1, 0);
        assert_ne!(after[0].0, first[0].0);
    }

    #[test]
    fn a_second_run_meanwhile_gets_threads_of_its_own() {
        let pool = Pool::default();
        let held = pool.lease();
        assert!(held.slots.is_some());
        // The pool is held: these jobs run on fresh threads, which keep nothing.
        let got = run(&pool, 2);
        assert!(got.iter().all(|&(_, runs)| runs == 0));
        drop(held);
        assert!(pool.slots.lock().unwrap().is_empty());
    }

    #[test]
    fn dropping_the_pool_ends_its_threads() {
        let pool = Pool::default();
        let (tx, rx) = channel::<()>();
        let mut lease = pool.lease();
        // The job leaves a sender in its thread's locals, dropped when the thread ends.
        let job: Job = Box::new(move |_| {
            thread_local!(static KEEP: std::cell::RefCell<Option<Sender<()>>> = const { std::cell::RefCell::new(None) });
            KEEP.with(|k| *k.borrow_mut() = Some(tx));
            Ok(())
        });
        lease.start(0, || "pool-test".into(), 64 << 10, job).unwrap().wait().unwrap();
        drop(lease);
        // The thread waits for the next run: its sender is alive.
        assert_eq!(rx.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty));
        drop(pool);
        // The thread ended (joined by the drop): its locals, and the sender, are gone.
        assert_eq!(rx.recv(), Err(std::sync::mpsc::RecvError));
    }
}
