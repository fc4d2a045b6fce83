//! Handles inside messages: `Trust<T>: Serialize + Deserialize` through `skein::codec` ([`encode`],
//! [`decode`]: the wire codec with this module's [`Scopes`]) only (`docs/rack-mode.md` §5.2 item 6).
//!
//! # How a handle travels
//!
//! [`encode`] opens an *encode scope* on its thread; `Trust::serialize`
//! only records a clone of the handle in the scope's list and writes its index (a `u32`), so
//! the weight of a handle moves once per listed handle, after encoding, however often the
//! serializer visits it. When bincode is done, `EncodeScope::finish` turns every listed handle
//! into a trailer entry and appends the entries and their count to the bytes:
//!
//! * in a run that is not split (one rank, no export tables): the handle's count itself moves
//!   into a process-wide table of handles in flight (`LOCAL`), and the entry names
//!   its key (nothing leaves the process; a key never issued, or taken already, is refused);
//! * a handle of a property of this process's memory reached through its address (a local
//!   handle, or in a loopback run a handle shared through memory): an export in its trustee's
//!   table (`runtime::export::ExportTable::export`), which carries the slot's whole weight;
//! * a proxy handle: half of the proxy's weight (`Proxy::export`); a proxy running low asks
//!   its owner for more ([`send_grant`]), and an export at weight 1 waits in its fiber for
//!   the answer (delegated context cannot wait: the encoding fails, naming the limit).
//!
//! [`decode`] splits the trailer off, opens a *decode scope* with its
//! entries, and `Trust::deserialize` takes its entry by index: on the owner's rank the
//! property's count is taken through the export slot (`ExportTable::receive_on_owner`) and
//! the weight is posted back to the trustee (no snapshot: the sender's requests are covered by
//! its own proxy's `Release`); on another rank a new proxy is made with the entry's weight.
//! Entries the value did not take are received and dropped at the end of the decode, so their
//! weight goes back. A message that is never decoded leaks its weight: a leak (the property
//! is freed at the end of the run), never an early free.
//!
//! Each entry carries a tag of `T`'s type, checked on receipt, so decoding a handle as a
//! handle of another type is an error rather than a type confusion, and a seal (a hash keyed
//! by the job's secret token, [`seal`]), so that bytes not written by the codec of this job
//! cannot name an export (`skein::codec::decode` is public: without the seal, program code could
//! forge a handle of a live export under another type). In a run that is not split the key
//! of the table of handles in flight plays that part (its entry records the type). A handle
//! is encoded and decoded only on a worker of its run: "a Trust cannot leave its run"
//! otherwise.
//!
//! A `Serialize` implementation must not block (switch fibers) while a `Trust` inside it is
//! being encoded: the scope is per thread.
//!
//! # Invariants
//!
//! 1. A `Raw` holds exactly one count of a `Trust<T>` (its word, with provenance), and its
//!    `drop` was made for that `T`; it is given up exactly once (dropped, or turned back
//!    into the `Trust<T>` by a receiver that checked the type tag).
//! 2. A listed handle's clone is held until its entry is made, so the proxy or property it
//!    names is alive while its weight or count moves into the entry; then it is dropped.
//! 3. An entry is taken from its decode scope at most once (`Option::take`), so its weight
//!    or count becomes at most one handle.

use super::{Trust, PROXY_BIT, RUN_MASK, RUN_SHIFT};
use crate::property::PropPtr;
use crate::runtime::context;
use crate::runtime::export::{wire_target, MAX_GEN};
use crate::runtime::free;
use crate::runtime::proxy::{Grant, Proxy};
use crate::runtime::worker::Worker;
use crate::wire::codec::{self, CodecError};
use std::any::TypeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Bytes of one trailer entry: kind u32, owner u32, slot u32, gen u32, weight u64, type tag
/// u64, seal u64.
const ENTRY: usize = 40;

/// How long an export from a proxy at weight 1 waits for its grant before it fails.
const GRANT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Entry kinds.
const KIND_EXPORT: u32 = 1;
const KIND_LOCAL: u32 = 2;

/// A handle (its word, with provenance) whose count is held, and the function that drops it
/// (which knows `T`).
#[derive(Clone, Copy)]
struct Raw {
    packed: NonNull<()>,
    drop: unsafe fn(NonNull<()>),
}

// SAFETY: a handle's word; the handle is `Send` (`T: Send` wherever a `Raw` is made).
unsafe impl Send for Raw {}

