//! The leader's write stage: a client's chunk bytes are stored here and pushed to the
//! followers before the entry that commits them is proposed, so the bytes never enter the
//! Raft log. A follower the push does not reach pulls the bytes before it appends the entry
//! ([`super::follower`]). The container service converts requests and calls these; every
//! method expects [`Pipeline::check_writable`] to have passed.

use std::sync::Arc;
use std::time::Duration;

use rozone_types::checksum::{ChecksumData, ChecksumType, StreamSummer};
use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use super::{Pipeline, PipelineRequest};
use crate::error::DnError;
use crate::store::write::StagedFile;
use crate::store::{blocking, offload};
use crate::types::{BlockData, ChunkInfo, MAX_BLOCK};

/// How long a push to one follower may take before the leader goes on without it.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

impl Pipeline {
    /// Stores a chunk, pushes it to the followers and commits it; returns the BCSID.
    pub async fn write_chunk(
        &self,
        block: BlockId,
        chunk: ChunkInfo,
        data: Vec<u8>,
    ) -> Result<u64, DnError> {
        let data = Arc::new(data);
        let (store, c, d, pid) = (self.store.clone(), chunk.clone(), data.clone(), self.id);
        blocking(move || store.write_chunk(pid, block, &c, &d)).await?;
        self.push(block, &chunk, &data).await;
        let (bcsid, _) = self
            .propose(PipelineRequest::WriteChunk { block, chunk })
            .await?;
        Ok(bcsid)
    }

    /// Commits a block whose chunks are stored here; returns (BCSID, committed length).
    pub async fn put_block(&self, block: BlockData) -> Result<(u64, u64), DnError> {
        let (store, b) = (self.store.clone(), block.clone());
        blocking(move || store.check_block(&b, None)).await?;
        self.propose(PipelineRequest::PutBlock { block }).await
    }

    /// Starts a streamed block: its bytes are staged as they arrive, checked against the
    /// scheme's checksums, and installed and committed by [`StreamWrite::finish`].
    pub async fn begin_stream(
        self: &Arc<Self>,
        block: BlockId,
        kind: ChecksumType,
        bytes_per_checksum: u32,
    ) -> Result<StreamWrite, DnError> {
        let store = self.store.clone();
        let staged = blocking(move || store.stage_stream(block)).await?;
        Ok(StreamWrite {
            pipeline: self.clone(),
            block,
            staged,
            sum: StreamSummer::new(kind, bytes_per_checksum),
        })
    }

    /// Pushes chunk bytes to the followers (best effort: one that misses them pulls them
    /// before appending the entry).
    async fn push(&self, block: BlockId, chunk: &ChunkInfo, data: &[u8]) {
        let me = self.node_id;
        let pushes = self.state.members.iter().filter(|m| m.id != me).map(|m| {
            let peer = self.clients.pipeline_peer(&m.raft_addr);
            async move {
                let Ok(mut peer) = peer else { return };
                let push = peer.push_chunk(self.id, m.id, block, chunk, data);
                // A timed-out push is as good as a failed one: the member will pull.
                if let Ok(Err(e)) = tokio::time::timeout(PUSH_TIMEOUT, push).await {
                    tracing::debug!(member = m.id, error = %e, "chunk push failed; the member will pull");
                }
            }
        });
        futures::future::join_all(pushes).await;
    }
}

/// A streamed block being received by the leader.
pub struct StreamWrite {
    pipeline: Arc<Pipeline>,
    block: BlockId,
    staged: StagedFile,
    sum: StreamSummer,
}

/// A committed streamed block: its one chunk, the BCSID, and the block when the stream
/// also put it.
pub struct StreamCommitted {
    pub chunk: ChunkInfo,
    pub bcsid: u64,
    pub block: Option<BlockData>,
}

impl StreamWrite {
    /// Stages the next bytes; a stream may not grow past [`MAX_BLOCK`].
    pub fn append(&mut self, data: &[u8]) -> Result<(), DnError> {
        let grown = (data.len() as u64).checked_add(self.sum.len());
        if grown.is_none_or(|n| n > MAX_BLOCK) {
            return Err(DnError::new(
                DnCode::OutOfRange,
                format!(
                    "stream of block {} exceeds the {MAX_BLOCK} byte block limit",
                    self.block
                ),
            ));
        }
        self.sum.update(data);
        let staged = &mut self.staged;
        offload(|| staged.append(data))
    }

    /// Bytes staged so far.
    pub fn len(&self) -> u64 {
        self.sum.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sum.is_empty()
    }

    /// Checks the staged bytes against the checksums the client declared, installs them as
    /// the block's file and commits them: with the block itself when `put_block`, else as
    /// a StreamInit (the block comes with a later PutBlock). A mismatch stores nothing.
    pub async fn finish(
        self,
        declared: ChecksumData,
        put_block: bool,
    ) -> Result<StreamCommitted, DnError> {
        let Self {
            pipeline: p,
            block,
            staged,
            sum,
        } = self;
        let len = sum.len();
        let computed = sum.finish();
        if declared != computed {
            return Err(DnError::new(
                DnCode::ChecksumMismatch,
                format!("stream of block {block}: {len} bytes do not match the declared checksums; nothing stored"),
            ));
        }
        let chunk = ChunkInfo {
            offset: 0,
            len,
            checksum: computed,
        };
        let (store, c, pid) = (p.store.clone(), chunk.clone(), p.id);
        blocking(move || store.install_stream(pid, block, &c, staged)).await?;
        if put_block {
            let b = BlockData {
                id: block,
                chunks: vec![chunk.clone()],
                length: len,
                bcsid: 0,
            };
            let (bcsid, _) = p
                .propose(PipelineRequest::StreamWithBlock { block: b.clone() })
                .await?;
            Ok(StreamCommitted {
                chunk,
                bcsid,
                block: Some(BlockData { bcsid, ..b }),
            })
        } else {
            let (bcsid, _) = p
                .propose(PipelineRequest::StreamInit {
                    block,
                    chunk: chunk.clone(),
                })
                .await?;
            Ok(StreamCommitted {
                chunk,
                bcsid,
                block: None,
            })
        }
    }
}
