//! `ScmAdmin`: what `rozone admin ...` asks the SCM. Roles are answered by any member; the
//! rest by the ready leader only (it alone holds the datanode registry and replica map).

use std::sync::Arc;
use std::time::Duration;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_admin_server::ScmAdmin;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::cluster::replication::Verdict;
use crate::convert;
use crate::error::{Invalid, ScmError, SERVICE_NAME};
use crate::leader::rm;
use crate::node::ScmNode;
use crate::state::{read, ContainerState, ScmResponse};

/// Default and largest page of ListContainers.
pub const DEFAULT_LIST_LIMIT: u32 = 100;
pub const MAX_LIST_LIMIT: u32 = 1000;
const TRANSFER_WAIT: Duration = Duration::from_secs(30);

pub struct AdminService(pub Arc<ScmNode>);

fn need_id(id: u64, what: &str) -> Result<u64, ScmError> {
    if id == 0 {
        return Err(Invalid(format!("{what} must be above 0")).into());
    }
    Ok(id)
}

#[tonic::async_trait]
impl ScmAdmin for AdminService {
    async fn roles(
        &self,
        _req: Request<pb::RingInfoRequest>,
    ) -> Result<Response<pb::RingInfoReply>, Status> {
        Ok(Response::new(convert::ring_info(&self.0.group)))
    }

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderReply>, Status> {
        require_role(&req, &[Role::Admin], "TransferLeader")?;
        let to = need_id(req.into_inner().node_id, "node_id")?;
        self.0
            .group
            .hand_over(SERVICE_NAME, to, TRANSFER_WAIT)
            .await
            .map_err(|e| rozone_raft::ring::ring_op_status(SERVICE_NAME, e))?;
        Ok(Response::new(pb::TransferLeaderReply { leader_id: to }))
    }

    async fn list_containers(
        &self,
        req: Request<pb::ListContainersRequest>,
    ) -> Result<Response<pb::ListContainersReply>, Status> {
        let r = req.into_inner();
        let state = r
            .state
            .map(|s| convert::container_state_from(s, "state"))
            .transpose()
            .map_err(ScmError::from)?;
        let limit = match r.limit {
            0 => DEFAULT_LIST_LIMIT,
            l if l > MAX_LIST_LIMIT => {
                return Err(ScmError::from(Invalid(format!(
                    "limit must be at most {MAX_LIST_LIMIT}, got {l}"
                )))
                .into())
            }
            l => l,
        } as usize;
        drop(self.0.lead()?);
        let all = read::containers(&self.0.group.db(), state).map_err(ScmError::from)?;
        let mut after: Vec<_> = all.into_iter().filter(|c| c.id > r.start_after).collect();
        let truncated = after.len() > limit;
        after.truncate(limit);
        Ok(Response::new(pb::ListContainersReply {
            containers: after.iter().map(convert::container).collect(),
            truncated,
        }))
    }

