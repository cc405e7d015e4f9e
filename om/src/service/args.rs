//! Checks of request arguments shared by the key, multipart and S3 calls: key names, the
//! S3 metadata and condition a gateway commit carries, and a key's `KeyInfo` with its S3
//! metadata. Their own file so that those services need not import each other.

use rozone_kv::rocksdb::DB;
use rozone_proto::om as pb;

use super::namespace::name;
use crate::error::OmError;
use crate::names::check_key_name;
use crate::state::read;
use crate::state::types::{Key, S3Condition, S3Meta};

/// A key call's volume, bucket and key names, checked.
pub fn key_args(volume: &str, bucket: &str, key: &str) -> Result<(), OmError> {
    name("volume", volume)?;
    name("bucket", bucket)?;
    check_key_name(key).map_err(OmError::InvalidName)
}

/// Longest ETag, Content-Type, metadata name or value.
const MAX_FIELD: usize = 1024;
/// Most user metadata bytes per key (S3's limit is 2 KiB of headers).
const MAX_METADATA_BYTES: usize = 2048;

/// The S3 metadata and condition of a commit, checked; `None` for a plain commit.
pub fn commit_args(
    meta: Option<pb::S3Meta>,
    cond: Option<pb::S3Condition>,
) -> Result<Option<(S3Meta, Option<S3Condition>)>, OmError> {
    let condition = condition(cond)?;
    let Some(m) = meta else {
        if condition.is_some() {
            return Err(OmError::InvalidArgument(
                "a commit condition needs the s3 metadata".into(),
            ));
        }
        return Ok(None);
    };
    field("etag", &m.etag)?;
    field("content_type", &m.content_type)?;
    let mut total = 0usize;
    for (k, v) in &m.metadata {
        field("metadata name", k)?;
        field("metadata value", v)?;
        total = total.saturating_add(k.len() + v.len());
    }
    if total > MAX_METADATA_BYTES {
        return Err(OmError::TooLarge(format!(
            "user metadata is {total} bytes, at most {MAX_METADATA_BYTES}"
        )));
    }
    let mut metadata: Vec<(String, String)> = m.metadata.into_iter().collect();
    metadata.sort();
    Ok(Some((
        S3Meta {
            etag: m.etag,
            content_type: m.content_type,
            metadata,
        },
        condition,
    )))
}

/// A commit condition, checked.
pub fn condition(cond: Option<pb::S3Condition>) -> Result<Option<S3Condition>, OmError> {
    Ok(match cond {
        None => None,
        Some(c) if c.if_none_match_any && !c.if_match.is_empty() => {
            return Err(OmError::InvalidArgument(
                "a commit condition has both if_none_match_any and if_match".into(),
            ))
        }
        Some(c) if c.if_none_match_any => Some(S3Condition::IfNoneMatchAny),
        Some(c) if !c.if_match.is_empty() => {
            field("if_match", &c.if_match)?;
            Some(S3Condition::IfMatch(c.if_match))
        }
        Some(_) => None,
    })
}

pub fn field(what: &str, v: &str) -> Result<(), OmError> {
    if v.len() > MAX_FIELD {
        return Err(OmError::InvalidArgument(format!(
            "{what} is {} bytes, at most {MAX_FIELD}",
            v.len()
        )));
    }
    Ok(())
}

/// A key's `KeyInfo`, with its S3 metadata when it has some.
pub fn key_info(db: &DB, k: &Key) -> Result<pb::KeyInfo, OmError> {
    let mut info: pb::KeyInfo = k.into();
    info.s3 = read::s3_meta(db, &k.volume, &k.bucket, &k.name)?
        .as_ref()
        .map(Into::into);
    Ok(info)
}
