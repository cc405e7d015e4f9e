//! rozone-rpc: how one rozone process calls another, and how a service refuses.
//!
//! - [`ChannelFactory`] ([`channel`]): the one place a tonic channel is built — one set of
//!   timeouts and keepalives, and the process's certificate presented over mutual TLS unless
//!   the process runs insecure.
//! - [`Ring`] ([`ring`]): calls to a replicated ring (SCM, OM) that find the leader and
//!   survive its change; the CLI, the OM's SCM client and the datanode's heartbeat use it.
//! - [`is_retryable`]: the one rule for "try another member or later".
//! - [`call`]: call ids, so a write the ring retries applies at most once.
//! - [`tls`]: the `security` files (cluster CA, this process's certificate and key),
//!   checked at start; [`pki`]: creating the CA and issuing certificates; [`auth`]: the
//!   caller's role and id from its certificate, checked at each service's edge;
//!   [`block_token`]: the OM-signed permission to read or write one block, checked by
//!   datanodes; [`enroll`]: a process without a certificate redeeming a join token for one.
//!
//! A retryable refusal is `UNAVAILABLE` with two metadata entries: [`RETRY_REASON`]
//! (`not-leader` or `leader-not-ready`) and, when the refusing node knows one,
//! [`LEADER_HINT`] (the leader's client address). Clients branch on the metadata, never on
//! message text.
//!
//! Light on purpose (tonic, tokio and the certificate crates): the CLI and the typed
//! clients use it without linking RocksDB or openraft.

pub mod auth;
pub mod block_token;
pub mod call;
pub mod channel;
pub mod conns;
pub mod enroll;
pub mod error;
pub mod limits;
pub mod pki;
pub mod ring;
pub mod tls;

pub use auth::{Caller, Role};
pub use call::{CallIds, CallScoped};
pub use channel::ChannelFactory;
pub use conns::ConnectionCap;
pub use error::RpcError;
pub use limits::ServerLimits;
pub use ring::{RetryPolicy, Ring};
pub use tls::Security;

use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

/// Metadata key: the leader's client address (`host:port`) on a `NotLeader` refusal.
pub const LEADER_HINT: &str = "x-rozone-leader";
/// Metadata key: why a retryable refusal happened.
pub const RETRY_REASON: &str = "x-rozone-retry";
/// This node is not the leader (the hint, if present, names who is).
pub const REASON_NOT_LEADER: &str = "not-leader";
/// This node leads but has not applied an entry of its term yet.
pub const REASON_LEADER_NOT_READY: &str = "leader-not-ready";

/// `UNAVAILABLE` saying this node is not the leader, with the leader's client address
/// when known.
pub fn not_leader(msg: impl Into<String>, leader_client_addr: Option<&str>) -> Status {
    let mut s = Status::unavailable(msg.into());
    s.metadata_mut()
        .insert(RETRY_REASON, MetadataValue::from_static(REASON_NOT_LEADER));
    if let Some(v) = leader_client_addr.and_then(|a| a.parse().ok()) {
        s.metadata_mut().insert(LEADER_HINT, v);
    }
    s
}

/// `UNAVAILABLE` saying this node leads but is not ready yet.
pub fn leader_not_ready(msg: impl Into<String>) -> Status {
    let mut s = Status::unavailable(msg.into());
    s.metadata_mut().insert(
        RETRY_REASON,
        MetadataValue::from_static(REASON_LEADER_NOT_READY),
    );
    s
}

/// The leader's client address a refusal carries, if any.
pub fn leader_hint(s: &Status) -> Option<String> {
    s.metadata()
        .get(LEADER_HINT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// The retry reason a refusal carries (`not-leader`, `leader-not-ready`), if any.
pub fn retry_reason(s: &Status) -> Option<&str> {
    s.metadata().get(RETRY_REASON).and_then(|v| v.to_str().ok())
}

/// Whether a caller should retry the call on another member or after a pause: a
/// leadership refusal, the node could not be reached in time, or the connection broke under
/// the call (tonic reports a reset stream or a closed connection as `UNKNOWN`/`CANCELLED`/
/// `INTERNAL` with a transport error as its source, not as `UNAVAILABLE`). Every retry loop
/// in rozone decides with this one rule.
pub fn is_retryable(s: &Status) -> bool {
    retry_reason(s).is_some()
        || matches!(s.code(), Code::Unavailable | Code::DeadlineExceeded)
        || (matches!(s.code(), Code::Unknown | Code::Cancelled | Code::Internal)
            && is_transport_failure(s))
}

fn is_transport_failure(s: &Status) -> bool {
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        if e.is::<tonic::transport::Error>() || e.is::<std::io::Error>() {
            return true;
        }
        // hyper and h2 are not our dependencies: recognise them by type name.
        let name = format!("{e:?}");
        if name.starts_with("hyper::Error") || name.starts_with("h2::Error") || name.contains("Io(")
        {
            return true;
        }
        source = e.source();
    }
    let m = s.message();
    m.contains("transport error")
        || m.contains("connection")
        || m.contains("broken pipe")
        || m.contains("h2 protocol error")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_reason_and_hint() {
        let s = not_leader("no", Some("127.0.0.1:2"));
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(leader_hint(&s).as_deref(), Some("127.0.0.1:2"));
        assert_eq!(retry_reason(&s), Some(REASON_NOT_LEADER));
        assert!(is_retryable(&s));
        let s = leader_not_ready("wait");
        assert_eq!(retry_reason(&s), Some(REASON_LEADER_NOT_READY));
        assert_eq!(leader_hint(&s), None);
        assert!(!is_retryable(&Status::not_found("x")));
    }
}
