//! The datanode registry: who registered, when each was last heard from, and its health
//! (HEALTHY → STALE → DEAD by configurable silences). Leader-only and in memory. A leader
//! taking over from another starts from the ring's records ([`NodeRegistry::seed`]): each
//! datanode with the health last judged, its silence counted from the takeover, and
//! *unconfirmed* until it registers again with a full report (a heartbeat reply tells it
//! to). After a cold start the registry starts empty.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

// The datanode and its health are part of the replicated state (the ring keeps each
// datanode as last known, so a new leader starts from it): declared in `state::types`.
pub use crate::state::types::{Datanode, NodeHealth};

/// Health after `silence` without a heartbeat.
pub fn health_after(silence: Duration, stale_after: Duration, dead_after: Duration) -> NodeHealth {
    if silence >= dead_after {
        NodeHealth::Dead
    } else if silence >= stale_after {
        NodeHealth::Stale
    } else {
        NodeHealth::Healthy
    }
}

/// Storage totals from a node report (failed volumes left out of the byte counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeUsage {
    pub capacity: u64,
    pub used: u64,
    pub remaining: u64,
    /// Volumes reported (0: no node report yet).
    pub volumes: u64,
    /// Volumes reported failed (I/O errors: their replicas are lost).
    pub failed_volumes: u64,
    /// Volumes that take new data: not failed, space remaining (a full one reports none).
    pub writable_volumes: u64,
}

impl NodeUsage {
    /// Whether new pipelines, containers and replicas may be placed on the node: some
    /// volume takes data, or no report said otherwise yet (a node taken over from the
    /// previous leader until it reports).
    pub fn accepts_data(&self) -> bool {
        self.volumes == 0 || self.writable_volumes > 0
    }

    /// Every reported volume failed: the node holds nothing usable; its pipelines close.
    pub fn all_failed(&self) -> bool {
        self.volumes > 0 && self.failed_volumes == self.volumes
    }
}

#[derive(Debug, Clone)]
pub struct NodeRecord {
    pub details: Datanode,
    pub health: NodeHealth,
    pub last_heartbeat: Instant,
    pub usage: NodeUsage,
    /// Registered with this leader (its replicas are in the replica map); `false` for a
    /// record taken over from the previous leader.
    pub confirmed: bool,
}

/// What a heartbeat found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// Known and alive: processed.
    Known,
    /// Never registered with this leader, or declared DEAD: it must register again (with a
    /// full report, since its replicas were dropped).
    MustRegister,
}

/// A health change seen by [`NodeRegistry::update_health`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub id: u64,
    pub from: NodeHealth,
    pub to: NodeHealth,
}

#[derive(Debug, Default)]
pub struct NodeRegistry {
    nodes: BTreeMap<u64, NodeRecord>,
}

impl NodeRegistry {
    /// Records a registration (new or again); returns whether the node was new.
    pub fn register(&mut self, details: Datanode, usage: NodeUsage, now: Instant) -> bool {
        let new = !self.nodes.contains_key(&details.id);
        self.nodes.insert(
            details.id,
            NodeRecord {
                details,
                health: NodeHealth::Healthy,
                last_heartbeat: now,
                usage,
                confirmed: true,
            },
        );
        new
    }

    /// Takes over a datanode as the ring last knew it: its last judged health, silent since
    /// `now` (the takeover), unconfirmed. Its pipelines stay usable while it is HEALTHY;
    /// it goes STALE like any node if it is not heard from.
    pub fn seed(&mut self, details: Datanode, health: NodeHealth, now: Instant) {
        self.nodes.insert(
            details.id,
            NodeRecord {
                details,
                health,
                last_heartbeat: now,
                usage: NodeUsage::default(),
                confirmed: false,
            },
        );
    }

    /// Whether every HEALTHY node has registered with this leader (so the replica map holds
    /// all their reports).
    pub fn all_healthy_confirmed(&self) -> bool {
        self.nodes
            .values()
            .all(|n| n.confirmed || n.health != NodeHealth::Healthy)
    }

