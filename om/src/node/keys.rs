//! The node's key calls. Writes are pre-executed by the leader — blocks from the SCM, the
//! time and a new client id are filled in *before* the request is proposed — so every
//! replica applies the same command.

use rozone_kv::rocksdb::DB;

use super::actor::Actor;
use super::checks::{self, key_args, must_bucket};
use super::types::{
    AllocateArgs, Allocated, CommitArgs, KeyInfo, ListKeysArgs, OpenArgs, Opened, Page, ReadInfo,
    ReadOptions,
};
use super::{now_ms, unexpected, Metrics, OmNode};
use crate::error::OmError;
use crate::names::check_key_name;
use crate::scm_client::Exclude;
use crate::state::types::{AllocatedBlock, BlockId, Key, OpenKey, OpenKeyId};
use crate::state::{key_path, read, OmRequest, OmResponse, Refusal};

/// Longest checksum string.
const MAX_CHECKSUM: usize = 256;

/// Largest key an open serves from the pool: a pool block is of unknown length, which the
/// SCM counts as this much against its container, so a larger key asks for its own size.
const POOL_SIZE_MAX: u64 = rozone_types::UNKNOWN_LENGTH_RESERVATION;

/// A key with its S3 metadata when it has some.
pub(super) fn key_info(db: &DB, k: Key) -> Result<KeyInfo, OmError> {
    let s3 = read::s3_meta(db, &k.volume, &k.bucket, &k.name)?;
    Ok(KeyInfo { key: k, s3 })
}

impl OmNode {
    /// Asks the SCM for `count` blocks of `size` bytes (0: of unknown length, up to a whole
    /// block), learning the SCM's block size from a block of unknown length.
    async fn scm_blocks(
        &self,
        size: u64,
        count: u32,
        exclude: &Exclude,
    ) -> Result<Vec<AllocatedBlock>, OmError> {
        let blocks = self
            .scm
            .allocate(size, count, exclude)
            .await
            .inspect_err(|_| Metrics::inc(&self.metrics.scm_errors))?;
        if size == 0 {
            if let Some(b) = blocks.first() {
                self.blocks.note_scm_block_size(b.max_size);
            }
        }
        Ok(blocks)
    }

    /// Blocks for a key of `size` bytes (`count` of them). A key that fits one SCM block
    /// asks for its size, so the SCM counts that much against the container rather than a
    /// whole block; larger keys (and sizes the SCM's block size is not known to hold) ask
    /// for blocks of unknown length.
    async fn sized_blocks(
        &self,
        size: u64,
        count: u32,
        exclude: &Exclude,
    ) -> Result<Vec<AllocatedBlock>, OmError> {
        let hint = if count == 1 && size <= self.blocks.scm_block_size() {
            size
        } else {
            0
        };
        match self.scm_blocks(hint, count, exclude).await {
            // The SCM's block size may have shrunk since it was learnt: forget it, ask again.
            Err(OmError::Scm(_)) if hint > 0 => {
                self.blocks.note_scm_block_size(0);
                self.scm_blocks(0, count, exclude).await
            }
            r => r,
        }
    }

    /// When an open key opened at `now_ms` expires (`om.open_key_expiry` later).
    fn open_key_expires(&self, now_ms: u64) -> u64 {
        let expiry = u64::try_from(self.config.om.open_key_expiry.as_millis()).unwrap_or(u64::MAX);
        now_ms.saturating_add(expiry)
    }

    /// A block from the leader's pool. A refill asks the SCM for a batch and reserves it
    /// through the log before any open may take a block of it (`ReserveBlocks`), so a
    /// block handed out is always in the state: reserved, then an open key's, then a key's.
    async fn pool_block(&self) -> Result<AllocatedBlock, OmError> {
        self.blocks
            .one(|count| async move {
                let blocks = self.scm_blocks(0, count, &Exclude::default()).await?;
                // Held as long as an open key taking one at the end of the pool's TTL.
                let ttl = crate::block_pool::TTL.as_millis() as u64;
                let req = OmRequest::ReserveBlocks {
                    blocks: blocks.clone(),
                    expires_ms: self.open_key_expires(now_ms().saturating_add(ttl)),
                };
                match self.propose(req).await? {
                    OmResponse::BlocksReserved { .. } => Ok(blocks),
                    other => Err(unexpected(other)),
                }
            })
            .await
    }

