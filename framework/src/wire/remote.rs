//! [`RemoteVTable`]: how a trustee in another process runs a request it only knows by bytes.
//!
//! A request that may travel (`docs/rack-mode.md` §2) is a closure `F` that captures nothing,
//! an argument `A: Plain` (or a serialized value, for `apply_with`) and a result `U: Plain` (or
//! serialized). Of these only the argument's bytes travel; the closure is named by the *code
//! id* of a `RemoteVTable` (`super::code_id`), one constant per `(T, A, U, F)`: the `VT` of
//! [`Of`]`<T, A, U, F, K>`, whose marker `K` picks the kind (the table below). The serving
//! process finds the same constant from the code id (one binary, §3.2), and its
//! [`run`](RemoteVTable::run) entry reads the argument, recreates `F` (zero-sized: there is
//! nothing to read) and runs it.
//!
//! # Kinds
//!
//! | kind | table | closure | target | argument bytes |
//! | --- | --- | --- | --- | --- |
//! | [`KIND_PROPERTY`] | `Of<T, A, U, F, `[`Property`]`>` | `FnOnce(&mut T, A) -> U` | `*mut T` | `A`, rounded up to 8 |
//! | [`KIND_PROPERTY`] | `Of<T, V, U, F, `[`Serialized`]`<H>>` | `FnOnce(&mut T, V) -> U`, bincode | `*mut T` | length-prefixed ([`LEN_PREFIXED`]) |
//! | [`KIND_ELEMENT`] | `Of<T, A, U, F, `[`Element`]`>` | `FnOnce(&mut T, A) -> U` on element `i` of a `TrustArray` part | `*mut Vec<T>` | `i: u64`, then `A` rounded up to 8 |
//! | [`KIND_SPAWN`] | [`RemoteVTable::of_spawn`] (`Of<(), A, R, F, `[`Spawn`]`>`) | `FnOnce(A) -> R` | none (null) | `A`, rounded up to 8 |
//! | [`KIND_LAUNCH`] | [`RemoteVTable::of_launch`] (`Of<L, A, U, F, `[`Launch`]`>`) | `FnOnce(&mut T, A) -> U` on a `Latch<T>`, in a fiber | `*const Latch<T>` | `A`, rounded up to 8 |
//!
//! Results: a `Plain` result takes `size_of::<U>()` rounded up to 8 bytes; a serialized one is
//! length-prefixed (`len: u32 | 0u32 | len bytes | zeros to a multiple of 8`).
//!
//! # Invariants
//!
//! 1. A `RemoteVTable` is only ever made by the constructors of this module, as the
//!    associated constant of [`Of`] (promoted to `'static`), so every one in the binary has
//!    `magic == REMOTE_MAGIC`, a known `kind`, sizes that match its `run`, and a `run` made
//!    for exactly those sizes and types. No other constant of the crate holds `REMOTE_MAGIC`
//!    (it is used as an immediate everywhere else); `code_id`'s scan test checks this of
//!    every build it runs in.
//! 2. `F` is zero-sized and `Copy`, and not known by rustc to be uninhabited (checked at
//!    compile time in every constructor): a value of `F` has no bytes, so the one recreated
//!    from nothing is the only value there is; `Copy` means it has no drop glue either.
//!
//! **Known limit (found while writing this module, rustc 1.95).** A closure whose body is an
//! empty `match` on a variable of an uninhabited type (`move |c, ()| match never {}` with
//! `never: Infallible`) does not capture that variable: its type is zero-sized and inhabited
//! (`size_of::<Option<F>>() == 1`), so no compile-time check can refuse it, and its body is
//! unreachable code. Such a closure can only be *made* in dead code, but if the call site is
//! compiled its table exists (checked: it is monomorphised), and a forged batch naming it
//! would run unreachable code. Corrupted bytes cannot hit it by chance beyond the odds of
//! forging any code id (its magic, alignment and RELRO checks); a deliberate forger needs
//! the job token. The entry points should document "no `match` on uninhabited values in a
//! closure sent to a trustee".
//! 3. `A` and `U` are `Plain`: every bit pattern of their size is a valid value, so reading
//!    an argument from bytes of a batch, whatever they are, makes a valid value. They are
//!    read and written with `read_unaligned`/`write_unaligned` (no alignment requirement on
//!    the buffers).
//! 4. `run` appends to `out` exactly the result encoding its table describes, whatever
//!    happens (a panic or a refused record leaves zeros, or an empty length-prefixed
//!    result), so the size of a response is a function of the tables of its records alone.
//!    `run_uniform` (a uniform segment's records in one loop, [`KIND_PROPERTY`] and
//!    [`KIND_ELEMENT`] tables with `Plain` argument and result) keeps this per record: it reserves every result's space
//!    as zeros first, and a record writes its own only when its closure returned.
//!
//! # Why running an accepted record is safe
//!
//! `run`'s only preconditions are about the *target* (a live `T`, or `Vec<T>`, that nothing
//! else accesses during the call) and the argument length (checked again, with a panic,
//! before any read). The serving side gets the table from a code id that passed
//! `code_id::resolve` (so it is one of these constants, invariant 1) and the argument slice
//! from `envelope::validate` (so its length is the table's `arg_bytes`, or the length prefix
//! for serialized arguments). By invariants 2 and 3 the closure and its argument are then
//! valid values whatever the bytes were, the closure is safe Rust, and a panic in it is
//! caught here. So no sequence of bytes can make an accepted record undefined behaviour; the
//! worst a forged argument can do is call the program's own closure with a value it did not
//! mean, exactly as a bad value computed locally could.

