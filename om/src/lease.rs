//! The LOCAL_LEASE decision (Ozone's HDDS-17550 done right): may this OM answer a read from
//! its own state without a Raft round trip?
//!
//! A pure function over a typed input in which every "unknown" is an `Option` that is
//! `None`, never a default value standing in for it. A node serves locally only if it is a
//! ready leader, or a follower that knows its leader, last heard from *that* leader within
//! the lease, whose record of the leader's commit index is from the leader's current term
//! (a leader that has not committed an entry of its term does not know the cluster's commit
//! index), and, unless the log limit is unlimited (`-1`), whose applied index is within the
//! limit of that commit index.

use std::fmt;
use std::time::Duration;

/// This node's Raft role as the lease check needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader { ready: bool },
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// The last accepted append from a leader, as recorded by the Raft layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contact {
    pub age: Duration,
    pub leader: u64,
    /// The leader's term in that append.
    pub term: u64,
    /// The leader's committed log id in that append: (term, index); `None` = nothing
    /// committed yet.
    pub leader_commit: Option<(u64, u64)>,
}

/// How far behind the leader's commit index a follower may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLimit {
    /// `-1`: skip the index comparison (every other check still applies).
    Unlimited,
    Entries(u64),
}

impl LogLimit {
    /// From the config/request form: `-1` is unlimited, `n >= 0` is `n` entries.
    pub fn from_i64(v: i64) -> Option<Self> {
        match v {
            -1 => Some(Self::Unlimited),
            n if n >= 0 => Some(Self::Entries(n as u64)),
            _ => None,
        }
    }

    /// The narrower of two limits.
    pub fn narrower(self, other: Self) -> Self {
        match (self, other) {
            (Self::Unlimited, x) | (x, Self::Unlimited) => x,
            (Self::Entries(a), Self::Entries(b)) => Self::Entries(a.min(b)),
        }
    }
}

/// Everything the decision looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseInput {
    pub role: Role,
    /// The leader this node currently knows (openraft's view), if any.
    pub known_leader: Option<u64>,
    pub contact: Option<Contact>,
    /// This node's applied log index; `None` = nothing applied.
    pub applied_index: Option<u64>,
    pub lease_time: Duration,
    pub log_limit: LogLimit,
}

/// Why a LOCAL_LEASE read was not served locally (each is counted in `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refused {
    /// A leader that has not applied an entry of its term: `LeaderNotReady`.
    LeaderNotReady,
    /// A candidate, learner or stopped node.
    NotFollower,
    /// A follower that knows no leader.
    NoLeader,
    /// No append from the known leader was ever recorded.
    NoContact,
    /// The last recorded append is from another leader than the one known now.
    ContactFromOtherLeader,
    /// The last append from the leader is older than the lease.
    LeaseExpired,
    /// The leader's commit index is not from its current term (or nothing is committed).
    CommitNotInLeaderTerm,
    /// The applied index is further behind the leader's commit index than the log limit.
    LogLag,
}

impl Refused {
    pub const ALL: [Refused; 8] = [
        Refused::LeaderNotReady,
        Refused::NotFollower,
        Refused::NoLeader,
        Refused::NoContact,
        Refused::ContactFromOtherLeader,
        Refused::LeaseExpired,
        Refused::CommitNotInLeaderTerm,
        Refused::LogLag,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Refused::LeaderNotReady => "leader_not_ready",
            Refused::NotFollower => "not_follower",
            Refused::NoLeader => "no_leader",
            Refused::NoContact => "no_contact",
            Refused::ContactFromOtherLeader => "contact_from_other_leader",
            Refused::LeaseExpired => "lease_expired",
            Refused::CommitNotInLeaderTerm => "commit_not_in_leader_term",
            Refused::LogLag => "log_lag",
        }
    }

    pub fn index(self) -> usize {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refused::LeaderNotReady => "this OM leads but has not applied an entry of its term",
            Refused::NotFollower => "this OM is not a follower",
            Refused::NoLeader => "this OM knows no leader",
            Refused::NoContact => "this OM has not heard from its leader",
            Refused::ContactFromOtherLeader => {
                "this OM's last contact was with another leader than the current one"
            }
            Refused::LeaseExpired => "this OM has not heard from its leader within the lease",
            Refused::CommitNotInLeaderTerm => {
                "the leader's commit index is not from its current term yet"
            }
            Refused::LogLag => "this OM is further behind the leader than the log limit",
        })
    }
}

