//! Reference counting across ranks, the owner side: a trustee's *export table* (one slot per
//! export of a handle to another rank, holding one local count on the property) and its
//! *pending returns* (weight given back by other ranks, applied once the requests they issued
//! have been served). The importer side is [`crate::runtime::proxy`]. The design is
//! `docs/rack-mode.md`, section 5; the argument that it is right is below, next to the code
//! (it lifts the one of [`super::free`], which stays unchanged within each rank).
//!
//! Wired in a loopback split: one table per global trustee in the run state
//! (`RunState::exports`), each trustee's worker holding its [`Owner`]. A remote
//! `TrusteeRef::entrust_new` builds the property on its trustee and exports it there
//! ([`ExportTable::export`], `runtime::spawn::entrust_remote`), answering the export to the
//! caller, which holds a proxy (`crate::runtime::proxy`). Every request, `launch` and
//! `Release` through a proxy carries the export's wire target ([`wire_target`]), which the
//! serving trustee resolves with [`Owner::lookup`] (`runtime::remote::trustee`, `resolve_target`:
//! an unknown, free or stale `(slot, gen)` refuses the envelope, naming the sending rank). A
//! `Release` control record (`wire::envelope::CONTROL_RELEASE`), sent by a proxy's last drop
//! with its rank's `issued` snapshot (`runtime::free::proxy_dropped`), goes to
//! [`Owner::schedule_release`]; the worker loop applies what is ready ([`Owner::process`])
//! after polling the transport, and calls [`Owner::end_of_run`] when it stops. Tests:
//! `tests/proxy.rs` (public API, including §5.3's hard case 2) and
//! `runtime/export/wired_tests.rs` (exports and forged targets by hand). A handle inside a
//! message (`crate::trust::travel`, §5.2 item 6) is exported by its encoder (a local handle:
//! [`ExportTable::export`] on any worker of the owner's rank, or in a loopback run any
//! worker) and received on the owner's rank with [`ExportTable::receive_on_owner`], whose
//! weight is posted to the trustee's [`Owner::apply_return`] (`runtime::free::return_weight`).
//! A `Grant` control record (`wire::envelope::CONTROL_GRANT`) from a proxy running low is
//! answered by [`Owner::grant`] on the serve path (`budget += W0`; the answer carries the
//! weight to the proxy).
//!
//! The wire target of an export never has bit 63 set (generations stop at [`MAX_GEN`]): a
//! word with it ([`ADDR_TARGET`]) is an address, sent only for a loopback run's handles that
//! are still shared through memory, and refused by a validator outside loopback mode.
//!
//! # The pieces
//!
//! * [`ExportTable`] (shared by the workers of the owner rank, `Sync`): [`ExportTable::export`]
//!   makes a slot for a property of this trustee on the cold path, under the table's mutex:
//!   it takes one local count on the property ([`super::free::clone_ref`]: the slot's *export
//!   count*), sets `budget = W0` ([`W0`]) and `returned = 0`, and publishes the entry with a
//!   Release store of its state word (generation, live bit). The slot and its generation
//!   are the wire target of every remote request to the property (`docs/rack-mode.md`, 3.1:
//!   [`wire_target`]); the export message carries the whole weight `W0`.
//! * [`Owner`] (the trustee's own part, one per table, owned by the trustee's worker): the serve
//!   path's [`Owner::lookup`] (one Acquire load once the owner has seen the slot's chunk, no
//!   lock; refuses an out-of-range slot, a free
//!   one, a stale generation, a property of another trustee: [`LookupError`]), grants
//!   ([`Owner::grant`]: `budget += W0`), returns ([`Owner::apply_return`]: `returned +=
//!   weight`; at `returned == budget` the slot is recycled, generation + 1, and the export
//!   count dropped, the last local count going down today's [`super::free::release_last`]
//!   path), the pending returns ([`Owner::schedule_release`], [`Owner::process`]) and the end
//!   of a run ([`Owner::end_of_run`]).
//! * The property is reached through [`ExportedProp`]: [`PropPtr`] in the runtime, a stand-in
//!   in the tests (so that the seeded simulation and the loom model run this very code).
//!
//! # Invariants
//!
//! 1. A slot's entry is *live* (state bit [`LIVE`]) from its export until it is recycled.
//!    Only [`ExportTable::export`] makes an entry live (under the mutex, writing `prop`,
//!    `budget` and `returned` before the Release store that publishes it), and only the
//!    trustee's [`Owner`] makes one free again (under the mutex, at `returned == budget` or at
//!    the end of the run). So while an entry is live, its `prop` does not change, and only the
//!    [`Owner`] reads or writes `budget` and `returned` (after an Acquire load of the state that
//!    saw the entry live, which orders the exporter's writes before).
//! 2. Chunks never move and are freed only with the table: chunk `k` holds `64 << k` entries,
//!    its pointer is written once (Release, under the mutex) and read with Acquire.
//! 3. There is exactly one [`Owner`] per table ([`ExportTable::new`] makes both), and it is not
//!    `Sync`: the trustee's worker holds it, so `budget`/`returned` have a single writer.
//! 4. A live slot holds exactly one local count on its property (the export count), dropped
//!    exactly once, when the slot is recycled.
//! 5. Weight (`docs/rack-mode.md`, 5.3), per live slot: `budget = returned + Σ proxies'
//!    weight + Σ weight in messages (exports, grant answers, returns) + Σ weight in pending
//!    returns`, every proxy and every message holding weight ≥ 1. `budget` and `returned` are
//!    `u128`: grants add `W0 = 2^62` each, so a `u64` would wrap after four grants.
//!
//! # Why it is right
//!
//! * **Never early.** Weight moves *with* a handle, in the message that carries it, and a
//!   proxy never gives away its last unit ([`crate::runtime::proxy`]); so while a handle
//!   derived from an export exists anywhere (a proxy, a message in flight, a return not yet
//!   applied), some of the slot's weight is outside `returned`, and `returned < budget`
//!   (invariant 5). The export count is dropped only at `returned == budget`: no handle of
//!   that export exists on another rank any more. Until then the property's local count is ≥ 1,
//!   and on the owner rank the in-process argument of [`super::free`] covers local handles. No
//!   order between ranks is needed: a return can never exceed what was handed out (unlike
//!   separate increment and decrement messages, where a decrement that overtakes an increment
//!   frees early). A return that would exceed the budget can only come from a corrupt
//!   message, and is refused ([`ReleaseError::ExceedsBudget`]).
//! * **Not before the requests.** Every request issued through a handle on rank A was issued
//!   before that handle's drop (program order on its worker, `issued[c][owner]` bumped with a
//!   Release store when it is queued), which happens before the proxy's final decrement and
//!   its Acquire fence, which happen before the snapshot of `issued` in the [`Release`] (Acquire
//!   loads). So the snapshot counts every such request, and [`Owner::process`] applies the
//!   return only once `served_from(c) ≥ issued[c]` for every client `c` of A. **Transport
//!   conditions:** reliable delivery, and per-pair request order (requests from one client to
//!   one trustee are served in the order they were issued, so "served `issued[c]` from `c`"
//!   means "served these requests"). No order between a `Release` and the requests is needed:
//!   the `Release` waits. A return posted on the owner rank by the receipt of a handle
//!   ([`ExportTable::receive_on_owner`]) carries no snapshot: the sender's requests are covered
//!   by its own proxy's `Release`, and the new local handle by the local count.
//! * **Exactly once.** The property is freed only by [`super::free::release_last`] on the drop
//!   that takes its local count to zero: export counts are local counts (invariant 4), so the
//!   in-process argument applies unchanged, including its own snapshot of the owner rank's
//!   local clients.
//! * **Hard case 1** (a handle sent to a third rank C while the sender drops its own): the
//!   message holds half of the sender's weight, so `returned < budget` until C's proxy made
//!   from it is released, whatever the order of A's `Release`, C's receipt and C's `Release`.
//! * **Hard case 2** (the last handle on A dropped while A's requests are still queued or in
//!   flight): the snapshot in A's `Release` counts them; the owner holds the return until they
//!   are served.
//!
//! * **Grants.** [`Owner::grant`] raises `budget` by `W0` and the answer carries `W0` until the
//!   importer adds it to its proxy: the weight is in a message meanwhile, so invariant 5 holds
//!   through a grant, and the `Grant` request's count keeps the proxy alive until then.
//!
//! **Transport conditions**, all in one place: (T1) reliable delivery of handles (inside
//! messages), `Release`s, `Grant`s and their answers — a lost message leaks its weight (the
//! property is then freed at the end of the run, never early), a duplicated one is refused
//! or frees early, so exactly-once delivery is required; (T2) per-pair request order, which
//! makes `served_from(c) ≥ issued[c]` mean "every request `c` issued before the snapshot was
//! served"; (T3, liveness) a request counted in `issued` is eventually sent and served (a
//! client does not keep queued requests unsent forever), else a `Release` waiting for it
//! waits forever: a leak, not an error. No order between different kinds of messages is
//! needed.
//!
//! # Model checking and simulation
//!
//! * `sim` (unit tests): a seeded simulation of three or four fake ranks in one thread (the
//!   owner with local handles, two or three importers of one or two workers each), over this
//!   module and [`crate::runtime::proxy`] with small weights (so that grants and weight 1
//!   happen): handles move A→B→C and back to the owner while holders clone, issue requests
//!   (issued counters, per-pair FIFO queues served at random moments) and drop; messages
//!   arrive in any order. It checks weight conservation (invariant 5, weight ≥ 1 everywhere)
//!   after every step, that every served request finds its slot live and its property not
//!   freed, that the property is freed exactly once and only when no handle, weight or
//!   request is left anywhere, and that it is freed in the end. Its broken variant drops the
//!   snapshots of the `Release`s and is caught. The hard cases also have scripted tests.
//! * `loom_export_*` (under `--cfg fw_loom`, see [`crate::sync`]): two workers of one rank hold
//!   handles to one proxy, each issues a request, exports (splitting the weight concurrently)
//!   and drops its handle, while the owner's trustee takes returns, schedules the `Release`
//!   and processes pending returns before serving the requests it took. Loom checks that the
//!   proxy's weight never reaches zero while handles exist, that all weight comes back, and
//!   that the property is freed once, after both requests were served; a second model starts
//!   the proxy at weight 2, so that one export finds weight 1 and asks for a grant. Broken
//!   variants: the `Release` scheduled without its snapshot of `issued` (loom finds a request
//!   served after the free), and the split done with `fetch_sub` of an amount computed from
//!   an earlier load (loom finds two exports emptying the proxy, whose slot is then recycled
//!   under it).

