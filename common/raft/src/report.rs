//! What a replicated daemon reports about its Raft group on `/ready` and `/metrics`: one
//! definition for every ring (SCM, OM), rendered by the daemon's HTTP endpoint.

use crate::contact::leader_ready;
use crate::gate;
use crate::group::RaftGroup;
use crate::state_machine::StateMachineLogic;
use crate::ServerState;

/// One Prometheus sample: the daemon renders it (rozone-telemetry's `metric`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: &'static str,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    pub help: String,
    pub value: f64,
}

impl<L: StateMachineLogic> RaftGroup<L> {
    /// Whether this member can serve its ring now: a leader that applied an entry of its
    /// term and holds its lease (a quorum acknowledged it recently), or a follower/learner that
    /// knows its leader and has heard from it in that leader's term. `Err` says why not, for
    /// `/ready`.
    pub fn serving(&self) -> Result<(), String> {
        let m = self.metrics();
        match m.state {
            ServerState::Leader => gate::leader(&self.leader_input(&m))
                .map_err(|r| format!("leader without a lease: {r}")),
            ServerState::Follower | ServerState::Learner => {
                match (m.current_leader, self.leader_contact()) {
                    (Some(l), Some(c)) if c.leader == l && c.term == m.current_term => Ok(()),
                    _ => Err("no leader known".into()),
                }
            }
            other => Err(format!("{other:?}, no leader")),
        }
    }

    /// The `rozone_raft_*` samples of this member; `ring` names it in help texts ("SCM").
    pub fn samples(&self, ring: &str) -> Vec<Sample> {
        let m = self.metrics();
        let s = self.snapshot_stats();
        let sample = |name, kind, help: String, value: f64| Sample {
            name,
            kind,
            help,
            value,
        };
        let mut v = vec![
            sample(
                "rozone_raft_is_leader",
                "gauge",
                format!("1 if this {ring} leads its ring"),
                f64::from(u8::from(m.state == ServerState::Leader)),
            ),
            sample(
                "rozone_raft_leader_ready",
                "gauge",
                format!("1 if this {ring} leads and applied an entry of its term"),
                f64::from(u8::from(leader_ready(&m))),
            ),
            sample(
                "rozone_raft_term",
                "gauge",
                "current Raft term".into(),
                m.current_term as f64,
            ),
            sample(
                "rozone_raft_last_log_index",
                "gauge",
                "index of the last log entry".into(),
                m.last_log_index.unwrap_or(0) as f64,
            ),
            sample(
                "rozone_raft_applied_index",
                "gauge",
                "index of the last applied entry".into(),
                m.last_applied.map(|l| l.index()).unwrap_or(0) as f64,
            ),
            sample(
                "rozone_raft_snapshot_index",
                "gauge",
                "index covered by the newest snapshot".into(),
                m.snapshot.map(|l| l.index()).unwrap_or(0) as f64,
            ),
            sample(
                "rozone_raft_snapshot_download_failures_total",
                "counter",
                "checkpoint downloads or verifications that failed".into(),
                s.download_failures as f64,
            ),
            sample(
                "rozone_raft_snapshot_installs_total",
                "counter",
                "snapshots installed from a leader".into(),
                s.installs as f64,
            ),
        ];
        let (hits, entries) = self.retry_cache_stats();
        v.push(sample(
            "rozone_raft_retry_cache_hits_total",
            "counter",
            "retried client writes answered from the retry cache instead of applied again".into(),
            hits as f64,
        ));
        v.push(sample(
            "rozone_raft_retry_cache_entries",
            "gauge",
            "client writes remembered in the retry cache".into(),
            entries as f64,
        ));
        if m.state == ServerState::Leader {
            v.push(sample(
                "rozone_raft_lease_held",
                "gauge",
                format!("1 if this {ring} leads and holds its leader lease (may serve reads)"),
                f64::from(u8::from(gate::leader(&self.leader_input(&m)).is_ok())),
            ));
            if let Some(age) = self.leader_input(&m).quorum_ack_age {
                v.push(sample(
                    "rozone_raft_quorum_ack_age_seconds",
                    "gauge",
                    "time since the send time of the newest append a quorum acknowledged".into(),
                    age.as_secs_f64(),
                ));
            }
        }
        if let Some(c) = self.leader_contact() {
            v.push(sample(
                "rozone_raft_leader_contact_age_seconds",
                "gauge",
                "time since the last accepted append from the leader".into(),
                c.age().as_secs_f64(),
            ));
        }
        v
    }
}