impl Raw {
    fn of<T: Send + 'static>(t: Trust<T>) -> Raw {
        Raw { packed: t.into_raw(), drop: drop_raw::<T> }
    }
    fn word(&self) -> usize {
        self.packed.as_ptr() as usize
    }
    /// Drops the handle.
    fn drop(self) {
        // SAFETY: `packed` holds a count of a `Trust<T>` of the `T` that made `drop`.
        unsafe { (self.drop)(self.packed) }
    }
}

/// # Safety
/// `p` is the word of a `Trust<T>` whose count the caller gives up.
unsafe fn drop_raw<T>(p: NonNull<()>) {
    // SAFETY: caller promise.
    drop(unsafe { Trust::<T>::from_raw(p) });
}

/// A handle recorded by `Trust::serialize` (a clone, held until `EncodeScope::finish`).
struct Listed {
    raw: Raw,
    type_tag: u64,
    /// The property, for a handle that is not a proxy's.
    prop: Option<PropPtr>,
}

/// One trailer entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    kind: u32,
    owner: u32,
    slot: u32,
    gen: u32,
    weight: u64,
    type_tag: u64,
    /// [`seal`] of the fields above.
    seal: u64,
}

/// A keyed hash of an entry's fields under the job's secret token (every rank of the job has
/// it; no program code does), so that bytes handed to `codec::decode` that were not written
/// by `encode` in this job cannot name an export, its weight or its type: a forged entry is
/// refused. (A replayed entry is caught by the weights: a return that exceeds its slot's
/// budget is refused, a free slot or a stale generation refuses the request.) Keyed by the
/// run's `job_run`, which every rank of a run over MPI shares (run ids are per process).
fn seal(w: &Worker, e: &Entry) -> u64 {
    let token = w.run_state.transport.as_ref().map_or(0, |t| t.token());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (token, w.run_state.job_run, e.kind, e.owner, e.slot, e.gen, e.weight, e.type_tag).hash(&mut h);
    h.finish()
}

thread_local! {
    /// The open encode scopes of this thread (innermost last).
    static ENCODING: RefCell<Vec<Vec<Listed>>> = const { RefCell::new(Vec::new()) };
    /// The open decode scopes: entries, `None` once taken.
    static DECODING: RefCell<Vec<Vec<Option<Entry>>>> = const { RefCell::new(Vec::new()) };
}

/// The tag of `T`'s type: the same in every process of one binary (a `TypeId` is fixed at
/// compile time, and `DefaultHasher::new` has fixed keys).
fn type_tag<T: 'static>() -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    TypeId::of::<T>().hash(&mut h);
    h.finish()
}

/// Handles in flight in a run that is not split: key → (run, handle, type tag).
type InFlight = HashMap<u64, (u32, Raw, u64)>;
static LOCAL_NEXT: AtomicU64 = AtomicU64::new(1);
static LOCAL: Mutex<Option<InFlight>> = Mutex::new(None);

/// The handles of `skein::codec`: [`crate::wire::codec::Handles`] for `Trust` (module docs).
#[derive(Debug)]
pub(crate) struct Scopes;

impl crate::wire::codec::Handles for Scopes {
    type Encoding = EncodeScope;
    type Decoding = DecodeScope;

    fn begin_encode() -> EncodeScope {
        EncodeScope::begin()
    }

    fn finish_encode(scope: EncodeScope, bytes: &mut Vec<u8>) -> Result<(), String> {
        scope.finish(bytes)
    }

    fn begin_decode(bytes: &[u8]) -> Result<(DecodeScope, &[u8]), String> {
        DecodeScope::begin(bytes)
    }
}

/// Serializes `v`, handles (`Trust`) included: bincode's bytes, then a trailer of the handles
/// inside `v`, which travel with their weight (module docs), and their count (a `u32`; 0 when
/// `v` holds none). A value without handles encodes to the bytes of
/// [`crate::wire::codec::encode`].
pub fn encode<V: serde::Serialize + ?Sized>(v: &V) -> Result<Vec<u8>, CodecError> {
    codec::encode_with::<Scopes, V>(v)
}

/// Deserializes a `V` that must use all of `bytes` (bincode's bytes and the handle trailer
/// [`encode`] appends), its handles received (module docs). Lengths are bounded by the bytes
/// as in [`crate::wire::codec::decode`].
pub fn decode<V: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<V, CodecError> {
    codec::decode_with::<Scopes, V>(bytes)
}