use crate::channel::record::{RemoteHook, WireCode, INLINE_MAX, MAX_RESULT_BYTES};
use crate::wire::codec;
use crate::Plain;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::{type_name, Any};
use std::marker::PhantomData;
use std::mem::{size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// The first word of every [`RemoteVTable`]; the code-id validator looks for it. Drawn at
/// random; it must appear in the executable's RELRO segment only as a table's `magic`.
pub(crate) const REMOTE_MAGIC: u64 = 0x5f9e_3c2a_d17b_86e4;

/// `arg_bytes`/`result_bytes` value of a length-prefixed (serialized) argument or result.
pub(crate) const LEN_PREFIXED: u32 = u32::MAX;

/// The most bytes of a serialized argument or result (its length prefix is refused above).
pub(crate) const MAX_SERIALIZED_BYTES: usize = 1 << 24;

/// Kind of a request on a property: the target is the property, `*mut T`.
pub(crate) const KIND_PROPERTY: u32 = 1;
/// Kind of a request on one element of a `TrustArray` part: the target is the part,
/// `*mut Vec<T>`, and the argument starts with the element's index in the part (`u64`).
pub(crate) const KIND_ELEMENT: u32 = 2;
/// Kind of a spawn: no target (the target word is 0), the closure takes only the argument.
pub(crate) const KIND_SPAWN: u32 = 3;
/// Kind of a `launch`: the target is a `Latch<T>` property, which `run` locks (parking the
/// fiber it runs in while another holds it), so it runs only in a fiber of the latch's
/// trustee, started by a `Launch` control record (`wire::envelope::CONTROL_LAUNCH`); the
/// validator refuses it in any other record.
pub(crate) const KIND_LAUNCH: u32 = 4;

/// Runs a record: `(target, argument bytes, response buffer)`. See [`RemoteVTable::run`].
pub(crate) type RunFn = unsafe fn(*mut u8, &[u8], &mut Vec<u8>) -> Result<(), RunError>;

/// How a trustee turns a record's wire target word into the value it runs on: the resolved
/// target, or why the word is refused (`runtime::remote::trustee`'s `resolve_target`).
pub(crate) type Resolve<'a> = dyn FnMut(u64) -> Result<*mut u8, String> + 'a;

/// Runs every record of a uniform segment: `(records' bytes, resolver, response buffer, panic
/// list)`. See [`RemoteVTable::run_uniform`].
pub(crate) type RunUniformFn = unsafe fn(
    &[u8],
    &mut Resolve<'_>,
    &mut Vec<u8>,
    &mut Vec<(u32, String)>,
) -> Result<(), (u32, String)>;

/// Why a record ran without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunError {
    /// The closure panicked; the panic's message (`&str`/`String` payloads, else
    /// `"<non-string panic>"`).
    Panicked(String),
    /// The record cannot run: its argument does not decode (serialized arguments) or its
    /// `TrustArray` index is out of the part. The batch is bad (`docs/rack-mode.md` §3.4
    /// item 4); the closure did not run.
    Refused(String),
}

