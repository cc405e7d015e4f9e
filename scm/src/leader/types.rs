//! What the leader's work takes and returns, in domain terms: the datanode protocol
//! (registration, heartbeat), block allocation and deletion, and the status the admin
//! calls report. [`crate::convert`] builds these from the wire (checking every field) and
//! turns the replies back into protobuf, so nothing under [`crate::leader`] speaks it.

use std::collections::BTreeSet;

use crate::cluster::commands::QueuedCommand;
use crate::cluster::nodes::{Datanode, NodeHealth, NodeUsage};
use crate::cluster::replicas::{ReplicaReport, ReplicaState};
use crate::cluster::replication::Verdict;
use crate::cluster::safemode::{SafeModeEval, SafeModeInput};
use crate::cluster::PipelineView;
use crate::state::ContainerInfo;

/// A pipeline a datanode reports being a member of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineReport {
    pub pipeline_id: u64,
    /// The datanode leads the pipeline's Raft group.
    pub is_leader: bool,
}

/// A checked registration.
#[derive(Debug, Clone)]
pub struct Registration {
    pub datanode: Datanode,
    /// Every replica it holds (empty when it sent no report).
    pub full: Vec<ReplicaReport>,
    pub usage: NodeUsage,
    pub pipelines: Vec<PipelineReport>,
}

/// The answer to a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub cluster_id: String,
    pub datanode_id: u64,
}

/// A checked heartbeat: what [`crate::leader::reports`] applies.
#[derive(Debug, Clone)]
pub struct Beat {
    pub dn: u64,
    pub usage: Option<NodeUsage>,
    pub full: Option<Vec<ReplicaReport>>,
    pub incremental: Vec<ReplicaReport>,
    pub pipelines: Vec<PipelineReport>,
    /// Pipelines the datanode asks to close, with its reason.
    pub close_pipelines: Vec<(u64, String)>,
    /// Outcome of earlier commands: (command id, executed).
    pub statuses: Vec<(u64, bool)>,
}

/// The answer to a heartbeat: the datanode's queued commands, or "register again".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeatReply {
    pub commands: Vec<QueuedCommand>,
    pub reregister: bool,
}

/// A block allocation request as the caller sent it (checked by the leader, which knows
/// the block size).
#[derive(Debug, Clone, Default)]
pub struct BlockRequest {
    /// Bytes per block; 0 = the SCM's block size.
    pub size: u64,
    pub count: u32,
    pub owner: String,
    pub exclude_datanodes: BTreeSet<u64>,
    pub exclude_pipelines: BTreeSet<u64>,
    pub exclude_containers: BTreeSet<u64>,
}

/// One allocated block and where to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedBlock {
    pub container_id: u64,
    pub local_id: u64,
    pub pipeline: PipelineView,
    pub max_size: u64,
}

/// The ReplicationManager's last results and counters (lists capped for the reply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RmStatus {
    pub healthy: u64,
    pub under_replicated: u64,
    pub over_replicated: u64,
    pub missing: u64,
    pub inflight_adds: u64,
    pub inflight_deletes: u64,
    pub runs: u64,
    pub last_run_age_ms: Option<u64>,
    pub last_run_duration_ms: u64,
    pub under_replicated_containers: Vec<u64>,
    pub over_replicated_containers: Vec<u64>,
    pub missing_containers: Vec<u64>,
    pub replicate_commands_sent: u64,
    pub delete_commands_sent: u64,
    pub inflight_timeouts: u64,
}

/// One replica of a container, as `ContainerInfo` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    pub datanode_id: u64,
    pub hostname: String,
    pub state: ReplicaState,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub healthy: bool,
    pub last_report_age_ms: u64,
}

/// A container with its replicas and the ReplicationManager's verdict on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerReport {
    pub container: ContainerInfo,
    pub replicas: Vec<ReplicaStatus>,
    pub verdict: Verdict,
    pub healthy_replicas: u32,
}

/// A registered datanode as `ListDatanodes` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatanodeStatus {
    pub datanode: Datanode,
    pub health: NodeHealth,
    pub last_heartbeat_age_ms: u64,
    pub usage: NodeUsage,
    pub replica_count: u32,
    pub pipeline_count: u32,
    pub queued_commands: u32,
}

/// A pipeline as `ListPipelines` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineStatus {
    pub pipeline: PipelineView,
    pub open_containers: u32,
}

/// Safe mode of this leader's term, with the rule evaluation behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct SafeModeStatus {
    pub in_safe_mode: bool,
    pub forced_exit: bool,
    pub eval: SafeModeEval,
    pub input: SafeModeInput,
}
