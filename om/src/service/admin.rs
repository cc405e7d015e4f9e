//! The `OmAdmin` service: roles of the ring as this OM sees it, leader transfer and
//! decommission (refused when the ring would lose its quorum).

use std::sync::Arc;
use std::time::Duration;

use rozone_proto::om as pb;
use rozone_proto::om::om_admin_server::OmAdmin;
use rozone_raft::ring::{ring_op_status, MemberRole};
use tonic::{Request, Response, Status};

use crate::node::OmNode;

/// How long a transfer may take before the call reports it did not happen.
const TRANSFER_WAIT: Duration = Duration::from_secs(30);

pub struct AdminService {
    pub node: Arc<OmNode>,
}

/// A member's role as the OM admin protocol names it.
pub fn role_of(r: MemberRole) -> pb::OmRole {
    match r {
        MemberRole::Leader => pb::OmRole::Leader,
        MemberRole::Follower => pb::OmRole::Follower,
        MemberRole::Candidate => pb::OmRole::Candidate,
        MemberRole::Learner => pb::OmRole::Learner,
        MemberRole::Unknown => pb::OmRole::Unknown,
    }
}

#[tonic::async_trait]
impl OmAdmin for AdminService {
    async fn roles(
        &self,
        _r: Request<pb::RolesRequest>,
    ) -> Result<Response<pb::RolesReply>, Status> {
        let v = self.node.group.ring_view();
        let members = v
            .members
            .iter()
            .map(|m| pb::OmMember {
                node_id: m.id,
                role: role_of(m.role) as i32,
                client_addr: m.client_addr.clone(),
                peer_addr: m.peer_addr.clone(),
                voter: m.voter,
                leader_ready: m.id == v.node_id && v.leader_ready,
                applied_index: m.applied_index,
            })
            .collect();
        Ok(Response::new(pb::RolesReply {
            node_id: v.node_id,
            leader_id: v.leader_id,
            term: v.term,
            members,
        }))
    }

    async fn transfer_leader(
        &self,
        r: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        rozone_rpc::auth::require_role(&r, &[rozone_rpc::Role::Admin], "TransferLeader")?;
        let to = r.into_inner().node_id;
        self.node
            .group
            .hand_over("OM", to, TRANSFER_WAIT)
            .await
            .map_err(|e| ring_op_status("OM", e))?;
        Ok(Response::new(pb::TransferLeaderReply {}))
    }

    async fn decommission(
        &self,
        r: Request<pb::DecommissionRequest>,
    ) -> Result<Response<pb::DecommissionReply>, Status> {
        rozone_rpc::auth::require_role(&r, &[rozone_rpc::Role::Admin], "Decommission")?;
        let target = r.into_inner().node_id;
        self.node
            .group
            .remove_member("OM", target)
            .await
            .map_err(|e| ring_op_status("OM", e))?;
        Ok(Response::new(pb::DecommissionReply {}))
    }
}
