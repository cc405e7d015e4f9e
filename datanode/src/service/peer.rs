//! The PipelineData service (pipeline Raft port): the leader pushes chunk bytes to a
//! follower's write stage; a follower missing bytes for an entry pulls them.

use rozone_proto::datanode as pb;
use rozone_proto::datanode::pipeline_data_server::PipelineData;
use tonic::{Request, Response, Status};

use super::blocking;
use crate::error::{to_status, DnError};
use crate::node::PartsRef;
use crate::types::{block_id_from, chunk_from};

pub struct PeerService {
    pub parts: PartsRef,
}

#[tonic::async_trait]
impl PipelineData for PeerService {
    async fn push_chunk(
        &self,
        req: Request<pb::PushChunkRequest>,
    ) -> Result<Response<pb::PushChunkReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        if r.target != parts.pipelines.node_id {
            return Err(to_status(DnError::invalid(format!(
                "push for datanode {} reached datanode {}",
                r.target, parts.pipelines.node_id
            ))));
        }
        let block = block_id_from(r.block_id, "block_id").map_err(to_status)?;
        let chunk = chunk_from(r.chunk, "chunk").map_err(to_status)?;
        let p = parts.pipelines.get(r.pipeline_id).map_err(to_status)?;
        let (store, pid, data) = (parts.store.clone(), p.id, r.data);
        blocking(move || store.write_chunk(pid, block, &chunk, &data)).await?;
        Ok(Response::new(pb::PushChunkReply {}))
    }

    async fn pull_chunk(
        &self,
        req: Request<pb::PullChunkRequest>,
    ) -> Result<Response<pb::PullChunkReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        let block = block_id_from(r.block_id, "block_id").map_err(to_status)?;
        let c = r
            .chunk
            .ok_or_else(|| to_status(DnError::invalid("chunk is missing")))?;
        if c.len == 0 || c.len > crate::clients::MAX_MESSAGE as u64 / 2 {
            return Err(to_status(DnError::invalid(format!(
                "chunk.len {} is out of bounds",
                c.len
            ))));
        }
        let store = parts.store.clone();
        let data = blocking(move || store.read_raw(block, c.offset, c.len)).await?;
        Ok(Response::new(pb::PullChunkReply { data }))
    }
}
