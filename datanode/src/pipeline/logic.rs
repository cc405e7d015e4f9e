//! The pipeline state machine (the ContainerStateMachine): log entries carry metadata only;
//! applying one commits it into the shared container store.
//!
//! The group's own state-machine database holds nothing but the Raft layer's applied id and
//! membership: the container store is the state, and its per-container BCSID makes apply
//! idempotent. So a member restarting from an older snapshot re-applies every entry after
//! it against the container store as it is now — which is exactly where the replay guard
//! matters: a refusal is a response (an `Err` would stop the Raft node), it marks the
//! pipeline unhealthy and queues a CLOSE pipeline action for SCM.

use std::io;
use std::sync::Arc;

use rozone_kv::rocksdb::DB;
use rozone_raft::{LogId, StateMachineLogic, Txn};
use rozone_types::codes::DnCode;
use rozone_types::BlockId;
use serde::{Deserialize, Serialize};

use super::PipelineState;
use crate::error::DnError;
use crate::store::apply::Applied;
use crate::store::{offload, ContainerStore};
use crate::types::{BlockData, ChunkInfo};

/// A pipeline log entry, replicated in the sealed envelope (`rozone_raft::envelope`).
/// **Append-only**: a new entry kind is a new variant at the end; an existing variant's
/// fields never change. Every variant has a golden fixture in
/// `datanode/golden/pipeline-requests-v1.txt` (test in `logic_tests.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PipelineRequest {
    /// Commit a chunk whose bytes the write stage stored.
    WriteChunk { block: BlockId, chunk: ChunkInfo },
    /// Commit a block: its chunk list and length.
    PutBlock { block: BlockData },
    /// Commit a streamed block's bytes (the block itself comes with a later PutBlock).
    StreamInit { block: BlockId, chunk: ChunkInfo },
    /// Commit a streamed block's bytes and the block in one entry.
    StreamWithBlock { block: BlockData },
    /// Close a container (CLOSED, with its checksum).
    CloseContainer { container_id: u64 },
}

impl PipelineRequest {
    /// The chunk whose bytes this entry needs on every member (the write stage's work),
    /// and whether they came as a stream.
    pub fn data(&self) -> Option<(BlockId, &ChunkInfo, bool)> {
        match self {
            Self::WriteChunk { block, chunk } => Some((*block, chunk, false)),
            Self::StreamInit { block, chunk } => Some((*block, chunk, true)),
            Self::StreamWithBlock { block } => block.chunks.first().map(|c| (block.id, c, true)),
            Self::PutBlock { .. } | Self::CloseContainer { .. } => None,
        }
    }

    pub fn container_id(&self) -> u64 {
        match self {
            Self::WriteChunk { block, .. } | Self::StreamInit { block, .. } => block.container_id,
            Self::PutBlock { block } | Self::StreamWithBlock { block } => block.id.container_id,
            Self::CloseContainer { container_id } => *container_id,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::WriteChunk { .. } => "WriteChunk",
            Self::PutBlock { .. } => "PutBlock",
            Self::StreamInit { .. } => "StreamInit",
            Self::StreamWithBlock { .. } => "StreamWithBlock",
            Self::CloseContainer { .. } => "CloseContainer",
        }
    }
}

/// The result of applying an entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PipelineResponse {
    /// Committed (or already committed): the container's BCSID and the committed length.
    Ok {
        bcsid: u64,
        length: u64,
    },
    Refused(DnError),
}

pub struct PipelineLogic {
    pub pipeline_id: u64,
    pub store: Arc<ContainerStore>,
    pub state: Arc<PipelineState>,
    /// The last index applied here (None until the group's database is first loaded): a
    /// snapshot installed past it means the entries between never ran on this member.
    pub applied: Option<u64>,
}

/// Refusals that mean this replica can no longer follow the log safely.
fn poisons_pipeline(code: DnCode) -> bool {
    matches!(
        code,
        DnCode::ContainerNotFound
            | DnCode::ChecksumMismatch
            | DnCode::ContainerUnhealthy
            | DnCode::IoError
    )
}