// A few pieces (`with_w0`, `weights`, `pending`) serve the tests and models only.

use super::free;
use crate::property::PropPtr;
use crate::runtime::proxy::Release;
use crate::sync::proto::{AtomicU64, Mutex, UnsafeCell};
use crate::sync::Ordering;
use std::cell::Cell;
use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::AtomicPtr;
use std::sync::Arc;

/// The weight of a fresh export slot, and of each grant (`docs/rack-mode.md`, 5.2).
pub(crate) const W0: u64 = 1 << 62;

/// State word bit: the entry is live (exported, not yet recycled). The low 32 bits are the
/// generation.
pub(crate) const LIVE: u64 = 1 << 32;

/// Entries in chunk 0; chunk `k` has `FIRST_CHUNK << k`.
const FIRST_CHUNK_SHIFT: u32 = 6;
const FIRST_CHUNK: u64 = 1 << FIRST_CHUNK_SHIFT;
/// Chunks: enough for every `u32` slot.
const CHUNKS: usize = 27;

/// The last generation a slot takes ([`Owner`] retires a slot there): an export's wire target
/// leaves bits 62 and 63 clear, so it is never taken for an address target
/// ([`ADDR_TARGET`]), and the issuing path may mark it in a record (`crate::trust`).
pub(crate) const MAX_GEN: u32 = (1 << 30) - 1;

