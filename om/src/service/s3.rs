//! `OmS3`: S3 credentials, and the multipart calls it hands to [`super::multipart`] (the
//! S3 metadata and condition checks the key calls share are in [`super::args`]).
//!
//! Who may call: `GetS3Secret` and `RevokeS3Secret` need the `admin` role (certificates
//! carry no user identity yet, so a user cannot be told from another); `LookupS3Secret`
//! needs `s3g` or `admin` (the gateway verifying a signature). Multipart calls
//! ([`super::multipart`]) are open to any certificate of the cluster, as key calls are.

use std::sync::Arc;

use rozone_proto::om as pb;
use rozone_proto::om::om_s3_server::OmS3;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::error::OmError;
use crate::node::{now_ms, OmNode};
use crate::state::{read, OmRequest, OmResponse, Refusal};

/// Longest user name (and access key id).
const MAX_USER: usize = 64;

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
