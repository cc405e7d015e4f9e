//! The `ScmRing` gRPC service on the SCM client port: ring info, checkpoint preparation for
//! a joining SCM, and adding a member. Refusals go out through the one mapping of
//! [`ScmError`].

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rozone_proto::scm::scm_ring_server::ScmRing;
use rozone_proto::scm::{
    AddMemberReply, AddMemberRequest, PrepareCheckpointReply, PrepareCheckpointRequest,
    RingInfoReply, RingInfoRequest, RingMember,
};
use rozone_raft::{NodeInfo, RaftGroup};
use tonic::{Request, Response, Status};

use crate::error::{Invalid, ScmError};
use crate::state::ScmLogic;

/// Metadata key carrying the leader's client address on a `NotLeader` refusal (the shared
/// key of `rozone_rpc`).
pub use rozone_rpc::LEADER_HINT;

/// How long a leader waits for a checkpoint to be built, and for a joining member to catch
/// up before it becomes a voter.
const WAIT: Duration = Duration::from_secs(60);

pub struct RingService {
    pub group: Arc<RaftGroup<ScmLogic>>,
    /// Advertised address of this node's checkpoint download service.
    pub checkpoint_addr: String,
}

/// The ring as this member sees it, with each member's role.
pub fn ring_info(group: &RaftGroup<ScmLogic>) -> RingInfoReply {
    let m = group.metrics();
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let me = group.node_id();
    let my_role = format!("{:?}", m.state).to_uppercase();
    let members = membership
        .nodes()
        .map(|(id, n)| RingMember {
            id: *id,
            peer_addr: n.peer_addr.clone(),
            client_addr: n.client_addr.clone(),
            voter: voters.contains(id),
            role: if *id == me {
                my_role.clone()
            } else if m.current_leader == Some(*id) {
                "LEADER".to_string()
            } else if !voters.contains(id) {
                "LEARNER".to_string()
            } else if m.current_leader.is_some() {
                "FOLLOWER".to_string()
            } else {
                "UNKNOWN".to_string()
            },
        })
        .collect();
    let leader_client_addr = m
        .current_leader
        .and_then(|id| membership.get_node(&id))
        .map(|n| n.client_addr.clone())
        .unwrap_or_default();
    RingInfoReply {
        node_id: me,
        leader_id: m.current_leader,
        leader_client_addr,
        leader_ready: rozone_raft::leader_ready(&m),
        members,
        role: my_role,
    }
}

#[tonic::async_trait]
impl ScmRing for RingService {
    async fn ring_info(
        &self,
        _req: Request<RingInfoRequest>,
    ) -> Result<Response<RingInfoReply>, Status> {
        Ok(Response::new(ring_info(&self.group)))
    }

    async fn prepare_checkpoint(
        &self,
        _req: Request<PrepareCheckpointRequest>,
    ) -> Result<Response<PrepareCheckpointReply>, Status> {
        let g = &self.group;
        // Everything applied now must be inside the checkpoint the joining SCM gets.
        g.read_barrier().await.map_err(ScmError::from)?;
        let applied_index = g.snapshot_now(WAIT).await.map_err(ScmError::from)?;
        let id = g
            .snapshot_id()
            .ok_or_else(|| ScmError::Internal("checkpoint built but not kept".into()))?;
        Ok(Response::new(PrepareCheckpointReply {
            snapshot_id: id,
            applied_index,
            checkpoint_addr: self.checkpoint_addr.clone(),
        }))
    }

    async fn add_member(
        &self,
        req: Request<AddMemberRequest>,
    ) -> Result<Response<AddMemberReply>, Status> {
        let r = req.into_inner();
        if r.id == 0 || r.peer_addr.is_empty() || r.client_addr.is_empty() {
            return Err(ScmError::from(Invalid(
                "AddMember needs id (> 0), peer_addr and client_addr".into(),
            ))
            .into());
        }
        let g = &self.group;
        if !g.is_ready_leader() {
            return Err(ScmError::from(g.not_leader_error()).into());
        }
        let m = g.metrics();
        if let Some(n) = m.membership_config.membership().get_node(&r.id) {
            if n.peer_addr != r.peer_addr {
                return Err(ScmError::AlreadyExists(format!(
                    "SCM {} is already a member at {}",
                    r.id, n.peer_addr
                ))
                .into());
            }
        }
        let info = NodeInfo::new(r.peer_addr, r.client_addr);
        // Learner first: it must catch up (blocking) before it may vote.
        g.add_learner(r.id, info, true)
            .await
            .map_err(ScmError::from)?;
        g.promote(BTreeSet::from([r.id]))
            .await
            .map_err(ScmError::from)?;
        tracing::info!(member = r.id, "SCM added to the ring");
        Ok(Response::new(AddMemberReply {}))
    }
}