/// Wire target bit: the rest of the word is an address in the sending process, not an export.
/// Only the handles of a loopback run still shared through memory (test statics,
/// `TrustArray::new` parts, `entrust_new` from delegated context) are sent so; a validator
/// not in loopback mode refuses such a target (`wire::envelope`, `Expect::loopback`).
pub(crate) const ADDR_TARGET: u64 = crate::wire::envelope::ADDR_TARGET;

/// The wire target word of a remote request to the property in `slot`, generation `gen`
/// (`docs/rack-mode.md`, 3.1: slot in the low half, generation in the high half;
/// `gen <= MAX_GEN`).
pub(crate) fn wire_target(slot: u32, gen: u32) -> u64 {
    debug_assert!(gen <= MAX_GEN);
    u64::from(slot) | (u64::from(gen) << 32)
}

/// The `(slot, gen)` of a wire target word.
pub(crate) fn split_target(word: u64) -> (u32, u32) {
    (word as u32, (word >> 32) as u32)
}

/// What an export slot holds on: a property of this rank, through which the table takes and
/// drops its export count. [`PropPtr`] in the runtime; the tests use stand-ins.
pub(crate) trait ExportedProp: Copy + Send {
    /// The (global) trustee of the property.
    fn trustee(&self) -> usize;

    /// Counts a new local handle ([`free::clone_ref`]).
    ///
    /// # Safety
    /// The property is alive: the caller holds one of its counts, or weight of a live slot
    /// that holds one.
    unsafe fn clone_ref(&self);

    /// Uncounts a local handle ([`free::drop_ref`]); true when it was the last one, and the
    /// caller then calls [`ExportedProp::release_last`].
    ///
    /// # Safety
    /// The caller holds the count it drops.
    unsafe fn drop_ref(&self) -> bool;