/// Serve locally, or why not.
pub fn decide(i: &LeaseInput) -> Result<(), Refused> {
    match i.role {
        Role::Leader { ready: true } => return Ok(()),
        Role::Leader { ready: false } => return Err(Refused::LeaderNotReady),
        Role::Follower => {}
        Role::Candidate | Role::Learner | Role::Shutdown => return Err(Refused::NotFollower),
    }
    let leader = i.known_leader.ok_or(Refused::NoLeader)?;
    let c = i.contact.ok_or(Refused::NoContact)?;
    if c.leader != leader {
        return Err(Refused::ContactFromOtherLeader);
    }
    if c.age > i.lease_time {
        return Err(Refused::LeaseExpired);
    }
    let (commit_term, commit_index) = c.leader_commit.ok_or(Refused::CommitNotInLeaderTerm)?;
    if commit_term != c.term {
        return Err(Refused::CommitNotInLeaderTerm);
    }
    match i.log_limit {
        LogLimit::Unlimited => Ok(()),
        LogLimit::Entries(limit) => {
            // Nothing applied is index 0: behind by the whole commit index.
            let applied = i.applied_index.unwrap_or(0);
            if commit_index.saturating_sub(applied) > limit {
                Err(Refused::LogLag)
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(5);

    fn follower() -> LeaseInput {
        LeaseInput {
            role: Role::Follower,
            known_leader: Some(1),
            contact: Some(Contact {
                age: Duration::from_millis(100),
                leader: 1,
                term: 3,
                leader_commit: Some((3, 100)),
            }),
            applied_index: Some(100),
            lease_time: LEASE,
            log_limit: LogLimit::Unlimited,
        }
    }

    fn with(f: impl FnOnce(&mut LeaseInput)) -> Result<(), Refused> {
        let mut i = follower();
        f(&mut i);
        decide(&i)
    }

    #[test]
    fn ready_leader_and_follower_with_known_recent_leader_serve() {
        assert_eq!(decide(&follower()), Ok(()));
        assert_eq!(
            with(|i| {
                i.role = Role::Leader { ready: true };
                i.contact = None;
                i.known_leader = Some(2);
            }),
            Ok(())
        );
    }

    #[test]
    fn not_ready_leader_refuses_even_at_unlimited_log_limit() {
        // HDDS-17550: checked against itself, a not-ready leader used to pass.
        assert_eq!(
            with(|i| i.role = Role::Leader { ready: false }),
            Err(Refused::LeaderNotReady)
        );
    }

    #[test]
    fn leaderless_follower_refuses_even_at_unlimited_log_limit() {
        // HDDS-17550: a missing leader looked like a present one with age 0.
        assert_eq!(with(|i| i.known_leader = None), Err(Refused::NoLeader));
        assert_eq!(
            with(|i| {
                i.known_leader = None;
                i.contact = None;
            }),
            Err(Refused::NoLeader)
        );
    }

    #[test]
    fn candidate_learner_and_stopped_node_refuse() {
        for role in [Role::Candidate, Role::Learner, Role::Shutdown] {
            assert_eq!(
                with(|i| i.role = role),
                Err(Refused::NotFollower),
                "{role:?}"
            );
        }
    }

    #[test]
    fn contact_must_exist_be_from_the_known_leader_and_within_the_lease() {
        assert_eq!(with(|i| i.contact = None), Err(Refused::NoContact));
        assert_eq!(
            with(|i| i.known_leader = Some(2)),
            Err(Refused::ContactFromOtherLeader)
        );
        assert_eq!(
            with(|i| i.contact.as_mut().unwrap().age = LEASE + Duration::from_millis(1)),
            Err(Refused::LeaseExpired)
        );
        assert_eq!(with(|i| i.contact.as_mut().unwrap().age = LEASE), Ok(()));
    }

    #[test]
    fn leader_commit_must_be_from_the_leaders_current_term() {
        assert_eq!(
            with(|i| i.contact.as_mut().unwrap().leader_commit = Some((2, 100))),
            Err(Refused::CommitNotInLeaderTerm)
        );
        assert_eq!(
            with(|i| i.contact.as_mut().unwrap().leader_commit = None),
            Err(Refused::CommitNotInLeaderTerm)
        );
    }

    #[test]
    fn finite_log_limit_compares_applied_with_leader_commit() {
        let lag = |applied: Option<u64>, limit: u64| {
            with(|i| {
                i.applied_index = applied;
                i.log_limit = LogLimit::Entries(limit);
            })
        };
        assert_eq!(lag(Some(90), 10), Ok(()));
        assert_eq!(lag(Some(89), 10), Err(Refused::LogLag));
        assert_eq!(lag(Some(100), 0), Ok(()));
        assert_eq!(lag(None, 10), Err(Refused::LogLag));
        assert_eq!(lag(None, 100), Ok(()));
        // Unlimited skips only this comparison.
        assert_eq!(with(|i| i.applied_index = None), Ok(()));
    }

    #[test]
    fn limits_parse_and_narrow() {
        assert_eq!(LogLimit::from_i64(-1), Some(LogLimit::Unlimited));
        assert_eq!(LogLimit::from_i64(0), Some(LogLimit::Entries(0)));
        assert_eq!(LogLimit::from_i64(-2), None);
        let (u, e5, e9) = (
            LogLimit::Unlimited,
            LogLimit::Entries(5),
            LogLimit::Entries(9),
        );
        assert_eq!(u.narrower(e5), e5);
        assert_eq!(e9.narrower(u), e9);
        assert_eq!(e9.narrower(e5), e5);
        assert_eq!(u.narrower(u), u);
    }

    #[test]
    fn every_reason_has_a_distinct_label() {
        let labels: std::collections::BTreeSet<_> =
            Refused::ALL.iter().map(|r| r.label()).collect();
        assert_eq!(labels.len(), Refused::ALL.len());
        for r in Refused::ALL {
            assert_eq!(Refused::ALL[r.index()], r);
        }
    }
}
