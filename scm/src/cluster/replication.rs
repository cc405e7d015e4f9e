//! The ReplicationManager's judgement of one container, as a pure function of the
//! container's record, its reported replicas, the commands already in flight and the
//! datanodes that could take a new copy.
//!
//! A replica is a *healthy copy* only when it is CLOSED (or QUASI_CLOSED for a QUASI_CLOSED
//! container), its BCSID is at least the container's, it is not empty while the container
//! holds data, and it holds the same content as the best copy: as many blocks as the
//! fullest finished replica at that BCSID and, where both report one of the same version,
//! the same content digest (the majority digest among the fullest). So an empty CLOSED
//! replica (Ozone's HDDS-17435: BCSID 0, no blocks, recreated by a replay) and a *short*
//! one (the full BCSID but fewer blocks: a pipeline member that caught up by snapshot and
//! was closed without the data) are never counted, never used as a source, are replaced by
//! re-replication and then deleted (or deleted first, when every datanode that could take
//! the new copy holds such a replica); a real replica is never deleted while it is the best
//! one. When the fullest replicas disagree on the digest with no majority, no copy can be
//! trusted: the container is MISSING (reported, nothing deleted, nothing copied).

use super::nodes::NodeHealth;
use super::replicas::{Digest, ReplicaState};
use crate::state::ContainerState;

/// What the judgement needs of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    pub id: u64,
    pub state: ContainerState,
    pub bcsid: u64,
    pub key_count: u64,
    pub used_bytes: u64,
    /// Replicas wanted.
    pub wanted: usize,
}

impl ContainerView {
    pub fn of(c: &crate::state::ContainerInfo) -> Self {
        Self {
            id: c.id,
            state: c.state,
            bcsid: c.bcsid,
            key_count: c.key_count,
            used_bytes: c.used_bytes,
            wanted: c.replication.replicas(),
        }
    }
}

/// What the judgement needs of a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    pub datanode: u64,
    pub state: ReplicaState,
    pub bcsid: u64,
    pub block_count: u64,
    /// `None` from a datanode that does not report digests.
    pub digest: Option<Digest>,
    pub node: NodeHealth,
}

/// Replication commands sent for this container and not finished yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InflightView {
    /// Targets of replicate commands.
    pub adds: Vec<u64>,
    /// Datanodes told to delete their replica.
    pub deletes: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    Healthy,
    UnderReplicated,
    OverReplicated,
    /// No healthy copy at all: nothing to replicate from.
    Missing,
    /// OPEN, CLOSING, DELETING and DELETED containers are not judged.
    NotChecked,
}

/// What to do about one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Option<Verdict>,
    pub healthy: usize,
    /// New copies: targets, and sources best first.
    pub replicate_to: Vec<u64>,
    pub sources: Vec<u64>,
    /// Replicas to delete, worst first.
    pub delete: Vec<u64>,
    /// QUASI_CLOSED replicas to force-close (a quasi-closed container with a majority of
    /// equally advanced quasi-closed replicas and no closed one).
    pub force_close: Vec<u64>,
}

impl Decision {
    pub fn verdict(&self) -> Verdict {
        self.verdict.unwrap_or(Verdict::NotChecked)
    }
}

/// The BCSID a healthy copy must have: the container's, or a higher one a replica proved.
fn required_bcsid(c: &ContainerView, replicas: &[ReplicaView]) -> u64 {
    replicas
        .iter()
        .filter(|r| matches!(r.state, ReplicaState::Closed | ReplicaState::QuasiClosed))
        .map(|r| r.bcsid)
        .fold(c.bcsid, u64::max)
}

/// Whether the container is known to hold data (so an empty replica is not a copy of it).
fn has_data(c: &ContainerView, replicas: &[ReplicaView]) -> bool {
    c.key_count > 0 || c.used_bytes > 0 || required_bcsid(c, replicas) > 0
}

