//! What the SCM reports on `/ready` and `/metrics`.

use std::sync::Arc;

use rozone_raft::RaftGroup;
use rozone_telemetry::health::{metric, HealthSource};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::node::ScmNode;
use crate::state::ScmLogic;

pub struct ScmHealth {
    pub group: Arc<RaftGroup<ScmLogic>>,
    pub node: Arc<ScmNode>,
}

/// The SCM's own counters and, on the leader, gauges of its in-memory view.
fn scm_metrics(node: &ScmNode, out: &mut String) {
    let c = &node.counters;
    let counters: [(&str, &str, &AtomicU64); 13] = [
        (
            "rozone_scm_datanode_registrations_total",
            "datanode registrations",
            &c.registrations,
        ),
        (
            "rozone_scm_heartbeats_total",
            "datanode heartbeats processed",
            &c.heartbeats,
        ),
        (
            "rozone_scm_commands_sent_total",
            "commands delivered in heartbeat replies",
            &c.commands_sent,
        ),
        (
            "rozone_scm_blocks_allocated_total",
            "blocks allocated",
            &c.blocks_allocated,
        ),
        (
            "rozone_scm_containers_created_total",
            "containers opened",
            &c.containers_created,
        ),
        (
            "rozone_scm_containers_closed_total",
            "containers moved to CLOSING",
            &c.containers_closed,
        ),
        (
            "rozone_scm_containers_closed_empty_total",
            "CLOSING containers no replica ever wrote, closed as empty",
            &c.containers_closed_empty,
        ),
        (
            "rozone_scm_pipelines_created_total",
            "pipelines created",
            &c.pipelines_created,
        ),
        (
            "rozone_scm_pipelines_closed_total",
            "pipelines closed",
            &c.pipelines_closed,
        ),
        (
            "rozone_scm_replicate_commands_total",
            "ReplicationManager replicate commands",
            &c.replicate_commands,
        ),
        (
            "rozone_scm_delete_container_commands_total",
            "ReplicationManager delete commands",
            &c.delete_container_commands,
        ),
        (
            "rozone_scm_deleted_block_txns_done_total",
            "deleted-block transactions executed everywhere",
            &c.deleted_block_txns_done,
        ),
        (
            "rozone_scm_replication_manager_runs_total",
            "ReplicationManager passes",
            &c.rm_runs,
        ),
    ];
    for (name, help, v) in counters {
        metric(out, name, "counter", help, v.load(Ordering::Relaxed));
    }
    let Some(g) = node.peek(|m| {
        let mut by = [0u64; 3];
        for n in m.nodes.all() {
            by[n.health as usize] += 1;
        }
        let (adds, deletes) = m.inflight_counts();
        (
            by,
            m.safe_mode.in_safe_mode,
            adds,
            deletes,
            m.rm.under.len(),
            m.rm.over.len(),
            m.rm.missing.len(),
        )
    }) else {
        return;
    };
    let (by, safe, adds, deletes, under, over, missing) = g;
    for (i, h) in ["healthy", "stale", "dead"].iter().enumerate() {
        metric(
            out,
            &format!("rozone_scm_datanodes_{h}"),
            "gauge",
            &format!("{h} datanodes"),
            by[i],
        );
    }
    metric(
        out,
        "rozone_scm_safe_mode",
        "gauge",
        "1 while the leader is in safe mode",
        u8::from(safe),
    );
    metric(
        out,
        "rozone_scm_replication_inflight_adds",
        "gauge",
        "replicate commands in flight",
        adds,
    );
    metric(
        out,
        "rozone_scm_replication_inflight_deletes",
        "gauge",
        "delete commands in flight",
        deletes,
    );
    metric(
        out,
        "rozone_scm_containers_under_replicated",
        "gauge",
        "at the last ReplicationManager pass",
        under,
    );
    metric(
        out,
        "rozone_scm_containers_over_replicated",
        "gauge",
        "at the last ReplicationManager pass",
        over,
    );
    metric(
        out,
        "rozone_scm_containers_missing",
        "gauge",
        "at the last ReplicationManager pass",
        missing,
    );
}

impl HealthSource for ScmHealth {
    /// Ready: a leader that applied an entry of its term, or a member that knows such a
    /// leader and heard from it.
    fn ready(&self) -> Result<(), String> {
        self.group.serving()
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        for x in self.group.samples("SCM") {
            metric(&mut out, x.name, x.kind, &x.help, x.value);
        }
        scm_metrics(&self.node, &mut out);
        out
    }
}
