//! The `ScmRing` gRPC service on the SCM client port: ring info, checkpoint preparation for
//! a joining SCM, and adding a member. Refusals go out through the one mapping of
//! [`ScmError`]. Checkpoints are prepared for SCMs and admins only; a member is added by an
//! admin, or by the joining SCM itself (its certificate's id is the member's).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rozone_proto::scm::scm_ring_server::ScmRing;
use rozone_proto::scm::{
    AddMemberReply, AddMemberRequest, PrepareCheckpointReply, PrepareCheckpointRequest,
    RingInfoReply, RingInfoRequest,
};
use rozone_raft::{NodeInfo, RaftGroup};
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::error::{Invalid, ScmError};
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
