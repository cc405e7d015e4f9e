//! [`OmLogic`]: how each OM applies a committed [`OmRequest`] to its state.
//!
//! Every decision reads only rows of this state (through the batch's `Txn`, so an entry
//! sees earlier entries of its batch) and fields of the request, so every member reaches
//! the same answer. An `Err` is reserved for local storage failures (including stored
//! bytes that do not decode): it stops this Raft node rather than letting it diverge.

use std::collections::BTreeMap;
use std::io;

use rozone_raft::codec::{decode, encode};
use rozone_raft::{LogId, StateMachineLogic, Txn};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::request::{OmRequest, OmResponse, Refusal};
use super::types::{
    AllocatedBlock, BlockId, Bucket, DeletedBlocks, Key, KeyBlock, KeyVersion, OpenKey, OpenKeyId,
    Volume,
};
use super::*;

/// The OM state machine. Stateless in memory: everything lives in the database. The
/// node id only picks this node for the test failpoint `om-apply-hold`.
#[derive(Debug, Default, Clone, Copy)]
pub struct OmLogic {
    pub node_id: u64,
}

impl OmLogic {
    pub fn new(node_id: u64) -> Self {
        Self { node_id }
    }
}

/// Test hook (failpoint `om-apply-hold`, configured as `return(<node id>)`): that node's
/// state machine stops applying (its log keeps growing) until the failpoint is removed.
/// The Raft layer's `raft-apply` would hold every member of the process at once.
fn apply_hold_failpoint(node_id: u64) {
    let held = || {
        fail::eval("om-apply-hold", |arg| {
            arg.and_then(|a| a.trim().parse::<u64>().ok()) == Some(node_id)
        })
        .unwrap_or(false)
    };
    while held() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn get<T: DeserializeOwned>(txn: &Txn<'_>, cf: &str, key: &[u8]) -> io::Result<Option<T>> {
    match txn.get(cf, key)? {
        Some(b) => decode(&b).map(Some).map_err(|e| corrupt(cf, key, e)),
        None => Ok(None),
    }
}

fn put<T: Serialize>(txn: &mut Txn<'_>, cf: &str, key: Vec<u8>, v: &T) -> io::Result<()> {
    txn.put(cf, key, encode(v)?);
    Ok(())
}

pub(crate) fn corrupt(cf: &str, key: &[u8], e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "corrupt row {:?} in {cf}: {e}",
            String::from_utf8_lossy(key)
        ),
    )
}

type Applied = io::Result<OmResponse>;

fn refuse(r: Refusal) -> Applied {
    Ok(OmResponse::Refused(r))
}

impl StateMachineLogic for OmLogic {
    type Request = OmRequest;
    type Response = OmResponse;

