//! `OmS3`: S3 credentials ([`crate::node::s3`]), and the multipart calls it hands to
//! [`super::multipart`]. Each call checks the caller's role, then decodes, calls the node
//! and encodes.
//!
//! Who may call: `GetS3Secret` and `RevokeS3Secret` need the `admin` role (certificates
//! carry no user identity yet, so a user cannot be told from another); `LookupS3Secret`
//! needs `s3g` or `admin` (the gateway verifying a signature). Multipart calls
//! ([`super::multipart`]) need `s3g` or `admin` too: they write keys without the owner
//! checks of `OmService`'s key calls (docs/security.md, "Owners"), so a user's client
//! certificate may not use them.

use std::sync::Arc;

use rozone_proto::om as pb;
use rozone_proto::om::om_s3_server::OmS3;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::node::OmNode;
use crate::state::types::S3Secret;

/// Who may call the multipart calls.
const MULTIPART_ROLES: &[Role] = &[Role::S3g, Role::Admin];

fn reply(s: S3Secret) -> pb::S3SecretReply {
    pb::S3SecretReply {
        access_id: s.access_id,
        secret: s.secret,
        user: s.user,
        created_ms: s.created_ms,
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
        let s = self.node.get_s3_secret(req.into_inner().user).await?;
        Ok(Response::new(reply(s)))
    }

    async fn lookup_s3_secret(
        &self,
        req: Request<pb::LookupS3SecretRequest>,
    ) -> Result<Response<pb::S3SecretReply>, Status> {
        require_role(&req, &[Role::S3g, Role::Admin], "LookupS3Secret")?;
        let s = self
            .node
            .lookup_s3_secret(req.into_inner().access_id)
            .await?;
        Ok(Response::new(reply(s)))
    }

    async fn create_multipart_upload(
        &self,
        req: Request<pb::CreateMultipartUploadRequest>,
    ) -> Result<Response<pb::CreateMultipartUploadReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "CreateMultipartUpload")?;
        Ok(Response::new(
            super::multipart::create(&self.node, req.into_inner()).await?,
        ))
    }

    async fn commit_multipart_part(
        &self,
        req: Request<pb::CommitMultipartPartRequest>,
    ) -> Result<Response<pb::CommitMultipartPartReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "CommitMultipartPart")?;
        Ok(Response::new(
            super::multipart::commit_part(&self.node, req.into_inner()).await?,
        ))
    }

    async fn complete_multipart_upload(
        &self,
        req: Request<pb::CompleteMultipartUploadRequest>,
    ) -> Result<Response<pb::CommitKeyReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "CompleteMultipartUpload")?;
        Ok(Response::new(
            super::multipart::complete(&self.node, req.into_inner()).await?,
        ))
    }

    async fn copy_key(
        &self,
        req: Request<pb::CopyKeyRequest>,
    ) -> Result<Response<pb::CommitKeyReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "CopyKey")?;
        Ok(Response::new(
            super::multipart::copy_key(&self.node, req.into_inner()).await?,
        ))
    }

    async fn abort_multipart_upload(
        &self,
        req: Request<pb::AbortMultipartUploadRequest>,
    ) -> Result<Response<pb::AbortMultipartUploadReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "AbortMultipartUpload")?;
        Ok(Response::new(
            super::multipart::abort(&self.node, req.into_inner()).await?,
        ))
    }

    async fn list_multipart_parts(
        &self,
        req: Request<pb::ListMultipartPartsRequest>,
    ) -> Result<Response<pb::ListMultipartPartsReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "ListMultipartParts")?;
        Ok(Response::new(
            super::multipart::list_parts(&self.node, req.into_inner()).await?,
        ))
    }

    async fn list_multipart_uploads(
        &self,
        req: Request<pb::ListMultipartUploadsRequest>,
    ) -> Result<Response<pb::ListMultipartUploadsReply>, Status> {
        require_role(&req, MULTIPART_ROLES, "ListMultipartUploads")?;
        Ok(Response::new(
            super::multipart::list_uploads(&self.node, req.into_inner()).await?,
        ))
    }

    async fn revoke_s3_secret(
        &self,
        req: Request<pb::RevokeS3SecretRequest>,
    ) -> Result<Response<pb::RevokeS3SecretReply>, Status> {
        require_role(&req, &[Role::Admin], "RevokeS3Secret")?;
        self.node
            .revoke_s3_secret(req.into_inner().access_id)
            .await?;
        Ok(Response::new(pb::RevokeS3SecretReply {}))
    }
}
