//! Commands replicated through the OM's Raft log, and their results.
//!
//! The leader fills in everything that is not a pure function of the state (time, client
//! ids, blocks from the SCM) *before* proposing, so every member applies the same command
//! to the same rows and reaches the same answer. Refusals are responses, never errors:
//! they are the same on every member and must not stop a Raft node.

use serde::{Deserialize, Serialize};

use super::types::{
    AllocatedBlock, BlockId, Bucket, Key, KeyCopy, OpenKey, OpenKeyId, Replication, S3Condition,
    S3Meta, S3Part, S3Secret, S3Upload, UploadId, Volume,
};

/// A command of the OM state machine, replicated in the sealed envelope
/// (`rozone_raft::envelope`). **Append-only**: a new command is a new variant at the end;
/// an existing variant's fields never change (a changed command is a new variant). Every
/// variant has a golden fixture in `om/golden/requests-v1.txt` (test `golden`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OmRequest {
    CreateVolume {
        name: String,
        owner: String,
        quota_bytes: Option<u64>,
        now_ms: u64,
    },
    /// Refused while the volume has buckets.
    DeleteVolume { name: String },
    CreateBucket {
        volume: String,
        name: String,
        replication: Replication,
        versioning: bool,
        quota_bytes: Option<u64>,
        now_ms: u64,
    },
    /// Refused while the bucket has keys or open keys.
    DeleteBucket { volume: String, name: String },
    /// Records an open key with the blocks the leader got from the SCM.
    OpenKey {
        id: OpenKeyId,
        /// `None`: the bucket's replication.
        replication: Option<Replication>,
        blocks: Vec<AllocatedBlock>,
        now_ms: u64,
        expires_ms: u64,
    },
    /// Adds blocks to an open key and extends its expiry.
    AddBlocks {
        id: OpenKeyId,
        blocks: Vec<AllocatedBlock>,
        expires_ms: u64,
        /// The most blocks an open key may hold.
        max_blocks: u32,
    },
    /// Moves an open key to the key table, replacing an older version.
    CommitKey {
        id: OpenKeyId,
        /// In key order: (block, bytes written to it).
        blocks: Vec<(BlockId, u64)>,
        size: u64,
        checksum: String,
        now_ms: u64,
    },
    DeleteKey {
        volume: String,
        bucket: String,
        key: String,
    },
    RenameKey {
        volume: String,
        bucket: String,
        from: String,
        to: String,
        now_ms: u64,
    },
    /// Removes the listed open keys that are still expired at `now_ms` (an allocation may
    /// have extended one since the leader listed it); their blocks go to deletion.
    ExpireOpenKeys { ids: Vec<OpenKeyId>, now_ms: u64 },
    /// Drops deleted-block rows the SCM has taken over.
    PurgeDeletedBlocks { ids: Vec<u64> },
    /// `CommitKey` through the S3 gateway: the key's S3 metadata is kept beside it, and
    /// `condition` (when set) must hold on the current key or the commit is refused and
    /// the open key dropped (its blocks to deletion).
    S3CommitKey {
        id: OpenKeyId,
        blocks: Vec<(BlockId, u64)>,
        size: u64,
        checksum: String,
        now_ms: u64,
        meta: S3Meta,
        condition: Option<S3Condition>,
    },
    /// Stores `secret` for `access_id` unless it already has one (then the stored one is
    /// the answer): the leader draws the secret, every member keeps the first.
    S3SetSecret {
        access_id: String,
        user: String,
        secret: String,
        now_ms: u64,
    },
    /// Removes an access id; refused when it has no secret.
    S3RevokeSecret { access_id: String },
    /// Starts a multipart upload (the leader draws the upload id); refused without the
    /// bucket.
    S3CreateUpload { upload: S3Upload },
    /// Moves an open key's blocks into part `part_number` of an upload (replacing an
    /// earlier upload of that part, whose blocks go to deletion).
    S3CommitPart {
        upload: UploadId,
        part_number: u32,
        id: OpenKeyId,
        blocks: Vec<(BlockId, u64)>,
        size: u64,
        etag: String,
        now_ms: u64,
    },
    /// Completes an upload atomically: the listed parts (ascending, with their ETags)
    /// become the key, committed like an open key's blocks with the upload's metadata and
    /// `etag`; parts not listed go to deletion; the upload is gone. Parts but the last must
    /// hold at least `min_part_size` bytes.
    S3CompleteUpload {
        upload: UploadId,
        parts: Vec<(u32, String)>,
        etag: String,
        min_part_size: u64,
        now_ms: u64,
        condition: Option<S3Condition>,
    },
    /// Drops an upload and its parts' blocks.
    S3AbortUpload { upload: UploadId },
    /// `request` on behalf of `user` (a client certificate's identity, `client-7`): applied
    /// only if `user` may touch what it names (`logic::owner`: the volume's owner, or the
    /// bucket's, for key and bucket commands); a bucket it creates is recorded as the
    /// user's. Requests of admins, the S3 gateway, the OM itself and insecure clusters are
    /// not wrapped.
    AsUser {
        user: String,
        request: Box<OmRequest>,
    },
    /// A server-side copy that shares blocks: `dst_key` in `dst_bucket` becomes a key with
    /// the blocks of `src_key` (refused unless they are still `src_blocks`) and `meta`,
    /// replacing what was there as a commit does; every shared block counts one more
    /// reference (`block_refs`).
    CopyKey(KeyCopy),
    /// Records blocks the leader fetched ahead of need (its block pool) before any open
    /// takes one; they stay reserved until `expires_ms` (the pool's hand-out window plus
    /// the open-key expiry), then go to deletion unless an open key or a commit took them.
    ReserveBlocks {
        blocks: Vec<AllocatedBlock>,
        expires_ms: u64,
    },
    /// Drops the listed reservations still expired at `now_ms`; their blocks go to
    /// deletion.
    ExpireReserved { ids: Vec<BlockId>, now_ms: u64 },
    /// The commit of a key whose open wrote no log entry (a deferred open): first the open
    /// key `id` is made from the reserved `blocks` the open handed out (refused unless every
    /// one is still reserved; an open key of that id already there is used as it is), then
    /// `commit` (a `CommitKey` or `S3CommitKey` of the same id) is applied to it. A key then
    /// costs one log entry instead of two.
    DeferredCommit {
        id: OpenKeyId,
        blocks: Vec<BlockId>,
        now_ms: u64,
        expires_ms: u64,
        commit: Box<OmRequest>,
    },
}

