//! Writing a key: open it on the OM, write each block's bytes to its pipeline's leader,
//! commit the block list. A block whose pipeline fails is written again to a new block on
//! another pipeline (the failed datanode, pipeline and container excluded), so a put
//! succeeds while any healthy pipeline remains; the key only becomes visible at commit.
//!
//! Bytes are read from the source one block-fill at a time (at most
//! [`WriteOptions::max_block_fill`]), kept until the block is committed, so a retry on a
//! new block needs no seekable source and memory stays bounded.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tonic::Status;

use rozone_types::codes::{dn_result, om_error as om_code, DnCode, OmErrorCode};

use crate::datanode::Datanodes;
use crate::error::{is_retryable, ClientError, Result};
use crate::om::{Exclude, OmClient, OpenKey, S3Commit};
use crate::types::{AllocatedBlock, BlockId, Key};

/// How keys are written.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Bytes per WriteChunk on the chunk path.
    pub chunk_size: usize,
    /// Blocks of at least this many bytes use the data stream (one log entry per block).
    pub stream_threshold: usize,
    /// Bytes per message on the data stream.
    pub stream_piece: usize,
    /// Most bytes the client puts in one block (and holds in memory at a time).
    pub max_block_fill: u64,
    /// Blocks tried for one piece of data before the put fails.
    pub block_attempts: u32,
    /// Time spent on one pipeline (following leader changes) before excluding it.
    pub pipeline_timeout: Duration,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            chunk_size: 1 << 20,
            stream_threshold: 1 << 20,
            stream_piece: 1 << 20,
            max_block_fill: 64 << 20,
            block_attempts: 6,
            pipeline_timeout: Duration::from_secs(15),
        }
    }
}

/// Largest key of known size written as one block through a deferred open (the OM's
/// limit for a block from its pool).
pub const SINGLE_BLOCK_MAX: u64 = rozone_types::UNKNOWN_LENGTH_RESERVATION;

/// How long members may answer PIPELINE_NOT_FOUND for a pipeline the SCM just created.
const PIPELINE_APPEAR: Duration = Duration::from_secs(5);

/// Why one block write failed, and what to avoid next time.
#[derive(Debug)]
struct BlockFailure {
    /// Datanodes that could not be reached.
    datanodes: Vec<u64>,
    /// The container refused writes (closed, gone): avoid it.
    container: bool,
    detail: String,
}

/// Reads up to `cap` bytes (fewer only at end of input).
async fn fill<R: AsyncRead + Unpin>(src: &mut R, cap: usize) -> Result<Bytes> {
    let mut buf = BytesMut::with_capacity(cap.min(64 << 20));
    while buf.len() < cap {
        let want = (cap - buf.len()).min(4 << 20);
        let mut limited = (&mut *src).take(want as u64);
        let n = limited
            .read_buf(&mut buf)
            .await
            .map_err(|e| ClientError::io("read input", e))?;
        if n == 0 {
            break;
        }
    }
    Ok(buf.freeze())
}

/// A key written to blocks but not committed yet (see [`KeyWriter::write`]).
#[derive(Debug, Clone)]
pub struct Written {
    pub open: OpenKey,
    /// In key order: (block, bytes written to it).
    pub blocks: Vec<(BlockId, u64)>,
    pub checksum: String,
}

impl Written {
    pub fn size(&self) -> u64 {
        self.blocks.iter().map(|(_, l)| l).sum()
    }
}

/// The writer of keys.
pub struct KeyWriter<'a> {
    pub om: &'a OmClient,
    pub datanodes: &'a Datanodes,
    pub opts: &'a WriteOptions,
}

