//! What the datanode reports on `/ready` and `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use rozone_telemetry::health::{metric, HealthSource};

use crate::node::NodeRef;
use crate::scm::LinkStatus;
use crate::types::ContainerState;

pub struct DatanodeHealth {
    pub node: NodeRef,
    pub link: Arc<LinkStatus>,
}

impl HealthSource for DatanodeHealth {
    /// Ready once registered with the SCM leader.
    fn ready(&self) -> Result<(), String> {
        if self.link.registered.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("not registered with the SCM yet".into())
        }
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        let Some(node) = self.node.get() else {
            return out;
        };
        let ds = node.store.descriptors();
        for (name, st) in [
            ("open", ContainerState::Open),
            ("closing", ContainerState::Closing),
            ("quasi_closed", ContainerState::QuasiClosed),
            ("closed", ContainerState::Closed),
            ("unhealthy", ContainerState::Unhealthy),
        ] {
            metric(
                &mut out,
                &format!("rozone_datanode_containers_{name}"),
                "gauge",
                &format!("container replicas in state {name}"),
                ds.iter().filter(|d| d.state == st).count(),
            );
        }
        let ps = node.pipelines.all();
        metric(
            &mut out,
            "rozone_datanode_pipelines",
            "gauge",
            "pipelines this datanode is a member of",
            ps.len(),
        );
        metric(
            &mut out,
            "rozone_datanode_pipelines_unhealthy",
            "gauge",
            "pipelines marked unhealthy (waiting for SCM to close them)",
            ps.iter().filter(|p| !p.state.is_healthy()).count(),
        );
        metric(
            &mut out,
            "rozone_datanode_pipelines_leading",
            "gauge",
            "pipelines this datanode leads",
            ps.iter().filter(|p| p.group.is_ready_leader()).count(),
        );
        let (mut cap, mut used, mut rem) = (0u64, 0u64, 0u64);
        // Cached statvfs readings; a full volume may probe: off the async worker.
        for (c, u, r) in crate::store::offload(|| {
            node.store
                .volumes()
                .iter()
                .map(|v| v.space())
                .collect::<Vec<_>>()
        }) {
            cap += c;
            used += u;
            rem += r;
        }
        metric(
            &mut out,
            "rozone_datanode_capacity_bytes",
            "gauge",
            "capacity of all data directories",
            cap,
        );
        metric(
            &mut out,
            "rozone_datanode_used_bytes",
            "gauge",
            "bytes used by containers",
            used,
        );
        metric(
            &mut out,
            "rozone_datanode_remaining_bytes",
            "gauge",
            "bytes still free for containers",
            rem,
        );
        metric(
            &mut out,
            "rozone_datanode_scm_heartbeats_total",
            "counter",
            "heartbeats the SCM answered",
            self.link.heartbeats.load(Ordering::Relaxed),
        );
        metric(
            &mut out,
            "rozone_datanode_scm_heartbeat_failures_total",
            "counter",
            "heartbeats that failed (any SCM)",
            self.link.failures.load(Ordering::Relaxed),
        );
        out
    }
}
