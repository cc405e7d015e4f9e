//! The Raft-ish steps. Each returns the next state, or `None` if the step is not enabled or
//! would change nothing.

use super::config::{Flaw, ReadGate};
use super::state::{Append, Contact, Entry, Id, Leading, Role, State, MEMBERS, QUORUM};
use super::timing::passed;

/// Time passes; appends older than the longest delay are lost.
pub fn tick(m: &ReadGate, s: &State) -> Option<State> {
    if s.now >= m.bounds.max_tick {
        return None;
    }
    let mut s = s.clone();
    s.now += 1;
    for mem in &mut s.members {
        if mem
            .inbox
            .as_ref()
            .is_some_and(|a| s.now - a.sent > m.timing.max_delay)
        {
            mem.inbox = None;
        }
    }
    Some(s)
}

/// A leader appends a write to its log (committed once a quorum has it).
pub fn write(m: &ReadGate, s: &State, l: Id) -> Option<State> {
    if s.members[l].leading().is_none() || s.next_write >= m.bounds.max_writes {
        return None;
    }
    let mut s = s.clone();
    let term = s.members[l].term;
    s.members[l].log.push(Entry {
        term,
        write: Some(s.next_write),
    });
    s.next_write += 1;
    Some(s)
}

/// A leader sends its log and commit index to every other member (an append or heartbeat).
pub fn send(s: &State, l: Id) -> Option<State> {
    s.members[l].leading()?;
    let mut s = s.clone();
    let a = Append {
        from: l,
        term: s.members[l].term,
        log: s.members[l].log.clone(),
        commit: s.members[l].commit,
        sent: s.now,
    };
    for (id, mem) in s.members.iter_mut().enumerate() {
        if id != l {
            mem.inbox = Some(a.clone());
        }
    }
    Some(s)
}

/// Member `to` handles the append in its inbox; its answer reaches the sender at once.
pub fn deliver(s: &State, to: Id) -> Option<State> {
    let mut s = s.clone();
    let a = s.members[to].inbox.take()?;
    let now = s.now;
    let f = &mut s.members[to];
    if a.term < f.term {
        // Refused; the answer carries the higher term and the sender steps down.
        let higher = f.term;
        let sender = &mut s.members[a.from];
        if sender.term < higher {
            sender.adopt_term(higher);
        }
        return Some(s);
    }
    if a.term > f.term {
        f.adopt_term(a.term);
    }
    // Accepting a leader's append commits the vote for it in this term.
    f.voted_for = Some(a.from);
    f.role = Role::Follower;
    f.known_leader = Some(a.from);
    // Keep the follower's log if the leader's is a prefix of it (nothing conflicts); else
    // take the leader's (a conflict truncates, the rest is appended).
    if !f.log.starts_with(&a.log) {
        f.log = a.log.clone();
    }
    f.commit = f.commit.max(a.commit);
    f.contact = Some(Contact {
        at: now,
        leader: a.from,
        term: a.term,
        leader_commit: a.commit.checked_sub(1).map(|i| (a.log[i].term, a.commit)),
    });
    f.timer = Some(now);
    f.last_append = Some(now);

    // The answer: the sender counts it only if it still leads the append's term.
    let sender = &mut s.members[a.from];
    if sender.term != a.term {
        return Some(s);
    }
    let Role::Leader(lead) = &mut sender.role else {
        return Some(s);
    };
    lead.matched[to] = lead.matched[to].max(a.log.len());
    lead.ack_sent[to] = lead.ack_sent[to].max(Some(a.sent));
    advance_commit(&mut s, a.from);
    Some(s)
}

/// A leader commits the longest prefix a quorum holds whose last entry is of its term.
fn advance_commit(s: &mut State, l: Id) {
    let mem = &s.members[l];
    let Some(lead) = mem.leading() else { return };
    let held = |idx: usize| {
        1 + lead
            .matched
            .iter()
            .enumerate()
            .filter(|&(id, &m)| id != l && m >= idx)
            .count()
    };
    let Some(idx) = (mem.commit + 1..=mem.log.len())
        .rev()
        .find(|&idx| mem.log[idx - 1].term == mem.term && held(idx) >= QUORUM)
    else {
        return;
    };
    let newly: Vec<_> = mem.log[mem.commit..idx]
        .iter()
        .filter_map(|e| e.write)
        .collect();
    s.members[l].commit = idx;
    s.ack(newly);
}

/// A follower or candidate whose election timer ran out stands for election.
pub fn timeout(m: &ReadGate, s: &State, c: Id) -> Option<State> {
    let mem = &s.members[c];
    // A restarted member that had won its term (its durable vote names itself) stands at once
    // (`restart::elect_promptly`); everyone else waits for the timer.
    let prompt = mem.won && mem.started.is_some() && mem.role == Role::Follower;
    if mem.leading().is_some()
        || !(prompt || passed(s.now, mem.timer, mem.rate, m.timing.election_timeout_min))
    {
        return None;
    }
    let mut s = s.clone();
    stand(&mut s, c, false);
    Some(s)
}