    /// Hands the free to the trustee once the last local count is gone
    /// ([`free::release_last`]).
    fn release_last(self);
}

impl ExportedProp for PropPtr {
    fn trustee(&self) -> usize {
        PropPtr::trustee(self)
    }

    unsafe fn clone_ref(&self) {
        // SAFETY: caller promise — the property is alive, so its header is.
        free::clone_ref(unsafe { self.head_ptr().as_ref() });
    }

    unsafe fn drop_ref(&self) -> bool {
        // SAFETY: caller promise — it holds a count, so the header is alive.
        free::drop_ref(unsafe { self.head_ptr().as_ref() })
    }

    fn release_last(self) {
        free::release_last(self, self.run());
    }
}

/// A slot made by [`ExportTable::export`]: the wire target and the weight the export message
/// carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Export {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    /// The table's `w0`: [`W0`].
    pub(crate) weight: u64,
}

/// Why [`ExportTable::export`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ExportError {
    /// The property belongs to another trustee's table.
    #[error("property of trustee {got} exported through the table of trustee {table}")]
    OtherTrustee { got: usize, table: usize },
    /// Every `u32` slot is in use.
    #[error("export table of trustee {0} is full (every 32-bit slot is in use)")]
    Full(usize),
}

/// Why a wire target names no live property of this trustee (a `BadBatch` reason once
/// wired).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LookupError {
    /// The slot was never made.
    #[error("export slot {slot} is out of range (trustee {trustee})")]
    OutOfRange { slot: u32, trustee: usize },
    /// The slot is not live (never exported, or recycled).
    #[error("export slot {slot} is free (trustee {trustee})")]
    Free { slot: u32, trustee: usize },
    /// The slot has been recycled since.
    #[error("export slot {slot} has generation {current}, not {gen} (trustee {trustee})")]
    Stale { slot: u32, gen: u32, current: u32, trustee: usize },
    /// The slot holds a property of another trustee.
    #[error("export slot {slot} of trustee {trustee} holds a property of trustee {other}")]
    OtherTrustee { slot: u32, trustee: usize, other: usize },
}

/// Why a return of weight was refused (a protocol error once wired).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReleaseError {
    /// The slot named is not live or has another generation.
    #[error("return to an unknown export: {0}")]
    Lookup(#[from] LookupError),
    /// A return of no weight.
    #[error("return of zero weight to export slot {slot} generation {gen}")]
    ZeroWeight { slot: u32, gen: u32 },
    /// More weight than is outstanding.
    #[error(
        "return of weight {weight} to export slot {slot} generation {gen} exceeds the \
         {outstanding} outstanding"
    )]
    ExceedsBudget { slot: u32, gen: u32, weight: u64, outstanding: u128 },
    /// A release listing more clients than the sender's rank has workers.
    #[error("release to export slot {slot} lists {got} clients, the table expects at most {max}")]
    Clients { slot: u32, got: usize, max: usize },
}

/// One export slot (invariant 1).
struct Entry<P> {
    /// Generation (low 32 bits) and [`LIVE`].
    state: AtomicU64,
    /// The property, while live.
    prop: UnsafeCell<Option<P>>,
    /// Weight handed out (the slot's `W0`, plus `W0` per grant). Owner-only while live.
    budget: UnsafeCell<u128>,
    /// Weight given back. Owner-only while live.
    returned: UnsafeCell<u128>,
}

impl<P> Entry<P> {
    fn new() -> Entry<P> {
        Entry {
            state: AtomicU64::new(0),
            prop: UnsafeCell::new(None),
            budget: UnsafeCell::new(0),
            returned: UnsafeCell::new(0),
        }
    }
}

/// The slots that are not in use, and the first slot never used.
struct FreeSlots {
    recycled: Vec<u32>,
    next: u64,
}

/// A trustee's export table (module docs). Shared by the workers of the owner rank; the
/// trustee's part is its [`Owner`].
pub(crate) struct ExportTable<P> {
    trustee: usize,
    /// The weight of a fresh slot and of a grant: [`W0`], smaller in tests.
    w0: u64,
    /// Chunk `k`: `FIRST_CHUNK << k` entries, or null (invariant 2).
    chunks: [AtomicPtr<Entry<P>>; CHUNKS],
    free: Mutex<FreeSlots>,
}

impl<P> std::fmt::Debug for ExportTable<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportTable").field("trustee", &self.trustee).finish_non_exhaustive()
    }
}