impl PipelineLogic {
    /// Applies one entry at `index` against the container store (pure of Raft: unit-testable).
    pub fn apply_entry(&self, index: u64, req: &PipelineRequest) -> PipelineResponse {
        let r: Result<Applied, DnError> = match req {
            PipelineRequest::WriteChunk { block, chunk }
            | PipelineRequest::StreamInit { block, chunk } => {
                self.store.apply_chunk(index, *block, chunk)
            }
            PipelineRequest::PutBlock { block } => self.store.apply_block(index, block, None),
            PipelineRequest::StreamWithBlock { block } => match block.chunks.as_slice() {
                [c] => self.store.apply_block(index, block, Some(c)),
                _ => Err(DnError::invalid(
                    "a stream-with-block entry must hold exactly one chunk",
                )),
            },
            // A container this member never held (no descriptor, not even a tombstone):
            // nothing to close here. The leader proposes such a close when it may itself
            // have missed the container (it caught up by snapshot) while other members hold
            // it; refusing would poison a pipeline whose members are all fine. Not holding
            // the container, this member never reports it, so the SCM counts only the
            // members that closed it and re-replicates. A tombstone still refuses (below).
            PipelineRequest::CloseContainer { container_id }
                if self.store.descriptor(*container_id).is_none() =>
            {
                tracing::info!(
                    pipeline_id = self.pipeline_id,
                    container_id,
                    index,
                    "close of a container this member never held: nothing to close here"
                );
                Ok(Applied::AlreadyApplied { bcsid: 0 })
            }
            PipelineRequest::CloseContainer { container_id } => {
                self.store.apply_close(index, *container_id)
            }
        };
        match r {
            Ok(Applied::Done { bcsid, length }) => PipelineResponse::Ok { bcsid, length },
            Ok(Applied::AlreadyApplied { bcsid }) => PipelineResponse::Ok { bcsid, length: 0 },
            Err(e) => {
                if poisons_pipeline(e.code) {
                    let reason = format!("apply of {} at index {index} failed: {e}", req.kind());
                    tracing::error!(pipeline_id = self.pipeline_id, container_id = req.container_id(), %reason, "pipeline unhealthy");
                    self.state.mark_unhealthy(&reason);
                } else {
                    tracing::warn!(pipeline_id = self.pipeline_id, index, error = %e, "entry refused at apply");
                }
                PipelineResponse::Refused(e)
            }
        }
    }
}

impl StateMachineLogic for PipelineLogic {
    type Request = PipelineRequest;
    type Response = PipelineResponse;

    fn column_families(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn apply(
        &mut self,
        _txn: &mut Txn<'_>,
        log_id: &LogId,
        req: PipelineRequest,
    ) -> io::Result<PipelineResponse> {
        self.applied = Some(log_id.index());
        // The apply reads block files and writes a synced RocksDB batch: off the async
        // worker, which the Raft tasks, heartbeats and request handlers share.
        let index = log_id.index();
        Ok(offload(|| {
            // Tests: `dn-apply-hit` counts applies reaching the disk, `dn-apply` stalls them.
            fail::fail_point!("dn-apply-hit");
            fail::fail_point!("dn-apply");
            self.apply_entry(index, &req)
        }))
    }

    /// At open, remembers how far this member applied. After a snapshot install (the
    /// snapshot holds Raft metadata only, no container data), marks every container the
    /// skipped entries may have written as needing repair.
    fn on_load(&mut self, db: &Arc<DB>) -> io::Result<()> {
        offload(|| self.load(db))
    }
}

impl PipelineLogic {
    fn load(&mut self, db: &Arc<DB>) -> io::Result<()> {
        let (applied, _) = rozone_raft::state_machine::read_applied(db)?;
        let now = applied.map(|l| l.index()).unwrap_or(0);
        if let Some(before) = self.applied.filter(|b| now > *b) {
            // First, so that a leader this member becomes proposes closes it cannot judge.
            self.state.mark_snapshot_gap();
            let marked = self
                .store
                .mark_skipped_by_snapshot(self.pipeline_id, before, now)
                .map_err(|e| io::Error::other(e.to_string()))?;
            tracing::warn!(
                pipeline_id = self.pipeline_id,
                from = before,
                to = now,
                containers = ?marked,
                "caught up by snapshot: containers this member may lack data of marked UNHEALTHY"
            );
        }
        self.applied = Some(now);
        Ok(())
    }
}

#[cfg(test)]
#[path = "logic_tests.rs"]
mod tests;
