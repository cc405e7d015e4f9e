//! rozone-models: model checks of rozone's protocol cores (issue 12, item 8), with
//! [`stateright`].
//!
//! A model here is a small state machine of a few members, explored exhaustively to a bounded
//! depth. Where the protocol has a decision function in a production crate, the model calls
//! *that* function with the model's values, so the checker checks the code, not a copy.
//!
//! - [`read_gate`]: the leader lease and the follower lease (`rozone_raft::gate`) against
//!   elections, pauses, restarts and drifting clocks, with the invariant "no read returns a
//!   state older than an acknowledged write".
//! - [`join`]: the join protocol (`rozone_raft::join::decide`) against crashes at every
//!   step, wipes and removals, with "at most one ring per cluster" and "no member's log
//!   reverts".
//!
//! Depends on `rozone-raft` for the decision functions only; nothing here runs at daemon
//! time.

pub mod join;
pub mod read_gate;
