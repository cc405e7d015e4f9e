//! The typed datanode client: chunk writes, block commits and the data stream to a
//! pipeline's leader, and verified reads from any replica. One lazily connected channel per
//! datanode address, shared by every call. Every chunk and block call carries the block's
//! token from the OM ([`rozone_rpc::block_token::with_token`]); datanodes of a secure
//! cluster refuse calls without a valid one.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use rozone_proto::datanode as pb;
use rozone_proto::datanode::container_client::ContainerClient;
use rozone_rpc::block_token::with_token;
use tonic::transport::Channel;
use tonic::{Request, Status};

use crate::error::{ClientError, Result};
use crate::types::BlockId;
use rozone_types::checksum::{verify_wire, ChecksumData, ChecksumType};

/// The window the client writes with: small enough that a read of a few KiB verifies
/// little more than it asked for, large enough that the list stays short.
pub const BYTES_PER_CHECKSUM: u32 = 16 * 1024;

/// CRC32 checksums of `data` as the client writes them.
fn checksums(data: &[u8], bpc: u32) -> pb::ChecksumData {
    ChecksumData::compute(ChecksumType::Crc32, bpc, data).into()
}

/// Largest message the client sends or accepts: a data piece plus its envelope.
pub const MAX_MESSAGE: usize = 64 << 20;

/// Clients of every datanode this process talked to.
pub struct Datanodes {
    channels: Mutex<HashMap<String, Channel>>,
    factory: rozone_rpc::ChannelFactory,
}

impl Datanodes {
    /// Clients whose channels come from `factory`.
    pub fn new(factory: rozone_rpc::ChannelFactory) -> Self {
        Self {
            channels: Mutex::new(HashMap::new()),
            factory,
        }
    }