    /// Opens a key: checks, blocks from the SCM (or the pool), then `OpenKey` under a new
    /// client id; a writer of one block from the pool gets a deferred open (no log entry).
    pub async fn open_key(&self, actor: &Actor, a: OpenArgs) -> Result<Opened, OmError> {
        key_args(&a.volume, &a.bucket, &a.key)?;
        checks::exclude(&a.exclude)?;
        let om = &self.config.om;
        let block_size = om.block_size.as_u64().max(1);
        let count = a.size.div_ceil(block_size).max(1);
        if count > u64::from(om.max_blocks_per_key) {
            return Err(OmError::TooLarge(format!(
                "a key of {} bytes needs {count} blocks of {block_size} bytes, at most {} (om.max_blocks_per_key)",
                a.size, om.max_blocks_per_key
            )));
        }
        self.require_ready_leader()?;
        // Fail fast, before blocks are reserved, on what the state machine would refuse anyway.
        let db = self.group.db();
        let bucket = must_bucket(&db, &a.volume, &a.bucket)?;
        actor.check_bucket(&*db, &a.volume, &a.bucket, || {
            format!("write key {}", key_path(&a.volume, &a.bucket, &a.key))
        })?;
        drop(db);
        let from_pool = a.exclude.is_empty() && a.size <= POOL_SIZE_MAX;
        if from_pool
            && a.single_block
            && om.deferred_open
            && a.replication.is_none_or(|r| r == bucket.replication)
        {
            // A deferred open: a reserved block and no log entry; the commit records the
            // open key and the key in one entry (state::logic::reserved).
            let block = self.pool_block().await?;
            let now = now_ms();
            let session = OpenKey {
                volume: a.volume,
                bucket: a.bucket,
                name: a.key,
                client_id: rand::random::<u64>().max(1),
                replication: bucket.replication,
                blocks: vec![block],
                created_ms: now,
                expires_ms: self.open_key_expires(now),
            };
            Metrics::inc(&self.metrics.deferred_opens);
            return Ok(Opened {
                client_id: session.client_id,
                session,
                deferred: true,
            });
        }
        let blocks = if from_pool && a.size == 0 {
            // Unknown length and nothing to avoid: a block fetched ahead will do.
            vec![self.pool_block().await?]
        } else {
            self.sized_blocks(a.size, count as u32, &a.exclude).await?
        };
        // A random client id; a collision with an open key is refused by the state machine
        // (identically everywhere) and retried here with another id.
        for _ in 0..3 {
            let client_id = rand::random::<u64>().max(1);
            let now = now_ms();
            let req = OmRequest::OpenKey {
                id: OpenKeyId {
                    volume: a.volume.clone(),
                    bucket: a.bucket.clone(),
                    key: a.key.clone(),
                    client_id,
                },
                replication: a.replication,
                blocks: blocks.clone(),
                now_ms: now,
                expires_ms: self.open_key_expires(now),
            };
            match self.propose_as(actor, req).await {
                Ok(OmResponse::KeyOpened(session)) => {
                    return Ok(Opened {
                        client_id,
                        session,
                        deferred: false,
                    })
                }
                Err(OmError::Refused(Refusal::OpenKeyExists { .. })) => continue,
                Err(e) => return Err(e),
                Ok(other) => return Err(unexpected(other)),
            }
        }
        Err(OmError::Internal("could not pick a free client id".into()))
    }

    /// Adds blocks to an open key (`AddBlocks`), asking the SCM only when the key is open.
    pub async fn allocate_blocks(
        &self,
        actor: &Actor,
        a: AllocateArgs,
    ) -> Result<Allocated, OmError> {
        key_args(&a.id.volume, &a.id.bucket, &a.id.key)?;
        checks::exclude(&a.exclude)?;
        let om = &self.config.om;
        let count = a.count.max(1);
        if count > om.max_blocks_per_key {
            return Err(OmError::TooLarge(format!(
                "{count} blocks asked for, at most {} (om.max_blocks_per_key)",
                om.max_blocks_per_key
            )));
        }
        self.require_ready_leader()?;
        let expires_ms = self.open_key_expires(now_ms());
        // No SCM blocks for an open key that is not there (let the state machine say why),
        // nor for a user who may not write it.
        let db = self.group.db();
        actor.check_bucket(&*db, &a.id.volume, &a.id.bucket, || {
            format!(
                "write key {}",
                key_path(&a.id.volume, &a.id.bucket, &a.id.key)
            )
        })?;
        let blocks = if read::open_key(&db, &a.id)?.is_some() {
            self.scm_blocks(0, count, &a.exclude).await?
        } else {
            Vec::new()
        };
        let req = OmRequest::AddBlocks {
            id: a.id,
            blocks: blocks.clone(),
            expires_ms,
            max_blocks: om.max_blocks_per_key,
        };
        match self.propose_as(actor, req).await? {
            OmResponse::BlocksAdded { expires_ms } => Ok(Allocated { blocks, expires_ms }),
            other => Err(unexpected(other)),
        }
    }

