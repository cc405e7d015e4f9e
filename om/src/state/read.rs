//! Reads of the OM state from a member's own database. Whether a read may be served here
//! (and how fresh it is) is decided before, by the read-consistency gate; these only read.
//! Stored bytes that do not decode are an `InvalidData` error naming the row
//! (`rozone_raft::Rows` for point reads, `rows::decode_row` for scans).

use std::io;

use rozone_kv::cf;
use rozone_kv::rocksdb::{Direction, IteratorMode, DB};
use rozone_raft::rows::decode_row;
use rozone_raft::Rows;
use serde::de::DeserializeOwned;

use super::types::{
    BlockId, Bucket, DeletedBlocks, Key, OpenKey, OpenKeyId, ReservedBlock, S3Meta, S3Part,
    S3Secret, S3Upload, UploadId, Volume,
};
use super::*;

/// Rows under `base` whose name (the rest of the row key) starts with `prefix` and sorts
/// after `start_after`: at most `limit`, and whether more follow.
fn scan_names<T: DeserializeOwned>(
    db: &DB,
    cf_name: &str,
    base: &[u8],
    prefix: &str,
    start_after: &str,
    limit: usize,
) -> io::Result<(Vec<T>, bool)> {
    let mut full = base.to_vec();
    full.extend_from_slice(prefix.as_bytes());
    let mut seek = base.to_vec();
    seek.extend_from_slice(prefix.max(start_after).as_bytes());
    let mut out = Vec::new();
    let it = db.iterator_cf(
        cf(db, cf_name)?,
        IteratorMode::From(&seek, Direction::Forward),
    );
    for item in it {
        let (k, v) = item.map_err(io::Error::other)?;
        if !k.starts_with(&full) {
            break;
        }
        if &k[base.len()..] <= start_after.as_bytes() {
            continue;
        }
        if out.len() == limit {
            return Ok((out, true));
        }
        out.push(decode_row(cf_name, &k, &v)?);
    }
    Ok((out, false))
}

pub fn volume(db: &DB, name: &str) -> io::Result<Option<Volume>> {
    db.get_row(CF_VOLUMES, name.as_bytes())
}

pub fn bucket(db: &DB, volume: &str, name: &str) -> io::Result<Option<Bucket>> {
    db.get_row(CF_BUCKETS, &bucket_key(volume, name))
}

pub fn key(db: &DB, volume: &str, bucket: &str, name: &str) -> io::Result<Option<Key>> {
    db.get_row(CF_KEYS, &key_key(volume, bucket, name))
}

/// The S3 metadata of a key committed through the gateway.
pub fn s3_meta(db: &DB, volume: &str, bucket: &str, name: &str) -> io::Result<Option<S3Meta>> {
    db.get_row(CF_S3_META, &key_key(volume, bucket, name))
}

pub fn s3_secret(db: &DB, access_id: &str) -> io::Result<Option<S3Secret>> {
    db.get_row(CF_S3_SECRETS, access_id.as_bytes())
}

pub fn s3_upload(db: &DB, u: &UploadId) -> io::Result<Option<S3Upload>> {
    db.get_row(CF_S3_UPLOADS, &upload_key(u))
}

/// Rows of `cf_name` under `prefix` after `after` (whole row keys), at most `limit`, and
/// whether more follow.
fn scan_rows<T: DeserializeOwned>(
    db: &DB,
    cf_name: &str,
    prefix: &[u8],
    after: &[u8],
    limit: usize,
) -> io::Result<(Vec<T>, bool)> {
    let seek = if after > prefix { after } else { prefix };
    let mut out = Vec::new();
    let it = db.iterator_cf(
        cf(db, cf_name)?,
        IteratorMode::From(seek, Direction::Forward),
    );
    for item in it {
        let (k, v) = item.map_err(io::Error::other)?;
        if !k.starts_with(prefix) {
            break;
        }
        if &k[..] <= after {
            continue;
        }
        if out.len() == limit {
            return Ok((out, true));
        }
        out.push(decode_row(cf_name, &k, &v)?);
    }
    Ok((out, false))
}

/// Parts of an upload after part `after`, at most `limit`.
pub fn s3_parts(
    db: &DB,
    u: &UploadId,
    after: u32,
    limit: usize,
) -> io::Result<(Vec<S3Part>, bool)> {
    let from = if after == 0 {
        Vec::new()
    } else {
        part_key(u, after)
    };
    scan_rows(db, CF_S3_PARTS, &parts_prefix(u), &from, limit)
}

