//! The Container service (container port): chunk and block I/O for clients. Writes go to
//! the pipeline's ready leader, which runs the leader's write stage
//! ([`crate::pipeline::leader`]) and commits one log entry per write; reads are served by
//! any replica from its committed data. Handlers convert, call, and convert back.
//!
//! Authorization (mutual TLS): only data clients (`client`, `admin`, `s3g` certificates),
//! and for every chunk and block call a block token from the OM for that block and mode
//! ([`crate::tokens`]), checked before anything is read or written. `GetContainer` and
//! `ListBlocks` (container-level, used by operators) take no token.

use std::sync::Arc;

use futures::StreamExt;
use rozone_proto::datanode as pb;
use rozone_proto::datanode::container_server::Container;
use rozone_rpc::auth::require_role;
use rozone_rpc::block_token::{self, AccessMode};
use rozone_rpc::Role;
use rozone_types::BlockId;
use tonic::{Request, Response, Status, Streaming};

use super::node;
use crate::convert::{block_from, checksum_from, chunk_from, scheme_from};
use crate::error::DnError;
use crate::node::{Node, NodeRef};
use crate::pipeline::Pipeline;
use crate::store::blocking;
use crate::types::MAX_CHUNK;

/// Who may read and write chunks on the container port (each call also needs the block's
/// token on a secure cluster).
const DATA_ROLES: &[Role] = &[Role::Client, Role::Admin, Role::S3g];
/// Who may read a container's descriptor and list its blocks: operators only. These name
/// no block the caller holds a token for, so a data client's certificate would otherwise
/// let it map every block id and length of the datanode.
const METADATA_ROLES: &[Role] = &[Role::Admin];

pub struct ContainerService {
    pub node: NodeRef,
}

/// The pipeline a write goes to, if this member is its ready leader and it is healthy.
fn writable(node: &Node, id: u64) -> Result<Arc<Pipeline>, DnError> {
    let p = node.pipelines.get(id)?;
    p.check_writable()?;
    Ok(p)
}

/// Refuses `req` unless it carries a block token for `block` (request field `field`)
/// granting `mode`. Without token checks (an insecure datanode) the field is left to the
/// handler, so a bad request is refused exactly as before.
async fn authorize<T>(
    node: &Node,
    req: &Request<T>,
    block: Option<pb::BlockId>,
    field: &str,
    mode: AccessMode,
) -> Result<(), DnError> {
    if !node.tokens.enabled() {
        return Ok(());
    }
    let block = BlockId::from_field(block, field)?;
    node.tokens
        .check(&block_token::from_request(req), block, mode)
        .await
}

#[tonic::async_trait]
impl Container for ContainerService {
    async fn write_chunk(
        &self,
        req: Request<pb::WriteChunkRequest>,
    ) -> Result<Response<pb::WriteChunkReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        let block = req.get_ref().block_id;
        authorize(&node, &req, block, "block_id", AccessMode::WRITE).await?;
        Ok(Response::new(write_chunk(&node, req.into_inner()).await?))
    }

    async fn put_block(
        &self,
        req: Request<pb::PutBlockRequest>,
    ) -> Result<Response<pb::PutBlockReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        let block = req.get_ref().block.as_ref().and_then(|b| b.block_id);
        authorize(&node, &req, block, "block.block_id", AccessMode::WRITE).await?;
        Ok(Response::new(put_block(&node, req.into_inner()).await?))
    }

    async fn stream_block(
        &self,
        req: Request<Streaming<pb::StreamBlockRequest>>,
    ) -> Result<Response<pb::StreamBlockReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        // The block is named by the stream's header: checked once that has arrived.
        let token = block_token::from_request(&req);
        Ok(Response::new(
            stream_block(&node, &token, req.into_inner()).await?,
        ))
    }

    async fn get_block(
        &self,
        req: Request<pb::GetBlockRequest>,
    ) -> Result<Response<pb::GetBlockReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        let block = req.get_ref().block_id;
        authorize(&node, &req, block, "block_id", AccessMode::READ).await?;
        Ok(Response::new(get_block(&node, req.into_inner()).await?))
    }

    async fn read_chunk(
        &self,
        req: Request<pb::ReadChunkRequest>,
    ) -> Result<Response<pb::ReadChunkReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        let block = req.get_ref().block_id;
        authorize(&node, &req, block, "block_id", AccessMode::READ).await?;
        Ok(Response::new(read_chunk(&node, req.into_inner()).await?))
    }

    async fn get_committed_block_length(
        &self,
        req: Request<pb::GetCommittedBlockLengthRequest>,
    ) -> Result<Response<pb::GetCommittedBlockLengthReply>, Status> {
        require_role(&req, DATA_ROLES, "container I/O")?;
        let node = node(&self.node)?;
        let block = req.get_ref().block_id;
        authorize(&node, &req, block, "block_id", AccessMode::READ).await?;
        Ok(Response::new(
            get_committed_block_length(&node, req.into_inner()).await?,
        ))
    }

    async fn get_container(
        &self,
        req: Request<pb::GetContainerRequest>,
    ) -> Result<Response<pb::GetContainerReply>, Status> {
        require_role(&req, METADATA_ROLES, "container metadata")?;
        let node = node(&self.node)?;
        Ok(Response::new(get_container(&node, req.into_inner())?))
    }

    async fn list_blocks(
        &self,
        req: Request<pb::ListBlocksRequest>,
    ) -> Result<Response<pb::ListBlocksReply>, Status> {
        require_role(&req, METADATA_ROLES, "container metadata")?;
        let node = node(&self.node)?;
        Ok(Response::new(list_blocks(&node, req.into_inner()).await?))
    }
}

