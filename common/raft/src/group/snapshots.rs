//! Snapshots of a group: build, purge the log behind them, counters, and the verified
//! download a follower installs from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::RaftGroupError;
use crate::network::PeerRpcCounts;
use crate::snapshot::Checkpoint;
use crate::state_machine::StateMachineLogic;
use crate::types::{LogId, NodeId};
use crate::wire::SnapshotOffer;

use super::*;

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Builds a snapshot now.
    pub async fn trigger_snapshot(&self) -> Result<(), RaftGroupError> {
        self.raft.trigger().snapshot().await.map_err(fatal)
    }

    /// Builds a snapshot of everything applied so far and waits until it is kept; returns
    /// the index it covers.
    pub async fn snapshot_now(&self, timeout: Duration) -> Result<u64, RaftGroupError> {
        let applied = self.metrics().last_applied.map(|l| l.index()).unwrap_or(0);
        self.trigger_snapshot().await?;
        let m = self
            .wait_for(timeout, "snapshot built", move |m| {
                m.snapshot.as_ref().is_some_and(|s| s.index() >= applied)
            })
            .await?;
        Ok(m.snapshot.map(|s| s.index()).unwrap_or(applied))
    }

    /// Purges the log up to `upto` (only what a snapshot already covers is purged).
    pub async fn purge_log(&self, upto: u64) -> Result<(), RaftGroupError> {
        self.raft.trigger().purge_log(upto).await.map_err(fatal)
    }

    /// Snapshot receive counters.
    pub fn snapshot_stats(&self) -> SnapshotStats {
        SnapshotStats {
            download_failures: self.stats.download_failures.load(Ordering::Relaxed),
            installs: self.stats.installs.load(Ordering::Relaxed),
            withdrawn: self.stats.withdrawn.load(Ordering::Relaxed),
        }
    }

    /// Append streams this node opened to `target` (replication and heartbeats).
    pub fn rpc_counts(&self, target: NodeId) -> PeerRpcCounts {
        self.net_stats.get(target)
    }

    /// Id of the newest snapshot kept here (what `FetchSnapshot` serves).
    pub fn snapshot_id(&self) -> Option<String> {
        self.snapshots.current().map(|(m, _)| m.snapshot_id)
    }

    /// Log id of the newest snapshot kept here.
    pub fn snapshot_log_id(&self) -> Option<LogId> {
        self.snapshots
            .current()
            .and_then(|(m, _)| m.meta.last_log_id)
    }

    pub(super) async fn download_verified(
        &self,
        offer: &SnapshotOffer,
        progress: &AtomicU64,
    ) -> Result<Checkpoint, String> {
        let policy = &self.cfg.download;
        crate::download::download_verified(
            &self.channels,
            &self.state,
            &offer.source_addr,
            &self.cfg.group_id,
            &offer.snapshot_id,
            Some(&offer.meta),
            policy,
            progress,
            |attempt, e| {
                self.stats.download_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    group = %self.cfg.group_id, snapshot = %offer.snapshot_id,
                    source = %offer.source_addr, attempt, error = %e,
                    "checkpoint download failed"
                );
            },
        )
        .await
        .map(|(_, cp)| cp)
        .map_err(|e| {
            format!(
                "checkpoint download of snapshot {} from {} failed after {} attempt(s): {e}",
                offer.snapshot_id, offer.source_addr, policy.attempts
            )
        })
    }
}

/// Test hook: fail the last step before a verified checkpoint is handed to openraft.
pub(super) fn pre_install_failpoint() -> Result<(), String> {
    fail::fail_point!("raft-snapshot-install", |_| Err(
        "failpoint raft-snapshot-install".to_string()
    ));
    Ok(())
}