// SAFETY: the entries are reached through `&self` from several threads under invariants 1–3:
// `prop` is written only under the mutex while the entry is not live and read after an
// Acquire load saw it live (and it does not change while live); `budget`/`returned` are
// touched only by the single `Owner` (and by the exporter before publishing). `P: Send`
// because a property exported on one worker is released on the trustee's.
unsafe impl<P: Send> Sync for ExportTable<P> {}
// SAFETY: the table owns its chunks; moving it moves only pointers to them.
unsafe impl<P: Send> Send for ExportTable<P> {}

/// Chunk index and index within it of slot `slot`.
fn chunk_of(slot: u32) -> (usize, usize) {
    let x = u64::from(slot) + FIRST_CHUNK;
    let k = 63 - x.leading_zeros() - FIRST_CHUNK_SHIFT;
    (k as usize, (x - (FIRST_CHUNK << k)) as usize)
}

impl<P: ExportedProp> ExportTable<P> {
    /// The empty table of trustee `trustee` (a global worker id), and its owner's part.
    pub(crate) fn new(trustee: usize) -> (Arc<ExportTable<P>>, Owner<P>) {
        ExportTable::with_w0(trustee, W0)
    }

    /// [`ExportTable::new`] with another slot and grant weight than [`W0`] (tests that reach
    /// the grant path; `w0 ≥ 2`).
    pub(crate) fn with_w0(trustee: usize, w0: u64) -> (Arc<ExportTable<P>>, Owner<P>) {
        assert!(w0 >= 2, "an export slot's weight must split");
        let table = Arc::new(ExportTable {
            trustee,
            w0,
            chunks: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            free: Mutex::new(FreeSlots { recycled: Vec::new(), next: 0 }),
        });
        let owner = Owner {
            table: table.clone(),
            chunks: std::array::from_fn(|_| Cell::new(ptr::null())),
            pending: VecDeque::new(),
            max_clients: usize::MAX,
        };
        (table, owner)
    }

    /// The trustee whose properties this table exports.
    #[cfg(all(test, not(fw_loom)))]
    pub(crate) fn trustee(&self) -> usize {
        self.trustee
    }

    /// The entry of `slot`, if its chunk exists.
    fn entry(&self, slot: u32) -> Option<&Entry<P>> {
        let (k, i) = chunk_of(slot);
        // Acquire: pairs with the Release store of the chunk's pointer (invariant 2).
        let chunk = self.chunks[k].load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a non-null chunk pointer points to `FIRST_CHUNK << k` initialized entries
        // that live as long as the table (invariant 2), and `i` is below that.
        Some(unsafe { &*chunk.add(i) })
    }

    /// Exports property `prop` of this trustee, of which the caller holds a handle (cold
    /// path: takes the mutex): a new live slot holding one local count on it (the export
    /// count), with `budget = W0`. The returned weight travels with the handle.
    pub(crate) fn export(&self, prop: P) -> Result<Export, ExportError> {
        if prop.trustee() != self.trustee {
            return Err(ExportError::OtherTrustee { got: prop.trustee(), table: self.trustee });
        }
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match free.recycled.pop() {
            Some(s) => s,
            None => {
                if free.next > u64::from(u32::MAX) {
                    return Err(ExportError::Full(self.trustee));
                }
                let s = free.next as u32;
                let (k, i) = chunk_of(s);
                if i == 0 {
                    let chunk: Box<[Entry<P>]> =
                        (0..FIRST_CHUNK << k).map(|_| Entry::new()).collect();
                    // Release: the entries' initialization before the pointer (invariant 2).
                    self.chunks[k].store(Box::into_raw(chunk).cast(), Ordering::Release);
                }
                free.next += 1;
                s
            }
        };
        let e = self.entry(slot).expect("the slot's chunk exists: made above or before");
        let gen = e.state.load(Ordering::Relaxed) as u32;
        // SAFETY: the caller holds a handle of `prop`, so it is alive.
        unsafe { prop.clone_ref() };
        // SAFETY: the entry is not live and we hold the mutex: no one else reads or writes
        // these fields now (invariant 1).
        unsafe {
            e.prop.with_mut(|p| *p = Some(prop));
            e.budget.with_mut(|b| *b = u128::from(self.w0));
            e.returned.with_mut(|r| *r = 0);
        }
        // Release: publishes the fields above to lookups (invariant 1).
        e.state.store(LIVE | u64::from(gen), Ordering::Release);
        Ok(Export { slot, gen, weight: self.w0 })
    }

    /// The property in live slot `slot` of generation `gen`, found through any thread's view
    /// of the chunks.
    fn live(&self, slot: u32, gen: u32) -> Result<(&Entry<P>, P), LookupError> {
        self.check(self.entry(slot), slot, gen)
    }

