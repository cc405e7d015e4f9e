//! [`GroupHandle`] for a group: how it answers the ring's Raft RPCs (votes with the
//! vote grace, appends, snapshot offers downloaded and installed, leader transfers).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use openraft::errors::Fatal;
use openraft::raft::{
    AppendEntriesRequest, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use tokio_util::sync::CancellationToken;

use crate::contact::LeaderContact;
use crate::registry::GroupHandle;
use crate::snapshot::{self, Snap, SnapshotStore};
use crate::state_machine::StateMachineLogic;
use crate::types::{NodeId, TypeConfig};
use crate::wire::{Reply, SnapshotOffer};

use super::snapshots::pre_install_failpoint;
use super::*;

impl<L: StateMachineLogic> GroupHandle for RaftGroup<L> {
    fn node_id(&self) -> NodeId {
        self.cfg.node_id
    }

    fn contact(&self) -> Arc<LeaderContact> {
        self.contact.clone()
    }

    fn ring_check(&self, tag: &str) -> Result<(), String> {
        self.ring.check(tag)
    }

    fn snapshots(&self) -> Arc<SnapshotStore> {
        self.snapshots.clone()
    }

    fn vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, String>> {
        async move {
            self.check_vote_grace(&req)?;
            self.raft.vote(req).await.map_err(|e| e.to_string())
        }
        .boxed()
    }

    fn pre_vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, String>> {
        async move {
            self.check_vote_grace(&req)?;
            self.raft.pre_vote(req).await.map_err(|e| e.to_string())
        }
        .boxed()
    }

    fn stream_append(
        &self,
        input: BoxStream<'static, AppendEntriesRequest<TypeConfig>>,
    ) -> BoxStream<'static, Result<StreamAppendResult<TypeConfig>, Fatal<TypeConfig>>> {
        self.raft.stream_append(input).boxed()
    }

    fn receive_snapshot(
        &self,
        offer: SnapshotOffer,
        progress: Arc<AtomicU64>,
        withdrawn: CancellationToken,
    ) -> BoxFuture<'_, Reply<SnapshotResponse<TypeConfig>>> {
        async move {
            let local_vote = self.metrics().vote;
            if local_vote > offer.vote {
                // A stale leader: answer with our vote so it steps down; download nothing.
                return Ok(SnapshotResponse::new(local_vote));
            }
            let withdrew = || {
                self.stats.withdrawn.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(group = %self.cfg.group_id, snapshot = %offer.snapshot_id,
                    "the leader withdrew its snapshot offer; download stopped");
                "the leader withdrew its snapshot offer".to_string()
            };
            let _one = tokio::select! {
                one = self.install_lock.lock() => one,
                _ = withdrawn.cancelled() => return Err(withdrew()),
            };
            // Dropping the download midway removes its staging directory; the install step
            // below is never interrupted (openraft and the state machine own the files then).
            let cp = tokio::select! {
                cp = self.download_verified(&offer, &progress) => cp?,
                _ = withdrawn.cancelled() => return Err(withdrew()),
            };
            let pre_install = pre_install_failpoint();
            if let Err(e) = pre_install {
                self.stats.download_failures.fetch_add(1, Ordering::Relaxed);
                snapshot::remove_path(&cp.dir);
                return Err(e);
            }
            let dir = cp.dir.clone();
            let r = self
                .raft
                .install_full_snapshot(
                    offer.vote,
                    Snap {
                        meta: offer.meta,
                        snapshot: cp,
                    },
                )
                .await
                .map_err(|e| e.to_string());
            if r.is_ok() {
                self.stats.installs.fetch_add(1, Ordering::Relaxed);
            }
            // Not consumed when openraft declined the snapshot (e.g. a newer vote arrived).
            snapshot::remove_path(&dir);
            r
        }
        .boxed()
    }

    fn transfer_leader(
        &self,
        req: TransferLeaderRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<TransferLeaderResponse<TypeConfig>, Fatal<TypeConfig>>> {
        self.raft.handle_transfer_leader(req).boxed()
    }
}
