//! Key requests. Writes are pre-executed by the leader — blocks from the SCM, the time and
//! a new client id are filled in *before* the request is proposed — so every replica applies
//! the same command. Replies carry block tokens ([`crate::tokens`]): read+write for the
//! blocks of an open key, read for the blocks of every key described.

use rozone_proto::om as pb;
use rozone_proto::scm as spb;

use super::args::{commit_args, key_args, key_info};
use super::namespace::{list_arg, must_bucket, name, page};
use crate::convert::{self, allocated_pb};
use crate::error::OmError;
use crate::names::check_key_name;
use crate::node::{now_ms, Metrics, OmNode};
use crate::state::types::{AllocatedBlock, OpenKeyId};
use crate::state::{key_path, read, OmRequest, OmResponse, Refusal};

/// Most ids in one exclude list.
const MAX_EXCLUDES: usize = 1000;
/// Longest checksum string.
const MAX_CHECKSUM: usize = 256;

fn unexpected(r: OmResponse) -> OmError {
    OmError::Internal(format!("unexpected state machine response {r:?}"))
}

fn excludes(lists: &[&[u64]]) -> Result<(), OmError> {
    for l in lists {
        if l.len() > MAX_EXCLUDES {
            return Err(OmError::TooLarge(format!(
                "an exclude list has {} ids, at most {MAX_EXCLUDES}",
                l.len()
            )));
        }
    }
    Ok(())
}

/// Asks the SCM for `count` blocks of `size` bytes (0: of unknown length, up to a whole
/// block) and checks what came back.
async fn scm_blocks(
    n: &OmNode,
    size: u64,
    count: u32,
    exclude_datanodes: Vec<u64>,
    exclude_pipelines: Vec<u64>,
    exclude_containers: Vec<u64>,
) -> Result<Vec<AllocatedBlock>, OmError> {
    let reply = n
        .scm
        .allocate(spb::AllocateBlockRequest {
            size,
            count,
            owner: "om".to_string(),
            exclude_datanodes,
            exclude_pipelines,
            exclude_containers,
        })
        .await
        .inspect_err(|_| Metrics::inc(&n.metrics.scm_errors))?;
    let blocks = reply
        .blocks
        .into_iter()
        .map(AllocatedBlock::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    if size == 0 {
        if let Some(b) = blocks.first() {
            n.blocks.note_scm_block_size(b.max_size);
        }
    }
    Ok(blocks)
}

/// Blocks for a key of `size` bytes (`count` of them). A key that fits one SCM block asks
/// for its size, so the SCM counts that much against the container rather than a whole
/// block; larger keys (and sizes the SCM's block size is not known to hold) ask for
/// blocks of unknown length.
async fn sized_blocks(
    n: &OmNode,
    size: u64,
    count: u32,
    exclude_datanodes: Vec<u64>,
    exclude_pipelines: Vec<u64>,
) -> Result<Vec<AllocatedBlock>, OmError> {
    let hint = if count == 1 && size <= n.blocks.scm_block_size() {
        size
    } else {
        0
    };
    let (xd, xp) = (exclude_datanodes.clone(), exclude_pipelines.clone());
    match scm_blocks(n, hint, count, xd, xp, Vec::new()).await {
        // The SCM's block size may have shrunk since it was learnt: forget it, ask again.
        Err(OmError::Scm(_)) if hint > 0 => {
            n.blocks.note_scm_block_size(0);
            scm_blocks(
                n,
                0,
                count,
                exclude_datanodes,
                exclude_pipelines,
                Vec::new(),
            )
            .await
        }
        r => r,
    }
}

pub async fn open_key(n: &OmNode, r: pb::OpenKeyRequest) -> Result<pb::OpenKeyReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    let replication = convert::replication(r.replication)?;
    excludes(&[&r.exclude_datanodes, &r.exclude_pipelines])?;
    let om = &n.config.om;
    let block_size = om.block_size.as_u64().max(1);
    let count = r.size.div_ceil(block_size).max(1);
    if count > u64::from(om.max_blocks_per_key) {
        return Err(OmError::TooLarge(format!(
            "a key of {} bytes needs {count} blocks of {block_size} bytes, at most {} (om.max_blocks_per_key)",
            r.size, om.max_blocks_per_key
        )));
    }
    n.require_ready_leader()?;
    // Fail fast, before blocks are reserved, on what the state machine would refuse anyway.
    must_bucket(&n.group.db(), &r.volume, &r.bucket)?;
    let blocks = if r.size == 0 && r.exclude_datanodes.is_empty() && r.exclude_pipelines.is_empty()
    {
        // Unknown length and nothing to avoid: a block fetched ahead will do.
        let fetch = |count| scm_blocks(n, 0, count, Vec::new(), Vec::new(), Vec::new());
        vec![n.blocks.one(fetch).await?]
    } else {
        sized_blocks(
            n,
            r.size,
            count as u32,
            r.exclude_datanodes,
            r.exclude_pipelines,
        )
        .await?
    };
    // A random client id; a collision with an open key is refused by the state machine
    // (identically everywhere) and retried here with another id.
    for _ in 0..3 {
        let client_id = rand::random::<u64>().max(1);
        let now = now_ms();
        let req = OmRequest::OpenKey {
            id: OpenKeyId {
                volume: r.volume.clone(),
                bucket: r.bucket.clone(),
                key: r.key.clone(),
                client_id,
            },
            replication,
            blocks: blocks.clone(),
            now_ms: now,
            expires_ms: now.saturating_add(om.open_key_expiry.as_millis() as u64),
        };
        match n.propose(req).await {
            Ok(OmResponse::KeyOpened(o)) => {
                let mut blocks: Vec<_> = o.blocks.iter().map(allocated_pb).collect();
                n.tokens.sign_allocated(&n.scm, &mut blocks).await?;
                return Ok(pb::OpenKeyReply {
                    client_id,
                    session: Some((&o).into()),
                    blocks,
                });
            }
            Err(OmError::Refused(Refusal::OpenKeyExists { .. })) => continue,
            Err(e) => return Err(e),
            Ok(other) => return Err(unexpected(other)),
        }
    }
    Err(OmError::Internal("could not pick a free client id".into()))
}

