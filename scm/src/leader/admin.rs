//! What `rozone admin ...` asks of the SCM, answered on the node: leadership transfer,
//! container listing, inspection and closing, datanode and pipeline listings, safe mode and
//! ReplicationManager status. All but the transfer are the ready leader's (it alone holds
//! the datanode registry and replica map); `service::admin` only decodes and encodes.

use std::time::Duration;

use crate::cluster::replication::{self, ContainerView, Verdict};
use crate::error::{Invalid, ScmError, SERVICE_NAME};
use crate::leader::types::{
    ContainerReport, DatanodeStatus, PipelineStatus, ReplicaStatus, SafeModeStatus,
};
use crate::node::ScmNode;
use crate::state::{read, ContainerInfo, ContainerState, PipelineState, ScmResponse};

/// Default and largest page of ListContainers.
pub const DEFAULT_LIST_LIMIT: u32 = 100;
pub const MAX_LIST_LIMIT: u32 = 1000;
/// How long a leadership transfer waits for the new leader.
const TRANSFER_WAIT: Duration = Duration::from_secs(30);

/// `id` of a request, which must be set.
pub fn need_id(id: u64, what: &str) -> Result<u64, ScmError> {
    if id == 0 {
        return Err(Invalid(format!("{what} must be above 0")).into());
    }
    Ok(id)
}

impl ScmNode {
    /// Hands the leadership to member `to` and waits until it leads.
    pub async fn transfer_leader(&self, to: u64) -> Result<(), ScmError> {
        let to = need_id(to, "node_id")?;
        Ok(self
            .group
            .hand_over(SERVICE_NAME, to, TRANSFER_WAIT)
            .await?)
    }

    /// Containers (of `state`, if given) with ids above `start_after`, at most `limit`
    /// (0: the default); the flag says more follow.
    pub fn list_containers(
        &self,
        state: Option<ContainerState>,
        start_after: u64,
        limit: u32,
    ) -> Result<(Vec<ContainerInfo>, bool), ScmError> {
        let limit = match limit {
            0 => DEFAULT_LIST_LIMIT,
            l if l > MAX_LIST_LIMIT => {
                return Err(
                    Invalid(format!("limit must be at most {MAX_LIST_LIMIT}, got {l}")).into(),
                )
            }
            l => l,
        } as usize;
        drop(self.lead()?);
        let all = read::containers(&self.group.db(), state)?;
        let mut after: Vec<_> = all.into_iter().filter(|c| c.id > start_after).collect();
        let truncated = after.len() > limit;
        after.truncate(limit);
        Ok((after, truncated))
    }

    /// An existing container (else `NOT_FOUND`), read by the ready leader.
    fn known_container(&self, id: u64) -> Result<ContainerInfo, ScmError> {
        let id = need_id(id, "container_id")?;
        drop(self.lead()?);
        self.container(id)?
            .ok_or_else(|| ScmError::NotFound(format!("container {id} does not exist")))
    }

    /// Container `id` with its replicas and how healthy they are.
    pub fn container_report(&self, id: u64) -> Result<ContainerReport, ScmError> {
        let c = self.known_container(id)?;
        let m = self.lead()?;
        let (d, views) = m.judge(&c);
        let v = ContainerView::of(&c);
        let replicas = m
            .replicas
            .replicas(c.id)
            .iter()
            .map(|r| ReplicaStatus {
                datanode_id: r.datanode,
                hostname: m
                    .nodes
                    .get(r.datanode)
                    .map(|n| n.details.hostname.clone())
                    .unwrap_or_default(),
                state: r.state,
                bcsid: r.bcsid,
                block_count: r.block_count,
                used_bytes: r.used_bytes,
                healthy: views
                    .iter()
                    .find(|x| x.datanode == r.datanode)
                    .is_some_and(|x| replication::is_healthy_copy(&v, &views, x)),
                last_report_age_ms: r.last_seen.elapsed().as_millis() as u64,
            })
            .collect();
        let verdict = if matches!(
            c.state,
            ContainerState::Closed | ContainerState::QuasiClosed
        ) {
            d.verdict()
        } else {
            Verdict::NotChecked
        };
        Ok(ContainerReport {
            container: c,
            replicas,
            verdict,
            healthy_replicas: d.healthy as u32,
        })
    }

    /// Closes container `id` on an admin's request: an OPEN one is finalized, one already
    /// closing or closed is left as it is; a deleting one cannot be closed. Returns its state.
    pub async fn close_container(&self, id: u64) -> Result<ContainerState, ScmError> {
        let c = self.known_container(id)?;
        match c.state {
            ContainerState::Open => match self.finalize_container(c.id, "admin close").await? {
                ScmResponse::ContainerUpdated { state, .. } => Ok(state),
                other => Err(ScmError::refused("close container", other)),
            },
            s
            @ (ContainerState::Closing | ContainerState::QuasiClosed | ContainerState::Closed) => {
                Ok(s)
            }
            s => Err(ScmError::FailedPrecondition(format!(
                "container {} is {s}: it cannot be closed",
                c.id
            ))),
        }
    }

    /// Every registered datanode with its health, usage and load.
    pub fn datanode_statuses(&self) -> Result<Vec<DatanodeStatus>, ScmError> {
        let pipelines = read::pipelines(&self.group.db())?;
        let m = self.lead()?;
        Ok(m.nodes
            .all()
            .map(|n| {
                let id = n.details.id;
                DatanodeStatus {
                    datanode: n.details.clone(),
                    health: n.health,
                    last_heartbeat_age_ms: n.last_heartbeat.elapsed().as_millis() as u64,
                    usage: n.usage,
                    replica_count: m.replicas.count_on(id) as u32,
                    pipeline_count: pipelines
                        .iter()
                        .filter(|p| p.state == PipelineState::Open)
                        .filter(|p| p.members.contains(&id))
                        .count() as u32,
                    queued_commands: m.commands.queued_len(id) as u32,
                }
            })
            .collect())
    }

    /// Pipelines (of `state`, if given) with their open containers counted.
    pub fn pipeline_statuses(
        &self,
        state: Option<PipelineState>,
    ) -> Result<Vec<PipelineStatus>, ScmError> {
        let db = self.group.db();
        let pipelines = read::pipelines(&db)?;
        let open = read::containers(&db, Some(ContainerState::Open))?;
        drop(db);
        let m = self.lead()?;
        Ok(pipelines
            .iter()
            .filter(|p| state.is_none_or(|s| p.state == s))
            .map(|p| PipelineStatus {
                pipeline: m.pipeline_view(p),
                open_containers: open.iter().filter(|c| c.pipeline_id == p.id).count() as u32,
            })
            .collect())
    }

    /// Safe mode of this leader's term and the rules behind it.
    pub fn safe_mode_status(&self) -> Result<SafeModeStatus, ScmError> {
        let (eval, input) = self.safe_mode_eval()?;
        let sm = self.lead()?.safe_mode;
        Ok(SafeModeStatus {
            in_safe_mode: sm.in_safe_mode,
            forced_exit: sm.forced_exit,
            eval,
            input,
        })
    }
}
