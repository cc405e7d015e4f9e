//! The stateright [`Model`]: the steps a state enables, the properties, and [`check`].

use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model, Path, Property};

use super::config::ReadGate;
use super::raft;
use super::reads::{self, serves_as_follower, serves_as_leader};
use super::state::{Id, State, MEMBERS};
use super::timing::CLOCK_RATES;

/// How deep the checker explores: the states reached by every sequence of up to
/// `CHECK_DEPTH - 1` steps from every initial state (stateright counts an initial state as
/// depth 1). Every counterexample of the broken gates below is at most 8 steps long, so the
/// bound leaves room. Each step more multiplies the states and the time by about 2.6:
/// measured on 2 cores at load average 8, one checker thread, depth 10 is 0.68 M states in
/// 7 s (the whole `cargo nextest run -p rozone-models` 11 s), depth 11 is 1.8 M in 20 s.
pub const CHECK_DEPTH: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    Write(Id),
    Send(Id),
    Deliver(Id),
    Timeout(Id),
    Vote { candidate: Id, voter: Id },
    Transfer { from: Id, to: Id },
    Restart(Id),
}

/// Property names (also what [`Outcome`] reports).
pub const NO_STALE_READ: &str = "no read returns a state older than an acknowledged write";
pub const ONE_LEADER_PER_TERM: &str = "at most one leader per term";
pub const WRITE_ACKED: &str = "a write is acknowledged";
pub const NEW_LEADER_SERVES: &str = "a later leader serves a read after an acknowledged write";
pub const FOLLOWER_SERVES_WRITE: &str = "a follower serves a lease read that has a write";

impl Model for ReadGate {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut states = Vec::new();
        for a in CLOCK_RATES {
            for b in CLOCK_RATES {
                for c in CLOCK_RATES {
                    states.push(State::settled([a, b, c]));
                }
            }
        }
        states
    }

    fn actions(&self, _: &State, actions: &mut Vec<Action>) {
        actions.push(Action::Tick);
        for id in 0..MEMBERS {
            actions.extend([
                Action::Write(id),
                Action::Send(id),
                Action::Deliver(id),
                Action::Timeout(id),
                Action::Restart(id),
            ]);
            for other in (0..MEMBERS).filter(|&o| o != id) {
                actions.push(Action::Vote {
                    candidate: id,
                    voter: other,
                });
                actions.push(Action::Transfer {
                    from: id,
                    to: other,
                });
            }
        }
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        match action {
            Action::Tick => raft::tick(self, s),
            Action::Write(l) => raft::write(self, s, l),
            Action::Send(l) => raft::send(s, l),
            Action::Deliver(to) => raft::deliver(s, to),
            Action::Timeout(c) => raft::timeout(self, s, c),
            Action::Vote { candidate, voter } => raft::vote(self, s, candidate, voter),
            Action::Transfer { from, to } => raft::transfer(self, s, from, to),
            Action::Restart(r) => raft::restart(self, s, r),
        }
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NO_STALE_READ, |m, s| reads::stale_read(m, s).is_none()),
            Property::always(ONE_LEADER_PER_TERM, |_, s: &State| {
                s.members.iter().enumerate().all(|(i, a)| {
                    s.members[i + 1..]
                        .iter()
                        .all(|b| !(a.won && b.won && a.term == b.term))
                })
            }),
            Property::sometimes(WRITE_ACKED, |_, s: &State| {
                s.acked.iter().any(Option::is_some)
            }),
            Property::sometimes(NEW_LEADER_SERVES, |m, s: &State| {
                s.acked.iter().any(Option::is_some)
                    && (0..MEMBERS).any(|id| s.members[id].term > 1 && serves_as_leader(m, s, id))
            }),
            Property::sometimes(FOLLOWER_SERVES_WRITE, |m, s: &State| {
                (0..MEMBERS).any(|id| {
                    s.members[id].applied_writes().next().is_some() && serves_as_follower(m, s, id)
                })
            }),
        ]
    }
}

/// What one exhaustive run found.
#[derive(Debug)]
pub struct Outcome {
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// The stale read's path, if one was found.
    pub stale_read: Option<Path<State, Action>>,
    /// Names of the properties with a discovery (a counterexample for "always", an example
    /// for "sometimes").
    pub discovered: Vec<&'static str>,
}

/// The depth to check: `ROZONE_MODEL_DEPTH` if set (to explore deeper by hand), else
/// [`CHECK_DEPTH`].
pub fn check_depth() -> usize {
    std::env::var("ROZONE_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(CHECK_DEPTH)
}

/// Checker threads: `ROZONE_MODEL_THREADS`, else 1. With more threads stateright's
/// breadth-first search is not strictly level by level, so a state first reached at the
/// depth bound (and not expanded) can hide a shorter path to it: the bounded check may then
/// miss a few states within the bound (measured: ~0.03% at depth 10).
fn threads() -> usize {
    std::env::var("ROZONE_MODEL_THREADS")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(1)
}

/// Explores `model` breadth-first to `depth` steps on every core; stops at the first
/// counterexample (breadth-first: a shortest one).
pub fn check(model: ReadGate, depth: usize) -> Outcome {
    let start = Instant::now();
    let checker = model
        .checker()
        .threads(threads())
        .target_max_depth(depth)
        .finish_when(HasDiscoveries::AnyFailures)
        .spawn_bfs()
        .join();
    let mut discovered: Vec<_> = checker.discoveries().keys().copied().collect();
    discovered.sort_unstable();
    Outcome {
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed: start.elapsed(),
        stale_read: checker.discovery(NO_STALE_READ),
        discovered,
    }
}
