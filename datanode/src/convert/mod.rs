//! Conversions between the wire types (`rozone_proto`) and the datanode's domain types
//! ([`crate::types`]), at the edge where they are received. What comes from the network is
//! checked: a missing or malformed field is refused (`INVALID_ARGUMENT`) naming it, a range
//! that overflows is `OUT_OF_RANGE`. Block ids and checksums convert through
//! `rozone_types`, whose field errors ([`Invalid`]) become [`DnError`]s here.

pub mod scm;

use rozone_proto::datanode as pb;
use rozone_proto::scm as spb;
use rozone_types::checksum::{ChecksumData, ChecksumType};
use rozone_types::{BlockId, Invalid};

use crate::error::DnError;
use crate::store::digest::{ContentDigest, DIGEST_VERSION};
use crate::store::read::Segment;
use crate::types::{
    block_range_end, check_layout, BlockData, ChunkInfo, ContainerState, Descriptor, MAX_CHUNK,
};

/// A checksum scheme (type + window) of a stream header; `field` names the type field.
pub fn scheme_from(t: i32, bpc: u32, field: &str) -> Result<(ChecksumType, u32), DnError> {
    let kind = ChecksumType::from_wire(t).map_err(|e| Invalid::new(field, e.problem))?;
    Ok((kind, bpc))
}

/// A required checksum field.
pub fn checksum_from(c: Option<pb::ChecksumData>, field: &str) -> Result<ChecksumData, DnError> {
    let c = c.ok_or_else(|| Invalid::missing(field))?;
    ChecksumData::try_from(c).map_err(|e| e.within(field).into())
}

/// A chunk from the wire: a non-empty range within limits, with a checksum per window.
pub fn chunk_from(c: Option<pb::ChunkInfo>, field: &str) -> Result<ChunkInfo, DnError> {
    let c = c.ok_or_else(|| Invalid::missing(field))?;
    let checksum = checksum_from(c.checksum, &format!("{field}.checksum"))?;
    if c.len == 0 {
        return Err(DnError::invalid(format!("{field}.len must be above 0")));
    }
    if c.len > MAX_CHUNK {
        return Err(DnError::invalid(format!(
            "{field}.len {} is above the {} byte chunk limit",
            c.len, MAX_CHUNK
        )));
    }
    block_range_end(field, c.offset, c.len)?;
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
/// `length`. Its BCSID is the datanode's to set, so the wire's is ignored.
pub fn block_from(b: Option<pb::BlockData>, field: &str) -> Result<BlockData, DnError> {
    let b = b.ok_or_else(|| Invalid::missing(field))?;
    let id = BlockId::from_field(b.block_id, &format!("{field}.block_id"))?;
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

impl From<Segment> for pb::ReadSegment {
    fn from(s: Segment) -> Self {
        Self {
            offset: s.offset,
            checksum: Some((&s.checksum).into()),
            data: s.data.into(),
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
            content_digest: self.digest.sum,
            digest_version: DIGEST_VERSION.into(),
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
            // Recomputed from the blocks by whoever installs the replica.
            digest: ContentDigest::default(),
        })
    }

    /// The replica as the SCM's container reports carry it.
    pub fn to_replica(&self) -> spb::ContainerReplica {
        use spb::ReplicaState as R;
        let state = match self.state {
            ContainerState::Open => R::ReplicaOpen,
            ContainerState::Closing => R::ReplicaClosing,
            ContainerState::QuasiClosed => R::ReplicaQuasiClosed,
            ContainerState::Closed => R::ReplicaClosed,
            ContainerState::Unhealthy => R::ReplicaUnhealthy,
            ContainerState::Deleted => R::ReplicaDeleted,
        };
        spb::ContainerReplica {
            container_id: self.id,
            state: state as i32,
            bcsid: self.bcsid,
            block_count: self.block_count,
            used_bytes: self.used_bytes,
            origin_pipeline_id: self.origin_pipeline,
            checksum: self.checksum.clone(),
            content_digest: self.digest.sum,
            digest_version: DIGEST_VERSION.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use rozone_types::codes::DnCode;

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
        let e = DnError::from(BlockId::from_field(None::<pb::BlockId>, "block_id").unwrap_err());
        assert_eq!(e.message, "block_id is missing");
        assert_eq!(e.code, DnCode::InvalidArgument);
        let e = DnError::from(
            BlockId::from_field(
                Some(pb::BlockId {
                    container_id: 1,
                    local_id: 0,
                }),
                "b",
            )
            .unwrap_err(),
        );
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
