//! The `ScmRing` gRPC service on the SCM client port: ring info, checkpoint preparation for
//! a joining SCM, adding a member (through the shared join decision) and removing one.
//! Refusals go out through the one mapping of [`ScmError`]. Checkpoints are prepared for
//! SCMs and admins only; a member is added by an admin, or by the joining SCM itself (its
//! certificate's id is the member's); only an admin removes one.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rozone_proto::scm::scm_ring_server::ScmRing;
use rozone_proto::scm::{
    AddMemberReply, AddMemberRequest, PrepareCheckpointReply, PrepareCheckpointRequest,
    RemoveMemberReply, RemoveMemberRequest, RingInfoReply, RingInfoRequest,
};
use rozone_raft::join::Joiner;
use rozone_raft::RaftGroup;
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::error::{Invalid, ScmError, SERVICE_NAME};
use crate::state::ScmLogic;

/// How long a leader waits for a checkpoint to be built, and for a joining member to catch
/// up before it becomes a voter.
const WAIT: Duration = Duration::from_secs(60);

pub struct RingService {
    pub group: Arc<RaftGroup<ScmLogic>>,
    /// Advertised address of this node's checkpoint download service.
    pub checkpoint_addr: String,
}

#[tonic::async_trait]
impl ScmRing for RingService {
    async fn ring_info(
        &self,
        _req: Request<RingInfoRequest>,
    ) -> Result<Response<RingInfoReply>, Status> {
        Ok(Response::new(convert::ring_info(&self.group)))
    }

    async fn prepare_checkpoint(
        &self,
        req: Request<PrepareCheckpointRequest>,
    ) -> Result<Response<PrepareCheckpointReply>, Status> {
        require_role(&req, &[Role::Scm, Role::Admin], "PrepareCheckpoint")?;
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
        // An admin adds anyone; an SCM joining by --bootstrap adds only itself.
        if require_role(&req, &[Role::Admin], "AddMember").is_err() {
            require_node(&req, Role::Scm, req.get_ref().id, "AddMember")?;
        }
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
        let joiner = Joiner::from_wire(r.id, &r.peer_addr, &r.ring_id, r.last_log_index)
            .map_err(|e| ScmError::from(Invalid(e)))?;
        // Learner first, promoted once caught up; a wiped member is refused (see
        // `rozone_raft::join`).
        let done = g
            .admit_member(SERVICE_NAME, &joiner, &r.client_addr, r.check_only, WAIT)
            .await
            .map_err(ScmError::from)?;
        if !r.check_only {
            tracing::info!(member = r.id, ?done, "SCM added to the ring");
        }
        Ok(Response::new(AddMemberReply {}))
    }

    async fn remove_member(
        &self,
        req: Request<RemoveMemberRequest>,
    ) -> Result<Response<RemoveMemberReply>, Status> {
        require_role(&req, &[Role::Admin], "RemoveMember")?;
        let id = req.into_inner().id;
        let g = &self.group;
        let m = g.metrics();
        // A membership change commits through the log: a leader that applied an entry of its
        // term is enough (no read lease needed).
        if !rozone_raft::leader_ready(&m) {
            return Err(ScmError::from(g.not_leader_error()).into());
        }
        let membership = m.membership_config.membership();
        if membership.get_node(&id).is_none() {
            return Err(ScmError::NotFound(format!("SCM {id} is not a member of the ring")).into());
        }
        if id == g.node_id() {
            return Err(ScmError::FailedPrecondition(format!(
                "SCM {id} is the leader: transfer leadership to another SCM first"
            ))
            .into());
        }
        g.remove_members(BTreeSet::from([id]))
            .await
            .map_err(ScmError::from)?;
        tracing::info!(member = id, "SCM removed from the ring");
        Ok(Response::new(RemoveMemberReply {}))
    }
}
