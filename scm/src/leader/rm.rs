//! One ReplicationManager pass on the leader: judge every CLOSED / QUASI_CLOSED container
//! with [`crate::cluster::replication::decide`] and send what it decided (replicate to new
//! targets with the best sources first, delete the worst replicas, force-close a quasi-closed
//! majority); re-send close commands for CLOSING containers; delete empty CLOSED containers
//! ([`super::deleting`]); close as empty the CLOSING containers no replica ever wrote
//! ([`crate::cluster::closing`]); end in-flight commands that finished or timed out.

use std::collections::HashMap;
use std::time::Instant;

use crate::cluster::commands::DatanodeCommand;
use crate::cluster::replicas::ReplicaState;
use crate::cluster::replication::{Decision, Verdict};
use crate::cluster::{ClusterState, Inflight};
use crate::error::ScmError;
use crate::leader::deleting::Transitions;
use crate::leader::types::RmStatus;
use crate::node::{Counters, ScmNode};
use crate::state::{read, ContainerEvent, ContainerState, ScmRequest, ScmResponse};

/// Ids listed per problem kind in the status.
const LISTED: usize = 100;

impl ScmNode {
    pub async fn run_replication_manager(&self) -> Result<(), ScmError> {
        let started = Instant::now();
        let containers = read::containers(&self.group.db(), None)?;
        let pending = read::containers_with_pending_deletes(&self.group.db())?;
        let timeout = self.cfg.replication_inflight_timeout;
        let members = self.closing_pipeline_members(&containers)?;
        let mut closing = Vec::new();
        let mut deletions = Transitions::default();
        let unwritten = {
            let mut m = self.lead()?;
            if m.safe_mode.in_safe_mode {
                return Ok(());
            }
            let now = Instant::now();
            // Finished in-flight work: the target holds a healthy copy, or the deleted
            // replica is gone; or it timed out.
            let mut timed_out = 0;
            let keys: Vec<u64> = m.inflight.keys().copied().collect();
            for id in keys {
                let c = containers.iter().find(|c| c.id == id);
                let replicas = m.replicas.replicas(id);
                let Some(v) = m.inflight.get_mut(&id) else {
                    continue;
                };
                v.retain(|i| {
                    let present = replicas.iter().find(|r| r.datanode == i.datanode);
                    let done = match (i.add, present) {
                        (true, Some(r)) => {
                            r.state == ReplicaState::Closed && c.is_some_and(|c| r.bcsid >= c.bcsid)
                        }
                        (true, None) => false,
                        (false, p) => p.is_none(),
                    };
                    if !done && now >= i.deadline {
                        timed_out += 1;
                    }
                    !done && now < i.deadline
                });
                if v.is_empty() {
                    m.inflight.remove(&id);
                }
            }
            m.rm.timeouts += timed_out;
            let (mut healthy, mut under, mut over, mut missing) = (0, vec![], vec![], vec![]);
            for c in &containers {
                if c.state == ContainerState::Closing {
                    closing.push(c.id);
                    continue;
                }
                if self.deletion_step(&mut m, c, &pending, now + timeout, &mut deletions) {
                    continue;
                }
                let (d, _) = m.judge(c);
                match d.verdict() {
                    Verdict::Healthy => healthy += 1,
                    Verdict::UnderReplicated => under.push(c.id),
                    Verdict::OverReplicated => over.push(c.id),
                    Verdict::Missing => missing.push(c.id),
                    Verdict::NotChecked => {}
                }
                self.enact_decision(&mut m, c.id, &d, now + timeout);
            }
            let st = &mut m.rm;
            st.healthy = healthy;
            st.under = under;
            st.over = over;
            st.missing = missing;
            st.runs += 1;
            st.last_run = Some(now);
            m.resolve_closing(&containers, &members, now, timeout)
        };
        for id in closing.iter().filter(|id| !unwritten.contains(id)) {
            self.send_close_commands(*id, false)?;
        }
        self.close_unwritten(unwritten).await?;
        self.replicate_deletions(deletions).await?;
        let mut m = self.lead()?;
        m.rm.last_duration = started.elapsed();
        Counters::add(&self.counters.rm_runs, 1);
        Ok(())
    }

