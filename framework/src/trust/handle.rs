//! [`Trust<T>`]'s one word (address, trustee, run, proxy bit), its count (clone, drop), and
//! the handle-level operations that are not delegation calls.

use super::*;

/// A handle to a property of type `T` owned by a trustee. Clone it freely; send it anywhere
/// (if `T: Send`). The property is dropped on its trustee after the last handle is gone.
///
/// `Trust<T>` is `Send` and `Sync` only if `T` is `Send`:
///
/// ```compile_fail
/// fn need_send<S: Send>(_: S) {}
/// fn f(t: skein::Trust<std::rc::Rc<u8>>) { need_send(t) }
/// ```
///
/// Closures sent to a trustee capture nothing ([`Trust::apply`] shows what is refused). Even
/// the local, capturing calls need `Send + 'static` closures (no borrowed captures):
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let local = 5u64;
///     let r = &local;
///     t.apply_local(move |c| *c += *r); // borrows `local`
/// }
/// ```
///
/// ```compile_fail
/// fn f(t: &skein::Trust<u64>) {
///     let rc = std::rc::Rc::new(1u64);
///     t.apply_local(move |c| *c += *rc); // Rc is not Send
/// }
/// ```
pub struct Trust<T> {
    /// One word, so that the handles of many properties take little cache: the property's
    /// address divided by 16 in the low [`TRUSTEE_SHIFT`] bits, then the trustee's index,
    /// then [`PROXY_BIT`], then the run's id from [`RUN_SHIFT`] up. The pointer keeps the
    /// property's provenance. A *proxy handle* (the bit set) names a
    /// [`crate::runtime::proxy::Proxy`] on this rank instead, which stands for a property of
    /// another rank (`docs/rack-mode.md` §5.2 item 2): both start with the count's header, so
    /// clone and drop are the same atomic operations on either.
    packed: NonNull<Prop<T>>,
    _t: PhantomData<T>,
}

/// Properties lie below 2^48 (user space on x86-64 and AArch64, checked when one is
/// entrusted) and are 16-aligned, so their address takes 44 bits.
pub(super) const TRUSTEE_SHIFT: u32 = 44;
pub(super) const ADDR_MASK: usize = (1 << TRUSTEE_SHIFT) - 1;
pub(super) const TRUSTEE_BITS: u32 = 12;
/// Set in the word of a proxy handle.
pub(super) const PROXY_BIT: usize = 1 << 63;
pub(super) const RUN_SHIFT: u32 = TRUSTEE_SHIFT + TRUSTEE_BITS;
/// The run id's bits above [`RUN_SHIFT`] (the bit above them is [`PROXY_BIT`]).
pub(super) const RUN_MASK: usize = 0x7f;
const _: () = assert!(PROXY_BIT == (RUN_MASK + 1) << RUN_SHIFT);
/// [`PROXY_BIT`] as it stands in [`Trust::tag`].
pub(super) const PROXY_TAG: u32 = (PROXY_BIT >> RUN_SHIFT) as u32;
// Every worker index (the builder allows at most 4096 workers) and every run id fit.
const _: () = assert!(4096 <= 1 << TRUSTEE_BITS);
const _: () = assert!(crate::run_ids::MAX_RUN_ID as usize <= RUN_MASK);
const _: () = assert!(std::mem::align_of::<Prop<()>>() == 16);
const _: () = assert!(std::mem::align_of::<Proxy>() == 16);
const _: () = assert!(std::mem::offset_of!(Proxy, head) == 0);
const _: () = assert!(std::mem::offset_of!(Prop<u128>, head) == 0);
const _: () = assert!(usize::BITS == 64, "skein packs a handle into a 64-bit word");

/// Marks, in a queued record's target (an in-process word, never on the wire), a target that
/// is already an export's wire word (a proxy handle's `(slot, gen)`) rather than an address:
/// [`wire_word`] passes it on as is. Export words leave this bit clear
/// ([`crate::runtime::export::MAX_GEN`]).
pub(super) const RECORD_EXPORT: u64 = 1 << 62;

