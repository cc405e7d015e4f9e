//! gRPC channels to other datanodes (pipeline peers, replication sources), one per address,
//! connected lazily and shared, built by this process's channel factory (mutual TLS with
//! its datanode certificate unless insecure).

use std::collections::HashMap;
use std::sync::Mutex;

use rozone_proto::datanode::pipeline_data_client::PipelineDataClient;
use rozone_proto::datanode::replication_client::ReplicationClient;
use rozone_rpc::ChannelFactory;
use tonic::transport::Channel;

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

    pub fn pipeline_data(&self, addr: &str) -> Result<PipelineDataClient<Channel>, String> {
        Ok(PipelineDataClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }

    pub fn replication(&self, addr: &str) -> Result<ReplicationClient<Channel>, String> {
        Ok(ReplicationClient::new(self.channel(addr)?)
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE))
    }
}
