//! A model of the read gate: may a member answer a read from its own state?
//!
//! **The abstraction.** Three members run a Raft-ish protocol over one register: terms,
//! roles, votes, a log of entries (blank entries a new leader appends, and writes), commit
//! indexes, and the state each member has applied (its committed prefix). Steps are atomic:
//! a leader sends its whole log to every follower ([`Action::Send`]), a follower takes the
//! append out of its inbox and its answer reaches the leader at once ([`Action::Deliver`]),
//! a candidate asks one voter ([`Action::Vote`]), a leader hands over
//! ([`Action::Transfer`]), a process restarts ([`Action::Restart`]), a leader appends a write
//! ([`Action::Write`]), and time passes ([`Action::Tick`]). Any member may take no step for
//! any number of ticks: that is a *pause* (SIGSTOP, a long GC, a cut network), and the
//! checker tries every such schedule. See [`timing`] for the clocks.
//!
//! **Reads** change no state, so they are not steps: in every state the checker asks every
//! member "would you serve a read now?" through the real `rozone_raft::gate::leader` (DEFAULT
//! and LOCAL_LEASE on a leader) and `rozone_raft::gate::local_lease` (LOCAL_LEASE on a
//! follower), fed with the model's values ([`reads`]), and checks what it would return:
//! - a leader's read sees every acknowledged write (linearizability for this register);
//! - a follower's lease read sees every write acknowledged before its lease and the longest
//!   message delay (LOCAL_LEASE promises bounded staleness, not linearizability).
//!
//! A write counts as acknowledged as soon as a leader's commit index covers it: stronger than
//! "the client was told", so a read that saw a write also binds later reads.
//!
//! **Not modelled:** more than three members and membership changes; pre-vote (it only
//! suppresses elections); snapshots and log compaction; LINEARIZABLE reads (read-index, no
//! lease); the follower's log limit (the model uses 0 entries); message reordering within one
//! leader's stream (an inbox holds one append, a newer send replaces it: that is a loss);
//! clock rates that change over time (each member's rate is fixed, chosen in the initial
//! state, which covers the extremes); a lost or torn disk write (the log, vote and commit
//! index are durable, as with fsync on).

pub mod config;
pub mod model;
pub mod raft;
pub mod reads;
pub mod state;
pub mod timing;

pub use config::{Bounds, Flaw, ReadGate};
pub use model::{check, Action, Outcome, CHECK_DEPTH};
pub use state::State;