/// A refusal: the same on every member, reported to the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    #[error("volume {volume} not found")]
    VolumeNotFound { volume: String },
    #[error("volume {volume} already exists")]
    VolumeExists { volume: String },
    #[error("volume {volume} is not empty: it has {buckets} bucket(s)")]
    VolumeNotEmpty { volume: String, buckets: u64 },
    #[error("bucket {volume}/{bucket} not found")]
    BucketNotFound { volume: String, bucket: String },
    #[error("bucket {volume}/{bucket} already exists")]
    BucketExists { volume: String, bucket: String },
    #[error("bucket {volume}/{bucket} is not empty: it has {what}")]
    BucketNotEmpty {
        volume: String,
        bucket: String,
        what: String,
    },
    #[error("key {path} not found")]
    KeyNotFound { path: String },
    #[error("key {path} already exists")]
    KeyExists { path: String },
    #[error("no open key {path} with client id {client_id} (never opened, committed or expired)")]
    OpenKeyNotFound { path: String, client_id: u64 },
    #[error("open key {path} was not opened with client id {client_id}")]
    WrongClientId { path: String, client_id: u64 },
    #[error("open key {path} with client id {client_id} already exists")]
    OpenKeyExists { path: String, client_id: u64 },
    #[error("invalid block list for {path}: {reason}")]
    InvalidBlockList { path: String, reason: String },
    #[error("quota of {what} exceeded: {used} + {adding} bytes > quota {quota}")]
    QuotaExceeded {
        what: String,
        used: u64,
        adding: u64,
        quota: u64,
    },
    #[error("too many blocks for {path}: {count} > {max}")]
    TooManyBlocks { path: String, count: u64, max: u64 },
    #[error("precondition failed for {path}: {reason}")]
    PreconditionFailed { path: String, reason: String },
    #[error("no S3 secret for access key id {access_id}")]
    S3SecretNotFound { access_id: String },
    #[error("no multipart upload {upload_id} of {path}")]
    NoSuchUpload { path: String, upload_id: String },
    #[error("invalid part list for {path}: {reason}")]
    InvalidPart { path: String, reason: String },
    #[error("part {part} of {path} has {size} bytes, less than the minimum {min} of a part that is not the last")]
    PartTooSmall {
        path: String,
        part: u32,
        size: u64,
        min: u64,
    },
    #[error("{user} may not {action}: only its owner and admins may")]
    PermissionDenied { user: String, action: String },
}

/// The outcome of an [`OmRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OmResponse {
    VolumeCreated(Volume),
    VolumeDeleted,
    BucketCreated(Bucket),
    BucketDeleted,
    KeyOpened(OpenKey),
    BlocksAdded { expires_ms: u64 },
    KeyCommitted(Key),
    KeyDeleted,
    KeyRenamed,
    OpenKeysExpired { count: u64 },
    DeletedBlocksPurged { count: u64 },
    Refused(Refusal),
    S3Secret(S3Secret),
    S3SecretRevoked,
    S3UploadCreated(S3Upload),
    S3PartCommitted(S3Part),
    S3UploadAborted,
    BlocksReserved { count: u64 },
    ReservationsExpired { count: u64 },
}

#[cfg(test)]
#[path = "request_golden.rs"]
mod golden;
