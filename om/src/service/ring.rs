//! The `OmRing` service: what a bootstrapping OM asks every OM in its config before it
//! joins (their [[peers]] and Raft membership, whether they know it), and the leader's
//! part of joining (checkpoint, adding the member). Also the read index for follower reads.
//!
//! Authorization (mutual TLS): checkpoints and read indexes only for OMs; a member is added
//! by an admin, or by the joining OM itself (its certificate's id is the member's; `force`
//! included: the operator who started it with `--force` holds its certificate).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rozone_proto::om as pb;
use rozone_proto::om::om_ring_server::OmRing;
use rozone_raft::join::Joiner;
use rozone_rpc::auth::{require_node, require_role};
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use super::admin::role_of;
use crate::error::OmError;
use crate::node::OmNode;

/// How long the leader waits for a checkpoint, and for a new member's catch-up to make
/// progress.
const WAIT: Duration = Duration::from_secs(60);

pub struct RingService {
    pub node: Arc<OmNode>,
}

#[tonic::async_trait]
impl OmRing for RingService {
    async fn ring_info(
        &self,
        _req: Request<pb::RingInfoRequest>,
    ) -> Result<Response<pb::RingInfoReply>, Status> {
        let g = &self.node.group;
        let m = g.metrics();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let members = membership
            .nodes()
            .map(|(id, n)| pb::RingMember {
                id: *id,
                peer_addr: n.peer_addr.clone(),
                client_addr: n.client_addr.clone(),
                voter: voters.contains(id),
            })
            .collect();
        let config_peers = self
            .node
            .config
            .peers
            .iter()
            .map(|p| pb::PeerAddress {
                id: p.id,
                peer_addr: p.peer_addr.clone(),
                client_addr: p.client_addr.clone(),
            })
            .collect();
        let leader_client_addr = m
            .current_leader
            .and_then(|id| membership.get_node(&id))
            .map(|n| n.client_addr.clone())
            .unwrap_or_default();
        Ok(Response::new(pb::RingInfoReply {
            node_id: g.node_id(),
            config_peers,
            members,
            leader_id: m.current_leader,
            leader_client_addr,
            leader_ready: g.serves_as_leader(&m),
            role: role_of(m.state) as i32,
            ring_id: g.ring_id().map(|r| r.to_string()).unwrap_or_default(),
        }))
    }

    async fn knows_node(
        &self,
        req: Request<pb::KnowsNodeRequest>,
    ) -> Result<Response<pb::KnowsNodeReply>, Status> {
        let r = req.into_inner();
        let p = self.node.config.peers.iter().find(|p| p.id == r.node_id);
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
        require_role(&req, &[Role::Om, Role::Admin], "PrepareCheckpoint")?;
        let g = &self.node.group;
        g.read_barrier().await.map_err(OmError::from)?;
        let applied_index = g.snapshot_now(WAIT).await.map_err(OmError::from)?;
        let id = g
            .snapshot_id()
            .ok_or_else(|| Status::internal("checkpoint built but not kept"))?;
        Ok(Response::new(pb::PrepareCheckpointReply {
            snapshot_id: id,
            applied_index,
            checkpoint_addr: g.node_info().peer_addr.clone(),
        }))
    }

    async fn add_member(
        &self,
        req: Request<pb::AddMemberRequest>,
    ) -> Result<Response<pb::AddMemberReply>, Status> {
        if require_role(&req, &[Role::Admin], "AddMember").is_err() {
            require_node(&req, Role::Om, req.get_ref().id, "AddMember")?;
        }
        let r = req.into_inner();
        if r.id == 0 || r.peer_addr.is_empty() || r.client_addr.is_empty() {
            return Err(Status::invalid_argument(
                "AddMember needs id (> 0), peer_addr and client_addr",
            ));
        }
        let node = &self.node;
        node.require_ready_leader()?;
        let g = &node.group;
        match node.config.peers.iter().find(|p| p.id == r.id) {
            Some(p) if p.peer_addr == r.peer_addr && p.client_addr == r.client_addr => {}
            Some(p) if !r.force => {
                return Err(Status::failed_precondition(format!(
                    "OM {} asks to join as peer {} / client {}, but this leader's [[peers]] lists it at peer {} / client {}",
                    r.id, r.peer_addr, r.client_addr, p.peer_addr, p.client_addr
                )))
            }
            None if !r.force => {
                return Err(Status::failed_precondition(format!(
                    "OM {} is not in this leader's [[peers]] config: add it to the config of every OM first",
                    r.id
                )))
            }
            _ => tracing::warn!(member = r.id, "adding OM with --force although this leader's config does not list it as asked"),
        }
        let joiner = Joiner::from_wire(r.id, &r.peer_addr, &r.ring_id, r.last_log_index)
            .map_err(Status::invalid_argument)?;
        // Learner first, promoted once caught up; a wiped member is refused (see
        // `rozone_raft::join`).
        let done = g
            .admit_member("OM", &joiner, &r.client_addr, r.check_only, WAIT)
            .await
            .map_err(OmError::from)?;
        if !r.check_only {
            tracing::info!(member = r.id, ?done, "OM added to the ring");
        }
        Ok(Response::new(pb::AddMemberReply {}))
    }

    async fn read_index(
        &self,
        req: Request<pb::ReadIndexRequest>,
    ) -> Result<Response<pb::ReadIndexReply>, Status> {
        require_role(&req, &[Role::Om], "ReadIndex")?;
        let g = &self.node.group;
        g.read_barrier().await.map_err(OmError::from)?;
        let m = g.metrics();
        Ok(Response::new(pb::ReadIndexReply {
            index: m.last_applied.map(|l| l.index()).unwrap_or(0),
            leader_id: g.node_id(),
            term: m.current_term,
        }))
    }
}
