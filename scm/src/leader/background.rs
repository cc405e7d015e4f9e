//! The leader's periodic work: node health (HEALTHY → STALE → DEAD), closing pipelines of
//! dead members, creating pipelines, safe mode, the ReplicationManager and delivery of
//! deleted-block transactions, block-token key rotation. Runs on every SCM; does nothing
//! unless it is the ready leader.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::commands::DatanodeCommand;
use crate::cluster::nodes::NodeHealth;
use crate::cluster::replication;
use crate::cluster::safemode::{self, SafeModeEval, SafeModeInput};
use crate::error::ScmError;
use crate::node::ScmNode;
use crate::state::{read, ContainerState, DatanodeRecord, DeletedBlocksTxn};

/// Most deleted-block transactions sent per pass.
const DELETE_BATCH: usize = 1000;

/// How often an elected SCM that is not ready yet looks again.
const BECOMING_READY_POLL: Duration = Duration::from_millis(20);

/// How often the loop wakes: often enough to see a node go stale close to its interval.
pub fn tick_interval(stale_after: Duration) -> Duration {
    (stale_after / 4).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

pub fn spawn(core: Arc<ScmNode>, stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(tick_interval(core.cfg.datanode_stale_after));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_rm: Option<(u64, Instant)> = None;
        let mut last_del: Option<Instant> = None;
        let mut becoming_ready = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
                // Every step of a pass is gated by its own interval or idempotent, so an
                // extra pass only does what is due (at most one is stored while one runs).
                _ = core.wake.notified() => {}
                // Elected but not ready yet (its term's first entry being applied, the first
                // acknowledgements on their way): look again shortly, not a tick later, so a
                // new leader starts its term (and takes registrations) at once.
                _ = tokio::time::sleep(BECOMING_READY_POLL), if becoming_ready => {}
            }
            core.observe_leader();
            if !core.group.is_ready_leader() {
                let v = core.group.ring_view();
                becoming_ready = v.leader_id == Some(v.node_id);
                continue;
            }
            becoming_ready = false;
            if let Err(e) = core.tick(&mut last_rm, &mut last_del).await {
                // Lost leadership mid-way, or a storage error: the next tick retries.
                tracing::debug!(error = %e, "SCM leader background pass stopped");
            }
        }
    })
}

impl ScmNode {
    async fn tick(
        &self,
        last_rm: &mut Option<(u64, Instant)>,
        last_del: &mut Option<Instant>,
    ) -> Result<(), ScmError> {
        // Keys first: an OM cannot hand out tokens (nor a client write) before one exists.
        // A failure here does not hold up the rest of the pass; the next tick retries.
        if let Err(e) = self.rotate_secret_keys().await {
            tracing::warn!(error = %e, "block-token key rotation failed");
        }
        let (term, reports_complete, changed) = {
            let mut m = self.lead()?;
            let now = Instant::now();
            let mut changed = Vec::new();
            for t in m.nodes.update_health(
                now,
                self.cfg.datanode_stale_after,
                self.cfg.datanode_dead_after,
            ) {
                tracing::warn!(datanode = t.id, from = %t.from, to = %t.to, "datanode health changed");
                if t.to == NodeHealth::Dead {
                    m.replicas.remove_datanode(t.id);
                    m.commands.clear(t.id);
                }
                if let Some(n) = m.nodes.get(t.id) {
                    changed.push(DatanodeRecord {
                        datanode: n.details.clone(),
                        health: t.to,
                    });
                }
            }
            (m.term, m.nodes.all_healthy_confirmed(), changed)
        };
        // The ring learns each health change before its consequences (a pipeline closed
        // for a DEAD member), so a next leader never takes such a member for healthy.
        for r in changed {
            self.record_datanode(r).await?;
        }
        self.close_failed_pipelines().await?;
        self.create_pipelines().await?;
        let (eval, _) = self.safe_mode_eval()?;
        let leave = {
            let mut m = self.lead()?;
            m.safe_mode_detail = eval
                .rules
                .iter()
                .filter(|r| !r.satisfied)
                .map(|r| r.detail.clone())
                .collect::<Vec<_>>()
                .join("; ");
            let sm = m.safe_mode;
            // Out of safe mode once the rules hold; a leader that took over (never in safe
            // mode) records its term the same way.
            (sm.in_safe_mode && eval.satisfied()) || (!sm.in_safe_mode && !sm.recorded)
        };
        if leave {
            self.leave_safe_mode(false).await?;
        }
        // The first pass of a term waits one interval, and until every healthy datanode
        // has registered with this leader (after a takeover): it judges from their reports.
        let due = match last_rm {
            Some((t, at)) if *t == term => {
                reports_complete && at.elapsed() >= self.cfg.replication_interval
            }
            _ => {
                *last_rm = Some((term, Instant::now()));
                false
            }
        };
        if due {
            *last_rm = Some((term, Instant::now()));
            self.run_replication_manager().await?;
        }
        if last_del.is_none_or(|at| at.elapsed() >= self.cfg.block_deletion_interval) {
            *last_del = Some(Instant::now());
            self.deliver_deleted_blocks()?;
        }
        Ok(())
    }

