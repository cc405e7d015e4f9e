//! Key and multipart upload requests decoded into the node's domain values
//! ([`crate::node::types`]), and the node's answers encoded. Only the shape of the wire is
//! checked here (ids present, enum values known, no contradictory condition); names and
//! sizes are the node's checks ([`crate::node::checks`]).

use rozone_proto::om as pb;

use super::{allocated_pb, block_id, replication};
use crate::error::OmError;
use crate::node::types::{
    AllocateArgs, Allocated, CommitArgs, CommitPartArgs, CompleteArgs, CreateUploadArgs, KeyInfo,
    ListKeysArgs, ListUploadsArgs, OpenArgs, Opened,
};
use crate::scm_client::Exclude;
use crate::state::types::{BlockId, OpenKeyId, S3Condition, S3Meta, S3Part, S3Upload, UploadId};

impl From<&KeyInfo> for pb::KeyInfo {
    fn from(k: &KeyInfo) -> Self {
        let mut info: pb::KeyInfo = (&k.key).into();
        info.s3 = k.s3.as_ref().map(Into::into);
        info
    }
}

/// S3 metadata from a gateway, its user metadata sorted by name (as stored).
pub fn s3_meta(m: pb::S3Meta) -> S3Meta {
    let mut metadata: Vec<(String, String)> = m.metadata.into_iter().collect();
    metadata.sort();
    S3Meta {
        etag: m.etag,
        content_type: m.content_type,
        metadata,
    }
}

/// A commit condition; one that asks for both forms is refused.
pub fn condition(c: Option<pb::S3Condition>) -> Result<Option<S3Condition>, OmError> {
    Ok(match c {
        None => None,
        Some(c) if c.if_none_match_any && !c.if_match.is_empty() => {
            return Err(OmError::InvalidArgument(
                "a commit condition has both if_none_match_any and if_match".into(),
            ))
        }
        Some(c) if c.if_none_match_any => Some(S3Condition::IfNoneMatchAny),
        Some(c) if !c.if_match.is_empty() => Some(S3Condition::IfMatch(c.if_match)),
        Some(_) => None,
    })
}

/// The blocks a writer committed: each id present and whole, with its length.
fn committed(blocks: &[pb::CommitBlock]) -> Result<Vec<(BlockId, u64)>, OmError> {
    blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Ok((
                block_id(b.block_id, &format!("blocks[{i}].block_id"))?,
                b.length,
            ))
        })
        .collect()
}

pub fn open_args(r: pb::OpenKeyRequest) -> Result<OpenArgs, OmError> {
    Ok(OpenArgs {
        replication: replication(r.replication)?,
        volume: r.volume,
        bucket: r.bucket,
        key: r.key,
        size: r.size,
        exclude: Exclude {
            datanodes: r.exclude_datanodes,
            pipelines: r.exclude_pipelines,
            containers: Vec::new(),
        },
        single_block: r.single_block,
    })
}

impl From<&Opened> for pb::OpenKeyReply {
    fn from(o: &Opened) -> Self {
        Self {
            client_id: o.client_id,
            session: Some((&o.session).into()),
            blocks: o.session.blocks.iter().map(allocated_pb).collect(),
            deferred: o.deferred,
        }
    }
}

pub fn allocate_args(r: pb::AllocateBlockRequest) -> AllocateArgs {
    AllocateArgs {
        id: OpenKeyId {
            volume: r.volume,
            bucket: r.bucket,
            key: r.key,
            client_id: r.client_id,
        },
        count: r.count,
        exclude: Exclude {
            datanodes: r.exclude_datanodes,
            pipelines: r.exclude_pipelines,
            containers: r.exclude_containers,
        },
    }
}

impl From<&Allocated> for pb::AllocateBlockReply {
    fn from(a: &Allocated) -> Self {
        Self {
            blocks: a.blocks.iter().map(allocated_pb).collect(),
            expires_ms: a.expires_ms,
        }
    }
}

pub fn commit_args(r: pb::CommitKeyRequest) -> Result<CommitArgs, OmError> {
    Ok(CommitArgs {
        blocks: committed(&r.blocks)?,
        condition: condition(r.condition)?,
        s3: r.s3.map(s3_meta),
        id: OpenKeyId {
            volume: r.volume,
            bucket: r.bucket,
            key: r.key,
            client_id: r.client_id,
        },
        size: r.size,
        checksum: r.checksum,
        deferred: r
            .deferred
            .into_iter()
            .enumerate()
            .map(|(i, b)| {
                Ok((
                    block_id(b.block_id, &format!("deferred[{i}].block_id"))?,
                    b.block_token,
                ))
            })
            .collect::<Result<_, OmError>>()?,
    })
}

