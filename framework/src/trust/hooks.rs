//! How a remote-capable call's record travels: the code of a request half ([`Place`],
//! [`RunArg`]), the record type's `RemoteHook` ([`HookOf`]), the argument and result
//! translations, and the serialized request of `apply_with` ([`WithRequest`]).

use super::*;

/// Where a remote-capable request finds its value: the target word names a property
/// ([`OnProp`]) or one value of a [`TrustArray`] part ([`array`](mod@array)'s `OnElem`).
pub(crate) trait Place {
    /// The value's type.
    type Value;
    /// The value at `target`.
    ///
    /// # Safety
    /// `target` is the target word of a request of this place, and the caller runs as
    /// delegated code on the value's trustee (property invariant 2: no other reference).
    unsafe fn value<'a>(target: *mut u8) -> &'a mut Self::Value;

    /// The address of the value at `target`, as the target word of a wire record for a
    /// handle shared through memory in a loopback run (`crate::runtime::remote`, "Loopback
    /// only"; a proxy handle's records carry its export instead). Computes an address, reads
    /// no value.
    ///
    /// # Safety
    /// `target` is the target word of a live request of this place (its property is alive).
    unsafe fn value_addr(target: *mut u8) -> *mut Self::Value;
}

/// The value of the property at the target word.
pub(crate) struct OnProp<T>(PhantomData<fn() -> T>);

impl<T> Place for OnProp<T> {
    type Value = T;
    #[inline(always)]
    unsafe fn value<'a>(target: *mut u8) -> &'a mut T {
        // SAFETY: caller promise; the property is alive: its handle held a count when the
        // request was issued, and a property is freed only after every request issued before
        // its last handle went away has been served ([`crate::runtime::free`]).
        unsafe { &mut *(*(target as *mut Prop<T>)).value.get() }
    }
    #[inline(always)]
    unsafe fn value_addr(target: *mut u8) -> *mut T {
        // SAFETY: caller promise: a live property; `get` only computes the value's address.
        unsafe { (*(target as *mut Prop<T>)).value.get() }
    }
}

/// The code of a remote-capable request (`docs/rack-mode.md` §2.4, `run_arg`): reads the
/// value from the place `P`, recreates the zero-sized closure `F`, runs it with the argument
/// and writes its `Plain` result unaligned. Built only by the entry points below, each of
/// which held a value of `F` (record's [`ArgCall`] safety contract).
pub(crate) struct RunArg<P, U, F>(PhantomData<RunArgTypes<P, U, F>>);

/// The types a [`RunArg`] names (function types: no auto-trait or drop effects).
pub(super) type RunArgTypes<P, U, F> = (fn() -> P, fn() -> U, fn() -> F);

// SAFETY: `RunArg` is zero-sized and only named by entry points that were handed an `F` (and
// checked that it is zero-sized, `travel_check!`).
unsafe impl<P, A, U, F> ArgCall<A> for RunArg<P, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    const REMOTE: Option<&'static RemoteHook> = Some(HookOf::<P, A, U, F>::HOOK);

    #[inline(always)]
    unsafe fn run(target: *mut u8, arg: A, out: *mut u8) -> Option<PanicPayload> {
        travel_check!(F = F);
        // SAFETY: `F` is zero-sized (`travel_check!` in every entry point that names this
        // type), so reading one through a dangling, non-null, aligned pointer reads no bytes;
        // it is `Copy` and a value of it existed (the entry point's `f`), so this is a copy of
        // that value, not a forgery.
        let f: F = unsafe { NonNull::<F>::dangling().as_ptr().read() };
        // SAFETY: caller promise (delegated code on the value's trustee).
        let value = unsafe { P::value(target) };
        if size_of::<U>() <= INNER_WRITE_MAX {
            // A small result is written inside the closure: returned through `catch_unwind`
            // it is copied through the union of closure and result in pieces whose reads wait
            // for the stores before them (store-forwarding stalls: the 32-byte echo ran at
            // half speed). A big one is copied whole either way, and faster this way round.
            let run = move || {
                let u = f(value, arg);
                // SAFETY: caller promise: `out` holds `PlainSpace::<U>::BYTES` bytes.
                unsafe { write_plain(out, u) }
            };
            return catch_unwind(AssertUnwindSafe(run)).err();
        }
        match catch_unwind(AssertUnwindSafe(move || f(value, arg))) {
            Ok(u) => {
                // SAFETY: caller promise: `out` holds `PlainSpace::<U>::BYTES` bytes.
                unsafe { write_plain(out, u) };
                None
            }
            Err(p) => Some(p),
        }
    }
}

/// Results up to this many bytes are written by [`RunArg`]'s closure itself, bigger ones after
/// it returned (measured with `skein bench echo` at 8 to 256 bytes).
pub(super) const INNER_WRITE_MAX: usize = 128;

/// The holder of the [`RemoteHook`] of [`RunArg`]`<P, U, F>` with argument `A`: the
/// `RemoteVTable::of` table of `(P::Value, A, U, F)` (an array element travels as the value it
/// names, `KIND_PROPERTY` on the element's address, in a loopback run; step 6 turns it into
/// `of_element` with the part's export and the index), the argument's own bytes, and the
/// `Plain` result's bytes, which are the same on the wire and in the result space.
pub(crate) struct HookOf<P, A, U, F>(PhantomData<CodeTypes<P, A, U, F>>);

