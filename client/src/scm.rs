//! The typed SCM client: ring roles and the admin service (containers, datanodes,
//! pipelines, safe mode, ReplicationManager), over a [`Ring`] that finds the SCM leader.

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_admin_client::ScmAdminClient;
use serde::Serialize;
use tonic::transport::Channel;

use crate::error::{ClientError, Result};
use crate::failover::Ring;
use crate::types::{short_enum, Datanode, Pipeline};

/// One SCM ring member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScmMember {
    pub id: u64,
    pub role: String,
    pub client_addr: String,
    pub peer_addr: String,
    pub voter: bool,
}

/// The SCM ring as one member sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScmRoles {
    pub answered_by: u64,
    pub leader_id: Option<u64>,
    pub leader_ready: bool,
    pub members: Vec<ScmMember>,
}

/// A container as the SCM records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Container {
    pub id: u64,
    pub state: String,
    pub replication_factor: u32,
    pub owner: String,
    pub pipeline_id: u64,
    pub used_bytes: u64,
    pub block_count: u64,
    pub bcsid: u64,
    pub created_ms: u64,
}

impl From<pb::Container> for Container {
    fn from(c: pb::Container) -> Self {
        Self {
            state: short_enum(c.state().as_str_name(), "CONTAINER_"),
            id: c.container_id,
            replication_factor: c.replication_factor,
            owner: c.owner,
            pipeline_id: c.pipeline_id,
            used_bytes: c.used_bytes,
            block_count: c.block_count,
            bcsid: c.bcsid,
            created_ms: c.created_at_ms,
        }
    }
}

/// A replica in the SCM leader's replica map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Replica {
    pub datanode_id: u64,
    pub hostname: String,
    pub state: String,
    pub bcsid: u64,
    pub block_count: u64,
    pub used_bytes: u64,
    pub healthy: bool,
    pub last_report_age_ms: u64,
}

/// A container with its replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerDetails {
    pub container: Container,
    pub replication_health: String,
    pub healthy_replicas: u32,
    pub replicas: Vec<Replica>,
}

/// A datanode with its health and usage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatanodeStatus {
    pub datanode: Datanode,
    pub health: String,
    pub last_heartbeat_age_ms: u64,
    pub capacity_bytes: u64,
    pub used_bytes: u64,
    pub remaining_bytes: u64,
    pub replica_count: u32,
    pub pipeline_count: u32,
    pub queued_commands: u32,
}

/// A pipeline with its open containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PipelineStatus {
    pub pipeline: Pipeline,
    pub open_containers: u32,
}

/// One safe-mode rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SafeModeRule {
    pub name: String,
    pub satisfied: bool,
    pub detail: String,
}

/// Safe mode as the SCM leader sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SafeMode {
    pub in_safe_mode: bool,
    pub forced_exit: bool,
    pub reported_share: f64,
    pub threshold: f64,
    pub containers_total: u64,
    pub containers_reported: u64,
    pub healthy_datanodes: u32,
    pub min_datanodes: u32,
    pub rules: Vec<SafeModeRule>,
}

/// The ReplicationManager's last run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplicationManagerStatus {
    pub healthy: u64,
    pub under_replicated: u64,
    pub over_replicated: u64,
    pub missing: u64,
    pub inflight_adds: u64,
    pub inflight_deletes: u64,
    pub runs: u64,
    pub last_run_age_ms: Option<u64>,
    pub last_run_duration_ms: u64,
    pub under_replicated_containers: Vec<u64>,
    pub over_replicated_containers: Vec<u64>,
    pub missing_containers: Vec<u64>,
    pub replicate_commands_sent: u64,
    pub delete_commands_sent: u64,
    pub inflight_timeouts: u64,
}

/// The typed SCM client.
#[derive(Clone)]
pub struct ScmClient {
    ring: Ring,
}

fn admin(ch: Channel) -> ScmAdminClient<Channel> {
    ScmAdminClient::new(ch).max_decoding_message_size(64 << 20)
}

macro_rules! leader_call {
    ($self:ident, $what:expr, $method:ident, $req:expr) => {{
        let req = $req;
        // One id for every attempt: a resent admin write applies at most once.
        let call = $self.ring.call_ids().begin();
        $self
            .ring
            .call($what, |ch| {
                let req = call.request(req.clone());
                async move { admin(ch).$method(req).await }
            })
            .await
    }};
}

fn roles_from(r: pb::RingInfoReply) -> ScmRoles {
    ScmRoles {
        answered_by: r.node_id,
        leader_id: r.leader_id,
        leader_ready: r.leader_ready,
        members: r
            .members
            .into_iter()
            .map(|m| ScmMember {
                id: m.id,
                role: if m.role.is_empty() {
                    "UNKNOWN".into()
                } else {
                    m.role
                },
                client_addr: m.client_addr,
                peer_addr: m.peer_addr,
                voter: m.voter,
            })
            .collect(),
    }
}

