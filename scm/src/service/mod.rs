//! The SCM's gRPC services on the client port, over [`crate::node::ScmNode`]:
//! `ScmDatanode` (register, heartbeat) and `ScmBlock` (allocate, delete blocks) here,
//! `ScmAdmin` in [`admin`], `ScmEnroll` (its own port, join tokens) in [`enroll`], and the SCM's hooks of the shared `Ring` service in [`ring`].
//! Each handler checks the caller, decodes the request ([`crate::convert`]), calls the node
//! and encodes its answer. The only code that returns `tonic::Status`: every refusal is a
//! [`crate::error::ScmError`] mapped by its one `From` (Raft refusals as the Raft layer
//! words them, bad fields `INVALID_ARGUMENT`, unknown ids `NOT_FOUND`, wrong states
//! `FAILED_PRECONDITION`).
//!
//! Authorization (mutual TLS, docs/security.md), checked first, before anything changes:
//! the datanode protocol only from the certificate of the datanode the request names;
//! block allocation only from OMs; block deletion from OMs and admins; the block-token
//! secret keys only to OMs and datanodes (a datanode gets them in its register and
//! heartbeat replies too).

pub mod admin;
pub mod enroll;
pub mod ring;

use std::sync::Arc;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_block_server::ScmBlock;
use rozone_proto::scm::scm_datanode_server::ScmDatanode;
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::error::ScmError;
use crate::node::ScmNode;

pub struct DatanodeService(pub Arc<ScmNode>);

#[tonic::async_trait]
impl ScmDatanode for DatanodeService {
    async fn register(
        &self,
        req: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterReply>, Status> {
        let id = req.get_ref().datanode.as_ref().map_or(0, |d| d.id);
        require_node(&req, Role::Datanode, id, "Register")?;
        let r = convert::registration(req.get_ref()).map_err(ScmError::from)?;
        let reply = self.0.register(r).await?;
        let mut out = convert::registered(reply);
        out.secret_keys = convert::secret_keys(&self.0.secret_keys()?);
        Ok(Response::new(out))
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        require_node(&req, Role::Datanode, req.get_ref().datanode_id, "Heartbeat")?;
        let b = convert::heartbeat(req.get_ref()).map_err(ScmError::from)?;
        let reply = self.0.heartbeat(b).await?;
        let mut out = convert::beat_reply(&reply);
        out.secret_keys = convert::secret_keys(&self.0.secret_keys()?);
        Ok(Response::new(out))
    }
}

pub struct BlockService(pub Arc<ScmNode>);

#[tonic::async_trait]
impl ScmBlock for BlockService {
    async fn allocate_block(
        &self,
        req: Request<pb::AllocateBlockRequest>,
    ) -> Result<Response<pb::AllocateBlockReply>, Status> {
        require_role(&req, &[Role::Om], "AllocateBlock")?;
        let r = convert::block_request(req.into_inner());
        let blocks = self.0.allocate_blocks(r).await?;
        Ok(Response::new(convert::allocated_blocks(&blocks)))
    }

    async fn delete_blocks(
        &self,
        req: Request<pb::DeleteBlocksRequest>,
    ) -> Result<Response<pb::DeleteBlocksReply>, Status> {
        require_role(&req, &[Role::Om, Role::Admin], "DeleteBlocks")?;
        let txn_ids = self
            .0
            .delete_blocks(&convert::block_ids(req.get_ref()))
            .await?;
        Ok(Response::new(pb::DeleteBlocksReply { txn_ids }))
    }

    async fn get_secret_keys(
        &self,
        req: Request<pb::GetSecretKeysRequest>,
    ) -> Result<Response<pb::GetSecretKeysReply>, Status> {
        require_role(&req, &[Role::Om, Role::Datanode], "GetSecretKeys")?;
        let keys = self.0.secret_keys()?;
        Ok(Response::new(pb::GetSecretKeysReply {
            keys: convert::secret_keys(&keys),
        }))
    }
}
