//! Multipart upload calls of `OmS3`: checked at the edge, then proposed
//! (`S3CreateUpload`, `S3CommitPart`, `S3CompleteUpload`, `S3AbortUpload`) or read.

use rozone_proto::om as pb;

use super::args::{commit_args, condition, field, key_args, key_info};
use super::namespace::{list_arg, name, page};
use crate::convert;
use crate::error::OmError;
use crate::node::{now_ms, OmNode};
use crate::state::types::{OpenKeyId, S3Part, S3Upload, UploadId};
use crate::state::{read, OmRequest, OmResponse, Refusal};

/// S3's smallest part but the last.
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// S3's most parts.
const MAX_PARTS: usize = 10_000;

fn unexpected(r: OmResponse) -> OmError {
    OmError::Internal(format!("unexpected state machine response {r:?}"))
}

fn upload_id(
    volume: String,
    bucket: String,
    key: String,
    upload_id: String,
) -> Result<UploadId, OmError> {
    key_args(&volume, &bucket, &key)?;
    if upload_id.is_empty() || upload_id.len() > 128 {
        return Err(OmError::InvalidArgument(
            "upload id must be 1 to 128 bytes".into(),
        ));
    }
    Ok(UploadId {
        volume,
        bucket,
        key,
        upload_id,
    })
}

fn upload_pb(u: &S3Upload) -> pb::MultipartUploadInfo {
    pb::MultipartUploadInfo {
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

fn part_pb(p: &S3Part) -> pb::MultipartPartInfo {
    pb::MultipartPartInfo {
        part_number: p.part_number,
        etag: p.etag.clone(),
        size: p.size,
        modified_ms: p.modified_ms,
    }
}

pub async fn create(
    n: &OmNode,
    r: pb::CreateMultipartUploadRequest,
) -> Result<pb::CreateMultipartUploadReply, OmError> {
    key_args(&r.volume, &r.bucket, &r.key)?;
    let (meta, _) = commit_args(Some(r.meta.unwrap_or_default()), None)?
        .ok_or_else(|| OmError::Internal("metadata given but not checked".into()))?;
    let id: String = (0..2)
        .map(|_| format!("{:016x}", rand::random::<u64>()))
        .collect();
    let upload = S3Upload {
        volume: r.volume,
        bucket: r.bucket,
        key: r.key,
        upload_id: id,
        created_ms: now_ms(),
        content_type: meta.content_type,
        metadata: meta.metadata,
    };
    match n.propose(OmRequest::S3CreateUpload { upload }).await? {
        OmResponse::S3UploadCreated(u) => Ok(pb::CreateMultipartUploadReply {
            upload: Some(upload_pb(&u)),
        }),
        other => Err(unexpected(other)),
    }
}

pub async fn commit_part(
    n: &OmNode,
    r: pb::CommitMultipartPartRequest,
) -> Result<pb::CommitMultipartPartReply, OmError> {
    let upload = upload_id(r.volume, r.bucket, r.key, r.upload_id)?;
    if r.part_number == 0 || r.part_number as usize > MAX_PARTS {
        return Err(OmError::InvalidArgument(format!(
            "part number {} is not within 1..={MAX_PARTS}",
            r.part_number
        )));
    }
    field("etag", &r.etag)?;
    let max = n.config.om.max_blocks_per_key as usize;
    if r.blocks.len() > max {
        return Err(OmError::TooLarge(format!(
            "{} blocks in the part, at most {max} (om.max_blocks_per_key)",
            r.blocks.len()
        )));
    }
    let blocks = r
        .blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Ok((
                convert::block_id(b.block_id, &format!("blocks[{i}].block_id"))?,
                b.length,
            ))
        })
        .collect::<Result<Vec<_>, OmError>>()?;
    let id = OpenKeyId {
        volume: upload.volume.clone(),
        bucket: upload.bucket.clone(),
        key: upload.key.clone(),
        client_id: r.client_id,
    };
    match n
        .propose(OmRequest::S3CommitPart {
            upload,
            part_number: r.part_number,
            id,
            blocks,
            size: r.size,
            etag: r.etag,
            now_ms: now_ms(),
        })
        .await?
    {
        OmResponse::S3PartCommitted(p) => Ok(pb::CommitMultipartPartReply {
            part: Some(part_pb(&p)),
        }),
        other => Err(unexpected(other)),
    }
}