async fn write_chunk(
    node: &Node,
    r: pb::WriteChunkRequest,
) -> Result<pb::WriteChunkReply, DnError> {
    let block = BlockId::from_field(r.block_id, "block_id")?;
    let chunk = chunk_from(r.chunk, "chunk")?;
    let p = writable(node, r.pipeline_id)?;
    let bcsid = p.write_chunk(block, chunk, r.data).await?;
    Ok(pb::WriteChunkReply { bcsid })
}

async fn put_block(node: &Node, r: pb::PutBlockRequest) -> Result<pb::PutBlockReply, DnError> {
    let p = writable(node, r.pipeline_id)?;
    let block = block_from(r.block, "block")?;
    let (bcsid, length) = p.put_block(block).await?;
    Ok(pb::PutBlockReply {
        committed_length: length,
        bcsid,
    })
}

/// A stream is its header, the block's bytes in any number of pieces, and an end message
/// with the length and checksums the client computed; nothing is stored unless all agree.
async fn stream_block(
    node: &Node,
    token: &Result<Vec<u8>, block_token::TokenError>,
    mut s: Streaming<pb::StreamBlockRequest>,
) -> Result<pb::StreamBlockReply, Status> {
    use pb::stream_block_request::Msg;
    let header = match s.next().await {
        Some(Ok(pb::StreamBlockRequest {
            msg: Some(Msg::Header(h)),
        })) => h,
        Some(Err(e)) => return Err(e),
        _ => return Err(DnError::invalid("a stream must start with its header").into()),
    };
    let block = BlockId::from_field(header.block_id, "header.block_id").map_err(DnError::from)?;
    node.tokens.check(token, block, AccessMode::WRITE).await?;
    let (kind, bpc) = scheme_from(
        header.checksum_type,
        header.bytes_per_checksum,
        "header.checksum_type",
    )?;
    let p = writable(node, header.pipeline_id)?;
    let mut w = p.begin_stream(block, kind, bpc).await?;
    let end = loop {
        match s.next().await {
            Some(Ok(pb::StreamBlockRequest {
                msg: Some(Msg::Data(d)),
            })) => w.append(&d)?,
            Some(Ok(pb::StreamBlockRequest {
                msg: Some(Msg::End(e)),
            })) => break e,
            Some(Ok(_)) => {
                return Err(DnError::invalid(
                    "stream: unexpected message (a second header, or empty)",
                )
                .into())
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(DnError::invalid(
                    "stream ended without its end message; nothing stored",
                )
                .into())
            }
        }
    };
    if end.length != w.len() {
        return Err(DnError::invalid(format!(
            "stream end says {} bytes but {} arrived; nothing stored",
            end.length,
            w.len()
        ))
        .into());
    }
    if w.is_empty() {
        return Err(DnError::invalid("an empty stream stores nothing").into());
    }
    let declared = checksum_from(end.checksum, "end.checksum")?;
    let done = w.finish(declared, header.put_block).await?;
    Ok(pb::StreamBlockReply {
        chunk: Some((&done.chunk).into()),
        bcsid: done.bcsid,
        block: done.block.as_ref().map(Into::into),
    })
}

async fn get_block(node: &Node, r: pb::GetBlockRequest) -> Result<pb::GetBlockReply, DnError> {
    let id = BlockId::from_field(r.block_id, "block_id")?;
    let store = node.store.clone();
    let b = blocking(move || store.get_block(id)).await?;
    Ok(pb::GetBlockReply {
        block: Some((&b).into()),
    })
}

async fn read_chunk(node: &Node, r: pb::ReadChunkRequest) -> Result<pb::ReadChunkReply, DnError> {
    let id = BlockId::from_field(r.block_id, "block_id")?;
    if r.len > MAX_CHUNK {
        return Err(DnError::invalid(format!(
            "len {} is above the {MAX_CHUNK} byte read limit",
            r.len
        )));
    }
    let store = node.store.clone();
    let (segs, bcsid) = blocking(move || store.read(id, r.offset, r.len)).await?;
    Ok(pb::ReadChunkReply {
        segments: segs.into_iter().map(Into::into).collect(),
        bcsid,
    })
}

async fn get_committed_block_length(
    node: &Node,
    r: pb::GetCommittedBlockLengthRequest,
) -> Result<pb::GetCommittedBlockLengthReply, DnError> {
    let id = BlockId::from_field(r.block_id, "block_id")?;
    let store = node.store.clone();
    let b = blocking(move || store.get_block(id)).await?;
    Ok(pb::GetCommittedBlockLengthReply {
        length: b.length,
        bcsid: b.bcsid,
    })
}

fn get_container(
    node: &Node,
    r: pb::GetContainerRequest,
) -> Result<pb::GetContainerReply, DnError> {
    let (vi, d) = node.store.live(r.container_id)?;
    let dir = node.store.volume_root(vi).display().to_string();
    Ok(pb::GetContainerReply {
        container: Some(d.to_proto(&dir)),
    })
}

async fn list_blocks(
    node: &Node,
    r: pb::ListBlocksRequest,
) -> Result<pb::ListBlocksReply, DnError> {
    let count = if r.count == 0 {
        1000
    } else {
        r.count.min(10_000)
    } as usize;
    let store = node.store.clone();
    let blocks =
        blocking(move || store.list_blocks(r.container_id, r.start_local_id, count)).await?;
    Ok(pb::ListBlocksReply {
        blocks: blocks.iter().map(Into::into).collect(),
    })
}
