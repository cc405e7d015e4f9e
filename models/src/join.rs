//! A model of the join protocol (issue 12, item 8b): check → start → add → promote, with a
//! crash at every step, wipes, restarts with every startup flag and `remove`.
//!
//! **The abstraction.** Node 1 founded ring R and leads it for good (elections are the read
//! gate model's business). Nodes 2 and 3 join it, crash, lose their disk, restart with
//! `--bootstrap` or no flag, and are removed by an operator. Each node's disk holds its
//! join-state record, whether Raft ever ran, whether openraft knows a membership, and its
//! log length; its process is down, joining (before or after the leader's admission
//! check) or serving. A start is decided by the real [`plan`]; the leader decides with the
//! real [`admit`] and promotes with the real [`caught_up`]. The leader replicates its whole
//! log to a member whose peer port answers ring R ([`Action::Replicate`]).
//!
//! **Invariants.** At most one ring in the cluster (no node but the founder ever initialises
//! one); the leader never finds a member's log shorter than what it matched ("follower log
//! reversion", which panicked it, and the way a committed entry is lost); no voter answers
//! the ring with an empty log (it could elect a leader without committed entries).
//!
//! **Not modelled:** `--init` on nodes 2 and 3 (an operator creating a second cluster on
//! purpose); leader changes; the OM's peer-config check; snapshots (a log length stands for
//! both).

use std::collections::BTreeMap;

use rozone_raft::join::decide::{
    admit, caught_up, plan, Admission, Joiner, Plan, Present, StartMode,
};
use rozone_raft::join::record::{JoinRecord, Origin, RingId, Stage};
use stateright::{Checker, HasDiscoveries, Model, Path, Property};

const R: RingId = RingId(1);
/// Writes the leader takes (its log starts with 1 entry).
const MAX_LOG: u64 = 2;

/// A deliberate defect, to show the checker catches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flaw {
    None,
    /// cd62657: a plain start of a dir with Raft data but no membership initialises a ring.
    PlainStartInitializes,
    /// cd62657: the leader admits any node id (only the address is checked).
    AdmitAnything,
    /// The peer port is open from the start (no gate until the leader admitted the node).
    OpenPeerPort,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Disk {
    pub record: Option<JoinRecord>,
    pub raft_data: bool,
    pub initialized: bool,
    pub log: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proc {
    Down,
    /// Joining; `prior` is the ring id its data held before; `admitted` once the leader's
    /// check said yes (the peer port is open from then on).
    Joining {
        prior: Option<RingId>,
        admitted: bool,
    },
    Serving,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    pub disks: [Disk; 2],
    pub procs: [Proc; 2],
    /// The leader's membership: node id → (voter, matched).
    pub members: BTreeMap<u64, (bool, Option<u64>)>,
    pub leader_log: u64,
    /// Rings initialised by nodes 2 and 3.
    pub extra_rings: u8,
    /// The leader found a log shorter than it matched.
    pub reverted: bool,
}

/// A startup flag of the model's joiners (`--init` is not modelled on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flag {
    Plain,
    Bootstrap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Start(u64, Flag),
    Check(u64),
    Add(u64),
    Promote(u64),
    Joined(u64),
    Replicate(u64),
    Write,
    Crash(u64),
    Wipe(u64),
    Remove(u64),
}

pub struct JoinModel {
    pub flaw: Flaw,
}

fn ix(id: u64) -> usize {
    (id - 2) as usize
}

impl JoinModel {
    fn serves_ring(&self, s: &State, id: u64) -> bool {
        let rec_ok = s.disks[ix(id)]
            .record
            .as_ref()
            .is_some_and(|r| r.ring_id == R);
        match s.procs[ix(id)] {
            Proc::Serving => rec_ok,
            Proc::Joining { admitted, .. } => {
                rec_ok && (admitted || self.flaw == Flaw::OpenPeerPort)
            }
            Proc::Down => false,
        }
    }

