//! Reference counting across ranks, the importer side: the *proxy*, a small allocation shaped
//! like a property that stands for a property of another rank (`docs/rack-mode.md`, 5.2). The
//! owner side, and the argument that the scheme is right, are in [`crate::runtime::export`].
//!
//! Wired into `Trust<T>` (`crate::trust`): a handle whose property lives on another rank
//! holds a proxy's address where a local handle holds the property's, with a spare bit of the
//! handle's word set (`Trust::is_proxy`), so its clone and drop stay
//! [`crate::runtime::free::clone_ref`] and [`crate::runtime::free::drop_ref`] on the proxy's
//! [`PropHead`] (first field), with the in-process proof unchanged within the rank.
//!
//! * **Made** by a remote `TrusteeRef::entrust_new` (`crate::runtime::spawn::entrust_remote`):
//!   the trustee builds the value, exports it and answers `(slot, gen, weight)` as plain
//!   bytes; [`Proxy::receive_on`] makes the proxy on the caller's rank (its *home*).
//! * **Requests** through the handle are queued with the export's wire target
//!   ([`Proxy::target`], `runtime::export::wire_target`), read from the proxy at issue time (the
//!   handle keeps it alive; the record carries the word itself, so a request still queued
//!   when the proxy is freed needs nothing from it). The owner resolves the word with its
//!   export table's lock-free lookup (`runtime::remote::trustee`, `resolve_target`).
//! * **The last drop** on the home rank ([`Proxy::last_dropped`], called by
//!   `runtime::free::proxy_dropped` after `drop_ref`'s Acquire fence) snapshots what the home
//!   rank's workers had issued to the owner and sends the `Release` control record with the
//!   proxy's weight, then frees the proxy. A drop after the run, or outside its workers, frees
//!   only the proxy ([`Proxy::forget`]; the owner's `end_of_run` has dropped or will drop the
//!   export).
//! * **A handle inside a message** (`crate::trust::travel`, through `skein::codec`): the
//!   encoding takes half of the proxy's weight ([`Proxy::export`]) into the message; the
//!   receiver on a third rank makes a new proxy of it, on the owner's rank a local handle.
//! * **Grants** (control id 5, `crate::trust::travel::send_grant`): a proxy whose weight falls
//!   below [`GRANT_BELOW`] (by an export, or received so) sends a `Grant` to its owner; the
//!   record's completion holds a count on the proxy and adds the answer's weight
//!   ([`Proxy::apply_grant`]). An export that finds weight 1 waits in its fiber for the
//!   answer (and fails after a bound, or at once in delegated context, with an error naming
//!   the limit, `docs/rack-mode.md` §5.4).
//!
//! # Invariants
//!
//! 1. A proxy is made by [`Proxy::receive_on`] (local count 1, the message's weight ≥ 1) and
//!    freed exactly once, by [`Proxy::last_dropped`] after the drop that takes its local
//!    count to zero (the tests' `Proxy::drop_handle` does that drop and then frees). It
//!    counts towards its run's id ([`crate::run_ids`]) like a property.
//! 2. `weight ≥ 1` while the proxy exists: [`Proxy::export`] moves weight out with a
//!    compare-and-swap that never leaves less than 1 (two exports racing on one proxy cannot
//!    both take the last units, as a plain `fetch_sub` of a value read before could), and at
//!    weight 1 it refuses ([`NeedsGrant`]). Weight only comes in through a grant's answer
//!    ([`Proxy::apply_grant`]).
//! 3. `owner`, `slot` and `gen` never change; the issuing path reads them through a handle,
//!    which keeps the proxy alive.
//! 4. At most one grant is outstanding (`grant_asked`); the `Grant` request holds a local count
//!    on the proxy until its completion has applied the answer, so the proxy outlives it.
//!
//! # Orderings
//!
//! Weight is moved with Relaxed read-modify-writes: only its value matters, and every export
//! or grant answer through a handle happens before that handle's drop (program order, then
//! the Release decrement), which the last drop's Acquire fence synchronizes with, so the last
//! drop reads the final weight. The `issued` snapshot is Acquire, as
//! [`crate::runtime::free::snapshot_issued`].

