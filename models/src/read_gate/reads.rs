//! Reads: the real gate, fed with the model's values, and what a served read would return.
//!
//! The inputs are built the way `RaftGroup::leader_input` and `RaftGroup::lease_input` build
//! them from openraft's metrics: ages on the member's own clock, `None` for "never".

use rozone_raft::gate::{self, LeaderInput, LeaseInput, LogLimit};

use super::config::{Flaw, ReadGate};
use super::state::{Id, Leading, Role, State, WriteId, MEMBERS, QUORUM};
use super::timing::{age, Tick};

/// The send tick of the newest append a quorum acknowledged to this leader process (the
/// leader itself counts as acknowledging at once): openraft's `last_quorum_acked`.
pub fn quorum_acked(lead: &Leading, leader: Id) -> Option<Tick> {
    let mut acks: Vec<Tick> = (0..MEMBERS)
        .filter(|&id| id != leader)
        .filter_map(|id| lead.ack_sent[id])
        .collect();
    acks.sort_unstable_by(|a, b| b.cmp(a));
    acks.get(QUORUM - 2).copied()
}

/// The leader-lease input of member `id`, if it leads.
pub fn leader_input(m: &ReadGate, s: &State, id: Id) -> Option<LeaderInput> {
    let mem = &s.members[id];
    let lead = mem.leading()?;
    let mut input = LeaderInput {
        // `leader_ready`: it applied an entry of its own term.
        ready: mem.commit > 0 && mem.log[mem.commit - 1].term == mem.term,
        sole_voter: MEMBERS == 1,
        quorum_ack_age: age(s.now, quorum_acked(lead, id), mem.rate),
        lease: m.leader_lease(),
        transferring: lead.transfer_term == Some(mem.term + 1),
    };
    match m.flaw {
        // A gate that takes any ready leader at its word: what `DEFAULT` reads did before.
        Flaw::IgnoreQuorumLease => input.sole_voter = true,
        Flaw::IgnoreTransfer => input.transferring = false,
        Flaw::None | Flaw::NoVoteGrace | Flaw::NoLeaseMargin => {}
    }
    Some(input)
}

/// The LOCAL_LEASE input of member `id` (log limit 0).
pub fn lease_input(m: &ReadGate, s: &State, id: Id) -> LeaseInput {
    let mem = &s.members[id];
    let role = match &mem.role {
        Role::Leader(_) => match leader_input(m, s, id) {
            Some(l) => gate::Role::Leader(l),
            None => gate::Role::Shutdown,
        },
        Role::Candidate { .. } => gate::Role::Candidate,
        Role::Follower => gate::Role::Follower,
    };
    LeaseInput {
        role,
        known_leader: mem.known_leader.map(|l| l as u64),
        contact: mem.contact.map(|c| gate::Contact {
            // The model's appends are delayed at most `max_delay` ticks and its bound allows
            // for that (`stale_read`), so the arrival stands in for the echoed send time.
            age: age(s.now, Some(c.at), mem.rate),
            leader: c.leader as u64,
            term: u64::from(c.term),
            leader_commit: c.leader_commit.map(|(t, i)| (u64::from(t), i as u64)),
        }),
        applied_index: (mem.commit > 0).then_some(mem.commit as u64),
        lease_time: m.timing.follower_lease,
        log_limit: LogLimit::Entries(0),
    }
}

/// Whether member `id` would serve a read as a leader (DEFAULT, or LOCAL_LEASE on a leader).
pub fn serves_as_leader(m: &ReadGate, s: &State, id: Id) -> bool {
    leader_input(m, s, id).is_some_and(|i| gate::leader(&i).is_ok())
}

/// Whether member `id`, a follower, would serve a LOCAL_LEASE read.
pub fn serves_as_follower(m: &ReadGate, s: &State, id: Id) -> bool {
    matches!(s.members[id].role, Role::Follower)
        && gate::local_lease(&lease_input(m, s, id)).is_ok()
}

/// A read the gate lets through that misses a write it must see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleRead {
    pub member: Id,
    pub as_leader: bool,
    pub missing: WriteId,
}

/// The first stale read any member would serve in `s`, if any.
pub fn stale_read(m: &ReadGate, s: &State) -> Option<StaleRead> {
    (0..MEMBERS).find_map(|id| {
        let as_leader = serves_as_leader(m, s, id);
        if !as_leader && !serves_as_follower(m, s, id) {
            return None;
        }
        let mem = &s.members[id];
        // A follower's lease read may miss writes acknowledged since its last append was
        // sent: within its lease (on its clock) plus the longest delay before that.
        let staleness = if as_leader {
            0
        } else {
            let lease_ticks = m.timing.follower_lease.as_millis() as u64 / mem.rate;
            lease_ticks + u64::from(m.timing.max_delay) + 1
        };
        let must_see = |acked: Tick| u64::from(acked) + staleness <= u64::from(s.now);
        let missing = (0..s.acked.len() as WriteId).find(|&w| {
            s.acked[usize::from(w)].is_some_and(must_see) && !mem.applied_writes().any(|x| x == w)
        })?;
        Some(StaleRead {
            member: id,
            as_leader,
            missing,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_gate::Flaw;

    /// The follower half of the invariant is not vacuous: a follower whose fresh contact
    /// carries an old commit, missing a write acknowledged long ago, is flagged.
    #[test]
    fn a_follower_lease_read_missing_an_old_acknowledged_write_is_stale() {
        let m = ReadGate::new(Flaw::None);
        let mut s = State::settled([10; MEMBERS]);
        s.now = 6;
        s.ack([0]);
        s.acked[0] = Some(1);
        let f = &mut s.members[1];
        f.contact = f
            .contact
            .map(|c| super::super::state::Contact { at: 6, ..c });
        assert!(serves_as_follower(&m, &s, 1));
        assert_eq!(
            stale_read(&m, &s),
            Some(StaleRead {
                member: 1,
                as_leader: false,
                missing: 0
            })
        );
        // Within its staleness bound (lease 2 ticks + delay 1) the same read is allowed.
        s.acked[0] = Some(3);
        assert_eq!(stale_read(&m, &s), None);
    }
}
