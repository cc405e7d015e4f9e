//! The persistent form of what openraft hands the storage layer — log entries, the vote,
//! log ids, memberships — as rozone's own types in the versioned [`crate::envelope`].
//!
//! openraft's serde layout is not ours to keep stable (an upgrade of the pinned version may
//! change it), so nothing of openraft is written to disk as is: each value is converted to
//! a `*V1` type here, whose shape follows the envelope's append-only rules. The application
//! bytes of a normal entry are the daemon's own sealed request and are kept opaque.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use openraft::entry::RaftEntry;
use openraft::EntryPayload;
use serde::{Deserialize, Serialize};

use crate::envelope::{open, seal};
use crate::types::{
    log_id, AppRequest, Entry, LogId, Membership, NodeInfo, StoredMembership, Vote,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct LogIdV1 {
    term: u64,
    node: u64,
    index: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct NodeV1 {
    peer_addr: String,
    client_addr: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct MembershipV1 {
    /// One set of voters, or two during a joint change.
    configs: Vec<BTreeSet<u64>>,
    /// Voters and learners.
    nodes: BTreeMap<u64, NodeV1>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
enum PayloadV1 {
    Blank,
    /// The daemon's sealed request.
    Normal(Vec<u8>),
    Membership(MembershipV1),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EntryV1 {
    log_id: LogIdV1,
    payload: PayloadV1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct VoteV1 {
    term: u64,
    node: u64,
    committed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StoredMembershipV1 {
    log_id: Option<LogIdV1>,
    membership: MembershipV1,
}

fn invalid(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {e}"))
}

impl From<&LogId> for LogIdV1 {
    fn from(l: &LogId) -> Self {
        let leader = l.committed_leader_id();
        Self {
            term: leader.term,
            node: leader.node_id,
            index: l.index(),
        }
    }
}

impl From<LogIdV1> for LogId {
    fn from(l: LogIdV1) -> Self {
        log_id(l.term, l.node, l.index)
    }
}

impl From<&Membership> for MembershipV1 {
    fn from(m: &Membership) -> Self {
        Self {
            configs: m.get_joint_config().clone(),
            nodes: m
                .nodes()
                .map(|(id, n)| {
                    let node = NodeV1 {
                        peer_addr: n.peer_addr.clone(),
                        client_addr: n.client_addr.clone(),
                    };
                    (*id, node)
                })
                .collect(),
        }
    }
}

impl MembershipV1 {
    fn into_membership(self, what: &str) -> io::Result<Membership> {
        let nodes = self
            .nodes
            .into_iter()
            .map(|(id, n)| (id, NodeInfo::new(n.peer_addr, n.client_addr)));
        Membership::new(self.configs, nodes.collect::<BTreeMap<_, _>>())
            .map_err(|e| invalid(what, e))
    }
}

/// A log entry as the log store keeps it.
pub fn encode_entry(e: &Entry) -> io::Result<Vec<u8>> {
    let payload = match &e.payload {
        EntryPayload::Blank => PayloadV1::Blank,
        EntryPayload::Normal(r) => PayloadV1::Normal(r.0.clone()),
        EntryPayload::Membership(m) => PayloadV1::Membership(m.into()),
    };
    seal(&EntryV1 {
        log_id: (&e.log_id()).into(),
        payload,
    })
}

pub fn decode_entry(b: &[u8]) -> io::Result<Entry> {
    const WHAT: &str = "log entry";
    let e: EntryV1 = open(b, WHAT)?;
    let payload = match e.payload {
        PayloadV1::Blank => EntryPayload::Blank,
        PayloadV1::Normal(r) => EntryPayload::Normal(AppRequest(r)),
        PayloadV1::Membership(m) => EntryPayload::Membership(m.into_membership(WHAT)?),
    };
    Ok(Entry::new(e.log_id.into(), payload))
}

pub fn encode_log_id(l: &Option<LogId>) -> io::Result<Vec<u8>> {
    seal(&l.as_ref().map(LogIdV1::from))
}

pub fn decode_log_id(b: &[u8]) -> io::Result<Option<LogId>> {
    Ok(open::<Option<LogIdV1>>(b, "log id")?.map(LogId::from))
}

pub fn encode_vote(v: &Vote) -> io::Result<Vec<u8>> {
    let leader = v.leader_id();
    seal(&VoteV1 {
        term: leader.term,
        node: leader.node_id,
        committed: v.is_committed(),
    })
}

pub fn decode_vote(b: &[u8]) -> io::Result<Vote> {
    let v: VoteV1 = open(b, "vote")?;
    Ok(if v.committed {
        Vote::new_committed(v.term, v.node)
    } else {
        Vote::new(v.term, v.node)
    })
}

pub fn encode_membership(m: &StoredMembership) -> io::Result<Vec<u8>> {
    seal(&StoredMembershipV1 {
        log_id: m.log_id().as_ref().map(LogIdV1::from),
        membership: m.membership().into(),
    })
}

pub fn decode_membership(b: &[u8]) -> io::Result<StoredMembership> {
    const WHAT: &str = "membership";
    let m: StoredMembershipV1 = open(b, WHAT)?;
    Ok(StoredMembership::new(
        m.log_id.map(LogId::from),
        m.membership.into_membership(WHAT)?,
    ))
}

#[cfg(test)]
mod tests;