// SAFETY: the value is only touched on its trustee (property invariant 2) and moves there by value
// inside `entrust`; so a handle may live on any thread when `T: Send`.
unsafe impl<T: Send> Send for Trust<T> {}
// SAFETY: all `&self` methods only queue closures (which need `Send`) or touch the atomic count.
unsafe impl<T: Send> Sync for Trust<T> {}

impl<T> std::fmt::Debug for Trust<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("trustee", &self.trustee_index())
            .field("prop", &self.prop())
            .finish()
    }
}

impl<T> Clone for Trust<T> {
    fn clone(&self) -> Self {
        free::clone_ref(self.head());
        Trust { packed: self.packed, _t: PhantomData }
    }
}

impl<T> Drop for Trust<T> {
    fn drop(&mut self) {
        if free::drop_ref(self.head()) {
            if self.is_proxy() {
                // SAFETY: a proxy handle names a proxy made by `Proxy::receive_on`, whose last
                // count `drop_ref` has just given up; nothing uses it afterwards.
                return unsafe { free::proxy_dropped(self.prop().cast()) };
            }
            let (trustee, run) = (self.trustee_index(), self.run());
            free::release_last(PropPtr::of(self.prop(), trustee, run), run);
        }
    }
}

/// Takes one more count on the property (or proxy) named by the handle word `p` and returns
/// `p` for the new handle.
///
/// # Safety
/// `p` is the word of a handle whose count the caller holds (so its target is alive).
pub(crate) unsafe fn clone_raw(p: NonNull<()>) -> NonNull<()> {
    // SAFETY: caller promise; both a property and a proxy start with their `PropHead`.
    let head = unsafe { raw_addr(p).cast::<PropHead>().as_ref() };
    free::clone_ref(head);
    p
}

/// The proxy a proxy handle's word `p` names.
///
/// # Safety
/// `p` is the word of a live proxy handle.
pub(crate) unsafe fn proxy_of_raw(p: NonNull<()>) -> NonNull<Proxy> {
    raw_addr(p).cast()
}

/// The address in the handle word `p` (with its provenance).
pub(super) fn raw_addr(p: NonNull<()>) -> NonNull<u8> {
    // SAFETY: a handle's address is non-null and 16-aligned (`Trust::new`, `from_proxy`).
    p.cast::<u8>().map_addr(|a| unsafe { NonZero::new_unchecked((a.get() & ADDR_MASK) << 4) })
}

impl<T> Trust<T> {
    /// The first handle of a property of run `run` entrusted to worker `trustee`.
    pub(crate) fn new(p: NonNull<Prop<T>>, trustee: usize, run: u32) -> Trust<T> {
        if (p.as_ptr() as usize) >> (TRUSTEE_SHIFT + 4) != 0 {
            // Not on Linux or macOS on x86-64 or AArch64 with their default address spaces.
            panic!("skein: a property at {p:p} is above the 48-bit address space skein supports");
        }
        let tag = trustee << TRUSTEE_SHIFT | (run as usize) << RUN_SHIFT;
        // SAFETY: run ids are at least 1, so the word is not zero.
        let packed = p.map_addr(|a| unsafe { NonZero::new_unchecked(a.get() >> 4 | tag) });
        Trust { packed, _t: PhantomData }
    }

    /// The first handle of the proxy `p` (made by `Proxy::receive_on` with local count 1) of
    /// a property of `owner` in run `run`.
    pub(crate) fn from_proxy(p: NonNull<Proxy>, owner: usize, run: u32) -> Trust<T> {
        if (p.as_ptr() as usize) >> (TRUSTEE_SHIFT + 4) != 0 {
            panic!("skein: a proxy at {p:p} is above the 48-bit address space skein supports");
        }
        let tag = owner << TRUSTEE_SHIFT | PROXY_BIT | (run as usize) << RUN_SHIFT;
        // SAFETY: run ids are at least 1, so the word is not zero.
        let packed =
            p.cast::<Prop<T>>().map_addr(|a| unsafe { NonZero::new_unchecked(a.get() >> 4 | tag) });
        Trust { packed, _t: PhantomData }
    }

    /// The handle of another rank's property answered by `owner` to a remote `entrust_new`:
    /// export `(slot, gen)` with `weight`, received here as a new proxy of this rank.
    #[track_caller]
    pub(super) fn received(w: &Worker, owner: usize, ex: [u64; 3]) -> Trust<T> {
        Self::try_received(w, owner, ex).unwrap_or_else(|e| panic!("skein: entrust_new: {e}"))
    }

