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

pub mod closing;
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
use nodes::{NodeHealth, NodeRegistry};
use replicas::ReplicaMap;
use replication::{ContainerView, Decision, InflightView, ReplicaView};

use crate::state::ContainerInfo;

/// A replicate or delete command the ReplicationManager is waiting on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inflight {
    pub add: bool,
    pub datanode: u64,
    pub command_id: u64,
    pub deadline: Instant,
}

/// A pipeline as the leader shows it: members with their addresses from the registry (a
/// member the leader does not know yet has only its id) and the leader last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineView {
    pub id: u64,
    pub members: Vec<crate::state::Datanode>,
    pub leader_id: Option<u64>,
    pub state: crate::state::PipelineState,
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
    /// Since when each CLOSING container has looked never written ([`closing`]).
    pub closing: closing::Clock,
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
            closing: closing::Clock::default(),
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

    /// Pipeline `p` with what this leader knows of its members and leader.
    pub fn pipeline_view(&self, p: &crate::state::PipelineInfo) -> PipelineView {
        PipelineView {
            id: p.id,
            members: p
                .members
                .iter()
                .map(|d| match self.nodes.get(*d) {
                    Some(n) => n.details.clone(),
                    None => crate::state::Datanode {
                        id: *d,
                        hostname: String::new(),
                        container_addr: String::new(),
                        raft_addr: String::new(),
                        replication_addr: String::new(),
                    },
                })
                .collect(),
            leader_id: self.pipeline_leaders.get(&p.id).copied().or(p.leader),
            state: p.state,
        }
    }

    /// The replicas of container `id` as the judgement sees them (a node the leader does
    /// not know counts as DEAD).
    pub fn replica_views(&self, id: u64) -> Vec<ReplicaView> {
        self.replicas
            .replicas(id)
            .into_iter()
            .map(|r| ReplicaView {
                datanode: r.datanode,
                state: r.state,
                bcsid: r.bcsid,
                block_count: r.block_count,
                digest: r.digest,
                node: self.nodes.health(r.datanode).unwrap_or(NodeHealth::Dead),
            })
            .collect()
    }

    /// The judgement of `c` with the leader's current knowledge.
    pub fn judge(&self, c: &ContainerInfo) -> (Decision, Vec<ReplicaView>) {
        let replicas = self.replica_views(c.id);
        let inflight = self
            .inflight
            .get(&c.id)
            .map_or_else(InflightView::default, |v| InflightView {
                adds: v.iter().filter(|i| i.add).map(|i| i.datanode).collect(),
                deletes: v.iter().filter(|i| !i.add).map(|i| i.datanode).collect(),
            });
        // Targets: healthy datanodes whose volumes take data, fewest replicas first, then most
        // free space.
        let mut candidates: Vec<(usize, std::cmp::Reverse<u64>, u64)> = self
            .nodes
            .all()
            .filter(|n| n.health == NodeHealth::Healthy && n.usage.accepts_data())
            .map(|n| {
                (
                    self.replicas.count_on(n.details.id),
                    std::cmp::Reverse(n.usage.remaining),
                    n.details.id,
                )
            })
            .collect();
        candidates.sort_unstable();
        let ids: Vec<u64> = candidates.into_iter().map(|(_, _, id)| id).collect();
        (
            replication::decide(&ContainerView::of(c), &replicas, &inflight, &ids),
            replicas,
        )
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
