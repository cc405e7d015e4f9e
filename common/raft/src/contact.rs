//! Leader-contact tracking and readiness.
//!
//! openraft's metrics tell a follower who its leader is, but not when it last heard from
//! it. Every accepted append (heartbeats included) from the leader is recorded here, with the
//! leader's id, term and committed log id, so local-lease reads and health output can judge
//! presence by what actually arrived, never by a default value standing in for "unknown"
//! (Ozone's HDDS-17550).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use openraft::ServerState;

use crate::types::{LogId, NodeId, RaftMetrics};

/// The last accepted append from a leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactRecord {
    pub at: Instant,
    pub leader: NodeId,
    pub term: u64,
    /// The leader's committed log id as sent with that append.
    pub leader_commit: Option<LogId>,
}

impl ContactRecord {
    /// Whether the leader's commit index is from its own current term. Until a new leader
    /// commits an entry of its term it does not know the cluster's commit index.
    pub fn commit_in_leader_term(&self) -> bool {
        self.leader_commit
            .as_ref()
            .is_some_and(|l| l.committed_leader_id().term == self.term)
    }

    pub fn age(&self) -> Duration {
        self.at.elapsed()
    }
}

/// Shared per group; written by the peer service, read by applications.
#[derive(Debug, Default)]
pub struct LeaderContact {
    last: Mutex<Option<ContactRecord>>,
}

impl LeaderContact {
    pub fn record(&self, leader: NodeId, term: u64, leader_commit: Option<LogId>) {
        let rec = ContactRecord {
            at: Instant::now(),
            leader,
            term,
            leader_commit,
        };
        let mut g = match self.last.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Never let a delayed append from an older term overwrite a newer leader's record.
        if g.as_ref().is_none_or(|old| old.term <= term) {
            *g = Some(rec);
        }
    }

    pub fn last(&self) -> Option<ContactRecord> {
        match self.last.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// A leader is ready once it has applied an entry of its own term: only then does its state
/// reflect every write acknowledged by earlier leaders.
pub fn leader_ready(m: &RaftMetrics) -> bool {
    m.state == ServerState::Leader
        && m.last_applied
            .as_ref()
            .is_some_and(|l| l.committed_leader_id().term == m.current_term)
}

/// On a leader: how long ago each member last acknowledged an append or heartbeat (`None`
/// for one that never did). Empty on a node that does not lead.
pub fn member_ack_ages(m: &RaftMetrics) -> std::collections::BTreeMap<NodeId, Option<Duration>> {
    use openraft::Instant as _;
    m.heartbeat
        .as_ref()
        .map(|h| {
            h.iter()
                .map(|(id, at)| (*id, at.as_ref().map(|t| t.elapsed())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, index: u64) -> LogId {
        openraft::testing::log_id::<crate::types::TypeConfig>(term, 1, index)
    }

    #[test]
    fn older_term_never_overwrites_newer_contact() {
        let c = LeaderContact::default();
        c.record(2, 5, Some(log_id(5, 10)));
        c.record(1, 4, Some(log_id(4, 9)));
        let last = c.last().unwrap();
        assert_eq!((last.leader, last.term), (2, 5));
        assert!(last.commit_in_leader_term());
        c.record(3, 6, Some(log_id(5, 10)));
        assert!(!c.last().unwrap().commit_in_leader_term());
    }
}
