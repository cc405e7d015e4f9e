//! The join protocol's decisions as pure functions, shared by the daemons (through
//! [`super::flow`] and [`super::leader`]) and the `models/` crate: what a start does from
//! its flags and its join-state record, and whether a leader admits a joining node.

use super::record::{JoinRecord, Origin, RingId, Stage};
use crate::types::NodeId;

/// The startup flag a daemon was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMode {
    Plain,
    /// `--init`: create a ring (only on an empty dir), or restart the one this dir created.
    Init,
    /// `--bootstrap`: join a running ring, or resume a recorded join, or restart a member.
    Bootstrap,
}

impl StartMode {
    /// From a daemon's `--init` / `--bootstrap` flags (`--init` wins; clap forbids both).
    pub fn from_flags(init: bool, bootstrap: bool) -> Self {
        match (init, bootstrap) {
            (true, _) => Self::Init,
            (false, true) => Self::Bootstrap,
            (false, false) => Self::Plain,
        }
    }
}

/// What a start does, decided before Raft opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Stamp a new ring id (record "founding"), start Raft, initialise a one-member ring.
    Found,
    /// A founding record: `--init` finishes the initialisation; any other start runs only
    /// if openraft shows the ring initialised (a plain start never initialises).
    Founding {
        ring_id: RingId,
        may_initialize: bool,
    },
    /// A member: start Raft and serve.
    Member { ring_id: RingId },
    /// Join a ring this dir has never been part of.
    Join,
    /// Resume the recorded join of ring `ring_id`.
    ResumeJoin { ring_id: RingId },
    /// Raft data without a record (an older version): a member if openraft shows the ring
    /// initialised, else refused.
    Legacy,
}

/// Decides a start. `Err` is the refusal to show the operator, naming the way out.
pub fn plan(
    mode: StartMode,
    node_id: NodeId,
    record: Option<&JoinRecord>,
    raft_data: bool,
    service: &str,
) -> Result<Plan, String> {
    let Some(r) = record else {
        return match (mode, raft_data) {
            (_, true) => Ok(Plan::Legacy),
            (StartMode::Init, false) => Ok(Plan::Found),
            (StartMode::Bootstrap, false) => Ok(Plan::Join),
            (StartMode::Plain, false) => Err(format!(
                "no {service} ring in this data dir: start the first {service} with --init, or \
                 join a ring with --bootstrap"
            )),
        };
    };
    if r.node_id != node_id {
        return Err(format!(
            "this data dir belongs to {service} {} of ring {}, but node.id is {node_id}: use \
             the right data dir or node.id",
            r.node_id, r.ring_id
        ));
    }
    let ring_id = r.ring_id;
    match (&r.stage, mode) {
        (Stage::Founding, m) => Ok(Plan::Founding {
            ring_id,
            may_initialize: m == StartMode::Init,
        }),
        (Stage::Joining { .. }, StartMode::Bootstrap) => Ok(Plan::ResumeJoin { ring_id }),
        (Stage::Joining { leader }, StartMode::Init) => Err(format!(
            "--init refused: this data dir started joining ring {ring_id} (via the leader at \
             {leader}); only an empty data dir can create a ring. Finish the join with \
             --bootstrap, or wipe the data dir first"
        )),
        (Stage::Joining { leader }, StartMode::Plain) => Err(format!(
            "this {service} started joining ring {ring_id} (via the leader at {leader}) but is \
             not a member yet, so it will not start on its own: start it again with \
             --bootstrap to finish the join, or wipe the data dir and --bootstrap afresh \
             (if the ring lists it, `rozone admin {} remove {node_id}` first)",
            service.to_lowercase()
        )),
        (
            Stage::Member {
                origin: Origin::Join,
            },
            StartMode::Init,
        ) => Err(format!(
            "--init refused: this data dir joined ring {ring_id} with --bootstrap; it is a \
             member of that ring, so start it without --init"
        )),
        (Stage::Member { .. }, _) => Ok(Plan::Member { ring_id }),
    }
}