pub async fn allocate_block(
    n: &OmNode,
    r: pb::AllocateBlockRequest,
) -> Result<pb::AllocateBlockReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    excludes(&[
        &r.exclude_datanodes,
        &r.exclude_pipelines,
        &r.exclude_containers,
    ])?;
    let om = &n.config.om;
    let count = r.count.max(1);
    if count > om.max_blocks_per_key {
        return Err(OmError::TooLarge(format!(
            "{count} blocks asked for, at most {} (om.max_blocks_per_key)",
            om.max_blocks_per_key
        )));
    }
    n.require_ready_leader()?;
    let id = OpenKeyId {
        volume: r.volume,
        bucket: r.bucket,
        key: r.key,
        client_id: r.client_id,
    };
    let expires_ms = now_ms().saturating_add(om.open_key_expiry.as_millis() as u64);
    // No SCM blocks for an open key that is not there: let the state machine say why.
    let blocks = if read::open_key(&n.group.db(), &id)?.is_some() {
        scm_blocks(
            n,
            0,
            count,
            r.exclude_datanodes,
            r.exclude_pipelines,
            r.exclude_containers,
        )
        .await?
    } else {
        Vec::new()
    };
    let mut reply_blocks: Vec<_> = blocks.iter().map(allocated_pb).collect();
    match n
        .propose(OmRequest::AddBlocks {
            id,
            blocks,
            expires_ms,
            max_blocks: om.max_blocks_per_key,
        })
        .await?
    {
        OmResponse::BlocksAdded { expires_ms } => {
            n.tokens.sign_allocated(&n.scm, &mut reply_blocks).await?;
            Ok(pb::AllocateBlockReply {
                blocks: reply_blocks,
                expires_ms,
            })
        }
        other => Err(unexpected(other)),
    }
}

