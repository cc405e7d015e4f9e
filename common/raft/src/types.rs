//! The one openraft type configuration of rozone, and the node info carried in membership.
//!
//! Application requests and responses travel as opaque bytes ([`AppRequest`],
//! [`AppResponse`]): each state machine ([`crate::StateMachineLogic`]) encodes its own typed
//! commands. That keeps one `TypeConfig`, one network and one log store for SCM, OM and every
//! datanode pipeline.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Node id inside a Raft group.
pub type NodeId = u64;

/// What every member of a group knows about every other member. It travels inside the Raft
/// membership, so applying a membership change never needs a lookup in local config that
/// could fail (Ozone's HDDS-16838).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    /// `host:port` of the member's peer (Raft) gRPC service.
    pub peer_addr: String,
    /// `host:port` of the member's client-facing service (for leader hints).
    pub client_addr: String,
}

impl NodeInfo {
    pub fn new(peer_addr: impl Into<String>, client_addr: impl Into<String>) -> Self {
        Self {
            peer_addr: peer_addr.into(),
            client_addr: client_addr.into(),
        }
    }
}

impl fmt::Display for NodeInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "peer={} client={}", self.peer_addr, self.client_addr)
    }
}

/// An application command as replicated in the log: encoded by the state machine logic.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppRequest(pub Vec<u8>);

/// An application response, produced when the entry is applied.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppResponse(pub Vec<u8>);

impl fmt::Debug for AppRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppRequest({} bytes)", self.0.len())
    }
}

impl fmt::Display for AppRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl fmt::Debug for AppResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AppResponse({} bytes)", self.0.len())
    }
}

openraft::declare_raft_types!(
    /// rozone's openraft type configuration.
    pub TypeConfig:
        D = AppRequest,
        R = AppResponse,
        NodeId = NodeId,
        Node = NodeInfo,
);

pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
pub type Membership = openraft::Membership<NodeId, NodeInfo>;
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
pub type RaftMetrics = openraft::RaftMetrics<TypeConfig>;

/// A log id from its parts (for tests of state-machine logic and for tools).
pub fn log_id(term: u64, node: NodeId, index: u64) -> LogId {
    openraft::testing::log_id::<TypeConfig>(term, node, index)
}
