//! One Raft group on this node: openraft plus our log store, state machine, network and
//! leader-contact record, with the API services use (write, read barrier, readiness,
//! membership changes, leader transfer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
use tokio_util::sync::CancellationToken;

use crate::codec::decode;
use crate::contact::{leader_ready, ContactRecord, LeaderContact};
use crate::download::DownloadPolicy;
use crate::error::RaftGroupError;
use crate::gate::{self, LeaderInput, LeaseInput, LogLimit, Role};
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
    /// How long a snapshot install may go without progress (bytes received by the
    /// follower) before the leader gives up on it and offers again later; no bound on the
    /// whole install. The follower's own download stall limit is `download.stall`.
    pub install_snapshot_timeout: Duration,
    pub download: DownloadPolicy,
    /// Where followers download this node's snapshots; defaults to `node_info.peer_addr`.
    pub snapshot_source_addr: Option<String>,
    /// Answer the ring's Raft RPCs from the start (default). Off for a ring member whose
    /// join state is checked first: it answers only after [`RaftGroup::serve_peers`].
    pub serve_peers_at_start: bool,
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
            install_snapshot_timeout: Duration::from_secs(30),
            download: DownloadPolicy::default(),
            snapshot_source_addr: None,
            serve_peers_at_start: true,
        }
    }

    /// Starts with the peer port closed to this group (see [`RaftGroup::serve_peers`]).
    pub fn peers_closed(mut self) -> Self {
        self.serve_peers_at_start = false;
        self
    }

    /// Takes the ring's `[raft]` timing and log settings.
    pub fn with_section(mut self, r: &rozone_config::RaftSection) -> Self {
        self.election_timeout_min = r.election_timeout_min;
        self.election_timeout_max = r.election_timeout_max;
        self.heartbeat_interval = r.heartbeat_interval;
        self.fsync = r.fsync;
        self.snapshot_logs_since_last = r.snapshot_logs_since_last;
        self.max_in_snapshot_log_to_keep = r.max_in_snapshot_log_to_keep;
        self.install_snapshot_timeout = r.snapshot_stall_timeout;
        self.download.stall = r.snapshot_stall_timeout;
        self
    }

    /// How long a quorum acknowledgement lets the leader serve reads from its own state.
    pub fn leader_lease(&self) -> Duration {
        gate::leader_lease(self.election_timeout_min)
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
            // A restarted leader comes back as a follower and must win a new term. Restored
            // at once, it could earn a lease in the term it had handed over before the
            // restart (the transfer is remembered in memory only) while the transfer target
            // wins that hand-over: two leaders serving reads (found by `models/`).
            enable_leader_restore: Some(false),
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
    /// When this process opened the group: the start of its vote grace.
    started: Instant,
    /// The term (+1; 0 = none) in which this leader asked another member to take over.
    transfer_term: AtomicU64,
    /// The ring id of this group's join record, once known (see [`crate::join`]); shared
    /// with the network, which tags every peer RPC with it.
    ring: Arc<crate::join::RingSlot>,
}

/// Snapshot receive counters of a group (for metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    /// Download or verification attempts that failed.
    pub download_failures: u64,
    /// Snapshots installed on this node.
    pub installs: u64,
    /// Offers the leader withdrew while this node was downloading (it stopped making
    /// progress for the leader's stall limit); the download was stopped and cleaned up.
    pub withdrawn: u64,
}

