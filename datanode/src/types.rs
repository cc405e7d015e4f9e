//! Domain types of the datanode and their conversion from/to the wire types. Conversion
//! from the wire rejects missing or malformed fields, naming them.

use rozone_proto::datanode as pb;
use serde::{Deserialize, Serialize};

use crate::checksum::{ChecksumData, ChecksumType};
use crate::error::DnError;

/// Largest chunk a single WriteChunk may carry.
pub const MAX_CHUNK: u64 = 32 << 20;

/// Largest block a stream may carry.
pub const MAX_BLOCK: u64 = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlockId {
    pub container_id: u64,
    pub local_id: u64,
}

impl std::fmt::Display for BlockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.container_id, self.local_id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkInfo {
    pub offset: u64,
    pub len: u64,
    pub checksum: ChecksumData,
}

impl ChunkInfo {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockData {
    pub id: BlockId,
    pub chunks: Vec<ChunkInfo>,
    pub length: u64,
    pub bcsid: u64,
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
    pub id: u64,
    pub state: ContainerState,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub origin_pipeline: u64,
    pub checksum: String,
}

impl Descriptor {
    pub fn new_open(id: u64, pipeline: u64) -> Self {
        Self {
            id,
            state: ContainerState::Open,
            bcsid: 0,
            block_count: 0,
            used_bytes: 0,
            origin_pipeline: pipeline,
            checksum: String::new(),
        }
    }
}

fn kind_from(t: i32) -> Result<ChecksumType, DnError> {
    match pb::ChecksumType::try_from(t) {
        Ok(pb::ChecksumType::None) => Ok(ChecksumType::None),
        Ok(pb::ChecksumType::Crc32) => Ok(ChecksumType::Crc32),
        Ok(pb::ChecksumType::Crc32c) => Ok(ChecksumType::Crc32c),
        _ => Err(DnError::invalid(format!(
            "checksum type {t} is not NONE, CRC32 or CRC32C"
        ))),
    }
}

pub fn kind_to(k: ChecksumType) -> i32 {
    match k {
        ChecksumType::None => pb::ChecksumType::None as i32,
        ChecksumType::Crc32 => pb::ChecksumType::Crc32 as i32,
        ChecksumType::Crc32c => pb::ChecksumType::Crc32c as i32,
    }
}

/// Parses a checksum scheme (type + window) of a stream header.
pub fn scheme_from(t: i32, bpc: u32) -> Result<(ChecksumType, u32), DnError> {
    Ok((kind_from(t)?, bpc))
}

impl TryFrom<pb::ChecksumData> for ChecksumData {
    type Error = DnError;
    fn try_from(c: pb::ChecksumData) -> Result<Self, DnError> {
        Ok(Self {
            kind: kind_from(c.r#type)?,
            bytes_per_checksum: c.bytes_per_checksum,
            values: c.checksums,
        })
    }
}

impl From<&ChecksumData> for pb::ChecksumData {
    fn from(c: &ChecksumData) -> Self {
        Self {
            r#type: kind_to(c.kind),
            bytes_per_checksum: c.bytes_per_checksum,
            checksums: c.values.clone(),
        }
    }
}

/// A block id from the wire: both ids must be set (SCM never hands out 0).
pub fn block_id_from(b: Option<pb::BlockId>, field: &str) -> Result<BlockId, DnError> {
    let b = b.ok_or_else(|| DnError::invalid(format!("{field} is missing")))?;
    if b.container_id == 0 {
        return Err(DnError::invalid(format!(
            "{field}.container_id must be set"
        )));
    }
    if b.local_id == 0 {
        return Err(DnError::invalid(format!("{field}.local_id must be set")));
    }
    Ok(BlockId {
        container_id: b.container_id,
        local_id: b.local_id,
    })
}

impl From<BlockId> for pb::BlockId {
    fn from(b: BlockId) -> Self {
        Self {
            container_id: b.container_id,
            local_id: b.local_id,
        }
    }
}

/// A chunk from the wire: a non-empty range within limits, with a checksum per window.
pub fn chunk_from(c: Option<pb::ChunkInfo>, field: &str) -> Result<ChunkInfo, DnError> {
    let c = c.ok_or_else(|| DnError::invalid(format!("{field} is missing")))?;
    let checksum: ChecksumData = c
        .checksum
        .ok_or_else(|| DnError::invalid(format!("{field}.checksum is missing")))?
        .try_into()?;
    if c.len == 0 {
        return Err(DnError::invalid(format!("{field}.len must be above 0")));
    }
    if c.len > MAX_CHUNK {
        return Err(DnError::invalid(format!(
            "{field}.len {} is above the {} byte chunk limit",
            c.len, MAX_CHUNK
        )));
    }
    if c.offset.checked_add(c.len).is_none() {
        return Err(DnError::new(
            crate::error::Code::OutOfRange,
            format!("{field}: offset + len overflows"),
        ));
    }
    if checksum.values.len() != checksum.expected_count(c.len) {
        return Err(DnError::invalid(format!(
            "{field}.checksum has {} values, {} bytes need {}",
            checksum.values.len(),
            c.len,
            checksum.expected_count(c.len)
        )));
    }
    Ok(ChunkInfo {
        offset: c.offset,
        len: c.len,
        checksum,
    })
}

impl From<&ChunkInfo> for pb::ChunkInfo {
    fn from(c: &ChunkInfo) -> Self {
        Self {
            offset: c.offset,
            len: c.len,
            checksum: Some((&c.checksum).into()),
        }
    }
}

/// A block from the wire (PutBlock): chunks contiguous from 0 whose lengths sum to
/// `length`.
pub fn block_from(b: Option<pb::BlockData>, field: &str) -> Result<BlockData, DnError> {
    let b = b.ok_or_else(|| DnError::invalid(format!("{field} is missing")))?;
    let id = block_id_from(b.block_id, &format!("{field}.block_id"))?;
    let mut chunks = Vec::with_capacity(b.chunks.len());
    for (i, c) in b.chunks.into_iter().enumerate() {
        chunks.push(chunk_from(Some(c), &format!("{field}.chunks[{i}]"))?);
    }
    let block = BlockData {
        id,
        chunks,
        length: b.length,
        bcsid: 0,
    };
    check_layout(&block)?;
    Ok(block)
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

impl From<&BlockData> for pb::BlockData {
    fn from(b: &BlockData) -> Self {
        Self {
            block_id: Some(b.id.into()),
            chunks: b.chunks.iter().map(Into::into).collect(),
            length: b.length,
            bcsid: b.bcsid,
        }
    }
}

pub fn state_to(s: ContainerState) -> pb::ContainerState {
    match s {
        ContainerState::Open => pb::ContainerState::Open,
        ContainerState::Closing => pb::ContainerState::Closing,
        ContainerState::QuasiClosed => pb::ContainerState::QuasiClosed,
        ContainerState::Closed => pb::ContainerState::Closed,
        ContainerState::Unhealthy => pb::ContainerState::Unhealthy,
        ContainerState::Deleted => pb::ContainerState::Deleted,
    }
}

pub fn state_from(s: i32) -> Result<ContainerState, DnError> {
    Ok(match pb::ContainerState::try_from(s) {
        Ok(pb::ContainerState::Open) => ContainerState::Open,
        Ok(pb::ContainerState::Closing) => ContainerState::Closing,
        Ok(pb::ContainerState::QuasiClosed) => ContainerState::QuasiClosed,
        Ok(pb::ContainerState::Closed) => ContainerState::Closed,
        Ok(pb::ContainerState::Unhealthy) => ContainerState::Unhealthy,
        Ok(pb::ContainerState::Deleted) => ContainerState::Deleted,
        _ => return Err(DnError::invalid(format!("container state {s} is unknown"))),
    })
}

impl Descriptor {
    pub fn to_proto(&self, data_dir: &str) -> pb::ContainerDescriptor {
        pb::ContainerDescriptor {
            container_id: self.id,
            state: state_to(self.state) as i32,
            bcsid: self.bcsid,
            block_count: self.block_count,
            used_bytes: self.used_bytes,
            origin_pipeline_id: self.origin_pipeline,
            checksum: self.checksum.clone(),
            data_dir: data_dir.to_string(),
        }
    }

    pub fn from_proto(d: pb::ContainerDescriptor) -> Result<Self, DnError> {
        if d.container_id == 0 {
            return Err(DnError::invalid("descriptor.container_id must be set"));
        }
        Ok(Self {
            id: d.container_id,
            state: state_from(d.state)?,
            bcsid: d.bcsid,
            block_count: d.block_count,
            used_bytes: d.used_bytes,
            origin_pipeline: d.origin_pipeline_id,
            checksum: d.checksum,
        })
    }

    pub fn to_replica(&self) -> rozone_proto::scm::ContainerReplica {
        use rozone_proto::scm::ReplicaState as R;
        let state = match self.state {
            ContainerState::Open => R::ReplicaOpen,
            ContainerState::Closing => R::ReplicaClosing,
            ContainerState::QuasiClosed => R::ReplicaQuasiClosed,
            ContainerState::Closed => R::ReplicaClosed,
            ContainerState::Unhealthy => R::ReplicaUnhealthy,
            ContainerState::Deleted => R::ReplicaDeleted,
        };
        rozone_proto::scm::ContainerReplica {
            container_id: self.id,
            state: state as i32,
            bcsid: self.bcsid,
            block_count: self.block_count,
            used_bytes: self.used_bytes,
            origin_pipeline_id: self.origin_pipeline,
            checksum: self.checksum.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pchunk(offset: u64, len: u64) -> pb::ChunkInfo {
        let data = vec![0u8; len as usize];
        pb::ChunkInfo {
            offset,
            len,
            checksum: Some((&ChecksumData::compute(ChecksumType::Crc32c, 1024, &data)).into()),
        }
    }

    #[test]
    fn missing_fields_are_named() {
        let e = block_id_from(None, "block_id").unwrap_err();
        assert_eq!(e.message, "block_id is missing");
        let e = block_id_from(
            Some(pb::BlockId {
                container_id: 1,
                local_id: 0,
            }),
            "b",
        )
        .unwrap_err();
        assert!(e.message.contains("b.local_id"));
        let mut c = pchunk(0, 10);
        c.checksum = None;
        assert!(chunk_from(Some(c), "chunk")
            .unwrap_err()
            .message
            .contains("chunk.checksum is missing"));
        let mut c = pchunk(0, 5000);
        c.checksum.as_mut().unwrap().checksums.pop();
        assert!(chunk_from(Some(c), "chunk").is_err());
        let mut c = pchunk(0, 10);
        c.checksum.as_mut().unwrap().r#type = 0;
        assert!(chunk_from(Some(c), "chunk").is_err());
    }

    #[test]
    fn block_layout_must_be_contiguous() {
        let mk = |chunks: Vec<pb::ChunkInfo>, length| pb::BlockData {
            block_id: Some(pb::BlockId {
                container_id: 1,
                local_id: 2,
            }),
            chunks,
            length,
            bcsid: 0,
        };
        assert!(block_from(Some(mk(vec![pchunk(0, 10), pchunk(10, 5)], 15)), "block").is_ok());
        assert!(block_from(Some(mk(vec![pchunk(0, 10), pchunk(11, 5)], 16)), "block").is_err());
        assert!(block_from(Some(mk(vec![pchunk(0, 10)], 11)), "block").is_err());
    }
}
