//! The `Ring` gRPC service (`proto/ring.proto`) for any ring of daemons. What differs
//! between daemons comes through [`RingHooks`]; everything else — joining (checkpoint,
//! admission as a learner then voter, refusal of wiped members), removal with its quorum
//! check, leader transfer, the read index — is implemented here once.
//!
//! Authorization (mutual TLS): ring info and `KnowsNode` are open to any authenticated
//! caller; checkpoints and read indexes only to the ring's members and admins; a member is
//! added by an admin or by the joiner itself (its certificate's id is the member's);
//! removal and transfer only by an admin. Errors go out through one mapping.

use std::sync::Arc;
use std::time::Duration;

use rozone_proto::ring as pb;
use rozone_proto::ring::ring_server::Ring;
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use super::ops::RingOpError;
use super::view::RingView;
use crate::group::RaftGroup;
use crate::join::Joiner;
use crate::state_machine::StateMachineLogic;

/// How long the leader waits for a checkpoint, for a new member's catch-up to make
/// progress, and for a transfer to take effect.
const WAIT: Duration = Duration::from_secs(60);

/// A peer as a member's config lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredPeer {
    pub id: u64,
    pub peer_addr: String,
    pub client_addr: String,
}

/// What a daemon adds to the generic ring service.
pub trait RingHooks: Send + Sync + 'static {
    /// The ring's name in messages and refusals ("OM", "SCM").
    fn service(&self) -> &'static str;
    /// The certificate role of this ring's members.
    fn member_role(&self) -> Role;
    /// Where a joiner downloads the leader's checkpoint (host:port).
    fn checkpoint_addr(&self) -> String;
    /// The peers this member's config lists (empty when it lists none).
    fn config_peers(&self) -> Vec<ConfiguredPeer> {
        Vec::new()
    }
    /// Checks a member about to be added against this leader's own config; `Err` refuses
    /// it (FAILED_PRECONDITION) with the message. `force`: the joiner was started with
    /// `--force`. The default admits any joiner (the join checks still apply).
    fn check_joiner(
        &self,
        _id: u64,
        _peer_addr: &str,
        _client_addr: &str,
        _force: bool,
    ) -> Result<(), String> {
        Ok(())
    }
}

/// The `Ring` service of one daemon's group.
pub struct RingService<L: StateMachineLogic> {
    group: Arc<RaftGroup<L>>,
    hooks: Arc<dyn RingHooks>,
}

impl<L: StateMachineLogic> RingService<L> {
    pub fn new(group: Arc<RaftGroup<L>>, hooks: Arc<dyn RingHooks>) -> Self {
        Self { group, hooks }
    }

    /// The tonic server for this service.
    pub fn server(self) -> rozone_proto::ring::ring_server::RingServer<Self> {
        rozone_proto::ring::ring_server::RingServer::new(self)
    }

    fn status(&self, e: RingOpError) -> Status {
        ring_op_status(self.hooks.service(), e)
    }

    fn raft(&self, e: crate::RaftGroupError) -> Status {
        self.status(RingOpError::Raft(e))
    }
}

/// The one mapping of ring operation errors to gRPC statuses (`service` names the ring).
pub fn ring_op_status(service: &str, e: RingOpError) -> Status {
    match e {
        RingOpError::Raft(r) => crate::status::raft_status(service, r),
        RingOpError::NotFound(m) => Status::not_found(m),
        RingOpError::Refused(m) => Status::failed_precondition(m),
        RingOpError::Invalid(m) => Status::invalid_argument(m),
    }
}

/// A ring view as it travels.
pub fn ring_info_reply(v: &RingView, config_peers: Vec<ConfiguredPeer>) -> pb::RingInfoReply {
    pb::RingInfoReply {
        node_id: v.node_id,
        leader_id: v.leader_id,
        leader_client_addr: v.leader_client_addr.clone().unwrap_or_default(),
        leader_ready: v.leader_ready,
        members: v
            .members
            .iter()
            .map(|m| pb::RingMember {
                id: m.id,
                peer_addr: m.peer_addr.clone(),
                client_addr: m.client_addr.clone(),
                voter: m.voter,
                role: m.role.as_str().to_string(),
                applied_index: m.applied_index,
            })
            .collect(),
        role: v.role.as_str().to_string(),
        ring_id: v.ring_id.clone().unwrap_or_default(),
        config_peers: config_peers
            .into_iter()
            .map(|p| pb::PeerAddress {
                id: p.id,
                peer_addr: p.peer_addr,
                client_addr: p.client_addr,
            })
            .collect(),
        term: v.term,
    }
}

