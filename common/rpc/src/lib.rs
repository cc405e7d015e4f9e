//! rozone-rpc: how a rozone service refuses a call the client should retry elsewhere or
//! later, and how a client reads that refusal. Light on purpose (tonic only): the CLI and
//! the typed clients use it without linking RocksDB or openraft.
//!
//! A retryable refusal is `UNAVAILABLE` with two metadata entries: [`RETRY_REASON`]
//! (`not-leader` or `leader-not-ready`) and, when the refusing node knows one,
//! [`LEADER_HINT`] (the leader's client address). Clients branch on the metadata, never on
//! message text.

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

/// Whether a client should retry the call on another member or after a pause: a
/// leadership refusal, or the node could not be reached in time.
pub fn is_retryable(s: &Status) -> bool {
    retry_reason(s).is_some() || matches!(s.code(), Code::Unavailable | Code::DeadlineExceeded)
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
