//! The OM's replicated state: volumes, buckets, keys, open keys and blocks waiting for
//! deletion, applied from the Raft log by [`OmLogic`] and read back by [`read`].
//!
//! Values are postcard (`rozone_raft::codec`); the applied log id lives in the Raft base's
//! meta column family and is written in the same `WriteBatch` as each batch's effects.
//! Row keys are built so a bucket's keys (or a volume's buckets) are one prefix:
//! volume and bucket names cannot contain `/` (S3 rules), key names cannot contain NUL.
//!
//! Must not depend on the OM's services: it is the layer they build on.

pub mod logic;
pub mod owner;
pub mod read;
pub mod request;
pub mod types;

pub use logic::OmLogic;
pub use request::{OmRequest, OmResponse, Refusal};

/// Volumes: name → [`types::Volume`].
pub const CF_VOLUMES: &str = "volumes";
/// Buckets: `volume/bucket` → [`types::Bucket`].
pub const CF_BUCKETS: &str = "buckets";
/// Committed keys: `volume/bucket/key` → [`types::Key`].
pub const CF_KEYS: &str = "keys";
/// Open keys: `volume/bucket/key` NUL client id (big-endian) → [`types::OpenKey`].
pub const CF_OPEN_KEYS: &str = "open_keys";
/// Blocks to delete: log index (big-endian) → [`types::DeletedBlocks`].
pub const CF_DELETED_BLOCKS: &str = "deleted_blocks";

/// S3 metadata of keys committed by the gateway: `volume/bucket/key` → [`types::S3Meta`].
pub const CF_S3_META: &str = "s3_meta";
/// S3 credentials: access key id → [`types::S3Secret`].
pub const CF_S3_SECRETS: &str = "s3_secrets";

/// Multipart uploads: `volume/bucket/key` NUL upload id → [`types::S3Upload`].
pub const CF_S3_UPLOADS: &str = "s3_uploads";
/// Their parts: the upload's row key, NUL, part number (big-endian) → [`types::S3Part`].
pub const CF_S3_PARTS: &str = "s3_parts";

/// Owners of buckets a client certificate's user created: `volume/bucket` → user (a
/// postcard string). A bucket without a row is its volume owner's (and admins').
pub const CF_BUCKET_OWNERS: &str = "bucket_owners";

/// Blocks shared by more than one key (server-side copies): block id (container id, local
/// id, big-endian) → how many keys beyond the first use it (a postcard u64). A block
/// without a row has one key.
pub const CF_BLOCK_REFS: &str = "block_refs";

/// Blocks fetched ahead and not yet taken by an open key or a commit: block id (container
/// id, local id, big-endian) → [`types::ReservedBlock`].
pub const CF_RESERVED_BLOCKS: &str = "reserved_blocks";

/// Every column family of the OM state.
pub const COLUMN_FAMILIES: [&str; 12] = [
    CF_VOLUMES,
    CF_BUCKETS,
    CF_KEYS,
    CF_OPEN_KEYS,
    CF_DELETED_BLOCKS,
    CF_S3_META,
    CF_S3_SECRETS,
    CF_S3_UPLOADS,
    CF_S3_PARTS,
    CF_BUCKET_OWNERS,
    CF_BLOCK_REFS,
    CF_RESERVED_BLOCKS,
];

/// Row key of a multipart upload.
pub fn upload_key(u: &types::UploadId) -> Vec<u8> {
    let mut k = open_key_prefix(&u.volume, &u.bucket, &u.key);
    k.extend_from_slice(u.upload_id.as_bytes());
    k
}

/// Prefix of every part row of an upload.
pub fn parts_prefix(u: &types::UploadId) -> Vec<u8> {
    let mut k = upload_key(u);
    k.push(0);
    k
}

/// Row key of one part.
pub fn part_key(u: &types::UploadId, part_number: u32) -> Vec<u8> {
    let mut k = parts_prefix(u);
    k.extend_from_slice(&part_number.to_be_bytes());
    k
}

/// Row key of a block (in `block_refs` and `reserved_blocks`): container id and local
/// id, big-endian.
pub fn block_key(b: &types::BlockId) -> Vec<u8> {
    let mut k = b.container_id.to_be_bytes().to_vec();
    k.extend_from_slice(&b.local_id.to_be_bytes());
    k
}

/// Row key of a bucket.
pub fn bucket_key(volume: &str, bucket: &str) -> Vec<u8> {
    format!("{volume}/{bucket}").into_bytes()
}

/// Prefix of every bucket row of a volume.
pub fn buckets_prefix(volume: &str) -> Vec<u8> {
    format!("{volume}/").into_bytes()
}

/// Prefix of every key (and open key) row of a bucket.
pub fn keys_prefix(volume: &str, bucket: &str) -> Vec<u8> {
    format!("{volume}/{bucket}/").into_bytes()
}

/// Row key of a committed key.
pub fn key_key(volume: &str, bucket: &str, key: &str) -> Vec<u8> {
    format!("{volume}/{bucket}/{key}").into_bytes()
}

/// Prefix of every open-key row of one key name (any client id).
pub fn open_key_prefix(volume: &str, bucket: &str, key: &str) -> Vec<u8> {
    let mut k = key_key(volume, bucket, key);
    k.push(0);
    k
}

/// Row key of an open key.
pub fn open_key_key(id: &types::OpenKeyId) -> Vec<u8> {
    let mut k = open_key_prefix(&id.volume, &id.bucket, &id.key);
    k.extend_from_slice(&id.client_id.to_be_bytes());
    k
}

/// `volume/bucket/key`, as messages show a key.
pub fn key_path(volume: &str, bucket: &str, key: &str) -> String {
    format!("{volume}/{bucket}/{key}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_keys_of_one_name_share_a_prefix_no_other_name_has() {
        let id = types::OpenKeyId {
            volume: "v".into(),
            bucket: "b".into(),
            key: "a".into(),
            client_id: 7,
        };
        let k = open_key_key(&id);
        assert!(k.starts_with(&open_key_prefix("v", "b", "a")));
        // "a/x" and "ab" must not fall under the prefix of "a".
        assert!(!open_key_prefix("v", "b", "a/x").starts_with(&open_key_prefix("v", "b", "a")));
        assert!(!open_key_prefix("v", "b", "ab").starts_with(&open_key_prefix("v", "b", "a")));
        assert!(k.starts_with(&keys_prefix("v", "b")));
    }
}
