//! The Container service (container port): chunk and block I/O for clients. Writes go to
//! the pipeline leader: write stage here and on the followers, then one log entry per
//! commit; reads are served by any replica from its committed data.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rozone_proto::datanode as pb;
use rozone_proto::datanode::container_server::Container;
use tonic::{Request, Response, Status, Streaming};

use super::blocking;
use crate::checksum::{ChecksumData, StreamSummer};
use crate::error::{to_status, Code, DnError};
use crate::node::{Parts, PartsRef};
use crate::pipeline::{Pipeline, PipelineRequest};
use crate::types::{
    block_from, block_id_from, chunk_from, scheme_from, BlockData, BlockId, ChunkInfo,
};

pub struct ContainerService {
    pub parts: PartsRef,
}

impl ContainerService {
    fn pipeline(&self, parts: &Parts, id: u64) -> Result<Arc<Pipeline>, Status> {
        let p = parts.pipelines.get(id).map_err(to_status)?;
        p.check_writable()?;
        Ok(p)
    }

    /// Pushes chunk bytes to the followers (best effort: one that misses them pulls them
    /// before appending the entry).
    async fn push(
        &self,
        parts: &Parts,
        p: &Pipeline,
        block: BlockId,
        chunk: &ChunkInfo,
        data: &[u8],
    ) {
        let me = parts.pipelines.node_id;
        let pushes = p.state.members.iter().filter(|m| m.id != me).map(|m| {
            let req = pb::PushChunkRequest {
                pipeline_id: p.id,
                block_id: Some(block.into()),
                chunk: Some(chunk.into()),
                data: data.to_vec(),
                target: m.id,
            };
            let client = parts.clients.pipeline_data(&m.raft_addr);
            async move {
                let mut c = client.map_err(Status::internal)?;
                tokio::time::timeout(Duration::from_secs(10), c.push_chunk(req))
                    .await
                    .map_err(|_| Status::deadline_exceeded("push timed out"))?
                    .map(|_| ())
                    .inspect_err(|s| {
                        tracing::debug!(member = m.id, error = %s.message(), "chunk push failed; the member will pull");
                    })
            }
        });
        let _ = futures::future::join_all(pushes).await;
    }
}

fn bad(e: DnError) -> Status {
    to_status(e)
}

