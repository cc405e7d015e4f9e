//! The one way a rozone process builds a gRPC channel to another.
//!
//! Every channel gets the same connect timeout, keepalive and HTTP/2 windows, and, unless
//! the process runs insecure, mutual TLS: it trusts only the cluster CA and presents this
//! process's certificate. No request timeout is set on the channel: Raft append streams and
//! snapshot downloads live long; unary callers bound each attempt themselves (the
//! [`crate::Ring`] does).

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::error::RpcError;
use crate::tls::{Security, TlsMaterial};

/// Establishing a TCP (+ TLS) + HTTP/2 connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// HTTP/2 PING interval on an open connection: a peer that vanished (power loss, cut link)
/// is noticed within interval + timeout instead of at the next TCP retransmit give-up.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a PING may go unanswered before the connection is dropped.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Per-stream HTTP/2 window: large enough that one 4 MiB chunk flows without stalls.
pub const STREAM_WINDOW: u32 = 8 << 20;
/// Per-connection HTTP/2 window (every stream of a connection together).
pub const CONNECTION_WINDOW: u32 = 32 << 20;

/// Builds every client channel of one process. Cheap to clone.
#[derive(Clone)]
pub struct ChannelFactory {
    tls: Option<Arc<ClientTlsConfig>>,
}

impl std::fmt::Debug for ChannelFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelFactory")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ChannelFactory {
    /// Plaintext channels: only for a process started with `security.insecure = true`.
    pub fn insecure() -> Self {
        Self { tls: None }
    }

    /// Mutual-TLS channels that trust `material`'s CA and present its certificate.
    pub fn tls(material: &TlsMaterial) -> Self {
        let cfg = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&material.ca_pem))
            .identity(Identity::from_pem(&material.cert_pem, &material.key_pem))
            .timeout(CONNECT_TIMEOUT);
        Self {
            tls: Some(Arc::new(cfg)),
        }
    }

    /// TLS channels that trust `ca_pem` and present no certificate: only for a process
    /// that has none yet and asks the SCM for one with a join token ([`crate::enroll`]).
    pub fn server_auth_only(ca_pem: &[u8]) -> Self {
        let cfg = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca_pem))
            .timeout(CONNECT_TIMEOUT);
        Self {
            tls: Some(Arc::new(cfg)),
        }
    }

    /// Whether channels use TLS.
    pub fn is_secure(&self) -> bool {
        self.tls.is_some()
    }

    /// The endpoint for `addr` (`host:port`, an `http://` or `https://` prefix is ignored),
    /// with every setting of this factory.
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, RpcError> {
        let hostport = host_port(addr)?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let bad =
            |e: &dyn std::fmt::Display| RpcError::Invalid(format!("bad address {addr:?}: {e}"));
        let mut ep = Endpoint::from_shared(format!("{scheme}://{hostport}"))
            .map_err(|e| bad(&e))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .initial_stream_window_size(Some(STREAM_WINDOW))
            .initial_connection_window_size(Some(CONNECTION_WINDOW));
        if let Some(tls) = &self.tls {
            ep = ep.tls_config((**tls).clone()).map_err(|e| bad(&e))?;
        }
        Ok(ep)
    }

    /// A lazily connected channel to `addr`: nothing is dialled until the first call, and a
    /// broken connection is re-dialled by the next one.
    pub fn lazy(&self, addr: &str) -> Result<Channel, RpcError> {
        Ok(self.endpoint(addr)?.connect_lazy())
    }

    /// A channel to `addr`, connected now (an unreachable address fails here).
    pub async fn connect(&self, addr: &str) -> Result<Channel, RpcError> {
        self.endpoint(addr)?
            .connect()
            .await
            .map_err(|e| RpcError::Unavailable {
                service: addr.to_string(),
                detail: format!("connect: {}", error_chain(&e)),
            })
    }
}

/// `host:port` of an address given as `host:port`, `http://host:port` or
/// `https://host:port`; an error unless the port is a number above 0.
pub fn host_port(addr: &str) -> Result<&str, RpcError> {
    let a = addr.trim();
    let hp = a
        .strip_prefix("http://")
        .or_else(|| a.strip_prefix("https://"))
        .unwrap_or(a);
    let ok = hp
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
    if !ok {
        return Err(RpcError::Invalid(format!(
            "bad address {addr:?}: want host:port"
        )));
    }
    Ok(hp)
}

/// An error and its sources, one line (a TLS refusal hides in the sources).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}

impl Security {
    /// The factory for this process's client channels (mutual TLS with its certificate, or
    /// plaintext when it runs insecure). Defined here, beside the factory, so that the TLS
    /// material does not depend on how channels are built.
    pub fn channels(&self) -> ChannelFactory {
        match self.material() {
            Some(m) => ChannelFactory::tls(m),
            None => ChannelFactory::insecure(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert_eq!(host_port("http://a:1").unwrap(), "a:1");
        assert_eq!(host_port("https://a:1").unwrap(), "a:1");
        assert_eq!(host_port(" 127.0.0.1:9862 ").unwrap(), "127.0.0.1:9862");
        assert!(host_port("nohost").is_err());
        assert!(host_port("a:0").is_err());
        assert!(host_port(":5").is_err());
    }
}