    /// Commits an open key (`CommitKey`, or `S3CommitKey` with S3 metadata).
    pub async fn commit_key(&self, actor: &Actor, a: CommitArgs) -> Result<KeyInfo, OmError> {
        key_args(&a.id.volume, &a.id.bucket, &a.id.key)?;
        checks::block_count("commit", a.blocks.len(), self.config.om.max_blocks_per_key)?;
        if a.checksum.len() > MAX_CHECKSUM {
            return Err(OmError::InvalidArgument(format!(
                "checksum is {} bytes, at most {MAX_CHECKSUM}",
                a.checksum.len()
            )));
        }
        checks::condition(&a.condition)?;
        let id = a.id.clone();
        let req = match a.s3 {
            None if a.condition.is_some() => {
                return Err(OmError::InvalidArgument(
                    "a commit condition needs the s3 metadata".into(),
                ))
            }
            None => OmRequest::CommitKey {
                id: a.id,
                blocks: a.blocks,
                size: a.size,
                checksum: a.checksum,
                now_ms: now_ms(),
            },
            Some(meta) => {
                checks::s3_meta(&meta)?;
                OmRequest::S3CommitKey {
                    id: a.id,
                    blocks: a.blocks,
                    size: a.size,
                    checksum: a.checksum,
                    now_ms: now_ms(),
                    meta,
                    condition: a.condition,
                }
            }
        };
        let req = if a.deferred.is_empty() {
            req
        } else {
            self.deferred_commit(id, a.deferred, req).await?
        };
        match self.propose_as(actor, req).await? {
            OmResponse::KeyCommitted(k) => key_info(&self.group.db(), k),
            other => Err(unexpected(other)),
        }
    }

    /// Wraps the commit of a deferred open: the blocks it handed out become the open key in
    /// the same entry. On a secure cluster each must come with the write token the open gave
    /// (signed by a key of the SCM's, for that block): the state machine checks only that
    /// the blocks are still reserved, and the token is what ties them to this writer.
    async fn deferred_commit(
        &self,
        id: OpenKeyId,
        deferred: Vec<(BlockId, Vec<u8>)>,
        commit: OmRequest,
    ) -> Result<OmRequest, OmError> {
        if deferred.len() > 1 {
            return Err(OmError::InvalidArgument(format!(
                "a deferred open hands out one block; the commit names {}",
                deferred.len()
            )));
        }
        let blocks: Vec<BlockId> = deferred.iter().map(|(b, _)| *b).collect();
        self.tokens.check_write(&self.scm, &deferred).await?;
        let now = now_ms();
        Ok(OmRequest::DeferredCommit {
            id,
            blocks,
            now_ms: now,
            expires_ms: self.open_key_expires(now),
            commit: Box::new(commit),
        })
    }

    /// One key, read as `read` asks.
    pub async fn lookup_key(
        &self,
        actor: &Actor,
        read: ReadOptions,
        volume: &str,
        bucket: &str,
        key: &str,
    ) -> Result<(KeyInfo, ReadInfo), OmError> {
        key_args(volume, bucket, key)?;
        let info = self.read_gate(read).await?;
        let db = self.group.db();
        actor.check_bucket(&*db, volume, bucket, || {
            format!("read key {}", key_path(volume, bucket, key))
        })?;
        let Some(k) = read::key(&db, volume, bucket, key)? else {
            must_bucket(&db, volume, bucket)?;
            return Err(Refusal::KeyNotFound {
                path: key_path(volume, bucket, key),
            }
            .into());
        };
        Ok((key_info(&db, k)?, info))
    }

    /// A page of a bucket's keys, read as `read` asks.
    pub async fn list_keys(
        &self,
        actor: &Actor,
        read: ReadOptions,
        a: ListKeysArgs,
    ) -> Result<(Page<KeyInfo>, ReadInfo), OmError> {
        checks::name("volume", &a.volume)?;
        checks::name("bucket", &a.bucket)?;
        checks::list_arg("prefix", &a.prefix)?;
        checks::list_arg("start_after", &a.start_after)?;
        let info = self.read_gate(read).await?;
        let db = self.group.db();
        must_bucket(&db, &a.volume, &a.bucket)?;
        actor.check_bucket(&*db, &a.volume, &a.bucket, || {
            format!("list keys of {}/{}", a.volume, a.bucket)
        })?;
        let (ks, truncated) = read::list_keys(
            &db,
            &a.volume,
            &a.bucket,
            &a.prefix,
            &a.start_after,
            checks::page(a.limit),
        )?;
        let rows = ks
            .into_iter()
            .map(|k| key_info(&db, k))
            .collect::<Result<_, _>>()?;
        Ok((Page { rows, truncated }, info))
    }

    /// Deletes a committed key.
    pub async fn delete_key(
        &self,
        actor: &Actor,
        volume: String,
        bucket: String,
        key: String,
    ) -> Result<(), OmError> {
        key_args(&volume, &bucket, &key)?;
        match self
            .propose_as(
                actor,
                OmRequest::DeleteKey {
                    volume,
                    bucket,
                    key,
                },
            )
            .await?
        {
            OmResponse::KeyDeleted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Renames a committed key within its bucket.
    pub async fn rename_key(
        &self,
        actor: &Actor,
        volume: String,
        bucket: String,
        from: String,
        to: String,
    ) -> Result<(), OmError> {
        key_args(&volume, &bucket, &from)?;
        check_key_name(&to).map_err(OmError::InvalidName)?;
        match self
            .propose_as(
                actor,
                OmRequest::RenameKey {
                    volume,
                    bucket,
                    from,
                    to,
                    now_ms: now_ms(),
                },
            )
            .await?
        {
            OmResponse::KeyRenamed => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
