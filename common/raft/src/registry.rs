//! The groups this process hosts, by group id, as the peer service sees them: an
//! object-safe [`GroupHandle`] per group, so one gRPC service routes every Raft RPC to
//! its group whatever the group's state machine is.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use openraft::errors::Fatal;
use openraft::raft::{
    AppendEntriesRequest, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use rozone_proto::raft::RaftRequest;
use tonic::Status;

use crate::contact::LeaderContact;
use crate::snapshot::SnapshotStore;
use crate::types::{NodeId, TypeConfig};
use crate::wire::{Reply, SnapshotOffer};

/// The object-safe face of a group that the peer service routes to.
pub trait GroupHandle: Send + Sync {
    fn node_id(&self) -> NodeId;
    fn contact(&self) -> Arc<LeaderContact>;
    /// Checks the ring id a peer RPC carries (see [`crate::join::RingSlot::check`]).
    fn ring_check(&self, tag: &str) -> Result<(), String>;
    fn snapshots(&self) -> Arc<SnapshotStore>;
    /// A vote; `Err` (a withheld vote, or openraft's error) is sent back as the reply error.
    fn vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, String>>;
    fn pre_vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, String>>;
    fn stream_append(
        &self,
        input: BoxStream<'static, AppendEntriesRequest<TypeConfig>>,
    ) -> BoxStream<'static, Result<StreamAppendResult<TypeConfig>, Fatal<TypeConfig>>>;
    /// Downloads, verifies and installs the offered snapshot, adding the bytes received to
    /// `progress`; stops the download (and cleans up) once `withdrawn` is cancelled.
    fn receive_snapshot(
        &self,
        offer: SnapshotOffer,
        progress: std::sync::Arc<std::sync::atomic::AtomicU64>,
        withdrawn: tokio_util::sync::CancellationToken,
    ) -> BoxFuture<'_, Reply<SnapshotResponse<TypeConfig>>>;
    fn transfer_leader(
        &self,
        req: TransferLeaderRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<TransferLeaderResponse<TypeConfig>, Fatal<TypeConfig>>>;
}

/// Every group this process hosts, by group id.
#[derive(Default, Clone)]
pub struct GroupRegistry {
    groups: Arc<RwLock<HashMap<String, Arc<dyn GroupHandle>>>>,
}

impl GroupRegistry {
    pub fn insert(&self, group_id: &str, g: Arc<dyn GroupHandle>) {
        if let Ok(mut m) = self.groups.write() {
            m.insert(group_id.to_string(), g);
        }
    }

    pub fn remove(&self, group_id: &str) {
        if let Ok(mut m) = self.groups.write() {
            m.remove(group_id);
        }
    }

    pub fn get(&self, group_id: &str) -> Option<Arc<dyn GroupHandle>> {
        self.groups.read().ok()?.get(group_id).cloned()
    }

    pub(crate) fn route(&self, req: &RaftRequest) -> Result<Arc<dyn GroupHandle>, Status> {
        let g = self
            .get(&req.group_id)
            .ok_or_else(|| Status::not_found(format!("no raft group {:?} here", req.group_id)))?;
        if g.node_id() != req.target {
            return Err(Status::failed_precondition(format!(
                "group {:?}: RPC for node {} reached node {}",
                req.group_id,
                req.target,
                g.node_id()
            )));
        }
        g.ring_check(&req.ring_id)
            .map_err(|e| Status::failed_precondition(format!("group {:?}: {e}", req.group_id)))?;
        Ok(g)
    }
}
