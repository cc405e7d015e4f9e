//! Membership operations of a ring with their safety checks, the same for every daemon:
//! removing a member (never the leader, never below a quorum that answers now) and handing
//! leadership to another voter.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::RaftGroupError;
use crate::group::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::types::NodeId;

/// Why a ring operation was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RingOpError {
    /// The Raft layer refused (not the leader: retry on the hinted one) or failed.
    #[error(transparent)]
    Raft(#[from] RaftGroupError),
    /// The named node is not a member (or not a voter, where one is needed).
    #[error("{0}")]
    NotFound(String),
    /// The operation would break the ring now (the leader itself, a lost quorum).
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Invalid(String),
}

/// Decides whether removing `target` leaves a ring that can still commit: the voters left
/// must be non-empty and a majority of them must be reachable now (`reachable` holds the
/// voters that answered recently, the leader included). `service` names the ring ("OM").
pub fn check_quorum_after_removal(
    service: &str,
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
            "the ring has {} voter(s) of which only {up_now} answer now; removing {service} {target} needs {need_now} to commit the change",
            voters.len()
        ));
    }
    let left: BTreeSet<u64> = voters.iter().copied().filter(|v| *v != target).collect();
    if left.is_empty() {
        return Err(format!(
            "{service} {target} is the only voter: the ring would be empty"
        ));
    }
    let up = left.iter().filter(|v| reachable.contains(v)).count();
    let need = left.len() / 2 + 1;
    if up < need {
        return Err(format!(
            "removing {service} {target} leaves {} voter(s) of which only {up} answer now; {need} are needed for a quorum",
            left.len()
        ));
    }
    Ok(())
}

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Removes member `id` (voter or learner) from the ring. Refused for the leader itself
    /// (transfer first) and when the voters left would not have a quorum that answers now.
    pub async fn remove_member(&self, service: &str, id: NodeId) -> Result<(), RingOpError> {
        if id == 0 {
            return Err(RingOpError::Invalid("node id must be above 0".into()));
        }
        let m = self.metrics();
        // A membership change commits through the log, so it needs a leader that applied
        // an entry of its term, not a read lease: a leader that lost its quorum gets the
        // clear quorum refusal below instead of a bare not-leader.
        if !crate::leader_ready(&m) {
            return Err(self.not_leader_error().into());
        }
        let membership = m.membership_config.membership();
        if membership.get_node(&id).is_none() {
            return Err(RingOpError::NotFound(format!(
                "{service} {id} is not a member of the ring"
            )));
        }
        if id == self.node_id() {
            return Err(RingOpError::Refused(format!(
                "{service} {id} is the leader: transfer leadership to another {service} first"
            )));
        }
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        // A voter answered recently if the leader had an acknowledgement from it within
        // twice the longest election timeout.
        let recent = self.config().election_timeout_max * 2;
        let mut reachable = BTreeSet::from([self.node_id()]);
        for (member, age) in crate::contact::member_ack_ages(&m) {
            if age.is_some_and(|a| a <= recent) {
                reachable.insert(member);
            }
        }
        check_quorum_after_removal(service, &voters, &reachable, id)
            .map_err(RingOpError::Refused)?;
        self.remove_members(BTreeSet::from([id])).await?;
        tracing::info!(member = id, "{service} removed from the ring");
        Ok(())
    }

    /// Hands leadership to voter `to` and waits up to `wait` until it leads. Asking for the
    /// current leader is a no-op.
    pub async fn hand_over(
        &self,
        service: &str,
        to: NodeId,
        wait: Duration,
    ) -> Result<(), RingOpError> {
        if !self.is_ready_leader() {
            return Err(self.not_leader_error().into());
        }
        let voters = self.ring_view().voters();
        if !voters.contains(&to) {
            return Err(RingOpError::Invalid(format!(
                "{service} {to} is not a voter of the ring (voters: {voters:?})"
            )));
        }
        if to == self.node_id() {
            return Ok(());
        }
        self.transfer_leader(to).await?;
        self.wait_for(wait, "leadership transferred", move |m| {
            m.current_leader == Some(to)
        })
        .await
        .map_err(|e| {
            RingOpError::Raft(RaftGroupError::Timeout(format!(
                "{service} {to} did not take over: {e}"
            )))
        })?;
        tracing::info!(to, "{service} leadership transferred");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    fn check(voters: &BTreeSet<u64>, reachable: &BTreeSet<u64>, target: u64) -> Result<(), String> {
        check_quorum_after_removal("OM", voters, reachable, target)
    }

    #[test]
    fn removal_keeps_a_quorum_or_is_refused() {
        let voters = set(&[1, 2, 3]);
        assert!(check(&voters, &set(&[1, 2, 3]), 3).is_ok());
        // {1,2} left, 2 is down: 1 of 2 answers, 2 needed.
        let e = check(&voters, &set(&[1, 3]), 3).unwrap_err();
        assert!(e.contains("only 1 answer now; 2 are needed"), "{e}");
        assert!(check(&set(&[1]), &set(&[1]), 1)
            .unwrap_err()
            .contains("only voter"));
        // A learner is not a voter: removing it never breaks the quorum.
        assert!(check(&voters, &set(&[1]), 4).is_ok());
        let five = set(&[1, 2, 3, 4, 5]);
        assert!(check(&five, &set(&[1, 2, 3]), 5).is_ok());
        assert!(check(&five, &set(&[1, 2, 5]), 5).is_err());
        // Two voters, one down: removing the dead one still needs both to commit.
        let e = check(&set(&[1, 2]), &set(&[1]), 2).unwrap_err();
        assert!(e.contains("only 1 answer now"), "{e}");
    }
}
