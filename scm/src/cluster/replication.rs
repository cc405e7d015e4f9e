//! The ReplicationManager's judgement of one container, as a pure function of the
//! container's record, its reported replicas, the commands already in flight and the
//! datanodes that could take a new copy.
//!
//! A replica is a *healthy copy* only when it is CLOSED (or QUASI_CLOSED for a QUASI_CLOSED
//! container), its BCSID is at least the container's, and it is not empty while the
//! container holds data. So an empty CLOSED replica (Ozone's HDDS-17435: BCSID 0, no
//! blocks, recreated by a replay) is never counted, never used as a source, and is the first
//! to be deleted; a real replica is never deleted while it is the best one.

use super::nodes::NodeHealth;
use super::replicas::ReplicaState;
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

/// What the judgement needs of a replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaView {
    pub datanode: u64,
    pub state: ReplicaState,
    pub bcsid: u64,
    pub block_count: u64,
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

/// Whether `r` is a healthy copy of `c`, judged with `replicas` (all of `c`'s).
pub fn is_healthy_copy(c: &ContainerView, replicas: &[ReplicaView], r: &ReplicaView) -> bool {
    let state_ok = match c.state {
        ContainerState::QuasiClosed => {
            matches!(r.state, ReplicaState::Closed | ReplicaState::QuasiClosed)
        }
        _ => r.state == ReplicaState::Closed,
    };
    state_ok
        && r.node != NodeHealth::Dead
        && r.bcsid >= required_bcsid(c, replicas)
        && !(r.block_count == 0 && has_data(c, replicas))
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
mod tests {
    use super::*;

    fn closed(bcsid: u64, keys: u64) -> ContainerView {
        ContainerView {
            id: 1,
            state: ContainerState::Closed,
            bcsid,
            key_count: keys,
            used_bytes: keys * 100,
            wanted: 3,
        }
    }

    fn rep(dn: u64, state: ReplicaState, bcsid: u64, blocks: u64) -> ReplicaView {
        ReplicaView {
            datanode: dn,
            state,
            bcsid,
            block_count: blocks,
            node: NodeHealth::Healthy,
        }
    }

    use ReplicaState::*;

    #[test]
    fn empty_closed_replica_is_not_a_copy_and_is_the_one_deleted() {
        let c = closed(20, 5);
        // The empty replica (BCSID 0, no blocks) sorts first by id: a hash-order choice
        // (Ozone's) could pick a real one.
        let rs = vec![
            rep(1, Closed, 0, 0),
            rep(2, Closed, 20, 5),
            rep(3, Closed, 20, 5),
            rep(4, Closed, 20, 5),
        ];
        assert!(!is_healthy_copy(&c, &rs, &rs[0]));
        let d = decide(&c, &rs, &InflightView::default(), &[5, 6]);
        assert_eq!(d.verdict(), Verdict::OverReplicated);
        assert_eq!(d.healthy, 3);
        assert_eq!(d.delete, vec![1]);
        assert!(d.replicate_to.is_empty());
        // Once its delete is in flight nothing more is deleted.
        let inflight = InflightView {
            adds: vec![],
            deletes: vec![1],
        };
        assert!(decide(&c, &rs, &inflight, &[5]).delete.is_empty());
    }

    #[test]
    fn two_real_replicas_and_an_empty_one_ask_for_a_third_from_the_best_sources() {
        let c = closed(20, 5);
        let rs = vec![
            rep(1, Closed, 0, 0),
            rep(2, Closed, 20, 5),
            rep(3, Closed, 20, 6),
        ];
        let d = decide(&c, &rs, &InflightView::default(), &[1, 2, 7, 8]);
        assert_eq!(d.verdict(), Verdict::UnderReplicated);
        assert_eq!(d.healthy, 2);
        // Not onto a node that holds any replica (1 holds the empty one).
        assert_eq!(d.replicate_to, vec![7]);
        assert_eq!(d.sources, vec![3, 2], "more blocks first");
        assert!(d.delete.is_empty(), "no delete while under-replicated");
        let inflight = InflightView {
            adds: vec![7],
            deletes: vec![],
        };
        assert!(decide(&c, &rs, &inflight, &[7, 8]).replicate_to.is_empty());
    }

    #[test]
    fn behind_bcsid_unhealthy_and_dead_replicas_do_not_count() {
        let c = closed(20, 5);
        let mut dead = rep(4, Closed, 20, 5);
        dead.node = NodeHealth::Dead;
        let rs = vec![
            rep(1, Closed, 19, 5),
            rep(2, Unhealthy, 20, 5),
            rep(3, Closed, 20, 5),
            dead,
        ];
        let d = decide(&c, &rs, &InflightView::default(), &[5, 6, 4]);
        assert_eq!(d.healthy, 1);
        assert_eq!(d.replicate_to, vec![5, 6]);
        assert_eq!(d.sources, vec![3]);
        // A replica that proved a higher BCSID raises the bar for the others.
        let c0 = closed(0, 0);
        let rs = vec![rep(1, Closed, 7, 1), rep(2, Closed, 3, 1)];
        let d = decide(&c0, &rs, &InflightView::default(), &[]);
        assert_eq!(d.healthy, 1);
        assert_eq!(d.verdict(), Verdict::UnderReplicated);
    }

    #[test]
    fn excess_real_copies_delete_the_worst_never_the_best() {
        let c = closed(10, 5);
        let rs = vec![
            rep(1, Closed, 10, 5),
            rep(2, Closed, 10, 5),
            rep(3, Closed, 10, 6),
            rep(4, Closed, 10, 4),
            rep(5, Closed, 10, 5),
        ];
        let d = decide(&c, &rs, &InflightView::default(), &[]);
        assert_eq!(d.verdict(), Verdict::OverReplicated);
        // Ranked 3 (6 blocks), 1, 2, 5, 4 (4 blocks); two excess: 4 then 5.
        assert_eq!(d.delete, vec![4, 5]);
        // With wanted 1 every copy but the best goes.
        let one = ContainerView {
            wanted: 1,
            ..c.clone()
        };
        let d = decide(&one, &rs, &InflightView::default(), &[]);
        assert_eq!(d.delete.len(), 4);
        assert!(!d.delete.contains(&3));
        // A replica that proved a higher BCSID makes the others stale copies: they are
        // deleted only once enough good copies exist, never before.
        let rs = vec![rep(1, Closed, 12, 5), rep(2, Closed, 10, 5)];
        let d = decide(&c, &rs, &InflightView::default(), &[7, 8]);
        assert_eq!(d.healthy, 1);
        assert!(d.delete.is_empty());
        assert_eq!(d.replicate_to, vec![7, 8]);
        assert_eq!(d.sources, vec![1]);
    }

    #[test]
    fn missing_healthy_and_unjudged_states() {
        let c = closed(5, 1);
        let d = decide(
            &c,
            &[rep(1, Closed, 0, 0)],
            &InflightView::default(),
            &[2, 3],
        );
        assert_eq!(d.verdict(), Verdict::Missing);
        assert!(d.replicate_to.is_empty() && d.delete.is_empty());
        let rs = vec![
            rep(1, Closed, 5, 1),
            rep(2, Closed, 5, 1),
            rep(3, Closed, 5, 1),
        ];
        assert_eq!(
            decide(&c, &rs, &InflightView::default(), &[]).verdict(),
            Verdict::Healthy
        );
        // An empty container's empty replicas are copies.
        let e = closed(0, 0);
        let rs = vec![
            rep(1, Closed, 0, 0),
            rep(2, Closed, 0, 0),
            rep(3, Closed, 0, 0),
        ];
        assert_eq!(
            decide(&e, &rs, &InflightView::default(), &[]).verdict(),
            Verdict::Healthy
        );
        let open = ContainerView {
            state: ContainerState::Open,
            ..c
        };
        assert_eq!(
            decide(&open, &rs, &InflightView::default(), &[4]).verdict(),
            Verdict::NotChecked
        );
    }

    #[test]
    fn quasi_closed_majority_is_force_closed() {
        let c = ContainerView {
            state: ContainerState::QuasiClosed,
            ..closed(4, 1)
        };
        let rs = vec![
            rep(1, QuasiClosed, 4, 1),
            rep(2, QuasiClosed, 4, 1),
            rep(3, QuasiClosed, 3, 1),
        ];
        let d = decide(&c, &rs, &InflightView::default(), &[]);
        assert_eq!(d.force_close, vec![1, 2]);
        let rs = vec![rep(1, QuasiClosed, 4, 1), rep(3, QuasiClosed, 3, 1)];
        assert!(decide(&c, &rs, &InflightView::default(), &[])
            .force_close
            .is_empty());
    }
}
