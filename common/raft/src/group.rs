//! One Raft group on this node: openraft plus our log store, state machine, network and
//! leader-contact record, with the API services use (write, read barrier, readiness,
//! membership changes, leader transfer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use openraft::errors::{ClientWriteError, Fatal, RaftError};
use openraft::raft::{
    AppendEntriesRequest, ReadPolicy, SnapshotResponse, StreamAppendResult, TransferLeaderRequest,
    TransferLeaderResponse, VoteRequest, VoteResponse,
};
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{ChangeMembers, Config, SnapshotPolicy};
use rozone_kv::rocksdb::DB;

use crate::codec::{decode, encode};
use crate::contact::{leader_ready, ContactRecord, LeaderContact};
use crate::download::DownloadPolicy;
use crate::error::RaftGroupError;
use crate::log_store::RocksLogStore;
use crate::network::{NetStats, NetworkFactory, PeerChannels, PeerRpcCounts};
use crate::registry::{GroupHandle, GroupRegistry};
use crate::snapshot::{self, Checkpoint, Snap, SnapshotStore};
use crate::state_machine::{RocksStateMachine, StateDb, StateMachineLogic};
use crate::types::{AppRequest, LogId, NodeId, NodeInfo, RaftMetrics, TypeConfig};
use crate::wire::{Reply, SnapshotOffer};

type Raft<L> = openraft::Raft<TypeConfig, RocksStateMachine<L>>;

/// How to run one group.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub group_id: String,
    pub node_id: NodeId,
    /// This node's addresses (what it advertises in membership).
    pub node_info: NodeInfo,
    /// `log/`, `sm/` and `snapshots/` are created under it.
    pub dir: PathBuf,
    /// fsync log appends (default on).
    pub fsync: bool,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    pub heartbeat_interval: Duration,
    /// Build a snapshot after this many applied entries since the last one (0 = only when
    /// asked).
    pub snapshot_logs_since_last: u64,
    /// Entries kept in the log behind a snapshot (for slow followers to catch up by log).
    pub max_in_snapshot_log_to_keep: u64,
    /// How long a leader waits for a follower to download and install a snapshot.
    pub install_snapshot_timeout: Duration,
    pub download: DownloadPolicy,
    /// Where followers download this node's snapshots; defaults to `node_info.peer_addr`.
    pub snapshot_source_addr: Option<String>,
}

impl GroupConfig {
    pub fn new(group_id: &str, node_id: NodeId, node_info: NodeInfo, dir: PathBuf) -> Self {
        Self {
            group_id: group_id.to_string(),
            node_id,
            node_info,
            dir,
            fsync: true,
            election_timeout_min: Duration::from_millis(300),
            election_timeout_max: Duration::from_millis(600),
            heartbeat_interval: Duration::from_millis(100),
            snapshot_logs_since_last: 10_000,
            max_in_snapshot_log_to_keep: 1_000,
            install_snapshot_timeout: Duration::from_secs(60),
            download: DownloadPolicy::default(),
            snapshot_source_addr: None,
        }
    }

    fn openraft_config(&self) -> Result<Config, RaftGroupError> {
        let c = Config {
            cluster_name: self.group_id.clone(),
            election_timeout_min: self.election_timeout_min.as_millis() as u64,
            election_timeout_max: self.election_timeout_max.as_millis() as u64,
            heartbeat_interval: self.heartbeat_interval.as_millis() as u64,
            install_snapshot_timeout: self.install_snapshot_timeout.as_millis() as u64,
            snapshot_policy: if self.snapshot_logs_since_last == 0 {
                SnapshotPolicy::Never
            } else {
                SnapshotPolicy::LogsSinceLast(self.snapshot_logs_since_last)
            },
            max_in_snapshot_log_to_keep: self.max_in_snapshot_log_to_keep,
            purge_batch_size: 256,
            max_payload_entries: 1024,
            ..Default::default()
        };
        c.validate()
            .map_err(|e| RaftGroupError::Config(e.to_string()))
    }
}

/// A running group. Cheap to share (`Arc`).
pub struct RaftGroup<L: StateMachineLogic> {
    cfg: GroupConfig,
    raft: Raft<L>,
    state: Arc<StateDb>,
    snapshots: Arc<SnapshotStore>,
    contact: Arc<LeaderContact>,
    channels: Arc<PeerChannels>,
    registry: GroupRegistry,
    /// One snapshot download at a time per group.
    install_lock: tokio::sync::Mutex<()>,
    stats: Counters,
    net_stats: Arc<NetStats>,
}

/// Snapshot receive counters of a group (for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Download or verification attempts that failed.
    pub download_failures: u64,
    /// Snapshots installed on this node.
    pub installs: u64,
}

