//! The SCM's gRPC services on the client port, over [`crate::node::ScmNode`]:
//! `ScmDatanode` (register, heartbeat) and `ScmBlock` (allocate, delete blocks) here,
//! `ScmAdmin` in [`admin`], `ScmRing` in [`ring`]. The only code that returns
//! `tonic::Status`: every refusal is a [`crate::error::ScmError`] mapped by its one
//! `From` (Raft refusals as the Raft layer words them, bad fields `INVALID_ARGUMENT`,
//! unknown ids `NOT_FOUND`, wrong states `FAILED_PRECONDITION`).

pub mod admin;
pub mod ring;

use std::sync::Arc;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_block_server::ScmBlock;
use rozone_proto::scm::scm_datanode_server::ScmDatanode;
use tonic::{Request, Response, Status};

use crate::node::ScmNode;

pub struct DatanodeService(pub Arc<ScmNode>);

#[tonic::async_trait]
impl ScmDatanode for DatanodeService {
    async fn register(
        &self,
        req: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterReply>, Status> {
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
        self.0
            .delete_blocks(req.into_inner())
            .await
            .map(Response::new)
            .map_err(Status::from)
    }
}
