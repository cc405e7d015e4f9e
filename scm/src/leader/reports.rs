//! Register and heartbeat: the datanode protocol's effect on the leader's state.
//!
//! A request arrives converted and checked whole ([`Registration`], [`Beat`], built by
//! `convert`), so a malformed one changes nothing. The registry, replica map and command
//! outcomes are updated in memory, and what the reports imply for the replicated container
//! state (usage, CLOSING → CLOSED, …, judged by [`crate::cluster::lifecycle::react`]) is
//! written through the log. The reply carries the datanode's queued commands.

use std::time::Instant;

use crate::cluster::commands::{DatanodeCommand, Sent};
use crate::cluster::lifecycle::{react, Reaction};
use crate::cluster::nodes::{Datanode, Heard, NodeHealth};
use crate::cluster::replicas::ReplicaReport;
use crate::error::ScmError;
use crate::leader::types::{Beat, BeatReply, PipelineReport, Registered, Registration};
use crate::node::{Counters, ScmNode};
use crate::state::{read, ContainerEvent, ContainerInfo, DatanodeRecord, ScmRequest};

impl ScmNode {
    pub async fn register(&self, r: Registration) -> Result<Registered, ScmError> {
        let Registration {
            datanode: dn,
            full,
            usage,
            pipelines,
        } = r;
        let cluster_id = read::cluster_id(&self.group.db())?.ok_or_else(|| {
            ScmError::FailedPrecondition("the SCM ring has no cluster id yet".into())
        })?;
        let id = dn.id;
        {
            let mut m = self.lead()?;
            let now = Instant::now();
            // A re-registering node starts over: old commands and replicas are void. Not so
            // for a node this leader took over: its queued commands are this leader's.
            if m.nodes.get(id).is_none_or(|n| n.confirmed) {
                m.commands.clear(id);
            }
            if m.nodes.register(dn.clone(), usage, now) {
                tracing::info!(datanode = id, host = %dn.hostname, "datanode registered");
            }
            m.replicas.full_report(id, &full, now);
            self.pipeline_leaders(&mut m, id, &pipelines);
        }
        Counters::add(&self.counters.registrations, 1);
        // The ring keeps the datanode as this leader knows it, for the next leader.
        self.record_datanode(DatanodeRecord {
            datanode: dn,
            health: NodeHealth::Healthy,
        })
        .await?;
        self.react_all(id, &full).await?;
        self.check_reported_pipelines(id, &pipelines)?;
        // A new member may complete a pipeline: the background pass makes it now.
        self.wake.notify_one();
        Ok(Registered {
            cluster_id,
            datanode_id: id,
        })
    }

    fn pipeline_leaders(
        &self,
        m: &mut crate::cluster::ClusterState,
        dn: u64,
        reports: &[PipelineReport],
    ) {
        for p in reports.iter().filter(|p| p.is_leader) {
            m.pipeline_leaders.insert(p.pipeline_id, dn);
        }
    }

    pub async fn heartbeat(&self, b: Beat) -> Result<BeatReply, ScmError> {
        let mut txns_done = Vec::new();
        let (heard, revived) = {
            let mut m = self.lead()?;
            let was = m.nodes.health(b.dn);
            let heard = m.nodes.heartbeat(b.dn, b.usage, Instant::now());
            // A STALE node heard again is HEALTHY: the ring's record follows (rare).
            let revived = (was == Some(NodeHealth::Stale))
                .then(|| m.nodes.get(b.dn).map(|n| n.details.clone()))
                .flatten();
            (heard, revived)
        };
        self.record_revived(revived).await?;
        if heard == Heard::MustRegister {
            return Ok(BeatReply {
                commands: Vec::new(),
                reregister: true,
            });
        }
        {
            let mut m = self.lead()?;
            let now = Instant::now();
            if let Some(full) = &b.full {
                m.replicas.full_report(b.dn, full, now);
            }
            m.replicas.incremental_report(b.dn, &b.incremental, now);
            self.pipeline_leaders(&mut m, b.dn, &b.pipelines);
            for (id, ok) in &b.statuses {
                match m.commands.finish(b.dn, *id) {
                    Some(Sent::DeleteBlocks { txn_ids }) => {
                        for t in txn_ids {
                            if let Some(d) = m.deletes.get_mut(&t) {
                                if *ok {
                                    d.done.insert(b.dn);
                                } else {
                                    d.sent.remove(&b.dn);
                                }
                            }
                        }
                    }
                    Some(Sent::Replicate { container }) => m.end_inflight(container, b.dn, true),
                    Some(Sent::DeleteContainer { container }) => {
                        m.end_inflight(container, b.dn, false);
                        if *ok {
                            m.replicas.remove(container, b.dn);
                        }
                    }
                    Some(Sent::Other) | None => {}
                }
            }
            m.deletes.retain(|t, d| {
                let finished = !d.sent.is_empty() && d.sent.keys().all(|dn| d.done.contains(dn));
                if finished {
                    txns_done.push(*t);
                }
                !finished
            });
        }
        Counters::add(&self.counters.heartbeats, 1);
        let mut reported = b.full.clone().unwrap_or_default();
        reported.extend(b.incremental.iter().cloned());
        self.react_all(b.dn, &reported).await?;
        for (p, reason) in &b.close_pipelines {
            self.close_reported_pipeline(b.dn, *p, reason).await?;
        }
        // The replacement at once, not at the next background pass (up to a second later,
        // a second of refused writes): the reporting datanode gets its create command in
        // this very reply, the others with their next heartbeat.
        if !b.close_pipelines.is_empty() {
            self.create_pipelines().await?;
        }
        self.check_reported_pipelines(b.dn, &b.pipelines)?;
        if !txns_done.is_empty() {
            let n = txns_done.len() as u64;
            self.write(ScmRequest::RemoveDeletedBlocks { txn_ids: txns_done })
                .await?;
            Counters::add(&self.counters.deleted_block_txns_done, n);
        }
        let commands = self.lead()?.commands.take(b.dn);
        Counters::add(&self.counters.commands_sent, commands.len() as u64);
        Ok(BeatReply {
            commands,
            reregister: false,
        })
    }

