//! The leader's half of a join (what every ring's `AddMember` calls): decide with
//! [`admit`], add the node as a learner, wait while it makes progress until it has caught
//! up, then promote it to voter.

use std::collections::BTreeSet;
use std::time::Duration;

use super::decide::{admit, caught_up, Admission, Joiner, Present};
use crate::error::RaftGroupError;
use crate::group::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::types::{NodeId, NodeInfo, RaftMetrics};

/// A learner within this many entries of the leader's last log index may be promoted.
pub const CATCH_UP_LAG: u64 = 64;

/// The matched log index the leader knows for `id`.
fn matched(m: &RaftMetrics, id: NodeId) -> Option<u64> {
    m.replication
        .as_ref()
        .and_then(|r| r.get(&id))
        .and_then(|l| l.as_ref())
        .map(|l| l.index())
}

impl<L: StateMachineLogic> RaftGroup<L> {
    /// `AddMember` on the leader. With `check_only`, returns the decision without changing
    /// anything (the joiner opens its peer port to the ring only after that answer). Each
    /// wait is bounded by `stall` without progress of the learner's matched index.
    pub async fn admit_member(
        &self,
        service: &str,
        joiner: &Joiner,
        client_addr: &str,
        check_only: bool,
        stall: Duration,
    ) -> Result<Admission, RaftGroupError> {
        // A membership change commits through the log: a leader that applied an entry of
        // its term is enough, no read lease needed.
        let m = self.metrics();
        if !crate::leader_ready(&m) {
            return Err(self.not_leader_error());
        }
        let ring_id = self.ring_id().ok_or_else(|| {
            RaftGroupError::Other("this leader has no ring id recorded yet".into())
        })?;
        let membership = m.membership_config.membership();
        let present = membership.get_node(&joiner.id).map(|n| Present {
            peer_addr: n.peer_addr.clone(),
            voter: membership.voter_ids().any(|v| v == joiner.id),
            matched: matched(&m, joiner.id),
        });
        let decision = admit(service, ring_id, joiner, present.as_ref())
            .map_err(RaftGroupError::JoinRefused)?;
        if check_only {
            return Ok(decision);
        }
        match decision {
            Admission::AlreadyVoter => return Ok(decision),
            Admission::AddLearner => {
                let info = NodeInfo::new(joiner.peer_addr.clone(), client_addr.to_string());
                self.add_learner(joiner.id, info, false).await?;
                tracing::info!(group = %self.group_id(), member = joiner.id, "learner added");
            }
            Admission::ResumeLearner => {}
        }
        self.wait_caught_up(joiner.id, stall).await?;
        self.promote(BTreeSet::from([joiner.id])).await?;
        tracing::info!(group = %self.group_id(), member = joiner.id, "learner caught up and promoted to voter");
        Ok(decision)
    }

    /// Waits until learner `id` is within [`CATCH_UP_LAG`] of this leader's log; fails when
    /// its matched index does not move for `stall` (a transfer that keeps going is waited
    /// for however long it takes).
    pub async fn wait_caught_up(&self, id: NodeId, stall: Duration) -> Result<(), RaftGroupError> {
        loop {
            let m = self.metrics();
            if m.state != openraft::ServerState::Leader {
                return Err(self.not_leader_error());
            }
            let seen = matched(&m, id);
            if caught_up(seen, m.last_log_index, CATCH_UP_LAG) {
                return Ok(());
            }
            let what = format!(
                "member {id} to make progress (matched {seen:?} of {:?})",
                m.last_log_index
            );
            self.wait_for(stall, &what, move |m| {
                matched(m, id) != seen
                    || caught_up(matched(m, id), m.last_log_index, CATCH_UP_LAG)
                    || m.state != openraft::ServerState::Leader
            })
            .await?;
        }
    }
}
