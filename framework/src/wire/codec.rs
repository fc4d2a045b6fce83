//! The one codec of skein: bincode 2.0.1 through serde, standard configuration.
//!
//! ```
//! let bytes = skein::wire::codec::encode(&(7u32, "seven".to_string())).unwrap();
//! let back: (u32, String) = skein::wire::codec::decode(&bytes).unwrap();
//! assert_eq!(back, (7, "seven".to_string()));
//! ```

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A value that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// Serialization failed.
    #[error("cannot encode value: {0}")]
    Encode(String),
    /// Deserialization failed (wrong type, truncated or trailing bytes).
    #[error("cannot decode value: {0}")]
    Decode(String),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Serializes `v`. The bytes are bincode's, then a trailer: the handles (`skein::Trust`)
/// inside `v`, which travel with their weight (`crate::trust::travel`), and their count (a
/// `u32`; 0 when `v` holds none).
pub fn encode<V: Serialize + ?Sized>(v: &V) -> Result<Vec<u8>, CodecError> {
    let scope = crate::trust::travel::EncodeScope::begin();
    let mut bytes = bincode::serde::encode_to_vec(v, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    scope.finish(&mut bytes).map_err(CodecError::Encode)?;
    Ok(bytes)
}

/// Deserializes a `V` that must use all of `bytes` (bincode's bytes and the handle trailer
/// that [`encode`] appends).
///
/// ```
/// let bytes = skein::wire::codec::encode(&1u8).unwrap();
/// assert!(skein::wire::codec::decode::<String>(&bytes).is_err());
/// ```
pub fn decode<V: DeserializeOwned>(bytes: &[u8]) -> Result<V, CodecError> {
    let (scope, payload) =
        crate::trust::travel::DecodeScope::begin(bytes).map_err(CodecError::Decode)?;
    let (v, used) = bincode::serde::decode_from_slice(payload, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    drop(scope);
    if used != payload.len() {
        return Err(CodecError::Decode(format!("{} trailing byte(s)", payload.len() - used)));
    }
    Ok(v)
}