pub async fn complete(
    n: &OmNode,
    r: pb::CompleteMultipartUploadRequest,
) -> Result<pb::CommitKeyReply, OmError> {
    let upload = upload_id(r.volume, r.bucket, r.key, r.upload_id)?;
    if r.parts.len() > MAX_PARTS {
        return Err(OmError::TooLarge(format!(
            "{} parts listed, at most {MAX_PARTS}",
            r.parts.len()
        )));
    }
    field("etag", &r.etag)?;
    for p in &r.parts {
        field("part etag", &p.etag)?;
    }
    let condition = condition(r.condition)?;
    match n
        .propose(OmRequest::S3CompleteUpload {
            upload,
            parts: r
                .parts
                .into_iter()
                .map(|p| (p.part_number, p.etag))
                .collect(),
            etag: r.etag,
            min_part_size: MIN_PART_SIZE,
            now_ms: now_ms(),
            condition,
        })
        .await?
    {
        OmResponse::KeyCommitted(k) => {
            let mut key = [key_info(&n.group.db(), &k)?];
            n.tokens.sign_keys(&n.scm, &mut key).await?;
            let [key] = key;
            Ok(pb::CommitKeyReply { key: Some(key) })
        }
        other => Err(unexpected(other)),
    }
}

pub async fn abort(
    n: &OmNode,
    r: pb::AbortMultipartUploadRequest,
) -> Result<pb::AbortMultipartUploadReply, OmError> {
    let upload = upload_id(r.volume, r.bucket, r.key, r.upload_id)?;
    match n.propose(OmRequest::S3AbortUpload { upload }).await? {
        OmResponse::S3UploadAborted => Ok(pb::AbortMultipartUploadReply {}),
        other => Err(unexpected(other)),
    }
}

pub async fn list_parts(
    n: &OmNode,
    r: pb::ListMultipartPartsRequest,
) -> Result<pb::ListMultipartPartsReply, OmError> {
    let upload = upload_id(r.volume, r.bucket, r.key, r.upload_id)?;
    n.read_gate(None).await?;
    let db = n.group.db();
    let Some(u) = read::s3_upload(&db, &upload)? else {
        return Err(Refusal::NoSuchUpload {
            path: crate::state::key_path(&upload.volume, &upload.bucket, &upload.key),
            upload_id: upload.upload_id,
        }
        .into());
    };
    let (parts, truncated) = read::s3_parts(&db, &upload, r.part_number_marker, page(r.limit))?;
    Ok(pb::ListMultipartPartsReply {
        upload: Some(upload_pb(&u)),
        parts: parts.iter().map(part_pb).collect(),
        truncated,
    })
}

pub async fn list_uploads(
    n: &OmNode,
    r: pb::ListMultipartUploadsRequest,
) -> Result<pb::ListMultipartUploadsReply, OmError> {
    name("volume", &r.volume)?;
    name("bucket", &r.bucket)?;
    list_arg("prefix", &r.prefix)?;
    list_arg("key_marker", &r.key_marker)?;
    list_arg("upload_id_marker", &r.upload_id_marker)?;
    n.read_gate(None).await?;
    let db = n.group.db();
    super::namespace::must_bucket(&db, &r.volume, &r.bucket)?;
    let after = (!r.key_marker.is_empty()).then(|| UploadId {
        volume: r.volume.clone(),
        bucket: r.bucket.clone(),
        key: r.key_marker.clone(),
        // No upload id marker: after every upload of the marker key.
        upload_id: if r.upload_id_marker.is_empty() {
            "\u{10FFFF}".to_string()
        } else {
            r.upload_id_marker.clone()
        },
    });
    let (uploads, truncated) = read::s3_uploads(
        &db,
        &r.volume,
        &r.bucket,
        &r.prefix,
        after.as_ref(),
        page(r.limit),
    )?;
    Ok(pb::ListMultipartUploadsReply {
        uploads: uploads.iter().map(upload_pb).collect(),
        truncated,
    })
}
