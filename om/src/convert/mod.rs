//! Conversions between the wire types (`rozone_proto`) and the OM's stored records, at the
//! edge where they are received. What comes from the network is checked: a block without
//! its id or pipeline, an unknown enum value, is refused with a message naming the field.

pub mod keys;
pub mod read;

use rozone_proto::om as pb;
use rozone_proto::scm as spb;

use crate::error::OmError;
use crate::state::types::{
    AllocatedBlock, BlockId, Bucket, Datanode, Key, KeyBlock, OpenKey, PipelineRef, Replication,
    S3Meta, Volume,
};

/// A block id from a client or the SCM (`field` names it in errors): present, with both
/// ids set (`rozone_types`' one conversion from the wire).
pub fn block_id(b: Option<spb::BlockId>, field: &str) -> Result<BlockId, OmError> {
    BlockId::from_field(b, field).map_err(|e| OmError::InvalidArgument(e.to_string()))
}

/// A block the SCM allocated: id and pipeline (with members) must be present.
impl TryFrom<spb::AllocatedBlock> for AllocatedBlock {
    type Error = OmError;
    fn try_from(b: spb::AllocatedBlock) -> Result<Self, OmError> {
        let id = block_id(b.block_id, "SCM AllocatedBlock.block_id")?;
        let p = b
            .pipeline
            .ok_or_else(|| OmError::Scm(format!("block {id} came without its pipeline")))?;
        if p.members.is_empty() {
            return Err(OmError::Scm(format!(
                "block {id} came on pipeline {} without members",
                p.id
            )));
        }
        Ok(Self {
            id,
            max_size: b.max_size,
            pipeline: PipelineRef {
                id: p.id,
                leader_id: p.leader_id,
                open: p.state == spb::PipelineState::PipelineOpen as i32,
                members: p
                    .members
                    .into_iter()
                    .map(|d| Datanode {
                        id: d.id,
                        hostname: d.hostname,
                        container_addr: d.container_addr,
                        raft_addr: d.raft_addr,
                        replication_addr: d.replication_addr,
                    })
                    .collect(),
            },
        })
    }
}

pub fn pipeline_pb(p: &PipelineRef) -> spb::Pipeline {
    spb::Pipeline {
        id: p.id,
        members: p
            .members
            .iter()
            .map(|d| spb::DatanodeDetails {
                id: d.id,
                hostname: d.hostname.clone(),
                container_addr: d.container_addr.clone(),
                raft_addr: d.raft_addr.clone(),
                replication_addr: d.replication_addr.clone(),
            })
            .collect(),
        leader_id: p.leader_id,
        state: pipeline_state(p.open) as i32,
    }
}

pub fn allocated_pb(b: &AllocatedBlock) -> spb::AllocatedBlock {
    spb::AllocatedBlock {
        block_id: Some(b.id.into()),
        pipeline: Some(pipeline_pb(&b.pipeline)),
        max_size: b.max_size,
        // Signed in the reply path (`crate::tokens`), never stored.
        block_token: Vec::new(),
    }
}

/// A requested replication; `Unspecified` is `None` (the default applies).
pub fn replication(v: i32) -> Result<Option<Replication>, OmError> {
    match pb::Replication::try_from(v) {
        Ok(pb::Replication::Unspecified) => Ok(None),
        Ok(pb::Replication::RatisOne) => Ok(Some(Replication::RatisOne)),
        Ok(pb::Replication::RatisThree) => Ok(Some(Replication::RatisThree)),
        Err(_) => Err(OmError::InvalidArgument(format!("unknown replication {v}"))),
    }
}

pub fn replication_pb(r: Replication) -> i32 {
    let p = match r {
        Replication::RatisOne => pb::Replication::RatisOne,
        Replication::RatisThree => pb::Replication::RatisThree,
    };
    p as i32
}

impl From<&Volume> for pb::VolumeInfo {
    fn from(v: &Volume) -> Self {
        Self {
            name: v.name.clone(),
            owner: v.owner.clone(),
            quota_bytes: v.quota_bytes,
            used_bytes: v.used_bytes,
            bucket_count: v.bucket_count,
            created_ms: v.created_ms,
            modified_ms: v.modified_ms,
        }
    }
}

impl From<&Bucket> for pb::BucketInfo {
    fn from(b: &Bucket) -> Self {
        Self {
            volume: b.volume.clone(),
            name: b.name.clone(),
            replication: replication_pb(b.replication),
            versioning: b.versioning,
            quota_bytes: b.quota_bytes,
            used_bytes: b.used_bytes,
            key_count: b.key_count,
            created_ms: b.created_ms,
            modified_ms: b.modified_ms,
            // Filled in by the service from the owner rows (`OmNode::bucket_owners`).
            owner: String::new(),
        }
    }
}

fn key_block_pb(b: &KeyBlock) -> pb::KeyBlock {
    pb::KeyBlock {
        block_id: Some(b.id.into()),
        length: b.length,
        offset: b.offset,
        pipeline: Some(pipeline_pb(&b.pipeline)),
        block_token: Vec::new(),
    }
}

impl From<&Key> for pb::KeyInfo {
    fn from(k: &Key) -> Self {
        Self {
            volume: k.volume.clone(),
            bucket: k.bucket.clone(),
            name: k.name.clone(),
            size: k.size,
            blocks: k.blocks.iter().map(key_block_pb).collect(),
            checksum: k.checksum.clone(),
            replication: replication_pb(k.replication),
            version: k.version,
            created_ms: k.created_ms,
            modified_ms: k.modified_ms,
            s3: None,
        }
    }
}

impl From<&S3Meta> for pb::S3Meta {
    fn from(m: &S3Meta) -> Self {
        Self {
            etag: m.etag.clone(),
            content_type: m.content_type.clone(),
            metadata: m.metadata.iter().cloned().collect(),
        }
    }
}

impl From<&OpenKey> for pb::OpenKeySession {
    fn from(o: &OpenKey) -> Self {
        Self {
            volume: o.volume.clone(),
            bucket: o.bucket.clone(),
            key: o.name.clone(),
            client_id: o.client_id,
            created_ms: o.created_ms,
            expires_ms: o.expires_ms,
        }
    }
}

fn pipeline_state(open: bool) -> spb::PipelineState {
    if open {
        spb::PipelineState::PipelineOpen
    } else {
        spb::PipelineState::PipelineClosed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_id_must_be_present_with_both_ids_set() {
        let refused = |b: Option<spb::BlockId>| match block_id(b, "blocks[0].block_id") {
            Err(OmError::InvalidArgument(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(refused(None), "blocks[0].block_id is missing");
        let zero_local = spb::BlockId {
            container_id: 4,
            local_id: 0,
        };
        assert_eq!(
            refused(Some(zero_local)),
            "blocks[0].block_id.local_id must be set (above 0)"
        );
        let id = BlockId::new(4, 5);
        assert_eq!(block_id(Some(id.into()), "b").unwrap(), id);
    }
}