    /// The shared part of the lookups: `e` is the entry of `slot`, if its chunk exists.
    #[inline]
    fn check<'a>(
        &self,
        e: Option<&'a Entry<P>>,
        slot: u32,
        gen: u32,
    ) -> Result<(&'a Entry<P>, P), LookupError> {
        let trustee = self.trustee;
        let e = e.ok_or(LookupError::OutOfRange { slot, trustee })?;
        // Acquire: pairs with the exporter's Release store (invariant 1).
        let s = e.state.load(Ordering::Acquire);
        if s & LIVE == 0 {
            return Err(LookupError::Free { slot, trustee });
        }
        if s as u32 != gen {
            return Err(LookupError::Stale { slot, gen, current: s as u32, trustee });
        }
        // SAFETY: the entry is live with the caller's generation, and it cannot be recycled
        // under the caller (the callers' conditions: it is the owner, who alone recycles, or
        // it holds weight of the slot); `prop` does not change while live (invariant 1).
        let prop = unsafe { e.prop.with(|p| *p) };
        let prop = prop.ok_or(LookupError::Free { slot, trustee })?;
        if prop.trustee() != trustee {
            return Err(LookupError::OtherTrustee { slot, trustee, other: prop.trustee() });
        }
        Ok((e, prop))
    }

    /// The property of live slot `(slot, gen)`, for a holder of weight of that slot on any
    /// thread (a proxy handle of a loopback run used through shared memory off its rank,
    /// `crate::trust`): the weight held keeps the slot from being recycled meanwhile.
    pub(crate) fn held(&self, slot: u32, gen: u32) -> Result<P, LookupError> {
        self.live(slot, gen).map(|(_, p)| p)
    }

    /// Receiving a handle of this trustee's property on the owner rank itself (any worker of
    /// it): a new local handle (`clone_ref` on the property found through the slot), and the
    /// message's weight to post to the trustee, which applies it with
    /// [`Owner::apply_return`] (no snapshot: the sender's requests are covered by its own
    /// proxy's `Release`).
    ///
    /// # Safety
    /// The caller holds `weight ≥ 1` of slot `(slot, gen)`: it decodes a message that carries
    /// it (so the slot cannot be recycled before the return is applied).
    pub(crate) unsafe fn receive_on_owner(
        &self,
        slot: u32,
        gen: u32,
        weight: u64,
    ) -> Result<(P, OwnerReturn), ReleaseError> {
        if weight == 0 {
            return Err(ReleaseError::ZeroWeight { slot, gen });
        }
        let (_, prop) = self.live(slot, gen)?;
        // SAFETY: the slot is live, and holds the export count on `prop`.
        unsafe { prop.clone_ref() };
        Ok((prop, OwnerReturn { slot, gen, weight }))
    }
}

impl<P> Drop for ExportTable<P> {
    fn drop(&mut self) {
        for (k, c) in self.chunks.iter_mut().enumerate() {
            let chunk = *c.get_mut();
            if !chunk.is_null() {
                // SAFETY: made by `Box::into_raw` of a boxed slice of `FIRST_CHUNK << k`
                // entries in `export`, freed only here (invariant 2).
                drop(unsafe {
                    Box::from_raw(ptr::slice_from_raw_parts_mut(chunk, (FIRST_CHUNK << k) as usize))
                });
            }
        }
    }
}

/// Weight that a handle received on the owner rank gives back to its slot (no snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnerReturn {
    pub(crate) slot: u32,
    pub(crate) gen: u32,
    pub(crate) weight: u64,
}

/// A return of weight waiting until the requests its sender issued have been served.
#[derive(Debug)]
struct PendingRelease {
    slot: u32,
    gen: u32,
    weight: u64,
    /// `(global client, requests it had issued to this trustee)`.
    targets: Box<[(usize, u64)]>,
}

/// What [`Owner::apply_return`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// Weight is still outstanding: the slot stays.
    Held,
    /// All weight is back: the slot was recycled and its export count dropped.
    Recycled,
}

/// What one [`Owner::process`] pass did.
#[derive(Debug, Default)]
pub(crate) struct Processed {
    /// Returns applied.
    pub(crate) applied: usize,
    /// Slots recycled by them.
    pub(crate) recycled: usize,
    /// Returns refused when applied (corrupt messages).
    pub(crate) errors: Vec<ReleaseError>,
}

/// The trustee's own part of its export table (module docs; invariant 3): owned by the
/// trustee's worker, not `Sync`.
pub(crate) struct Owner<P> {
    table: Arc<ExportTable<P>>,
    /// The chunk pointers this owner has seen (null: not yet), so that a lookup on the serve
    /// path makes one Acquire load (the entry's state) when the chunk is known. The `Cell`s
    /// also make the owner not `Sync`.
    chunks: [Cell<*const Entry<P>>; CHUNKS],
    /// Returns waiting for their targets, in arrival order.
    pending: VecDeque<PendingRelease>,
    /// The most clients a `Release` may list (the workers per rank).
    max_clients: usize,
}