/// Whether `r` is in a finished state that can be a copy of `c`.
fn finished(c: &ContainerView, r: &ReplicaView) -> bool {
    match c.state {
        ContainerState::QuasiClosed => {
            matches!(r.state, ReplicaState::Closed | ReplicaState::QuasiClosed)
        }
        _ => r.state == ReplicaState::Closed,
    }
}

/// The content every copy must hold, as the best replicas show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reference {
    /// This many blocks and, for replicas reporting a digest of its version, this digest.
    Content { blocks: u64, digest: Option<Digest> },
    /// The fullest replicas disagree on their digest with no majority.
    Conflict,
}

/// The reference content among the live finished replicas at the required BCSID: the
/// highest block count (a replica cannot hold blocks it was never sent, so fewer means
/// short), then the majority digest of the newest digest version among those.
fn reference(c: &ContainerView, replicas: &[ReplicaView]) -> Option<Reference> {
    let bar = required_bcsid(c, replicas);
    let finished: Vec<&ReplicaView> = replicas
        .iter()
        .filter(|r| finished(c, r) && r.node != NodeHealth::Dead && r.bcsid >= bar)
        .collect();
    let blocks = finished.iter().map(|r| r.block_count).max()?;
    let fullest = finished.iter().filter(|r| r.block_count == blocks);
    let version = fullest
        .clone()
        .filter_map(|r| r.digest)
        .map(|d| d.version)
        .max();
    let Some(version) = version else {
        return Some(Reference::Content {
            blocks,
            digest: None,
        });
    };
    let mut votes: Vec<(u64, usize)> = Vec::new();
    for d in fullest
        .filter_map(|r| r.digest)
        .filter(|d| d.version == version)
    {
        match votes.iter_mut().find(|(sum, _)| *sum == d.sum) {
            Some((_, n)) => *n += 1,
            None => votes.push((d.sum, 1)),
        }
    }
    votes.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    match votes.as_slice() {
        [(sum, n), rest @ ..] if rest.first().is_none_or(|(_, m)| m < n) => {
            Some(Reference::Content {
                blocks,
                digest: Some(Digest { version, sum: *sum }),
            })
        }
        _ => Some(Reference::Conflict),
    }
}

/// Whether `r` holds the reference content.
fn holds(reference: Option<Reference>, r: &ReplicaView) -> bool {
    let Some(Reference::Content { blocks, digest }) = reference else {
        return false;
    };
    let same_digest = match (digest, r.digest) {
        (Some(want), Some(got)) if want.version == got.version => want.sum == got.sum,
        // Not comparable (no digest, or another rule version): the block count decides.
        _ => true,
    };
    r.block_count == blocks && same_digest
}

/// Whether `r` is a healthy copy of `c`, judged with `replicas` (all of `c`'s).
pub fn is_healthy_copy(c: &ContainerView, replicas: &[ReplicaView], r: &ReplicaView) -> bool {
    finished(c, r)
        && r.node != NodeHealth::Dead
        && r.bcsid >= required_bcsid(c, replicas)
        && !(r.block_count == 0 && has_data(c, replicas))
        && holds(reference(c, replicas), r)
}

/// Best first: healthy copies before others, then higher BCSID, more blocks, CLOSED before
/// QUASI_CLOSED, a healthy datanode before a stale one, and the lower id to be stable.
fn rank(c: &ContainerView, all: &[ReplicaView]) -> Vec<ReplicaView> {
    let mut v: Vec<ReplicaView> = all.to_vec();
    v.sort_by_key(|r| {
        (
            !is_healthy_copy(c, all, r),
            std::cmp::Reverse(r.bcsid),
            std::cmp::Reverse(r.block_count),
            r.state != ReplicaState::Closed,
            r.node,
            r.datanode,
        )
    });
    v
}

