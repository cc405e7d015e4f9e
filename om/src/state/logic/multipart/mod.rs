//! S3 multipart uploads: an upload row, one row per uploaded part (its blocks, moved out
//! of the open key the part was written through), and completion as one commit: the
//! listed parts' blocks become the key through the same commit as any key's (quotas,
//! versions, replaced blocks freed), in the same entry that removes the upload, so the key
//! appears whole or not at all.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use rozone_raft::rows::decode_row;
use rozone_raft::{Rows, Txn};

use super::shared::{bucket_not_found, find_open_key, get_bucket, path, put, refuse, Applied};
use super::{commit, deleted, s3};
use crate::state::request::{OmResponse, Refusal};
use crate::state::types::{
    AllocatedBlock, BlockId, OpenKey, OpenKeyId, S3Condition, S3Meta, S3Part, S3Upload, UploadId,
};
use crate::state::{
    key_key, key_path, open_key_key, part_key, parts_prefix, upload_key, CF_OPEN_KEYS, CF_S3_META,
    CF_S3_PARTS, CF_S3_UPLOADS,
};

/// S3's most parts per upload (part numbers 1..=10000).
pub const MAX_PARTS: usize = 10_000;

fn id_of(u: &S3Upload) -> UploadId {
    UploadId {
        volume: u.volume.clone(),
        bucket: u.bucket.clone(),
        key: u.key.clone(),
        upload_id: u.upload_id.clone(),
    }
}

fn upload_path(u: &UploadId) -> String {
    key_path(&u.volume, &u.bucket, &u.key)
}

/// The upload, or why there is none (the bucket or volume missing, or no such upload).
fn find_upload(txn: &Txn<'_>, u: &UploadId) -> io::Result<Result<S3Upload, Refusal>> {
    if let Some(x) = txn.get_row::<S3Upload>(CF_S3_UPLOADS, &upload_key(u))? {
        return Ok(Ok(x));
    }
    if get_bucket(txn, &u.volume, &u.bucket)?.is_none() {
        return Ok(Err(bucket_not_found(txn, &u.volume, &u.bucket)?));
    }
    Ok(Err(Refusal::NoSuchUpload {
        path: upload_path(u),
        upload_id: u.upload_id.clone(),
    }))
}

/// Every part of an upload, by part number.
fn parts(txn: &Txn<'_>, u: &UploadId) -> io::Result<BTreeMap<u32, (Vec<u8>, S3Part)>> {
    let mut out = BTreeMap::new();
    for (k, v) in txn.scan_prefix(CF_S3_PARTS, &parts_prefix(u), None, MAX_PARTS + 1)? {
        let p: S3Part = decode_row(CF_S3_PARTS, &k, &v)?;
        out.insert(p.part_number, (k, p));
    }
    Ok(out)
}

/// `S3CreateUpload`: refused without the bucket.
pub(super) fn create(txn: &mut Txn<'_>, upload: S3Upload) -> Applied {
    if get_bucket(txn, &upload.volume, &upload.bucket)?.is_none() {
        return refuse(bucket_not_found(txn, &upload.volume, &upload.bucket)?);
    }
    put(txn, CF_S3_UPLOADS, upload_key(&id_of(&upload)), &upload)?;
    Ok(OmResponse::S3UploadCreated(upload))
}

/// `S3CommitPart`: the open key's written blocks become the part; blocks allocated but
/// unused, and those of a part it replaces, go to deletion.
#[allow(clippy::too_many_arguments)]
pub(super) fn commit_part(
    txn: &mut Txn<'_>,
    index: u64,
    upload: UploadId,
    part_number: u32,
    id: OpenKeyId,
    blocks: Vec<(BlockId, u64)>,
    size: u64,
    etag: String,
    now_ms: u64,
) -> Applied {
    if let Err(r) = find_upload(txn, &upload)? {
        return refuse(r);
    }
    if (&id.volume, &id.bucket, &id.key) != (&upload.volume, &upload.bucket, &upload.key) {
        return refuse(Refusal::InvalidPart {
            path: upload_path(&upload),
            reason: format!("open key {} is not of this upload's key", path(&id)),
        });
    }
    let open = match find_open_key(txn, &id)? {
        Ok(o) => o,
        Err(r) => return refuse(r),
    };
    let checked = match commit::check_blocks(&open, &blocks, size) {
        Ok(b) => b,
        Err(reason) => {
            return refuse(Refusal::InvalidBlockList {
                path: path(&id),
                reason,
            })
        }
    };
    let allocated: BTreeMap<BlockId, &AllocatedBlock> =
        open.blocks.iter().map(|b| (b.id, b)).collect();
    let part_blocks: Vec<(AllocatedBlock, u64)> = checked
        .iter()
        .filter_map(|b| allocated.get(&b.id).map(|a| ((*a).clone(), b.length)))
        .collect();
    let used: BTreeSet<BlockId> = checked.iter().map(|b| b.id).collect();
    let mut gone: Vec<BlockId> = open
        .blocks
        .iter()
        .map(|b| b.id)
        .filter(|b| !used.contains(b))
        .collect();
    let pk = part_key(&upload, part_number);
    if let Some(old) = txn.get_row::<S3Part>(CF_S3_PARTS, &pk)? {
        gone.extend(old.blocks.iter().map(|(b, _)| b.id));
    }
    let part = S3Part {
        part_number,
        etag,
        size,
        blocks: part_blocks,
        modified_ms: now_ms,
    };
    txn.delete(CF_OPEN_KEYS, open_key_key(&id));
    put(txn, CF_S3_PARTS, pk, &part)?;
    deleted::queue(
        txn,
        index,
        gone,
        format!("part {part_number} of {}", path(&id)),
    )?;
    Ok(OmResponse::S3PartCommitted(part))
}