    fn admit(&self, s: &State, id: u64, prior: Option<RingId>) -> Result<Admission, ()> {
        let d = &s.disks[ix(id)];
        let joiner = Joiner {
            id,
            peer_addr: format!("p{id}"),
            ring_id: prior,
            last_log_index: (d.log > 0).then_some(d.log),
        };
        let present = s.members.get(&id).map(|(voter, matched)| Present {
            peer_addr: format!("p{id}"),
            voter: *voter,
            matched: *matched,
        });
        if self.flaw == Flaw::AdmitAnything {
            return Ok(match present {
                None => Admission::AddLearner,
                Some(p) if p.voter => Admission::AlreadyVoter,
                Some(_) => Admission::ResumeLearner,
            });
        }
        admit("OM", R, &joiner, present.as_ref()).map_err(|_| ())
    }

    fn start(&self, s: &State, id: u64, mode: StartMode) -> Option<State> {
        let d = &s.disks[ix(id)];
        let p = match plan(mode, id, d.record.as_ref(), d.raft_data, "OM") {
            Err(_) if self.flaw == Flaw::PlainStartInitializes && d.raft_data && !d.initialized => {
                Plan::Found
            }
            p => p.ok()?,
        };
        let joining = JoinRecord {
            ring_id: R,
            node_id: id,
            stage: Stage::Joining {
                leader: String::new(),
            },
        };
        let mut n = s.clone();
        let (d, proc) = (&mut n.disks[ix(id)], &mut n.procs[ix(id)]);
        match p {
            Plan::Found => {
                d.initialized = true;
                d.raft_data = true;
                d.log = d.log.max(1);
                n.extra_rings += 1;
                *proc = Proc::Serving;
            }
            Plan::Member { .. } | Plan::Legacy if d.initialized => *proc = Proc::Serving,
            Plan::Join => {
                d.record = Some(joining);
                d.raft_data = true;
                *proc = Proc::Joining {
                    prior: None,
                    admitted: false,
                };
            }
            Plan::ResumeJoin { ring_id } if ring_id == R => {
                d.record = Some(joining);
                *proc = Proc::Joining {
                    prior: Some(ring_id),
                    admitted: false,
                };
            }
            _ => return None,
        }
        Some(n)
    }
}

