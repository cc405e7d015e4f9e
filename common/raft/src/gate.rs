//! The read gate: may this member answer a read from its own state, without a Raft round
//! trip? One pure decision for every ring (OM, SCM), over a typed input in which every
//! "unknown" is an `Option` that is `None`, never a default value standing in for it
//! (Ozone's HDDS-17550).
//!
//! **A leader** serves such reads only while it holds a *lease*: it has applied an entry of
//! its own term, it is not handing leadership away, and a quorum acknowledged an append or
//! heartbeat that this process sent less than [`leader_lease`] ago. The lease is strictly
//! shorter than the minimum election timeout, with a margin for clock-rate drift: a follower
//! that acknowledged that append refuses to vote for anyone else for at least
//! `election_timeout_min` after it received it (openraft's vote lease), so no other leader can
//! be elected while the lease holds. Acknowledgements are counted from when the append was
//! *sent*, and only acknowledgements received by this process count: a leader restarted from
//! its committed vote starts with no lease and must earn one (a restarted member withholds its
//! vote for a while, see `RaftGroup::vote_grace`, so the followers' side of the promise
//! survives a restart too).
//!
//! **A follower** serves LOCAL_LEASE reads only if it knows its leader, last heard from *that*
//! leader within the lease, the leader's commit index it recorded is from the leader's
//! current term (a leader that has not committed an entry of its term does not know the
//! cluster's commit index), and, unless the log limit is unlimited, its applied index is
//! within the limit of that commit index.

use std::fmt;
use std::time::Duration;

pub use rozone_config::leader_lease;

/// What a leader's lease check looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaderInput {
    /// It has applied an entry of its own term (its state holds every write acknowledged by
    /// earlier leaders).
    pub ready: bool,
    /// It is the only voter: its own acknowledgement is a quorum.
    pub sole_voter: bool,
    /// Time since the send time of the newest append a quorum acknowledged to this process;
    /// `None` = no quorum acknowledged anything since this process became leader.
    pub quorum_ack_age: Option<Duration>,
    /// The lease bound ([`leader_lease`] of the ring's Raft timing).
    pub lease: Duration,
    /// It asked another member to take over in its current term: that member is elected
    /// without waiting for vote leases to expire, so this leader's lease is void.
    pub transferring: bool,
}

/// This member's Raft role as the gate needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader(LeaderInput),
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// The last accepted append from a leader, as recorded by the Raft layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contact {
    /// Time since a moment before which the leader cannot have sent that append (see
    /// `crate::contact`: the echo of this member's own clock), not since its arrival; `None`
    /// = not known (the leader had heard nothing from this member yet): no lease.
    pub age: Option<Duration>,
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

/// Everything a LOCAL_LEASE decision looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseInput {
    pub role: Role,
    /// The leader this member currently knows (openraft's view), if any.
    pub known_leader: Option<u64>,
    pub contact: Option<Contact>,
    /// This member's applied log index; `None` = nothing applied.
    pub applied_index: Option<u64>,
    /// The follower's lease: how recent the leader's last append must be.
    pub lease_time: Duration,
    pub log_limit: LogLimit,
}

/// Why a read was not served from this member's state (each is counted in `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refused {
    /// A leader that has not applied an entry of its term.
    LeaderNotReady,
    /// A leader that no quorum has acknowledged since it (this process) became leader.
    NoQuorumAck,
    /// A leader whose newest quorum acknowledgement is older than the lease.
    QuorumAckExpired,
    /// A leader that is handing leadership to another member in this term.
    Transferring,
    /// A candidate, learner or stopped member.
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
    pub const ALL: [Refused; 11] = [
        Refused::LeaderNotReady,
        Refused::NoQuorumAck,
        Refused::QuorumAckExpired,
        Refused::Transferring,
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
            Refused::NoQuorumAck => "no_quorum_ack",
            Refused::QuorumAckExpired => "quorum_ack_expired",
            Refused::Transferring => "transferring",
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

    /// A refusal of a member that openraft still calls leader.
    pub fn is_leader_side(self) -> bool {
        matches!(
            self,
            Refused::LeaderNotReady
                | Refused::NoQuorumAck
                | Refused::QuorumAckExpired
                | Refused::Transferring
        )
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refused::LeaderNotReady => "this member leads but has not applied an entry of its term",
            Refused::NoQuorumAck => {
                "this member leads but no quorum has acknowledged it since it became leader"
            }
            Refused::QuorumAckExpired => {
                "this member leads but no quorum has acknowledged it within its lease"
            }
            Refused::Transferring => "this member is handing leadership to another member",
            Refused::NotFollower => "this member is not a follower",
            Refused::NoLeader => "this member knows no leader",
            Refused::NoContact => "this member has not heard from its leader",
            Refused::ContactFromOtherLeader => {
                "this member's last contact was with another leader than the current one"
            }
            Refused::LeaseExpired => "this member has not heard from its leader within the lease",
            Refused::CommitNotInLeaderTerm => {
                "the leader's commit index is not from its current term yet"
            }
            Refused::LogLag => "this member is further behind the leader than the log limit",
        })
    }
}

/// May this leader serve reads (and count as ready) now?
pub fn leader(i: &LeaderInput) -> Result<(), Refused> {
    if !i.ready {
        return Err(Refused::LeaderNotReady);
    }
    if i.transferring {
        return Err(Refused::Transferring);
    }
    if i.sole_voter {
        return Ok(());
    }
    // Fault tests only (builds with failpoints): re-creates the defect the lease fixed, a
    // leader cut off from its quorum serving reads from its own state, so the chaos suite
    // can show that its checker finds it (RELIABILITY.md).
    fail::fail_point!("raft-lease-bypass", |_| Ok(()));
    match i.quorum_ack_age {
        None => Err(Refused::NoQuorumAck),
        // Strict: an acknowledgement exactly one lease old no longer counts.
        Some(age) if age >= i.lease => Err(Refused::QuorumAckExpired),
        Some(_) => Ok(()),
    }
}

/// May this member serve a LOCAL_LEASE read from its own state?
pub fn local_lease(i: &LeaseInput) -> Result<(), Refused> {
    match i.role {
        Role::Leader(l) => return leader(&l),
        Role::Follower => {}
        Role::Candidate | Role::Learner | Role::Shutdown => return Err(Refused::NotFollower),
    }
    let known = i.known_leader.ok_or(Refused::NoLeader)?;
    let c = i.contact.ok_or(Refused::NoContact)?;
    if c.leader != known {
        return Err(Refused::ContactFromOtherLeader);
    }
    let (commit_term, commit_index) = c.leader_commit.ok_or(Refused::CommitNotInLeaderTerm)?;
    if commit_term != c.term {
        return Err(Refused::CommitNotInLeaderTerm);
    }
    // After the term check: a leader that has not committed in its term holds no lease, so
    // its appends carry no echo, and the term is the more telling reason.
    if c.age.is_none_or(|age| age > i.lease_time) {
        return Err(Refused::LeaseExpired);
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
mod tests;
