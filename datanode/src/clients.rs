//! gRPC channels to other datanodes (pipeline peers, replication sources), one per address,
//! connected lazily and shared.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rozone_proto::datanode::pipeline_data_client::PipelineDataClient;
use rozone_proto::datanode::replication_client::ReplicationClient;
use tonic::transport::{Channel, Endpoint};

/// Largest message between datanodes (a chunk plus framing).
pub const MAX_MESSAGE: usize = 64 << 20;

#[derive(Default)]
pub struct Clients {
    channels: Mutex<HashMap<String, Channel>>,
}

impl Clients {
    pub fn channel(&self, addr: &str) -> Result<Channel, String> {
        let mut g = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(addr) {
            return Ok(c.clone());
        }
        let c = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad address {addr:?}: {e}"))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .connect_lazy();
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
