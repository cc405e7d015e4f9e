//! S3 on the OM (`OmS3`): credentials (get-or-create a user's secret, look one up by access
//! key id for the gateway, revoke one) and multipart uploads (create, commit a part, complete, abort, list).

use rozone_proto::om as pb;
use rozone_proto::om::om_s3_client::OmS3Client;

use crate::error::Result;
use crate::om::OmClient;

/// An S3 access key id and its secret.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct S3Secret {
    pub access_id: String,
    pub secret: String,
    pub user: String,
    pub created_ms: u64,
}

impl From<pb::S3SecretReply> for S3Secret {
    fn from(r: pb::S3SecretReply) -> Self {
        Self {
            access_id: r.access_id,
            secret: r.secret,
            user: r.user,
            created_ms: r.created_ms,
        }
    }
}

impl OmClient {
    /// The user's S3 secret, created on the first call (admin certificates only).
    pub async fn get_s3_secret(&self, user: &str) -> Result<S3Secret> {
        let req = pb::GetS3SecretRequest { user: user.into() };
        // Creates the secret on the first call: one id for every attempt.
        let call = self.ring().call_ids().begin();
        let r = self
            .ring()
            .call("get s3 secret", |ch| {
                let req = call.request(req.clone());
                async move { OmS3Client::new(ch).get_s3_secret(req).await }
            })
            .await?;
        Ok(r.into())
    }

    /// The secret of an access key id, from the OM leader (s3g or admin certificates).
    pub async fn lookup_s3_secret(&self, access_id: &str) -> Result<S3Secret> {
        let req = pb::LookupS3SecretRequest {
            access_id: access_id.into(),
        };
        let r = self
            .ring()
            .call("lookup s3 secret", |ch| {
                let req = req.clone();
                async move { OmS3Client::new(ch).lookup_s3_secret(req).await }
            })
            .await?;
        Ok(r.into())
    }

    /// Removes an access key id (admin certificates only).
    pub async fn revoke_s3_secret(&self, access_id: &str) -> Result<()> {
        let req = pb::RevokeS3SecretRequest {
            access_id: access_id.into(),
        };
        let call = self.ring().call_ids().begin();
        self.ring()
            .call("revoke s3 secret", |ch| {
                let req = call.request(req.clone());
                async move { OmS3Client::new(ch).revoke_s3_secret(req).await }
            })
            .await?;
        Ok(())
    }
}

/// A multipart upload in progress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MultipartUpload {
    pub volume: String,
    pub bucket: String,
    pub key: String,
    pub upload_id: String,
    pub created_ms: u64,
    pub meta: crate::types::S3Meta,
}

impl From<pb::MultipartUploadInfo> for MultipartUpload {
    fn from(u: pb::MultipartUploadInfo) -> Self {
        Self {
            volume: u.volume,
            bucket: u.bucket,
            key: u.key,
            upload_id: u.upload_id,
            created_ms: u.created_ms,
            meta: u.meta.map(Into::into).unwrap_or_default(),
        }
    }
}

/// One uploaded part.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MultipartPart {
    pub part_number: u32,
    pub etag: String,
    pub size: u64,
    pub modified_ms: u64,
}

impl From<pb::MultipartPartInfo> for MultipartPart {
    fn from(p: pb::MultipartPartInfo) -> Self {
        Self {
            part_number: p.part_number,
            etag: p.etag,
            size: p.size,
            modified_ms: p.modified_ms,
        }
    }
}

fn missing(what: &str) -> crate::ClientError {
    crate::ClientError::bad_reply("OM", format!("no {what} in the reply"))
}

impl OmClient {
    async fn s3_call<Req, T, F, Fut>(&self, what: &str, req: Req, f: F) -> Result<T>
    where
        Req: Clone,
        F: Fn(OmS3Client<tonic::transport::Channel>, tonic::Request<Req>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        // One id for every attempt: a resent write applies at most once.
        let call = self.ring().call_ids().begin();
        Ok(self
            .ring()
            .call(what, |ch| f(OmS3Client::new(ch), call.request(req.clone())))
            .await?)
    }