    /// [`Trust::received`], or why the answer cannot be a handle.
    pub(super) fn try_received(
        w: &Worker,
        owner: usize,
        [slot, gen, weight]: [u64; 3],
    ) -> Result<Self, String> {
        let (Ok(slot), Some(gen)) =
            (u32::try_from(slot), u32::try_from(gen).ok().filter(|&g| g <= export::MAX_GEN))
        else {
            return Err(format!("trustee {owner} answered a bad export ({slot}, {gen})"));
        };
        let p = Proxy::receive_on(w.rank as u32, owner, slot, gen, weight, w.run_id, w.n)
            .map_err(|e| format!("trustee {owner} answered: {e}"))?;
        Ok(Trust::from_proxy(p, owner, w.run_id))
    }

    /// The handle's word (with its provenance); its count moves with it
    /// ([`Trust::from_raw`] takes it back).
    pub(crate) fn into_raw(self) -> NonNull<()> {
        let p = self.packed.cast();
        std::mem::forget(self);
        p
    }

    /// The handle whose word [`Trust::into_raw`] gave.
    ///
    /// # Safety
    /// `p` came from `into_raw` of a `Trust<T>` (this `T`), or is such a word with a count
    /// the caller holds; the count moves into the handle.
    pub(crate) unsafe fn from_raw(p: NonNull<()>) -> Trust<T> {
        Trust { packed: p.cast(), _t: PhantomData }
    }

    /// True for a proxy handle (the property is on another rank).
    #[inline(always)]
    pub(crate) fn is_proxy(&self) -> bool {
        self.packed.as_ptr() as usize & PROXY_BIT != 0
    }

    /// The proxy of a proxy handle.
    pub(crate) fn proxy(&self) -> &Proxy {
        debug_assert!(self.is_proxy());
        // SAFETY: a proxy handle's address is its proxy's (`from_proxy`), kept alive by the
        // count this handle holds (proxy invariant 1); its fields other than the count and
        // the weight never change (proxy invariant 3).
        unsafe { self.prop().cast::<Proxy>().as_ref() }
    }

    /// A proxy handle's target: on its own rank, its export's wire word marked
    /// [`RECORD_EXPORT`] (not an address: never dereferenced, only written to the wire).
    ///
    /// On another rank (possible only through the memory that the fake ranks of a loopback
    /// run share: a handle left in a static, say) the handle is used as the loopback handles
    /// are: through the property's address, found in the owner's export table (the proxy's
    /// weight keeps the slot live). Its requests are then counted by the in-process free of
    /// `runtime::free`, whose snapshot covers every worker of a loopback run (one process),
    /// not by the proxy's `Release` (which counts the proxy's rank only). Under MPI no other
    /// rank can reach a proxy, and such a use is refused.
    #[cold]
    #[inline(never)]
    #[track_caller]
    pub(super) fn proxy_target(&self, w: &Worker) -> *mut u8 {
        let p = self.proxy();
        let (slot, gen) = p.target();
        if p.home() == w.rank {
            return export_record_target(p);
        }
        let shared = w.run_state.is_loopback().then(|| w.run_state.exports.get(p.owner()));
        let Some(Some(table)) = shared else {
            panic!(
                "skein: a handle of a property of worker {} received on rank {} used on rank {}: \
                 handles travel between ranks inside messages, not through memory",
                p.owner(),
                p.home(),
                w.rank
            );
        };
        match table.held(slot, gen) {
            Ok(prop) => prop.head_ptr().as_ptr().cast(),
            Err(e) => panic!("skein: a proxy handle names no live export: {e}"),
        }
    }

    #[inline(always)]
    /// The property this handle names, as the runtime's type-erased pointer (the export
    /// table takes its export count through it). Not for a proxy handle.
    pub(crate) fn prop_ptr(&self) -> PropPtr {
        debug_assert!(!self.is_proxy());
        PropPtr::of(self.prop(), self.trustee_index(), self.run())
    }

