//! `ScmAdmin`: what `rozone admin ...` asks the SCM. Each call checks the caller's role,
//! decodes the request ([`crate::convert`]), asks the node ([`crate::leader::admin`]) and
//! encodes the answer. Roles are answered by any member; the rest by the ready leader only.

use std::sync::Arc;

use rozone_proto::scm as pb;
use rozone_proto::scm::scm_admin_server::ScmAdmin;
use rozone_rpc::auth::require_role;
use rozone_rpc::Role;
use tonic::{Request, Response, Status};

use crate::convert;
use crate::error::{Invalid, ScmError};
use crate::node::ScmNode;

pub struct AdminService(pub Arc<ScmNode>);

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
        let to = req.into_inner().node_id;
        self.0.transfer_leader(to).await?;
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
        let (containers, truncated) = self.0.list_containers(state, r.start_after, r.limit)?;
        Ok(Response::new(pb::ListContainersReply {
            containers: containers.iter().map(convert::container).collect(),
            truncated,
        }))
    }

    async fn container_info(
        &self,
        req: Request<pb::ContainerInfoRequest>,
    ) -> Result<Response<pb::ContainerInfoReply>, Status> {
        let r = self.0.container_report(req.into_inner().container_id)?;
        Ok(Response::new(convert::container_report(&r)))
    }

    async fn close_container(
        &self,
        req: Request<pb::CloseContainerRequest>,
    ) -> Result<Response<pb::CloseContainerReply>, Status> {
        require_role(&req, &[Role::Admin], "CloseContainer")?;
        let state = self
            .0
            .close_container(req.into_inner().container_id)
            .await?;
        Ok(Response::new(convert::close_reply(state)))
    }

    async fn list_datanodes(
        &self,
        _req: Request<pb::ListDatanodesRequest>,
    ) -> Result<Response<pb::ListDatanodesReply>, Status> {
        let datanodes = self.0.datanode_statuses()?;
        Ok(Response::new(pb::ListDatanodesReply {
            datanodes: datanodes.iter().map(convert::datanode_status).collect(),
        }))
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
        let pipelines = self.0.pipeline_statuses(state)?;
        Ok(Response::new(pb::ListPipelinesReply {
            pipelines: pipelines.iter().map(convert::pipeline_status).collect(),
        }))
    }

    async fn safe_mode_status(
        &self,
        _req: Request<pb::SafeModeStatusRequest>,
    ) -> Result<Response<pb::SafeModeStatusReply>, Status> {
        let s = self.0.safe_mode_status()?;
        Ok(Response::new(convert::safe_mode_status(&s)))
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
        let s = self.0.replication_status()?;
        Ok(Response::new(convert::rm_status(s)))
    }

    async fn create_join_token(
        &self,
        req: Request<pb::CreateJoinTokenRequest>,
    ) -> Result<Response<pb::CreateJoinTokenReply>, Status> {
        require_role(&req, &[Role::Admin], "CreateJoinToken")?;
        if self.0.cfg.ca_key.as_os_str().is_empty() {
            return Err(ScmError::FailedPrecondition(
                "this SCM issues no certificates (scm.ca_key is not set), so a join token could not be redeemed"
                    .into(),
            )
            .into());
        }
        let r = req.into_inner();
        let role = r
            .role
            .parse::<Role>()
            .map_err(|e| ScmError::from(Invalid(e)))?;
        let ttl = std::time::Duration::from_secs(r.ttl_secs);
        let (token, expires_unix_ms) = self.0.create_join_token(role, r.id, ttl).await?;
        Ok(Response::new(pb::CreateJoinTokenReply {
            token,
            expires_unix_ms,
        }))
    }
}
