//! Wire ↔ domain conversions at the edge of the SCM's services. Incoming messages are
//! checked here: a missing or invalid field is an [`Invalid`] naming it, which the services
//! answer with `INVALID_ARGUMENT` (through [`crate::error::ScmError`]) before anything changes.

use rozone_proto::scm as pb;

mod replies;
mod reports;
mod ring;

pub use crate::leader::types::Beat;
pub use replies::*;
pub use reports::{heartbeat, node_usage, registration, replica_report, replica_reports};
pub use ring::ring_info;

use crate::cluster::nodes::{Datanode, NodeHealth};
use crate::cluster::replicas::ReplicaState;
use crate::cluster::replication::Verdict;
use crate::cluster::PipelineView;
use crate::error::Invalid;
use crate::leader::types::BlockRequest;
use crate::state::{ContainerInfo, ContainerState, PipelineState};

pub fn datanode_details(d: &Datanode) -> pb::DatanodeDetails {
    pb::DatanodeDetails {
        id: d.id,
        hostname: d.hostname.clone(),
        container_addr: d.container_addr.clone(),
        raft_addr: d.raft_addr.clone(),
        replication_addr: d.replication_addr.clone(),
    }
}

pub fn replica_state(s: ReplicaState) -> pb::ReplicaState {
    match s {
        ReplicaState::Open => pb::ReplicaState::ReplicaOpen,
        ReplicaState::Closing => pb::ReplicaState::ReplicaClosing,
        ReplicaState::QuasiClosed => pb::ReplicaState::ReplicaQuasiClosed,
        ReplicaState::Closed => pb::ReplicaState::ReplicaClosed,
        ReplicaState::Unhealthy => pb::ReplicaState::ReplicaUnhealthy,
    }
}

pub fn container_state(s: ContainerState) -> pb::ContainerState {
    match s {
        ContainerState::Open => pb::ContainerState::ContainerOpen,
        ContainerState::Closing => pb::ContainerState::ContainerClosing,
        ContainerState::QuasiClosed => pb::ContainerState::ContainerQuasiClosed,
        ContainerState::Closed => pb::ContainerState::ContainerClosed,
        ContainerState::Deleting => pb::ContainerState::ContainerDeleting,
        ContainerState::Deleted => pb::ContainerState::ContainerDeleted,
    }
}

/// A container state filter from the wire (`field` names it in the error).
pub fn container_state_from(v: i32, field: &str) -> Result<ContainerState, Invalid> {
    match pb::ContainerState::try_from(v) {
        Ok(pb::ContainerState::ContainerOpen) => Ok(ContainerState::Open),
        Ok(pb::ContainerState::ContainerClosing) => Ok(ContainerState::Closing),
        Ok(pb::ContainerState::ContainerQuasiClosed) => Ok(ContainerState::QuasiClosed),
        Ok(pb::ContainerState::ContainerClosed) => Ok(ContainerState::Closed),
        Ok(pb::ContainerState::ContainerDeleting) => Ok(ContainerState::Deleting),
        Ok(pb::ContainerState::ContainerDeleted) => Ok(ContainerState::Deleted),
        Ok(pb::ContainerState::Unspecified) | Err(_) => Err(Invalid(format!(
            "{field}: {v} is not a container state (1 OPEN .. 6 DELETED)"
        ))),
    }
}

pub fn pipeline_state(s: PipelineState) -> pb::PipelineState {
    match s {
        PipelineState::Open => pb::PipelineState::PipelineOpen,
        PipelineState::Closed => pb::PipelineState::PipelineClosed,
    }
}

pub fn pipeline_state_from(v: i32, field: &str) -> Result<PipelineState, Invalid> {
    match pb::PipelineState::try_from(v) {
        Ok(pb::PipelineState::PipelineOpen) => Ok(PipelineState::Open),
        Ok(pb::PipelineState::PipelineClosed) => Ok(PipelineState::Closed),
        _ => Err(Invalid(format!(
            "{field}: {v} is not a pipeline state (1 OPEN, 2 CLOSED)"
        ))),
    }
}

pub fn container(c: &ContainerInfo) -> pb::Container {
    pb::Container {
        container_id: c.id,
        state: container_state(c.state) as i32,
        replication_factor: c.replication.replicas() as u32,
        owner: c.owner.clone(),
        pipeline_id: c.pipeline_id,
        used_bytes: c.used_bytes,
        block_count: c.key_count,
        bcsid: c.bcsid,
        created_at_ms: c.created_at,
    }
}

pub fn node_health(h: NodeHealth) -> pb::NodeHealth {
    match h {
        NodeHealth::Healthy => pb::NodeHealth::NodeHealthy,
        NodeHealth::Stale => pb::NodeHealth::NodeStale,
        NodeHealth::Dead => pb::NodeHealth::NodeDead,
    }
}

pub fn verdict(v: Verdict) -> pb::ReplicationHealth {
    match v {
        Verdict::Healthy => pb::ReplicationHealth::ReplicationHealthy,
        Verdict::UnderReplicated => pb::ReplicationHealth::ReplicationUnderReplicated,
        Verdict::OverReplicated => pb::ReplicationHealth::ReplicationOverReplicated,
        Verdict::Missing => pb::ReplicationHealth::ReplicationMissing,
        Verdict::NotChecked => pb::ReplicationHealth::ReplicationNotChecked,
    }
}

/// The wire form of a pipeline (a member the leader does not know yet goes by id only).
pub fn pipeline(p: &PipelineView) -> pb::Pipeline {
    pb::Pipeline {
        id: p.id,
        members: p.members.iter().map(datanode_details).collect(),
        leader_id: p.leader_id,
        state: pipeline_state(p.state) as i32,
    }
}

/// A block allocation request (its values are checked by the leader, which knows the
/// block size).
pub fn block_request(r: pb::AllocateBlockRequest) -> BlockRequest {
    BlockRequest {
        size: r.size,
        count: r.count,
        owner: r.owner,
        exclude_datanodes: r.exclude_datanodes.into_iter().collect(),
        exclude_pipelines: r.exclude_pipelines.into_iter().collect(),
        exclude_containers: r.exclude_containers.into_iter().collect(),
    }
}

/// The blocks of a delete request as (container id, local id) pairs (checked by the leader).
pub fn block_ids(r: &pb::DeleteBlocksRequest) -> Vec<(u64, u64)> {
    r.blocks
        .iter()
        .map(|b| (b.container_id, b.local_id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_fields_are_named() {
        let d = pb::DatanodeDetails {
            id: 0,
            ..Default::default()
        };
        assert_eq!(
            Datanode::try_from(&d).unwrap_err().0,
            "datanode.id must be above 0"
        );
        let d = pb::DatanodeDetails {
            id: 4,
            container_addr: "h:1".into(),
            ..Default::default()
        };
        assert_eq!(
            Datanode::try_from(&d).unwrap_err().0,
            "datanode 4: raft_addr is missing"
        );
        let r = pb::ContainerReplica {
            container_id: 3,
            state: pb::ReplicaState::ReplicaDeleted as i32,
            ..Default::default()
        };
        assert!(replica_report(&r, true).unwrap().state.is_none());
        assert!(replica_report(&r, false).is_err());
        let r = pb::ContainerReplica {
            container_id: 3,
            state: 42,
            ..Default::default()
        };
        assert_eq!(
            replica_report(&r, true).unwrap_err().0,
            "container 3: unknown replica state 42"
        );
        assert!(container_state_from(0, "state").is_err());
        assert_eq!(
            container_state_from(4, "state").unwrap(),
            ContainerState::Closed
        );
    }
}
