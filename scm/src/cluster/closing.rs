//! CLOSING containers no replica ever wrote to.
//!
//! The SCM opens a container when it hands out a block; the block may never be written
//! (the client gave up, the pipeline closed first). No datanode then holds the container:
//! a close command to a member is a no-op there (nothing to close), no replica reports
//! CLOSED, and the report-driven lifecycle ([`super::lifecycle`]) leaves the container
//! CLOSING for ever. [`resolve`] decides when such a container is closed as empty
//! (usage 0, then CLOSED, with the existing log commands); the empty-container deletion
//! ([`super::deletion`]) then deletes it.
//!
//! Closing a container that does hold data as empty would lose that data (its deletion
//! then removes the late replica), so every condition must hold, and keep holding, for
//! `wait` (`scm.replication_inflight_timeout`) before it resolves:
//! * the SCM never recorded a committed block of it (BCSID 0, no keys): every committed
//!   write reaches the SCM through a replica report, which raises both;
//! * every replica reported, if any, is empty (BCSID 0, no block) and not UNHEALTHY (an
//!   UNHEALTHY replica's counts are not trusted);
//! * a majority of its pipeline's members are HEALTHY, so they have registered with this
//!   leader and their reports are in the replica map: a write is committed only on a
//!   majority, and any two majorities share a member, so a committed write would show as a
//!   replica with a BCSID here;
//! * all of that for longer than `wait`, measured by this leader from the first time it
//!   saw it so (a new leader starts counting afresh). The wait covers the race with a
//!   write in flight: a block handed out just before the container went CLOSING may
//!   still be on its way to the pipeline, and a member that executed the close as a no-op
//!   would then create the container on that first write. `wait` is the SCM's bound on a
//!   command to a datanode being in flight (a close is re-sent every pass meanwhile); a
//!   write arriving later than that is not expected to succeed. The condition is checked
//!   again in every pass, so a write that does land (a replica with a BCSID) stops it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::nodes::NodeHealth;
use super::replicas::ReplicaState;
use super::replication::{ContainerView, ReplicaView};
use super::ClusterState;
use crate::state::{ContainerInfo, ContainerState};

/// Since when each CLOSING container has looked unwritten, continuously (leader memory).
#[derive(Debug, Default)]
pub struct Clock {
    since: HashMap<u64, Instant>,
}

impl Clock {
    /// How long container `id` has looked unwritten (`None`: it does not now).
    fn observe(&mut self, id: u64, unwritten: bool, now: Instant) -> Option<Duration> {
        if !unwritten {
            self.since.remove(&id);
            return None;
        }
        let since = *self.since.entry(id).or_insert(now);
        Some(now.saturating_duration_since(since))
    }

    /// Forgets containers that are no longer CLOSING.
    fn retain(&mut self, closing: &[u64]) {
        self.since.retain(|id, _| closing.contains(id));
    }
}

/// Whether CLOSING container `c` looks never written now: see the module doc. `members`:
/// the health of each member of its pipeline (`None`: unknown to this leader).
pub fn looks_unwritten(
    c: &ContainerView,
    replicas: &[ReplicaView],
    members: &[Option<NodeHealth>],
) -> bool {
    let healthy = members
        .iter()
        .filter(|h| **h == Some(NodeHealth::Healthy))
        .count();
    c.state == ContainerState::Closing
        && c.bcsid == 0
        && c.key_count == 0
        && replicas
            .iter()
            .all(|r| r.bcsid == 0 && r.block_count == 0 && r.state != ReplicaState::Unhealthy)
        && !members.is_empty()
        && healthy * 2 > members.len()
}

/// Whether CLOSING container `c` is to be closed as empty now: it has looked unwritten
/// ([`looks_unwritten`]) for longer than `wait`, continuously, by `clock`.
pub fn resolve(
    clock: &mut Clock,
    c: &ContainerView,
    replicas: &[ReplicaView],
    members: &[Option<NodeHealth>],
    now: Instant,
    wait: Duration,
) -> bool {
    clock
        .observe(c.id, looks_unwritten(c, replicas, members), now)
        .is_some_and(|d| d > wait)
}