pub fn list_keys_args(r: &pb::ListKeysRequest) -> ListKeysArgs {
    ListKeysArgs {
        volume: r.volume.clone(),
        bucket: r.bucket.clone(),
        prefix: r.prefix.clone(),
        start_after: r.start_after.clone(),
        limit: r.limit,
    }
}

/// Names one upload.
pub fn upload_id(volume: String, bucket: String, key: String, upload_id: String) -> UploadId {
    UploadId {
        volume,
        bucket,
        key,
        upload_id,
    }
}

pub fn create_upload_args(r: pb::CreateMultipartUploadRequest) -> CreateUploadArgs {
    CreateUploadArgs {
        volume: r.volume,
        bucket: r.bucket,
        key: r.key,
        meta: s3_meta(r.meta.unwrap_or_default()),
    }
}

pub fn commit_part_args(r: pb::CommitMultipartPartRequest) -> Result<CommitPartArgs, OmError> {
    Ok(CommitPartArgs {
        blocks: committed(&r.blocks)?,
        upload: upload_id(r.volume, r.bucket, r.key, r.upload_id),
        part_number: r.part_number,
        client_id: r.client_id,
        size: r.size,
        etag: r.etag,
    })
}

pub fn complete_args(r: pb::CompleteMultipartUploadRequest) -> Result<CompleteArgs, OmError> {
    Ok(CompleteArgs {
        condition: condition(r.condition)?,
        upload: upload_id(r.volume, r.bucket, r.key, r.upload_id),
        parts: r
            .parts
            .into_iter()
            .map(|p| (p.part_number, p.etag))
            .collect(),
        etag: r.etag,
    })
}

pub fn list_uploads_args(r: pb::ListMultipartUploadsRequest) -> ListUploadsArgs {
    ListUploadsArgs {
        volume: r.volume,
        bucket: r.bucket,
        prefix: r.prefix,
        key_marker: r.key_marker,
        upload_id_marker: r.upload_id_marker,
        limit: r.limit,
    }
}

impl From<&S3Upload> for pb::MultipartUploadInfo {
    fn from(u: &S3Upload) -> Self {
        Self {
            volume: u.volume.clone(),
            bucket: u.bucket.clone(),
            key: u.key.clone(),
            upload_id: u.upload_id.clone(),
            created_ms: u.created_ms,
            meta: Some(pb::S3Meta {
                etag: String::new(),
                content_type: u.content_type.clone(),
                metadata: u.metadata.iter().cloned().collect(),
            }),
        }
    }
}

impl From<&S3Part> for pb::MultipartPartInfo {
    fn from(p: &S3Part) -> Self {
        Self {
            part_number: p.part_number,
            etag: p.etag.clone(),
            size: p.size,
            modified_ms: p.modified_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_may_not_ask_for_both_forms() {
        let both = pb::S3Condition {
            if_none_match_any: true,
            if_match: "e".into(),
        };
        assert!(matches!(
            condition(Some(both)),
            Err(OmError::InvalidArgument(_))
        ));
        let if_match = pb::S3Condition {
            if_none_match_any: false,
            if_match: "e".into(),
        };
        assert_eq!(
            condition(Some(if_match)).unwrap(),
            Some(S3Condition::IfMatch("e".into()))
        );
        assert_eq!(condition(Some(pb::S3Condition::default())).unwrap(), None);
    }

    #[test]
    fn s3_metadata_is_stored_sorted_by_name() {
        let m = s3_meta(pb::S3Meta {
            etag: "e".into(),
            content_type: "t".into(),
            metadata: [("b", "2"), ("a", "1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
        assert_eq!(
            m.metadata,
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
    }

    #[test]
    fn a_committed_block_without_its_id_is_refused_by_index() {
        let r = pb::CommitKeyRequest {
            blocks: vec![pb::CommitBlock {
                block_id: None,
                length: 1,
            }],
            ..Default::default()
        };
        match commit_args(r) {
            Err(OmError::InvalidArgument(m)) => assert_eq!(m, "blocks[0].block_id is missing"),
            other => panic!("{other:?}"),
        }
    }
}
