//! Checks of request arguments, shared by the node's calls: names, listing arguments,
//! the S3 metadata and condition a gateway commit carries, exclude lists, upload ids, and
//! that a bucket exists. Each refusal names what was wrong.

use rozone_kv::rocksdb::DB;

use crate::error::OmError;
use crate::names::{check_key_name, check_resource_name, MAX_KEY_NAME};
use crate::scm_client::Exclude;
use crate::state::types::{Bucket, S3Condition, S3Meta, UploadId};
use crate::state::{read, Refusal};

/// A listing's page size when the client names none.
pub const DEFAULT_PAGE: usize = 100;
/// The largest page a listing returns.
pub const MAX_PAGE: usize = 1000;
/// Longest ETag, Content-Type, metadata name or value.
const MAX_FIELD: usize = 1024;
/// Most user metadata bytes per key (S3's limit is 2 KiB of headers).
const MAX_METADATA_BYTES: usize = 2048;
/// Most ids in one exclude list.
const MAX_EXCLUDES: usize = 1000;
/// Longest upload id.
const MAX_UPLOAD_ID: usize = 128;

/// A listing's page size: `limit`, or the default for 0, at most [`MAX_PAGE`].
pub fn page(limit: u32) -> usize {
    match limit {
        0 => DEFAULT_PAGE,
        n => (n as usize).min(MAX_PAGE),
    }
}

/// A volume or bucket name (`kind` says which).
pub fn name(kind: &str, n: &str) -> Result<(), OmError> {
    check_resource_name(kind, n).map_err(OmError::InvalidName)
}

/// A listing's prefix or marker: no longer than a key name.
pub fn list_arg(what: &str, v: &str) -> Result<(), OmError> {
    if v.len() > MAX_KEY_NAME {
        return Err(OmError::InvalidArgument(format!(
            "{what} is {} bytes, at most {MAX_KEY_NAME}",
            v.len()
        )));
    }
    Ok(())
}

/// A key call's volume, bucket and key names.
pub fn key_args(volume: &str, bucket: &str, key: &str) -> Result<(), OmError> {
    name("volume", volume)?;
    name("bucket", bucket)?;
    check_key_name(key).map_err(OmError::InvalidName)
}

/// A multipart call's key names and upload id.
pub fn upload_id(u: &UploadId) -> Result<(), OmError> {
    key_args(&u.volume, &u.bucket, &u.key)?;
    if u.upload_id.is_empty() || u.upload_id.len() > MAX_UPLOAD_ID {
        return Err(OmError::InvalidArgument(format!(
            "upload id must be 1 to {MAX_UPLOAD_ID} bytes"
        )));
    }
    Ok(())
}

/// An ETag, Content-Type, metadata entry or condition: at most [`MAX_FIELD`] bytes.
pub fn field(what: &str, v: &str) -> Result<(), OmError> {
    if v.len() > MAX_FIELD {
        return Err(OmError::InvalidArgument(format!(
            "{what} is {} bytes, at most {MAX_FIELD}",
            v.len()
        )));
    }
    Ok(())
}

/// S3 metadata: each field bounded, the user metadata at most [`MAX_METADATA_BYTES`].
pub fn s3_meta(m: &S3Meta) -> Result<(), OmError> {
    field("etag", &m.etag)?;
    field("content_type", &m.content_type)?;
    let mut total = 0usize;
    for (k, v) in &m.metadata {
        field("metadata name", k)?;
        field("metadata value", v)?;
        total = total.saturating_add(k.len().saturating_add(v.len()));
    }
    if total > MAX_METADATA_BYTES {
        return Err(OmError::TooLarge(format!(
            "user metadata is {total} bytes, at most {MAX_METADATA_BYTES}"
        )));
    }
    Ok(())
}

/// A commit condition: its ETag bounded.
pub fn condition(c: &Option<S3Condition>) -> Result<(), OmError> {
    match c {
        Some(S3Condition::IfMatch(etag)) => field("if_match", etag),
        _ => Ok(()),
    }
}

/// Exclude lists of at most [`MAX_EXCLUDES`] ids each.
pub fn exclude(x: &Exclude) -> Result<(), OmError> {
    for l in [&x.datanodes, &x.pipelines, &x.containers] {
        if l.len() > MAX_EXCLUDES {
            return Err(OmError::TooLarge(format!(
                "an exclude list has {} ids, at most {MAX_EXCLUDES}",
                l.len()
            )));
        }
    }
    Ok(())
}

/// At most `max` blocks in a commit or part (`what` names it); `max` is
/// `om.max_blocks_per_key`.
pub fn block_count(what: &str, n: usize, max: u32) -> Result<(), OmError> {
    if n > max as usize {
        return Err(OmError::TooLarge(format!(
            "{n} blocks in the {what}, at most {max} (om.max_blocks_per_key)"
        )));
    }
    Ok(())
}

/// The bucket, or the refusal that names what is missing (the volume or the bucket).
pub fn must_bucket(db: &DB, volume: &str, bucket: &str) -> Result<Bucket, OmError> {
    if let Some(b) = read::bucket(db, volume, bucket)? {
        return Ok(b);
    }
    if read::volume(db, volume)?.is_none() {
        return Err(Refusal::VolumeNotFound {
            volume: volume.to_string(),
        }
        .into());
    }
    Err(Refusal::BucketNotFound {
        volume: volume.to_string(),
        bucket: bucket.to_string(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(metadata: Vec<(String, String)>) -> S3Meta {
        S3Meta {
            etag: "e".into(),
            content_type: "text/plain".into(),
            metadata,
        }
    }

    #[test]
    fn s3_metadata_is_bounded_per_field_and_in_total() {
        assert!(s3_meta(&meta(vec![("a".into(), "b".repeat(MAX_FIELD))])).is_ok());
        let long = meta(vec![("a".into(), "b".repeat(MAX_FIELD + 1))]);
        assert!(matches!(s3_meta(&long), Err(OmError::InvalidArgument(_))));
        let many = meta(
            (0..3)
                .map(|i| (format!("k{i}"), "v".repeat(MAX_FIELD)))
                .collect(),
        );
        assert!(matches!(s3_meta(&many), Err(OmError::TooLarge(_))));
    }

    #[test]
    fn exclude_lists_and_upload_ids_are_bounded() {
        let x = Exclude {
            containers: vec![1; MAX_EXCLUDES + 1],
            ..Exclude::default()
        };
        assert!(matches!(exclude(&x), Err(OmError::TooLarge(_))));
        assert!(exclude(&Exclude::default()).is_ok());
        let mut u = UploadId {
            volume: "vol".into(),
            bucket: "bkt".into(),
            key: "k".into(),
            upload_id: String::new(),
        };
        assert!(matches!(upload_id(&u), Err(OmError::InvalidArgument(_))));
        u.upload_id = "x".repeat(MAX_UPLOAD_ID);
        assert!(upload_id(&u).is_ok());
        u.upload_id.push('x');
        assert!(matches!(upload_id(&u), Err(OmError::InvalidArgument(_))));
    }

    #[test]
    fn a_page_is_the_default_for_zero_and_never_past_the_largest() {
        assert_eq!(page(0), DEFAULT_PAGE);
        assert_eq!(page(7), 7);
        assert_eq!(page(u32::MAX), MAX_PAGE);
    }
}
