//! Golden bytes of every [`ScmRequest`] variant: entries committed by earlier builds must
//! decode, and this build must write them the same way.

use super::*;
use crate::state::types::{Datanode, DatanodeRecord, NodeHealth, PipelineState, ReplicationFactor};

/// The fixture name of each variant. A new variant fails to compile here until it is named
/// and given a sample below.
fn name(r: &ScmRequest) -> &'static str {
    match r {
        ScmRequest::SetClusterId { .. } => "SetClusterId",
        ScmRequest::AllocateBatch { .. } => "AllocateBatch",
        ScmRequest::CreateContainer(_) => "CreateContainer",
        ScmRequest::UpdateContainer { .. } => "UpdateContainer",
        ScmRequest::UpdateContainerUsage { .. } => "UpdateContainerUsage",
        ScmRequest::CreatePipeline(_) => "CreatePipeline",
        ScmRequest::ClosePipeline { .. } => "ClosePipeline",
        ScmRequest::AddDeletedBlocks { .. } => "AddDeletedBlocks",
        ScmRequest::RemoveDeletedBlocks { .. } => "RemoveDeletedBlocks",
        ScmRequest::RecordDatanode(_) => "RecordDatanode",
        ScmRequest::RecordSafeModeLeft { .. } => "RecordSafeModeLeft",
        ScmRequest::AddSecretKey(_) => "AddSecretKey",
        ScmRequest::RemoveExpiredSecretKeys { .. } => "RemoveExpiredSecretKeys",
        ScmRequest::AddJoinToken(_) => "AddJoinToken",
        ScmRequest::RedeemJoinToken { .. } => "RedeemJoinToken",
    }
}

fn samples() -> Vec<ScmRequest> {
    vec![
        ScmRequest::SetClusterId {
            cluster_id: "CID-1".into(),
        },
        ScmRequest::AllocateBatch {
            name: "block".into(),
            expected_last: 1000,
            new_last: 2000,
        },
        ScmRequest::CreateContainer(ContainerInfo {
            id: 12,
            state: ContainerState::Open,
            replication: ReplicationFactor::Three,
            owner: "om".into(),
            pipeline_id: 4,
            used_bytes: 0,
            key_count: 0,
            bcsid: 0,
            created_at: 1_700_000_000_000,
        }),
        ScmRequest::UpdateContainer {
            id: 12,
            event: ContainerEvent::QuasiClose,
        },
        ScmRequest::UpdateContainerUsage {
            id: 12,
            used_bytes: 4096,
            key_count: 2,
            bcsid: 33,
        },
        ScmRequest::CreatePipeline(PipelineInfo {
            id: 4,
            members: vec![1, 2, 3],
            leader: Some(2),
            state: PipelineState::Open,
        }),
        ScmRequest::ClosePipeline { id: 4 },
        ScmRequest::AddDeletedBlocks {
            txn_id: 7,
            container_id: 12,
            local_ids: vec![1, 2],
        },
        ScmRequest::RemoveDeletedBlocks { txn_ids: vec![7] },
        ScmRequest::RecordDatanode(DatanodeRecord {
            datanode: Datanode {
                id: 3,
                hostname: "dn3".into(),
                container_addr: "h:9859".into(),
                raft_addr: "h:9858".into(),
                replication_addr: "h:9857".into(),
            },
            health: NodeHealth::Stale,
        }),
        ScmRequest::RecordSafeModeLeft { term: 4 },
        ScmRequest::AddSecretKey(crate::state::secret_keys::SecretKeyRecord {
            id: 3,
            secret: (0..32).collect(),
            created_ms: 1_700_000_000_000,
            expires_ms: 1_700_086_400_000,
            keep_until_ms: 1_700_090_000_000,
        }),
        ScmRequest::RemoveExpiredSecretKeys {
            now_ms: 1_700_090_000_000,
        },
        ScmRequest::AddJoinToken(crate::state::join_tokens::JoinTokenRecord {
            digest: (0..32).collect(),
            role: "datanode".into(),
            id: 4,
            created_ms: 1_700_000_000_000,
            expires_ms: 1_700_003_600_000,
        }),
        ScmRequest::RedeemJoinToken {
            digest: (0..32).collect(),
            now_ms: 1_700_000_100_000,
        },
    ]
}

#[test]
fn every_request_variant_matches_its_golden_bytes() {
    let samples: Vec<(&str, ScmRequest)> = samples().into_iter().map(|r| (name(&r), r)).collect();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/requests-v1.txt");
    rozone_raft::golden::check(&path, &samples, rozone_raft::envelope::seal, |b| {
        rozone_raft::envelope::open(b, "SCM request")
    });
}