/// The static description of one remote-capable request type; see the module docs.
///
/// `repr(C)`, so the validator may read `magic` and the sizes at fixed offsets.
#[repr(C, align(8))]
#[derive(Debug)]
pub(crate) struct RemoteVTable {
    /// [`REMOTE_MAGIC`].
    pub(crate) magic: u64,
    /// Argument bytes on the wire (a multiple of 8), or [`LEN_PREFIXED`].
    pub(crate) arg_bytes: u32,
    /// Result bytes in the response (a multiple of 8), or [`LEN_PREFIXED`].
    pub(crate) result_bytes: u32,
    /// [`KIND_PROPERTY`], [`KIND_ELEMENT`], [`KIND_SPAWN`] or [`KIND_LAUNCH`].
    pub(crate) kind: u32,
    /// Runs the request; see [`RemoteVTable::run`].
    pub(crate) run: RunFn,
    /// The name of the type of value the record's target must be (`std::any::type_name`:
    /// `T` for a property request, `Vec<T>` for an element of a `TrustArray` part,
    /// `Latch<T>` for a launch, `()` for a spawn, which has no target). The owner compares it
    /// with the name its export recorded for the property (`PropPtr::type_name`) before the
    /// record runs, so a wire target of a live export of another type is refused.
    pub(crate) target_type: fn() -> &'static str,
    /// Runs all the records of a uniform segment of this table in one call
    /// ([`RemoteVTable::run_uniform`]): `Some` for [`KIND_PROPERTY`] and [`KIND_ELEMENT`]
    /// tables with a `Plain` argument and result, whose closure is inlined in that loop;
    /// `None` for the others,
    /// which run record by record.
    pub(crate) run_uniform: Option<RunUniformFn>,
}

/// Byte offsets of the fields the code-id validator reads (checked by a test).
pub(crate) const OFFSET_ARG_BYTES: usize = 8;
pub(crate) const OFFSET_RESULT_BYTES: usize = 12;
pub(crate) const OFFSET_KIND: usize = 16;
pub(crate) const OFFSET_RUN: usize = 24;

const fn round8(n: usize) -> u32 {
    (n.div_ceil(8) * 8) as u32
}

/// The holder of the constant table of `(T, A, U, F)`; `K` picks the constructor.
pub(crate) struct Of<T, A, U, F, K>(PhantomData<OfTypes<T, A, U, F, K>>);

/// The types an [`Of`] is instantiated with (a function type: no auto-trait or drop effects).
type OfTypes<T, A, U, F, K> = fn() -> (*const T, A, U, F, K);

/// Marker of a request `f(&mut property, arg)` with a `Plain` argument and result (the
/// requests' hooks in `crate::trust`; the tests' `RemoteVTable::of`).
pub(crate) struct Property;
/// Marker of a request `f(&mut property, value)` whose argument and result are serialized by
/// [`codec::encode_with`], their handles moved by `H` (`apply_with`; the tests'
/// `RemoteVTable::of_with`).
pub(crate) struct Serialized<H>(PhantomData<H>);
/// Marker of a request on one element of a `TrustArray` part (the tests'
/// `RemoteVTable::of_element`).
pub(crate) struct Element;
/// Marker for [`RemoteVTable::of_spawn`].
pub(crate) struct Spawn;
/// Marker for [`RemoteVTable::of_launch`].
pub(crate) struct Launch;

/// Compile-time checks on a closure type that is recreated from nothing (invariant 2).
const fn check_closure<F>() {
    assert!(
        size_of::<F>() == 0,
        "skein: a closure sent to a trustee must capture nothing: pass its data as the \
         argument (a skein::Plain value) or serialize it with apply_with"
    );
    // An uninhabited zero-sized type has no value to recreate. rustc lays out `Option` of a
    // type it knows to be uninhabited without a tag (size 0), and of an inhabited ZST with
    // one (size 1); `option_of_uninhabited_is_zero_sized` checks that this still holds.
    // (Best effort: see the known limit in the module docs.)
    assert!(size_of::<Option<F>>() != 0, "skein: a closure sent to a trustee must be inhabited");
}

/// The table of a record whose argument `A` and result `U` are `Plain` values travelling
/// inline (`prefix` bytes of fixed fields before the argument, e.g. an element index): the
/// size limits are checked at compile time, in the constructor that names the closure.
const fn inline_table<A, U>(
    prefix: u32,
    kind: u32,
    run: RunFn,
    target_type: fn() -> &'static str,
    run_uniform: Option<RunUniformFn>,
) -> RemoteVTable {
    assert!(
        size_of::<A>() <= INLINE_MAX && size_of::<U>() <= MAX_RESULT_BYTES,
        "skein: argument or result too big to travel inline: use apply_with"
    );
    RemoteVTable {
        magic: REMOTE_MAGIC,
        arg_bytes: prefix + round8(size_of::<A>()),
        result_bytes: round8(size_of::<U>()),
        kind,
        run,
        target_type,
        run_uniform,
    }
}