// SAFETY: the cached chunk pointers point into the table, which the owner keeps alive (its
// `Arc`) and whose chunks never move (invariant 2), so they stay valid on any thread; the
// owner is not `Sync`, so one thread at a time works as the trustee (invariant 3).
unsafe impl<P: Send> Send for Owner<P> {}

impl<P> std::fmt::Debug for Owner<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("trustee", &self.table.trustee)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl<P: ExportedProp> Owner<P> {
    /// The table.
    #[cfg(all(test, not(fw_loom)))]
    pub(crate) fn table(&self) -> &Arc<ExportTable<P>> {
        &self.table
    }

    /// Refuses `Release`s listing more than `n` clients (the workers of a rank).
    pub(crate) fn set_max_clients(&mut self, n: usize) {
        self.max_clients = n;
    }

    /// The entry of `slot`, through the cached chunk pointers.
    #[inline]
    fn entry(&self, slot: u32) -> Option<&Entry<P>> {
        let (k, i) = chunk_of(slot);
        let mut chunk = self.chunks[k].get();
        if chunk.is_null() {
            // Acquire: pairs with the Release store of the chunk's pointer (invariant 2).
            chunk = self.table.chunks[k].load(Ordering::Acquire);
            if chunk.is_null() {
                return None;
            }
            self.chunks[k].set(chunk);
        }
        // SAFETY: a chunk pointer seen non-null points to `FIRST_CHUNK << k` initialized
        // entries that live as long as the table, which `self` keeps alive (invariant 2); this
        // thread has synchronized with their initialization (the Acquire load, now or when it
        // was cached); `i` is below the chunk's length.
        Some(unsafe { &*chunk.add(i) })
    }

    /// The live entry `(slot, gen)` and its property (the owner alone recycles, so it stays
    /// live while the owner is borrowed).
    #[inline]
    fn live(&self, slot: u32, gen: u32) -> Result<(&Entry<P>, P), LookupError> {
        self.table.check(self.entry(slot), slot, gen)
    }

    /// The property a remote request to `(slot, gen)` targets (serve path: one Acquire load
    /// once the chunk is known, no lock).
    #[inline]
    pub(crate) fn lookup(&self, slot: u32, gen: u32) -> Result<P, LookupError> {
        self.live(slot, gen).map(|(_, p)| p)
    }

    /// `(budget, returned)` of a live slot.
    #[cfg(all(test, not(fw_loom)))]
    pub(crate) fn weights(&self, slot: u32, gen: u32) -> Result<(u128, u128), LookupError> {
        let (e, _) = self.live(slot, gen)?;
        // SAFETY: the owner alone touches these while the entry is live (invariant 1).
        Ok(unsafe { (e.budget.with(|b| *b), e.returned.with(|r| *r)) })
    }

    /// Answers a `Grant { slot, gen }`: `budget += W0`; the answer carries the returned
    /// weight, which the importer adds to its proxy.
    pub(crate) fn grant(&mut self, slot: u32, gen: u32) -> Result<u64, LookupError> {
        let (e, _) = self.live(slot, gen)?;
        let w0 = self.table.w0;
        // SAFETY: the owner alone touches `budget` while the entry is live (invariant 1).
        unsafe { e.budget.with_mut(|b| *b += u128::from(w0)) };
        Ok(w0)
    }

    /// Gives `weight` back to slot `(slot, gen)` now: `returned += weight`; at `returned ==
    /// budget` the slot is recycled (generation + 1) and its export count dropped (the last
    /// local count going to [`ExportedProp::release_last`]). For a handle received on the
    /// owner rank ([`ExportTable::receive_on_owner`]) and for ready [`Release`]s.
    pub(crate) fn apply_return(
        &mut self,
        slot: u32,
        gen: u32,
        weight: u64,
    ) -> Result<Applied, ReleaseError> {
        if weight == 0 {
            return Err(ReleaseError::ZeroWeight { slot, gen });
        }
        let (e, prop) = self.live(slot, gen)?;
        // SAFETY: the owner alone touches these while the entry is live (invariant 1).
        let (budget, returned) = unsafe { (e.budget.with(|b| *b), e.returned.with(|r| *r)) };
        let outstanding = budget - returned;
        let weight_wide = u128::from(weight);
        if weight_wide > outstanding {
            return Err(ReleaseError::ExceedsBudget { slot, gen, weight, outstanding });
        }
        if weight_wide < outstanding {
            // SAFETY: as above.
            unsafe { e.returned.with_mut(|r| *r = returned + weight_wide) };
            return Ok(Applied::Held);
        }
        self.recycle(slot, e, prop);
        Ok(Applied::Recycled)
    }

