//! What one replica report implies for its container: a pure rule ([`react`]), so the
//! container lifecycle driven by datanode reports is tested without a cluster. The leader
//! carries the reactions out ([`crate::leader::reports`]).

use super::replicas::{ReplicaReport, ReplicaState};
use crate::state::{ContainerEvent, ContainerInfo, ContainerState};

/// What one replica report asks of the SCM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaction {
    /// Record higher usage / BCSID for the container.
    Usage {
        used_bytes: u64,
        key_count: u64,
        bcsid: u64,
    },
    /// Move the container through its lifecycle.
    Event(ContainerEvent),
    /// Tell this datanode to close its replica.
    Close { force: bool },
    /// Tell this datanode to delete its replica.
    Delete,
}

/// The reactions to replica `r` of container `c`; `container_size` is when an OPEN one is
/// full. Pure, so the container lifecycle driven by reports is tested without a cluster.
pub fn react(c: &ContainerInfo, r: &ReplicaReport, container_size: u64) -> Vec<Reaction> {
    use ContainerState as C;
    use ReplicaState as R;
    let Some(state) = r.state else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let live = matches!(c.state, C::Open | C::Closing | C::QuasiClosed);
    let ahead = r.bcsid > c.bcsid
        || (r.bcsid == c.bcsid && (r.used_bytes > c.used_bytes || r.block_count > c.key_count));
    if live && ahead && state != R::Unhealthy {
        out.push(Reaction::Usage {
            used_bytes: r.used_bytes.max(c.used_bytes),
            key_count: r.block_count.max(c.key_count),
            bcsid: r.bcsid.max(c.bcsid),
        });
    }
    let caught_up = r.bcsid >= c.bcsid;
    match (c.state, state) {
        (C::Open, R::Closed | R::QuasiClosed | R::Unhealthy) => {
            out.push(Reaction::Event(ContainerEvent::Finalize))
        }
        (C::Open, R::Open | R::Closing) if r.used_bytes >= container_size => {
            out.push(Reaction::Event(ContainerEvent::Finalize))
        }
        (C::Closing, R::Closed) if caught_up => out.push(Reaction::Event(ContainerEvent::Close)),
        (C::Closing, R::QuasiClosed) => out.push(Reaction::Event(ContainerEvent::QuasiClose)),
        (C::Closing, R::Open | R::Closing) => out.push(Reaction::Close { force: false }),
        (C::QuasiClosed, R::Closed) if caught_up => {
            out.push(Reaction::Event(ContainerEvent::Close))
        }
        (C::QuasiClosed | C::Closed, R::Open | R::Closing) => {
            out.push(Reaction::Close { force: true })
        }
        (C::Closed, R::QuasiClosed) if caught_up => out.push(Reaction::Close { force: true }),
        (C::Deleting | C::Deleted, _) => out.push(Reaction::Delete),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ReplicationFactor;

    fn c(state: ContainerState, bcsid: u64) -> ContainerInfo {
        ContainerInfo {
            id: 1,
            state,
            replication: ReplicationFactor::Three,
            owner: "om".into(),
            pipeline_id: 1,
            used_bytes: 100,
            key_count: 2,
            bcsid,
            created_at: 0,
        }
    }

    fn r(state: ReplicaState, bcsid: u64, used: u64) -> ReplicaReport {
        ReplicaReport {
            container_id: 1,
            state: Some(state),
            bcsid,
            block_count: 2,
            used_bytes: used,
            origin_pipeline: 1,
            digest: None,
        }
    }

    use ContainerState as C;
    use ReplicaState as R;

    #[test]
    fn reports_drive_the_container_lifecycle() {
        assert_eq!(react(&c(C::Open, 5), &r(R::Open, 5, 100), 1000), vec![]);
        assert_eq!(
            react(&c(C::Open, 5), &r(R::Open, 6, 1000), 1000),
            vec![
                Reaction::Usage {
                    used_bytes: 1000,
                    key_count: 2,
                    bcsid: 6
                },
                Reaction::Event(ContainerEvent::Finalize)
            ]
        );
        assert_eq!(
            react(&c(C::Open, 5), &r(R::Closed, 5, 100), 1000),
            vec![Reaction::Event(ContainerEvent::Finalize)]
        );
        assert_eq!(
            react(&c(C::Closing, 5), &r(R::Closed, 5, 100), 1000),
            vec![Reaction::Event(ContainerEvent::Close)]
        );
        // A replica behind the container's BCSID does not close it.
        assert_eq!(
            react(&c(C::Closing, 5), &r(R::Closed, 4, 100), 1000),
            vec![]
        );
        assert_eq!(
            react(&c(C::Closing, 5), &r(R::QuasiClosed, 5, 100), 1000),
            vec![Reaction::Event(ContainerEvent::QuasiClose)]
        );
        assert_eq!(
            react(&c(C::Closing, 5), &r(R::Open, 5, 100), 1000),
            vec![Reaction::Close { force: false }]
        );
        assert_eq!(
            react(&c(C::QuasiClosed, 5), &r(R::Closed, 5, 100), 1000),
            vec![Reaction::Event(ContainerEvent::Close)]
        );
        assert_eq!(
            react(&c(C::Closed, 5), &r(R::QuasiClosed, 5, 100), 1000),
            vec![Reaction::Close { force: true }]
        );
        assert_eq!(react(&c(C::Closed, 5), &r(R::Closed, 5, 100), 1000), vec![]);
        assert_eq!(
            react(&c(C::Deleting, 5), &r(R::Closed, 5, 100), 1000),
            vec![Reaction::Delete]
        );
        // A closed container's usage is not rewritten by reports; nor by an UNHEALTHY replica.
        assert_eq!(react(&c(C::Closed, 5), &r(R::Closed, 9, 100), 1000), vec![]);
        assert_eq!(
            react(&c(C::Open, 5), &r(R::Unhealthy, 9, 100), 1000),
            vec![Reaction::Event(ContainerEvent::Finalize)]
        );
    }
}