impl<T, A: Plain, U: Plain, F> Of<T, A, U, F, Property>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    pub(crate) const VT: &'static RemoteVTable = &{
        check_closure::<F>();
        inline_table::<A, U>(
            0,
            KIND_PROPERTY,
            run_property::<T, A, U, F>,
            type_name::<T>,
            Some(run_property_uniform::<T, A, U, F>),
        )
    };
}

impl<T, V, U, F, H: codec::Handles> Of<T, V, U, F, Serialized<H>>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    pub(crate) const VT: &'static RemoteVTable = &{
        check_closure::<F>();
        RemoteVTable {
            magic: REMOTE_MAGIC,
            arg_bytes: LEN_PREFIXED,
            result_bytes: LEN_PREFIXED,
            kind: KIND_PROPERTY,
            run: run_serialized::<T, V, U, F, H>,
            target_type: type_name::<T>,
            run_uniform: None,
        }
    };
}

impl<T, A: Plain, U: Plain, F> Of<T, A, U, F, Element>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    pub(crate) const VT: &'static RemoteVTable = &{
        check_closure::<F>();
        inline_table::<A, U>(
            8,
            KIND_ELEMENT,
            run_element::<T, A, U, F>,
            type_name::<Vec<T>>,
            Some(run_element_uniform::<T, A, U, F>),
        )
    };
}

impl<A: Plain, R: Plain, F> Of<(), A, R, F, Spawn>
where
    F: FnOnce(A) -> R + Copy + Send + 'static,
{
    pub(crate) const VT: &'static RemoteVTable = &{
        check_closure::<F>();
        inline_table::<A, R>(0, KIND_SPAWN, run_spawn::<A, R, F>, type_name::<()>, None)
    };
}

impl<L: LaunchLock, A: Plain, U: Plain, F> Of<L, A, U, F, Launch>
where
    F: FnOnce(&mut L::Value, A) -> U + Copy + Send + 'static,
{
    pub(crate) const VT: &'static RemoteVTable = &{
        check_closure::<F>();
        inline_table::<A, U>(0, KIND_LAUNCH, run_launch::<L, A, U, F>, type_name::<L>, None)
    };
}

/// The lock a `launch` holds around its closure (`Latch<T>`, `crate::runtime::latch`):
/// declared here, implemented above, so that the wire format names no handle or runtime type
/// (`docs/ARCHITECTURE.md`, "Layers").
///
/// # Safety
/// Between `lock_raw` and the matching `unlock_raw`, the caller has the only access to the
/// value at `value_ptr`.
pub(crate) unsafe trait LaunchLock {
    /// The locked value.
    type Value;
    /// Locks the lock at `l` (it may park the current fiber).
    ///
    /// # Safety
    /// `l` points to a live lock owned by the current worker, alive until the matching
    /// `unlock_raw`; called from a fiber of that worker.
    unsafe fn lock_raw(l: *const Self);
    /// Unlocks the lock at `l`.
    ///
    /// # Safety
    /// `l` points to a live lock of this worker that the caller locked.
    unsafe fn unlock_raw(l: *const Self);
    /// The value (stable for the lock's life).
    ///
    /// # Safety
    /// `l` points to a live lock.
    unsafe fn value_ptr(l: *const Self) -> *mut Self::Value;
}

impl RemoteHook {
    /// The table a trustee of another rank runs the record with.
    #[inline(always)]
    pub(crate) fn vt(&self) -> &'static RemoteVTable {
        // SAFETY: every `WireCode` is made by `RemoteVTable::code` (the only caller of
        // `WireCode::erase`), so of a `&'static RemoteVTable`.
        unsafe { self.code.get::<RemoteVTable>() }
    }
}

impl RemoteVTable {
    /// This table as the opaque code a record's `RemoteHook` carries through the channel.
    pub(crate) const fn code(&'static self) -> WireCode {
        WireCode::erase(self)
    }

    /// The table of a `launch` of `f(&mut value, arg)` on a lock `L` property (a `Latch<T>`:
    /// run in a fiber on the latch's trustee, with the latch held).
    pub(crate) fn of_launch<L: LaunchLock, A: Plain, U: Plain, F>(_: &F) -> &'static RemoteVTable
    where
        F: FnOnce(&mut L::Value, A) -> U + Copy + Send + 'static,
    {
        const { check_closure::<F>() };
        Of::<L, A, U, F, Launch>::VT
    }