    fn column_families(&self) -> Vec<&'static str> {
        COLUMN_FAMILIES.to_vec()
    }

    fn apply(&mut self, txn: &mut Txn<'_>, log_id: &LogId, req: OmRequest) -> Applied {
        if cfg!(debug_assertions) || cfg!(test) {
            apply_hold_failpoint(self.node_id);
        }
        let index = log_id.index();
        match req {
            OmRequest::CreateVolume {
                name,
                owner,
                quota_bytes,
                now_ms,
            } => {
                if get::<Volume>(txn, CF_VOLUMES, name.as_bytes())?.is_some() {
                    return refuse(Refusal::VolumeExists { volume: name });
                }
                let v = Volume {
                    name: name.clone(),
                    owner,
                    quota_bytes,
                    used_bytes: 0,
                    bucket_count: 0,
                    created_ms: now_ms,
                    modified_ms: now_ms,
                };
                put(txn, CF_VOLUMES, name.into_bytes(), &v)?;
                Ok(OmResponse::VolumeCreated(v))
            }
            OmRequest::DeleteVolume { name } => {
                let Some(v) = get::<Volume>(txn, CF_VOLUMES, name.as_bytes())? else {
                    return refuse(Refusal::VolumeNotFound { volume: name });
                };
                // Count rows, not the counter: the rows are the truth a delete must respect.
                let any = txn.scan_prefix(CF_BUCKETS, &buckets_prefix(&name), None, 1)?;
                if !any.is_empty() {
                    return refuse(Refusal::VolumeNotEmpty {
                        volume: name,
                        buckets: v.bucket_count.max(1),
                    });
                }
                txn.delete(CF_VOLUMES, name.into_bytes());
                Ok(OmResponse::VolumeDeleted)
            }
            OmRequest::CreateBucket {
                volume,
                name,
                replication,
                versioning,
                quota_bytes,
                now_ms,
            } => {
                let Some(mut v) = get::<Volume>(txn, CF_VOLUMES, volume.as_bytes())? else {
                    return refuse(Refusal::VolumeNotFound { volume });
                };
                let bk = bucket_key(&volume, &name);
                if get::<Bucket>(txn, CF_BUCKETS, &bk)?.is_some() {
                    return refuse(Refusal::BucketExists {
                        volume,
                        bucket: name,
                    });
                }
                let b = Bucket {
                    volume: volume.clone(),
                    name,
                    replication,
                    versioning,
                    quota_bytes,
                    used_bytes: 0,
                    key_count: 0,
                    created_ms: now_ms,
                    modified_ms: now_ms,
                };
                put(txn, CF_BUCKETS, bk, &b)?;
                v.bucket_count += 1;
                put(txn, CF_VOLUMES, volume.into_bytes(), &v)?;
                Ok(OmResponse::BucketCreated(b))
            }
            OmRequest::DeleteBucket { volume, name } => {
                let bk = bucket_key(&volume, &name);
                if get::<Bucket>(txn, CF_BUCKETS, &bk)?.is_none() {
                    return refuse(Refusal::BucketNotFound {
                        volume,
                        bucket: name,
                    });
                }
                let prefix = keys_prefix(&volume, &name);
                for (cf, what) in [(CF_KEYS, "keys"), (CF_OPEN_KEYS, "keys being written")] {
                    if !txn.scan_prefix(cf, &prefix, None, 1)?.is_empty() {
                        return refuse(Refusal::BucketNotEmpty {
                            volume,
                            bucket: name,
                            what: what.to_string(),
                        });
                    }
                }
                txn.delete(CF_BUCKETS, bk);
                if let Some(mut v) = get::<Volume>(txn, CF_VOLUMES, volume.as_bytes())? {
                    v.bucket_count = v.bucket_count.saturating_sub(1);
                    put(txn, CF_VOLUMES, volume.into_bytes(), &v)?;
                }
                Ok(OmResponse::BucketDeleted)
            }
            OmRequest::OpenKey {
                id,
                replication,
                blocks,
                now_ms,
                expires_ms,
            } => {
                let Some(b) = get_bucket(txn, &id.volume, &id.bucket)? else {
                    return refuse(bucket_not_found(&id.volume, &id.bucket, txn)?);
                };
                let ok = open_key_key(&id);
                if get::<OpenKey>(txn, CF_OPEN_KEYS, &ok)?.is_some() {
                    return refuse(Refusal::OpenKeyExists {
                        path: path(&id),
                        client_id: id.client_id,
                    });
                }
                let open = OpenKey {
                    volume: id.volume,
                    bucket: id.bucket,
                    name: id.key,
                    client_id: id.client_id,
                    replication: replication.unwrap_or(b.replication),
                    blocks,
                    created_ms: now_ms,
                    expires_ms,
                };
                put(txn, CF_OPEN_KEYS, ok, &open)?;
                Ok(OmResponse::KeyOpened(open))
            }
            OmRequest::AddBlocks {
                id,
                blocks,
                expires_ms,
                max_blocks,
            } => {
                let mut open = match find_open_key(txn, &id)? {
                    Ok(o) => o,
                    Err(r) => return refuse(r),
                };
                let count = (open.blocks.len() + blocks.len()) as u64;
                if count > u64::from(max_blocks) {
                    return refuse(Refusal::TooManyBlocks {
                        path: path(&id),
                        count,
                        max: u64::from(max_blocks),
                    });
                }
                open.blocks.extend(blocks);
                open.expires_ms = open.expires_ms.max(expires_ms);
                let expires_ms = open.expires_ms;
                put(txn, CF_OPEN_KEYS, open_key_key(&id), &open)?;
                Ok(OmResponse::BlocksAdded { expires_ms })
            }
            OmRequest::CommitKey {
                id,
                blocks,
                size,
                checksum,
                now_ms,
            } => commit_key(txn, index, id, blocks, size, checksum, now_ms),
            OmRequest::DeleteKey {
                volume,
                bucket,
                key,
            } => {
                let kk = key_key(&volume, &bucket, &key);
                let Some(k) = get::<Key>(txn, CF_KEYS, &kk)? else {
                    if get_bucket(txn, &volume, &bucket)?.is_none() {
                        return refuse(bucket_not_found(&volume, &bucket, txn)?);
                    }
                    return refuse(Refusal::KeyNotFound {
                        path: key_path(&volume, &bucket, &key),
                    });
                };
                txn.delete(CF_KEYS, kk);
                let mut gone: Vec<BlockId> = k.blocks.iter().map(|b| b.id).collect();
                for v in &k.old_versions {
                    gone.extend(v.blocks.iter().map(|b| b.id));
                }
                queue_deleted(
                    txn,
                    index,
                    gone,
                    format!("delete {}", key_path(&volume, &bucket, &key)),
                )?;
                account(txn, &volume, &bucket, -(k.stored_bytes() as i128), -1)?;
                Ok(OmResponse::KeyDeleted)
            }
            OmRequest::RenameKey {
                volume,
                bucket,
                from,
                to,
                now_ms,
            } => {
                let from_k = key_key(&volume, &bucket, &from);
                let Some(mut k) = get::<Key>(txn, CF_KEYS, &from_k)? else {
                    if get_bucket(txn, &volume, &bucket)?.is_none() {
                        return refuse(bucket_not_found(&volume, &bucket, txn)?);
                    }
                    return refuse(Refusal::KeyNotFound {
                        path: key_path(&volume, &bucket, &from),
                    });
                };
                let to_k = key_key(&volume, &bucket, &to);
                if from == to || get::<Key>(txn, CF_KEYS, &to_k)?.is_some() {
                    return refuse(Refusal::KeyExists {
                        path: key_path(&volume, &bucket, &to),
                    });
                }
                k.name = to;
                k.modified_ms = now_ms;
                txn.delete(CF_KEYS, from_k);
                put(txn, CF_KEYS, to_k, &k)?;
                Ok(OmResponse::KeyRenamed)
            }
            OmRequest::ExpireOpenKeys { ids, now_ms } => {
                let mut gone = Vec::new();
                let mut count = 0;
                for id in &ids {
                    let ok = open_key_key(id);
                    if let Some(o) = get::<OpenKey>(txn, CF_OPEN_KEYS, &ok)? {
                        if o.expires_ms <= now_ms {
                            txn.delete(CF_OPEN_KEYS, ok);
                            gone.extend(o.blocks.iter().map(|b| b.id));
                            count += 1;
                        }
                    }
                }
                queue_deleted(txn, index, gone, format!("{count} expired open key(s)"))?;
                Ok(OmResponse::OpenKeysExpired { count })
            }
            OmRequest::PurgeDeletedBlocks { ids } => {
                let mut count = 0;
                for id in ids {
                    let k = id.to_be_bytes();
                    if txn.get(CF_DELETED_BLOCKS, &k)?.is_some() {
                        txn.delete(CF_DELETED_BLOCKS, k.to_vec());
                        count += 1;
                    }
                }
                Ok(OmResponse::DeletedBlocksPurged { count })
            }
        }
    }
}

