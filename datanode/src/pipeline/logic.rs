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

use rozone_raft::{LogId, StateMachineLogic, Txn};
use rozone_types::codes::DnCode;
use rozone_types::BlockId;
use serde::{Deserialize, Serialize};

use super::PipelineState;
use crate::error::DnError;
use crate::store::apply::Applied;
use crate::store::ContainerStore;
use crate::types::{BlockData, ChunkInfo};

/// A pipeline log entry.
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
        Ok(self.apply_entry(log_id.index(), &req))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    use rozone_types::checksum::{ChecksumData, ChecksumType};

    use super::*;
    use crate::types::ContainerState;

    fn setup(dir: &std::path::Path) -> PipelineLogic {
        let store = Arc::new(ContainerStore::open(&[dir.join("vol")], 0, false).unwrap());
        let state = Arc::new(PipelineState {
            id: 1,
            members: vec![],
            healthy: AtomicBool::new(true),
            reason: Mutex::new(None),
            file: dir.join("pipeline.json"),
        });
        PipelineLogic {
            pipeline_id: 1,
            store,
            state,
        }
    }

    fn chunk(data: &[u8]) -> ChunkInfo {
        ChunkInfo {
            offset: 0,
            len: data.len() as u64,
            checksum: ChecksumData::compute(ChecksumType::Crc32c, 512, data),
        }
    }

    #[test]
    fn apply_is_idempotent_by_bcsid_and_never_recreates_a_deleted_container() {
        let d = tempfile::tempdir().unwrap();
        let l = setup(d.path());
        let block = BlockId {
            container_id: 5,
            local_id: 1,
        };
        let data = vec![3u8; 2000];
        let c = chunk(&data);
        // Apply without a write stage: the container does not exist, nothing is created.
        let r = l.apply_entry(
            1,
            &PipelineRequest::StreamInit {
                block,
                chunk: c.clone(),
            },
        );
        assert!(
            matches!(r, PipelineResponse::Refused(ref e) if e.code == DnCode::ContainerNotFound),
            "{r:?}"
        );
        assert!(l.store.descriptor(5).is_none());
        assert!(!l.state.is_healthy());
        assert!(l
            .state
            .unhealthy_reason()
            .unwrap()
            .contains("CONTAINER_NOT_FOUND"));
        assert!(d.path().join("pipeline.json").is_file(), "health persisted");

        let l = setup(&d.path().join("b"));
        l.store.write_chunk(1, block, &c, &data).unwrap();
        let b = BlockData {
            id: block,
            chunks: vec![c.clone()],
            length: 2000,
            bcsid: 0,
        };
        let entries = [
            PipelineRequest::WriteChunk {
                block,
                chunk: c.clone(),
            },
            PipelineRequest::PutBlock { block: b },
            PipelineRequest::CloseContainer { container_id: 5 },
        ];
        for (i, e) in entries.iter().enumerate() {
            assert!(matches!(
                l.apply_entry(i as u64 + 10, e),
                PipelineResponse::Ok { .. }
            ));
        }
        let closed = l.store.descriptor(5).unwrap();
        assert_eq!(
            (closed.state, closed.bcsid, closed.block_count),
            (ContainerState::Closed, 12, 1)
        );
        // Replaying the same entries changes nothing.
        for (i, e) in entries.iter().enumerate() {
            assert!(matches!(
                l.apply_entry(i as u64 + 10, e),
                PipelineResponse::Ok { .. }
            ));
        }
        assert_eq!(l.store.descriptor(5).unwrap(), closed);
        assert!(l.state.is_healthy());

        // Deleted: a tombstone stays; replay from any age is refused, write stage too.
        l.store.delete_container(5, true).unwrap();
        for (i, e) in entries.iter().enumerate() {
            let r = l.apply_entry(i as u64 + 10, e);
            assert!(
                matches!(r, PipelineResponse::Refused(ref e) if e.code == DnCode::ContainerNotFound),
                "{r:?}"
            );
        }
        assert_eq!(
            l.store.descriptor(5).unwrap().state,
            ContainerState::Deleted
        );
        let e = l.store.write_chunk(1, block, &c, &data).unwrap_err();
        assert_eq!(e.code, DnCode::ContainerNotFound);
        assert!(!l.state.is_healthy());
    }

    #[test]
    fn store_reopens_and_marks_damaged_containers_unhealthy() {
        let d = tempfile::tempdir().unwrap();
        let block = BlockId {
            container_id: 8,
            local_id: 2,
        };
        let data = vec![9u8; 1000];
        let c = chunk(&data);
        {
            let l = setup(d.path());
            l.store.write_chunk(1, block, &c, &data).unwrap();
            let b = BlockData {
                id: block,
                chunks: vec![c.clone()],
                length: 1000,
                bcsid: 0,
            };
            assert!(matches!(
                l.apply_entry(3, &PipelineRequest::StreamWithBlock { block: b }),
                PipelineResponse::Ok { bcsid: 3, .. }
            ));
        }
        let l = setup(d.path());
        assert_eq!(l.store.descriptor(8).unwrap().bcsid, 3);
        assert_eq!(l.store.get_block(block).unwrap().length, 1000);
        drop(l);
        // Truncate the block file: the replica is UNHEALTHY after restart and not served.
        let f = d.path().join("vol/containers/8/chunks/2.block");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&f)
            .unwrap()
            .set_len(10)
            .unwrap();
        let l = setup(d.path());
        assert_eq!(
            l.store.descriptor(8).unwrap().state,
            ContainerState::Unhealthy
        );
        assert_eq!(
            l.store.read(block, 0, 0).unwrap_err().code,
            DnCode::ContainerUnhealthy
        );
    }
}