#[derive(Default)]
struct Counters {
    download_failures: AtomicU64,
    installs: AtomicU64,
    withdrawn: AtomicU64,
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
        let ring = Arc::new(crate::join::RingSlot::default());
        let net = NetworkFactory {
            ring: ring.clone(),
            group_id: cfg.group_id.clone(),
            from: cfg.node_id,
            channels: channels.clone(),
            snapshot_source_addr: cfg
                .snapshot_source_addr
                .clone()
                .unwrap_or_else(|| cfg.node_info.peer_addr.clone()),
            install_stall: cfg.install_snapshot_timeout,
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
            started: Instant::now(),
            transfer_term: AtomicU64::new(0),
            ring,
        });
        if g.cfg.serve_peers_at_start {
            g.serve_peers();
        }
        Ok(g)
    }

    /// Opens the peer port to this group: from now on it answers the ring's Raft RPCs.
    pub fn serve_peers(self: &Arc<Self>) {
        self.registry.insert(&self.cfg.group_id, self.clone());
    }

    /// The ring id this node recorded (none before its join state was read).
    pub fn ring_id(&self) -> Option<crate::join::RingId> {
        self.ring.get()
    }

    /// Records the ring id; from now on peer RPCs carry it and another ring's are refused.
    pub fn set_ring_id(&self, id: crate::join::RingId) {
        self.ring.set(id, true);
    }

    /// A ring id stamped on data of an older version: used for joins, never on the wire
    /// (the other members stamped theirs independently).
    pub fn set_legacy_ring_id(&self, id: crate::join::RingId) {
        self.ring.set(id, false);
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

    /// The configuration this group was started with.
    pub fn config(&self) -> &GroupConfig {
        &self.cfg
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
        // A leader without a lease may still be the leader, but more likely it is cut off:
        // refusing now sends the client to the ring instead of waiting out a timeout.
        self.leader_gate()?;
        let resp = self
            .raft
            .client_write(AppRequest(crate::envelope::seal(&req)?))
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(decode(&resp.data.0)?)
    }

    /// Waits until a read on this node sees every write committed before the call
    /// (openraft's read index, then wait for apply). Leader only; the read index confirms
    /// leadership with a quorum round of its own, so this needs no lease.
    pub async fn read_barrier(&self) -> Result<(), RaftGroupError> {
        if !leader_ready(&self.metrics()) {
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
            return match gate::leader(&self.leader_input(&m)) {
                Err(gate::Refused::LeaderNotReady) | Ok(()) => RaftGroupError::LeaderNotReady,
                Err(reason) => RaftGroupError::NoLease(reason),
            };
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

    /// A leader that may serve now: it applied an entry of its own term and holds its lease
    /// (see [`gate`]). What `/ready`, roles and every leader-only service check.
    pub fn is_ready_leader(&self) -> bool {
        self.leader_gate().is_ok()
    }

    /// `Ok` on a leader that holds its lease; otherwise the refusal a client retries on.
    pub fn leader_gate(&self) -> Result<(), RaftGroupError> {
        if self.serves_as_leader(&self.metrics()) {
            Ok(())
        } else {
            Err(self.not_leader_error())
        }
    }

    /// Whether these metrics (of this member) show a leader that holds its lease: what
    /// roles and ring info report as "leader ready".
    pub fn serves_as_leader(&self, m: &RaftMetrics) -> bool {
        m.state == openraft::ServerState::Leader && gate::leader(&self.leader_input(m)).is_ok()
    }

    /// This leader's lease input from `m` (meaningful only while `m` says Leader).
    pub fn leader_input(&self, m: &RaftMetrics) -> LeaderInput {
        use openraft::Instant as _;
        let membership = m.membership_config.membership();
        let mut voters = membership.voter_ids();
        let sole_voter = voters.next() == Some(self.cfg.node_id) && voters.next().is_none();
        LeaderInput {
            ready: leader_ready(m),
            sole_voter,
            quorum_ack_age: m.last_quorum_acked.as_ref().map(|t| t.elapsed()),
            lease: self.cfg.leader_lease(),
            transferring: self.transfer_term.load(Ordering::Acquire) == m.current_term + 1,
        }
    }

    /// The LOCAL_LEASE input of this member: its role (with the leader's lease input), its
    /// leader-contact record and applied index.
    pub fn lease_input(&self, lease_time: Duration, log_limit: LogLimit) -> LeaseInput {
        use openraft::ServerState as S;
        let m = self.metrics();
        let role = match m.state {
            S::Leader => Role::Leader(self.leader_input(&m)),
            S::Follower => Role::Follower,
            S::Candidate => Role::Candidate,
            S::Learner => Role::Learner,
            S::Shutdown => Role::Shutdown,
        };
        let contact = self.leader_contact().map(|c| gate::Contact {
            age: c.age(),
            leader: c.leader,
            term: c.term,
            leader_commit: c
                .leader_commit
                .as_ref()
                .map(|l| (l.committed_leader_id().term, l.index())),
        });
        LeaseInput {
            role,
            known_leader: m.current_leader,
            contact,
            applied_index: m.last_applied.map(|l| l.index()),
            lease_time,
            log_limit,
        }
    }

    /// While this process is younger than `election_timeout_max`, it withholds its vote from
    /// ordinary elections. Before a restart it may have acknowledged a leader's append, and
    /// that leader counts on it not voting for another candidate for an election timeout;
    /// the promise lived in memory, so a restarted member keeps it by waiting instead.
    /// Elections a leader started by handing over leadership are exempt.
    pub fn vote_grace(&self) -> Option<Duration> {
        self.cfg
            .election_timeout_max
            .checked_sub(self.started.elapsed())
            .filter(|d| !d.is_zero())
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
        let r = self
            .raft
            .wait(Some(timeout))
            .metrics(move |m| pred(m), what)
            .await;
        r.map_err(|e| match &self.metrics().running_state {
            // The wait ended because the core stopped on a fatal error: name that error, not
            // the wait, so a startup step that dies with the core reads like `failed()`.
            Err(fatal) => RaftGroupError::Fatal(format!(
                "the Raft group stopped on a fatal error ({fatal}) while waiting for {what}"
            )),
            Ok(()) => RaftGroupError::Timeout(format!("{what}: {e}")),
        })
    }

    /// Resolves, with openraft's message, once this group's Raft has stopped on a fatal
    /// error (a log or state-machine storage error, a panic in its core). Pending forever
    /// while it runs and after a clean shutdown. A daemon exits on it: a Raft core that
    /// stopped never recovers in-process, and a process that keeps running with it looks
    /// alive to systemd while it serves nothing.
    pub async fn failed(&self) -> String {
        loop {
            let r = self
                .wait_for(Duration::from_secs(3600), "a fatal error", |m| {
                    m.running_state.is_err()
                })
                .await;
            let m = self.metrics();
            if let Err(e) = &m.running_state {
                return e.to_string();
            }
            if r.is_err() && m.state == openraft::ServerState::Shutdown {
                // Stopped cleanly: the wait fails at once from now on.
                std::future::pending::<()>().await;
            }
        }
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
        let m = self.metrics();
        if m.state != openraft::ServerState::Leader {
            return Err(self.not_leader_error());
        }
        // The target is elected without waiting for vote leases: this leader's lease ends now,
        // for the rest of its term.
        self.transfer_term
            .store(m.current_term + 1, Ordering::Release);
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

    /// Stops openraft and leaves the registry; storage closes when the last handle drops.
    pub async fn shutdown(&self) {
        self.registry.remove(&self.cfg.group_id);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(group = %self.cfg.group_id, error = %e, "raft shutdown");
        }
    }

    async fn download_verified(
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
fn pre_install_failpoint() -> Result<(), String> {
    fail::fail_point!("raft-snapshot-install", |_| Err(
        "failpoint raft-snapshot-install".to_string()
    ));
    Ok(())
}

impl<L: StateMachineLogic> RaftGroup<L> {
    fn check_vote_grace(&self, req: &VoteRequest<TypeConfig>) -> Result<(), String> {
        match self.vote_grace() {
            Some(left) if !req.leadership_transfer => {
                tracing::debug!(group = %self.cfg.group_id, candidate = %req.vote, ?left, "vote withheld");
                Err(format!(
                    "vote withheld: this member restarted less than an election timeout ago \
                     ({} left)",
                    rozone_config::format_duration(Duration::from_millis(left.as_millis() as u64))
                ))
            }
            _ => Ok(()),
        }
    }
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