/// An open encode scope (the codec's `encode`); dropped unfinished (an error, a panic in a
/// `Serialize`), it drops its listed clones: nothing moved.
pub(crate) struct EncodeScope(());

impl EncodeScope {
    pub(crate) fn begin() -> EncodeScope {
        ENCODING.with(|e| e.borrow_mut().push(Vec::new()));
        EncodeScope(())
    }

    /// Closes the scope, turning its handles into trailer entries appended to `bytes`.
    pub(crate) fn finish(self, bytes: &mut Vec<u8>) -> Result<(), String> {
        let listed = take_scope();
        std::mem::forget(self);
        let mut entries = Vec::with_capacity(listed.len());
        let mut err = None;
        for l in listed {
            if err.is_none() {
                match entry_of(&l) {
                    Ok(e) => entries.push(e),
                    Err(e) => err = Some(e),
                }
            }
            l.raw.drop();
        }
        if let Some(e) = err {
            // The entries made so far carry weight that no decoder will return: a leak, never
            // an early free (module docs).
            return Err(e);
        }
        let w = context::current();
        for e in &entries {
            for x in [e.kind, e.owner, e.slot, e.gen] {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            bytes.extend_from_slice(&e.weight.to_le_bytes());
            bytes.extend_from_slice(&e.type_tag.to_le_bytes());
            let seal = w.map_or(0, |w| seal(w, e));
            bytes.extend_from_slice(&seal.to_le_bytes());
        }
        bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        Ok(())
    }
}

fn take_scope() -> Vec<Listed> {
    ENCODING.with(|e| e.borrow_mut().pop()).unwrap_or_default()
}

impl Drop for EncodeScope {
    fn drop(&mut self) {
        for l in take_scope() {
            l.raw.drop();
        }
    }
}

/// The entry of a listed handle (module docs), which moves weight (or the count) into it.
fn entry_of(l: &Listed) -> Result<Entry, String> {
    let word = l.raw.word();
    let run = ((word >> RUN_SHIFT) & RUN_MASK) as u32;
    let w = context::current().filter(|w| w.run_id == run).ok_or("a Trust cannot leave its run")?;
    if w.run_state.exports.is_empty() {
        // One process, no transport: a new count moves with a key.
        // SAFETY: the listed clone holds a count, so the handle's target is alive.
        let raw = unsafe { super::clone_raw(l.raw.packed) };
        let key = LOCAL_NEXT.fetch_add(1, Ordering::Relaxed);
        let mut map = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
        map.get_or_insert_with(HashMap::new)
            .insert(key, (run, Raw { packed: raw, ..l.raw }, l.type_tag));
        return Ok(Entry {
            kind: KIND_LOCAL,
            owner: 0,
            slot: key as u32,
            gen: (key >> 32) as u32,
            weight: 0,
            type_tag: l.type_tag,
            seal: 0,
        });
    }
    if word & PROXY_BIT != 0 {
        // SAFETY: a proxy handle's address is its proxy's, kept alive by the listed clone.
        let p = unsafe { super::proxy_of_raw(l.raw.packed) };
        // SAFETY: as above.
        let proxy = unsafe { p.as_ref() };
        let start = std::time::Instant::now();
        let out = loop {
            match proxy.export() {
                Ok(out) => {
                    if let Some(g) = out.grant {
                        send_grant(w, p, g);
                    }
                    break out;
                }
                Err(e) => {
                    if let Some(g) = e.grant {
                        send_grant(w, p, g);
                    }
                    // Weight 1 (`docs/rack-mode.md` §5.4): a fiber waits for the grant's
                    // answer; delegated context cannot.
                    if !w.may_block() {
                        return Err(format!(
                            "{e}: in delegated context, which cannot wait for it (send the \
                             handle from a fiber)"
                        ));
                    }
                    if start.elapsed() > GRANT_WAIT {
                        return Err(format!("{e}: no grant arrived in {GRANT_WAIT:?}"));
                    }
                    crate::yield_now();
                }
            }
        };
        return Ok(Entry {
            kind: KIND_EXPORT,
            owner: out.owner as u32,
            slot: out.slot,
            gen: out.gen,
            weight: out.weight,
            type_tag: l.type_tag,
            seal: 0,
        });
    }
    let prop = l.prop.ok_or("a handle without its property")?;
    let trustee = prop.trustee();
    let table = w.run_state.exports.get(trustee).ok_or("no export table for the trustee")?;
    let ex = table.export(prop).map_err(|e| e.to_string())?;
    Ok(Entry {
        kind: KIND_EXPORT,
        owner: trustee as u32,
        slot: ex.slot,
        gen: ex.gen,
        weight: ex.weight,
        type_tag: l.type_tag,
        seal: 0,
    })
}

/// Asks the owner of proxy `p` for more weight (`docs/rack-mode.md` §5.2 item 5; `g` from the
/// proxy, which marked it outstanding): a `Grant` control record whose completion adds the
/// weight granted to the proxy. The record holds a count on the proxy until then (proxy
/// invariant 4); if the run stops before the answer, that count, and so the proxy, leak.
fn send_grant(w: &Worker, p: NonNull<Proxy>, g: Grant) {
    // SAFETY: the caller holds a handle of the proxy, so it is alive.
    free::clone_ref(unsafe { &p.as_ref().head });
    w.send_grant(g.owner, wire_target(g.slot, g.gen), move |weight| {
        // SAFETY: the count taken above keeps the proxy alive until the drop below.
        let proxy = unsafe { p.as_ref() };
        proxy.apply_grant(weight);
        if free::drop_ref(&proxy.head) {
            // SAFETY: the last count, just given up.
            unsafe { free::proxy_dropped(p) };
        }
    });
}

/// An open decode scope (the codec's `decode`); when it closes, the entries no handle took
/// are received and dropped, so their weight goes back.
pub(crate) struct DecodeScope(());

impl DecodeScope {
    /// Splits `bytes` into the bincode payload and its trailer entries, and opens a scope
    /// with them.
    pub(crate) fn begin(bytes: &[u8]) -> Result<(DecodeScope, &[u8]), String> {
        let n = bytes.len().checked_sub(4).ok_or("no handle trailer")?;
        let count = u32::from_le_bytes(bytes[n..].try_into().unwrap_or([0; 4])) as usize;
        let start = count
            .checked_mul(ENTRY)
            .and_then(|t| n.checked_sub(t))
            .ok_or_else(|| format!("a handle trailer of {count} entries does not fit"))?;
        let le32 =
            |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let le64 =
            |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let entries = bytes[start..n]
            .chunks_exact(ENTRY)
            .map(|b| {
                Some(Entry {
                    kind: le32(b, 0),
                    owner: le32(b, 4),
                    slot: le32(b, 8),
                    gen: le32(b, 12),
                    weight: le64(b, 16),
                    type_tag: le64(b, 24),
                    seal: le64(b, 32),
                })
            })
            .collect();
        DECODING.with(|d| d.borrow_mut().push(entries));
        Ok((DecodeScope(()), &bytes[..start]))
    }
}

impl Drop for DecodeScope {
    fn drop(&mut self) {
        let left = DECODING.with(|d| d.borrow_mut().pop()).unwrap_or_default();
        for e in left.into_iter().flatten() {
            if let Ok(r) = receive(e) {
                r.drop();
            }
        }
    }
}

/// `Trust::serialize`: lists a clone of `t` in the innermost encode scope; its index.
pub(crate) fn list<T: Send + 'static>(t: &Trust<T>) -> Result<u32, String> {
    match context::current() {
        Some(w) if w.run_id == t.run() => {}
        _ => return Err("a Trust cannot leave its run".into()),
    }
    let prop = (!t.is_proxy()).then(|| t.prop_ptr());
    let listed = Listed { raw: Raw::of(t.clone()), type_tag: type_tag::<T>(), prop };
    ENCODING.with(|e| {
        let mut e = e.borrow_mut();
        match e.last_mut() {
            Some(scope) => {
                scope.push(listed);
                Ok(scope.len() as u32 - 1)
            }
            None => {
                listed.raw.drop();
                Err("a Trust is serialized only by skein's codec (`skein::codec`, `apply_with`)"
                    .into())
            }
        }
    })
}

