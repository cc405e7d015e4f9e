//! A member's view of its ring, as plain data: who is in it with which role, who leads,
//! whether this member may serve as leader. Built from openraft's metrics in one place.

use std::collections::BTreeSet;

use openraft::ServerState;

use crate::group::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::types::{NodeId, RaftMetrics};

/// A member's role as one member sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberRole {
    Leader,
    Follower,
    Learner,
    Candidate,
    /// A voter this member cannot place (it knows no leader), or a stopped member.
    Unknown,
}

impl MemberRole {
    /// The name on the wire and in CLI output.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Leader => "LEADER",
            Self::Follower => "FOLLOWER",
            Self::Learner => "LEARNER",
            Self::Candidate => "CANDIDATE",
            Self::Unknown => "UNKNOWN",
        }
    }

    fn of(state: ServerState) -> Self {
        match state {
            ServerState::Leader => Self::Leader,
            ServerState::Follower => Self::Follower,
            ServerState::Candidate => Self::Candidate,
            ServerState::Learner => Self::Learner,
            ServerState::Shutdown => Self::Unknown,
        }
    }
}

/// One member of the ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub id: NodeId,
    pub peer_addr: String,
    pub client_addr: String,
    pub voter: bool,
    pub role: MemberRole,
    /// What this member applied (itself) or the leader knows the member matched (others,
    /// on a leader); `None` when not known.
    pub applied_index: Option<u64>,
}

/// A member's view of its ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingView {
    pub node_id: NodeId,
    pub role: MemberRole,
    pub term: u64,
    pub leader_id: Option<NodeId>,
    /// The leader's client address, if this member knows the leader and its address.
    pub leader_client_addr: Option<String>,
    /// This member leads and may serve reads now (ready, holding its lease).
    pub leader_ready: bool,
    pub members: Vec<MemberView>,
    /// The ring id this member recorded (32 hex digits), if any.
    pub ring_id: Option<String>,
}

impl RingView {
    /// The ids of the voting members.
    pub fn voters(&self) -> BTreeSet<NodeId> {
        self.members
            .iter()
            .filter(|m| m.voter)
            .map(|m| m.id)
            .collect()
    }

    /// The member with this id.
    pub fn member(&self, id: NodeId) -> Option<&MemberView> {
        self.members.iter().find(|m| m.id == id)
    }
}

impl<L: StateMachineLogic> RaftGroup<L> {
    /// The last index this member applied (0 before the first).
    pub fn applied_index(&self) -> u64 {
        self.metrics().last_applied.map(|l| l.index()).unwrap_or(0)
    }

    /// Whether this group's Raft has stopped (shut down, or on a fatal error).
    pub fn is_stopped(&self) -> bool {
        let m = self.metrics();
        m.running_state.is_err() || m.state == ServerState::Shutdown
    }

    /// Waits up to `timeout` until the ring's membership (members, addresses, voters)
    /// differs from `seen`'s, and returns the new view.
    pub async fn wait_membership_change(
        &self,
        seen: &RingView,
        timeout: std::time::Duration,
    ) -> Result<RingView, crate::RaftGroupError> {
        let seen = membership_of_view(seen);
        self.wait_for(timeout, "membership change", move |m| {
            membership_of(m) != seen
        })
        .await?;
        Ok(self.ring_view())
    }

    /// This member's view of its ring now.
    pub fn ring_view(&self) -> RingView {
        let m = self.metrics();
        view_of(
            self.node_id(),
            &m,
            self.serves_as_leader(&m),
            self.ring_id().map(|r| r.to_string()),
        )
    }
}

fn view_of(me: NodeId, m: &RaftMetrics, ready: bool, ring_id: Option<String>) -> RingView {
    let membership = m.membership_config.membership();
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    let leading = m.state == ServerState::Leader;
    let members = membership
        .nodes()
        .map(|(id, n)| {
            let voter = voters.contains(id);
            let role = if *id == me {
                MemberRole::of(m.state)
            } else if Some(*id) == m.current_leader {
                MemberRole::Leader
            } else if !voter {
                MemberRole::Learner
            } else if leading || m.current_leader.is_some() {
                MemberRole::Follower
            } else {
                MemberRole::Unknown
            };
            let applied_index = if *id == me {
                m.last_applied.map(|l| l.index())
            } else {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(id).cloned().flatten())
                    .map(|l| l.index())
            };
            MemberView {
                id: *id,
                peer_addr: n.peer_addr.clone(),
                client_addr: n.client_addr.clone(),
                voter,
                role,
                applied_index,
            }
        })
        .collect();
    let leader_client_addr = m
        .current_leader
        .and_then(|id| membership.get_node(&id))
        .map(|n| n.client_addr.clone());
    RingView {
        node_id: me,
        role: MemberRole::of(m.state),
        term: m.current_term,
        leader_id: m.current_leader,
        leader_client_addr,
        leader_ready: ready,
        members,
        ring_id,
    }
}

/// Members as (id, peer address, client address, voter), in id order.
type Membership = Vec<(NodeId, String, String, bool)>;

fn membership_of(m: &RaftMetrics) -> Membership {
    let membership = m.membership_config.membership();
    let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(id, n)| {
            (
                *id,
                n.peer_addr.clone(),
                n.client_addr.clone(),
                voters.contains(id),
            )
        })
        .collect()
}

fn membership_of_view(v: &RingView) -> Membership {
    let mut m: Membership = v
        .members
        .iter()
        .map(|m| (m.id, m.peer_addr.clone(), m.client_addr.clone(), m.voter))
        .collect();
    m.sort();
    m
}
