//! Domain types of what the services return, converted from the wire types at the edge with
//! `TryFrom` (a missing required sub-message is an error, not a default). They are also the
//! CLI's `--json` output, so their field names are part of the CLI's stable interface.

use rozone_proto::{om as pb_om, scm as pb_scm};
use serde::Serialize;

use crate::error::{ClientError, Result};

pub use rozone_types::BlockId;

/// A datanode's identity and addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Datanode {
    pub id: u64,
    pub hostname: String,
    pub container_addr: String,
    pub raft_addr: String,
    pub replication_addr: String,
}

impl From<pb_scm::DatanodeDetails> for Datanode {
    fn from(d: pb_scm::DatanodeDetails) -> Self {
        Self {
            id: d.id,
            hostname: d.hostname,
            container_addr: d.container_addr,
            raft_addr: d.raft_addr,
            replication_addr: d.replication_addr,
        }
    }
}

/// A pipeline: the datanodes a block is replicated on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pipeline {
    pub id: u64,
    pub members: Vec<Datanode>,
    pub leader_id: Option<u64>,
    pub state: String,
}

impl Pipeline {
    /// Members with the leader (when known) first: where writes should go.
    pub fn leader_first(&self) -> Vec<&Datanode> {
        let mut m: Vec<&Datanode> = self.members.iter().collect();
        if let Some(l) = self.leader_id {
            m.sort_by_key(|d| d.id != l);
        }
        m
    }
}

/// "PIPELINE_OPEN" → "OPEN": enum names without their prefix, for people and JSON.
pub fn short_enum(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix).unwrap_or(name).to_string()
}

impl From<pb_scm::Pipeline> for Pipeline {
    fn from(p: pb_scm::Pipeline) -> Self {
        let state = short_enum(p.state().as_str_name(), "PIPELINE_");
        Self {
            id: p.id,
            members: p.members.into_iter().map(Datanode::from).collect(),
            leader_id: p.leader_id,
            state,
        }
    }
}

/// A block the OM/SCM allocated for writing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocatedBlock {
    pub block_id: BlockId,
    pub pipeline: Pipeline,
    pub max_size: u64,
    /// The OM's read+write block token, sent with every call on the block (empty on an
    /// insecure cluster). Never printed.
    #[serde(skip)]
    pub token: Vec<u8>,
}

impl TryFrom<pb_scm::AllocatedBlock> for AllocatedBlock {
    type Error = ClientError;
    fn try_from(b: pb_scm::AllocatedBlock) -> Result<Self> {
        let block_id = BlockId::from_field(b.block_id, "allocated block's block_id")
            .map_err(|e| ClientError::bad_reply("OM", e.to_string()))?;
        let pipeline = b
            .pipeline
            .ok_or_else(|| ClientError::bad_reply("OM", "allocated block without pipeline"))?;
        if pipeline.members.is_empty() {
            return Err(ClientError::bad_reply(
                "OM",
                "allocated block on an empty pipeline",
            ));
        }
        if b.max_size == 0 {
            return Err(ClientError::bad_reply(
                "OM",
                "allocated block with max_size 0",
            ));
        }
        Ok(Self {
            block_id,
            pipeline: pipeline.into(),
            max_size: b.max_size,
            token: b.block_token,
        })
    }
}

/// A volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Volume {
    pub name: String,
    pub owner: String,
    pub quota_bytes: Option<u64>,
    pub used_bytes: u64,
    pub bucket_count: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
}

impl From<pb_om::VolumeInfo> for Volume {
    fn from(v: pb_om::VolumeInfo) -> Self {
        Self {
            name: v.name,
            owner: v.owner,
            quota_bytes: v.quota_bytes,
            used_bytes: v.used_bytes,
            bucket_count: v.bucket_count,
            created_ms: v.created_ms,
            modified_ms: v.modified_ms,
        }
    }
}

/// A bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bucket {
    pub volume: String,
    pub name: String,
    pub replication: String,
    pub versioning: bool,
    pub quota_bytes: Option<u64>,
    pub used_bytes: u64,
    pub key_count: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
    /// The user who created it, or its volume's owner.
    pub owner: String,
}

impl From<pb_om::BucketInfo> for Bucket {
    fn from(b: pb_om::BucketInfo) -> Self {
        let replication = b.replication().as_str_name().to_string();
        Self {
            volume: b.volume,
            name: b.name,
            replication,
            versioning: b.versioning,
            quota_bytes: b.quota_bytes,
            used_bytes: b.used_bytes,
            key_count: b.key_count,
            created_ms: b.created_ms,
            modified_ms: b.modified_ms,
            owner: b.owner,
        }
    }
}

/// One block of a committed key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyBlock {
    pub block_id: BlockId,
    pub offset: u64,
    pub length: u64,
    pub pipeline: Pipeline,
    /// The OM's read token for the block, sent with every read (empty on an insecure
    /// cluster). Never printed.
    #[serde(skip)]
    pub token: Vec<u8>,
}