// `drop_handle` and `receive` are the standalone forms the tests and models call.

use crate::property::PropHead;
use crate::run_ids;
use crate::runtime::free::snapshot_issued;
use crate::runtime::run_state::WorkerCounters;
use crate::sync::proto::{AtomicBool, AtomicU64};
use crate::sync::Ordering;
use std::ptr::NonNull;

/// At or above this weight an export takes half of a proxy's weight; below, it takes 1
/// (`docs/rack-mode.md`, 5.4).
pub(crate) const HALVE_FROM: u64 = 1 << 33;

/// Below this weight a proxy asks its owner for a grant.
pub(crate) const GRANT_BELOW: u64 = 1 << 32;

/// A proxy (module docs). `#[repr(C)]` with the header first, so a handle's count is the
/// header's; 16-aligned like a property, so a handle keeps its address in 44 bits.
#[repr(C, align(16))]
pub(crate) struct Proxy {
    /// Local handles of this proxy on this rank.
    pub(crate) head: PropHead,
    /// The property's trustee (global worker id).
    owner: u32,
    /// Its export slot and generation there (the wire target).
    slot: u32,
    gen: u32,
    /// The run whose id the proxy holds.
    run: u32,
    /// The rank that made it (`u32::MAX` in the standalone tests): its handles issue and
    /// release only from there (`crate::trust`: in a loopback run a handle can reach another
    /// fake rank through shared memory, whose `issued` counts its `Release` would not cover).
    home: u32,
    /// Weight held (invariant 2).
    weight: AtomicU64,
    /// A `Grant` is outstanding (invariant 4).
    grant_asked: AtomicBool,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("owner", &self.owner)
            .field("slot", &self.slot)
            .field("gen", &self.gen)
            .field("weight", &self.weight())
            .finish_non_exhaustive()
    }
}

/// A handle leaving a proxy inside a message: the weight it carries, and a `Grant` the caller
/// must send when the proxy ran low.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub(crate) owner: usize,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    pub(crate) weight: u64,
    pub(crate) grant: Option<Grant>,
}

/// An export that found the proxy at weight 1: the handle cannot leave until a grant's answer
/// arrives (the fiber waits; in delegated context this is an error naming the limit).
/// `grant` is the request to send, if this call is the one that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a handle of export slot {slot} of trustee {owner} cannot leave this rank before a grant \
     of weight arrives (weight 1 left)"
)]
pub(crate) struct NeedsGrant {
    pub(crate) owner: usize,
    pub(crate) slot: u32,
    pub(crate) grant: Option<Grant>,
}

/// A request to the owner for more weight (`docs/rack-mode.md`, 5.2 item 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) owner: usize,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
}

/// The return of a proxy's weight to its owner, with the snapshot of the requests this rank
/// had issued to the owner: `issued[c]` for local worker `c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Release {
    pub(crate) owner: usize,
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    pub(crate) weight: u64,
    pub(crate) issued: Box<[u64]>,
}

/// A handle message that cannot make a proxy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProxyError {
    /// A handle must carry weight.
    #[error("handle of export slot {slot} of trustee {owner} arrived with zero weight")]
    ZeroWeight { owner: usize, slot: u32 },
    /// The owner is not a worker of the run.
    #[error("handle names trustee {owner}, but the run has {workers} workers")]
    Owner { owner: usize, workers: usize },
}

impl Proxy {
    /// Receiving a handle on a rank other than its owner's: a new proxy of run `run` (of
    /// `workers` workers over all ranks) with the message's weight and local count 1 (the new
    /// handle's).
    #[cfg(test)]
    pub(crate) fn receive(
        owner: usize,
        slot: u32,
        gen: u32,
        weight: u64,
        run: u32,
        workers: usize,
    ) -> Result<NonNull<Proxy>, ProxyError> {
        Proxy::receive_on(u32::MAX, owner, slot, gen, weight, run, workers)
    }

