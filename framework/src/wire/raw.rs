//! [`Raw`]: a vector of numbers that travels as its bytes, for the bulk data of an
//! `apply_with` (bitmaps, rank values, slices of a result).
//!
//! The codec ([`super::codec`]: bincode's standard configuration) writes every integer of a
//! `Vec<u64>` as a *varint*: one byte below 251, up to 9 bytes above `2^32`, each read and
//! written with branches. That suits counts and small ids. Words with high bits set (a
//! bitmap's words, an `f64`'s bits) take 9 bytes each, and encoding and decoding them costs
//! far more than copying them. `Raw<T>` serializes as one byte string, the numbers'
//! little-endian bytes one after another: a length, then a copy.
//!
//! ```
//! use skein::codec::Raw;
//!
//! let words = Raw(vec![u64::MAX, 1 << 63, 7]);
//! let bytes = skein::wire::codec::encode(&words).unwrap();
//! // One length byte, 24 bytes of words, the empty handle trailer (4 bytes).
//! assert_eq!(bytes.len(), 1 + 24 + 4);
//! assert_eq!(skein::wire::codec::decode::<Raw<u64>>(&bytes).unwrap(), words);
//! // As a `Vec<u64>`: 9 + 9 + 1 bytes of varints.
//! assert_eq!(skein::wire::codec::encode(&words.0).unwrap().len(), 1 + 19 + 4);
//! ```
//!
//! Decoding refuses a byte string whose length is not a multiple of the number's size, with
//! the codec's error. No `unsafe`: the numbers are written and read with `to_le_bytes` and
//! `from_le_bytes`, which compile to copies on little-endian machines.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// A number [`Raw`] carries: the integers and floats of 1 to 8 bytes (sealed).
pub trait RawNumber: Copy + sealed::Sealed {
    /// Bytes of one number.
    const SIZE: usize;
    /// Writes the number's little-endian bytes into `to` (`SIZE` bytes).
    fn write_le(self, to: &mut [u8]);
    /// The number whose little-endian bytes are `from` (`SIZE` bytes).
    fn read_le(from: &[u8]) -> Self;
    /// The little-endian bytes of `numbers`, one after another (bytes are their own bytes:
    /// borrowed, not copied).
    fn slice_to_le(numbers: &[Self]) -> Cow<'_, [u8]> {
        let mut bytes = vec![0u8; numbers.len() * Self::SIZE];
        for (to, &x) in bytes.chunks_exact_mut(Self::SIZE).zip(numbers) {
            x.write_le(to);
        }
        Cow::Owned(bytes)
    }
    /// The numbers whose little-endian bytes are `bytes` (a multiple of `SIZE` long).
    fn vec_from_le(bytes: &[u8]) -> Vec<Self> {
        bytes.chunks_exact(Self::SIZE).map(Self::read_le).collect()
    }
}

macro_rules! raw_numbers {
    ($($t:ty),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl RawNumber for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn write_le(self, to: &mut [u8]) {
                to.copy_from_slice(&self.to_le_bytes());
            }
            #[inline]
            fn read_le(from: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(from);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}

raw_numbers!(u16, u32, u64, i8, i16, i32, i64, f32, f64);

impl sealed::Sealed for u8 {}
impl RawNumber for u8 {
    const SIZE: usize = 1;
    #[inline]
    fn write_le(self, to: &mut [u8]) {
        to[0] = self;
    }
    #[inline]
    fn read_le(from: &[u8]) -> Self {
        from[0]
    }
    fn slice_to_le(numbers: &[u8]) -> Cow<'_, [u8]> {
        Cow::Borrowed(numbers)
    }
    fn vec_from_le(bytes: &[u8]) -> Vec<u8> {
        bytes.to_vec()
    }
}

/// A `Vec<T>` that serializes as the little-endian bytes of its numbers (module docs): for
/// bulk data in `apply_with` arguments and results, where the codec's varints cost more than
/// a copy.
///
/// ```
/// use skein::codec::Raw;
///
/// let bits: Raw<f64> = Raw(vec![0.25, -1.5]);
/// let back: Raw<f64> = skein::wire::codec::decode(&skein::wire::codec::encode(&bits).unwrap())
///     .unwrap();
/// assert_eq!(back.0, [0.25, -1.5]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Raw<T: RawNumber>(pub Vec<T>);

impl<T: RawNumber> Raw<T> {
    /// The numbers' little-endian bytes, one after another.
    pub fn to_le_bytes(&self) -> Vec<u8> {
        T::slice_to_le(&self.0).into_owned()
    }

    /// The numbers whose little-endian bytes are `bytes`; `None` when its length is not a
    /// multiple of the number's size.
    pub fn from_le_bytes(bytes: &[u8]) -> Option<Raw<T>> {
        if bytes.len() % T::SIZE != 0 {
            return None;
        }
        Some(Raw(T::vec_from_le(bytes)))
    }
}

impl<T: RawNumber> Serialize for Raw<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&T::slice_to_le(&self.0))
    }
}