    async fn container_info(
        &self,
        req: Request<pb::ContainerInfoRequest>,
    ) -> Result<Response<pb::ContainerInfoReply>, Status> {
        let id = need_id(req.into_inner().container_id, "container_id")?;
        drop(self.0.lead()?);
        let c = self
            .0
            .container(id)?
            .ok_or_else(|| ScmError::NotFound(format!("container {id} does not exist")))?;
        let m = self.0.lead()?;
        let (d, views) = rm::judge(&m, &c);
        let v = rm::view(&c);
        let replicas = m
            .replicas
            .replicas(id)
            .iter()
            .map(|r| pb::ReplicaInfo {
                datanode_id: r.datanode,
                hostname: m
                    .nodes
                    .get(r.datanode)
                    .map(|n| n.details.hostname.clone())
                    .unwrap_or_default(),
                state: convert::replica_state(r.state) as i32,
                bcsid: r.bcsid,
                block_count: r.block_count,
                used_bytes: r.used_bytes,
                healthy: views
                    .iter()
                    .find(|x| x.datanode == r.datanode)
                    .is_some_and(|x| crate::cluster::replication::is_healthy_copy(&v, &views, x)),
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
        Ok(Response::new(pb::ContainerInfoReply {
            container: Some(convert::container(&c)),
            replicas,
            replication_health: convert::verdict(verdict) as i32,
            healthy_replicas: d.healthy as u32,
        }))
    }

    async fn close_container(
        &self,
        req: Request<pb::CloseContainerRequest>,
    ) -> Result<Response<pb::CloseContainerReply>, Status> {
        require_role(&req, &[Role::Admin], "CloseContainer")?;
        let id = need_id(req.into_inner().container_id, "container_id")?;
        drop(self.0.lead()?);
        let c = self
            .0
            .container(id)?
            .ok_or_else(|| ScmError::NotFound(format!("container {id} does not exist")))?;
        let state = match c.state {
            ContainerState::Open => match self.0.finalize_container(id, "admin close").await? {
                ScmResponse::ContainerUpdated { state, .. } => state,
                other => return Err(ScmError::refused("close container", other).into()),
            },
            s
            @ (ContainerState::Closing | ContainerState::QuasiClosed | ContainerState::Closed) => s,
            s => {
                return Err(ScmError::FailedPrecondition(format!(
                    "container {id} is {s}: it cannot be closed"
                ))
                .into())
            }
        };
        Ok(Response::new(pb::CloseContainerReply {
            state: convert::container_state(state) as i32,
        }))
    }

    async fn list_datanodes(
        &self,
        _req: Request<pb::ListDatanodesRequest>,
    ) -> Result<Response<pb::ListDatanodesReply>, Status> {
        let pipelines = read::pipelines(&self.0.group.db()).map_err(ScmError::from)?;
        let m = self.0.lead()?;
        let datanodes = m
            .nodes
            .all()
            .map(|n| {
                let id = n.details.id;
                pb::DatanodeStatus {
                    datanode: Some(convert::datanode_details(&n.details)),
                    health: convert::node_health(n.health) as i32,
                    last_heartbeat_age_ms: n.last_heartbeat.elapsed().as_millis() as u64,
                    capacity_bytes: n.usage.capacity,
                    used_bytes: n.usage.used,
                    remaining_bytes: n.usage.remaining,
                    replica_count: m.replicas.count_on(id) as u32,
                    pipeline_count: pipelines
                        .iter()
                        .filter(|p| p.state == crate::state::PipelineState::Open)
                        .filter(|p| p.members.contains(&id))
                        .count() as u32,
                    queued_commands: m.commands.queued_len(id) as u32,
                }
            })
            .collect();
        Ok(Response::new(pb::ListDatanodesReply { datanodes }))
    }

    async fn list_pipelines(
        &self,
        req: Request<pb::ListPipelinesRequest>,
    ) -> Result<Response<pb::ListPipelinesReply>, Status> {
        let state = req
            .into_inner()
            .state
            .map(|s| convert::pipeline_state_from(s, "state"))
            .transpose()
            .map_err(ScmError::from)?;
        let db = self.0.group.db();
        let pipelines = read::pipelines(&db).map_err(ScmError::from)?;
        let open = read::containers(&db, Some(ContainerState::Open)).map_err(ScmError::from)?;
        drop(db);
        let m = self.0.lead()?;
        let pipelines = pipelines
            .iter()
            .filter(|p| state.is_none_or(|s| p.state == s))
            .map(|p| pb::PipelineStatus {
                pipeline: Some(convert::pipeline(p, &m)),
                open_containers: open.iter().filter(|c| c.pipeline_id == p.id).count() as u32,
            })
            .collect();
        Ok(Response::new(pb::ListPipelinesReply { pipelines }))
    }

    async fn safe_mode_status(
        &self,
        _req: Request<pb::SafeModeStatusRequest>,
    ) -> Result<Response<pb::SafeModeStatusReply>, Status> {
        let (eval, input) = self.0.safe_mode_eval()?;
        let sm = self.0.lead()?.safe_mode;
        Ok(Response::new(pb::SafeModeStatusReply {
            in_safe_mode: sm.in_safe_mode,
            forced_exit: sm.forced_exit,
            reported_share: eval.reported_share,
            threshold: input.threshold,
            containers_total: input.containers_total,
            containers_reported: input.containers_reported,
            healthy_datanodes: input.healthy_datanodes,
            min_datanodes: input.min_datanodes,
            rules: eval
                .rules
                .iter()
                .map(|r| pb::SafeModeRule {
                    name: r.name.to_string(),
                    satisfied: r.satisfied,
                    detail: r.detail.clone(),
                })
                .collect(),
        }))
    }

    async fn force_exit_safe_mode(
        &self,
        req: Request<pb::ForceExitSafeModeRequest>,
    ) -> Result<Response<pb::ForceExitSafeModeReply>, Status> {
        require_role(&req, &[Role::Admin], "ForceExitSafeMode")?;
        // Recorded in the ring before it takes effect: a leader change right after still
        // finds the ring out of safe mode.
        let was = self.0.leave_safe_mode(true).await?;
        Ok(Response::new(pb::ForceExitSafeModeReply {
            was_in_safe_mode: was,
        }))
    }

    async fn replication_manager_status(
        &self,
        _req: Request<pb::ReplicationManagerStatusRequest>,
    ) -> Result<Response<pb::ReplicationManagerStatusReply>, Status> {
        self.0
            .replication_status()
            .map(Response::new)
            .map_err(Status::from)
    }
}