    pub(super) fn prop(&self) -> NonNull<Prop<T>> {
        // SAFETY: the unpacked address is the non-null address `new` was given (16-aligned,
        // so the shift restores it).
        self.packed.map_addr(|a| unsafe { NonZero::new_unchecked((a.get() & ADDR_MASK) << 4) })
    }

    #[inline(always)]
    pub(super) fn trustee_index(&self) -> usize {
        (self.packed.as_ptr() as usize >> TRUSTEE_SHIFT) & ((1 << TRUSTEE_BITS) - 1)
    }

    #[inline(always)]
    pub(super) fn run(&self) -> u32 {
        self.tag() & RUN_MASK as u32
    }

    /// The run's id and, above it, [`PROXY_BIT`]: equal to the calling worker's run id exactly
    /// for a handle of its run that is not a proxy's (the one compare of the local path).
    #[inline(always)]
    pub(super) fn tag(&self) -> u32 {
        (self.packed.as_ptr() as usize >> RUN_SHIFT) as u32
    }

    /// The worker to issue on and the trustee's index, for a handle of the calling worker's
    /// run that is not a proxy's; `None` otherwise (the caller's cold path).
    #[inline(always)]
    pub(super) fn local_worker(&self) -> Option<(&'static Worker, usize)> {
        match context::current() {
            Some(w) if w.run_id == self.tag() => Some((w, self.trustee_index())),
            _ => None,
        }
    }

    pub(super) fn head(&self) -> &PropHead {
        // SAFETY: we hold a count, so the property (or, for a proxy handle, the proxy) is alive
        // (property invariant 1, proxy invariant 1); both start with their `PropHead`
        // (`repr(C)`), so the cast reaches it without claiming a `Prop<T>` over a proxy; the
        // header is never mutated except through its atomic.
        unsafe { self.prop().cast::<PropHead>().as_ref() }
    }

    /// The worker to issue on, the trustee's index and the target to queue with: the
    /// property's address, or for a proxy handle [`Trust::proxy_target`]. Run ids tell the
    /// runs of all existing handles apart ([`crate::run_ids`]), so a handle of another run is
    /// refused here, before anything is queued. The index is below the worker's `n`: the
    /// handle is of this run, and every handle of a run names one of its workers (`entrust`
    /// goes through a [`TrusteeRef`], whose index is checked against the run's worker count).
    /// One compare on the local path: [`PROXY_BIT`]
    /// sits above the run's id, so a local handle of this run matches the worker's run id
    /// exactly (`Trust::tag`). A proxy handle of this run used on its proxy's own rank (every
    /// request to another rank under MPI) is answered by the second compare, inline (an
    /// out-of-line call for it cost 2 to 6% of the 2-rank echo); anything else (a proxy in a
    /// loopback run, a handle of another run) takes the cold path, which tells them apart.
    #[inline]
    #[track_caller]
    pub(super) fn issue_for(&self, what: &'static str) -> (&'static Worker, usize, *mut u8) {
        match context::current() {
            Some(w) if w.run_id == self.tag() => {
                (w, self.trustee_index(), self.prop().as_ptr() as *mut u8)
            }
            Some(w) if w.run_id | PROXY_TAG == self.tag() && self.proxy().home() == w.rank => {
                (w, self.trustee_index(), export_record_target(self.proxy()))
            }
            w => self.issue_slow(what, w),
        }
    }

    /// [`Trust::issue_for`] for a proxy handle that `issue_for` did not answer inline, or a
    /// refusal. A proxy used on its own rank is answered here too (the same answer as
    /// `issue_for`'s); the rest ([`Trust::proxy_target`]'s loopback case, a refusal) is out
    /// of line.
    #[inline(never)]
    #[track_caller]
    pub(super) fn issue_slow(
        &self,
        what: &'static str,
        w: Option<&'static Worker>,
    ) -> (&'static Worker, usize, *mut u8) {
        match w {
            Some(w) if w.run_id == self.run() => {
                let p = self.proxy();
                let target =
                    if p.home() == w.rank { export_record_target(p) } else { self.proxy_target(w) };
                (w, self.trustee_index(), target)
            }
            w => wrong_context(what, w.is_some()),
        }
    }

    /// The trustee that owns the property.
    pub fn trustee(&self) -> TrusteeRef {
        TrusteeRef { trustee: self.trustee_index() }
    }
}
