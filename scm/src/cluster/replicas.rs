//! The replica map: which datanode holds which container replica, in what state, from full
//! and incremental container reports. Leader-only and in memory.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// State of one replica as its datanode reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReplicaState {
    Open,
    Closing,
    QuasiClosed,
    Closed,
    Unhealthy,
}

/// A replica's content digest as its datanode reports it: a running digest over its
/// committed blocks. Two digests say anything about each other only within one rule
/// `version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    pub version: u32,
    pub sum: u64,
}

/// One reported replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub datanode: u64,
    pub state: ReplicaState,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub origin_pipeline: u64,
    /// `None` from a datanode that does not report digests.
    pub digest: Option<Digest>,
    pub last_seen: Instant,
}

/// One entry of a report: `state == None` means the replica is gone (incremental only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaReport {
    pub container_id: u64,
    pub state: Option<ReplicaState>,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub origin_pipeline: u64,
    pub digest: Option<Digest>,
}

#[derive(Debug, Default)]
pub struct ReplicaMap {
    by_container: BTreeMap<u64, BTreeMap<u64, Replica>>,
    by_datanode: BTreeMap<u64, BTreeSet<u64>>,
}

impl ReplicaMap {
    fn put(&mut self, dn: u64, r: &ReplicaReport, now: Instant) {
        let Some(state) = r.state else {
            self.remove(r.container_id, dn);
            return;
        };
        self.by_container.entry(r.container_id).or_default().insert(
            dn,
            Replica {
                datanode: dn,
                state,
                bcsid: r.bcsid,
                block_count: r.block_count,
                used_bytes: r.used_bytes,
                origin_pipeline: r.origin_pipeline,
                digest: r.digest,
                last_seen: now,
            },
        );
        self.by_datanode
            .entry(dn)
            .or_default()
            .insert(r.container_id);
    }

    /// Replaces everything known about `dn` with a full report; returns the containers
    /// whose replicas changed (including ones that vanished from the datanode).
    pub fn full_report(&mut self, dn: u64, report: &[ReplicaReport], now: Instant) -> Vec<u64> {
        let mut touched: BTreeSet<u64> = self.by_datanode.get(&dn).cloned().unwrap_or_default();
        self.remove_datanode(dn);
        for r in report.iter().filter(|r| r.state.is_some()) {
            self.put(dn, r, now);
            touched.insert(r.container_id);
        }
        touched.into_iter().collect()
    }

    /// Applies changes reported by `dn` since its last heartbeat.
    pub fn incremental_report(&mut self, dn: u64, report: &[ReplicaReport], now: Instant) {
        for r in report {
            self.put(dn, r, now);
        }
    }

    pub fn remove(&mut self, container: u64, dn: u64) {
        if let Some(m) = self.by_container.get_mut(&container) {
            m.remove(&dn);
            if m.is_empty() {
                self.by_container.remove(&container);
            }
        }
        if let Some(s) = self.by_datanode.get_mut(&dn) {
            s.remove(&container);
            if s.is_empty() {
                self.by_datanode.remove(&dn);
            }
        }
    }

    /// Forgets every replica of `dn` (it died, or sends a full report).
    pub fn remove_datanode(&mut self, dn: u64) {
        for c in self.by_datanode.remove(&dn).unwrap_or_default() {
            if let Some(m) = self.by_container.get_mut(&c) {
                m.remove(&dn);
                if m.is_empty() {
                    self.by_container.remove(&c);
                }
            }
        }
    }

    /// Replicas of `container`, by datanode id.
    pub fn replicas(&self, container: u64) -> Vec<Replica> {
        self.by_container
            .get(&container)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn replica(&self, container: u64, dn: u64) -> Option<&Replica> {
        self.by_container.get(&container)?.get(&dn)
    }

    /// How many replicas `dn` holds.
    pub fn count_on(&self, dn: u64) -> usize {
        self.by_datanode.get(&dn).map_or(0, BTreeSet::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(c: u64, state: Option<ReplicaState>, bcsid: u64) -> ReplicaReport {
        ReplicaReport {
            container_id: c,
            state,
            bcsid,
            block_count: 1,
            used_bytes: 10,
            origin_pipeline: 1,
            digest: None,
        }
    }

    #[test]
    fn full_report_replaces_incremental_updates_and_deletes() {
        let now = Instant::now();
        let mut m = ReplicaMap::default();
        m.full_report(
            1,
            &[
                rep(10, Some(ReplicaState::Open), 1),
                rep(11, Some(ReplicaState::Closed), 5),
            ],
            now,
        );
        m.full_report(2, &[rep(10, Some(ReplicaState::Open), 1)], now);
        assert_eq!(m.replicas(10).len(), 2);
        assert_eq!(m.count_on(1), 2);
        m.incremental_report(
            1,
            &[rep(10, Some(ReplicaState::Closed), 3), rep(11, None, 0)],
            now,
        );
        assert_eq!(m.replica(10, 1).unwrap().state, ReplicaState::Closed);
        assert_eq!(m.replica(10, 1).unwrap().bcsid, 3);
        assert!(m.replicas(11).is_empty());
        // A full report that no longer lists container 10 drops it from the datanode.
        let touched = m.full_report(1, &[rep(12, Some(ReplicaState::Closed), 1)], now);
        assert_eq!(touched, vec![10, 12]);
        assert!(m.replica(10, 1).is_none());
        assert_eq!(m.replicas(10).len(), 1);
        m.remove_datanode(2);
        assert!(m.replicas(10).is_empty());
        assert_eq!(m.count_on(2), 0);
    }
}
