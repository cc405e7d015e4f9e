//! The wire form of the ring as one member sees it (`RingInfo`, `Roles`).

use std::collections::BTreeSet;

use rozone_proto::scm as pb;
use rozone_raft::RaftGroup;

use crate::state::ScmLogic;

/// The ring as this member sees it, with each member's role.
pub fn ring_info(group: &RaftGroup<ScmLogic>) -> pb::RingInfoReply {
    let m = group.metrics();
    let membership = m.membership_config.membership();
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    let me = group.node_id();
    let my_role = format!("{:?}", m.state).to_uppercase();
    let members = membership
        .nodes()
        .map(|(id, n)| pb::RingMember {
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
    pb::RingInfoReply {
        node_id: me,
        leader_id: m.current_leader,
        leader_client_addr,
        leader_ready: group.serves_as_leader(&m),
        members,
        role: my_role,
        ring_id: group.ring_id().map(|r| r.to_string()).unwrap_or_default(),
    }
}