/// `Trust::deserialize`: the handle of entry `index` of the innermost decode scope.
pub(crate) fn take<T: Send + 'static>(index: u32) -> Result<Trust<T>, String> {
    let e = DECODING.with(|d| {
        let mut d = d.borrow_mut();
        let scope = d.last_mut().ok_or(
            "a Trust is deserialized only by skein's codec (`skein::codec`, `apply_with`)",
        )?;
        let slot = scope.get_mut(index as usize).ok_or("a handle index out of its trailer")?;
        slot.take().ok_or("a handle taken twice from one message")
    })?;
    let r = receive(e)?;
    if e.type_tag != type_tag::<T>() {
        // Received anyway, and dropped: its weight goes back.
        r.drop();
        return Err("a handle decoded as a handle of another type".into());
    }
    Ok(r.into_trust())
}

/// A received entry: a new handle (its count held), not yet typed.
enum Received {
    /// Of a run that is not split: the sender's count.
    Local(Raw),
    /// On the owner's rank: a new local count on the property.
    Owner(PropPtr),
    /// Elsewhere: a new proxy.
    Proxy(NonNull<Proxy>, usize, u32),
}

impl Received {
    /// The handle, as a `Trust<T>` (the entry's type tag was checked to be `T`'s).
    fn into_trust<T: Send + 'static>(self) -> Trust<T> {
        match self {
            // SAFETY: the count of a `Trust<T>` listed with `T`'s tag.
            Received::Local(raw) => unsafe { Trust::from_raw(raw.packed) },
            Received::Owner(p) => Trust::new(p.head_ptr().cast(), p.trustee(), p.run()),
            Received::Proxy(p, owner, run) => Trust::from_proxy(p, owner, run),
        }
    }

    /// Drops the new handle.
    fn drop(self) {
        match self {
            Received::Local(raw) => raw.drop(),
            Received::Owner(p) => {
                // SAFETY: the count taken by `receive_on_owner` is given up here.
                if free::drop_ref(unsafe { p.head_ptr().as_ref() }) {
                    free::release_last(p, p.run());
                }
            }
            Received::Proxy(p, _, _) => {
                // SAFETY: the proxy's one count, made by `receive_on`, is given up here.
                if free::drop_ref(unsafe { &p.as_ref().head }) {
                    // SAFETY: the last count, just given up.
                    unsafe { free::proxy_dropped(p) };
                }
            }
        }
    }
}