pub async fn commit_key(
    n: &OmNode,
    r: pb::CommitKeyRequest,
) -> Result<pb::CommitKeyReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    let max = n.config.om.max_blocks_per_key as usize;
    if r.blocks.len() > max {
        return Err(OmError::TooLarge(format!(
            "{} blocks in the commit, at most {max} (om.max_blocks_per_key)",
            r.blocks.len()
        )));
    }
    if r.checksum.len() > MAX_CHECKSUM {
        return Err(OmError::InvalidArgument(format!(
            "checksum is {} bytes, at most {MAX_CHECKSUM}",
            r.checksum.len()
        )));
    }
    let blocks = r
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Ok((
                convert::block_id(b.block_id, &format!("blocks[{i}].block_id"))?,
                b.length,
            ))
        })
        .collect::<Result<Vec<_>, OmError>>()?;
    let id = OpenKeyId {
        volume: r.volume,
        bucket: r.bucket,
        key: r.key,
        client_id: r.client_id,
    };
    let s3 = commit_args(r.s3, r.condition)?;
    let req = match s3 {
        None => OmRequest::CommitKey {
            id,
            blocks,
            size: r.size,
            checksum: r.checksum,
            now_ms: now_ms(),
        },
        Some((meta, condition)) => OmRequest::S3CommitKey {
            id,
            blocks,
            size: r.size,
            checksum: r.checksum,
            now_ms: now_ms(),
            meta,
            condition,
        },
    };
    match n.propose(req).await? {
        OmResponse::KeyCommitted(k) => {
            let mut key = [key_info(&n.group.db(), &k)?];
            n.tokens.sign_keys(&n.scm, &mut key).await?;
            let [key] = key;
            Ok(pb::CommitKeyReply { key: Some(key) })
        }
        other => Err(unexpected(other)),
    }
}

pub async fn lookup_key(
    n: &OmNode,
    r: pb::LookupKeyRequest,
) -> Result<pb::LookupKeyReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    let info = n.read_gate(r.read).await?;
    let db = n.group.db();
    let Some(k) = read::key(&db, &r.volume, &r.bucket, &r.key)? else {
        must_bucket(&db, &r.volume, &r.bucket)?;
        return Err(Refusal::KeyNotFound {
            path: key_path(&r.volume, &r.bucket, &r.key),
        }
        .into());
    };
    let mut key = [key_info(&db, &k)?];
    drop(db);
    n.tokens.sign_keys(&n.scm, &mut key).await?;
    let [key] = key;
    Ok(pb::LookupKeyReply {
        key: Some(key),
        read_info: Some(info),
    })
}

pub async fn list_keys(n: &OmNode, r: pb::ListKeysRequest) -> Result<pb::ListKeysReply, OmError> {
    name("volume", &r.volume)?;
    name("bucket", &r.bucket)?;
    list_arg("prefix", &r.prefix)?;
    list_arg("start_after", &r.start_after)?;
    let info = n.read_gate(r.read).await?;
    let db = n.group.db();
    must_bucket(&db, &r.volume, &r.bucket)?;
    let (ks, truncated) = read::list_keys(
        &db,
        &r.volume,
        &r.bucket,
        &r.prefix,
        &r.start_after,
        page(r.limit),
    )?;
    let mut keys = ks
        .iter()
        .map(|k| key_info(&db, k))
        .collect::<Result<Vec<_>, _>>()?;
    drop(db);
    n.tokens.sign_keys(&n.scm, &mut keys).await?;
    Ok(pb::ListKeysReply {
        keys,
        truncated,
        read_info: Some(info),
    })
}

pub async fn delete_key(
    n: &OmNode,
    r: pb::DeleteKeyRequest,
) -> Result<pb::DeleteKeyReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    match n
        .propose(OmRequest::DeleteKey {
            volume: r.volume,
            bucket: r.bucket,
            key: r.key,
        })
        .await?
    {
        OmResponse::KeyDeleted => Ok(pb::DeleteKeyReply {}),
        other => Err(unexpected(other)),
    }
}

pub async fn rename_key(
    n: &OmNode,
    r: pb::RenameKeyRequest,
) -> Result<pb::RenameKeyReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.from_key)?;
    check_key_name(&r.to_key).map_err(OmError::InvalidName)?;
    match n
        .propose(OmRequest::RenameKey {
            volume: r.volume,
            bucket: r.bucket,
            from: r.from_key,
            to: r.to_key,
            now_ms: now_ms(),
        })
        .await?
    {
        OmResponse::KeyRenamed => Ok(pb::RenameKeyReply {}),
        other => Err(unexpected(other)),
    }
}