/// The types a [`HookOf`] or [`WithRequest`] names (a function type: no auto-trait or drop
/// effects).
pub(super) type CodeTypes<P, A, U, F> = fn() -> (P, A, U, F);

impl<P, A, U, F> HookOf<P, A, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    const HOOK: &'static RemoteHook = &RemoteHook {
        code: Of::<P::Value, A, U, F, RemoteProperty>::VT.code(),
        take_arg: take_plain_arg::<P, A>,
        put_result: put_plain_result::<U>,
        take_uniform: Some(take_plain_uniform::<P, A>),
        wire_result: true,
    };
}

/// [`RemoteHook::take_arg`] of an argument-first record: its argument's bytes.
///
/// # Safety
/// `p` is the target word of an `ArgRequest<A, _>` record of place `P` whose request half is
/// live and owned by the caller; it is consumed (a `Plain` value: a byte copy, nothing to drop).
pub(super) unsafe fn take_plain_arg<P: Place, A: Plain>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise: the target word at `p`, the `repr(C, packed)` argument right
    // after it (record invariant 1), read unaligned.
    let (target, a) = unsafe {
        (std::ptr::read(p as *const *mut u8), std::ptr::read_unaligned(p.add(8) as *const A))
    };
    crate::wire::remote::push_plain(arg, a);
    // SAFETY: caller promise: the request is live, so its property is.
    unsafe { wire_word::<P>(target) }
}

/// [`RemoteHook::take_uniform`] of an argument-first record: [`take_plain_arg`] for `n`
/// records at once, written straight into `out` (one reservation, no per-record call or
/// length update).
///
/// # Safety
/// As [`RemoteHook::take_uniform`]: `n` live records of this type at `src`, `stride` words
/// apart, each a header, the target word and the `repr(C, packed)` argument.
pub(super) unsafe fn take_plain_uniform<P: Place, A: Plain>(
    src: *const u64,
    stride: usize,
    n: usize,
    out: &mut Vec<u8>,
) {
    // SAFETY: caller promise; the record's argument is the `A` itself, written after the
    // target word (`RemoteVTable::of`'s layout).
    unsafe { take_uniform_wire::<P, A, A, 0>(src, stride, n, out, |a| (0, a)) }
}

/// The records of a uniform batch as wire records, in one pass: per record its target word,
/// then (when `LEAD` is 8) the first half of `split(argument)`, then the second, `A`, and
/// zeros up to the next multiple of 8. `split` takes the record's argument of type `R` apart
/// (an element request's `(index, A)`; a property request's `A` itself, with `LEAD` 0).
///
/// # Safety
/// As [`RemoteHook::take_uniform`], with `R` the records' argument type and `P` their place.
#[inline(always)]
pub(super) unsafe fn take_uniform_wire<P: Place, R: Plain, A: Plain, const LEAD: usize>(
    src: *const u64,
    stride: usize,
    n: usize,
    out: &mut Vec<u8>,
    split: impl Fn(R) -> (u64, A),
) {
    const { assert!(LEAD == 0 || LEAD == 8) };
    let arg = std::mem::size_of::<A>();
    let rec = 8 + LEAD + arg.next_multiple_of(8);
    out.reserve(n * rec);
    let at = out.len();
    // SAFETY: `reserve` made room for `n · rec` bytes after `at`; record `i` (caller
    // promise) has its target word right after its header and its argument after that, read
    // unaligned (record invariant 1), its request half consumed by this one read (a `Plain`
    // argument has no drop); each wire record gets its 8 target bytes, the `LEAD` bytes, the
    // argument's bytes and zeros up to the next multiple of 8, so the `n · rec` bytes are all
    // written before `set_len` (padding bytes inside `A` are copied as bytes, as
    // `push_plain` does).
    unsafe {
        let dst = out.as_mut_ptr().add(at);
        for i in 0..n {
            let p = src.add(i * stride + HEADER_WORDS) as *mut u8;
            let target = std::ptr::read(p as *const *mut u8);
            let (lead, a) = split(std::ptr::read_unaligned(p.add(8) as *const R));
            let d = dst.add(i * rec);
            std::ptr::write_unaligned(d as *mut [u8; 8], wire_word::<P>(target).to_le_bytes());
            if LEAD == 8 {
                std::ptr::write_unaligned(d.add(8) as *mut [u8; 8], lead.to_le_bytes());
            }
            std::ptr::write_bytes(d.add(8 + LEAD + arg), 0, rec - 8 - LEAD - arg);
            std::ptr::write_unaligned(d.add(8 + LEAD) as *mut A, a);
        }
        out.set_len(at + n * rec);
    }
}

