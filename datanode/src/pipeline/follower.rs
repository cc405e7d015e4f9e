//! The follower's write stage: chunk bytes are stored on this member before the entry that
//! commits them is appended to its log. Usually the leader pushed them
//! ([`Pipeline::accept_push`]); for every entry whose bytes are still missing (the push did
//! not reach this member, or it was down) [`WriteStageHook`] pulls them from another member
//! before the append, verifies and stores them. So an entry is in a member's log only after
//! its write stage ran there, and a restarted follower catches up without chunk bytes ever
//! entering the log. Entries replayed from the local log at restart never pass here: replay
//! only applies. The leader's side is [`super::leader`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use rozone_raft::AppendHook;

use rozone_types::checksum::StreamSummer;
use rozone_types::codes::DnCode;
use rozone_types::BlockId;

use super::logic::PipelineRequest;
use super::Pipeline;
use crate::clients::Clients;
use crate::error::DnError;
use crate::store::{blocking, offload, ContainerStore};
use crate::types::{ChunkInfo, Member};

/// Pull piece size for streamed blocks.
const PIECE: u64 = 4 << 20;
const ATTEMPTS: usize = 3;

impl Pipeline {
    /// Takes chunk bytes the leader pushed: stored as on the leader, so the entry that
    /// commits them finds them here.
    pub async fn accept_push(
        &self,
        block: BlockId,
        chunk: ChunkInfo,
        data: Vec<u8>,
    ) -> Result<(), DnError> {
        let (store, pid) = (self.store.clone(), self.id);
        blocking(move || store.write_chunk(pid, block, &chunk, &data)).await
    }
}

/// Pulls the bytes of appended entries this member does not hold.
pub struct WriteStageHook {
    pub pipeline_id: u64,
    pub node_id: u64,
    pub members: Vec<Member>,
    pub store: Arc<ContainerStore>,
    pub clients: Arc<Clients>,
}

impl AppendHook for WriteStageHook {
    fn before_append<'a>(&'a self, entries: &'a [(u64, Vec<u8>)]) -> BoxFuture<'a, ()> {
        async move {
            for (index, bytes) in entries {
                let req: PipelineRequest = match rozone_raft::envelope::open(bytes, "pipeline request") {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(pipeline_id = self.pipeline_id, index, error = %e, "undecodable entry");
                        continue;
                    }
                };
                let Some((block, chunk, streamed)) = req.data() else { continue };
                // Reads the block file: off the async worker.
                if offload(|| self.store.has_chunk(block, chunk)) {
                    continue;
                }
                if let Err(e) = self.fetch(block, chunk, streamed).await {
                    // The apply stage will see the bytes missing and refuse the entry.
                    tracing::warn!(pipeline_id = self.pipeline_id, index, %block, error = %e, "write stage could not fetch chunk bytes");
                }
            }
        }
        .boxed()
    }
}

impl WriteStageHook {
    async fn fetch(
        &self,
        block: BlockId,
        chunk: &ChunkInfo,
        streamed: bool,
    ) -> Result<(), DnError> {
        let mut last = DnError::io("pull", "no other member");
        for attempt in 0..ATTEMPTS {
            for m in self.members.iter().filter(|m| m.id != self.node_id) {
                let r = if streamed {
                    self.pull_stream(m, block, chunk).await
                } else {
                    self.pull_chunk(m, block, chunk).await
                };
                match r {
                    Ok(()) => return Ok(()),
                    // A tombstone or closed container here: nothing to fetch, apply decides.
                    Err(e)
                        if matches!(
                            e.code,
                            DnCode::ContainerNotFound | DnCode::ClosedContainerIo
                        ) =>
                    {
                        return Err(e)
                    }
                    Err(e) => last = e,
                }
            }
            if attempt + 1 < ATTEMPTS {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Err(last)
    }

    async fn pull(
        &self,
        m: &Member,
        block: BlockId,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, DnError> {
        let mut peer = self
            .clients
            .pipeline_peer(&m.raft_addr)
            .map_err(|e| DnError::io("pull", e))?;
        let pull = peer.pull_chunk(self.pipeline_id, block, offset, len);
        let data = tokio::time::timeout(Duration::from_secs(30), pull)
            .await
            .map_err(|_| DnError::io("pull", format!("from {} timed out", m.raft_addr)))?
            .map_err(|e| DnError::io("pull", format!("from {}: {e}", m.raft_addr)))?;
        if data.len() as u64 != len {
            return Err(DnError::io(
                "pull",
                format!("{} sent {} bytes, {len} asked", m.raft_addr, data.len()),
            ));
        }
        Ok(data)
    }

    async fn pull_chunk(
        &self,
        m: &Member,
        block: BlockId,
        chunk: &ChunkInfo,
    ) -> Result<(), DnError> {
        let data = self.pull(m, block, chunk.offset, chunk.len).await?;
        let store = self.store.clone();
        let (p, c) = (self.pipeline_id, chunk.clone());
        tokio::task::spawn_blocking(move || store.write_chunk(p, block, &c, &data))
            .await
            .map_err(|e| DnError::io("write stage", e))?
    }

    async fn pull_stream(
        &self,
        m: &Member,
        block: BlockId,
        chunk: &ChunkInfo,
    ) -> Result<(), DnError> {
        let store = self.store.clone();
        let mut staged = blocking(move || store.stage_stream(block)).await?;
        let mut sum = StreamSummer::new(chunk.checksum.kind, chunk.checksum.bytes_per_checksum);
        let mut at = 0;
        while at < chunk.len {
            let n = PIECE.min(chunk.len - at);
            let data = self.pull(m, block, at, n).await?;
            sum.update(&data);
            offload(|| staged.append(&data))?;
            at += n;
        }
        if sum.finish() != chunk.checksum {
            return Err(DnError::new(
                DnCode::ChecksumMismatch,
                format!("pulled stream of block {block} does not match its checksums"),
            ));
        }
        let store = self.store.clone();
        let (p, c) = (self.pipeline_id, chunk.clone());
        tokio::task::spawn_blocking(move || store.install_stream(p, block, &c, staged))
            .await
            .map_err(|e| DnError::io("write stage", e))?
    }
}