    /// Frees live slot `slot` (generation + 1; a slot at the last generation is retired, never
    /// reused) and drops its export count.
    fn recycle(&self, slot: u32, e: &Entry<P>, prop: P) {
        {
            let mut free = self.table.free.lock().unwrap_or_else(|e| e.into_inner());
            let gen = e.state.load(Ordering::Relaxed) as u32;
            // SAFETY: we are the owner and hold the mutex; no weight of the slot is
            // outstanding, so no one else reads the entry (invariant 1).
            unsafe { e.prop.with_mut(|p| *p = None) };
            match gen.checked_add(1).filter(|&g| g <= MAX_GEN) {
                Some(next) => {
                    e.state.store(u64::from(next), Ordering::Release);
                    free.recycled.push(slot);
                }
                // Retired: its wire targets could not be told apart from old ones.
                None => e.state.store(u64::from(gen), Ordering::Release),
            }
        }
        // SAFETY: the slot held the export count (invariant 4), given up exactly here.
        if unsafe { prop.drop_ref() } {
            prop.release_last();
        }
    }

    /// Queues a `Release` from a rank whose first global worker id is `client_base`: applied
    /// by [`Owner::process`] once `served_from(client_base + c) ≥ issued[c]` for every `c`.
    /// Refuses a release to a slot that is not live (it would name weight that was never
    /// handed out).
    pub(crate) fn schedule_release(
        &mut self,
        rel: Release,
        client_base: usize,
    ) -> Result<(), ReleaseError> {
        let Release { slot, gen, weight, issued, .. } = rel;
        if weight == 0 {
            return Err(ReleaseError::ZeroWeight { slot, gen });
        }
        if issued.len() > self.max_clients {
            return Err(ReleaseError::Clients { slot, got: issued.len(), max: self.max_clients });
        }
        self.live(slot, gen)?;
        let targets = issued
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(c, &n)| (client_base + c, n))
            .collect();
        self.pending.push_back(PendingRelease { slot, gen, weight, targets });
        Ok(())
    }

    /// Returns waiting.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Applies the pending returns whose senders' requests have all been served
    /// (`served_from(c)`: requests served from global client `c`; `Worker::served_from` in
    /// the runtime). Cheap when none wait (inlined check). Unlike local frees, readiness is not
    /// monotone in arrival order (returns from different ranks wait for different clients),
    /// so a pass scans every pending return.
    #[inline]
    pub(crate) fn process(&mut self, served_from: impl Fn(usize) -> u64) -> Processed {
        if self.pending.is_empty() {
            return Processed::default();
        }
        self.process_pending(&served_from)
    }

    #[inline(never)]
    fn process_pending(&mut self, served_from: &dyn Fn(usize) -> u64) -> Processed {
        let mut out = Processed::default();
        let mut i = 0;
        while i < self.pending.len() {
            let ready = self.pending[i].targets.iter().all(|&(c, n)| served_from(c) >= n);
            if !ready {
                i += 1;
                continue;
            }
            let pr = self.pending.remove(i).expect("index in range");
            out.applied += 1;
            match self.apply_return(pr.slot, pr.gen, pr.weight) {
                Ok(Applied::Recycled) => out.recycled += 1,
                Ok(Applied::Held) => {}
                Err(e) => out.errors.push(e),
            }
        }
        out
    }

    /// End of the run (every rank has stopped, so no request or return of it can arrive):
    /// drops the export count of every live slot, so exported properties are freed like
    /// unexported ones (`docs/rack-mode.md`, 5.4), and forgets the pending returns. Returns the
    /// number of slots dropped.
    pub(crate) fn end_of_run(&mut self) -> usize {
        self.pending.clear();
        let next = self.table.free.lock().unwrap_or_else(|e| e.into_inner()).next;
        let mut dropped = 0;
        for slot in 0..next {
            let slot = slot as u32;
            let Some(e) = self.entry(slot) else { break };
            let s = e.state.load(Ordering::Acquire);
            if s & LIVE == 0 {
                continue;
            }
            if let Ok((e, prop)) = self.live(slot, s as u32) {
                self.recycle(slot, e, prop);
                dropped += 1;
            }
        }
        dropped
    }
}

#[cfg(all(test, not(fw_loom)))]
pub(crate) mod tests;
#[cfg(all(test, not(fw_loom)))]
mod wired_tests;

#[cfg(all(test, not(fw_loom)))]
mod sim;

#[cfg(all(test, fw_loom))]
mod loom_tests;
