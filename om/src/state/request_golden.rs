//! Golden bytes of every [`OmRequest`] variant: entries committed by earlier builds must
//! decode, and this build must write them the same way.

use super::*;
use crate::state::types::{Datanode, PipelineRef};

/// The fixture name of each variant. A new variant fails to compile here until it is named
/// and given a sample below.
fn name(r: &OmRequest) -> &'static str {
    match r {
        OmRequest::CreateVolume { .. } => "CreateVolume",
        OmRequest::DeleteVolume { .. } => "DeleteVolume",
        OmRequest::CreateBucket { .. } => "CreateBucket",
        OmRequest::DeleteBucket { .. } => "DeleteBucket",
        OmRequest::OpenKey { .. } => "OpenKey",
        OmRequest::AddBlocks { .. } => "AddBlocks",
        OmRequest::CommitKey { .. } => "CommitKey",
        OmRequest::DeleteKey { .. } => "DeleteKey",
        OmRequest::RenameKey { .. } => "RenameKey",
        OmRequest::ExpireOpenKeys { .. } => "ExpireOpenKeys",
        OmRequest::PurgeDeletedBlocks { .. } => "PurgeDeletedBlocks",
        OmRequest::S3CommitKey { .. } => "S3CommitKey",
        OmRequest::S3SetSecret { .. } => "S3SetSecret",
        OmRequest::S3RevokeSecret { .. } => "S3RevokeSecret",
        OmRequest::S3CreateUpload { .. } => "S3CreateUpload",
        OmRequest::S3CommitPart { .. } => "S3CommitPart",
        OmRequest::S3CompleteUpload { .. } => "S3CompleteUpload",
        OmRequest::S3AbortUpload { .. } => "S3AbortUpload",
        OmRequest::AsUser { .. } => "AsUser",
        OmRequest::CopyKey(_) => "CopyKey",
        OmRequest::ReserveBlocks { .. } => "ReserveBlocks",
        OmRequest::ExpireReserved { .. } => "ExpireReserved",
        OmRequest::DeferredCommit { .. } => "DeferredCommit",
    }
}

fn id() -> OpenKeyId {
    OpenKeyId {
        volume: "vol".into(),
        bucket: "b".into(),
        key: "k/1".into(),
        client_id: 77,
    }
}

fn upload() -> crate::state::types::UploadId {
    crate::state::types::UploadId {
        volume: "vol".into(),
        bucket: "b".into(),
        key: "k/1".into(),
        upload_id: "0a1b".into(),
    }
}

fn block() -> AllocatedBlock {
    AllocatedBlock {
        id: BlockId::new(3, 41),
        pipeline: PipelineRef {
            id: 9,
            members: vec![Datanode {
                id: 2,
                hostname: "dn2".into(),
                container_addr: "h:9859".into(),
                raft_addr: "h:9858".into(),
                replication_addr: "h:9857".into(),
            }],
            leader_id: Some(2),
            open: true,
        },
        max_size: 1 << 28,
    }
}