fn stand(s: &mut State, c: Id, transfer: bool) {
    let now = s.now;
    let mem = &mut s.members[c];
    mem.adopt_term(mem.term + 1);
    mem.voted_for = Some(c);
    mem.role = Role::Candidate {
        votes: std::array::from_fn(|id| id == c),
        transfer,
    };
    mem.timer = Some(now);
}

/// Candidate `c` asks `v` for its vote; the answer arrives at once.
pub fn vote(m: &ReadGate, s: &State, c: Id, v: Id) -> Option<State> {
    let Role::Candidate { votes, transfer } = &s.members[c].role else {
        return None;
    };
    let (transfer, term) = (*transfer, s.members[c].term);
    if c == v || votes[v] {
        return None;
    }
    let voter = &s.members[v];
    let (now, t) = (s.now, &m.timing);
    if voter.term > term {
        let mut s = s.clone();
        s.members[c].adopt_term(voter.term);
        return Some(s);
    }
    // A restarted process withholds its vote for a while (`RaftGroup::vote_grace`), and a
    // voter that accepted an append recently refuses (openraft's vote lease); a candidate the
    // leader handed over to is exempt from both.
    // A member that never stored a vote (term 0: it never acknowledged a leader) has none,
    // and the grace does not hold up the candidate its durable vote names (`votes_for`: the
    // only leader whose lease its acknowledgements may support).
    let in_grace = m.flaw != Flaw::NoVoteGrace
        && voter.term > 0
        && voter.started.is_some()
        && voter.voted_for != Some(c)
        && !passed(now, voter.started, voter.rate, t.election_timeout_min);
    let in_lease = !passed(now, voter.last_append, voter.rate, t.election_timeout_max);
    if !transfer && (in_grace || in_lease) {
        return None;
    }
    let mut next = s.clone();
    let up_to_date = next.members[c].last_log_id() >= next.members[v].last_log_id();
    let voter = &mut next.members[v];
    if term > voter.term {
        voter.adopt_term(term);
    }
    if up_to_date && voter.voted_for.is_none_or(|x| x == c) {
        voter.voted_for = Some(c);
        voter.timer = Some(now);
        let cand = &mut next.members[c];
        if let Role::Candidate { votes, .. } = &mut cand.role {
            votes[v] = true;
            if votes.iter().filter(|&&x| x).count() >= QUORUM {
                win(cand, c);
            }
        }
    }
    // A refusal changes state only if the voter adopted the candidate's term.
    (next != *s).then_some(next)
}

/// Candidate `c` won its term: it leads and appends its blank entry.
fn win(cand: &mut super::state::Member, c: Id) {
    cand.won = true;
    cand.known_leader = Some(c);
    cand.log.push(Entry {
        term: cand.term,
        write: None,
    });
    cand.role = Role::Leader(Leading {
        matched: [0; MEMBERS],
        ack_sent: [None; MEMBERS],
        transfer_term: None,
    });
}

/// The leader hands over to `t`, which stands at once; voters skip their leases for it.
pub fn transfer(m: &ReadGate, s: &State, l: Id, t: Id) -> Option<State> {
    let lead = s.members[l].leading()?;
    let target = &s.members[t];
    if l == t
        || s.transfers >= m.bounds.max_transfers
        || lead.transfer_term.is_some()
        || target.term != s.members[l].term
        || target.leading().is_some()
    {
        return None;
    }
    let mut s = s.clone();
    let term = s.members[l].term;
    if let Role::Leader(lead) = &mut s.members[l].role {
        lead.transfer_term = Some(term + 1);
    }
    s.transfers += 1;
    stand(&mut s, t, true);
    Some(s)
}

/// The process of `r` restarts: the durable state survives, memory is lost. openraft makes a
/// member that had won its term leader again at once, with no acknowledgement yet.
pub fn restart(m: &ReadGate, s: &State, r: Id) -> Option<State> {
    if s.restarts >= m.bounds.max_restarts {
        return None;
    }
    let mut s = s.clone();
    s.restarts += 1;
    let now = s.now;
    let mem = &mut s.members[r];
    let leads = m.leader_restore && mem.won && mem.voted_for == Some(r);
    mem.role = if leads {
        Role::Leader(Leading {
            matched: [0; MEMBERS],
            ack_sent: [None; MEMBERS],
            transfer_term: None,
        })
    } else {
        Role::Follower
    };
    mem.known_leader = leads.then_some(r);
    mem.contact = None;
    mem.timer = Some(now);
    mem.last_append = None;
    mem.started = Some(now);
    // What the old process sent dies with its connections.
    for other in &mut s.members {
        if other.inbox.as_ref().is_some_and(|a| a.from == r) {
            other.inbox = None;
        }
    }
    Some(s)
}
