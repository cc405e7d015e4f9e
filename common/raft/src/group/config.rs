//! [`GroupConfig`]: how to run one group, and the openraft configuration it makes.

use std::path::PathBuf;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};

use crate::download::DownloadPolicy;
use crate::error::RaftGroupError;
use crate::gate;
use crate::types::{NodeId, NodeInfo};

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

    pub(super) fn openraft_config(&self) -> Result<Config, RaftGroupError> {
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
