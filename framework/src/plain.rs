//! [`Plain`]: data that may travel between ranks by copying its bytes.
//!
//! Rack mode (`docs/rack-mode.md` §2) sends a request to a trustee that may live in another
//! process. What travels is the request's *argument*, copied byte for byte; the closure that
//! runs on it captures nothing and is recreated on the far side from its code id. So the
//! argument must mean the same in every process and every byte pattern of it must be a valid
//! value: a forged or corrupted batch can then never make an invalid value (the receiver
//! validates sizes and code ids, never the bytes of an argument).
//!
//! # Invariants
//!
//! A type implementing `Plain`:
//! 1. holds no address: no pointer, reference, `Box`, `Vec`, `String`, `Trust` or other
//!    handle, directly or in a field;
//! 2. is valid for every bit pattern of its size (so not `bool`, `char`, enums, `Option`,
//!    `NonZero*`);
//! 3. is `Copy + Send + Sync + 'static`.
//!
//! Padding bytes (a `#[repr(C)]` struct with gaps) are allowed: arguments are moved with byte
//! copies (`ptr::copy_nonoverlapping`, `read_unaligned`), which never read padding as a value.

/// Data that may travel between ranks by copying its bytes: no addresses, and every bit
/// pattern of its size is a valid value.
///
/// Implemented for the integer and float types, `()`, arrays of `Plain` and tuples of up to
/// eight `Plain` values. Implement it for your own `#[repr(C)]` structs whose fields are all
/// `Plain`:
///
/// ```
/// #[derive(Clone, Copy)]
/// #[repr(C)]
/// struct Relax {
///     vertex: u32,
///     level: u32,
///     dist: f32,
/// }
/// // SAFETY: repr(C), every field is Plain, so no address and every bit pattern is valid.
/// unsafe impl skein::Plain for Relax {}
///
/// fn sendable<T: skein::Plain>(_: T) {}
/// sendable(Relax { vertex: 7, level: 1, dist: 0.5 });
/// ```
///
/// # Safety
///
/// Implement only for types that hold no pointer, reference or handle (directly or in a
/// field) and are valid for every bit pattern of their size: integers, floats, arrays and
/// tuples of such, `#[repr(C)]` structs of such. Not `bool`, `char`, enums, `Option`,
/// `NonZero*`, references, `Trust`, `Box`, `Vec` or `String`.
pub unsafe trait Plain: Copy + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: no address, every bit pattern is a valid value.
        unsafe impl Plain for $t {}
    )* };
}
plain!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64, ());

// SAFETY: an array of Plain values has no address and no invalid bit pattern (its bytes are
// its elements' bytes, with no padding between them).
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

macro_rules! plain_tuple {
    ($($name:ident),+) => {
        // SAFETY: every field is Plain; a tuple adds only padding, which is never read as a
        // value (module invariants).
        unsafe impl<$($name: Plain),+> Plain for ($($name,)+) {}
    };
}
plain_tuple!(A);
plain_tuple!(A, B);
plain_tuple!(A, B, C);
plain_tuple!(A, B, C, D);
plain_tuple!(A, B, C, D, E);
plain_tuple!(A, B, C, D, E, F);
plain_tuple!(A, B, C, D, E, F, G);
plain_tuple!(A, B, C, D, E, F, G, H);

#[cfg(test)]
mod tests;