impl KeyWriter<'_> {
    /// Writes `src` as `/volume/bucket/key`; `size` (when known) lets the OM allocate all
    /// blocks at once. `progress` is called with the bytes written so far.
    pub async fn put<R: AsyncRead + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: Option<u64>,
        src: R,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Key> {
        let w = self
            .write_object(volume, bucket, key, size, src, progress)
            .await?;
        self.commit(&w, None).await
    }

    /// The first half of [`Self::put`]: opens the key and writes every byte of `src` to
    /// blocks, without committing (the S3 gateway commits with its metadata and condition
    /// once it knows the ETag of what it read). For a multipart upload's part use
    /// [`Self::write`]: a key of known size up to [`SINGLE_BLOCK_MAX`] is opened here as
    /// one block, which only [`Self::commit`] can commit.
    pub async fn write_object<R: AsyncRead + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: Option<u64>,
        src: R,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Written> {
        let single = size.is_some_and(|s| s <= SINGLE_BLOCK_MAX);
        self.write_with(volume, bucket, key, size, src, progress, single)
            .await
    }

    /// Opens the key and writes every byte of `src` to blocks, without committing.
    pub async fn write<R: AsyncRead + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: Option<u64>,
        src: R,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Written> {
        self.write_with(volume, bucket, key, size, src, progress, false)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn write_with<R: AsyncRead + Unpin>(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        size: Option<u64>,
        mut src: R,
        progress: &(dyn Fn(u64) + Sync),
        single_block: bool,
    ) -> Result<Written> {
        let mut exclude = Exclude::default();
        let mut open = if single_block {
            self.om
                .open_key_single_block(volume, bucket, key, size.unwrap_or(0))
                .await?
        } else {
            self.om
                .open_key(volume, bucket, key, size.unwrap_or(0), &exclude)
                .await?
        };
        let mut spare: std::collections::VecDeque<AllocatedBlock> = open.blocks.clone().into();
        let mut cap = spare
            .front()
            .map(|b| b.max_size)
            .unwrap_or(self.opts.max_block_fill);
        let mut written: Vec<(BlockId, u64)> = Vec::new();
        let mut crc = crc32fast::Hasher::new();
        let mut total = 0u64;
        loop {
            let want = cap.min(self.opts.max_block_fill).max(1) as usize;
            let data = fill(&mut src, want).await?;
            if data.is_empty() {
                break;
            }
            crc.update(&data);
            let mut attempt = 0;
            let mut block = self
                .next_block(&mut open, &mut spare, &exclude, size, total)
                .await?;
            loop {
                attempt += 1;
                cap = block.max_size;
                if (data.len() as u64) > block.max_size {
                    return Err(ClientError::bad_reply(
                        "OM",
                        format!(
                            "block {} holds at most {} bytes",
                            block.block_id, block.max_size
                        ),
                    ));
                }
                match self.write_block(&block, data.clone()).await {
                    Ok(()) => break,
                    Err(f) => {
                        tracing::warn!(block = %block.block_id, pipeline = block.pipeline.id, attempt, detail = %f.detail, "block write failed; trying another block");
                        if attempt >= self.opts.block_attempts {
                            return Err(ClientError::Unavailable {
                                service: "datanode".into(),
                                detail: format!("write of {} bytes at offset {total} failed on {attempt} blocks; last: {}", data.len(), f.detail),
                            });
                        }
                        add_unique(&mut exclude.pipelines, block.pipeline.id);
                        for d in f.datanodes {
                            add_unique(&mut exclude.datanodes, d);
                        }
                        if f.container {
                            add_unique(&mut exclude.containers, block.block_id.container_id);
                        }
                        block = self
                            .next_block(&mut open, &mut spare, &exclude, size, total)
                            .await?;
                    }
                }
            }
            written.push((block.block_id, data.len() as u64));
            total += data.len() as u64;
            progress(total);
            if data.len() < want {
                break;
            }
        }
        Ok(Written {
            checksum: format!("crc32:{:08x}", crc.finalize()),
            open,
            blocks: written,
        })
    }

    /// Commits what [`Self::write`] wrote, with S3 metadata and a condition when given; if
    /// the answer was lost and a retry finds the open key gone, the first commit may have
    /// landed: the key is then looked up and accepted if it is ours.
    pub async fn commit(&self, w: &Written, s3: Option<S3Commit<'_>>) -> Result<Key> {
        let (open, written, checksum) = (&w.open, &w.blocks[..], w.checksum.as_str());
        match self.om.commit_key_with(open, written, checksum, s3).await {
            Ok(k) => Ok(k),
            Err(e) if om_error(&e) == Some(OmErrorCode::OpenKeyNotFound) => {
                let k = self
                    .om
                    .lookup_key(&open.volume, &open.bucket, &open.key, Default::default())
                    .await?;
                let ours: Vec<(BlockId, u64)> =
                    k.blocks.iter().map(|b| (b.block_id, b.length)).collect();
                if ours == written && k.checksum == checksum {
                    Ok(k)
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// A spare block the OM already gave us that avoids `exclude`, or a new one. A
    /// deferred open gives no more blocks: before any byte was written the key is opened
    /// again (with a log entry, avoiding what failed); after, the key was larger than the
    /// one block it was opened for.
    async fn next_block(
        &self,
        open: &mut OpenKey,
        spare: &mut std::collections::VecDeque<AllocatedBlock>,
        exclude: &Exclude,
        size: Option<u64>,
        written: u64,
    ) -> Result<AllocatedBlock> {
        if open.deferred && spare.is_empty() {
            if written > 0 {
                return Err(ClientError::Invalid(format!(
                    "{}/{}/{}: more bytes than the {} declared",
                    open.volume,
                    open.bucket,
                    open.key,
                    size.unwrap_or(0)
                )));
            }
            *open = self
                .om
                .open_key(
                    &open.volume,
                    &open.bucket,
                    &open.key,
                    size.unwrap_or(0),
                    exclude,
                )
                .await?;
            spare.extend(open.blocks.iter().cloned());
        }
        while let Some(b) = spare.pop_front() {
            let bad = exclude.pipelines.contains(&b.pipeline.id)
                || exclude.containers.contains(&b.block_id.container_id)
                || b.pipeline
                    .members
                    .iter()
                    .any(|m| exclude.datanodes.contains(&m.id));
            if !bad {
                return Ok(b);
            }
        }
        match self.om.allocate_block(open, exclude).await {
            Ok(b) => Ok(b),
            Err(e) if !exclude.pipelines.is_empty() || !exclude.datanodes.is_empty() => {
                // Nothing left outside the excluded set (a small cluster): the failed
                // pipeline may have re-elected a leader meanwhile; try without excluding it.
                tracing::warn!(error = %e, "no block outside the excluded pipelines; retrying without excluding them");
                tokio::time::sleep(Duration::from_millis(500)).await;
                let relaxed = Exclude {
                    containers: exclude.containers.clone(),
                    ..Exclude::default()
                };
                self.om.allocate_block(open, &relaxed).await
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one block to its pipeline, following the pipeline's leader.
    async fn write_block(
        &self,
        block: &AllocatedBlock,
        data: Bytes,
    ) -> std::result::Result<(), BlockFailure> {
        let members = block.pipeline.leader_first();
        let deadline = Instant::now() + self.opts.pipeline_timeout;
        let mut target = 0usize;
        let mut unreachable: Vec<u64> = Vec::new();
        let mut backoff = Duration::from_millis(20);
        let mut last = String::new();
        let mut not_found_since: Option<Instant> = None;
        while Instant::now() < deadline {
            let dn = members[target % members.len()];
            let r = self.write_to(&dn.container_addr, block, data.clone()).await;
            let s = match r {
                Ok(()) => return Ok(()),
                Err(s) => s,
            };
            last = format!(
                "datanode {} ({}): {}",
                dn.id,
                dn.container_addr,
                s.message()
            );
            match dn_result(&s) {
                Some(DnCode::NotLeader) | Some(DnCode::LeaderNotReady) => {
                    if let Some(h) = rozone_rpc::leader_hint(&s) {
                        if let Some(i) = members.iter().position(|m| m.container_addr == h) {
                            target = i;
                            continue;
                        }
                    }
                    target += 1;
                }
                Some(DnCode::ClosedContainerIo)
                | Some(DnCode::ContainerNotFound)
                | Some(DnCode::ContainerUnhealthy)
                | Some(DnCode::DiskFull) => {
                    return Err(BlockFailure {
                        datanodes: unreachable,
                        container: true,
                        detail: last,
                    });
                }
                Some(DnCode::PipelineNotFound) => {
                    // A new pipeline reaches its members with their next heartbeat: give
                    // them a moment before judging the pipeline gone.
                    let since = *not_found_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= PIPELINE_APPEAR {
                        return Err(BlockFailure {
                            datanodes: unreachable,
                            container: false,
                            detail: last,
                        });
                    }
                    target += 1;
                }
                Some(DnCode::PipelineUnhealthy) => {
                    return Err(BlockFailure {
                        datanodes: unreachable,
                        container: false,
                        detail: last,
                    });
                }
                _ if is_retryable(&s) => {
                    // This member is down or cut off: another may lead after an election.
                    if !unreachable.contains(&dn.id) {
                        unreachable.push(dn.id);
                    }
                    if unreachable.len() >= members.len() {
                        return Err(BlockFailure {
                            datanodes: unreachable,
                            container: false,
                            detail: last,
                        });
                    }
                    target += 1;
                }
                _ => {
                    return Err(BlockFailure {
                        datanodes: unreachable,
                        container: false,
                        detail: last,
                    })
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(500));
        }
        Err(BlockFailure {
            datanodes: unreachable,
            container: false,
            detail: format!(
                "no pipeline leader accepted the block within {:?}; last: {last}",
                self.opts.pipeline_timeout
            ),
        })
    }

    async fn write_to(
        &self,
        addr: &str,
        block: &AllocatedBlock,
        data: Bytes,
    ) -> std::result::Result<(), Status> {
        let p = block.pipeline.id;
        let id = block.block_id;
        let token = block.token.as_slice();
        let len = data.len() as u64;
        let committed = if data.len() >= self.opts.stream_threshold {
            self.datanodes
                .stream_block(addr, p, id, token, data, self.opts.stream_piece)
                .await?
        } else {
            let mut chunks = Vec::new();
            let mut off = 0;
            while off < data.len() {
                let end = (off + self.opts.chunk_size.max(1)).min(data.len());
                chunks.push(
                    self.datanodes
                        .write_chunk(addr, p, id, token, off as u64, data.slice(off..end))
                        .await?,
                );
                off = end;
            }
            self.datanodes.put_block(addr, p, id, token, chunks).await?
        };
        if committed != len {
            return Err(Status::data_loss(format!(
                "datanode committed {committed} of {len} bytes"
            )));
        }
        Ok(())
    }
}

fn add_unique(v: &mut Vec<u64>, x: u64) {
    if !v.contains(&x) {
        v.push(x);
    }
}

/// The OM's error code on a refusal.
pub fn om_error(e: &ClientError) -> Option<OmErrorCode> {
    match e {
        ClientError::Status { status, .. } => om_code(status),
        _ => None,
    }
}
