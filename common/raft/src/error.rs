//! Errors of the Raft layer that callers branch on.

use crate::types::{NodeId, NodeInfo};

#[derive(Debug, thiserror::Error)]
pub enum RaftGroupError {
    /// This node is not the leader; retry on the hinted leader (if known).
    #[error("not the leader{}", match .leader { Some((id, n)) => format!("; leader is node {id} at {}", n.client_addr), None => "; leader unknown".to_string() })]
    NotLeader { leader: Option<(NodeId, NodeInfo)> },
    /// This node leads but has not applied an entry of its term yet; retry shortly.
    #[error("leader not ready yet: it has not applied an entry of its own term")]
    LeaderNotReady,
    /// This node still leads in openraft's view but holds no lease (see [`crate::gate`]):
    /// likely cut off from its ring; retry elsewhere.
    #[error("leader without a lease: {0}")]
    NoLease(crate::gate::Refused),
    #[error("raft stopped: {0}")]
    Fatal(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("invalid raft config: {0}")]
    Config(String),
    #[error("storage: {0}")]
    Io(#[from] std::io::Error),
    /// The leader refuses a joining node until the node (or the ring) changes.
    #[error("{0}")]
    JoinRefused(crate::join::Refusal),
    #[error("{0}")]
    Other(String),
}

impl RaftGroupError {
    /// Whether a client should retry (elsewhere or later).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::NotLeader { .. } | Self::LeaderNotReady | Self::NoLease(_) | Self::Timeout(_)
        )
    }
}
