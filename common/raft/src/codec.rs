//! Binary encoding of openraft types and app commands (postcard): compact, fast, and the same
//! on every member of one build.

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encodes a value; encoding our own types cannot fail short of a bug, which is reported as
/// `InvalidData` rather than a panic.
pub fn encode<T: Serialize + ?Sized>(v: &T) -> io::Result<Vec<u8>> {
    postcard::to_allocvec(v).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Decodes bytes that came from disk or the network; a bad input is `InvalidData`.
pub fn decode<T: DeserializeOwned>(b: &[u8]) -> io::Result<T> {
    postcard::from_bytes(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
