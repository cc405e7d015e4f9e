//! What datanodes send, from the wire: their details, usage, replica reports and
//! heartbeats, each checked whole (a missing or invalid field is an [`Invalid`] naming it)
//! before the leader applies any of it.

use rozone_proto::scm as pb;

use crate::cluster::nodes::{Datanode, NodeUsage};
use crate::cluster::replicas::{Digest, ReplicaReport, ReplicaState};
use crate::error::Invalid;
use crate::leader::types::{Beat, PipelineReport, Registration};

fn need(ok: bool, msg: impl FnOnce() -> String) -> Result<(), Invalid> {
    if ok {
        Ok(())
    } else {
        Err(Invalid(msg()))
    }
}

impl TryFrom<&pb::DatanodeDetails> for Datanode {
    type Error = Invalid;

    fn try_from(d: &pb::DatanodeDetails) -> Result<Self, Invalid> {
        need(d.id > 0, || "datanode.id must be above 0".into())?;
        for (name, v) in [
            ("container_addr", &d.container_addr),
            ("raft_addr", &d.raft_addr),
        ] {
            need(!v.is_empty(), || {
                format!("datanode {}: {name} is missing", d.id)
            })?;
        }
        Ok(Datanode {
            id: d.id,
            hostname: d.hostname.clone(),
            container_addr: d.container_addr.clone(),
            raft_addr: d.raft_addr.clone(),
            replication_addr: d.replication_addr.clone(),
        })
    }
}

/// Totals of the working volumes, and how many volumes failed or still take data (a full
/// volume reports no remaining space).
pub fn node_usage(r: &pb::NodeReport) -> NodeUsage {
    let volumes = r.storage.len() as u64;
    let failed_volumes = r.storage.iter().filter(|s| s.failed).count() as u64;
    r.storage.iter().filter(|s| !s.failed).fold(
        NodeUsage {
            volumes,
            failed_volumes,
            ..NodeUsage::default()
        },
        |u, s| NodeUsage {
            capacity: u.capacity.saturating_add(s.capacity),
            used: u.used.saturating_add(s.used),
            remaining: u.remaining.saturating_add(s.remaining),
            writable_volumes: u.writable_volumes + u64::from(s.remaining > 0),
            ..u
        },
    )
}

/// A reported replica; `incremental` allows `REPLICA_DELETED`.
pub fn replica_report(
    r: &pb::ContainerReplica,
    incremental: bool,
) -> Result<ReplicaReport, Invalid> {
    need(r.container_id > 0, || {
        "replica container_id must be above 0".into()
    })?;
    let st = pb::ReplicaState::try_from(r.state).map_err(|_| {
        Invalid(format!(
            "container {}: unknown replica state {}",
            r.container_id, r.state
        ))
    })?;
    let state = match st {
        pb::ReplicaState::Unspecified => {
            return Err(Invalid(format!(
                "container {}: replica state is missing",
                r.container_id
            )))
        }
        pb::ReplicaState::ReplicaOpen => Some(ReplicaState::Open),
        pb::ReplicaState::ReplicaClosing => Some(ReplicaState::Closing),
        pb::ReplicaState::ReplicaQuasiClosed => Some(ReplicaState::QuasiClosed),
        pb::ReplicaState::ReplicaClosed => Some(ReplicaState::Closed),
        pb::ReplicaState::ReplicaUnhealthy => Some(ReplicaState::Unhealthy),
        pb::ReplicaState::ReplicaDeleted if incremental => None,
        pb::ReplicaState::ReplicaDeleted => {
            return Err(Invalid(format!(
                "container {}: REPLICA_DELETED is only valid in an incremental report",
                r.container_id
            )))
        }
    };
    Ok(ReplicaReport {
        container_id: r.container_id,
        state,
        bcsid: r.bcsid,
        block_count: r.block_count,
        used_bytes: r.used_bytes,
        origin_pipeline: r.origin_pipeline_id,
        // Version 0 is "not reported": such a replica is judged without a digest.
        digest: (r.digest_version != 0).then_some(Digest {
            version: r.digest_version,
            sum: r.content_digest,
        }),
    })
}

pub fn replica_reports(
    rs: &[pb::ContainerReplica],
    incremental: bool,
) -> Result<Vec<ReplicaReport>, Invalid> {
    rs.iter().map(|r| replica_report(r, incremental)).collect()
}

fn pipeline_reports(rs: &[pb::PipelineReport]) -> Vec<PipelineReport> {
    rs.iter()
        .map(|p| PipelineReport {
            pipeline_id: p.pipeline_id,
            is_leader: p.is_leader,
        })
        .collect()
}

/// A registration, checked whole before anything changes.
pub fn registration(r: &pb::RegisterRequest) -> Result<Registration, Invalid> {
    let details = r
        .datanode
        .as_ref()
        .ok_or_else(|| Invalid("datanode is missing".into()))?;
    let datanode = Datanode::try_from(details)?;
    let full = match &r.container_report {
        Some(c) => replica_reports(&c.replicas, false)?,
        None => Vec::new(),
    };
    Ok(Registration {
        datanode,
        full,
        usage: r.node_report.as_ref().map(node_usage).unwrap_or_default(),
        pipelines: pipeline_reports(&r.pipeline_reports),
    })
}

/// A heartbeat, checked whole before anything changes.
pub fn heartbeat(r: &pb::HeartbeatRequest) -> Result<Beat, Invalid> {
    if r.datanode_id == 0 {
        return Err(Invalid("datanode_id must be above 0".into()));
    }
    let full = r
        .full_container_report
        .as_ref()
        .map(|f| replica_reports(&f.replicas, false))
        .transpose()?;
    let incremental = replica_reports(&r.incremental_container_report, true)?;
    let mut close_pipelines = Vec::new();
    for a in &r.pipeline_actions {
        if a.pipeline_id == 0 {
            return Err(Invalid(
                "pipeline action: pipeline_id must be above 0".into(),
            ));
        }
        match pb::pipeline_action::Action::try_from(a.action) {
            Ok(pb::pipeline_action::Action::Close) => {
                close_pipelines.push((a.pipeline_id, a.reason.clone()))
            }
            _ => {
                return Err(Invalid(format!(
                    "pipeline {}: action {} is not CLOSE",
                    a.pipeline_id, a.action
                )))
            }
        }
    }
    let mut statuses = Vec::new();
    for s in &r.command_status {
        match pb::command_status::Status::try_from(s.status) {
            Ok(pb::command_status::Status::Executed) => statuses.push((s.command_id, true)),
            Ok(pb::command_status::Status::Failed) => statuses.push((s.command_id, false)),
            Ok(pb::command_status::Status::Pending) => {}
            _ => {
                return Err(Invalid(format!(
                    "command {}: status {} is not PENDING, EXECUTED or FAILED",
                    s.command_id, s.status
                )))
            }
        }
    }
    Ok(Beat {
        dn: r.datanode_id,
        usage: r.node_report.as_ref().map(node_usage),
        full,
        incremental,
        pipelines: pipeline_reports(&r.pipeline_reports),
        close_pipelines,
        statuses,
    })
}