    /// The tests' `Proxy::receive` on rank `home` (the runtime's: the proxy's handles issue
    /// only there).
    pub(crate) fn receive_on(
        home: u32,
        owner: usize,
        slot: u32,
        gen: u32,
        weight: u64,
        run: u32,
        workers: usize,
    ) -> Result<NonNull<Proxy>, ProxyError> {
        if weight == 0 {
            return Err(ProxyError::ZeroWeight { owner, slot });
        }
        let owner = u32::try_from(owner)
            .ok()
            .filter(|&o| (o as usize) < workers)
            .ok_or(ProxyError::Owner { owner, workers })?;
        let proxy = Proxy {
            head: PropHead::new(),
            owner,
            slot,
            gen,
            run,
            home,
            weight: AtomicU64::new(weight),
            grant_asked: AtomicBool::new(false),
        };
        run_ids::prop_created(run);
        Ok(NonNull::from(Box::leak(Box::new(proxy))))
    }

    /// The property's trustee (global worker id).
    pub(crate) fn owner(&self) -> usize {
        self.owner as usize
    }

    /// The export slot and generation: the wire target ([`crate::runtime::export::wire_target`]).
    pub(crate) fn target(&self) -> (u32, u32) {
        (self.slot, self.gen)
    }

    /// The rank that made it.
    pub(crate) fn home(&self) -> usize {
        self.home as usize
    }

    /// The run whose id it holds.
    pub(crate) fn run(&self) -> u32 {
        self.run
    }

    /// The weight held now (diagnostics and tests; it changes under concurrent exports).
    pub(crate) fn weight(&self) -> u64 {
        self.weight.load(Ordering::Relaxed)
    }

    /// Sends a handle of this proxy away (the caller holds a handle): takes half of the
    /// weight, or 1 below [`HALVE_FROM`], never the last unit (invariant 2). Asks for a grant
    /// when the weight left is below [`GRANT_BELOW`] and none is outstanding.
    pub(crate) fn export(&self) -> Result<Outgoing, NeedsGrant> {
        self.export_with(HALVE_FROM, GRANT_BELOW)
    }

