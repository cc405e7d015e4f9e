//! Domain types of the datanode: chunks, blocks, container descriptors, pipeline members,
//! pipeline reports and the SCM's commands, with the limits and the block layout rule every stage checks. Wire conversion
//! is [`crate::convert`]'s; block ids and checksums are `rozone_types`' (declared once for
//! daemons and clients).
//!
//! These types are stored (container databases, `pipeline.json`) and replicated (pipeline
//! log entries): their serde shape must not change.

use rozone_types::checksum::ChecksumData;
use rozone_types::{BlockId, ContainerId, DatanodeId, PipelineId};
use serde::{Deserialize, Serialize};

use crate::error::DnError;

/// Largest chunk a single WriteChunk may carry.
pub const MAX_CHUNK: u64 = 32 << 20;

/// Largest block: no byte of a block file lies at or past this offset (a stream, a
/// WriteChunk, a PushChunk or a PullChunk beyond it is `OUT_OF_RANGE`).
pub const MAX_BLOCK: u64 = 1 << 30;

/// The end of `[offset, offset + len)`, which must lie within [`MAX_BLOCK`]; `what` names
/// the range in the error. Checked: wire values near `u64::MAX` never overflow.
pub fn block_range_end(what: &str, offset: u64, len: u64) -> Result<u64, DnError> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_BLOCK => Ok(end),
        _ => Err(DnError::new(
            rozone_types::codes::DnCode::OutOfRange,
            format!("{what}: offset {offset} + len {len} is past the {MAX_BLOCK} byte block limit"),
        )),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkInfo {
    pub offset: u64,
    pub len: u64,
    pub checksum: ChecksumData,
}

impl ChunkInfo {
    /// One past the last byte. Saturating: the edge ([`crate::convert::chunk_from`]) refuses
    /// a range that overflows, so this only guards against a panic on a stored value.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockData {
    pub id: BlockId,
    pub chunks: Vec<ChunkInfo>,
    pub length: u64,
    pub bcsid: u64,
}

/// Chunks must be contiguous from offset 0 and add up to the block's length.
pub fn check_layout(b: &BlockData) -> Result<(), DnError> {
    let mut at = 0u64;
    for (i, c) in b.chunks.iter().enumerate() {
        if c.offset != at {
            return Err(DnError::invalid(format!(
                "block {}: chunk {i} starts at {} but the previous chunk ends at {at}",
                b.id, c.offset
            )));
        }
        at = c.end();
    }
    if at != b.length {
        return Err(DnError::invalid(format!(
            "block {}: length {} but its chunks add up to {at}",
            b.id, b.length
        )));
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContainerState {
    Open,
    Closing,
    QuasiClosed,
    Closed,
    Unhealthy,
    /// A tombstone: the replica was deleted and must never come back by replay.
    Deleted,
}

/// The descriptor of one container replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptor {
    pub id: ContainerId,
    pub state: ContainerState,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub origin_pipeline: PipelineId,
    pub checksum: String,
    /// Block count and content digest of the committed blocks. Not part of the stored
    /// descriptor's encoding (its shape must not change): stored beside it, in the same
    /// write batch, as its own versioned record.
    #[serde(skip)]
    pub digest: ContentDigest,
}

impl Descriptor {
    pub fn new_open(id: ContainerId, pipeline: PipelineId) -> Self {
        Self {
            id,
            state: ContainerState::Open,
            bcsid: 0,
            block_count: 0,
            used_bytes: 0,
            origin_pipeline: pipeline,
            checksum: String::new(),
            digest: ContentDigest::default(),
        }
    }
}

/// Block count and content digest of one replica's committed blocks (the rule and the stored
/// record are [`crate::store::digest`]'s).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContentDigest {
    pub block_count: u64,
    pub sum: u64,
}

/// A member of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub id: DatanodeId,
    pub raft_addr: String,
    pub container_addr: String,
}

/// What this datanode tells the SCM about one pipeline it is a member of, in every
/// heartbeat (not stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineReport {
    pub pipeline_id: PipelineId,
    /// This member leads the pipeline's Raft group.
    pub is_leader: bool,
    pub term: u64,
    /// No apply failure has made the pipeline unusable here.
    pub healthy: bool,
}

/// A command from the SCM (in a heartbeat reply), decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScmCommand {
    pub id: u64,
    /// The SCM leader's term: commands of an older term than one seen are ignored.
    pub term: u64,
    /// `None`: the command came without a body (reported as failed).
    pub command: Option<Command>,
}

/// What the SCM asks a datanode to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    CreatePipeline {
        pipeline: PipelineId,
        members: Vec<Member>,
    },
    ClosePipeline {
        pipeline: PipelineId,
    },
    /// Close through the pipeline; `force` quasi-closes a replica without its pipeline.
    CloseContainer {
        container: ContainerId,
        pipeline: PipelineId,
        force: bool,
    },
    DeleteContainer {
        container: ContainerId,
        force: bool,
    },
    /// Pull the container from one of `sources` (replication addresses).
    ReplicateContainer {
        container: ContainerId,
        sources: Vec<String>,
    },
    /// Delete blocks: (container, local ids) per transaction.
    DeleteBlocks {
        txns: Vec<(ContainerId, Vec<u64>)>,
    },
}

/// How a command ended, told to the SCM in the next heartbeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandStatus {
    pub command_id: u64,
    /// `None`: executed; else why it failed.
    pub failure: Option<String>,
}
