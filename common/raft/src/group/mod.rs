//! One Raft group on this node: openraft plus our log store, state machine, network and
//! leader-contact record, with the API services use. This file opens the group and holds
//! what the parts share; the API is split by concern: [`config`] (how to run a group),
//! [`lease`] (the write and read paths and the leader gate they pass), [`membership`]
//! (initialise, add, promote, remove, hand over), [`snapshots`] (build, purge, download
//! and install), [`restart`] (the vote grace and the prompt election after a restart) and
//! [`peer`] (the answers to the ring's Raft RPCs).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::errors::Fatal;
use openraft::type_config::async_runtime::WatchReceiver;
use rozone_kv::rocksdb::DB;

use crate::contact::LeaderContact;
use crate::error::RaftGroupError;
use crate::log_store::RocksLogStore;
use crate::network::{NetStats, NetworkFactory, PeerChannels};
use crate::registry::GroupRegistry;
use crate::snapshot::SnapshotStore;
use crate::state_machine::{RocksStateMachine, StateDb, StateMachineLogic};
use crate::types::{NodeId, NodeInfo, RaftMetrics, TypeConfig};

mod config;
mod lease;
mod membership;
mod peer;
mod restart;
mod snapshots;

pub use config::GroupConfig;

type Raft<L> = openraft::Raft<TypeConfig, RocksStateMachine<L>>;

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
    /// When this process opened the group, if its log held a vote from an earlier life:
    /// the start of its vote grace. `None` for a member that never voted nor acknowledged
    /// a leader (a new group, a member that joined as a learner and was not heard from
    /// yet): it has no promise to keep, and a new pipeline elects its first leader at once.
    grace_from: Option<Instant>,
    /// The vote stored when the group opened: what [`Self::votes_for`] goes by until
    /// openraft's metrics report the vote (they start from a blank one).
    opened_vote: Option<crate::types::Vote>,
    /// Set once peers are first served (the prompt election is considered then, once).
    prompted: std::sync::atomic::AtomicBool,
    /// The term (+1; 0 = none) in which this leader asked another member to take over.
    transfer_term: AtomicU64,
    /// The ring id of this group's join record, once known (see [`crate::join`]); shared
    /// with the network, which tags every peer RPC with it.
    ring: Arc<crate::join::RingSlot>,
    /// What the state machine's retry cache did.
    retry: Arc<crate::retry_cache::Stats>,
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
        // Opening replays RocksDB WALs and loads the state machine: disk work, off the async
        // workers (other groups of this process keep their heartbeats meanwhile).
        let (dir, fsync) = (cfg.dir.clone(), cfg.fsync);
        let (log, sm, voted) = crate::blocking::run(move || {
            let log = RocksLogStore::open(&dir.join("log"), fsync)?;
            let voted = log.stored_vote()?;
            let sm = RocksStateMachine::open(&dir.join("sm"), &dir.join("snapshots"), logic)?;
            Ok((log, sm, voted))
        })
        .await?;
        let log = log.with_append_hook(hook);
        let (state, snapshots, retry) = (sm.state(), sm.snapshots(), sm.retry_stats());
        let net_stats = Arc::new(NetStats::default());
        let ring = Arc::new(crate::join::RingSlot::default());
        let echoes = Arc::new(crate::contact::Echoes::default());
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
            echoes: echoes.clone(),
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
            grace_from: voted.is_some().then(Instant::now),
            opened_vote: voted,
            prompted: Default::default(),
            transfer_term: AtomicU64::new(0),
            ring,
            retry,
        });
        let weak = Arc::downgrade(&g);
        echoes.set_lease_check(Box::new(move || {
            weak.upgrade().is_some_and(|g| g.holds_lease_now())
        }));
        if g.cfg.serve_peers_at_start {
            g.serve_peers();
        }
        Ok(g)
    }

    /// Writes answered from the retry cache, and records held (see [`crate::retry_cache`]).
    pub fn retry_cache_stats(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.retry.hits.load(Relaxed),
            self.retry.entries.load(Relaxed),
        )
    }

    /// Opens the peer port to this group: from now on it answers the ring's Raft RPCs. The
    /// first time, a member whose vote names itself (it led before this start) stands for
    /// election at once ([`restart::elect_promptly`]).
    pub fn serve_peers(self: &Arc<Self>) {
        self.registry.insert(&self.cfg.group_id, self.clone());
        if !self
            .prompted
            .swap(true, std::sync::atomic::Ordering::AcqRel)
            && self.led_before_start()
        {
            tokio::spawn(restart::elect_promptly(
                Arc::downgrade(self),
                Instant::now(),
                restart::Prompt::Restarted,
            ));
        }
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

    /// The latest metrics of this node.
    pub fn metrics(&self) -> RaftMetrics {
        self.raft.metrics().borrow_watched().clone()
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

    /// Waits until this member's view of (leader, term) differs from `seen` and returns the
    /// new view; `None` once the group has stopped (shut down or failed), at once if it had.
    pub async fn next_leader_view(
        &self,
        seen: (Option<NodeId>, u64),
    ) -> Option<(Option<NodeId>, u64)> {
        let stopped = |m: &RaftMetrics| {
            m.state == openraft::ServerState::Shutdown || m.running_state.is_err()
        };
        loop {
            let r = self
                .wait_for(Duration::from_secs(3600), "a leader change", move |m| {
                    stopped(m) || (m.current_leader, m.current_term) != seen
                })
                .await;
            let m = self.metrics();
            if stopped(&m) {
                return None;
            }
            if r.is_ok() {
                return Some((m.current_leader, m.current_term));
            }
        }
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

    /// Stops openraft and leaves the registry; storage closes when the last handle drops.
    pub async fn shutdown(&self) {
        self.registry.remove(&self.cfg.group_id);
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(group = %self.cfg.group_id, error = %e, "raft shutdown");
        }
    }
}

fn fatal(e: Fatal<TypeConfig>) -> RaftGroupError {
    RaftGroupError::Fatal(e.to_string())
}
