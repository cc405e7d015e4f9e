//! The `OmAdmin` service: roles of the ring as this OM sees it, leader transfer and
//! decommission (refused when the ring would lose its quorum).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rozone_proto::om as pb;
use rozone_proto::om::om_admin_server::OmAdmin;
use rozone_raft::ServerState;
use tonic::{Request, Response, Status};

use crate::error::OmError;
use crate::node::OmNode;

/// How long a transfer may take before the call reports it did not happen.
const TRANSFER_WAIT: Duration = Duration::from_secs(30);

pub struct AdminService {
    pub node: Arc<OmNode>,
}

pub fn role_of(s: ServerState) -> pb::OmRole {
    match s {
        ServerState::Leader => pb::OmRole::Leader,
        ServerState::Follower => pb::OmRole::Follower,
        ServerState::Candidate => pb::OmRole::Candidate,
        ServerState::Learner => pb::OmRole::Learner,
        ServerState::Shutdown => pb::OmRole::Unknown,
    }
}

/// Decides whether removing `target` leaves a ring that can still commit: the voters left
/// must be non-empty and a majority of them must be reachable now (`reachable` holds the
/// voters that answered recently, the leader included).
pub fn check_quorum_after_removal(
    voters: &BTreeSet<u64>,
    reachable: &BTreeSet<u64>,
    target: u64,
) -> Result<(), String> {
    if !voters.contains(&target) {
        return Ok(());
    }
    // A membership change commits in the old voter set too (joint consensus): without a
    // majority of it answering, the change could never commit.
    let up_now = voters.iter().filter(|v| reachable.contains(v)).count();
    let need_now = voters.len() / 2 + 1;
    if up_now < need_now {
        return Err(format!(
            "the ring has {} voter(s) of which only {up_now} answer now; removing OM {target} needs {need_now} to commit the change",
            voters.len()
        ));
    }
    let left: BTreeSet<u64> = voters.iter().copied().filter(|v| *v != target).collect();
    if left.is_empty() {
        return Err(format!(
            "OM {target} is the only voter: the ring would be empty"
        ));
    }
    let up = left.iter().filter(|v| reachable.contains(v)).count();
    let need = left.len() / 2 + 1;
    if up < need {
        return Err(format!(
            "removing OM {target} leaves {} voter(s) of which only {up} answer now; {need} are needed for a quorum",
            left.len()
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl OmAdmin for AdminService {
    async fn roles(
        &self,
        _r: Request<pb::RolesRequest>,
    ) -> Result<Response<pb::RolesReply>, Status> {
        let g = &self.node.group;
        let m = g.metrics();
        let me = g.node_id();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let leading = m.state == ServerState::Leader;
        let members = membership
            .nodes()
            .map(|(id, n)| {
                let voter = voters.contains(id);
                let role = if *id == me {
                    role_of(m.state)
                } else if Some(*id) == m.current_leader {
                    pb::OmRole::Leader
                } else if !voter {
                    pb::OmRole::Learner
                } else if leading {
                    pb::OmRole::Follower
                } else {
                    pb::OmRole::Unknown
                };
                let applied_index = if *id == me {
                    m.last_applied.map(|l| l.index())
                } else {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(id).cloned().flatten())
                        .map(|l| l.index())
                };
                pb::OmMember {
                    node_id: *id,
                    role: role as i32,
                    client_addr: n.client_addr.clone(),
                    peer_addr: n.peer_addr.clone(),
                    voter,
                    leader_ready: *id == me && g.serves_as_leader(&m),
                    applied_index,
                }
            })
            .collect();
        Ok(Response::new(pb::RolesReply {
            node_id: me,
            leader_id: m.current_leader,
            term: m.current_term,
            members,
        }))
    }

    async fn transfer_leader(
        &self,
        r: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        rozone_rpc::auth::require_role(&r, &[rozone_rpc::Role::Admin], "TransferLeader")?;
        let to = r.into_inner().node_id;
        let node = &self.node;
        node.require_ready_leader()?;
        let g = &node.group;
        let voters: BTreeSet<u64> = g
            .metrics()
            .membership_config
            .membership()
            .voter_ids()
            .collect();
        if !voters.contains(&to) {
            return Err(Status::invalid_argument(format!(
                "OM {to} is not a voting member of the ring (voters: {voters:?})"
            )));
        }
        if to == g.node_id() {
            return Ok(Response::new(pb::TransferLeaderReply {}));
        }
        g.transfer_leader(to).await.map_err(OmError::from)?;
        g.wait_for(TRANSFER_WAIT, "leadership transferred", move |m| {
            m.current_leader == Some(to)
        })
        .await
        .map_err(|e| Status::deadline_exceeded(format!("OM {to} did not take over: {e}")))?;
        tracing::info!(to, "leadership transferred");
        Ok(Response::new(pb::TransferLeaderReply {}))
    }

    async fn decommission(
        &self,
        r: Request<pb::DecommissionRequest>,
    ) -> Result<Response<pb::DecommissionReply>, Status> {
        rozone_rpc::auth::require_role(&r, &[rozone_rpc::Role::Admin], "Decommission")?;
        let target = r.into_inner().node_id;
        let node = &self.node;
        let g = &node.group;
        let m = g.metrics();
        // A membership change commits through the log, so it needs a leader that applied an
        // entry of its term, not a read lease: a leader that lost its quorum gets the clear
        // quorum refusal below instead of a bare not-leader.
        if !rozone_raft::leader_ready(&m) {
            return Err(OmError::from(g.not_leader_error()).into());
        }
        let membership = m.membership_config.membership();
        if membership.get_node(&target).is_none() {
            return Err(Status::not_found(format!(
                "OM {target} is not a member of the ring"
            )));
        }
        if target == g.node_id() {
            return Err(Status::failed_precondition(format!(
                "OM {target} is the leader: transfer leadership to another OM first"
            )));
        }
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        // A voter answered recently if the leader had an acknowledgement from it within
        // twice the longest election timeout.
        let recent = node.config.raft.election_timeout_max * 2;
        let mut reachable = BTreeSet::from([g.node_id()]);
        for (id, age) in rozone_raft::contact::member_ack_ages(&m) {
            if age.is_some_and(|a| a <= recent) {
                reachable.insert(id);
            }
        }
        check_quorum_after_removal(&voters, &reachable, target)
            .map_err(Status::failed_precondition)?;
        g.remove_members(BTreeSet::from([target]))
            .await
            .map_err(OmError::from)?;
        tracing::info!(member = target, "OM decommissioned: removed from the ring");
        Ok(Response::new(pb::DecommissionReply {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    #[test]
    fn decommission_keeps_a_quorum_or_is_refused() {
        let voters = set(&[1, 2, 3]);
        assert!(check_quorum_after_removal(&voters, &set(&[1, 2, 3]), 3).is_ok());
        // {1,2} left, 2 is down: 1 of 2 answers, 2 needed.
        let e = check_quorum_after_removal(&voters, &set(&[1, 3]), 3).unwrap_err();
        assert!(e.contains("only 1 answer now; 2 are needed"), "{e}");
        assert!(check_quorum_after_removal(&set(&[1]), &set(&[1]), 1)
            .unwrap_err()
            .contains("only voter"));
        // A learner is not a voter: removing it never breaks the quorum.
        assert!(check_quorum_after_removal(&voters, &set(&[1]), 4).is_ok());
        let five = set(&[1, 2, 3, 4, 5]);
        assert!(check_quorum_after_removal(&five, &set(&[1, 2, 3]), 5).is_ok());
        assert!(check_quorum_after_removal(&five, &set(&[1, 2, 5]), 5).is_err());
        // Two voters, one down: removing the dead one still needs both to commit.
        let e = check_quorum_after_removal(&set(&[1, 2]), &set(&[1]), 2).unwrap_err();
        assert!(e.contains("only 1 answer now"), "{e}");
    }
}
