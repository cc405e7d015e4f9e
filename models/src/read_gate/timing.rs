//! Time in the read-gate model.
//!
//! One global clock of discrete ticks orders every step; it stands for real time and no member
//! reads it. Each member has its own monotonic clock that advances `rate` milliseconds per
//! tick, fixed per member (the hardware's, kept across a restart): every duration a member
//! measures — an acknowledgement's age, its election timer, its vote lease, its restart
//! grace — is `(now − then) × rate` on *its* clock. The initial states try every combination
//! of [`CLOCK_RATES`], so a leader whose clock runs slow meets a follower whose clock runs
//! fast.
//!
//! Timestamps are `Option<Tick>`: `None` is "long ago", further back than any timeout.

use std::time::Duration;

use rozone_raft::gate;

/// A point on the global clock.
pub type Tick = u8;

/// Milliseconds a member's clock advances per tick: 10% slow and 10% fast. Their ratio (1.22)
/// is inside the drift margin the leader lease leaves (3/4 of the election timeout: a ratio up
/// to 4/3), and wide enough that a lease *without* that margin is caught
/// ([`crate::read_gate::Flaw::NoLeaseMargin`]).
pub const CLOCK_RATES: [u64; 2] = [9, 11];

/// The Raft timing the model runs with, in milliseconds of a member's clock: a few ticks each,
/// so that every timeout can expire within the checked depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// A follower stands for election no sooner than this after its timer last restarted,
    /// and a restarted member withholds its vote for this long (`vote_grace`).
    pub election_timeout_min: Duration,
    /// A voter that accepted an append refuses other candidates for this long (openraft's
    /// vote lease).
    pub election_timeout_max: Duration,
    /// How long a quorum acknowledgement lets a leader serve reads.
    pub leader_lease: Duration,
    /// A follower's LOCAL_LEASE bound on the age of its last append.
    pub follower_lease: Duration,
    /// An append is delivered within this many ticks of its send, or lost.
    pub max_delay: Tick,
}

impl Timing {
    /// Election timeouts of about 2 ticks; the leader lease is the production
    /// [`gate::leader_lease`] of the minimum (15 ms: under 2 ticks on any clock).
    pub fn standard() -> Self {
        let election_timeout_min = Duration::from_millis(20);
        Self {
            election_timeout_min,
            // Just above the minimum, so a voter's lease runs out within 2 ticks on a fast
            // clock and every path stays short; the safety argument needs only the minimum.
            election_timeout_max: Duration::from_millis(21),
            leader_lease: gate::leader_lease(election_timeout_min),
            follower_lease: election_timeout_min,
            max_delay: 1,
        }
    }
}

/// How long `since` is ago at `now` on a clock of `rate` ms per tick; `None` if `since` is
/// long ago.
pub fn age(now: Tick, since: Option<Tick>, rate: u64) -> Option<Duration> {
    since.map(|t| Duration::from_millis(u64::from(now.saturating_sub(t)) * rate))
}

/// Whether at least `d` has passed since `since` on that clock (always, if long ago).
pub fn passed(now: Tick, since: Option<Tick>, rate: u64, d: Duration) -> bool {
    age(now, since, rate).is_none_or(|a| a >= d)
}
