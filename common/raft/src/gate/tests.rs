//! The gate's decisions, case by case (the OM's LOCAL_LEASE cases of HDDS-17550 included).

use super::*;

const LEASE: Duration = Duration::from_secs(5);

fn ready_leader() -> LeaderInput {
    LeaderInput {
        ready: true,
        sole_voter: false,
        quorum_ack_age: Some(Duration::from_millis(10)),
        lease: Duration::from_millis(750),
        transferring: false,
    }
}

fn lead(f: impl FnOnce(&mut LeaderInput)) -> Result<(), Refused> {
    let mut i = ready_leader();
    f(&mut i);
    leader(&i)
}

fn follower() -> LeaseInput {
    LeaseInput {
        role: Role::Follower,
        known_leader: Some(1),
        contact: Some(Contact {
            age: Some(Duration::from_millis(100)),
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
    local_lease(&i)
}

#[test]
fn leader_with_a_fresh_quorum_ack_serves() {
    assert_eq!(leader(&ready_leader()), Ok(()));
}

#[test]
fn leader_without_a_quorum_ack_in_this_process_refuses() {
    // The restarted leader of the issue: openraft made it leader from its committed vote,
    // and nothing has been acknowledged since.
    assert_eq!(lead(|i| i.quorum_ack_age = None), Err(Refused::NoQuorumAck));
}

#[test]
fn leader_lease_is_strictly_shorter_than_its_bound() {
    assert_eq!(
        lead(|i| i.quorum_ack_age = Some(Duration::from_millis(749))),
        Ok(())
    );
    assert_eq!(
        lead(|i| i.quorum_ack_age = Some(Duration::from_millis(750))),
        Err(Refused::QuorumAckExpired)
    );
    assert_eq!(
        lead(|i| i.quorum_ack_age = Some(Duration::from_secs(3600))),
        Err(Refused::QuorumAckExpired)
    );
}

#[test]
fn sole_voter_needs_no_acknowledgement_but_must_be_ready() {
    assert_eq!(
        lead(|i| {
            i.sole_voter = true;
            i.quorum_ack_age = None;
        }),
        Ok(())
    );
    assert_eq!(
        lead(|i| {
            i.sole_voter = true;
            i.ready = false;
        }),
        Err(Refused::LeaderNotReady)
    );
}

#[test]
fn transferring_leader_refuses_even_with_a_fresh_ack() {
    assert_eq!(lead(|i| i.transferring = true), Err(Refused::Transferring));
    assert_eq!(
        lead(|i| {
            i.transferring = true;
            i.sole_voter = true;
        }),
        Err(Refused::Transferring)
    );
}

#[test]
fn local_lease_on_a_leader_is_the_leader_gate() {
    assert_eq!(
        with(|i| {
            i.role = Role::Leader(ready_leader());
            i.contact = None;
            i.known_leader = Some(2);
        }),
        Ok(())
    );
    // Before the lease, a ready leader passed whatever its quorum said.
    let mut cut_off = ready_leader();
    cut_off.quorum_ack_age = Some(Duration::from_secs(10));
    assert_eq!(
        with(|i| i.role = Role::Leader(cut_off)),
        Err(Refused::QuorumAckExpired)
    );
}

#[test]
fn not_ready_leader_refuses_even_at_unlimited_log_limit() {
    // HDDS-17550: checked against itself, a not-ready leader used to pass.
    let mut l = ready_leader();
    l.ready = false;
    assert_eq!(
        with(|i| i.role = Role::Leader(l)),
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
fn candidate_learner_and_stopped_member_refuse() {
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
        with(|i| i.contact.as_mut().unwrap().age = Some(LEASE + Duration::from_millis(1))),
        Err(Refused::LeaseExpired)
    );
    // No known send time (the leader had never heard from this member): no lease.
    assert_eq!(
        with(|i| i.contact.as_mut().unwrap().age = None),
        Err(Refused::LeaseExpired)
    );
    assert_eq!(
        with(|i| i.contact.as_mut().unwrap().age = Some(LEASE)),
        Ok(())
    );
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
    let labels: std::collections::BTreeSet<_> = Refused::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(labels.len(), Refused::ALL.len());
    for r in Refused::ALL {
        assert_eq!(Refused::ALL[r.index()], r);
    }
}
