//! A member after a restart: the vote grace it keeps for the leader it acknowledged before,
//! the one candidate that grace need not hold up, and the prompt election of a member that
//! led before it restarted.
//!
//! The grace protects the lease of the leader this member acknowledged in its earlier life
//! (docs/raft.md, "The leader lease"). Only one leader's lease can still rest on this
//! member's acknowledgements: that of the leader its current vote names. An older leader's
//! lease ended before the newer one was elected (the electing quorum's vote leases outlast
//! it), and a vote this member granted without acknowledging anyone since passed the grace
//! and vote lease then, or went to a hand-over target (whose old leader stopped serving). So
//! the grace need not hold up a candidate that *is* that leader: a node standing for
//! election has stopped leading in its process, and there is one process per member (its
//! data directory is locked), so the lease being protected is void. After a whole ring
//! restarts, that exemption lets the old leader win at once — and since its election timer
//! would first fire only `election_timeout_min` after the start, the member whose own vote
//! names itself (it led when it stopped or crashed) stands for election right away.

use std::sync::Weak;
use std::time::{Duration, Instant};

use openraft::raft::VoteRequest;

use super::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::types::{NodeId, TypeConfig};

impl<L: StateMachineLogic> RaftGroup<L> {
    /// While this process is younger than `election_timeout_min`, it withholds its vote from
    /// ordinary elections. Before a restart it may have acknowledged a leader's append, and
    /// that leader counts on it not voting for another candidate while its lease lasts
    /// (3/4 of `election_timeout_min` from the append's send, which came before this
    /// process started); the promise lived in memory, so a restarted member keeps it by
    /// waiting instead. The minimum leaves the lease's drift margin, as the vote lease does.
    /// Elections a leader started by handing over leadership are exempt, and so is the
    /// leader this member's vote names ([`Self::votes_for`]) and a member whose log held no
    /// vote when it opened: it never acknowledged anyone.
    pub fn vote_grace(&self) -> Option<Duration> {
        self.cfg
            .election_timeout_min
            .checked_sub(self.grace_from?.elapsed())
            .filter(|d| !d.is_zero())
    }

    /// Whether this member's current vote (granted, or committed by acknowledging an
    /// append) names `candidate`: the only leader whose lease its acknowledgements may
    /// still support (see the module's comment).
    pub fn votes_for(&self, candidate: NodeId) -> bool {
        let now = self.metrics().vote;
        // Votes only grow: the newer of the two is the current one.
        let vote = match &self.opened_vote {
            Some(v) if v.leader_id().term > now.leader_id().term => v,
            _ => &now,
        };
        vote.leader_id().term > 0 && vote.leader_id().node_id == candidate
    }

    pub(super) fn check_vote_grace(&self, req: &VoteRequest<TypeConfig>) -> Result<(), String> {
        let candidate = req.vote.leader_id().node_id;
        match self.vote_grace() {
            Some(left) if !req.leadership_transfer && !self.votes_for(candidate) => {
                tracing::debug!(group = %self.cfg.group_id, candidate = %req.vote, ?left, "vote withheld");
                Err(format!(
                    "vote withheld: this member restarted less than an election timeout ago \
                     ({} left)",
                    rozone_config::format_duration(Duration::from_millis(left.as_millis() as u64))
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether this member's own vote names itself: it led (or stood) when it stopped.
    pub(super) fn led_before_start(&self) -> bool {
        self.votes_for(self.cfg.node_id)
    }
}

/// Why a member stands for election before its timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prompt {
    /// It led before this start (its vote names itself): stand at once.
    Restarted,
    /// It just created the group and stood already; its peers may not have the group yet,
    /// so ask again after a retry interval.
    Created,
}

/// Stands for election until a leader is known, or until `election_timeout_min` after
/// `started` (when the member's own timer takes over; `started` is when peers were first
/// served, after a daemon's join checks, or when the group was created). Members that start
/// (or create the group) a moment later do not answer the first requests yet, so it asks
/// again every `election_timeout_min / 8` (20–200 ms); each attempt is a pre-vote round
/// and, if a quorum would grant it, an ordinary election in a new term.
pub(super) async fn elect_promptly<L: StateMachineLogic>(
    group: Weak<RaftGroup<L>>,
    started: Instant,
    why: Prompt,
) {
    let Some((until, retry)) = group.upgrade().map(|g| {
        let min = g.cfg.election_timeout_min;
        let retry = (min / 8).clamp(Duration::from_millis(20), Duration::from_millis(200));
        (started + min, retry)
    }) else {
        return;
    };
    if why == Prompt::Created {
        // The creation's own election is under way: give it its chance first.
        tokio::time::sleep(retry).await;
    }
    while Instant::now() < until {
        let Some(g) = group.upgrade() else { return };
        let m = g.metrics();
        let stopped = m.state == openraft::ServerState::Shutdown || m.running_state.is_err();
        // A created group's member votes for itself, as one that led before a restart does.
        if m.current_leader.is_some() || stopped || !g.led_before_start() {
            return;
        }
        match why {
            Prompt::Restarted => {
                tracing::info!(group = %g.cfg.group_id, term = m.current_term, "led before this start: standing for election at once")
            }
            Prompt::Created => {
                tracing::info!(group = %g.cfg.group_id, term = m.current_term, "created the group and no leader yet: standing for election again")
            }
        }
        // Pre-vote first: a leader elected meanwhile that this member has not heard from yet
        // keeps its term.
        if let Err(e) = g.raft.trigger().elect(true).await {
            tracing::debug!(group = %g.cfg.group_id, error = %e, "prompt election");
            return;
        }
        drop(g);
        tokio::time::sleep(retry).await;
    }
}