/// The wire target word of a queued record's `target`: a proxy handle's export word as is
/// ([`RECORD_EXPORT`]), else the address of the value, marked
/// [`crate::runtime::export::ADDR_TARGET`] (a loopback run's handle shared through memory).
///
/// # Safety
/// `target` is the target of a live request of place `P`.
#[inline]
pub(super) unsafe fn wire_word<P: Place>(target: *mut u8) -> u64 {
    let t = target as usize as u64;
    if t & RECORD_EXPORT != 0 {
        return t & !RECORD_EXPORT;
    }
    // SAFETY: caller promise: not an export word, so the address of the live request's place.
    unsafe { P::value_addr(target) as usize as u64 | export::ADDR_TARGET }
}

/// [`RemoteHook::put_result`] of a `Plain` result: the wire bytes are the result space's.
///
/// # Safety
/// `out` holds `PlainSpace::<U>::BYTES` bytes.
pub(super) unsafe fn put_plain_result<U: Plain>(wire: &[u8], out: *mut u8) {
    let n = wire.len().min(std::mem::size_of::<U>().next_multiple_of(8));
    // SAFETY: caller promise on `out`; `wire` holds `n` bytes.
    unsafe { std::ptr::copy_nonoverlapping(wire.as_ptr(), out, n) };
}

/// The request half of `apply_with`/`apply_with_then`: the serialized argument. Its code is
/// its type: decode, run `F` on the property, encode the result into a `Vec<u8>` result
/// space ([`ResultSpace`]). On the wire it is a `RemoteVTable::of_with` record.
pub(crate) struct WithRequest<T, V, U, F> {
    bytes: Vec<u8>,
    _code: PhantomData<CodeTypes<T, V, U, F>>,
}

impl<T, V, U, F> WithRequest<T, V, U, F>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    /// The request half for the encoded argument `bytes`; `f` only names `F` (a witness
    /// that a value of it existed, as for [`arg_request`]).
    pub(super) fn new(bytes: Vec<u8>, f: F) -> Self {
        let _witness = f;
        WithRequest { bytes, _code: PhantomData }
    }

    const HOOK: &'static RemoteHook = &RemoteHook {
        code: Of::<T, V, U, F, RemoteSerialized<super::travel::Scopes>>::VT.code(),
        take_arg: take_with_arg::<T, V, U, F>,
        put_result: put_with_result,
        take_uniform: None,
        wire_result: false,
    };
}

impl<T, V, U, F> RequestHalf for WithRequest<T, V, U, F>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    const REMOTE: Option<&'static RemoteHook> = Some(Self::HOOK);

    #[inline]
    unsafe fn call(self, target: *mut u8, out: *mut u8) -> Option<PanicPayload> {
        travel_check!(F = F);
        // SAFETY: `F` is zero-sized (`travel_check!` in `apply_with*`, the only places that
        // make this type), `Copy`, and a value of it existed (`new`'s witness): as in
        // `RunArg::run`.
        let f: F = unsafe { NonNull::<F>::dangling().as_ptr().read() };
        let bytes = self.bytes;
        let r =
            catch_unwind(AssertUnwindSafe(|| serialized_call(target as *mut Prop<T>, &bytes, f)));
        // SAFETY: caller promise: `out` is this request's `ResultSpace<Vec<u8>>`.
        unsafe { answer(out, r) }
    }
}

/// [`RemoteHook::take_arg`] of a [`WithRequest`] record: the serialized argument.
///
/// # Safety
/// As [`take_plain_arg`], for a `WithRequest<T, V, U, F>` record (the request half is moved
/// out and dropped here).
pub(super) unsafe fn take_with_arg<T, V, U, F>(p: *mut u8, arg: &mut Vec<u8>) -> u64 {
    // SAFETY: caller promise: target word, then the request half (record invariant 1); this
    // is its one consumption (invariant 2).
    let (target, req) = unsafe {
        (
            std::ptr::read(p as *const *mut u8),
            std::ptr::read(p.add(8) as *const WithRequest<T, V, U, F>),
        )
    };
    arg.extend_from_slice(&req.bytes);
    // SAFETY: caller promise: the request is live, so its property is.
    unsafe { wire_word::<OnProp<T>>(target) }
}

/// [`RemoteHook::put_result`] of a [`WithRequest`] record: the serialized result into the
/// `Vec<u8>` result space.
///
/// # Safety
/// `out` is a `ResultSpace<Vec<u8>>`, written once here and read once by the completion.
pub(super) unsafe fn put_with_result(wire: &[u8], out: *mut u8) {
    // SAFETY: caller promise.
    unsafe { write_result::<Vec<u8>>(out, wire.to_vec()) }
}

/// The request half of a remote-capable call on the place `P`: the argument itself.
pub(crate) type ArgReq<P, A, U, F> = ArgRequest<A, RunArg<P, U, F>>;

/// The request half for `f(value, arg)`: the argument alone. `f` is zero-sized and only
/// taken as the witness that a value of `F` existed ([`RunArg`] recreates it on the trustee).
#[inline(always)]
pub(crate) fn arg_request<P, A, U, F>(arg: A, f: F) -> ArgReq<P, A, U, F>
where
    P: Place,
    A: Plain,
    U: Plain,
    F: FnOnce(&mut P::Value, A) -> U + Copy + Send + 'static,
{
    let _witness = f;
    ArgRequest::new(arg)
}