    /// [`Proxy::export`] with other thresholds (tests that reach weight 1 in a few exports).
    #[inline]
    pub(crate) fn export_with(
        &self,
        halve_from: u64,
        grant_below: u64,
    ) -> Result<Outgoing, NeedsGrant> {
        let mut w = self.weight.load(Ordering::Relaxed);
        loop {
            if w <= 1 {
                return Err(NeedsGrant {
                    owner: self.owner(),
                    slot: self.slot,
                    grant: self.ask_grant(),
                });
            }
            let take = if w >= halve_from { w / 2 } else { 1 };
            match self.weight.compare_exchange(w, w - take, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    let grant = if w - take < grant_below { self.ask_grant() } else { None };
                    return Ok(Outgoing {
                        owner: self.owner(),
                        slot: self.slot,
                        gen: self.gen,
                        weight: take,
                        grant,
                    });
                }
                Err(now) => w = now,
            }
        }
    }

    /// The wrong split that invariant 2 rules out: the amount is computed from a load and
    /// taken with `fetch_sub`, so two racing exports can both take the last units. Only for
    /// the loom model's broken variant, which must catch it.
    #[cfg(all(test, fw_loom))]
    pub(crate) fn export_fetch_sub(&self) -> Result<Outgoing, NeedsGrant> {
        let w = self.weight.load(Ordering::Relaxed);
        if w <= 1 {
            return Err(NeedsGrant {
                owner: self.owner(),
                slot: self.slot,
                grant: self.ask_grant(),
            });
        }
        let take = if w >= HALVE_FROM { w / 2 } else { 1 };
        let left = self.weight.fetch_sub(take, Ordering::Relaxed).wrapping_sub(take);
        let grant = if left < GRANT_BELOW { self.ask_grant() } else { None };
        Ok(Outgoing { owner: self.owner(), slot: self.slot, gen: self.gen, weight: take, grant })
    }

    /// A `Grant` to send if the weight is below [`GRANT_BELOW`] and none is outstanding (a
    /// proxy received with little weight asks at once).
    pub(crate) fn grant_if_low(&self) -> Option<Grant> {
        if self.weight.load(Ordering::Relaxed) < GRANT_BELOW {
            self.ask_grant()
        } else {
            None
        }
    }

    /// A `Grant` to send, unless one is outstanding (invariant 4).
    fn ask_grant(&self) -> Option<Grant> {
        if self.grant_asked.swap(true, Ordering::Relaxed) {
            return None;
        }
        Some(Grant { owner: self.owner(), slot: self.slot, gen: self.gen })
    }

    /// The answer to this proxy's `Grant`: `weight` more (`W0`), and a new grant may be asked.
    /// Called by the `Grant` request's completion, which holds a local count (invariant 4).
    pub(crate) fn apply_grant(&self, weight: u64) {
        self.weight.fetch_add(weight, Ordering::Relaxed);
        self.grant_asked.store(false, Ordering::Relaxed);
    }

    /// Drops a handle of the proxy at `p` (after its last use). When it was the last local
    /// one, the proxy is freed and the [`Release`] to send to its owner is returned, with the
    /// snapshot of `issued[c][owner]` over `counters` (this rank's workers; `issued` indexed by
    /// global trustee id, over the `workers` given to [`Proxy::receive`]).
    ///
    /// # Safety
    /// `p` was made by [`Proxy::receive`] and the caller gives up one local count of it that
    /// it holds (invariant 1); it does not use `p` afterwards.
    #[cfg(test)]
    pub(crate) unsafe fn drop_handle(
        p: NonNull<Proxy>,
        counters: &[WorkerCounters],
    ) -> Option<Release> {
        // SAFETY: caller promise — the count it holds keeps the proxy alive.
        if !crate::runtime::free::drop_ref(unsafe { &p.as_ref().head }) {
            return None;
        }
        // SAFETY: the count was the last (caller promise: made by `receive`).
        Some(unsafe { Proxy::last_dropped(p, counters) })
    }

    /// The end of a handle's drop once [`drop_ref`](crate::runtime::free::drop_ref) has
    /// returned true for the proxy at `p` (a `Trust`'s drop does the `drop_ref` itself; the
    /// tests' `Proxy::drop_handle` does both): the [`Release`] with the snapshot of `issued`
    /// over `counters`; the proxy is freed.
    ///
    /// # Safety
    /// `p` was made by [`Proxy::receive_on`], and [`drop_ref`](crate::runtime::free::drop_ref) on its head has just returned true
    /// to the caller (its count is zero and the Acquire fence has run); nothing uses `p`
    /// afterwards.
    pub(crate) unsafe fn last_dropped(p: NonNull<Proxy>, counters: &[WorkerCounters]) -> Release {
        // SAFETY: caller promise — the last count is gone but the memory is not freed yet
        // (only here, below).
        let proxy = unsafe { p.as_ref() };
        // The count is zero and `drop_ref`'s Acquire fence has run: every other handle's use
        // (its requests' `issued` bumps, its exports) happens before what follows.
        let issued = snapshot_issued(counters, proxy.owner());
        let release = Release {
            owner: proxy.owner(),
            slot: proxy.slot,
            gen: proxy.gen,
            weight: proxy.weight.load(Ordering::Relaxed),
            issued,
        };
        let run = proxy.run;
        // SAFETY: made by `Box::leak` in `receive`; the last count is gone, so nothing else
        // names it, and this is its only free (invariant 1).
        drop(unsafe { Box::from_raw(p.as_ptr()) });
        run_ids::prop_freed(run);
        release
    }

    /// Frees the proxy at `p` after its last handle's drop, returning no weight: the drop came
    /// after its run ended (the owner's `end_of_run` dropped the export already) or outside
    /// any worker of it (the weight leaks: the property is freed at the end of the run, never
    /// early).
    ///
    /// # Safety
    /// As [`Proxy::last_dropped`].
    pub(crate) unsafe fn forget(p: NonNull<Proxy>) {
        // SAFETY: caller promise: the last count is gone; made by `Box::leak` in `receive`,
        // and this is its only free.
        let proxy = unsafe { Box::from_raw(p.as_ptr()) };
        let run = proxy.run;
        drop(proxy);
        run_ids::prop_freed(run);
    }
}

#[cfg(all(test, not(fw_loom)))]
mod tests;
