//! What the SCM reports on `/ready` and `/metrics`.

use std::sync::Arc;

use rozone_raft::{RaftGroup, ServerState};
use rozone_telemetry::http::{metric, HealthSource};

use crate::state::ScmLogic;

pub struct ScmHealth {
    pub group: Arc<RaftGroup<ScmLogic>>,
}

impl HealthSource for ScmHealth {
    /// Ready: a leader that applied an entry of its term, or a member that knows such a
    /// leader and heard from it.
    fn ready(&self) -> Result<(), String> {
        let m = self.group.metrics();
        match m.state {
            ServerState::Leader if self.group.is_ready_leader() => Ok(()),
            ServerState::Leader => Err("leader has not applied an entry of its term yet".into()),
            ServerState::Follower | ServerState::Learner => {
                match (m.current_leader, self.group.leader_contact()) {
                    (Some(l), Some(c)) if c.leader == l => Ok(()),
                    _ => Err("no leader known".into()),
                }
            }
            other => Err(format!("{other:?}, no leader")),
        }
    }

    fn metrics(&self) -> String {
        let m = self.group.metrics();
        let mut out = String::new();
        let leader = u8::from(m.state == ServerState::Leader);
        metric(
            &mut out,
            "rozone_raft_is_leader",
            "gauge",
            "1 if this SCM leads its ring",
            leader,
        );
        metric(
            &mut out,
            "rozone_raft_leader_ready",
            "gauge",
            "1 if this SCM leads and applied an entry of its term",
            u8::from(self.group.is_ready_leader()),
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
        let s = self.group.snapshot_stats();
        metric(
            &mut out,
            "rozone_raft_snapshot_download_failures_total",
            "counter",
            "checkpoint downloads or verifications that failed",
            s.download_failures,
        );
        metric(
            &mut out,
            "rozone_raft_snapshot_installs_total",
            "counter",
            "snapshots installed from a leader",
            s.installs,
        );
        if let Some(c) = self.group.leader_contact() {
            metric(
                &mut out,
                "rozone_raft_leader_contact_age_seconds",
                "gauge",
                "time since the last accepted append from the leader",
                c.age().as_secs_f64(),
            );
        }
        out
    }
}
