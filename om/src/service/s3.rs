//! `OmS3` (S3 credentials) and the S3 parts of the key calls: checking the metadata and
//! condition a gateway commit carries, and adding a key's S3 metadata to its `KeyInfo`.
//!
//! Who may call: `GetS3Secret` and `RevokeS3Secret` need the `admin` role (certificates
//! carry no user identity yet, so a user cannot be told from another); `LookupS3Secret`
//! needs `s3g` or `admin` (the gateway verifying a signature). Multipart calls
//! ([`super::multipart`]) are open to any certificate of the cluster, as key calls are.

use std::sync::Arc;

use rozone_kv::rocksdb::DB;
use rozone_proto::om as pb;
use rozone_proto::om::om_s3_server::OmS3;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::error::OmError;
use crate::node::{now_ms, OmNode};
use crate::state::types::{Key, S3Condition, S3Meta};
use crate::state::{read, OmRequest, OmResponse, Refusal};

/// Longest ETag, Content-Type, metadata name or value.
const MAX_FIELD: usize = 1024;
/// Most user metadata bytes per key (S3's limit is 2 KiB of headers).
const MAX_METADATA_BYTES: usize = 2048;
/// Longest user name (and access key id).
const MAX_USER: usize = 64;

/// The S3 metadata and condition of a commit, checked; `None` for a plain commit.
pub fn commit_args(
    meta: Option<pb::S3Meta>,
    cond: Option<pb::S3Condition>,
) -> Result<Option<(S3Meta, Option<S3Condition>)>, OmError> {
    let condition = condition(cond)?;
    let Some(m) = meta else {
        if condition.is_some() {
            return Err(OmError::InvalidArgument(
                "a commit condition needs the s3 metadata".into(),
            ));
        }
        return Ok(None);
    };
    field("etag", &m.etag)?;
    field("content_type", &m.content_type)?;
    let mut total = 0usize;
    for (k, v) in &m.metadata {
        field("metadata name", k)?;
        field("metadata value", v)?;
        total = total.saturating_add(k.len() + v.len());
    }
    if total > MAX_METADATA_BYTES {
        return Err(OmError::TooLarge(format!(
            "user metadata is {total} bytes, at most {MAX_METADATA_BYTES}"
        )));
    }
    let mut metadata: Vec<(String, String)> = m.metadata.into_iter().collect();
    metadata.sort();
    Ok(Some((
        S3Meta {
            etag: m.etag,
            content_type: m.content_type,
            metadata,
        },
        condition,
    )))
}

/// A commit condition, checked.
pub fn condition(cond: Option<pb::S3Condition>) -> Result<Option<S3Condition>, OmError> {
    Ok(match cond {
        None => None,
        Some(c) if c.if_none_match_any && !c.if_match.is_empty() => {
            return Err(OmError::InvalidArgument(
                "a commit condition has both if_none_match_any and if_match".into(),
            ))
        }
        Some(c) if c.if_none_match_any => Some(S3Condition::IfNoneMatchAny),
        Some(c) if !c.if_match.is_empty() => {
            field("if_match", &c.if_match)?;
            Some(S3Condition::IfMatch(c.if_match))
        }
        Some(_) => None,
    })
}

pub fn field(what: &str, v: &str) -> Result<(), OmError> {
    if v.len() > MAX_FIELD {
        return Err(OmError::InvalidArgument(format!(
            "{what} is {} bytes, at most {MAX_FIELD}",
            v.len()
        )));
    }
    Ok(())
}

/// A key's `KeyInfo`, with its S3 metadata when it has some.
pub fn key_info(db: &DB, k: &Key) -> Result<pb::KeyInfo, OmError> {
    let mut info: pb::KeyInfo = k.into();
    info.s3 = read::s3_meta(db, &k.volume, &k.bucket, &k.name)?
        .as_ref()
        .map(Into::into);
    Ok(info)
}

/// A user name (the access key id): what SigV4's credential scope can carry.
fn check_user(u: &str) -> Result<(), OmError> {
    let ok = !u.is_empty()
        && u.len() <= MAX_USER
        && u.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'));
    if ok {
        Ok(())
    } else {
        Err(OmError::InvalidName(format!(
            "invalid user {u:?}: 1 to {MAX_USER} characters of letters, digits, '.', '_', '-', '@'"
        )))
    }
}

/// 40 characters of base64url from 30 random bytes, as long as AWS's secrets.
fn new_secret() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..40)
        .map(|_| ALPHABET[rand::random_range(0..64usize)] as char)
        .collect()
}

