//! The PipelineData service (pipeline Raft port): the leader pushes chunk bytes to a
//! follower's write stage ([`crate::pipeline::follower`]); a follower missing bytes for an
//! entry pulls them from another member. Only datanode certificates may call (mutual TLS).

use rozone_proto::datanode as pb;
use rozone_proto::datanode::pipeline_data_server::PipelineData;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use rozone_types::BlockId;
use tonic::{Request, Response, Status};

use super::node;
use crate::clients::MAX_MESSAGE;
use crate::convert::chunk_from;
use crate::error::DnError;
use crate::node::{Node, NodeRef};
use crate::store::blocking;
use crate::types::block_range_end;

pub struct PeerService {
    pub node: NodeRef,
}

#[tonic::async_trait]
impl PipelineData for PeerService {
    async fn push_chunk(
        &self,
        req: Request<pb::PushChunkRequest>,
    ) -> Result<Response<pb::PushChunkReply>, Status> {
        require_role(&req, &[Role::Datanode], "pipeline data")?;
        let node = node(&self.node)?;
        push_chunk(&node, req.into_inner()).await?;
        Ok(Response::new(pb::PushChunkReply {}))
    }

    async fn pull_chunk(
        &self,
        req: Request<pb::PullChunkRequest>,
    ) -> Result<Response<pb::PullChunkReply>, Status> {
        require_role(&req, &[Role::Datanode], "pipeline data")?;
        let node = node(&self.node)?;
        Ok(Response::new(pull_chunk(&node, req.into_inner()).await?))
    }
}

async fn push_chunk(node: &Node, r: pb::PushChunkRequest) -> Result<(), DnError> {
    let me = node.pipelines.node_id;
    if r.target != me {
        return Err(DnError::invalid(format!(
            "push for datanode {} reached datanode {me}",
            r.target
        )));
    }
    let block = BlockId::from_field(r.block_id, "block_id")?;
    let chunk = chunk_from(r.chunk, "chunk")?;
    let p = node.pipelines.get(r.pipeline_id)?;
    p.accept_push(block, chunk, r.data).await
}

async fn pull_chunk(node: &Node, r: pb::PullChunkRequest) -> Result<pb::PullChunkReply, DnError> {
    let block = BlockId::from_field(r.block_id, "block_id")?;
    let c = r
        .chunk
        .ok_or_else(|| DnError::invalid("chunk is missing"))?;
    if c.len == 0 || c.len > MAX_MESSAGE as u64 / 2 {
        return Err(DnError::invalid(format!(
            "chunk.len {} is out of bounds",
            c.len
        )));
    }
    block_range_end("chunk", c.offset, c.len)?;
    let store = node.store.clone();
    let data = blocking(move || store.read_raw(block, c.offset, c.len)).await?;
    Ok(pb::PullChunkReply { data })
}
