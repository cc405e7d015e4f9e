//! What the SCM's services answer, from the leader's domain replies: commands for
//! datanodes, register and heartbeat replies, allocated blocks and the admin listings.

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_command::Command;

use super::{
    container, container_state, datanode_details, node_health, pipeline, replica_state, verdict,
};
use crate::cluster::commands::{DatanodeCommand, QueuedCommand};
use crate::leader::types::{
    AllocatedBlock, BeatReply, ContainerReport, DatanodeStatus, PipelineStatus, Registered,
    RmStatus, SafeModeStatus,
};

fn details(ds: &[crate::state::Datanode]) -> Vec<pb::DatanodeDetails> {
    ds.iter().map(datanode_details).collect()
}

pub fn command(c: &DatanodeCommand) -> Command {
    match c {
        DatanodeCommand::CreatePipeline {
            pipeline_id,
            members,
        } => Command::CreatePipeline(pb::CreatePipelineCommand {
            pipeline_id: *pipeline_id,
            members: details(members),
        }),
        DatanodeCommand::ClosePipeline { pipeline_id } => {
            Command::ClosePipeline(pb::ClosePipelineCommand {
                pipeline_id: *pipeline_id,
            })
        }
        DatanodeCommand::CloseContainer {
            container_id,
            pipeline_id,
            force,
        } => Command::CloseContainer(pb::CloseContainerCommand {
            container_id: *container_id,
            pipeline_id: *pipeline_id,
            force: *force,
        }),
        DatanodeCommand::DeleteContainer {
            container_id,
            force,
        } => Command::DeleteContainer(pb::DeleteContainerCommand {
            container_id: *container_id,
            force: *force,
        }),
        DatanodeCommand::ReplicateContainer {
            container_id,
            sources,
        } => Command::ReplicateContainer(pb::ReplicateContainerCommand {
            container_id: *container_id,
            sources: details(sources),
        }),
        DatanodeCommand::DeleteBlocks { txns } => Command::DeleteBlocks(pb::DeleteBlocksCommand {
            txns: txns
                .iter()
                .map(|t| pb::DeletedBlocksTransaction {
                    txn_id: t.txn_id,
                    container_id: t.container_id,
                    local_ids: t.local_ids.clone(),
                })
                .collect(),
        }),
    }
}

pub fn queued_command(c: &QueuedCommand) -> pb::ScmCommand {
    pb::ScmCommand {
        id: c.id,
        term: c.term,
        command: Some(command(&c.command)),
    }
}

pub fn registered(r: Registered) -> pb::RegisterReply {
    pb::RegisterReply {
        cluster_id: r.cluster_id,
        datanode_id: r.datanode_id,
        secret_keys: Vec::new(),
    }
}

pub fn beat_reply(r: &BeatReply) -> pb::HeartbeatReply {
    pb::HeartbeatReply {
        commands: r.commands.iter().map(queued_command).collect(),
        reregister: r.reregister,
        secret_keys: Vec::new(),
    }
}

/// The block-token keys as OMs and datanodes receive them.
pub fn secret_keys(keys: &[crate::state::secret_keys::SecretKeyRecord]) -> Vec<pb::SecretKey> {
    keys.iter()
        .map(|k| pb::SecretKey {
            id: k.id,
            secret: k.secret.clone(),
            created_ms: k.created_ms,
            expires_ms: k.expires_ms,
            keep_until_ms: k.keep_until_ms,
        })
        .collect()
}

pub fn allocated_blocks(blocks: &[AllocatedBlock]) -> pb::AllocateBlockReply {
    pb::AllocateBlockReply {
        blocks: blocks
            .iter()
            .map(|b| pb::AllocatedBlock {
                block_id: Some(pb::BlockId {
                    container_id: b.container_id,
                    local_id: b.local_id,
                }),
                pipeline: Some(pipeline(&b.pipeline)),
                max_size: b.max_size,
                // Tokens are the OM's to sign, for its own clients.
                block_token: Vec::new(),
            })
            .collect(),
    }
}

pub fn container_report(r: &ContainerReport) -> pb::ContainerInfoReply {
    pb::ContainerInfoReply {
        container: Some(container(&r.container)),
        replicas: r
            .replicas
            .iter()
            .map(|x| pb::ReplicaInfo {
                datanode_id: x.datanode_id,
                hostname: x.hostname.clone(),
                state: replica_state(x.state) as i32,
                bcsid: x.bcsid,
                block_count: x.block_count,
                used_bytes: x.used_bytes,
                healthy: x.healthy,
                last_report_age_ms: x.last_report_age_ms,
            })
            .collect(),
        replication_health: verdict(r.verdict) as i32,
        healthy_replicas: r.healthy_replicas,
    }
}

pub fn close_reply(state: crate::state::ContainerState) -> pb::CloseContainerReply {
    pb::CloseContainerReply {
        state: container_state(state) as i32,
    }
}

