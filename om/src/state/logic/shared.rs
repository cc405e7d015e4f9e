//! What the commands share: row writes and the typed reads of volumes and buckets over the
//! batch's `Txn` (a row that does not decode is `rozone_raft::rows`' "corrupt row" error), the
//! refusals several commands give for a missing volume, bucket or open key, and the usage
//! accounting of volumes and buckets.

use std::io;

use rozone_raft::codec::encode;
use rozone_raft::{Rows, Txn};
use serde::Serialize;

use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{Bucket, OpenKey, OpenKeyId, Volume};
use crate::state::{
    bucket_key, key_path, open_key_key, open_key_prefix, CF_BUCKETS, CF_OPEN_KEYS, CF_VOLUMES,
};

/// What a command's apply returns: a response (refusals included), or a storage failure.
pub(super) type Applied = io::Result<OmResponse>;

pub(super) fn refuse(r: Refusal) -> Applied {
    Ok(OmResponse::Refused(r))
}

/// Writes a row, encoded as stored.
pub(super) fn put<T: Serialize>(
    txn: &mut Txn<'_>,
    cf: &str,
    key: Vec<u8>,
    v: &T,
) -> io::Result<()> {
    txn.put(cf, key, encode(v)?);
    Ok(())
}

/// `volume/bucket/key` of an open key, as messages show it.
pub(super) fn path(id: &OpenKeyId) -> String {
    key_path(&id.volume, &id.bucket, &id.key)
}

pub(super) fn get_volume(txn: &Txn<'_>, volume: &str) -> io::Result<Option<Volume>> {
    txn.get_row(CF_VOLUMES, volume.as_bytes())
}

pub(super) fn get_bucket(txn: &Txn<'_>, volume: &str, bucket: &str) -> io::Result<Option<Bucket>> {
    txn.get_row(CF_BUCKETS, &bucket_key(volume, bucket))
}

/// The refusal for a missing bucket: names the volume when that is what is missing.
pub(super) fn bucket_not_found(txn: &Txn<'_>, volume: &str, bucket: &str) -> io::Result<Refusal> {
    Ok(if get_volume(txn, volume)?.is_none() {
        Refusal::VolumeNotFound {
            volume: volume.to_string(),
        }
    } else {
        Refusal::BucketNotFound {
            volume: volume.to_string(),
            bucket: bucket.to_string(),
        }
    })
}

/// The open key `id`, or why there is none: another client id holding the name is
/// `WrongClientId`, no open key of the name at all is `OpenKeyNotFound`.
pub(super) fn find_open_key(txn: &Txn<'_>, id: &OpenKeyId) -> io::Result<Result<OpenKey, Refusal>> {
    if let Some(o) = txn.get_row::<OpenKey>(CF_OPEN_KEYS, &open_key_key(id))? {
        return Ok(Ok(o));
    }
    if get_bucket(txn, &id.volume, &id.bucket)?.is_none() {
        return Ok(Err(bucket_not_found(txn, &id.volume, &id.bucket)?));
    }
    let others = txn.scan_prefix(
        CF_OPEN_KEYS,
        &open_key_prefix(&id.volume, &id.bucket, &id.key),
        None,
        1,
    )?;
    Ok(Err(if others.is_empty() {
        Refusal::OpenKeyNotFound {
            path: path(id),
            client_id: id.client_id,
        }
    } else {
        Refusal::WrongClientId {
            path: path(id),
            client_id: id.client_id,
        }
    }))
}

/// Adjusts a bucket's and its volume's usage by `bytes` and its key count by `keys`.
pub(super) fn account(
    txn: &mut Txn<'_>,
    volume: &str,
    bucket: &str,
    bytes: i128,
    keys: i64,
) -> io::Result<()> {
    fn adj(v: u64, d: i128) -> u64 {
        (v as i128 + d).clamp(0, u64::MAX as i128) as u64
    }
    if let Some(mut b) = get_bucket(txn, volume, bucket)? {
        b.used_bytes = adj(b.used_bytes, bytes);
        b.key_count = adj(b.key_count, i128::from(keys));
        put(txn, CF_BUCKETS, bucket_key(volume, bucket), &b)?;
    }
    if let Some(mut v) = get_volume(txn, volume)? {
        v.used_bytes = adj(v.used_bytes, bytes);
        put(txn, CF_VOLUMES, volume.as_bytes().to_vec(), &v)?;
    }
    Ok(())
}