/// SCM container states as the CLI accepts them (`--state closed`).
pub fn parse_container_state(s: &str) -> Result<pb::ContainerState> {
    let name = format!("CONTAINER_{}", s.to_ascii_uppercase());
    pb::ContainerState::from_str_name(&name)
        .filter(|st| *st != pb::ContainerState::Unspecified)
        .ok_or_else(|| {
            ClientError::Invalid(format!(
                "unknown container state {s:?}: use open, closing, quasi_closed, closed, deleting or deleted"
            ))
        })
}

impl ScmClient {
    pub fn new(ring: Ring) -> Self {
        Self { ring }
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The ring's roles as the leader (or, failing that, any member) sees them.
    pub async fn roles(&self) -> Result<ScmRoles> {
        let r = self
            .ring
            .call("scm roles", |ch| async move {
                admin(ch).roles(pb::RingInfoRequest {}).await
            })
            .await?;
        Ok(roles_from(r))
    }

    /// `roles` as answered by the member at `addr`.
    pub async fn roles_of(&self, addr: &str) -> Result<ScmRoles> {
        let ch = self.ring.channel_to(addr)?;
        let r = tokio::time::timeout(
            self.ring.policy().attempt_timeout,
            admin(ch).roles(pb::RingInfoRequest {}),
        )
        .await
        .map_err(|_| ClientError::Unavailable {
            service: "SCM".into(),
            detail: format!("{addr}: no answer"),
        })?
        .map_err(|s| ClientError::Unavailable {
            service: "SCM".into(),
            detail: format!("{addr}: {}", s.message()),
        })?;
        Ok(roles_from(r.into_inner()))
    }

    pub async fn transfer_leader(&self, node_id: u64) -> Result<u64> {
        let r = leader_call!(
            self,
            "scm transfer",
            transfer_leader,
            pb::TransferLeaderRequest { node_id }
        )?;
        Ok(r.leader_id)
    }

    /// Removes member `node_id` from the SCM ring (leader only; not the leader itself).
    pub async fn remove_member(&self, node_id: u64) -> Result<()> {
        self.ring
            .call("scm remove", |ch| async move {
                rozone_proto::ring::ring_client::RingClient::new(ch)
                    .remove_member(rozone_proto::ring::RemoveMemberRequest { id: node_id })
                    .await
            })
            .await?;
        Ok(())
    }

    /// Containers, optionally only in `state`, at most `limit` (0 = all).
    pub async fn list_containers(
        &self,
        state: Option<pb::ContainerState>,
        limit: usize,
    ) -> Result<Vec<Container>> {
        let mut out: Vec<Container> = Vec::new();
        loop {
            let page = if limit == 0 {
                1000
            } else {
                (limit - out.len()).min(1000) as u32
            };
            let req = pb::ListContainersRequest {
                state: state.map(|s| s as i32),
                start_after: out.last().map(|c| c.id).unwrap_or(0),
                limit: page,
            };
            let r = leader_call!(self, "list containers", list_containers, req)?;
            let n = r.containers.len();
            out.extend(r.containers.into_iter().map(Container::from));
            if !r.truncated || n == 0 || (limit > 0 && out.len() >= limit) {
                return Ok(out);
            }
        }
    }

    pub async fn container_info(&self, id: u64) -> Result<ContainerDetails> {
        let r = leader_call!(
            self,
            "container info",
            container_info,
            pb::ContainerInfoRequest { container_id: id }
        )?;
        let replication_health = short_enum(r.replication_health().as_str_name(), "REPLICATION_");
        let container = r
            .container
            .ok_or_else(|| ClientError::bad_reply("SCM", "no container in reply"))?
            .into();
        Ok(ContainerDetails {
            container,
            replication_health,
            healthy_replicas: r.healthy_replicas,
            replicas: r
                .replicas
                .into_iter()
                .map(|x| Replica {
                    state: short_enum(x.state().as_str_name(), "REPLICA_"),
                    datanode_id: x.datanode_id,
                    hostname: x.hostname,
                    bcsid: x.bcsid,
                    block_count: x.block_count,
                    used_bytes: x.used_bytes,
                    healthy: x.healthy,
                    last_report_age_ms: x.last_report_age_ms,
                })
                .collect(),
        })
    }

    /// Closes a container; returns its state after the call.
    pub async fn close_container(&self, id: u64) -> Result<String> {
        let r = leader_call!(
            self,
            "close container",
            close_container,
            pb::CloseContainerRequest { container_id: id }
        )?;
        Ok(short_enum(r.state().as_str_name(), "CONTAINER_"))
    }

    pub async fn list_datanodes(&self) -> Result<Vec<DatanodeStatus>> {
        let r = leader_call!(
            self,
            "list datanodes",
            list_datanodes,
            pb::ListDatanodesRequest {}
        )?;
        r.datanodes
            .into_iter()
            .map(|d| {
                let health = short_enum(d.health().as_str_name(), "NODE_");
                Ok(DatanodeStatus {
                    datanode: d
                        .datanode
                        .ok_or_else(|| {
                            ClientError::bad_reply("SCM", "datanode status without datanode")
                        })?
                        .into(),
                    health,
                    last_heartbeat_age_ms: d.last_heartbeat_age_ms,
                    capacity_bytes: d.capacity_bytes,
                    used_bytes: d.used_bytes,
                    remaining_bytes: d.remaining_bytes,
                    replica_count: d.replica_count,
                    pipeline_count: d.pipeline_count,
                    queued_commands: d.queued_commands,
                })
            })
            .collect()
    }

    /// Pipelines; `open_only` keeps the OPEN ones.
    pub async fn list_pipelines(&self, open_only: bool) -> Result<Vec<PipelineStatus>> {
        let req = pb::ListPipelinesRequest {
            state: open_only.then_some(pb::PipelineState::PipelineOpen as i32),
        };
        let r = leader_call!(self, "list pipelines", list_pipelines, req)?;
        r.pipelines
            .into_iter()
            .map(|p| {
                Ok(PipelineStatus {
                    pipeline: p
                        .pipeline
                        .ok_or_else(|| {
                            ClientError::bad_reply("SCM", "pipeline status without pipeline")
                        })?
                        .into(),
                    open_containers: p.open_containers,
                })
            })
            .collect()
    }

    pub async fn safe_mode(&self) -> Result<SafeMode> {
        let r = leader_call!(
            self,
            "safemode status",
            safe_mode_status,
            pb::SafeModeStatusRequest {}
        )?;
        Ok(SafeMode {
            in_safe_mode: r.in_safe_mode,
            forced_exit: r.forced_exit,
            reported_share: r.reported_share,
            threshold: r.threshold,
            containers_total: r.containers_total,
            containers_reported: r.containers_reported,
            healthy_datanodes: r.healthy_datanodes,
            min_datanodes: r.min_datanodes,
            rules: r
                .rules
                .into_iter()
                .map(|x| SafeModeRule {
                    name: x.name,
                    satisfied: x.satisfied,
                    detail: x.detail,
                })
                .collect(),
        })
    }

    /// A one-time join token for a certificate of `role` and `id`, redeemable for `ttl`
    /// (admin only); returns the token and when it expires (ms since the Unix epoch).
    pub async fn create_join_token(
        &self,
        role: &str,
        id: u64,
        ttl: std::time::Duration,
    ) -> Result<(String, u64)> {
        let r = leader_call!(
            self,
            "join-token create",
            create_join_token,
            pb::CreateJoinTokenRequest {
                role: role.to_string(),
                id,
                ttl_secs: ttl.as_secs(),
            }
        )?;
        Ok((r.token, r.expires_unix_ms))
    }

    /// Leaves safe mode now; returns whether it was in safe mode.
    pub async fn exit_safe_mode(&self) -> Result<bool> {
        let r = leader_call!(
            self,
            "safemode exit",
            force_exit_safe_mode,
            pb::ForceExitSafeModeRequest {}
        )?;
        Ok(r.was_in_safe_mode)
    }

    pub async fn replication_manager(&self) -> Result<ReplicationManagerStatus> {
        let r = leader_call!(
            self,
            "replicationmanager status",
            replication_manager_status,
            pb::ReplicationManagerStatusRequest {}
        )?;
        Ok(ReplicationManagerStatus {
            healthy: r.healthy,
            under_replicated: r.under_replicated,
            over_replicated: r.over_replicated,
            missing: r.missing,
            inflight_adds: r.inflight_adds,
            inflight_deletes: r.inflight_deletes,
            runs: r.runs,
            last_run_age_ms: r.last_run_age_ms,
            last_run_duration_ms: r.last_run_duration_ms,
            under_replicated_containers: r.under_replicated_containers,
            over_replicated_containers: r.over_replicated_containers,
            missing_containers: r.missing_containers,
            replicate_commands_sent: r.replicate_commands_sent,
            delete_commands_sent: r.delete_commands_sent,
            inflight_timeouts: r.inflight_timeouts,
        })
    }
}
