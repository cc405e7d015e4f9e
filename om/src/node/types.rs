//! What the node's key and multipart calls take and return: plain domain values, decoded
//! from the wire by [`crate::convert`] and checked by the node ([`super::checks`]), so the
//! logic never sees a protobuf type.

use crate::scm_client::Exclude;
use crate::state::types::{
    AllocatedBlock, BlockId, Key, OpenKey, OpenKeyId, Replication, S3Condition, S3Meta, UploadId,
};

/// How a read must be served (the read-consistency modes of DESIGN.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Consistency {
    /// A ready leader answers from its local state.
    #[default]
    Default,
    /// The leader answers after a read index round.
    LinearizableLeaderOnly,
    /// Any member answers after a read index from the leader and applying up to it.
    LinearizableAllowFollower,
    /// A follower answers locally within its lease.
    LocalLease,
}

impl Consistency {
    /// Its slot in `Metrics::reads` (the wire enum's value, which `/metrics` names).
    pub fn index(self) -> usize {
        match self {
            Consistency::Default => 0,
            Consistency::LinearizableLeaderOnly => 1,
            Consistency::LinearizableAllowFollower => 2,
            Consistency::LocalLease => 3,
        }
    }
}

/// A read's options as the client gave them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    pub consistency: Consistency,
    /// LOCAL_LEASE only: a lease shorter than the configured one.
    pub lease_time_ms: Option<u64>,
    /// LOCAL_LEASE only: a narrower log limit; -1 = the configured limit.
    pub log_limit: Option<i64>,
}

/// Who answered a read, and from what state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadInfo {
    pub served_by: u64,
    pub applied_index: u64,
    pub consistency: Consistency,
}

/// A key as a client sees it: the stored key and, when it has some, its S3 metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    pub key: Key,
    pub s3: Option<S3Meta>,
}

/// OpenKey: a key of `size` bytes (0: unknown) to be written.
#[derive(Clone, Debug)]
pub struct OpenArgs {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// `None`: the bucket's.
    pub replication: Option<Replication>,
    /// Containers are not excluded at open.
    pub exclude: Exclude,
    /// The writer writes at most the first block and never asks for more (it opens again
    /// instead): the OM may open the key without a log entry (a deferred open).
    pub single_block: bool,
}

/// An opened key: the client id that names the session, and its first blocks.
#[derive(Clone, Debug)]
pub struct Opened {
    pub client_id: u64,
    pub session: OpenKey,
    /// Opened without a log entry: the commit must name `session.blocks` as the blocks of
    /// a deferred open, and no block can be added.
    pub deferred: bool,
}

/// AllocateBlock: `count` more blocks for an open key.
#[derive(Clone, Debug)]
pub struct AllocateArgs {
    pub id: OpenKeyId,
    pub count: u32,
    pub exclude: Exclude,
}

/// Blocks added to an open key, and its new expiry.
#[derive(Clone, Debug)]
pub struct Allocated {
    pub blocks: Vec<AllocatedBlock>,
    pub expires_ms: u64,
}

/// CommitKey: the blocks written (id, bytes) and, from a gateway, the S3 metadata and
/// condition.
#[derive(Clone, Debug)]
pub struct CommitArgs {
    pub id: OpenKeyId,
    pub blocks: Vec<(BlockId, u64)>,
    pub size: u64,
    pub checksum: String,
    pub s3: Option<S3Meta>,
    pub condition: Option<S3Condition>,
    /// From a deferred open: the blocks it handed out, with the write token of each
    /// (empty on an insecure cluster). Empty: the key was opened with a log entry.
    pub deferred: Vec<(BlockId, Vec<u8>)>,
}

/// ListKeys.
#[derive(Clone, Debug)]
pub struct ListKeysArgs {
    pub volume: String,
    pub bucket: String,
    pub prefix: String,
    pub start_after: String,
    /// As asked (0: the default page).
    pub limit: u32,
}

/// CreateMultipartUpload.
#[derive(Clone, Debug)]
pub struct CreateUploadArgs {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub meta: S3Meta,
}

/// CommitMultipartPart: an open key's blocks become part `part_number` of `upload`.
#[derive(Clone, Debug)]
pub struct CommitPartArgs {
    pub upload: UploadId,
    pub part_number: u32,
    pub client_id: u64,
    pub blocks: Vec<(BlockId, u64)>,
    pub size: u64,
    pub etag: String,
}

/// CompleteMultipartUpload: the parts (number, etag) the key is made of.
#[derive(Clone, Debug)]
pub struct CompleteArgs {
    pub upload: UploadId,
    pub parts: Vec<(u32, String)>,
    pub etag: String,
    pub condition: Option<S3Condition>,
}

/// ListMultipartUploads: uploads of a bucket after a (key, upload id) marker.
#[derive(Clone, Debug)]
pub struct ListUploadsArgs {
    pub volume: String,
    pub bucket: String,
    pub prefix: String,
    pub key_marker: String,
    pub upload_id_marker: String,
    pub limit: u32,
}

/// A page of a listing: the rows and whether more follow.
#[derive(Clone, Debug)]
pub struct Page<T> {
    pub rows: Vec<T>,
    pub truncated: bool,
}