/// Judges `c`. `candidates` are datanodes that may take a new copy, preferred first.
pub fn decide(
    c: &ContainerView,
    replicas: &[ReplicaView],
    inflight: &InflightView,
    candidates: &[u64],
) -> Decision {
    if !matches!(
        c.state,
        ContainerState::Closed | ContainerState::QuasiClosed
    ) {
        return Decision::default();
    }
    let live: Vec<ReplicaView> = replicas
        .iter()
        .filter(|r| r.node != NodeHealth::Dead)
        .cloned()
        .collect();
    let ranked = rank(c, &live);
    let healthy: Vec<&ReplicaView> = ranked
        .iter()
        .filter(|r| is_healthy_copy(c, &live, r))
        .collect();
    let mut d = Decision {
        healthy: healthy.len(),
        ..Default::default()
    };

    // Replicas that are finished but not copies: empty, behind, or UNHEALTHY. OPEN/CLOSING
    // ones are left to the close handling (they may still catch up).
    let unhealthy: Vec<u64> = ranked
        .iter()
        .filter(|r| !is_healthy_copy(c, &live, r))
        .filter(|r| {
            matches!(
                r.state,
                ReplicaState::Closed | ReplicaState::QuasiClosed | ReplicaState::Unhealthy
            )
        })
        .map(|r| r.datanode)
        .collect();

    if healthy.is_empty() {
        d.verdict = Some(Verdict::Missing);
    } else if healthy.len() < c.wanted {
        d.verdict = Some(Verdict::UnderReplicated);
        let missing = c.wanted - healthy.len();
        let needed = missing.saturating_sub(inflight.adds.len());
        d.replicate_to = candidates
            .iter()
            .copied()
            .filter(|dn| !live.iter().any(|r| r.datanode == *dn))
            .filter(|dn| !inflight.adds.contains(dn))
            .take(needed)
            .collect();
        if !d.replicate_to.is_empty() {
            d.sources = healthy
                .iter()
                .filter(|r| r.node == NodeHealth::Healthy)
                .map(|r| r.datanode)
                .collect();
            if d.sources.is_empty() {
                d.replicate_to.clear();
            }
        }
        // Too few datanodes free to take the copies while non-copies occupy some (a small
        // cluster: every datanode holds a replica, some of them stale): delete non-copies,
        // worst first, as many as copies are still short, so a later pass can copy onto
        // their datanodes. Only when a copy can be made, and never a copy.
        let short = needed.saturating_sub(d.replicate_to.len());
        let can_copy = healthy.iter().any(|r| r.node == NodeHealth::Healthy);
        if short > 0 && can_copy {
            let deleting = unhealthy
                .iter()
                .filter(|dn| inflight.deletes.contains(dn))
                .count();
            d.delete = unhealthy
                .iter()
                .rev()
                .copied()
                .filter(|dn| !inflight.deletes.contains(dn))
                .take(short.saturating_sub(deleting))
                .collect();
        }
    } else if healthy.len() > c.wanted || !unhealthy.is_empty() {
        d.verdict = Some(Verdict::OverReplicated);
        // Enough copies: the non-copies go first, then the worst copies beyond `wanted`;
        // the best copy (healthy[0]) is never chosen because excess < healthy.len().
        d.delete = unhealthy
            .iter()
            .rev()
            .copied()
            .filter(|dn| !inflight.deletes.contains(dn))
            .collect();
        let pending_deletes_of_copies = healthy
            .iter()
            .filter(|r| inflight.deletes.contains(&r.datanode))
            .count();
        let excess = (healthy.len() - pending_deletes_of_copies).saturating_sub(c.wanted);
        d.delete.extend(
            healthy
                .iter()
                .rev()
                .filter(|r| !inflight.deletes.contains(&r.datanode))
                .take(excess)
                .map(|r| r.datanode),
        );
    } else {
        d.verdict = Some(Verdict::Healthy);
    }

    if c.state == ContainerState::QuasiClosed
        && !live.iter().any(|r| r.state == ReplicaState::Closed)
    {
        let top = required_bcsid(c, &live);
        let best: Vec<u64> = live
            .iter()
            .filter(|r| r.state == ReplicaState::QuasiClosed && r.bcsid == top)
            .filter(|r| r.node == NodeHealth::Healthy)
            .map(|r| r.datanode)
            .collect();
        if best.len() > c.wanted / 2 {
            d.force_close = best;
        }
    }
    d
}

#[cfg(test)]
mod tests;
