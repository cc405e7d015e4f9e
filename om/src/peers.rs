//! The OM's calls to the other OMs of its ring: today the read index a follower asks its
//! leader for (LINEARIZABLE_ALLOW_FOLLOWER reads). Channels to the other OMs' client ports
//! are built by this OM's one channel factory (timeouts, TLS) and cached per address, so a
//! follower serving many reads opens one connection to its leader.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rozone_proto::ring::ring_client::RingClient;
use rozone_proto::ring::ReadIndexRequest;
use rozone_rpc::ChannelFactory;
use tonic::transport::Channel;

use crate::error::OmError;

/// Channels to the other OMs, by client address.
pub struct OmPeers {
    factory: ChannelFactory,
    channels: Mutex<HashMap<String, Channel>>,
}

impl OmPeers {
    pub fn new(factory: ChannelFactory) -> Self {
        Self {
            factory,
            channels: Mutex::default(),
        }
    }

    /// Asks OM `leader` (at client address `addr`) for its read index: the commit index it
    /// confirmed it still leads at. Gives up after `wait`.
    pub async fn read_index(
        &self,
        leader: u64,
        addr: &str,
        wait: Duration,
    ) -> Result<u64, OmError> {
        let mut req = tonic::Request::new(ReadIndexRequest {});
        req.set_timeout(wait);
        let mut client = RingClient::new(self.channel(addr)?);
        let r = tokio::time::timeout(wait, client.read_index(req))
            .await
            .unwrap_or_else(|_| {
                Err(tonic::Status::deadline_exceeded(format!(
                    "no read index from OM {leader} within {wait:?}"
                )))
            })
            .map_err(|s| OmError::Upstream(leader, s))?
            .into_inner();
        Ok(r.index)
    }

    /// A cached lazy channel to another OM's client port.
    fn channel(&self, addr: &str) -> Result<Channel, OmError> {
        // A poisoned lock holds a map that is whole after every statement: use it.
        let mut g = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = g.get(addr) {
            return Ok(c.clone());
        }
        let c = self
            .factory
            .lazy(addr)
            .map_err(|e| OmError::Internal(format!("bad OM address {addr:?}: {e}")))?;
        g.insert(addr.to_string(), c.clone());
        Ok(c)
    }
}