pub fn datanode_status(s: &DatanodeStatus) -> pb::DatanodeStatus {
    pb::DatanodeStatus {
        datanode: Some(datanode_details(&s.datanode)),
        health: node_health(s.health) as i32,
        last_heartbeat_age_ms: s.last_heartbeat_age_ms,
        capacity_bytes: s.usage.capacity,
        used_bytes: s.usage.used,
        remaining_bytes: s.usage.remaining,
        replica_count: s.replica_count,
        pipeline_count: s.pipeline_count,
        queued_commands: s.queued_commands,
    }
}

pub fn pipeline_status(s: &PipelineStatus) -> pb::PipelineStatus {
    pb::PipelineStatus {
        pipeline: Some(pipeline(&s.pipeline)),
        open_containers: s.open_containers,
    }
}

pub fn safe_mode_status(s: &SafeModeStatus) -> pb::SafeModeStatusReply {
    let (eval, input) = (&s.eval, &s.input);
    pb::SafeModeStatusReply {
        in_safe_mode: s.in_safe_mode,
        forced_exit: s.forced_exit,
        reported_share: eval.reported_share,
        threshold: input.threshold,
        containers_total: input.containers_total,
        containers_reported: input.containers_reported,
        healthy_datanodes: input.healthy_datanodes,
        min_datanodes: input.min_datanodes,
        rules: eval
            .rules
            .iter()
            .map(|r| pb::SafeModeRule {
                name: r.name.to_string(),
                satisfied: r.satisfied,
                detail: r.detail.clone(),
            })
            .collect(),
    }
}

pub fn rm_status(s: RmStatus) -> pb::ReplicationManagerStatusReply {
    pb::ReplicationManagerStatusReply {
        healthy: s.healthy,
        under_replicated: s.under_replicated,
        over_replicated: s.over_replicated,
        missing: s.missing,
        inflight_adds: s.inflight_adds,
        inflight_deletes: s.inflight_deletes,
        runs: s.runs,
        last_run_age_ms: s.last_run_age_ms,
        last_run_duration_ms: s.last_run_duration_ms,
        under_replicated_containers: s.under_replicated_containers,
        over_replicated_containers: s.over_replicated_containers,
        missing_containers: s.missing_containers,
        replicate_commands_sent: s.replicate_commands_sent,
        delete_commands_sent: s.delete_commands_sent,
        inflight_timeouts: s.inflight_timeouts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Datanode, DeletedBlocksTxn};

    fn dn(id: u64) -> Datanode {
        Datanode {
            id,
            hostname: format!("h{id}"),
            container_addr: format!("c{id}:1"),
            raft_addr: format!("r{id}:2"),
            replication_addr: format!("p{id}:3"),
        }
    }

    /// Each domain command goes out as the wire message it replaced, field for field.
    #[test]
    fn commands_keep_their_wire_form() {
        let wire = |c: DatanodeCommand| {
            queued_command(&QueuedCommand {
                id: 4,
                term: 9,
                command: c,
            })
        };
        let got = wire(DatanodeCommand::CreatePipeline {
            pipeline_id: 2,
            members: vec![dn(1), dn(3)],
        });
        assert_eq!((got.id, got.term), (4, 9));
        assert_eq!(
            got.command,
            Some(Command::CreatePipeline(pb::CreatePipelineCommand {
                pipeline_id: 2,
                members: vec![datanode_details(&dn(1)), datanode_details(&dn(3))],
            }))
        );
        assert_eq!(
            datanode_details(&dn(3)),
            pb::DatanodeDetails {
                id: 3,
                hostname: "h3".into(),
                container_addr: "c3:1".into(),
                raft_addr: "r3:2".into(),
                replication_addr: "p3:3".into(),
            }
        );
        let cases = [
            (
                DatanodeCommand::ClosePipeline { pipeline_id: 5 },
                Command::ClosePipeline(pb::ClosePipelineCommand { pipeline_id: 5 }),
            ),
            (
                DatanodeCommand::CloseContainer {
                    container_id: 6,
                    pipeline_id: 5,
                    force: true,
                },
                Command::CloseContainer(pb::CloseContainerCommand {
                    container_id: 6,
                    pipeline_id: 5,
                    force: true,
                }),
            ),
            (
                DatanodeCommand::DeleteContainer {
                    container_id: 6,
                    force: false,
                },
                Command::DeleteContainer(pb::DeleteContainerCommand {
                    container_id: 6,
                    force: false,
                }),
            ),
            (
                DatanodeCommand::ReplicateContainer {
                    container_id: 7,
                    sources: vec![dn(2)],
                },
                Command::ReplicateContainer(pb::ReplicateContainerCommand {
                    container_id: 7,
                    sources: vec![datanode_details(&dn(2))],
                }),
            ),
            (
                DatanodeCommand::DeleteBlocks {
                    txns: vec![DeletedBlocksTxn {
                        txn_id: 8,
                        container_id: 7,
                        local_ids: vec![1, 3],
                    }],
                },
                Command::DeleteBlocks(pb::DeleteBlocksCommand {
                    txns: vec![pb::DeletedBlocksTransaction {
                        txn_id: 8,
                        container_id: 7,
                        local_ids: vec![1, 3],
                    }],
                }),
            ),
        ];
        for (domain, want) in cases {
            assert_eq!(wire(domain).command, Some(want));
        }
    }
}
