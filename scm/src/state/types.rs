//! Domain records of the SCM state (containers, pipelines, deleted-block transactions) and
//! the container lifecycle. Plain data, stored with postcard: field order is part of the
//! on-disk format, so append fields, never reorder.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Lifecycle state of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ContainerState {
    Open,
    Closing,
    QuasiClosed,
    Closed,
    Deleting,
    Deleted,
}

impl ContainerState {
    /// Every state, for exhaustive tests and listings.
    pub const ALL: [ContainerState; 6] = [
        Self::Open,
        Self::Closing,
        Self::QuasiClosed,
        Self::Closed,
        Self::Deleting,
        Self::Deleted,
    ];

    /// The state after `event`, or `None` when the event is not allowed from this state.
    pub fn next(self, event: ContainerEvent) -> Option<ContainerState> {
        use ContainerEvent as E;
        use ContainerState as S;
        match (self, event) {
            (S::Open, E::Finalize) => Some(S::Closing),
            (S::Closing, E::QuasiClose) => Some(S::QuasiClosed),
            (S::Closing | S::QuasiClosed, E::Close) => Some(S::Closed),
            (S::Closed, E::Delete) => Some(S::Deleting),
            (S::Deleting, E::Cleanup) => Some(S::Deleted),
            _ => None,
        }
    }
}

impl fmt::Display for ContainerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Ozone's spelling, so logs read the same as theirs.
        f.write_str(match self {
            Self::Open => "OPEN",
            Self::Closing => "CLOSING",
            Self::QuasiClosed => "QUASI_CLOSED",
            Self::Closed => "CLOSED",
            Self::Deleting => "DELETING",
            Self::Deleted => "DELETED",
        })
    }
}

/// What moves a container through its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ContainerEvent {
    /// OPEN → CLOSING (full, pipeline failed, or admin).
    Finalize,
    /// CLOSING → QUASI_CLOSED (closed without pipeline consensus).
    QuasiClose,
    /// CLOSING | QUASI_CLOSED → CLOSED.
    Close,
    /// CLOSED → DELETING.
    Delete,
    /// DELETING → DELETED (all replicas gone).
    Cleanup,
}

impl ContainerEvent {
    pub const ALL: [ContainerEvent; 5] = [
        Self::Finalize,
        Self::QuasiClose,
        Self::Close,
        Self::Delete,
        Self::Cleanup,
    ];
}

/// Replication of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplicationFactor {
    One,
    Three,
}

impl ReplicationFactor {
    pub fn replicas(self) -> usize {
        match self {
            Self::One => 1,
            Self::Three => 3,
        }
    }
}

/// A container as the SCM records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerInfo {
    pub id: u64,
    pub state: ContainerState,
    pub replication: ReplicationFactor,
    /// Service that owns it (e.g. the OM service id).
    pub owner: String,
    pub pipeline_id: u64,
    pub used_bytes: u64,
    pub key_count: u64,
    /// Block commit sequence id: the highest committed block transaction; replicas below
    /// it are stale.
    pub bcsid: u64,
    /// Milliseconds since the Unix epoch, stamped by the leader before proposing (apply
    /// must not read the clock: members would disagree).
    pub created_at: u64,
}

/// Lifecycle state of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PipelineState {
    Open,
    Closed,
}

/// A pipeline: a Raft group of datanodes that containers are written through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineInfo {
    pub id: u64,
    /// Datanode ids; exactly [`PIPELINE_MEMBERS`], all distinct.
    pub members: Vec<u64>,
    /// Last known Raft leader among `members`.
    pub leader: Option<u64>,
    pub state: PipelineState,
}

/// Members of a (three-way replicated) pipeline.
pub const PIPELINE_MEMBERS: usize = 3;

impl PipelineInfo {
    /// Why this pipeline cannot be created, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.members.len() != PIPELINE_MEMBERS {
            return Err(format!(
                "needs {PIPELINE_MEMBERS} members, has {}",
                self.members.len()
            ));
        }
        let mut m = self.members.clone();
        m.sort_unstable();
        m.dedup();
        if m.len() != self.members.len() {
            return Err(format!("members {:?} are not distinct", self.members));
        }
        if let Some(l) = self.leader {
            if !self.members.contains(&l) {
                return Err(format!("leader {l} is not a member"));
            }
        }
        if self.state != PipelineState::Open {
            return Err("a new pipeline must be OPEN".to_string());
        }
        Ok(())
    }
}

/// Blocks of one container to delete on its datanodes, under one transaction id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedBlocksTxn {
    pub txn_id: u64,
    pub container_id: u64,
    pub local_ids: Vec<u64>,
}

/// A datanode as registered: who it is and where it listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Datanode {
    pub id: u64,
    pub hostname: String,
    pub container_addr: String,
    pub raft_addr: String,
    pub replication_addr: String,
}

/// Health of a datanode, from how long it has been silent. Stored in [`DatanodeRecord`]:
/// append variants, never reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeHealth {
    Healthy,
    /// No new pipelines or blocks on it; its replicas still count.
    Stale,
    /// Its pipelines are closed and its replicas no longer count.
    Dead,
}

impl fmt::Display for NodeHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Healthy => "HEALTHY",
            Self::Stale => "STALE",
            Self::Dead => "DEAD",
        })
    }
}

/// A datanode as the ring last knew it: its registration and the health its leader last
/// judged. Written when a datanode registers with new details and when its health changes
/// (never per heartbeat), so a new leader starts from it instead of from nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatanodeRecord {
    pub datanode: Datanode,
    pub health: NodeHealth,
}
