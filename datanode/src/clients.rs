//! gRPC channels to other datanodes (pipeline peers, replication sources), one per address,
//! connected lazily and shared, built by this process's channel factory (mutual TLS with
//! its datanode certificate unless insecure). [`PipelinePeer`] calls another member of a
//! pipeline with domain values: the push and pull requests are encoded here, so the
//! pipeline stages never build a protobuf message.

use std::collections::HashMap;
use std::sync::Mutex;

use rozone_proto::datanode as pb;
use rozone_proto::datanode::pipeline_data_client::PipelineDataClient;
use rozone_proto::datanode::replication_client::ReplicationClient;
use rozone_rpc::ChannelFactory;
use rozone_types::{BlockId, DatanodeId, PipelineId};
use tonic::transport::Channel;

use crate::types::ChunkInfo;

/// Largest message between datanodes (a chunk plus framing).
pub const MAX_MESSAGE: usize = 64 << 20;

pub struct Clients {
    channels: Mutex<HashMap<String, Channel>>,
    factory: ChannelFactory,
}

impl Clients {
    /// No channel yet; each will come from `factory`.
    pub fn new(factory: ChannelFactory) -> Self {
        Self {
            channels: Mutex::default(),
            factory,
        }
    }

    /// The factory channels come from (the pipelines' Raft channels use it too).
    pub fn factory(&self) -> &ChannelFactory {
        &self.factory
    }

    pub fn channel(&self, addr: &str) -> Result<Channel, String> {
        let mut g = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(addr) {
            return Ok(c.clone());
        }
        let c = self.factory.lazy(addr).map_err(|e| e.to_string())?;
        g.insert(addr.to_string(), c.clone());
        Ok(c)
    }

    /// The pipeline member whose peer service listens at `addr`.
    pub fn pipeline_peer(&self, addr: &str) -> Result<PipelinePeer, String> {
        let client = PipelineDataClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        Ok(PipelinePeer { client })
    }

    pub fn replication(&self, addr: &str) -> Result<ReplicationClient<Channel>, String> {
        Ok(ReplicationClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }
}

/// Another member of a pipeline, called through its `PipelineData` service. Errors are the
/// member's refusal or the transport's, as text: the callers only log them or wrap them.
pub struct PipelinePeer {
    client: PipelineDataClient<Channel>,
}

impl PipelinePeer {
    /// Hands member `target` the bytes of `chunk` of `block` ahead of the log entry that
    /// names them (pipeline `pipeline`'s write stage).
    pub async fn push_chunk(
        &mut self,
        pipeline: PipelineId,
        target: DatanodeId,
        block: BlockId,
        chunk: &ChunkInfo,
        data: &[u8],
    ) -> Result<(), String> {
        let req = pb::PushChunkRequest {
            pipeline_id: pipeline,
            block_id: Some(block.into()),
            chunk: Some(chunk.into()),
            data: data.to_vec(),
            target,
        };
        self.client
            .push_chunk(req)
            .await
            .map(|_| ())
            .map_err(|s| s.message().to_string())
    }

    /// The `len` bytes at `offset` of `block` that the member stored in its write stage.
    pub async fn pull_chunk(
        &mut self,
        pipeline: PipelineId,
        block: BlockId,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, String> {
        let req = pb::PullChunkRequest {
            pipeline_id: pipeline,
            block_id: Some(block.into()),
            chunk: Some(pb::ChunkInfo {
                offset,
                len,
                checksum: None,
            }),
        };
        self.client
            .pull_chunk(req)
            .await
            .map(|r| r.into_inner().data)
            .map_err(|s| s.message().to_string())
    }
}
