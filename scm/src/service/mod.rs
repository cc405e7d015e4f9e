//! The SCM's gRPC services on the client port, over [`crate::node::ScmNode`]:
//! `ScmDatanode` (register, heartbeat) and `ScmBlock` (allocate, delete blocks) here,
//! `ScmAdmin` in [`admin`], and the SCM's hooks of the shared `Ring` service in [`ring`]. The only code that returns
//! `tonic::Status`: every refusal is a [`crate::error::ScmError`] mapped by its one
//! `From` (Raft refusals as the Raft layer words them, bad fields `INVALID_ARGUMENT`,
//! unknown ids `NOT_FOUND`, wrong states `FAILED_PRECONDITION`).
//!
//! Authorization (mutual TLS, docs/security.md), checked first, before anything changes:
//! the datanode protocol only from the certificate of the datanode the request names;
//! block allocation only from OMs; block deletion from OMs and admins.

pub mod admin;
pub mod ring;

use std::sync::Arc;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_block_server::ScmBlock;
use rozone_proto::scm::scm_datanode_server::ScmDatanode;
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

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
        self.0
            .register(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Status::from)
    }

    async fn heartbeat(
        &self,
        req: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatReply>, Status> {
        require_node(&req, Role::Datanode, req.get_ref().datanode_id, "Heartbeat")?;
        self.0
            .heartbeat(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Status::from)
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
        self.0
            .allocate_blocks(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Status::from)
    }

    async fn delete_blocks(
        &self,
        req: Request<pb::DeleteBlocksRequest>,
    ) -> Result<Response<pb::DeleteBlocksReply>, Status> {
        require_role(&req, &[Role::Om, Role::Admin], "DeleteBlocks")?;
        self.0
            .delete_blocks(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Status::from)
    }
}