    /// The safe-mode rule over the leader's current knowledge.
    pub fn safe_mode_eval(&self) -> Result<(SafeModeEval, SafeModeInput), ScmError> {
        let containers = read::containers(&self.group.db(), None)?;
        let m = self.lead()?;
        let finished: Vec<_> = containers
            .iter()
            .filter(|c| {
                matches!(
                    c.state,
                    ContainerState::Closed | ContainerState::QuasiClosed
                )
            })
            .collect();
        let reported = finished
            .iter()
            .filter(|c| {
                let v = replication::ContainerView::of(c);
                let rs = m.replica_views(c.id);
                rs.iter().any(|r| replication::is_healthy_copy(&v, &rs, r))
            })
            .count();
        let input = SafeModeInput {
            containers_total: finished.len() as u64,
            containers_reported: reported as u64,
            healthy_datanodes: m.nodes.healthy_ids().len() as u32,
            threshold: self.cfg.safe_mode_threshold,
            min_datanodes: self.cfg.safe_mode_min_datanodes,
        };
        Ok((safemode::evaluate(&input), input))
    }

    /// Sends pending deleted-block transactions to the datanodes holding their container
    /// (again after `replication_inflight_timeout` when not executed).
    fn deliver_deleted_blocks(&self) -> Result<(), ScmError> {
        let db = self.group.db();
        let pending = read::pending_deleted_blocks(&db, DELETE_BATCH)?;
        let mut members = BTreeMap::new();
        for t in &pending {
            if let Some(c) = read::container(&db, t.container_id)? {
                let p = read::pipeline(&db, c.pipeline_id)?;
                members.insert(t.container_id, p.map(|p| p.members).unwrap_or_default());
            }
        }
        drop(db);
        let mut m = self.lead()?;
        let now = Instant::now();
        let resend = self.cfg.replication_inflight_timeout;
        let mut per_dn: BTreeMap<u64, Vec<DeletedBlocksTxn>> = BTreeMap::new();
        for t in pending {
            let mut holders: Vec<u64> = m
                .replicas
                .replicas(t.container_id)
                .iter()
                .map(|r| r.datanode)
                .collect();
            if holders.is_empty() {
                holders = members.get(&t.container_id).cloned().unwrap_or_default();
            }
            holders.retain(|d| m.nodes.health(*d).is_some_and(|h| h != NodeHealth::Dead));
            let d = m.deletes.entry(t.txn_id).or_default();
            for dn in holders {
                let due = !d.done.contains(&dn)
                    && d.sent
                        .get(&dn)
                        .is_none_or(|at| now.duration_since(*at) >= resend);
                if due {
                    d.sent.insert(dn, now);
                    per_dn.entry(dn).or_default().push(t.clone());
                }
            }
        }
        for (dn, txns) in per_dn {
            m.commands.push(dn, DatanodeCommand::DeleteBlocks { txns });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_is_a_quarter_of_the_stale_interval_within_bounds() {
        assert_eq!(
            tick_interval(Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(
            tick_interval(Duration::from_millis(400)),
            Duration::from_millis(100)
        );
        assert_eq!(
            tick_interval(Duration::from_millis(10)),
            Duration::from_millis(20)
        );
    }
}