#[tonic::async_trait]
impl Container for ContainerService {
    async fn write_chunk(
        &self,
        req: Request<pb::WriteChunkRequest>,
    ) -> Result<Response<pb::WriteChunkReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        let block = block_id_from(r.block_id, "block_id").map_err(bad)?;
        let chunk = chunk_from(r.chunk, "chunk").map_err(bad)?;
        let p = self.pipeline(&parts, r.pipeline_id)?;
        let data = Arc::new(r.data);
        let (store, c, d, pid) = (parts.store.clone(), chunk.clone(), data.clone(), p.id);
        blocking(move || store.write_chunk(pid, block, &c, &d)).await?;
        self.push(&parts, &p, block, &chunk, &data).await;
        let (bcsid, _) = p
            .propose(PipelineRequest::WriteChunk { block, chunk })
            .await?;
        Ok(Response::new(pb::WriteChunkReply { bcsid }))
    }

    async fn put_block(
        &self,
        req: Request<pb::PutBlockRequest>,
    ) -> Result<Response<pb::PutBlockReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        let p = self.pipeline(&parts, r.pipeline_id)?;
        let block = block_from(r.block, "block").map_err(bad)?;
        let (store, b) = (parts.store.clone(), block.clone());
        blocking(move || store.check_block(&b, None)).await?;
        let (bcsid, length) = p.propose(PipelineRequest::PutBlock { block }).await?;
        Ok(Response::new(pb::PutBlockReply {
            committed_length: length,
            bcsid,
        }))
    }

    async fn stream_block(
        &self,
        req: Request<Streaming<pb::StreamBlockRequest>>,
    ) -> Result<Response<pb::StreamBlockReply>, Status> {
        let parts = self.parts.get()?;
        let mut s = req.into_inner();
        let header = match s.next().await {
            Some(Ok(pb::StreamBlockRequest {
                msg: Some(pb::stream_block_request::Msg::Header(h)),
            })) => h,
            Some(Err(e)) => return Err(e),
            _ => return Err(bad(DnError::invalid("a stream must start with its header"))),
        };
        let block = block_id_from(header.block_id, "header.block_id").map_err(bad)?;
        let (kind, bpc) =
            scheme_from(header.checksum_type, header.bytes_per_checksum).map_err(bad)?;
        let p = self.pipeline(&parts, header.pipeline_id)?;
        let store = parts.store.clone();
        let mut staged = blocking(move || store.stage_stream(block)).await?;
        let mut sum = StreamSummer::new(kind, bpc);
        let end = loop {
            match s.next().await {
                Some(Ok(pb::StreamBlockRequest {
                    msg: Some(pb::stream_block_request::Msg::Data(d)),
                })) => {
                    if sum.len() + d.len() as u64 > crate::types::MAX_BLOCK {
                        return Err(bad(DnError::new(
                            Code::OutOfRange,
                            format!(
                                "stream of block {block} exceeds the {} byte block limit",
                                crate::types::MAX_BLOCK
                            ),
                        )));
                    }
                    sum.update(&d);
                    staged.append(&d).map_err(bad)?;
                }
                Some(Ok(pb::StreamBlockRequest {
                    msg: Some(pb::stream_block_request::Msg::End(e)),
                })) => break e,
                Some(Ok(_)) => {
                    return Err(bad(DnError::invalid(
                        "stream: unexpected message (a second header, or empty)",
                    )))
                }
                Some(Err(e)) => return Err(e),
                None => {
                    return Err(bad(DnError::invalid(
                        "stream ended without its end message; nothing stored",
                    )))
                }
            }
        };
        if end.length != sum.len() {
            return Err(bad(DnError::invalid(format!(
                "stream end says {} bytes but {} arrived; nothing stored",
                end.length,
                sum.len()
            ))));
        }
        if sum.is_empty() {
            return Err(bad(DnError::invalid("an empty stream stores nothing")));
        }
        let declared: ChecksumData = end
            .checksum
            .ok_or_else(|| bad(DnError::invalid("end.checksum is missing")))?
            .try_into()
            .map_err(bad)?;
        let len = sum.len();
        let computed = sum.finish();
        if declared != computed {
            return Err(bad(DnError::new(Code::ChecksumMismatch, format!("stream of block {block}: {len} bytes do not match the declared checksums; nothing stored"))));
        }
        let chunk = ChunkInfo {
            offset: 0,
            len,
            checksum: computed,
        };
        let (store, c, pid) = (parts.store.clone(), chunk.clone(), p.id);
        blocking(move || store.install_stream(pid, block, &c, staged)).await?;
        let reply = if header.put_block {
            let b = BlockData {
                id: block,
                chunks: vec![chunk.clone()],
                length: len,
                bcsid: 0,
            };
            let (bcsid, _) = p
                .propose(PipelineRequest::StreamWithBlock { block: b.clone() })
                .await?;
            pb::StreamBlockReply {
                chunk: Some((&chunk).into()),
                bcsid,
                block: Some((&BlockData { bcsid, ..b }).into()),
            }
        } else {
            let (bcsid, _) = p
                .propose(PipelineRequest::StreamInit {
                    block,
                    chunk: chunk.clone(),
                })
                .await?;
            pb::StreamBlockReply {
                chunk: Some((&chunk).into()),
                bcsid,
                block: None,
            }
        };
        Ok(Response::new(reply))
    }

    async fn get_block(
        &self,
        req: Request<pb::GetBlockRequest>,
    ) -> Result<Response<pb::GetBlockReply>, Status> {
        let parts = self.parts.get()?;
        let id = block_id_from(req.into_inner().block_id, "block_id").map_err(bad)?;
        let store = parts.store.clone();
        let b = blocking(move || store.get_block(id)).await?;
        Ok(Response::new(pb::GetBlockReply {
            block: Some((&b).into()),
        }))
    }

    async fn read_chunk(
        &self,
        req: Request<pb::ReadChunkRequest>,
    ) -> Result<Response<pb::ReadChunkReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        let id = block_id_from(r.block_id, "block_id").map_err(bad)?;
        if r.len > crate::types::MAX_CHUNK {
            return Err(bad(DnError::invalid(format!(
                "len {} is above the {} byte read limit",
                r.len,
                crate::types::MAX_CHUNK
            ))));
        }
        let store = parts.store.clone();
        let (segs, bcsid) = blocking(move || store.read(id, r.offset, r.len)).await?;
        Ok(Response::new(pb::ReadChunkReply {
            segments: segs
                .into_iter()
                .map(|s| pb::ReadSegment {
                    offset: s.offset,
                    checksum: Some((&s.checksum).into()),
                    data: s.data,
                })
                .collect(),
            bcsid,
        }))
    }

    async fn get_committed_block_length(
        &self,
        req: Request<pb::GetCommittedBlockLengthRequest>,
    ) -> Result<Response<pb::GetCommittedBlockLengthReply>, Status> {
        let parts = self.parts.get()?;
        let id = block_id_from(req.into_inner().block_id, "block_id").map_err(bad)?;
        let store = parts.store.clone();
        let b = blocking(move || store.get_block(id)).await?;
        Ok(Response::new(pb::GetCommittedBlockLengthReply {
            length: b.length,
            bcsid: b.bcsid,
        }))
    }

    async fn get_container(
        &self,
        req: Request<pb::GetContainerRequest>,
    ) -> Result<Response<pb::GetContainerReply>, Status> {
        let parts = self.parts.get()?;
        let cid = req.into_inner().container_id;
        let (vi, d) = parts.store.live(cid).map_err(bad)?;
        let dir = parts.store.volume_root(vi).display().to_string();
        Ok(Response::new(pb::GetContainerReply {
            container: Some(d.to_proto(&dir)),
        }))
    }

    async fn list_blocks(
        &self,
        req: Request<pb::ListBlocksRequest>,
    ) -> Result<Response<pb::ListBlocksReply>, Status> {
        let parts = self.parts.get()?;
        let r = req.into_inner();
        let count = if r.count == 0 {
            1000
        } else {
            r.count.min(10_000)
        } as usize;
        let store = parts.store.clone();
        let blocks =
            blocking(move || store.list_blocks(r.container_id, r.start_local_id, count)).await?;
        Ok(Response::new(pb::ListBlocksReply {
            blocks: blocks.iter().map(Into::into).collect(),
        }))
    }
}