/// The client id of the open key a completion commits through: derived from the upload id
/// (FNV-1a), so every member derives the same one.
fn completion_client_id(upload_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in upload_id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h | 1
}

/// `S3CompleteUpload`.
#[allow(clippy::too_many_arguments)]
pub(super) fn complete(
    txn: &mut Txn<'_>,
    index: u64,
    upload: UploadId,
    list: Vec<(u32, String)>,
    etag: String,
    min_part_size: u64,
    now_ms: u64,
    condition: Option<S3Condition>,
) -> Applied {
    let up = match find_upload(txn, &upload)? {
        Ok(u) => u,
        Err(r) => return refuse(r),
    };
    let invalid = |reason: String| {
        refuse(Refusal::InvalidPart {
            path: upload_path(&upload),
            reason,
        })
    };
    if list.is_empty() {
        return invalid("no parts listed".into());
    }
    if list.windows(2).any(|w| w[0].0 >= w[1].0) {
        return invalid("parts must be listed in ascending order of part number".into());
    }
    let stored = parts(txn, &upload)?;
    let mut chosen: Vec<&S3Part> = Vec::with_capacity(list.len());
    for (i, (n, e)) in list.iter().enumerate() {
        let Some((_, p)) = stored.get(n) else {
            return invalid(format!("part {n} was not uploaded"));
        };
        if p.etag != e.trim_matches('"') {
            return invalid(format!("part {n} has ETag {:?}, not {e:?}", p.etag));
        }
        if i + 1 < list.len() && p.size < min_part_size {
            return refuse(Refusal::PartTooSmall {
                path: upload_path(&upload),
                part: *n,
                size: p.size,
                min: min_part_size,
            });
        }
        chosen.push(p);
    }
    let Some(bucket) = get_bucket(txn, &upload.volume, &upload.bucket)? else {
        return refuse(bucket_not_found(txn, &upload.volume, &upload.bucket)?);
    };
    let id = OpenKeyId {
        volume: upload.volume.clone(),
        bucket: upload.bucket.clone(),
        key: upload.key.clone(),
        client_id: completion_client_id(&upload.upload_id),
    };
    if let Some(c) = &condition {
        if let Some(r) = s3::unmet(txn, &id, c)? {
            return refuse(r);
        }
    }
    let okk = open_key_key(&id);
    if txn.get_row::<OpenKey>(CF_OPEN_KEYS, &okk)?.is_some() {
        return invalid("an open key holds this upload's client id; retry".into());
    }
    let mut blocks = Vec::new();
    let mut commit_list = Vec::new();
    let mut size: u64 = 0;
    for p in &chosen {
        for (b, len) in &p.blocks {
            blocks.push(b.clone());
            commit_list.push((b.id, *len));
        }
        size = match size.checked_add(p.size) {
            Some(s) => s,
            None => return invalid("the parts' sizes overflow".into()),
        };
    }
    // The parts' blocks become one open key, committed like any other in this entry.
    let open = OpenKey::new(&id, bucket.replication, blocks, now_ms, now_ms);
    put(txn, CF_OPEN_KEYS, okk.clone(), &open)?;
    let out = commit::commit(txn, index, id, commit_list, size, String::new(), now_ms)?;
    if !matches!(out, OmResponse::KeyCommitted(_)) {
        txn.delete(CF_OPEN_KEYS, okk);
        return Ok(out);
    }
    let meta = S3Meta {
        etag,
        content_type: up.content_type,
        metadata: up.metadata,
    };
    put(
        txn,
        CF_S3_META,
        key_key(&upload.volume, &upload.bucket, &upload.key),
        &meta,
    )?;
    let listed: BTreeSet<u32> = list.iter().map(|(n, _)| *n).collect();
    let mut gone = Vec::new();
    for (n, (k, p)) in stored {
        if !listed.contains(&n) {
            gone.extend(p.blocks.iter().map(|(b, _)| b.id));
        }
        txn.delete(CF_S3_PARTS, k);
    }
    txn.delete(CF_S3_UPLOADS, upload_key(&upload));
    deleted::queue(
        txn,
        index,
        gone,
        format!("unused parts of {}", upload_path(&upload)),
    )?;
    Ok(out)
}

/// `S3AbortUpload`: the upload, its parts and their blocks go.
pub(super) fn abort(txn: &mut Txn<'_>, index: u64, upload: UploadId) -> Applied {
    if let Err(r) = find_upload(txn, &upload)? {
        return refuse(r);
    }
    let mut gone = Vec::new();
    for (_, (k, p)) in parts(txn, &upload)? {
        gone.extend(p.blocks.iter().map(|(b, _)| b.id));
        txn.delete(CF_S3_PARTS, k);
    }
    txn.delete(CF_S3_UPLOADS, upload_key(&upload));
    deleted::queue(
        txn,
        index,
        gone,
        format!("aborted upload of {}", upload_path(&upload)),
    )?;
    Ok(OmResponse::S3UploadAborted)
}

#[cfg(test)]
mod tests;