/// Uploads of a bucket whose key starts with `prefix`, after (`key`, `upload_id`), at most
/// `limit`.
pub fn s3_uploads(
    db: &DB,
    volume: &str,
    bucket: &str,
    prefix: &str,
    after: Option<&UploadId>,
    limit: usize,
) -> io::Result<(Vec<S3Upload>, bool)> {
    let mut p = keys_prefix(volume, bucket);
    p.extend_from_slice(prefix.as_bytes());
    let from = after.map(upload_key).unwrap_or_default();
    scan_rows(db, CF_S3_UPLOADS, &p, &from, limit)
}

pub fn open_key(db: &DB, id: &OpenKeyId) -> io::Result<Option<OpenKey>> {
    db.get_row(CF_OPEN_KEYS, &open_key_key(id))
}

/// Volumes whose name starts with `prefix`, after `start_after`, at most `limit`.
pub fn list_volumes(
    db: &DB,
    prefix: &str,
    start_after: &str,
    limit: usize,
) -> io::Result<(Vec<Volume>, bool)> {
    scan_names(db, CF_VOLUMES, b"", prefix, start_after, limit)
}

pub fn list_buckets(
    db: &DB,
    volume: &str,
    prefix: &str,
    start_after: &str,
    limit: usize,
) -> io::Result<(Vec<Bucket>, bool)> {
    scan_names(
        db,
        CF_BUCKETS,
        &buckets_prefix(volume),
        prefix,
        start_after,
        limit,
    )
}

pub fn list_keys(
    db: &DB,
    volume: &str,
    bucket: &str,
    prefix: &str,
    start_after: &str,
    limit: usize,
) -> io::Result<(Vec<Key>, bool)> {
    scan_names(
        db,
        CF_KEYS,
        &keys_prefix(volume, bucket),
        prefix,
        start_after,
        limit,
    )
}

/// Open keys whose expiry is at or before `now_ms`, at most `limit`.
pub fn expired_open_keys(db: &DB, now_ms: u64, limit: usize) -> io::Result<Vec<OpenKeyId>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_OPEN_KEYS)?, IteratorMode::Start) {
        let (k, v) = item.map_err(io::Error::other)?;
        let o: OpenKey = decode_row(CF_OPEN_KEYS, &k, &v)?;
        if o.expires_ms <= now_ms {
            out.push(OpenKeyId {
                volume: o.volume,
                bucket: o.bucket,
                key: o.name,
                client_id: o.client_id,
            });
            if out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Reserved blocks whose expiry is at or before `now_ms`, at most `limit`. A full scan: the
/// table holds what the leader's pool fetched and no open took yet, a few batches.
pub fn expired_reservations(db: &DB, now_ms: u64, limit: usize) -> io::Result<Vec<BlockId>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_RESERVED_BLOCKS)?, IteratorMode::Start) {
        let (k, v) = item.map_err(io::Error::other)?;
        let r: ReservedBlock = decode_row(CF_RESERVED_BLOCKS, &k, &v)?;
        if r.expires_ms <= now_ms {
            out.push(r.block.id);
            if out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Multipart uploads created at or before `created_before_ms`, at most `limit`. A full
/// scan of the uploads table: incomplete uploads are few next to keys, and the leader
/// runs this once per cleanup interval.
pub fn expired_uploads(db: &DB, created_before_ms: u64, limit: usize) -> io::Result<Vec<UploadId>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_S3_UPLOADS)?, IteratorMode::Start) {
        let (k, v) = item.map_err(io::Error::other)?;
        let u: S3Upload = decode_row(CF_S3_UPLOADS, &k, &v)?;
        if u.created_ms <= created_before_ms {
            out.push(UploadId {
                volume: u.volume,
                bucket: u.bucket,
                key: u.key,
                upload_id: u.upload_id,
            });
            if out.len() >= limit {
                break;
            }
        }
    }
    Ok(out)
}

/// Deleted-block rows waiting for the SCM, oldest first.
pub fn deleted_blocks(db: &DB, limit: usize) -> io::Result<Vec<(u64, DeletedBlocks)>> {
    let mut out = Vec::new();
    for item in db.iterator_cf(cf(db, CF_DELETED_BLOCKS)?, IteratorMode::Start) {
        let (k, v) = item.map_err(io::Error::other)?;
        let id = rozone_kv::key_u64(&k).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("corrupt key {k:?} in {CF_DELETED_BLOCKS}: not 8 bytes"),
            )
        })?;
        out.push((id, decode_row(CF_DELETED_BLOCKS, &k, &v)?));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// Number of rows in a column family (for metrics and tests; scans the family).
pub fn count(db: &DB, cf_name: &str) -> io::Result<u64> {
    let mut n = 0;
    for item in db.iterator_cf(cf(db, cf_name)?, IteratorMode::Start) {
        item.map_err(io::Error::other)?;
        n += 1;
    }
    Ok(n)
}
