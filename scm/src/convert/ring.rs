//! The wire form of the ring as one member sees it (`ScmAdmin.Roles`), from the ring
//! layer's view.

use rozone_proto::scm as pb;
use rozone_raft::RaftGroup;

use crate::state::ScmLogic;

/// The ring as this member sees it, with each member's role.
pub fn ring_info(group: &RaftGroup<ScmLogic>) -> pb::RingInfoReply {
    let v = group.ring_view();
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
            })
            .collect(),
        role: v.role.as_str().to_string(),
        ring_id: v.ring_id.unwrap_or_default(),
    }
}
