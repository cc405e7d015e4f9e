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

/// Format 3, requests only: several requests of format 1 or 2, proposed as one log entry
/// by a leader's group commit ([`crate::batch`]), applied in order as if each were its own
/// entry. Then a varint count, then each request as a varint length and its bytes. A build
/// that knows only formats 1 and 2 refuses it with "upgrade this member": turn batching off
/// (`raft.max_writes_per_entry = 1`) while a ring runs mixed builds.
pub const V3_BATCH: u8 = 3;
/// Most requests one batch entry may hold; a larger count in a record is refused.
pub const MAX_BATCH: usize = 4096;

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

/// `V3_BATCH`, then `reqs` (each sealed by [`seal`] or [`seal_call`]). Refuses an empty
/// list, more than [`MAX_BATCH`] and a batch inside a batch.
pub fn seal_batch(reqs: &[Vec<u8>]) -> io::Result<Vec<u8>> {
    if reqs.is_empty() || reqs.len() > MAX_BATCH {
        return Err(invalid(format!(
            "a batch holds 1 to {MAX_BATCH} requests, not {}",
            reqs.len()
        )));
    }
    if reqs.iter().any(|r| r.first() == Some(&V3_BATCH)) {
        return Err(invalid("a batch inside a batch".into()));
    }
    let mut out = vec![V3_BATCH];
    put_parts(&mut out, reqs)?;
    Ok(out)
}

/// The requests of a batch record, in order; `None` if `b` is not a batch (format 1 or 2,
/// decoded by [`open_request`]). A malformed batch is an error, never a partial list.
pub fn open_batch(b: &[u8]) -> io::Result<Option<Vec<&[u8]>>> {
    match b.split_first() {
        Some((&V3_BATCH, rest)) => {
            let parts = take_parts(rest).map_err(|e| invalid(format!("request: format 3: {e}")))?;
            if parts.is_empty() || parts.iter().any(|p| p.first() == Some(&V3_BATCH)) {
                return Err(invalid(
                    "request: format 3: an empty batch or a batch inside a batch".into(),
                ));
            }
            Ok(Some(parts))
        }
        _ => Ok(None),
    }
}

/// The replies to a batch's requests, in order, as one response (local to the leader that
/// proposed it: responses are not replicated).
pub fn frame_replies(replies: &[Vec<u8>]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    put_parts(&mut out, replies)?;
    Ok(out)
}

