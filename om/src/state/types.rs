//! The OM's stored records: volumes, buckets, keys, open keys and the blocks they name.
//! Plain serde types (postcard in RocksDB); the wire types live in `rozone_proto::om` and
//! are converted at the service edge.

use serde::{Deserialize, Serialize};

/// Ids are the cluster's own (`rozone-types`), stored as they are: `BlockId` encodes as
/// the (container id, local id) pair it always did.
pub use rozone_types::{BlockId, DatanodeId, PipelineId};

/// Replication of a bucket's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replication {
    RatisOne,
    RatisThree,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub name: String,
    pub owner: String,
    pub quota_bytes: Option<u64>,
    /// Bytes of committed keys in all of the volume's buckets.
    pub used_bytes: u64,
    pub bucket_count: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub volume: String,
    pub name: String,
    pub replication: Replication,
    pub versioning: bool,
    pub quota_bytes: Option<u64>,
    pub used_bytes: u64,
    pub key_count: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
}

/// A datanode as the SCM described it when it allocated a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Datanode {
    pub id: DatanodeId,
    pub hostname: String,
    pub container_addr: String,
    pub raft_addr: String,
    pub replication_addr: String,
}

/// The pipeline a block was allocated on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineRef {
    pub id: PipelineId,
    pub members: Vec<Datanode>,
    pub leader_id: Option<DatanodeId>,
    pub open: bool,
}

/// A block the SCM allocated to an open key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedBlock {
    pub id: BlockId,
    pub pipeline: PipelineRef,
    pub max_size: u64,
}

/// A block the leader fetched ahead from the SCM, recorded before any open may take it,
/// so a block handed out by an open without a log entry of its own (a deferred open) is
/// never lost track of: an open key or a commit takes the row; past `expires_ms` the block
/// goes to deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservedBlock {
    pub block: AllocatedBlock,
    pub expires_ms: u64,
}

/// One block of a committed key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyBlock {
    pub id: BlockId,
    pub length: u64,
    /// Offset of the block's first byte in the key.
    pub offset: u64,
    pub pipeline: PipelineRef,
}

/// An older version of a key, kept when its bucket has versioning on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyVersion {
    pub version: u64,
    pub size: u64,
    pub blocks: Vec<KeyBlock>,
    pub checksum: String,
    pub modified_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    pub volume: String,
    pub bucket: String,
    pub name: String,
    pub size: u64,
    pub blocks: Vec<KeyBlock>,
    pub checksum: String,
    pub replication: Replication,
    pub version: u64,
    pub created_ms: u64,
    pub modified_ms: u64,
    /// Versions this one replaced (versioned buckets only), oldest first.
    pub old_versions: Vec<KeyVersion>,
}

impl Key {
    /// Bytes this key holds in its bucket, older versions included (what quotas count).
    pub fn stored_bytes(&self) -> u64 {
        self.size + self.old_versions.iter().map(|v| v.size).sum::<u64>()
    }
}

/// A key being written: created by open, extended by allocate, removed by commit or expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenKey {
    pub volume: String,
    pub bucket: String,
    pub name: String,
    pub client_id: u64,
    pub replication: Replication,
    pub blocks: Vec<AllocatedBlock>,
    pub created_ms: u64,
    pub expires_ms: u64,
}

impl OpenKey {
    /// The open key `id` with `blocks`, open from `created_ms` until `expires_ms`.
    pub fn new(
        id: &OpenKeyId,
        replication: Replication,
        blocks: Vec<AllocatedBlock>,
        created_ms: u64,
        expires_ms: u64,
    ) -> Self {
        Self {
            volume: id.volume.clone(),
            bucket: id.bucket.clone(),
            name: id.key.clone(),
            client_id: id.client_id,
            replication,
            blocks,
            created_ms,
            expires_ms,
        }
    }
}

/// Names one open key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenKeyId {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub client_id: u64,
}

/// Blocks no key refers to any more, waiting to be handed to the SCM for deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedBlocks {
    pub blocks: Vec<BlockId>,
    /// Why (for logs): "delete vol/bucket/key", "expired open key ...".
    pub reason: String,
}

/// What S3 keeps beside a key committed through the gateway (row of `CF_S3_META`, named
/// like the key): kept apart from [`Key`] so the key rows keep their stored layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Meta {
    /// Without quotes: MD5 hex (single part) or `md5-of-part-md5s-N` (multipart).
    pub etag: String,
    pub content_type: String,
    /// User metadata (`x-amz-meta-*`), names lower-case without the prefix, sorted.
    pub metadata: Vec<(String, String)>,
}

/// A compare-and-set at commit (S3 conditional writes), decided in the state machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum S3Condition {
    /// `If-None-Match: *`: only if no key has the name.
    IfNoneMatchAny,
    /// `If-Match: <etag>`: only if the key exists with this ETag.
    IfMatch(String),
}

/// An S3 access key id and its secret (row of `CF_S3_SECRETS`, by access id).
///
/// The secret is stored as it is: SigV4 verification needs the secret itself (every
/// signature is an HMAC keyed by it), so a hash could not verify anything. The OM's DB
/// and its snapshots are therefore secret material (docs/security.md, "S3 credentials").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Secret {
    pub access_id: String,
    pub user: String,
    pub secret: String,
    pub created_ms: u64,
}

/// A multipart upload in progress (row of `CF_S3_UPLOADS`): what the completed key will
/// carry besides its parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Upload {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub upload_id: String,
    pub created_ms: u64,
    pub content_type: String,
    pub metadata: Vec<(String, String)>,
}

/// One uploaded part (row of `CF_S3_PARTS`): its blocks as allocated (so completing the
/// upload can commit them like an open key's) with the bytes written to each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct S3Part {
    pub part_number: u32,
    /// MD5 hex of the part's bytes.
    pub etag: String,
    pub size: u64,
    pub blocks: Vec<(AllocatedBlock, u64)>,
    pub modified_ms: u64,
}

/// Names one multipart upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadId {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub upload_id: String,
}

/// A server-side copy within one volume (`OmRequest::CopyKey`): `dst_key` in `dst_bucket`
/// gets the blocks of `src_key` in `src_bucket`, which must still be `src_blocks`, and
/// `meta` as its S3 metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCopy {
    pub volume: String,
    pub src_bucket: String,
    pub src_key: String,
    pub dst_bucket: String,
    pub dst_key: String,
    pub src_blocks: Vec<BlockId>,
    pub meta: S3Meta,
    pub now_ms: u64,
}