fn path(id: &OpenKeyId) -> String {
    key_path(&id.volume, &id.bucket, &id.key)
}

fn get_bucket(txn: &Txn<'_>, volume: &str, bucket: &str) -> io::Result<Option<Bucket>> {
    get(txn, CF_BUCKETS, &bucket_key(volume, bucket))
}

/// The refusal for a missing bucket: names the volume when that is what is missing.
fn bucket_not_found(volume: &str, bucket: &str, txn: &Txn<'_>) -> io::Result<Refusal> {
    Ok(
        if get::<Volume>(txn, CF_VOLUMES, volume.as_bytes())?.is_none() {
            Refusal::VolumeNotFound {
                volume: volume.to_string(),
            }
        } else {
            Refusal::BucketNotFound {
                volume: volume.to_string(),
                bucket: bucket.to_string(),
            }
        },
    )
}

/// The open key `id`, or why there is none: another client id holding the name is
/// `WrongClientId`, no open key of the name at all is `OpenKeyNotFound`.
fn find_open_key(txn: &Txn<'_>, id: &OpenKeyId) -> io::Result<Result<OpenKey, Refusal>> {
    if let Some(o) = get::<OpenKey>(txn, CF_OPEN_KEYS, &open_key_key(id))? {
        return Ok(Ok(o));
    }
    if get_bucket(txn, &id.volume, &id.bucket)?.is_none() {
        return Ok(Err(bucket_not_found(&id.volume, &id.bucket, txn)?));
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

/// Checks a commit's block list against the open key's allocation; returns the key's
/// blocks with offsets and pipelines.
fn check_blocks(
    open: &OpenKey,
    blocks: &[(BlockId, u64)],
    size: u64,
) -> Result<Vec<KeyBlock>, String> {
    let allocated: BTreeMap<BlockId, &AllocatedBlock> =
        open.blocks.iter().map(|b| (b.id, b)).collect();
    let mut out = Vec::with_capacity(blocks.len());
    let mut offset: u64 = 0;
    let mut seen = std::collections::BTreeSet::new();
    for (id, length) in blocks {
        let Some(a) = allocated.get(id) else {
            return Err(format!("block {id} was not allocated to this open key"));
        };
        if !seen.insert(*id) {
            return Err(format!("block {id} is listed twice"));
        }
        if *length > a.max_size {
            return Err(format!(
                "block {id} has length {length} above its maximum {}",
                a.max_size
            ));
        }
        out.push(KeyBlock {
            id: *id,
            length: *length,
            offset,
            pipeline: a.pipeline.clone(),
        });
        offset = offset
            .checked_add(*length)
            .ok_or_else(|| "block lengths overflow".to_string())?;
    }
    if offset != size {
        return Err(format!(
            "block lengths add up to {offset} bytes, but the size is {size}"
        ));
    }
    Ok(out)
}

fn commit_key(
    txn: &mut Txn<'_>,
    index: u64,
    id: OpenKeyId,
    blocks: Vec<(BlockId, u64)>,
    size: u64,
    checksum: String,
    now_ms: u64,
) -> Applied {
    let open = match find_open_key(txn, &id)? {
        Ok(o) => o,
        Err(r) => return refuse(r),
    };
    let key_blocks = match check_blocks(&open, &blocks, size) {
        Ok(b) => b,
        Err(reason) => {
            return refuse(Refusal::InvalidBlockList {
                path: path(&id),
                reason,
            })
        }
    };
    let Some(bucket) = get_bucket(txn, &id.volume, &id.bucket)? else {
        return refuse(bucket_not_found(&id.volume, &id.bucket, txn)?);
    };
    let Some(volume) = get::<Volume>(txn, CF_VOLUMES, id.volume.as_bytes())? else {
        return refuse(Refusal::VolumeNotFound { volume: id.volume });
    };
    let kk = key_key(&id.volume, &id.bucket, &id.key);
    let old = get::<Key>(txn, CF_KEYS, &kk)?;
    let (old_versions, freed, created_ms, version) = match &old {
        Some(o) if bucket.versioning => {
            let mut vs = o.old_versions.clone();
            vs.push(KeyVersion {
                version: o.version,
                size: o.size,
                blocks: o.blocks.clone(),
                checksum: o.checksum.clone(),
                modified_ms: o.modified_ms,
            });
            (vs, Vec::new(), o.created_ms, o.version + 1)
        }
        Some(o) => (
            Vec::new(),
            o.blocks.iter().map(|b| b.id).collect(),
            o.created_ms,
            o.version + 1,
        ),
        None => (Vec::new(), Vec::new(), now_ms, 0),
    };
    let key = Key {
        volume: id.volume.clone(),
        bucket: id.bucket.clone(),
        name: id.key.clone(),
        size,
        blocks: key_blocks,
        checksum,
        replication: open.replication,
        version,
        created_ms,
        modified_ms: now_ms,
        old_versions,
    };
    let delta = key.stored_bytes() as i128 - old.as_ref().map_or(0, |o| o.stored_bytes() as i128);
    if delta > 0 {
        let adding = delta as u64;
        for (what, used, quota) in [
            (
                format!("bucket {}/{}", id.volume, id.bucket),
                bucket.used_bytes,
                bucket.quota_bytes,
            ),
            (
                format!("volume {}", id.volume),
                volume.used_bytes,
                volume.quota_bytes,
            ),
        ] {
            if let Some(quota) = quota {
                if used.saturating_add(adding) > quota {
                    return refuse(Refusal::QuotaExceeded {
                        what,
                        used,
                        adding,
                        quota,
                    });
                }
            }
        }
    }
    // Blocks allocated but not committed are given back too.
    let committed: std::collections::BTreeSet<BlockId> = blocks.iter().map(|b| b.0).collect();
    let mut gone = freed;
    gone.extend(
        open.blocks
            .iter()
            .map(|b| b.id)
            .filter(|b| !committed.contains(b)),
    );
    txn.delete(CF_OPEN_KEYS, open_key_key(&id));
    put(txn, CF_KEYS, kk, &key)?;
    queue_deleted(txn, index, gone, format!("commit {}", path(&id)))?;
    account(txn, &id.volume, &id.bucket, delta, i64::from(old.is_none()))?;
    Ok(OmResponse::KeyCommitted(key))
}

/// Adjusts a bucket's and its volume's usage by `bytes` and its key count by `keys`.
fn account(
    txn: &mut Txn<'_>,
    volume: &str,
    bucket: &str,
    bytes: i128,
    keys: i64,
) -> io::Result<()> {
    fn adj(v: u64, d: i128) -> u64 {
        (v as i128 + d).clamp(0, u64::MAX as i128) as u64
    }
    let bk = bucket_key(volume, bucket);
    if let Some(mut b) = get::<Bucket>(txn, CF_BUCKETS, &bk)? {
        b.used_bytes = adj(b.used_bytes, bytes);
        b.key_count = adj(b.key_count, i128::from(keys));
        put(txn, CF_BUCKETS, bk, &b)?;
    }
    if let Some(mut v) = get::<Volume>(txn, CF_VOLUMES, volume.as_bytes())? {
        v.used_bytes = adj(v.used_bytes, bytes);
        put(txn, CF_VOLUMES, volume.as_bytes().to_vec(), &v)?;
    }
    Ok(())
}

/// Queues blocks for deletion under this entry's log index (one row per entry at most).
fn queue_deleted(
    txn: &mut Txn<'_>,
    index: u64,
    blocks: Vec<BlockId>,
    reason: String,
) -> io::Result<()> {
    if blocks.is_empty() {
        return Ok(());
    }
    let k = index.to_be_bytes();
    let mut row = get::<DeletedBlocks>(txn, CF_DELETED_BLOCKS, &k)?.unwrap_or(DeletedBlocks {
        blocks: Vec::new(),
        reason: String::new(),
    });
    row.blocks.extend(blocks);
    if row.reason.is_empty() {
        row.reason = reason;
    }
    put(txn, CF_DELETED_BLOCKS, k.to_vec(), &row)
}
