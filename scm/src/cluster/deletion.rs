//! Deletion of empty containers, as Ozone does it: a CLOSED container whose every replica
//! is empty goes DELETING, each datanode holding a replica is told to delete it, and once no
//! replica remains the container is DELETED. A pure rule ([`step`]), so the lifecycle is
//! tested without a cluster; the ReplicationManager pass carries it out
//! ([`crate::leader::rm`]).
//!
//! "Empty" is strict, so real data is never deleted: every reported replica is CLOSED, on a
//! HEALTHY datanode, at or past the container's BCSID (a replica emptied by block deletion
//! keeps its BCSID; HDDS-17435's empty replica, recreated by a replay at BCSID 0, does not
//! count as proof), with no block; at least one replica is reported; and no deleted-block
//! transaction of the container is still pending (block deletes done).
//!
//! The one exception to "at least one replica": a container the SCM never recorded a
//! block of (BCSID 0, no keys) and no datanode reports, such as a CLOSING container no
//! replica ever wrote, closed as empty ([`super::closing`]). There is nothing to prove
//! empty; without this it would stay CLOSED for ever.

use super::nodes::NodeHealth;
use super::replicas::ReplicaState;
use super::replication::{ContainerView, ReplicaView};
use crate::state::ContainerState;

/// What the deletion rule asks for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// CLOSED and empty everywhere: move it to DELETING.
    StartDeleting,
    /// DELETING: tell these datanodes to delete their replica.
    DeleteReplicas(Vec<u64>),
    /// DELETING and no replica remains: DELETED.
    Finish,
}

/// The deletion step for `c` given its reported replicas, whether deleted-block
/// transactions of it are pending, and the datanodes already told to delete (in flight).
pub fn step(
    c: &ContainerView,
    replicas: &[ReplicaView],
    blocks_pending: bool,
    deleting: &[u64],
) -> Step {
    match c.state {
        ContainerState::Closed => {
            let empty = |r: &ReplicaView| {
                r.state == ReplicaState::Closed
                    && r.node == NodeHealth::Healthy
                    && r.bcsid >= c.bcsid
                    && r.block_count == 0
            };
            let never_written = c.bcsid == 0 && c.key_count == 0;
            if !blocks_pending
                && (!replicas.is_empty() || never_written)
                && replicas.iter().all(empty)
            {
                Step::StartDeleting
            } else {
                Step::Nothing
            }
        }
        ContainerState::Deleting if replicas.is_empty() => Step::Finish,
        ContainerState::Deleting => {
            let to: Vec<u64> = replicas
                .iter()
                .filter(|r| r.node != NodeHealth::Dead && !deleting.contains(&r.datanode))
                .map(|r| r.datanode)
                .collect();
            if to.is_empty() {
                Step::Nothing
            } else {
                Step::DeleteReplicas(to)
            }
        }
        _ => Step::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(state: ContainerState, bcsid: u64) -> ContainerView {
        ContainerView {
            id: 1,
            state,
            bcsid,
            key_count: 2,
            used_bytes: 100,
            wanted: 3,
        }
    }

    fn r(dn: u64, state: ReplicaState, bcsid: u64, blocks: u64) -> ReplicaView {
        ReplicaView {
            datanode: dn,
            state,
            bcsid,
            block_count: blocks,
            digest: None,
            node: NodeHealth::Healthy,
        }
    }

    use ContainerState as C;
    use ReplicaState as R;

    #[test]
    fn a_closed_container_empty_everywhere_starts_deleting() {
        let empty: Vec<_> = (1..=3).map(|d| r(d, R::Closed, 12, 0)).collect();
        assert_eq!(
            step(&c(C::Closed, 12), &empty, false, &[]),
            Step::StartDeleting
        );
        // Block deletes still pending, no replica known, or not CLOSED: not yet.
        assert_eq!(step(&c(C::Closed, 12), &empty, true, &[]), Step::Nothing);
        assert_eq!(step(&c(C::Closed, 12), &[], false, &[]), Step::Nothing);
        for s in [C::Open, C::Closing, C::QuasiClosed, C::Deleted] {
            assert_eq!(step(&c(s, 12), &empty, false, &[]), Step::Nothing, "{s}");
        }
    }

    #[test]
    fn a_closed_container_never_written_and_reported_nowhere_starts_deleting() {
        let mut never = c(C::Closed, 0);
        never.key_count = 0;
        assert_eq!(step(&never, &[], false, &[]), Step::StartDeleting);
        assert_eq!(step(&never, &[], true, &[]), Step::Nothing);
        // A replica that does report must still be empty and trusted.
        assert_eq!(
            step(&never, &[r(1, R::Open, 0, 0)], false, &[]),
            Step::Nothing
        );
        // Keys or a BCSID on record: a replica must prove it empty.
        let mut keys = never.clone();
        keys.key_count = 1;
        assert_eq!(step(&keys, &[], false, &[]), Step::Nothing);
        assert_eq!(step(&c(C::Closed, 3), &[], false, &[]), Step::Nothing);
    }

    #[test]
    fn real_data_or_doubt_keeps_the_container() {
        let base: Vec<_> = (1..=3).map(|d| r(d, R::Closed, 12, 0)).collect();
        let doubts = [
            r(3, R::Closed, 12, 1),      // holds a block
            r(3, R::Closed, 0, 0),       // HDDS-17435: empty at BCSID 0, proves nothing
            r(3, R::Unhealthy, 12, 0),   // damaged
            r(3, R::QuasiClosed, 12, 0), // not closed
        ];
        for d in doubts {
            let mut v = base.clone();
            v[2] = d.clone();
            assert_eq!(
                step(&c(C::Closed, 12), &v, false, &[]),
                Step::Nothing,
                "{d:?}"
            );
        }
        let mut stale = base.clone();
        stale[0].node = NodeHealth::Stale;
        assert_eq!(step(&c(C::Closed, 12), &stale, false, &[]), Step::Nothing);
    }

    #[test]
    fn deleting_sends_deletes_once_and_finishes_when_no_replica_remains() {
        let v: Vec<_> = (1..=3).map(|d| r(d, R::Closed, 12, 0)).collect();
        assert_eq!(
            step(&c(C::Deleting, 12), &v, false, &[]),
            Step::DeleteReplicas(vec![1, 2, 3])
        );
        assert_eq!(
            step(&c(C::Deleting, 12), &v, false, &[1, 3]),
            Step::DeleteReplicas(vec![2])
        );
        assert_eq!(
            step(&c(C::Deleting, 12), &v, false, &[1, 2, 3]),
            Step::Nothing
        );
        assert_eq!(step(&c(C::Deleting, 12), &[], false, &[]), Step::Finish);
        assert_eq!(step(&c(C::Deleted, 12), &[], false, &[]), Step::Nothing);
    }
}
