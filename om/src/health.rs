//! What the OM reports on `/ready` and `/metrics`: Raft state, and the OM's own counters
//! (reads per consistency, LOCAL_LEASE successes and every refusal reason, writes, SCM
//! errors, cleanup).

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rozone_proto::om::ReadConsistency;
use rozone_raft::ServerState;
use rozone_telemetry::http::{metric, HealthSource};

use crate::lease;
use crate::node::OmNode;

pub struct OmHealth {
    pub node: Arc<OmNode>,
}

fn labelled(out: &mut String, name: &str, help: &str, label: &str, rows: &[(&str, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (v, n) in rows {
        let _ = writeln!(out, "{name}{{{label}=\"{v}\"}} {n}");
    }
}

impl HealthSource for OmHealth {
    /// Ready: a leader that applied an entry of its term, or a member that knows such a
    /// leader and heard from it.
    fn ready(&self) -> Result<(), String> {
        let g = &self.node.group;
        let m = g.metrics();
        match m.state {
            ServerState::Leader if g.is_ready_leader() => Ok(()),
            ServerState::Leader => Err("leader has not applied an entry of its term yet".into()),
            ServerState::Follower | ServerState::Learner => {
                match (m.current_leader, g.leader_contact()) {
                    (Some(l), Some(c)) if c.leader == l => Ok(()),
                    _ => Err("no leader known".into()),
                }
            }
            other => Err(format!("{other:?}, no leader")),
        }
    }

    fn metrics(&self) -> String {
        let g = &self.node.group;
        let m = g.metrics();
        let mut out = String::new();
        metric(
            &mut out,
            "rozone_raft_is_leader",
            "gauge",
            "1 if this OM leads its ring",
            u8::from(m.state == ServerState::Leader),
        );
        metric(
            &mut out,
            "rozone_raft_leader_ready",
            "gauge",
            "1 if this OM leads and applied an entry of its term",
            u8::from(g.is_ready_leader()),
        );
        metric(
            &mut out,
            "rozone_raft_term",
            "gauge",
            "current Raft term",
            m.current_term,
        );
        metric(
            &mut out,
            "rozone_raft_last_log_index",
            "gauge",
            "index of the last log entry",
            m.last_log_index.unwrap_or(0),
        );
        metric(
            &mut out,
            "rozone_raft_applied_index",
            "gauge",
            "index of the last applied entry",
            m.last_applied.map(|l| l.index()).unwrap_or(0),
        );
        metric(
            &mut out,
            "rozone_raft_snapshot_index",
            "gauge",
            "index covered by the newest snapshot",
            m.snapshot.map(|l| l.index()).unwrap_or(0),
        );
        if let Some(c) = g.leader_contact() {
            metric(
                &mut out,
                "rozone_raft_leader_contact_age_seconds",
                "gauge",
                "time since the last accepted append from the leader",
                c.age().as_secs_f64(),
            );
        }
        let c = &self.node.metrics;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        metric(
            &mut out,
            "rozone_om_lease_reads_served_total",
            "counter",
            "LOCAL_LEASE reads served from this OM's state",
            get(&c.lease_served),
        );
        let reasons: Vec<(&str, u64)> = lease::Refused::ALL
            .iter()
            .map(|r| (r.label(), get(&c.lease_refused[r.index()])))
            .chain([("disabled", get(&c.lease_disabled))])
            .collect();
        labelled(
            &mut out,
            "rozone_om_lease_reads_refused_total",
            "LOCAL_LEASE reads refused, by reason",
            "reason",
            &reasons,
        );
        let reads: Vec<(&str, u64)> = [
            ReadConsistency::Default,
            ReadConsistency::LinearizableLeaderOnly,
            ReadConsistency::LinearizableAllowFollower,
            ReadConsistency::LocalLease,
        ]
        .iter()
        .map(|k| (k.as_str_name(), get(&c.reads[*k as usize])))
        .collect();
        labelled(
            &mut out,
            "rozone_om_reads_total",
            "reads asked for, by read consistency",
            "consistency",
            &reads,
        );
        metric(
            &mut out,
            "rozone_om_writes_total",
            "counter",
            "writes proposed to the ring",
            get(&c.writes),
        );
        metric(
            &mut out,
            "rozone_om_requests_refused_not_leader_total",
            "counter",
            "requests refused because this OM is not a ready leader",
            get(&c.writes_refused),
        );
        metric(
            &mut out,
            "rozone_om_scm_errors_total",
            "counter",
            "block allocations the SCM did not serve",
            get(&c.scm_errors),
        );
        metric(
            &mut out,
            "rozone_om_open_keys_expired_total",
            "counter",
            "expired open keys removed by this OM as leader",
            get(&c.open_keys_expired),
        );
        metric(
            &mut out,
            "rozone_om_blocks_deleted_total",
            "counter",
            "blocks handed to the SCM for deletion by this OM as leader",
            get(&c.blocks_deleted),
        );
        out
    }
}
