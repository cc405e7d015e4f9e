//! The SCM leader's in-memory view of the cluster: datanode registry, replica map, command
//! queues, in-flight replication, safe mode and ReplicationManager results.
//!
//! Nothing here is replicated. A leader after a cold ring start builds it from
//! registrations and reports; a leader taking over in a running ring starts from the
//! ring's datanode records ([`ClusterState::taken_over`]) outside safe mode, and asks each
//! datanode to register again for its reports ([`safemode::start`] decides which). The pure rules
//! (node health, replica counting, ReplicationManager decisions, the safe-mode rule) live in
//! the submodules as functions with their own tests; the async parts that write to the
//! replicated state are in [`crate::leader`].

pub mod commands;
pub mod deletion;
pub mod lifecycle;
pub mod nodes;
pub mod replicas;
pub mod replication;
pub mod safemode;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use commands::CommandQueues;
use nodes::NodeRegistry;
use replicas::ReplicaMap;

/// A replicate or delete command the ReplicationManager is waiting on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inflight {
    pub add: bool,
    pub datanode: u64,
    pub command_id: u64,
    pub deadline: Instant,
}

/// Results of the last ReplicationManager run and counters since this leader started.
#[derive(Debug, Clone, Default)]
pub struct RmStats {
    pub runs: u64,
    pub last_run: Option<Instant>,
    pub last_duration: Duration,
    pub healthy: u64,
    pub under: Vec<u64>,
    pub over: Vec<u64>,
    pub missing: Vec<u64>,
    pub replicate_sent: u64,
    pub delete_sent: u64,
    pub timeouts: u64,
}

/// Delivery of one deleted-block transaction: to whom it was sent, who executed it.
#[derive(Debug, Clone, Default)]
pub struct TxnDelivery {
    pub sent: BTreeMap<u64, Instant>,
    pub done: BTreeSet<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SafeMode {
    pub in_safe_mode: bool,
    pub forced_exit: bool,
    /// This leader's term is recorded in the ring as out of safe mode.
    pub recorded: bool,
}

/// Everything the leader of `term` knows in memory.
#[derive(Debug)]
pub struct ClusterState {
    pub term: u64,
    pub started: Instant,
    pub nodes: NodeRegistry,
    pub replicas: ReplicaMap,
    pub commands: CommandQueues,
    /// Container id → commands in flight for it.
    pub inflight: BTreeMap<u64, Vec<Inflight>>,
    /// Pipeline id → the member that last reported itself its leader.
    pub pipeline_leaders: HashMap<u64, u64>,
    /// Open container id → bytes handed out in blocks (starts at its used bytes).
    pub allocated: HashMap<u64, u64>,
    pub safe_mode: SafeMode,
    /// The unmet safe-mode rules at the last check, for refusals.
    pub safe_mode_detail: String,
    pub rm: RmStats,
    /// Deleted-block transaction id → delivery.
    pub deletes: BTreeMap<u64, TxnDelivery>,
    /// Round-robin position over candidate containers.
    pub next_pick: u64,
    /// What block allocation last read of the OPEN pipelines and containers (see
    /// [`OpenIndex`]); `None` until the first allocation of this term.
    pub open_index: Option<std::sync::Arc<OpenIndex>>,
}

/// The OPEN pipelines and OPEN containers as one full scan found them at `built`. Block
/// allocation picks from this instead of scanning (and decoding) every container ever
/// created on each call; the one it picks is re-read by id before it is handed out, and the
/// index is rebuilt once it is older than its time to live or a pick turns out stale.
#[derive(Debug, Clone)]
pub struct OpenIndex {
    pub built: Instant,
    pub pipelines: BTreeMap<u64, crate::state::PipelineInfo>,
    pub containers: Vec<crate::state::ContainerInfo>,
}

impl ClusterState {
    pub fn new(term: u64, now: Instant) -> Self {
        Self {
            term,
            started: now,
            nodes: NodeRegistry::default(),
            replicas: ReplicaMap::default(),
            commands: CommandQueues::new(term),
            inflight: BTreeMap::new(),
            pipeline_leaders: HashMap::new(),
            allocated: HashMap::new(),
            safe_mode: SafeMode {
                in_safe_mode: true,
                forced_exit: false,
                recorded: false,
            },
            safe_mode_detail: "no datanode has registered with this leader yet".into(),
            rm: RmStats::default(),
            deletes: BTreeMap::new(),
            next_pick: 0,
            open_index: None,
        }
    }

    /// The state of a leader taking over in a running ring: outside safe mode, every
    /// datanode of the ring's records seeded as last known ([`nodes::NodeRegistry::seed`]).
    pub fn taken_over(
        term: u64,
        now: Instant,
        records: impl IntoIterator<Item = crate::state::DatanodeRecord>,
    ) -> Self {
        let mut s = Self::new(term, now);
        for r in records {
            s.nodes.seed(r.datanode, r.health, now);
        }
        s.safe_mode.in_safe_mode = false;
        s.safe_mode_detail.clear();
        s
    }

    /// In-flight adds and deletes, counted.
    pub fn inflight_counts(&self) -> (u64, u64) {
        let all = self.inflight.values().flatten();
        let adds = all.clone().filter(|i| i.add).count() as u64;
        (adds, all.count() as u64 - adds)
    }

    /// Forgets an in-flight command of `container` on `datanode` (`add` or delete).
    pub fn end_inflight(&mut self, container: u64, datanode: u64, add: bool) {
        if let Some(v) = self.inflight.get_mut(&container) {
            v.retain(|i| !(i.datanode == datanode && i.add == add));
            if v.is_empty() {
                self.inflight.remove(&container);
            }
        }
    }
}