    /// The table of a request `f(&mut property, arg)` with a `Plain` argument and result.
    /// The argument only names `F`'s type.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn of<T, A: Plain, U: Plain, F>(_: &F) -> &'static RemoteVTable
    where
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        const { check_closure::<F>() };
        Of::<T, A, U, F, Property>::VT
    }

    /// The table of an `apply_with` request: argument and result serialized by
    /// [`codec`], length-prefixed on the wire.
    #[cfg(test)]
    pub(crate) fn of_with<T, V, U, F>(_: &F) -> &'static RemoteVTable
    where
        V: Serialize + DeserializeOwned,
        U: Serialize + DeserializeOwned,
        F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
    {
        const { check_closure::<F>() };
        Of::<T, V, U, F, Serialized<codec::NoHandles>>::VT
    }

    /// The table of a request on one element of a `TrustArray` part (a `Vec<T>` property);
    /// the wire argument is the element's index in the part (`u64`), then `A`.
    #[cfg(test)]
    pub(crate) fn of_element<T, A: Plain, U: Plain, F>(_: &F) -> &'static RemoteVTable
    where
        F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
    {
        const { check_closure::<F>() };
        Of::<T, A, U, F, Element>::VT
    }

    /// The table of a spawn `f(arg)` on a remote worker (no target).
    pub(crate) fn of_spawn<A: Plain, R: Plain, F>(_: &F) -> &'static RemoteVTable
    where
        F: FnOnce(A) -> R + Copy + Send + 'static,
    {
        const { check_closure::<F>() };
        Of::<(), A, R, F, Spawn>::VT
    }

    /// True for serialized (length-prefixed) arguments.
    pub(crate) fn arg_prefixed(&self) -> bool {
        self.arg_bytes == LEN_PREFIXED
    }

    /// True for serialized (length-prefixed) results.
    pub(crate) fn result_prefixed(&self) -> bool {
        self.result_bytes == LEN_PREFIXED
    }

    /// Runs the request on `target` with the argument `arg` and appends its result to `out`
    /// (always exactly the encoding the table describes: invariant 4).
    ///
    /// # Safety
    /// * [`KIND_PROPERTY`]: `target` points to a live `T` of the table's type, which nothing
    ///   else reads or writes during the call; [`KIND_ELEMENT`]: the same for a `Vec<T>`;
    ///   [`KIND_SPAWN`]: `target` is ignored.
    /// * `arg` holds the argument as the table describes it (`arg_bytes` bytes, or the
    ///   serialized bytes without their length prefix): what `envelope::validate` hands out.
    ///   (A shorter argument panics before any read, it is not undefined behaviour.)
    pub(crate) unsafe fn run(
        &self,
        target: *mut u8,
        arg: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), RunError> {
        // SAFETY: caller promise, passed on to the table's own `run` (invariant 1: it was made
        // for this table's types and sizes).
        unsafe { (self.run)(target, arg, out) }
    }

    /// Runs every record of a uniform segment of this table: `body` holds the records after
    /// the segment's code id (per record its target word, then `arg_bytes` bytes), each
    /// target word is turned into its value by `resolve` right before that record runs, except
    /// that a record whose word equals the previous record's reuses that record's value
    /// without a call (a refused word stops the segment: `Err((record, why))`, the records
    /// before it have run),
    /// and the results are appended to `out` in order, as [`RemoteVTable::run`] would for
    /// each (a panicking record leaves zeros and adds `(record, message)` to `panics`; the
    /// others still run). `None` when the table has no such loop (the caller runs the records
    /// one by one with [`RemoteVTable::run`]).
    ///
    /// Why: a segment's records then cost one call, one `catch_unwind` (entered again only
    /// after a panic) and one resize of `out`, with the closure inlined in the loop, instead
    /// of an indirect call, a `catch_unwind` and a resize per record.
    ///
    /// # Safety
    /// As [`RemoteVTable::run`] for each record, with "`target`" the pointer `resolve`
    /// returns for its word: a live value of the table's target type that nothing else
    /// accesses while that record runs, and still so for the next records with the same word
    /// (they reuse it). `body` is a uniform segment of this table accepted
    /// by `envelope::validate` (a whole number of records; a body that is not is refused,
    /// not read out of bounds).
    pub(crate) unsafe fn run_uniform(
        &self,
        body: &[u8],
        resolve: &mut Resolve<'_>,
        out: &mut Vec<u8>,
        panics: &mut Vec<(u32, String)>,
    ) -> Option<Result<(), (u32, String)>> {
        let run = self.run_uniform?;
        // SAFETY: caller promise, passed on to the table's own loop (invariant 1).
        Some(unsafe { run(body, resolve, out, panics) })
    }
}