impl<'de, T: RawNumber> Deserialize<'de> for Raw<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Raw<T>, D::Error> {
        d.deserialize_bytes(RawVisitor(PhantomData))
    }
}

/// Reads [`Raw`]'s byte string (or, from a format that writes bytes as a sequence, its
/// sequence of bytes).
struct RawVisitor<T>(PhantomData<T>);

impl<'de, T: RawNumber> Visitor<'de> for RawVisitor<T> {
    type Value = Raw<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a byte string of {}-byte numbers (a multiple of {} bytes)", T::SIZE, T::SIZE)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Raw<T>, E> {
        Raw::from_le_bytes(v).ok_or_else(|| E::invalid_length(v.len(), &self))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw<T>, A::Error> {
        // Only the bytes actually present are kept (no allocation of a claimed length).
        let mut bytes = Vec::new();
        while let Some(b) = seq.next_element::<u8>()? {
            bytes.push(b);
        }
        self.visit_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::codec::{decode, encode};

    #[test]
    fn every_number_type_round_trips_through_the_codec() {
        fn check<T: RawNumber + PartialEq + fmt::Debug>(v: Vec<T>) {
            let bytes = encode(&Raw(v.clone())).unwrap();
            assert_eq!(decode::<Raw<T>>(&bytes).unwrap().0, v);
        }
        check(vec![0u8, 255, 7]);
        check(vec![u16::MAX, 0, 300]);
        check(vec![u32::MAX, 1, 1 << 31]);
        check(vec![u64::MAX, 0, 1 << 63, 12345]);
        check(vec![i8::MIN, -1, 5]);
        check(vec![i16::MIN, 3]);
        check(vec![i32::MIN, -7, i32::MAX]);
        check(vec![i64::MIN, -1, i64::MAX]);
        check(vec![f32::MIN_POSITIVE, -0.5, f32::INFINITY]);
        check(vec![f64::MAX, -0.0, 1e-300, f64::NEG_INFINITY]);
        check(Vec::<u64>::new());
        let nan = decode::<Raw<f64>>(&encode(&Raw(vec![f64::NAN])).unwrap()).unwrap();
        assert_eq!(nan.0[0].to_bits(), f64::NAN.to_bits());
    }

    #[test]
    fn the_bytes_are_a_length_then_the_little_endian_numbers() {
        let bytes = encode(&Raw(vec![0x0102_0304u32, 0xa0b0_c0d0])).unwrap();
        assert_eq!(bytes, [8, 4, 3, 2, 1, 0xd0, 0xc0, 0xb0, 0xa0, 0, 0, 0, 0]);
        // The same bytes as a `Vec<u8>` of the numbers' bytes: a plain byte string.
        let as_bytes: Vec<u8> = decode(&bytes).unwrap();
        assert_eq!(as_bytes, [4, 3, 2, 1, 0xd0, 0xc0, 0xb0, 0xa0]);
    }

    #[test]
    fn a_length_that_is_not_a_multiple_of_the_size_is_refused() {
        // A byte string of 7 bytes, read as u64s.
        let bytes = encode(&Raw(vec![1u8; 7])).unwrap();
        let e = decode::<Raw<u64>>(&bytes).unwrap_err().to_string();
        assert!(e.contains("cannot decode value") && e.contains("8-byte numbers"), "{e}");
        // A length longer than the bytes that follow: refused, nothing allocated for it.
        let claim = [0xfd, 0xf9, 0xb0, 0xfb, 0xd7, 0x85, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(decode::<Raw<u64>>(&claim).is_err());
        // Truncated: the last word's bytes missing.
        let mut cut = encode(&Raw(vec![5u64, 6])).unwrap();
        cut.drain(9..13);
        assert!(decode::<Raw<u64>>(&cut).is_err());
    }

    #[test]
    fn a_format_that_writes_bytes_as_a_sequence_reads_back() {
        // serde's value deserializer for a sequence of u8: the visit_seq path.
        use serde::de::value::{Error, SeqDeserializer};
        let seq = SeqDeserializer::<_, Error>::new([1u8, 0, 2, 0].into_iter());
        assert_eq!(Raw::<u16>::deserialize(seq).unwrap().0, [1, 2]);
        let odd = SeqDeserializer::<_, Error>::new([1u8, 0, 2].into_iter());
        assert!(Raw::<u16>::deserialize(odd).is_err());
    }
}
