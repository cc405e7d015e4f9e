//! Membership of a group: initialise, add learners, promote, remove, hand leadership over.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use openraft::ChangeMembers;

use crate::error::RaftGroupError;
use crate::state_machine::StateMachineLogic;
use crate::types::{NodeId, NodeInfo};

use super::*;

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Whether this group already has a membership (initialised, or joined).
    pub async fn is_initialized(&self) -> Result<bool, RaftGroupError> {
        self.raft.is_initialized().await.map_err(fatal)
    }

    /// Creates the group with these members. Only on a brand-new cluster.
    ///
    /// With other members, this one stands for election at once, and the others may not
    /// have created the group yet (a datanode pipeline: each member creates it when it
    /// learns of it from the SCM, a moment apart). They refuse that first vote, and the
    /// group would wait a whole election timeout for its first leader; so this member asks
    /// again until one is known ([`restart::elect_promptly`]).
    pub async fn initialize(
        self: &Arc<Self>,
        members: BTreeMap<NodeId, NodeInfo>,
    ) -> Result<(), RaftGroupError> {
        let others = members.keys().any(|id| *id != self.cfg.node_id);
        self.raft
            .initialize(members)
            .await
            .map_err(|e| RaftGroupError::Other(e.to_string()))?;
        if others {
            tokio::spawn(restart::elect_promptly(
                Arc::downgrade(self),
                std::time::Instant::now(),
                restart::Prompt::Created,
            ));
        }
        Ok(())
    }

    /// Adds a non-voting member; with `blocking` waits until it caught up.
    pub async fn add_learner(
        &self,
        id: NodeId,
        info: NodeInfo,
        blocking: bool,
    ) -> Result<(), RaftGroupError> {
        self.raft
            .add_learner(id, info, blocking)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }

    /// Makes learners voters.
    pub async fn promote(&self, ids: BTreeSet<NodeId>) -> Result<(), RaftGroupError> {
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(ids), false)
            .await
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }

    /// Removes members (voters or learners) from the group.
    pub async fn remove_members(&self, ids: BTreeSet<NodeId>) -> Result<(), RaftGroupError> {
        self.raft
            .change_membership(ChangeMembers::RemoveVoters(ids.clone()), false)
            .await
            .map_err(|e| self.write_error(e))?;
        let learners: BTreeSet<NodeId> = self
            .metrics()
            .membership_config
            .membership()
            .learner_ids()
            .filter(|id| ids.contains(id))
            .collect();
        if !learners.is_empty() {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(learners), false)
                .await
                .map_err(|e| self.write_error(e))?;
        }
        Ok(())
    }

    /// Asks the leader (this node) to hand leadership to `to`.
    pub async fn transfer_leader(&self, to: NodeId) -> Result<(), RaftGroupError> {
        let m = self.metrics();
        if m.state != openraft::ServerState::Leader {
            return Err(self.not_leader_error());
        }
        // The target is elected without waiting for vote leases: this leader's lease ends now,
        // for the rest of its term.
        self.transfer_term
            .store(m.current_term + 1, Ordering::Release);
        self.raft.trigger().transfer_leader(to).await.map_err(fatal)
    }
}