fn samples() -> Vec<OmRequest> {
    vec![
        OmRequest::CreateVolume {
            name: "vol".into(),
            owner: "alice".into(),
            quota_bytes: Some(1 << 30),
            now_ms: 1_700_000_000_000,
        },
        OmRequest::DeleteVolume { name: "vol".into() },
        OmRequest::CreateBucket {
            volume: "vol".into(),
            name: "b".into(),
            replication: Replication::RatisThree,
            versioning: true,
            quota_bytes: None,
            now_ms: 5,
        },
        OmRequest::DeleteBucket {
            volume: "vol".into(),
            name: "b".into(),
        },
        OmRequest::OpenKey {
            id: id(),
            replication: Some(Replication::RatisOne),
            blocks: vec![block()],
            now_ms: 6,
            expires_ms: 7,
        },
        OmRequest::AddBlocks {
            id: id(),
            blocks: vec![block()],
            expires_ms: 8,
            max_blocks: 16,
        },
        OmRequest::CommitKey {
            id: id(),
            blocks: vec![(BlockId::new(3, 41), 1024)],
            size: 1024,
            checksum: "crc32c:1234".into(),
            now_ms: 9,
        },
        OmRequest::DeleteKey {
            volume: "vol".into(),
            bucket: "b".into(),
            key: "k/1".into(),
        },
        OmRequest::RenameKey {
            volume: "vol".into(),
            bucket: "b".into(),
            from: "k/1".into(),
            to: "k/2".into(),
            now_ms: 10,
        },
        OmRequest::ExpireOpenKeys {
            ids: vec![id()],
            now_ms: 11,
        },
        OmRequest::PurgeDeletedBlocks {
            ids: vec![1, 2, 300],
        },
        OmRequest::S3CommitKey {
            id: id(),
            blocks: vec![(BlockId::new(3, 41), 1024)],
            size: 1024,
            checksum: "crc32:1234".into(),
            now_ms: 12,
            meta: crate::state::types::S3Meta {
                etag: "0cc175b9c0f1b6a831c399e269772661".into(),
                content_type: "text/plain".into(),
                metadata: vec![("color".into(), "blue".into())],
            },
            condition: Some(crate::state::types::S3Condition::IfMatch("e1".into())),
        },
        OmRequest::S3SetSecret {
            access_id: "alice".into(),
            user: "alice".into(),
            secret: "c2VjcmV0".into(),
            now_ms: 13,
        },
        OmRequest::S3RevokeSecret {
            access_id: "alice".into(),
        },
        OmRequest::S3CreateUpload {
            upload: crate::state::types::S3Upload {
                volume: "vol".into(),
                bucket: "b".into(),
                key: "k/1".into(),
                upload_id: "0a1b".into(),
                created_ms: 14,
                content_type: "text/plain".into(),
                metadata: vec![("m".into(), "v".into())],
            },
        },
        OmRequest::S3CommitPart {
            upload: upload(),
            part_number: 3,
            id: id(),
            blocks: vec![(BlockId::new(3, 41), 1024)],
            size: 1024,
            etag: "e3".into(),
            now_ms: 15,
        },
        OmRequest::S3CompleteUpload {
            upload: upload(),
            parts: vec![(1, "e1".into()), (3, "e3".into())],
            etag: "abc-2".into(),
            min_part_size: 5 << 20,
            now_ms: 16,
            condition: Some(crate::state::types::S3Condition::IfNoneMatchAny),
        },
        OmRequest::S3AbortUpload { upload: upload() },
        OmRequest::AsUser {
            user: "client-7".into(),
            request: Box::new(OmRequest::DeleteKey {
                volume: "vol".into(),
                bucket: "b".into(),
                key: "k/1".into(),
            }),
        },
        OmRequest::CopyKey(crate::state::types::KeyCopy {
            volume: "s3v".into(),
            src_bucket: "b".into(),
            src_key: "k/1".into(),
            dst_bucket: "c".into(),
            dst_key: "k/2".into(),
            src_blocks: vec![BlockId::new(4, 7), BlockId::new(4, 8)],
            meta: S3Meta {
                etag: "abc".into(),
                content_type: "text/plain".into(),
                metadata: vec![("a".into(), "1".into())],
            },
            now_ms: 17,
        }),
        OmRequest::ReserveBlocks {
            blocks: vec![block()],
            expires_ms: 18,
        },
        OmRequest::ExpireReserved {
            ids: vec![BlockId::new(3, 41), BlockId::new(3, 42)],
            now_ms: 19,
        },
        OmRequest::DeferredCommit {
            id: id(),
            blocks: vec![BlockId::new(3, 41)],
            now_ms: 20,
            expires_ms: 21,
            commit: Box::new(OmRequest::CommitKey {
                id: id(),
                blocks: vec![(BlockId::new(3, 41), 1024)],
                size: 1024,
                checksum: "crc32:1234".into(),
                now_ms: 20,
            }),
        },
    ]
}

#[test]
fn every_request_variant_matches_its_golden_bytes() {
    let samples: Vec<(&str, OmRequest)> = samples().into_iter().map(|r| (name(&r), r)).collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/requests-v1.txt");
    rozone_raft::golden::check(&path, &samples, rozone_raft::envelope::seal, |b| {
        rozone_raft::envelope::open(b, "OM request")
    });
}
