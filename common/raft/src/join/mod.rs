//! Ring identity and join states, one implementation for every ring (OM, SCM).
//!
//! Each data dir carries a [`record::JoinRecord`]: the ring id `--init` stamped (random,
//! 128 bits) and how far this node got into that ring (founding, joining, member). Every
//! start decides from it ([`decide::plan`]): only `--init` on an empty dir creates a ring; a
//! plain start never initialises openraft; a half-joined node resumes with `--bootstrap`
//! or refuses with the way out. Leaders add joiners as learners and promote them once
//! caught up ([`RaftGroup::admit_member`](crate::RaftGroup::admit_member)), and refuse a
//! member id that comes back with empty data ([`decide::admit`]). See docs/raft.md "Join
//! states".

pub mod decide;
pub mod flow;
mod leader;
pub mod record;
pub mod slot;

pub use decide::{Admission, Joiner, Plan, Refusal, StartMode};
pub use flow::{finish, prepare, Finished, JoinAsk, JoinHooks, JoinPolicy, Prepared};
pub use leader::CATCH_UP_LAG;
pub use record::{JoinRecord, RingId};
pub use slot::RingSlot;