/// A committed key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Key {
    pub volume: String,
    pub bucket: String,
    pub name: String,
    pub size: u64,
    pub checksum: String,
    pub replication: String,
    pub version: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
    pub blocks: Vec<KeyBlock>,
    /// What the S3 gateway kept with the key (absent for keys written otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Meta>,
}

/// A key's S3 metadata: ETag (without quotes), Content-Type, user metadata (sorted).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct S3Meta {
    pub etag: String,
    pub content_type: String,
    pub metadata: Vec<(String, String)>,
}

impl From<pb_om::S3Meta> for S3Meta {
    fn from(m: pb_om::S3Meta) -> Self {
        let mut metadata: Vec<(String, String)> = m.metadata.into_iter().collect();
        metadata.sort();
        Self {
            etag: m.etag,
            content_type: m.content_type,
            metadata,
        }
    }
}

impl From<&S3Meta> for pb_om::S3Meta {
    fn from(m: &S3Meta) -> Self {
        Self {
            etag: m.etag.clone(),
            content_type: m.content_type.clone(),
            metadata: m.metadata.iter().cloned().collect(),
        }
    }
}

impl TryFrom<pb_om::KeyInfo> for Key {
    type Error = ClientError;
    fn try_from(k: pb_om::KeyInfo) -> Result<Self> {
        let replication = k.replication().as_str_name().to_string();
        let mut blocks = Vec::with_capacity(k.blocks.len());
        let mut next = 0u64;
        for b in k.blocks {
            let block_id = BlockId::from_field(b.block_id, "block_id").map_err(|e| {
                ClientError::bad_reply("OM", format!("key {} has a bad block: {e}", k.name))
            })?;
            let pipeline = b.pipeline.ok_or_else(|| {
                ClientError::bad_reply(
                    "OM",
                    format!("key {} block {block_id} has no pipeline", k.name),
                )
            })?;
            if b.offset != next {
                return Err(ClientError::bad_reply(
                    "OM",
                    format!(
                        "key {} block {block_id} starts at {} not {next}",
                        k.name, b.offset
                    ),
                ));
            }
            next += b.length;
            blocks.push(KeyBlock {
                block_id,
                offset: b.offset,
                length: b.length,
                pipeline: pipeline.into(),
                token: b.block_token,
            });
        }
        if next != k.size {
            return Err(ClientError::bad_reply(
                "OM",
                format!(
                    "key {} blocks hold {next} bytes, size says {}",
                    k.name, k.size
                ),
            ));
        }
        Ok(Self {
            volume: k.volume,
            bucket: k.bucket,
            name: k.name,
            size: k.size,
            checksum: k.checksum,
            replication,
            version: k.version,
            created_ms: k.created_ms,
            modified_ms: k.modified_ms,
            blocks,
            s3: k.s3.map(Into::into),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(offset: u64, length: u64, pipeline: bool) -> pb_om::KeyBlock {
        pb_om::KeyBlock {
            block_id: Some(pb_scm::BlockId {
                container_id: 1,
                local_id: offset + 1,
            }),
            length,
            offset,
            pipeline: pipeline.then(pb_scm::Pipeline::default),
            block_token: Vec::new(),
        }
    }

    #[test]
    fn key_blocks_must_be_contiguous_and_add_up() {
        let mut k = pb_om::KeyInfo {
            name: "k".into(),
            size: 10,
            blocks: vec![block(0, 4, true), block(4, 6, true)],
            ..Default::default()
        };
        assert_eq!(Key::try_from(k.clone()).unwrap().blocks.len(), 2);
        k.size = 11;
        assert!(Key::try_from(k.clone())
            .unwrap_err()
            .to_string()
            .contains("size says 11"));
        k.size = 10;
        k.blocks[1].offset = 5;
        assert!(Key::try_from(k.clone()).is_err());
        k.blocks[1] = block(4, 6, false);
        assert!(Key::try_from(k)
            .unwrap_err()
            .to_string()
            .contains("no pipeline"));
    }

    #[test]
    fn allocated_block_needs_id_and_pipeline() {
        let b = pb_scm::AllocatedBlock {
            block_id: None,
            pipeline: None,
            max_size: 1,
            block_token: Vec::new(),
        };
        assert!(AllocatedBlock::try_from(b).is_err());
    }

    #[test]
    fn leader_first_orders_members() {
        let dn = |id| Datanode {
            id,
            hostname: String::new(),
            container_addr: String::new(),
            raft_addr: String::new(),
            replication_addr: String::new(),
        };
        let p = Pipeline {
            id: 1,
            members: vec![dn(1), dn(2), dn(3)],
            leader_id: Some(3),
            state: "OPEN".into(),
        };
        let ids: Vec<u64> = p.leader_first().iter().map(|d| d.id).collect();
        assert_eq!(ids, [3, 1, 2]);
    }
}