/// Recreates the zero-sized, inhabited, `Copy` closure `F`.
///
/// # Safety
/// `F` passed [`check_closure`] (every constructor checks it at compile time).
unsafe fn conjure<F>() -> F {
    const { check_closure::<F>() };
    // SAFETY: `F` is zero-sized, so a value of it has no bytes and none can be uninitialised
    // or invalid; it is not known to be uninhabited (`check_closure`; see the module docs'
    // known limit for the one case it misses), so the type has a value, and being a ZST it
    // has exactly one. A closure that captures nothing has no state, and one that
    // captures only `Copy` zero-sized values (the type system cannot tell them apart) holds
    // nothing either; so this is the value the client made, which it could copy (`F: Copy`).
    // (Clippy's `uninit_assumed_init` warns for types whose bytes must be initialised; a
    // zero-sized type has none. `ptr::read` from a dangling pointer would be equivalent.)
    #[allow(clippy::uninit_assumed_init)]
    unsafe {
        MaybeUninit::<F>::uninit().assume_init()
    }
}

/// Reads a `Plain` value from the start of `bytes` (panics if there are too few).
pub(crate) fn read_plain<A: Plain>(bytes: &[u8]) -> A {
    assert!(bytes.len() >= size_of::<A>(), "skein: argument shorter than its type");
    // SAFETY: `bytes` holds at least `size_of::<A>()` initialised bytes (checked above), and
    // every bit pattern is a valid `A` (`Plain`); `read_unaligned` needs no alignment.
    unsafe { ptr::read_unaligned(bytes.as_ptr() as *const A) }
}

/// Appends `v` rounded up to 8 bytes (zeros after it) to `out`.
pub(crate) fn push_plain<U: Plain>(out: &mut Vec<u8>, v: U) {
    let at = out.len();
    out.resize(at + round8(size_of::<U>()) as usize, 0);
    // SAFETY: `out[at..]` has `size_of::<U>()` bytes or more (just resized); a byte copy of
    // `v` (`write_unaligned` needs no alignment; padding bytes of `U` are copied as bytes,
    // never read as values).
    unsafe { ptr::write_unaligned(out.as_mut_ptr().add(at) as *mut U, v) };
}

/// Appends a length-prefixed blob: `len: u32 | 0u32 | bytes | zeros to a multiple of 8`.
pub(crate) fn push_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(bytes);
    out.resize(out.len() + (round8(bytes.len()) as usize - bytes.len()), 0);
}

/// The message of a panic payload, as it travels: `&str` and `String` payloads, else
/// `"<non-string panic>"`. Drops the payload (a panic while dropping it is swallowed).
pub(crate) fn panic_message(p: Box<dyn Any + Send>) -> String {
    let msg = if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic>".to_string()
    };
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
        std::mem::forget(again);
    }
    msg
}

/// Runs `f` under `catch_unwind` and writes its `Plain` result into the `U` space reserved
/// at `out[at..]` (zeros stay there if it panics).
fn run_caught<U: Plain>(out: &mut Vec<u8>, f: impl FnOnce() -> U) -> Result<(), RunError> {
    let at = out.len();
    out.resize(at + round8(size_of::<U>()) as usize, 0);
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(u) => {
            // SAFETY: `out[at..]` holds `round8(size_of::<U>())` bytes (resized above, and the
            // closure cannot touch `out`); a byte copy of `u` (no alignment needed).
            unsafe { ptr::write_unaligned(out.as_mut_ptr().add(at) as *mut U, u) };
            Ok(())
        }
        Err(p) => Err(RunError::Panicked(panic_message(p))),
    }
}

