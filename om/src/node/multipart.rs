//! The node's multipart upload calls (S3): checked, then proposed (`S3CreateUpload`,
//! `S3CommitPart`, `S3CompleteUpload`, `S3AbortUpload`) or read.

use super::checks::{self, field, key_args, must_bucket};
use super::keys::key_info;
use super::types::{
    CommitPartArgs, CompleteArgs, CreateUploadArgs, KeyInfo, ListUploadsArgs, Page, ReadOptions,
};
use super::{now_ms, unexpected, OmNode};
use crate::error::OmError;
use crate::state::types::{KeyCopy, OpenKeyId, S3Part, S3Upload, UploadId};
use crate::state::{key_path, read, OmRequest, OmResponse, Refusal};

/// S3's smallest part but the last.
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// S3's most parts.
const MAX_PARTS: usize = 10_000;

impl OmNode {
    /// Starts an upload under a new random upload id.
    pub async fn create_upload(&self, a: CreateUploadArgs) -> Result<S3Upload, OmError> {
        key_args(&a.volume, &a.bucket, &a.key)?;
        checks::s3_meta(&a.meta)?;
        let id: String = (0..2)
            .map(|_| format!("{:016x}", rand::random::<u64>()))
            .collect();
        let upload = S3Upload {
            volume: a.volume,
            bucket: a.bucket,
            key: a.key,
            upload_id: id,
            created_ms: now_ms(),
            content_type: a.meta.content_type,
            metadata: a.meta.metadata,
        };
        match self.propose(OmRequest::S3CreateUpload { upload }).await? {
            OmResponse::S3UploadCreated(u) => Ok(u),
            other => Err(unexpected(other)),
        }
    }

    /// Makes an open key's blocks a part of an upload.
    pub async fn commit_part(&self, a: CommitPartArgs) -> Result<S3Part, OmError> {
        checks::upload_id(&a.upload)?;
        if a.part_number == 0 || a.part_number as usize > MAX_PARTS {
            return Err(OmError::InvalidArgument(format!(
                "part number {} is not within 1..={MAX_PARTS}",
                a.part_number
            )));
        }
        field("etag", &a.etag)?;
        checks::block_count("part", a.blocks.len(), self.config.om.max_blocks_per_key)?;
        let id = OpenKeyId {
            volume: a.upload.volume.clone(),
            bucket: a.upload.bucket.clone(),
            key: a.upload.key.clone(),
            client_id: a.client_id,
        };
        let req = OmRequest::S3CommitPart {
            upload: a.upload,
            part_number: a.part_number,
            id,
            blocks: a.blocks,
            size: a.size,
            etag: a.etag,
            now_ms: now_ms(),
        };
        match self.propose(req).await? {
            OmResponse::S3PartCommitted(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Completes an upload: the listed parts become the key.
    pub async fn complete_upload(&self, a: CompleteArgs) -> Result<KeyInfo, OmError> {
        checks::upload_id(&a.upload)?;
        if a.parts.len() > MAX_PARTS {
            return Err(OmError::TooLarge(format!(
                "{} parts listed, at most {MAX_PARTS}",
                a.parts.len()
            )));
        }
        field("etag", &a.etag)?;
        for (_, etag) in &a.parts {
            field("part etag", etag)?;
        }
        checks::condition(&a.condition)?;
        let req = OmRequest::S3CompleteUpload {
            upload: a.upload,
            parts: a.parts,
            etag: a.etag,
            min_part_size: MIN_PART_SIZE,
            now_ms: now_ms(),
            condition: a.condition,
        };
        match self.propose(req).await? {
            OmResponse::KeyCommitted(k) => key_info(&self.group.db(), k),
            other => Err(unexpected(other)),
        }
    }

    /// A server-side copy sharing the source's blocks (S3 CopyObject); `c.src_blocks` are
    /// the source's blocks as the caller saw them, `c.now_ms` is set here.
    pub async fn copy_key(&self, mut c: KeyCopy) -> Result<KeyInfo, OmError> {
        key_args(&c.volume, &c.src_bucket, &c.src_key)?;
        key_args(&c.volume, &c.dst_bucket, &c.dst_key)?;
        checks::block_count(
            "copy",
            c.src_blocks.len(),
            self.config.om.max_blocks_per_key,
        )?;
        checks::s3_meta(&c.meta)?;
        c.now_ms = now_ms();
        match self.propose(OmRequest::CopyKey(c)).await? {
            OmResponse::KeyCommitted(k) => key_info(&self.group.db(), k),
            other => Err(unexpected(other)),
        }
    }

    /// Drops an upload and its parts.
    pub async fn abort_upload(&self, upload: UploadId) -> Result<(), OmError> {
        checks::upload_id(&upload)?;
        match self.propose(OmRequest::S3AbortUpload { upload }).await? {
            OmResponse::S3UploadAborted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// An upload and a page of its parts after part `marker`.
    pub async fn list_parts(
        &self,
        upload: UploadId,
        marker: u32,
        limit: u32,
    ) -> Result<(S3Upload, Page<S3Part>), OmError> {
        checks::upload_id(&upload)?;
        self.read_gate(ReadOptions::default()).await?;
        let db = self.group.db();
        let Some(u) = read::s3_upload(&db, &upload)? else {
            return Err(Refusal::NoSuchUpload {
                path: key_path(&upload.volume, &upload.bucket, &upload.key),
                upload_id: upload.upload_id,
            }
            .into());
        };
        let (rows, truncated) = read::s3_parts(&db, &upload, marker, checks::page(limit))?;
        Ok((u, Page { rows, truncated }))
    }

    /// A page of a bucket's uploads after the (key, upload id) marker.
    pub async fn list_uploads(&self, a: ListUploadsArgs) -> Result<Page<S3Upload>, OmError> {
        checks::name("volume", &a.volume)?;
        checks::name("bucket", &a.bucket)?;
        checks::list_arg("prefix", &a.prefix)?;
        checks::list_arg("key_marker", &a.key_marker)?;
        checks::list_arg("upload_id_marker", &a.upload_id_marker)?;
        self.read_gate(ReadOptions::default()).await?;
        let db = self.group.db();
        must_bucket(&db, &a.volume, &a.bucket)?;
        let after = (!a.key_marker.is_empty()).then(|| UploadId {
            volume: a.volume.clone(),
            bucket: a.bucket.clone(),
            key: a.key_marker.clone(),
            // No upload id marker: after every upload of the marker key.
            upload_id: if a.upload_id_marker.is_empty() {
                "\u{10FFFF}".to_string()
            } else {
                a.upload_id_marker.clone()
            },
        });
        let (rows, truncated) = read::s3_uploads(
            &db,
            &a.volume,
            &a.bucket,
            &a.prefix,
            after.as_ref(),
            checks::page(a.limit),
        )?;
        Ok(Page { rows, truncated })
    }
}