/// Receives an entry on this worker (module docs).
fn receive(e: Entry) -> Result<Received, String> {
    let w = context::current().ok_or("a Trust cannot leave its run")?;
    if seal(w, &Entry { seal: 0, ..e }) != e.seal {
        return Err(
            "a handle entry not written by this job's codec (its seal does not match)".into()
        );
    }
    match e.kind {
        KIND_LOCAL => {
            let key = u64::from(e.slot) | u64::from(e.gen) << 32;
            let mut map = LOCAL.lock().unwrap_or_else(|e| e.into_inner());
            let map = map.get_or_insert_with(HashMap::new);
            match map.get(&key) {
                Some(&(run, raw, tag)) if run == w.run_id && tag == e.type_tag => {
                    map.remove(&key);
                    Ok(Received::Local(raw))
                }
                _ => Err(format!("handle key {key} names no handle in flight of this run")),
            }
        }
        KIND_EXPORT => receive_export(w, e),
        k => Err(format!("handle entry of unknown kind {k}")),
    }
}

/// Receives an export entry: on the owner's rank a new local count (the weight posted back to
/// the trustee), elsewhere a new proxy.
fn receive_export(w: &Worker, e: Entry) -> Result<Received, String> {
    let owner = e.owner as usize;
    if owner >= w.n || e.gen > MAX_GEN || e.weight == 0 {
        return Err(format!(
            "handle entry ({owner}, {}, {}) of weight {} refused",
            e.slot, e.gen, e.weight
        ));
    }
    if w.is_local(owner) {
        let table = w.run_state.exports.get(owner).ok_or("no export table for the trustee")?;
        // SAFETY: the entry holds `e.weight ≥ 1` of the slot (moved there by the sender), so
        // the slot stays live until the return posted below is applied.
        let (prop, ret) = unsafe { table.receive_on_owner(e.slot, e.gen, e.weight) }
            .map_err(|err| err.to_string())?;
        free::return_weight(w, owner, ret.slot, ret.gen, ret.weight);
        return Ok(Received::Owner(prop));
    }
    let p = Proxy::receive_on(w.rank as u32, owner, e.slot, e.gen, e.weight, w.run_id, w.n)
        .map_err(|err| err.to_string())?;
    // A proxy received with little weight asks for more at once, so that its first exports
    // need not wait.
    // SAFETY: the new proxy's count is held (the handle about to be made of it).
    if let Some(g) = unsafe { p.as_ref() }.grant_if_low() {
        send_grant(w, p, g);
    }
    Ok(Received::Proxy(p, owner, w.run_id))
}