#[derive(Default)]
struct Counters {
    download_failures: AtomicU64,
    installs: AtomicU64,
}

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Opens storage, starts openraft and registers the group with the peer service.
    pub async fn start(
        cfg: GroupConfig,
        logic: L,
        registry: &GroupRegistry,
        channels: Arc<PeerChannels>,
    ) -> Result<Arc<Self>, RaftGroupError> {
        Self::start_with_append_hook(cfg, logic, registry, channels, None).await
    }

    /// [`Self::start`] with an [`crate::AppendHook`] that runs before every log append.
    pub async fn start_with_append_hook(
        cfg: GroupConfig,
        logic: L,
        registry: &GroupRegistry,
        channels: Arc<PeerChannels>,
        hook: Option<Arc<dyn crate::hook::AppendHook>>,
    ) -> Result<Arc<Self>, RaftGroupError> {
        let log = RocksLogStore::open(&cfg.dir.join("log"), cfg.fsync)?.with_append_hook(hook);
        let sm = RocksStateMachine::open(&cfg.dir.join("sm"), &cfg.dir.join("snapshots"), logic)?;
        let (state, snapshots) = (sm.state(), sm.snapshots());
        let net_stats = Arc::new(NetStats::default());
        let net = NetworkFactory {
            group_id: cfg.group_id.clone(),
            from: cfg.node_id,
            channels: channels.clone(),
            snapshot_source_addr: cfg
                .snapshot_source_addr
                .clone()
                .unwrap_or_else(|| cfg.node_info.peer_addr.clone()),
            stats: net_stats.clone(),
        };
        let raft = Raft::<L>::new(cfg.node_id, Arc::new(cfg.openraft_config()?), net, log, sm)
            .await
            .map_err(|e| RaftGroupError::Fatal(e.to_string()))?;
        let g = Arc::new(Self {
            cfg,
            raft,
            state,
            snapshots,
            contact: Arc::new(LeaderContact::default()),
            channels,
            registry: registry.clone(),
            install_lock: tokio::sync::Mutex::new(()),
            stats: Counters::default(),
            net_stats,
        });
        registry.insert(&g.cfg.group_id, g.clone());
        Ok(g)
    }

    pub fn group_id(&self) -> &str {
        &self.cfg.group_id
    }

    pub fn node_id(&self) -> NodeId {
        self.cfg.node_id
    }

    pub fn node_info(&self) -> &NodeInfo {
        &self.cfg.node_info
    }

    /// Whether this group already has a membership (initialised, or joined).
    pub async fn is_initialized(&self) -> Result<bool, RaftGroupError> {
        self.raft.is_initialized().await.map_err(fatal)
    }

    /// Creates the group with these members. Only on a brand-new cluster.
    pub async fn initialize(
        &self,
        members: BTreeMap<NodeId, NodeInfo>,
    ) -> Result<(), RaftGroupError> {
        self.raft
            .initialize(members)
            .await
            .map_err(|e| RaftGroupError::Other(e.to_string()))
    }

    /// Proposes a command and returns its response once applied on this (leader) node.
    pub async fn write(&self, req: L::Request) -> Result<L::Response, RaftGroupError> {
        if !self.is_ready_leader() {
            return Err(self.not_leader_error());
        }
        let resp = self
            .raft
            .client_write(AppRequest(encode(&req)?))
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(decode(&resp.data.0)?)
    }

    /// Waits until a read on this node sees every write committed before the call
    /// (openraft's read index, then wait for apply). Leader only.
    pub async fn read_barrier(&self) -> Result<(), RaftGroupError> {
        if !self.is_ready_leader() {
            return Err(self.not_leader_error());
        }
        self.raft
            .ensure_linearizable(ReadPolicy::ReadIndex)
            .await
            .map_err(|e| match e {
                RaftError::APIError(openraft::errors::LinearizableReadError::ForwardToLeader(
                    _,
                )) => self.not_leader_error(),
                other => RaftGroupError::Other(other.to_string()),
            })?;
        Ok(())
    }

    /// The error to return to a client on a node that cannot serve as leader right now.
    pub fn not_leader_error(&self) -> RaftGroupError {
        let m = self.metrics();
        if m.state == openraft::ServerState::Leader {
            return RaftGroupError::LeaderNotReady;
        }
        let leader = m.current_leader.and_then(|id| {
            m.membership_config
                .membership()
                .get_node(&id)
                .map(|n| (id, n.clone()))
        });
        RaftGroupError::NotLeader { leader }
    }

    fn write_error(
        &self,
        e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>,
    ) -> RaftGroupError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                RaftGroupError::NotLeader {
                    leader: f.leader_id.zip(f.leader_node),
                }
            }
            RaftError::APIError(other) => RaftGroupError::Other(other.to_string()),
            RaftError::Fatal(f) => RaftGroupError::Fatal(f.to_string()),
        }
    }

    /// The latest metrics of this node.
    pub fn metrics(&self) -> RaftMetrics {
        self.raft.metrics().borrow_watched().clone()
    }

    /// A leader that applied an entry of its own term.
    pub fn is_ready_leader(&self) -> bool {
        leader_ready(&self.raft.metrics().borrow_watched())
    }

    /// The last accepted append from a leader, if any.
    pub fn leader_contact(&self) -> Option<ContactRecord> {
        self.contact.last()
    }

    /// The live state-machine database (re-fetch per read: a snapshot install swaps it).
    pub fn db(&self) -> Arc<DB> {
        self.state.db()
    }

    /// Waits until `pred` holds on this node's metrics, or the timeout passes.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&RaftMetrics) -> bool + Send + 'static,
    ) -> Result<RaftMetrics, RaftGroupError> {
        self.raft
            .wait(Some(timeout))
            .metrics(move |m| pred(m), what)
            .await
            .map_err(|e| RaftGroupError::Timeout(format!("{what}: {e}")))
    }

    /// Waits until this node has applied its whole log and returns that index. A write is
    /// acknowledged while it is applied, a moment before metrics show it; on a leader this
    /// is the point every acknowledged write is visible in metrics.
    pub async fn wait_log_applied(&self, timeout: Duration) -> Result<u64, RaftGroupError> {
        let m = self
            .wait_for(timeout, "whole log applied", |m| {
                m.last_log_index.is_some()
                    && m.last_applied.as_ref().map(|l| l.index()) == m.last_log_index
            })
            .await?;
        Ok(m.last_log_index.unwrap_or(0))
    }

    /// Waits until this node has applied at least `index`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), RaftGroupError> {
        self.wait_for(timeout, &format!("applied {index}"), move |m| {
            m.last_applied.as_ref().is_some_and(|l| l.index() >= index)
        })
        .await?;
        Ok(())
    }

    /// Adds a non-voting member; with `blocking` waits until it caught up.
    pub async fn add_learner(
        &self,
        id: NodeId,
        info: NodeInfo,
        blocking: bool,
    ) -> Result<(), RaftGroupError> {
        self.raft
            .add_learner(id, info, blocking)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }

    /// Makes learners voters.
    pub async fn promote(&self, ids: BTreeSet<NodeId>) -> Result<(), RaftGroupError> {
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(ids), false)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }

    /// Removes members (voters or learners) from the group.
    pub async fn remove_members(&self, ids: BTreeSet<NodeId>) -> Result<(), RaftGroupError> {
        self.raft
            .change_membership(ChangeMembers::RemoveVoters(ids.clone()), false)
            .await
            .map_err(|e| self.write_error(e))?;
        let learners: BTreeSet<NodeId> = self
            .metrics()
            .membership_config
            .membership()
            .learner_ids()
            .filter(|id| ids.contains(id))
            .collect();
        if !learners.is_empty() {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(learners), false)
                .await
                .map_err(|e| self.write_error(e))?;
        }
        Ok(())
    }

    /// Asks the leader (this node) to hand leadership to `to`.
    pub async fn transfer_leader(&self, to: NodeId) -> Result<(), RaftGroupError> {
        if self.metrics().state != openraft::ServerState::Leader {
            return Err(self.not_leader_error());
        }
        self.raft.trigger().transfer_leader(to).await.map_err(fatal)
    }

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

    /// Stops openraft and leaves the registry; storage closes when the last handle drops.
    pub async fn shutdown(&self) {
        self.registry.remove(&self.cfg.group_id);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(group = %self.cfg.group_id, error = %e, "raft shutdown");
        }
    }

    async fn download_verified(&self, offer: &SnapshotOffer) -> Result<Checkpoint, String> {
        let policy = &self.cfg.download;
        crate::download::download_verified(
            &self.channels,
            &self.state,
            &offer.source_addr,
            &self.cfg.group_id,
            &offer.snapshot_id,
            Some(&offer.meta),
            policy,
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
fn pre_install_failpoint() -> Result<(), String> {
    fail::fail_point!("raft-snapshot-install", |_| Err(
        "failpoint raft-snapshot-install".to_string()
    ));
    Ok(())
}

fn fatal(e: Fatal<TypeConfig>) -> RaftGroupError {
    RaftGroupError::Fatal(e.to_string())
}

impl<L: StateMachineLogic> GroupHandle for RaftGroup<L> {
    fn node_id(&self) -> NodeId {
        self.cfg.node_id
    }

    fn contact(&self) -> Arc<LeaderContact> {
        self.contact.clone()
    }

    fn snapshots(&self) -> Arc<SnapshotStore> {
        self.snapshots.clone()
    }

    fn vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>> {
        self.raft.vote(req).boxed()
    }

    fn pre_vote(
        &self,
        req: VoteRequest<TypeConfig>,
    ) -> BoxFuture<'_, Result<VoteResponse<TypeConfig>, RaftError<TypeConfig>>> {
        self.raft.pre_vote(req).boxed()
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
    ) -> BoxFuture<'_, Reply<SnapshotResponse<TypeConfig>>> {
        async move {
            let local_vote = self.metrics().vote;
            if local_vote > offer.vote {
                // A stale leader: answer with our vote so it steps down; download nothing.
                return Ok(SnapshotResponse::new(local_vote));
            }
            let _one = self.install_lock.lock().await;
            let cp = self.download_verified(&offer).await?;
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