#[tonic::async_trait]
impl<L: StateMachineLogic> Ring for RingService<L> {
    async fn ring_info(
        &self,
        _req: Request<pb::RingInfoRequest>,
    ) -> Result<Response<pb::RingInfoReply>, Status> {
        let v = self.group.ring_view();
        Ok(Response::new(ring_info_reply(
            &v,
            self.hooks.config_peers(),
        )))
    }

    async fn knows_node(
        &self,
        req: Request<pb::KnowsNodeRequest>,
    ) -> Result<Response<pb::KnowsNodeReply>, Status> {
        let r = req.into_inner();
        let peers = self.hooks.config_peers();
        let p = peers.iter().find(|p| p.id == r.node_id);
        Ok(Response::new(pb::KnowsNodeReply {
            known: p.is_some(),
            configured_peer_addr: p.map(|p| p.peer_addr.clone()).unwrap_or_default(),
            configured_client_addr: p.map(|p| p.client_addr.clone()).unwrap_or_default(),
        }))
    }

    async fn prepare_checkpoint(
        &self,
        req: Request<pb::PrepareCheckpointRequest>,
    ) -> Result<Response<pb::PrepareCheckpointReply>, Status> {
        require_role(
            &req,
            &[self.hooks.member_role(), Role::Admin],
            "PrepareCheckpoint",
        )?;
        let g = &self.group;
        // Everything applied now must be inside the checkpoint the joiner gets.
        g.read_barrier().await.map_err(|e| self.raft(e))?;
        let applied_index = g.snapshot_now(WAIT).await.map_err(|e| self.raft(e))?;
        let id = g
            .snapshot_id()
            .ok_or_else(|| Status::internal("checkpoint built but not kept"))?;
        Ok(Response::new(pb::PrepareCheckpointReply {
            snapshot_id: id,
            applied_index,
            checkpoint_addr: self.hooks.checkpoint_addr(),
        }))
    }

    async fn add_member(
        &self,
        req: Request<pb::AddMemberRequest>,
    ) -> Result<Response<pb::AddMemberReply>, Status> {
        // An admin adds anyone; a member joining by --bootstrap adds only itself.
        if require_role(&req, &[Role::Admin], "AddMember").is_err() {
            require_node(
                &req,
                self.hooks.member_role(),
                req.get_ref().id,
                "AddMember",
            )?;
        }
        let r = req.into_inner();
        if r.id == 0 || r.peer_addr.is_empty() || r.client_addr.is_empty() {
            return Err(Status::invalid_argument(
                "AddMember needs id (> 0), peer_addr and client_addr",
            ));
        }
        let g = &self.group;
        if !g.is_ready_leader() {
            return Err(self.raft(g.not_leader_error()));
        }
        self.hooks
            .check_joiner(r.id, &r.peer_addr, &r.client_addr, r.force)
            .map_err(Status::failed_precondition)?;
        let joiner = Joiner::from_wire(r.id, &r.peer_addr, &r.ring_id, r.last_log_index)
            .map_err(Status::invalid_argument)?;
        // Learner first, promoted once caught up; a wiped member is refused (see `join`).
        let service = self.hooks.service();
        let done = g
            .admit_member(service, &joiner, &r.client_addr, r.check_only, WAIT)
            .await
            .map_err(|e| self.raft(e))?;
        if !r.check_only {
            tracing::info!(member = r.id, ?done, "{service} added to the ring");
        }
        Ok(Response::new(pb::AddMemberReply {}))
    }

    async fn remove_member(
        &self,
        req: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberReply>, Status> {
        require_role(&req, &[Role::Admin], "RemoveMember")?;
        let id = req.into_inner().id;
        self.group
            .remove_member(self.hooks.service(), id)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::RemoveMemberReply {}))
    }

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        require_role(&req, &[Role::Admin], "TransferLeader")?;
        let to = req.into_inner().node_id;
        if to == 0 {
            return Err(Status::invalid_argument("node_id must be above 0"));
        }
        self.group
            .hand_over(self.hooks.service(), to, WAIT)
            .await
            .map_err(|e| self.status(e))?;
        Ok(Response::new(pb::TransferLeaderReply { leader_id: to }))
    }

    async fn read_index(
        &self,
        req: Request<pb::ReadIndexRequest>,
    ) -> Result<Response<pb::ReadIndexReply>, Status> {
        require_role(&req, &[self.hooks.member_role()], "ReadIndex")?;
        let g = &self.group;
        g.read_barrier().await.map_err(|e| self.raft(e))?;
        let v = g.ring_view();
        let index = v
            .member(v.node_id)
            .and_then(|m| m.applied_index)
            .unwrap_or(0);
        Ok(Response::new(pb::ReadIndexReply {
            index,
            leader_id: v.node_id,
            term: v.term,
        }))
    }
}