    /// Records a heartbeat of `id`. A node taken over unconfirmed is alive but must
    /// register (its replicas are unknown to this leader).
    pub fn heartbeat(&mut self, id: u64, usage: Option<NodeUsage>, now: Instant) -> Heard {
        match self.nodes.get_mut(&id) {
            Some(n) if n.health != NodeHealth::Dead => {
                n.last_heartbeat = now;
                n.health = NodeHealth::Healthy;
                if let Some(u) = usage {
                    n.usage = u;
                }
                if n.confirmed {
                    Heard::Known
                } else {
                    Heard::MustRegister
                }
            }
            _ => Heard::MustRegister,
        }
    }

    /// Re-judges every node's health at `now`; returns the changes.
    pub fn update_health(
        &mut self,
        now: Instant,
        stale_after: Duration,
        dead_after: Duration,
    ) -> Vec<Transition> {
        let mut out = Vec::new();
        for (id, n) in &mut self.nodes {
            let h = health_after(
                now.saturating_duration_since(n.last_heartbeat),
                stale_after,
                dead_after,
            );
            // DEAD is left only by registering again.
            if h != n.health && n.health != NodeHealth::Dead {
                out.push(Transition {
                    id: *id,
                    from: n.health,
                    to: h,
                });
                n.health = h;
            }
        }
        out
    }

    pub fn get(&self, id: u64) -> Option<&NodeRecord> {
        self.nodes.get(&id)
    }

    /// The registered details of `ids`, in order, skipping ids it does not know.
    pub fn details_of(&self, ids: &[u64]) -> Vec<Datanode> {
        ids.iter()
            .filter_map(|id| self.get(*id).map(|n| n.details.clone()))
            .collect()
    }

    pub fn health(&self, id: u64) -> Option<NodeHealth> {
        self.nodes.get(&id).map(|n| n.health)
    }

    pub fn is_healthy(&self, id: u64) -> bool {
        self.health(id) == Some(NodeHealth::Healthy)
    }

    pub fn all(&self) -> impl Iterator<Item = &NodeRecord> {
        self.nodes.values()
    }