/// What [`frame_replies`] wrote.
pub fn unframe_replies(b: &[u8]) -> io::Result<Vec<&[u8]>> {
    take_parts(b).map_err(|e| invalid(format!("batch reply: {e}")))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A varint count, then each part as a varint length and its bytes.
fn put_parts(out: &mut Vec<u8>, parts: &[Vec<u8>]) -> io::Result<()> {
    let varint = |out: &mut Vec<u8>, n: usize| -> io::Result<()> {
        let n = u32::try_from(n).map_err(|_| invalid(format!("{n} does not fit a length")))?;
        let b = std::mem::take(out);
        *out = postcard::to_extend(&n, b).map_err(|e| invalid(e.to_string()))?;
        Ok(())
    };
    out.reserve(parts.iter().map(|p| p.len() + 5).sum::<usize>() + 5);
    varint(out, parts.len())?;
    for p in parts {
        varint(out, p.len())?;
        out.extend_from_slice(p);
    }
    Ok(())
}

/// What [`put_parts`] wrote, whole: at most [`MAX_BATCH`] parts, each within the bytes, none
/// left over.
fn take_parts(b: &[u8]) -> Result<Vec<&[u8]>, String> {
    let (n, mut rest) = postcard::take_from_bytes::<u32>(b).map_err(|e| format!("count: {e}"))?;
    let n = n as usize;
    if n > MAX_BATCH {
        return Err(format!("{n} parts, more than {MAX_BATCH}"));
    }
    let mut parts = Vec::with_capacity(n);
    for i in 0..n {
        let (len, after) =
            postcard::take_from_bytes::<u32>(rest).map_err(|e| format!("part {i}: {e}"))?;
        let len = len as usize;
        if len > after.len() {
            return Err(format!(
                "part {i} claims {len} bytes, {} are left",
                after.len()
            ));
        }
        let (part, after) = after.split_at(len);
        parts.push(part);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes", rest.len()));
    }
    Ok(parts)
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
    fn batches_round_trip_and_bad_ones_are_refused() {
        let a = seal(&(1u32, "a".to_string())).unwrap();
        let tag = CallTag {
            client: 1,
            seq: 2,
            sub: 0,
            low: 1,
            stamp_ms: 5,
        };
        let b = seal_call(&tag, &(2u32, "bb".to_string())).unwrap();
        let batch = seal_batch(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(batch[..3], [V3_BATCH, 2, a.len() as u8]);
        let parts = open_batch(&batch).unwrap().unwrap();
        assert_eq!(parts, vec![&a[..], &b[..]]);
        assert_eq!(open_batch(&a).unwrap(), None, "format 1 is no batch");
        assert_eq!(open_batch(&b).unwrap(), None, "format 2 is no batch");
        // A batch is not a request of its own: the single-request decoder refuses it.
        assert!(open_request::<(u32, String)>(&batch).is_err());
        assert!(seal_batch(&[]).is_err());
        assert!(seal_batch(&vec![a.clone(); MAX_BATCH + 1]).is_err());
        assert!(seal_batch(&[batch.clone()]).is_err(), "nested");
        for bad in [
            vec![V3_BATCH],                    // no count
            vec![V3_BATCH, 0],                 // empty
            vec![V3_BATCH, 1, 5, 1, 2],        // part longer than the bytes
            vec![V3_BATCH, 1, 1, 1, 9],        // trailing byte
            vec![V3_BATCH, 0xff, 0xff, 0x03],  // count above MAX_BATCH
            vec![V3_BATCH, 1, 2, V3_BATCH, 0], // nested
        ] {
            assert!(open_batch(&bad).is_err(), "{bad:?}");
        }
        for batch in [&batch[..batch.len() - 1], &batch[..2]] {
            assert!(open_batch(batch).is_err(), "truncated");
        }
        let replies = vec![b"one".to_vec(), Vec::new(), vec![7; 300]];
        let framed = frame_replies(&replies).unwrap();
        let back = unframe_replies(&framed).unwrap();
        assert_eq!(back, vec![&b"one"[..], &[][..], &[7u8; 300][..]]);
        assert!(unframe_replies(&framed[..framed.len() - 1]).is_err());
    }

    /// A batch record (format 3), as this format's first build wrote it, decodes in every
    /// later build: a plain request and a tagged one.
    #[test]
    fn batches_match_their_golden_bytes() {
        type Req = (u32, String);
        #[derive(Debug, PartialEq)]
        struct Batch(Vec<(Option<CallTag>, Req)>);
        let tag = CallTag {
            client: 0x0102_0304_0506_0708,
            seq: 42,
            sub: 1,
            low: 40,
            stamp_ms: 1_765_000_000_000,
        };
        let samples = [(
            "batch-plain-and-tagged",
            Batch(vec![
                (None, (3, "vol".into())),
                (Some(tag), (4, "key".into())),
            ]),
        )];
        crate::golden::check(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/batches-v3.txt"),
            &samples,
            |b| {
                let sealed =
                    b.0.iter()
                        .map(|(t, r)| match t {
                            Some(t) => seal_call(t, r),
                            None => seal(r),
                        })
                        .collect::<io::Result<Vec<_>>>()?;
                seal_batch(&sealed)
            },
            |b| {
                let parts = open_batch(b)?.expect("a batch");
                Ok(Batch(
                    parts
                        .into_iter()
                        .map(open_request::<Req>)
                        .collect::<io::Result<_>>()?,
                ))
            },
        );
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