    /// The container service of the datanode at `addr`.
    pub fn client(&self, addr: &str) -> Result<ContainerClient<Channel>> {
        let mut map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let ch = match map.get(addr) {
            Some(ch) => ch.clone(),
            None => {
                let ch = self.factory.lazy(addr)?;
                map.insert(addr.to_string(), ch.clone());
                ch
            }
        };
        Ok(ContainerClient::new(ch)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }

    /// WriteChunk of `data` at `offset` in a block, then nothing else: the caller commits the
    /// chunk list with [`Datanodes::put_block`]. `token`: the block's read+write token.
    pub async fn write_chunk(
        &self,
        addr: &str,
        pipeline_id: u64,
        block: BlockId,
        token: &[u8],
        offset: u64,
        data: Bytes,
    ) -> std::result::Result<pb::ChunkInfo, Status> {
        let chunk = pb::ChunkInfo {
            offset,
            len: data.len() as u64,
            checksum: Some(checksums(&data, BYTES_PER_CHECKSUM)),
        };
        let mut c = self
            .client(addr)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let req = pb::WriteChunkRequest {
            pipeline_id,
            block_id: Some(block.into()),
            chunk: Some(chunk.clone()),
            data: data.to_vec(),
        };
        c.write_chunk(with_token(Request::new(req), token)).await?;
        Ok(chunk)
    }

    /// Commits a block made of `chunks`.
    pub async fn put_block(
        &self,
        addr: &str,
        pipeline_id: u64,
        block: BlockId,
        token: &[u8],
        chunks: Vec<pb::ChunkInfo>,
    ) -> std::result::Result<u64, Status> {
        let length = chunks.iter().map(|c| c.len).sum();
        let mut c = self
            .client(addr)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let req = pb::PutBlockRequest {
            pipeline_id,
            block: Some(pb::BlockData {
                block_id: Some(block.into()),
                chunks,
                length,
                bcsid: 0,
            }),
        };
        let r = c.put_block(with_token(Request::new(req), token)).await?;
        Ok(r.into_inner().committed_length)
    }

    /// Streams a whole block in `piece`-sized messages and commits it in the same log entry.
    pub async fn stream_block(
        &self,
        addr: &str,
        pipeline_id: u64,
        block: BlockId,
        token: &[u8],
        data: Bytes,
        piece: usize,
    ) -> std::result::Result<u64, Status> {
        let sum = checksums(&data, BYTES_PER_CHECKSUM);
        let len = data.len() as u64;
        let mut msgs = Vec::with_capacity(data.len() / piece.max(1) + 2);
        msgs.push(pb::StreamBlockRequest {
            msg: Some(pb::stream_block_request::Msg::Header(pb::StreamHeader {
                pipeline_id,
                block_id: Some(block.into()),
                checksum_type: pb::ChecksumType::Crc32 as i32,
                bytes_per_checksum: BYTES_PER_CHECKSUM,
                put_block: true,
            })),
        });
        let mut off = 0;
        while off < data.len() {
            let end = (off + piece.max(1)).min(data.len());
            msgs.push(pb::StreamBlockRequest {
                msg: Some(pb::stream_block_request::Msg::Data(data[off..end].to_vec())),
            });
            off = end;
        }
        msgs.push(pb::StreamBlockRequest {
            msg: Some(pb::stream_block_request::Msg::End(pb::StreamEnd {
                checksum: Some(sum),
                length: len,
            })),
        });
        let mut c = self
            .client(addr)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let req = with_token(Request::new(tokio_stream::iter(msgs)), token);
        let r = c.stream_block(req).await?.into_inner();
        Ok(r.block.map(|b| b.length).unwrap_or(len))
    }

    /// Reads `[offset, offset + len)` of a committed block from the replica at `addr`,
    /// verifying every byte against the stored checksums. `token`: the block's read token.
    /// The bytes come as the pieces the replica sent them in (slices of the received
    /// message, in order, together exactly `len` bytes).
    pub async fn read_range(
        &self,
        addr: &str,
        block: BlockId,
        token: &[u8],
        offset: u64,
        len: u64,
    ) -> Result<Vec<Bytes>> {
        let mut c = self.client(addr)?;
        let req = pb::ReadChunkRequest {
            block_id: Some(block.into()),
            offset,
            len,
        };
        let r = c
            .read_chunk(with_token(Request::new(req), token))
            .await
            .map_err(|s| ClientError::status("datanode", s))?
            .into_inner();
        assemble(block, offset, len, r.segments)
    }
}

/// Verifies each segment and slices `[offset, offset + len)` out of them, in order, without
/// copying; every byte must be covered.
pub fn assemble(
    block: BlockId,
    offset: u64,
    len: u64,
    mut segments: Vec<pb::ReadSegment>,
) -> Result<Vec<Bytes>> {
    segments.sort_by_key(|s| s.offset);
    let end = offset.checked_add(len).ok_or_else(|| {
        ClientError::Data(format!("block {block}: range {offset}+{len} overflows"))
    })?;
    let mut out = Vec::with_capacity(segments.len());
    let mut next = offset;
    for s in segments {
        verify_wire(&s.data, s.checksum.as_ref())
            .map_err(|e| ClientError::Data(format!("block {block} at {}: {e}", s.offset)))?;
        let s_end = s.offset.saturating_add(s.data.len() as u64);
        if s.offset > next || s_end <= next {
            continue;
        }
        let from = (next - s.offset) as usize;
        let to = (s_end.min(end) - s.offset) as usize;
        out.push(s.data.slice(from..to));
        next = s_end.min(end);
        if next == end {
            break;
        }
    }
    if next != end {
        return Err(ClientError::Data(format!(
            "block {block}: replica returned bytes up to {next}, asked up to {end}"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(offset: u64, data: &[u8]) -> pb::ReadSegment {
        pb::ReadSegment {
            offset,
            data: Bytes::copy_from_slice(data),
            checksum: Some(checksums(data, 4)),
        }
    }

    #[test]
    fn assembles_widened_segments_and_rejects_gaps_and_corruption() {
        let b = BlockId {
            container_id: 1,
            local_id: 2,
        };
        let data: Vec<u8> = (0..32u8).collect();
        // Asked for [6, 20): segments widened to windows [4, 12) and [12, 24).
        let got = assemble(b, 6, 14, vec![seg(12, &data[12..24]), seg(4, &data[4..12])]).unwrap();
        assert_eq!(got.concat(), &data[6..20]);
        // One segment exactly the range: handed over whole.
        let got = assemble(b, 4, 8, vec![seg(4, &data[4..12])]).unwrap();
        assert_eq!(got.concat(), &data[4..12]);
        assert!(assemble(b, 6, 14, vec![seg(4, &data[4..12])]).is_err());
        let mut bad = seg(4, &data[4..12]);
        let mut v = bad.data.to_vec();
        v[0] ^= 0xff;
        bad.data = v.into();
        let err = assemble(b, 6, 2, vec![bad]).unwrap_err().to_string();
        assert!(err.contains("checksum"), "{err}");
    }
}
