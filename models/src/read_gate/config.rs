//! What one model run is checked with: the timing, the bounds on steps that would repeat
//! without end, and (for the negative tests) a deliberate flaw. Apart from the model and
//! its steps, which all read it.

use std::time::Duration;

use super::timing::{Tick, Timing};

/// A deliberate defect, to show the checker catches it; [`Flaw::None`] is the code as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flaw {
    None,
    /// The gate is fed `sole_voter: true`: any ready leader serves, quorum or not (the gate
    /// before issue 12).
    IgnoreQuorumLease,
    /// The gate is fed `transferring: false`: a leader that handed over keeps serving.
    IgnoreTransfer,
    /// A restarted member votes at once (no `vote_grace`): the vote lease it promised before
    /// the restart is forgotten.
    NoVoteGrace,
    /// The leader lease is the whole minimum election timeout: no margin for clock drift.
    NoLeaseMargin,
}

/// Limits on the steps that would otherwise repeat without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub max_tick: Tick,
    pub max_writes: u8,
    pub max_restarts: u8,
    pub max_transfers: u8,
}

/// The read-gate model: timing, bounds and (for the negative tests) a flaw.
#[derive(Debug, Clone)]
pub struct ReadGate {
    pub timing: Timing,
    pub bounds: Bounds,
    pub flaw: Flaw,
    /// openraft's `enable_leader_restore`: a member that had won its term is leader again at
    /// once after a restart. rozone runs with it off (this model found why); on only for the
    /// test that shows the defect it causes.
    pub leader_restore: bool,
}

impl ReadGate {
    pub fn new(flaw: Flaw) -> Self {
        Self {
            timing: Timing::standard(),
            bounds: Bounds {
                max_tick: 6,
                max_writes: 1,
                max_restarts: 1,
                max_transfers: 1,
            },
            flaw,
            leader_restore: false,
        }
    }

    /// The same model without leader transfers (see the known defect in docs/raft.md,
    /// "Model checking").
    pub fn without_transfers(mut self) -> Self {
        self.bounds.max_transfers = 0;
        self
    }

    /// The same model with openraft's `enable_leader_restore` on (openraft's default): a
    /// restarted leader comes back as leader of its old term.
    pub fn with_leader_restore(mut self) -> Self {
        self.leader_restore = true;
        self
    }

    /// The same model with time stopped at `tick` (the initial state is at tick 1): for
    /// counterexamples that need no time to pass, found in a fraction of the states.
    pub fn with_max_tick(mut self, tick: Tick) -> Self {
        self.bounds.max_tick = tick;
        self
    }

    /// The lease the gate is fed.
    pub fn leader_lease(&self) -> Duration {
        match self.flaw {
            Flaw::NoLeaseMargin => self.timing.election_timeout_min,
            _ => self.timing.leader_lease,
        }
    }
}
