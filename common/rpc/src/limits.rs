//! Limits every gRPC server of a process applies (the daemons' `[rpc]` section), so that no
//! caller can pile up memory or tie up the process: at most so many calls in progress per
//! connection (more are refused at once, not queued), so many HTTP/2 streams per
//! connection, a deadline on every handler, and keepalive pings that close connections to
//! callers that stopped answering, and at most so many connections per server
//! ([`crate::conns`], applied to the accepted sockets, not by the builder). HTTP/2 flow control (a 64 KiB window per stream unless
//! the server raises it) bounds what a connection may send ahead of a handler.

use std::time::Duration;

use rozone_config::RpcSection;
use tonic::transport::Server;

/// The server limits of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub max_requests_per_connection: usize,
    pub max_streams_per_connection: u32,
    pub request_timeout: Duration,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self::from(&RpcSection::default())
    }
}

impl From<&RpcSection> for ServerLimits {
    fn from(r: &RpcSection) -> Self {
        Self {
            max_connections: r.max_connections,
            max_requests_per_connection: r.max_requests_per_connection,
            max_streams_per_connection: r.max_streams_per_connection,
            request_timeout: r.request_timeout,
            keepalive_interval: r.keepalive_interval,
            keepalive_timeout: r.keepalive_timeout,
        }
    }
}

impl ServerLimits {
    /// A server builder with these limits.
    pub fn apply(&self, b: Server) -> Server {
        b.concurrency_limit_per_connection(self.max_requests_per_connection)
            .load_shed(true)
            .max_concurrent_streams(self.max_streams_per_connection)
            .timeout(self.request_timeout)
            .http2_keepalive_interval(Some(self.keepalive_interval))
            .http2_keepalive_timeout(Some(self.keepalive_timeout))
    }
}
