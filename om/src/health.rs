//! What the OM reports on `/ready` and `/metrics`: Raft state, and the OM's own counters
//! (reads per consistency, LOCAL_LEASE successes and every refusal reason, writes, SCM
//! errors, cleanup).

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rozone_proto::om::ReadConsistency;
use rozone_telemetry::health::{metric, HealthSource};

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
        self.node.group.serving()
    }

    fn metrics(&self) -> String {
        let mut out = String::new();
        for x in self.node.group.samples("OM") {
            metric(&mut out, x.name, x.kind, &x.help, x.value);
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
        let reasons: Vec<(&str, u64)> = rozone_raft::gate::Refused::ALL
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
            "rozone_om_s3_uploads_expired_total",
            "counter",
            "expired multipart uploads aborted by this OM as leader",
            get(&c.s3_uploads_expired),
        );
        metric(
            &mut out,
            "rozone_om_blocks_deleted_total",
            "counter",
            "blocks handed to the SCM for deletion by this OM as leader",
            get(&c.blocks_deleted),
        );
        metric(
            &mut out,
            "rozone_om_deferred_opens_total",
            "counter",
            "keys opened without a log entry (one block, committed with the open in one entry)",
            get(&c.deferred_opens),
        );
        metric(
            &mut out,
            "rozone_om_reserved_blocks_expired_total",
            "counter",
            "blocks fetched ahead that no open took before their reservation expired",
            get(&c.reservations_expired),
        );
        out
    }
}