    async fn record_revived(&self, dn: Option<Datanode>) -> Result<(), ScmError> {
        match dn {
            Some(datanode) => {
                self.record_datanode(DatanodeRecord {
                    datanode,
                    health: NodeHealth::Healthy,
                })
                .await
            }
            None => Ok(()),
        }
    }

    /// Applies what each reported replica implies for its container.
    async fn react_all(&self, dn: u64, reports: &[ReplicaReport]) -> Result<(), ScmError> {
        let size = self.cfg.container_size.as_u64();
        for r in reports {
            // A few rounds: a replica that reports CLOSED of an OPEN container first
            // finalizes it, then closes it, from the same report.
            for _ in 0..3 {
                let Some(c) = self.container(r.container_id)? else {
                    tracing::warn!(
                        datanode = dn,
                        container = r.container_id,
                        "replica of a container the SCM does not know"
                    );
                    break;
                };
                let reactions = react(&c, r, size);
                let mut changed = false;
                for x in reactions {
                    changed |= self.enact(dn, &c, x).await?;
                }
                if !changed {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Returns whether the container's state changed (so the report is judged again).
    async fn enact(&self, dn: u64, c: &ContainerInfo, x: Reaction) -> Result<bool, ScmError> {
        match x {
            Reaction::Usage {
                used_bytes,
                key_count,
                bcsid,
            } => {
                self.write(ScmRequest::UpdateContainerUsage {
                    id: c.id,
                    used_bytes,
                    key_count,
                    bcsid,
                })
                .await?;
                Ok(false)
            }
            Reaction::Event(ContainerEvent::Finalize) => {
                let r = self
                    .finalize_container(c.id, "reported full or closed")
                    .await?;
                Ok(matches!(
                    r,
                    crate::state::ScmResponse::ContainerUpdated { .. }
                ))
            }
            Reaction::Event(event) => {
                let r = self
                    .write(ScmRequest::UpdateContainer { id: c.id, event })
                    .await?;
                if let crate::state::ScmResponse::ContainerUpdated { state, .. } = r {
                    tracing::info!(container = c.id, %state, "container state from replica report");
                    return Ok(true);
                }
                Ok(false)
            }
            Reaction::Close { force } => {
                self.lead()?.commands.push_once(
                    dn,
                    DatanodeCommand::CloseContainer {
                        container_id: c.id,
                        pipeline_id: c.pipeline_id,
                        force,
                    },
                );
                Ok(false)
            }
            Reaction::Delete => {
                self.lead()?.commands.push_once(
                    dn,
                    DatanodeCommand::DeleteContainer {
                        container_id: c.id,
                        force: true,
                    },
                );
                Ok(false)
            }
        }
    }

    /// A datanode reporting a pipeline the SCM does not have open is told to close it.
    /// A member asks to close pipeline `id`. An open one is closed (every member is told);
    /// one already closed, or unknown to the ring (a member that set aside a pipeline it
    /// could not open may name one closed and forgotten long ago), is dropped by that
    /// member: it is told so, instead of the heartbeat failing or the member asking forever.
    async fn close_reported_pipeline(
        &self,
        dn: u64,
        id: u64,
        reason: &str,
    ) -> Result<(), ScmError> {
        let state = read::pipeline(&self.group.db(), id)?.map(|p| p.state);
        if state.is_some() {
            self.close_pipeline(id, &format!("datanode {dn}: {reason}"))
                .await?;
        }
        if state != Some(crate::state::PipelineState::Open) {
            self.lead()?
                .commands
                .push_once(dn, DatanodeCommand::ClosePipeline { pipeline_id: id });
        }
        Ok(())
    }

    fn check_reported_pipelines(
        &self,
        dn: u64,
        reports: &[PipelineReport],
    ) -> Result<(), ScmError> {
        let db = self.group.db();
        for p in reports {
            let open = read::pipeline(&db, p.pipeline_id)?
                .is_some_and(|x| x.state == crate::state::PipelineState::Open);
            if !open {
                self.lead()?.commands.push_once(
                    dn,
                    DatanodeCommand::ClosePipeline {
                        pipeline_id: p.pipeline_id,
                    },
                );
            }
        }
        Ok(())
    }
}
