//! Leader-contact tracking and readiness.
//!
//! openraft's metrics tell a follower who its leader is, but not when it last heard from
//! it. Every accepted append (heartbeats included) from the leader is recorded here, with the
//! leader's id, term and committed log id, so local-lease reads and health output can judge
//! presence by what actually arrived, never by a default value standing in for "unknown"
//! (Ozone's HDDS-17550).
//!
//! **When an append was sent, not when it arrived.** A local-lease read must not answer from
//! data older than the lease, and an append's arrival says nothing about its age: one held
//! in a socket buffer while the follower was paused, or by a slow link, arrives late with
//! the leader's state of back then. So every reply this process sends carries a reading of
//! its own clock ([`stamp`]); the leader keeps the newest reading it received from each
//! member and puts it (the *echo*) in every append it then sends to that member. The echo
//! is a time on the follower's own clock before which the append cannot have been sent,
//! whatever the network did: the lease counts from it ([`ContactRecord::sent_after`]). The
//! cost is that a lease starts a round trip plus at most one heartbeat interval earlier
//! than the arrival, so a follower lease must be well above the heartbeat interval.
//!
//! What this does not cover: openraft reads the commit index for a heartbeat when its tick
//! fires and the transport attaches the echo when it sends, a task wake-up later; a reply
//! processed in that gap makes the echo newer than the commit index by that much (micro- to
//! milliseconds on a loaded machine, never a pause of the leader: while the leader is stopped
//! no reply can reach it).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use openraft::ServerState;
use rozone_proto::raft::ClockStamp;

use crate::types::{LogId, NodeId, RaftMetrics};

/// This process's clock: the instant stamps count from, and a random id of this start.
fn clock() -> &'static (Instant, u64) {
    static CLOCK: OnceLock<(Instant, u64)> = OnceLock::new();
    CLOCK.get_or_init(|| (Instant::now(), rand::random::<u64>() | 1))
}

/// A reading of this process's clock, for a reply.
pub fn stamp() -> ClockStamp {
    let (anchor, epoch) = clock();
    ClockStamp {
        epoch: *epoch,
        nanos: u64::try_from(anchor.elapsed().as_nanos()).unwrap_or(u64::MAX),
    }
}

/// The instant of one of this process's own stamps, echoed back by a leader; `None` for a
/// stamp of another process or an earlier start of this one, or one from the future (a
/// forged or corrupt echo, which must not lengthen a lease).
pub fn instant_of(s: &ClockStamp) -> Option<Instant> {
    let (anchor, epoch) = clock();
    if s.epoch != *epoch {
        return None;
    }
    anchor
        .checked_add(Duration::from_nanos(s.nanos))
        .filter(|t| *t <= Instant::now())
}

/// Whether this member leads and holds its leader lease right now.
pub type LeaseCheck = Box<dyn Fn() -> bool + Send + Sync>;

/// The newest stamp received from each member (leader side), echoed in appends to it.
///
/// An echo vouches that the append's state was the ring's newest when it left, so it is
/// only sent while this leader holds its leader lease (see [`crate::gate`]): then no other
/// leader can have been elected, and every acknowledged write is in its commit index. A
/// leader deposed behind a partition (on a ring of five, it can still reach one follower)
/// keeps sending appends, but without an echo, and that follower's lease runs out.
#[derive(Default)]
pub struct Echoes {
    by_member: Mutex<std::collections::HashMap<NodeId, ClockStamp>>,
    holds_lease: OnceLock<LeaseCheck>,
}

impl std::fmt::Debug for Echoes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Echoes")
            .field("by_member", &self.by_member)
            .finish_non_exhaustive()
    }
}

impl Echoes {
    /// Keeps `s` if it is newer than what is held for `member` (a stamp of a new epoch, from
    /// a member that restarted, replaces the old one).
    pub fn note(&self, member: NodeId, s: Option<ClockStamp>) {
        let Some(s) = s else { return };
        let mut g = self.by_member.lock().unwrap_or_else(|p| p.into_inner());
        match g.get(&member) {
            Some(old) if old.epoch == s.epoch && old.nanos >= s.nanos => {}
            _ => {
                g.insert(member, s);
            }
        }
    }

    /// Sets the leader-lease check; until then nothing is echoed.
    pub fn set_lease_check(&self, check: LeaseCheck) {
        let _ = self.holds_lease.set(check);
    }

    /// What to echo to `member` now: nothing unless this member holds its leader lease.
    pub fn get(&self, member: NodeId) -> Option<ClockStamp> {
        if !self.holds_lease.get().is_some_and(|holds| holds()) {
            return None;
        }
        let g = self.by_member.lock().unwrap_or_else(|p| p.into_inner());
        g.get(&member).copied()
    }
}