    /// Pipeline id → members, for the CLOSING containers among `containers`.
    fn closing_pipeline_members(
        &self,
        containers: &[crate::state::ContainerInfo],
    ) -> Result<HashMap<u64, Vec<u64>>, ScmError> {
        let db = self.group.db();
        let mut out = HashMap::new();
        for c in containers
            .iter()
            .filter(|c| c.state == ContainerState::Closing)
        {
            if let std::collections::hash_map::Entry::Vacant(e) = out.entry(c.pipeline_id) {
                if let Some(p) = read::pipeline(&db, c.pipeline_id)? {
                    e.insert(p.members);
                }
            }
        }
        Ok(out)
    }

    /// Closes as empty the CLOSING containers [`crate::cluster::closing::resolve`] found
    /// never written: usage 0 (a chunk write without a committed block may have raised
    /// it), then CLOSED; the empty-container deletion takes them from there. The usage
    /// write refuses to lower a BCSID, so a replica report with data that arrived since the
    /// pass looked keeps the container CLOSING.
    async fn close_unwritten(&self, ids: Vec<u64>) -> Result<(), ScmError> {
        for id in ids {
            let r = self
                .write(ScmRequest::UpdateContainerUsage {
                    id,
                    used_bytes: 0,
                    key_count: 0,
                    bcsid: 0,
                })
                .await?;
            if !matches!(r, ScmResponse::UsageUpdated { .. }) {
                tracing::warn!(container = id, response = ?r, "closing an unwritten container: usage not reset");
                continue;
            }
            let r = self
                .write(ScmRequest::UpdateContainer {
                    id,
                    event: ContainerEvent::Close,
                })
                .await?;
            if let ScmResponse::ContainerUpdated { state, .. } = r {
                Counters::add(&self.counters.containers_closed_empty, 1);
                tracing::info!(container = id, %state, "CLOSING container no replica ever wrote closed as empty");
            } else {
                tracing::warn!(container = id, response = ?r, "closing an unwritten container refused");
            }
        }
        Ok(())
    }

    fn enact_decision(&self, m: &mut ClusterState, id: u64, d: &Decision, deadline: Instant) {
        if !d.replicate_to.is_empty() {
            let sources = m.nodes.details_of(&d.sources);
            for t in &d.replicate_to {
                let command_id = m.commands.push(
                    *t,
                    DatanodeCommand::ReplicateContainer {
                        container_id: id,
                        sources: sources.clone(),
                    },
                );
                m.inflight.entry(id).or_default().push(Inflight {
                    add: true,
                    datanode: *t,
                    command_id,
                    deadline,
                });
                m.rm.replicate_sent += 1;
                Counters::add(&self.counters.replicate_commands, 1);
                tracing::info!(container = id, target = t, sources = ?d.sources, "replicating under-replicated container");
            }
        }
        for dn in &d.delete {
            let command_id = m.commands.push(
                *dn,
                DatanodeCommand::DeleteContainer {
                    container_id: id,
                    force: true,
                },
            );
            m.inflight.entry(id).or_default().push(Inflight {
                add: false,
                datanode: *dn,
                command_id,
                deadline,
            });
            m.rm.delete_sent += 1;
            Counters::add(&self.counters.delete_container_commands, 1);
            tracing::info!(
                container = id,
                datanode = dn,
                "deleting excess or unhealthy replica"
            );
        }
        for dn in &d.force_close {
            m.commands.push_once(
                *dn,
                DatanodeCommand::CloseContainer {
                    container_id: id,
                    pipeline_id: 0,
                    force: true,
                },
            );
        }
    }

    /// ReplicationManager status for the admin RPC.
    pub fn replication_status(&self) -> Result<RmStatus, ScmError> {
        let m = self.lead()?;
        let (adds, deletes) = m.inflight_counts();
        let s = &m.rm;
        let list = |v: &Vec<u64>| v.iter().copied().take(LISTED).collect::<Vec<u64>>();
        Ok(RmStatus {
            healthy: s.healthy,
            under_replicated: s.under.len() as u64,
            over_replicated: s.over.len() as u64,
            missing: s.missing.len() as u64,
            inflight_adds: adds,
            inflight_deletes: deletes,
            runs: s.runs,
            last_run_age_ms: s.last_run.map(|t| t.elapsed().as_millis() as u64),
            last_run_duration_ms: s.last_duration.as_millis() as u64,
            under_replicated_containers: list(&s.under),
            over_replicated_containers: list(&s.over),
            missing_containers: list(&s.missing),
            replicate_commands_sent: s.replicate_sent,
            delete_commands_sent: s.delete_sent,
            inflight_timeouts: s.timeouts,
        })
    }
}