/// `run` of [`RemoteVTable::of_launch`]: locks the latch (parking the calling fiber while
/// another holds it), runs `f` on its value, unlocks (also when `f` panics).
///
/// # Safety
/// As [`RemoteVTable::run`], with `target` a live `Latch<T>` owned by the current worker,
/// alive until this returns, and the call made from a fiber of that worker (not delegated
/// context: the lock may park).
unsafe fn run_launch<L: LaunchLock, A: Plain, U: Plain, F>(
    target: *mut u8,
    arg: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RunError>
where
    F: FnOnce(&mut L::Value, A) -> U + Copy + Send + 'static,
{
    let a = read_plain::<A>(arg);
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    let latch = target as *const L;
    /// Unlocks on drop (a panic of `f` included).
    struct Unlock<L: LaunchLock>(*const L);
    impl<L: LaunchLock> Drop for Unlock<L> {
        fn drop(&mut self) {
            // SAFETY: locked below by this call, and alive (caller promise).
            unsafe { L::unlock_raw(self.0) };
        }
    }
    run_caught(out, move || {
        // SAFETY: caller promise: a live latch of this worker, alive until the unlock.
        unsafe { L::lock_raw(latch) };
        let _u = Unlock(latch);
        // SAFETY: we hold the latch (`LaunchLock`'s contract): the only access to the value.
        let value = unsafe { &mut *L::value_ptr(latch) };
        f(value, a)
    })
}

/// `run` of a [`Property`] table.
///
/// # Safety
/// As [`RemoteVTable::run`] for [`KIND_PROPERTY`].
unsafe fn run_property<T, A: Plain, U: Plain, F>(
    target: *mut u8,
    arg: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RunError>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    let a = read_plain::<A>(arg);
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    // SAFETY: caller promise: `target` is a live `T` that only this call accesses.
    let t = unsafe { &mut *(target as *mut T) };
    run_caught(out, move || f(t, a))
}

/// `run_uniform` of a [`Property`] table: the records of a uniform segment in one loop.
///
/// # Safety
/// As [`RemoteVTable::run_uniform`] for a [`KIND_PROPERTY`] table of `(T, A, U, F)`.
unsafe fn run_property_uniform<T, A: Plain, U: Plain, F>(
    body: &[u8],
    resolve: &mut Resolve<'_>,
    out: &mut Vec<u8>,
    panics: &mut Vec<(u32, String)>,
) -> Result<(), (u32, String)>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    let arg_bytes = round8(size_of::<A>()) as usize;
    // SAFETY: caller promise, passed on; `run` reads the record's argument and, through the
    // pointer `uniform_loop` hands it (a live `T` that only this record accesses while it
    // runs: the caller's promise on `resolve`), the value.
    unsafe {
        uniform_loop::<U>(body, arg_bytes, resolve, out, panics, |t, arg| {
            Ok(f(&mut *(t as *mut T), read_plain::<A>(arg)))
        })
    }
}

/// `run_uniform` of an [`Element`] table: as [`run_property_uniform`], each record's
/// argument its element index then `A`; an index outside the part refuses the segment there,
/// as [`run_element`] refuses its record.
///
/// # Safety
/// As [`RemoteVTable::run_uniform`] for a [`KIND_ELEMENT`] table of `(T, A, U, F)`.
unsafe fn run_element_uniform<T, A: Plain, U: Plain, F>(
    body: &[u8],
    resolve: &mut Resolve<'_>,
    out: &mut Vec<u8>,
    panics: &mut Vec<(u32, String)>,
) -> Result<(), (u32, String)>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    let arg_bytes = 8 + round8(size_of::<A>()) as usize;
    // SAFETY: caller promise, passed on; the pointer `uniform_loop` hands `run` is a live
    // `Vec<T>` that only this record accesses while it runs (the caller's promise on
    // `resolve`); the element is reached through it, bounds-checked.
    unsafe {
        uniform_loop::<U>(body, arg_bytes, resolve, out, panics, |t, arg| {
            let i = read_plain::<u64>(arg);
            let part = &mut *(t as *mut Vec<T>);
            let len = part.len();
            match usize::try_from(i).ok().and_then(|i| part.get_mut(i)) {
                Some(v) => Ok(f(v, read_plain::<A>(&arg[8..]))),
                None => Err(format!("element index {i} out of a part of {len}")),
            }
        })
    }
}

/// The loop of a uniform segment: per record its target word, resolved as
/// [`RemoteVTable::run_uniform`] says (a word equal to the previous record's reuses its
/// value), then `run(target, the record's arg_bytes)`, whose result is written to the record's
/// result space in `out` (zeros for a record that panicked, which is added to `panics`; an
/// `Err` from `resolve` or `run` refuses the segment at that record).
///
/// # Safety
/// As [`RemoteVTable::run_uniform`]; `run` may rely on that promise for the pointer it gets.
#[inline(always)]
unsafe fn uniform_loop<U: Plain>(
    body: &[u8],
    arg_bytes: usize,
    resolve: &mut Resolve<'_>,
    out: &mut Vec<u8>,
    panics: &mut Vec<(u32, String)>,
    mut run: impl FnMut(*mut u8, &[u8]) -> Result<U, String>,
) -> Result<(), (u32, String)> {
    let stride = 8 + arg_bytes;
    let result = round8(size_of::<U>()) as usize;
    let n = body.len() / stride;
    if n * stride != body.len() {
        return Err((
            0,
            format!("a uniform segment of {} bytes, not records of {stride}", body.len()),
        ));
    }
    let at = out.len();
    // Every result's space, zeros (what a panicking record leaves: invariant 4).
    out.resize(at + n * result, 0);
    let results = &mut out[at..];
    let mut i = 0;
    // The previous record's word and value: consecutive records to one value (the common
    // case) resolve it once, without an indirect call each (caller promise: it stays valid).
    let mut last: Option<(u64, *mut u8)> = None;
    while i < n {
        // One `catch_unwind` for the records from `i` on; after a panic, the next one.
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            while i < n {
                let k = i;
                let rec = &body[k * stride..(k + 1) * stride];
                let word = u64::from_le_bytes(rec[..8].try_into().unwrap_or([0; 8]));
                let t = match last {
                    Some((w, t)) if w == word => t,
                    _ => {
                        let t = resolve(word)?;
                        last = Some((word, t));
                        t
                    }
                };
                let u = run(t, &rec[8..])?;
                let space = &mut results[k * result..(k + 1) * result];
                // SAFETY: `space` holds `round8(size_of::<U>())` bytes (a zero-sized `U` writes
                // none); a byte copy of `u` (no alignment needed).
                unsafe { ptr::write_unaligned(space.as_mut_ptr() as *mut U, u) };
                i = k + 1;
            }
            Ok(())
        }));
        match r {
            Ok(Ok(())) => break,
            Ok(Err(why)) => return Err((i as u32, why)),
            Err(p) => {
                panics.push((i as u32, panic_message(p)));
                i += 1;
            }
        }
    }
    Ok(())
}