fn reply(r: OmResponse) -> Result<pb::S3SecretReply, OmError> {
    match r {
        OmResponse::S3Secret(s) => Ok(pb::S3SecretReply {
            access_id: s.access_id,
            secret: s.secret,
            user: s.user,
            created_ms: s.created_ms,
        }),
        other => Err(OmError::Internal(format!(
            "unexpected state machine response {other:?}"
        ))),
    }
}

/// `OmS3` over one node.
#[derive(Clone)]
pub struct S3Service {
    pub node: Arc<OmNode>,
}

#[tonic::async_trait]
impl OmS3 for S3Service {
    async fn get_s3_secret(
        &self,
        req: Request<pb::GetS3SecretRequest>,
    ) -> Result<Response<pb::S3SecretReply>, Status> {
        require_role(&req, &[Role::Admin], "GetS3Secret")?;
        let r = req.into_inner();
        check_user(&r.user)?;
        let out = self
            .node
            .propose(OmRequest::S3SetSecret {
                access_id: r.user.clone(),
                user: r.user,
                secret: new_secret(),
                now_ms: now_ms(),
            })
            .await?;
        Ok(Response::new(reply(out)?))
    }

    async fn lookup_s3_secret(
        &self,
        req: Request<pb::LookupS3SecretRequest>,
    ) -> Result<Response<pb::S3SecretReply>, Status> {
        require_role(&req, &[Role::S3g, Role::Admin], "LookupS3Secret")?;
        let r = req.into_inner();
        check_user(&r.access_id)?;
        // The leader's state: a revoked key must stop working at once.
        self.node.read_gate(None).await?;
        let s = read::s3_secret(&self.node.group.db(), &r.access_id)
            .map_err(OmError::from)?
            .ok_or(OmError::Refused(Refusal::S3SecretNotFound {
                access_id: r.access_id,
            }))?;
        Ok(Response::new(reply(OmResponse::S3Secret(s))?))
    }

    async fn create_multipart_upload(
        &self,
        req: Request<pb::CreateMultipartUploadRequest>,
    ) -> Result<Response<pb::CreateMultipartUploadReply>, Status> {
        Ok(Response::new(
            super::multipart::create(&self.node, req.into_inner()).await?,
        ))
    }

    async fn commit_multipart_part(
        &self,
        req: Request<pb::CommitMultipartPartRequest>,
    ) -> Result<Response<pb::CommitMultipartPartReply>, Status> {
        Ok(Response::new(
            super::multipart::commit_part(&self.node, req.into_inner()).await?,
        ))
    }

    async fn complete_multipart_upload(
        &self,
        req: Request<pb::CompleteMultipartUploadRequest>,
    ) -> Result<Response<pb::CommitKeyReply>, Status> {
        Ok(Response::new(
            super::multipart::complete(&self.node, req.into_inner()).await?,
        ))
    }

    async fn abort_multipart_upload(
        &self,
        req: Request<pb::AbortMultipartUploadRequest>,
    ) -> Result<Response<pb::AbortMultipartUploadReply>, Status> {
        Ok(Response::new(
            super::multipart::abort(&self.node, req.into_inner()).await?,
        ))
    }

    async fn list_multipart_parts(
        &self,
        req: Request<pb::ListMultipartPartsRequest>,
    ) -> Result<Response<pb::ListMultipartPartsReply>, Status> {
        Ok(Response::new(
            super::multipart::list_parts(&self.node, req.into_inner()).await?,
        ))
    }

    async fn list_multipart_uploads(
        &self,
        req: Request<pb::ListMultipartUploadsRequest>,
    ) -> Result<Response<pb::ListMultipartUploadsReply>, Status> {
        Ok(Response::new(
            super::multipart::list_uploads(&self.node, req.into_inner()).await?,
        ))
    }

    async fn revoke_s3_secret(
        &self,
        req: Request<pb::RevokeS3SecretRequest>,
    ) -> Result<Response<pb::RevokeS3SecretReply>, Status> {
        require_role(&req, &[Role::Admin], "RevokeS3Secret")?;
        let r = req.into_inner();
        check_user(&r.access_id)?;
        match self
            .node
            .propose(OmRequest::S3RevokeSecret {
                access_id: r.access_id,
            })
            .await?
        {
            OmResponse::S3SecretRevoked => Ok(Response::new(pb::RevokeS3SecretReply {})),
            other => Err(
                OmError::Internal(format!("unexpected state machine response {other:?}")).into(),
            ),
        }
    }
}