impl ClusterState {
    /// The CLOSING containers among `containers` to close as empty now; `members` maps a
    /// pipeline id to its members.
    pub fn resolve_closing(
        &mut self,
        containers: &[ContainerInfo],
        members: &HashMap<u64, Vec<u64>>,
        now: Instant,
        wait: Duration,
    ) -> Vec<u64> {
        let closing: Vec<&ContainerInfo> = containers
            .iter()
            .filter(|c| c.state == ContainerState::Closing)
            .collect();
        let ids: Vec<u64> = closing.iter().map(|c| c.id).collect();
        self.closing.retain(&ids);
        let mut out = Vec::new();
        for c in closing {
            let health: Vec<Option<NodeHealth>> = members
                .get(&c.pipeline_id)
                .map(|m| m.iter().map(|d| self.nodes.health(*d)).collect())
                .unwrap_or_default();
            let replicas = self.replica_views(c.id);
            if resolve(
                &mut self.closing,
                &ContainerView::of(c),
                &replicas,
                &health,
                now,
                wait,
            ) {
                out.push(c.id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(300);

    fn c(bcsid: u64, keys: u64) -> ContainerView {
        ContainerView {
            id: 1,
            state: ContainerState::Closing,
            bcsid,
            key_count: keys,
            used_bytes: 0,
            wanted: 3,
        }
    }

    fn r(state: ReplicaState, bcsid: u64, blocks: u64) -> ReplicaView {
        ReplicaView {
            datanode: 1,
            state,
            bcsid,
            block_count: blocks,
            digest: None,
            node: NodeHealth::Healthy,
        }
    }

    const H: Option<NodeHealth> = Some(NodeHealth::Healthy);
    const D: Option<NodeHealth> = Some(NodeHealth::Dead);

    #[test]
    fn an_unwritten_closing_container_resolves_only_after_the_wait() {
        let mut clock = Clock::default();
        let t0 = Instant::now();
        let members = [H, H, D];
        for (at, expect) in [(0, false), (299, false), (300, false), (301, true)] {
            let now = t0 + Duration::from_secs(at);
            assert_eq!(
                resolve(&mut clock, &c(0, 0), &[], &members, now, WAIT),
                expect,
                "at {at}s"
            );
        }
        // Empty replicas (a first write stage that committed nothing) are no doubt.
        let empty = [r(ReplicaState::Open, 0, 0), r(ReplicaState::Closing, 0, 0)];
        assert!(resolve(
            &mut clock,
            &c(0, 0),
            &empty,
            &members,
            t0 + Duration::from_secs(400),
            WAIT
        ));
    }

    #[test]
    fn any_sign_of_data_or_too_few_healthy_members_waits_and_restarts_the_clock() {
        let t0 = Instant::now();
        let late = t0 + Duration::from_secs(1000);
        let doubts: [(ContainerView, Vec<ReplicaView>, Vec<Option<NodeHealth>>); 6] = [
            (c(5, 0), vec![], vec![H, H, H]), // SCM saw a BCSID
            (c(0, 1), vec![], vec![H, H, H]), // ...or a key
            (c(0, 0), vec![r(ReplicaState::Open, 3, 1)], vec![H, H, H]), // a replica holds data
            (
                c(0, 0),
                vec![r(ReplicaState::Unhealthy, 0, 0)],
                vec![H, H, H],
            ), // untrusted counts
            (c(0, 0), vec![], vec![H, D, Some(NodeHealth::Stale)]), // no healthy majority
            (c(0, 0), vec![], vec![]),        // pipeline unknown
        ];
        for (cv, replicas, members) in doubts {
            let mut clock = Clock::default();
            assert!(!resolve(&mut clock, &c(0, 0), &[], &[H, H, H], t0, WAIT));
            assert!(
                !resolve(&mut clock, &cv, &replicas, &members, late, WAIT),
                "{cv:?} {replicas:?} {members:?}"
            );
            // The doubt restarted the clock: looking unwritten again waits the full time.
            let again = late + Duration::from_secs(1);
            assert!(!resolve(&mut clock, &c(0, 0), &[], &[H, H, H], again, WAIT));
        }
        let mut open = c(0, 0);
        open.state = ContainerState::Open;
        let mut clock = Clock::default();
        assert!(!resolve(&mut clock, &open, &[], &[H, H, H], t0, WAIT));
        assert!(!resolve(&mut clock, &open, &[], &[H, H, H], late, WAIT));
    }
}