    /// Ids of HEALTHY nodes that registered with this leader, ascending: the only ones new
    /// pipelines are made of (commands reach a node only once it has registered).
    pub fn confirmed_healthy_ids(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.health == NodeHealth::Healthy && n.confirmed)
            .map(|n| n.details.id)
            .collect()
    }

    /// [`Self::confirmed_healthy_ids`] whose volumes take new data: what new pipelines
    /// are made of (a node whose every volume failed or is full gets none).
    pub fn placeable_ids(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.health == NodeHealth::Healthy && n.confirmed && n.usage.accepts_data())
            .map(|n| n.details.id)
            .collect()
    }

    /// HEALTHY and its volumes take new data (blocks, containers, replicas go there).
    pub fn accepts_data(&self, id: u64) -> bool {
        self.nodes
            .get(&id)
            .is_some_and(|n| n.health == NodeHealth::Healthy && n.usage.accepts_data())
    }

    /// Whether every volume of `id` was reported failed.
    pub fn all_volumes_failed(&self, id: u64) -> bool {
        self.nodes.get(&id).is_some_and(|n| n.usage.all_failed())
    }

    /// Ids of HEALTHY nodes, ascending.
    pub fn healthy_ids(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.health == NodeHealth::Healthy)
            .map(|n| n.details.id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dn(id: u64) -> Datanode {
        Datanode {
            id,
            hostname: format!("dn{id}"),
            container_addr: "a:1".into(),
            raft_addr: "a:2".into(),
            replication_addr: "a:3".into(),
        }
    }

    #[test]
    fn health_follows_silence_boundaries() {
        let (s, d) = (Duration::from_secs(10), Duration::from_secs(30));
        assert_eq!(health_after(Duration::ZERO, s, d), NodeHealth::Healthy);
        assert_eq!(
            health_after(Duration::from_secs(9), s, d),
            NodeHealth::Healthy
        );
        assert_eq!(health_after(s, s, d), NodeHealth::Stale);
        assert_eq!(
            health_after(Duration::from_secs(29), s, d),
            NodeHealth::Stale
        );
        assert_eq!(health_after(d, s, d), NodeHealth::Dead);
    }

    #[test]
    fn nodes_go_stale_then_dead_and_dead_must_register_again() {
        let (s, d) = (Duration::from_secs(10), Duration::from_secs(30));
        let t0 = Instant::now();
        let mut r = NodeRegistry::default();
        assert_eq!(r.heartbeat(1, None, t0), Heard::MustRegister);
        assert!(r.register(dn(1), NodeUsage::default(), t0));
        assert!(r
            .update_health(t0 + Duration::from_secs(5), s, d)
            .is_empty());
        let t = r.update_health(t0 + Duration::from_secs(11), s, d);
        assert_eq!(
            t,
            vec![Transition {
                id: 1,
                from: NodeHealth::Healthy,
                to: NodeHealth::Stale
            }]
        );
        // A heartbeat of a stale node makes it healthy again.
        assert_eq!(
            r.heartbeat(1, None, t0 + Duration::from_secs(12)),
            Heard::Known
        );
        assert!(r.is_healthy(1));
        let t = r.update_health(t0 + Duration::from_secs(50), s, d);
        assert_eq!(t[0].to, NodeHealth::Dead);
        assert_eq!(
            r.heartbeat(1, None, t0 + Duration::from_secs(51)),
            Heard::MustRegister
        );
        assert_eq!(r.health(1), Some(NodeHealth::Dead));
        assert!(!r.register(dn(1), NodeUsage::default(), t0 + Duration::from_secs(52)));
        assert!(r.is_healthy(1));
        assert_eq!(r.healthy_ids(), vec![1]);
    }

    /// A leader taking over keeps the last judged health, counts silence from the takeover,
    /// and asks a taken-over node to register (its reports) while keeping it usable.
    #[test]
    fn taken_over_nodes_stay_usable_until_silent_and_must_register() {
        let (s, d) = (Duration::from_secs(10), Duration::from_secs(30));
        let t0 = Instant::now();
        let mut r = NodeRegistry::default();
        r.seed(dn(1), NodeHealth::Healthy, t0);
        r.seed(dn(2), NodeHealth::Stale, t0);
        r.seed(dn(3), NodeHealth::Dead, t0);
        assert_eq!(r.healthy_ids(), vec![1]);
        assert!(!r.all_healthy_confirmed());
        // Alive, so usable, but unconfirmed: register again.
        assert_eq!(
            r.heartbeat(2, None, t0 + Duration::from_secs(1)),
            Heard::MustRegister
        );
        assert_eq!(r.healthy_ids(), vec![1, 2]);
        assert_eq!(
            r.heartbeat(3, None, t0 + Duration::from_secs(1)),
            Heard::MustRegister
        );
        assert_eq!(r.health(3), Some(NodeHealth::Dead));
        // Node 1 never heard from: STALE after the silence, counted from the takeover.
        let t = r.update_health(t0 + Duration::from_secs(10), s, d);
        assert_eq!(t.len(), 1, "{t:?}");
        assert_eq!((t[0].id, t[0].to), (1, NodeHealth::Stale));
        assert!(!r.all_healthy_confirmed(), "2 is healthy and unconfirmed");
        r.register(dn(2), NodeUsage::default(), t0 + Duration::from_secs(11));
        assert!(r.all_healthy_confirmed());
        assert_eq!(r.confirmed_healthy_ids(), vec![2]);
        assert_eq!(
            r.heartbeat(2, None, t0 + Duration::from_secs(12)),
            Heard::Known
        );
    }

    /// Placement follows the volumes: none reported yet (taken over) or one writable takes
    /// data; all failed or full takes none; all failed also closes the node's pipelines.
    #[test]
    fn failed_or_full_volumes_take_no_new_data() {
        let u = |volumes, failed_volumes, writable_volumes| NodeUsage {
            volumes,
            failed_volumes,
            writable_volumes,
            ..NodeUsage::default()
        };
        assert!(u(0, 0, 0).accepts_data() && !u(0, 0, 0).all_failed());
        assert!(u(2, 1, 1).accepts_data() && !u(2, 1, 1).all_failed());
        assert!(!u(2, 0, 0).accepts_data() && !u(2, 0, 0).all_failed());
        assert!(!u(2, 2, 0).accepts_data() && u(2, 2, 0).all_failed());
        let mut r = NodeRegistry::default();
        let now = Instant::now();
        r.register(dn(1), u(1, 0, 1), now);
        r.register(dn(2), u(1, 1, 0), now);
        r.register(dn(3), u(1, 0, 0), now);
        assert_eq!(r.placeable_ids(), vec![1]);
        assert!(r.accepts_data(1) && !r.accepts_data(2) && !r.accepts_data(3));
        assert!(r.all_volumes_failed(2) && !r.all_volumes_failed(3));
    }
}