impl Model for JoinModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            disks: Default::default(),
            procs: [Proc::Down; 2],
            members: BTreeMap::from([(1, (true, Some(1)))]),
            leader_log: 1,
            extra_rings: 0,
            reverted: false,
        }]
    }

    fn actions(&self, _: &State, actions: &mut Vec<Action>) {
        actions.push(Action::Write);
        for id in [2, 3] {
            actions.extend([
                Action::Start(id, Flag::Plain),
                Action::Start(id, Flag::Bootstrap),
                Action::Check(id),
                Action::Add(id),
                Action::Promote(id),
                Action::Joined(id),
                Action::Replicate(id),
                Action::Crash(id),
                Action::Wipe(id),
                Action::Remove(id),
            ]);
        }
    }

    fn next_state(&self, s: &State, a: Action) -> Option<State> {
        let mut n = s.clone();
        match a {
            Action::Start(id, flag) if s.procs[ix(id)] == Proc::Down => {
                let mode = match flag {
                    Flag::Plain => StartMode::Plain,
                    Flag::Bootstrap => StartMode::Bootstrap,
                };
                return self.start(s, id, mode);
            }
            Action::Check(id) => {
                let Proc::Joining {
                    prior,
                    admitted: false,
                } = s.procs[ix(id)]
                else {
                    return None;
                };
                n.procs[ix(id)] = match self.admit(s, id, prior) {
                    Ok(_) => Proc::Joining {
                        prior,
                        admitted: true,
                    },
                    Err(()) => Proc::Down,
                };
            }
            Action::Add(id) => {
                let Proc::Joining { admitted: true, .. } = s.procs[ix(id)] else {
                    return None;
                };
                match self.admit(s, id, Some(R)) {
                    Ok(Admission::AddLearner) => {
                        n.members.insert(id, (false, None));
                    }
                    Ok(_) => return None,
                    Err(()) => n.procs[ix(id)] = Proc::Down,
                }
            }
            Action::Promote(id) => {
                let Proc::Joining { admitted: true, .. } = s.procs[ix(id)] else {
                    return None;
                };
                let (false, matched) = *s.members.get(&id)? else {
                    return None;
                };
                if !caught_up(matched, Some(s.leader_log), 0) {
                    return None;
                }
                n.members.insert(id, (true, matched));
            }
            Action::Joined(id) => {
                let Proc::Joining { admitted: true, .. } = s.procs[ix(id)] else {
                    return None;
                };
                let (true, _) = *s.members.get(&id)? else {
                    return None;
                };
                n.disks[ix(id)].record = Some(JoinRecord {
                    ring_id: R,
                    node_id: id,
                    stage: Stage::Member {
                        origin: Origin::Join,
                    },
                });
                n.procs[ix(id)] = Proc::Serving;
            }
            Action::Replicate(id) => {
                let (voter, matched) = *s.members.get(&id)?;
                let d = &mut n.disks[ix(id)];
                if !self.serves_ring(s, id)
                    || (matched == Some(s.leader_log) && d.log == s.leader_log)
                {
                    return None;
                }
                if matched.is_some_and(|m| d.log < m) {
                    n.reverted = true;
                }
                d.log = s.leader_log;
                d.initialized = true;
                n.members.insert(id, (voter, Some(s.leader_log)));
            }
            Action::Write if s.leader_log < MAX_LOG => {
                n.leader_log += 1;
                n.members.insert(1, (true, Some(n.leader_log)));
            }
            Action::Crash(id) if s.procs[ix(id)] != Proc::Down => n.procs[ix(id)] = Proc::Down,
            Action::Wipe(id)
                if s.procs[ix(id)] == Proc::Down && s.disks[ix(id)] != Disk::default() =>
            {
                n.disks[ix(id)] = Disk::default();
            }
            Action::Remove(id) => {
                n.members.remove(&id)?;
            }
            _ => return None,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_RING, |_, s: &State| s.extra_rings == 0),
            Property::always(NO_REVERSION, |_, s: &State| !s.reverted),
            Property::always(NO_EMPTY_VOTER, |m, s: &State| {
                [2, 3].into_iter().all(|id| {
                    !(m.serves_ring(s, id) && s.members.get(&id).is_some_and(|(v, _)| *v))
                        || s.disks[ix(id)].log > 0
                })
            }),
            Property::sometimes(THREE_VOTERS, |_, s: &State| {
                s.members.values().filter(|(v, _)| *v).count() == 3 && s.leader_log == MAX_LOG
            }),
        ]
    }
}

pub const ONE_RING: &str = "at most one ring per cluster";
pub const NO_REVERSION: &str = "the leader never finds a member's log reverted";
pub const NO_EMPTY_VOTER: &str =
    "no voter answers the ring with an empty log (it could elect a leader without committed entries)";
pub const THREE_VOTERS: &str = "a ring of three voters holding every write";

/// What one exhaustive run found.
#[derive(Debug)]
pub struct Outcome {
    pub unique_states: usize,
    pub discovered: Vec<&'static str>,
    pub counterexample: Option<Path<State, Action>>,
}

/// Explores breadth-first to `depth`; stops at the first counterexample.
pub fn check(model: JoinModel, depth: usize) -> Outcome {
    let checker = model
        .checker()
        .target_max_depth(depth)
        .finish_when(HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    let mut discovered: Vec<_> = checker.discoveries().keys().copied().collect();
    discovered.sort_unstable();
    let counterexample = [ONE_RING, NO_REVERSION, NO_EMPTY_VOTER]
        .into_iter()
        .find_map(|p| checker.discovery(p));
    Outcome {
        unique_states: checker.unique_state_count(),
        discovered,
        counterexample,
    }
}
