//! The versioned envelope of everything replicated or persisted by the Raft layer: one
//! leading format byte, then the postcard body of that format's type.
//!
//! postcard is positional: a field or enum variant moved, removed or inserted in the
//! middle changes what committed bytes mean, and every member fails to decode the same
//! entry, which is fatal for the ring. The envelope byte lets a later build keep decoding
//! what an earlier one wrote, and refuse, with a clear error instead of a misreading, what
//! a newer build wrote.
//!
//! ## Evolution rules (for every type sealed here: log records in [`crate::record`], and
//! each daemon's replicated request type — OM, SCM, datanode pipeline)
//! - Append only. A new command is a new enum variant **at the end**. Existing variants,
//!   their fields, the field order and the field types never change; neither do the
//!   variants' order or count before the end.
//! - A change to an existing variant's shape is a new variant (or a new envelope version
//!   whose decoder keeps the old type for old bytes): never an edit.
//! - A build that applies a new variant must not be proposed to before every member runs
//!   it (roll the upgrade, then use the feature).
//! - Every variant has a golden fixture ([`crate::golden`]): bytes written by the version
//!   that introduced it, decoded by every later build. Fixture lines are never edited.

use std::io;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Format 1: the postcard body of the record.
pub const V1: u8 = 1;
/// Format 2, requests only: a [`CallTag`], then the postcard body of the request (a write
/// proposed for a client's call, answered at most once: [`crate::retry_cache`]). A build
/// that knows only format 1 refuses it with "upgrade this member".
pub const V2_CALL: u8 = 2;

/// Which client call proposed a request, replicated with it: the key of the retry cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallTag {
    /// The calling client's random id.
    pub client: u64,
    /// The call's number within that client (the same on every attempt).
    pub seq: u64,
    /// The index of this write among those the call proposed (usually 0).
    pub sub: u32,
    /// Every call of the client below this number has ended: its records may go.
    pub low: u64,
    /// The proposing leader's wall clock, ms since the epoch: the clock records expire by,
    /// the same on every member because it travels in the entry.
    pub stamp_ms: u64,
}

/// `V2_CALL`, the tag, then the postcard body of `req`.
pub fn seal_call<T: Serialize + ?Sized>(tag: &CallTag, req: &T) -> io::Result<Vec<u8>> {
    let b = postcard::to_extend(tag, vec![V2_CALL])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    postcard::to_extend(req, b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Decodes a request sealed by [`seal`] (no tag) or [`seal_call`].
pub fn open_request<T: DeserializeOwned>(b: &[u8]) -> io::Result<(Option<CallTag>, T)> {
    match b.split_first() {
        Some((&V2_CALL, rest)) => {
            let (tag, body) = postcard::take_from_bytes::<CallTag>(rest).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("request: format 2: {e}"),
                )
            })?;
            let mut v1 = Vec::with_capacity(body.len() + 1);
            v1.push(V1);
            v1.extend_from_slice(body);
            Ok((Some(tag), open(&v1, "request")?))
        }
        _ => Ok((None, open(b, "request")?)),
    }
}

/// The kind of a request in sealed bytes: the first varint of its body (postcard's variant
/// index for an enum). The retry cache answers a call's write only with the reply of a write
/// of the same kind.
pub fn request_kind(b: &[u8]) -> u32 {
    let body = match b.split_first() {
        Some((&V2_CALL, rest)) => match postcard::take_from_bytes::<CallTag>(rest) {
            Ok((_, body)) => body,
            Err(_) => return u32::MAX,
        },
        Some((_, body)) => body,
        None => return u32::MAX,
    };
    postcard::take_from_bytes::<u32>(body)
        .map(|(k, _)| k)
        .unwrap_or(u32::MAX)
}

/// `V1`, then the postcard body of `v`.
pub fn seal<T: Serialize + ?Sized>(v: &T) -> io::Result<Vec<u8>> {
    postcard::to_extend(v, vec![V1]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Decodes what [`seal`] wrote; `what` names the record in errors ("log entry", "OM
/// request"). Bytes of an unknown version, bytes with trailing garbage and bytes from before
/// the envelope are refused, never guessed at.
pub fn open<T: DeserializeOwned>(b: &[u8], what: &str) -> io::Result<T> {
    let bad = |msg: String| io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {msg}"));
    match b.split_first() {
        None => Err(bad("empty record".into())),
        Some((&V1, body)) => {
            let (v, rest) =
                postcard::take_from_bytes(body).map_err(|e| bad(format!("format 1: {e}")))?;
            if rest.is_empty() {
                Ok(v)
            } else {
                Err(bad(format!("format 1: {} trailing bytes", rest.len())))
            }
        }
        Some((&v, _)) => Err(bad(format!(
            "format {v} is unknown to this build (written by a newer rozone, or not a \
             rozone record): upgrade this member"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_then_open_and_refusals() {
        let b = seal(&(7u64, "x".to_string())).unwrap();
        assert_eq!(b, [1, 7, 1, b'x']);
        assert_eq!(open::<(u64, String)>(&b, "t").unwrap(), (7, "x".into()));
        let e = open::<u64>(&[], "t").unwrap_err().to_string();
        assert_eq!(e, "t: empty record");
        let e = open::<u64>(&[2, 0], "t").unwrap_err().to_string();
        assert!(e.contains("format 2 is unknown"), "{e}");
        let e = open::<u64>(&[1, 5, 9], "t").unwrap_err().to_string();
        assert!(e.contains("1 trailing bytes"), "{e}");
        assert!(open::<u64>(&[1, 0x80], "t").is_err(), "truncated varint");
    }

    #[test]
    fn tagged_requests_round_trip_and_plain_ones_have_no_tag() {
        let tag = CallTag {
            client: 9,
            seq: 3,
            sub: 1,
            low: 2,
            stamp_ms: 1_000,
        };
        let b = seal_call(&tag, &(4u32, "x".to_string())).unwrap();
        assert_eq!(b[0], V2_CALL);
        let (t, v) = open_request::<(u32, String)>(&b).unwrap();
        assert_eq!((t, v), (Some(tag), (4, "x".into())));
        assert_eq!(request_kind(&b), 4);
        let plain = seal(&(5u32, "y".to_string())).unwrap();
        assert_eq!(open_request::<(u32, String)>(&plain).unwrap().0, None);
        assert_eq!(request_kind(&plain), 5);
        // A record of format 2 is a request only: the plain decoder refuses it.
        assert!(open::<(u32, String)>(&b, "t").is_err());
        assert!(
            open_request::<(u32, String)>(&b[..3]).is_err(),
            "truncated tag"
        );
    }
}
