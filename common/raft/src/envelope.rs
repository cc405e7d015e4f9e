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
use serde::Serialize;

/// The only envelope version so far.
pub const V1: u8 = 1;

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
}
