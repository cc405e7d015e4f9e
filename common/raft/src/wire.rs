//! Payloads carried in `RaftRequest.payload` / `RaftReply.payload` (postcard-encoded).

use serde::{Deserialize, Serialize};

use crate::types::{SnapshotMeta, Vote};

/// The leader offers a snapshot; the follower pulls it from `source_addr`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotOffer {
    pub vote: Vote,
    pub meta: SnapshotMeta,
    pub snapshot_id: String,
    /// `host:port` of the leader's snapshot download service.
    pub source_addr: String,
}

/// A reply: the handler's result, or the remote failure as text.
pub type Reply<T> = Result<T, String>;
