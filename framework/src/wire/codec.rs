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

/// Serializes `v`.
pub fn encode<V: Serialize + ?Sized>(v: &V) -> Result<Vec<u8>, CodecError> {
    bincode::serde::encode_to_vec(v, config()).map_err(|e| CodecError::Encode(e.to_string()))
}

/// Deserializes a `V` that must use all of `bytes`.
///
/// ```
/// let bytes = skein::wire::codec::encode(&1u8).unwrap();
/// assert!(skein::wire::codec::decode::<String>(&bytes).is_err());
/// ```
pub fn decode<V: DeserializeOwned>(bytes: &[u8]) -> Result<V, CodecError> {
    let (v, used) = bincode::serde::decode_from_slice(bytes, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    if used != bytes.len() {
        return Err(CodecError::Decode(format!("{} trailing byte(s)", bytes.len() - used)));
    }
    Ok(v)
}