/// The last accepted append from a leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContactRecord {
    /// When it arrived (presence, health output).
    pub at: Instant,
    /// A time before which the leader cannot have sent it (the echo it carried); `None`: the
    /// leader had heard nothing from this process yet. Local leases count from this.
    pub sent_after: Option<Instant>,
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

    /// Time since it arrived.
    pub fn age(&self) -> Duration {
        self.at.elapsed()
    }

    /// Time since the leader's state it carried is known to be from; `None` if not known.
    pub fn lease_age(&self) -> Option<Duration> {
        self.sent_after.map(|t| t.elapsed())
    }
}

/// Shared per group; written by the peer service, read by applications.
#[derive(Debug, Default)]
pub struct LeaderContact {
    last: Mutex<Option<ContactRecord>>,
}

impl LeaderContact {
    /// Records an accepted append from `leader` in `term`, carrying `echo`.
    pub fn record(
        &self,
        leader: NodeId,
        term: u64,
        leader_commit: Option<LogId>,
        echo: Option<&ClockStamp>,
    ) {
        let rec = ContactRecord {
            at: Instant::now(),
            sent_after: echo.and_then(instant_of),
            leader,
            term,
            leader_commit,
        };
        let mut g = match self.last.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // Never let a delayed append from an older term overwrite a newer leader's record.
        // Within a term, appends reach us on two streams (replication, heartbeats), so an
        // older one can arrive after a newer one: the record keeps the append proven newest
        // (the leader's commit index only grows, so that one's is the highest), and only the
        // arrival time of a later one.
        match g.as_mut() {
            Some(old) if old.term > term => {}
            Some(old)
                if old.term == term && old.leader == leader && old.sent_after > rec.sent_after =>
            {
                old.at = rec.at;
            }
            _ => *g = Some(rec),
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
        c.record(2, 5, Some(log_id(5, 10)), None);
        c.record(1, 4, Some(log_id(4, 9)), None);
        let last = c.last().unwrap();
        assert_eq!((last.leader, last.term), (2, 5));
        assert!(last.commit_in_leader_term());
        c.record(3, 6, Some(log_id(5, 10)), None);
        assert!(!c.last().unwrap().commit_in_leader_term());
    }

    #[test]
    fn only_own_stamps_of_the_past_are_believed() {
        let s = stamp();
        let t = instant_of(&s).expect("own stamp");
        assert!(t <= Instant::now());
        let other = ClockStamp {
            epoch: s.epoch ^ 2,
            nanos: s.nanos,
        };
        assert_eq!(instant_of(&other), None, "another process's stamp");
        let future = ClockStamp {
            epoch: s.epoch,
            nanos: s.nanos + 3_600_000_000_000,
        };
        assert_eq!(instant_of(&future), None, "a stamp from the future");
    }

    #[test]
    fn the_lease_counts_from_the_echo_and_an_older_proof_never_replaces_a_newer_one() {
        let c = LeaderContact::default();
        let old = stamp();
        std::thread::sleep(Duration::from_millis(5));
        let new = stamp();
        c.record(1, 3, Some(log_id(3, 8)), Some(&new));
        let r = c.last().unwrap();
        assert_eq!(r.sent_after, instant_of(&new));
        assert!(r.lease_age().unwrap() >= r.age());
        // An append proven older (or not proven at all) arriving later, on the other stream:
        // the proof and its commit index stay, only the arrival time moves.
        for echo in [Some(&old), None] {
            c.record(1, 3, Some(log_id(3, 7)), echo);
            let r2 = c.last().unwrap();
            assert_eq!(
                (r2.sent_after, r2.leader_commit),
                (r.sent_after, r.leader_commit)
            );
            assert!(r2.at >= r.at);
        }
        // A newer term replaces whatever it carries.
        c.record(2, 4, None, None);
        assert_eq!(c.last().unwrap().sent_after, None);
    }

    #[test]
    fn echoes_keep_the_newest_stamp_of_the_newest_start() {
        let e = Echoes::default();
        e.set_lease_check(Box::new(|| true));
        let a = ClockStamp {
            epoch: 7,
            nanos: 50,
        };
        e.note(1, Some(a));
        e.note(
            1,
            Some(ClockStamp {
                epoch: 7,
                nanos: 40,
            }),
        );
        assert_eq!(e.get(1), Some(a));
        e.note(1, None);
        assert_eq!(e.get(1), Some(a));
        let restarted = ClockStamp { epoch: 9, nanos: 1 };
        e.note(1, Some(restarted));
        assert_eq!(e.get(1), Some(restarted));
        assert_eq!(e.get(2), None);
    }

    #[test]
    fn nothing_is_echoed_without_the_leader_lease() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let e = Echoes::default();
        e.note(
            1,
            Some(ClockStamp {
                epoch: 7,
                nanos: 50,
            }),
        );
        assert_eq!(e.get(1), None, "no check set yet");
        let lease = std::sync::Arc::new(AtomicBool::new(false));
        let l = lease.clone();
        e.set_lease_check(Box::new(move || l.load(Ordering::Relaxed)));
        assert_eq!(e.get(1), None);
        lease.store(true, Ordering::Relaxed);
        assert_eq!(
            e.get(1),
            Some(ClockStamp {
                epoch: 7,
                nanos: 50
            })
        );
    }
}