    /// Starts a multipart upload of `key` that will carry `meta` (its etag is ignored).
    pub async fn create_multipart_upload(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        meta: &crate::types::S3Meta,
    ) -> Result<MultipartUpload> {
        let req = pb::CreateMultipartUploadRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            meta: Some(meta.into()),
        };
        let r = self
            .s3_call("create multipart upload", req, |mut c, r| async move {
                c.create_multipart_upload(r).await
            })
            .await?;
        r.upload.map(Into::into).ok_or_else(|| missing("upload"))
    }

    /// Makes what `w` wrote part `part_number` of the upload.
    pub async fn commit_multipart_part(
        &self,
        upload_id: &str,
        part_number: u32,
        w: &crate::key_write::Written,
        etag: &str,
    ) -> Result<MultipartPart> {
        let req = pb::CommitMultipartPartRequest {
            volume: w.open.volume.clone(),
            bucket: w.open.bucket.clone(),
            key: w.open.key.clone(),
            upload_id: upload_id.into(),
            part_number,
            client_id: w.open.client_id,
            blocks: w
                .blocks
                .iter()
                .map(|(id, length)| pb::CommitBlock {
                    block_id: Some((*id).into()),
                    length: *length,
                })
                .collect(),
            size: w.size(),
            etag: etag.into(),
        };
        let r = self
            .s3_call("commit multipart part", req, |mut c, r| async move {
                c.commit_multipart_part(r).await
            })
            .await?;
        r.part.map(Into::into).ok_or_else(|| missing("part"))
    }

    /// Completes an upload with `parts` (number, ETag; ascending) as the key, whose ETag
    /// is `etag`; `condition` as for a conditional put.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete_multipart_upload(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[(u32, String)],
        etag: &str,
        condition: Option<&crate::om::S3Condition>,
    ) -> Result<crate::types::Key> {
        let req = pb::CompleteMultipartUploadRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
            parts: parts
                .iter()
                .map(|(n, e)| pb::CompletePart {
                    part_number: *n,
                    etag: e.clone(),
                })
                .collect(),
            etag: etag.into(),
            condition: condition.map(|c| match c {
                crate::om::S3Condition::IfNoneMatchAny => pb::S3Condition {
                    if_none_match_any: true,
                    if_match: String::new(),
                },
                crate::om::S3Condition::IfMatch(e) => pb::S3Condition {
                    if_none_match_any: false,
                    if_match: e.clone(),
                },
            }),
        };
        let r = self
            .s3_call("complete multipart upload", req, |mut c, r| async move {
                c.complete_multipart_upload(r).await
            })
            .await?;
        r.key
            .ok_or_else(|| missing("key"))
            .and_then(crate::types::Key::try_from)
    }

    /// A server-side copy (S3 CopyObject): `dst_key` in `dst_bucket` becomes a key with
    /// the blocks of `source` (as looked up; refused with FAILED_PRECONDITION if the key
    /// changed since) and `meta`. No byte is read or written: the blocks are shared.
    pub async fn copy_key(
        &self,
        source: &crate::types::Key,
        dst_bucket: &str,
        dst_key: &str,
        meta: &crate::types::S3Meta,
    ) -> Result<crate::types::Key> {
        let req = pb::CopyKeyRequest {
            volume: source.volume.clone(),
            src_bucket: source.bucket.clone(),
            src_key: source.name.clone(),
            dst_bucket: dst_bucket.into(),
            dst_key: dst_key.into(),
            src_blocks: source.blocks.iter().map(|b| b.block_id.into()).collect(),
            meta: Some(meta.into()),
        };
        let r = self
            .s3_call(
                "copy key",
                req,
                |mut c, r| async move { c.copy_key(r).await },
            )
            .await?;
        r.key
            .ok_or_else(|| missing("key"))
            .and_then(crate::types::Key::try_from)
    }

    pub async fn abort_multipart_upload(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> Result<()> {
        let req = pb::AbortMultipartUploadRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
        };
        self.s3_call("abort multipart upload", req, |mut c, r| async move {
            c.abort_multipart_upload(r).await
        })
        .await?;
        Ok(())
    }

    /// Parts of an upload after `marker`, at most `limit` (0: the OM's page), and whether
    /// more follow.
    pub async fn list_multipart_parts(
        &self,
        volume: &str,
        bucket: &str,
        key: &str,
        upload_id: &str,
        marker: u32,
        limit: u32,
    ) -> Result<(MultipartUpload, Vec<MultipartPart>, bool)> {
        let req = pb::ListMultipartPartsRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            key: key.into(),
            upload_id: upload_id.into(),
            part_number_marker: marker,
            limit,
        };
        let r = self
            .s3_call("list multipart parts", req, |mut c, r| async move {
                c.list_multipart_parts(r).await
            })
            .await?;
        let u = r.upload.map(Into::into).ok_or_else(|| missing("upload"))?;
        Ok((
            u,
            r.parts.into_iter().map(Into::into).collect(),
            r.truncated,
        ))
    }

    /// Uploads of a bucket (key prefix, after a key/upload id marker), and whether more
    /// follow.
    pub async fn list_multipart_uploads(
        &self,
        volume: &str,
        bucket: &str,
        prefix: &str,
        key_marker: &str,
        upload_id_marker: &str,
        limit: u32,
    ) -> Result<(Vec<MultipartUpload>, bool)> {
        let req = pb::ListMultipartUploadsRequest {
            volume: volume.into(),
            bucket: bucket.into(),
            prefix: prefix.into(),
            key_marker: key_marker.into(),
            upload_id_marker: upload_id_marker.into(),
            limit,
        };
        let r = self
            .s3_call("list multipart uploads", req, |mut c, r| async move {
                c.list_multipart_uploads(r).await
            })
            .await?;
        Ok((r.uploads.into_iter().map(Into::into).collect(), r.truncated))
    }
}