/// What a joining node tells the leader about its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joiner {
    pub id: NodeId,
    pub peer_addr: String,
    /// The ring its data belonged to before this start (`None`: never part of a ring, or
    /// wiped).
    pub ring_id: Option<RingId>,
    /// The index of its last log entry (snapshot included); `None`: empty.
    pub last_log_index: Option<u64>,
}

impl Joiner {
    /// From `AddMember`'s fields; a malformed ring id is refused (invalid argument).
    pub fn from_wire(
        id: NodeId,
        peer_addr: &str,
        ring_id: &str,
        last_log_index: Option<u64>,
    ) -> Result<Self, String> {
        if id == 0 || peer_addr.is_empty() {
            return Err("AddMember needs id (> 0) and peer_addr".into());
        }
        Ok(Self {
            id,
            peer_addr: peer_addr.to_string(),
            ring_id: RingId::parse_opt(ring_id)?,
            last_log_index,
        })
    }
}

/// The leader's view of that node id in its membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Present {
    pub peer_addr: String,
    pub voter: bool,
    /// The last index the leader knows replicated to it.
    pub matched: Option<u64>,
}

/// What the leader does with a joining node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Not a member: add as learner, wait until caught up, promote.
    AddLearner,
    /// Already a learner with its data intact: wait until caught up, promote.
    ResumeLearner,
    /// Already a voter with its data intact: nothing to do (a repeated AddMember).
    AlreadyVoter,
}

/// Why a leader refuses a joining node (never retryable: the node must change first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The node holds data of another ring.
    OtherRing(String),
    /// The id is a member at another address.
    OtherAddress(String),
    /// The id is a member but the node's data is empty or behind what it acknowledged:
    /// a wiped member, which must be removed before it joins again.
    WipedMember(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OtherRing(m) | Self::OtherAddress(m) | Self::WipedMember(m) => f.write_str(m),
        }
    }
}

/// The leader's decision on a joining node. `present` is the node id in the membership.
pub fn admit(
    service: &str,
    ring_id: RingId,
    j: &Joiner,
    present: Option<&Present>,
) -> Result<Admission, Refusal> {
    if let Some(theirs) = j.ring_id.filter(|r| *r != ring_id) {
        return Err(Refusal::OtherRing(format!(
            "{service} {} holds data of ring {theirs}, not of this ring {ring_id}: wipe its \
             data dir before it joins",
            j.id
        )));
    }
    let Some(p) = present else {
        return Ok(Admission::AddLearner);
    };
    if p.peer_addr != j.peer_addr {
        return Err(Refusal::OtherAddress(format!(
            "{service} {} is already a member at {}",
            j.id, p.peer_addr
        )));
    }
    // A member that comes back without the ring's id, empty while a voter, or with less log
    // than it acknowledged lost its data: replicating to it would make the leader's log
    // "revert", and as a voter it could elect a leader without committed entries.
    let behind = match (j.last_log_index, p.matched) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(l), Some(m)) => l < m,
    };
    if j.ring_id.is_none() || behind || (p.voter && j.last_log_index.is_none()) {
        return Err(Refusal::WipedMember(format!(
            "member {} is in the ring; remove it first (`rozone admin {} remove {}`) then \
             bootstrap again",
            j.id,
            service.to_lowercase(),
            j.id
        )));
    }
    Ok(if p.voter {
        Admission::AlreadyVoter
    } else {
        Admission::ResumeLearner
    })
}

/// Whether a learner has caught up enough to be promoted: it matched the leader's log up to
/// `lag` entries (the promotion itself commits only once it acknowledges that entry).
pub fn caught_up(matched: Option<u64>, leader_last: Option<u64>, lag: u64) -> bool {
    match (matched, leader_last) {
        (Some(m), Some(l)) => l.saturating_sub(m) <= lag,
        (_, None) => true,
        (None, Some(_)) => false,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
