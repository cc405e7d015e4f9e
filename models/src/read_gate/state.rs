//! The model's state: three members, their inboxes and the history the invariant needs.

use super::timing::Tick;

/// Members of the ring.
pub const MEMBERS: usize = 3;
/// Acknowledgements a decision needs: the leader and one follower.
pub const QUORUM: usize = MEMBERS / 2 + 1;

pub type Id = usize;
pub type Term = u8;
/// Writes are numbered in the order leaders accept them, from 0.
pub type WriteId = u8;

/// A log entry: a new leader's blank entry (`write: None`) or a write.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub struct Entry {
    pub term: Term,
    pub write: Option<WriteId>,
}

/// An append (or heartbeat) in flight: the sender's whole log and commit index.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct Append {
    pub from: Id,
    pub term: Term,
    pub log: Vec<Entry>,
    pub commit: usize,
    /// When it was sent; the leader reads the age of that on its own clock once the answer
    /// is back (acknowledgements are timed from the send).
    pub sent: Tick,
}

/// A follower's record of the last append it accepted (`rozone_raft::ContactRecord`).
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub struct Contact {
    pub at: Tick,
    pub leader: Id,
    pub term: Term,
    /// The leader's commit as (term of that entry, index), as sent.
    pub leader_commit: Option<(Term, usize)>,
}

/// What a leader keeps in memory about its followers.
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct Leading {
    /// Per member: how much of the leader's log it acknowledged.
    pub matched: [usize; MEMBERS],
    /// Per member: the send tick of the newest append it acknowledged to *this process*.
    pub ack_sent: [Option<Tick>; MEMBERS],
    /// Set by a leader transfer: the term the target stands in.
    pub transfer_term: Option<Term>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub enum Role {
    Follower,
    Candidate {
        votes: [bool; MEMBERS],
        /// Standing because the leader handed over: voters skip their vote lease and grace.
        transfer: bool,
    },
    Leader(Leading),
}

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct Member {
    // Durable: survives a restart.
    pub term: Term,
    pub voted_for: Option<Id>,
    /// Its vote for itself in `term` is committed (it won): openraft restarts it as leader.
    pub won: bool,
    pub log: Vec<Entry>,
    /// Length of the committed (and applied) prefix of `log`.
    pub commit: usize,
    /// Milliseconds its clock advances per tick (the machine's; kept across a restart).
    pub rate: u64,

    // Process memory: lost on a restart.
    pub role: Role,
    pub known_leader: Option<Id>,
    pub contact: Option<Contact>,
    /// When its election timer last restarted.
    pub timer: Option<Tick>,
    /// When it last accepted an append: its vote lease runs from here.
    pub last_append: Option<Tick>,
    /// When this process started (`None`: long ago); its vote grace runs from here.
    pub started: Option<Tick>,

    /// The append in flight to this member, if any.
    pub inbox: Option<Append>,
}

impl Member {
    /// (term of the last entry, length): what "at least as up to date" compares.
    pub fn last_log_id(&self) -> (Term, usize) {
        (self.log.last().map_or(0, |e| e.term), self.log.len())
    }

    /// The writes in its applied state.
    pub fn applied_writes(&self) -> impl Iterator<Item = WriteId> + '_ {
        self.log[..self.commit].iter().filter_map(|e| e.write)
    }

    pub fn leading(&self) -> Option<&Leading> {
        match &self.role {
            Role::Leader(l) => Some(l),
            _ => None,
        }
    }

    /// Learns of a higher term: it follows nobody yet and has not voted in it.
    pub fn adopt_term(&mut self, term: Term) {
        self.term = term;
        self.voted_for = None;
        self.won = false;
        self.role = Role::Follower;
        self.known_leader = None;
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct State {
    pub now: Tick,
    pub members: [Member; MEMBERS],
    /// The id the next write gets.
    pub next_write: WriteId,
    /// Per write id: the tick a leader's commit first covered it.
    pub acked: Vec<Option<Tick>>,
    pub restarts: u8,
    pub transfers: u8,
}

impl State {
    /// A settled ring at tick 1: member 0 leads term 1 and every member has applied its
    /// blank entry; member 2 acknowledged the heartbeat sent just now, member 1 missed it and
    /// last heard from the leader a tick ago (so its election timer runs out first).
    /// `rates` are the members' clock rates.
    pub fn settled(rates: [u64; MEMBERS]) -> Self {
        let log = vec![Entry {
            term: 1,
            write: None,
        }];
        // When each member last heard from the leader (the leader: its own last send).
        let heard = |id: usize| if id == 1 { 0 } else { 1 };
        let members = std::array::from_fn(|id| {
            let leader = id == 0;
            Member {
                term: 1,
                voted_for: Some(0),
                won: leader,
                log: log.clone(),
                commit: 1,
                rate: rates[id],
                role: if leader {
                    Role::Leader(Leading {
                        matched: [1; MEMBERS],
                        ack_sent: std::array::from_fn(|f| (f != 0).then_some(heard(f))),
                        transfer_term: None,
                    })
                } else {
                    Role::Follower
                },
                known_leader: Some(0),
                contact: (!leader).then_some(Contact {
                    at: heard(id),
                    leader: 0,
                    term: 1,
                    leader_commit: Some((1, 1)),
                }),
                timer: Some(heard(id)),
                last_append: (!leader).then_some(heard(id)),
                started: None,
                inbox: None,
            }
        });
        Self {
            now: 1,
            members,
            next_write: 0,
            acked: Vec::new(),
            restarts: 0,
            transfers: 0,
        }
    }

    /// Records that `writes` are committed now (the first commit counts).
    pub fn ack(&mut self, writes: impl IntoIterator<Item = WriteId>) {
        for w in writes {
            let w = usize::from(w);
            if self.acked.len() <= w {
                self.acked.resize(w + 1, None);
            }
            self.acked[w].get_or_insert(self.now);
        }
    }
}