/// `run` of an [`Element`] table.
///
/// # Safety
/// As [`RemoteVTable::run`] for [`KIND_ELEMENT`].
unsafe fn run_element<T, A: Plain, U: Plain, F>(
    target: *mut u8,
    arg: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RunError>
where
    F: FnOnce(&mut T, A) -> U + Copy + Send + 'static,
{
    let i = read_plain::<u64>(arg);
    let a = read_plain::<A>(arg.get(8..).unwrap_or(&[]));
    // SAFETY: caller promise: `target` is a live `Vec<T>` that only this call accesses.
    let part = unsafe { &mut *(target as *mut Vec<T>) };
    let len = part.len();
    let Some(t) = usize::try_from(i).ok().and_then(|i| part.get_mut(i)) else {
        out.resize(out.len() + round8(size_of::<U>()) as usize, 0);
        return Err(RunError::Refused(format!("element index {i} out of a part of {len}")));
    };
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    run_caught(out, move || f(t, a))
}

/// `run` of [`RemoteVTable::of_spawn`].
///
/// # Safety
/// None beyond [`RemoteVTable::run`]'s argument rule (`target` is ignored).
unsafe fn run_spawn<A: Plain, R: Plain, F>(
    _target: *mut u8,
    arg: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RunError>
where
    F: FnOnce(A) -> R + Copy + Send + 'static,
{
    let a = read_plain::<A>(arg);
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    run_caught(out, move || f(a))
}

/// `run` of a [`Serialized`] table.
///
/// # Safety
/// As [`RemoteVTable::run`] for [`KIND_PROPERTY`].
unsafe fn run_serialized<T, V, U, F, H: codec::Handles>(
    target: *mut u8,
    arg: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), RunError>
where
    V: Serialize + DeserializeOwned,
    U: Serialize + DeserializeOwned,
    F: FnOnce(&mut T, V) -> U + Copy + Send + 'static,
{
    let v = match catch_unwind(|| codec::decode_with::<H, V>(arg)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            push_prefixed(out, &[]);
            return Err(RunError::Refused(e.to_string()));
        }
        Err(p) => {
            push_prefixed(out, &[]);
            return Err(RunError::Panicked(panic_message(p)));
        }
    };
    // SAFETY: `F` passed `check_closure` in `Of::VT`, the only place this fn is named.
    let f = unsafe { conjure::<F>() };
    // SAFETY: caller promise: `target` is a live `T` that only this call accesses.
    let t = unsafe { &mut *(target as *mut T) };
    // The result is encoded inside the guard: a `Serialize` impl may panic too.
    match catch_unwind(AssertUnwindSafe(move || codec::encode_with::<H, U>(&f(t, v)))) {
        Ok(Ok(bytes)) if bytes.len() <= MAX_SERIALIZED_BYTES => {
            push_prefixed(out, &bytes);
            Ok(())
        }
        Ok(Ok(bytes)) => {
            push_prefixed(out, &[]);
            Err(RunError::Panicked(format!(
                "result of {} bytes is over the {MAX_SERIALIZED_BYTES}-byte limit",
                bytes.len()
            )))
        }
        Ok(Err(e)) => {
            push_prefixed(out, &[]);
            Err(RunError::Panicked(e.to_string()))
        }
        Err(p) => {
            push_prefixed(out, &[]);
            Err(RunError::Panicked(panic_message(p)))
        }
    }
}

#[cfg(test)]
mod tests;
